"""What the scheduler keeps by gang and gang group goes with the gang: after rounds of gangs created,
placed and deleted (the pods and the PodGroups, in either order), the registry and the Coscheduling
plugin hold as much as before the first round. Sizes of the structures, not memory: a structure
that grows by one entry per gang is a leak under churn, however small the entry."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.plugins.coscheduling.plugin import Coscheduling
from koordpy.plugins.coscheduling.registry import GANG_REGISTRY, GangRegistry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict, settle

X_K8S_LABEL = "scheduling.x-k8s.io/pod-group"
SIGS_LABEL = "pod-group.scheduling.sigs.k8s.io"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
ROUNDS = 4
GANGS = 6
SIZE = 3


def new_world() -> MemoryCluster:
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    for i in range(4):
        world.add_node(make_node(f"n{i}", cpu="8"))
    return world


def podgroup(api_group: str, name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{api_group}/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-pg-{name}"},
        "spec": {"minMember": min_member},
    }


def gang_registry(world: MemoryCluster) -> GangRegistry:
    found = world.scheduler.shared.get(GANG_REGISTRY)
    assert found is not None
    return found


def coscheduling(world: MemoryCluster) -> list[Coscheduling]:
    """The plugin of each profile (they share one registry)."""
    found = [p for profile in world.scheduler.profiles.values() for p in profile.plugins.values()]
    plugins = [p for p in found if isinstance(p, Coscheduling)]
    assert plugins
    return plugins


def churn_round(world: MemoryCluster, r: int, podgroups_first: bool) -> None:
    """GANGS gangs of SIZE (PodGroups of both API groups, and Koordinator's annotations), placed,
    then deleted: the PodGroups before their members or after them."""
    groups: list[dict[str, Any]] = []
    members: list[str] = []
    for g in range(GANGS):
        name = f"g{r}-{g}"
        labels: dict[str, str] = {}
        annotations: dict[str, str] = {}
        if g % 3 == 0:
            groups.append(podgroup("scheduling.x-k8s.io", name, SIZE))
            labels[X_K8S_LABEL] = name
        elif g % 3 == 1:
            groups.append(podgroup("scheduling.sigs.k8s.io", name, SIZE))
            labels[SIGS_LABEL] = name
        else:
            annotations = {GANG_NAME: name, GANG_MIN: str(SIZE)}
        if groups and groups[-1]["metadata"]["name"] == name:
            world.scheduler.on_object("PodGroup", "Add", groups[-1])
        for m in range(SIZE):
            raw = pod_dict(f"{name}-{m}", cpu="100m", labels=labels, annotations=annotations)
            raw["metadata"]["uid"] = f"uid-{name}-{m}"
            world.add_pod(raw)
            members.append(f"default/{name}-{m}")
    settle(world)
    assert all(world.views[key].node_name for key in members), "every gang is placed"
    if podgroups_first:
        for pg in groups:
            world.scheduler.on_object("PodGroup", "Delete", pg)
    for key in members:
        world.delete_pod(key)
    if not podgroups_first:
        for pg in groups:
            world.scheduler.on_object("PodGroup", "Delete", pg)
    settle(world)


@pytest.mark.parametrize("podgroups_first", [False, True], ids=["members-first", "podgroups-first"])
def test_churned_gangs_leave_nothing_behind(podgroups_first: bool) -> None:
    world = new_world()
    gangs = gang_registry(world)
    plugins = coscheduling(world)
    for r in range(ROUNDS):
        churn_round(world, r, podgroups_first)
        assert gangs.gangs == {}, f"round {r}: gangs kept: {sorted(gangs.gangs)}"
        assert gangs.pods == {} and gangs.gang_of_pod == {}
        assert gangs.satisfied == set()
        assert gangs.messages == {}
        for plugin in plugins:
            assert plugin._binding_members == {}, f"round {r}: {sorted(plugin._binding_members)}"
            assert plugin._fallback_told == {}


def test_a_failed_gang_forgets_its_message_with_the_gang() -> None:
    """A gang that cannot be placed carries its failure message; the message goes with the gang."""
    world = new_world()
    gangs = gang_registry(world)
    world.scheduler.on_object("PodGroup", "Add", podgroup("scheduling.x-k8s.io", "big", 2))
    for m in range(2):
        raw = pod_dict(f"big-{m}", cpu="64", labels={X_K8S_LABEL: "big"})
        raw["metadata"]["uid"] = f"uid-big-{m}"
        world.add_pod(raw)
    settle(world)
    assert gangs.messages, "the gang's pass failed and says why"
    for m in range(2):
        world.delete_pod(f"default/big-{m}")
    world.scheduler.on_object("PodGroup", "Delete", podgroup("scheduling.x-k8s.io", "big", 2))
    settle(world)
    assert gangs.gangs == {}
    assert gangs.messages == {}
