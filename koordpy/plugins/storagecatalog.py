"""The one view of storage objects the volume plugins of a scheduler share: PersistentVolumes,
PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities and
VolumeAttachments (kept per node), fed by the
world's object events under one shared key.

Volumes and claims go through an assume cache, as kube-scheduler's AssumeCache: VolumeBinding
records the binding it decided (`assume_volume`, `assume_claim`) before the API server has it, and
every reader sees the assumed view until the informer delivers a version other than the one the
assumption was made on (the API server's word then wins), the object is deleted, or the
assumption is restored. An object that does not parse is remembered with its located error
(`malformed`), never treated as absent: a pod that needs it waits with that message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from koordpy.api.errors import SpecError
from koordpy.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
    object_key,
)
from koordpy.framework.handle import Handle, SharedKey

PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "StorageClass"
CSI_NODE = "CSINode"
CSI_DRIVER = "CSIDriver"
CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
VOLUME_ATTACHMENT = "VolumeAttachment"
KINDS = (
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    CSI_NODE,
    CSI_DRIVER,
    CSI_STORAGE_CAPACITY,
    VOLUME_ATTACHMENT,
)

STORAGE_CATALOG: SharedKey[StorageCatalog] = SharedKey("storage_catalog")

V = TypeVar("V", PersistentVolume, PersistentVolumeClaim)


@dataclass(slots=True)
class _Assumable(Generic[V]):
    """One volume or claim: what the informer delivered and, while assumed, the newer view."""

    api: V
    assumed: V | None = None

    @property
    def latest(self) -> V:
        return self.assumed if self.assumed is not None else self.api


class StorageCatalog:
    def __init__(self) -> None:
        # bumps on every change, assumptions and restores included (keys caches of what was read)
        self.generation = 0
        # bumps when a CSINode changes (what per-node volume limits are read from)
        self.csi_nodes_generation = 0
        # bumps when a VolumeAttachment changes (what the per-node bound on attached volumes reads)
        self.attachments_generation = 0
        self._volumes: dict[str, _Assumable[PersistentVolume]] = {}
        self._claims: dict[str, _Assumable[PersistentVolumeClaim]] = {}
        # the latest view of each volume, by class: what static binding matches claims against
        self._volumes_by_class: dict[str, dict[str, PersistentVolume]] = {}
        self._classes: dict[str, StorageClass] = {}
        self._csi_nodes: dict[str, CSINode] = {}
        self._csi_drivers: dict[str, CSIDriver] = {}
        self._capacities: dict[str, CSIStorageCapacity] = {}
        self._capacities_by_class: dict[str, dict[str, CSIStorageCapacity]] = {}
        self._attachments: dict[str, VolumeAttachment] = {}
        # node name -> attachment name -> attachment: what NodeVolumeLimits counts per node
        self._attachments_by_node: dict[str, dict[str, VolumeAttachment]] = {}
        # (kind, key) -> the message a pod needing the object waits with
        self._malformed: dict[tuple[str, str], str] = {}

    @staticmethod
    def shared(handle: Handle) -> StorageCatalog:
        """The scheduler's one catalog, subscribed to the seven kinds on first use."""

        def create() -> StorageCatalog:
            catalog = StorageCatalog()
            for kind in KINDS:
                handle.on_object_event(kind, catalog.handler(kind))
            return catalog

        return handle.share(STORAGE_CATALOG, create)

    def handler(self, kind: str) -> Callable[[str, Mapping[str, Any]], None]:
        def on_event(action: str, obj: Mapping[str, Any]) -> None:
            self.on_object(kind, action, obj)

        return on_event

    # ------------------------------------------------------------------------- events in
    def on_object(self, kind: str, action: str, obj: Mapping[str, Any]) -> None:
        """An Add, Update or Delete of one of the seven kinds, as the world delivers it."""
        key = object_key(kind, obj)
        self.generation += 1
        if kind == CSI_NODE:
            self.csi_nodes_generation += 1
        elif kind == VOLUME_ATTACHMENT:
            self.attachments_generation += 1
        if action == "Delete":
            self._malformed.pop((kind, key), None)
            self._drop(kind, key)
            return
        parse = _PARSERS.get(kind)
        if parse is None:
            return
        try:
            view = parse(obj)
        except SpecError as err:
            # the old view no longer describes the object: drop it, and say why
            self._drop(kind, key)
            self._malformed[(kind, key)] = f"{kind} {key}: {err}"
            return
        self._malformed.pop((kind, key), None)
        if isinstance(view, PersistentVolume):
            self._set_volume(view)
        elif isinstance(view, PersistentVolumeClaim):
            self._set_claim(view)
        elif isinstance(view, StorageClass):
            self._classes[view.name] = view
        elif isinstance(view, CSINode):
            self._csi_nodes[view.name] = view
        elif isinstance(view, CSIDriver):
            self._csi_drivers[view.name] = view
        elif isinstance(view, CSIStorageCapacity):
            self._drop(kind, view.key)
            self._capacities[view.key] = view
            self._capacities_by_class.setdefault(view.storage_class, {})[view.key] = view
        elif isinstance(view, VolumeAttachment):
            # an update may move it to another node (re-index, never leave it on the old one)
            self._drop(kind, view.name)
            self._attachments[view.name] = view
            self._attachments_by_node.setdefault(view.node_name, {})[view.name] = view

    def _set_volume(self, pv: PersistentVolume) -> None:
        entry = self._volumes.get(pv.name)
        if entry is None:
            self._volumes[pv.name] = _Assumable(pv)
        else:
            self._unindex_volume(entry.latest)
            if entry.assumed is not None and _replaces(pv.resource_version, entry.api.resource_version):
                entry.assumed = None
            entry.api = pv
        self._index_volume(self._volumes[pv.name].latest)

    def _set_claim(self, claim: PersistentVolumeClaim) -> None:
        entry = self._claims.get(claim.key)
        if entry is None:
            self._claims[claim.key] = _Assumable(claim)
            return
        if entry.assumed is not None and _replaces(claim.resource_version, entry.api.resource_version):
            entry.assumed = None
        entry.api = claim

    def _drop(self, kind: str, key: str) -> None:
        if kind == PERSISTENT_VOLUME:
            entry = self._volumes.pop(key, None)
            if entry is not None:
                self._unindex_volume(entry.latest)
        elif kind == PERSISTENT_VOLUME_CLAIM:
            self._claims.pop(key, None)
        elif kind == STORAGE_CLASS:
            self._classes.pop(key, None)
        elif kind == CSI_NODE:
            self._csi_nodes.pop(key, None)
        elif kind == CSI_DRIVER:
            self._csi_drivers.pop(key, None)
        elif kind == CSI_STORAGE_CAPACITY:
            old = self._capacities.pop(key, None)
            if old is not None:
                by_class = self._capacities_by_class.get(old.storage_class, {})
                by_class.pop(key, None)
                if not by_class:
                    self._capacities_by_class.pop(old.storage_class, None)
        elif kind == VOLUME_ATTACHMENT:
            attachment = self._attachments.pop(key, None)
            if attachment is not None:
                on_node = self._attachments_by_node.get(attachment.node_name, {})
                on_node.pop(key, None)
                if not on_node:
                    self._attachments_by_node.pop(attachment.node_name, None)

    def _index_volume(self, pv: PersistentVolume) -> None:
        self._volumes_by_class.setdefault(pv.storage_class, {})[pv.name] = pv

    def _unindex_volume(self, pv: PersistentVolume) -> None:
        by_class = self._volumes_by_class.get(pv.storage_class)
        if by_class is not None:
            by_class.pop(pv.name, None)
            if not by_class:
                del self._volumes_by_class[pv.storage_class]

    # ------------------------------------------------------------------------- reads
    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        entry = self._claims.get(f"{namespace}/{name}")
        return entry.latest if entry is not None else None

    def volume(self, name: str) -> PersistentVolume | None:
        entry = self._volumes.get(name)
        return entry.latest if entry is not None else None

    def volumes_of_class(self, class_name: str) -> Sequence[PersistentVolume]:
        by_class = self._volumes_by_class.get(class_name)
        return tuple(by_class.values()) if by_class else ()

    def storage_class(self, name: str) -> StorageClass | None:
        return self._classes.get(name)

    def default_class(self) -> StorageClass | None:
        """kube's GetDefaultClass: of the classes marked default, the newest; the first by name
        among the newest."""
        best: StorageClass | None = None
        for sc in self._classes.values():
            if not sc.is_default:
                continue
            if (
                best is None
                or sc.creation_ts > best.creation_ts
                or (sc.creation_ts == best.creation_ts and sc.name < best.name)
            ):
                best = sc
        return best

    def claim_class(self, claim: PersistentVolumeClaim) -> StorageClass | None:
        """The class a claim gets: the default one when it names none (unset), none when it asks
        for "" explicitly."""
        if claim.storage_class is None:
            return self.default_class()
        if not claim.storage_class:
            return None
        return self._classes.get(claim.storage_class)

    def csi_node(self, node_name: str) -> CSINode | None:
        return self._csi_nodes.get(node_name)

    def csi_driver(self, name: str) -> CSIDriver | None:
        return self._csi_drivers.get(name)

    def capacities(self, class_name: str) -> Sequence[CSIStorageCapacity]:
        by_class = self._capacities_by_class.get(class_name)
        return tuple(by_class.values()) if by_class else ()

    def attachments_on(self, node_name: str) -> Sequence[VolumeAttachment]:
        """The VolumeAttachments that name `node_name` (kube's index by spec.nodeName)."""
        on_node = self._attachments_by_node.get(node_name)
        return tuple(on_node.values()) if on_node else ()

    def attachment(self, name: str) -> VolumeAttachment | None:
        return self._attachments.get(name)

    def attachment_count(self, node_name: str) -> int:
        on_node = self._attachments_by_node.get(node_name)
        return len(on_node) if on_node else 0

    def malformed(self, kind: str, key: str) -> str | None:
        """Why the object of `kind` under `key` (ns/name, or the name of a cluster-scoped object)
        could not be read, naming the object and the field; None when it is fine or unknown."""
        if not self._malformed:
            return None
        return self._malformed.get((kind, key))

    # ------------------------------------------------------------------------- the assume cache
    def assume_volume(self, pv: PersistentVolume) -> None:
        entry = self._volumes.get(pv.name)
        if entry is None:
            # not (or no longer) known from the API server: nothing to assume over
            return
        self._unindex_volume(entry.latest)
        entry.assumed = pv
        self._index_volume(pv)
        self.generation += 1

    def assume_claim(self, claim: PersistentVolumeClaim) -> None:
        entry = self._claims.get(claim.key)
        if entry is None:
            return
        entry.assumed = claim
        self.generation += 1

    def restore_volume(self, name: str) -> None:
        entry = self._volumes.get(name)
        if entry is None or entry.assumed is None:
            return
        self._unindex_volume(entry.assumed)
        entry.assumed = None
        self._index_volume(entry.api)
        self.generation += 1

    def restore_claim(self, key: str) -> None:
        entry = self._claims.get(key)
        if entry is None or entry.assumed is None:
            return
        entry.assumed = None
        self.generation += 1

    def is_assumed_volume(self, name: str) -> bool:
        entry = self._volumes.get(name)
        return entry is not None and entry.assumed is not None

    def is_assumed_claim(self, key: str) -> bool:
        entry = self._claims.get(key)
        return entry is not None and entry.assumed is not None


def _replaces(delivered: str, assumed_on: str) -> bool:
    """Whether an informer's object ends an assumption made on the version `assumed_on`: any other
    version is newer news from the API server. Without versions (a simulator's objects may carry
    none) every delivery is news."""
    return not delivered or delivered != assumed_on


_PARSERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    PERSISTENT_VOLUME: PersistentVolume.from_dict,
    PERSISTENT_VOLUME_CLAIM: PersistentVolumeClaim.from_dict,
    STORAGE_CLASS: StorageClass.from_dict,
    CSI_NODE: CSINode.from_dict,
    CSI_DRIVER: CSIDriver.from_dict,
    CSI_STORAGE_CAPACITY: CSIStorageCapacity.from_dict,
    VOLUME_ATTACHMENT: VolumeAttachment.from_dict,
}
