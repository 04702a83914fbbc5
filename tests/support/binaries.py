"""The control plane's binaries: where they are (``${KOORDPY_CACHE_DIR:-~/.cache/koordpy}/bin``),
whether they are current, and building them with ``hack/controlplane/build.sh``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.processes import ControlPlaneError

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "controlplane" / "build.sh"

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")


def cache_dir() -> Path:
    env = os.environ.get("KOORDPY_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "koordpy"


def bin_dir() -> Path:
    return cache_dir() / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    """Names of the control-plane binaries that are not present (executable)."""
    directory = directory or bin_dir()
    return [name for name in BINARIES if not os.access(directory / name, os.X_OK)]


def binaries_up_to_date() -> bool:
    """True when build.sh --check reports every binary present and current."""
    if missing_binaries():
        return False
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    return result.returncode == 0


def build_binaries(*, stream: Any = None) -> None:
    """Run hack/controlplane/build.sh (builds only what is missing or stale).

    The output is copied to ``stream`` (default: stderr) as it arrives, so a
    cold build (about 9 minutes of compiling on two cores) shows progress.
    """
    stream = stream or sys.stderr
    proc = subprocess.Popen(
        ["bash", str(BUILD_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        stream.write(line)
        stream.flush()
        tail = [*tail[-40:], line]
    if proc.wait() != 0:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{''.join(tail)}")
