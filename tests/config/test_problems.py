"""A configuration's problems are all reported in one run, each at a path of the user's file."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.errors import ConfigError, Problem
from koordpy.config.models import read_configuration
from koordpy.framework.profile import CheckedConfiguration, check_configuration
from koordpy.plugins import registry

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def check(data: Any, allow: bool = False) -> CheckedConfiguration:
    return check_configuration(read_configuration(data, "config.yaml"), registry(), allow)


def problems(data: Any) -> list[Problem]:
    with pytest.raises(ConfigError) as err:
        check(data)
    return list(err.value.problems)


def profile(**fields: Any) -> dict[str, Any]:
    return {**V1, "profiles": [{"schedulerName": "s", **fields}]}


def test_three_distinct_problems_are_reported_together_at_the_users_paths() -> None:
    data = profile(
        # a schema problem: the percentage is 0..100
        percentageOfNodesToScore=150,
        plugins={"filter": {"enabled": [{"name": "NodeAffinity"}, {"name": "NoSuchPlugin"}]}},
        # NodeResourcesFit's scoring strategies are LeastAllocated, MostAllocated and
        # RequestedToCapacityRatio
        pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Balanced"}}}],
    )
    found = problems(data)
    assert [p.path for p in found] == [
        "profiles[0].percentageOfNodesToScore",
        "profiles[0].plugins.filter.enabled[1].name",
        "profiles[0].pluginConfig[NodeResourcesFit].args.scoringStrategy.type",
    ]
    assert "unknown plugin 'NoSuchPlugin'" in found[1].message


def test_the_error_lists_each_problem_on_a_line_of_its_own() -> None:
    data = profile(
        plugins={"filter": {"enabled": [{"name": "Typo1"}]}, "score": {"enabled": [{"name": "Typo2"}]}}
    )
    with pytest.raises(ConfigError) as err:
        check(data)
    assert str(err.value).splitlines() == [
        "config.yaml: 2 problems:",
        "  profiles[0].plugins.filter.enabled[0].name: unknown plugin 'Typo1'",
        "  profiles[0].plugins.score.enabled[0].name: unknown plugin 'Typo2'",
    ]


@pytest.mark.parametrize(
    ("plugins", "path"),
    [
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "NoSuchPlugin"}]}},
            "profiles[0].plugins.multiPoint.enabled[0].name",
            # the defaults merged in before it must not shift its index
            id="multipoint-index-is-the-users",
        ),
        pytest.param(
            {
                "multiPoint": {
                    "enabled": [{"name": "NodeAffinity"}, {"name": "TaintToleration"}, {"name": "Nope"}]
                }
            },
            "profiles[0].plugins.multiPoint.enabled[2].name",
            id="multipoint-third-entry",
        ),
        pytest.param(
            {"filter": {"enabled": [{"name": "ImageLocality"}]}},
            "profiles[0].plugins.filter.enabled[0].name",
            # ImageLocality only scores
            id="plugin-at-a-point-it-does-not-implement",
        ),
        pytest.param(
            {"queueSort": {"disabled": [{"name": "*"}], "enabled": []}},
            "profiles[0].plugins.queueSort",
            id="no-queue-sort",
        ),
        pytest.param(
            {"bind": {"disabled": [{"name": "*"}]}},
            "profiles[0].plugins.bind",
            id="no-binder",
        ),
    ],
)
def test_plugin_problems_name_the_users_entry(plugins: dict[str, Any], path: str) -> None:
    assert [p.path for p in problems(profile(plugins=plugins))] == [path]


def test_a_point_with_an_unknown_plugin_is_not_also_reported_empty() -> None:
    # the unknown name is the problem; that no queue sort is left is its consequence
    data = profile(plugins={"queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "QueueTypo"}]}})
    assert [p.path for p in problems(data)] == ["profiles[0].plugins.queueSort.enabled[0].name"]


def test_problems_of_every_profile_and_the_top_level_are_reported() -> None:
    data = {
        **V1,
        # kube-scheduler requires podMaxBackoffSeconds >= podInitialBackoffSeconds
        "podInitialBackoffSeconds": 5,
        "podMaxBackoffSeconds": 2,
        "profiles": [
            {"schedulerName": "a", "plugins": {"filter": {"enabled": [{"name": "Nope"}]}}},
            {"schedulerName": "a", "pluginConfig": [{"name": "NodeAffinity", "args": {"bogus": 1}}]},
        ],
    }
    assert [p.path for p in problems(data)] == [
        "profiles[1].schedulerName",
        "podMaxBackoffSeconds",
        "profiles[0].plugins.filter.enabled[0].name",
        "profiles[1].pluginConfig[NodeAffinity].args.bogus",
    ]


def test_a_profile_with_a_schema_problem_still_has_its_plugins_checked() -> None:
    data = profile(
        percentageOfNodesToScore="lots",
        plugins={"score": {"enabled": [{"name": "NodeAffinity", "weight": -1}, {"name": "Nope"}]}},
        pluginConfig=[{"name": "Coscheduling", "args": 3}, {"name": "Nope2"}],
    )
    assert [p.path for p in problems(data)] == [
        "profiles[0].plugins.score.enabled[0].weight",
        "profiles[0].pluginConfig[0].args",
        "profiles[0].percentageOfNodesToScore",
        "profiles[0].plugins.score.enabled[1].name",
        "profiles[0].pluginConfig[1].name",
    ]


def test_plugin_config_given_twice_names_the_second_entry() -> None:
    data = profile(
        pluginConfig=[{"name": "NodeAffinity"}, {"name": "ImageLocality"}, {"name": "NodeAffinity"}]
    )
    found = problems(data)
    assert [p.path for p in found] == ["profiles[0].pluginConfig[2].name"]
    assert "pluginConfig[0]" in found[0].message


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"apiVersion": "v2", "kind": "KubeSchedulerConfiguration"}, id="api-version"),
        pytest.param({**V1, "kind": "Pod"}, id="kind"),
        pytest.param({**V1, "extenders": [{"urlPrefix": "http://x"}]}, id="extenders"),
        pytest.param(
            profile(pluginConfig=[{"name": "Coscheduling", "args": {"defaultMatchPolicy": "sometimes"}}]),
            id="plugin-args-validator",
        ),
        pytest.param(
            profile(pluginConfig=[{"name": "Coscheduling", "args": {"defaultTimeout": "-1s"}}]),
            id="duration-validator",
        ),
    ],
)
def test_no_message_carries_pydantics_value_error_prefix(data: dict[str, Any]) -> None:
    for problem in problems(data):
        assert "Value error" not in problem.message, problem


def test_a_field_of_several_types_is_one_problem_naming_each() -> None:
    # defaultTimeout is a number of seconds or a duration string; a list is neither
    found = problems(profile(pluginConfig=[{"name": "Coscheduling", "args": {"defaultTimeout": [1]}}]))
    assert [p.path for p in found] == ["profiles[0].pluginConfig[Coscheduling].args.defaultTimeout"]
    assert "number" in found[0].message and "string" in found[0].message


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(None, id="no-configuration"),
        pytest.param(V1, id="only-type"),
        pytest.param(profile(), id="one-bare-profile"),
        pytest.param({**V1, "apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, id="v1beta3-reads-as-v1"),
    ],
)
def test_a_valid_configuration_loads_without_notices(data: Any) -> None:
    checked = check(data)
    assert checked.notices.warnings() == []
    assert checked.notices.info() == []


def test_leader_election_durations_are_checked_with_the_rest_of_the_file() -> None:
    # Go durations, as kube-scheduler reads them: a number and a unit
    data = {**V1, "leaderElection": {"leaseDuration": "15 secs"}, "percentageOfNodesToScore": 500}
    assert [p.path for p in problems(data)] == ["percentageOfNodesToScore", "leaderElection.leaseDuration"]
