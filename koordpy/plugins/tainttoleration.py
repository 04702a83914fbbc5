"""TaintToleration: a pod may not run on a node with a NoSchedule or NoExecute taint it does not
tolerate; nodes with fewer untolerated PreferNoSchedule taints score higher.

Clusters carry few distinct taint lists (most nodes have none; tainted pools share theirs), so
each node row is encoded by its taint list, and a pod's tolerations are evaluated once per
distinct list rather than once per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

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
    FilterResult,
    Plugin,
)
from koordpy.framework.status import SUCCESS, Status, unresolvable

NAME = "TaintToleration"

_FILTER_EFFECTS = frozenset((NO_SCHEDULE, NO_EXECUTE))
_CACHE_LIMIT = 256


def untolerated_taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint}"


class _TaintSets:
    """Each node row's taint list as a code into `sets`; code 0 is the empty list (also what dead
    rows carry). Valid for one node generation."""

    __slots__ = ("codes", "generation", "sets")

    def __init__(self, snapshot: Any) -> None:
        self.generation = snapshot.node_generation
        self.codes = np.zeros(snapshot.high_water, dtype=np.int32)
        self.sets: list[tuple[Taint, ...]] = [()]
        code_of: dict[tuple[Taint, ...], int] = {(): 0}
        infos = snapshot.infos
        # only on a node change: node objects are Python data, so this is one pass over them
        for row in snapshot.live_rows().tolist():
            taints = infos[row].node.taints
            if not taints:
                continue
            code = code_of.get(taints)
            if code is None:
                code = len(self.sets)
                code_of[taints] = code
                self.sets.append(taints)
            self.codes[row] = code


class _Verdict:
    """One toleration list against every node row.

    `reason[row]` indexes `statuses` (0: tolerated); `counts[row]` is the number of
    untolerated PreferNoSchedule taints."""

    __slots__ = ("any_count", "any_fail", "counts", "reason", "statuses")

    def __init__(self, taint_sets: _TaintSets, tolerations: Sequence[Toleration]) -> None:
        self.statuses: list[Status] = [SUCCESS]
        status_of: dict[Taint, int] = {}
        reason_by_set = np.zeros(len(taint_sets.sets), dtype=np.int16)
        count_by_set = np.zeros(len(taint_sets.sets), dtype=np.int64)
        for code, taints in enumerate(taint_sets.sets):
            if not taints:
                continue
            taint = find_untolerated_taint(taints, tolerations, _FILTER_EFFECTS)
            if taint is not None:
                index = status_of.get(taint)
                if index is None:
                    index = len(self.statuses)
                    status_of[taint] = index
                    self.statuses.append(unresolvable(untolerated_taint_reason(taint)))
                reason_by_set[code] = index
            count_by_set[code] = count_intolerable_prefer_no_schedule(taints, tolerations)
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
    return MAX_NODE_SCORE - scores * MAX_NODE_SCORE // top


class TaintToleration(Plugin):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self._taint_sets: _TaintSets | None = None
        self._taint_sets_snapshot = -1
        self._verdicts: dict[tuple[Toleration, ...], _Verdict] = {}
        # the pod whose verdict was looked up last: Filter and Score of one pod ask in turn
        self._last: tuple[Pod, _Verdict] | None = None

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # a node added or its taints changed; a pod given more tolerations
        return (NODE_ADD, NODE_UPDATE, POD_UPDATE)

    def _verdict(self, pod: Pod) -> _Verdict:
        snapshot = self.handle.snapshot
        sets = self._taint_sets
        if sets is None or sets.generation != snapshot.node_generation or (
            id(snapshot) != self._taint_sets_snapshot
        ):
            sets = self._taint_sets = _TaintSets(snapshot)
            self._taint_sets_snapshot = id(snapshot)
            self._verdicts.clear()
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
        if passed.all():
            return None
        return FilterResult(passed, verdict.statuses, reason)

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        # kube-scheduler's PreScore keeps only the tolerations with an empty or PreferNoSchedule
        # effect; the others cannot tolerate a PreferNoSchedule taint, so the shared verdict
        # (all tolerations) counts the same
        verdict = self._verdict(pod)
        if not verdict.any_count:
            return np.zeros(rows.size, dtype=np.int64)
        return verdict.counts[rows]

    def normalize_score(
        self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        return reverse_normalize(scores)
