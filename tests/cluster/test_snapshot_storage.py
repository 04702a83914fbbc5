"""`koordpy snapshot` captures the storage objects a pod's placement depends on (PersistentVolumes,
their claims, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities, VolumeAttachments), each
with what the plugins read, and the volumes of the pods that refer to them."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, cast

import yaml

from koordpy.cluster.snapshot import KINDS, dump_document, strip_object, take_snapshot
from koordpy.kubeapi.client import ApiError, KubeApi
from koordpy.kubeapi.informer import STORAGE

STORAGE_PATHS = {r.kind: r.path for r in STORAGE}
PODS = "/api/v1/pods"


class ListingApi:
    """Lists of an apiserver holding `objects` by path, in one page; other paths answer 404."""

    base = "https://apiserver.test"

    def __init__(self, objects: Mapping[str, Sequence[dict[str, Any]]]) -> None:
        self.objects = objects
        self.paths: list[str] = []

    async def request(
        self, method: str, path: str, *, query: Sequence[tuple[str, str]] | None = None, **_: Any
    ) -> dict[str, Any]:
        assert method == "GET"
        self.paths.append(path)
        if path not in self.objects:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        selector = dict(query or ()).get("fieldSelector", "")
        items = list(self.objects[path])
        if path == PODS:
            # pods on nodes, or pending ones
            on_node = "spec.nodeName!=" in selector
            items = [p for p in items if bool(p["spec"].get("nodeName")) == on_node]
        return {"metadata": {}, "items": items}


MANAGED = [{"manager": "kubectl", "operation": "Update"}]
LAST_APPLIED = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}


def local_volume() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "pv-1",
            "uid": "uid-pv-1",
            "resourceVersion": "9",
            "managedFields": MANAGED,
            "annotations": {"pv.kubernetes.io/bound-by-controller": "yes", **LAST_APPLIED},
        },
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "local": {"path": "/mnt/disk"},
            "claimRef": {"namespace": "team", "name": "data-0", "uid": "uid-data-0"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
                            ]
                        }
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    }


def data_claim() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "data-0",
            "namespace": "team",
            "uid": "uid-data-0",
            "resourceVersion": "11",
            "annotations": {
                "volume.kubernetes.io/selected-node": "n1",
                "pv.kubernetes.io/bind-completed": "yes",
                **LAST_APPLIED,
            },
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "local",
            "volumeName": "pv-1",
        },
        "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}},
    }


def storage_objects() -> dict[str, list[dict[str, Any]]]:
    return {
        STORAGE_PATHS["StorageClass"]: [
            {
                "metadata": {
                    "name": "local",
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true", **LAST_APPLIED},
                },
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Delete",
            }
        ],
        STORAGE_PATHS["CSIDriver"]: [
            {
                "metadata": {"name": "ebs.csi.aws.com"},
                "spec": {"attachRequired": True, "storageCapacity": True},
            }
        ],
        STORAGE_PATHS["CSINode"]: [
            {
                "metadata": {
                    "name": "n1",
                    "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"},
                },
                "spec": {
                    "drivers": [
                        {
                            "name": "ebs.csi.aws.com",
                            "nodeID": "i-1",
                            "topologyKeys": ["topology.ebs.csi.aws.com/zone"],
                            "allocatable": {"count": 25},
                        }
                    ]
                },
            }
        ],
        STORAGE_PATHS["PersistentVolume"]: [local_volume()],
        STORAGE_PATHS["PersistentVolumeClaim"]: [data_claim()],
        STORAGE_PATHS["CSIStorageCapacity"]: [
            {
                "metadata": {"name": "cap-a", "namespace": "kube-system", "resourceVersion": "3"},
                "storageClassName": "ebs",
                "nodeTopology": {"matchLabels": {"topology.ebs.csi.aws.com/zone": "a"}},
                "capacity": "100Gi",
                "maximumVolumeSize": "16Ti",
            }
        ],
        STORAGE_PATHS["VolumeAttachment"]: [
            {
                "metadata": {"name": "csi-0a1b", "resourceVersion": "12", "managedFields": MANAGED},
                "spec": {
                    "attacher": "ebs.csi.aws.com",
                    "nodeName": "n1",
                    "source": {"persistentVolumeName": "pv-1"},
                },
                "status": {"attached": True, "attachmentMetadata": {"devicePath": "/dev/xvdba"}},
            }
        ],
    }


def pod_with_volumes(name: str, node: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "schedulerName": "koord-scheduler",
            "containers": [
                {"name": "main", "image": "app", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}
            ],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                {"name": "config", "configMap": {"name": "app"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        },
        "status": {"phase": "Pending"},
    }


async def snapshot(objects: Mapping[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    out = io.StringIO()
    # the kinds every apiserver serves, empty; the custom resources are not served
    served: dict[str, list[dict[str, Any]]] = {k.path: [] for k in KINDS if not k.optional}
    api = ListingApi({**served, PODS: [], **objects})
    await take_snapshot(
        cast(KubeApi, api), lambda obj: out.write(dump_document(obj)), ["koord-scheduler"], 0.0
    )
    return list(yaml.safe_load_all(out.getvalue()))


def test_storage_kinds_are_read_after_the_nodes_and_before_the_pods() -> None:
    kinds = [k.kind for k in KINDS]
    assert kinds.index("Node") < min(kinds.index(r.kind) for r in STORAGE)
    assert {r.kind for r in STORAGE} <= set(kinds)


async def test_each_storage_kind_is_kept_with_what_the_plugins_read() -> None:
    docs = await snapshot({**storage_objects(), PODS: [pod_with_volumes("app-0")]})
    by_kind = {d["kind"]: d for d in docs}
    assert [d["kind"] for d in docs] == [
        "StorageClass",
        "CSIDriver",
        "CSINode",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "CSIStorageCapacity",
        "VolumeAttachment",
        "Pod",
    ]
    pv = by_kind["PersistentVolume"]
    # the uid a claimRef names, the binding annotation; no namespace, version or tooling's fields
    assert pv["metadata"] == {
        "name": "pv-1",
        "uid": "uid-pv-1",
        "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
    }
    assert pv["spec"] == local_volume()["spec"] and pv["status"] == {"phase": "Bound"}
    pvc = by_kind["PersistentVolumeClaim"]
    assert pvc["metadata"] == {
        "name": "data-0",
        "namespace": "team",
        "uid": "uid-data-0",
        "annotations": {"volume.kubernetes.io/selected-node": "n1", "pv.kubernetes.io/bind-completed": "yes"},
    }
    assert pvc["spec"]["volumeName"] == "pv-1" and pvc["status"]["phase"] == "Bound"
    assert by_kind["StorageClass"] == {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    csi_node = by_kind["CSINode"]
    assert "namespace" not in csi_node["metadata"]
    assert csi_node["metadata"]["annotations"] == {
        "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"
    }
    assert csi_node["spec"]["drivers"][0]["allocatable"] == {"count": 25}
    assert by_kind["CSIDriver"]["spec"] == {"attachRequired": True, "storageCapacity": True}
    capacity = by_kind["CSIStorageCapacity"]
    assert capacity["metadata"] == {"name": "cap-a", "namespace": "kube-system"}
    assert (capacity["storageClassName"], capacity["capacity"], capacity["maximumVolumeSize"]) == (
        "ebs",
        "100Gi",
        "16Ti",
    )
    assert capacity["nodeTopology"] == {"matchLabels": {"topology.ebs.csi.aws.com/zone": "a"}}
    attached = by_kind["VolumeAttachment"]
    raw_attached = storage_objects()[STORAGE_PATHS["VolumeAttachment"]][0]
    # cluster-scoped: no namespace; spec and status as they are
    assert attached["metadata"] == {"name": "csi-0a1b"}
    assert (attached["spec"], attached["status"]) == (raw_attached["spec"], raw_attached["status"])


def test_a_pod_keeps_the_volumes_a_plugin_reads() -> None:
    raw = pod_with_volumes("app-0")
    raw["spec"]["volumes"] += [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "fast"}}}},
        {"name": "disk", "gcePersistentDisk": {"pdName": "d1", "readOnly": True}},
    ]
    pod = strip_object("Pod", "v1", raw)
    assert pod["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "fast"}}}},
        {"name": "disk", "gcePersistentDisk": {"pdName": "d1", "readOnly": True}},
    ]
    # an ephemeral volume's claim is the pod's by its owner reference: the uid is kept for it
    assert pod["metadata"]["uid"] == "uid-app-0"
    # a pod without one keeps no uid, and a pod without volumes the plugins read keeps none
    assert "uid" not in strip_object("Pod", "v1", pod_with_volumes("app-1"))["metadata"]
    plain = pod_with_volumes("app-2")
    plain["spec"]["volumes"] = [{"name": "config", "configMap": {"name": "app"}}]
    assert "volumes" not in strip_object("Pod", "v1", plain)["spec"]


async def test_a_storage_kind_the_apiserver_does_not_serve_holds_nothing() -> None:
    objects = storage_objects()
    del objects[STORAGE_PATHS["CSIStorageCapacity"]]
    docs = await snapshot(objects)
    assert "CSIStorageCapacity" not in {d["kind"] for d in docs}
    assert "PersistentVolume" in {d["kind"] for d in docs}
