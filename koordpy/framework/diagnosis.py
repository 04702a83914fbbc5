"""Why a pod fits nowhere: per-node statuses kept as arrays, and the aggregated message in
kube-scheduler's format (`0/8 nodes are available: 3 Insufficient cpu, 5 node(s) had ...`)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from koordpy.framework.interfaces import FilterResult
from koordpy.framework.status import Code, Status

NO_NODE_AVAILABLE = "0/{} nodes are available"


class Diagnosis:
    __slots__ = (
        "_chunks",
        "_pending",
        "_single",
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


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    msg = NO_NODE_AVAILABLE.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        reasons = sorted(f"{count} {reason}" for reason, count in diagnosis.reason_histogram().items())
        if reasons:
            msg += f" {', '.join(reasons)}."
    if diagnosis.post_filter_msg:
        msg += f" {diagnosis.post_filter_msg}."
    return msg


def is_unresolvable(code: int) -> bool:
    return code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
