"""Network-topology-aware placement of a gang group: the gather rules a gang asks for, and the plan
that puts the whole group into the smallest topology domain that can hold it.

The plan is made in three steps:

1. Offer slots (`koordpy.plugins.coscheduling.offers`): for every node, how many of the group's
   pods fit there one after the other.
2. The tree (`koordpy.status.topology`) sums the offers up to the cluster. `podCountMultiple`
   rounds each domain of a layer down to a multiple; MustGather limits the search to the domains
   of its layer; the deepest level of the tree on which some domain still offers enough slots gives
   the candidates, and the tightest fit among them wins (smallest offer, then the parents'
   offers, then the highest score, then the name).
3. The winner's slots are handed out to its children largest offer first, down to the nodes, and
   the pods, in network-topology-index order (then name), fill the nodes in that order: pods with
   consecutive indices share the lowest domain they can.

Members placed later (beyond minMember, replacements, members that did not fit in the first pass)
are held to the MustGather domain the group's placed members are in (`placed_domain`); see the
Coscheduling plugin for where, and for which gang's rules a gang group follows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordpy.api.pod import Pod
from koordpy.plugins.coscheduling.offers import Offers

# the gather rules a gang asks for are read with the other gang annotations; re-exported, as the
# Coscheduling plugin, the topology benchmark and tests import them from here
from koordpy.status.gang_annotations import MUST_GATHER as MUST_GATHER
from koordpy.status.gang_annotations import PREFER_GATHER as PREFER_GATHER
from koordpy.status.gang_annotations import GatherRule as GatherRule
from koordpy.status.gang_annotations import NetworkTopologySpec as NetworkTopologySpec
from koordpy.status.gang_annotations import parse_network_topology_spec as parse_network_topology_spec
from koordpy.status.gang_annotations import read_network_topology_spec as read_network_topology_spec

# re-exported: the Coscheduling plugin and the topology benchmark import it from here
from koordpy.status.topology import (
    CLUSTER_LAYER,
    NODE_LAYER,
    DomainPath,
    LayerChain,
    TopologySpecError,
    TopologyTree,
    brief,
    build_tree,
    parse_topology_object,
)

log = logging.getLogger(__name__)


def unknown_layer_message(
    spec: NetworkTopologySpec, chain: LayerChain, where: str, strategy: str | None = None
) -> str | None:
    unknown = spec.unknown_layers(chain, strategy)
    if not unknown:
        return None
    layers = ", ".join(chain.order[1:])
    hints = []
    for name in unknown:
        close = [known for known in chain.order if known.lower() == name.lower()]
        if close:
            hints.append(f"{brief(name)} (did you mean {close[0]!r}? layer names are case-sensitive)")
        else:
            hints.append(brief(name))
    return f"{where}: unknown layer {', '.join(hints)}; ClusterNetworkTopology default has {layers}"


# ============================================================================ the plan
@dataclass(frozen=True, slots=True)
class Placement:
    # pod key -> node name
    nodes: dict[str, str]
    # the domain the group was placed in (names from the top; a node's path ends with the node
    # name), and its layer
    domain: DomainPath
    layer: str


@dataclass(frozen=True, slots=True)
class NoPlacement:
    message: str


# a node leaf is addressed by its domain path plus the node name
_Path = tuple[str, ...]


@dataclass(slots=True)
class _Tree:
    """The topology tree with the nodes as leaves, each vertex with its rounded offer and score."""

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
    """Tightest fit first: the domain's own offer, then each ancestor's, smallest first."""
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
        # the children could not make up a multiple: this domain takes nothing
        del out[mark:]
        return 0
    return given


def plan_placement(
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    pods: Sequence[Pod],
    slots: Mapping[str, int],
    scores: Mapping[str, float] | None = None,
) -> Placement | NoPlacement:
    """Where each of `pods` (already in placement order) goes, or why the group fits no domain.
    `slots` is each node's offer for these pods; `scores` (higher is better) break ties."""
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
        return NoPlacement(_no_domain_message(t, must, start, desired, multiples, fits=False))
    # every level of the tree that has domains holding the group, from the top down
    levels = [level]
    while True:
        level = [c for p in level for c in t.children[p] if t.offer[c] >= desired]
        if not level:
            break
        levels.append(level)
    # the deepest level first; a level whose domains cannot split the pods as the multiples ask
    # gives way to the one above it
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
    return NoPlacement(_no_domain_message(t, must, start, desired, multiples, fits=True))


def plan_with_offers(
    profile: Any,
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    pods: Sequence[Pod],
    offers: Offers,
    scores: Mapping[str, float] | None = None,
) -> Placement | NoPlacement:
    """Plan from the offers; when they are resource bounds, check the planned nodes with the real
    filters and plan again until every node used has been checked (each round lowers an offer or
    ends, so this stops)."""
    snap = profile.handle.snapshot
    while True:
        slots = {snap.node_name(r): int(offers.slots[r]) for r in np.flatnonzero(offers.slots).tolist()}
        plan = plan_placement(tree, spec, pods, slots, scores)
        if not isinstance(plan, Placement) or not offers.kinds:
            return plan
        used = sorted({snap.row_of[n] for n in plan.nodes.values()})
        if not offers.settle(profile, used):
            return plan


