"""PreFilter, its AddPod/RemovePod extensions, and Filter: the pod's `DoNotSchedule` constraints.

For each constraint, the number of matching pods in the node's domain, plus one if the pod matches
its own selector, may exceed the smallest count over all eligible domains by at most `maxSkew`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koordpy.api.affinity import DO_NOT_SCHEDULE, HONOR
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import FilterResult, PreFilterResult
from koordpy.framework.status import SKIP, Status, unresolvable, unschedulable
from koordpy.plugins.podtopologyspread.common import (
    NAME,
    Constraint,
    SpreadCache,
    n_label_values,
    node_view,
    row_classes,
)

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

PRE_FILTER_KEY = "PreFilter" + NAME

_STATUS_SKEW = unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
_STATUS_MISSING_LABEL = unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)


@dataclass(slots=True)
class FilterPlan:
    """Node-side data for a pod's hard constraints; depends on node objects only."""

    hw: int
    # per constraint: bin (label code + 1) of each row counted towards the domains, 0 for the rest
    count_bins: list[np.ndarray]
    # per constraint: which bins are eligible domains (bin 0 never is)
    domains: list[np.ndarray]
    n_domains: list[int]
    # rows grouped by their own domain bin under every constraint (bin 0: label missing)
    classes: np.ndarray
    class_bins: np.ndarray


@dataclass(slots=True)
class PreFilterState:
    constraints: tuple[Constraint, ...]
    plan: FilterPlan
    # per constraint: matching pods per domain bin
    domain_counts: list[np.ndarray]
    min_match: list[float]
    self_match: list[bool]

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.constraints,
            self.plan,
            [dc.copy() for dc in self.domain_counts],
            list(self.min_match),
            self.self_match,
        )

    def refresh_min(self, i: int) -> None:
        self.min_match[i] = _min_or_zero(
            self.constraints[i], self.plan.n_domains[i], self.domain_counts[i], self.plan.domains[i]
        )


def _min_or_zero(c: Constraint, n_domains: int, dc: np.ndarray, domains: np.ndarray) -> float:
    if n_domains < c.min_domains:
        # fewer eligible domains than minDomains: the global minimum is taken as 0
        return 0.0
    return float(dc[domains].min())


def filter_plan(cache: SpreadCache, pod: Pod, cs: tuple[Constraint, ...]) -> FilterPlan:
    snap = cache.sync_generation()
    key = cache.plan_key("filter", pod, cs)
    plan = cache.plan(key)
    if isinstance(plan, FilterPlan):
        return plan
    hw, live, affinity, taints, codes, all_keys = node_view(cache, snap, pod, cs)
    count_bins, node_bins, domains, n_domains = [], [], [], []
    for c, code in zip(cs, codes, strict=True):
        eligible = all_keys.copy()
        if c.node_affinity_policy == HONOR and affinity is not None:
            eligible &= affinity
        if c.node_taints_policy == HONOR and taints is not None:
            eligible &= taints
        node_bin = code.astype(np.int64) + 1
        node_bin[~live] = 0
        count_bin = np.where(eligible, node_bin, 0)
        present = np.zeros(n_label_values(snap, c.topology_key) + 1, dtype=bool)
        present[count_bin] = True
        present[0] = False
        count_bins.append(count_bin)
        node_bins.append(node_bin)
        domains.append(present)
        n_domains.append(int(present.sum()))
    classes, class_bins = row_classes(node_bins)
    plan = FilterPlan(hw, count_bins, domains, n_domains, classes, class_bins)
    cache.remember(key, plan)
    return plan


def pre_filter(
    cache: SpreadCache, state: CycleState, pod: Pod
) -> tuple[PreFilterResult | None, Status | None]:
    cs = cache.constraints(pod, DO_NOT_SCHEDULE)
    if not cs:
        return None, SKIP
    state.write(PRE_FILTER_KEY, pre_filter_state(cache, pod, cs))
    return None, None


def pre_filter_state(cache: SpreadCache, pod: Pod, cs: tuple[Constraint, ...]) -> PreFilterState:
    plan = filter_plan(cache, pod, cs)
    domain_counts: list[np.ndarray] = []
    mins: list[float] = []
    for i, c in enumerate(cs):
        n_bins = plan.domains[i].size
        dc: np.ndarray
        if c.matcher is None:
            dc = np.zeros(n_bins, dtype=np.float64)
        else:
            nz_rows, nz_counts = cache.nonzero(c.matcher)
            dc = np.bincount(plan.count_bins[i].take(nz_rows), weights=nz_counts, minlength=n_bins)
        domain_counts.append(dc)
        mins.append(_min_or_zero(c, plan.n_domains[i], dc, plan.domains[i]))
    self_match = [c.selects(pod) for c in cs]
    return PreFilterState(cs, plan, domain_counts, mins, self_match)


def update_with_pod(state: CycleState, pod: Pod, other: Pod, row: int, delta: int) -> None:
    """PreFilterExtensions AddPod (delta 1) and RemovePod (delta -1): `other` counted on `row`."""
    s: PreFilterState | None = state.read(PRE_FILTER_KEY)
    if s is None or other.namespace != pod.namespace or other.deletion_ts is not None:
        # terminating pods were never counted, so they are not counted in or out either
        return
    for i, c in enumerate(s.constraints):
        bins = s.plan.count_bins[i]
        if row >= bins.size or not c.selects(other):
            continue
        b = int(bins[row])
        if b == 0:
            continue  # node lacks a topology label or is excluded by the inclusion policies
        s.domain_counts[i][b] += delta
        s.refresh_min(i)


def filter_rows(cache: SpreadCache, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
    s: PreFilterState | None = state.read(PRE_FILTER_KEY)
    if s is None:
        cs = cache.constraints(pod, DO_NOT_SCHEDULE)
        if not cs:
            return None
        s = pre_filter_state(cache, pod, cs)
        state.write(PRE_FILTER_KEY, s)
    plan = s.plan
    class_bins = plan.class_bins
    n_classes = class_bins.shape[0]
    failed = np.zeros(n_classes, dtype=bool)
    missing = np.zeros(n_classes, dtype=bool)
    for i, c in enumerate(s.constraints):
        # constraints are checked in order, the first failure decides the reason: a missing
        # label (bin 0) is unresolvable, count + self - min > maxSkew is unschedulable
        limit = c.max_skew + s.min_match[i] - (1 if s.self_match[i] else 0)
        fail_bin = s.domain_counts[i] > limit
        fail_bin[0] = True
        bins = class_bins[:, i]
        fails = fail_bin.take(bins) & ~failed
        missing |= fails & (bins == 0)
        failed |= fails
    if not failed.any():
        return None
    classes, _ = cache.row_classes_of(plan.classes, plan.hw, rows)
    passed = (~failed).take(classes)
    if passed.all():
        return None
    if not missing.any():
        return FilterResult(passed, [_STATUS_SKEW])
    reason_of = missing.astype(np.int8).take(classes)
    return FilterResult(passed, [_STATUS_SKEW, _STATUS_MISSING_LABEL], reason_of)
