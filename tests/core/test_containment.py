"""A cycle that raises ends that attempt only: its pods get SchedulerError and back off, what they
held is given back, the cache stays consistent, and every other pod keeps being scheduled."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.config.models import parse_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import FilterPlugin, FilterResult, Plugin, Rows
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict, settle

TRIP = "example.com/trip"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"


class Tripwire(Plugin, FilterPlugin):
    """Raises for pods labelled TRIP, as a plugin bug met by one pod's spec would."""

    NAME = "Tripwire"

    def filter(self, state: CycleState, pod: Pod, rows: Rows) -> FilterResult | None:
        if TRIP in pod.labels:
            raise RuntimeError(f"cannot handle {pod.name}")
        return None


def new_world() -> MemoryCluster:
    config = parse_configuration(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"filter": {"enabled": [{"name": "Tripwire"}]}},
                }
            ],
        }
    )
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(config, {**registry(), "Tripwire": Tripwire}, clock), clock)
    for i in range(3):
        world.add_node(make_node(f"n{i}", cpu="4"))
    return world


def pod(name: str, trip: bool = False, gang: str = "", min_available: int = 0) -> dict[str, Any]:
    labels = {TRIP: "yes"} if trip else {}
    annotations = {GANG_NAME: gang, GANG_MIN: str(min_available)} if gang else {}
    obj = pod_dict(name, cpu="1", labels=labels)
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.mark.parametrize(
    ("pods", "bound", "errored"),
    [
        pytest.param(
            [pod("a"), pod("bad", trip=True), pod("b")],
            {"a", "b"},
            {"bad"},
            id="pods-around-a-failing-pod-bind",
        ),
        pytest.param(
            [pod("bad", trip=True), *(pod(f"p{i}") for i in range(5))],
            {f"p{i}" for i in range(5)},
            {"bad"},
            id="a-failing-pod-first-stops-nobody",
        ),
        pytest.param(
            [
                pod("g0", gang="job", min_available=3),
                pod("g1", gang="job", min_available=3),
                pod("g2", trip=True, gang="job", min_available=3),
                pod("solo"),
            ],
            {"solo"},
            {"g2"},
            id="a-gang-with-a-failing-member-binds-no-member",
        ),
    ],
)
def test_a_failing_cycle_ends_only_its_own_attempt(
    pods: list[dict[str, Any]], bound: set[str], errored: set[str]
) -> None:
    world = new_world()
    for obj in pods:
        world.add_pod(obj)
    settle(world)
    sched = world.scheduler

    assert {p.name for p in sched.pods.values() if p.node_name} == bound
    for name in errored:
        outcome = sched.outcomes[f"default/{name}"]
        assert outcome.reason == names.SCHEDULER_ERROR
        assert f"RuntimeError: cannot handle {name}" in outcome.message
    assert not any(sched.cache.is_assumed(p.key) for p in sched.pods.values() if not p.node_name)
    assert sched.cache.problems() == []


def test_a_failed_pod_backs_off_and_is_tried_again() -> None:
    world = new_world()
    world.add_pod(pod("bad", trip=True))
    settle(world)
    sched = world.scheduler
    queue = sched.queues["default-scheduler"]
    assert queue.counts().get("backoff") == 1
    assert sched.failed_cycles_in_a_row == 1

    world.clock.advance(60.0)
    sched.tick()
    settle(world)
    assert sched.failed_cycles_in_a_row == 2

    world.add_pod(pod("good"))
    settle(world)
    assert sched.pods["default/good"].node_name
    assert sched.failed_cycles_in_a_row == 0
