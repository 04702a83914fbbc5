"""Every command the README and docs/*.md show in a ```sh or ```console block is run, or listed
here with the reason it cannot run in the tests.

- `koordpy simulate ...` runs against the repository's examples (a file name that stands for the
  reader's own is replaced by an example, in PLACEHOLDERS);
- `make <target>` is checked with `make -n` (running the targets takes minutes);
- `helm install` and `helm upgrade` run in tests/e2e/test_docs_commands.py, against the test API
  server (`--dry-run=server`), once their CRD switches are checked against the cluster they are
  written for;
- anything else must be in NOT_RUN, with its reason: a command added to the docs fails
  `test_every_documented_command_is_run_or_listed` until it is run by one of the above or listed.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")))
# the venv's own koordpy, as `.venv/bin/koordpy` in the docs
KOORDPY = Path(sys.executable).parent / "koordpy"

# a fenced block, possibly indented in a list item: its language, its indentation and its text
_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M
)
_COMMENT = re.compile(r"(?:^|\s+)#\s.*$")

# commands that need what the tests do not have, with the reason
NOT_RUN: dict[str, str] = {
    "docker build -t registry.example.com/koordpy:0.1.0 .": (
        "needs a Docker daemon; the Dockerfile is checked by tests/test_dockerfile.py"
    ),
    "docker push registry.example.com/koordpy:0.1.0": "pushes to the reader's registry",
    "kubectl get flowschema kube-scheduler system-leader-election -o custom-columns=NAME:.metadata.name,"
    "LEVEL:.spec.priorityLevelConfiguration.name,PRECEDENCE:.spec.matchingPrecedence": (
        "reads the reader's cluster; the test API server's FlowSchemas are compared with the chart's "
        "in tests/e2e/test_chart.py"
    ),
    "kubectl get flowschema -o json | jq -r '.items[] | select(any(.spec.rules[].subjects[]; "
    '.user.name? == "system:kube-scheduler")) | [.metadata.name, .spec.priorityLevelConfiguration.name, '
    ".spec.matchingPrecedence] | @tsv'": "reads the reader's cluster (as the command above)",
    "kubectl -n koordpy-system get lease koordpy -o jsonpath='{.spec.holderIdentity}{\"\\n\"}'": (
        "needs koordpy running in the reader's cluster; the Lease is tested in tests/e2e/test_leadership.py"
    ),
    "kubectl -n koordpy-system port-forward svc/koordpy-metrics 10259 &": (
        "needs koordpy running in the reader's cluster"
    ),
    "TOKEN=$(kubectl -n monitoring create token prometheus-k8s)": (
        "needs the reader's monitoring stack (prometheus-k8s ServiceAccount)"
    ),
    'curl -sk -H "Authorization: Bearer $TOKEN" https://localhost:10259/metrics | '
    "grep -E '^(scheduler_|koordpy_)' | head": (
        "needs the port-forward above; /metrics with a token is tested in tests/e2e/test_secure_serving.py"
    ),
    "curl -sk 'https://localhost:10259/readyz?verbose'": (
        "needs koordpy serving on localhost; /readyz?verbose is tested in tests/e2e/test_secure_serving.py"
    ),
    ".venv/bin/koordpy run --kubeconfig ~/.kube/config --config config.yaml --leader-elect=false -v=2": (
        "runs against the reader's cluster until stopped; `koordpy run` is tested in tests/e2e/test_run.py"
    ),
    "kubectl get podgroups.scheduling.x-k8s.io -A": (
        "the short names and kinds are checked through discovery in tests/e2e/test_crd_names.py"
    ),
    "kubectl get podgroups.scheduling.sigs.k8s.io -A": "as above (tests/e2e/test_crd_names.py)",
    "kubectl get podgroups.scheduling.sigs.k8s.io,podgroups.scheduling.x-k8s.io -A": (
        "as above (tests/e2e/test_crd_names.py)"
    ),
    "kubectl describe podgroup.scheduling.x-k8s.io train -n team": (
        "describes the reader's PodGroup team/train, which the test API server does not have"
    ),
}

# file names in the docs that stand for the reader's own, and the repository's file run instead
PLACEHOLDERS: dict[str, str] = {
    "day.yaml": "examples/quickstart.yaml",
    "my-workload.yaml": "examples/quickstart.yaml",
    "koord-scheduler-config.yaml": "tests/config/files/koordinator-manager-scheduler-config.yaml",
}


@dataclass(frozen=True)
class Command:
    path: Path
    line: int
    text: str
    # the comment lines above it in its block (what it is for: "beside Koordinator")
    context: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"

    @property
    def kind(self) -> str:
        if self.text in NOT_RUN:
            return "listed"
        words = self.text.split()
        if words[0] in ("koordpy", ".venv/bin/koordpy") and words[1:2] == ["simulate"]:
            return "simulate"
        if words[0] == "make":
            return "make"
        if words[0] == "helm" and words[1:2] in (["install"], ["upgrade"]):
            return "helm"
        return "unknown"


def doc_commands() -> list[Command]:
    """The commands of every ```sh and ```console block: lines continued with a backslash joined,
    comments dropped (a comment line above a command is its context), in a console block only the
    lines after the `$ ` prompt."""
    found: list[Command] = []
    for path in DOCUMENTS:
        text = path.read_text()
        for block in _FENCE.finditer(text):
            lang = block.group("lang")
            if lang not in ("sh", "console"):
                continue
            first_line = text.count("\n", 0, block.start("body")) + 1
            indent = len(block.group("indent"))
            lines = [line[indent:] for line in block.group("body").splitlines()]
            context: list[str] = []
            pending = ""
            start = 0
            for i, raw in enumerate(lines):
                line = raw
                if lang == "console":
                    if not line.startswith("$ "):
                        continue
                    line = line[2:]
                if not pending and line.lstrip().startswith("#"):
                    context.append(line.lstrip("# ").strip())
                    continue
                if not line.strip():
                    context = []
                    continue
                if not pending:
                    start = i
                if line.rstrip().endswith("\\"):
                    pending += line.rstrip()[:-1].strip() + " "
                    continue
                command = (pending + _COMMENT.sub("", line).strip()).strip()
                pending = ""
                found.append(Command(path, first_line + start, command, " ".join(context)))
                context = []
    return found


COMMANDS = doc_commands()


def _of_kind(kind: str) -> list[Command]:
    return [c for c in COMMANDS if c.kind == kind]


def test_the_docs_show_commands() -> None:
    kinds = {c.kind for c in COMMANDS}
    assert {"simulate", "make", "helm", "listed"} <= kinds, kinds


def test_every_documented_command_is_run_or_listed() -> None:
    unknown = [f"{c.where}: {c.text}" for c in _of_kind("unknown")]
    assert not unknown, (
        "commands in the docs that no test runs; run them here (or in tests/e2e/test_docs_commands.py) "
        "or add them to NOT_RUN with the reason:\n" + "\n".join(unknown)
    )


def test_every_listed_command_is_still_in_the_docs() -> None:
    shown = {c.text for c in COMMANDS}
    assert not set(NOT_RUN) - shown, "NOT_RUN lists commands the docs no longer show"


@pytest.mark.parametrize("command", _of_kind("simulate"), ids=lambda c: c.where)
def test_documented_simulations_run(command: Command, tmp_path: Path) -> None:
    args = shlex.split(command.text)[1:]
    for i, arg in enumerate(args):
        if arg in PLACEHOLDERS:
            args[i] = PLACEHOLDERS[arg]
        elif arg.endswith(".html"):
            args[i] = str(tmp_path / arg)  # written by the run, not into the repository
    for arg in args:
        if arg.endswith((".yaml", ".yml")):
            assert (REPO_ROOT / arg).is_file(), f"{command.where}: {arg} is not in the repository"
    done = subprocess.run(
        [str(KOORDPY), *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{command.where}: {command.text}\n{done.stderr}{done.stdout}"
    assert done.stdout.strip()
    for arg in args:
        if arg.endswith(".html"):
            assert Path(arg).stat().st_size > 0


@pytest.mark.parametrize("command", _of_kind("make"), ids=lambda c: c.where)
def test_documented_make_targets_exist(command: Command) -> None:
    target = command.text.split()[1:]
    assert len(target) == 1, f"{command.where}: one target a command: {command.text}"
    done = subprocess.run(
        ["make", "-n", *target], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"{command.where}: make -n {target[0]}\n{done.stderr}"
