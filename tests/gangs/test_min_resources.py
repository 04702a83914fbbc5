"""minResources of a PodGroup, as scheduler-plugins' Coscheduling checks them in PreFilter: a
`scheduling.x-k8s.io` group waits while the cluster's free capacity (its own pods given back, every
node counted) is below minResources, with `pods` standing for minMember; Koordinator's
`scheduling.sigs.k8s.io` group is never held back by them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import node_dict, pod_dict, settle

X_K8S = "scheduling.x-k8s.io"
SIGS = "scheduling.sigs.k8s.io"
LABEL = {X_K8S: "scheduling.x-k8s.io/pod-group", SIGS: "pod-group.scheduling.sigs.k8s.io"}
GAP = "resource gap"

_UNSET = object()


def new_world(nodes: list[dict[str, Any]]) -> MemoryCluster:
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    for raw in nodes:
        world.add_node(Node.from_dict(raw))
    return world


def podgroup(api_group: str, min_member: int, min_resources: object = _UNSET) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if min_resources is not _UNSET:
        spec["minResources"] = min_resources
    return {
        "apiVersion": f"{api_group}/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": spec,
    }


def member(name: str, api_group: str = X_K8S, cpu: str | None = "1", node: str = "") -> dict[str, Any]:
    return pod_dict(name, cpu=cpu, labels={LABEL[api_group]: "pg"}, node_name=node)


def bound(world: MemoryCluster, prefix: str) -> list[str]:
    return sorted(
        key.split("/", 1)[1]
        for key, raw in world.pods.items()
        if raw["spec"].get("nodeName") and key.split("/", 1)[1].startswith(prefix)
    )


def message_of(world: MemoryCluster, name: str) -> str:
    conditions = world.pods[f"default/{name}"]["status"].get("conditions") or []
    return next((c["message"] for c in conditions if c.get("type") == "PodScheduled"), "")


@dataclass(frozen=True)
class Case:
    nodes: list[dict[str, Any]]
    podgroup: dict[str, Any]
    # pods of the group, pending or (with a node) already placed
    members: list[dict[str, Any]]
    expect_bound: list[str]
    # what every pending member's message says (None: nothing is left pending)
    expect_message: str | None = None
    # pods of nobody's group already on the nodes
    others: list[dict[str, Any]] = field(default_factory=list)


TWO_4_CPU = [node_dict("a", cpu="4"), node_dict("b", cpu="4")]
TWO_3_CPU = [node_dict("a", cpu="3"), node_dict("b", cpu="3")]

CASES = {
    "x-k8s-min-resources-beyond-free-capacity-wait": Case(
        TWO_4_CPU,
        podgroup(X_K8S, 2, {"cpu": "10"}),
        [member("pg-0"), member("pg-1")],
        [],
        "PodGroup default/pg: resource gap: minResources cpu 10 exceeds free 8 (short by 2).",
    ),
    "x-k8s-min-resources-within-free-capacity-are-placed": Case(
        TWO_4_CPU, podgroup(X_K8S, 2, {"cpu": "6"}), [member("pg-0"), member("pg-1")], ["pg-0", "pg-1"]
    ),
    "sigs-podgroup-min-resources-are-ignored": Case(
        TWO_4_CPU,
        podgroup(SIGS, 2, {"cpu": "10"}),
        [member("pg-0", SIGS), member("pg-1", SIGS)],
        ["pg-0", "pg-1"],
    ),
    "every-resource-short-is-named": Case(
        [node_dict("a", cpu="4", memory="8Gi"), node_dict("b", cpu="4", memory="8Gi")],
        podgroup(X_K8S, 1, {"cpu": "10", "memory": "20Gi"}),
        [member("pg-0")],
        [],
        "cpu 10 exceeds free 8 (short by 2), memory 20Gi exceeds free 16Gi (short by 4Gi)",
    ),
    "a-resource-no-node-has-is-all-gap": Case(
        TWO_4_CPU,
        podgroup(X_K8S, 1, {"nvidia.com/gpu": 2}),
        [member("pg-0")],
        [],
        "nvidia.com/gpu 2 exceeds free 0 (short by 2)",
    ),
    "other-pods-requests-are-not-free": Case(
        TWO_3_CPU,
        podgroup(X_K8S, 1, {"cpu": "4"}),
        [member("pg-1")],
        [],
        "cpu 4 exceeds free 3 (short by 1)",
        others=[pod_dict("busy-a", cpu="2", node_name="a"), pod_dict("busy-b", cpu="1", node_name="b")],
    ),
    "own-placed-pods-requests-are-given-back": Case(
        TWO_3_CPU,
        podgroup(X_K8S, 1, {"cpu": "4"}),
        [member("pg-0", cpu="2", node="a"), member("pg-1")],
        ["pg-0", "pg-1"],
        others=[pod_dict("busy-b", cpu="1", node_name="b")],
    ),
    # the running total over the nodes, in the order they joined, is what must reach the request:
    # a node whose pods ask for more than it has lowers it until then, and not after
    "overcommitted-node-before-the-request-is-covered-lowers-the-total": Case(
        TWO_4_CPU,
        podgroup(X_K8S, 1, {"cpu": "3"}),
        [member("pg-0")],
        [],
        "cpu 3 exceeds free 2 (short by 1)",
        others=[pod_dict("over", cpu="6", node_name="a")],
    ),
    "overcommitted-node-after-the-request-is-covered-does-not-matter": Case(
        TWO_4_CPU,
        podgroup(X_K8S, 1, {"cpu": "3"}),
        [member("pg-0")],
        ["pg-0"],
        others=[pod_dict("over", cpu="6", node_name="b")],
    ),
    "cordoned-and-tainted-nodes-count-as-capacity": Case(
        [
            node_dict("a", cpu="4", unschedulable=True),
            node_dict("b", cpu="4", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            node_dict("c", cpu="4"),
        ],
        podgroup(X_K8S, 2, {"cpu": "10"}),
        [member("pg-0"), member("pg-1")],
        ["pg-0", "pg-1"],
    ),
    "empty-min-resources-still-ask-minmember-pod-slots": Case(
        [node_dict("a", pods=2), node_dict("b", pods=2)],
        podgroup(X_K8S, 4, {}),
        [member(f"pg-{i}", cpu=None) for i in range(4)],
        [],
        "pods (minMember) 4 exceeds free 3 (short by 1)",
        others=[pod_dict("busy", node_name="a")],
    ),
    "without-min-resources-nothing-is-checked-before-filter": Case(
        [node_dict("a", pods=2), node_dict("b", pods=2)],
        podgroup(X_K8S, 4),
        [member(f"pg-{i}", cpu=None) for i in range(4)],
        [],
        "Too many pods",
        others=[pod_dict("busy", node_name="a")],
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_min_resources_hold_a_group_the_free_capacity_cannot_hold(case: Case) -> None:
    world = new_world(case.nodes)
    for raw in case.others:
        world.add_pod(raw)
    world.scheduler.on_object("PodGroup", "Add", case.podgroup)
    for raw in case.members:
        world.add_pod(raw)
    settle(world)
    assert bound(world, "pg-") == case.expect_bound
    pending = [
        raw["metadata"]["name"] for raw in case.members if raw["metadata"]["name"] not in case.expect_bound
    ]
    for name in pending:
        message = message_of(world, name)
        assert case.expect_message is not None and case.expect_message in message, message
        # the gap is named exactly when minResources are what holds the group back
        assert (GAP in message) == ("exceeds free" in case.expect_message), message


def test_a_waiting_group_is_placed_once_a_node_adds_room() -> None:
    world = new_world(TWO_4_CPU)
    world.scheduler.on_object("PodGroup", "Add", podgroup(X_K8S, 2, {"cpu": "10"}))
    world.add_pod(member("pg-0"))
    world.add_pod(member("pg-1"))
    settle(world)
    assert bound(world, "pg-") == []
    world.add_node(Node.from_dict(node_dict("c", cpu="4")))
    world.run(60)
    assert bound(world, "pg-") == ["pg-0", "pg-1"]


@pytest.mark.parametrize(
    ("min_resources", "expect_evicted"),
    [({"cpu": "6"}, []), (_UNSET, ["default/low"])],
    ids=["min-resources-short-nothing-evicted", "without-min-resources-job-preemption-evicts"],
)
def test_nothing_is_evicted_for_a_group_the_cluster_cannot_hold(
    min_resources: object, expect_evicted: list[str]
) -> None:
    """PreFilter's verdict is unresolvable: preemption is not tried, however low the others'
    priority, where the same group without minResources preempts."""
    world = new_world(TWO_4_CPU)
    world.add_pod(pod_dict("low", cpu="4", node_name="a", priority=0))
    world.scheduler.on_object("PodGroup", "Add", podgroup(X_K8S, 2, min_resources))
    for i in range(2):
        world.add_pod(pod_dict(f"pg-{i}", cpu="3", labels={LABEL[X_K8S]: "pg"}, priority=1000))
    settle(world)
    assert [e.victim for e in world.evictions] == expect_evicted
    if not expect_evicted:
        assert bound(world, "pg-") == []
        assert "cpu 6 exceeds free 4 (short by 2)" in message_of(world, "pg-0")


@pytest.mark.parametrize(
    ("arrives_at", "expect_bound"),
    [(10.0, ["pg-0", "pg-1"]), (70.0, ["pg-0"])],
    ids=["within-permit-waiting-time-not-checked-again", "after-permit-waiting-time-checked-again"],
)
def test_a_group_that_passed_is_not_checked_again_for_permit_waiting_time(
    arrives_at: float, expect_bound: list[str]
) -> None:
    """scheduler-plugins keeps a group that passed in a cache for permitWaitingTimeSeconds (60 by
    default): a member arriving meanwhile is not held back by room others took since."""
    world = new_world(TWO_4_CPU)
    world.scheduler.on_object("PodGroup", "Add", podgroup(X_K8S, 1, {"cpu": "6"}))
    world.add_pod(member("pg-0"))
    settle(world)
    assert bound(world, "pg-") == ["pg-0"]
    # someone else takes room: free is now 8 - 1 - 3 = 4, 5 with pg-0's cpu given back
    world.add_pod(pod_dict("other", cpu="3", node_name="b"))
    world.clock.advance_to(arrives_at)
    world.add_pod(member("pg-1"))
    settle(world)
    assert bound(world, "pg-") == expect_bound
    if "pg-1" not in expect_bound:
        assert "cpu 6 exceeds free 5 (short by 1)" in message_of(world, "pg-1")
