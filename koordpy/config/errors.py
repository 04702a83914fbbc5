"""Configuration errors that name where in the file the problem is."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError


class ConfigError(ValueError):
    def __init__(self, path: str, message: str, source: str = "") -> None:
        self.path = path
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{path}: {message}" if path else f"{where}{message}")


def render_loc(loc: Sequence[int | str], prefix: str = "") -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def from_validation_error(err: ValidationError, prefix: str = "", source: str = "") -> ConfigError:
    first = err.errors()[0]
    loc = [p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    return ConfigError(render_loc(loc, prefix), first["msg"], source)
