"""Network-topology-aware gang placement, driven directly: the gang's gather rules
(`gang.scheduling.koordinator.sh/network-topology-spec`) and the plan that puts a group of pods into
the smallest topology domain that can hold it.

The plans are made over the seed cluster's tree with hand-written offers (how many of the group's
pods each node can take), so that every expectation follows from the rules alone:

    cluster
    +- s1:  b2 (node-1, node-2)   b1 (node-3, node-4)
    +- s2:  b3 (node-5, node-6)   b4 (node-7, node-8)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.plugins.coscheduling.gang import member_order_key
from koordpy.plugins.coscheduling.networktopology import (
    MUST_GATHER,
    PREFER_GATHER,
    GatherRule,
    NetworkTopologySpec,
    NoPlacement,
    Placement,
    parse_network_topology_spec,
    plan_placement,
    unknown_layer_message,
)
from koordpy.status.topology import (
    CLUSTER_LAYER,
    NODE_LAYER,
    LayerChain,
    TopologyTree,
    build_tree,
    parse_layer_chain,
)
from tests.topology.test_detail_status import BLOCK_KEY, SEED_NODE_LABELS, SEED_SPEC, SPINE_KEY

WHERE = "annotation gang.scheduling.koordinator.sh/network-topology-spec"
INDEX = "gang.scheduling.koordinator.sh/network-topology-index"
SPINE = "SpineLayer"
BLOCK = "BlockLayer"

BLOCK_OF = {name: labels[BLOCK_KEY] for name, labels in SEED_NODE_LABELS.items()}
SPINE_OF = {name: labels[SPINE_KEY] for name, labels in SEED_NODE_LABELS.items()}


# -------------------------------------------------------------------------------------------------- helpers
def tree_of(labels: Mapping[str, Mapping[str, str]] = SEED_NODE_LABELS) -> TopologyTree:
    nodes = [Node.from_dict({"metadata": {"name": n, "labels": dict(lab)}}) for n, lab in labels.items()]
    return build_tree(parse_layer_chain(SEED_SPEC), nodes)


SEED_TREE = tree_of()
CHAIN: LayerChain = SEED_TREE.chain


def pod(name: str, index: int | str | None = None) -> Pod:
    annotations = {} if index is None else {INDEX: str(index)}
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {"containers": [{"name": "main", "image": "trainer"}]},
        }
    )


def gang(count: int) -> list[Pod]:
    return [pod(f"p-{i:02d}") for i in range(count)]


def spec(*rules: tuple[str, str] | tuple[str, str, int]) -> NetworkTopologySpec:
    return NetworkTopologySpec(tuple(GatherRule(*r) for r in rules))


def seed_slots(*offers: int) -> dict[str, int]:
    """Offers for node-1 .. node-8 in order."""
    assert len(offers) == 8
    return {f"node-{i}": n for i, n in enumerate(offers, start=1)}


def placed(plan: Placement | NoPlacement) -> Placement:
    assert isinstance(plan, Placement), getattr(plan, "message", plan)
    return plan


def per_node(plan: Placement | NoPlacement) -> dict[str, int]:
    return dict(Counter(placed(plan).nodes.values()))


def per_block(plan: Placement | NoPlacement) -> dict[str, int]:
    return dict(Counter(BLOCK_OF[n] for n in placed(plan).nodes.values()))


# ------------------------------------------------------------------------------------------- the annotation
def test_valid_spec_keeps_every_rule_in_order() -> None:
    raw = (
        '{"gatherStrategy": ['
        '{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 4},'
        '{"layer": "SpineLayer", "strategy": "PreferGather"}]}'
    )
    assert parse_network_topology_spec(raw, WHERE) == NetworkTopologySpec(
        (GatherRule(BLOCK, MUST_GATHER, 4), GatherRule(SPINE, PREFER_GATHER, 1))
    )


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("{}", id="empty-object"),
        pytest.param('{"gatherStrategy": []}', id="empty-list"),
        pytest.param('{"gatherStrategy": null}', id="null-list"),
    ],
)
def test_spec_without_rules_still_asks_for_topology_placement(raw: str) -> None:
    # a parseable annotation, even one without rules, turns placement on: a spec, not None
    parsed = parse_network_topology_spec(raw, WHERE)
    assert parsed == NetworkTopologySpec(())
    assert parsed.must_gather_layer(CHAIN) is None
    assert parsed.multiples() == {}


@pytest.mark.parametrize(
    ("multiple", "expected"),
    [
        pytest.param(None, 1, id="absent-means-no-constraint"),
        pytest.param(0, 1, id="zero-is-ignored"),
        pytest.param(1, 1, id="one-is-ignored"),
        pytest.param(3, 3, id="larger-is-kept"),
    ],
)
def test_pod_count_multiple_of_one_or_less_is_no_constraint(multiple: int | None, expected: int) -> None:
    entry: dict[str, Any] = {"layer": BLOCK, "strategy": PREFER_GATHER}
    if multiple is not None:
        entry["podCountMultiple"] = multiple
    parsed = parse_network_topology_spec(json.dumps({"gatherStrategy": [entry]}), WHERE)
    assert parsed.rules == (GatherRule(BLOCK, PREFER_GATHER, expected),)
    assert parsed.multiples() == ({BLOCK: expected} if expected > 1 else {})


# --------------------------------------------------------------------------------------------------- layers
@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        pytest.param((BLOCK, SPINE), (), id="listed-layers-are-known"),
        pytest.param((CLUSTER_LAYER, NODE_LAYER), (), id="built-in-layers-are-known"),
        pytest.param(
            ("spineLayer",),
            ("unknown layer 'spineLayer'", "did you mean 'SpineLayer'", "case-sensitive"),
            id="wrong-case-gets-a-hint",
        ),
        pytest.param(
            ("RackLayer", BLOCK),
            ("unknown layer 'RackLayer'", "SpineLayer, BlockLayer, NodeTopologyLayer"),
            id="unknown-layer-lists-the-known-ones",
        ),
    ],
)
def test_unknown_layer_message(layers: tuple[str, ...], expected: tuple[str, ...]) -> None:
    message = unknown_layer_message(spec(*((layer, PREFER_GATHER) for layer in layers)), CHAIN, WHERE)
    if not expected:
        assert message is None
        return
    assert message is not None and message.startswith(WHERE)
    for fragment in expected:
        assert fragment in message, message
    assert "'BlockLayer'" not in message, "only the unknown layers are named"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param((), None, id="no-rules"),
        pytest.param(((BLOCK, PREFER_GATHER), (SPINE, PREFER_GATHER)), None, id="prefer-only"),
        pytest.param(((SPINE, MUST_GATHER), (BLOCK, PREFER_GATHER)), SPINE, id="the-one-must"),
        pytest.param(((SPINE, MUST_GATHER), (BLOCK, MUST_GATHER)), BLOCK, id="lowest-must-wins"),
        pytest.param(((BLOCK, MUST_GATHER), (SPINE, MUST_GATHER)), BLOCK, id="lowest-must-wins-listed-first"),
        pytest.param(
            ((NODE_LAYER, MUST_GATHER), (SPINE, MUST_GATHER)), NODE_LAYER, id="node-layer-is-lowest"
        ),
        pytest.param(((CLUSTER_LAYER, MUST_GATHER),), CLUSTER_LAYER, id="cluster-layer"),
    ],
)
def test_must_gather_layer_is_the_lowest_must_gather(
    rules: tuple[tuple[str, str], ...], expected: str | None
) -> None:
    assert spec(*rules).must_gather_layer(CHAIN) == expected


# ----------------------------------------------------------------------------------------- candidate search
# node-1..8 offer 2, 2, 3, 1, 4, 4, 1, 1: blocks b2 4, b1 4, b3 8, b4 2; spines s1 8, s2 10; cluster 18
SEARCH_SLOTS = seed_slots(2, 2, 3, 1, 4, 4, 1, 1)


@pytest.mark.parametrize(
    ("count", "layer", "domain", "nodes"),
    [
        # node-4, node-7 and node-8 offer 1; b4 (2) is tighter than b1 (4), node-7 comes before node-8
        pytest.param(1, NODE_LAYER, None, {"node-7": 1}, id="one-pod-takes-the-tightest-node-then-block"),
        pytest.param(3, NODE_LAYER, None, {"node-3": 3}, id="a-single-node"),
        pytest.param(4, NODE_LAYER, None, {"node-5": 4}, id="a-single-node-that-holds-exactly-the-gang"),
        pytest.param(5, BLOCK, ("s2", "b3"), {"node-5": 4, "node-6": 1}, id="a-block"),
        pytest.param(8, BLOCK, ("s2", "b3"), {"node-5": 4, "node-6": 4}, id="a-block-filled-to-the-brim"),
        pytest.param(
            9, SPINE, ("s2",), {"node-5": 4, "node-6": 4, "node-7": 1}, id="a-spine-when-no-block-holds-it"
        ),
        pytest.param(
            12,
            CLUSTER_LAYER,
            (),
            {"node-5": 4, "node-6": 4, "node-7": 1, "node-8": 1, "node-3": 2},
            id="the-cluster-when-no-spine-holds-it",
        ),
    ],
)
def test_candidates_are_the_smallest_domains_that_hold_the_group(
    count: int, layer: str, domain: tuple[str, ...] | None, nodes: dict[str, int]
) -> None:
    plan = placed(plan_placement(SEED_TREE, spec(), gang(count), SEARCH_SLOTS))
    assert plan.layer == layer
    if domain is not None:
        assert plan.domain == domain
    assert per_node(plan) == nodes
    assert sorted(plan.nodes) == [p.key for p in gang(count)], "every pod is placed once"


def test_group_larger_than_the_cluster_offers_is_not_placed() -> None:
    plan = plan_placement(SEED_TREE, spec((BLOCK, PREFER_GATHER)), gang(19), SEARCH_SLOTS)
    assert isinstance(plan, NoPlacement)
    assert "18" in plan.message and "19" in plan.message


def test_nodes_without_offer_or_outside_the_tree_take_nothing() -> None:
    slots = {**seed_slots(0, 0, 0, 0, 0, 0, 0, 2), "not-in-the-tree": 50}
    assert per_node(plan_placement(SEED_TREE, spec(), gang(2), slots)) == {"node-8": 2}
    assert isinstance(plan_placement(SEED_TREE, spec(), gang(3), slots), NoPlacement)


@pytest.mark.parametrize(
    ("rules", "count", "layer", "nodes"),
    [
        pytest.param(
            ((BLOCK, PREFER_GATHER),),
            9,
            SPINE,
            {"node-5": 4, "node-6": 4, "node-7": 1},
            id="prefer-gather-block-widens-to-a-spine",
        ),
        pytest.param(
            ((SPINE, MUST_GATHER),),
            5,
            BLOCK,
            {"node-5": 4, "node-6": 1},
            id="must-gather-spine-still-takes-the-smallest-domain-inside",
        ),
        pytest.param(
            ((BLOCK, MUST_GATHER),),
            3,
            NODE_LAYER,
            {"node-3": 3},
            id="must-gather-block-still-takes-a-single-node",
        ),
        pytest.param(
            ((CLUSTER_LAYER, MUST_GATHER),),
            12,
            CLUSTER_LAYER,
            {"node-5": 4, "node-6": 4, "node-7": 1, "node-8": 1, "node-3": 2},
            id="must-gather-cluster-is-no-restriction",
        ),
    ],
)
def test_must_gather_restricts_the_search_to_inside_its_layer(
    rules: tuple[tuple[str, str], ...], count: int, layer: str, nodes: dict[str, int]
) -> None:
    plan = placed(plan_placement(SEED_TREE, spec(*rules), gang(count), SEARCH_SLOTS))
    assert (plan.layer, per_node(plan)) == (layer, nodes)


@pytest.mark.parametrize(
    ("rules", "count"),
    [
        pytest.param(((BLOCK, MUST_GATHER),), 9, id="block-although-spine-s2-offers-10"),
        pytest.param(((SPINE, MUST_GATHER),), 11, id="spine-although-the-cluster-offers-18"),
        pytest.param(((NODE_LAYER, MUST_GATHER),), 5, id="node-although-block-b3-offers-8"),
        pytest.param(((SPINE, MUST_GATHER), (BLOCK, MUST_GATHER)), 9, id="the-lowest-of-two-musts-holds"),
    ],
)
def test_must_gather_never_widens(rules: tuple[tuple[str, str], ...], count: int) -> None:
    assert isinstance(plan_placement(SEED_TREE, spec(*rules), gang(count), SEARCH_SLOTS), NoPlacement)


@pytest.mark.parametrize("count", range(1, 9))
def test_must_gather_block_puts_every_pod_in_one_block(count: int) -> None:
    plan = placed(plan_placement(SEED_TREE, spec((BLOCK, MUST_GATHER)), gang(count), SEARCH_SLOTS))
    blocks = {(SPINE_OF[n], BLOCK_OF[n]) for n in plan.nodes.values()}
    assert len(blocks) == 1, plan.nodes


def test_must_gather_failure_lists_each_domain_offer_against_the_need() -> None:
    plan = plan_placement(SEED_TREE, spec((BLOCK, MUST_GATHER)), gang(9), SEARCH_SLOTS)
    assert isinstance(plan, NoPlacement)
    message = plan.message
    assert "MustGather" in message and "needs 9" in message, message
    for block, offer in (("b2", 4), ("b1", 4), ("b3", 8), ("b4", 2)):
        assert f"{BLOCK}/{block}: {offer}" in message, message


def test_must_gather_failure_names_the_multiples() -> None:
    plan = plan_placement(SEED_TREE, spec((BLOCK, MUST_GATHER, 4)), gang(9), SEARCH_SLOTS)
    assert isinstance(plan, NoPlacement)
    assert f"podCountMultiple {BLOCK}=4" in plan.message, plan.message


# -------------------------------------------------------------------------------------------------- binpack
@pytest.mark.parametrize(
    ("slots", "scores", "nodes"),
    [
        pytest.param(
            # b2 offers 6, b1 4, b3 5: b1 is the tightest fit for 4, although b2 is larger and first
            seed_slots(3, 3, 2, 2, 3, 2, 0, 0),
            None,
            {"node-3": 2, "node-4": 2},
            id="tightest-offer-first",
        ),
        pytest.param(
            # b1 (in s1, 6) and b3 (in s2, 5) both offer 4: the tighter spine decides
            seed_slots(1, 1, 2, 2, 2, 2, 1, 0),
            None,
            {"node-5": 2, "node-6": 2},
            id="then-the-parents-offers",
        ),
        pytest.param(
            # b2 and b1 both offer 4 in s1: b1 comes first by name although b2 has the first node
            seed_slots(2, 2, 2, 2, 0, 0, 0, 0),
            None,
            {"node-3": 2, "node-4": 2},
            id="then-the-name",
        ),
        pytest.param(
            # b1 (s1) and b3 (s2) tie on every offer: s1 comes first by name
            seed_slots(0, 0, 2, 2, 2, 2, 0, 0),
            None,
            {"node-3": 2, "node-4": 2},
            id="then-the-name-from-the-top",
        ),
        pytest.param(
            # same offers as then-the-name, but b2's nodes score higher
            seed_slots(2, 2, 2, 2, 0, 0, 0, 0),
            {"node-1": 10.0, "node-2": 10.0, "node-3": 1.0},
            {"node-1": 2, "node-2": 2},
            id="a-higher-score-goes-before-the-name",
        ),
        pytest.param(
            # the tighter fit wins even against a much better score
            seed_slots(3, 3, 2, 2, 0, 0, 0, 0),
            {"node-1": 100.0, "node-2": 100.0},
            {"node-3": 2, "node-4": 2},
            id="score-never-beats-a-tighter-offer",
        ),
    ],
)
def test_binpack_order(slots: dict[str, int], scores: dict[str, float] | None, nodes: dict[str, int]) -> None:
    plan = placed(plan_placement(SEED_TREE, spec((BLOCK, PREFER_GATHER)), gang(4), slots, scores))
    assert plan.layer == BLOCK
    assert per_node(plan) == nodes


# --------------------------------------------------------------------------------------------- distribution
@pytest.mark.parametrize(
    ("slots", "count", "nodes"),
    [
        pytest.param(
            # s2 is the only spine; b4 (5) gets filled before b3 (3), node-8 (4) before node-7 (1)
            seed_slots(0, 0, 0, 0, 2, 1, 1, 4),
            6,
            {"node-8": 4, "node-7": 1, "node-5": 1},
            id="largest-block-then-largest-node",
        ),
        pytest.param(
            # inside b1, node-4 (3) is larger than node-3 (2)
            seed_slots(0, 0, 2, 3, 0, 0, 0, 0),
            4,
            {"node-4": 3, "node-3": 1},
            id="largest-node-first",
        ),
        pytest.param(
            # equal offers inside a block: by name
            seed_slots(0, 0, 0, 0, 0, 0, 3, 3),
            4,
            {"node-7": 3, "node-8": 1},
            id="equal-children-by-name",
        ),
    ],
)
def test_distribution_fills_the_largest_children_first(
    slots: dict[str, int], count: int, nodes: dict[str, int]
) -> None:
    assert per_node(plan_placement(SEED_TREE, spec(), gang(count), slots)) == nodes


def test_distribution_never_exceeds_a_node_offer() -> None:
    plan = placed(plan_placement(SEED_TREE, spec(), gang(18), SEARCH_SLOTS))
    assert per_node(plan) == {n: s for n, s in SEARCH_SLOTS.items() if s}


# ----------------------------------------------------------------------------------------- podCountMultiple
@pytest.mark.parametrize(
    ("rules", "slots", "count", "nodes"),
    [
        pytest.param(
            ((NODE_LAYER, PREFER_GATHER, 2),),
            seed_slots(3, 3, 0, 0, 0, 0, 0, 0),
            4,
            {"node-1": 2, "node-2": 2},
            id="node-multiple-rounds-each-node-down",
        ),
        pytest.param(
            ((NODE_LAYER, PREFER_GATHER, 2),),
            # node-5 offers 3, which rounds down to 2: only node-3's 4 holds the group alone
            seed_slots(0, 0, 4, 0, 3, 0, 0, 0),
            4,
            {"node-3": 4},
            id="node-multiple-makes-a-node-too-small",
        ),
        pytest.param(
            ((BLOCK, PREFER_GATHER, 4),),
            # b2 offers 6, which rounds down to 4: each block of s1 gets 4 (not 6 and 2)
            seed_slots(3, 3, 4, 0, 2, 2, 0, 0),
            8,
            {"node-3": 4, "node-1": 3, "node-2": 1},
            id="block-multiple-splits-in-whole-multiples",
        ),
        pytest.param(
            ((BLOCK, MUST_GATHER, 2),),
            # b1 offers 5, rounded to 4, so it ties with b3 (4) and wins on its tighter spine
            # (s1 4 against s2 6); unrounded, b3 would be the tighter fit
            seed_slots(0, 0, 3, 2, 2, 2, 2, 0),
            4,
            {"node-3": 3, "node-4": 1},
            id="block-multiple-rounds-the-offer-it-is-sorted-by",
        ),
        pytest.param(
            ((SPINE, PREFER_GATHER, 3), (NODE_LAYER, PREFER_GATHER, 1)),
            # s1 offers 4 (rounds to 3), s2 offers 3: six pods take three in each spine; in s1,
            # b1 and b2 tie on 2 and b1 goes first by name
            seed_slots(1, 1, 1, 1, 3, 0, 0, 0),
            6,
            {"node-3": 1, "node-4": 1, "node-1": 1, "node-5": 3},
            id="spine-multiple",
        ),
    ],
)
def test_pod_count_multiple_gives_each_domain_of_its_layer_a_multiple(
    rules: tuple[tuple[str, str, int], ...], slots: dict[str, int], count: int, nodes: dict[str, int]
) -> None:
    plan = placed(plan_placement(SEED_TREE, spec(*rules), gang(count), slots))
    assert per_node(plan) == nodes
    for layer, multiple in spec(*rules).multiples().items():
        if layer == NODE_LAYER:
            counts = per_node(plan)
        elif layer == BLOCK:
            counts = per_block(plan)
        else:
            counts = dict(Counter(SPINE_OF[n] for n in plan.nodes.values()))
        assert all(n % multiple == 0 for n in counts.values()), (layer, counts)


@pytest.mark.parametrize(
    ("rules", "slots", "count"),
    [
        pytest.param(
            ((BLOCK, PREFER_GATHER, 4),), seed_slots(*[4] * 8), 6, id="group-is-not-a-sum-of-block-multiples"
        ),
        pytest.param(
            ((NODE_LAYER, PREFER_GATHER, 2),), seed_slots(*[1] * 8), 2, id="every-node-rounds-down-to-nothing"
        ),
        pytest.param(
            ((SPINE, MUST_GATHER), (BLOCK, PREFER_GATHER, 4)),
            # unrounded, s1 offers 9 and s2 8; each of their blocks rounds down to 4 or 0
            seed_slots(3, 3, 3, 0, 3, 2, 2, 1),
            8,
            id="must-gather-spine-whose-blocks-round-down-below-the-need",
        ),
    ],
)
def test_pod_count_multiple_that_cannot_be_met_places_nothing(
    rules: tuple[tuple[str, str, int], ...], slots: dict[str, int], count: int
) -> None:
    plan = plan_placement(SEED_TREE, spec(*rules), gang(count), slots)
    assert isinstance(plan, NoPlacement)
    assert "podCountMultiple" in plan.message, plan.message


# ---------------------------------------------------------------------------------------------- index order
# (name, network-topology-index): names run against the indices, so name order is not index order
INDEXED = [(f"worker-{letter}", index) for index, letter in enumerate("hgfedcba")]


def test_member_order_is_index_then_name() -> None:
    pods = [
        pod("b"),
        pod("a"),
        pod("ten", 10),
        pod("nine", 9),
        pod("junk", "first"),
        pod("zero", 0),
    ]
    # numeric (9 before 10), indexed pods first, then unindexed (or unparsable) ones by name
    assert [p.name for p in sorted(pods, key=member_order_key)] == ["zero", "nine", "ten", "a", "b", "junk"]


def test_consecutive_indices_share_the_lowest_domain() -> None:
    members = sorted((pod(name, index) for name, index in INDEXED), key=member_order_key)
    # every node offers 2: the spine s1 (8) is the smallest domain that holds all eight
    plan = placed(plan_placement(SEED_TREE, spec(), members, seed_slots(*[2] * 8)))
    assert plan.domain == ("s1",)
    node_of = {index: plan.nodes[f"default/{name}"] for name, index in INDEXED}
    # two per node, four per block, in index order
    for first in range(0, 8, 2):
        assert node_of[first] == node_of[first + 1], node_of
    assert len(set(node_of.values())) == 4
    for first in range(0, 8, 4):
        assert len({BLOCK_OF[node_of[i]] for i in range(first, first + 4)}) == 1, node_of
    # the fuller block and node are filled first: with all equal, b1 and node-3 by name
    assert [node_of[i] for i in range(8)] == ["node-3"] * 2 + ["node-4"] * 2 + ["node-1"] * 2 + ["node-2"] * 2


def test_pods_are_assigned_in_the_order_given() -> None:
    members = sorted((pod(name, index) for name, index in INDEXED), key=member_order_key)
    # node-5 takes five, node-6 three: indices 0-4 on node-5, 5-7 on node-6
    plan = placed(plan_placement(SEED_TREE, spec(), members, seed_slots(0, 0, 0, 0, 5, 3, 0, 0)))
    node_of = {index: plan.nodes[f"default/{name}"] for name, index in INDEXED}
    assert [node_of[i] for i in range(8)] == ["node-5"] * 5 + ["node-6"] * 3


@pytest.mark.parametrize("count", [3, 5, 7])
def test_index_order_keeps_each_node_a_run_of_consecutive_indices(count: int) -> None:
    members = sorted((pod(name, index) for name, index in INDEXED[:count]), key=member_order_key)
    plan = placed(plan_placement(SEED_TREE, spec(), members, seed_slots(2, 1, 2, 1, 1, 2, 1, 2)))
    indices: dict[str, list[int]] = {}
    for name, index in INDEXED[:count]:
        indices.setdefault(plan.nodes[f"default/{name}"], []).append(index)
    for run in indices.values():
        assert run == list(range(run[0], run[0] + len(run))), indices


# ----------------------------------------------------------------------------------------------- same names
TWIN_LABELS: dict[str, dict[str, str]] = {
    "node-a1": {SPINE_KEY: "s1", BLOCK_KEY: "b1"},
    "node-a2": {SPINE_KEY: "s1", BLOCK_KEY: "b1"},
    "node-b1": {SPINE_KEY: "s2", BLOCK_KEY: "b1"},
    "node-b2": {SPINE_KEY: "s2", BLOCK_KEY: "b1"},
}
TWIN_TREE = tree_of(TWIN_LABELS)


def test_same_named_blocks_under_two_spines_are_two_domains() -> None:
    slots = {"node-a1": 2, "node-a2": 1, "node-b1": 2, "node-b2": 2}
    # s1/b1 offers 3 and s2/b1 4: only s2/b1 holds four (one merged b1 would offer 7)
    plan = placed(plan_placement(TWIN_TREE, spec((BLOCK, MUST_GATHER)), gang(4), slots))
    assert (plan.layer, plan.domain) == (BLOCK, ("s2", "b1"))
    assert per_node(plan) == {"node-b1": 2, "node-b2": 2}


def test_same_named_blocks_are_not_merged_to_meet_must_gather() -> None:
    slots = {"node-a1": 2, "node-a2": 1, "node-b1": 2, "node-b2": 2}
    plan = plan_placement(TWIN_TREE, spec((BLOCK, MUST_GATHER)), gang(5), slots)
    assert isinstance(plan, NoPlacement)
    # both blocks are listed with their own offer
    # the two b1 blocks are told apart by their spine
    assert f"{BLOCK}/s2/b1: 4" in plan.message and f"{BLOCK}/s1/b1: 3" in plan.message, plan.message
