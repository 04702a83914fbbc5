"""The numbers of a configuration, held to what the Go field they stand for can hold.

kube-scheduler decodes its configuration into Go structs: a number an `int64` cannot hold, or one
an `int32` field cannot, is refused when the file is read (`cannot unmarshal number ... of type
int32`), and JSON has no NaN or infinity to give a float field. Python's numbers have no such
limits, so without these bounds a score weight of 2**63 - 1 wraps in the score arrays and 1e20
makes every scheduling cycle raise.

`GoNumbers` is the base of every configuration model (`config.models`, `config.args.PluginArgs`):
every whole number a field holds (in lists and mappings too) must fit in an int64 and every float
must be finite, wherever the model declares it. A field whose Go type is narrower says so with its
type: `Int32`, `Float32`. Fields typed `Any` are left alone: what they hold is read by the code
that interprets them (a node selector, a resource quantity).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ValidationInfo, field_validator

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# the largest finite float32
FLOAT32_MAX = 3.4028234663852886e38


def _shown(value: int) -> str:
    # a number of hundreds of digits would fill the line (and past 4300 digits, str() refuses it)
    if value.bit_length() <= 96:
        return str(value)
    if value.bit_length() < 14_000:
        return f"a number of {len(str(abs(value)))} digits"
    return "a number of thousands of digits"


def int_problem(value: int, bits: int = 64) -> str | None:
    """Why a Go int of `bits` bits cannot hold `value`, or None."""
    low, high = (INT32_MIN, INT32_MAX) if bits == 32 else (INT64_MIN, INT64_MAX)
    if low <= value <= high:
        return None
    return f"{_shown(value)} does not fit in a Go int{bits} (from {low} to {high})"


def float_problem(value: float, bits: int = 64) -> str | None:
    """Why a Go float of `bits` bits (given as JSON) cannot hold `value`, or None."""
    if not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if bits == 32 and abs(value) > FLOAT32_MAX:
        return f"{value} does not fit in a Go float32 (at most {FLOAT32_MAX:g})"
    return None


def number_problem(value: Any) -> str | None:
    """The first number in `value` (in its lists and mappings too) no int64 or float64 holds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int_problem(value)
    if isinstance(value, float):
        return float_problem(value)
    if isinstance(value, list | tuple | set | frozenset):
        for item in value:
            if problem := number_problem(item):
                return problem
    elif isinstance(value, Mapping):
        for item in value.values():
            if problem := number_problem(item):
                return problem
    return None


def _int32(value: int) -> int:
    if problem := int_problem(value, 32):
        raise ValueError(problem)
    return value


def _float32(value: float) -> float:
    if problem := float_problem(value, 32):
        raise ValueError(problem)
    return value


# a field Go declares int32 (a plugin's weight, a percentage, a parallelism) or float32 (qps)
Int32 = Annotated[int, AfterValidator(_int32)]
Float32 = Annotated[float, AfterValidator(_float32)]


def _mentions_any(annotation: Any) -> bool:
    if annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _mentions_any(typing.get_args(annotation)[0])
    if origin is None and not isinstance(annotation, types.UnionType):
        return False
    return any(_mentions_any(arg) for arg in typing.get_args(annotation))


class GoNumbers(BaseModel):
    """Every number a field of the model holds, bounded as its Go field bounds it (the module's
    text). Runs before the field's own validators, so that they see numbers Go could hold."""

    @field_validator("*", mode="after")
    @classmethod
    def _go_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        field = cls.model_fields.get(name) if name is not None else None
        if field is not None and _mentions_any(field.annotation):
            return value
        if problem := number_problem(value):
            raise ValueError(problem)
        return value
