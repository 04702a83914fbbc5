"""`python -m tests.fuzz.replay OUT FILE...`: the JSON report of each scenario file, written to OUT
as one JSON object keyed by file. The hash-seed test runs it in processes of different
PYTHONHASHSEED: the order of a set of strings must never reach a report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.fuzz.harness import simulate_json


def main(argv: list[str]) -> int:
    out, *files = argv
    reports = {f: simulate_json(Path(f).read_text(encoding="utf-8")).report for f in files}
    Path(out).write_text(json.dumps(reports, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
