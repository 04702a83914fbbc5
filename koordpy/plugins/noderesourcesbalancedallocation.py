"""NodeResourcesBalancedAllocation: favours nodes whose resources would be used evenly once the pod
is placed.

For each configured resource (cpu and memory by default) the fraction requested/allocatable is
taken after adding the pod, capped at 1; the score is (1 - standard deviation of the fractions) *
100, truncated. With two resources the deviation is |f1 - f2| / 2. Resources a node has none of
are left out, and so are scalar resources the pod does not request. This plugin uses the actual
requests of the pod and of the node's pods (not the 100m / 200Mi "non-zero" defaults), and a pod
that requests none of the configured resources is not scored at all (PreScore skips), as in
kube-scheduler 1.33.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, field_validator

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin
from koordpy.framework.status import SKIP, Status
from koordpy.plugins.noderesourcesfit import (
    DEFAULT_RESOURCES,
    AllocatableColumns,
    ResourceSpec,
    RowView,
    pod_score_request,
    requested_column,
    scored_column,
)

NAME = names.NODE_RESOURCES_BALANCED_ALLOCATION

_PRE_SCORE_KEY = "PreScore" + NAME


class BalancedResourceSpec(ResourceSpec):
    @field_validator("weight")
    @classmethod
    def _weight_one(cls, value: int) -> int:
        # weights mean nothing to a standard deviation; kube-scheduler accepts only 1
        if value != 1:
            raise ValueError("must be 1")
        return value


def _default_resources() -> list[BalancedResourceSpec]:
    return [BalancedResourceSpec(name=r.name, weight=r.weight) for r in DEFAULT_RESOURCES]


class NodeResourcesBalancedAllocationArgs(PluginArgs):
    resources: list[BalancedResourceSpec] = Field(default_factory=_default_resources)

    @field_validator("resources")
    @classmethod
    def _distinct(cls, resources: list[BalancedResourceSpec]) -> list[BalancedResourceSpec]:
        if not resources:
            return _default_resources()
        seen: set[str] = set()
        for r in resources:
            if r.name in seen:
                raise ValueError(f"duplicate resource name {r.name!r}")
            seen.add(r.name)
        return resources


def balanced_scores(fractions: list[np.ndarray], present: list[np.ndarray | None], size: int) -> np.ndarray:
    """(1 - std) * 100 per row over the fractions present on it (`None`: present everywhere),
    computed in resource order with the same floating point steps as kube-scheduler."""
    if all(p is None for p in present):
        if len(fractions) < 2:
            return np.full(size, MAX_NODE_SCORE, dtype=np.int64)
        if len(fractions) == 2:
            std = fractions[0] - fractions[1]
            std /= 2
            np.abs(std, out=std)
        else:
            total = fractions[0].copy()
            for f in fractions[1:]:
                total += f
            mean = total / len(fractions)
            sq = np.zeros(size, dtype=np.float64)
            for f in fractions:
                d = f - mean
                d *= d
                sq += d
            sq /= len(fractions)
            std = np.sqrt(sq)
        return _to_score(std)
    masks = [np.ones(size, dtype=bool) if p is None else p for p in present]
    count = np.zeros(size, dtype=np.int64)
    total = np.zeros(size, dtype=np.float64)
    for f, p in zip(fractions, masks):
        count += p
        total = total + np.where(p, f, 0.0)
    std = np.zeros(size, dtype=np.float64)
    two = count == 2
    if two.any():
        # the first and second present fraction: max - min of the present ones is the same
        # difference up to sign, which abs() removes exactly
        hi = np.full(size, -np.inf)
        lo = np.full(size, np.inf)
        for f, p in zip(fractions, masks):
            hi = np.where(p, np.maximum(hi, f), hi)
            lo = np.where(p, np.minimum(lo, f), lo)
        std = np.where(two, np.abs((hi - lo) / 2), std)
    many = count > 2
    if many.any():
        mean = total / np.where(many, count, 1)
        sq = np.zeros(size, dtype=np.float64)
        for f, p in zip(fractions, masks):
            d = f - mean
            sq = sq + np.where(p, d * d, 0.0)
        std = np.where(many, np.sqrt(sq / np.where(many, count, 1)), std)
    return _to_score(std)


def _to_score(std: np.ndarray) -> np.ndarray:
    # int64((1 - std) * MaxNodeScore): truncation, the value being non-negative
    score = 1 - std
    score *= MAX_NODE_SCORE
    return score.astype(np.int64)


class NodeResourcesBalancedAllocation(Plugin, PreScorePlugin, ScorePlugin):
    NAME = NAME
    Args = NodeResourcesBalancedAllocationArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        if not isinstance(args, NodeResourcesBalancedAllocationArgs):
            args = NodeResourcesBalancedAllocationArgs()
        self._names = [r.name for r in args.resources]
        self._columns = AllocatableColumns()

    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        requests = [pod_score_request(pod, n, True) for n in self._names]
        if not any(requests):
            # a best-effort pod would otherwise pile onto whichever node looks balanced
            return SKIP
        state.write(_PRE_SCORE_KEY, requests)
        return None

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        requests = state.read(_PRE_SCORE_KEY)
        if requests is None:
            requests = [pod_score_request(pod, n, True) for n in self._names]
            if not any(requests):
                return np.zeros(rows.size, dtype=np.int64)
        snapshot = self.handle.snapshot
        view = RowView(snapshot, rows)
        fractions: list[np.ndarray] = []
        present: list[np.ndarray | None] = []
        for name, pod_request in zip(self._names, requests):
            col = scored_column(snapshot, name, pod_request)
            if col is None:
                continue
            column = self._columns.column(snapshot, col)
            requested = requested_column(snapshot, view, name, col, use_requested=True) + pod_request
            fraction = requested / view.cached(column.safe_f)
            np.minimum(fraction, 1.0, out=fraction)
            fractions.append(fraction)
            present.append(view.cached(column.present) if column.missing_somewhere else None)
        size = view.hw if view.full else rows.size
        return view.result(balanced_scores(fractions, present, size))
