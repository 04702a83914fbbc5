"""In-tree volumes on nodes that migrated their plugin to CSI: their node affinity is read as
csi-translation-lib translates it (kube's tryTranslatePVToCSI in checkBoundClaims and
FindMatchingVolume)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.nodeselector import NodeSelector
from koordpy.api.storage import PersistentVolume
from koordpy.plugins.volumebinding import ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT
from koordpy.plugins.volumebinding.migration import translated_affinity
from tests.plugins.volumebinding.storage import Storage, claim, claiming, host, storage_class

ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
REGION = "topology.kubernetes.io/region"
GKE_ZONE = "topology.gke.io/zone"
GCE_PD = "kubernetes.io/gce-pd"


def _in_tree(
    name: str,
    source: str = "gcePersistentDisk",
    labels: dict[str, str] | None = None,
    affinity: list[dict[str, Any]] | None = None,
    claim_ref: tuple[str, str] | None = None,
    phase: str = "Available",
) -> dict[str, Any]:
    sources = {
        "gcePersistentDisk": {"pdName": name},
        "awsElasticBlockStore": {"volumeID": f"aws://z1/vol-{name}"},
        "portworxVolume": {"volumeID": name},
    }
    spec: dict[str, Any] = {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "pd",
        source: sources[source],
    }
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": affinity}]}}
    if claim_ref is not None:
        spec["claimRef"] = {"namespace": claim_ref[0], "name": claim_ref[1]}
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase},
    }


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _terms(selector: NodeSelector | None) -> list[list[tuple[str, tuple[str, ...]]]]:
    assert selector is not None
    return [[(r.key, r.values) for r in t.match_expressions] for t in selector.terms]


@pytest.mark.parametrize(
    ("pv", "expected"),
    [
        pytest.param(
            _in_tree("d", affinity=[_in(ZONE, "z1")]), [[(GKE_ZONE, ("z1",))]], id="zone-affinity-renamed"
        ),
        pytest.param(
            _in_tree("d", labels={ZONE: "z2__z1"}),
            [[(GKE_ZONE, ("z1", "z2"))]],
            id="zone-label-becomes-affinity",
        ),
        pytest.param(
            _in_tree("d", affinity=[_in(BETA_ZONE, "z1"), _in(BETA_REGION, "r1")]),
            [[(GKE_ZONE, ("z1",)), (REGION, ("r1",))]],
            id="beta-zone-and-region",
        ),
        pytest.param(
            _in_tree("d", source="awsElasticBlockStore", affinity=[_in(ZONE, "z1")]),
            [[("topology.ebs.csi.aws.com/zone", ("z1",))]],
            id="aws-ebs",
        ),
        pytest.param(
            _in_tree("d", source="portworxVolume", affinity=[_in(ZONE, "z1")]),
            [[(ZONE, ("z1",))]],
            id="portworx-keeps-its-topology",
        ),
    ],
)
def test_translated_affinity(pv: dict[str, Any], expected: list[list[tuple[str, tuple[str, ...]]]]) -> None:
    assert _terms(translated_affinity(PersistentVolume.from_dict(pv))) == expected


def _csi_node(name: str, *migrated: str) -> dict[str, Any]:
    annotations = {"storage.alpha.kubernetes.io/migrated-plugins": ",".join(migrated)} if migrated else {}
    return {
        "kind": "CSINode",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"drivers": []},
    }


NODES = [
    # migrated, served by the CSI driver in z1
    host("node-a", **{ZONE: "z1", GKE_ZONE: "z1"}),
    # migrated, the CSI driver reports z2 while the node label says z1
    host("node-b", **{ZONE: "z1", GKE_ZONE: "z2"}),
    # not migrated: the in-tree affinity decides
    host("node-c", **{ZONE: "z1"}),
]
CSI_NODES = [_csi_node("node-a", GCE_PD), _csi_node("node-b", "kubernetes.io/aws-ebs", GCE_PD)]


def test_a_bound_in_tree_volume_is_checked_as_translated_where_migrated() -> None:
    s = Storage(
        NODES,
        [
            storage_class("pd"),
            claim("data", "pd", volume_name="disk", bound=True),
            _in_tree("disk", labels={ZONE: "z1"}, claim_ref=("default", "data"), phase="Bound"),
            *CSI_NODES,
        ],
    )
    assert s.filter_messages(claiming("p", "data")) == {
        "node-a": "",
        "node-b": ERR_REASON_NODE_CONFLICT,
        "node-c": "",
    }


def test_an_in_tree_volume_to_bind_is_matched_as_translated_where_migrated() -> None:
    s = Storage(
        NODES,
        [storage_class("pd"), claim("data", "pd"), _in_tree("disk", affinity=[_in(ZONE, "z1")]), *CSI_NODES],
    )
    pod = claiming("p", "data")
    assert s.filter_messages(pod) == {"node-a": "", "node-b": ERR_REASON_BIND_CONFLICT, "node-c": ""}
    # the node stops being migrated: the in-tree affinity decides there again
    s.add(_csi_node("node-b", "kubernetes.io/aws-ebs"), "Update")
    assert s.filter_messages(pod)["node-b"] == ""
