"""The topology tree follows the nodes without being rebuilt on every node event.

A tree depends only on which nodes exist and on the labels its layers read. The scheduler's view
(`ClusterTopologyView`) keeps the tree it has when a node update changes neither (status
heartbeats, conditions, allocatable, taints, other labels), updates it node by node when a few
nodes came, went or changed a layer's label (`update_tree`), and builds it anew otherwise. Each
result must equal the tree `build_tree` makes from the same nodes (ClusterNetworkTopology's
detailStatus and every plan are read from it).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.plugins.coscheduling.networktopology import ClusterTopologyView
from koordpy.scheduler import Scheduler
from koordpy.status.topology import build_tree, detail_status, parse_layer_chain, update_tree
from tests.topology.test_detail_status import BLOCK_KEY as BLOCK
from tests.topology.test_detail_status import SEED_SPEC as SPEC
from tests.topology.test_detail_status import SPINE_KEY as SPINE

CHAIN = parse_layer_chain(SPEC)


def node(
    name: str, labels: dict[str, str], cpu: str = "8", annotations: dict[str, str] | None = None
) -> Node:
    return Node.from_dict(
        {
            "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
        }
    )


def at(name: str, spine: str | None, block: str | None, **extra: str) -> Node:
    labels = dict(extra)
    if spine is not None:
        labels[SPINE] = spine
    if block is not None:
        labels[BLOCK] = block
    return node(name, labels)


# s1/b1: n1 n2 n3; s1/b2: n4; s2/b3: n5 n6
START = [
    at("n1", "s1", "b1"),
    at("n2", "s1", "b1"),
    at("n3", "s1", "b1"),
    at("n4", "s1", "b2"),
    at("n5", "s2", "b3"),
    at("n6", "s2", "b3"),
]


@pytest.mark.parametrize(
    ("removed", "placed"),
    [
        pytest.param([], [at("n2", "s2", "b3")], id="a-node-moves-to-another-spine"),
        pytest.param([], [at("n4", "s1", "b1")], id="the-last-node-of-a-block-leaves-it"),
        pytest.param([], [at("n1", "s1", "b9")], id="the-first-node-of-a-block-changes-its-siblings-order"),
        pytest.param([], [at("n7", "s3", "b1")], id="a-new-node-opens-a-new-spine"),
        pytest.param([], [at("n0", "s2", "b4")], id="a-new-first-node-reorders-the-spines"),
        pytest.param([], [at("n5", None, "b3")], id="a-node-losing-its-spine-label-is-excluded"),
        pytest.param(
            [], [at("n5", "s2", None)], id="a-node-losing-its-innermost-label-is-a-domain-of-its-own"
        ),
        pytest.param(["n4"], [], id="a-node-leaves-the-cluster"),
        pytest.param(["n1", "n2", "n3", "n4", "n5", "n6"], [], id="every-node-leaves"),
        pytest.param(["n2"], [at("n2", "s1", "b1")], id="a-node-removed-and-placed-again-stays"),
        pytest.param([], [at("n3", "s1", "b1", zone="z")], id="a-label-no-layer-reads-changes-nothing"),
    ],
)
def test_update_makes_the_tree_a_fresh_build_makes(removed: list[str], placed: list[Node]) -> None:
    tree = build_tree(CHAIN, START)
    updated = update_tree(tree, removed, placed)
    names = {n.name for n in placed}
    after = [n for n in START if n.name not in removed and n.name not in names] + placed
    fresh = build_tree(CHAIN, after)
    assert updated == fresh
    assert detail_status(updated) == detail_status(fresh)
    assert updated.levels().paths == fresh.levels().paths


def test_an_excluded_node_given_its_labels_joins_the_tree() -> None:
    tree = build_tree(CHAIN, [*START, at("n8", None, None)])
    assert "n8" in tree.excluded
    updated = update_tree(tree, [], [at("n8", "s2", "b3")])
    assert updated == build_tree(CHAIN, [*START, at("n8", "s2", "b3")])
    assert "n8" not in updated.excluded


def test_any_sequence_of_updates_matches_a_fresh_build() -> None:
    rng = random.Random(16)
    spines, blocks = ["s1", "s2", "s3", None], ["b1", "b2", "b3", "b4", None]
    current = {n.name: n for n in START}
    tree = build_tree(CHAIN, current.values())
    for _ in range(300):
        removed: list[str] = []
        placed: list[Node] = []
        for name in rng.sample([f"n{i}" for i in range(13)], rng.randint(1, 4)):
            if name in current and rng.random() < 0.3:
                removed.append(name)
                current.pop(name)
            else:
                item = at(name, rng.choice(spines), rng.choice(blocks))
                placed.append(item)
                current[name] = item
        tree = update_tree(tree, removed, placed)
        assert tree == build_tree(CHAIN, current.values())


# ---------------------------------------------------------------------------- the scheduler's view
def scheduler_with(nodes: list[Node]) -> tuple[Scheduler, ClusterTopologyView]:
    scheduler = Scheduler(default_configuration(), registry(), VirtualClock(0.0))
    for item in nodes:
        scheduler.on_node_add(item)
    scheduler.on_object(
        "ClusterNetworkTopology",
        "Add",
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"},
            "spec": SPEC,
        },
    )
    plugin: Any = scheduler.profiles["koord-scheduler"].plugin("Coscheduling")
    view: ClusterTopologyView = plugin.topology
    return scheduler, view


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(node("n2", {SPINE: "s1", BLOCK: "b1"}, cpu="16"), id="allocatable"),
        pytest.param(
            node("n2", {SPINE: "s1", BLOCK: "b1"}, annotations={"kwok.x-k8s.io/heartbeat": "2"}),
            id="an-annotation",
        ),
        pytest.param(node("n2", {SPINE: "s1", BLOCK: "b1", "gpu": "h100"}), id="a-label-no-layer-reads"),
        pytest.param(at("n2", "s1", "b1"), id="the-same-node-again"),
    ],
)
def test_a_node_update_the_layers_do_not_read_keeps_the_tree(changed: Node) -> None:
    scheduler, view = scheduler_with(START)
    snapshot = scheduler.cache.snapshot
    tree = view.tree(snapshot)
    assert tree is not None
    levels = tree.levels()
    rows = levels.rows(snapshot.row_of, (id(snapshot), snapshot.node_generation))
    scheduler.on_node_update(changed)
    assert view.tree(snapshot) is tree
    assert (view.builds, view.updates) == (1, 0)
    # and a plan's row lookup is not made again for it
    assert levels.rows(snapshot.row_of, (id(snapshot), snapshot.node_generation)) is rows


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(("update", at("n2", "s2", "b3")), "moved", id="a-node-moves"),
        pytest.param(("add", at("n9", "s1", "b2")), "added", id="a-node-comes"),
        pytest.param(("delete", "n4"), "deleted", id="a-node-goes"),
        pytest.param(("add", at("n9", None, None)), "excluded", id="a-node-outside-the-tree-comes"),
    ],
)
def test_a_node_coming_going_or_moving_updates_the_tree(event: tuple[str, Any], expected: str) -> None:
    scheduler, view = scheduler_with(START)
    snapshot = scheduler.cache.snapshot
    before = view.tree(snapshot)
    action, item = event
    nodes = {n.name: n for n in START}
    if action == "delete":
        scheduler.on_node_delete(item)
        nodes.pop(item)
    else:
        (scheduler.on_node_add if action == "add" else scheduler.on_node_update)(item)
        nodes[item.name] = item
    after = view.tree(snapshot)
    assert after is not before
    assert after == build_tree(CHAIN, nodes.values())
    assert (view.builds, view.updates) == (1, 1)


def test_many_events_between_two_plans_cost_one_look_at_the_tree() -> None:
    scheduler, view = scheduler_with(START)
    snapshot = scheduler.cache.snapshot
    view.tree(snapshot)
    for beat in range(50):
        scheduler.on_node_update(node("n1", {SPINE: "s1", BLOCK: "b1"}, annotations={"beat": str(beat)}))
    scheduler.on_node_update(at("n6", "s1", "b2"))
    scheduler.on_node_delete("n6")
    scheduler.on_node_add(at("n6", "s2", "b4"))
    tree = view.tree(snapshot)
    assert tree == build_tree(CHAIN, [*START[:5], at("n6", "s2", "b4")])
    assert (view.builds, view.updates) == (1, 1)


def test_a_node_deleted_and_another_added_in_its_row_is_seen() -> None:
    scheduler, view = scheduler_with(START)
    snapshot = scheduler.cache.snapshot
    view.tree(snapshot)
    row = snapshot.row_of["n3"]
    scheduler.on_node_delete("n3")
    scheduler.on_node_add(at("x3", "s1", "b1"))
    assert snapshot.row_of["x3"] == row
    tree = view.tree(snapshot)
    assert tree is not None and "x3" in tree.node_paths and "n3" not in tree.node_paths


def test_a_new_topology_object_builds_the_tree_anew() -> None:
    scheduler, view = scheduler_with(START)
    snapshot = scheduler.cache.snapshot
    before = view.tree(snapshot)
    scheduler.on_object(
        "ClusterNetworkTopology",
        "Update",
        {
            "metadata": {"name": "default"},
            "spec": {
                "networkTopologySpec": [
                    {"labelKey": [BLOCK], "topologyLayer": "BlockLayer"},
                    {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
                ]
            },
        },
    )
    after = view.tree(snapshot)
    assert after is not before and after is not None
    assert after.chain.order[1:] == ("BlockLayer", "NodeTopologyLayer")


def reference_levels(tree: Any) -> tuple[Any, ...]:
    """The levels as their definition reads: every path of a level sorted, each vertex's parent the
    place of its path's prefix in the level above."""
    bottom = len(tree.chain.order) - 1
    levels: list[list[tuple[str, ...]]] = [[] for _ in range(bottom + 1)]
    for path in tree.domains:
        levels[len(path)].append(path)
    levels[bottom] = [(*path, name) for name, path in tree.node_paths.items()]
    paths = tuple(tuple(sorted(level)) for level in levels)
    parents = tuple([paths[d - 1].index(p[:-1]) for p in paths[d]] if d else [] for d in range(bottom + 1))
    return paths, parents


@pytest.mark.parametrize(
    "nodes",
    [
        pytest.param(START, id="two-spines"),
        pytest.param([], id="no-nodes"),
        pytest.param([at("n1", None, None)], id="only-excluded-nodes"),
        pytest.param(
            [at("b", "s2", "b1"), at("a", "s1", "b1"), at("c", "s1", None)], id="shared-block-names"
        ),
    ],
)
def test_levels_are_the_paths_of_each_layer_in_order(nodes: list[Node]) -> None:
    tree = build_tree(CHAIN, nodes)
    levels = tree.levels()
    paths, parents = reference_levels(tree)
    assert levels.paths == paths
    assert [p.tolist() for p in levels.parents] == [list(p) for p in parents]
    for d in range(levels.depth):
        children = [
            levels.parents[d + 1][levels.starts[d][v] : levels.starts[d][v + 1]].tolist()
            for v in range(len(paths[d]))
        ]
        assert children == [[v] * len(c) for v, c in enumerate(children)]
        assert int(levels.starts[d][-1]) == len(paths[d + 1])
    assert levels.nodes == tuple(p[-1] for p in paths[-1])
    assert all(levels.node_index[n] == i for i, n in enumerate(levels.nodes))
