"""NodeResourcesBalancedAllocation: (1 - std of requested/allocatable fractions) * 100, with
scores computed by hand."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.config.errors import ConfigError
from tests.builders import Harness, make_pod, node_dict, pod_dict

BA = "NodeResourcesBalancedAllocation"
GPU = "example.com/gpu"
WITH_GPU = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}


def _harness(
    nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]] = (), args: dict[str, Any] | None = None
) -> Harness:
    return Harness(list(nodes), list(pods), plugins=[BA], args={BA: args} if args is not None else None)


CASES = [
    # (nodes, placed pods, incoming pod kwargs, args, expected)
    (
        # cpu 1/4 = .25, memory 1/8 = .125: std .0625 -> 93.75 -> 93
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "1Gi"},
        None,
        {"a": 93},
    ),
    (
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "2", "memory": "4Gi"},
        None,
        {"a": 100},
    ),
    (
        # actual requests, not the 100m/200Mi defaults: memory 0/8Gi = 0, cpu .5 -> std .25 -> 75
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "2"},
        None,
        {"a": 75},
    ),
    (
        # a placed pod without requests adds nothing: same as an empty node, 93
        [node_dict("a", cpu="4", memory="8Gi")],
        [pod_dict("p1", node_name="a")],
        {"cpu": "1", "memory": "1Gi"},
        None,
        {"a": 93},
    ),
    (
        # placed pod's requests count: cpu (1+1)/4 = .5, memory (3+1)/8 = .5 -> 100
        [node_dict("a", cpu="4", memory="8Gi")],
        [pod_dict("p1", cpu="1", memory="3Gi", node_name="a")],
        {"cpu": "1", "memory": "1Gi"},
        None,
        {"a": 100},
    ),
    (
        # cpu 8/4 capped at 1, memory .5 -> std .25 -> 75
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "8", "memory": "4Gi"},
        None,
        {"a": 75},
    ),
    (
        # three resources .25, .5, .75: mean .5, variance .125/3, std .2041 -> 79.58 -> 79
        [node_dict("g", cpu="4", memory="8Gi", extra={GPU: 4})],
        [],
        {"cpu": "1", "memory": "4Gi", "extra_requests": {GPU: 3}},
        WITH_GPU,
        {"g": 79},
    ),
    (
        # the gpu is not requested: left out, cpu .25 and memory .125 -> 93
        [node_dict("g", cpu="4", memory="8Gi", extra={GPU: 4})],
        [],
        {"cpu": "1", "memory": "1Gi"},
        WITH_GPU,
        {"g": 93},
    ),
    (
        # the node has no gpu: left out -> 93
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "1Gi", "extra_requests": {GPU: 1}},
        WITH_GPU,
        {"a": 93},
    ),
    (
        # zero allocatable memory: only cpu remains, std 0 -> 100
        [node_dict("z", cpu="4", memory="0")],
        [],
        {"cpu": "1", "memory": "1Gi"},
        None,
        {"z": 100},
    ),
]
IDS = [
    "two-resources",
    "perfectly-balanced",
    "actual-not-nonzero-requests",
    "placed-best-effort-pod-adds-nothing",
    "placed-pod-counts",
    "fraction-capped-at-one",
    "three-resources",
    "unrequested-scalar-left-out",
    "node-without-scalar-left-out",
    "zero-allocatable-left-out",
]


@pytest.mark.parametrize(("nodes", "pods", "pod_kw", "args", "expected"), CASES, ids=IDS)
def test_score(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    pod_kw: dict[str, Any],
    args: dict[str, Any] | None,
    expected: dict[str, int],
) -> None:
    h = _harness(nodes, pods, args)
    assert h.plugin_scores(BA, make_pod("incoming", **pod_kw)) == expected


def test_best_effort_pod_is_not_scored() -> None:
    h = _harness([node_dict("a")])
    pod = make_pod("incoming")
    state, _, _ = h.pre_filter(pod)
    h.profile.run_pre_score(state, pod, h.rows())
    assert BA in state.skip_score


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight"),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources"),
        ({"resources": [{"name": ""}]}, "resources[0].name"),
    ],
    ids=["weight-must-be-1", "duplicate-resource", "empty-name"],
)
def test_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        _harness([node_dict("a")], args=args)
    assert err.value.path == f"profiles[0].pluginConfig[{BA}].args.{field}"


def test_zero_weight_means_one() -> None:
    h = _harness([node_dict("a", cpu="4", memory="8Gi")], args={"resources": [{"name": "cpu", "weight": 0}]})
    assert h.plugin_scores(BA, make_pod("incoming", cpu="1")) == {"a": 100}
