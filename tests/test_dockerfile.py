"""The container image, checked from its recipe: there is no Docker engine to build it in the tests,
so the Dockerfile and requirements.lock are read as text and held to the rules the image must keep."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.locks import DEV_LOCK, REPO_ROOT, RUNTIME_LOCK, pin_problem, runtime_requirements
from tests.support.locks import read_lock as read_locked_pins

DOCKERFILE = REPO_ROOT / "Dockerfile"
LOCK = RUNTIME_LOCK

NONROOT_UID = 65532
METRICS_PORT = "10259"
# tools of the dev extra and the build that must never reach the image
NOT_RUNTIME = {
    "pytest",
    "pytest-asyncio",
    "hypothesis",
    "mypy",
    "ruff",
    "import-linter",
    "types-pyyaml",
    "pip",
    "setuptools",
    "wheel",
    "koordpy",
}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    value: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions in order, with line continuations joined, runs of blanks made one space, and
    comments dropped."""
    instructions: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = " ".join((pending + line).split())
        pending = ""
        keyword, _, value = full.partition(" ")
        instructions.append(Instruction(keyword.upper(), value.strip(), start))
    assert not pending, "the Dockerfile ends inside a line continuation"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    """The build stages, each starting with its FROM; global ARGs before the first FROM are left out."""
    result: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            result.append([ins])
        elif result:
            result[-1].append(ins)
    return result


def global_args(instructions: list[Instruction]) -> dict[str, str]:
    args: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "FROM":
            break
        if ins.keyword == "ARG":
            name, _, default = ins.value.partition("=")
            args[name.strip()] = default.strip()
    return args


def base_image(from_value: str, args: dict[str, str]) -> str:
    image = from_value.split()[0]
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), image)


def read_lock() -> dict[str, tuple[str, Version]]:
    return read_locked_pins(LOCK)


# The image's interpreter: Linux, CPython 3.11, the environment markers are evaluated for.
IMAGE_MARKERS = {
    **default_environment(),
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "python_full_version": "3.11.13",
    "extra": "",
}


def applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate(IMAGE_MARKERS)


# ---------------------------------------------------------------------------------------------- Dockerfile
@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_is_multi_stage_on_a_slim_python_311_base_pinned_by_version(instructions: list[Instruction]) -> None:
    args = global_args(instructions)
    froms = [s[0] for s in stages(instructions)]
    assert len(froms) >= 2, "build the wheel in one stage and run it from another"
    stage_names = {f.value.split()[-1].lower() for f in froms if " as " in f.value.lower()}
    for ins in froms:
        image = base_image(ins.value, args)
        if image.lower() in stage_names:
            continue
        repository, _, tag = image.partition(":")
        tag = tag.split("@", 1)[0]
        assert repository in ("python", "docker.io/library/python"), f"line {ins.line}: base {image}"
        assert "$" not in image, f"line {ins.line}: {image} has an ARG without a default"
        # a full patch version pins the interpreter; "3.11-slim" or "latest" would float
        assert re.fullmatch(r"3\.11\.\d+-slim(-\w+)?", tag), f"line {ins.line}: {image} is not pinned"


def test_runtime_stage_runs_as_the_non_root_user(instructions: list[Instruction]) -> None:
    final = stages(instructions)[-1]
    users = [ins for ins in final if ins.keyword == "USER"]
    assert users, "the runtime stage sets no USER: the image would run as root"
    user = users[-1].value
    uid, _, gid = user.partition(":")
    # numeric, so that the kubelet can enforce runAsNonRoot without a runAsUser
    assert uid == str(NONROOT_UID), f"USER {user}: want uid {NONROOT_UID}"
    assert not gid or gid == str(NONROOT_UID), f"USER {user}: want gid {NONROOT_UID}"
    run_after = [ins for ins in final if ins.keyword == "RUN" and ins.line > users[-1].line]
    assert not run_after, "RUN after USER: the runtime stage should not need to run anything as the user"


def test_entrypoint_is_koordpy_run_in_exec_form(instructions: list[Instruction]) -> None:
    final = stages(instructions)[-1]
    entrypoints = [ins for ins in final if ins.keyword == "ENTRYPOINT"]
    assert entrypoints, "no ENTRYPOINT in the runtime stage"
    # exec form: koordpy is PID 1 and receives SIGTERM itself (releases the Lease, finishes bindings)
    assert json.loads(entrypoints[-1].value) == ["koordpy", "run"]
    assert not [ins for ins in final if ins.keyword == "CMD"], "a CMD would be appended to `koordpy run`"


