"""The README's quickstart is what `make demo` prints: its command run, its output compared line by
line with the block the README shows (a line ending in `...` is compared up to there, a line of
`...` alone stands for rows left out)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def readme_demo_block() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    match = re.search(r"`make demo` prints[^\n]*\n(?:[^\n]*\n)*?```\n(.*?)```", text, re.DOTALL)
    assert match, "the README's quickstart shows no output of `make demo`"
    return match.group(1).splitlines()


def demo_output() -> list[str]:
    """What `make demo` runs (`koordpy simulate examples/quickstart.yaml`), with the venv's koordpy."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "$(BIN)/koordpy simulate examples/quickstart.yaml" in makefile
    done = subprocess.run(
        [sys.executable, "-m", "koordpy.cli", "simulate", "examples/quickstart.yaml"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.splitlines()


def test_make_demo_prints_what_the_readme_shows() -> None:
    shown, printed = readme_demo_block(), demo_output()
    at = 0
    for line in shown:
        if line.strip() == "...":
            continue
        prefix = line[:-3] if line.endswith("...") else None
        while at < len(printed) and not (
            printed[at].startswith(prefix) if prefix is not None else printed[at].rstrip() == line.rstrip()
        ):
            at += 1
        assert at < len(printed), f"the README shows {line!r}; `make demo` prints:\n" + "\n".join(printed)
        at += 1
