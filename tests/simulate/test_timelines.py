"""Timelines in `koordpy simulate`: arrive-after, run-for, remove-after, the per-pod times, the
`timeline` steps and the waiting-time statistics (see the contract's "Timelines" section)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.cli import main
from koordpy.simulate.jobs import JobState
from koordpy.simulate.loader import ScenarioError, load_scenario
from koordpy.simulate.timeline import DurationError, nearest_rank, parse_duration, waiting_stats
from tests.builders import node_dict, pod_dict
from tests.manuals.simulation import simulate

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
ARRIVE = "simulation.koordpy.io/arrive-after"
RUN_FOR = "simulation.koordpy.io/run-for"
REMOVE = "simulation.koordpy.io/remove-after"
CONTRACT_POD_KEYS = ["namespace", "name", "node", "phase", "nominatedNodeName", "reason", "message"]
TIME_KEYS = ["createdAt", "scheduledAt", "finishedAt"]


def run(capsys: pytest.CaptureFixture[str], *paths: Path, max_seconds: float | None = None) -> dict[str, Any]:
    code, report, err = simulate(capsys, paths, max_seconds=max_seconds)
    assert code == 0 and report is not None, err
    return report


def write(path: Path, *docs: Any) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return path


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def annotated(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    names = {"arrive": ARRIVE, "run_for": RUN_FOR, "remove": REMOVE}
    obj["metadata"].setdefault("annotations", {}).update({names[k]: v for k, v in annotations.items()})
    return obj


def klass(name: str, value: int, policy: str = "PreemptLowerPriority", **annotations: str) -> dict[str, Any]:
    obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": policy,
    }
    return annotated(obj, **annotations)


# --- Go durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("0", 0.0),
        ("+5s", 5.0),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("2h45m30.5s", 9930.5),
        ("1500us", 0.0015),
        ("1500µs", 0.0015),
        ("7ns", 7e-9),
    ],
)
def test_go_durations_are_read_as_go_reads_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "invalid duration"),
        ("90", "missing unit"),
        ("s", "invalid duration"),
        (".s", "invalid duration"),
        ("1x", "unknown unit"),
        ("1e3s", "unknown unit"),
        ("ninety seconds", "invalid duration"),
        ("1d", "unknown unit"),
        ("-5s", "must not be negative"),
        ("-1h30m", "must not be negative"),
        ("3000000h", "292 years"),
    ],
)
def test_malformed_or_negative_durations_are_refused(text: str, says: str) -> None:
    with pytest.raises(DurationError, match=says):
        parse_duration(text)


NODE = node_dict("node-1")


@pytest.mark.parametrize(
    ("doc", "kind", "name", "field", "says"),
    [
        (
            annotated(pod_dict("web", cpu="1"), arrive="ninety"),
            "Pod",
            "default/web",
            f"metadata.annotations[{ARRIVE}]",
            "invalid duration 'ninety'",
        ),
        (
            annotated(pod_dict("web", cpu="1"), run_for="-10s"),
            "Pod",
            "default/web",
            f"metadata.annotations[{RUN_FOR}]",
            "must not be negative",
        ),
        (
            annotated(node_dict("node-2"), run_for="10s"),
            "Node",
            "node-2",
            f"metadata.annotations[{RUN_FOR}]",
            "applies only to a pod",
        ),
        (
            annotated(
                {
                    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": "g"},
                    "spec": {"minMember": 1},
                },
                remove="1m",
            ),
            "PodGroup",
            "default/g",
            f"metadata.annotations[{REMOVE}]",
            "applies only to a node or a pod",
        ),
        (
            annotated(pod_dict("web", cpu="1"), arrive="1m", remove="30s"),
            "Pod",
            "default/web",
            f"metadata.annotations[{REMOVE}]",
            "must come after the arrival",
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 2,
                    "template": annotated(
                        {"metadata": {"labels": {"app": "web"}}, "spec": pod_dict("x")["spec"]},
                        run_for="5 minutes",
                    ),
                },
            },
            "Deployment",
            "default/web",
            f"spec.template.metadata.annotations[{RUN_FOR}]",
            "unknown unit",
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "late", "annotations": {ARRIVE: "10s"}},
                "spec": {"priorityClassName": "urgent", "containers": [{"name": "c", "image": "busybox"}]},
            },
            "Pod",
            "default/late",
            "spec.priorityClassName",
            "it arrives at 60s, the pod at 10s",
        ),
    ],
    ids=[
        "malformed arrive-after",
        "negative run-for",
        "run-for on a node",
        "remove-after on a PodGroup",
        "removed before it arrives",
        "malformed run-for on a pod template",
        "priority class arriving after its pod",
    ],
)
def test_a_bad_timeline_annotation_is_an_input_error_naming_object_and_field(
    tmp_path: Path, doc: dict[str, Any], kind: str, name: str, field: str, says: str
) -> None:
    path = write(tmp_path / "in.yaml", NODE, klass("urgent", 100, arrive="60s"), doc)
    with pytest.raises(ScenarioError) as caught:
        load_scenario([str(path)])
    err = caught.value
    assert (err.kind, err.name, err.field) == (kind, name, field)
    assert says in err.message


def test_a_malformed_duration_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "in.yaml", NODE, annotated(pod_dict("web", cpu="1"), arrive="1h30"))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Pod default/web" in err and f"metadata.annotations[{ARRIVE}]" in err and "missing unit" in err
    assert "Traceback" not in err


# --- the report only gains keys, and only with a timeline -----------------------------------------


def test_without_timeline_annotations_the_report_has_no_new_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run(capsys, write(tmp_path / "in.yaml", NODE, pod_dict("web", cpu="1")))
    assert list(report["pods"][0]) == CONTRACT_POD_KEYS
    assert "timeline" not in report and "waitingTime" not in report


def test_one_timeline_annotation_adds_the_times_of_every_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run(
        capsys,
        write(
            tmp_path / "in.yaml",
            NODE,
            pod_dict("web", cpu="1"),
            annotated(pod_dict("late", cpu="1"), arrive="0s"),
        ),
    )
    assert [list(p) for p in report["pods"]] == [CONTRACT_POD_KEYS + TIME_KEYS] * 2
    assert {k: report["pods"][0][k] for k in TIME_KEYS} == {
        "createdAt": 0.0,
        "scheduledAt": 0.0,
        "finishedAt": None,
    }
    assert set(report) >= {"timeline", "waitingTime"}
    assert "byQuota" not in report["waitingTime"]


# --- arrivals, completions, removals ---------------------------------------------------------------


def test_a_pod_waits_for_a_node_that_arrives_later(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run(
        capsys,
        write(
            tmp_path / "in.yaml", annotated(node_dict("late-node"), arrive="45s"), pod_dict("web", cpu="1")
        ),
    )
    web = by_name(report)["web"]
    assert (web["phase"], web["node"], web["createdAt"], web["scheduledAt"]) == (
        "Bound",
        "late-node",
        0.0,
        45.0,
    )


@pytest.mark.parametrize(
    ("pod", "phase", "node", "finished"),
    [
        (annotated(pod_dict("running", cpu="1"), remove="30s"), "Deleted", "node-1", 30.0),
        (annotated(pod_dict("too-big", cpu="64"), remove="30s"), "Deleted", None, 30.0),
        (annotated(pod_dict("done", cpu="1"), run_for="10s", remove="30s"), "Succeeded", "node-1", 10.0),
    ],
    ids=["bound pod deleted", "pending pod deleted", "completed pod stays Succeeded"],
)
def test_remove_after_deletes_a_pod_at_its_time(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pod: dict[str, Any],
    phase: str,
    node: str | None,
    finished: float,
) -> None:
    report = run(capsys, write(tmp_path / "in.yaml", NODE, pod))
    (got,) = report["pods"]
    assert (got["phase"], got["node"], got["finishedAt"]) == (phase, node, finished)


def test_a_pod_arriving_after_the_end_is_reported_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run(
        capsys,
        write(tmp_path / "in.yaml", NODE, annotated(pod_dict("tomorrow", cpu="1"), arrive="24h")),
        max_seconds=3600,
    )
    (got,) = report["pods"]
    assert (got["phase"], got["reason"], got["createdAt"]) == ("Pending", "NotCreated", None)
    assert report["virtualSeconds"] == 3600.0
    assert report["waitingTime"]["byPriorityClass"] == {}


def test_run_for_frees_room_for_a_queued_gang(capsys: pytest.CaptureFixture[str]) -> None:
    report = run(capsys, SCENARIOS / "run_for_frees_room_for_gang.yaml")
    pods = by_name(report)
    for name in ("batch-a", "batch-b"):
        assert (pods[name]["phase"], pods[name]["scheduledAt"], pods[name]["finishedAt"]) == (
            "Succeeded",
            0.0,
            30.0,
        )
    for name in ("training-0", "training-1"):
        # the gang was placed the moment the pods it waited for completed
        assert (pods[name]["createdAt"], pods[name]["scheduledAt"]) == (10.0, pods["batch-a"]["finishedAt"])
        assert (pods[name]["phase"], pods[name]["finishedAt"]) == ("Succeeded", 50.0)
    (group,) = report["podGroups"]
    assert (group["phase"], group["scheduled"], group["succeeded"], group["running"]) == ("Finished", 2, 2, 0)
    assert [
        (s["at"], s["allocated"]["cpu"], s["pendingPods"], s["pendingGangs"]) for s in report["timeline"]
    ] == [
        (0.0, 4.0, 0, 0),
        (10.0, 4.0, 2, 1),
        (30.0, 4.0, 0, 0),
        (50.0, 0.0, 0, 0),
    ]
    assert report["waitingTime"]["byGang"]["default/training"] == {
        "count": 2,
        "p50": 20.0,
        "p90": 20.0,
        "max": 20.0,
        "pending": 0,
    }


def test_a_completed_gang_member_leaves_the_gang_satisfied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gang of minMember 2 with a third member that fits only once the first two complete: the
    gang was satisfied once, so the third is not held back for a second quorum."""
    member = {"pod-group.scheduling.sigs.k8s.io": "g"}
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": 2},
    }
    sched = {"schedulerName": "koord-scheduler"}
    docs = [
        node_dict("node-1", cpu="2"),
        group,
        annotated(pod_dict("g-0", cpu="1", labels=member, spec=sched), run_for="10s"),
        annotated(pod_dict("g-1", cpu="1", labels=member, spec=sched), run_for="10s"),
        annotated(pod_dict("g-2", cpu="2", labels=member, spec=sched), arrive="1s"),
    ]
    pods = by_name(run(capsys, write(tmp_path / "in.yaml", *docs)))
    assert [pods[n]["phase"] for n in ("g-0", "g-1", "g-2")] == ["Succeeded", "Succeeded", "Bound"]
    assert pods["g-2"]["scheduledAt"] == 10.0


