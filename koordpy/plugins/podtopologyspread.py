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
from dataclasses import dataclass, field
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
                raise ValueError(f'[{i}]: Duplicate value: "{{{c.topology_key}, {c.when_unsatisfiable}}}"')
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

    # matchers key per-cycle lookups: hash once, not on every lookup
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.selector, self.namespaces, self.namespace_selector)))

    def __hash__(self) -> int:
        return self._hash

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
def _label_mask(
    snap: Any, hw: int, key: str, predicate_key: object, predicate: Callable[[str | None], bool]
) -> np.ndarray:
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


def _required_affinity_mask(
    snap: Any, hw: int, node_selector: Mapping[str, str], required: NodeSelector | None
) -> np.ndarray:
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
def _row_classes(components: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group rows by their tuple of component values: (class of each row, component values of
    each class as an [n_classes, n_components] array). Per-pod work then runs over classes, and
    rows are touched once, by a single gather."""
    stacked = np.stack([np.asarray(c, dtype=np.int64) for c in components], axis=1)
    values, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), values


@dataclass(slots=True)
class _FilterPlan:
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
class _ScorePlan:
    """Node-side data for a pod's soft constraints; depends on node objects only."""

    hw: int
    # per constraint: value_bins where the row's pods are counted, 0 elsewhere; a row without the
    # label is in the domain of the empty value, as a missing key reads as "" in kube's maps
    count_bins: list[np.ndarray]
    n_bins: list[int]
    # rows grouped by (ignored, then per constraint: domain bin, has label)
    classes: np.ndarray
    class_count: np.ndarray
    class_ignored: np.ndarray
    class_value_bin: list[np.ndarray]
    class_has_key_f: list[np.ndarray]
    # the row set of every live row, once computed
    every_row: _RowSet | None = None


@dataclass(slots=True)
class _PreFilterState:
    constraints: tuple[_Constraint, ...]
    plan: _FilterPlan
    # per constraint: matching pods per domain bin
    domain_counts: list[np.ndarray]
    min_match: list[float]
    self_match: list[bool]

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
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


@dataclass(slots=True)
class _RowScores:
    """Raw and normalized scores of a set of rows, as tables over score classes: the node-side
    row classes, plus one class of its own for each row holding matching pods under a hostname
    constraint."""

    rows: np.ndarray
    classes: np.ndarray
    raw: np.ndarray
    normalized: np.ndarray


@dataclass(slots=True)
class _RowSet:
    """What a set of rows contributes independently of pod counts."""

    classes: np.ndarray
    every_row: bool
    class_count: np.ndarray
    kept_nodes: int
    # per constraint: log(number of domains among the kept rows + 2), kube's normalizing weight
    weights: list[float]


@dataclass(slots=True)
class _PreScoreState:
    constraints: tuple[_Constraint, ...]
    plan: _ScorePlan
    scores: _RowScores


def _min_or_zero(c: _Constraint, n_domains: int, dc: np.ndarray, domains: np.ndarray) -> float:
    if n_domains < c.min_domains:
        # fewer eligible domains than minDomains: the global minimum is taken as 0
        return 0.0
    return float(dc[domains].min())


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Go's math.Round for non-negative values."""
    return np.floor(x + 0.5).astype(np.int64)


def _normalize(raw: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """kube's NormalizeScore over score classes; `valid` marks the classes of rows that are
    present and not ignored (those alone set the min and max)."""
    out = np.zeros(raw.size, dtype=np.int64)
    scored = raw[valid]
    if scored.size == 0:
        return out
    lo = int(scored.min())
    hi = max(int(scored.max()), 0)
    if hi == 0:
        out[valid] = MAX_NODE_SCORE
    else:
        out[valid] = MAX_NODE_SCORE * (hi + lo - scored) // hi
    return out


# --------------------------------------------------------------------------------------------- plugin
class PodTopologySpread(Plugin):
    NAME = NAME
    Args = PodTopologySpreadArgs

    def __init__(self, handle: Any, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        a = args if isinstance(args, PodTopologySpreadArgs) else PodTopologySpreadArgs()
        self.system_defaulted = a.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints: tuple[TopologySpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS
            if self.system_defaulted
            else tuple(c.to_constraint() for c in a.default_constraints)
        )
        self._plans: dict[object, Any] = {}
        self._resolved: dict[object, tuple[_Constraint, ...]] = {}
        self._tainted: list[int] = []
        self._generation = -1
        self._nz: dict[SpreadPodMatcher, tuple[np.ndarray, np.ndarray]] = {}
        self._nz_generation = -1

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
                _resolve(c, selector, pod.namespace)
                for c in self.default_constraints
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
            self._tainted = [int(r) for r in snap.live_rows() if snap.infos[r].node.taints]
            self._generation = snap.node_generation
        return snap

    def _policy_masks(
        self, snap: Any, hw: int, pod: Pod, cs: Sequence[_Constraint]
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
            present = np.zeros(_n_values(snap, c.topology_key) + 1, dtype=bool)
            present[count_bin] = True
            present[0] = False
            count_bins.append(count_bin)
            node_bins.append(node_bin)
            domains.append(present)
            n_domains.append(int(present.sum()))
        classes, class_bins = _row_classes(node_bins)
        plan = _FilterPlan(hw, count_bins, domains, n_domains, classes, class_bins)
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
        ignored = ~live | (~all_keys if require_all else False)
        components: list[np.ndarray] = [ignored]
        count_bins, n_bins = [], []
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
            count_bins.append(np.where(counted, value_bin, 0))
            n_bins.append(n_values + 2)
            # a hostname constraint is scored per node: only whether the label is there matters
            components.append(np.zeros(hw, dtype=np.int64) if c.topology_key == HOSTNAME_LABEL else value_bin)
            components.append(present & live)
        classes, values = _row_classes(components)
        plan = _ScorePlan(
            hw=hw,
            count_bins=count_bins,
            n_bins=n_bins,
            classes=classes,
            class_count=np.bincount(classes[live], minlength=values.shape[0]),
            class_ignored=values[:, 0].astype(bool),
            class_value_bin=[values[:, 1 + 2 * i] for i in range(len(cs))],
            class_has_key_f=[values[:, 2 + 2 * i].astype(np.float64) for i in range(len(cs))],
        )
        self._remember(key, plan)
        return plan

    def _remember(self, key: object, plan: object) -> None:
        if len(self._plans) > 1024:
            self._plans.clear()
        self._plans[key] = plan

    # ----------------------------------------------------------------------------- row access
    def _nonzero(self, matcher: SpreadPodMatcher) -> tuple[np.ndarray, np.ndarray]:
        """Rows holding pods `matcher` selects, and how many (as floats); one scan per cycle."""
        snap = self.handle.snapshot
        if self._nz_generation != snap.generation:
            self._nz.clear()
            self._nz_generation = snap.generation
        hit = self._nz.get(matcher)
        if hit is None:
            per_row = snap.pod_count_by_row(matcher)[: snap.high_water]
            rows = (per_row != 0).nonzero()[0]
            hit = (rows, per_row.take(rows).astype(np.float64))
            self._nz[matcher] = hit
        return hit

    def _row_classes_of(self, classes: np.ndarray, hw: int, rows: np.ndarray) -> tuple[np.ndarray, bool]:
        """Classes of `rows`, and whether `rows` is every row in order (a view, no gather)."""
        snap = self.handle.snapshot
        if rows.size == hw and rows is snap.live_rows():
            return classes[:hw], True
        return classes.take(rows), False

    # ----------------------------------------------------------------------------- PreFilter / Filter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        cs = self.constraints(pod, DO_NOT_SCHEDULE)
        if not cs:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, self._pre_filter_state(pod, cs))
        return None, None

    def _pre_filter_state(self, pod: Pod, cs: tuple[_Constraint, ...]) -> _PreFilterState:
        plan = self._filter_plan(pod, cs)
        domain_counts: list[np.ndarray] = []
        mins: list[float] = []
        for i, c in enumerate(cs):
            n_bins = plan.domains[i].size
            dc: np.ndarray
            if c.matcher is None:
                dc = np.zeros(n_bins, dtype=np.float64)
            else:
                nz_rows, nz_counts = self._nonzero(c.matcher)
                dc = np.bincount(plan.count_bins[i].take(nz_rows), weights=nz_counts, minlength=n_bins)
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
        classes, _ = self._row_classes_of(plan.classes, plan.hw, rows)
        passed = (~failed).take(classes)
        if passed.all():
            return None
        if not missing.any():
            return FilterResult(passed, [_STATUS_SKEW])
        reason_of = missing.astype(np.int8).take(classes)
        return FilterResult(passed, [_STATUS_SKEW, _STATUS_MISSING_LABEL], reason_of)

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
        state.write(_PRE_SCORE_KEY, _PreScoreState(cs, plan, self._score_rows(cs, plan, rows)))
        return None

    def _row_set(self, cs: tuple[_Constraint, ...], plan: _ScorePlan, rows: np.ndarray) -> _RowSet:
        classes, every_row = self._row_classes_of(plan.classes, plan.hw, rows)
        if every_row and plan.every_row is not None:
            return plan.every_row
        n_classes = plan.class_ignored.size
        class_count = plan.class_count if every_row else np.bincount(classes, minlength=n_classes)
        valid = ~plan.class_ignored
        present = (class_count > 0) & valid
        kept_nodes = int(class_count[valid].sum())
        weights = []
        for i, c in enumerate(cs):
            if c.topology_key == HOSTNAME_LABEL:
                # every kept node is its own domain
                weights.append(math.log(kept_nodes + 2))
            else:
                domains = np.zeros(plan.n_bins[i], dtype=bool)
                domains[plan.class_value_bin[i][present]] = True
                weights.append(math.log(int(np.count_nonzero(domains)) + 2))
        out = _RowSet(classes, every_row, class_count, kept_nodes, weights)
        if every_row:
            plan.every_row = out
        return out

    def _score_rows(self, cs: tuple[_Constraint, ...], plan: _ScorePlan, rows: np.ndarray) -> _RowScores:
        """Raw and normalized scores of `rows` (kube's Score and NormalizeScore)."""
        snap = self.handle.snapshot
        rs = self._row_set(cs, plan, rows)
        classes = rs.classes
        n_classes = plan.class_ignored.size

        # per class: the score of a row without matching pods under hostname constraints, the
        # terms summed in constraint order as kube does
        base = np.zeros(n_classes, dtype=np.float64)
        # rows with matching pods under hostname constraints: (positions in rows, count * weight)
        extra: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for i, c in enumerate(cs):
            w = rs.weights[i]
            has_key = plan.class_has_key_f[i]
            if c.topology_key == HOSTNAME_LABEL:
                base += has_key * float(c.max_skew - 1)
                if c.matcher is not None:
                    if rs.every_row:
                        pos, counts = self._nonzero(c.matcher)
                    else:
                        per_row = snap.pod_count_by_row(c.matcher).take(rows)
                        pos = (per_row != 0).nonzero()[0]
                        counts = per_row.take(pos).astype(np.float64)
                    if pos.size:
                        extra.append((pos, counts * w, has_key))
                continue
            n_bins = plan.n_bins[i]
            dc: np.ndarray
            if c.matcher is None:
                dc = np.zeros(n_bins, dtype=np.float64)
            else:
                nz_rows, nz_counts = self._nonzero(c.matcher)
                dc = np.bincount(plan.count_bins[i].take(nz_rows), weights=nz_counts, minlength=n_bins)
            base += (dc.take(plan.class_value_bin[i]) * w + float(c.max_skew - 1)) * has_key

        count = rs.class_count
        ignored = plan.class_ignored
        if extra:
            # each such row becomes a class of its own: its class's base plus count * weight
            special = extra[0][0] if len(extra) == 1 else np.unique(np.concatenate([e[0] for e in extra]))
            special_classes = classes.take(special)
            special_score = base.take(special_classes)
            for pos, weighted, has_key in extra:
                at = slice(None) if pos is special else np.searchsorted(special, pos)
                special_score[at] += weighted * has_key.take(special_classes[at])
            base = np.concatenate((base, special_score))
            count = np.concatenate(
                (
                    count - np.bincount(special_classes, minlength=n_classes),
                    np.ones(special.size, dtype=count.dtype),
                )
            )
            ignored = np.concatenate((ignored, ignored.take(special_classes)))
            classes = classes.copy()
            classes[special] = np.arange(n_classes, n_classes + special.size)
        raw = _round_half_away(base)
        raw[ignored] = 0
        return _RowScores(rows, classes, raw, _normalize(raw, (count > 0) & ~ignored))

    def _scores_for(self, state: CycleState, rows: np.ndarray) -> _RowScores | None:
        s: _PreScoreState | None = state.read(_PRE_SCORE_KEY)
        if s is None:
            return None
        if s.scores.rows is not rows and not np.array_equal(s.scores.rows, rows):
            s.scores = self._score_rows(s.constraints, s.plan, rows)
        return s.scores

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        scores = self._scores_for(state, rows)
        if scores is None:
            return np.zeros(rows.size, dtype=np.int64)
        return scores.raw.take(scores.classes)

    def normalize_score(
        self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        # the normalized values were computed with the raw ones: `scores` is what score() gave
        computed = self._scores_for(state, rows)
        if computed is None:
            return np.asarray(scores, dtype=np.int64)
        return computed.normalized.take(computed.classes)
