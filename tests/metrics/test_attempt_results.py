"""`scheduler_schedule_attempts_total` and `scheduler_scheduling_attempt_duration_seconds` count an
attempt where kube-scheduler's schedule_one.go counts it (Kubernetes v1.33):

- `scheduled` in bindingCycle, once the binding succeeded; the attempt's latency runs from the
  cycle's start to there, through the wait at Permit and the binding call;
- `unschedulable` in handleSchedulingFailure for a rejected status, which a rejection while waiting
  at Permit is (waitingPod.Reject makes an Unschedulable status): a gang rolled back, a wait that
  timed out;
- `error` for any other status, a failed binding among them (handleBindingCycleError).
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict, settle

PROFILE = "default-scheduler"
G = "gang.scheduling.koordinator.sh"
ATTEMPTS = "scheduler_schedule_attempts_total"
DURATION = "scheduler_scheduling_attempt_duration_seconds"
RESULTS = ("scheduled", "unschedulable", "error")


def cluster(cpu: str = "4") -> tuple[SchedulerMetrics, Scheduler, MemoryCluster]:
    metrics = SchedulerMetrics()
    clock = VirtualClock()
    sched = Scheduler(default_configuration(), registry(), clock, observer=metrics)
    world = MemoryCluster(sched, clock)
    world.add_node(make_node("n0", cpu=cpu))
    return metrics, sched, world


def attempts(metrics: SchedulerMetrics) -> dict[str, float]:
    return {
        result: metrics.registry.get_sample_value(ATTEMPTS, {"result": result, "profile": PROFILE}) or 0.0
        for result in RESULTS
    }


def gang_member(name: str, min_available: int) -> dict[str, Any]:
    annotations = {f"{G}/name": "gang", f"{G}/min-available": str(min_available)}
    return pod_dict(name, cpu="1", annotations=annotations)


def one_cycle(world: MemoryCluster, sched: Scheduler) -> None:
    """One scheduling cycle, its decisions not carried out (bindings stay unanswered)."""
    world.apply(sched.drain())
    assert sched.schedule_one()


def test_a_bound_pod_is_one_scheduled_attempt() -> None:
    metrics, _, world = cluster()
    world.add_pod(pod_dict("p", cpu="1"))
    settle(world)
    assert attempts(metrics) == {"scheduled": 1, "unschedulable": 0, "error": 0}


def test_a_pod_whose_binding_is_unanswered_is_not_counted_yet() -> None:
    metrics, sched, world = cluster()
    world.add_pod(pod_dict("p", cpu="1"))
    one_cycle(world, sched)
    assert attempts(metrics) == {"scheduled": 0, "unschedulable": 0, "error": 0}


@pytest.mark.parametrize("error", ["409 Conflict: pod already assigned", "pod not found"])
def test_a_failed_binding_is_an_error_attempt(error: str) -> None:
    metrics, sched, world = cluster()
    world.add_pod(pod_dict("p", cpu="1"))
    one_cycle(world, sched)
    sched.binding_done("default/p", error)
    assert attempts(metrics) == {"scheduled": 0, "unschedulable": 0, "error": 1}


def test_a_gang_rolled_back_at_permit_counts_every_member_unschedulable() -> None:
    """Room for two of three: the first two wait at Permit, the third fits nowhere, and the whole
    gang is rejected; no member was bound, so none is scheduled."""
    metrics, sched, world = cluster(cpu="2")
    for i in range(3):
        world.add_pod(gang_member(f"g{i}", 3))
    one_cycle(world, sched)
    assert attempts(metrics) == {"scheduled": 0, "unschedulable": 3, "error": 0}


def test_a_gang_released_at_permit_counts_its_members_scheduled_once_bound() -> None:
    metrics, sched, world = cluster(cpu="2")
    for i in range(2):
        world.add_pod(gang_member(f"g{i}", 2))
    one_cycle(world, sched)
    assert attempts(metrics)["scheduled"] == 0
    settle(world)
    assert attempts(metrics) == {"scheduled": 2, "unschedulable": 0, "error": 0}


def test_the_attempt_lasts_until_its_binding_ended() -> None:
    """bindingCycle observes the latency after the binding call: an answer that took 5 s (on the
    scheduler's clock) is in the attempt's duration."""
    metrics, sched, world = cluster()
    world.add_pod(pod_dict("p", cpu="1"))
    one_cycle(world, sched)
    world.clock.advance(5)
    sched.binding_done("default/p")
    labels = {"result": "scheduled", "profile": PROFILE}
    assert metrics.registry.get_sample_value(f"{DURATION}_count", labels) == 1
    assert (metrics.registry.get_sample_value(f"{DURATION}_sum", labels) or 0.0) >= 5
