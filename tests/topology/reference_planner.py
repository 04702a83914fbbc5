"""The topology plan as a walk over the tree with a dictionary per vertex: slower than the planner
(`koordpy.plugins.coscheduling.networktopology.plan_levels`, which sums the offers with arrays),
and kept as the oracle it is compared with on random trees (test_planner_oracle.py). Both must
pick the same domain and the same nodes for every gang."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api.pod import Pod
from koordpy.plugins.coscheduling.networktopology import NoPlacement, Placement
from koordpy.status.gang_annotations import NetworkTopologySpec
from koordpy.status.topology import CLUSTER_LAYER, NODE_LAYER, DomainPath, TopologyTree

# a node leaf is addressed by its domain path plus the node name
_Path = tuple[str, ...]


@dataclass(slots=True)
class _Tree:
    layer_of: dict[_Path, str]
    children: dict[_Path, list[_Path]]
    offer: dict[_Path, int]
    score: dict[_Path, float]


def _build(
    tree: TopologyTree,
    slots: Mapping[str, int],
    scores: Mapping[str, float] | None,
    multiples: Mapping[str, int],
) -> _Tree:
    layer_of: dict[_Path, str] = {}
    children: dict[_Path, list[_Path]] = {}
    offer: dict[_Path, int] = {}
    score: dict[_Path, float] = {}
    node_multiple = multiples.get(NODE_LAYER, 1)

    def visit(path: DomainPath) -> None:
        domain = tree.domains[path]
        layer_of[path] = domain.layer
        if domain.children:
            kids: list[_Path] = list(domain.children)
            for child in domain.children:
                visit(child)
        else:
            kids = []
            for node in domain.nodes:
                leaf = (*path, node)
                layer_of[leaf] = NODE_LAYER
                children[leaf] = []
                n = int(slots.get(node, 0))
                offer[leaf] = n - n % node_multiple
                score[leaf] = float(scores.get(node, 0.0)) if scores else 0.0
                kids.append(leaf)
        children[path] = kids
        total = sum(offer[k] for k in kids)
        m = multiples.get(domain.layer, 1)
        offer[path] = total - total % m
        score[path] = sum(score[k] for k in kids)

    visit(())
    return _Tree(layer_of, children, offer, score)


def _chain_key(t: _Tree, path: _Path) -> tuple[Any, ...]:
    offers = tuple(t.offer[path[:i]] for i in range(len(path), -1, -1))
    return (offers, -t.score[path], path)


def _distribute(
    t: _Tree, path: _Path, want: int, multiples: Mapping[str, int], out: list[tuple[str, int]]
) -> int:
    cap = min(t.offer[path], want)
    cap -= cap % multiples.get(t.layer_of[path], 1)
    if cap <= 0:
        return 0
    kids = t.children[path]
    if not kids:
        out.append((path[-1], cap))
        return cap
    given = 0
    mark = len(out)
    for child in sorted(kids, key=lambda c: (-t.offer[c], -t.score[c], c)):
        if given >= cap:
            break
        given += _distribute(t, child, cap - given, multiples, out)
    m = multiples.get(t.layer_of[path], 1)
    if given % m:
        del out[mark:]
        return 0
    return given


def reference_plan(
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    pods: Sequence[Pod],
    slots: Mapping[str, int],
    scores: Mapping[str, float] | None = None,
) -> Placement | NoPlacement:
    desired = len(pods)
    chain = tree.chain
    multiples = spec.multiples()
    t = _build(tree, slots, scores, multiples)
    must = spec.must_gather_layer(chain)
    if must is None or must == CLUSTER_LAYER:
        start: list[_Path] = [()]
    elif must == NODE_LAYER:
        start = [p for p, layer in t.layer_of.items() if layer == NODE_LAYER]
    else:
        start = [p for p, layer in t.layer_of.items() if layer == must]
    level = [p for p in start if t.offer[p] >= desired]
    if not level:
        return NoPlacement(_message(t, must, start, desired, multiples, fits=False))
    levels = [level]
    while True:
        level = [c for p in level for c in t.children[p] if t.offer[c] >= desired]
        if not level:
            break
        levels.append(level)
    for candidates in reversed(levels):
        for candidate in sorted(candidates, key=lambda p: _chain_key(t, p)):
            leaves: list[tuple[str, int]] = []
            if _distribute(t, candidate, desired, multiples, leaves) < desired:
                continue
            nodes: dict[str, str] = {}
            it = iter(pods)
            for node, n in leaves:
                for _ in range(n):
                    nodes[next(it).key] = node
            return Placement(nodes, candidate, t.layer_of[candidate])
    return NoPlacement(_message(t, must, start, desired, multiples, fits=True))


def _message(
    t: _Tree,
    must: str | None,
    start: Sequence[_Path],
    desired: int,
    multiples: Mapping[str, int],
    fits: bool,
) -> str:
    rule = ", ".join(f"{k}={v}" for k, v in sorted(multiples.items()))
    if fits:
        return (
            f"no topology domain can take the gang group's {desired} pods in the multiples "
            f"podCountMultiple asks for ({rule})"
        )
    if must is None or must == CLUSTER_LAYER:
        head = f"the cluster's topology offers {t.offer[()]} of the {desired} pod slots the gang group needs"
    else:
        shown = sorted(start, key=lambda p: (-t.offer[p], p))
        last = [p[-1] for p in shown]
        names = ["/".join(p) if last.count(p[-1]) > 1 else p[-1] for p in shown]
        listed = ", ".join(f"{must}/{n}: {t.offer[p]}" for n, p in zip(names[:10], shown, strict=False))
        more = f", and {len(shown) - 10} more" if len(shown) > 10 else ""
        head = (
            f"no {must} domain can hold the gang group (MustGather): it needs {desired} pod slots, "
            f"the domains offer {listed}{more}"
        )
    if multiples:
        head += f"; podCountMultiple {rule}"
    return head
