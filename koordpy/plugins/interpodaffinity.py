"""InterPodAffinity: required pod affinity and anti-affinity as a filter, preferred terms as a score.

Everything is counted per topology domain: the number of matching pods per node row (the
snapshot's incrementally kept counters) is summed per value of the term's topology key with the
key's label codes, and a node sees the sum of its own domain. Domain arrays are indexed by
`code + 1`, so slot 0 stands for nodes without the key and always holds 0.

Filter, in kube-scheduler's order:
  1. the pod's required affinity: every term's domain on the node must hold a pod that matches
     all of the pod's affinity terms, unless no such pod exists anywhere and the pod matches its
     own terms (the first pod of a group); a node without a term's topology key never passes;
  2. the pod's required anti-affinity: no term's domain on the node may hold a matching pod;
  3. existing pods' required anti-affinity: the node may not share a domain with an existing pod
     whose anti-affinity term matches the incoming pod.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pydantic import Field, field_validator

from koordpy.api import names
from koordpy.api.affinity import AffinityTerm
from koordpy.api.labels import LabelSelector
from koordpy.api.pod import Pod
from koordpy.cache.snapshot import PodMatcher, Snapshot
from koordpy.config.args import PluginArgs
from koordpy.config.numbers import Int32
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import (
    MAX_NODE_SCORE,
    NODE_ADD,
    NODE_UPDATE,
    POD_ALL,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    QueueingHints,
    ScoreExtensions,
    ScorePlugin,
    pod_departs,
)
from koordpy.framework.status import SKIP, Status, unresolvable, unschedulable

if TYPE_CHECKING:
    from koordpy.framework.handle import Handle

NAME = names.INTER_POD_AFFINITY

ERR_AFFINITY_RULES = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY_RULES = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

# indexed by a row's verdict: 1, 2, 3 name the first check it failed, in kube's order (0, a
# passing row, is never looked up)
_AFFINITY_FAILED, _ANTI_FAILED, _EXISTING_ANTI_FAILED = 1, 2, 3
_STATUS_OF_VERDICT = [
    unresolvable(ERR_AFFINITY_RULES),
    unresolvable(ERR_AFFINITY_RULES),
    unschedulable(ERR_ANTI_AFFINITY_RULES),
    unschedulable(ERR_EXISTING_ANTI_AFFINITY),
]

# a key of Snapshot.term_counts: (kind, term, weight)
TermKey = tuple[str, AffinityTerm, int]
Domains = dict[str, np.ndarray]
_T = TypeVar("_T")


class InterPodAffinityArgs(PluginArgs):
    hard_pod_affinity_weight: Int32 = Field(default=1, strict=True)
    ignore_preferred_terms_of_existing_pods: bool = Field(default=False, strict=True)

    @field_validator("hard_pod_affinity_weight")
    @classmethod
    def _weight_in_range(cls, value: int) -> int:
        if not 0 <= value <= 100:
            raise ValueError(f"must be in the range [0, 100], got {value}")
        return value


@dataclass(frozen=True, slots=True)
class _ExistingTerms:
    """Existing pods' terms that match one incoming pod (namespace and labels), per topology key.

    `anti`: required anti-affinity terms. `score`: (term, signed weight) of required affinity
    (the hard weight), preferred affinity (+weight) and preferred anti-affinity (-weight)."""

    anti: tuple[tuple[str, tuple[TermKey, ...]], ...]
    score: tuple[tuple[str, tuple[tuple[TermKey, int], ...]], ...]


_NO_EXISTING_TERMS = _ExistingTerms((), ())


class _FilterState:
    """Per-domain counts the filter needs; updated when pods are added or removed in a trial."""

    __slots__ = ("affinity", "affinity_seen", "anti", "existing_anti", "self_match", "verdict")

    def __init__(self, affinity: Domains, anti: Domains, existing_anti: Domains, self_match: bool) -> None:
        # pods matching all of the pod's required affinity terms, per key of those terms
        self.affinity = affinity
        # pods matching the pod's required anti-affinity terms (one count per matched term)
        self.anti = anti
        # existing pods' required anti-affinity terms that match the pod
        self.existing_anti = existing_anti
        self.self_match = self_match
        self.affinity_seen = _any_domain(affinity)
        # per row: 0 when it passes, else which check failed first; computed on first use and
        # dropped whenever the counts change
        self.verdict: np.ndarray | None = None

    def clone(self) -> _FilterState:
        out = _FilterState(
            {k: v.copy() for k, v in self.affinity.items()},
            {k: v.copy() for k, v in self.anti.items()},
            {k: v.copy() for k, v in self.existing_anti.items()},
            self.self_match,
        )
        # verdicts are replaced, never changed in place: sharing them is safe
        out.verdict = self.verdict
        return out


@dataclass(frozen=True, slots=True)
class _ScoreState:
    domains: tuple[tuple[str, np.ndarray], ...]


def _any_domain(domains: Domains) -> bool:
    return any(bool(d[1:].any()) for d in domains.values())


class _DomainSlots:
    """Each row's domain slot per topology key (label code + 1, 0 for a node without the key) as
    index arrays over rows [0, high_water). They depend on node objects only, so they are rebuilt
    when the snapshot's node generation moves."""

    __slots__ = ("_by_key", "_generation", "_snapshot")

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[np.ndarray, int] | None] = {}
        self._generation = -1
        self._snapshot: Snapshot | None = None

    def get(self, snap: Snapshot, key: str) -> tuple[np.ndarray, int] | None:
        """(slot per row, number of slots); None when no node has the key."""
        if snap is not self._snapshot or snap.node_generation != self._generation:
            self._snapshot = snap
            self._generation = snap.node_generation
            self._by_key.clear()
        if key in self._by_key:
            return self._by_key[key]
        col = snap.labels.get(key)
        found = None
        if col is not None:
            # intp indices: numpy gathers several times faster with them than with int32
            found = ((col.codes[: snap.high_water] + 1).astype(np.intp), len(col.values) + 1)
        self._by_key[key] = found
        return found


