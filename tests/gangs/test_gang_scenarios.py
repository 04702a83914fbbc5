"""Gang scheduling through `koordpy simulate`: every rule stated as what happens to the pods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordpy.cli import main

SCENARIOS = Path(__file__).parent.parent / "scenarios"
GANGS = SCENARIOS / "gangs"


def simulate(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    *files: str,
    replace: dict[str, str] | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    paths = []
    for i, name in enumerate(files):
        text = (GANGS / name).read_text()
        for old, new in (replace or {}).items():
            text = text.replace(old, new)
        path = tmp_path / f"{i:02d}-{name}"
        path.write_text(text)
        paths.append(str(path))
    argv = ["simulate", *paths, "--output", "json"]
    if config:
        argv += ["--config", str(SCENARIOS / "configs" / config)]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def groups(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in report["podGroups"]}


def test_replicaset_demo_places_the_minimum_when_only_three_fit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(capsys, tmp_path, "replicaset_demo.yaml")
    phases = sorted(p["phase"] for p in report["pods"])
    assert phases == ["Bound"] * 3 + ["Pending"] * 3
    for p in report["pods"]:
        if p["phase"] == "Pending":
            # the member whose cycle ran PostFilter also carries DefaultPreemption's verdict
            assert p["message"] in (
                "0/3 nodes are available: 3 Insufficient cpu.",
                "0/3 nodes are available: 3 Insufficient cpu. "
                "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
            )
    assert (groups(report)["nginx"]["phase"], groups(report)["nginx"]["scheduled"]) == ("Running", 3)


def test_replicaset_demo_places_nothing_when_the_minimum_does_not_fit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(capsys, tmp_path, "replicaset_demo.yaml", replace={"minMember: 3": "minMember: 4"})
    assert {p["phase"] for p in report["pods"]} == {"Pending"}
    messages = {p["message"] for p in report["pods"]}
    assert len(messages) == 1, "every pending member carries the same explanation"
    (message,) = messages
    assert "default/nginx 3 of minMember 4" in message
    assert "Insufficient cpu" in message
    assert (groups(report)["nginx"]["phase"], groups(report)["nginx"]["scheduled"]) == ("Scheduling", 0)


@pytest.mark.parametrize(
    ("worker_cpu", "bound"),
    [("3", 3), ("5", 0)],
    ids=["whole-group-fits", "one-gang-does-not-fit-so-neither-is-placed"],
)
def test_gang_group_is_released_together_or_not_at_all(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, worker_cpu: str, bound: int
) -> None:
    report = simulate(
        capsys, tmp_path, "nodes_three.yaml", "gang_group.yaml", replace={"WORKER_CPU": f'"{worker_cpu}"'}
    )
    got = pods(report)
    assert sum(p["phase"] == "Bound" for p in got.values()) == bound
    if bound == 0:
        # the master's own gang (minMember 1) would fit alone: the group holds it back
        assert got["master"]["phase"] == "Pending"
        assert len({p["message"] for p in got.values()}) == 1
        assert "gang group [default/gang-example1,default/gang-example2]" in got["master"]["message"]
    else:
        assert {g["phase"] for g in report["podGroups"]} == {"Running"}


def test_interleaved_gangs_never_end_half_placed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = simulate(capsys, tmp_path, "nodes_three.yaml", "interleaved_gangs.yaml")
    by_gang: dict[str, list[str]] = {"a": [], "b": []}
    for p in report["pods"]:
        by_gang[p["name"][0]].append(p["phase"])
    outcomes = sorted(tuple(sorted(set(v))) for v in by_gang.values())
    assert outcomes == [("Bound",), ("Pending",)], by_gang


def test_a_group_naming_a_gang_not_created_yet_waits_for_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """koord-scheduler waits for a gang group's member gang to show up (tests/gangs/
    test_gang_group_waits.py): not InvalidSpec, which is for what it never schedules."""
    got = pods(simulate(capsys, tmp_path, "nodes_three.yaml", "bad_gangs.yaml"))["ghost-partner"]
    assert (got["phase"], got["reason"]) == ("Pending", "GangNotReady")
    assert "member gang default/ghost does not exist yet" in got["message"]


@pytest.mark.parametrize(
    ("pod", "fragments"),
    [
        # koord-scheduler never initializes a gang no member of which has a usable min-available
        ("words", ("gang.scheduling.koordinator.sh/min-available", "'three'")),
        ("negative-0", ("spec.minMember", "-1")),
    ],
    ids=[
        "non-numeric-min-available",
        "negative-min-member",
    ],
)
def test_bad_gang_input_is_invalid_spec_and_names_the_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pod: str, fragments: tuple[str, ...]
) -> None:
    report = simulate(capsys, tmp_path, "nodes_three.yaml", "bad_gangs.yaml")
    got = pods(report)[pod]
    assert (got["phase"], got["reason"]) == ("Pending", "InvalidSpec")
    for fragment in fragments:
        assert fragment in got["message"]
    assert pods(report)["plain"]["phase"] == "Bound", "everything else keeps being scheduled"


@pytest.mark.parametrize(
    ("gang", "fragments"),
    [
        # json.Unmarshal fails, the group is the gang alone
        (
            "broken-json",
            ("gang.scheduling.koordinator.sh/groups", "'[\"default/broken-json\"'", "gang alone"),
        ),
        # time.ParseDuration fails, the wait is the default timeout
        ("slow", ("gang.scheduling.koordinator.sh/waiting-time", "'10 minutes'", "default timeout")),
    ],
    ids=["unparsable-groups-json", "duration-in-words"],
)
def test_bad_gang_value_koord_scheduler_defaults_is_scheduled_and_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, gang: str, fragments: tuple[str, ...]
) -> None:
    report = simulate(capsys, tmp_path, "nodes_three.yaml", "bad_gangs.yaml")
    assert pods(report)[gang]["phase"] == "Bound"
    (group,) = [g for g in report["podGroups"] if g["name"] == gang]
    (condition,) = group["conditions"]
    assert (condition["type"], condition["status"]) == ("AnnotationsDefaulted", "True")
    for fragment in fragments:
        assert fragment in condition["message"], condition["message"]


def test_gang_with_too_few_members_waits_without_being_tried(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(capsys, tmp_path, "nodes_three.yaml", "too_few_members.yaml")
    got = pods(report)
    for name in ("trio-0", "trio-1"):
        assert (got[name]["phase"], got[name]["reason"]) == ("Pending", "GangNotReady")
        assert "default/trio has 2 of minMember 3 pods" in got[name]["message"]
    assert got["lonely-0"]["reason"] == "GangNotReady"
    assert "PodGroup default/missing" in got["lonely-0"]["message"]
    assert groups(report)["trio"]["phase"] == "Pending"


@pytest.mark.parametrize(
    ("policy", "placed"),
    [("once-satisfied", True), ("waiting-and-running", True), ("only-waiting", False)],
    ids=["running-members-satisfied-the-gang-once", "running-members-count", "only-waiting-members-count"],
)
def test_match_policy_decides_whether_running_members_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, policy: str, placed: bool
) -> None:
    report = simulate(capsys, tmp_path, "nodes_three.yaml", "match_policy.yaml", replace={"POLICY": policy})
    assert (pods(report)["g-2"]["phase"] == "Bound") is placed
    if not placed:
        # it held its node at Permit for the gang's waiting time, then gave it back
        assert report["virtualSeconds"] >= 30
        assert "timeout" in pods(report)["g-2"]["message"]


@pytest.mark.parametrize(("mode", "waited"), [("NonStrict", True), ("Strict", False)])
def test_strict_rolls_back_at_once_nonstrict_waits_for_its_timeout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, mode: str, waited: bool
) -> None:
    report = simulate(capsys, tmp_path, "nonstrict.yaml", replace={"MODE": mode})
    assert {p["phase"] for p in report["pods"]} == {"Pending"}
    assert (report["virtualSeconds"] >= 45) is waited
    assert len({p["message"] for p in report["pods"]}) == 1


@pytest.mark.parametrize(
    ("config", "waited"),
    [(None, True), ("reject_at_once.yaml", False)],
    ids=["ten-percent-short-keeps-waiting", "zero-percent-rejects-at-once"],
)
def test_reject_percentage_decides_whether_a_near_miss_keeps_its_nodes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: str | None, waited: bool
) -> None:
    report = simulate(capsys, tmp_path, "reject_percentage.yaml", config=config)
    assert {p["phase"] for p in report["pods"]} == {"Pending"}
    # permitWaitingTimeSeconds (60) is how long the nine placed members wait for the tenth
    assert (report["virtualSeconds"] >= 60) is waited
