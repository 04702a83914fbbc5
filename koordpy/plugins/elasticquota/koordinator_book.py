"""Koordinator's quota book (`scheduling.sigs.k8s.io`): a tree, runtime quota, pods by label (see
book.py for what a book keeps)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordpy.api.elasticquota import KOORDINATOR_GROUP, PodQuota, is_non_preemptible, quota_of_pod
from koordpy.api.pod import Pod
from koordpy.api.resources import ResourceList
from koordpy.cache import Snapshot
from koordpy.plugins.elasticquota.book import (
    NO_ROW,
    Ask,
    Entry,
    QuotaBook,
    QuotaFigures,
    Taken,
    figures_amounts,
    figures_text,
    format_amounts,
)
from koordpy.quota.admission import koordinator_admit, koordinator_admit_ancestors, leaf_ask
from koordpy.quota.runtime import RuntimeQuota, runtime_state, subtree_sums
from koordpy.quota.tree import (
    DEFAULT_ROW,
    SYSTEM_ROW,
    BoolArray,
    Int64Array,
    QuotaProblem,
    QuotaTree,
    build_quota_tree,
)


@dataclass(frozen=True, slots=True)
class KoordinatorRules:
    """The ElasticQuotaArgs a check follows (per profile: the book is the scheduler's)."""

    enable_runtime_quota: bool = True
    check_parents: bool = False
    disable_default_quota_preemption: bool = True


class KoordinatorBook(QuotaBook):
    """Koordinator's quotas (`scheduling.sigs.k8s.io`): a tree, runtime quota, pods by label."""

    api_group = KOORDINATOR_GROUP

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        system_max: ResourceList | None = None,
        default_max: ResourceList | None = None,
        scale_min: bool = True,
    ) -> None:
        super().__init__(snapshot)
        self.system_max = system_max
        self.default_max = default_max
        self.scale_min = scale_min
        self.tree: QuotaTree = build_quota_tree((), system_max=system_max, default_max=default_max)
        self._runtime: RuntimeQuota | None = None
        self._runtime_key: tuple[int, int, int] = (-1, -1, -1)
        self._total_key = (-1, -1)
        self._total: Int64Array = np.zeros(0, dtype=np.int64)
        self._used_tree: Int64Array | None = None
        self._np_tree: Int64Array | None = None
        self._used_key = -1

    def _build(self) -> None:
        self.tree = build_quota_tree(
            self.objects.values(), system_max=self.system_max, default_max=self.default_max
        )
        self.resources = self.tree.resources
        self._runtime = None
        self._used_tree = self._np_tree = None

    def _size(self) -> int:
        return self.tree.size

    def _place(self, pod: Pod) -> tuple[str, int]:
        found = quota_of_pod(pod, self.tree.index)
        assert found is not None  # Koordinator gives every pod a quota
        # a pod its quota cannot take (see QuotaTree.pod_problem) is held, and counts nowhere
        if self.tree.pod_problem(found) is not None:
            return found.name, NO_ROW
        return found.name, self.tree.rows[found.name]

    def _holds_back(self, pod: Pod, row: int) -> bool:
        # _place leaves only the pods their quota holds out of every row
        return row == NO_ROW

    def _vector(self, amounts: Mapping[str, int]) -> Int64Array:
        return self.tree.vector(amounts)

    def _row_of_quota(self, key: str) -> int:
        row = self.tree.rows.get(key)
        return NO_ROW if row is None else row

    def _pod_quota(self, pod: Pod, entry: Entry) -> PodQuota | None:
        return quota_of_pod(pod, self.tree.index)

    def _used_changed(self, row: int) -> None:
        # what the system and default quotas use comes off the total the tree shares out
        if row in (SYSTEM_ROW, DEFAULT_ROW):
            self._request_version += 1

    def problem_of(self, pod: Pod) -> QuotaProblem | None:
        if not self.active:
            # Koordinator counts a pod naming a missing quota in its default quota; before any quota
            # exists that is all there is, so nothing holds the pod (it is held only once quotas
            # are in use: see quota_of_pod)
            return None
        self.ensure()
        found = quota_of_pod(pod, self.tree.index)
        return self.tree.pod_problem(found) if found is not None else None

    # ------------------------------------------------------------------ derived
    def total(self) -> Int64Array:
        """The cluster's allocatable on the tree's axis (what the root quota stands for)."""
        snap = self.snapshot
        key = (snap.node_generation, self._tree_version)
        if key != self._total_key:
            rows = snap.live_rows()
            total = np.zeros(len(self.resources), dtype=np.int64)
            for j, name in enumerate(self.resources):
                col = snap.resource_col.get(name)
                if col is not None:
                    total[j] = int(snap.allocatable_column(col, rows).sum(dtype=np.int64))
            self._total, self._total_key = total, key
        return self._total

    def runtime(self, *, fresh: bool = True) -> RuntimeQuota:
        """The runtime quota of every quota; `fresh` False takes the last one computed for this
        tree, if any (the queue's order needs no more)."""
        self.ensure()
        if not fresh and self._runtime is not None and self._runtime_key[0] == self._tree_version:
            return self._runtime
        total = self.total()
        key = (self._tree_version, self._request_version, self.snapshot.node_generation)
        if self._runtime is None or key != self._runtime_key:
            self._runtime = runtime_state(
                self.tree, self._request, total, used=self._used, scale_min=self.scale_min
            )
            self._runtime_key = key
        return self._runtime

    def used(self) -> tuple[Int64Array, Int64Array]:
        """(used, non-preemptible used) of each quota with everything below it, as Koordinator
        keeps them."""
        self.ensure()
        if self._used_tree is None or self._np_tree is None or self._used_key != self._used_version:
            self._used_tree = subtree_sums(self.tree, self._used)
            self._np_tree = subtree_sums(self.tree, self._np)
            self._used_key = self._used_version
        return self._used_tree, self._np_tree

    def without(self, used: Int64Array, taken: Taken | None) -> Int64Array:
        """Used of each quota and its ancestors, less what the taken pods held."""
        if not taken:
            return used
        tree = self.tree
        out = used.copy()
        for row, vec in taken.by_row.items():
            # as subtree_sums counts it: masked by the pod's own quota, on every row up to the root
            masked = np.where(tree.max_mask[row] & tree.active[row], vec, 0)
            r = row
            while r >= 0:
                out[r] -= masked
                r = int(tree.parent[r])
        return out

    # ------------------------------------------------------------------ checks
    def check(self, ask: Ask, rules: KoordinatorRules, taken: Taken | None = None) -> str | None:
        """Why the ask does not fit its quotas (None when it does)."""
        runtime = self.runtime().runtime
        used, held = self.used()
        used = self.without(used, taken)
        tree = self.tree
        asks: dict[int, Int64Array] = {}
        for part in ask.parts.values():
            assert part.pod_quota is not None
            message = koordinator_admit(
                tree,
                runtime,
                used,
                part.pod_quota,
                part.request,
                enable_runtime_quota=rules.enable_runtime_quota,
            )
            if message is None and part.non_preemptible:
                message = koordinator_admit(
                    self.tree,
                    runtime,
                    used,
                    part.pod_quota,
                    part.non_preemptible,
                    enable_runtime_quota=rules.enable_runtime_quota,
                    non_preemptible=True,
                    non_preemptible_used=held,
                )
            if message is not None:
                return ask.explain(message)
            row = tree.rows[part.pod_quota.name]
            asks[row] = leaf_ask(tree, row, part.request)
        if rules.check_parents:
            # the parts of a gang group beneath one ancestor are checked there together
            message = koordinator_admit_ancestors(
                tree, runtime, used, asks, enable_runtime_quota=rules.enable_runtime_quota
            )
            if message is not None:
                return ask.explain(message)
        return None

    def within_min(self, ask: Ask) -> bool:
        """Whether the ask keeps each of its quotas within its min (as scaled down when the mins
        add up to more than the cluster has) in every resource it requests."""
        state = self.runtime()
        used, _ = self.used()
        tree = self.tree
        for row, vec in self.demand(ask).items():
            asked = (vec > 0) & tree.max_mask[row]
            if np.any(used[row][asked] + vec[asked] > state.min[row][asked]):
                return False
        return True

    def over_runtime(self) -> BoolArray:
        """Per row, whether the quota uses more than its runtime in a resource it manages: what
        Koordinator's revoke controller would take back from it."""
        state = self.runtime()
        used, _ = self.used()
        tree = self.tree
        over: BoolArray = np.any((used > state.runtime) & tree.max_mask, axis=1) & tree.active
        over[: DEFAULT_ROW + 1] = False
        return over

    def victim_mask(
        self, preemptor: Pod, ask: Ask, candidates: Sequence[Pod], rules: KoordinatorRules
    ) -> BoolArray:
        """Koordinator's canPreempt (same quota, lower priority, not in the default quota while
        disableDefaultQuotaPreemption), and the reclaim of what others borrow: a preemptor within
        its min may also evict pods of any other quota that uses more than its runtime."""
        n = len(candidates)
        own = self.entry(preemptor).row
        if own < 0 or n == 0:
            return np.zeros(n, dtype=np.bool_)
        rows = np.fromiter((self.entry(c).row for c in candidates), dtype=np.int64, count=n)
        priority = np.fromiter((c.priority for c in candidates), dtype=np.int64, count=n)
        opted_out = np.fromiter((is_non_preemptible(c) for c in candidates), dtype=np.bool_, count=n)
        mask: BoolArray = (rows == own) & (priority < preemptor.priority)
        if rules.disable_default_quota_preemption:
            mask &= rows != DEFAULT_ROW
        if own > DEFAULT_ROW and self.within_min(ask):
            over = self.over_runtime()
            known = rows >= 0
            borrowed = np.zeros(n, dtype=np.bool_)
            borrowed[known] = over[rows[known]]
            mask |= borrowed & (rows != own)
        return mask & ~opted_out

    def share(self, pod: Pod) -> float:
        entry = self.entry(pod)
        if entry.row <= DEFAULT_ROW:
            return 0.0
        state = self.runtime(fresh=False)
        used, _ = self.used()
        limit = state.runtime[entry.row]
        managed = self.tree.max_mask[entry.row] & (limit > 0)
        if not managed.any():
            return 0.0
        return float(np.max(used[entry.row][managed] / limit[managed]))

    # ------------------------------------------------------------------ report
    def summary(self) -> list[dict[str, Any]]:
        self.ensure()
        tree = self.tree
        state = self.runtime()
        used, _ = self.used()
        pending = self.pending_pods()
        rows: list[dict[str, Any]] = []
        for quota in sorted(self.objects.values(), key=lambda q: (q.namespace, q.name)):
            row = tree.rows.get(quota.name)
            holder = tree.quotas[row] if row is not None else None
            problem = tree.problems.get(quota.key)
            names = tree.resources
            out: dict[str, Any] = {
                "namespace": quota.namespace,
                "name": quota.name,
                "apiGroup": KOORDINATOR_GROUP,
                "parent": quota.parent or None,
                "min": format_amounts(quota.min),
                "max": format_amounts(quota.max or {}),
                "runtime": None,
                "request": None,
                "used": {},
                "pendingPods": 0,
                "problem": problem.message if problem is not None else None,
            }
            if row is not None and holder is quota and problem is None:
                managed = tree.max_mask[row]
                out["runtime"] = figures_text(names, state.runtime[row], managed)
                out["request"] = figures_text(names, state.request[row], managed)
                out["used"] = figures_text(names, used[row], managed)
                out["pendingPods"] = int(pending[row])
            rows.append(out)
        return rows

    def figures(self) -> list[QuotaFigures]:
        """min, max, runtime, request and used of every quota of the tree but the root (the
        cluster), in the resources each manages, as Koordinator's scheduler_elastic_quota_status
        gives them; quotas with a problem are left out."""
        if not self.active:
            return []
        self.ensure()
        tree = self.tree
        state = self.runtime()
        used, _ = self.used()
        pending = self.pending_pods()
        names = tree.resources
        out: list[QuotaFigures] = []
        for row in range(1, tree.size):
            if not tree.active[row]:
                continue
            quota = tree.quotas[row]
            managed = tree.max_mask[row]
            parent = int(tree.parent[row])
            out.append(
                QuotaFigures(
                    namespace=quota.namespace if quota is not None else "",
                    name=tree.names[row],
                    parent=tree.names[parent] if parent >= 0 else "",
                    tree_id=quota.tree_id if quota is not None else "",
                    is_parent=bool(tree.is_parent[row]),
                    fields={
                        "min": figures_amounts(names, tree.min[row], tree.min_mask[row]),
                        "max": figures_amounts(names, tree.max[row], managed),
                        "runtime": figures_amounts(names, state.runtime[row], managed),
                        "request": figures_amounts(names, state.request[row], managed),
                        "used": figures_amounts(names, used[row], managed),
                    },
                    pending_pods=int(pending[row]),
                )
            )
        return out
