"""PodTopologySpread: spread matching pods evenly over topology domains (kube-scheduler v1.33).

Filter enforces the pod's `DoNotSchedule` constraints: for each one, the number of matching pods
in the node's domain, plus one if the pod matches its own selector, may exceed the smallest count
over all eligible domains by at most `maxSkew`. Score prefers the domains holding the fewest
matching pods under the `ScheduleAnyway` constraints. A pod without constraints of its own gets the
configured default constraints, with a selector for the pods of its own controller.

Everything that depends only on node objects and the pod's node-side spec (which rows are eligible
for a constraint, each row's domain) is computed once per template and node generation and kept in
a plan; a cycle then only aggregates the incrementally maintained per-row pod counts per domain.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from koordpy.api.affinity import DO_NOT_SCHEDULE, HONOR, IGNORE, SCHEDULE_ANYWAY, TopologySpreadConstraint
from koordpy.api.labels import LabelSelector, selector_from_match_labels
from koordpy.api.node import HOSTNAME_LABEL, ZONE_LABEL
from koordpy.api.nodeselector import IN as NODE_SELECTOR_IN
from koordpy.api.nodeselector import NodeSelector, NodeSelectorRequirement
from koordpy.api.pod import Pod
from koordpy.api.taints import NO_EXECUTE, NO_SCHEDULE, Toleration, find_untolerated_taint
from koordpy.cache.snapshot import PodMatcher
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import (
    MAX_NODE_SCORE,
    NODE_ADD,
    NODE_UPDATE,
    POD_ALL,
    ClusterEvent,
    FilterResult,
    Plugin,
    PreFilterResult,
)
from koordpy.framework.status import SKIP, Status, unresolvable, unschedulable

NAME = "PodTopologySpread"

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

SYSTEM_DEFAULTING: Literal["System"] = "System"
LIST_DEFAULTING: Literal["List"] = "List"

NODE_DELETE = ClusterEvent("Node", "Delete")

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
# taint effects a DoNotSchedule-style check honors (kube's DoNotScheduleTaintsFilterFunc)
_DO_NOT_SCHEDULE_EFFECTS = frozenset((NO_SCHEDULE, NO_EXECUTE))
_EMPTY_LABELS: Mapping[str, str] = {}

_STATUS_SKEW = unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
_STATUS_MISSING_LABEL = unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)


# --------------------------------------------------------------------------------------------- args
class DefaultConstraint(PluginArgs):
    """A v1.TopologySpreadConstraint without a selector: the selector is deduced for each pod."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: dict[str, Any] | None = None
    min_domains: int | None = None
    # accepted as in the API type, but without effect: the deduced selector replaces the whole
    # selector, as kube-scheduler does
    match_label_keys: list[str] | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None

    @field_validator("max_skew")
    @classmethod
    def _max_skew_positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError(f"{v}: not in valid range (0, inf)")
        return v

    @field_validator("topology_key")
    @classmethod
    def _topology_key_set(cls, v: str) -> str:
        if not v:
            raise ValueError("can not be empty")
        return v

    @field_validator("when_unsatisfiable")
    @classmethod
    def _known_action(cls, v: str) -> str:
        if not v:
            raise ValueError("can not be empty")
        if v not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError(
                f'Unsupported value: "{v}": supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
            )
        return v

    @field_validator("label_selector")
    @classmethod
    def _no_selector(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            raise ValueError("constraint must not define a selector, as they deduced for each pod")
        return v

    @field_validator("min_domains")
    @classmethod
    def _min_domains_valid(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is None:
            return v
        if v < 1:
            raise ValueError(f"{v}: must be greater than 0")
        if info.data.get("when_unsatisfiable") != DO_NOT_SCHEDULE:
            raise ValueError(f"{v}: can only use minDomains if whenUnsatisfiable={DO_NOT_SCHEDULE}")
        return v

    @field_validator("node_affinity_policy", "node_taints_policy")
    @classmethod
    def _known_policy(cls, v: str | None) -> str | None:
        if v is not None and v not in (HONOR, IGNORE):
            raise ValueError(f'Unsupported value: "{v}": supported values: "{HONOR}", "{IGNORE}"')
        return v

    def to_constraint(self) -> TopologySpreadConstraint:
        return TopologySpreadConstraint(
            max_skew=self.max_skew,
            topology_key=self.topology_key,
            when_unsatisfiable=self.when_unsatisfiable,
            selector=None,
            min_domains=self.min_domains,
            node_affinity_policy=self.node_affinity_policy or HONOR,
            node_taints_policy=self.node_taints_policy or IGNORE,
        )


class PodTopologySpreadArgs(PluginArgs):
    default_constraints: list[DefaultConstraint] = Field(default_factory=list)
    # declared after default_constraints so its validator sees them
    defaulting_type: Literal["System", "List"] = SYSTEM_DEFAULTING

    @model_validator(mode="before")
    @classmethod
    def _default_to_system(cls, data: Any) -> Any:
        # kube-scheduler's v1 defaulting fills in System before validation, so that System
        # with a list of constraints is rejected even when the type was left out
        if isinstance(data, Mapping) and "defaultingType" not in data and "defaulting_type" not in data:
            return {**data, "defaultingType": SYSTEM_DEFAULTING}
        return data

    @field_validator("default_constraints")
    @classmethod
    def _no_repeats(cls, v: list[DefaultConstraint]) -> list[DefaultConstraint]:
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(v):
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise ValueError(f"[{i}]: Duplicate value: \"{{{c.topology_key}, {c.when_unsatisfiable}}}\"")
            seen.add(pair)
        return v

    @field_validator("defaulting_type")
    @classmethod
    def _system_without_list(cls, v: str, info: ValidationInfo) -> str:
        if v == SYSTEM_DEFAULTING and info.data.get("default_constraints"):
            raise ValueError(f'Invalid value: "{v}": when .defaultConstraints are not empty')
        return v


SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(3, HOSTNAME_LABEL, SCHEDULE_ANYWAY, None, None, HONOR, IGNORE),
    TopologySpreadConstraint(5, ZONE_LABEL, SCHEDULE_ANYWAY, None, None, HONOR, IGNORE),
)


# --------------------------------------------------------------------------------------------- counting
@dataclass(frozen=True, slots=True)
class SpreadPodMatcher(PodMatcher):
    """Pods a spread constraint counts: like PodMatcher, but terminating pods are left out, as
    kube-scheduler leaves them out of every spread count. A distinct class, so its per-row counter
    is never shared with a plain PodMatcher's."""

    def matches(self, pod: Pod, ns_labels: Mapping[str, str]) -> bool:
        if pod.deletion_ts is not None:
            return False
        return PodMatcher.matches(self, pod, ns_labels)


@dataclass(frozen=True, slots=True)
class _Constraint:
    """A constraint resolved for one pod."""

    max_skew: int
    topology_key: str
    # at least 1: an absent minDomains behaves as 1
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    # None: the constraint selects no pod (a nil labelSelector)
    matcher: SpreadPodMatcher | None

    def selects(self, pod: Pod) -> bool:
        return self.matcher is not None and self.matcher.selector.matches(pod.labels)

    @property
    def node_side(self) -> tuple[str, str, str]:
        return (self.topology_key, self.node_affinity_policy, self.node_taints_policy)


def _resolve(c: TopologySpreadConstraint, selector: LabelSelector | None, namespace: str) -> _Constraint:
    return _Constraint(
        max_skew=c.max_skew,
        topology_key=c.topology_key,
        min_domains=c.min_domains or 1,
        node_affinity_policy=c.node_affinity_policy,
        node_taints_policy=c.node_taints_policy,
        matcher=None if selector is None else SpreadPodMatcher(selector, frozenset((namespace,))),
    )


# --------------------------------------------------------------------------------------------- node masks
def _label_mask(snap: Any, hw: int, key: str, predicate_key: object,
                predicate: Callable[[str | None], bool]) -> np.ndarray:
    """predicate(value of label `key`) for rows [0, hw); None is passed for an absent label."""
    col = snap.labels.get(key)
    if col is None:
        return np.full(hw, bool(predicate(None)), dtype=bool)
    per_code, missing = col.value_mask(predicate_key, predicate)
    codes = col.codes[:hw]
    if per_code.size == 0:
        return np.full(hw, missing, dtype=bool)
    out = per_code[np.maximum(codes, 0)]
    out[codes < 0] = missing
    return out


def _name_mask(snap: Any, hw: int, req: NodeSelectorRequirement) -> np.ndarray:
    named = np.zeros(hw, dtype=bool)
    for name in req.values:
        row = snap.row_of.get(name)
        if row is not None and row < hw:
            named[row] = True
    return named if req.operator == NODE_SELECTOR_IN else ~named


def _required_affinity_mask(snap: Any, hw: int, node_selector: Mapping[str, str],
                            required: NodeSelector | None) -> np.ndarray:
    """Rows matching the pod's nodeSelector and required node affinity (GetRequiredNodeAffinity)."""
    mask = np.ones(hw, dtype=bool)
    for key, value in node_selector.items():
        mask &= _label_mask(snap, hw, key, (NAME, "nodeSelector", value), partial(operator.eq, value))
    if required is not None:
        any_term = np.zeros(hw, dtype=bool)
        for term in required.terms:
            if not term.match_expressions and not term.match_fields:
                continue  # an empty term matches no node
            term_mask = np.ones(hw, dtype=bool)
            for req in term.match_expressions:
                term_mask &= _label_mask(snap, hw, req.key, (NAME, "nodeAffinity", req), req.matches_value)
            for req in term.match_fields:
                term_mask &= _name_mask(snap, hw, req)
            any_term |= term_mask
        mask &= any_term
    return mask


def _codes(snap: Any, key: str, hw: int) -> np.ndarray:
    col = snap.labels.get(key)
    if col is None:
        return np.full(hw, -1, dtype=np.int32)
    return col.codes[:hw]


def _n_values(snap: Any, key: str) -> int:
    col = snap.labels.get(key)
    return 0 if col is None else len(col.values)


# --------------------------------------------------------------------------------------------- plans
@dataclass(slots=True)
class _FilterPlan:
    """Node-side data for a pod's hard constraints; depends on node objects only."""

    # per constraint: bin (label code + 1) of each row counted towards the domains, 0 for the rest
    count_bins: list[np.ndarray]
    # per constraint: bin of each row's own domain, 0 when the row lacks the label
    node_bins: list[np.ndarray]
    # per constraint: which bins are eligible domains (bin 0 never is)
    domains: list[np.ndarray]
    n_domains: list[int]
    # per constraint: some live row lacks the label
    any_missing: list[bool]


@dataclass(slots=True)
class _ScorePlan:
    """Node-side data for a pod's soft constraints; depends on node objects only."""

    # per constraint: bin of each row's domain; a row without the label is in the domain of the
    # empty value, as a missing key reads as "" in kube-scheduler's maps
    value_bins: list[np.ndarray]
    # per constraint: value_bins where the row's pods are counted, 0 elsewhere
    count_bins: list[np.ndarray]
    has_key: list[np.ndarray]
    n_bins: list[int]
    # rows carrying every constraint's label
    all_keys: np.ndarray


@dataclass(slots=True)
class _PreFilterState:
    constraints: tuple[_Constraint, ...]
    plan: _FilterPlan
    # per constraint: matching pods per domain bin
    domain_counts: list[np.ndarray]
    min_match: list[float]
    self_match: list[bool]

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.constraints, self.plan, [dc.copy() for dc in self.domain_counts],
                               list(self.min_match), self.self_match)

    def refresh_min(self, i: int) -> None:
        c = self.constraints[i]
        if self.plan.n_domains[i] < c.min_domains:
            # fewer eligible domains than minDomains: the global minimum is taken as 0
            self.min_match[i] = 0.0
        else:
            self.min_match[i] = float(self.domain_counts[i][self.plan.domains[i]].min())


