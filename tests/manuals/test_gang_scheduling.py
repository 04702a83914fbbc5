"""Koordinator's gang scheduling manual, in `koordpy simulate`.

Source: https://github.com/koordinator-sh/website/blob/main/docs/user-manuals/gang-scheduling.md
(https://koordinator.sh/docs/user-manuals/gang-scheduling). Its two quick starts create a gang of
minMember 2 one pod at a time: the first pod stays Pending, and once the second exists both run and
`kubectl get pg gang-example` shows `phase: Running, running: 2, scheduled: 2`. Its advanced
configuration bundles gang-example1 with gang-example2 through the `groups` annotation: "The gang
will go to bind only all gangs in one group meet the conditions"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from tests.manuals.simulation import (
    MANUALS,
    Group,
    Pod,
    apply_in_steps,
    check_groups,
    check_pods,
    pods,
    replay_timeline,
)

DIR = MANUALS / "gang_scheduling"


def f(*names: str) -> list[Path]:
    return [DIR / n for n in names]


# "0/1 Pending" until the gang has its minMember of pods
WAITING = Pod("Pending", node=None, reason="GangNotReady")
RUNNING = Pod("Bound", node="node-1")


@pytest.mark.parametrize(
    ("steps", "after_each_step", "groups"),
    [
        pytest.param(
            [f("nodes.yaml", "podgroup.yaml"), f("crd-pod1.yaml"), f("crd-pod2.yaml")],
            [{}, {"pod-example1": WAITING}, {"pod-example1": RUNNING, "pod-example2": RUNNING}],
            {"gang-example": Group("Running", scheduled=2, running=2)},
            id="podgroup-first-pod-waits-until-the-second-then-both-run",
        ),
        pytest.param(
            [f("nodes.yaml"), f("annotation-pod1.yaml"), f("annotation-pod2.yaml")],
            [{}, {"pod-example1": WAITING}, {"pod-example1": RUNNING, "pod-example2": RUNNING}],
            {"gang-example": Group("Running", scheduled=2, running=2)},
            id="annotations-first-pod-waits-until-the-second-then-both-run",
        ),
    ],
)
def test_quick_start(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    steps: Sequence[Sequence[Path]],
    after_each_step: Sequence[Mapping[str, Pod]],
    groups: Mapping[str, Group],
) -> None:
    reports = apply_in_steps(capsys, tmp_path, steps)
    for report, expected in zip(reports, after_each_step, strict=True):
        check_pods(report, expected)
    check_groups(reports[-1], groups)


GANG_EXAMPLE1 = ("gang-example1-member-1", "gang-example1-member-2")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            f("nodes.yaml", "advanced-podgroup.yaml", "advanced-podgroup-members.yaml"),
            {
                name: Pod("Pending", node=None, message_contains=("default/gang-example2",))
                for name in GANG_EXAMPLE1
            },
            id="group-does-not-bind-while-gang-example2-is-missing",
        ),
        pytest.param(
            f("nodes.yaml", "advanced-podgroup.yaml", "advanced-podgroup-members.yaml", "gang-example2.yaml"),
            {name: RUNNING for name in (*GANG_EXAMPLE1, "gang-example2-member-1")},
            id="group-binds-once-every-gang-meets-its-minimum",
        ),
        # the manual's `mode: "Strict\NonStrict"` is no mode at all: koord-scheduler logs it and
        # goes on in Strict mode, so the gang schedules like any other
        pytest.param(
            f("nodes.yaml", "advanced-pod-sibling.yaml", "advanced-pod.yaml", "gang-example2.yaml"),
            {name: RUNNING for name in ("pod-example1", "pod-example2", "gang-example2-member-1")},
            id="annotations-with-placeholder-mode-schedule-as-strict",
        ),
    ],
)
def test_advanced_configuration(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: list[Path], expected: Mapping[str, Pod]
) -> None:
    (report,) = apply_in_steps(capsys, tmp_path, [files])
    check_pods(report, expected)


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            [f("nodes.yaml", "podgroup.yaml"), f("crd-pod1.yaml"), f("crd-pod2.yaml")], id="podgroup"
        ),
        pytest.param(
            [f("nodes.yaml"), f("annotation-pod1.yaml"), f("annotation-pod2.yaml")], id="annotations"
        ),
    ],
)
def test_quick_start_as_one_timeline_the_first_pod_waits_for_the_second(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, steps: Sequence[Sequence[Path]]
) -> None:
    """The quick start's `kubectl apply` of each pod, 10 s apart: the first member waits, gated,
    from 10 s until the second exists at 20 s; then both are bound at once."""
    report = replay_timeline(capsys, tmp_path, steps, [0.0, 10.0, 20.0])
    check_pods(report, {"pod-example1": RUNNING, "pod-example2": RUNNING})
    check_groups(report, {"gang-example": Group("Running", scheduled=2, running=2)})
    found = pods(report)
    assert [(found[n]["createdAt"], found[n]["scheduledAt"]) for n in ("pod-example1", "pod-example2")] == [
        (10.0, 20.0),
        (20.0, 20.0),
    ]
    waiting = {s["at"]: (s["pendingPods"], s["pendingGangs"]) for s in report["timeline"]}
    assert waiting[10.0] == (1, 1) and waiting[20.0] == (0, 0)
    assert report["waitingTime"]["byGang"]["default/gang-example"] == {
        "count": 2,
        "p50": 0.0,
        "p90": 10.0,
        "max": 10.0,
        "pending": 0,
    }
