"""Configuration errors that name where in the file each problem is.

A configuration is checked as a whole and every problem found is reported at once, each at a path
that exists in the user's file (`profiles[0].plugins.filter.enabled[2].name`), so that one run
shows everything to fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(ValueError):
    """Every problem of a configuration; `path` and `message` are the first one's.

    str() is one line for one problem, and a count followed by one line per problem otherwise;
    `hint`, when given, is a last line saying what the user can do about them all.
    """

    def __init__(self, path: str, message: str, source: str = "") -> None:
        self._init((Problem(path, message),), source, "")

    @classmethod
    def of(cls, problems: Sequence[Problem], source: str = "", hint: str = "") -> ConfigError:
        if not problems:
            raise ValueError("a ConfigError needs at least one problem")
        err = cls.__new__(cls)
        err._init(tuple(problems), source, hint)
        return err

    def _init(self, problems: tuple[Problem, ...], source: str, hint: str) -> None:
        self.problems = problems
        self.source = source
        self.hint = hint
        self.path = problems[0].path
        self.message = problems[0].message
        super().__init__(self.render())

    def render(self, source: str | None = None) -> str:
        """The report, prefixed with `source` (default: the file the problems are in)."""
        src = self.source if source is None else source
        where = f"{src}: " if src else ""
        if len(self.problems) == 1:
            text = f"{where}{self.problems[0]}"
        else:
            text = f"{where}{len(self.problems)} problems:" + "".join(f"\n  {p}" for p in self.problems)
        return f"{text}\n{self.hint}" if self.hint else text


def render_loc(loc: Sequence[int | str], prefix: str = "") -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _step(node: Any, part: int | str) -> tuple[bool, Any]:
    """(whether `part` names something in `node`, what it names)."""
    if isinstance(node, Mapping) and part in node:
        return True, node[part]
    if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
        return True, node[part]
    return False, None


def _user_loc(loc: Sequence[int | str], data: Any) -> list[int | str]:
    """The part of a pydantic location that walks the user's data. Pydantic adds steps of its own
    (a union's member type, `function-after[...]`, `[key]`); those name nothing in the file."""
    out: list[int | str] = []
    node = data
    for i, part in enumerate(loc):
        found, below = _step(node, part)
        if found:
            out.append(part)
        elif isinstance(part, str) and i == len(loc) - 1 and isinstance(node, Mapping):
            # a key the user left out (required, or defaulted to a value that conflicts with
            # another): its place is where it would be
            out.append(part)
        node = below
    return out


def _message(error: ErrorDetails) -> str:
    # a ValueError raised by a validator is the message itself; pydantic's prefix is noise
    ctx = error.get("ctx") or {}
    if error["type"] == "value_error" and "error" in ctx:
        return str(ctx["error"])
    msg = error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def problems_from_validation_error(err: ValidationError, data: Any, prefix: str = "") -> list[Problem]:
    """One problem per place in the user's data; a union's alternatives that all failed at one
    place become one problem naming each."""
    by_path: dict[str, list[str]] = {}
    for error in err.errors():
        loc = _user_loc(error["loc"], data)
        messages = by_path.setdefault(render_loc(loc, prefix), [])
        message = _message(error)
        if message not in messages:
            messages.append(message)
    return [Problem(path, "; ".join(messages)) for path, messages in by_path.items()]
