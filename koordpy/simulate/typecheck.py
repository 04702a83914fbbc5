"""The JSON type check of a scenario's objects: the API server's decoding, which refuses an object
whose field has the wrong JSON type (an object where a string belongs, a number outside its integer
type), and how a message quotes a value of the input."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from koordpy.api.errors import SpecError, join_path

__all__ = [
    "BOOLEAN",
    "INT32",
    "INT64",
    "INT_OR_STRING",
    "OBJECT",
    "QUANTITY",
    "STRING",
    "TIME",
    "MapOf",
    "check_types",
    "shown",
    "type_name",
]


def type_name(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


# How much of a value a message quotes: input values can be megabytes long.
_SHOWN_CHARACTERS = 60


def shown(value: Any) -> str:
    """A value as a message quotes it: repr, cut short; numbers too long to print by their size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a number of {value.bit_length()} bits"
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value)
        return text if len(text) <= _SHOWN_CHARACTERS else text[: _SHOWN_CHARACTERS - 4] + "...'"
    return type_name(value)


# --- the JSON types of the fields the API server decodes --------------------------------------------
#
# A schema is a scalar type name, a dict of the fields of an object (fields it does not list are not
# checked: the simulator never reads them), a one-element list (a list of that), or MapOf (a map
# from strings). null is accepted everywhere, as Go's JSON decoding accepts it for any field, but as
# a label or annotation: a map of strings holds strings.


@dataclass(frozen=True, slots=True)
class MapOf:
    values: Any


STRING = "string"
BOOLEAN = "boolean"
INT32 = "int32"
INT64 = "int64"
QUANTITY = "quantity"  # resource.Quantity: a string, or a number
INT_OR_STRING = "int-or-string"  # intstr.IntOrString: an int32 or a string
TIME = "time"  # metav1.Time: an RFC 3339 string
OBJECT = "object"  # an object whose fields the simulator does not read

_INT_RANGES = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}


class _Path:
    """A field path built only when an error needs it."""

    __slots__ = ("name", "parent")

    def __init__(self, parent: _Path | None, name: str) -> None:
        self.parent = parent
        self.name = name

    def render(self) -> str:
        names: list[str] = []
        node: _Path | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        path = ""
        for name in reversed(names):
            path = join_path(path, name)
        return path


def _rendered(path: _Path | None) -> str:
    return path.render() if path is not None else ""


def _expected(path: _Path | None, expected: str, value: Any) -> SpecError:
    """A collection of the wrong type: "expected an object, got a list"."""
    return SpecError(_rendered(path), f"expected {expected}, got {type_name(value)}")


def _must_be(path: _Path | None, expected: str, value: Any) -> SpecError:
    """A scalar of the wrong type or range: "must be an integer, got 'x'"."""
    got = (
        shown(value)
        if isinstance(value, str | int | float) and not isinstance(value, bool)
        else type_name(value)
    )
    return SpecError(_rendered(path), f"must be {expected}, got {got}")


_INT32_MIN, _INT32_MAX = _INT_RANGES[INT32]
_INT64_MIN, _INT64_MAX = _INT_RANGES[INT64]
# Whether a value decodes into each scalar type: the one place that says so, for the fast pass and
# for the one that names the field.
_SCALAR_OK: dict[str, Callable[[Any], bool]] = {
    STRING: lambda v: isinstance(v, str),
    BOOLEAN: lambda v: isinstance(v, bool),
    INT32: lambda v: type(v) is int and _INT32_MIN <= v <= _INT32_MAX,
    INT64: lambda v: type(v) is int and _INT64_MIN <= v <= _INT64_MAX,
    INT_OR_STRING: lambda v: isinstance(v, str) or (type(v) is int and _INT32_MIN <= v <= _INT32_MAX),
    QUANTITY: lambda v: isinstance(v, str) or type(v) is int or (isinstance(v, float) and math.isfinite(v)),
    # a YAML timestamp tag gives a date; it reaches the API server as the same string
    TIME: lambda v: isinstance(v, str | date),
    OBJECT: lambda v: isinstance(v, dict),
}


def _scalar_error(value: Any, kind: str, path: _Path | None) -> SpecError:
    """Why `value` does not decode into `kind`."""
    if kind in (INT32, INT64, INT_OR_STRING):
        or_string = " or a string" if kind == INT_OR_STRING else ""
        if type(value) is not int:
            return _must_be(path, f"an integer{or_string}", value)
        return _must_be(path, f"a {64 if kind == INT64 else 32}-bit integer{or_string}", value)
    if kind == QUANTITY:
        finite = isinstance(value, float) and not math.isfinite(value)
        return _must_be(path, "a finite quantity" if finite else "a quantity (a string or a number)", value)
    if kind == OBJECT:
        return _expected(path, "an object", value)
    expected = {STRING: "a string", BOOLEAN: "true or false", TIME: "a timestamp string"}[kind]
    return _must_be(path, expected, value)


def _valid(value: Any, schema: Any) -> bool:
    """Whether the API server decodes `value` as `schema`: the pass every object takes, without
    the bookkeeping of a field path."""
    if value is None:
        return True
    if schema.__class__ is str:
        return _SCALAR_OK[schema](value)
    if schema.__class__ is dict:
        if not isinstance(value, dict):
            return False
        for key, item in value.items():
            sub = schema.get(key)
            if sub is not None and item is not None:
                if sub is STRING:
                    if not isinstance(item, str):
                        return False
                elif not _valid(item, sub):
                    return False
        return True
    if schema.__class__ is list:
        if not isinstance(value, list):
            return False
        sub = schema[0]
        for item in value:  # noqa: SIM110 - no generator per list: every object takes this pass
            if not _valid(item, sub):
                return False
        return True
    if not isinstance(value, dict):
        return False
    sub = schema.values
    for key, item in value.items():
        if not isinstance(key, str):
            return False
        if item is None:
            if sub is STRING:
                return False
        elif not _valid(item, sub):
            return False
    return True


def _check(value: Any, schema: Any, path: _Path | None) -> None:
    """As _valid, raising SpecError that names the first field that does not decode."""
    if value is None:
        return
    if isinstance(schema, str):
        if not _SCALAR_OK[schema](value):
            raise _scalar_error(value, schema, path)
    elif isinstance(schema, dict):
        if not isinstance(value, dict):
            raise _expected(path, "an object", value)
        for key, item in value.items():
            sub = schema.get(key)
            if sub is not None and item is not None:
                _check(item, sub, _Path(path, key))
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise _expected(path, "a list", value)
        (sub,) = schema
        for index, item in enumerate(value):
            _check(item, sub, _Path(path, f"[{index}]"))
    else:
        assert isinstance(schema, MapOf)
        if not isinstance(value, dict):
            raise _expected(path, "an object", value)
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError(_rendered(path), f"key {shown(key)} is not a string")
            if item is not None:
                _check(item, schema.values, _Path(path, key))
            elif schema.values is STRING:
                # a label or annotation without a value: there is no string to decode
                raise _must_be(_Path(path, key), "a string", item)


def check_types(obj: Any, schema: Any, path: str = "") -> None:
    """Raises SpecError naming the first field whose JSON type the API server would not decode."""
    if _valid(obj, schema):
        return
    _check(obj, schema, _Path(None, path) if path else None)
    raise AssertionError(f"{path or 'object'}: the two type checks disagree")  # pragma: no cover
