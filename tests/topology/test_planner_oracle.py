"""The topology plan over the tree's arrays picks exactly what the walk over the tree picked
(tests/topology/reference_planner.py): the same domain, the same nodes for the same pods, the same
message when nothing fits, on random trees, offers, scores and gather rules. Names repeat under
different parents (block b1 under spines s1 and s2 are two domains), some nodes lack the innermost
label (a domain of their own) and some an upper one (left out of the tree)."""

from __future__ import annotations

import random

import pytest

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.plugins.coscheduling.networktopology import (
    MUST_GATHER,
    PREFER_GATHER,
    GatherRule,
    NetworkTopologySpec,
    NoPlacement,
    Placement,
    plan_placement,
)
from koordpy.status.topology import NODE_LAYER, TopologyTree, build_tree, parse_layer_chain
from tests.topology.reference_planner import reference_plan


def random_tree(rng: random.Random) -> TopologyTree:
    depth = rng.randint(1, 3)
    names = [f"L{i}" for i in range(depth)]
    spec = [{"topologyLayer": names[0], "labelKey": ["k0"]}]
    spec += [
        {"topologyLayer": names[i], "parentTopologyLayer": names[i - 1], "labelKey": [f"k{i}"]}
        for i in range(1, depth)
    ]
    spec.append({"topologyLayer": NODE_LAYER, "parentTopologyLayer": names[-1]})
    nodes = []
    for n in range(rng.randint(1, 40)):
        labels = {}
        for i in range(depth):
            r = rng.random()
            if r < 0.06:
                continue  # no label: left out, or a domain of its own in the innermost layer
            labels[f"k{i}"] = f"d{rng.randint(1, 3)}"
        nodes.append(Node.from_dict({"metadata": {"name": f"node-{n:02d}", "labels": labels}}))
    return build_tree(parse_layer_chain(spec), nodes)


def random_spec(rng: random.Random, tree: TopologyTree) -> NetworkTopologySpec:
    rules = []
    for layer in tree.chain.order:
        r = rng.random()
        if r < 0.5:
            continue
        strategy = MUST_GATHER if r < 0.7 else PREFER_GATHER
        multiple = rng.choice((1, 1, 1, 2, 3, 4))
        rules.append(GatherRule(layer, strategy, multiple))
    return NetworkTopologySpec(tuple(rules))


def gang(count: int) -> list[Pod]:
    return [
        Pod.from_dict(
            {"metadata": {"name": f"p-{i:02d}", "namespace": "default"}, "spec": {"containers": []}}
        )
        for i in range(count)
    ]


def same(a: Placement | NoPlacement, b: Placement | NoPlacement) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, Placement):
        assert isinstance(b, Placement)
        assert (a.domain, a.layer, a.nodes) == (b.domain, b.layer, b.nodes)
    else:
        assert isinstance(b, NoPlacement)
        assert a.message == b.message


@pytest.mark.parametrize("seed", range(250))
def test_plan_over_arrays_matches_the_tree_walk(seed: int) -> None:
    rng = random.Random(seed)
    tree = random_tree(rng)
    for _ in range(6):
        spec = random_spec(rng, tree)
        names = list(tree.node_paths) + list(tree.excluded)
        slots = {n: rng.choice((0, 0, 1, 1, 2, 3, 4, 6)) for n in names if rng.random() < 0.9}
        scores = None
        if rng.random() < 0.4:
            # as job-level preemption ranks nodes: whole numbers, cheaper nodes higher
            scores = {
                n: -float(rng.randint(0, 3) * 10**6 + rng.randint(0, 5)) for n in names if rng.random() < 0.5
            }
        members = gang(rng.randint(1, 14))
        same(
            plan_placement(tree, spec, members, slots, scores),
            reference_plan(tree, spec, members, slots, scores),
        )


def test_a_tree_without_nodes_places_nothing() -> None:
    spec = [
        {"topologyLayer": "L0", "labelKey": ["k0"]},
        {"topologyLayer": NODE_LAYER, "parentTopologyLayer": "L0"},
    ]
    tree = build_tree(parse_layer_chain(spec), [])
    for rules in ((), (GatherRule("L0", MUST_GATHER),), (GatherRule(NODE_LAYER, MUST_GATHER),)):
        topology = NetworkTopologySpec(rules)
        same(plan_placement(tree, topology, gang(2), {}), reference_plan(tree, topology, gang(2), {}))


def test_levels_keep_each_domains_children_together_in_path_order() -> None:
    rng = random.Random(7)
    for _ in range(20):
        tree = random_tree(rng)
        levels = tree.levels()
        assert levels.paths[0] == ((),)
        for d in range(1, levels.depth + 1):
            paths = levels.paths[d]
            assert list(paths) == sorted(paths)
            for v, parent in enumerate(levels.parents[d].tolist()):
                assert paths[v][:-1] == levels.paths[d - 1][parent]
                assert levels.starts[d - 1][parent] <= v < levels.starts[d - 1][parent + 1]
        assert set(levels.nodes) == set(tree.node_paths)
