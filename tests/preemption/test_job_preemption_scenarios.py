"""Job-level preemption through `koordpy simulate`: who is evicted, with which message, where the
job is nominated and where it ends up bound."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from koordpy.cli import main

SCENARIOS = Path(__file__).parent.parent / "scenarios"
SEED_CLUSTER = "topology/seed_cluster.yaml"
MESSAGE = (
    "koord-scheduler: preempting to accommodate higher priority pods, preemptor: {job}, triggerPod: {trigger}"
)
NOT_HELPFUL = "preemption not helpful"
BLOCK_OF = {
    "node-1": "b2",
    "node-2": "b2",
    "node-3": "b1",
    "node-4": "b1",
    "node-5": "b3",
    "node-6": "b3",
    "node-7": "b4",
    "node-8": "b4",
}


def simulate(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    *files: str,
    replace: dict[str, str] | None = None,
    seconds: float | None = None,
) -> dict[str, Any]:
    """Run `koordpy simulate` over scenario files (paths under tests/scenarios), each with the
    replacements applied; `seconds` stops the virtual clock early."""
    paths = []
    for i, name in enumerate(files):
        text = (SCENARIOS / name).read_text()
        for old, new in (replace or {}).items():
            text = text.replace(old, new)
        path = tmp_path / f"{i:02d}-{Path(name).name}"
        path.write_text(text)
        paths.append(str(path))
    argv = ["simulate", *paths, "--output", "json"]
    if seconds is not None:
        argv += ["--max-virtual-seconds", str(seconds)]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    report: dict[str, Any] = json.loads(out.out)
    return report


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def phases(report: dict[str, Any], *names: str) -> dict[str, tuple[str, str | None]]:
    got = pods(report)
    return {n: (got[n]["phase"], got[n]["node"]) for n in names}


def preempted(report: dict[str, Any]) -> list[str]:
    return sorted(p["victim"] for p in report["preemptions"])


def members(report: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    return {n: p for n, p in pods(report).items() if n.startswith(prefix)}


# --------------------------------------------------------------------------------------- hello-job
def test_hello_job_evicts_both_victims_and_binds_the_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(capsys, tmp_path, "preemption/hello_job.yaml")
    assert phases(report, "victim-1", "victim-2", "preemptor-pod-1", "preemptor-pod-2") == {
        "victim-1": ("Preempted", "example-node"),
        "victim-2": ("Preempted", "example-node"),
        "preemptor-pod-1": ("Bound", "example-node"),
        "preemptor-pod-2": ("Bound", "example-node"),
    }
    text = MESSAGE.format(job="default/hello-job", trigger="default/preemptor-pod-1")
    assert report["preemptions"] == [
        {
            "victim": f"default/{v}",
            "node": "example-node",
            "preemptor": "default/hello-job",
            "triggerPod": "default/preemptor-pod-1",
            "message": text,
        }
        for v in ("victim-1", "victim-2")
    ]


def test_hello_job_is_nominated_and_waits_while_its_victims_terminate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the victims have the default 30-second grace period: stop before it ends
    report = simulate(capsys, tmp_path, "preemption/hello_job.yaml", seconds=5)
    got = pods(report)
    assert preempted(report) == ["default/victim-1", "default/victim-2"]
    for victim in ("victim-1", "victim-2"):
        assert got[victim]["phase"] == "Bound", "still running until its grace period ends"
    for name in ("preemptor-pod-1", "preemptor-pod-2"):
        assert (got[name]["phase"], got[name]["nominatedNodeName"]) == ("Pending", "example-node")
        # later passes see the room on its way and do not preempt again
        assert "not eligible due to terminating pod on the nominated node." in got[name]["message"]


# --------------------------------------------------------------------------------------- gang group
def test_gang_group_preempts_across_two_nodes_as_one_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(capsys, tmp_path, "preemption/gang_group_two_nodes.yaml")
    assert preempted(report) == ["default/low-1a", "default/low-1b", "default/low-2a", "default/low-2b"]
    text = MESSAGE.format(job="default/a,default/b", trigger="default/a-0")
    assert {(p["preemptor"], p["triggerPod"], p["message"]) for p in report["preemptions"]} == {
        ("default/a,default/b", "default/a-0", text)
    }
    placed = {n: p["node"] for n, p in pods(report).items() if n[:2] in ("a-", "b-")}
    assert {p["phase"] for n, p in pods(report).items() if n in placed} == {"Bound"}
    assert Counter(placed.values()) == {"node-1": 2, "node-2": 2}
    assert {g["name"]: g["phase"] for g in report["podGroups"]} == {"a": "Running", "b": "Running"}


def test_gang_group_is_bound_where_it_was_nominated_once_the_grace_period_is_over(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    names = ["a-0", "a-1", "b-0", "b-1"]
    # the victims' grace period is 10 seconds
    early = pods(simulate(capsys, tmp_path, "preemption/gang_group_two_nodes.yaml", seconds=9.5))
    assert {early[n]["phase"] for n in names} == {"Pending"}
    assert {early[v]["phase"] for v in ("low-1a", "low-1b", "low-2a", "low-2b")} == {"Bound"}
    nominated = {n: early[n]["nominatedNodeName"] for n in names}
    assert sorted(nominated.values()) == ["node-1", "node-1", "node-2", "node-2"]
    final = simulate(capsys, tmp_path, "preemption/gang_group_two_nodes.yaml")
    assert {n: pods(final)[n]["node"] for n in names} == nominated
    assert final["virtualSeconds"] >= 10


# --------------------------------------------------------------------------------------- not helpful
@pytest.mark.parametrize(
    ("replicas", "blocker", "victims"),
    [
        pytest.param("2", "low", ["default/blocker", "default/low"], id="control-both-nodes-freed"),
        pytest.param("3", "low", [], id="job-needs-more-than-the-cluster-could-ever-offer"),
        pytest.param("2", "high", [], id="equal-priority-pod-holds-the-second-node"),
        pytest.param("2", "critical", [], id="higher-priority-pod-holds-the-second-node"),
    ],
)
def test_evicts_only_when_the_whole_job_then_fits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, replicas: str, blocker: str, victims: list[str]
) -> None:
    report = simulate(
        capsys,
        tmp_path,
        "preemption/not_helpful.yaml",
        replace={"MEMBERS": replicas, "BLOCKER_CLASS": blocker},
    )
    assert preempted(report) == victims
    job = members(report, "member-")
    if victims:
        assert {p["phase"] for p in job.values()} == {"Bound"}
        return
    assert phases(report, "low", "blocker") == {"low": ("Bound", "node-1"), "blocker": ("Bound", "node-2")}
    for p in job.values():
        assert (p["phase"], p["nominatedNodeName"]) == ("Pending", None)
        assert NOT_HELPFUL in p["message"]


# --------------------------------------------------------------------------------------- PDB
@pytest.mark.parametrize(
    ("free_class", "victim", "node"),
    [
        pytest.param("low", "free", "node-2", id="equally-good-nodes-the-unprotected-victim-goes"),
        pytest.param("high", "guarded", "node-1", id="no-other-choice-the-budget-does-not-block"),
    ],
)
def test_pod_disruption_budget_respected_where_a_choice_exists(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, free_class: str, victim: str, node: str
) -> None:
    report = simulate(capsys, tmp_path, "preemption/pdb.yaml", replace={"FREE_CLASS": free_class})
    assert preempted(report) == [f"default/{victim}"]
    assert phases(report, "job-0", "job-1") == {"job-0": ("Bound", node), "job-1": ("Bound", node)}


# --------------------------------------------------------------------------------------- reserved room
@pytest.mark.parametrize("grace", ["1", "2", "10"])
def test_room_made_for_the_job_is_not_taken_by_a_medium_priority_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, grace: str
) -> None:
    report = simulate(capsys, tmp_path, "preemption/reserved_room.yaml", replace={"GRACE": grace})
    assert preempted(report) == ["default/victim-1", "default/victim-2"]
    assert phases(report, "preemptor-pod-1", "preemptor-pod-2", "medium") == {
        "preemptor-pod-1": ("Bound", "example-node"),
        "preemptor-pod-2": ("Bound", "example-node"),
        "medium": ("Pending", None),
    }


# --------------------------------------------------------------------------------------- topology
PROTECT_ONE_NODE_PER_BLOCK = {
    f"metadata: {{name: fill-{n}a}}": (
        f"metadata: {{name: fill-{n}a, labels: {{scheduling.koordinator.sh/disable-preemptible: 'true'}}}}"
    )
    for n in (1, 3, 5, 7)
}


@pytest.mark.parametrize(
    ("replicas", "protect"),
    [
        pytest.param("3", False, id="three-members"),
        pytest.param("4", False, id="a-whole-block"),
        pytest.param("3", True, id="three-members-one-pinned-pod-per-block"),
    ],
)
def test_must_gather_victims_and_job_in_one_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, replicas: str, protect: bool
) -> None:
    replace = {"MEMBERS": replicas, **(PROTECT_ONE_NODE_PER_BLOCK if protect else {})}
    report = simulate(capsys, tmp_path, SEED_CLUSTER, "preemption/topology_must_gather.yaml", replace=replace)
    victim_nodes = [p["node"] for p in report["preemptions"]]
    job = members(report, "trainer-")
    assert {p["phase"] for p in job.values()} == {"Bound"}
    job_nodes = [p["node"] for p in job.values()]
    # each 4-CPU member takes the place of one 4-CPU victim, no more
    assert Counter(victim_nodes) == Counter(job_nodes)
    assert {BLOCK_OF[n] for n in victim_nodes + job_nodes} == {"b1"}, "the block whose victims matter least"
    assert {(p["preemptor"], p["triggerPod"]) for p in report["preemptions"]} == {
        ("default/trainer", "default/trainer-0")
    }


@pytest.mark.parametrize(
    ("replicas", "protect"),
    [
        pytest.param("5", False, id="job-bigger-than-a-block"),
        pytest.param("4", True, id="every-block-has-a-pinned-pod"),
    ],
)
def test_must_gather_evicts_nobody_when_no_block_can_be_made_to_fit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, replicas: str, protect: bool
) -> None:
    replace = {"MEMBERS": replicas, **(PROTECT_ONE_NODE_PER_BLOCK if protect else {})}
    report = simulate(capsys, tmp_path, SEED_CLUSTER, "preemption/topology_must_gather.yaml", replace=replace)
    assert report["preemptions"] == []
    fill = {n: p for n, p in pods(report).items() if n.startswith("fill-")}
    assert {p["phase"] for p in fill.values()} == {"Bound"}
    for p in members(report, "trainer-").values():
        assert (p["phase"], p["nominatedNodeName"]) == ("Pending", None)
        assert NOT_HELPFUL in p["message"]
