"""Storage objects the API server would refuse are input errors: exit status 2, with a message
naming the file, the document, the object and the field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.simulate.storage_builders import (
    attachment,
    claim,
    csi_node,
    node,
    pod_with_ephemeral,
    run,
    stateful_set,
    storage_class,
    volume,
)


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`obj` with the field at the dotted `path` (list items as numbers) set, or removed for None."""
    out = copy.deepcopy(obj)
    parts = path.split(".")
    target: Any = out
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
    last = parts[-1]
    if value is None:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return out


def _broken(base: dict[str, Any], path: str, value: Any) -> Callable[[], dict[str, Any]]:
    return lambda: _set(base, path, value)


SC = storage_class("fast", "csi.example.com")
PV = volume("pv-1", "10Gi", "fast", node="node-1")
PVC = claim("data", "5Gi", "fast")
CSI = csi_node("node-1", "csi.example.com", ["zone"])
STS = stateful_set("db", 2, "data", "5Gi", "fast")
EPHEMERAL = pod_with_ephemeral("web", "scratch", "1Gi", "fast")
VA = attachment("va-1", "node-1", "pv-1", "csi.example.com")

CASES: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "class-without-provisioner": (
        _broken(SC, "provisioner", None),
        "(StorageClass fast): provisioner: is required",
    ),
    "class-with-an-unknown-binding-mode": (
        _broken(SC, "volumeBindingMode", "Later"),
        "(StorageClass fast): volumeBindingMode: must be Immediate or WaitForFirstConsumer",
    ),
    "class-topology-without-values": (
        _broken(SC, "allowedTopologies", [{"matchLabelExpressions": [{"key": "zone", "values": []}]}]),
        "(StorageClass fast): allowedTopologies[0].matchLabelExpressions[0].values:",
    ),
    "volume-of-no-size": (
        _broken(PV, "spec.capacity", None),
        "(PersistentVolume pv-1): spec.capacity.storage:",
    ),
    "volume-of-a-size-that-is-no-quantity": (
        _broken(PV, "spec.capacity.storage", "lots"),
        "(PersistentVolume pv-1): spec.capacity.storage:",
    ),
    "volume-with-a-bad-node-affinity": (
        _broken(PV, "spec.nodeAffinity.required.nodeSelectorTerms.0.matchExpressions.0.operator", "Near"),
        "(PersistentVolume pv-1): "
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator",
    ),
    "volume-without-access-modes": (
        _broken(PV, "spec.accessModes", []),
        "(PersistentVolume pv-1): spec.accessModes: at least 1 access mode is required",
    ),
    "claim-with-an-unknown-access-mode": (
        _broken(PVC, "spec.accessModes", ["ReadWriteSometimes"]),
        "(PersistentVolumeClaim default/data): spec.accessModes[0]:",
    ),
    "claim-without-a-size": (
        _broken(PVC, "spec.resources", None),
        "(PersistentVolumeClaim default/data): spec.resources.requests.storage: required",
    ),
    "claim-whose-class-is-not-a-string": (
        _broken(PVC, "spec.storageClassName", 5),
        "(PersistentVolumeClaim default/data): spec.storageClassName: must be a string",
    ),
    "csinode-driver-without-a-name": (
        _broken(CSI, "spec.drivers.0.name", None),
        "(CSINode node-1): spec.drivers[0].name: is required",
    ),
    "attachment-without-an-attacher": (
        _broken(VA, "spec.attacher", None),
        "(VolumeAttachment va-1): spec.attacher: is required",
    ),
    "attachment-without-a-node": (
        _broken(VA, "spec.nodeName", ""),
        "(VolumeAttachment va-1): spec.nodeName: is required",
    ),
    "attachment-with-two-sources": (
        _broken(VA, "spec.source.inlineVolumeSpec", {}),
        "(VolumeAttachment va-1): spec.source: must name exactly one of",
    ),
    "attachment-without-a-source": (
        _broken(VA, "spec.source.persistentVolumeName", None),
        "(VolumeAttachment va-1): spec.source: must name exactly one of",
    ),
    "attachment-whose-volume-is-not-a-string": (
        _broken(VA, "spec.source.persistentVolumeName", ["pv-1"]),
        "(VolumeAttachment va-1): spec.source.persistentVolumeName:",
    ),
    "statefulset-claim-template-without-a-name": (
        _broken(STS, "spec.volumeClaimTemplates.0.metadata", None),
        "(StatefulSet default/db): "
        "spec.volumeClaimTemplates[0].metadata.name: every claim template needs a name",
    ),
    "statefulset-claim-template-without-a-size": (
        _broken(STS, "spec.volumeClaimTemplates.0.spec.resources", None),
        "(StatefulSet default/db): spec.volumeClaimTemplates[0].spec.resources.requests.storage: required",
    ),
    "ephemeral-volume-template-without-access-modes": (
        _broken(EPHEMERAL, "spec.volumes.0.ephemeral.volumeClaimTemplate.spec.accessModes", None),
        "(Pod default/web): spec.volumes[0].ephemeral.volumeClaimTemplate.spec.accessModes: "
        "at least 1 access mode is required",
    ),
    "unknown-api-version": (
        _broken(SC, "apiVersion", "storage.k8s.io/v1beta1"),
        "StorageClass must be storage.k8s.io/v1",
    ),
}


@pytest.mark.parametrize(("make", "expected"), list(CASES.values()), ids=list(CASES))
def test_malformed_storage_is_a_located_input_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: Callable[[], dict[str, Any]], expected: str
) -> None:
    code, _, err = run(capsys, tmp_path, [node("node-1"), make()])
    assert code == 2, err
    assert err.startswith(f"koordpy: invalid input: {tmp_path / 'input.yaml'}: document 2 "), err
    assert expected in err, err
    assert err.count("\n") == 1, err


def test_every_storage_kind_is_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": "csi.example.com"},
        "spec": {},
    }
    capacity = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": "cap", "namespace": "kube-system"},
        "storageClassName": "fast",
        "capacity": "100Gi",
    }
    code, report, err = run(capsys, tmp_path, [node("node-1"), SC, PV, PVC, CSI, driver, capacity, VA])
    assert code == 0, err
    assert report is not None
    assert [c["name"] for c in report["persistentVolumeClaims"]] == ["data"]
