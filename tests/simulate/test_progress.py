"""`koordpy simulate` tells a terminal how far a long run is, on one line rewritten in place, and
says nothing to a pipe or a file, or when the run is short."""

from __future__ import annotations

import io

import pytest

from koordpy.simulate.runner import ProgressLine

CLEAR = "\r\x1b[K"


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("tty", "elapsed", "written"),
    [
        pytest.param(False, 10.0, "", id="pipe-says-nothing"),
        pytest.param(True, 1.5, "", id="short-run-says-nothing"),
        pytest.param(
            True, 3.0, f"{CLEAR}koordpy: reading the input (3s){CLEAR}", id="long-run-one-line-cleared"
        ),
    ],
)
def test_a_long_run_on_a_terminal_shows_one_line(tty: bool, elapsed: float, written: str) -> None:
    stream, clock = Stream(tty), Clock()
    with ProgressLine(stream, after=2.0, clock=clock, background=False) as progress:
        progress.stage("reading the input")
        clock.now += elapsed
        progress.tick()
    assert stream.getvalue() == written


def test_each_update_rewrites_the_same_line() -> None:
    stream, clock = Stream(True), Clock()
    progress = ProgressLine(stream, after=2.0, clock=clock, background=False)
    progress.stage("reading the input")
    for _ in range(3):
        clock.now += 2.0
        progress.tick()
    progress.close()
    out = stream.getvalue()
    assert "\n" not in out
    assert out.count(CLEAR) == 4 and out.endswith(CLEAR)
    progress.close()
    assert stream.getvalue() == out, "closing again writes nothing more"
