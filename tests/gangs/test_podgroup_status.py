"""The PodGroup status each API group's controller writes, one reconcile step at a time."""

from __future__ import annotations

import pytest

from koordpy.status.podgroup import MemberCounts, next_status, settle

SIGS = "scheduling.sigs.k8s.io"
X = "scheduling.x-k8s.io"


def counts(
    total: int = 0, scheduled: int = 0, running: int = 0, succeeded: int = 0, failed: int = 0
) -> MemberCounts:
    return MemberCounts(total, scheduled, running, succeeded, failed)


@pytest.mark.parametrize(
    ("api", "previous", "c", "expected"),
    [
        (SIGS, "", counts(), "Pending"),
        (SIGS, "Pending", counts(total=2), "Pending"),
        (SIGS, "Pending", counts(total=3), "PreScheduling"),
        (SIGS, "PreScheduling", counts(total=3, scheduled=1), "Scheduling"),
        (SIGS, "Scheduling", counts(total=3, scheduled=3), "Scheduled"),
        (SIGS, "Scheduled", counts(total=3, scheduled=3, running=3), "Running"),
        (SIGS, "Running", counts(total=3, scheduled=3, running=2, failed=1), "Failed"),
        (SIGS, "Running", counts(total=3, scheduled=3, succeeded=3), "Finished"),
        (SIGS, "Scheduling", counts(), "Pending"),
        (SIGS, "Finished", counts(total=3), "Finished"),
        (X, "", counts(), "Pending"),
        (X, "Pending", counts(total=3), "Scheduling"),
        (X, "Scheduling", counts(total=3, scheduled=3, running=2), "Scheduling"),
        (X, "Scheduling", counts(total=3, scheduled=3, running=3), "Running"),
        (X, "Running", counts(total=2, running=2), "Pending"),
        (X, "Running", counts(total=3, running=1, succeeded=1, failed=1), "Failed"),
    ],
    ids=[
        "sigs-new",
        "sigs-too-few-pods",
        "sigs-enough-pods",
        "sigs-some-scheduled",
        "sigs-all-scheduled",
        "sigs-running",
        "sigs-failed",
        "sigs-finished",
        "sigs-no-pods-left",
        "sigs-finished-is-final",
        "x-new",
        "x-enough-pods",
        "x-not-all-running",
        "x-running",
        "x-members-gone",
        "x-failed",
    ],
)
def test_one_reconcile_step(api: str, previous: str, c: MemberCounts, expected: str) -> None:
    status = next_status(api, 3, {"phase": previous} if previous else {}, c, None, 0.0)
    assert status["phase"] == expected


def test_sigs_scheduling_records_schedule_start_time_once() -> None:
    first = next_status(SIGS, 3, {"phase": "PreScheduling"}, counts(total=3, scheduled=1), None, 100.0)
    later = next_status(SIGS, 3, first, counts(total=3, scheduled=2), None, 200.0)
    assert first["scheduleStartTime"] == later["scheduleStartTime"] == "1970-01-01T00:01:40Z"


def test_settle_walks_to_running_and_records_occupant() -> None:
    status = settle(SIGS, 2, {}, counts(total=2, scheduled=2, running=2), "default/job", 0.0)
    assert (status["phase"], status["occupiedBy"], status["scheduled"], status["running"]) == (
        "Running",
        "default/job",
        2,
        2,
    )


def test_x_k8s_status_has_no_scheduled_count() -> None:
    assert "scheduled" not in settle(X, 1, {}, counts(total=1, scheduled=1, running=1), None, 0.0)