def _by_domain(slots: tuple[np.ndarray, int] | None, per_row: np.ndarray) -> np.ndarray:
    """Sum of `per_row` over each domain of one topology key, indexed by slot."""
    if slots is None:
        return np.zeros(1, dtype=np.int64)
    at, size = slots
    # the sums are integers far below 2**53: exact in the float64 bincount adds with
    out = np.bincount(at, weights=per_row[: at.size], minlength=size).astype(np.int64)
    out[0] = 0
    return out


def _fitted(dom: np.ndarray, size: int) -> np.ndarray:
    """`dom` over `size` slots: label values that appeared after the counts were taken hold none."""
    if dom.size >= size:
        return dom
    grown = np.zeros(size, dtype=dom.dtype)
    grown[: dom.size] = dom
    return grown


def _bump(domains: Domains, slots: tuple[np.ndarray, int] | None, key: str, row: int, delta: int) -> None:
    if slots is None or row >= slots[0].size or slots[0][row] == 0:
        return
    slot = int(slots[0][row])
    dom = domains.get(key)
    dom = domains[key] = _fitted(np.zeros(slots[1], dtype=np.int64) if dom is None else dom, slots[1])
    dom[slot] += delta


def _in_scope(term: AffinityTerm, namespace: str, snap: Snapshot) -> bool:
    if namespace in term.namespaces:
        return True
    return term.namespace_selector is not None and term.namespace_selector.matches(
        snap.namespace_labels(namespace)
    )


def _count_matching_all(snap: Snapshot, terms: Sequence[AffinityTerm]) -> np.ndarray | None:
    """Pods per row that match every term (kube counts a pod for the incoming pod's affinity only
    then); None when no pod can."""
    if any(t.selector is None for t in terms):
        return None
    if len(terms) == 1:
        matcher = PodMatcher.of_term(terms[0])
        assert matcher is not None
        return snap.pod_count_by_row(matcher)
    selector = LabelSelector.from_requirements(
        [r for t in terms if t.selector is not None for r in t.selector.requirements]
    )
    first = terms[0]
    if all(
        t.namespaces == first.namespaces and t.namespace_selector == first.namespace_selector for t in terms
    ):
        return snap.pod_count_by_row(PodMatcher(selector, first.namespaces, first.namespace_selector))
    listed = next((t for t in terms if t.namespace_selector is None), None)
    if listed is not None:
        # one term names its namespaces: the common scope is those the other terms accept too
        scope = frozenset(ns for ns in listed.namespaces if all(_in_scope(t, ns, snap) for t in terms))
        return snap.pod_count_by_row(PodMatcher(selector, scope, None))
    # every term selects namespaces by label, each differently: no single matcher says it
    counts = np.zeros(snap.capacity, dtype=np.int32)
    for row in snap.live_rows().tolist():
        for other in snap.pods_on(row):
            ns_labels = snap.namespace_labels(other.namespace)
            if all(t.matches(other.namespace, other.labels, ns_labels) for t in terms):
                counts[row] += 1
    return counts


