"""Volumes in `koordpy simulate`: claims, PersistentVolumes and StorageClasses read from the input,
bound and provisioned as a cluster's controllers bind and provision them, each stated from
Kubernetes' documented behaviour:

- a WaitForFirstConsumer claim is bound (or provisioned) only once a pod using it is scheduled,
  on a node where its volume can be: a local volume's node, the zone the class allows;
- an Immediate claim is bound at once, to the smallest available volume that fits it, or
  provisioned when its class has a provisioner; a pod whose Immediate claim is not bound waits;
- a StatefulSet's pod gets the claim `<template>-<set>-<ordinal>`, a generic ephemeral volume the
  claim `<pod>-<volume>`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from koordpy.api.nodeselector import NodeSelector
from tests.simulate.storage_builders import (
    WFFC,
    ZONE,
    attachment,
    by_name,
    capacity,
    claim,
    csi_driver,
    csi_node,
    node,
    pod_with_claims,
    pod_with_ephemeral,
    run,
    stateful_set,
    storage_class,
    volume,
)

CSI_ZONE = "topology.example.com/zone"


@dataclass(frozen=True)
class Case:
    docs: Sequence[Any]
    # pod name -> (phase, the node or the nodes it may be on, a part of its message)
    pods: Mapping[str, tuple[str, str | Collection[str] | None, str | None]]
    # claim name -> (phase, its volume: a name, "provisioned", or None)
    claims: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    # volume name (or the claim it was provisioned for, as "for:<claim>") -> its node affinity's
    # single term, as {key: value}
    topology: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


LOCAL = storage_class("local", mode=WFFC)
THREE_NODES = [node("node-1"), node("node-2"), node("node-3")]
LOCAL_VOLUMES = [
    volume("pv-node-2", "10Gi", "local", node="node-2"),
    volume("pv-node-3", "10Gi", "local", node="node-3"),
]

CASES = {
    "statefulset-on-local-volumes": Case(
        [LOCAL, *THREE_NODES, *LOCAL_VOLUMES, stateful_set("db", 2, "data", "5Gi", "local")],
        pods={"db-0": ("Bound", {"node-2", "node-3"}, None), "db-1": ("Bound", {"node-2", "node-3"}, None)},
        claims={"data-db-0": ("Bound", None), "data-db-1": ("Bound", None)},
    ),
    "statefulset-replica-without-a-free-local-volume-waits": Case(
        [LOCAL, *THREE_NODES, *LOCAL_VOLUMES, stateful_set("db", 3, "data", "5Gi", "local")],
        pods={
            "db-0": ("Bound", {"node-2", "node-3"}, None),
            "db-1": ("Bound", {"node-2", "node-3"}, None),
            "db-2": ("Pending", None, "didn't find available persistent volumes to bind"),
        },
        claims={"data-db-0": ("Bound", None), "data-db-1": ("Bound", None), "data-db-2": ("Pending", None)},
    ),
    "local-volume-too-small-is-not-used": Case(
        [
            LOCAL,
            *THREE_NODES,
            volume("small", "1Gi", "local", node="node-1"),
            *LOCAL_VOLUMES,
            claim("data", "5Gi", "local"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", {"node-2", "node-3"}, None)},
        claims={"data": ("Bound", None)},
    ),
    "provisioned-in-the-zone-the-class-allows": Case(
        [
            storage_class("zonal", "csi.example.com", WFFC, allowed={ZONE: ["zone-b"]}),
            node("node-a", **{ZONE: "zone-a"}),
            node("node-b", **{ZONE: "zone-b"}),
            claim("data", "8Gi", "zonal"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", "node-b", None)},
        claims={"data": ("Bound", "provisioned")},
        topology={"for:data": {ZONE: "zone-b"}},
    ),
    "provisioned-in-the-topology-of-the-csi-driver-on-the-node": Case(
        [
            storage_class("csi", "csi.example.com", WFFC),
            node("node-a", **{CSI_ZONE: "east"}),
            csi_node("node-a", "csi.example.com", [CSI_ZONE]),
            claim("data", "8Gi", "csi"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", "node-a", None)},
        claims={"data": ("Bound", "provisioned")},
        topology={"for:data": {CSI_ZONE: "east"}},
    ),
    "immediate-claim-without-a-volume-keeps-its-pod-pending": Case(
        [
            storage_class("manual"),
            node("node-1"),
            volume("too-small", "1Gi", "manual"),
            claim("data", "5Gi", "manual"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Pending", None, "pod has unbound immediate PersistentVolumeClaims")},
        claims={"data": ("Pending", None)},
    ),
    "a-claim-that-does-not-exist": Case(
        [node("node-1"), pod_with_claims("app", "x")],
        pods={"app": ("Pending", None, 'persistentvolumeclaim "x" not found')},
    ),
    "immediate-claim-gets-the-smallest-volume-that-fits": Case(
        [
            storage_class("manual"),
            node("node-1"),
            volume("pv-10", "10Gi", "manual"),
            volume("pv-5", "5Gi", "manual"),
            volume("pv-3", "3Gi", "manual"),
            volume("pv-20", "20Gi", "manual"),
            claim("data", "4Gi", "manual"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", "node-1", None)},
        claims={"data": ("Bound", "pv-5")},
    ),
    "a-volume-pre-bound-to-its-claim-wins": Case(
        [
            storage_class("manual"),
            node("node-1"),
            volume("pv-5", "5Gi", "manual"),
            volume("pv-mine", "10Gi", "manual", claim=("default", "data")),
            claim("data", "4Gi", "manual"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", "node-1", None)},
        claims={"data": ("Bound", "pv-mine")},
    ),
    "immediate-claim-is-provisioned": Case(
        [
            storage_class("standard", "csi.example.com"),
            node("node-1"),
            claim("data", "4Gi", "standard"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", "node-1", None)},
        claims={"data": ("Bound", "provisioned")},
    ),
    "the-default-class-applies-to-a-claim-without-one": Case(
        [
            storage_class("standard", "csi.example.com", WFFC, default=True),
            node("node-1"),
            claim("data", "4Gi", None),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", "node-1", None)},
        claims={"data": ("Bound", "provisioned")},
    ),
    "generic-ephemeral-volume": Case(
        [
            storage_class("standard", "csi.example.com", WFFC),
            node("node-1"),
            pod_with_ephemeral("web", "scratch", "1Gi", "standard"),
        ],
        pods={"web": ("Bound", "node-1", None)},
        claims={"web-scratch": ("Bound", "provisioned")},
    ),
    "an-ephemeral-volume-whose-claim-another-made": Case(
        [
            storage_class("standard", "csi.example.com", WFFC),
            node("node-1"),
            claim("web-scratch", "1Gi", "standard"),
            pod_with_ephemeral("web", "scratch", "1Gi", "standard"),
        ],
        pods={"web": ("Pending", None, "PVC default/web-scratch was not created for pod default/web")},
        claims={"web-scratch": ("Pending", None)},
    ),
    "the-capacity-the-csi-driver-publishes-is-respected": Case(
        [
            storage_class("csi", "csi.example.com", WFFC),
            csi_driver("csi.example.com", storage_capacity=True),
            node("node-a", **{ZONE: "zone-a"}),
            node("node-b", **{ZONE: "zone-b"}),
            capacity("zone-a", "csi", "100Gi", {ZONE: "zone-a"}),
            capacity("zone-b", "csi", "2Gi", {ZONE: "zone-b"}),
            claim("data", "8Gi", "csi"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Bound", "node-a", None)},
        claims={"data": ("Bound", "provisioned")},
    ),
    "no-node-has-the-capacity": Case(
        [
            storage_class("csi", "csi.example.com", WFFC),
            csi_driver("csi.example.com", storage_capacity=True),
            node("node-a", **{ZONE: "zone-a"}),
            capacity("zone-a", "csi", "2Gi", {ZONE: "zone-a"}),
            claim("data", "8Gi", "csi"),
            pod_with_claims("app", "data"),
        ],
        pods={"app": ("Pending", None, "node(s) did not have enough free storage")},
        claims={"data": ("Pending", None)},
    ),
}


def _node_labels(docs: Sequence[Any]) -> dict[str, Mapping[str, str]]:
    return {d["metadata"]["name"]: d["metadata"].get("labels") or {} for d in docs if d.get("kind") == "Node"}


def _term(affinity: Mapping[str, Any] | None) -> dict[str, str]:
    assert affinity is not None
    (term,) = affinity["nodeSelectorTerms"]
    out: dict[str, str] = {}
    for expr in term["matchExpressions"]:
        assert expr["operator"] == "In" and len(expr["values"]) == 1, expr
        out[expr["key"]] = expr["values"][0]
    return out


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_volumes(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: Case) -> None:
    code, report, err = run(capsys, tmp_path, case.docs)
    assert code == 0, err
    assert report is not None
    pods = by_name(report["pods"])
    for name, (phase, where, message) in case.pods.items():
        pod = pods[name]
        assert pod["phase"] == phase, pod
        if isinstance(where, str):
            assert pod["node"] == where, pod
        elif where is not None:
            assert pod["node"] in where, pod
        if message is not None:
            assert message in (pod["message"] or ""), pod
    claims = by_name(report.get("persistentVolumeClaims") or [])
    volumes = by_name(report.get("persistentVolumes") or [])
    for name, (phase, bound_to) in case.claims.items():
        found = claims[name]
        assert found["phase"] == phase, found
        if bound_to == "provisioned":
            assert volumes[found["volume"]]["provisioned"] is True, volumes
        elif bound_to is not None:
            assert found["volume"] == bound_to, found
        if phase == "Pending":
            assert found["volume"] is None, found
    for name, expected in case.topology.items():
        if name.startswith("for:"):
            name = claims[name[4:]]["volume"]
        assert _term(volumes[name]["nodeAffinity"]) == expected
    _assert_bound_pods_sit_with_their_volumes(case.docs, report)


def _assert_bound_pods_sit_with_their_volumes(docs: Sequence[Any], report: Mapping[str, Any]) -> None:
    """Kubernetes' promise for every case: a bound pod's claims are all Bound, each to a volume
    bound back to it, whose node affinity the pod's node satisfies."""
    labels = _node_labels(docs)
    claims = by_name(report.get("persistentVolumeClaims") or [])
    volumes = by_name(report.get("persistentVolumes") or [])
    used: dict[str, str] = {}
    for doc in docs:
        for pod in _pods_of(doc):
            result = next(p for p in report["pods"] if p["name"] == pod["name"])
            if result["phase"] != "Bound":
                continue
            for name in pod["claims"]:
                found = claims[name]
                assert found["phase"] == "Bound", found
                pv = volumes[found["volume"]]
                assert pv["phase"] == "Bound" and pv["claim"] == f"default/{name}", pv
                assert used.setdefault(pv["name"], name) == name, "a volume bound to two claims"
                if pv["nodeAffinity"] is not None:
                    selector = NodeSelector.from_dict(pv["nodeAffinity"], "nodeAffinity")
                    assert selector.matches(labels[result["node"]], result["node"]), (pv, result)