@pytest.mark.parametrize(
    ("scenario", "lost", "replacement"),
    [
        ("node_removed_under_job_gang.yaml", "train-0", "train-2"),
        ("node_removed_under_plain_gang.yaml", "pair-a", None),
    ],
    ids=["a Job's member is created again", "a plain member ends Failed"],
)
def test_a_node_removed_under_a_running_gang(
    capsys: pytest.CaptureFixture[str], scenario: str, lost: str, replacement: str | None
) -> None:
    report = run(capsys, SCENARIOS / scenario)
    pods = by_name(report)
    on_node_1 = [p for p in report["pods"] if p["node"] == "node-1"]
    assert [p["name"] for p in on_node_1] == [lost]
    # what the pod garbage collector writes before it deletes the pods of a node that is gone
    assert (pods[lost]["phase"], pods[lost]["reason"], pods[lost]["message"]) == (
        "Failed",
        "DeletionByPodGC",
        "PodGC: node no longer exists",
    )
    assert pods[lost]["finishedAt"] == 20.0
    removal = next(s for s in report["timeline"] if s["at"] == 20.0)
    assert removal["allocatable"]["cpu"] == 8.0
    (group,) = report["podGroups"]
    if replacement is None:
        assert len(report["pods"]) == 2
        assert removal["allocated"]["cpu"] == 3.0
        assert group["scheduled"] == 1
    else:
        new = pods[replacement]
        assert (new["phase"], new["node"], new["createdAt"], new["scheduledAt"]) == (
            "Bound",
            "node-3",
            20.0,
            20.0,
        )
        assert removal["allocated"]["cpu"] == 6.0
        assert (group["phase"], group["scheduled"]) == ("Running", 2)