def _summed(arrays: Iterable[np.ndarray | None]) -> np.ndarray | None:
    total: np.ndarray | None = None
    for counts in arrays:
        if counts is not None:
            total = counts if total is None else total + counts
    return total


def _grouped(items: Iterable[tuple[str, _T]]) -> dict[str, list[_T]]:
    out: dict[str, list[_T]] = {}
    for key, item in items:
        out.setdefault(key, []).append(item)
    return out


class InterPodAffinity(
    Plugin,
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    QueueingHints,
):
    NAME = NAME
    Args = InterPodAffinityArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        resolved = args if isinstance(args, InterPodAffinityArgs) else InterPodAffinityArgs()
        self.hard_weight = resolved.hard_pod_affinity_weight
        self.ignore_existing_preferred = resolved.ignore_preferred_terms_of_existing_pods
        self._memo_snapshot: Snapshot | None = None
        self._memo_generation = -1
        self._memo: dict[tuple[str, frozenset[tuple[str, str]]], _ExistingTerms] = {}
        self._anti_terms: list[TermKey] = []
        self._score_terms: list[tuple[TermKey, int]] = []
        self._slots = _DomainSlots()

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (POD_ALL, NODE_ADD, NODE_UPDATE)

    # ------------------------------------------------------------------ queueing hints
    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(POD_ALL, self.after_pod_change),
            ClusterEventWithHint(NODE_ADD, self.after_node_change),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_change),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        # the terms are resolved against the pod's namespace already
        return pod.required_affinity, pod.required_anti_affinity

    def _any_term_matches(self, terms: Sequence[AffinityTerm], other: Pod) -> bool:
        if not terms:
            return False
        ns_labels = self.handle.snapshot.namespace_labels(other.namespace)
        return any(t.matches(other.namespace, other.labels, ns_labels) for t in terms)

    def after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterPodChange, widened where an existing pod's own
        terms can be what rejected the pod: a placed pod that the pod's affinity selects arrives
        (or is relabelled into a term), or one that its anti-affinity selects, or that carries
        anti-affinity of its own, leaves (or is relabelled out of a term)."""
        if old is not None and new is not None:
            # a binding is an arrival; finishing or terminating, a departure
            if not old.node_name:
                old = None
            elif pod_departs(old, new):
                new = None
        for other in (old, new):
            if other is not None and not other.node_name:
                return QueueingHint.QUEUE_SKIP
        terms, anti = pod.required_affinity, pod.required_anti_affinity
        if old is not None and new is not None:
            if old.labels == new.labels:
                return QueueingHint.QUEUE_SKIP
            if any(
                t.matches(new.namespace, new.labels, ns) and not t.matches(old.namespace, old.labels, ns)
                for ns in (self.handle.snapshot.namespace_labels(new.namespace),)
                for t in terms
            ):
                return QueueingHint.QUEUE
            if self._any_term_matches(anti, old) or old.required_anti_affinity:
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        if new is not None:
            return QueueingHint.QUEUE if self._any_term_matches(terms, new) else QueueingHint.QUEUE_SKIP
        if old is None:
            return QueueingHint.QUEUE
        # (a departing match of the pod's own affinity can leave it the first of its kind)
        if old.required_anti_affinity or self._any_term_matches(anti, old):
            return QueueingHint.QUEUE
        if self._any_term_matches(terms, old):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterNodeChange: a node gains (or changes) a topology
        key of the pod's affinity, or any node is added or loses/changes a key of its
        anti-affinity. A pod with no terms of its own was rejected by existing pods'
        anti-affinity, whose domains any relabelling can move."""
        if new is None:
            return QueueingHint.QUEUE_SKIP
        terms, anti = pod.required_affinity, pod.required_anti_affinity
        if not terms and not anti:
            return QueueingHint.QUEUE if old is None or old.labels != new.labels else QueueingHint.QUEUE_SKIP
        for t in terms:
            if old is None:
                if t.topology_key in new.labels:
                    return QueueingHint.QUEUE
            elif (value := new.labels.get(t.topology_key)) is not None and old.labels.get(
                t.topology_key
            ) != value:
                return QueueingHint.QUEUE
        for t in anti:
            if old is None:
                return QueueingHint.QUEUE
            if t.topology_key in old.labels and old.labels[t.topology_key] != new.labels.get(t.topology_key):
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    # ------------------------------------------------------------------ existing pods' terms
    def _existing_terms(self, pod: Pod) -> _ExistingTerms:
        snap: Snapshot = self.handle.snapshot
        if snap is not self._memo_snapshot or snap.term_match_generation != self._memo_generation:
            self._memo_snapshot = snap
            self._memo_generation = snap.term_match_generation
            self._memo.clear()
            self._anti_terms = []
            self._score_terms = []
            for tk in snap.term_counts:
                kind, _, weight = tk
                if kind == "anti":
                    self._anti_terms.append(tk)
                elif kind == "affinity":
                    if self.hard_weight > 0:
                        self._score_terms.append((tk, self.hard_weight))
                elif kind == "pref-affinity":
                    self._score_terms.append((tk, weight))
                elif kind == "pref-anti":
                    self._score_terms.append((tk, -weight))
        if not self._anti_terms and not self._score_terms:
            return _NO_EXISTING_TERMS
        # pods stamped from one template share namespace and labels, hence the answer
        memo_key = (pod.namespace, frozenset(pod.labels.items()))
        found = self._memo.get(memo_key)
        if found is None:
            ns_labels = snap.namespace_labels(pod.namespace)
            anti = _grouped(
                (tk[1].topology_key, tk)
                for tk in self._anti_terms
                if tk[1].matches(pod.namespace, pod.labels, ns_labels)
            )
            score = _grouped(
                (tk[1].topology_key, (tk, w))
                for tk, w in self._score_terms
                if tk[1].matches(pod.namespace, pod.labels, ns_labels)
            )
            found = _ExistingTerms(
                tuple((k, tuple(v)) for k, v in anti.items()),
                tuple((k, tuple(v)) for k, v in score.items()),
            )
            if len(self._memo) > 4096:
                self._memo.clear()
            self._memo[memo_key] = found
        return found

    # ------------------------------------------------------------------ filter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        required_affinity = pod.required_affinity
        required_anti = pod.required_anti_affinity
        existing = self._existing_terms(pod)
        if not required_affinity and not required_anti and not existing.anti:
            return None, SKIP
        snap: Snapshot = self.handle.snapshot
        slots = self._slots

        existing_anti: Domains = {}
        for key, term_keys in existing.anti:
            per_row = _summed(snap.term_counts.get(tk) for tk in term_keys)
            if per_row is not None:
                existing_anti[key] = _by_domain(slots.get(snap, key), per_row)
        if not required_affinity and not required_anti and not _any_domain(existing_anti):
            return None, SKIP

        affinity: Domains = {}
        self_match = False
        if required_affinity:
            matching_all = _count_matching_all(snap, required_affinity)
            for term in required_affinity:
                key = term.topology_key
                if key not in affinity:
                    key_slots = slots.get(snap, key)
                    affinity[key] = (
                        _by_domain(key_slots, matching_all)
                        if matching_all is not None
                        else np.zeros(1 if key_slots is None else key_slots[1], dtype=np.int64)
                    )
            ns_labels = snap.namespace_labels(pod.namespace)
            self_match = all(t.matches(pod.namespace, pod.labels, ns_labels) for t in required_affinity)

        anti: Domains = {}
        for key, terms in _grouped((t.topology_key, t) for t in required_anti).items():
            matchers = [m for m in map(PodMatcher.of_term, terms) if m is not None]
            per_row = _summed(snap.pod_count_by_row(m) for m in matchers)
            if per_row is not None:
                anti[key] = _by_domain(slots.get(snap, key), per_row)

        state.write(_PRE_FILTER_KEY, _FilterState(affinity, anti, existing_anti, self_match))
        return None, None

    def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        self._update(state, pod, other, row, 1)

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        self._update(state, pod, other, row, -1)

    def _update(self, state: CycleState, pod: Pod, other: Pod, row: int, delta: int) -> None:
        s: _FilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None:
            return
        snap: Snapshot = self.handle.snapshot
        if other.required_anti_affinity:
            pod_ns_labels = snap.namespace_labels(pod.namespace)
            for term in other.required_anti_affinity:
                if term.matches(pod.namespace, pod.labels, pod_ns_labels):
                    key = term.topology_key
                    _bump(s.existing_anti, self._slots.get(snap, key), key, row, delta)
                    s.verdict = None
        if not pod.required_affinity and not pod.required_anti_affinity:
            return
        other_ns_labels = snap.namespace_labels(other.namespace)
        if pod.required_affinity and all(
            t.matches(other.namespace, other.labels, other_ns_labels) for t in pod.required_affinity
        ):
            for key in list(s.affinity):
                _bump(s.affinity, self._slots.get(snap, key), key, row, delta)
            s.affinity_seen = _any_domain(s.affinity)
        for term in pod.required_anti_affinity:
            if term.matches(other.namespace, other.labels, other_ns_labels):
                key = term.topology_key
                _bump(s.anti, self._slots.get(snap, key), key, row, delta)
        s.verdict = None

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        s: _FilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None:
            return None
        snap: Snapshot = self.handle.snapshot
        verdict = s.verdict
        if verdict is None or verdict.size != snap.high_water:
            verdict = s.verdict = self._verdicts(s, snap)
        by_row = verdict[rows]
        if not by_row.any():
            return None
        return FilterResult(by_row == 0, _STATUS_OF_VERDICT, by_row)

    def _verdicts(self, s: _FilterState, snap: Snapshot) -> np.ndarray:
        """Every row's verdict at once: the checks are written in reverse order so that a row keeps
        the first one it fails."""
        upto = snap.high_water
        verdict = np.zeros(upto, dtype=np.int8)
        for failure, domains in ((_EXISTING_ANTI_FAILED, s.existing_anti), (_ANTI_FAILED, s.anti)):
            for key, dom in domains.items():
                key_slots = self._slots.get(snap, key)
                if key_slots is not None and dom.any():
                    at, size = key_slots
                    verdict[(_fitted(dom, size) > 0)[at]] = failure
        if s.affinity:
            passes = np.ones(upto, dtype=bool)
            # the first pod of a group that matches its own terms may start it anywhere
            first_of_group = not s.affinity_seen and s.self_match
            for key, dom in s.affinity.items():
                key_slots = self._slots.get(snap, key)
                if key_slots is None:
                    passes[:] = False
                    break
                at, size = key_slots
                allowed = np.ones(size, dtype=bool) if first_of_group else _fitted(dom, size) > 0
                allowed[0] = False  # nodes without the key
                passes &= allowed[at]
            verdict[~passes] = _AFFINITY_FAILED
        return verdict

    # ------------------------------------------------------------------ score
    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        if rows.size == 0:
            return SKIP
        has_preferred = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.ignore_existing_preferred and not has_preferred:
            return SKIP
        existing = self._existing_terms(pod)
        if not has_preferred and not existing.score:
            return SKIP
        snap: Snapshot = self.handle.snapshot
        # per topology key: the weighted number of matching pods on each row
        per_key: dict[str, np.ndarray] = {}

        def add(key: str, counts: np.ndarray, weight: int) -> None:
            weighted = counts * weight
            acc = per_key.get(key)
            per_key[key] = weighted if acc is None else acc + weighted

        for sign, weighted_terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
            for wt in weighted_terms:
                matcher = PodMatcher.of_term(wt.term)
                if matcher is not None:
                    add(wt.term.topology_key, snap.pod_count_by_row(matcher), sign * wt.weight)
        for key, items in existing.score:
            for tk, weight in items:
                counts = snap.term_counts.get(tk)
                if counts is not None:
                    add(key, counts, weight)

        domains = []
        for key, acc in per_key.items():
            dom = _by_domain(self._slots.get(snap, key), acc)
            if dom.any():
                domains.append((key, dom))
        if not domains:
            return SKIP
        state.write(_PRE_SCORE_KEY, _ScoreState(tuple(domains)))
        return None

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        s: _ScoreState | None = state.read(_PRE_SCORE_KEY)
        total: np.ndarray | None = None
        snap: Snapshot = self.handle.snapshot
        for key, dom in s.domains if s is not None else ():
            key_slots = self._slots.get(snap, key)
            if key_slots is not None:
                at, size = key_slots
                here = _fitted(dom, size)[at[rows]]
                total = here if total is None else total + here
        return np.zeros(rows.size, dtype=np.int64) if total is None else total

    def normalize_score(
        self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        if scores.size == 0:
            return scores
        low = int(scores.min())
        spread = int(scores.max()) - low
        if spread <= 0:
            return np.zeros(scores.size, dtype=np.int64)
        # kube: float64(MaxNodeScore) * (float64(score-min) / float64(max-min)), truncated
        ratio = np.true_divide(scores - low, float(spread))
        ratio *= float(MAX_NODE_SCORE)
        normalized: np.ndarray = ratio.astype(np.int64)
        return normalized