def _pods_of(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each pod `doc` makes, with the names of the claims it uses."""
    if doc.get("kind") == "Pod":
        volumes = doc["spec"].get("volumes") or []
        names = [
            v["persistentVolumeClaim"]["claimName"]
            if "persistentVolumeClaim" in v
            else f"{doc['metadata']['name']}-{v['name']}"
            for v in volumes
        ]
        return [{"name": doc["metadata"]["name"], "claims": names}]
    if doc.get("kind") == "StatefulSet":
        set_name, spec = doc["metadata"]["name"], doc["spec"]
        templates = [t["metadata"]["name"] for t in spec.get("volumeClaimTemplates") or []]
        return [
            {"name": f"{set_name}-{i}", "claims": [f"{t}-{set_name}-{i}" for t in templates]}
            for i in range(spec["replicas"])
        ]
    return []


def test_a_volume_that_arrives_later_binds_the_waiting_claim(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The PV controller binds an Immediate claim as soon as a volume that fits appears; the pod
    waiting for the claim is scheduled then."""
    late = volume("pv-late", "10Gi", "manual")
    late["metadata"]["annotations"] = {"simulation.koordpy.io/arrive-after": "60s"}
    code, report, err = run(
        capsys,
        tmp_path,
        [
            storage_class("manual"),
            node("node-1"),
            late,
            claim("data", "5Gi", "manual"),
            pod_with_claims("app", "data"),
        ],
    )
    assert code == 0, err
    assert report is not None
    (pod,) = report["pods"]
    assert pod["phase"] == "Bound" and pod["scheduledAt"] >= 60.0, pod
    assert by_name(report["persistentVolumeClaims"])["data"]["volume"] == "pv-late"


@pytest.mark.parametrize("attached", [False, True])
def test_an_attached_volume_takes_a_slot_of_its_node(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, attached: bool
) -> None:
    """A volume still attached to the node (its VolumeAttachment) fills the driver's one slot there:
    the pod whose claim needs another volume of the driver waits."""
    driver = "disk.csi.example"
    limited = csi_node("node-1", driver, [])
    limited["spec"]["drivers"][0]["allocatable"] = {"count": 1}
    old = volume("pv-old", "10Gi", "other")
    del old["spec"]["local"]
    old["spec"]["csi"] = {"driver": driver, "volumeHandle": "vol-old"}
    docs = [
        storage_class("fast", driver, WFFC),
        node("node-1"),
        limited,
        old,
        claim("data", "5Gi", "fast"),
        pod_with_claims("app", "data"),
    ]
    if attached:
        docs.append(attachment("va-old", "node-1", "pv-old", driver))
    code, report, err = run(capsys, tmp_path, docs)
    assert code == 0, err
    assert report is not None
    (pod,) = report["pods"]
    assert (pod["node"] is None) == attached, pod


def test_statefulset_claims_are_named_and_labelled_as_its_controller_names_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from koordpy.simulate.loader import load_scenario
    from tests.simulate.storage_builders import write

    path = write(tmp_path / "input.yaml", [LOCAL, stateful_set("db", 2, "data", "5Gi", "local")])
    scenario = load_scenario([str(path)])
    claims = [o for o in scenario.storage if o.kind == "PersistentVolumeClaim"]
    assert [c.name for c in claims] == ["data-db-0", "data-db-1"]
    assert claims[0].raw["metadata"]["labels"] == {"app": "db"}
    pods = {p["metadata"]["name"]: p for p in scenario.pods}
    assert pods["db-1"]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}
    ]


