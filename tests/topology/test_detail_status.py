"""ClusterNetworkTopology: the layer chain of a spec, the tree built from node labels, and the
`status.detailStatus` it produces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.status.topology import (
    CLUSTER_LAYER,
    NODE_LAYER,
    TopologySpecError,
    build_tree,
    detail_status,
    parse_layer_chain,
)
from operators.topology import compute_detail_status, status_patch

SPINE_KEY = "network.topology.nvidia.com/spine"
BLOCK_KEY = "network.topology.nvidia.com/block"

# The ClusterNetworkTopology of the network-topology section of the seed document (Koordinator's
# job scheduling manual).
SEED_SPEC: dict[str, Any] = {
    "networkTopologySpec": [
        {"labelKey": [SPINE_KEY], "topologyLayer": "SpineLayer"},
        {"labelKey": [BLOCK_KEY], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
        {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
    ]
}

# Its `status.detailStatus`, as the seed document prints it.
SEED_DETAIL_STATUS: list[dict[str, Any]] = [
    {
        "childTopologyLayer": "SpineLayer",
        "childTopologyNames": ["s1", "s2"],
        "nodeNum": 8,
        "topologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
    },
    {
        "childTopologyLayer": "BlockLayer",
        "childTopologyNames": ["b2", "b1"],
        "nodeNum": 4,
        "parentTopologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
        "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
    },
    {
        "childTopologyLayer": "NodeTopologyLayer",
        "nodeNum": 2,
        "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
        "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b2"},
    },
    {
        "childTopologyLayer": "NodeTopologyLayer",
        "nodeNum": 2,
        "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
        "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b1"},
    },
    {
        "childTopologyLayer": "BlockLayer",
        "childTopologyNames": ["b3", "b4"],
        "nodeNum": 4,
        "parentTopologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
        "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
    },
    {
        "childTopologyLayer": "NodeTopologyLayer",
        "nodeNum": 2,
        "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
        "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b3"},
    },
    {
        "childTopologyLayer": "NodeTopologyLayer",
        "nodeNum": 2,
        "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
        "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b4"},
    },
]

# The eight nodes behind it: two per block, two blocks per spine.
SEED_NODE_LABELS: dict[str, dict[str, str]] = {
    f"node-{i}": {SPINE_KEY: spine, BLOCK_KEY: block}
    for i, (spine, block) in enumerate(
        [
            ("s1", "b2"),
            ("s1", "b2"),
            ("s1", "b1"),
            ("s1", "b1"),
            ("s2", "b3"),
            ("s2", "b3"),
            ("s2", "b4"),
            ("s2", "b4"),
        ],
        start=1,
    )
}


def node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    return Node.from_dict({"metadata": {"name": name, "labels": dict(labels or {})}})


def nodes_of(labels: Mapping[str, Mapping[str, str]]) -> list[Node]:
    return [node(name, lab) for name, lab in labels.items()]


def status_of(spec: Mapping[str, Any], labels: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    return detail_status(build_tree(parse_layer_chain(spec), nodes_of(labels)))


# ---------------------------------------------------------------------------------------------- the seed
def test_seed_example_produces_the_seed_detail_status() -> None:
    assert status_of(SEED_SPEC, SEED_NODE_LABELS) == SEED_DETAIL_STATUS


def test_node_order_does_not_change_the_status() -> None:
    shuffled = dict(reversed(list(SEED_NODE_LABELS.items())))
    assert status_of(SEED_SPEC, shuffled) == status_of(SEED_SPEC, SEED_NODE_LABELS)


def test_spec_entries_may_be_listed_in_any_order() -> None:
    reordered = {"networkTopologySpec": list(reversed(SEED_SPEC["networkTopologySpec"]))}
    assert status_of(reordered, SEED_NODE_LABELS) == status_of(SEED_SPEC, SEED_NODE_LABELS)


def test_tree_exposes_what_placement_needs() -> None:
    tree = build_tree(parse_layer_chain(SEED_SPEC), nodes_of(SEED_NODE_LABELS))
    assert tree.chain.order == (CLUSTER_LAYER, "SpineLayer", "BlockLayer", NODE_LAYER)
    assert tree.chain.is_above("SpineLayer", "BlockLayer")
    assert tree.node_paths["node-3"] == ("s1", "b1")
    assert tree.leaves(("s1", "b1")) == ("node-3", "node-4")
    assert tree.leaves(("s2",)) == ("node-5", "node-6", "node-7", "node-8")
    assert tree.leaves(()) == tuple(sorted(SEED_NODE_LABELS))
    # siblings follow their first node: b2 holds node-1, b1 starts at node-3
    assert [d.name for d in tree.children(("s1",))] == ["b2", "b1"]
    parent = tree.parent(("s2", "b4"))
    assert parent is not None and (parent.layer, parent.name) == ("SpineLayer", "s2")
    block = tree.domain_of("node-6", "BlockLayer")
    assert block is not None and block.path == ("s2", "b3")
    spine = tree.domain_of("node-6", "SpineLayer")
    assert spine is not None and spine.name == "s2"
    assert tree.domain_of("node-6", NODE_LAYER) is None
    assert tree.domain_of("unknown", "SpineLayer") is None
    assert tree.child_layer(("s1", "b1")) == NODE_LAYER
    assert not tree.excluded


# ---------------------------------------------------------------------------------------------- trees
def test_same_named_blocks_under_two_spines_stay_distinct() -> None:
    labels = {
        "a1": {SPINE_KEY: "s1", BLOCK_KEY: "b1"},
        "a2": {SPINE_KEY: "s1", BLOCK_KEY: "b1"},
        "c1": {SPINE_KEY: "s2", BLOCK_KEY: "b1"},
    }
    tree = build_tree(parse_layer_chain(SEED_SPEC), nodes_of(labels))
    assert tree.leaves(("s1", "b1")) == ("a1", "a2")
    assert tree.leaves(("s2", "b1")) == ("c1",)
    assert detail_status(tree) == [
        {
            "topologyInfo": {"topologyLayer": CLUSTER_LAYER, "topologyName": ""},
            "childTopologyLayer": "SpineLayer",
            "childTopologyNames": ["s1", "s2"],
            "nodeNum": 3,
        },
        {
            "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
            "parentTopologyInfo": {"topologyLayer": CLUSTER_LAYER, "topologyName": ""},
            "childTopologyLayer": "BlockLayer",
            "childTopologyNames": ["b1"],
            "nodeNum": 2,
        },
        {
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b1"},
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
            "childTopologyLayer": NODE_LAYER,
            "nodeNum": 2,
        },
        {
            "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
            "parentTopologyInfo": {"topologyLayer": CLUSTER_LAYER, "topologyName": ""},
            "childTopologyLayer": "BlockLayer",
            "childTopologyNames": ["b1"],
            "nodeNum": 1,
        },
        {
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b1"},
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
            "childTopologyLayer": NODE_LAYER,
            "nodeNum": 1,
        },
    ]


def test_node_missing_the_layer_above_it_gets_a_domain_of_its_own() -> None:
    labels = {**SEED_NODE_LABELS, "lonely": {SPINE_KEY: "s1"}}
    tree = build_tree(parse_layer_chain(SEED_SPEC), nodes_of(labels))
    assert tree.node_paths["lonely"] == ("s1", "lonely")
    entries = {
        (e["topologyInfo"]["topologyLayer"], e["topologyInfo"]["topologyName"]): e
        for e in detail_status(tree)
    }
    assert entries[("SpineLayer", "s1")]["childTopologyNames"] == ["lonely", "b2", "b1"]
    assert entries[("SpineLayer", "s1")]["nodeNum"] == 5
    assert entries[("BlockLayer", "lonely")] == {
        "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "lonely"},
        "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
        "childTopologyLayer": NODE_LAYER,
        "nodeNum": 1,
    }
    assert entries[(CLUSTER_LAYER, "")]["nodeNum"] == 9


def test_node_missing_a_higher_layer_is_left_out() -> None:
    labels = {**SEED_NODE_LABELS, "stray": {BLOCK_KEY: "b1"}, "bare": {}}
    tree = build_tree(parse_layer_chain(SEED_SPEC), nodes_of(labels))
    assert set(tree.excluded) == {"stray", "bare"}
    assert "SpineLayer" in tree.excluded["stray"] and SPINE_KEY in tree.excluded["stray"]
    assert "stray" not in tree.node_paths
    assert detail_status(tree) == status_of(SEED_SPEC, SEED_NODE_LABELS)


def test_first_label_key_with_a_value_names_the_domain() -> None:
    spec = {
        "networkTopologySpec": [
            {"topologyLayer": "SpineLayer", "labelKey": ["old/spine", SPINE_KEY]},
            {"topologyLayer": NODE_LAYER, "parentTopologyLayer": "SpineLayer"},
        ]
    }
    tree = build_tree(
        parse_layer_chain(spec),
        [node("n1", {"old/spine": "x", SPINE_KEY: "y"}), node("n2", {"old/spine": "", SPINE_KEY: "y"})],
    )
    assert tree.node_paths == {"n1": ("x",), "n2": ("y",)}


def test_relabel_and_removal_change_the_status() -> None:
    before = status_of(SEED_SPEC, SEED_NODE_LABELS)
    moved = {**SEED_NODE_LABELS, "node-1": {SPINE_KEY: "s2", BLOCK_KEY: "b4"}}
    after_move = status_of(SEED_SPEC, moved)
    assert after_move != before
    counts = {e["topologyInfo"]["topologyName"]: e["nodeNum"] for e in after_move}
    assert counts == {"": 8, "s1": 3, "b1": 2, "b2": 1, "s2": 5, "b3": 2, "b4": 3}

    removed = {k: v for k, v in SEED_NODE_LABELS.items() if k not in ("node-1", "node-2")}
    after_removal = status_of(SEED_SPEC, removed)
    s1 = next(e for e in after_removal if e["topologyInfo"]["topologyName"] == "s1")
    assert s1["childTopologyNames"] == ["b1"] and s1["nodeNum"] == 2
    assert not any(e["topologyInfo"]["topologyName"] == "b2" for e in after_removal)


def test_no_nodes_leaves_only_the_cluster_entry() -> None:
    assert status_of(SEED_SPEC, {}) == [
        {"topologyInfo": {"topologyLayer": CLUSTER_LAYER, "topologyName": ""}, "nodeNum": 0}
    ]


def test_node_layer_alone_counts_the_nodes_under_the_cluster() -> None:
    spec = {"networkTopologySpec": [{"topologyLayer": NODE_LAYER}]}
    assert status_of(spec, {"n1": {}, "n2": {}}) == [
        {
            "topologyInfo": {"topologyLayer": CLUSTER_LAYER, "topologyName": ""},
            "childTopologyLayer": NODE_LAYER,
            "nodeNum": 2,
        }
    ]


def test_three_layers_with_an_accelerator_layer() -> None:
    spec = {
        "networkTopologySpec": [
            {"topologyLayer": "SpineLayer", "labelKey": [SPINE_KEY]},
            {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": [BLOCK_KEY]},
            {
                "topologyLayer": "AcceleratorLayer",
                "parentTopologyLayer": "BlockLayer",
                "labelKey": ["network.topology.nvidia.com/accelerator"],
            },
            {"topologyLayer": NODE_LAYER, "parentTopologyLayer": "AcceleratorLayer"},
        ]
    }
    labels = {
        "g1": {SPINE_KEY: "s1", BLOCK_KEY: "b1", "network.topology.nvidia.com/accelerator": "nvl1"},
        "g2": {SPINE_KEY: "s1", BLOCK_KEY: "b1", "network.topology.nvidia.com/accelerator": "nvl1"},
        # no accelerator label: its own accelerator domain
        "c1": {SPINE_KEY: "s1", BLOCK_KEY: "b1"},
        # no block label: left out
        "c2": {SPINE_KEY: "s1", "network.topology.nvidia.com/accelerator": "nvl1"},
    }
    tree = build_tree(parse_layer_chain(spec), nodes_of(labels))
    assert tree.node_paths == {
        "g1": ("s1", "b1", "nvl1"),
        "g2": ("s1", "b1", "nvl1"),
        "c1": ("s1", "b1", "c1"),
    }
    assert list(tree.excluded) == ["c2"]
    names = [
        (e["topologyInfo"]["topologyLayer"], e["topologyInfo"]["topologyName"], e["nodeNum"])
        for e in detail_status(tree)
    ]
    assert names == [
        (CLUSTER_LAYER, "", 3),
        ("SpineLayer", "s1", 3),
        ("BlockLayer", "b1", 3),
        ("AcceleratorLayer", "c1", 1),
        ("AcceleratorLayer", "nvl1", 2),
    ]


# ---------------------------------------------------------------------------------------------- specs
def layers(*entries: tuple[str, str | None]) -> dict[str, Any]:
    """A spec from (layer, parent) pairs; every layer but the node layer gets a label key."""
    out = []
    for name, parent in entries:
        entry: dict[str, Any] = {"topologyLayer": name}
        if parent is not None:
            entry["parentTopologyLayer"] = parent
        if name != NODE_LAYER:
            entry["labelKey"] = [f"example.com/{name.lower()}"]
        out.append(entry)
    return {"networkTopologySpec": out}


@pytest.mark.parametrize(
    ("spec", "layer", "words"),
    [
        (
            layers(("SpineLayer", None), (NODE_LAYER, "BlockLayer")),
            NODE_LAYER,
            ["unknown parent", "BlockLayer"],
        ),
        (
            layers(("SpineLayer", "BlockLayer"), ("BlockLayer", "SpineLayer"), (NODE_LAYER, "BlockLayer")),
            "BlockLayer",
            ["cycle", "BlockLayer -> SpineLayer -> BlockLayer"],
        ),
        (
            layers(("A", "B"), ("B", "A"), ("SpineLayer", None), (NODE_LAYER, "SpineLayer")),
            "A",
            ["cycle", "A -> B -> A"],
        ),
        (
            layers(("SpineLayer", None), ("ZoneLayer", None), (NODE_LAYER, "SpineLayer")),
            "ZoneLayer",
            ["two top layers", "SpineLayer", "ZoneLayer"],
        ),
        (
            layers(
                ("SpineLayer", None),
                ("BlockLayer", "SpineLayer"),
                ("RackLayer", "SpineLayer"),
                (NODE_LAYER, "BlockLayer"),
            ),
            "RackLayer",
            ["both have parent", "SpineLayer", "BlockLayer", "RackLayer"],
        ),
        (
            layers(("SpineLayer", None), ("BlockLayer", "SpineLayer")),
            NODE_LAYER,
            ["NodeTopologyLayer is missing"],
        ),
        (
            {
                "networkTopologySpec": [
                    {"topologyLayer": "SpineLayer"},
                    {"topologyLayer": NODE_LAYER, "parentTopologyLayer": "SpineLayer"},
                ]
            },
            "SpineLayer",
            ["no labelKey", "SpineLayer"],
        ),
        (
            layers(("SpineLayer", NODE_LAYER), (NODE_LAYER, "SpineLayer")),
            "SpineLayer",
            ["bottom layer"],
        ),
        (layers((CLUSTER_LAYER, None), (NODE_LAYER, None)), CLUSTER_LAYER, ["implicit top layer"]),
        (
            layers(("SpineLayer", None), ("SpineLayer", None), (NODE_LAYER, "SpineLayer")),
            "SpineLayer",
            ["twice"],
        ),
        ({"networkTopologySpec": []}, None, ["lists no layers"]),
        ({}, None, ["lists no layers"]),
        ({"networkTopologySpec": [{"parentTopologyLayer": "x"}]}, None, ["topologyLayer must name"]),
        ({"networkTopologySpec": "SpineLayer"}, None, ["must be a list"]),
    ],
    ids=[
        "unknown-parent",
        "cycle-through-the-chain",
        "cycle-off-the-chain",
        "two-roots",
        "branch",
        "missing-node-layer",
        "missing-label-key",
        "node-layer-as-parent",
        "cluster-layer-listed",
        "duplicate-layer",
        "empty",
        "absent",
        "unnamed-layer",
        "not-a-list",
    ],
)
def test_broken_specs_are_rejected_naming_the_layer(
    spec: dict[str, Any], layer: str | None, words: list[str]
) -> None:
    with pytest.raises(TopologySpecError) as caught:
        parse_layer_chain(spec)
    assert caught.value.layer == layer
    for word in words:
        assert word in str(caught.value)


def test_explicit_cluster_parent_means_top() -> None:
    spec = layers(("SpineLayer", CLUSTER_LAYER), (NODE_LAYER, "SpineLayer"))
    assert parse_layer_chain(spec).order == (CLUSTER_LAYER, "SpineLayer", NODE_LAYER)


def test_chain_keeps_label_keys_and_accepts_the_bare_list() -> None:
    chain = parse_layer_chain(SEED_SPEC["networkTopologySpec"])
    assert [(layer.name, layer.label_keys) for layer in chain.layers] == [
        ("SpineLayer", (SPINE_KEY,)),
        ("BlockLayer", (BLOCK_KEY,)),
        (NODE_LAYER, ()),
    ]


# ---------------------------------------------------------------------------------------------- the write
def test_status_patch_writes_the_detail_once() -> None:
    detail = status_of(SEED_SPEC, SEED_NODE_LABELS)
    patch = status_patch({}, detail, None, 1, 0.0)
    assert patch == {"detailStatus": detail}
    assert status_patch({"detailStatus": detail}, detail, None, 1, 5.0) is None


def test_status_patch_reports_a_broken_spec_and_clears_it_when_fixed() -> None:
    detail = status_of(SEED_SPEC, SEED_NODE_LABELS)
    other = {"type": "Synced", "status": "True", "reason": "Ok", "message": "", "lastTransitionTime": "x"}
    broken = status_patch({"detailStatus": detail, "conditions": [other]}, None, "layer 'A' is bad", 3, 0.0)
    assert broken == {
        "detailStatus": None,
        "message": "layer 'A' is bad",
        "conditions": [
            other,
            {
                "type": "Valid",
                "status": "False",
                "reason": "InvalidSpec",
                "message": "layer 'A' is bad",
                "lastTransitionTime": "1970-01-01T00:00:00Z",
                "observedGeneration": 3,
            },
        ],
    }
    stored = {k: v for k, v in broken.items() if v is not None}
    # the same problem later: nothing to write, the transition time stays
    assert status_patch(stored, None, "layer 'A' is bad", 3, 100.0) is None
    # another problem: the condition keeps its transition time, the message changes
    changed = status_patch(stored, None, "layer 'B' is bad", 4, 100.0)
    assert changed is not None
    assert changed["conditions"][1]["lastTransitionTime"] == "1970-01-01T00:00:00Z"
    assert changed["conditions"][1]["message"] == changed["message"] == "layer 'B' is bad"
    # fixed: the condition and the message go, the detail comes back
    assert status_patch(stored, detail, None, 5, 200.0) == {
        "detailStatus": detail,
        "message": None,
        "conditions": [other],
    }


def test_compute_detail_status_reports_the_problem_instead_of_a_tree() -> None:
    detail, tree, problem = compute_detail_status(SEED_SPEC, SEED_NODE_LABELS)
    assert problem is None and tree is not None and detail == SEED_DETAIL_STATUS
    broken = {"networkTopologySpec": SEED_SPEC["networkTopologySpec"][:2]}
    assert compute_detail_status(broken, SEED_NODE_LABELS) == (
        None,
        None,
        "NodeTopologyLayer is missing: list it as the bottom layer, with the layer directly above the "
        "nodes as its parentTopologyLayer",
    )
