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


def member_counts(phases: list[str]) -> MemberCounts:
    """Members in these pod phases; a member past Pending has been bound."""
    return counts(
        total=len(phases),
        scheduled=sum(p != "Pending" for p in phases),
        running=phases.count("Running"),
        succeeded=phases.count("Succeeded"),
        failed=phases.count("Failed"),
    )


# scheduler-plugins' Test_Run (pkg/controllers/podgroup_controller_test.go): the group's phase once
# its controller has reconciled after each member's update.
# (minMember, the members' pod phases, the group's phase before, the phase after)
X_K8S_CONTROLLER_CASES: dict[str, tuple[int, list[str], str, str]] = {
    "Group running": (2, ["Running"] * 2, "Scheduling", "Running"),
    "Group running, more than min member": (2, ["Running"] * 4, "Scheduling", "Running"),
    "Group failed": (2, ["Failed"] * 2, "Scheduling", "Failed"),
    "Group finished": (2, ["Succeeded"] * 2, "Scheduling", "Finished"),
    "Group status convert from pending to prescheduling": (2, ["Pending"] * 2, "Pending", "Scheduling"),
    "Group status convert from scheduling to finished": (2, ["Succeeded"] * 2, "Scheduling", "Finished"),
    "Group status keeps pending": (3, ["Running"] * 2, "Pending", "Pending"),
    "Group status convert from pending to finished": (2, ["Succeeded"] * 2, "Pending", "Finished"),
    "Group min member more than Pod number": (3, ["Pending"] * 2, "Pending", "Pending"),
    "Group status convert from running to pending": (4, ["Pending"] * 2, "Running", "Pending"),
}


@pytest.mark.parametrize(
    ("min_member", "phases", "before", "after"),
    X_K8S_CONTROLLER_CASES.values(),
    ids=X_K8S_CONTROLLER_CASES.keys(),
)
def test_x_k8s_phase_as_scheduler_plugins_controller(
    min_member: int, phases: list[str], before: str, after: str
) -> None:
    status = settle(X, min_member, {"phase": before}, member_counts(phases), None, 0.0)
    assert status["phase"] == after


# scheduler-plugins' integration test (test/integration/podgroup_controller_test.go): the whole
# status it expects, scheduleStartTime aside, with minMember 3.
# (the members' pod phases, the status before, the status after)
X_K8S_INTEGRATION_CASES: dict[str, tuple[list[str], dict[str, object], dict[str, object]]] = {
    "Statuses of all pods change from pending to running": (
        ["Running"] * 3,
        {"phase": "Scheduling", "running": 0, "succeeded": 0, "failed": 0},
        {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0},
    ),
    "Statuses of all pods change from running to succeeded": (
        ["Succeeded"] * 3,
        {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0},
        {"phase": "Finished", "running": 0, "succeeded": 3, "failed": 0},
    ),
    "The status of one pod changes from running to succeeded": (
        ["Succeeded", "Running", "Running"],
        {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0},
        {"phase": "Running", "running": 2, "succeeded": 1, "failed": 0},
    ),
    "The status of the pod changes from running to failed": (
        ["Failed", "Running", "Running"],
        {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0},
        {"phase": "Failed", "running": 2, "succeeded": 0, "failed": 1},
    ),
}


@pytest.mark.parametrize(
    ("phases", "before", "after"), X_K8S_INTEGRATION_CASES.values(), ids=X_K8S_INTEGRATION_CASES.keys()
)
def test_x_k8s_status_as_scheduler_plugins_integration_test(
    phases: list[str], before: dict[str, object], after: dict[str, object]
) -> None:
    status = settle(X, 3, before, member_counts(phases), None, 0.0)
    status.pop("scheduleStartTime", None)
    assert status == after


@pytest.mark.parametrize(
    ("previous", "c", "recorded"),
    [
        ({"phase": "Pending"}, counts(total=3), True),
        ({"phase": "Running"}, counts(total=3, scheduled=3, running=1), True),
        ({"phase": "Pending"}, counts(total=2), False),
        ({"phase": "Scheduling"}, counts(total=3, scheduled=3, running=3), False),
        ({}, counts(total=3), False),
    ],
    ids=["enough-members", "back-to-scheduling", "too-few-members", "straight-to-running", "new"],
)
def test_x_k8s_reaching_scheduling_records_schedule_start_time(
    previous: dict[str, object], c: MemberCounts, recorded: bool
) -> None:
    status = next_status(X, 3, previous, c, None, 100.0)
    assert status.get("scheduleStartTime") == ("1970-01-01T00:01:40Z" if recorded else None)


def test_x_k8s_schedule_start_time_and_occupant_are_kept_once_recorded() -> None:
    first = next_status(X, 2, {"phase": "Pending"}, counts(total=2), "default/job-a", 100.0)
    assert (first["phase"], first["occupiedBy"], first["scheduleStartTime"]) == (
        "Scheduling",
        "default/job-a",
        "1970-01-01T00:01:40Z",
    )
    running = next_status(X, 2, first, counts(total=2, scheduled=2, running=2), "default/job-b", 200.0)
    again = next_status(
        X, 2, {**running, "phase": "Scheduling"}, counts(total=2, running=1), "default/job-b", 300.0
    )
    for later in (running, again):
        assert (later["occupiedBy"], later["scheduleStartTime"]) == ("default/job-a", "1970-01-01T00:01:40Z")
