"""Every number of a configuration is held to what kube-scheduler's Go field holds, and to the
ranges it validates (pkg/scheduler/apis/config/validation: validation.go,
validation_pluginargs.go; framework/runtime's "total score of Score plugins could overflow"):
anything else is a configuration error at the user's path, when the file is read, never a weight
that wraps or a cycle that raises."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.cli import main
from koordpy.config.errors import ConfigError, Problem
from koordpy.config.models import read_configuration
from koordpy.config.numbers import INT32_MAX, INT64_MAX
from koordpy.framework.profile import CheckedConfiguration, check_configuration
from koordpy.plugins import registry

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
BEYOND_INT64 = INT64_MAX + 1
BEYOND_INT32 = INT32_MAX + 1


def check(data: Any) -> CheckedConfiguration:
    return check_configuration(read_configuration(data, "config.yaml"), registry())


def problems(data: Any) -> list[Problem]:
    with pytest.raises(ConfigError) as err:
        check(data)
    return list(err.value.problems)


def with_args(plugin: str, args: dict[str, Any]) -> dict[str, Any]:
    return {**V1, "profiles": [{"schedulerName": "s", "pluginConfig": [{"name": plugin, "args": args}]}]}


def scored(weight: Any) -> dict[str, Any]:
    plugins = {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": weight}]}}
    return {**V1, "profiles": [{"schedulerName": "s", "plugins": plugins}]}


def args(plugin: str) -> str:
    """Where a plugin's args are, as koordpy names them (by the plugin's name)."""
    return f"profiles[0].pluginConfig[{plugin}].args"


WEIGHT = "profiles[0].plugins.score.enabled[0].weight"


def _fit(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"scoringStrategy": {"type": "LeastAllocated", "resources": resources}}


def _ratio(points: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {"shape": points},
        }
    }


def _spread(**constraint: Any) -> dict[str, Any]:
    base = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    return {"defaultingType": "List", "defaultConstraints": [{**base, **constraint}]}


# (the configuration, the path of the problem, a fragment of its message)
REFUSED = [
    # score weights: int32 in Go; a weight past it wrapped the score sums, 1e20 raised every cycle
    pytest.param(scored(INT64_MAX), WEIGHT, "Go int32", id="weight-int64-max"),
    pytest.param(scored(10**20), WEIGHT, "Go int32", id="weight-1e20-as-an-integer"),
    pytest.param(scored(BEYOND_INT32), WEIGHT, "Go int32", id="weight-beyond-int32"),
    pytest.param(scored(-1), WEIGHT, "greater than or equal to 0", id="weight-negative"),
    pytest.param(scored(1e20), WEIGHT, "", id="weight-1e20-as-a-float"),
    pytest.param(scored(math.nan), WEIGHT, "", id="weight-nan"),
    # the configuration's own numbers
    pytest.param({**V1, "percentageOfNodesToScore": BEYOND_INT64}, "percentageOfNodesToScore", "", id="pct"),
    pytest.param({**V1, "parallelism": BEYOND_INT32}, "parallelism", "Go int32", id="parallelism"),
    pytest.param(
        {**V1, "podInitialBackoffSeconds": BEYOND_INT64}, "podInitialBackoffSeconds", "Go int64", id="backoff"
    ),
    pytest.param(
        {**V1, "podMaxBackoffSeconds": BEYOND_INT64}, "podMaxBackoffSeconds", "Go int64", id="max-backoff"
    ),
    pytest.param(
        {**V1, "podMaxInUnschedulablePodsDuration": math.inf},
        "podMaxInUnschedulablePodsDuration",
        "",
        id="unschedulable-duration-inf",
    ),
    pytest.param(
        {**V1, "podMaxInUnschedulablePodsDuration": 1e300},
        "podMaxInUnschedulablePodsDuration",
        "",
        id="unschedulable-duration-beyond-go",
    ),
    pytest.param(
        {**V1, "clientConnection": {"qps": math.nan}}, "clientConnection.qps", "finite", id="qps-nan"
    ),
    pytest.param(
        {**V1, "clientConnection": {"qps": -math.inf}}, "clientConnection.qps", "finite", id="qps-inf"
    ),
    pytest.param({**V1, "clientConnection": {"qps": 1e39}}, "clientConnection.qps", "float32", id="qps-f32"),
    pytest.param(
        {**V1, "clientConnection": {"burst": BEYOND_INT32}}, "clientConnection.burst", "Go int32", id="burst"
    ),
    # NodeResourcesFit: resource weights (0, 100], shape utilization [0, 100], score [0, 10]
    pytest.param(
        with_args("NodeResourcesFit", _fit([{"name": "cpu", "weight": INT64_MAX}])),
        f"{args('NodeResourcesFit')}.scoringStrategy.resources[0].weight",
        "not in valid range (0, 100]",
        id="fit-resource-weight",
    ),
    pytest.param(
        with_args("NodeResourcesFit", _fit([{"name": "cpu", "weight": BEYOND_INT64}])),
        f"{args('NodeResourcesFit')}.scoringStrategy.resources[0].weight",
        "Go int64",
        id="fit-resource-weight-beyond-int64",
    ),
    pytest.param(
        with_args("NodeResourcesFit", _fit([{"name": "cpu", "weight": -1}])),
        f"{args('NodeResourcesFit')}.scoringStrategy.resources[0].weight",
        "not in valid range (0, 100]",
        id="fit-resource-weight-negative",
    ),
    pytest.param(
        with_args("NodeResourcesFit", _ratio([{"utilization": 101, "score": 1}])),
        f"{args('NodeResourcesFit')}.scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
        "",
        id="shape-utilization",
    ),
    pytest.param(
        with_args("NodeResourcesFit", _ratio([{"utilization": 0, "score": 11}])),
        f"{args('NodeResourcesFit')}.scoringStrategy.requestedToCapacityRatio.shape[0].score",
        "",
        id="shape-score",
    ),
    pytest.param(
        with_args("NodeResourcesFit", _ratio([{"utilization": BEYOND_INT64, "score": 1}])),
        f"{args('NodeResourcesFit')}.scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
        "",
        id="shape-utilization-beyond-int64",
    ),
    # NodeResourcesBalancedAllocation: every weight must be 1
    pytest.param(
        with_args("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu", "weight": 2}]}),
        f"{args('NodeResourcesBalancedAllocation')}.resources[0].weight",
        "must be 1",
        id="balanced-weight",
    ),
    # InterPodAffinity: hardPodAffinityWeight [0, 100]
    pytest.param(
        with_args("InterPodAffinity", {"hardPodAffinityWeight": BEYOND_INT64}),
        f"{args('InterPodAffinity')}.hardPodAffinityWeight",
        "",
        id="hard-weight-beyond-int64",
    ),
    pytest.param(
        with_args("InterPodAffinity", {"hardPodAffinityWeight": 101}),
        f"{args('InterPodAffinity')}.hardPodAffinityWeight",
        "[0, 100]",
        id="hard-weight-101",
    ),
    pytest.param(
        with_args("InterPodAffinity", {"hardPodAffinityWeight": -1}),
        f"{args('InterPodAffinity')}.hardPodAffinityWeight",
        "[0, 100]",
        id="hard-weight-negative",
    ),
    # DefaultPreemption: percentage [0, 100], absolute [0, inf) of an int32
    pytest.param(
        with_args("DefaultPreemption", {"minCandidateNodesPercentage": 101}),
        f"{args('DefaultPreemption')}.minCandidateNodesPercentage",
        "[0, 100]",
        id="preemption-percentage",
    ),
    pytest.param(
        with_args("DefaultPreemption", {"minCandidateNodesAbsolute": BEYOND_INT32}),
        f"{args('DefaultPreemption')}.minCandidateNodesAbsolute",
        "Go int32",
        id="preemption-absolute-beyond-int32",
    ),
    pytest.param(
        with_args("DefaultPreemption", {"minCandidateNodesAbsolute": -1}),
        f"{args('DefaultPreemption')}.minCandidateNodesAbsolute",
        "[0, inf)",
        id="preemption-absolute-negative",
    ),
    pytest.param(
        with_args("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}),
        f"{args('DefaultPreemption')}.minCandidateNodesAbsolute",
        "cannot be zero",
        id="preemption-both-zero",
    ),
    # PodTopologySpread: maxSkew (0, inf) and minDomains > 0, both int32
    pytest.param(
        with_args("PodTopologySpread", _spread(maxSkew=BEYOND_INT32)),
        f"{args('PodTopologySpread')}.defaultConstraints[0].maxSkew",
        "Go int32",
        id="spread-max-skew-beyond-int32",
    ),
    pytest.param(
        with_args("PodTopologySpread", _spread(maxSkew=0)),
        f"{args('PodTopologySpread')}.defaultConstraints[0].maxSkew",
        "(0, inf)",
        id="spread-max-skew-zero",
    ),
    pytest.param(
        with_args("PodTopologySpread", _spread(minDomains=BEYOND_INT64)),
        f"{args('PodTopologySpread')}.defaultConstraints[0].minDomains",
        "",
        id="spread-min-domains-beyond-int64",
    ),
    # NodeResourcesFitPlus: int64 weights whose sum times 100 must fit the score's int64
    pytest.param(
        with_args(
            "NodeResourcesFitPlus", {"resources": {"cpu": {"type": "MostAllocated", "weight": INT64_MAX}}}
        ),
        f"{args('NodeResourcesFitPlus')}.resources",
        "could overflow",
        id="fit-plus-weight-overflows-the-score",
    ),
    pytest.param(
        with_args(
            "NodeResourcesFitPlus", {"resources": {"cpu": {"type": "MostAllocated", "weight": BEYOND_INT64}}}
        ),
        f"{args('NodeResourcesFitPlus')}.resources.cpu.weight",
        "Go int64",
        id="fit-plus-weight-beyond-int64",
    ),
    pytest.param(
        with_args(
            "NodeResourcesFitPlus",
            {
                "resources": {
                    "cpu": {"type": "MostAllocated", "weight": INT64_MAX // 200 + 1},
                    "memory": {"type": "LeastAllocated", "weight": INT64_MAX // 200 + 1},
                }
            },
        ),
        f"{args('NodeResourcesFitPlus')}.resources",
        "could overflow",
        id="fit-plus-weights-overflow-together",
    ),
    # Coscheduling: timeouts no Go duration holds, non-finite, negative
    pytest.param(
        with_args("Coscheduling", {"permitWaitingTimeSeconds": INT64_MAX}),
        f"{args('Coscheduling')}.permitWaitingTimeSeconds",
        "",
        id="permit-wait-beyond-duration",
    ),
    pytest.param(
        with_args("Coscheduling", {"podGroupBackoffSeconds": BEYOND_INT64}),
        f"{args('Coscheduling')}.podGroupBackoffSeconds",
        "",
        id="backoff-beyond-int64",
    ),
    pytest.param(
        with_args("Coscheduling", {"defaultTimeout": math.nan}),
        f"{args('Coscheduling')}.defaultTimeout",
        "finite",
        id="nan",
    ),
    pytest.param(
        with_args("Coscheduling", {"defaultTimeout": math.inf}),
        f"{args('Coscheduling')}.defaultTimeout",
        "finite",
        id="inf",
    ),
    pytest.param(
        with_args("Coscheduling", {"defaultTimeout": 1e300}),
        f"{args('Coscheduling')}.defaultTimeout",
        "Go duration",
        id="default-timeout-beyond-duration",
    ),
    pytest.param(
        with_args("Coscheduling", {"defaultTimeout": "9" * 5000 + "s"}),
        f"{args('Coscheduling')}.defaultTimeout",
        "invalid duration",
        id="default-timeout-of-thousands-of-digits",
    ),
    pytest.param(
        with_args("Coscheduling", {"podGroupRejectPercentage": 101}),
        f"{args('Coscheduling')}.podGroupRejectPercentage",
        "",
        id="reject-percentage",
    ),
    # leader election: durations of thousands of digits
    pytest.param(
        {**V1, "leaderElection": {"leaseDuration": "1" * 5000 + "s"}},
        "leaderElection.leaseDuration",
        "invalid duration",
        id="lease-duration-of-thousands-of-digits",
    ),
]


@pytest.mark.parametrize(("data", "path", "fragment"), REFUSED)
def test_a_number_go_could_not_hold_or_kube_refuses_is_a_located_error(
    data: dict[str, Any], path: str, fragment: str
) -> None:
    found = problems(data)
    at = [p for p in found if p.path == path]
    assert at, found
    assert fragment in at[0].message, at[0]
    # one line, whatever the number: a huge one is not written out in full
    assert len(str(at[0])) < 400 and "\n" not in str(at[0])


ACCEPTED = [
    pytest.param(scored(INT32_MAX), id="weight-int32-max"),
    pytest.param(scored(0), id="weight-zero-means-one"),
    pytest.param({**V1, "clientConnection": {"qps": -1}}, id="negative-qps-means-no-limit"),
    pytest.param(with_args("NodeResourcesFit", _fit([{"name": "cpu", "weight": 100}])), id="fit-weight-100"),
    pytest.param(with_args("InterPodAffinity", {"hardPodAffinityWeight": 100}), id="hard-weight-100"),
    pytest.param(with_args("DefaultPreemption", {"minCandidateNodesAbsolute": INT32_MAX}), id="absolute"),
    pytest.param(with_args("PodTopologySpread", _spread(maxSkew=INT32_MAX)), id="max-skew-int32-max"),
    pytest.param(
        with_args(
            "NodeResourcesFitPlus",
            {"resources": {"cpu": {"type": "MostAllocated", "weight": INT64_MAX // 100}}},
        ),
        id="fit-plus-largest-weight",
    ),
    pytest.param(with_args("Coscheduling", {"defaultTimeout": "2562047h"}), id="timeout-in-go-range"),
    pytest.param(with_args("Coscheduling", {"permitWaitingTimeSeconds": 9_223_372_036}), id="permit-wait"),
]


@pytest.mark.parametrize("data", ACCEPTED)
def test_the_limits_themselves_are_accepted(data: dict[str, Any]) -> None:
    check(data)


@pytest.mark.parametrize(
    "weight",
    [pytest.param(INT64_MAX, id="int64-max"), pytest.param(10**20, id="1e20")],
)
def test_simulate_refuses_a_weight_beyond_int32_with_its_path_and_exit_2(
    weight: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(scored(weight)))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', pods: 110}}\n"
    )
    assert main(["simulate", str(scenario), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"koordpy: invalid configuration: {config}: {WEIGHT}: "), err
    assert err.count("\n") == 1, err


def test_a_configuration_with_an_integer_of_thousands_of_digits_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(V1) + f"parallelism: {'7' * 5000}\n")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    assert main(["simulate", str(scenario), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"koordpy: invalid configuration: {config}: "), err
