"""A Job whose pods fail in a simulation, as kube's Job controller treats it: a pod lost before it
succeeded (its node removed, its preemption) counts as failed; more failures than `backoffLimit`
fail the Job (BackoffLimitExceeded), which then creates no pod and deletes the pods still active;
a `podFailurePolicy` rule on the pods' DisruptionTarget condition may Ignore or FailJob instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import node_dict
from tests.simulate.test_timelines import annotated, by_name, job, run, write

DISRUPTION = [{"type": "DisruptionTarget"}]


def scenario(tmp_path: Path, **spec: Any) -> Path:
    """Two pods of a Job fill node-a, which goes at 10 s; node-b (1 cpu) has arrived by then, so a
    replacement can run there. Both pods are lost at once, one failure after the other."""
    return write(
        tmp_path / "in.yaml",
        annotated(node_dict("node-a", cpu="2"), remove="10s"),
        annotated(node_dict("node-b", cpu="1"), arrive="5s"),
        job("train", run_for="1h", parallelism=2, **spec),
    )


@pytest.mark.parametrize(
    ("spec", "job_status", "replacements"),
    [
        pytest.param(
            {"backoffLimit": 1},
            # the first loss is replaced (1 failure is within the limit); the second fails the
            # Job, whose controller deletes the pending replacement, counted failed too
            {"phase": "Failed", "failed": 3, "active": 0, "reason": "BackoffLimitExceeded"},
            {"train-2": ("Deleted", "BackoffLimitExceeded")},
            id="more-failures-than-backoffLimit-fail-the-job",
        ),
        pytest.param(
            {"backoffLimit": 2},
            {"phase": "Running", "failed": 2, "active": 2, "reason": None},
            {"train-2": ("Bound", None), "train-3": ("Pending", "Unschedulable")},
            id="failures-within-backoffLimit-are-replaced",
        ),
        pytest.param(
            {},
            {"phase": "Running", "failed": 2, "active": 2, "reason": None},
            {"train-2": ("Bound", None), "train-3": ("Pending", "Unschedulable")},
            id="default-backoffLimit-is-6",
        ),
        pytest.param(
            {
                "backoffLimit": 0,
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": DISRUPTION}]},
            },
            {"phase": "Running", "failed": 0, "active": 2, "reason": None},
            {"train-2": ("Bound", None), "train-3": ("Pending", "Unschedulable")},
            id="ignored-disruptions-do-not-count",
        ),
        pytest.param(
            {
                "backoffLimit": 6,
                "podFailurePolicy": {"rules": [{"action": "FailJob", "onPodConditions": DISRUPTION}]},
            },
            {"phase": "Failed", "failed": 2, "active": 0, "reason": "PodFailurePolicy"},
            {},
            id="failjob-rule-fails-at-the-first-disruption",
        ),
        pytest.param(
            {
                "backoffLimit": 1,
                "podFailurePolicy": {
                    "rules": [{"action": "Count", "onExitCodes": {"operator": "In", "values": [1]}}]
                },
            },
            {"phase": "Failed", "failed": 3, "active": 0, "reason": "BackoffLimitExceeded"},
            {"train-2": ("Deleted", "BackoffLimitExceeded")},
            id="exit-code-rules-never-match-failures-count",
        ),
    ],
)
def test_lost_pods_count_against_the_jobs_backoff_limit(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    spec: dict[str, Any],
    job_status: dict[str, Any],
    replacements: dict[str, tuple[str, str | None]],
) -> None:
    # a minute in: long after the losses, long before any pod's hour is over
    report = run(capsys, scenario(tmp_path, **spec), max_seconds=60)
    (got,) = report["jobs"]
    assert {k: got[k] for k in job_status} == job_status
    pods = by_name(report)
    assert (pods["train-0"]["phase"], pods["train-1"]["phase"]) == ("Failed", "Failed")
    created = {
        name: (p["phase"], p["reason"]) for name, p in pods.items() if name not in ("train-0", "train-1")
    }
    assert created == replacements


def test_a_failed_job_creates_no_more_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Job that fails at once (backoffLimit 0) never replaces its lost pods, however long the run
    goes on and however much room there is."""
    report = run(capsys, scenario(tmp_path, backoffLimit=0, completions=10))
    (got,) = report["jobs"]
    assert (got["phase"], got["reason"], got["active"]) == ("Failed", "BackoffLimitExceeded", 0)
    assert sorted(by_name(report)) == ["train-0", "train-1"]


def test_a_job_that_succeeds_is_complete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = run(
        capsys,
        write(
            tmp_path / "in.yaml",
            node_dict("node-a"),
            job("train", run_for="10s", completions=3, parallelism=2),
        ),
    )
    (got,) = report["jobs"]
    assert {k: got[k] for k in ("phase", "succeeded", "failed", "active", "reason")} == {
        "phase": "Complete",
        "succeeded": 3,
        "failed": 0,
        "active": 0,
        "reason": None,
    }
