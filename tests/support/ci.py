"""How the test suite speaks up about missing tools: skipped loudly on a workstation, failed in CI."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def shout(config: pytest.Config, message: str) -> None:
    """A line that stands out in pytest's output, even with -q."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_line(message, red=True, bold=True)
