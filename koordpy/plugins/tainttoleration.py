"""TaintToleration: a pod may not run on a node with a NoSchedule or NoExecute taint it does not
tolerate; nodes with fewer untolerated PreferNoSchedule taints score higher.

Clusters carry few distinct taint lists (most nodes have none; tainted pools share theirs), so
each node row is encoded by its taint list, and a pod's tolerations are evaluated once per
distinct list rather than once per node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    Taint,
    Toleration,
    count_intolerable_prefer_no_schedule,
    find_untolerated_taint,
)
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    MAX_NODE_SCORE,
    NODE_ADD,
    NODE_UPDATE,
    POD_UPDATE,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    QueueingHint,
    QueueingHints,
    ScoreExtensions,
    ScorePlugin,
)
from koordpy.framework.status import SUCCESS, Status, unresolvable

NAME = names.TAINT_TOLERATION

_FILTER_EFFECTS = frozenset((NO_SCHEDULE, NO_EXECUTE))
_CACHE_LIMIT = 256
# taint-list changes a verdict can catch up on row by row; one further behind is gathered anew
_CHANGES_KEPT = 64


def untolerated_taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint}"


class _TaintSets:
    """Each node row's taint list as a code into `sets`; code 0 is the empty list (also what rows
    without a node carry).

    Follows the snapshot's node changes row by row (`Snapshot.node_rows_changed_since`): only the
    rows whose node was added, replaced or removed are read again, and `version` moves only when
    some row's taint list really changed, so a status heartbeat leaves every verdict as it is."""

    __slots__ = ("_changes", "_code_of", "codes", "generation", "sets", "snapshot", "version")

    def __init__(self, snapshot: Any = None) -> None:
        self.snapshot = snapshot
        self.generation = -1
        # sized to the snapshot's row capacity, which doubles: growing it is rare
        self.codes = np.zeros(0, dtype=np.int32)
        self.sets: list[tuple[Taint, ...]] = [()]
        # keyed by plain (key, value, effect) tuples: hashing them stays in C
        self._code_of: dict[tuple[tuple[str, str, str], ...], int] = {(): 0}
        self.version = 0
        # (version, the rows whose code changed to reach it), the latest few
        self._changes: deque[tuple[int, np.ndarray]] = deque(maxlen=_CHANGES_KEPT)

    def refresh(self, snapshot: Any) -> None:
        """Bring the codes up to the snapshot's node generation."""
        rows = snapshot.node_rows_changed_since(self.generation) if self.generation >= 0 else None
        self.generation = snapshot.node_generation
        if self.codes.size < snapshot.capacity:
            grown = np.zeros(snapshot.capacity, dtype=np.int32)
            grown[: self.codes.size] = self.codes
            self.codes = grown
        infos = snapshot.infos
        codes = self.codes
        if rows is None:
            # every row read again (the first time, or too far behind the snapshot's log)
            fresh = np.zeros(codes.size, dtype=np.int32)
            for row, info in enumerate(infos[: snapshot.high_water]):
                if info is not None and info.node.taints:
                    fresh[row] = self._code(info.node.taints)
            changed = np.flatnonzero(fresh != codes)
            self.codes = fresh
        else:
            moved: list[int] = []
            for row in dict.fromkeys(rows):
                info = infos[row]
                taints = info.node.taints if info is not None else ()
                code = self._code(taints) if taints else 0
                if code != codes[row]:
                    codes[row] = code
                    moved.append(row)
            changed = np.array(moved, dtype=np.int64)
        if changed.size:
            self.version += 1
            self._changes.append((self.version, changed))

    def changed_since(self, version: int) -> np.ndarray | None:
        """The rows whose code changed after `version`; None when no longer kept."""
        if version == self.version:
            return np.zeros(0, dtype=np.int64)
        kept = [rows for at, rows in self._changes if at > version]
        if len(kept) != self.version - version:
            return None
        return kept[0] if len(kept) == 1 else np.unique(np.concatenate(kept))

    def _code(self, taints: tuple[Taint, ...]) -> int:
        key = tuple((t.key, t.value, t.effect) for t in taints)
        code = self._code_of.get(key)
        if code is None:
            code = len(self.sets)
            self._code_of[key] = code
            self.sets.append(taints)
        return code


