"""VolumeBinding's score (kube's scorer.go, with StorageCapacityScoring, on by default in 1.37): per
storage class the pod's volumes would use on a node, how full that storage would be, through the
configured shape; the node's score is the mean over the classes, rounded.

- A node where some claim would be bound to an existing volume: per class of those volumes, the
  claims' requests against the volumes' capacities (the dynamically provisioned claims do not
  count there).
- Otherwise, per class of the claims to provision whose space a CSIStorageCapacity vouched for:
  the claims' requests against that capacity (the last one found for the class).
- Nothing of either: 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from koordpy.plugins.utilization_shape import broken_linear_table
from koordpy.plugins.volumebinding.args import (
    MAX_UTILIZATION,
    UtilizationShapePoint,
)
from koordpy.plugins.volumebinding.decisions import Decisions
from koordpy.plugins.volumebinding.matching import claim_class_name

Ints = npt.NDArray[np.int64]


def shape_table(shape: Sequence[UtilizationShapePoint]) -> Ints:
    """kube's BuildBrokenLinearFunction at every utilization 0..100, the shape's scores scaled to
    0..100: the same function as NodeResourcesFit's RequestedToCapacityRatio."""
    table: Ints = broken_linear_table(shape)
    return table


def _class_scores(table: Ints, requested: Ints, capacity: Ints) -> Ints:
    """The shape at requested/capacity, per row; no capacity, or more requested than there is,
    counts as full."""
    full = (capacity <= 0) | (requested > capacity)
    utilization = np.where(full, MAX_UTILIZATION, requested * MAX_UTILIZATION // np.maximum(capacity, 1))
    out: Ints = table[utilization]
    return out


class _Sums:
    """Per class: requested and capacity per row, and the rows the class is used on."""

    __slots__ = ("capacity", "requested", "used")

    def __init__(self, size: int) -> None:
        self.requested = np.zeros(size, dtype=np.int64)
        self.capacity = np.zeros(size, dtype=np.int64)
        self.used = np.zeros(size, dtype=bool)


def score_rows(decisions: Decisions, rows: npt.NDArray[np.int64], table: Ints) -> Ints:
    size = rows.size
    static = decisions.has_static[rows]
    sums: dict[str, _Sums] = {}
    for m in decisions.matches:
        choice = m.choice[rows]
        chosen = choice >= 0
        if not chosen.any():
            continue
        capacities = np.array([pv.capacity for pv in m.volumes] + [0], dtype=np.int64)[choice]
        # kube groups by the volume's class, which matching held equal to the claim's except for a
        # volume pre-bound to the claim
        for class_name in {pv.storage_class for pv in m.volumes}:
            in_class = np.array([pv.storage_class == class_name for pv in m.volumes] + [False])[choice]
            sums_of = sums.setdefault(class_name, _Sums(size))
            sums_of.requested += np.where(in_class, m.claim.request, 0)
            sums_of.capacity += np.where(in_class, capacities, 0)
            sums_of.used |= in_class
    for p in decisions.provisions:
        if not p.capacities:
            continue
        found = p.capacity[rows]
        here = (found >= 0) & ~static
        if p.match >= 0:
            here &= decisions.matches[p.match].choice[rows] < 0
        if not here.any():
            continue
        values = np.array([c.capacity or 0 for c in p.capacities] + [0], dtype=np.int64)[found]
        sums_of = sums.setdefault("\0" + claim_class_name(p.claim), _Sums(size))
        sums_of.requested += np.where(here, p.claim.request, 0)
        # the capacity is the storage's, not the claim's: the last one found stands
        sums_of.capacity = np.where(here, values, sums_of.capacity)
        sums_of.used |= here
    if not sums:
        return np.zeros(size, dtype=np.int64)
    total = np.zeros(size, dtype=np.int64)
    classes = np.zeros(size, dtype=np.int64)
    for s in sums.values():
        total += np.where(s.used, _class_scores(table, s.requested, s.capacity), 0)
        classes += s.used
    # math.Round(total / classes): half away from zero, here for non-negative numbers
    out: Ints = np.where(classes > 0, (2 * total + classes) // (2 * np.maximum(classes, 1)), 0)
    return out
