"""ScarceResourceAvoidance: penalize nodes for the scarce resources they have and the pod does
not request; scores by hand from Koordinator's formula (|D| - |S|) * 100 // |D|."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.config.errors import ConfigError
from tests.builders import Harness, make_pod, node_dict

SRA = "ScarceResourceAvoidance"
GPU = "nvidia.com/gpu"
FPGA = "example.com/fpga"
GPU_NODE = node_dict("g", extra={GPU: 8})
CPU_NODE = node_dict("c")


def _harness(nodes: Sequence[dict[str, Any]], args: dict[str, Any] | None = None) -> Harness:
    return Harness(list(nodes), plugins=[SRA], args={SRA: args} if args is not None else None)


CASES: list[tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any] | None, dict[str, int]]] = [
    # (nodes, incoming pod kwargs, args, expected)
    # g: D = {gpu}, S = {gpu} -> 0; c: D empty -> 100
    ([GPU_NODE, CPU_NODE], {"cpu": "1", "memory": "1Gi"}, None, {"g": 0, "c": 100}),
    # the pod requests the gpu: D empty everywhere
    (
        [GPU_NODE, CPU_NODE],
        {"cpu": "1", "memory": "1Gi", "extra_requests": {GPU: 1}},
        None,
        {"g": 100, "c": 100},
    ),
    # g: D = {memory, gpu}, S = {gpu} -> 50; c: D = {memory}, S empty -> 100
    ([GPU_NODE, CPU_NODE], {"cpu": "1"}, None, {"g": 50, "c": 100}),
    # a best-effort pod: D = {cpu, memory, gpu} -> 200 // 3 = 66
    ([GPU_NODE], {}, None, {"g": 66}),
    # D = {ephemeral-storage, gpu} -> 50
    (
        [node_dict("e", extra={GPU: 8, "ephemeral-storage": "100Gi"})],
        {"cpu": "1", "memory": "1Gi"},
        None,
        {"e": 50},
    ),
    # zero allocatable gpu is not a resource the node has
    ([node_dict("z", extra={GPU: 0})], {"cpu": "1", "memory": "1Gi"}, None, {"z": 100}),
    ([GPU_NODE], {"cpu": "1", "memory": "1Gi"}, {"resources": []}, {"g": 100}),
    # two scarce resources both spare: (2 - 2) * 100 // 2 = 0
    (
        [node_dict("m", extra={GPU: 8, FPGA: 2})],
        {"cpu": "1", "memory": "1Gi"},
        {"resources": [FPGA, GPU]},
        {"m": 0},
    ),
    # the pod takes the gpu: D = {fpga}, S = {fpga} -> 0
    (
        [node_dict("m", extra={GPU: 8, FPGA: 2})],
        {"cpu": "1", "memory": "1Gi", "extra_requests": {GPU: 1}},
        {"resources": [FPGA, GPU]},
        {"m": 0},
    ),
    # D = {fpga, gpu, nic}, S = {fpga, gpu} -> 100 // 3 = 33
    (
        [node_dict("m", extra={GPU: 8, FPGA: 2, "example.com/nic": 4})],
        {"cpu": "1", "memory": "1Gi"},
        {"resources": [FPGA, GPU]},
        {"m": 33},
    ),
]
IDS = [
    "cpu-pod-avoids-gpu-node",
    "gpu-pod-not-penalized",
    "unrequested-memory-dilutes",
    "best-effort-pod",
    "ephemeral-storage-counts",
    "zero-allocatable-not-had",
    "no-scarce-resources",
    "two-scarce-spare",
    "one-scarce-requested",
    "mixed-spare-resources",
]


@pytest.mark.parametrize(("nodes", "pod_kw", "args", "expected"), CASES, ids=IDS)
def test_score(
    nodes: list[dict[str, Any]], pod_kw: dict[str, Any], args: dict[str, Any] | None, expected: dict[str, int]
) -> None:
    h = _harness(nodes, args)
    assert h.plugin_scores(SRA, make_pod("incoming", **pod_kw)) == expected


def test_node_added_later_is_seen() -> None:
    h = _harness([CPU_NODE])
    pod = make_pod("incoming", cpu="1", memory="1Gi")
    assert h.plugin_scores(SRA, pod) == {"c": 100}
    h.cache.add_node(Node.from_dict(GPU_NODE))
    assert h.plugin_scores(SRA, pod) == {"c": 100, "g": 0}


def test_empty_resource_name_rejected() -> None:
    with pytest.raises(ConfigError) as err:
        _harness([CPU_NODE], args={"resources": [""]})
    assert err.value.path == f"profiles[0].pluginConfig[{SRA}].args.resources"
