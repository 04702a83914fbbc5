"""The aggregated failure message, in kube-scheduler's format."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.framework.diagnosis import Diagnosis, fit_error_message
from koordpy.framework.interfaces import FilterResult
from koordpy.framework.status import unresolvable, unschedulable


def test_reasons_are_counted_and_sorted_as_strings() -> None:
    d = Diagnosis()
    rows = np.arange(8)
    cpu, taint = (
        unschedulable("Insufficient cpu"),
        unresolvable("node(s) had untolerated taint {dedicated: gitlab}"),
    )
    passed = np.zeros(8, dtype=bool)
    reason_of = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    d.record(rows, FilterResult(passed, [cpu, taint], reason_of), "X")
    assert fit_error_message(8, d) == (
        "0/8 nodes are available: 3 Insufficient cpu, 5 node(s) had untolerated taint {dedicated: gitlab}."
    )


def test_one_node_with_two_reasons_counts_in_both() -> None:
    d = Diagnosis()
    d.record(
        np.array([0]),
        FilterResult(np.array([False]), [unschedulable("Insufficient cpu", "Insufficient memory")]),
        "NodeResourcesFit",
    )
    assert fit_error_message(1, d) == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."


@pytest.mark.parametrize(
    ("pre", "post", "expected"),
    [
        (
            "pod has unbound immediate PersistentVolumeClaims",
            "",
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        ),
        (
            "",
            "preemption: not eligible",
            "0/3 nodes are available: 3 Insufficient cpu. preemption: not eligible.",
        ),
    ],
    ids=["prefilter-message-replaces-node-reasons", "postfilter-message-follows"],
)
def test_prefilter_and_postfilter_messages(pre: str, post: str, expected: str) -> None:
    d = Diagnosis()
    d.record(np.arange(3), FilterResult(np.zeros(3, dtype=bool), [unschedulable("Insufficient cpu")]), "F")
    d.pre_filter_msg = pre
    d.post_filter_msg = post
    assert fit_error_message(3, d) == expected


def test_node_checked_again_replaces_its_earlier_reason() -> None:
    d = Diagnosis()
    d.record(np.arange(2), FilterResult(np.array([False, True]), [unschedulable("Insufficient cpu")]), "F")
    d.record_node(1, unschedulable("Insufficient memory"))
    assert fit_error_message(2, d) == "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
