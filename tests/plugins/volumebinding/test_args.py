"""VolumeBindingArgs: defaults, and the problems kube's ValidateVolumeBindingArgs reports, each at
its place in the configuration."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.framework.profile import validate_args
from koordpy.plugins.volumebinding import DEFAULT_SHAPE, VolumeBinding, VolumeBindingArgs


def _problems(args: dict[str, Any]) -> list[tuple[str, str]]:
    parsed, problems = validate_args(VolumeBinding, args, "pluginConfig[0].args")
    assert (parsed is None) == bool(problems)
    return [(p.path, p.message) for p in problems]


def test_defaults_are_kubes() -> None:
    args = VolumeBindingArgs()
    assert args.bind_timeout_seconds == 600
    # StorageCapacityScoring (beta, on in 1.37): emptier storage scores higher
    assert [(p.utilization, p.score) for p in args.points()] == [(0, 10), (100, 0)]
    assert args.points() == DEFAULT_SHAPE


def test_an_empty_shape_is_the_default_one() -> None:
    assert VolumeBindingArgs.model_validate({"shape": []}).points() == DEFAULT_SHAPE


def test_a_valid_configuration_is_read_as_written() -> None:
    args = VolumeBindingArgs.model_validate(
        {
            "bindTimeoutSeconds": 30,
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 80, "score": 10}],
        }
    )
    assert args.bind_timeout_seconds == 30
    assert [(p.utilization, p.score) for p in args.points()] == [(0, 0), (80, 10)]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            {"bindTimeoutSeconds": -1},
            [
                (
                    "pluginConfig[0].args.bindTimeoutSeconds",
                    "Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value",
                )
            ],
            id="negative-timeout",
        ),
        pytest.param(
            {"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]},
            [
                (
                    "pluginConfig[0].args.shape[1].utilization",
                    "Invalid value: 50: utilization values must be sorted in increasing order",
                )
            ],
            id="utilization-not-increasing",
        ),
        pytest.param(
            {"shape": [{"utilization": -1, "score": 11}, {"utilization": 101, "score": 0}]},
            [
                (
                    "pluginConfig[0].args.shape[0].utilization",
                    "Invalid value: -1: not in valid range [0, 100]",
                ),
                ("pluginConfig[0].args.shape[0].score", "Invalid value: 11: not in valid range [0, 10]"),
                (
                    "pluginConfig[0].args.shape[1].utilization",
                    "Invalid value: 101: not in valid range [0, 100]",
                ),
            ],
            id="values-out-of-range-each-named",
        ),
        pytest.param(
            {"shape": [{"utilization": 0, "score": 2**31}]},
            [
                (
                    "pluginConfig[0].args.shape[0].score",
                    "2147483648 does not fit in a Go int32 (from -2147483648 to 2147483647)",
                )
            ],
            id="score-beyond-int32",
        ),
        pytest.param(
            {"bindTimeout": 5},
            [("pluginConfig[0].args.bindTimeout", "Extra inputs are not permitted")],
            id="unknown-field",
        ),
    ],
)
def test_invalid_args_are_located(args: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert _problems(args) == expected
