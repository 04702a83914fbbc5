"""The row-at-once answers agree with the one-node reference: node selections of storage objects
(topology.py) with NodeSelector/LabelSelector matching on a node's labels, and the per-row volume
choices (decisions.py) with FindMatchingVolume run node by node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.api.labels import LabelSelector
from koordpy.api.nodeselector import NodeSelector
from koordpy.api.storage import PersistentVolume, PersistentVolumeClaim
from koordpy.plugins.volumebinding.decisions import decide, pod_claims
from koordpy.plugins.volumebinding.matching import find_matching_volume, sorted_by_request
from koordpy.plugins.volumebinding.topology import RowMasks
from tests.plugins.volumebinding.storage import (
    HOSTNAME,
    Storage,
    claim,
    claiming,
    host,
    storage_class,
    volume,
)

ZONE = "topology.kubernetes.io/zone"
NODES = [
    host("n0", **{ZONE: "z1", "disks": "2", "ssd": "yes"}),
    host("n1", **{ZONE: "z1", "disks": "10"}),
    host("n2", **{ZONE: "z2", "disks": "4", "ssd": "no"}),
    host("n3", **{ZONE: "z3"}),
    host("n4"),
]


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


NODE_SELECTORS = [
    [[_expr(HOSTNAME, "In", "n1")]],
    [[_expr(HOSTNAME, "In", "n1", "n3", "nobody")]],
    [[_expr(ZONE, "In", "z1")], [_expr(ZONE, "In", "z3")]],
    [[_expr(ZONE, "NotIn", "z1")]],
    [[_expr("ssd", "Exists")]],
    [[_expr("ssd", "DoesNotExist")]],
    [[_expr("disks", "Gt", "3")]],
    [[_expr("disks", "Lt", "5"), _expr(ZONE, "In", "z1", "z2")]],
    [[_expr("absent-key", "In", "x")]],
    [[_expr("absent-key", "NotIn", "x")]],
]


@pytest.mark.parametrize("terms", NODE_SELECTORS)
def test_node_selector_rows_match_each_node(terms: list[list[dict[str, Any]]]) -> None:
    selector = NodeSelector.from_dict({"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}, "")
    s = Storage(NODES)
    snapshot = s.harness.snapshot
    masks = RowMasks()
    expected = [selector.matches(snapshot.info(row).node.labels, "") for row in range(snapshot.high_water)]
    assert masks.node_selector(snapshot, selector).tolist() == expected
    assert masks.node_selector_rows(snapshot, selector).tolist() == [
        i for i, hit in enumerate(expected) if hit
    ]


def test_a_node_name_field_matches_no_node_as_in_check_node_affinity() -> None:
    s = Storage(NODES)
    selector = NodeSelector.from_dict(
        {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}
            ]
        },
        "",
    )
    assert not RowMasks().node_selector(s.harness.snapshot, selector).any()


@pytest.mark.parametrize(
    "raw",
    [
        {"matchLabels": {ZONE: "z1"}},
        {"matchExpressions": [_expr("ssd", "NotIn", "no")]},
        {"matchExpressions": [_expr("ssd", "Exists"), _expr(ZONE, "In", "z1", "z2")]},
        {},
    ],
)
def test_label_selector_mask_matches_each_node(raw: dict[str, Any]) -> None:
    selector = LabelSelector.from_dict(raw, "")
    assert selector is not None
    s = Storage(NODES)
    snapshot = s.harness.snapshot
    expected = [selector.matches(snapshot.info(row).node.labels) for row in range(snapshot.high_water)]
    assert RowMasks().label_selector(snapshot, selector).tolist() == expected


# ----------------------------------------------------------------------------- per-row choices
VOLUMES = [
    volume("local-n0-a", "fast", "5Gi", {HOSTNAME: ["n0"]}),
    volume("local-n0-b", "fast", "20Gi", {HOSTNAME: ["n0"]}),
    volume("local-n1", "fast", "5Gi", {HOSTNAME: ["n1"]}),
    volume("zonal-z1", "fast", "10Gi", {ZONE: ["z1"]}),
    volume("zonal-z2", "fast", "5Gi", {ZONE: ["z2"]}),
    volume("anywhere", "fast", "50Gi"),
    volume("anywhere-small", "fast", "1Gi"),
    volume("ssd-only", "fast", "8Gi", {"ssd": ["yes"]}),
]
CLAIM_SETS = [
    [("c1", "1Gi")],
    [("c1", "4Gi"), ("c2", "4Gi")],
    [("c1", "10Gi"), ("c2", "3Gi"), ("c3", "6Gi")],
    [("c1", "5Gi"), ("c2", "5Gi"), ("c3", "5Gi"), ("c4", "5Gi")],
]


@pytest.mark.parametrize("claims", CLAIM_SETS)
def test_row_choices_are_find_matching_volume_node_by_node(claims: list[tuple[str, str]]) -> None:
    objects = [storage_class("fast"), *VOLUMES, *(claim(name, "fast", request=size) for name, size in claims)]
    s = Storage(NODES, objects)
    pod = claiming("p", *(name for name, _ in claims))
    found, status = pod_claims(pod, s.catalog)
    assert status is None and found is not None
    snapshot = s.harness.snapshot
    decisions = decide(snapshot, RowMasks(), s.catalog, found)
    volumes = [PersistentVolume.from_dict(v) for v in VOLUMES]
    for row in range(snapshot.high_water):
        labels = snapshot.info(row).node.labels
        taken: list[str] = []
        expected: dict[str, str | None] = {}
        for pvc in sorted_by_request(
            [PersistentVolumeClaim.from_dict(claim(n, "fast", request=z)) for n, z in claims]
        ):
            pv = find_matching_volume(pvc, volumes, labels, taken)
            expected[pvc.name] = pv.name if pv is not None else None
            if pv is not None:
                taken.append(pv.name)
        static, provision = decisions.on_row(row)
        got: dict[str, str | None] = {c.name: v.name for c, v in static}
        got.update({c.name: None for c in provision})
        assert got == expected, snapshot.node_name(row)
        # no class can provision: a row passes exactly when every claim found a volume
        assert (int(decisions.codes[row]) == 0) is all(v is not None for v in expected.values())
    assert decisions.has_static.dtype == np.bool_
