"""Scoring by network-topology selector: pods that carry the same
`scheduling.koordinator.sh/network-topology-selector` value are drawn into the topology domains
that already hold such pods, whether or not they belong to a gang.

The rules are those of Koordinator's Coscheduling PreScore/Score/NormalizeScore
(koordinator-sh/koordinator pkg/scheduler/plugins/coscheduling/core/network_topology_workflow.go
`PodGroupManager.PreScore`, `sortNodesByTopology`, `Score`; network_topology_solver.go
`calculateNodeExistingPodsNum`, `evaluateTopologyNode`; coscheduling.go `NormalizeScore`):

- A pod without the annotation (or with an empty value) is not scored: PreScore answers Skip.
- The feasible nodes are put in one order and scored by their place in it: the first gets 100,
  the last 0, the rest in between on a straight line (DefaultNormalizeScore reversed over the
  positions 0..n-1).
- The order: first the most pods carrying the same selector value (in any namespace, on any node
  of the snapshot, assumed pods included), compared on the node itself, then on its domain in
  each layer from the innermost up; then the fewest feasible nodes, again from the innermost
  domain up (the tightest domain that can take the pod, so that later pods still find room
  together); then the node name.

Where Koordinator has no answer koordpy chooses: with no usable ClusterNetworkTopology the pod is
not scored (Koordinator dereferences the missing tree), and feasible nodes outside the topology
(missing a layer's label) come after every node in it, by name (Koordinator dereferences their
missing tree node). Domains are told apart by their path from the top, as everywhere in koordpy,
where Koordinator merges domains of one layer that share a name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koordpy.api.pod import Pod
from koordpy.cache import Cache, Snapshot
from koordpy.framework.handle import Handle, SharedKey
from koordpy.framework.interfaces import MAX_NODE_SCORE, Rows, Scores
from koordpy.status.topology import TopologyTree

ANNOTATION_TOPOLOGY_SELECTOR = "scheduling.koordinator.sh/network-topology-selector"


def topology_selector(pod: Pod) -> str:
    return pod.annotations.get(ANNOTATION_TOPOLOGY_SELECTOR, "")


class SelectorIndex:
    """The pods the scheduler knows that carry a topology selector, by its value: scoring a pod
    looks at its peers only, never at every pod of the cluster."""

    def __init__(self) -> None:
        self._keys: dict[str, set[str]] = {}
        self._selector_of: dict[str, str] = {}

    def on_pod(self, action: str, pod: Pod) -> None:
        key = pod.key
        old = self._selector_of.pop(key, None)
        if old is not None:
            peers = self._keys[old]
            peers.discard(key)
            if not peers:
                del self._keys[old]
        selector = topology_selector(pod)
        if action != "Delete" and selector:
            self._selector_of[key] = selector
            self._keys.setdefault(selector, set()).add(key)

    def pods_with(self, selector: str) -> frozenset[str]:
        return frozenset(self._keys.get(selector, ()))


SELECTOR_INDEX: SharedKey[SelectorIndex] = SharedKey("coscheduling.topology-selectors")


def shared_selector_index(handle: Handle) -> SelectorIndex:
    def create() -> SelectorIndex:
        index = SelectorIndex()
        handle.on_pod_event(index.on_pod)
        return index

    return handle.share(SELECTOR_INDEX, create)


def peer_rows(index: SelectorIndex, selector: str, cache: Cache) -> np.ndarray:
    """The snapshot row of every pod with the selector that holds a node (bound or assumed), once
    per pod."""
    snap = cache.snapshot
    rows: list[int] = []
    for key in index.pods_with(selector):
        state = cache.pod_state(key)
        if state is None:
            continue
        row = snap.row_of.get(state.node_name)
        # a pod a what-if has taken off its node is not there for the what-if
        if row is not None and key in snap.info(row).pods:
            rows.append(row)
    return np.array(rows, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class TreeColumns:
    """The topology tree as columns over snapshot rows."""

    in_tree: np.ndarray
    # for each domain layer from the top down: the row's domain id in that layer, -1 outside
    domain_ids: tuple[np.ndarray, ...]
    domain_counts: tuple[int, ...]
    # the node's place among all nodes by name
    name_rank: np.ndarray


def tree_columns(tree: TopologyTree, snap: Snapshot) -> TreeColumns:
    capacity = snap.capacity
    layers = len(tree.chain.domain_layers)
    in_tree = np.zeros(capacity, dtype=bool)
    ids = [np.full(capacity, -1, dtype=np.int64) for _ in range(layers)]
    numbering: list[dict[tuple[str, ...], int]] = [{} for _ in range(layers)]
    for name, path in tree.node_paths.items():
        row = snap.row_of.get(name)
        if row is None:
            continue
        in_tree[row] = True
        for depth in range(layers):
            seen = numbering[depth]
            ids[depth][row] = seen.setdefault(path[: depth + 1], len(seen))
    live = snap.live_rows()
    name_rank = np.zeros(capacity, dtype=np.int64)
    by_name = sorted(live.tolist(), key=snap.node_name)
    name_rank[np.array(by_name, dtype=np.int64)] = np.arange(len(by_name), dtype=np.int64)
    return TreeColumns(in_tree, tuple(ids), tuple(len(n) for n in numbering), name_rank)


def preference_positions(cols: TreeColumns, candidates: Rows, peers: np.ndarray) -> Scores:
    """Each candidate's place (0 first) in the order of the module doc, among `candidates`;
    `peers` holds a row per placed pod with the selector."""
    n = candidates.size
    inside = cols.in_tree[candidates]
    outside_key = (~inside).astype(np.int64)
    on_node = np.zeros(cols.in_tree.size, dtype=np.int64)
    np.add.at(on_node, peers, 1)
    node_peers = np.where(inside, on_node[candidates], 0)
    offer_keys: list[np.ndarray] = []
    peer_keys: list[np.ndarray] = []
    for ids, count in zip(cols.domain_ids, cols.domain_counts, strict=True):
        # nodes outside the tree share one extra bucket; they are ordered apart anyway
        bucket = np.where(inside, ids[candidates], count)
        offers = np.bincount(bucket, minlength=count + 1)
        peer_domains = ids[peers]
        held = np.bincount(peer_domains[peer_domains >= 0], minlength=count + 1)
        offer_keys.append(offers[bucket])
        peer_keys.append(-held[bucket])
    # np.lexsort sorts by its last key first: outside, then peers from the node up, then offers
    # from the innermost domain up, then the name
    keys = [cols.name_rank[candidates], *offer_keys, *peer_keys, -node_peers, outside_key]
    order = np.lexsort(keys)
    positions = np.empty(n, dtype=np.int64)
    positions[order] = np.arange(n, dtype=np.int64)
    return positions


def normalize_positions(positions: Scores) -> Scores:
    """DefaultNormalizeScore reversed, as Koordinator's NormalizeScore: position 0 gets 100, the
    last 0, integer division as in Go; all 100 when there is one candidate."""
    if positions.size == 0:
        return positions
    last = int(positions.max())
    if last == 0:
        return np.full(positions.size, MAX_NODE_SCORE, dtype=np.int64)
    scaled: Scores = MAX_NODE_SCORE - positions * MAX_NODE_SCORE // last
    return scaled
