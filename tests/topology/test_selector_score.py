"""Koordinator's Coscheduling PreScore/Score for pods carrying
`scheduling.koordinator.sh/network-topology-selector`: feasible nodes are ordered by the pods with
the same selector value already on the node, then in each enclosing domain from the innermost up
(most first); then by the feasible nodes in those domains (fewest first); then by name; the first
scores 100, the last 0. Pods without the selector are not scored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.models import SchedulerConfiguration, default_configuration, parse_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.cycle_state import CycleState
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import network_topology, node_dict, pod_dict, settle

SELECTOR = "scheduling.koordinator.sh/network-topology-selector"
SPINE = "example.com/spine"
BLOCK = "example.com/block"
TOPOLOGY = network_topology(("SpineLayer", SPINE), ("BlockLayer", BLOCK))

# spine sp-a: block bk-1 (n1, n2, n3), block bk-2 (n4, n5); spine sp-b: bk-3 (n6, n7), bk-4 (n8, n9);
# `lone` has no topology labels and sits outside the tree
LAYOUT = {
    "n1": ("sp-a", "bk-1"),
    "n2": ("sp-a", "bk-1"),
    "n3": ("sp-a", "bk-1"),
    "n4": ("sp-a", "bk-2"),
    "n5": ("sp-a", "bk-2"),
    "n6": ("sp-b", "bk-3"),
    "n7": ("sp-b", "bk-3"),
    "n8": ("sp-b", "bk-4"),
    "n9": ("sp-b", "bk-4"),
}


def new_world(
    config: SchedulerConfiguration | None = None,
    layout: Mapping[str, tuple[str, str]] = LAYOUT,
    with_topology: bool = True,
    lone: bool = True,
) -> MemoryCluster:
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(config or default_configuration(), registry(), clock), clock)
    if with_topology:
        world.scheduler.on_object("ClusterNetworkTopology", "Add", TOPOLOGY)
    for name, (spine, block) in layout.items():
        world.add_node(Node.from_dict(node_dict(name, cpu="8", labels={SPINE: spine, BLOCK: block})))
    if lone:
        world.add_node(Node.from_dict(node_dict("lone", cpu="8")))
    return world


def peer(name: str, node: str, selector: str = "job-x", cpu: str = "8") -> dict[str, Any]:
    return pod_dict(name, cpu=cpu, node_name=node, annotations={SELECTOR: selector})


def coscheduling_scores(world: MemoryCluster, pod: Pod, candidates: list[str]) -> dict[str, int] | None:
    """Coscheduling's normalized score per candidate node; None when its PreScore skips the pod."""
    profile = world.scheduler.profiles["default-scheduler"]
    plugin: Any = profile.plugins["Coscheduling"]
    snap = world.scheduler.cache.snapshot
    rows = np.array(sorted(snap.row_of[n] for n in candidates), dtype=np.int64)
    state = CycleState()
    assert profile.run_pre_score(state, pod, rows) is None
    if "Coscheduling" in state.skip_score:
        return None
    scores = plugin.normalize_score(state, pod, rows, plugin.score(state, pod, rows))
    return {snap.node_name(int(r)): int(s) for r, s in zip(rows, scores, strict=True)}


@dataclass(frozen=True)
class Case:
    peers: list[dict[str, Any]]
    candidates: list[str]
    expect: dict[str, int]
    annotations: dict[str, str] = field(default_factory=lambda: {SELECTOR: "job-x"})


CANDIDATES = ["n2", "n3", "n5", "n7", "n8", "n9"]

SCORE_CASES = {
    # Koordinator's PreScore test, in other names: peers fill one node in three blocks; the blocks
    # of sp-a (two peers) come first, bk-2 (one feasible node) before bk-1 (two); then bk-3, the
    # block holding sp-b's peer; bk-4 last
    "peers-spine-then-block-then-tightest-block": Case(
        [peer("p1", "n1"), peer("p4", "n4"), peer("p6", "n6")],
        CANDIDATES,
        {"n5": 100, "n2": 80, "n3": 60, "n7": 40, "n8": 20, "n9": 0},
    ),
    "no-peers-tightest-block-then-name": Case(
        [], CANDIDATES, {"n5": 100, "n7": 80, "n2": 60, "n3": 40, "n8": 20, "n9": 0}
    ),
    "a-peer-on-the-node-itself-comes-first": Case(
        [peer("p1", "n1"), peer("p4", "n4"), peer("p9", "n9", cpu="1")],
        CANDIDATES,
        {"n9": 100, "n5": 80, "n2": 60, "n3": 40, "n8": 20, "n7": 0},
    ),
    "pods-of-another-selector-value-are-not-peers": Case(
        [peer("p1", "n1", "job-y"), peer("p4", "n4", "job-y"), peer("p6", "n6", "job-y")],
        CANDIDATES,
        {"n5": 100, "n7": 80, "n2": 60, "n3": 40, "n8": 20, "n9": 0},
    ),
    "peers-in-other-namespaces-count": Case(
        [{**peer("p6", "n6"), "metadata": {**peer("p6", "n6")["metadata"], "namespace": "other"}}],
        ["n2", "n7", "n8"],
        {"n7": 100, "n8": 50, "n2": 0},
    ),
    "nodes-outside-the-topology-come-last": Case(
        [peer("p6", "n6")], ["lone", "n2", "n7"], {"n7": 100, "n2": 50, "lone": 0}
    ),
}


