"""Network-topology-aware placement of a gang group: the gather rules a gang asks for, and the plan
that puts the whole group into the smallest topology domain that can hold it.

The plan is made in three steps:

1. Offer slots (`koordpy.plugins.coscheduling.offers`): for every node, how many of the group's
   pods fit there one after the other.
2. The tree (`koordpy.status.topology`, as arrays with one level per layer, made once per tree)
   sums the offers up to the cluster, a layer at a time. `podCountMultiple` rounds each domain of
   a layer down to a multiple; MustGather limits the search to the domains of its layer; the
   deepest level of the tree on which some domain still offers enough slots gives the
   candidates, and the tightest fit among them wins (smallest offer, then the parents' offers,
   then the highest score, then the name). Nothing here walks every node in Python.
3. The winner's slots are handed out to its children largest offer first, down to the nodes, and
   the pods, in network-topology-index order (then name), fill the nodes in that order: pods with
   consecutive indices share the lowest domain they can.

Members placed later (beyond minMember, replacements, members that did not fit in the first pass)
are held to the MustGather domain the group's placed members are in (`placed_domain`); see the
Coscheduling plugin for where, and for which gang's rules a gang group follows.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordpy.api.pod import Pod
from koordpy.plugins.coscheduling.offers import Offers
from koordpy.plugins.coscheduling.visit_order import in_visit_order

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
    TreeLevels,
    brief,
    build_tree,
    parse_topology_object,
    update_tree,
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


@dataclass(slots=True)
class _Offers:
    """A gang's offers summed up the tree (`TreeLevels`), rounded down to the multiples: per level,
    each vertex's offer and (when the caller ranks nodes) score."""

    levels: TreeLevels
    offer: list[np.ndarray]
    score: list[np.ndarray] | None
    # the podCountMultiple of each level (1: none)
    multiple: list[int]


def _sum_offers(
    levels: TreeLevels,
    chain: LayerChain,
    node_slots: np.ndarray,
    node_scores: np.ndarray | None,
    multiples: Mapping[str, int],
) -> _Offers:
    bottom = levels.depth
    multiple = [multiples.get(layer, 1) for layer in chain.order[: bottom + 1]]
    offer: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * (bottom + 1)
    score: list[np.ndarray] | None = None
    m = multiple[bottom]
    offer[bottom] = node_slots - node_slots % m if m > 1 else node_slots
    if node_scores is not None:
        score = [np.zeros(0, dtype=np.float64)] * (bottom + 1)
        score[bottom] = node_scores
    for d in range(bottom - 1, -1, -1):
        n = len(levels.paths[d])
        below = offer[d + 1]
        if below.size:
            # every domain has a node below it: no segment is empty
            total = np.add.reduceat(below, levels.starts[d][:-1])
        else:
            total = np.zeros(n, dtype=np.int64)
        m = multiple[d]
        offer[d] = total - total % m if m > 1 else total
        if score is not None:
            # the scores callers give are whole numbers (job-level preemption's victim costs):
            # below 2**53 their sums are exact whatever order numpy adds them in
            below_score = score[d + 1]
            score[d] = (
                np.add.reduceat(below_score, levels.starts[d][:-1])
                if below_score.size
                else np.zeros(n, dtype=np.float64)
            )
    return _Offers(levels, offer, score, multiple)


def _ranked(t: _Offers, depth: int, candidates: np.ndarray) -> Iterator[int]:
    """The candidates of a level, tightest fit first: the vertex's own offer, then each
    ancestor's (smallest first), then the highest score, then the path. The first is found by
    narrowing on one key after the other (usually all a plan needs); the rest are sorted only
    when it is asked for more."""
    keys: list[np.ndarray] = [t.offer[depth][candidates]]
    above = candidates
    for d in range(depth, 0, -1):
        above = t.levels.parents[d][above]
        keys.append(t.offer[d - 1][above])
    if t.score is not None:
        keys.append(-t.score[depth][candidates])
    # the candidates are in path order already: the last tie-break is their position
    best = np.arange(candidates.size)
    for key in keys:
        if best.size == 1:
            break
        values = key[best]
        best = best[values == values.min()]
    first = int(best[0])
    yield int(candidates[first])
    if candidates.size == 1:
        return
    # np.lexsort sorts by its last key first; the positions are the path order
    for i in np.lexsort([np.arange(candidates.size), *keys[::-1]]).tolist():
        if i != first:
            yield int(candidates[i])


