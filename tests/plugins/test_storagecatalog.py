"""The storage catalog: objects in by the worlds' events, the assume cache over volumes and claims,
and malformed objects remembered with their located error."""

from __future__ import annotations

import dataclasses

from koordpy.api.storage import ClaimRef, PersistentVolume, PersistentVolumeClaim
from koordpy.plugins.storagecatalog import StorageCatalog
from tests.plugins.storage_objects import claim, csi_node, storage_class, volume


def catalog_with(*objects: dict[str, object]) -> StorageCatalog:
    catalog = StorageCatalog()
    for obj in objects:
        catalog.on_object(str(obj["kind"]), "Add", obj)
    return catalog


def test_reads_by_kind() -> None:
    catalog = catalog_with(
        claim("data", namespace="ns"),
        volume("pv1", storage_class="fast"),
        volume("pv2", storage_class="slow"),
        storage_class("fast"),
        csi_node("n1", {"d": 3}),
    )
    got = catalog.claim("ns", "data")
    assert got is not None and got.key == "ns/data"
    assert catalog.claim("default", "data") is None
    assert [pv.name for pv in catalog.volumes_of_class("fast")] == ["pv1"]
    assert catalog.storage_class("fast") is not None and catalog.storage_class("slow") is None
    node = catalog.csi_node("n1")
    assert node is not None and node.drivers["d"].allocatable_count == 3


def test_delete_forgets() -> None:
    catalog = catalog_with(volume("pv1", storage_class="fast"), claim("data"))
    catalog.on_object("PersistentVolume", "Delete", volume("pv1"))
    catalog.on_object("PersistentVolumeClaim", "Delete", claim("data"))
    assert catalog.volume("pv1") is None and catalog.volumes_of_class("fast") == ()
    assert catalog.claim("default", "data") is None


def test_volume_changing_class_moves_between_classes() -> None:
    catalog = catalog_with(volume("pv1", storage_class="fast"))
    catalog.on_object("PersistentVolume", "Update", volume("pv1", storage_class="slow", rv="2"))
    assert catalog.volumes_of_class("fast") == ()
    assert [pv.name for pv in catalog.volumes_of_class("slow")] == ["pv1"]


def test_default_class_is_the_newest() -> None:
    def default(name: str, created: str) -> dict[str, object]:
        obj = storage_class(name)
        obj["metadata"] = {
            "name": name,
            "creationTimestamp": created,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        }
        return obj

    catalog = catalog_with(
        default("old", "2020-01-01T00:00:00Z"),
        default("new-b", "2024-01-01T00:00:00Z"),
        default("new-a", "2024-01-01T00:00:00Z"),
        storage_class("plain"),
    )
    best = catalog.default_class()
    assert best is not None and best.name == "new-a"
    unset = PersistentVolumeClaim.from_dict(claim("c"))
    none_asked = PersistentVolumeClaim.from_dict(claim("c", storage_class=""))
    named = PersistentVolumeClaim.from_dict(claim("c", storage_class="plain"))
    assert catalog.claim_class(unset) is best
    assert catalog.claim_class(none_asked) is None
    got = catalog.claim_class(named)
    assert got is not None and got.name == "plain"
    assert catalog_with(storage_class("plain")).default_class() is None


# ----------------------------------------------------------------------------- the assume cache
def _bound_view(catalog: StorageCatalog) -> PersistentVolume:
    pv = catalog.volume("pv1")
    assert pv is not None
    return dataclasses.replace(pv, claim_ref=ClaimRef("default", "data", "u1"))


def test_assumed_view_is_read_until_restored() -> None:
    catalog = catalog_with(volume("pv1", storage_class="fast"), claim("data"))
    before = catalog.generation
    assumed = _bound_view(catalog)
    catalog.assume_volume(assumed)
    assert catalog.generation > before
    assert catalog.volume("pv1") is assumed
    assert catalog.volumes_of_class("fast") == (assumed,)
    assert catalog.is_assumed_volume("pv1")
    catalog.restore_volume("pv1")
    restored = catalog.volume("pv1")
    assert restored is not None and restored.claim_ref is None and not catalog.is_assumed_volume("pv1")


def test_informer_delivering_the_same_version_keeps_the_assumption() -> None:
    """A resync of the version the assumption was made on is no news."""
    catalog = catalog_with(volume("pv1", rv="5"))
    assumed = _bound_view(catalog)
    catalog.assume_volume(assumed)
    catalog.on_object("PersistentVolume", "Update", volume("pv1", rv="5"))
    assert catalog.volume("pv1") is assumed


def test_informer_delivering_another_version_replaces_the_assumption() -> None:
    catalog = catalog_with(volume("pv1", rv="5"))
    catalog.assume_volume(_bound_view(catalog))
    catalog.on_object("PersistentVolume", "Update", volume("pv1", rv="6", labels={"new": "yes"}))
    got = catalog.volume("pv1")
    assert got is not None and got.resource_version == "6" and got.claim_ref is None
    assert not catalog.is_assumed_volume("pv1")