def test_exposes_the_metrics_port(instructions: list[Instruction]) -> None:
    exposed = {
        p.split("/")[0]
        for ins in stages(instructions)[-1]
        if ins.keyword == "EXPOSE"
        for p in ins.value.split()
    }
    assert METRICS_PORT in exposed


def test_installs_only_the_lock_and_checks_it(instructions: list[Instruction]) -> None:
    runs = " ".join(ins.value for ins in instructions if ins.keyword == "RUN")
    copies = " ".join(ins.value for ins in instructions if ins.keyword == "COPY")
    assert "requirements.lock" in copies
    assert re.search(r"pip install --no-deps -r requirements\.lock", runs), (
        "install the lock with --no-deps, so nothing unpinned comes in"
    )
    assert re.search(r"pip install --no-deps \S*koordpy\S*\.whl", runs), (
        "install koordpy's wheel without deps"
    )
    assert "pip check" in runs, "`pip check` catches a lock that misses or mismatches a dependency"


def test_builds_the_wheel_with_the_locked_build_backend(instructions: list[Instruction]) -> None:
    """The wheel is built by the setuptools and wheel that requirements-dev.lock pins, the ones
    `make install` builds the editable install with: the image does not change with the day."""
    runs = " ".join(ins.value for ins in instructions if ins.keyword == "RUN")
    dev = read_locked_pins(DEV_LOCK)
    for tool in ("setuptools", "wheel"):
        version = dev[tool][1]
        assert re.search(rf"\b{tool}=={re.escape(str(version))}\b", runs), (
            f"the Dockerfile must install {tool}=={version}, as requirements-dev.lock pins it"
        )


def test_parser_joins_continuations_and_skips_comments() -> None:
    parsed = parse_dockerfile("ARG A=1\n# c\nFROM x:${A} AS b\nRUN a \\\n  # inner\n  && b\nUSER 1\n")
    assert [(i.keyword, i.value) for i in parsed] == [
        ("ARG", "A=1"),
        ("FROM", "x:${A} AS b"),
        ("RUN", "a && b"),
        ("USER", "1"),
    ]
    assert base_image("x:${A} AS b", {"A": "1"}) == "x:1"


# ---------------------------------------------------------------------------------------------- the lock
def test_lock_pins_every_runtime_dependency_within_its_range() -> None:
    pins = read_lock()
    for requirement in runtime_requirements():
        if not applies(requirement):
            continue
        problem = pin_problem(requirement, pins, "requirements.lock")
        assert problem is None, f"{problem} (pyproject.toml)"


def test_lock_holds_no_dev_or_build_tools() -> None:
    leaked = sorted(NOT_RUNTIME & set(read_lock()))
    assert not leaked, f"requirements.lock pins tools the image does not run: {leaked}"


def test_lock_is_closed_under_dependencies() -> None:
    """Each pinned package's own requirements are pinned too, within their ranges. Packages are read
    from the installed distributions; one installed at another version than the lock's is skipped
    (its metadata could differ), and so is the whole check when none matches."""
    pins = read_lock()
    checked = 0
    problems: list[str] = []
    for written, version in pins.values():
        try:
            dist = metadata.distribution(written)
        except metadata.PackageNotFoundError:
            continue
        if Version(dist.version) != version:
            continue
        checked += 1
        for text in dist.requires or ():
            requirement = Requirement(text)
            if not applies(requirement):
                continue
            if problem := pin_problem(requirement, pins, "requirements.lock"):
                problems.append(f"{written}=={version} needs it: {problem}")
    if not checked:
        pytest.skip("no package of requirements.lock is installed here at its locked version")
    assert not problems, "\n".join(problems)


def test_lock_has_nothing_beyond_the_closure() -> None:
    """A pin nothing needs is dead weight in the image (and a stale entry after a dependency drops)."""
    pins = read_lock()
    needed: set[str] = set()
    todo = [canonicalize_name(r.name) for r in runtime_requirements() if applies(r)]
    unknown = False
    while todo:
        name = todo.pop()
        if name in needed or name not in pins:
            continue
        needed.add(name)
        written, version = pins[name]
        try:
            dist = metadata.distribution(written)
        except metadata.PackageNotFoundError:
            unknown = True
            continue
        if Version(dist.version) != version:
            unknown = True
            continue
        requires = [Requirement(t) for t in dist.requires or ()]
        todo.extend(canonicalize_name(r.name) for r in requires if applies(r))
    extra = sorted(set(pins) - needed)
    if extra and unknown:
        pytest.skip(f"cannot tell whether {extra} are needed: some locked versions are not installed here")
    assert not extra, f"requirements.lock pins packages koordpy does not need: {extra}"