def _distribute(t: _Offers, depth: int, v: int, want: int, out: list[tuple[int, int]]) -> int:
    """Hand out up to `want` of the vertex's slots to its children, largest offer first (then
    highest score, then path), down to the nodes; (node vertex, pods) pairs go to `out`."""
    m = t.multiple[depth]
    cap = min(int(t.offer[depth][v]), want)
    cap -= cap % m
    if cap <= 0:
        return 0
    if depth == t.levels.depth:
        out.append((v, cap))
        return cap
    lo = int(t.levels.starts[depth][v])
    hi = int(t.levels.starts[depth][v + 1])
    offers = t.offer[depth + 1][lo:hi]
    if t.score is None:
        # a stable sort keeps path order among equal offers
        order = np.argsort(-offers, kind="stable")
    else:
        order = np.lexsort((np.arange(hi - lo), -t.score[depth + 1][lo:hi], -offers))
    given = 0
    mark = len(out)
    for i in order.tolist():
        # the children after one that offers nothing offer nothing either
        if given >= cap or offers[i] <= 0:
            break
        given += _distribute(t, depth + 1, lo + i, cap - given, out)
    if given % m:
        # the children could not make up a multiple: this domain takes nothing
        del out[mark:]
        return 0
    return given


def plan_levels(
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    pods: Sequence[Pod],
    node_slots: np.ndarray,
    node_scores: np.ndarray | None = None,
    visit_scores: np.ndarray | None = None,
) -> Placement | NoPlacement:
    """Where each of `pods` (already in placement order) goes, or why the group fits no domain.
    `node_slots` is each node's offer for these pods and `node_scores` (higher is better) break
    ties, both per node vertex of `tree.levels()`; `visit_scores`, when given, order the chosen
    nodes for the pods in their stead (`visit_order`)."""
    desired = len(pods)
    chain = tree.chain
    levels = tree.levels()
    multiples = spec.multiples()
    t = _sum_offers(levels, chain, node_slots, node_scores, multiples)
    must = spec.must_gather_layer(chain)
    top = 0 if must is None else chain.depth(must)
    fits = t.offer[top] >= desired
    if not fits.any():
        return NoPlacement(_no_domain_message(t, must, top, desired, multiples, fits=False))
    # every level of the tree that has domains holding the group, from the top down: a domain
    # counts when its parent does and it holds the group itself
    found = [(top, fits)]
    for d in range(top + 1, levels.depth + 1):
        fits = fits[levels.parents[d]] & (t.offer[d] >= desired)
        if not fits.any():
            break
        found.append((d, fits))
    # the deepest level first; a level whose domains cannot split the pods as the multiples ask
    # gives way to the one above it
    for depth, mask in reversed(found):
        for candidate in _ranked(t, depth, np.flatnonzero(mask)):
            leaves: list[tuple[int, int]] = []
            if _distribute(t, depth, candidate, desired, leaves) < desired:
                continue
            if visit_scores is not None:
                summed = _sum_offers(levels, chain, node_slots, visit_scores, multiples).score
                assert summed is not None
                leaves = in_visit_order(levels, t.offer, summed, depth, leaves)
            nodes: dict[str, str] = {}
            it = iter(pods)
            for leaf, n in leaves:
                name = levels.nodes[leaf]
                for _ in range(n):
                    nodes[next(it).key] = name
            return Placement(nodes, levels.paths[depth][candidate], chain.order[depth])
    return NoPlacement(_no_domain_message(t, must, top, desired, multiples, fits=True))


def plan_placement(
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    pods: Sequence[Pod],
    slots: Mapping[str, int],
    scores: Mapping[str, float] | None = None,
) -> Placement | NoPlacement:
    """`plan_levels` with the offers (and scores) by node name; nodes outside the tree are left out."""
    levels = tree.levels()
    node_slots = np.zeros(len(levels.nodes), dtype=np.int64)
    for name, n in slots.items():
        i = levels.node_index.get(name)
        if i is not None:
            node_slots[i] = int(n)
    return plan_levels(tree, spec, pods, node_slots, _node_scores(levels, scores))