def test_claims_are_assumed_alike() -> None:
    catalog = catalog_with(claim("data", rv="3"))
    api = catalog.claim("default", "data")
    assert api is not None
    assumed = dataclasses.replace(api, volume_name="pv1")
    catalog.assume_claim(assumed)
    assert catalog.claim("default", "data") is assumed
    catalog.on_object("PersistentVolumeClaim", "Update", claim("data", rv="3"))
    assert catalog.claim("default", "data") is assumed
    catalog.on_object("PersistentVolumeClaim", "Update", claim("data", rv="4", volume="pv1"))
    got = catalog.claim("default", "data")
    assert got is not None and got is not assumed and got.resource_version == "4"
    catalog.assume_claim(dataclasses.replace(got, volume_name="pv2"))
    catalog.restore_claim("default/data")
    assert catalog.claim("default", "data") is got


def test_assuming_an_unknown_object_does_nothing() -> None:
    catalog = StorageCatalog()
    catalog.assume_volume(PersistentVolume.from_dict(volume("pv1")))
    catalog.assume_claim(PersistentVolumeClaim.from_dict(claim("data")))
    assert catalog.volume("pv1") is None and catalog.claim("default", "data") is None


def test_delete_drops_the_assumption() -> None:
    catalog = catalog_with(volume("pv1"))
    catalog.assume_volume(_bound_view(catalog))
    catalog.on_object("PersistentVolume", "Delete", volume("pv1"))
    assert catalog.volume("pv1") is None


# ----------------------------------------------------------------------------- malformed objects
def test_malformed_object_is_remembered_not_absent() -> None:
    catalog = catalog_with(claim("data"))
    bad = claim("data", rv="2")
    bad["spec"]["accessModes"] = "ReadWriteOnce"
    catalog.on_object("PersistentVolumeClaim", "Update", bad)
    assert catalog.claim("default", "data") is None
    assert catalog.malformed("PersistentVolumeClaim", "default/data") == (
        "PersistentVolumeClaim default/data: spec.accessModes: expected a list, got str"
    )
    # fixed: the error is gone
    catalog.on_object("PersistentVolumeClaim", "Update", claim("data", rv="3"))
    assert catalog.malformed("PersistentVolumeClaim", "default/data") is None
    assert catalog.claim("default", "data") is not None


def test_malformed_object_forgotten_on_delete() -> None:
    bad = volume("pv1")
    bad["spec"]["capacity"] = {"storage": "huge"}
    catalog = catalog_with(bad)
    message = catalog.malformed("PersistentVolume", "pv1")
    assert message is not None and message.startswith("PersistentVolume pv1: spec.capacity.storage:")
    catalog.on_object("PersistentVolume", "Delete", bad)
    assert catalog.malformed("PersistentVolume", "pv1") is None


def test_capacities_by_class() -> None:
    def capacity(name: str, cls: str) -> dict[str, object]:
        return {
            "kind": "CSIStorageCapacity",
            "metadata": {"name": name, "namespace": "kube-system"},
            "storageClassName": cls,
            "capacity": "10Gi",
        }

    catalog = catalog_with(capacity("c1", "fast"), capacity("c2", "fast"), capacity("c3", "slow"))
    assert sorted(c.name for c in catalog.capacities("fast")) == ["c1", "c2"]
    catalog.on_object("CSIStorageCapacity", "Update", capacity("c1", "slow"))
    assert [c.name for c in catalog.capacities("fast")] == ["c2"]
    catalog.on_object("CSIStorageCapacity", "Delete", capacity("c2", "fast"))
    assert catalog.capacities("fast") == ()


# ----------------------------------------------------------------------------- VolumeAttachments
def _attachment(name: str, node: str, pv: str = "pv-1") -> dict[str, object]:
    return {
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": "disk.csi.example", "nodeName": node, "source": {"persistentVolumeName": pv}},
    }


def test_attachments_kept_per_node() -> None:
    catalog = catalog_with(
        _attachment("va1", "n1"), _attachment("va2", "n1", "pv-2"), _attachment("va3", "n2")
    )
    assert sorted(a.name for a in catalog.attachments_on("n1")) == ["va1", "va2"]
    assert [a.pv_name for a in catalog.attachments_on("n2")] == ["pv-1"]
    assert catalog.attachments_on("n3") == ()
    before = catalog.attachments_generation
    # moved to another node: gone from the first
    catalog.on_object("VolumeAttachment", "Update", _attachment("va1", "n2"))
    assert [a.name for a in catalog.attachments_on("n1")] == ["va2"]
    assert sorted(a.name for a in catalog.attachments_on("n2")) == ["va1", "va3"]
    catalog.on_object("VolumeAttachment", "Delete", _attachment("va2", "n1", "pv-2"))
    assert catalog.attachments_on("n1") == ()
    assert catalog.attachment_count("n2") == 2
    assert catalog.attachments_generation == before + 2


def test_malformed_attachment_is_remembered_and_leaves_its_node() -> None:
    catalog = catalog_with(_attachment("va1", "n1"))
    bad = _attachment("va1", "n1")
    bad["spec"] = {"attacher": "disk.csi.example", "nodeName": ["n1"]}
    catalog.on_object("VolumeAttachment", "Update", bad)
    assert catalog.attachments_on("n1") == ()
    assert catalog.malformed("VolumeAttachment", "va1") == (
        "VolumeAttachment va1: spec.nodeName: expected a string, got list"
    )
    catalog.on_object("VolumeAttachment", "Delete", bad)
    assert catalog.malformed("VolumeAttachment", "va1") is None
