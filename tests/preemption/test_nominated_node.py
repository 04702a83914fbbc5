"""A pod nominated to a node by preemption tries that node first, as kube-scheduler's
findNodesThatFitPod does (evaluateNominatedNode): when the node passes the filters it is taken
without scoring the others; when it no longer fits, the normal search runs. So the members of a
gang that preempted are bound where they were nominated, also when another node has become just as
good, or better, while the victims terminated; and a topology-aware gang keeps the plan its
preemption made, members in network-topology-index order over the domain's nodes (Koordinator's
PlanNodes sorts the pending pods by index and hands them to the plan's nodes in order).

Each case runs the real scheduler on the virtual clock until the first preemption is made, then
changes the cluster at one instant (nothing is scheduled in between) and runs to the end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.api.podgroup import PodGroup
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.runner import build_world
from tests.builders import network_topology, node_dict
from tests.preemption.test_job_preemption import (
    HIGH,
    bound,
    group,
    member,
    nominated,
    plain,
    running,
    victims,
)

BLOCK = "network.topology.example/block"
MUST_GATHER_BLOCK = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]})
TOPOLOGY_INDEX = "gang.scheduling.koordinator.sh/network-topology-index"
TOPOLOGY = network_topology(("BlockLayer", BLOCK))


def node(name: str, cpu: str, block: str) -> dict[str, Any]:
    return node_dict(name, cpu=cpu, labels={BLOCK: block, "kubernetes.io/hostname": name})


def world_of(objs: Sequence[dict[str, Any]]) -> MemoryCluster:
    sc = Scenario()
    for obj in objs:
        kind = obj["kind"]
        if kind == "Node":
            sc.nodes.append(Node.from_dict(obj))
        elif kind == "PodGroup":
            sc.pod_groups.append(PodGroup.from_dict(obj))
        elif kind == "ClusterNetworkTopology":
            sc.topologies.append(obj)
        else:
            sc.pods.append(obj)
    return build_world(sc, default_configuration())


# ------------------------------------------------------------------------------ the preemptors
def lone_pod() -> list[dict[str, Any]]:
    return [plain("p", "4", HIGH)]


def gang() -> list[dict[str, Any]]:
    return [group("g", 2), member("g-0", "g", "2"), member("g-1", "g", "2")]


def topology_gang() -> list[dict[str, Any]]:
    spec = {"gang.scheduling.koordinator.sh/network-topology-spec": MUST_GATHER_BLOCK}
    return [group("g", 2, **spec), member("g-0", "g", "2"), member("g-1", "g", "2")]


PREEMPTORS = {"lone-pod": lone_pod, "gang": gang, "topology-gang": topology_gang}


def names_of(preemptor: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in preemptor if o["kind"] == "Pod"]


def cluster(kind: str) -> list[dict[str, Any]]:
    """n1 (block b1) is held by a pod of the preemptors' own priority, which nobody may evict; n2
    (block b2, 4 cpu) by a low pod. Once both are free, the normal search prefers n1: for a pod or a
    plain gang n1 is four times as large (it scores higher for each member), for a topology gang
    both blocks offer the same and the plan takes the first (block b1)."""
    big = "4" if kind == "topology-gang" else "16"
    return [
        node("n1", big, "b1"),
        node("n2", "4", "b2"),
        TOPOLOGY,
        running("busy", "n1", big, HIGH),
        running("low", "n2", "4", 1),
    ]


@pytest.mark.parametrize("kind", list(PREEMPTORS))
def test_without_a_nomination_the_normal_search_prefers_n1(kind: str) -> None:
    """The premise of the cases below: the preemptors arriving on the two free nodes go to n1."""
    preemptor = PREEMPTORS[kind]()
    objs = [o for o in cluster(kind) if o["metadata"]["name"] not in ("busy", "low")]
    world = world_of([*objs, *preemptor])
    world.run(600)
    names = names_of(preemptor)
    assert bound(world, names) == dict.fromkeys(names, "n1")


@pytest.mark.parametrize("kind", list(PREEMPTORS))
@pytest.mark.parametrize(
    ("room_taken", "expected"),
    [
        pytest.param(False, "n2", id="nominated-node-still-fits-it-is-taken"),
        pytest.param(True, "n1", id="nominated-node-no-longer-fits-normal-search"),
    ],
)
def test_preemptor_is_bound_on_its_nominated_node_while_that_still_fits(
    kind: str, room_taken: bool, expected: str
) -> None:
    preemptor = PREEMPTORS[kind]()
    names = names_of(preemptor)
    world = world_of([*cluster(kind), *preemptor])
    world.run(1)
    assert victims(world) == {"low"}
    assert nominated(world) == dict.fromkeys(names, "n2")
    assert {world.views[f"default/{n}"].nominated_node_name for n in names} == {"n2"}
    # at one instant: n1 frees up and the victim is gone; or a pod bound by someone else takes
    # the room the preemption made
    world.delete_pod("default/busy")
    world.delete_pod("default/low")
    if room_taken:
        world.add_pod(running("intruder", "n2", "4", HIGH))
    world.run(600)
    assert bound(world, names) == dict.fromkeys(names, expected)
    assert victims(world) == {"low"}, "nothing more is evicted"


def test_nomination_in_the_pod_status_is_tried_first() -> None:
    """A pod that arrives nominated (by an earlier scheduler instance) is placed on that node when
    it fits, though an emptier node scores higher."""
    pod = plain("p", "2", HIGH)
    pod["status"] = {"nominatedNodeName": "n2"}
    world = world_of([node("n1", "8", "b1"), node("n2", "4", "b2"), pod])
    world.run(600)
    assert bound(world, ["p"]) == {"p": "n2"}


def test_latest_nomination_wins_over_a_stale_status() -> None:
    """The pod's status still names n3 from before; its latest nomination, to n2, is the one
    tried first."""
    pod = plain("p", "4", HIGH)
    pod["status"] = {"nominatedNodeName": "n3"}
    objs = [
        node("n1", "8", "b1"),
        node("n2", "4", "b2"),
        node("n3", "4", "b3"),
        running("busy", "n1", "8", HIGH),
        running("low", "n2", "4", 1),
        running("keeper", "n3", "4", HIGH),
        pod,
    ]
    world = world_of(objs)
    world.run(1)
    assert (victims(world), nominated(world)) == ({"low"}, {"p": "n2"})
    # n3 and n1 free up with the victim gone: n2 stays the node tried first
    for name in ("busy", "keeper", "low"):
        world.delete_pod(f"default/{name}")
    world.run(600)
    assert bound(world, ["p"]) == {"p": "n2"}


# ------------------------------------------------------------------------------ index order
def ranked_member(name: str, index: int) -> dict[str, Any]:
    obj = member(name, "ranks", "4")
    obj["metadata"]["annotations"][TOPOLOGY_INDEX] = str(index)
    return obj


def test_topology_gang_nominations_follow_the_index_order_and_are_bound_there() -> None:
    """Block b2 is held by pods nobody may evict; in block b1 two equal nodes each hold two low
    pods. The gang's four members, named against their index, are nominated in index order over
    the plan's nodes (n3 before n4, equal in all else): indices 0 and 1 to n3, 2 and 3 to n4."""
    spec = {"gang.scheduling.koordinator.sh/network-topology-spec": MUST_GATHER_BLOCK}
    objs: list[dict[str, Any]] = [
        node("n1", "8", "b2"),
        node("n2", "8", "b2"),
        node("n3", "8", "b1"),
        node("n4", "8", "b1"),
        TOPOLOGY,
        running("busy-1", "n1", "8", HIGH),
        running("busy-2", "n2", "8", HIGH),
        *(running(f"low-{n}{s}", n, "4", 1) for n in ("n3", "n4") for s in "ab"),
        group("ranks", 4, **spec),
        *(ranked_member(name, i) for i, name in enumerate(["rank-d", "rank-c", "rank-b", "rank-a"])),
    ]
    world = world_of(objs)
    world.run(1)
    plan = {"rank-d": "n3", "rank-c": "n3", "rank-b": "n4", "rank-a": "n4"}
    assert victims(world) == {"low-n3a", "low-n3b", "low-n4a", "low-n4b"}
    assert nominated(world) == plan
    world.run(600)
    assert bound(world, list(plan)) == plan