def _node_scores(levels: TreeLevels, scores: Mapping[str, float] | None) -> np.ndarray | None:
    if not scores:
        return None
    out = np.zeros(len(levels.nodes), dtype=np.float64)
    for name, score in scores.items():
        i = levels.node_index.get(name)
        if i is not None:
            out[i] = float(score)
    return out


def plan_with_offers(
    profile: Any,
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    pods: Sequence[Pod],
    offers: Offers,
    scores: Mapping[str, float] | None = None,
    visit: Mapping[str, float] | None = None,
) -> Placement | NoPlacement:
    """Plan from the offers; when they are resource bounds, check the planned nodes with the real
    filters and plan again until every node used has been checked (each round lowers an offer or
    ends, so this stops). `visit` scores order the chosen nodes for the pods (`plan_levels`)."""
    snap = profile.handle.snapshot
    levels = tree.levels()
    rows = levels.rows(snap.row_of, (id(snap), snap.node_generation))
    node_scores = _node_scores(levels, scores)
    visit_scores = None if visit is None else _node_scores(levels, visit)
    if visit is not None and visit_scores is None:
        visit_scores = np.zeros(len(levels.nodes), dtype=np.float64)
    inside = rows >= 0
    every = bool(inside.all())
    while True:
        node_slots = offers.slots[rows] if every else np.where(inside, offers.slots[rows], 0)
        plan = plan_levels(tree, spec, pods, node_slots, node_scores, visit_scores)
        if not isinstance(plan, Placement) or not offers.kinds:
            return plan
        used = sorted({snap.row_of[n] for n in plan.nodes.values()})
        if not offers.settle(profile, used):
            return plan


