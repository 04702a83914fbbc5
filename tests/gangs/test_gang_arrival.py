"""Gangs whose pieces arrive over time, in every order a cluster delivers them, while the scheduler
runs between arrivals: a gang is released the moment it is complete, never later (no timer), and
never earlier (no member bound before the gang's minimum exists)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.effects import PodUnschedulable
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict, settle

X_K8S_LABEL = "scheduling.x-k8s.io/pod-group"
SIGS_LABEL = "pod-group.scheduling.sigs.k8s.io"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
GANG_GROUPS = "gang.scheduling.koordinator.sh/groups"


def new_world() -> MemoryCluster:
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    for i in range(4):
        world.add_node(make_node(f"n{i}", cpu="4"))
    return world


def podgroup(
    api_group: str, name: str, min_member: int, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": f"{api_group}/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"minMember": min_member},
    }


def bound(world: MemoryCluster, prefix: str = "") -> list[str]:
    return sorted(
        key.split("/", 1)[1]
        for key, pod in world.views.items()
        if pod.node_name and key not in world.deleted and key.split("/", 1)[1].startswith(prefix)
    )


# an arrival: a pod (its dict), a PodGroup ("PodGroup", dict), a gate removed ("Ungate", name) or a
# deletion ("Delete", name)
Arrival = tuple[str, Any]


@dataclass(frozen=True)
class Case:
    arrivals: list[Arrival]
    # the pods bound once everything has arrived (all of them unless said otherwise)
    expect_bound: list[str]


def member(
    name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **kw: Any
) -> Arrival:
    return ("Pod", pod_dict(name, cpu="1", labels=labels, annotations=annotations, **kw))


def x_k8s_members(gang: str, n: int, start: int = 0) -> list[Arrival]:
    return [member(f"{gang}-{i}", labels={X_K8S_LABEL: gang}) for i in range(start, start + n)]


def annotated_members(gang: str, n: int, minimum: int) -> list[Arrival]:
    return [member(f"{gang}-{i}", annotations={GANG_NAME: gang, GANG_MIN: str(minimum)}) for i in range(n)]


GROUP = '["default/left","default/right"]'

CASES = {
    "podgroup-first-then-members-one-by-one": Case(
        [("PodGroup", podgroup("scheduling.x-k8s.io", "g", 4)), *x_k8s_members("g", 4)],
        [f"g-{i}" for i in range(4)],
    ),
    "members-first-then-podgroup": Case(
        [*x_k8s_members("g", 4), ("PodGroup", podgroup("scheduling.x-k8s.io", "g", 4))],
        [f"g-{i}" for i in range(4)],
    ),
    "gang-group-members-interleaved": Case(
        [
            ("PodGroup", podgroup("scheduling.sigs.k8s.io", "left", 2, {GANG_GROUPS: GROUP})),
            ("PodGroup", podgroup("scheduling.sigs.k8s.io", "right", 2, {GANG_GROUPS: GROUP})),
            member("left-0", labels={SIGS_LABEL: "left"}),
            member("right-0", labels={SIGS_LABEL: "right"}),
            member("left-1", labels={SIGS_LABEL: "left"}),
            member("right-1", labels={SIGS_LABEL: "right"}),
        ],
        ["left-0", "left-1", "right-0", "right-1"],
    ),
    "gang-group-partner-podgroup-last": Case(
        [
            ("PodGroup", podgroup("scheduling.sigs.k8s.io", "left", 2, {GANG_GROUPS: GROUP})),
            member("left-0", labels={SIGS_LABEL: "left"}),
            member("left-1", labels={SIGS_LABEL: "left"}),
            member("right-0", labels={SIGS_LABEL: "right"}),
            member("right-1", labels={SIGS_LABEL: "right"}),
            ("PodGroup", podgroup("scheduling.sigs.k8s.io", "right", 2, {GANG_GROUPS: GROUP})),
        ],
        ["left-0", "left-1", "right-0", "right-1"],
    ),
    "annotation-gang-last-member-late": Case(annotated_members("a", 3, 3), ["a-0", "a-1", "a-2"]),
    "scheduling-gates-removed-one-by-one": Case(
        [
            ("PodGroup", podgroup("scheduling.x-k8s.io", "g", 3)),
            *[
                member(f"g-{i}", labels={X_K8S_LABEL: "g"}, spec={"schedulingGates": [{"name": "wait"}]})
                for i in range(3)
            ],
            ("Ungate", "g-0"),
            ("Ungate", "g-1"),
            ("Ungate", "g-2"),
        ],
        ["g-0", "g-1", "g-2"],
    ),
    "member-recreated-by-its-controller": Case(
        [
            ("PodGroup", podgroup("scheduling.x-k8s.io", "g", 3)),
            *x_k8s_members("g", 2),
            ("Delete", "g-1"),
            *x_k8s_members("g", 2, start=2),
        ],
        ["g-0", "g-2", "g-3"],
    ),
}


def arrive(world: MemoryCluster, arrival: Arrival) -> None:
    kind, what = arrival
    if kind == "Pod":
        world.add_pod(what)
    elif kind == "PodGroup":
        world.scheduler.on_object("PodGroup", "Add", what)
    elif kind == "Delete":
        world.delete_pod(f"default/{what}")
    elif kind == "Ungate":
        key = f"default/{what}"
        raw = dict(world.pods[key])
        raw["spec"] = {k: v for k, v in raw["spec"].items() if k != "schedulingGates"}
        world.scheduler.on_pod_update(world._replace(key, raw))


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_gang_is_released_the_moment_it_is_complete(case: Case) -> None:
    world = new_world()
    for i, arrival in enumerate(case.arrivals):
        arrive(world, arrival)
        settle(world)
        if i < len(case.arrivals) - 1:
            assert bound(world) == [], (
                f"bound before the gang was complete, after arrival {i}: {bound(world)}"
            )
    assert bound(world) == sorted(case.expect_bound)
    # released by the last arrival itself: no permit wait or backoff had to run out
    assert world.clock.now() == 0.0


def test_a_gated_pod_is_not_checked_again_for_other_gangs_members() -> None:
    """Each arrival re-checks the gates of its own gang only: the gate verdicts of other gangs stay
    as they were, so a cluster's worth of gangs arriving costs in proportion to the pods."""
    world = new_world()
    world.scheduler.on_object("PodGroup", "Add", podgroup("scheduling.x-k8s.io", "waits", 3))
    world.add_pod(member("waits-0", labels={X_K8S_LABEL: "waits"})[1])
    settle(world)
    checked: list[str] = []
    coscheduling = world.scheduler.profiles["default-scheduler"].plugins["Coscheduling"]
    original = coscheduling.pre_enqueue  # type: ignore[attr-defined]

    def counting(pod: Any) -> Any:
        checked.append(pod.name)
        return original(pod)

    coscheduling.pre_enqueue = counting  # type: ignore[attr-defined]
    for i in range(3):
        world.add_pod(member(f"other-{i}", labels={X_K8S_LABEL: "other"})[1])
    settle(world)
    assert "waits-0" not in checked


@pytest.mark.parametrize(
    "podgroup_first", [True, False], ids=["podgroup-listed-first", "podgroup-listed-last"]
)
def test_a_gang_listed_at_once_is_judged_on_all_its_members(podgroup_first: bool) -> None:
    """What an informer lists at start-up arrives as one bulk: no member is told the gang is
    incomplete (nor written so) because its siblings came later in the same list."""
    world = new_world()
    group = podgroup("scheduling.x-k8s.io", "g", 4)
    with world.scheduler.bulk():
        if podgroup_first:
            world.scheduler.on_object("PodGroup", "Add", group)
        for _, raw in x_k8s_members("g", 4):
            world.add_pod(raw)
        if not podgroup_first:
            world.scheduler.on_object("PodGroup", "Add", group)
    verdicts = [e for e in world.scheduler.drain() if isinstance(e, PodUnschedulable)]
    assert verdicts == []
    settle(world)
    assert bound(world) == [f"g-{i}" for i in range(4)]
