"""VolumeBindingArgs: how long PreBind may wait for the volumes to be bound, and the shape that
turns a node's storage utilization into its score. Validated as kube-scheduler's
ValidateVolumeBindingArgs validates them, each problem at its place in the file."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from pydantic import Field, field_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from koordpy.config.args import PluginArgs
from koordpy.config.numbers import Int32

MIN_UTILIZATION = 0
MAX_UTILIZATION = 100
MIN_SCORE = 0
# shape scores are 0..10 in the configuration and 0..100 when scoring (kube's MaxCustomPriorityScore)
MAX_CUSTOM_PRIORITY_SCORE = 10
DEFAULT_BIND_TIMEOUT_SECONDS = 600


class UtilizationShapePoint(PluginArgs):
    utilization: Int32
    score: Int32


# kube-scheduler 1.37 (StorageCapacityScoring on by default): the emptier a node's storage stays,
# the better the node
DEFAULT_SHAPE: tuple[UtilizationShapePoint, ...] = (
    UtilizationShapePoint(utilization=MIN_UTILIZATION, score=MAX_CUSTOM_PRIORITY_SCORE),
    UtilizationShapePoint(utilization=MAX_UTILIZATION, score=MIN_SCORE),
)


def _invalid(loc: tuple[int | str, ...], value: int, message: str) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(
            "value_error", "Invalid value: {value}: {message}", {"value": value, "message": message}
        ),
        loc=loc,
        input=value,
    )


def shape_problems(shape: Sequence[UtilizationShapePoint]) -> list[InitErrorDetails]:
    """kube's validateFunctionShape: the first point out of order, then every value out of range."""
    problems: list[InitErrorDetails] = []
    for i, (prev, point) in enumerate(itertools.pairwise(shape), start=1):
        if prev.utilization >= point.utilization:
            problems.append(
                _invalid(
                    (i, "utilization"),
                    point.utilization,
                    "utilization values must be sorted in increasing order",
                )
            )
            break
    utilization_range = f"not in valid range [{MIN_UTILIZATION}, {MAX_UTILIZATION}]"
    score_range = f"not in valid range [{MIN_SCORE}, {MAX_CUSTOM_PRIORITY_SCORE}]"
    for i, point in enumerate(shape):
        if not MIN_UTILIZATION <= point.utilization <= MAX_UTILIZATION:
            problems.append(_invalid((i, "utilization"), point.utilization, utilization_range))
        if not MIN_SCORE <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            problems.append(_invalid((i, "score"), point.score, score_range))
    return problems


class VolumeBindingArgs(PluginArgs):
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    # empty: the default shape (kube defaults an empty list as an absent one)
    shape: list[UtilizationShapePoint] = Field(default_factory=list)

    @field_validator("bind_timeout_seconds")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(
                f"Invalid value: {value}: invalid BindTimeoutSeconds, should not be a negative value"
            )
        return value

    @field_validator("shape")
    @classmethod
    def _valid_shape(cls, shape: list[UtilizationShapePoint]) -> list[UtilizationShapePoint]:
        problems = shape_problems(shape)
        if problems:
            # raised as a ValidationError so that each problem keeps its own place (shape[i].score)
            raise ValidationError.from_exception_data(cls.__name__, problems)
        return shape

    def points(self) -> tuple[UtilizationShapePoint, ...]:
        return tuple(self.shape) or DEFAULT_SHAPE