def _no_domain_message(
    t: _Offers,
    must: str | None,
    top: int,
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
        offered = int(t.offer[0][0])
        head = f"the cluster's topology offers {offered} of the {desired} pod slots the gang group needs"
    else:
        offer = t.offer[top]
        paths = t.levels.paths[top]
        # largest offer first, then path (the level's order)
        shown = np.lexsort((np.arange(offer.size), -offer)).tolist()
        last = Counter(p[-1] for p in paths)
        # a name shared by domains under different parents is shown with its path
        listed = ", ".join(
            f"{must}/{'/'.join(paths[i]) if last[paths[i][-1]] > 1 else paths[i][-1]}: {int(offer[i])}"
            for i in shown[:10]
        )
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


# above this many nodes changed at once (a bulk relabel, the first list), building the tree anew
# costs less than updating it node by node
_UPDATED_NODES_LIMIT = 64


@dataclass(slots=True)
class _TreeInputs:
    """What a tree was made from, as the snapshot held it: the node record of each row and the
    codes of the label keys the layers read. Nothing else of a node reaches the tree, so a node
    update that leaves these alone (a condition, allocatable, a taint, an annotation) leaves the
    tree alone."""

    snapshot_id: int
    node_generation: int
    chain: LayerChain
    # `Snapshot.infos` up to its high-water row: a node keeps its record (and row) for its life,
    # so the same record in the same row means the same node there; holding them keeps their
    # identities from being reused
    infos: list[Any]
    # per label key the layers read: the column (None before any node had the key) and its codes
    columns: tuple[tuple[Any, np.ndarray], ...]


def _label_keys(chain: LayerChain) -> tuple[str, ...]:
    return tuple(dict.fromkeys(k for layer in chain.domain_layers for k in layer.label_keys))


def _tree_inputs(snapshot: Any, chain: LayerChain) -> _TreeInputs:
    top = snapshot.high_water
    columns = []
    for key in _label_keys(chain):
        col = snapshot.labels.get(key)
        codes = col.codes[:top].copy() if col is not None else np.full(top, -1, dtype=np.int32)
        columns.append((col, codes))
    return _TreeInputs(id(snapshot), snapshot.node_generation, chain, snapshot.infos[:top], tuple(columns))


def _changed_rows(seen: _TreeInputs, now: _TreeInputs) -> list[int] | None:
    """The rows whose node came, went, or changed a label the layers read since `seen`; None
    when that cannot be told row by row (another snapshot, a column made anew)."""
    if seen.snapshot_id != now.snapshot_id or seen.chain is not now.chain:
        return None
    top = max(len(seen.infos), len(now.infos))
    changed: set[int] = set()
    if seen.infos != now.infos:
        before = seen.infos + [None] * (top - len(seen.infos))
        after = now.infos + [None] * (top - len(now.infos))
        changed.update(r for r in range(top) if before[r] is not after[r])
    for (old_col, old_codes), (col, codes) in zip(seen.columns, now.columns, strict=True):
        if old_col is not None and old_col is not col:
            return None
        if old_codes.size < top:
            old_codes = np.concatenate([old_codes, np.full(top - old_codes.size, -1, dtype=old_codes.dtype)])
        if codes.size < top:
            codes = np.concatenate([codes, np.full(top - codes.size, -1, dtype=codes.dtype)])
        changed.update(np.flatnonzero(old_codes != codes).tolist())
    return sorted(changed)


class ClusterTopologyView:
    """The scheduler's copy of ClusterNetworkTopology `default`: its layer chain (or why the spec is
    unusable), and the tree its nodes form.

    The tree is looked at when a plan asks for it, never on a node event: when nodes changed since,
    it is kept if none came, went or changed a label the layers read (status heartbeats, conditions,
    allocatable), updated node by node when a few did, and built anew otherwise. Free capacity is
    never part of it: plans read it from the snapshot's arrays.

    An object of any shape is taken without raising: a `default` with a bad spec is kept as present
    but unusable (`unavailable` says which field is wrong, and gangs are placed without topology);
    an object whose name cannot be read is ignored and logged, naming the field."""

    def __init__(self) -> None:
        self.present = False
        self.chain: LayerChain | None = None
        self.error: str | None = None
        self._tree: TopologyTree | None = None
        self._inputs: _TreeInputs | None = None
        # how the trees handed out were made (the topology benchmark and tests read these)
        self.builds = 0
        self.updates = 0

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
        self._inputs = None

    def unavailable(self) -> str | None:
        """Why topology placement cannot be done now (None when it can)."""
        if not self.present:
            return f"there is no ClusterNetworkTopology named {TOPOLOGY_OBJECT_NAME!r}"
        if self.chain is None:
            return f"ClusterNetworkTopology {TOPOLOGY_OBJECT_NAME!r} is invalid: {self.error}"
        return None

    def tree(self, snapshot: Any) -> TopologyTree | None:
        chain = self.chain
        if chain is None:
            return None
        seen, tree = self._inputs, self._tree
        if (
            seen is not None
            and tree is not None
            and seen.snapshot_id == id(snapshot)
            and seen.node_generation == snapshot.node_generation
            and seen.chain is chain
        ):
            return tree
        now = _tree_inputs(snapshot, chain)
        changed = _changed_rows(seen, now) if seen is not None and tree is not None else None
        if (
            tree is not None
            and seen is not None
            and changed is not None
            and len(changed) <= _UPDATED_NODES_LIMIT
        ):
            if changed:
                removed = [info.node.name for r in changed if r < len(seen.infos) and (info := seen.infos[r])]
                placed = [info.node for r in changed if r < len(now.infos) and (info := now.infos[r])]
                self._tree = update_tree(tree, removed, placed)
                self.updates += 1
            else:
                # the same nodes in the same rows: the plans' row lookups hold too
                levels = tree.made_levels()
                if levels is not None:
                    levels.rows_still_hold(
                        (seen.snapshot_id, seen.node_generation), (now.snapshot_id, now.node_generation)
                    )
        else:
            nodes = (snapshot.info(row).node for row in snapshot.live_rows().tolist())
            self._tree = build_tree(chain, nodes)
            self.builds += 1
        self._inputs = now
        return self._tree


def _object_name(obj: object) -> str | None:
    """`metadata.name` of an object of any shape, when it is a string."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else None
