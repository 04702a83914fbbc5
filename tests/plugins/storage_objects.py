"""API-shaped storage objects for the volume plugins' tests, and a harness that feeds them to the
scheduler's storage catalog."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.plugins.storagecatalog import StorageCatalog
from tests.builders import Harness, pod_dict


def claim(
    name: str,
    *,
    namespace: str = "default",
    modes: Sequence[str] = ("ReadWriteOnce",),
    volume: str = "",
    storage_class: str | None = None,
    request: str = "1Gi",
    owner_uid: str = "",
    rv: str = "1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": request}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if owner_uid:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "x", "uid": owner_uid, "controller": True}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def volume(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    csi: tuple[str, str] | None = None,
    source: Mapping[str, Any] | None = None,
    storage_class: str = "",
    rv: str = "1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if storage_class:
        spec["storageClassName"] = storage_class
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    spec.update(source or {})
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {}), "resourceVersion": rv},
        "spec": spec,
    }


def storage_class(name: str, provisioner: str = "csi.example.com", *, wait: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate",
    }


def csi_node(name: str, limits: Mapping[str, int | None]) -> dict[str, Any]:
    drivers = []
    for driver, count in limits.items():
        entry: dict[str, Any] = {"name": driver, "nodeID": f"{name}-{driver}"}
        if count is not None:
            entry["allocatable"] = {"count": count}
        drivers.append(entry)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": drivers},
    }


def attachment(name: str, node: str, pv: str = "", attacher: str = "ebs.csi.aws.com") -> dict[str, Any]:
    """A VolumeAttachment of the PV `pv` (none: an inline volume's) to `node`."""
    source: dict[str, Any] = {"persistentVolumeName": pv} if pv else {"inlineVolumeSpec": {}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": attacher, "nodeName": node, "source": source},
        "status": {"attached": True},
    }


def claim_volume(name: str, claim_name: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim_name, "readOnly": read_only}}


def ephemeral_volume(name: str) -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}


def with_volumes(
    name: str,
    *volumes: Mapping[str, Any],
    node_name: str = "",
    namespace: str = "default",
    uid: str = "",
) -> dict[str, Any]:
    obj = pod_dict(
        name, node_name=node_name, namespace=namespace, spec={"volumes": [dict(v) for v in volumes]}
    )
    if uid:
        obj["metadata"]["uid"] = uid
    return obj


def pod_with(name: str, *volumes: Mapping[str, Any], **kw: Any) -> Pod:
    return Pod.from_dict(with_volumes(name, *volumes, **kw))


KINDS = {
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "VolumeAttachment",
}


class StorageHarness(Harness):
    """A Harness whose scheduler's storage catalog holds the given objects."""

    def __init__(
        self,
        nodes: Sequence[Node | dict[str, Any]],
        pods: Sequence[Pod | dict[str, Any]] = (),
        plugins: Sequence[str] = (),
        objects: Sequence[Mapping[str, Any]] = (),
        **kw: Any,
    ) -> None:
        super().__init__(nodes, pods, plugins, **kw)
        self.catalog = StorageCatalog.shared(self.handle)
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping[str, Any], action: str = "Add") -> None:
        kind = obj["kind"]
        assert kind in KINDS, kind
        self.catalog.on_object(kind, action, obj)
