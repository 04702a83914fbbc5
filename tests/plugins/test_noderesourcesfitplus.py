"""NodeResourcesFitPlus: a strategy and weight per resource; scores by hand from Koordinator's
formula (integer percentages, weighted mean floored, 100 when no configured resource applies)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.config.errors import ConfigError
from tests.builders import Harness, make_pod, node_dict, pod_dict

FP = "NodeResourcesFitPlus"
GPU = "nvidia.com/gpu"
GPU_NODE = node_dict("g", cpu="8", memory="16Gi", extra={GPU: 8})
CPU_NODE = node_dict("c", cpu="8", memory="16Gi")


def _harness(
    nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]] = (), args: dict[str, Any] | None = None
) -> Harness:
    return Harness(list(nodes), list(pods), plugins=[FP], args={FP: args} if args is not None else None)


CASES = [
    # (nodes, placed pods, incoming pod kwargs, args, expected)
    (
        # g: gpu 2*100//8 = 25 (weight 2), cpu 7000*100//8000 = 87, memory 14*100//16 = 87 -> 224 // 4 = 56
        # c: gpu allocatable 0 scores 0 but its weight counts -> 174 // 4 = 43
        [GPU_NODE, CPU_NODE],
        [],
        {"cpu": "1", "memory": "2Gi", "extra_requests": {GPU: 2}},
        None,
        {"g": 56, "c": 43},
    ),
    (
        # no gpu requested: only cpu and memory, 87 and 87
        [GPU_NODE, CPU_NODE],
        [],
        {"cpu": "1", "memory": "2Gi"},
        None,
        {"g": 87, "c": 87},
    ),
    (
        [GPU_NODE, CPU_NODE],
        [],
        {},
        None,
        {"g": 100, "c": 100},
    ),
    (
        # cpu above capacity: LeastAllocated 0; memory 87 -> 43
        [CPU_NODE],
        [],
        {"cpu": "10", "memory": "2Gi"},
        None,
        {"c": 43},
    ),
    (
        # a placed pod without requests counts 100m of cpu: (8000 - 1100) * 100 // 8000 = 86
        [CPU_NODE],
        [pod_dict("p1", node_name="c")],
        {"cpu": "1"},
        None,
        {"c": 86},
    ),
    (
        # gpu (4 + 2) * 100 // 8 = 75 (x2); cpu 100m + 1000m -> 86; memory 200Mi + 2Gi of 16Gi -> 86
        [GPU_NODE],
        [pod_dict("p1", extra_requests={GPU: 4}, node_name="g")],
        {"cpu": "1", "memory": "2Gi", "extra_requests": {GPU: 2}},
        None,
        {"g": 80},
    ),
    (
        [CPU_NODE],
        [],
        {"cpu": "1"},
        {"resources": {"cpu": {"type": "LeastAllocated", "weight": 0}}},
        {"c": 100},
    ),
    (
        # MostAllocated caps the request at capacity
        [CPU_NODE],
        [],
        {"cpu": "10"},
        {"resources": {"cpu": {"type": "MostAllocated", "weight": 1}}},
        {"c": 100},
    ),
    (
        # weight defaults to 1: 2000 * 100 // 8000 = 25
        [CPU_NODE],
        [],
        {"cpu": "2"},
        {"resources": {"cpu": {"type": "MostAllocated"}}},
        {"c": 25},
    ),
    (
        # only an unconfigured resource is requested
        [node_dict("f", extra={"example.com/foo": 2})],
        [],
        {"extra_requests": {"example.com/foo": 1}},
        None,
        {"f": 100},
    ),
    (
        # memory not requested is not scored even though it has a non-zero default
        [CPU_NODE],
        [],
        {"cpu": "4"},
        {
            "resources": {
                "cpu": {"type": "MostAllocated", "weight": 1},
                "memory": {"type": "MostAllocated", "weight": 9},
            }
        },
        {"c": 50},
    ),
]
IDS = [
    "gpu-pod-packs-gpu-nodes",
    "cpu-pod-spreads",
    "no-configured-resource-requested",
    "request-above-capacity",
    "nonzero-placed-pod",
    "placed-gpu-counts",
    "zero-weights-give-100",
    "most-allocated-capped",
    "weight-defaults-to-1",
    "unconfigured-resource-only",
    "unrequested-memory-not-scored",
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
    assert h.plugin_scores(FP, make_pod("incoming", **pod_kw)) == expected


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"resources": {"cpu": {"type": "Balanced", "weight": 1}}}, "resources.cpu.type"),
        ({"resources": {"cpu": {"weight": 1}}}, "resources.cpu.type"),
        ({"resources": {"cpu": {"type": "MostAllocated", "weight": -1}}}, "resources.cpu.weight"),
        ({"resources": {"": {"type": "MostAllocated", "weight": 1}}}, "resources"),
        ({"resources": {"cpu": {"type": "MostAllocated", "wieght": 1}}}, "resources.cpu.wieght"),
    ],
    ids=["unknown-type", "type-required", "negative-weight", "empty-name", "unknown-key"],
)
def test_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        _harness([CPU_NODE], args=args)
    assert err.value.path == f"profiles[0].pluginConfig[{FP}].args.{field}"
