"""A gang's members arriving one at a time cost in proportion to the members, not to their square:
an arrival judges the arriving pod, and the members already waiting are told the gang's count again
only once it has doubled (or halved), or at once when the verdict changes in any other way (the gang
becomes ready, its minMember changes). The gang is still released the moment it is complete."""

from __future__ import annotations

import re
from typing import Any

import pytest

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.effects import PodUnschedulable
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict, settle
from tests.builders import x_k8s_podgroup as podgroup

X_K8S_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
COUNT = re.compile(r"has (\d+) of minMember (\d+) pods")


def new_world() -> MemoryCluster:
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    for i in range(4):
        world.add_node(make_node(f"n{i}", cpu="64", pods="200"))
    return world


def x_k8s_member(gang: str, i: int, **kw: Any) -> dict[str, Any]:
    return pod_dict(f"{gang}-{i}", cpu="100m", labels={X_K8S_LABEL: gang}, **kw)


def annotated_member(gang: str, i: int, minimum: int) -> dict[str, Any]:
    return pod_dict(f"{gang}-{i}", cpu="100m", annotations={GANG_NAME: gang, GANG_MIN: str(minimum)})


def count_pre_enqueue(world: MemoryCluster) -> list[str]:
    """The pods Coscheduling's PreEnqueue judges from now on (either profile)."""
    judged: list[str] = []
    for profile in world.scheduler.profiles.values():
        plugin: Any = profile.plugins["Coscheduling"]
        original = plugin.pre_enqueue

        def counting(pod: Any, original: Any = original) -> Any:
            judged.append(pod.name)
            return original(pod)

        plugin.pre_enqueue = counting
    return judged


def told(world: MemoryCluster, prefix: str) -> dict[str, tuple[int, int]]:
    """(count, minMember) each pending member's condition says its gang has."""
    out: dict[str, tuple[int, int]] = {}
    for key, outcome in world.scheduler.outcomes.items():
        name = key.split("/", 1)[1]
        if name.startswith(prefix) and (m := COUNT.search(outcome.message)):
            out[name] = (int(m.group(1)), int(m.group(2)))
    return out


def bound(world: MemoryCluster) -> int:
    return sum(1 for key, pod in world.views.items() if pod.node_name and key not in world.deleted)


@pytest.mark.parametrize("declared_by", ["podgroup", "annotations"])
def test_members_arriving_one_by_one_are_judged_a_bounded_number_of_times(declared_by: str) -> None:
    size = 128
    world = new_world()
    if declared_by == "podgroup":
        world.scheduler.on_object("PodGroup", "Add", podgroup("big", size))
    judged = count_pre_enqueue(world)
    effects = 0
    for i in range(size - 1):
        raw = x_k8s_member("big", i) if declared_by == "podgroup" else annotated_member("big", i, size)
        world.add_pod(raw)
        effects += sum(isinstance(e, PodUnschedulable) for e in world.scheduler.outbox)
        settle(world)
        assert bound(world) == 0
    # each arrival judges its own pod, and the waiting members are told again each time their
    # number has doubled: about 2 x size judgements in all, where telling every member every
    # arrival would take size^2 / 2 (8,000 here); the same bound for the conditions written
    assert len(judged) <= 3 * size, len(judged)
    assert effects <= 3 * size, effects
    last = (
        x_k8s_member("big", size - 1)
        if declared_by == "podgroup"
        else annotated_member("big", size - 1, size)
    )
    world.add_pod(last)
    settle(world)
    # the last member releases the whole gang at once, without a timer
    assert bound(world) == size
    assert world.clock.now() == 0.0


def test_a_waiting_member_is_at_most_a_factor_of_two_behind_its_gangs_count() -> None:
    world = new_world()
    world.scheduler.on_object("PodGroup", "Add", podgroup("big", 100))
    for arrived in range(1, 61):
        world.add_pod(x_k8s_member("big", arrived - 1))
        settle(world)
        said = told(world, "big-")
        assert len(said) == arrived
        for name, (count, minimum) in said.items():
            assert minimum == 100
            assert arrived / 2 < count <= arrived, (arrived, name, count)
        # the member that just arrived hears the count it makes
        assert said[f"big-{arrived - 1}"][0] == arrived


def test_a_bulk_of_members_is_told_the_exact_count() -> None:
    world = new_world()
    world.scheduler.on_object("PodGroup", "Add", podgroup("big", 100))
    with world.scheduler.bulk():
        for i in range(60):
            world.add_pod(x_k8s_member("big", i))
    settle(world)
    assert set(told(world, "big-").values()) == {(60, 100)}


def test_a_changed_minimum_is_told_to_every_waiting_member_at_once() -> None:
    world = new_world()
    world.scheduler.on_object("PodGroup", "Add", podgroup("big", 100))
    for i in range(40):
        world.add_pod(x_k8s_member("big", i))
        settle(world)
    world.scheduler.on_object("PodGroup", "Update", podgroup("big", 90))
    settle(world)
    assert set(told(world, "big-").values()) == {(40, 90)}
    # and a minimum the members reach releases them all
    world.scheduler.on_object("PodGroup", "Update", podgroup("big", 40))
    settle(world)
    assert bound(world) == 40


def test_members_leaving_a_waiting_gang_are_told_once_it_has_halved() -> None:
    world = new_world()
    world.scheduler.on_object("PodGroup", "Add", podgroup("big", 100))
    with world.scheduler.bulk():
        for i in range(40):
            world.add_pod(x_k8s_member("big", i))
    settle(world)
    for i in range(30):
        world.delete_pod(f"default/big-{i}")
        settle(world)
        left = 40 - (i + 1)
        for count, _ in told(world, "big-").values():
            assert left / 2 < count < 2 * left + 1, (left, count)
    assert set(told(world, "big-").values()) <= {(c, 100) for c in range(10, 21)}


def test_a_gang_counts_its_gated_members_as_they_come_and_go() -> None:
    """scheduler-plugins' PreFilter: members held by scheduling gates do not count towards the
    minimum; a gated member deleted and replaced by an ungated one completes the gang."""
    world = new_world()
    world.scheduler.on_object("PodGroup", "Add", podgroup("g", 3))
    world.add_pod(x_k8s_member("g", 0))
    world.add_pod(x_k8s_member("g", 1, spec={"schedulingGates": [{"name": "wait"}]}))
    world.add_pod(x_k8s_member("g", 2))
    settle(world)
    assert bound(world) == 0
    assert "waits for 1 gated member(s)" in world.scheduler.outcomes["default/g-0"].message
    world.delete_pod("default/g-1")
    world.add_pod(x_k8s_member("g", 3))
    settle(world)
    assert bound(world) == 3
