"""The locks against pyproject.toml and against what is installed: `make install` puts exactly the
locked versions in .venv, so a new machine runs the tests with the versions they last passed with.
(tests/test_dockerfile.py holds requirements.lock to the image's rules.)"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.ci import in_ci
from tests.support.locks import (
    DEV_LOCK,
    REPO_ROOT,
    RUNTIME_LOCK,
    dev_requirements,
    pin_problem,
    read_lock,
    runtime_requirements,
)

# The interpreter running the tests is the one the locks were resolved for.
ENVIRONMENT = {**default_environment(), "extra": ""}


def applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate(ENVIRONMENT)


def all_pins() -> dict[str, tuple[str, Version]]:
    runtime, dev = read_lock(RUNTIME_LOCK), read_lock(DEV_LOCK)
    return {**runtime, **dev}


def installed_at_pin(written: str, version: Version) -> metadata.Distribution | None:
    try:
        dist = metadata.distribution(written)
    except metadata.PackageNotFoundError:
        return None
    return dist if Version(dist.version) == version else None


def test_each_package_is_pinned_in_one_lock_only() -> None:
    both = sorted(set(read_lock(RUNTIME_LOCK)) & set(read_lock(DEV_LOCK)))
    assert not both, f"pinned in both locks (one resolution gives one version): {both}"


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [
        pytest.param(RUNTIME_LOCK, runtime_requirements, id="runtime-dependencies"),
        pytest.param(DEV_LOCK, dev_requirements, id="dev-extra-and-build-backend"),
    ],
)
def test_every_declared_requirement_is_pinned_within_its_range(
    lock: Path, requirements: Callable[[], list[Requirement]]
) -> None:
    pins = read_lock(lock)
    problems: list[str] = []
    for requirement in requirements():
        if not applies(requirement):
            continue
        if problem := pin_problem(requirement, pins, lock.name):
            problems.append(problem)
    assert not problems, "\n".join(problems) + "\nrefresh the locks with `make lock`"


def test_the_locks_together_are_closed_and_hold_nothing_more() -> None:
    """Every pinned package's own requirements are pinned, within their ranges, and every pin is
    needed by something pyproject.toml declares: a dependency dropped there leaves no stale pin.
    Read from the installed metadata, which only the locked versions give."""
    pins = all_pins()
    roots = [r for r in (*runtime_requirements(), *dev_requirements()) if applies(r)]
    needed: set[str] = set()
    todo = [canonicalize_name(r.name) for r in roots]
    problems: list[str] = []
    unknown: list[str] = []
    while todo:
        name = todo.pop()
        if name in needed or name not in pins:
            continue
        needed.add(name)
        written, version = pins[name]
        dist = installed_at_pin(written, version)
        if dist is None:
            unknown.append(f"{written}=={version}")
            continue
        for requirement in (Requirement(t) for t in dist.requires or ()):
            if not applies(requirement):
                continue
            todo.append(canonicalize_name(requirement.name))
            if problem := pin_problem(requirement, pins, "the locks"):
                problems.append(f"{written}=={version} needs it: {problem}")
    if unknown:
        pytest.skip(f"not installed at the locked versions here, so not readable: {unknown}")
    problems += [f"{pins[n][0]} is pinned but nothing needs it" for n in sorted(set(pins) - needed)]
    assert not problems, "\n".join(problems) + "\nrefresh the locks with `make lock`"


def test_make_install_installed_exactly_the_locked_versions() -> None:
    """The check of the issue this pins: `pip freeze` in .venv equals the locks for every package
    they name. Only meaningful in the environment `make install` made."""
    if Path(sys.prefix).resolve() != (REPO_ROOT / ".venv").resolve():
        message = f"running from {sys.prefix}, not the .venv that `make install` makes"
        if in_ci():
            pytest.fail(message + " (CI=true)", pytrace=False)
        pytest.skip(message)
    wrong: list[str] = []
    for written, version in all_pins().values():
        try:
            found = metadata.version(written)
        except metadata.PackageNotFoundError:
            wrong.append(f"{written}=={version} is not installed")
            continue
        if Version(found) != version:
            wrong.append(f"{written} is {found}, the lock says {version}")
    assert not wrong, "\n".join(wrong) + "\nrun `make install`"
