"""Readers for fields of API objects given as parsed JSON or YAML: each returns the value typed,
a default when the field is absent, or raises a SpecError naming the field when it holds anything
else (so that parsing never fails with another exception, whatever JSON value a field holds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordpy.api.errors import SpecError

_EMPTY: Mapping[str, str] = {}


def mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise SpecError(path, f"expected an object, got {type(obj).__name__}")
    return obj


def string(obj: Any, path: str) -> str:
    if obj is None:
        return ""
    if not isinstance(obj, str):
        raise SpecError(path, f"expected a string, got {type(obj).__name__}")
    return obj


def required(obj: Mapping[str, Any], key: str, path: str) -> str:
    """The non-empty string at `path.key`."""
    value = string(obj.get(key), f"{path}.{key}")
    if not value:
        raise SpecError(f"{path}.{key}", "is required")
    return value


def flag(obj: Any, path: str, default: bool = False) -> bool:
    if obj is None:
        return default
    if not isinstance(obj, bool):
        raise SpecError(path, f"expected a boolean, got {type(obj).__name__}")
    return obj


def str_map(obj: Any, path: str) -> Mapping[str, str]:
    """A map of strings to strings (labels, annotations, parameters)."""
    m = mapping(obj, path)
    if not m:
        return _EMPTY
    out: dict[str, str] = {}
    for key, value in m.items():
        if not isinstance(key, str):
            raise SpecError(path, f"key {key!r} is not a string")
        if not isinstance(value, str):
            raise SpecError(f"{path}.{key}", f"expected a string, got {type(value).__name__}")
        out[key] = value
    return out


def items(obj: Any, path: str) -> list[Any]:
    """A list, any items."""
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise SpecError(path, f"expected a list, got {type(obj).__name__}")
    return obj


def strings(obj: Any, path: str) -> tuple[str, ...]:
    """A list of strings."""
    values = items(obj, path)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise SpecError(f"{path}[{i}]", f"expected a string, got {type(value).__name__}")
    return tuple(values)
