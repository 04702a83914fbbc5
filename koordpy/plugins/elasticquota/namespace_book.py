"""scheduler-plugins' quota book (`scheduling.x-k8s.io`): one quota per namespace, min and max (see
book.py for what a book keeps)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from koordpy.api.elasticquota import X_K8S_GROUP
from koordpy.api.pod import Pod
from koordpy.api.resources import MAX_AMOUNT, ResourceList, add_into
from koordpy.cache import Snapshot
from koordpy.plugins.elasticquota.book import (
    NO_ROW,
    Ask,
    QuotaBook,
    QuotaFigures,
    Taken,
    figures_amounts,
    figures_text,
    format_amounts,
)
from koordpy.quota.admission import capacity_admit
from koordpy.quota.tree import (
    UNLIMITED,
    BoolArray,
    Int64Array,
    NamespaceQuotas,
    QuotaProblem,
    build_namespace_quotas,
)


class NamespaceBook(QuotaBook):
    """scheduler-plugins' quotas (`scheduling.x-k8s.io`): one per namespace, min and max."""

    api_group = X_K8S_GROUP

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__(snapshot)
        self.quotas: NamespaceQuotas = build_namespace_quotas(())

    def _build(self) -> None:
        self.quotas = build_namespace_quotas(self.objects.values())
        self.resources = self.quotas.resources

    def _size(self) -> int:
        return self.quotas.size

    def _place(self, pod: Pod) -> tuple[str, int]:
        row = self.quotas.rows.get(pod.namespace)
        return (pod.namespace, row) if row is not None else ("", NO_ROW)

    def _holds_back(self, pod: Pod, row: int) -> bool:
        return row >= 0 and self.quotas.row_problems[row] is not None

    def _vector(self, amounts: Mapping[str, int]) -> Int64Array:
        return self.quotas.vector(amounts)

    def _row_of_quota(self, key: str) -> int:
        row = self.quotas.rows.get(key)
        return NO_ROW if row is None else row

    def problem_of(self, pod: Pod) -> QuotaProblem | None:
        self.ensure()
        return self.quotas.problem_of(pod.namespace)

    def used(self, taken: Taken | None = None) -> Int64Array:
        self.ensure()
        return self.without(self._used, taken)

    def check(self, ask: Ask, taken: Taken | None = None) -> str | None:
        used = self.used(taken)
        parts = list(ask.parts.items())
        for i, (namespace, part) in enumerate(parts):
            # the other namespaces' share of a group counts in the total, as pods nominated there do
            elsewhere = dict(ask.nominated_elsewhere)
            for j, (_, other) in enumerate(parts):
                if j != i:
                    add_into(elsewhere, other.request)
            message = capacity_admit(
                self.quotas,
                used,
                namespace,
                part.request,
                nominated_in_quota=ask.nominated_in_quota,
                nominated_elsewhere=elsewhere,
            )
            if message is not None:
                return ask.explain(message)
        return None

    def over_min(self, used: Int64Array | None = None) -> BoolArray:
        """Per row, whether the quota uses more than its min in some resource (usedOverMin)."""
        used = self.used() if used is None else used
        over: BoolArray = np.any(used > self.quotas.min, axis=1) & self.quotas.valid
        return over

    def within_min(self, ask: Ask) -> bool:
        """CapacityScheduling's `!usedOverMinWith(nominatedPodsReqInEQWithPodReq)` for the ask's
        namespace: cpu, memory, ephemeral-storage and pods always compared, other resources where
        the ask requests them (against a min of 0 where the min does not name them)."""
        quotas = self.quotas
        used = self.used()
        for namespace, part in ask.parts.items():
            row = quotas.rows.get(namespace)
            if row is None:
                continue
            request = dict(part.request)
            add_into(request, ask.nominated_in_quota)
            vec = quotas.vector(request)
            checked = quotas.core | (vec > 0)
            if np.any((used[row] + vec > quotas.min[row]) & checked) or quotas.off_axis(request):
                return False
        return True

    def victim_mask(self, preemptor: Pod, ask: Ask, candidates: Sequence[Pod]) -> BoolArray:
        """CapacityScheduling's SelectVictimsOnNode: a preemptor of no quota evicts lower-priority
        pods of no quota; one whose quota stays within its min evicts pods of other quotas that
        use more than their min, whatever their priority; any other evicts lower-priority pods of
        its own quota."""
        n = len(candidates)
        if n == 0:
            return np.zeros(0, dtype=np.bool_)
        rows = np.fromiter((self.quotas.rows.get(c.namespace, NO_ROW) for c in candidates), np.int64, n)
        priority = np.fromiter((c.priority for c in candidates), dtype=np.int64, count=n)
        lower: BoolArray = priority < preemptor.priority
        own = self.quotas.rows.get(preemptor.namespace)
        if own is None:
            mine: BoolArray = lower & (rows < 0)
            return mine
        if not self.within_min(ask):
            ours: BoolArray = lower & (rows == own)
            return ours
        over = self.over_min()
        known = rows >= 0
        borrowing: BoolArray = np.zeros(n, dtype=np.bool_)
        borrowing[known] = over[rows[known]]
        others: BoolArray = borrowing & (rows != own)
        return others

    def share(self, pod: Pod) -> float:
        row = self.quotas.rows.get(pod.namespace)
        if row is None:
            return 0.0
        used = self.used()[row]
        limit = np.where(self.quotas.min[row] > 0, self.quotas.min[row], self.quotas.max[row])
        managed = (limit > 0) & (limit < UNLIMITED)
        if not managed.any():
            return 0.0
        return float(np.max(used[managed] / limit[managed]))

    def summary(self) -> list[dict[str, Any]]:
        self.ensure()
        quotas = self.quotas
        used = self.used()
        pending = self.pending_pods()
        rows: list[dict[str, Any]] = []
        for quota in sorted(self.objects.values(), key=lambda q: (q.namespace, q.name)):
            row = quotas.rows.get(quota.namespace)
            holder = quotas.quotas[row] if row is not None else None
            problem = quotas.problems.get(quota.key)
            # the row's figures are this object's (None: another quota of the namespace holds it)
            at = row if row is not None and holder is quota else None
            named = set(quota.min) | set(quota.max or {})
            mask = np.array([n in named for n in quotas.resources], dtype=np.bool_)
            rows.append(
                {
                    "namespace": quota.namespace,
                    "name": quota.name,
                    "apiGroup": X_K8S_GROUP,
                    "parent": None,
                    "min": format_amounts(quota.min),
                    "max": format_amounts(quota.max or {}),
                    "runtime": None,
                    "request": None,
                    "used": figures_text(quotas.resources, used[at], mask) if at is not None else {},
                    "pendingPods": int(pending[at]) if at is not None else 0,
                    "problem": problem.message if problem is not None else None,
                }
            )
        return rows

    def figures(self) -> list[QuotaFigures]:
        """min and max as the spec states them, and used (what the quota's placed and reserved
        pods request, in the resources the spec names or the pods use), of every quota without
        a problem."""
        if not self.active:
            return []
        self.ensure()
        quotas = self.quotas
        used = self.used()
        pending = self.pending_pods()
        out: list[QuotaFigures] = []
        for row, quota in enumerate(quotas.quotas):
            if not quotas.valid[row]:
                continue
            named = np.array(
                [n in quota.min or n in (quota.max or {}) for n in quotas.resources], dtype=np.bool_
            )
            out.append(
                QuotaFigures(
                    namespace=quota.namespace,
                    name=quota.name,
                    parent="",
                    tree_id="",
                    is_parent=False,
                    fields={
                        "min": dict(quota.min),
                        "max": dict(quota.max or {}),
                        "used": figures_amounts(quotas.resources, used[row], named | (used[row] > 0)),
                    },
                    pending_pods=int(pending[row]),
                )
            )
        return out


