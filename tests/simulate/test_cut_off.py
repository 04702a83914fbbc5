"""`--max-virtual-seconds`: its default is documented (help, README) and large enough for a replayed
day; a run that reaches it says so, on stderr and in the report's `cutOff`, instead of reading as
the scenario's outcome."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from koordpy.cli import build_parser
from koordpy.simulate.runner import DEFAULT_MAX_VIRTUAL_SECONDS
from tests.builders import node_dict, pod_dict
from tests.manuals.simulation import simulate
from tests.simulate.test_timelines import annotated, write

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_default_covers_a_replayed_day() -> None:
    assert DEFAULT_MAX_VIRTUAL_SECONDS >= 2 * 24 * 3600


def test_help_and_readme_state_the_default() -> None:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    sim = sub.choices["simulate"]
    shown = f"{DEFAULT_MAX_VIRTUAL_SECONDS:.0f}"
    assert f"default {shown}" in sim.format_help().replace("\n", " ")
    assert f"default {shown}" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("arrive", "max_seconds", "cut", "phase"),
    [
        # a day's last submission: no longer lost at the old 3,600 s default
        pytest.param("23h", None, None, "Bound", id="a-day-fits-the-default"),
        pytest.param("2h", 3600, 7200.0, "Pending", id="an-arrival-past-the-limit-cuts-the-run"),
        pytest.param("30m", 3600, None, "Bound", id="a-run-that-ends-by-itself-is-not-cut"),
    ],
)
def test_a_cut_run_says_so(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arrive: str,
    max_seconds: float | None,
    cut: float | None,
    phase: str,
) -> None:
    path = write(
        tmp_path / "in.yaml", node_dict("node-1"), annotated(pod_dict("late", cpu="1"), arrive=arrive)
    )
    code, report, err = simulate(capsys, [path], max_seconds=max_seconds)
    assert code == 0 and report is not None, err
    assert report["pods"][0]["phase"] == phase
    if cut is None:
        assert "cutOff" not in report
        assert "cut at" not in err
    else:
        assert report["cutOff"]["nextEventAt"] == cut
        assert report["cutOff"]["maxVirtualSeconds"] == max_seconds
        assert f"cut at --max-virtual-seconds {max_seconds:g}" in err
