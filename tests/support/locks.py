"""The two locks as the tests read them: `name==version` lines, one package each."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME_LOCK = REPO_ROOT / "requirements.lock"
DEV_LOCK = REPO_ROOT / "requirements-dev.lock"
PYPROJECT = REPO_ROOT / "pyproject.toml"

_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.+!-]*)")


def read_lock(path: Path) -> dict[str, tuple[str, Version]]:
    """canonical name -> (name as written, pinned version); every entry must be `name==version`."""
    pins: dict[str, tuple[str, Version]] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.fullmatch(line)
        assert match, f"{path.name}:{number}: {raw!r} is not pinned as name==version"
        name = canonicalize_name(match.group(1))
        assert name not in pins, f"{path.name}:{number}: {match.group(1)} is pinned twice"
        pins[name] = (match.group(1), Version(match.group(2)))
    return pins


def pyproject() -> dict[str, object]:
    return tomllib.loads(PYPROJECT.read_text())


def runtime_requirements() -> list[Requirement]:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    return [Requirement(r) for r in project["dependencies"]]


def dev_requirements() -> list[Requirement]:
    """The dev extra and the build backend: what `make install` adds to the runtime."""
    data = pyproject()
    project, build = data["project"], data["build-system"]
    assert isinstance(project, dict) and isinstance(build, dict)
    texts = [*project["optional-dependencies"]["dev"], *build["requires"]]
    return [Requirement(r) for r in texts]


def pin_problem(requirement: Requirement, pins: dict[str, tuple[str, Version]], where: str) -> str | None:
    """Why `pins` (of `where`) do not satisfy `requirement`; None when they do."""
    name = canonicalize_name(requirement.name)
    if name not in pins:
        return f"{requirement} is not pinned in {where}"
    written, version = pins[name]
    if not requirement.specifier.contains(version, prereleases=True):
        return f"{where} pins {written}=={version}, outside {requirement}"
    return None
