"""The storage views: fields read as the API means them, and malformed input refused with the
field named, whatever JSON value it holds."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from koordpy.api.errors import SpecError
from koordpy.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)

GIB = 1 << 30


def pv(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]}
    base.update(spec)
    return {"metadata": {"name": "pv1", "resourceVersion": "7", "labels": {"a": "b"}}, "spec": base}


def pvc(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "accessModes": ["ReadWriteOncePod"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    base.update(spec)
    return {"metadata": {"name": "data", "namespace": "ns"}, "spec": base}


# ----------------------------------------------------------------------------- PersistentVolume
def test_persistent_volume_fields() -> None:
    obj = pv(
        storageClassName="fast",
        volumeMode="Block",
        csi={"driver": "d", "volumeHandle": "h"},
        claimRef={"namespace": "ns", "name": "data", "uid": "u"},
        nodeAffinity={
            "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}
        },
    )
    obj["status"] = {"phase": "Bound"}
    view = PersistentVolume.from_dict(obj)
    assert (view.name, view.key, view.resource_version, view.capacity) == ("pv1", "pv1", "7", 10 * GIB)
    assert view.access_modes == frozenset({"ReadWriteOnce"})
    assert (view.storage_class, view.volume_mode, view.phase) == ("fast", "Block", "Bound")
    assert (view.csi_driver, view.volume_handle, view.in_tree_plugin) == ("d", "h", "")
    assert view.claim_ref is not None and view.claim_ref.key == "ns/data"
    assert view.node_affinity is not None and view.node_affinity.matches({"k": "v"}, "n")
    assert view.raw is obj and not view.deleting


def test_persistent_volume_beta_class_annotation_wins() -> None:
    obj = pv(storageClassName="spec-class")
    obj["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "beta-class"}
    assert PersistentVolume.from_dict(obj).storage_class == "beta-class"


MIGRATIONS = [
    (
        {"gcePersistentDisk": {"pdName": "d1"}},
        {},
        "pd.csi.storage.gke.io",
        "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d1",
    ),
    (
        {"gcePersistentDisk": {"pdName": "d1"}},
        {"topology.kubernetes.io/zone": "us-a1-b"},
        "pd.csi.storage.gke.io",
        "projects/UNSPECIFIED/zones/us-a1-b/disks/d1",
    ),
    (
        {"gcePersistentDisk": {"pdName": "d1"}},
        {"topology.kubernetes.io/zone": "us-a1-b__us-a1-c"},
        "pd.csi.storage.gke.io",
        "projects/UNSPECIFIED/regions/us-a1/disks/d1",
    ),
    ({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-12"}}, {}, "ebs.csi.aws.com", "vol-12"),
    ({"awsElasticBlockStore": {"volumeID": "vol-12"}}, {}, "ebs.csi.aws.com", "vol-12"),
    ({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/bad"}}, {}, "ebs.csi.aws.com", ""),
    ({"azureDisk": {"diskName": "n", "diskURI": "/sub/d"}}, {}, "disk.csi.azure.com", "/sub/d"),
    ({"cinder": {"volumeID": "c1"}}, {}, "cinder.csi.openstack.org", "c1"),
    ({"portworxVolume": {"volumeID": "p1"}}, {}, "pxd.portworx.com", "p1"),
    ({"nfs": {"server": "s", "path": "/"}}, {}, "", ""),
]


@pytest.mark.parametrize(("source", "labels", "driver", "handle"), MIGRATIONS)
def test_in_tree_volumes_translate_to_their_csi_driver(
    source: dict[str, Any], labels: dict[str, str], driver: str, handle: str
) -> None:
    obj = pv(**source)
    obj["metadata"]["labels"] = labels
    view = PersistentVolume.from_dict(obj)
    assert (view.csi_driver, view.volume_handle) == (driver, handle)
    assert bool(view.in_tree_plugin) == bool(driver)


# ----------------------------------------------------------------------------- PersistentVolumeClaim
def test_claim_fields() -> None:
    obj = pvc(storageClassName="", selector={"matchLabels": {"tier": "gold"}}, volumeName="pv1")
    obj["metadata"]["annotations"] = {
        "volume.kubernetes.io/selected-node": "n1",
        "pv.kubernetes.io/bind-completed": "yes",
    }
    obj["metadata"]["ownerReferences"] = [{"uid": "p1", "controller": True}]
    obj["status"] = {"phase": "Bound"}
    view = PersistentVolumeClaim.from_dict(obj)
    assert (view.namespace, view.name, view.key) == ("ns", "data", "ns/data")
    assert view.storage_class == ""  # asks for no class
    assert view.request == GIB and view.access_modes == frozenset({"ReadWriteOncePod"})
    assert view.selector is not None and view.selector.matches({"tier": "gold"})
    assert (view.volume_name, view.phase, view.selected_node, view.bind_completed) == (
        "pv1",
        "Bound",
        "n1",
        True,
    )
    assert view.controller_uid == "p1" and view.volume_mode == "Filesystem"


def test_claim_class_unset_and_annotated() -> None:
    assert PersistentVolumeClaim.from_dict(pvc()).storage_class is None
    obj = pvc(storageClassName="spec")
    obj["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "beta"}
    assert PersistentVolumeClaim.from_dict(obj).storage_class == "beta"
    obj = pvc()
    obj["metadata"]["namespace"] = None
    assert PersistentVolumeClaim.from_dict(obj).key == "default/data"


# ----------------------------------------------------------------------------- the other kinds
def test_storage_class_fields() -> None:
    obj = {
        "metadata": {
            "name": "fast",
            "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"},
            "creationTimestamp": "2024-01-02T03:04:05Z",
        },
        "provisioner": "csi.example.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "parameters": {"type": "ssd"},
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}],
    }
    view = StorageClass.from_dict(obj)
    assert (view.name, view.provisioner, view.binding_mode, view.is_default) == (
        "fast",
        "csi.example.com",
        "WaitForFirstConsumer",
        True,
    )
    assert view.parameters == {"type": "ssd"} and view.creation_ts > 0
    assert view.allowed_topologies is not None
    assert view.allowed_topologies.matches({"zone": "b"}, "n") and not view.allowed_topologies.matches(
        {}, "n"
    )
    plain = StorageClass.from_dict({"metadata": {"name": "s"}, "provisioner": "p"})
    assert (plain.binding_mode, plain.is_default, plain.allowed_topologies) == ("Immediate", False, None)


def test_csi_node_fields() -> None:
    obj = {
        "metadata": {"name": "n1", "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "a,b"}},
        "spec": {
            "drivers": [
                {"name": "d1", "nodeID": "x", "topologyKeys": ["zone"], "allocatable": {"count": 3}},
                {"name": "d2", "nodeID": "y"},
            ]
        },
    }
    view = CSINode.from_dict(obj)
    assert view.name == "n1" and view.migrated_plugins == frozenset({"a", "b"})
    assert view.drivers["d1"].allocatable_count == 3 and view.drivers["d1"].topology_keys == ("zone",)
    assert view.drivers["d2"].allocatable_count is None


def test_csi_driver_defaults() -> None:
    view = CSIDriver.from_dict({"metadata": {"name": "d"}})
    assert (view.attach_required, view.storage_capacity) == (True, False)
    view = CSIDriver.from_dict(
        {"metadata": {"name": "d"}, "spec": {"attachRequired": False, "storageCapacity": True}}
    )
    assert (view.attach_required, view.storage_capacity) == (False, True)
    assert not view.prevent_scheduling_if_missing
    view = CSIDriver.from_dict({"metadata": {"name": "d"}, "spec": {"preventPodSchedulingIfMissing": True}})
    assert view.prevent_scheduling_if_missing


def test_csi_storage_capacity_fields() -> None:
    obj = {
        "metadata": {"name": "c1", "namespace": "kube-system"},
        "storageClassName": "fast",
        "capacity": "100Gi",
        "nodeTopology": {"matchLabels": {"zone": "a"}},
    }
    view = CSIStorageCapacity.from_dict(obj)
    assert (view.key, view.storage_class, view.capacity, view.maximum_volume_size) == (
        "kube-system/c1",
        "fast",
        100 * GIB,
        None,
    )
    assert view.node_topology is not None and view.node_topology.matches({"zone": "a"})


def attachment(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"attacher": "disk.csi.example", "nodeName": "node-7"}
    base.update(spec)
    return {"metadata": {"name": "va-7"}, "spec": base, "status": {"attached": False}}


def test_volume_attachment_fields() -> None:
    view = VolumeAttachment.from_dict(attachment(source={"persistentVolumeName": "pv-7"}))
    assert (view.name, view.attacher, view.node_name, view.pv_name) == (
        "va-7",
        "disk.csi.example",
        "node-7",
        "pv-7",
    )
    inline = VolumeAttachment.from_dict(attachment(source={"inlineVolumeSpec": {"csi": {"driver": "d"}}}))
    assert inline.pv_name == ""


# ----------------------------------------------------------------------------- located errors
ERRORS = [
    (PersistentVolume, pv(capacity={"storage": "ten"}), "spec.capacity.storage"),
    (PersistentVolume, pv(capacity={"storage": "-1Gi"}), "spec.capacity.storage"),
    (PersistentVolume, pv(accessModes=["ReadWriteSometimes"]), "spec.accessModes[0]"),
    (PersistentVolume, pv(volumeMode="Raw"), "spec.volumeMode"),
    (PersistentVolume, pv(csi={"driver": "d"}), "spec.csi.volumeHandle"),
    (
        PersistentVolume,
        pv(nodeAffinity={"required": {"nodeSelectorTerms": []}}),
        "spec.nodeAffinity.required.nodeSelectorTerms",
    ),
    (PersistentVolume, pv(claimRef={"name": 3}), "spec.claimRef.name"),
    (PersistentVolume, {"metadata": {}}, "metadata.name"),
    (
        PersistentVolumeClaim,
        pvc(resources={"requests": {"storage": True}}),
        "spec.resources.requests.storage",
    ),
    (PersistentVolumeClaim, pvc(selector={"matchLabels": {"a": 1}}), "spec.selector.matchLabels[a]"),
    (PersistentVolumeClaim, pvc(storageClassName=5), "spec.storageClassName"),
    (StorageClass, {"metadata": {"name": "s"}}, "provisioner"),
    (
        StorageClass,
        {"metadata": {"name": "s"}, "provisioner": "p", "volumeBindingMode": "Later"},
        "volumeBindingMode",
    ),
    (
        StorageClass,
        {
            "metadata": {"name": "s"},
            "provisioner": "p",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "k"}]}],
        },
        "allowedTopologies[0].matchLabelExpressions[0].values",
    ),
    (
        CSINode,
        {"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]}},
        "spec.drivers[0].allocatable.count",
    ),
    (
        CSINode,
        {"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d"}, {"name": "d"}]}},
        "spec.drivers[1].name",
    ),
    (CSIDriver, {"metadata": {"name": "d"}, "spec": {"attachRequired": "yes"}}, "spec.attachRequired"),
    (CSIStorageCapacity, {"metadata": {"name": "c"}}, "storageClassName"),
    (CSIStorageCapacity, {"metadata": {"name": "c"}, "storageClassName": "s", "capacity": [1]}, "capacity"),
    (VolumeAttachment, attachment(source={"persistentVolumeName": 7}), "spec.source.persistentVolumeName"),
    (VolumeAttachment, attachment(source="pv-7"), "spec.source"),
    (VolumeAttachment, attachment(attacher=["d"]), "spec.attacher"),
    (VolumeAttachment, attachment(nodeName=1), "spec.nodeName"),
    (VolumeAttachment, {"spec": {}}, "metadata.name"),
]


@pytest.mark.parametrize(("cls", "obj", "path"), ERRORS)
def test_malformed_input_names_the_field(cls: Any, obj: dict[str, Any], path: str) -> None:
    with pytest.raises(SpecError) as caught:
        cls.from_dict(obj)
    assert caught.value.path == path


VALID: list[tuple[Any, dict[str, Any]]] = [
    (
        PersistentVolume,
        pv(
            csi={"driver": "d", "volumeHandle": "h"},
            claimRef={"name": "c"},
            gcePersistentDisk={"pdName": "p"},
        ),
    ),
    (
        PersistentVolumeClaim,
        pvc(selector={"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}),
    ),
    (
        StorageClass,
        {
            "metadata": {"name": "s"},
            "provisioner": "p",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "k", "values": ["v"]}]}],
        },
    ),
    (
        CSINode,
        {
            "metadata": {"name": "n"},
            "spec": {"drivers": [{"name": "d", "topologyKeys": ["z"], "allocatable": {"count": 2}}]},
        },
    ),
    (CSIDriver, {"metadata": {"name": "d"}, "spec": {"attachRequired": True}}),
    (
        CSIStorageCapacity,
        {"metadata": {"name": "c"}, "storageClassName": "s", "capacity": "1Gi", "nodeTopology": {}},
    ),
    (VolumeAttachment, attachment(source={"persistentVolumeName": "pv-7"})),
]
ODD_VALUES: list[Any] = [
    None,
    0,
    -1,
    2**70,
    1.5,
    float("nan"),
    True,
    "",
    "x",
    "-5Gi",
    [],
    [None],
    {},
    {"k": None},
]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@pytest.mark.parametrize(("cls", "obj"), VALID, ids=[c.__name__ for c, _ in VALID])
def test_any_value_anywhere_gives_a_view_or_a_spec_error(cls: Any, obj: dict[str, Any]) -> None:
    cls.from_dict(obj)
    for path in _paths(obj):
        for value in ODD_VALUES:
            changed: Any = copy.deepcopy(obj)
            if not path:
                changed = value
            else:
                holder = changed
                for step in path[:-1]:
                    holder = holder[step]
                holder[path[-1]] = value
            with contextlib.suppress(SpecError):
                cls.from_dict(changed)
