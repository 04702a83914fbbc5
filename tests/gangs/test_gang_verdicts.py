"""What one failed pass of a gang tells each member: every pending member gets the gang's
explanation as its PodScheduled condition (conditions are state), and only the members the pass
actually tried count as attempted, for kube-scheduler records a FailedScheduling event only for a
pod it attempted (pkg/scheduler/schedule_one.go handleSchedulingFailure, called per attempted pod).

A Strict gang stops at its first failure: members are tried in name order, and those after the one
that did not fit wait for the next pass untried."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.effects import PodUnschedulable
from koordpy.framework.interfaces import BatchResult
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict

GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
PROFILE = "default-scheduler"


def gang_world(cpus: dict[str, str]) -> MemoryCluster:
    """One node of 4 cpus and a Strict gang `g` of the named members (minMember: all of them),
    with the verdicts of their arrival applied."""
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    world.add_node(make_node("n1", cpu="4"))
    for name, cpu in cpus.items():
        world.add_pod(pod_dict(name, cpu=cpu, annotations={GANG_NAME: "g", GANG_MIN: str(len(cpus))}))
    world.apply(world.scheduler.drain())
    return world


def verdicts(effects: list[Any]) -> dict[str, list[PodUnschedulable]]:
    found: dict[str, list[PodUnschedulable]] = {}
    for effect in effects:
        if isinstance(effect, PodUnschedulable):
            found.setdefault(effect.pod.name, []).append(effect)
    return found


@pytest.mark.parametrize(
    ("cpus", "attempted"),
    [
        pytest.param({"g-0": "8", "g-1": "1", "g-2": "1"}, {"g-0"}, id="the first member does not fit"),
        pytest.param(
            {"g-0": "1", "g-1": "8", "g-2": "1"},
            {"g-0", "g-1"},
            id="a member placed then rolled back was attempted too",
        ),
        pytest.param(
            {"g-0": "3", "g-1": "3", "g-2": "3"}, {"g-0", "g-1"}, id="the node holds only one of them"
        ),
    ],
)
def test_every_member_gets_the_condition_and_only_the_tried_ones_count_as_attempted(
    cpus: dict[str, str], attempted: set[str]
) -> None:
    world = gang_world(cpus)
    assert world.scheduler.schedule_one()
    told = verdicts(world.scheduler.drain())
    assert set(told) == set(cpus)
    assert {name for name, effects in told.items() if any(e.attempted for e in effects)} == attempted
    # the condition each member is left with: the gang's one explanation
    last = {(e[-1].reason, e[-1].message) for e in told.values()}
    assert len(last) == 1
    ((reason, message),) = last
    assert reason == names.UNSCHEDULABLE
    assert message.startswith("gang default/g cannot be placed as a whole: ")


def test_members_the_planner_refuses_are_told_why_when_the_group_counts_as_placed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = gang_world({"g-0": "1", "g-1": "1"})
    group = world.scheduler.profiles[PROFILE].group
    assert group is not None
    refusal = "no BlockLayer domain can hold the group"
    placed_as_a_whole = group.batch_end

    def plan_batch(pod: Pod, members: list[Pod]) -> tuple[str, Diagnosis] | None:
        return refusal, Diagnosis()

    def batch_end(pod: Pod, result: BatchResult, num_nodes: int) -> str | None:
        placed_as_a_whole(pod, result, num_nodes)
        return None

    monkeypatch.setattr(group, "plan_batch", plan_batch)
    monkeypatch.setattr(group, "batch_end", batch_end)
    assert world.scheduler.schedule_one()
    told = verdicts(world.scheduler.drain())
    assert {
        name: [(e.reason, e.message, e.attempted) for e in effects] for name, effects in told.items()
    } == {
        "g-0": [(names.UNSCHEDULABLE, refusal, True)],
        "g-1": [(names.UNSCHEDULABLE, refusal, True)],
    }