def test_an_existing_claim_of_a_statefulset_pod_is_used_as_it_is(tmp_path: Path) -> None:
    from koordpy.simulate.loader import load_scenario
    from tests.simulate.storage_builders import write

    mine = claim("data-db-0", "1Gi", "local")
    path = write(tmp_path / "input.yaml", [LOCAL, mine, stateful_set("db", 2, "data", "5Gi", "local")])
    claims = [o for o in load_scenario([str(path)]).storage if o.kind == "PersistentVolumeClaim"]
    assert [(c.name, c.raw["spec"]["resources"]["requests"]["storage"]) for c in claims] == [
        ("data-db-0", "1Gi"),
        ("data-db-1", "5Gi"),
    ]


def test_reports_without_storage_are_unchanged(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, report, err = run(capsys, tmp_path, [node("node-1"), pod_with_claims("app")])
    assert code == 0, err
    assert report is not None
    assert "persistentVolumeClaims" not in report and "persistentVolumes" not in report


def test_the_table_and_the_page_show_each_claim(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from koordpy.cli import main
    from tests.simulate.storage_builders import write

    docs = CASES["immediate-claim-without-a-volume-keeps-its-pod-pending"].docs
    path = write(tmp_path / "input.yaml", docs)
    assert main(["simulate", str(path), "--html", str(tmp_path / "page.html")]) == 0
    table = capsys.readouterr().out
    claim_line = next(line for line in table.splitlines() if line.startswith("default/data "))
    assert claim_line.split() == ["default/data", "Pending", "<none>", "manual", "5Gi"]
    page = (tmp_path / "page.html").read_text()
    assert '<table id="claims">' in page and "<td>data</td>" in page


def test_the_volumes_example(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/volumes.yaml, as docs/simulate-volumes.md describes it."""
    from koordpy.cli import main

    example = Path(__file__).resolve().parents[2] / "examples" / "volumes.yaml"
    assert main(["simulate", str(example), "--output", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    pods = {p["name"]: (p["phase"], p["node"]) for p in report["pods"]}
    assert {pods["cassandra-0"], pods["cassandra-1"]} == {("Bound", "node-a1"), ("Bound", "node-b1")}
    assert pods["cassandra-2"] == ("Pending", None)
    assert pods["reports"] == ("Bound", "node-b1")
    assert pods["builder"][0] == "Bound"
    claims = by_name(report["persistentVolumeClaims"])
    assert claims["builder-scratch"]["storageClass"] == "standard"
    assert [c["phase"] for c in claims.values()] == ["Bound", "Bound", "Pending", "Bound", "Bound"]
