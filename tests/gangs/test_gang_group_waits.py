"""A gang group that names a gang nobody has created yet waits for it, as koord-scheduler's gang
group waits: its PreEnqueue basic check fails with `memberGangs [...] doesn't exists` (core.go),
the pods stay out of the queue, and the group is scheduled once the gang shows up. That is
`GangNotReady` in the report, not `InvalidSpec`, which docs/migrating.md keeps for what
koord-scheduler never schedules (a `groups` entry that is no gang id at all)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.cli import main

NAME = "gang.scheduling.koordinator.sh/name"
MIN = "gang.scheduling.koordinator.sh/min-available"
GROUPS = "gang.scheduling.koordinator.sh/groups"
ARRIVE = "simulation.koordpy.io/arrive-after"


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def member(name: str, gang: str, groups: str, arrive: str | None = None) -> dict[str, Any]:
    annotations = {NAME: gang, MIN: "1", GROUPS: groups}
    if arrive is not None:
        annotations[ARRIVE] = arrive
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def simulate(capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: list[dict[str, Any]]) -> Any:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    assert main(["simulate", str(path), "--output", "json"]) == 0
    return {p["name"]: p for p in json.loads(capsys.readouterr().out)["pods"]}


PAIR = '["default/left", "default/right"]'


@dataclass(frozen=True)
class Case:
    pods: list[dict[str, Any]]
    # pod name -> (phase, reason), and what the message of each pending pod says
    expected: dict[str, tuple[str, str | None]]
    says: tuple[str, ...] = ()


CASES = [
    pytest.param(
        Case(
            [member("left-0", "left", PAIR)],
            {"left-0": ("Pending", "GangNotReady")},
            (
                "gang group [default/left,default/right] is not ready",
                "member gang default/right does not exist yet",
                GROUPS,
            ),
        ),
        id="a member gang not created yet: the group waits",
    ),
    pytest.param(
        Case(
            [member("left-0", "left", '["default/left", "default/r1", "default/r2"]')],
            {"left-0": ("Pending", "GangNotReady")},
            ("member gangs default/r1, default/r2 do not exist yet",),
        ),
        id="every missing member gang is named",
    ),
    pytest.param(
        Case(
            [member("left-0", "left", PAIR), member("right-0", "right", PAIR, arrive="60s")],
            {"left-0": ("Bound", None), "right-0": ("Bound", None)},
        ),
        id="the missing gang arrives: the whole group is placed",
    ),
    pytest.param(
        Case(
            [member("left-0", "left", '["default/left", "job"]')],
            {"left-0": ("Pending", "InvalidSpec")},
            ("is not a gang id of the form namespace/name",),
        ),
        id="an entry that is no gang id stays InvalidSpec: koord-scheduler never schedules it",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_a_gang_group_waits_for_a_member_gang_that_does_not_exist_yet(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: Case
) -> None:
    pods = simulate(capsys, tmp_path, [node("n1"), node("n2"), *case.pods])
    for name, (phase, reason) in case.expected.items():
        assert (pods[name]["phase"], pods[name]["reason"]) == (phase, reason), pods[name]
        if phase == "Pending":
            for text in case.says:
                assert text in pods[name]["message"], pods[name]["message"]