@pytest.mark.parametrize("case", list(SCORE_CASES.values()), ids=list(SCORE_CASES))
def test_selector_pods_score_towards_their_peers_domains(case: Case) -> None:
    world = new_world()
    for raw in case.peers:
        world.add_pod(raw)
    settle(world)
    pod = Pod.from_dict(pod_dict("new", cpu="1", annotations=case.annotations))
    assert coscheduling_scores(world, pod, case.candidates) == case.expect


@pytest.mark.parametrize(
    ("annotations", "with_topology"),
    [({}, True), ({SELECTOR: ""}, True), ({SELECTOR: "job-x"}, False)],
    ids=["no-selector", "empty-selector", "no-cluster-network-topology"],
)
def test_pods_are_not_scored_without_selector_or_topology(
    annotations: dict[str, str], with_topology: bool
) -> None:
    world = new_world(with_topology=with_topology)
    world.add_pod(peer("p1", "n1"))
    settle(world)
    pod = Pod.from_dict(pod_dict("new", cpu="1", annotations=annotations))
    assert coscheduling_scores(world, pod, CANDIDATES) is None


def bound_node(world: MemoryCluster, name: str) -> str:
    node: str = world.pods[f"default/{name}"]["spec"].get("nodeName", "")
    return node


def test_selector_pods_land_in_the_domain_of_those_placed_before() -> None:
    """One peer fills n4 (bk-2, sp-a); whole-node pods with its selector arrive one by one: n5
    shares its block, then sp-a's other block, bk-1, fills by name, and only then sp-b."""
    world = new_world(lone=False)
    world.add_pod(peer("first", "n4"))
    placed = []
    for i in range(5):
        world.add_pod(pod_dict(f"next-{i}", cpu="8", annotations={SELECTOR: "job-x"}))
        settle(world)
        placed.append(bound_node(world, f"next-{i}"))
    assert placed == ["n5", "n1", "n2", "n3", "n6"]


WORKLOAD = [("w-0", "3"), ("w-1", "5"), ("w-2", "2"), ("w-3", "7"), ("w-4", "1"), ("w-5", "4"), ("w-6", "6")]
WITHOUT_SELECTOR_SCORE = parse_configuration(
    {
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {
                    "preScore": {"disabled": [{"name": "Coscheduling"}]},
                    "score": {"disabled": [{"name": "Coscheduling"}]},
                },
            }
        ]
    }
)


def placements(config: SchedulerConfiguration) -> dict[str, str]:
    world = new_world(config)
    for raw in (peer("p1", "n1", cpu="2"), peer("p6", "n6", cpu="6")):
        world.add_pod(raw)
    for name, cpu in WORKLOAD:
        world.add_pod(pod_dict(name, cpu=cpu))
        settle(world)
    return {name: bound_node(world, name) for name, _ in WORKLOAD}


def test_pods_without_selector_place_exactly_as_without_the_score() -> None:
    with_score = placements(default_configuration())
    assert all(with_score.values())
    assert with_score == placements(WITHOUT_SELECTOR_SCORE)


def test_koordinator_configuration_with_coscheduling_at_prescore_and_score_loads() -> None:
    """Koordinator's scheduler-config.yaml enables Coscheduling at preScore and at score with
    weight 1."""
    config = parse_configuration(
        {
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {
                        "preScore": {"enabled": [{"name": "Coscheduling"}]},
                        "score": {"enabled": [{"name": "Coscheduling", "weight": 1}]},
                    },
                }
            ]
        }
    )
    world = new_world(config, lone=False)
    world.add_pod(peer("first", "n8"))
    world.add_pod(pod_dict("next", cpu="8", annotations={SELECTOR: "job-x"}))
    settle(world)
    assert bound_node(world, "next") == "n9"
