"""hack/controlplane/build.sh holds the local Go to the `go` line of the modules it builds, before it
builds anything: a toolchain too old fails at once with what is needed, not deep inside a build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.locks import REPO_ROOT

BUILD = REPO_ROOT / "hack" / "controlplane" / "build.sh"
KUBE_GOMOD = REPO_ROOT / "hack" / "controlplane" / "kube" / "go.mod"


def go_line(gomod: Path) -> str:
    match = re.search(r"^go (\S+)$", gomod.read_text(), re.MULTILINE)
    assert match, f"{gomod} has no go line"
    return match.group(1)


def run_with_go(tmp_path: Path, version: str) -> subprocess.CompletedProcess[str]:
    """build.sh with a `go` on PATH that reports `version` and fails at anything else, so that
    nothing can be built: only the checks before a build can pass."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    go = fake / "go"
    go.write_text(f'#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && {{ echo go{version}; exit 0; }}\nexit 97\n')
    go.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "KOORDPY_CACHE_DIR": str(tmp_path / "c")}
    return subprocess.run(["bash", str(BUILD)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    ("go_version", "refused"),
    [
        pytest.param("1.20.14", True, id="older-minor"),
        pytest.param("1.9", True, id="older-minor-that-sorts-after-as-text"),
        pytest.param(go_line(KUBE_GOMOD), False, id="exactly-the-go-line"),
        pytest.param("1.99.0", False, id="newer"),
    ],
)
def test_the_local_go_is_checked_against_the_modules_go_line(
    tmp_path: Path, go_version: str, refused: bool
) -> None:
    result = run_with_go(tmp_path, go_version)
    assert result.returncode != 0  # the fake go can build nothing either way
    wanted = go_line(KUBE_GOMOD)
    needs = f"needs Go >= {wanted} (the go line of {KUBE_GOMOD}); this machine has go{go_version}"
    assert (needs in result.stderr) is refused, result.stderr
    # a toolchain the check lets by reaches the build (where the fake go fails it)
    assert ("building kube-apiserver" in result.stdout) is not refused, result.stdout
