"""VolumeBinding's score: how full a node's storage would be, per class, through the shape
(scorer_test.go and the scoring cases of volume_binding_test.go, with values of our own)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.plugins.volumebinding import UtilizationShapePoint
from koordpy.plugins.volumebinding.scorer import shape_table
from tests.plugins.volumebinding.storage import (
    HOSTNAME,
    Storage,
    capacity,
    claim,
    claiming,
    csi_driver,
    host,
    storage_class,
    volume,
)

NODES = [host("node-a"), host("node-b"), host("node-c")]
DRIVER = "csi.example.com"
# kube's former default: fuller storage is better (bin packing)
PACKING = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}


def _points(*pairs: tuple[int, int]) -> list[UtilizationShapePoint]:
    return [UtilizationShapePoint(utilization=u, score=s) for u, s in pairs]


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        pytest.param(_points((0, 10), (100, 0)), {0: 100, 30: 70, 99: 1, 100: 0}, id="default-descending"),
        pytest.param(_points((0, 0), (100, 10)), {0: 0, 45: 45, 100: 100}, id="ascending"),
        # between points the line truncates toward zero, as Go's integer division
        pytest.param(
            _points((10, 0), (40, 10)), {0: 0, 10: 0, 11: 3, 39: 96, 40: 100, 90: 100}, id="flat-outside"
        ),
        pytest.param(_points((0, 10), (30, 3)), {1: 98, 29: 33, 31: 30}, id="negative-slope-truncates-up"),
    ],
)
def test_shape_table(points: list[UtilizationShapePoint], expected: dict[int, int]) -> None:
    table = shape_table(points)
    assert {u: int(table[u]) for u in expected} == expected


def _local(*objects: dict[str, Any], args: dict[str, Any] | None = None) -> Storage:
    return Storage(NODES, [storage_class("fast"), storage_class("hdd"), *objects], args=args)


LOCAL_ONE_CLAIM = [
    claim("pvc-a", "fast", request="50Gi"),
    volume("pv-a0", "fast", "200Gi", {HOSTNAME: ["node-a"]}),
    volume("pv-a1", "fast", "200Gi", {HOSTNAME: ["node-a"]}),
    volume("pv-b0", "fast", "100Gi", {HOSTNAME: ["node-b"]}),
]
LOCAL_TWO_CLASSES = [
    claim("pvc-f", "fast", request="50Gi"),
    claim("pvc-h", "hdd", request="100Gi"),
    volume("pv-af", "fast", "200Gi", {HOSTNAME: ["node-a"]}),
    volume("pv-ah", "hdd", "200Gi", {HOSTNAME: ["node-a"]}),
    volume("pv-bf", "fast", "100Gi", {HOSTNAME: ["node-b"]}),
    volume("pv-bh", "hdd", "100Gi", {HOSTNAME: ["node-b"]}),
]


@pytest.mark.parametrize(
    ("objects", "claims", "args", "expected"),
    [
        pytest.param(
            LOCAL_ONE_CLAIM, ["pvc-a"], None, {"node-a": 75, "node-b": 50}, id="default-prefers-roomier"
        ),
        pytest.param(
            LOCAL_ONE_CLAIM, ["pvc-a"], PACKING, {"node-a": 25, "node-b": 50}, id="packing-prefers-closer"
        ),
        # node-a: fast 25%, hdd 50% -> mean 37.5, rounded half up; node-b: 50% and 100%
        pytest.param(
            LOCAL_TWO_CLASSES,
            ["pvc-f", "pvc-h"],
            PACKING,
            {"node-a": 38, "node-b": 75},
            id="mean-over-classes",
        ),
        pytest.param(
            [
                claim("pvc-1", "fast", request="30Gi"),
                claim("pvc-2", "fast", request="30Gi"),
                volume("pv-1", "fast", "50Gi", {HOSTNAME: ["node-a"]}),
                volume("pv-2", "fast", "50Gi", {HOSTNAME: ["node-a"]}),
            ],
            ["pvc-1", "pvc-2"],
            PACKING,
            {"node-a": 60},
            id="one-class-sums-requests-and-capacities",
        ),
    ],
)
def test_static_bindings_score(
    objects: list[dict[str, Any]], claims: list[str], args: dict[str, Any] | None, expected: dict[str, int]
) -> None:
    assert _local(*objects, args=args).scores(claiming("pod-a", *claims)) == expected


def test_bound_claims_alone_are_not_scored() -> None:
    s = _local(claim("pvc-a", "fast", volume_name="pv-a", bound=True), volume("pv-a", "fast", phase="Bound"))
    assert s.scores(claiming("pod-a", "pvc-a")) == {}


def test_provisioning_without_tracked_capacity_is_not_scored() -> None:
    s = Storage(NODES, [storage_class("dyn", provisioner=DRIVER), claim("pvc-a", "dyn")])
    assert s.scores(claiming("pod-a", "pvc-a")) == {}


def _provisioning(*objects: dict[str, Any]) -> Storage:
    return Storage(
        NODES,
        [
            storage_class("dyn", provisioner=DRIVER),
            csi_driver(DRIVER, True),
            capacity("cap-a", "dyn", "100Gi", {HOSTNAME: "node-a"}),
            capacity("cap-b", "dyn", "40Gi", {HOSTNAME: "node-b"}),
            capacity("cap-c", "dyn", "20Gi", {HOSTNAME: "node-c"}),
            *objects,
        ],
    )


def test_provisioning_is_scored_by_the_capacity_that_vouched_for_it() -> None:
    s = _provisioning(claim("pvc-a", "dyn", request="10Gi"), claim("pvc-b", "dyn", request="10Gi"))
    # 20Gi of 100Gi, of 40Gi, of 20Gi
    assert s.scores(claiming("pod-a", "pvc-a", "pvc-b")) == {"node-a": 80, "node-b": 50, "node-c": 0}


def test_a_node_with_a_static_binding_is_scored_by_it_alone() -> None:
    s = _provisioning(
        storage_class("fast"),
        claim("pvc-a", "dyn", request="10Gi"),
        claim("pvc-f", "fast", request="10Gi"),
        volume("pv-f", "fast", "10Gi", {HOSTNAME: ["node-b"]}),
    )
    scores = s.scores(claiming("pod-a", "pvc-a", "pvc-f"))
    # node-b: only the local volume counts, and it would be full (were the provisioned claim
    # counted too, 10Gi of 40Gi, the mean would be 38); elsewhere pvc-f fits nowhere
    assert scores == {"node-b": 0}


def test_capacity_smaller_than_the_request_counts_as_full() -> None:
    s = _provisioning(claim("pvc-a", "dyn", request="10Gi"))
    s.add(capacity("cap-c", "dyn", "5Gi", {HOSTNAME: "node-c"}, maximum="20Gi"), "Update")
    assert s.scores(claiming("pod-a", "pvc-a"))["node-c"] == 0
