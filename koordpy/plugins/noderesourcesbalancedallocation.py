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

from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import MAX_NODE_SCORE, Plugin
from koordpy.framework.status import SKIP, Status
from koordpy.plugins.noderesourcesfit import DEFAULT_RESOURCES, ResourceSpec, node_usage, pod_score_request

NAME = "NodeResourcesBalancedAllocation"

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


def balanced_scores(fractions: list[np.ndarray], present: list[np.ndarray], size: int) -> np.ndarray:
    """(1 - std) * 100 per row over the present fractions, summed in resource order so the floating
    point result is the one kube-scheduler computes."""
    count = np.zeros(size, dtype=np.int64)
    total = np.zeros(size, dtype=np.float64)
    for f, p in zip(fractions, present):
        count += p
        total = total + np.where(p, f, 0.0)
    std = np.zeros(size, dtype=np.float64)
    two = count == 2
    if two.any():
        # the first and second present fraction: max - min of the present ones is the same
        # difference up to sign, which abs() removes exactly
        hi = np.full(size, -np.inf)
        lo = np.full(size, np.inf)
        for f, p in zip(fractions, present):
            hi = np.where(p, np.maximum(hi, f), hi)
            lo = np.where(p, np.minimum(lo, f), lo)
        std = np.where(two, np.abs((hi - lo) / 2), std)
    many = count > 2
    if many.any():
        mean = total / np.where(many, count, 1)
        sq = np.zeros(size, dtype=np.float64)
        for f, p in zip(fractions, present):
            d = f - mean
            sq = sq + np.where(p, d * d, 0.0)
        std = np.where(many, np.sqrt(sq / np.where(many, count, 1)), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


class NodeResourcesBalancedAllocation(Plugin):
    NAME = NAME
    Args = NodeResourcesBalancedAllocationArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        if not isinstance(args, NodeResourcesBalancedAllocationArgs):
            args = NodeResourcesBalancedAllocationArgs()
        self._names = [r.name for r in args.resources]

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
        fractions: list[np.ndarray] = []
        present: list[np.ndarray] = []
        for name, pod_request in zip(self._names, requests):
            usage = node_usage(snapshot, rows, name, pod_request, use_requested=True)
            if usage is None:
                continue
            alloc, requested = usage
            has = alloc != 0
            safe = np.where(has, alloc, 1).astype(np.float64)
            fractions.append(np.minimum(requested.astype(np.float64) / safe, 1.0))
            present.append(has)
        return balanced_scores(fractions, present, rows.size)