def test_a_statefulset_pod_comes_back_under_its_own_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 1,
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": pod_dict("x", cpu="1")["spec"]},
        },
    }
    docs = [annotated(node_dict("old"), remove="30s"), annotated(node_dict("new"), arrive="10s"), sts]
    report = run(capsys, write(tmp_path / "in.yaml", *docs))
    (db,) = report["pods"]
    assert (db["name"], db["phase"], db["node"], db["createdAt"], db["scheduledAt"]) == (
        "db-0",
        "Bound",
        "new",
        30.0,
        30.0,
    )


# --- statistics ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "p50", "p90"),
    [
        ([5.0], 5.0, 5.0),
        ([1.0, 2.0, 3.0], 2.0, 3.0),  # ranks ceil(1.5) = 2 and ceil(2.7) = 3
        ([float(v) for v in range(0, 100, 10)], 40.0, 80.0),  # ranks 5 and 9 of ten
        ([0.0, 0.0, 10.0, 10.0], 0.0, 10.0),  # ranks 2 and ceil(3.6) = 4
    ],
)
def test_percentiles_are_nearest_rank(values: list[float], p50: float, p90: float) -> None:
    assert (nearest_rank(values, 50), nearest_rank(values, 90)) == (p50, p90)


def test_no_scheduled_pod_has_no_percentiles() -> None:
    assert waiting_stats([], 3) == {"count": 0, "p50": None, "p90": None, "max": None, "pending": 3}


