"""Configuration: kube-scheduler's merge rules for plugin sets and errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.errors import ConfigError
from koordpy.config.models import parse_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler


def build(config: dict[str, Any]) -> Scheduler:
    return Scheduler(parse_configuration(config), registry(), VirtualClock())


def profile_config(**profile: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "s", **profile}],
    }


def test_default_configuration_has_two_profiles_with_every_plugin() -> None:
    s = Scheduler(parse_configuration(None), registry(), VirtualClock())
    assert list(s.profiles) == ["koord-scheduler", "default-scheduler"]
    for p in s.profiles.values():
        # the gang-aware queue sort takes PrioritySort's place; every other plugin runs
        assert set(p.plugins) == set(registry()) - {"PrioritySort"}
        assert p.resolved.points["queueSort"] == ["Coscheduling"]


@pytest.mark.parametrize(
    ("plugins", "point", "expected"),
    [
        pytest.param(
            {"filter": {"disabled": [{"name": "TaintToleration"}]}},
            "filter",
            lambda names: "TaintToleration" not in names,
            id="disabled-at-one-point-is-removed-there",
        ),
        pytest.param(
            {"filter": {"disabled": [{"name": "*"}]}},
            "filter",
            lambda names: names == [],
            id="star-disables-every-default-at-that-point",
        ),
        pytest.param(
            {
                "multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeAffinity"}]},
                "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                "bind": {"enabled": [{"name": "DefaultBinder"}]},
            },
            "filter",
            lambda names: names == ["NodeAffinity"],
            id="star-in-multipoint-keeps-only-enabled",
        ),
        pytest.param(
            {"filter": {"enabled": [{"name": "TaintToleration"}]}},
            "filter",
            lambda names: names[0] == "TaintToleration" and names.count("TaintToleration") == 1,
            id="point-specific-enable-runs-first-and-once",
        ),
    ],
)
def test_plugin_set_merging(plugins: dict[str, Any], point: str, expected: Any) -> None:
    s = build(profile_config(plugins=plugins))
    names = s.profiles["s"].resolved.points[point]
    assert expected(names), names


def test_score_weight_from_config_overrides_default() -> None:
    s = build(profile_config(plugins={"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 7}]}}))
    assert s.profiles["s"].resolved.weights["TaintToleration"] == 7


@pytest.mark.parametrize(
    ("config", "path_fragment"),
    [
        pytest.param(
            profile_config(plugins={"filter": {"enabled": [{"name": "NoSuchPlugin"}]}}),
            "profiles[0].plugins.filter.enabled[0].name",
            id="unknown-plugin-names-its-place",
        ),
        pytest.param(
            profile_config(pluginConfig=[{"name": "NodeAffinity", "args": {"bogus": 1}}]),
            "profiles[0].pluginConfig[NodeAffinity].args.bogus",
            id="unknown-arg-names-its-path",
        ),
        pytest.param(
            profile_config(percentageOfNodesToScore=150),
            "profiles[0].percentageOfNodesToScore",
            id="percentage-out-of-range",
        ),
        pytest.param(
            {"apiVersion": "v2", "kind": "KubeSchedulerConfiguration"}, "apiVersion", id="wrong-api-version"
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
            "profiles[1].schedulerName",
            id="duplicate-scheduler-name",
        ),
    ],
)
def test_invalid_configuration_names_the_field(config: dict[str, Any], path_fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(config)
    assert path_fragment in str(err.value)
