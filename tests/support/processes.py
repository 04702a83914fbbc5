"""The processes of the test control plane (tests/support/controlplane.py): started with their
output in a log file, stopped with SIGTERM then SIGKILL, and taken down with the test run when it is
killed."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or used."""


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _pdeathsig_preexec() -> Any:
    """A preexec_fn that makes Linux SIGTERM the child when this thread exits.

    Keeps etcd/apiserver/KWOK from outliving a killed test run. Only used when
    launching from the main thread: the signal fires when the *launching
    thread* exits, which for a worker thread can be much too early. libc is
    loaded here, in the parent, so the child only makes one system call.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:  # pragma: no cover - runs in the child
        prctl(pr_set_pdeathsig, sigterm)

    return preexec


@dataclass
class _Process:
    name: str
    args: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    _log_file: Any = field(default=None, repr=False)

    def start(self, env: dict[str, str] | None = None) -> None:
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log_file.write(f"\n=== starting: {' '.join(self.args)}\n".encode())
        self._log_file.flush()
        self.popen = subprocess.Popen(
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_pdeathsig_preexec(),
        )

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        proc = self.popen
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)
        self.popen = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def describe_failure(self) -> str:
        code = self.popen.poll() if self.popen else None
        state = "still running" if code is None else f"exited with code {code}"
        return f"{self.name} ({state}); last lines of {self.log_path}:\n{_tail(self.log_path)}"
