"""The cyclic garbage collector's pause while `koordpy run` starts: it ends once the scheduler has
synced (what start-up built is then frozen out of the collector's walks), and never outlives a
`run` that did not get that far."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from koordpy.cli import main
from koordpy.cluster.app import end_start_up_pause


@pytest.fixture
def collector() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


@pytest.mark.parametrize(
    ("case", "argv"),
    [
        ("an unknown flag", ["run", "--no-such-flag"]),
        ("a flag kube-scheduler refuses", ["run", "--kube-api-qps", "-1"]),
    ],
)
def test_a_run_that_stops_before_starting_leaves_the_collector_running(
    collector: None, case: str, argv: list[str]
) -> None:
    assert main(argv) != 0, case
    assert gc.isenabled(), case


def test_the_end_of_the_pause_freezes_what_start_up_built_and_runs_the_collector_again(
    collector: None,
) -> None:
    gc.disable()
    end_start_up_pause()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_without_a_pause_nothing_is_frozen(collector: None) -> None:
    gc.unfreeze()
    end_start_up_pause()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
