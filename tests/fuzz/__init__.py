"""Fuzzing `koordpy simulate` with hypothesis.

- strategies.py draws valid scenarios, and malformed ones (one field of one object damaged);
- invariants.py checks a report against its scenario's manifests, read independently of koordpy;
- harness.py runs the simulator in-process, by the CLI's functions or by its entry point;
- known_bugs.py lists the failures being fixed, which mark their tests xfail;
- found/ holds a minimal reproducer for each bug the suite found, a comment on top saying what
  breaks; test_found.py replays them.

`make test` runs the suite in a few seconds with the `fuzz-ci` profile (the same examples every
time); `make fuzz` (KOORDPY_FUZZ=long) runs it for minutes with fresh ones:

    KOORDPY_FUZZ=long .venv/bin/pytest -m fuzz tests/fuzz
"""
