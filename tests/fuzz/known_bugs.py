"""Failures of the fuzz suite that are known and being fixed, each with the damages that hit it.

While a bug is listed here, the test that pins it is marked xfail (non-strict) by `known_bug` (and
its reproducer in found/, if it has one), and the general tests do not draw what hits it, so that
they keep guarding everything else. When the fix lands, delete the entry: the marks go, and the
general tests draw those inputs again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from tests.fuzz.strategies import Damage

F = TypeVar("F", bound=Callable[..., Any])

QUANTITY_FIELDS = frozenset({"requests", "limits", "allocatable", "capacity", "overhead", "minResources"})
COUNT_FIELDS = frozenset({"replicas", "parallelism", "completions"})


def _never(damage: Damage) -> bool:
    return False


@dataclass(frozen=True)
class KnownBug:
    name: str
    reason: str
    # the damages of malformed input that hit the bug
    hits: Callable[[Damage], bool] = _never
    # the test cannot even run while the bug is there (it would exhaust memory)
    run: bool = True


# none at present: each entry is a KnownBug(name, reason, hits)
KNOWN_BUGS: dict[str, KnownBug] = {}


def is_known(name: str) -> bool:
    return name in KNOWN_BUGS


def hits_known_bug(damage: Damage) -> bool:
    return any(bug.hits(damage) for bug in KNOWN_BUGS.values())


def known_bug_marks(name: str) -> list[pytest.MarkDecorator]:
    """The marks of a parametrized case that pins bug `name`."""
    bug = KNOWN_BUGS.get(name)
    return [pytest.mark.xfail(strict=False, run=bug.run, reason=bug.reason)] if bug is not None else []


def known_bug(name: str) -> Callable[[F], F]:
    """Marks the test that pins bug `name` xfail (non-strict) while the bug is listed."""
    bug = KNOWN_BUGS.get(name)

    def mark(test: F) -> F:
        if bug is None:
            return test
        marked: F = pytest.mark.xfail(strict=False, run=bug.run, reason=bug.reason)(test)
        return marked

    return mark