class _Verdict:
    """One toleration list against every node row.

    `reason[row]` indexes `statuses` (0: tolerated); `counts[row]` is the number of
    untolerated PreferNoSchedule taints. Both are gathered from per-taint-list tables, and kept up
    to date with the taint lists (`catch_up`): a taint change re-gathers only its rows. An empty
    `reason` (`counts`) means no row fails (counts anything)."""

    __slots__ = (
        "_count_by_set",
        "_reason_by_set",
        "_status_of",
        "any_count",
        "any_fail",
        "counts",
        "reason",
        "statuses",
        "tolerations",
        "version",
    )

    def __init__(self, taint_sets: _TaintSets, tolerations: tuple[Toleration, ...]) -> None:
        self.tolerations = tolerations
        self.statuses: list[Status] = [SUCCESS]
        # taints differing only in effect share one reason text, hence one status
        self._status_of: dict[str, int] = {}
        self._reason_by_set = np.zeros(0, dtype=np.int16)
        self._count_by_set = np.zeros(0, dtype=np.int32)
        self._judge_new_sets(taint_sets)
        self._gather(taint_sets)

    def _judge_new_sets(self, taint_sets: _TaintSets) -> None:
        """Judge the taint lists seen since the last call."""
        known = self._reason_by_set.size
        fresh = taint_sets.sets[known:]
        if not fresh:
            return
        reasons = np.zeros(len(fresh), dtype=np.int16)
        counts = np.zeros(len(fresh), dtype=np.int32)
        tolerations = self.tolerations
        for i, taints in enumerate(fresh):
            if not taints:
                continue
            taint = find_untolerated_taint(taints, tolerations, _FILTER_EFFECTS)
            if taint is not None:
                reason = untolerated_taint_reason(taint)
                index = self._status_of.get(reason)
                if index is None:
                    index = len(self.statuses)
                    self._status_of[reason] = index
                    self.statuses.append(unresolvable(reason))
                reasons[i] = index
            counts[i] = count_intolerable_prefer_no_schedule(taints, tolerations)
        self._reason_by_set = np.concatenate((self._reason_by_set, reasons))
        self._count_by_set = np.concatenate((self._count_by_set, counts))

    def _reason_dtype(self) -> type[np.signedinteger[Any]]:
        # a narrower per-row array makes the per-pod gather cheaper
        return np.int8 if len(self.statuses) <= np.iinfo(np.int8).max else np.int16

    def _gather(self, taint_sets: _TaintSets) -> None:
        """Every row from the tables."""
        self.version = taint_sets.version
        codes = taint_sets.codes
        self.any_fail = bool(self._reason_by_set.any())
        self.any_count = bool(self._count_by_set.any())
        by_set = self._reason_by_set.astype(self._reason_dtype())
        self.reason = by_set[codes] if self.any_fail else by_set[:0]
        self.counts = self._count_by_set[codes] if self.any_count else self._count_by_set[:0]

    def catch_up(self, taint_sets: _TaintSets) -> None:
        """Follow the rows whose taint list changed since this verdict was last brought up."""
        self._judge_new_sets(taint_sets)
        rows = taint_sets.changed_since(self.version)
        size = taint_sets.codes.size
        if (
            rows is None
            or (self.any_fail and (self.reason.size != size or self.reason.dtype != self._reason_dtype()))
            or (self.any_count and self.counts.size != size)
        ):
            self._gather(taint_sets)
            return
        self.version = taint_sets.version
        if rows.size == 0:
            return
        codes = taint_sets.codes[rows]
        reasons = self._reason_by_set[codes]
        counts = self._count_by_set[codes]
        # a row that starts failing (counting) where none did: the array is made for every row
        if (not self.any_fail and reasons.any()) or (not self.any_count and counts.any()):
            self._gather(taint_sets)
            return
        # a flag that stays set after its last row cleared only costs a gather that finds nothing
        if self.any_fail:
            self.reason[rows] = reasons
        if self.any_count:
            self.counts[rows] = counts


def reverse_normalize(scores: np.ndarray) -> np.ndarray:
    """kube-scheduler's DefaultNormalizeScore reversed: the node with the most scores 0, nodes
    with none 100; all 100 when every score is zero."""
    if scores.size == 0:
        return scores
    top = int(scores.max())
    if top == 0:
        return np.full(scores.size, MAX_NODE_SCORE, dtype=np.int64)
    # counts are small: one lookup per node instead of three arithmetic passes
    table = MAX_NODE_SCORE - np.arange(top + 1, dtype=np.int64) * MAX_NODE_SCORE // top
    return table.take(scores)


class TaintToleration(Plugin, FilterPlugin, ScorePlugin, ScoreExtensions, QueueingHints):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self._taint_sets = _TaintSets()
        self._verdicts: dict[tuple[Toleration, ...], _Verdict] = {}
        # the pod whose verdict was looked up last: Filter and Score of one pod ask in turn
        self._last: tuple[Pod, _Verdict] | None = None

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # a node added or its taints changed; a pod given more tolerations
        return (NODE_ADD, NODE_UPDATE, POD_UPDATE)

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(NODE_ADD, self.after_node_change),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_change),
            ClusterEventWithHint(POD_UPDATE, self.after_pod_change),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        # after_pod_change reads the pod's identity, but a pod's own update is asked of that pod
        # alone, never of its group
        return pod.tolerations

    def after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterNodeChange: a node whose NoSchedule/NoExecute
        taints the pod now tolerates, and did not before."""
        if new is None or find_untolerated_taint(new.taints, pod.tolerations, _FILTER_EFFECTS) is not None:
            return QueueingHint.QUEUE_SKIP
        if old is not None and find_untolerated_taint(old.taints, pod.tolerations, _FILTER_EFFECTS) is None:
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE

    def after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterPodTolerationChange: only the pod's own new
        tolerations can help it; another pod's update cannot."""
        return QueueingHint.QUEUE if new is not None and new.key == pod.key else QueueingHint.QUEUE_SKIP

    def _verdict(self, pod: Pod) -> _Verdict:
        snapshot = self.handle.snapshot
        sets = self._taint_sets
        if sets.snapshot is not snapshot:
            sets = self._taint_sets = _TaintSets(snapshot)
            self._verdicts.clear()
            self._last = None
        if sets.generation != snapshot.node_generation:
            sets.refresh(snapshot)
        last = self._last
        if last is not None and last[0] is pod:
            verdict = last[1]
        else:
            found = self._verdicts.get(pod.tolerations)
            if found is None:
                if len(self._verdicts) >= _CACHE_LIMIT:
                    self._verdicts.clear()
                found = _Verdict(sets, pod.tolerations)
                self._verdicts[pod.tolerations] = found
            verdict = found
            self._last = (pod, verdict)
        if verdict.version != sets.version:
            verdict.catch_up(sets)
        return verdict

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        verdict = self._verdict(pod)
        if not verdict.any_fail:
            return None
        reason = verdict.reason[rows]
        passed = reason == 0
        if np.count_nonzero(passed) == passed.size:
            return None
        return FilterResult(passed, verdict.statuses, reason)

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        # kube-scheduler's PreScore keeps only the tolerations with an empty or PreferNoSchedule
        # effect; the others cannot tolerate a PreferNoSchedule taint, so the shared verdict
        # (all tolerations) counts the same
        verdict = self._verdict(pod)
        if not verdict.any_count:
            return np.zeros(rows.size, dtype=np.int32)
        counts: np.ndarray = verdict.counts[rows]
        return counts

    def normalize_score(
        self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        return reverse_normalize(scores)
