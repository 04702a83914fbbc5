"""The order in which Koordinator's topology solver hands a plan's nodes to the pods.

Its distribution (network_topology_solver.go: distributeOfferSlot, then distributePods) walks the
chosen domain depth first, each domain's children largest offer first, then highest score, then
name, and the pods fill the nodes in that order. koordpy's plan may choose the nodes by a score of
its own (job-level preemption's job-aware cost, which keeps victims' nodes out where it can); the
pods are then handed the chosen nodes in the order Koordinator's score would visit them, so each
member is nominated where Koordinator nominates it whenever both choose the same nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from koordpy.status.topology import TreeLevels


def in_visit_order(
    levels: TreeLevels,
    offer: Sequence[np.ndarray],
    score: Sequence[np.ndarray],
    depth: int,
    leaves: list[tuple[int, int]],
) -> list[tuple[int, int]]:
    """`leaves` ((node vertex, pods) pairs below a vertex of level `depth`) in depth-first order,
    the children of each domain by offer (largest first), then score (highest first), then path:
    `offer` and `score` hold each level's sums."""
    if len(leaves) < 2:
        return leaves
    vertex = np.fromiter((v for v, _ in leaves), dtype=np.int64, count=len(leaves))
    keys: list[np.ndarray] = []
    # np.lexsort sorts by its last key first: the deepest level goes in first, and within a level
    # the path, then the score, then the offer
    for d in range(levels.depth, depth, -1):
        keys += [vertex, -score[d][vertex], -offer[d][vertex]]
        vertex = levels.parents[d][vertex]
    return [leaves[i] for i in np.lexsort(keys).tolist()]