@dataclass(slots=True)
class _PreScoreState:
    constraints: tuple[_Constraint, ...]
    plan: _ScorePlan
    rows: np.ndarray
    ignored: np.ndarray | None
    weights: list[float]
    domain_counts: list[np.ndarray | None]


def _min_or_zero(c: _Constraint, n_domains: int, dc: np.ndarray, domains: np.ndarray) -> float:
    if n_domains < c.min_domains:
        return 0.0
    return float(dc[domains].min())


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Go's math.Round for non-negative values."""
    return np.floor(x + 0.5).astype(np.int64)


# --------------------------------------------------------------------------------------------- plugin
class PodTopologySpread(Plugin):
    NAME = NAME
    Args = PodTopologySpreadArgs

    def __init__(self, handle: Any, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        a = args if isinstance(args, PodTopologySpreadArgs) else PodTopologySpreadArgs()
        self.system_defaulted = a.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints: tuple[TopologySpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted
            else tuple(c.to_constraint() for c in a.default_constraints)
        )
        self._plans: dict[object, Any] = {}
        self._resolved: dict[object, tuple[_Constraint, ...]] = {}
        self._tainted: list[int] = []
        self._generation = -1

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # pods: an added, relabelled or deleted pod changes the counts; nodes: a new, removed or
        # relabelled/retainted node changes the domains and which nodes count
        return (POD_ALL, NODE_ADD, NODE_UPDATE, NODE_DELETE)

    # ----------------------------------------------------------------------------- constraints
    def constraints(self, pod: Pod, action: str) -> tuple[_Constraint, ...]:
        """The pod's constraints with `whenUnsatisfiable == action`, or the default ones."""
        own = pod.spread_constraints
        if own:
            key: object = (action, own, pod.namespace)
        else:
            controller = pod.controller
            if not self.default_constraints or controller is None or not pod.labels:
                return ()
            key = (action, pod.namespace, tuple(sorted(pod.labels.items())))
        found = self._resolved.get(key)
        if found is not None:
            return found
        if own:
            found = tuple(
                _resolve(c, c.selector, pod.namespace) for c in own if c.when_unsatisfiable == action
            )
        else:
            # koordpy has no Services or workload objects: the pods of the same controller are
            # the ones carrying this pod's labels in its namespace
            selector = selector_from_match_labels(pod.labels)
            found = tuple(
                _resolve(c, selector, pod.namespace) for c in self.default_constraints
                if c.when_unsatisfiable == action
            )
        if len(self._resolved) > 4096:
            self._resolved.clear()
        self._resolved[key] = found
        return found

    # ----------------------------------------------------------------------------- node-side caches
    def _sync_generation(self) -> Any:
        snap = self.handle.snapshot
        if self._generation != snap.node_generation:
            self._plans.clear()
            self._tainted = [
                int(r) for r in snap.live_rows()
                if snap.infos[r].node.taints
            ]
            self._generation = snap.node_generation
        return snap

    def _policy_masks(self, snap: Any, hw: int, pod: Pod, cs: Sequence[_Constraint]
                      ) -> tuple[np.ndarray | None, np.ndarray | None]:
        affinity = taints = None
        if any(c.node_affinity_policy == HONOR for c in cs):
            affinity = _required_affinity_mask(snap, hw, pod.node_selector, pod.required_node_affinity)
        if any(c.node_taints_policy == HONOR for c in cs):
            taints = np.ones(hw, dtype=bool)
            tolerations: tuple[Toleration, ...] = pod.tolerations
            for row in self._tainted:
                node = snap.infos[row].node
                if find_untolerated_taint(node.taints, tolerations, _DO_NOT_SCHEDULE_EFFECTS) is not None:
                    taints[row] = False
        return affinity, taints

    @staticmethod
    def _plan_key(kind: str, pod: Pod, cs: Sequence[_Constraint]) -> object:
        honor_affinity = any(c.node_affinity_policy == HONOR for c in cs)
        honor_taints = any(c.node_taints_policy == HONOR for c in cs)
        return (
            kind,
            tuple(c.node_side for c in cs),
            tuple(sorted(pod.node_selector.items())) if honor_affinity else None,
            pod.required_node_affinity if honor_affinity else None,
            pod.tolerations if honor_taints else None,
        )

    def _filter_plan(self, pod: Pod, cs: tuple[_Constraint, ...]) -> _FilterPlan:
        snap = self._sync_generation()
        key = self._plan_key("filter", pod, cs)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        hw = snap.high_water
        live = snap.live[:hw]
        affinity, taints = self._policy_masks(snap, hw, pod, cs)
        codes = [_codes(snap, c.topology_key, hw) for c in cs]
        all_keys = live.copy()
        for code in codes:
            all_keys &= code >= 0
        count_bins, node_bins, domains, n_domains, any_missing = [], [], [], [], []
        for c, code in zip(cs, codes, strict=True):
            eligible = all_keys.copy()
            if c.node_affinity_policy == HONOR and affinity is not None:
                eligible &= affinity
            if c.node_taints_policy == HONOR and taints is not None:
                eligible &= taints
            node_bin = (code.astype(np.int64) + 1)
            node_bin[~live] = 0
            count_bin = np.where(eligible, node_bin, 0)
            present = np.zeros(_n_values(snap, c.topology_key) + 1, dtype=bool)
            present[count_bin] = True
            present[0] = False
            count_bins.append(count_bin)
            node_bins.append(node_bin)
            domains.append(present)
            n_domains.append(int(present.sum()))
            any_missing.append(bool((live & (code < 0)).any()))
        plan = _FilterPlan(count_bins, node_bins, domains, n_domains, any_missing)
        self._remember(key, plan)
        return plan

    def _score_plan(self, pod: Pod, cs: tuple[_Constraint, ...], require_all: bool) -> _ScorePlan:
        snap = self._sync_generation()
        key = (self._plan_key("score", pod, cs), require_all)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        hw = snap.high_water
        live = snap.live[:hw]
        affinity, taints = self._policy_masks(snap, hw, pod, cs)
        codes = [_codes(snap, c.topology_key, hw) for c in cs]
        all_keys = live.copy()
        for code in codes:
            all_keys &= code >= 0
        value_bins, count_bins, has_key, n_bins = [], [], [], []
        for c, code in zip(cs, codes, strict=True):
            n_values = _n_values(snap, c.topology_key)
            col = snap.labels.get(c.topology_key)
            empty_code = None if col is None else col.code_of.get("")
            missing_bin = n_values + 1 if empty_code is None else empty_code + 1
            value_bin = code.astype(np.int64) + 1
            present = code >= 0
            value_bin[~present] = missing_bin
            counted = live & (all_keys if require_all else True)
            if c.node_affinity_policy == HONOR and affinity is not None:
                counted = counted & affinity
            if c.node_taints_policy == HONOR and taints is not None:
                counted = counted & taints
            value_bins.append(value_bin)
            count_bins.append(np.where(counted, value_bin, 0))
            has_key.append(present & live)
            n_bins.append(n_values + 2)
        plan = _ScorePlan(value_bins, count_bins, has_key, n_bins, all_keys)
        self._remember(key, plan)
        return plan

    def _remember(self, key: object, plan: object) -> None:
        if len(self._plans) > 1024:
            self._plans.clear()
        self._plans[key] = plan

    # ----------------------------------------------------------------------------- PreFilter / Filter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        cs = self.constraints(pod, DO_NOT_SCHEDULE)
        if not cs:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, self._pre_filter_state(pod, cs))
        return None, None

    def _pre_filter_state(self, pod: Pod, cs: tuple[_Constraint, ...]) -> _PreFilterState:
        plan = self._filter_plan(pod, cs)
        snap = self.handle.snapshot
        hw = snap.high_water
        domain_counts: list[np.ndarray] = []
        mins: list[float] = []
        for i, c in enumerate(cs):
            n_bins = plan.domains[i].size
            dc: np.ndarray
            if c.matcher is None:
                dc = np.zeros(n_bins, dtype=np.float64)
            else:
                per_row = snap.pod_count_by_row(c.matcher)
                dc = np.bincount(plan.count_bins[i], weights=per_row[:hw], minlength=n_bins)
            domain_counts.append(dc)
            mins.append(_min_or_zero(c, plan.n_domains[i], dc, plan.domains[i]))
        self_match = [c.selects(pod) for c in cs]
        return _PreFilterState(cs, plan, domain_counts, mins, self_match)

    def _update_with_pod(self, state: CycleState, pod: Pod, other: Pod, row: int, delta: int) -> None:
        s: _PreFilterState | None = state.read(_PRE_FILTER_KEY)
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

    def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        self._update_with_pod(state, pod, other, row, 1)

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        self._update_with_pod(state, pod, other, row, -1)

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        s: _PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None:
            cs = self.constraints(pod, DO_NOT_SCHEDULE)
            if not cs:
                return None
            s = self._pre_filter_state(pod, cs)
            state.write(_PRE_FILTER_KEY, s)
        plan = s.plan
        failed: np.ndarray | None = None
        missing_reason: np.ndarray | None = None
        for i, c in enumerate(s.constraints):
            # a domain fails when count + self - min > maxSkew; bin 0 (no label) always fails
            limit = c.max_skew + s.min_match[i] - (1 if s.self_match[i] else 0)
            fail_bin = s.domain_counts[i] > limit
            fail_bin[0] = plan.any_missing[i]
            if not fail_bin.any():
                continue
            node_bin = plan.node_bins[i][rows]
            fails = fail_bin[node_bin]
            if failed is None:
                failed = fails
            else:
                fails &= ~failed
                failed |= fails
            if plan.any_missing[i]:
                newly_missing = fails & (node_bin == 0)
                if missing_reason is None:
                    missing_reason = newly_missing
                else:
                    missing_reason |= newly_missing
        if failed is None or not failed.any():
            return None
        if missing_reason is None:
            return FilterResult(~failed, [_STATUS_SKEW])
        return FilterResult(~failed, [_STATUS_SKEW, _STATUS_MISSING_LABEL], missing_reason.astype(np.int8))

    # ----------------------------------------------------------------------------- PreScore / Score
    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        snap = self.handle.snapshot
        if snap.node_count == 0:
            return SKIP
        cs = self.constraints(pod, SCHEDULE_ANYWAY)
        if not cs:
            return SKIP
        # only the system defaults tolerate nodes without every topology label, so that nodes
        # without a zone still get hostname spreading
        require_all = bool(pod.spread_constraints) or not self.system_defaulted
        plan = self._score_plan(pod, cs, require_all)
        hw = snap.high_water
        ignored = ~plan.all_keys[rows] if require_all else None
        kept = rows if ignored is None else rows[~ignored]
        weights: list[float] = []
        domain_counts: list[np.ndarray | None] = []
        for i, c in enumerate(cs):
            if c.topology_key == HOSTNAME_LABEL:
                # counted per node in Score: every scored node is its own domain
                weights.append(math.log(kept.size + 2))
                domain_counts.append(None)
                continue
            present = np.zeros(plan.n_bins[i], dtype=bool)
            present[plan.value_bins[i][kept]] = True
            weights.append(math.log(int(present.sum()) + 2))
            if c.matcher is None:
                domain_counts.append(np.zeros(plan.n_bins[i], dtype=np.float64))
            else:
                per_row = snap.pod_count_by_row(c.matcher)
                domain_counts.append(
                    np.bincount(plan.count_bins[i], weights=per_row[:hw], minlength=plan.n_bins[i])
                )
        state.write(_PRE_SCORE_KEY, _PreScoreState(cs, plan, rows, ignored, weights, domain_counts))
        return None

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        s: _PreScoreState | None = state.read(_PRE_SCORE_KEY)
        if s is None:
            return np.zeros(rows.size, dtype=np.int64)
        snap = self.handle.snapshot
        plan = s.plan
        total = np.zeros(rows.size, dtype=np.float64)
        for i, c in enumerate(s.constraints):
            dc = s.domain_counts[i]
            if dc is None:
                if c.matcher is None:
                    cnt = np.zeros(rows.size, dtype=np.float64)
                else:
                    cnt = snap.pod_count_by_row(c.matcher)[rows].astype(np.float64)
            else:
                cnt = dc[plan.value_bins[i][rows]]
            contribution = cnt * s.weights[i] + float(c.max_skew - 1)
            has_key = plan.has_key[i][rows]
            if has_key.all():
                total += contribution
            else:
                total += np.where(has_key, contribution, 0.0)
        raw = _round_half_away(total)
        ignored = self._ignored(s, rows)
        if ignored is not None:
            raw[ignored] = 0
        return raw

    @staticmethod
    def _ignored(s: _PreScoreState, rows: np.ndarray) -> np.ndarray | None:
        if s.ignored is None:
            return None
        if rows is s.rows or (rows.size == s.rows.size and np.array_equal(rows, s.rows)):
            return s.ignored
        return ~s.plan.all_keys[rows]

    def normalize_score(
        self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        s: _PreScoreState | None = state.read(_PRE_SCORE_KEY)
        scores = np.asarray(scores, dtype=np.int64)
        if s is None or scores.size == 0:
            return scores
        ignored = self._ignored(s, rows)
        valid = scores if ignored is None else scores[~ignored]
        out = np.zeros(scores.size, dtype=np.int64)
        if valid.size == 0:
            return out
        min_score = int(valid.min())
        max_score = max(int(valid.max()), 0)
        if max_score == 0:
            normalized = np.full(valid.size, MAX_NODE_SCORE, dtype=np.int64)
        else:
            normalized = MAX_NODE_SCORE * (max_score + min_score - valid) // max_score
        if ignored is None:
            return normalized
        out[~ignored] = normalized
        return out
