"""PreScore, Score and NormalizeScore: prefer the domains holding the fewest matching pods under the
pod's `ScheduleAnyway` constraints."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from koordpy.api.affinity import HONOR, SCHEDULE_ANYWAY
from koordpy.api.node import HOSTNAME_LABEL
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import MAX_NODE_SCORE
from koordpy.framework.status import SKIP, Status
from koordpy.plugins.podtopologyspread.common import (
    NAME,
    Constraint,
    SpreadCache,
    n_label_values,
    node_view,
    row_classes,
)

PRE_SCORE_KEY = "PreScore" + NAME


@dataclass(slots=True)
class ScorePlan:
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
    every_row: RowSet | None = None


@dataclass(slots=True)
class RowScores:
    """Raw and normalized scores of a set of rows, as tables over score classes: the node-side
    row classes, plus one class of its own for each row holding matching pods under a hostname
    constraint."""

    rows: np.ndarray
    classes: np.ndarray
    raw: np.ndarray
    normalized: np.ndarray


@dataclass(slots=True)
class RowSet:
    """What a set of rows contributes independently of pod counts."""

    classes: np.ndarray
    every_row: bool
    class_count: np.ndarray
    kept_nodes: int
    # per constraint: log(number of domains among the kept rows + 2), kube's normalizing weight
    weights: list[float]


@dataclass(slots=True)
class PreScoreState:
    constraints: tuple[Constraint, ...]
    plan: ScorePlan
    scores: RowScores


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


def score_plan(cache: SpreadCache, pod: Pod, cs: tuple[Constraint, ...], require_all: bool) -> ScorePlan:
    snap = cache.sync_generation()
    key = (cache.plan_key("score", pod, cs), require_all)
    plan = cache.plan(key)
    if isinstance(plan, ScorePlan):
        return plan
    hw, live, affinity, taints, codes, all_keys = node_view(cache, snap, pod, cs)
    ignored = ~live | (~all_keys if require_all else False)
    components: list[np.ndarray] = [ignored]
    count_bins, n_bins = [], []
    for c, code in zip(cs, codes, strict=True):
        n_values = n_label_values(snap, c.topology_key)
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
    classes, values = row_classes(components)
    plan = ScorePlan(
        hw=hw,
        count_bins=count_bins,
        n_bins=n_bins,
        classes=classes,
        class_count=np.bincount(classes[live], minlength=values.shape[0]),
        class_ignored=values[:, 0].astype(bool),
        class_value_bin=[values[:, 1 + 2 * i] for i in range(len(cs))],
        class_has_key_f=[values[:, 2 + 2 * i].astype(np.float64) for i in range(len(cs))],
    )
    cache.remember(key, plan)
    return plan


def pre_score(
    cache: SpreadCache, state: CycleState, pod: Pod, rows: np.ndarray, system_defaulted: bool
) -> Status | None:
    snap = cache.handle.snapshot
    if snap.node_count == 0:
        return SKIP
    cs = cache.constraints(pod, SCHEDULE_ANYWAY)
    if not cs:
        return SKIP
    # only the system defaults tolerate nodes without every topology label, so that nodes
    # without a zone still get hostname spreading
    require_all = bool(pod.spread_constraints) or not system_defaulted
    plan = score_plan(cache, pod, cs, require_all)
    state.write(PRE_SCORE_KEY, PreScoreState(cs, plan, score_rows(cache, cs, plan, rows)))
    return None


def row_set(cache: SpreadCache, cs: tuple[Constraint, ...], plan: ScorePlan, rows: np.ndarray) -> RowSet:
    classes, every_row = cache.row_classes_of(plan.classes, plan.hw, rows)
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
    out = RowSet(classes, every_row, class_count, kept_nodes, weights)
    if every_row:
        plan.every_row = out
    return out


def score_rows(
    cache: SpreadCache, cs: tuple[Constraint, ...], plan: ScorePlan, rows: np.ndarray
) -> RowScores:
    """Raw and normalized scores of `rows` (kube's Score and NormalizeScore)."""
    snap = cache.handle.snapshot
    rs = row_set(cache, cs, plan, rows)
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
                    pos, counts = cache.nonzero(c.matcher)
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
            nz_rows, nz_counts = cache.nonzero(c.matcher)
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
    return RowScores(rows, classes, raw, _normalize(raw, (count > 0) & ~ignored))


def _scores_for(cache: SpreadCache, state: CycleState, rows: np.ndarray) -> RowScores | None:
    s: PreScoreState | None = state.read(PRE_SCORE_KEY)
    if s is None:
        return None
    if s.scores.rows is not rows and not np.array_equal(s.scores.rows, rows):
        s.scores = score_rows(cache, s.constraints, s.plan, rows)
    return s.scores


def score(cache: SpreadCache, state: CycleState, rows: np.ndarray) -> np.ndarray:
    scores = _scores_for(cache, state, rows)
    if scores is None:
        return np.zeros(rows.size, dtype=np.int64)
    return scores.raw.take(scores.classes)


def normalize_score(
    cache: SpreadCache, state: CycleState, rows: np.ndarray, scores: np.ndarray
) -> np.ndarray:
    # the normalized values were computed with the raw ones: `scores` is what score() gave
    computed = _scores_for(cache, state, rows)
    if computed is None:
        return np.asarray(scores, dtype=np.int64)
    return computed.normalized.take(computed.classes)
