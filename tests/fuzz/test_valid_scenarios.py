"""Valid scenarios: whatever the scheduler decides, the report keeps the invariants of
tests.fuzz.invariants, and the same input always gives the same report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import LONG_PROFILE, fuzz_settings, profile_name, run_cli, simulate_json, to_yaml
from tests.fuzz.invariants import (
    must_gather_groups_share_one_domain,
    nodes_hold_their_pods,
    plain_pods_are_not_left_pending_where_they_fit,
    violations,
)
from tests.fuzz.strategies import Doc, must_gather_scenarios, scenarios

pytestmark = pytest.mark.fuzz


def _explain(problems: list[str], text: str) -> str:
    return "\n".join(["", *problems, "", "scenario:", text])


@fuzz_settings(share=1.0)
@given(scenarios(extra_must_gather_members=True, huge_quantities=True))
def test_valid_scenarios_keep_every_scheduling_invariant(docs: list[Doc]) -> None:
    text = to_yaml(docs)
    run = simulate_json(text)
    problems = [f"logged: {e}" for e in run.logged_errors] + violations(docs, run.report)
    assert not problems, _explain(problems, text)


@fuzz_settings(share=0.5)
@given(scenarios())
def test_the_same_scenario_gives_the_same_report_every_time(docs: list[Doc]) -> None:
    text = to_yaml(docs)
    first = simulate_json(text).report
    again = simulate_json(text).report
    assert again == first, _explain(["a second run gave another report"], text)
    cli = run_cli(text)
    assert cli.code == 0, _explain([cli.err], text)
    assert json.loads(cli.out) == first, _explain(["the command gave another report"], text)


def _reports_with_hash_seed(seed: int, files: list[str], workdir: str) -> dict[str, object]:
    out = os.path.join(workdir, f"reports-{seed}.json")
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-m", "tests.fuzz.replay", out, *files], check=True, env=env, cwd=root, timeout=600
    )
    reports: dict[str, object] = json.loads(Path(out).read_text(encoding="utf-8"))
    return reports


@pytest.mark.skipif(profile_name() != LONG_PROFILE, reason="starts processes: run by make fuzz only")
@fuzz_settings(share=0.01)
@given(st.lists(scenarios(), min_size=8, max_size=8))
def test_reports_do_not_depend_on_the_hash_seed_of_the_process(batch: list[list[Doc]]) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        files = []
        for i, docs in enumerate(batch):
            path = os.path.join(workdir, f"scenario-{i}.yaml")
            Path(path).write_text(to_yaml(docs), encoding="utf-8")
            files.append(path)
        first = _reports_with_hash_seed(1, files, workdir)
        second = _reports_with_hash_seed(2, files, workdir)
    differ = [f for f in files if first[f] != second[f]]
    assert not differ, _explain([f"reports differ between hash seeds for {differ}"], "")


@fuzz_settings(share=0.5)
@given(must_gather_scenarios())
def test_must_gather_members_beyond_min_member_stay_in_the_domain(docs: list[Doc]) -> None:
    text = to_yaml(docs)
    run = simulate_json(text)
    problems = violations(docs, run.report, [must_gather_groups_share_one_domain])
    assert not problems, _explain(problems, text)


@fuzz_settings(share=0.5)
@given(scenarios(huge_quantities=True))
def test_huge_quantities_compare_exactly_below_the_bound_and_are_held_to_it_above(
    docs: list[Doc],
) -> None:
    text = to_yaml(docs)
    run = simulate_json(text)
    checks = [nodes_hold_their_pods, plain_pods_are_not_left_pending_where_they_fit]
    problems = violations(docs, run.report, checks)
    assert not problems, _explain(problems, text)
