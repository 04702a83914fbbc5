"""What the volume plugins (VolumeRestrictions, VolumeZone, NodeVolumeLimits) share: looking a
pod's claim up in the storage catalog with kube-scheduler's messages, and the queueing hints that
read raw storage objects."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from koordpy.api.pod import Pod
from koordpy.api.storage import PersistentVolumeClaim
from koordpy.framework.interfaces import QueueingHint
from koordpy.framework.status import Status, unresolvable
from koordpy.plugins.storagecatalog import PERSISTENT_VOLUME_CLAIM, StorageCatalog


def claim_not_found(name: str) -> str:
    """The API's NotFound error for a claim, as kube-scheduler passes it on."""
    return f'persistentvolumeclaim "{name}" not found'


def lookup_claim(
    catalog: StorageCatalog, namespace: str, name: str
) -> tuple[PersistentVolumeClaim | None, Status | None]:
    """The claim, or why the pod cannot use it: it did not parse (the located error), or it does
    not exist (kube: UnschedulableAndUnresolvable with the lister's NotFound)."""
    bad = catalog.malformed(PERSISTENT_VOLUME_CLAIM, f"{namespace}/{name}")
    if bad is not None:
        return None, unresolvable(bad)
    claim = catalog.claim(namespace, name)
    if claim is None:
        return None, unresolvable(claim_not_found(name))
    return claim, None


def volume_shape(pod: Pod) -> Hashable:
    """What the volume plugins' hints read of a pod: its namespace and volumes."""
    return (pod.namespace, pod.volumes)


def meta_of(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def namespace_and_name(obj: Any) -> tuple[str, str]:
    """A raw object's namespace ("default" when unset) and name, read leniently."""
    meta = meta_of(obj)
    namespace, name = meta.get("namespace"), meta.get("name")
    return (
        namespace if isinstance(namespace, str) and namespace else "default",
        name if isinstance(name, str) else "",
    )


def labels_of(obj: Any) -> Mapping[str, Any]:
    labels = meta_of(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def claim_added_hint(pod: Pod, new: Any, *, ephemeral: bool) -> QueueingHint:
    """A claim the pod uses was created (or updated): the pod may now get past the lookup.
    `ephemeral`: whether generic ephemeral volumes' claims count (NodeVolumeLimits) or only named
    claims (VolumeRestrictions, VolumeZone)."""
    namespace, name = namespace_and_name(new)
    if namespace != pod.namespace:
        return QueueingHint.QUEUE_SKIP
    for volume in pod.volumes:
        if volume.claim_name == name and (ephemeral or not volume.ephemeral):
            return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP
