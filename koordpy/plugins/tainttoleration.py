"""TaintToleration: a pod may not run on a node with a NoSchedule or NoExecute taint it does not
tolerate; nodes with fewer untolerated PreferNoSchedule taints score higher.

Clusters carry few distinct taint lists (most nodes have none; tainted pools share theirs), so
each node row is encoded by its taint list, and a pod's tolerations are evaluated once per
distinct list rather than once per node.
"""

from __future__ import annotations

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


def untolerated_taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint}"


class _TaintSets:
    """Each node row's taint list as a code into `sets`; code 0 is the empty list (also what dead
    rows carry).

    Refreshed when the node generation moves: only rows whose node object was replaced are
    re-encoded, so a node update costs one identity check per row, not a re-hash of every
    node's taints."""

    __slots__ = ("_code_of", "_nodes", "codes", "generation", "sets", "snapshot_id")

    def __init__(self) -> None:
        self.snapshot_id = -1
        self._reset()

    def _reset(self) -> None:
        self.generation = -1
        self.codes = np.zeros(0, dtype=np.int32)
        self.sets: list[tuple[Taint, ...]] = [()]
        # keyed by plain (key, value, effect) tuples: hashing them stays in C
        self._code_of: dict[tuple[tuple[str, str, str], ...], int] = {(): 0}
        self._nodes: list[Any] = []

    def refresh(self, snapshot: Any) -> bool:
        """Bring the codes up to date; True when any row's taint list changed."""
        if id(snapshot) != self.snapshot_id:
            self._reset()
            self.snapshot_id = id(snapshot)
        self.generation = snapshot.node_generation
        high_water = snapshot.high_water
        if self.codes.size < high_water:
            grown = np.zeros(high_water, dtype=np.int32)
            grown[: self.codes.size] = self.codes
            self.codes = grown
            self._nodes.extend([None] * (high_water - len(self._nodes)))
        nodes = self._nodes
        codes = self.codes
        changed = False
        for row, info in enumerate(snapshot.infos[:high_water]):
            node = None if info is None else info.node
            if node is nodes[row]:
                continue
            nodes[row] = node
            code = 0 if node is None or not node.taints else self._code(node.taints)
            if code != codes[row]:
                codes[row] = code
                changed = True
        return changed

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
    untolerated PreferNoSchedule taints."""

    __slots__ = ("any_count", "any_fail", "counts", "reason", "statuses")

    def __init__(self, taint_sets: _TaintSets, tolerations: Sequence[Toleration]) -> None:
        self.statuses: list[Status] = [SUCCESS]
        # taints differing only in effect share one reason text, hence one status
        status_of: dict[str, int] = {}
        reason_by_set = np.zeros(len(taint_sets.sets), dtype=np.int16)
        count_by_set = np.zeros(len(taint_sets.sets), dtype=np.int32)
        for code, taints in enumerate(taint_sets.sets):
            if not taints:
                continue
            taint = find_untolerated_taint(taints, tolerations, _FILTER_EFFECTS)
            if taint is not None:
                reason = untolerated_taint_reason(taint)
                index = status_of.get(reason)
                if index is None:
                    index = len(self.statuses)
                    status_of[reason] = index
                    self.statuses.append(unresolvable(reason))
                reason_by_set[code] = index
            count_by_set[code] = count_intolerable_prefer_no_schedule(taints, tolerations)
        if len(self.statuses) <= np.iinfo(np.int8).max:
            # a narrower per-row array makes the per-pod gather cheaper
            reason_by_set = reason_by_set.astype(np.int8)
        self.any_fail = bool(reason_by_set.any())
        self.any_count = bool(count_by_set.any())
        self.reason = reason_by_set[taint_sets.codes] if self.any_fail else reason_by_set[:0]
        self.counts = count_by_set[taint_sets.codes] if self.any_count else count_by_set[:0]


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
        # the number of rows the cached verdicts cover
        self._verdicts_rows = 0
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
        # after_pod_change reads the pod's identity, but a pod's own update never reaches the
        # pool's events (the queue requeues an updated pod itself)
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
        if sets.generation != snapshot.node_generation or sets.snapshot_id != id(snapshot):
            if sets.refresh(snapshot) or self._verdicts_rows != sets.codes.size:
                self._verdicts.clear()
                self._verdicts_rows = sets.codes.size
            self._last = None
        last = self._last
        if last is not None and last[0] is pod:
            return last[1]
        verdict = self._verdicts.get(pod.tolerations)
        if verdict is None:
            if len(self._verdicts) >= _CACHE_LIMIT:
                self._verdicts.clear()
            verdict = _Verdict(sets, pod.tolerations)
            self._verdicts[pod.tolerations] = verdict
        self._last = (pod, verdict)
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
