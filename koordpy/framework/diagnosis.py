"""Why a pod fits nowhere: per-node statuses kept as arrays, and the aggregated message in
kube-scheduler's format (`0/8 nodes are available: 3 Insufficient cpu, 5 node(s) had ...`).

As in kube-scheduler (schedule_one.go findNodesThatFitPod, FitError.Error in framework/types.go),
a node no filter looked at counts under the diagnosis's absent status: when a PreFilter result
narrowed the nodes to try (a pod pinned with `matchFields metadata.name`, a gang member's planned
node), every other node is `node(s) didn't satisfy plugin(s) [<the plugins that narrowed>]`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import FilterResult
from koordpy.framework.status import Code, Status

NO_NODE_AVAILABLE = "0/{} nodes are available"
# kube-scheduler's ErrNoNodesAvailable: with no node at all there is no FitError to render
NO_NODES = "no nodes available to schedule pods"
# where the profile's PreFilter run leaves the names of the plugins whose result narrowed the nodes
NARROWED_BY_KEY = "PreFilterNarrowedBy"


def unsatisfied_plugins(plugins: Iterable[str]) -> str:
    """The reason of a node a PreFilter result left out (kube prints the sorted set as a Go slice)."""
    return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(set(plugins)))}]"


def no_node_left(plugins: Iterable[str]) -> str:
    """Why no node is left when the PreFilter results have no node in common."""
    names = sorted(set(plugins))
    if len(names) == 1:
        return f"node(s) didn't satisfy plugin {names[0]}"
    return f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"


class Diagnosis:
    __slots__ = (
        "_chunks",
        "_pending",
        "_single",
        "absent_status",
        "post_filter_msg",
        "pre_filter_msg",
        "pre_filter_status",
        "unschedulable_plugins",
    )

    def __init__(self) -> None:
        self._chunks: list[tuple[np.ndarray, FilterResult]] = []
        self._pending: list[tuple[np.ndarray, FilterResult, str]] = []
        self._single: dict[int, Status] = {}
        self.unschedulable_plugins: set[str] = set()
        self.pre_filter_msg = ""
        # when PreFilter rejected the pod, every node carries this status
        self.pre_filter_status: Status | None = None
        self.post_filter_msg = ""
        # the status of every node without a recorded one (kube's absent-nodes status); its
        # reasons count only when a PreFilter result left nodes out
        self.absent_status: Status | None = None

    def narrowed(self, state: CycleState) -> None:
        """The cycle tried only the nodes its PreFilter results allowed: the others carry kube's
        absent status naming those plugins, which also become this pod's rejectors (a node added
        or changed can be the one the pod is pinned to)."""
        plugins: tuple[str, ...] = state.read(NARROWED_BY_KEY) or ()
        if not plugins:
            return
        self.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (unsatisfied_plugins(plugins),))
        self.unschedulable_plugins.update(plugins)

    def record(self, rows: np.ndarray, result: FilterResult, plugin: str) -> None:
        """`rows` and `result` aligned. Recording is on every filter's path, so it only keeps the
        references; the failed entries are picked out when asked (a pod that fits never asks)."""
        self._pending.append((rows, result, plugin))
        self.unschedulable_plugins.add(plugin)

    def _settle(self) -> None:
        for rows, result, plugin in self._pending:
            failed = ~result.passed
            if not failed.any():
                continue
            reason_of = None if result.reason_of is None else result.reason_of[failed]
            statuses = [s.with_plugin(plugin) for s in result.statuses]
            self._chunks.append(
                (rows[failed], FilterResult(np.zeros(int(failed.sum()), dtype=bool), statuses, reason_of))
            )
        self._pending.clear()

    def record_node(self, row: int, status: Status) -> None:
        self._single[row] = status
        if status.plugin:
            self.unschedulable_plugins.add(status.plugin)

    def statuses_by_row(self) -> dict[int, Status]:
        self._settle()
        out: dict[int, Status] = {}
        for rows, result in self._chunks:
            for i, row in enumerate(rows.tolist()):
                out[row] = result.status_at(i)
        out.update(self._single)
        return out

    def code_by_row(self, capacity: int) -> np.ndarray:
        """int8 per row: the status code recorded for it (0 when none)."""
        self._settle()
        codes = np.zeros(capacity, dtype=np.int8)
        for rows, result in self._chunks:
            table = np.array([int(s.code) for s in result.statuses], dtype=np.int8)
            codes[rows] = table[0] if result.reason_of is None else table[result.reason_of]
        for row, status in self._single.items():
            codes[row] = int(status.code)
        return codes

    def reason_histogram(self) -> Counter[str]:
        self._settle()
        hist: Counter[str] = Counter()
        for rows, result in self._chunks:
            if result.reason_of is None:
                counts = {0: rows.size}
            else:
                values, n = np.unique(result.reason_of, return_counts=True)
                counts = dict(zip(values.tolist(), n.tolist(), strict=True))
            for idx, count in counts.items():
                for reason in result.statuses[idx].reasons:
                    hist[reason] += count
        singles = set(self._single)
        if singles:
            # a node-by-node verdict replaces what the vectorized pass said about that node
            for rows, result in self._chunks:
                for i, row in enumerate(rows.tolist()):
                    if row in singles:
                        for reason in result.status_at(i).reasons:
                            hist[reason] -= 1
            for status in self._single.values():
                for reason in status.reasons:
                    hist[reason] += 1
        return +hist

    def has_failures(self) -> bool:
        self._settle()
        return bool(self._chunks or self._single)

    def recorded_nodes(self) -> int:
        """How many distinct nodes carry a recorded status."""
        self._settle()
        if not self._chunks:
            return len(self._single)
        rows = np.concatenate([rows for rows, _ in self._chunks])
        if self._single:
            rows = np.concatenate((rows, np.fromiter(self._single, dtype=rows.dtype)))
        return int(np.unique(rows).size)


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    if num_all_nodes == 0:
        return NO_NODES
    msg = NO_NODE_AVAILABLE.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        hist = diagnosis.reason_histogram()
        absent = diagnosis.absent_status
        if absent is not None and absent.reasons:
            missing = num_all_nodes - diagnosis.recorded_nodes()
            if missing > 0:
                for reason in absent.reasons:
                    hist[reason] += missing
        reasons = sorted(f"{count} {reason}" for reason, count in hist.items())
        if reasons:
            msg += f" {', '.join(reasons)}."
    if diagnosis.post_filter_msg:
        msg += f" {diagnosis.post_filter_msg}."
    return msg


def is_unresolvable(code: int) -> bool:
    return code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
