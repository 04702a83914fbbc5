"""Storage objects a scheduler cannot read, or lost, on a cluster: the informers keep watching, a
malformed object is held by the storage catalog with its located error (never as absent) and a pod
that needs it waits with that error, and the audit puts back a storage object the catalog lost, as
it does nodes and pods."""

from __future__ import annotations

from koordpy.kubeapi.informer import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    VOLUME_ATTACHMENTS,
)
from koordpy.plugins.storagecatalog import STORAGE_CATALOG, StorageCatalog
from tests.cluster.test_volume_bindings import claim, volume
from tests.cluster.world_support import POD_STATUS, Cluster, Start, pending_pod
from tests.support.fakeapi import until


def catalog_of(cluster: Cluster) -> StorageCatalog:
    catalog = cluster.scheduler.shared.get(STORAGE_CATALOG)
    assert catalog is not None, "the default profile's volume plugins share a catalog"
    return catalog


async def test_a_malformed_volume_is_held_as_malformed_and_the_watch_goes_on(start: Start) -> None:
    cluster = await start()
    catalog = catalog_of(cluster)
    volumes = cluster.fake.watch(PERSISTENT_VOLUMES.path)
    await volumes.watching()
    bad = volume("pv-bad")
    bad["spec"]["capacity"] = {"storage": "lots"}
    bad["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": "n1"}}
    volumes.added(bad)
    volumes.added(volume("pv-good"))
    await until(lambda: catalog.volume("pv-good") is not None, what="the volume after the bad ones")
    problem = catalog.malformed("PersistentVolume", "pv-bad")
    assert problem is not None and "pv-bad" in problem
    assert catalog.volume("pv-bad") is None
    # nothing the audit should put back: the malformed volume is known as such
    assert [f for f in cluster.world.integrity.audit() if "PersistentVolume" in f] == []
    assert cluster.world.health_problems() == []


async def test_a_malformed_claim_or_csinode_is_held_as_malformed(start: Start) -> None:
    cluster = await start()
    catalog = catalog_of(cluster)
    claims, csi_nodes = cluster.fake.watch(PERSISTENT_VOLUME_CLAIMS.path), cluster.fake.watch(CSI_NODES.path)
    await claims.watching()
    await csi_nodes.watching()
    bad_claim = claim("data")
    bad_claim["spec"]["resources"] = {"requests": {"storage": "-1Gi"}}
    claims.added(bad_claim)
    csi_nodes.added({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": 7}]}})
    await until(lambda: catalog.malformed("CSINode", "n1") is not None, what="the CSINode held as malformed")
    await until(
        lambda: catalog.malformed("PersistentVolumeClaim", "default/data") is not None, what="the claim"
    )
    assert catalog.claim("default", "data") is None


async def test_the_audit_puts_back_a_volume_the_catalog_lost(start: Start) -> None:
    cluster = await start()
    catalog = catalog_of(cluster)
    volumes, claims = (
        cluster.fake.watch(PERSISTENT_VOLUMES.path),
        cluster.fake.watch(PERSISTENT_VOLUME_CLAIMS.path),
    )
    await volumes.watching()
    await claims.watching()
    pv, pvc = volume("pv-1"), claim("data")
    volumes.added(pv)
    claims.added(pvc)
    await until(lambda: catalog.claim("default", "data") is not None, what="the claim")
    await until(lambda: catalog.volume("pv-1") is not None, what="the volume")
    # lost, as a handler failure could lose it
    catalog.on_object("PersistentVolume", "Delete", pv)
    catalog.on_object("PersistentVolumeClaim", "Delete", pvc)
    found = cluster.world.integrity.audit()
    assert "PersistentVolume pv-1 missing from the storage catalog" in found
    assert "PersistentVolumeClaim default/data missing from the storage catalog" in found
    assert catalog.volume("pv-1") is not None and catalog.claim("default", "data") is not None
    assert [f for f in cluster.world.integrity.audit() if "storage" in f] == []


async def test_attachments_are_watched_per_node_and_put_back_when_lost(start: Start) -> None:
    cluster = await start()
    catalog = catalog_of(cluster)
    attachments = cluster.fake.watch(VOLUME_ATTACHMENTS.path)
    await attachments.watching()
    va = {
        "metadata": {"name": "va-3"},
        "spec": {
            "attacher": "disk.csi.example",
            "nodeName": "n1",
            "source": {"persistentVolumeName": "pv-3"},
        },
    }
    attachments.added(va)
    await until(lambda: len(catalog.attachments_on("n1")) == 1, what="the attachment on n1")
    catalog.on_object("VolumeAttachment", "Delete", va)
    assert "VolumeAttachment va-3 missing from the storage catalog" in cluster.world.integrity.audit()
    assert [a.pv_name for a in catalog.attachments_on("n1")] == ["pv-3"]


async def test_a_pod_whose_claim_is_malformed_waits_with_a_message_naming_it(start: Start) -> None:
    cluster = await start()
    claims = cluster.fake.watch(PERSISTENT_VOLUME_CLAIMS.path)
    await claims.watching()
    bad = claim("data")
    bad["spec"]["resources"] = {"requests": {"storage": "lots"}}
    claims.added(bad)
    await until(lambda: catalog_of(cluster).malformed("PersistentVolumeClaim", "default/data") is not None)
    pod = pending_pod("p")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    await cluster.fake.watch(PODS.path).watching()
    cluster.fake.watch(PODS.path).added(pod)
    (patch,) = await cluster.fake.wait_for("PATCH", POD_STATUS)
    (condition,) = patch.body["status"]["conditions"]
    assert condition["status"] == "False"
    assert (
        "default/data" in condition["message"] and "spec.resources.requests.storage" in condition["message"]
    )
    assert cluster.bindings() == []