def nominated_requests(
    book: NamespaceBook, pod: Pod, nominated: Iterable[Pod], members: frozenset[str]
) -> tuple[ResourceList, ResourceList]:
    """CapacityScheduling's PreFilter view of the pods nominated to nodes: those of the pod's
    namespace at no lower priority, and those of namespaces whose quota is within its min.

    One pass with the amounts added as plain integers and capped once at the end: requests never
    go below 0, so the capped sum equals add_into's running cap, without its call and cap per pod.
    (Gathering each pod's vector to sum them as arrays costs more than adding its few amounts.)"""
    book.ensure()
    rows = book.quotas.rows
    namespace, priority, own_key = pod.namespace, pod.priority, pod.key
    in_quota: dict[str, int] = {}
    elsewhere: dict[str, int] = {}
    over: list[bool] | None = None
    for other in nominated:
        key = other.key
        if key == own_key or key in members:
            continue
        row = rows.get(other.namespace)
        if row is None:
            continue
        if other.namespace == namespace:
            if other.priority < priority:
                continue
            acc = in_quota
        else:
            if over is None:
                over = book.over_min().tolist()
            if over[row]:
                continue
            acc = elsewhere
        get = acc.get
        for name, amount in other.requests.items():
            acc[name] = get(name, 0) + amount
    return _capped(in_quota), _capped(elsewhere)


def _capped(amounts: dict[str, int]) -> ResourceList:
    for name, amount in amounts.items():
        if amount > MAX_AMOUNT:
            amounts[name] = MAX_AMOUNT
    return amounts
