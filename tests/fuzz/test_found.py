"""The reproducers in found/: each scenario, simulated, keeps every invariant. A reproducer names
its bug on a `# known bug: NAME` line; while that bug is listed in tests.fuzz.known_bugs, its case
is expected to fail."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fuzz.harness import simulate_json
from tests.fuzz.invariants import violations
from tests.fuzz.known_bugs import known_bug_marks

pytestmark = pytest.mark.fuzz

FOUND = Path(__file__).parent / "found"
_KNOWN_BUG = re.compile(r"^# known bug: (\S+)$", re.MULTILINE)


def _cases() -> list[Any]:
    cases = []
    for path in sorted(FOUND.glob("*.yaml")):
        match = _KNOWN_BUG.search(path.read_text(encoding="utf-8"))
        marks = known_bug_marks(match.group(1)) if match else []
        cases.append(pytest.param(path, id=path.stem, marks=marks))
    return cases


@pytest.mark.parametrize("path", _cases())
def test_found_reproducer_keeps_every_invariant(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    run = simulate_json(text)
    problems = [f"logged: {e}" for e in run.logged_errors]
    problems += violations(list(yaml.safe_load_all(text)), run.report)
    assert not problems, "\n".join(problems)