def test_statistics_on_a_worked_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One 2-core node. Four 1-core `batch` pods, each running 10 s, arrive at zero: batch-0 and
    batch-1 run from 0 to 10, batch-2 and batch-3 from 10 to 20, so they waited 0, 0, 10 and 10 s
    (p50 = rank 2 of 4 = 0, p90 = rank ceil(3.6) = 4 = 10). A 3-core pod of no class never fits.
    A `urgent` pod arriving at 15 s waits for the room batch-2 and batch-3 leave at 20 s: 5 s."""
    docs: list[dict[str, Any]] = [
        node_dict("node-1", cpu="2", memory="1Gi"),
        klass("batch", 10),
        klass("urgent", 20, "Never"),
    ]
    for i in range(4):
        docs.append(
            annotated(pod_dict(f"batch-{i}", cpu="1", spec={"priorityClassName": "batch"}), run_for="10s")
        )
    docs.append(pod_dict("huge", cpu="3"))
    docs.append(
        annotated(
            pod_dict("urgent", cpu="2", spec={"priorityClassName": "urgent"}),
            arrive="15s",
        )
    )
    report = run(capsys, write(tmp_path / "in.yaml", *docs))
    pods = by_name(report)
    assert [pods[f"batch-{i}"]["scheduledAt"] for i in range(4)] == [0.0, 0.0, 10.0, 10.0]
    assert report["waitingTime"]["byPriorityClass"] == {
        "(none)": {"count": 0, "p50": None, "p90": None, "max": None, "pending": 1},
        "batch": {"count": 4, "p50": 0.0, "p90": 10.0, "max": 10.0, "pending": 0},
        "urgent": {"count": 1, "p50": 5.0, "p90": 5.0, "max": 5.0, "pending": 0},
    }
    assert report["waitingTime"]["byGang"] == {}
    assert report["timeline"] == [
        step(0.0, cpu=2.0, pending=3),
        step(10.0, cpu=2.0, pending=1),
        step(15.0, cpu=2.0, pending=2),
        step(20.0, cpu=2.0, pending=1),
    ]
    assert report["virtualSeconds"] == 20.0


def step(at: float, cpu: float, pending: int, gangs: int = 0, preemptions: int = 0) -> dict[str, Any]:
    return {
        "at": at,
        "allocated": {"cpu": cpu, "memory": 0},
        "allocatable": {"cpu": 2.0, "memory": 1024**3},
        "pendingPods": pending,
        "pendingGangs": gangs,
        "preemptions": preemptions,
    }


def test_waiting_times_by_quota_appear_when_quotas_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quota = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "namespace": "team-a"},
        "spec": {"min": {"cpu": "1"}, "max": {"cpu": "1"}},
    }
    docs = [
        NODE,
        quota,
        annotated(pod_dict("a-0", cpu="1", namespace="team-a"), run_for="30s"),
        pod_dict("a-1", cpu="1", namespace="team-a"),
        pod_dict("free", cpu="1"),
    ]
    report = run(capsys, write(tmp_path / "in.yaml", *docs))
    by_quota = report["waitingTime"]["byQuota"]
    # a-1 waits for a-0 to give back the quota's one core at 30 s
    assert by_quota == {"team-a/team-a": {"count": 2, "p50": 0.0, "p90": 30.0, "max": 30.0, "pending": 0}}


def test_the_table_ends_with_the_waiting_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [NODE, annotated(pod_dict("web", cpu="1"), arrive="5s"), pod_dict("huge", cpu="64")]
    assert main(["simulate", str(write(tmp_path / "in.yaml", *docs))]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "waiting time by priority class (p50/p90/max): (none) 0.0s/0.0s/0.0s over 1 pod, 1 never scheduled"
        in lines
    )


# --- the Job controller over time ------------------------------------------------------------------


def job(name: str, run_for: str | None = "10s", **spec: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "metadata": {},
        "spec": {**pod_dict("x", cpu="1")["spec"], "restartPolicy": "Never"},
    }
    if run_for is not None:
        template = annotated(template, run_for=run_for)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {**spec, "template": template},
    }


@pytest.mark.parametrize(
    ("spec", "times"),
    [
        # min(parallelism, completions - succeeded) active: two at a time, then the last one
        (
            {"completions": 5, "parallelism": 2},
            [(0.0, 10.0), (0.0, 10.0), (10.0, 20.0), (10.0, 20.0), (20.0, 30.0)],
        ),
        (
            {"completions": 5, "parallelism": 2, "completionMode": "Indexed"},
            [(0.0, 10.0), (0.0, 10.0), (10.0, 20.0), (10.0, 20.0), (20.0, 30.0)],
        ),
        # never more pods than completions left
        ({"completions": 2, "parallelism": 5}, [(0.0, 10.0), (0.0, 10.0)]),
        # a work queue: once a pod succeeded, no new pods
        ({"parallelism": 2}, [(0.0, 10.0), (0.0, 10.0)]),
        # the defaults: one pod, one completion
        ({}, [(0.0, 10.0)]),
        ({"completions": 3, "parallelism": 1, "suspend": True}, []),
    ],
    ids=[
        "completions above parallelism",
        "indexed",
        "parallelism above completions",
        "work queue",
        "defaults",
        "suspended",
    ],
)
def test_a_job_starts_pods_as_earlier_ones_complete(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    spec: dict[str, Any],
    times: list[tuple[float, float]],
) -> None:
    report = run(capsys, write(tmp_path / "in.yaml", NODE, job("work", **spec)))
    assert [p["name"] for p in report["pods"]] == [f"work-{i}" for i in range(len(times))]
    assert [(p["createdAt"], p["finishedAt"]) for p in report["pods"]] == times
    assert all(p["phase"] == "Succeeded" and p["createdAt"] == p["scheduledAt"] for p in report["pods"])


def test_a_job_without_run_for_creates_no_more_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run(
        capsys,
        write(
            tmp_path / "in.yaml",
            NODE,
            job("work", run_for=None, completions=5, parallelism=2),
            pod_dict("t", cpu="0", annotations={ARRIVE: "1s"}),
        ),
    )
    assert [(p["name"], p["phase"]) for p in report["pods"]] == [
        ("work-0", "Bound"),
        ("work-1", "Bound"),
        ("t", "Bound"),
    ]


def started(job: JobState, count: int) -> list[str]:
    keys = [f"ns/j-{i}" for i in range(count)]
    for i, key in enumerate(keys):
        job.started(key, i if job.indexed else None)
    return keys


@pytest.mark.parametrize(
    ("completions", "parallelism", "indexed", "outcomes", "create"),
    [
        # an Indexed Job recreates the lowest missing index first
        (5, 3, True, [("ns/j-1", "failed")], [1]),
        (5, 3, True, [("ns/j-2", "failed"), ("ns/j-0", "succeeded")], [2, 3]),
        # indexes run out at completions
        (4, 3, True, [("ns/j-0", "succeeded"), ("ns/j-1", "succeeded")], [3]),
        (5, 3, False, [("ns/j-1", "failed")], [None]),
        # the last completions need no more pods than are left to make
        (4, 3, False, [("ns/j-0", "succeeded"), ("ns/j-1", "succeeded")], [None]),
        (3, 3, False, [("ns/j-0", "succeeded"), ("ns/j-1", "succeeded")], []),
        # a work queue replaces a failure before any success, none after
        (None, 2, False, [("ns/j-0", "failed")], [None]),
        (None, 2, False, [("ns/j-1", "succeeded"), ("ns/j-0", "failed")], []),
        # a pod given up (its own remove-after) is not replaced, and its completion is not made:
        # the next sync runs min(parallelism, completions - succeeded - given up)
        (5, 3, False, [("ns/j-0", "given_up"), ("ns/j-1", "succeeded")], [None, None]),
        (3, 3, False, [("ns/j-0", "given_up"), ("ns/j-1", "succeeded")], []),
    ],
)
def test_the_job_controller_rule(
    completions: int | None,
    parallelism: int,
    indexed: bool,
    outcomes: list[tuple[str, str]],
    create: list[int | None],
) -> None:
    state = JobState("ns/j-0", parallelism, completions, indexed)
    started(state, min(parallelism, completions if completions is not None else parallelism))
    for key, outcome in outcomes:
        assert state.ended(key, outcome)
    assert state.to_create() == create


# --- what a removed node leaves behind --------------------------------------------------------------


def test_a_pod_waiting_at_permit_on_a_removed_node_is_tried_again(capsys: pytest.CaptureFixture[str]) -> None:
    report = run(capsys, SCENARIOS / "node_removed_under_permit_wait.yaml")
    pods = by_name(report)
    assert [(pods[n]["phase"], pods[n]["node"], pods[n]["scheduledAt"]) for n in ("pair-a", "pair-b")] == [
        ("Bound", "node-2", 10.0),
        ("Bound", "node-2", 10.0),
    ]
    # nothing was ever counted on node-1: its reservation went with the rejection
    assert [(s["at"], s["allocated"]["cpu"], s["allocatable"]["cpu"]) for s in report["timeline"]] == [
        (0.0, 0.0, 4.0),
        (5.0, 0.0, 0.0),
        (10.0, 8.0, 8.0),
    ]


@pytest.mark.parametrize(
    ("seconds", "phase", "node", "nominated"),
    [
        (9.0, "Pending", None, "node-1"),
        (15.0, "Pending", None, None),
        (None, "Bound", "node-3", None),
    ],
    ids=["nominated before the removal", "dropped once retried", "bound where the room is"],
)
def test_a_nomination_to_a_removed_node_is_dropped(
    capsys: pytest.CaptureFixture[str],
    seconds: float | None,
    phase: str,
    node: str | None,
    nominated: str | None,
) -> None:
    report = run(capsys, SCENARIOS / "nominated_node_removed.yaml", max_seconds=seconds)
    urgent = by_name(report)["urgent"]
    assert (urgent["phase"], urgent["node"], urgent["nominatedNodeName"]) == (phase, node, nominated)


# --- the PodGroup's phase as its operator wrote it through the run ---------------------------------


def pair(api_group: str, lost_at: str) -> list[dict[str, Any]]:
    """A gang of two 3-core members, one on each 4-core node at zero; node-1 goes at `lost_at`."""
    version = "v1alpha1"
    label = (
        "pod-group.scheduling.sigs.k8s.io"
        if api_group == "scheduling.sigs.k8s.io"
        else "scheduling.x-k8s.io/pod-group"
    )
    group = {
        "apiVersion": f"{api_group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": "pair"},
        "spec": {"minMember": 2},
    }
    spec = {"schedulerName": "koord-scheduler"}
    return [
        annotated(node_dict("node-1"), remove=lost_at),
        node_dict("node-2"),
        group,
        pod_dict("pair-a", cpu="3", labels={label: "pair"}, spec=spec),
        pod_dict("pair-b", cpu="3", labels={label: "pair"}, spec=spec),
    ]


@pytest.mark.parametrize(
    ("api_group", "phase"),
    [
        # Koordinator's controller: a group once past Pending that is short of minMember scheduled
        # is Scheduling again; Pending is only for a group without members
        ("scheduling.sigs.k8s.io", "Scheduling"),
        # scheduler-plugins' controller: fewer members than minMember is Pending
        ("scheduling.x-k8s.io", "Pending"),
    ],
)
def test_a_running_gang_that_lost_a_member_shows_the_phase_its_operator_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], api_group: str, phase: str
) -> None:
    report = run(capsys, write(tmp_path / "in.yaml", *pair(api_group, "20s")))
    (group,) = report["podGroups"]
    assert (group["phase"], group["scheduled"], group["running"]) == (phase, 1, 1)
    # it had been Running from zero: the step out of Pending is when scheduling began
    assert group["scheduleStartTime"] == "1970-01-01T00:00:00Z"


# --- controllers replace their preempted pods ------------------------------------------------------


def victims_of(kind: str) -> list[dict[str, Any]]:
    """deployment_victims_come_back.yaml with its low-priority pods stamped by a `kind` (`Job/Failed`:
    a Job with podReplacementPolicy Failed)."""
    kind, _, policy = kind.partition("/")
    docs = list(yaml.safe_load_all((SCENARIOS / "deployment_victims_come_back.yaml").read_text()))
    workload = next(d for d in docs if d["kind"] == "Deployment")
    workload["kind"] = kind
    if kind == "Job":
        workload["apiVersion"] = "batch/v1"
        workload["spec"] = {
            "parallelism": workload["spec"]["replicas"],
            "template": workload["spec"]["template"],
        }
        workload["spec"]["template"]["spec"]["restartPolicy"] = "Never"
        if policy:
            workload["spec"]["podReplacementPolicy"] = policy
    return docs


@pytest.mark.parametrize(
    ("kind", "created"),
    [
        # a ReplicaSet (and a Job) counts a terminating pod as gone: the new pods come at once
        ("Deployment", {"lp-2": 60.0, "lp-3": 60.0}),
        ("Job", {"lp-2": 60.0, "lp-3": 60.0}),
        # podReplacementPolicy Failed: only once the victims are gone
        ("Job/Failed", {"lp-2": 90.0, "lp-3": 90.0}),
        # a StatefulSet's pod comes back under its own name once the old one is gone
        ("StatefulSet", {"lp-0": 90.0, "lp-1": 90.0}),
    ],
)
def test_preempted_pods_of_a_workload_are_created_again_and_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, created: dict[str, float]
) -> None:
    report = run(capsys, write(tmp_path / "in.yaml", *victims_of(kind)))
    pods = by_name(report)
    assert {p["victim"] for p in report["preemptions"]} == {"default/lp-0", "default/lp-1"}
    for name in ("hp-worker-1", "hp-worker-2"):
        assert (pods[name]["phase"], pods[name]["scheduledAt"]) == ("Bound", 90.0)
    for name, at in created.items():
        # the room their victims left is the gang's; 1 core is left on each node
        assert (pods[name]["phase"], pods[name]["reason"], pods[name]["createdAt"]) == (
            "Pending",
            "Unschedulable",
            at,
        )
    if not kind.startswith("StatefulSet"):
        assert [(pods[n]["phase"], pods[n]["finishedAt"]) for n in ("lp-0", "lp-1")] == [
            ("Preempted", 90.0)
        ] * 2
    final = report["timeline"][-1]
    assert (final["at"], final["allocated"]["cpu"], final["pendingPods"]) == (90.0, 6.0, 2)
