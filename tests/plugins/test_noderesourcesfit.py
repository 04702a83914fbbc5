"""NodeResourcesFit: Filter reasons and codes, args validation, and the three scoring strategies
with scores computed by hand from kube-scheduler's formulas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.config.errors import ConfigError
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.status import Code
from tests.builders import Harness, make_pod, node_dict, pod_dict

FIT = "NodeResourcesFit"


def _harness(
    nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]] = (), args: dict[str, Any] | None = None
) -> Harness:
    return Harness(list(nodes), list(pods), plugins=[FIT], args={FIT: args} if args is not None else None)


# ----------------------------------------------------------------------------------------- filter
FILTER_CASES = [
    # (nodes, placed pods, incoming pod kwargs, args, feasible, message)
    (
        [node_dict("n1", cpu="4", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "1Gi"},
        None,
        ["n1"],
        None,
    ),
    (
        [node_dict("n1", cpu="2", memory="8Gi")],
        [pod_dict("p1", cpu="1500m", node_name="n1")],
        {"cpu": "500m"},
        None,
        ["n1"],
        None,
    ),
    (
        [node_dict("n1", cpu="2", memory="8Gi")],
        [pod_dict("p1", cpu="1500m", node_name="n1")],
        {"cpu": "501m"},
        None,
        [],
        "0/1 nodes are available: 1 Insufficient cpu.",
    ),
    (
        # both resources short on one node: each is reported
        [node_dict("n1", cpu="1", memory="1Gi")],
        [],
        {"cpu": "2", "memory": "2Gi"},
        None,
        [],
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
    ),
    (
        [node_dict("n1", cpu="4", memory="8Gi", pods=1)],
        [pod_dict("p1", node_name="n1")],
        {},
        None,
        [],
        "0/1 nodes are available: 1 Too many pods.",
    ),
    (
        # a full pod list and a cpu shortage on the same node
        [node_dict("n1", cpu="1", memory="8Gi", pods=1)],
        [pod_dict("p1", node_name="n1")],
        {"cpu": "2"},
        None,
        [],
        "0/1 nodes are available: 1 Insufficient cpu, 1 Too many pods.",
    ),
    (
        # cpu is not requested, so a node with no cpu left still fits
        [node_dict("n1", cpu="1", memory="8Gi")],
        [pod_dict("p1", cpu="1", node_name="n1")],
        {"memory": "1Gi"},
        None,
        ["n1"],
        None,
    ),
    (
        [node_dict("n1")],
        [],
        {"cpu": "1", "extra_requests": {"example.com/foo": 1}},
        None,
        [],
        "0/1 nodes are available: 1 Insufficient example.com/foo.",
    ),
    (
        [node_dict("n1")],
        [],
        {"cpu": "1", "extra_requests": {"example.com/foo": 1}},
        {"ignoredResources": ["example.com/foo"]},
        ["n1"],
        None,
    ),
    (
        [node_dict("n1")],
        [],
        {"cpu": "1", "extra_requests": {"example.com/foo": 1}},
        {"ignoredResourceGroups": ["example.com"]},
        ["n1"],
        None,
    ),
    (
        # ignoring applies to extended resources only
        [node_dict("n1", memory="1Gi")],
        [],
        {"memory": "2Gi"},
        {"ignoredResources": ["memory"]},
        [],
        "0/1 nodes are available: 1 Insufficient memory.",
    ),
    (
        [node_dict("n1", extra={"example.com/foo": 2})],
        [pod_dict("p1", extra_requests={"example.com/foo": 1}, node_name="n1")],
        {"extra_requests": {"example.com/foo": 2}},
        None,
        [],
        "0/1 nodes are available: 1 Insufficient example.com/foo.",
    ),
    (
        [node_dict("n1", extra={"ephemeral-storage": "10Gi"})],
        [],
        {"extra_requests": {"ephemeral-storage": "11Gi"}},
        None,
        [],
        "0/1 nodes are available: 1 Insufficient ephemeral-storage.",
    ),
    (
        [node_dict("a", cpu="1"), node_dict("b", cpu="1"), node_dict("c", cpu="8", memory="1Gi")],
        [],
        {"cpu": "2", "memory": "2Gi"},
        None,
        [],
        "0/3 nodes are available: 1 Insufficient memory, 2 Insufficient cpu.",
    ),
]
FILTER_IDS = [
    "fits",
    "exactly-the-remaining-cpu",
    "one-millicore-too-many",
    "cpu-and-memory-short-both-reported",
    "too-many-pods",
    "too-many-pods-and-cpu",
    "unrequested-resource-not-checked",
    "node-lacks-extended-resource",
    "ignored-extended-resource",
    "ignored-resource-group",
    "ignored-resources-do-not-cover-native",
    "extended-resource-used-up",
    "ephemeral-storage",
    "message-sorted-like-kube",
]


@pytest.mark.parametrize(
    ("nodes", "pods", "pod_kw", "args", "feasible", "message"), FILTER_CASES, ids=FILTER_IDS
)
def test_filter(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    pod_kw: dict[str, Any],
    args: dict[str, Any] | None,
    feasible: list[str],
    message: str | None,
) -> None:
    h = _harness(nodes, pods, args)
    names, diagnosis = h.feasible(make_pod("incoming", **pod_kw))
    assert names == feasible
    if message is not None:
        assert fit_error_message(len(nodes), diagnosis) == message


def test_failures_are_unschedulable_so_preemption_may_help() -> None:
    h = _harness([node_dict("n1", cpu="1", memory="1Gi")])
    _, diagnosis = h.feasible(make_pod("incoming", cpu="2", memory="2Gi"))
    (status,) = diagnosis.statuses_by_row().values()
    assert status.code == Code.UNSCHEDULABLE
    assert status.reasons == ("Insufficient cpu", "Insufficient memory")
    assert status.plugin == FIT


def test_filter_sees_pods_added_for_nominated_check() -> None:
    h = _harness([node_dict("n1", cpu="2")])
    pod = make_pod("incoming", cpu="1500m")
    state, _, _ = h.pre_filter(pod)
    row = h.snapshot.row_of["n1"]
    other = make_pod("nominated", cpu="1", node_name="n1")
    status = h.profile.filter_one_with_pods(state, pod, row, [other])
    assert status is not None and status.reasons == ("Insufficient cpu",)
    assert h.profile.filter_one(state, pod, row) is None


# ----------------------------------------------------------------------------------------- args
BAD_ARGS = [
    ({"scoringStrategy": {"type": "Balanced"}}, "scoringStrategy.type"),
    ({"scoringStrategy": {"resources": []}}, "scoringStrategy.type"),
    (
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
        "scoringStrategy.resources[0].weight",
    ),
    (
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": -1}]}},
        "scoringStrategy.resources[0].weight",
    ),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "scoringStrategy"),
    (
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]},
            }
        },
        "scoringStrategy",
    ),
    (
        {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}},
        "scoringStrategy.requestedToCapacityRatio.shape",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                },
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 1}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
    ),
    (
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 10, "score": 11}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].score",
    ),
    ({"ignoredResourceGroups": ["example.com/foo"]}, "ignoredResourceGroups"),
    ({"ignoredResources": ["not a name"]}, "ignoredResources"),
    ({"ignoredResource": ["example.com/foo"]}, "ignoredResource"),
]
BAD_ARGS_IDS = [
    "unknown-type",
    "type-required",
    "weight-above-100",
    "negative-weight",
    "ratio-without-shape",
    "shape-with-other-type",
    "empty-shape",
    "shape-not-increasing",
    "utilization-above-100",
    "score-above-10",
    "group-with-slash",
    "invalid-resource-name",
    "unknown-key",
]


@pytest.mark.parametrize(("args", "field"), BAD_ARGS, ids=BAD_ARGS_IDS)
def test_bad_args_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        _harness([node_dict("n1")], args=args)
    assert err.value.path == f"profiles[0].pluginConfig[{FIT}].args.{field}"


def test_zero_weight_defaults_to_one_and_empty_resources_to_cpu_and_memory() -> None:
    h = _harness([node_dict("n1")], args={"scoringStrategy": {"type": "MostAllocated", "resources": []}})
    plugin = h.profile.plugins[FIT]
    assert plugin._resources == [("cpu", 1), ("memory", 1)]  # type: ignore[attr-defined]
    h = _harness(
        [node_dict("n1")],
        args={"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]}},
    )
    assert h.profile.plugins[FIT]._resources == [("cpu", 1)]  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------------------- score
LEAST = {"scoringStrategy": {"type": "LeastAllocated"}}
MOST = {"scoringStrategy": {"type": "MostAllocated"}}


def _rtcr(*points: tuple[int, int], resources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    strategy: dict[str, Any] = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in points]},
    }
    if resources:
        strategy["resources"] = resources
    return {"scoringStrategy": strategy}


GPU_NODE = node_dict("g", cpu="4", memory="8Gi", extra={"example.com/gpu": 4})

SCORE_CASES = [
    # (nodes, placed pods, incoming pod kwargs, args, expected scores)
    (
        # a: cpu 2000/4000 -> 50, memory 4Gi/8Gi -> 50; b: cpu (8000-1000)*100/8000 = 87, memory 75 -> 81
        [node_dict("a", cpu="4", memory="8Gi"), node_dict("b", cpu="8", memory="8Gi")],
        [pod_dict("p1", cpu="1", memory="2Gi", node_name="a")],
        {"cpu": "1", "memory": "2Gi"},
        LEAST,
        {"a": 50, "b": 81},
    ),
    (
        [node_dict("a", cpu="4", memory="8Gi"), node_dict("b", cpu="8", memory="8Gi")],
        [pod_dict("p1", cpu="1", memory="2Gi", node_name="a")],
        {"cpu": "1", "memory": "2Gi"},
        None,
        {"a": 50, "b": 81},
    ),
    (
        # a: 50, 50; b: cpu 1000*100/8000 = 12, memory 25 -> 37 // 2 = 18
        [node_dict("a", cpu="4", memory="8Gi"), node_dict("b", cpu="8", memory="8Gi")],
        [pod_dict("p1", cpu="1", memory="2Gi", node_name="a")],
        {"cpu": "1", "memory": "2Gi"},
        MOST,
        {"a": 50, "b": 18},
    ),
    (
        # cpu weight 3: (87 * 3 + 75) // 4 = 84
        [node_dict("b", cpu="8", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "2Gi"},
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}],
            }
        },
        {"b": 84},
    ),
    (
        # a pod asking for nothing counts 100m and 200Mi: cpu 3900*100/4000 = 97, memory 7992*100/8192 = 97
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {},
        LEAST,
        {"a": 97},
    ),
    (
        # a placed pod asking for nothing counts 100m and 200Mi too: cpu 1100 -> 72, memory 1224Mi -> 85
        [node_dict("a", cpu="4", memory="8Gi")],
        [pod_dict("p1", node_name="a")],
        {"cpu": "1", "memory": "1Gi"},
        LEAST,
        {"a": 78},
    ),
    (
        # cpu above capacity: LeastAllocated 0, memory 75 -> 37
        [node_dict("c", cpu="1", memory="8Gi")],
        [],
        {"cpu": "2", "memory": "2Gi"},
        LEAST,
        {"c": 37},
    ),
    (
        # cpu above capacity: MostAllocated caps at 100, memory 25 -> 62
        [node_dict("c", cpu="1", memory="8Gi")],
        [],
        {"cpu": "2", "memory": "2Gi"},
        MOST,
        {"c": 62},
    ),
    (
        # gpu 1/4 -> 25, cpu 1000/4000 -> 25
        [GPU_NODE],
        [],
        {"cpu": "1", "extra_requests": {"example.com/gpu": 1}},
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "example.com/gpu", "weight": 5}, {"name": "cpu", "weight": 1}],
            }
        },
        {"g": 25},
    ),
    (
        # the pod asks for no gpu: gpu is left out, cpu 2000/4000 -> 50
        [GPU_NODE],
        [],
        {"cpu": "2"},
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "example.com/gpu", "weight": 5}, {"name": "cpu", "weight": 1}],
            }
        },
        {"g": 50},
    ),
    (
        # a node without the gpu leaves it out: cpu 2000/4000 -> 50
        [node_dict("a", cpu="4")],
        [],
        {"cpu": "2", "extra_requests": {"example.com/gpu": 1}},
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "example.com/gpu", "weight": 5}, {"name": "cpu", "weight": 1}],
            }
        },
        {"a": 50},
    ),
    (
        # no configured resource applies (gpu not requested): 0
        [GPU_NODE],
        [],
        {"cpu": "2"},
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "example.com/gpu", "weight": 5}],
            }
        },
        {"g": 0},
    ),
    (
        # shape (0,0)-(100,10): utilization 25 -> 25 on both
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "2Gi"},
        _rtcr((0, 0), (100, 10)),
        {"a": 25},
    ),
    (
        # cpu utilization 1000*100/8000 = 12, memory 3Gi/8Gi = 37; (12 + 37) / 2 = 24.5 rounds to 25
        [node_dict("b", cpu="8", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "3Gi"},
        _rtcr((0, 0), (100, 10)),
        {"b": 25},
    ),
    (
        # cpu utilization 0 scores 0 and leaves the mean: memory 50 alone
        [node_dict("big", cpu="1000", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "4Gi"},
        _rtcr((0, 0), (100, 10)),
        {"big": 50},
    ),
    (
        # shape (0,10)-(100,0): utilization 25 -> 100 - 25 = 75
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "2Gi"},
        _rtcr((0, 10), (100, 0)),
        {"a": 75},
    ),
    (
        # shape (0,0)-(30,10): utilization 25 -> 100 * 25 / 30 = 83 (truncated)
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "2Gi"},
        _rtcr((0, 0), (30, 10)),
        {"a": 83},
    ),
    (
        # cpu above capacity counts as utilization 100 -> past the last point: 100; memory 25 -> 50; mean 75
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "5", "memory": "2Gi"},
        _rtcr((0, 0), (50, 10)),
        {"a": 75},
    ),
    (
        # before the first point the first score applies: cpu 25 -> 30, memory 25 -> 30
        [node_dict("a", cpu="4", memory="8Gi")],
        [],
        {"cpu": "1", "memory": "2Gi"},
        _rtcr((40, 3), (100, 10)),
        {"a": 30},
    ),
]
SCORE_IDS = [
    "least-allocated",
    "least-allocated-is-the-default",
    "most-allocated",
    "weights",
    "nonzero-pod-request",
    "nonzero-placed-pod",
    "least-request-above-capacity",
    "most-request-above-capacity",
    "extended-resource",
    "extended-not-requested-left-out",
    "node-lacks-extended-left-out",
    "no-resource-applies",
    "rtcr-binpacking",
    "rtcr-round-half-up",
    "rtcr-zero-score-left-out",
    "rtcr-spreading",
    "rtcr-interpolation",
    "rtcr-over-capacity",
    "rtcr-before-first-point",
]


@pytest.mark.parametrize(("nodes", "pods", "pod_kw", "args", "expected"), SCORE_CASES, ids=SCORE_IDS)
def test_score(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    pod_kw: dict[str, Any],
    args: dict[str, Any] | None,
    expected: dict[str, int],
) -> None:
    h = _harness(nodes, pods, args)
    assert h.plugin_scores(FIT, make_pod("incoming", **pod_kw)) == expected


def test_memory_above_int32_range() -> None:
    # 1 TiB nodes: (2^40 - 2^39) * 100 / 2^40 = 50
    h = _harness([node_dict("huge", cpu="64", memory="1Ti")], args=MOST)
    assert h.plugin_scores(FIT, make_pod("incoming", cpu="32", memory="512Gi")) == {"huge": 50}


def test_allocatable_beyond_float_exact_range() -> None:
    # 128 TiB of memory takes the integer path: cpu 16/64 -> 25, memory 32Ti/128Ti -> 25
    h = _harness([node_dict("huge", cpu="64", memory="128Ti")], args=MOST)
    assert h.plugin_scores(FIT, make_pod("incoming", cpu="16", memory="32Ti")) == {"huge": 25}


def test_removed_node_leaves_a_dead_row() -> None:
    h = _harness([node_dict("a", cpu="1"), node_dict("b", cpu="8"), node_dict("c", cpu="1")])
    h.cache.remove_node("b")
    names, diagnosis = h.feasible(make_pod("incoming", cpu="2"))
    assert names == []
    assert fit_error_message(2, diagnosis) == "0/2 nodes are available: 2 Insufficient cpu."
    # cpu (1000 - 500) * 100 // 1000 = 50,
    # memory 200Mi default of 8Gi -> 97; (50 + 97) // 2 = 73
    assert h.plugin_scores(FIT, make_pod("incoming", cpu="500m")) == {"a": 73, "c": 73}