def _no_domain_message(
    t: _Tree,
    must: str | None,
    start: Sequence[_Path],
    desired: int,
    multiples: Mapping[str, int],
    fits: bool,
) -> str:
    rule = ", ".join(f"{k}={v}" for k, v in sorted(multiples.items()))
    if fits:
        # enough slots, but no domain can split the pods in the multiples asked for
        head = (
            f"no topology domain can take the gang group's {desired} pods in the multiples "
            f"podCountMultiple asks for ({rule})"
        )
        return head
    if must is None or must == CLUSTER_LAYER:
        head = f"the cluster's topology offers {t.offer[()]} of the {desired} pod slots the gang group needs"
    else:
        shown = sorted(start, key=lambda p: (-t.offer[p], p))
        last = [p[-1] for p in shown]
        # a name shared by domains under different parents is shown with its path
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


# ============================================================================ members placed later
@dataclass(frozen=True, slots=True)
class GatherDomain:
    """The domain of a MustGather layer that holds a gang group's placed members: where the rest
    of the group must go."""

    layer: str
    # names from the top; for the node layer, the node's domain path and then the node
    path: DomainPath
    nodes: frozenset[str]

    @property
    def label(self) -> str:
        """`Layer/name` as the failure messages of a plan show a domain."""
        if self.layer == CLUSTER_LAYER or not self.path:
            return CLUSTER_LAYER
        return f"{self.layer}/{self.path[-1]}"


def placed_domain(tree: TopologyTree, layer: str, placed: Mapping[str, str]) -> GatherDomain | str | None:
    """The one domain of the MustGather `layer` that holds every placed member (`placed`: pod key ->
    node), None when no member is placed, or why the rest of the group has nowhere to go: a member
    is on a node outside the topology tree, or the members are in more than one domain (placed
    while the topology was unavailable, or bound by someone else)."""
    if not placed:
        return None
    by_path: dict[DomainPath, list[str]] = {}
    for key in sorted(placed):
        node = placed[key]
        node_path = tree.node_paths.get(node)
        if node_path is None:
            why = tree.excluded.get(node)
            detail = f" ({why})" if why else ""
            return (
                f"member {key} is on node {node}, which is not in the ClusterNetworkTopology's tree{detail}, "
                f"so the {layer} domain of the group cannot be told"
            )
        if layer == NODE_LAYER:
            path: DomainPath = (*node_path, node)
        else:
            path = node_path[: tree.chain.depth(layer)]
        by_path.setdefault(path, []).append(key)
    if len(by_path) > 1:
        listed = "; ".join(
            f"{'/'.join(path) or CLUSTER_LAYER}: {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
            for path, keys in sorted(by_path.items())
        )
        return (
            f"the members already placed are in {len(by_path)} {layer} domains ({listed}), "
            f"so no one {layer} domain holds the group"
        )
    ((path, _),) = by_path.items()
    if layer == NODE_LAYER:
        nodes = frozenset((path[-1],))
    else:
        nodes = frozenset(tree.leaves(path))
    return GatherDomain(layer, path, nodes)


# ============================================================================ the cluster's topology
TOPOLOGY_OBJECT_NAME = "default"


class ClusterTopologyView:
    """The scheduler's copy of ClusterNetworkTopology `default`: its layer chain (or why the spec is
    unusable), and the tree its nodes form, rebuilt when the nodes change.

    An object of any shape is taken without raising: a `default` with a bad spec is kept as present
    but unusable (`unavailable` says which field is wrong, and gangs are placed without topology);
    an object whose name cannot be read is ignored and logged, naming the field."""

    def __init__(self) -> None:
        self.present = False
        self.chain: LayerChain | None = None
        self.error: str | None = None
        self._tree: TopologyTree | None = None
        self._tree_key: tuple[int, int, int] | None = None

    def on_object(self, action: str, obj: Mapping[str, Any]) -> None:
        try:
            name, chain = parse_topology_object(obj)
        except TopologySpecError as err:
            named = _object_name(obj)
            if named is None:
                # which object this is cannot be told: it cannot be the one the scheduler uses
                log.error("ClusterNetworkTopology ignored: %s", err)
                return
            if named != TOPOLOGY_OBJECT_NAME:
                return
            self._reset()
            if action == "Delete":
                self.present, self.chain, self.error = False, None, None
                return
            log.error("ClusterNetworkTopology %r is invalid and is not used: %s", named, err)
            self.present, self.chain, self.error = True, None, str(err)
            return
        if name != TOPOLOGY_OBJECT_NAME:
            return
        self._reset()
        if action == "Delete":
            self.present, self.chain, self.error = False, None, None
            return
        self.present, self.chain, self.error = True, chain, None

    def _reset(self) -> None:
        self._tree = None
        self._tree_key = None

    def unavailable(self) -> str | None:
        """Why topology placement cannot be done now (None when it can)."""
        if not self.present:
            return f"there is no ClusterNetworkTopology named {TOPOLOGY_OBJECT_NAME!r}"
        if self.chain is None:
            return f"ClusterNetworkTopology {TOPOLOGY_OBJECT_NAME!r} is invalid: {self.error}"
        return None

    def tree(self, snapshot: Any) -> TopologyTree | None:
        if self.chain is None:
            return None
        key = (id(snapshot), snapshot.node_generation, id(self.chain))
        if self._tree is None or self._tree_key != key:
            nodes = (snapshot.info(row).node for row in snapshot.live_rows().tolist())
            self._tree = build_tree(self.chain, nodes)
            self._tree_key = key
        return self._tree


def _object_name(obj: object) -> str | None:
    """`metadata.name` of an object of any shape, when it is a string."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else None
