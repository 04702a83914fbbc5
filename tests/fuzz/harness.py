"""Running `koordpy simulate` in-process on generated manifests: through the functions the CLI calls
(`load_scenario`, `simulate`, `render_json`), or through the CLI entry itself."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from hypothesis import Phase, settings

from koordpy.cli import EXIT_INVALID_INPUT, main
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import STDIN, STDIN_LABEL, load_scenario
from koordpy.simulate.report import render_json
from koordpy.simulate.runner import simulate
from tests.fuzz.invariants import report_is_well_formed
from tests.fuzz.strategies import Doc

# hypothesis profiles, registered in tests/fuzz/conftest.py
CI_PROFILE = "fuzz-ci"
LONG_PROFILE = "fuzz-long"
PROFILE_ENV = "KOORDPY_FUZZ"


def profile_name() -> str:
    return LONG_PROFILE if os.environ.get(PROFILE_ENV) == "long" else CI_PROFILE


def fuzz_settings(share: float = 1.0, *, shrink: bool = True) -> settings:
    """The active profile, with `share` of its examples: the tests split the budget by cost.
    `shrink=False` for a test expected to fail (a known bug): shrinking its failure takes minutes
    and tells nothing new."""
    profile = settings.get_profile(profile_name())
    phases = profile.phases if shrink else tuple(p for p in profile.phases if p != Phase.shrink)
    return settings(profile, max_examples=max(1, round(profile.max_examples * share)), phases=phases)


def to_yaml(docs: list[Doc]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=True)


class _TracebackLog(logging.Handler):
    """Records of koordpy's loggers that carry an exception: the scheduler contains an exception
    raised inside a cycle (the pod is left pending with SchedulerError) and logs its traceback.
    Errors logged without one are diagnostics about the input (an invalid topology, say)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            self.messages.append(f"{record.name}: {record.getMessage()}: {type(error).__name__}: {error}")


@contextlib.contextmanager
def logged_tracebacks() -> Iterator[list[str]]:
    """The exceptions koordpy logs inside the block (under pytest they reach no stream)."""
    handler = _TracebackLog()
    logger = logging.getLogger("koordpy")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


@dataclass(frozen=True)
class SimulateRun:
    report: dict[str, Any]
    logged_errors: list[str] = field(default_factory=list)


def simulate_json(text: str) -> SimulateRun:
    """The JSON report of a valid scenario, by the CLI's own functions; raises whatever they raise
    (a ScenarioError for valid input is a failure too)."""
    with logged_tracebacks() as errors:
        scenario = load_scenario([STDIN], stdin=io.StringIO(text))
        report = simulate(scenario, default_configuration())
    parsed: dict[str, Any] = json.loads(render_json(report))
    return SimulateRun(parsed, list(errors))


@dataclass(frozen=True)
class CliRun:
    code: int
    out: str
    err: str
    logged_errors: list[str]


def run_cli(text: str) -> CliRun:
    """`koordpy simulate - -o json` with `text` on standard input, in this process; an exception
    escapes as it would escape the command (a traceback)."""
    stdin, out, err = sys.stdin, io.StringIO(), io.StringIO()
    sys.stdin = io.StringIO(text)
    try:
        with logged_tracebacks() as errors, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["simulate", STDIN, "--output", "json"])
    finally:
        sys.stdin = stdin
    return CliRun(code, out.getvalue(), err.getvalue(), list(errors))


def clean_outcome_problems(run: CliRun) -> list[str]:
    """How a run of damaged input went wrong, if it did. The contract allows a report (exit 0)
    or exit 2 with one message naming the input and the document; never a traceback, printed or
    logged, and never a pod left pending by an internal error."""
    problems = [f"logged: {e}" for e in run.logged_errors]
    if "Traceback" in run.err:
        problems.append(f"a traceback on stderr: {run.err[-800:]}")
    if run.code == 0:
        try:
            report = json.loads(run.out)
        except ValueError as err:
            return [*problems, f"exit 0 without a JSON report: {err}: {run.out[:300]!r}"]
        return problems + report_is_well_formed(report)
    if run.code != EXIT_INVALID_INPUT:
        return [*problems, f"exit {run.code}: {run.err[:500]}"]
    if not run.err.startswith(f"koordpy: invalid input: {STDIN_LABEL}: document "):
        problems.append(f"exit 2 without naming the input and the document: {run.err[:500]!r}")
    if run.out:
        problems.append(f"exit 2 after printing to stdout: {run.out[:300]!r}")
    return problems
