"""Queue order with gangs: priority, then the group's creation time (or its last failure), then name."""

from __future__ import annotations

from typing import Any

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.queued import QueuedPodInfo
from koordpy.plugins import registry
from koordpy.plugins.coscheduling import Coscheduling
from koordpy.scheduler import Scheduler
from tests.builders import make_pod

G = "gang.scheduling.koordinator.sh"


def gang_pod(name: str, gang: str, priority: int = 0) -> Any:
    return make_pod(name, priority=priority, annotations={f"{G}/name": gang, f"{G}/min-available": "1"})


def setup() -> tuple[Scheduler, Coscheduling, VirtualClock]:
    clock = VirtualClock(100.0)
    sched = Scheduler(default_configuration(), registry(), clock)
    plugin = sched.profiles["default-scheduler"].plugins["Coscheduling"]
    assert isinstance(plugin, Coscheduling)
    return sched, plugin, clock


def key(plugin: Coscheduling, pod: Any, ts: float = 0.0) -> tuple[Any, ...]:
    return plugin.sort_key(QueuedPodInfo(pod, ts, ts))


def test_priority_then_group_creation_then_name() -> None:
    sched, plugin, clock = setup()
    old = gang_pod("old-0", "old")
    sched.on_pod_add(old)
    clock.advance(10)
    young = gang_pod("young-0", "young")
    sched.on_pod_add(young)
    urgent = gang_pod("urgent-0", "urgent", priority=100)
    sched.on_pod_add(urgent)
    ordered = sorted([young, old, urgent], key=lambda p: key(plugin, p))
    assert [p.name for p in ordered] == ["urgent-0", "old-0", "young-0"]


def test_group_that_just_failed_goes_behind_its_peers() -> None:
    sched, plugin, clock = setup()
    old = gang_pod("old-0", "old")
    sched.on_pod_add(old)
    clock.advance(10)
    young = gang_pod("young-0", "young")
    sched.on_pod_add(young)
    gang = plugin.registry.gang(old)
    assert gang is not None
    gang.last_failure = clock.now() + 5
    assert sorted([old, young], key=lambda p: key(plugin, p))[0].name == "young-0"


def test_members_of_one_group_sort_together() -> None:
    sched, plugin, _ = setup()
    pods = [gang_pod("a-1", "a"), gang_pod("b-0", "b"), gang_pod("a-0", "a")]
    for p in pods:
        sched.on_pod_add(p)
    assert [p.name for p in sorted(pods, key=lambda p: key(plugin, p))] == ["a-0", "a-1", "b-0"]
