"""Refresh the two locks from pyproject.toml: `make lock`.

One resolution of everything `make install` puts in .venv (koordpy's dependencies, the dev extra and
the build backend of [build-system]) by pip itself (`pip install --dry-run --ignore-installed
--report`), split in two files:

- requirements.lock: the closure of [project].dependencies, what the container image installs;
- requirements-dev.lock: everything else the resolution holds (test, lint and build tools).

Resolving once keeps the two consistent: a package both sides need has one version. Markers are
evaluated for the interpreter running this script (CPython 3.11 on Linux, as the image and CI).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # an interpreter without packaging still has pip's copy of it
    from pip._vendor.packaging.markers import default_environment  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"

RUNTIME_HEADER = """\
# Runtime dependencies of koordpy, each pinned to one version: the closure of
# [project].dependencies in pyproject.toml, and nothing of the dev extra.
# `make install` installs this file and requirements-dev.lock with pip --no-deps;
# the container image installs this file alone, then runs `pip check`.
# Refresh both locks after changing dependencies with `make lock` (hack/lock.py);
# tests/test_lock.py and tests/test_dockerfile.py check them against pyproject.toml.
"""
DEV_HEADER = """\
# Development and build tools of koordpy, each pinned to one version: the dev
# extra of pyproject.toml and its [build-system] requirements, with their
# dependencies, less what requirements.lock already pins (one resolution of both).
# Refresh with `make lock` (hack/lock.py); never edit one lock without the other.
"""


def resolve(requirements: list[str]) -> list[dict[str, object]]:
    """pip's resolution of `requirements` from the index, as its installation report lists it."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                "--disable-pip-version-check", "--report", str(report), *requirements,
            ],
            check=True,
            cwd=ROOT,
        )
        items: list[dict[str, object]] = json.loads(report.read_text())["install"]
        return items


def closure(roots: list[Requirement], requires: dict[str, list[Requirement]]) -> set[str]:
    environment = {**default_environment(), "extra": ""}
    needed: set[str] = set()
    todo = [canonicalize_name(r.name) for r in roots if r.marker is None or r.marker.evaluate(environment)]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        for requirement in requires.get(name, []):
            if requirement.marker is None or requirement.marker.evaluate(environment):
                todo.append(canonicalize_name(requirement.name))
    return needed


def write_lock(path: Path, header: str, pins: list[tuple[str, str]]) -> None:
    lines = [f"{name}=={version}" for name, version in sorted(pins, key=lambda p: canonicalize_name(p[0]))]
    path.write_text(header + "\n".join(lines) + "\n")


def main() -> int:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    build_requires: list[str] = pyproject["build-system"]["requires"]
    items = resolve([".[dev]", *build_requires])
    pins: dict[str, tuple[str, str]] = {}
    requires: dict[str, list[Requirement]] = {}
    for item in items:
        meta = item["metadata"]
        assert isinstance(meta, dict)
        name = canonicalize_name(meta["name"])
        if name == canonicalize_name(project["name"]):
            continue
        pins[name] = (meta["name"], meta["version"])
        requires[name] = [Requirement(r) for r in meta.get("requires_dist", [])]
    runtime = closure([Requirement(r) for r in project["dependencies"]], requires)
    missing = runtime - set(pins)
    if missing:
        print(f"lock: pip's resolution lacks {sorted(missing)}", file=sys.stderr)
        return 1
    write_lock(RUNTIME_LOCK, RUNTIME_HEADER, [pins[n] for n in runtime])
    write_lock(DEV_LOCK, DEV_HEADER, [pin for n, pin in pins.items() if n not in runtime])
    print(f"lock: {len(runtime)} runtime pins in {RUNTIME_LOCK.name}, "
          f"{len(pins) - len(runtime)} more in {DEV_LOCK.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
