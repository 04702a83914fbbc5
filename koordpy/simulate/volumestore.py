"""The storage objects of the in-memory cluster as the API server holds them: each write under a
new resourceVersion (the scheduler's assume cache tells its own assumptions from newer objects by
it), handed to the scheduler as its informer would hand it; claims defaulted and admitted (the
DefaultStorageClass admission plugin); the typed view of each object, and the indexes the
controllers of koordpy.simulate.volumes look volumes up by."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.storage import (
    BETA_STORAGE_CLASS_ANNOTATION,
    WAIT_FOR_FIRST_CONSUMER,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from koordpy.api.time import format_timestamp
from koordpy.framework.clock import VirtualClock
from koordpy.scheduler import Scheduler
from koordpy.simulate.claims import CLAIM, STORAGE_KINDS, VOLUME, check_claim

__all__ = ["AVAILABLE", "BOUND", "VolumeStore", "bound_to", "meta_of", "section", "with_sections"]

BOUND = "Bound"
AVAILABLE = "Available"
# the namespace of the uids given to the objects that have none: one per object and creation
_UIDS = uuid.UUID("6f1d3c52-2b8e-4d55-9a57-6b1ac5c0e1d4")


def meta_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return dict(meta) if isinstance(meta, Mapping) else {}


def section(obj: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = obj.get(name)
    return dict(value) if isinstance(value, Mapping) else {}


def with_sections(obj: Mapping[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    return {**obj, **sections}


def bound_to(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """kube's IsVolumeBoundToClaim: the claimRef names the claim, with its uid or none."""
    ref = pv.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.uid


class VolumeStore:
    """The storage objects of the in-memory cluster, their views and indexes."""

    def __init__(self, scheduler: Scheduler, clock: VirtualClock) -> None:
        self.scheduler = scheduler
        self.clock = clock
        # the objects as the API server holds them, by kind and key (ns/name, or name)
        self.raw: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in STORAGE_KINDS}
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csi_nodes: dict[str, CSINode] = {}
        self.node_labels: dict[str, Mapping[str, str]] = {}
        # the volumes of each class, and the volume whose claimRef names each claim
        self._of_class: dict[str, dict[str, None]] = {}
        self._named: dict[str, str] = {}
        self._version = 0
        self._creations = 0

    # ----------------------------------------------------------------------------- the API server
    def _create(self, kind: str, obj: Mapping[str, Any]) -> None:
        """The API server's create: a uid, a creation time, the defaults of the kind."""
        meta = meta_of(obj)
        namespaced = kind in (CLAIM, "CSIStorageCapacity")
        if namespaced:
            meta.setdefault("namespace", "default")
        key = f"{meta['namespace']}/{meta['name']}" if namespaced else str(meta["name"])
        self._creations += 1
        if not meta.get("uid"):
            meta["uid"] = str(uuid.uuid5(_UIDS, f"{kind}/{key}/{self._creations}"))
        meta.setdefault("creationTimestamp", format_timestamp(self.clock.now()))
        obj = with_sections(obj, metadata=meta)
        if kind == CLAIM:
            # the API server's defaulting, then admission's
            obj = self._admit(with_sections(obj, status={"phase": "Pending", **section(obj, "status")}))
        elif kind == VOLUME and not section(obj, "status").get("phase"):
            # the PV controller's first look at a new volume
            obj = with_sections(obj, status={**section(obj, "status"), "phase": AVAILABLE})
        self._write(kind, key, obj, "Add")
        self._created(kind, key)

    def _created(self, kind: str, key: str) -> None:
        """What the controllers do when an object is created: see VolumeWorld."""

    def _write(self, kind: str, key: str, obj: dict[str, Any], action: str = "Update") -> None:
        """Store `obj` under a new resourceVersion and hand it to the scheduler."""
        self._version += 1
        obj = with_sections(obj, metadata={**meta_of(obj), "resourceVersion": str(self._version)})
        store = self.raw[kind]
        old = store.get(key)
        store[key] = obj
        self._index(kind, key, obj)
        if action == "Add" or old is None:
            self.scheduler.on_object(kind, "Add", obj)
        else:
            self.scheduler.on_object(kind, "Update", obj, old)

    def _delete(self, kind: str, key: str) -> None:
        obj = self.raw[kind].pop(key, None)
        if obj is None:
            return
        self._index(kind, key, None)
        self.scheduler.on_object(kind, "Delete", obj)

    def _index(self, kind: str, key: str, obj: Mapping[str, Any] | None) -> None:
        if kind == VOLUME:
            old = self.volumes.pop(key, None)
            if old is not None:
                self._of_class.get(old.storage_class, {}).pop(key, None)
                if old.claim_ref is not None and self._named.get(old.claim_ref.key) == key:
                    del self._named[old.claim_ref.key]
            pv = _parsed(PersistentVolume.from_dict, obj)
            if pv is not None:
                self.volumes[key] = pv
                self._of_class.setdefault(pv.storage_class, {})[key] = None
                if pv.claim_ref is not None:
                    self._named[pv.claim_ref.key] = key
        elif kind == CLAIM:
            self.claims.pop(key, None)
            claim = _parsed(check_claim, obj)
            if claim is not None:
                self.claims[key] = claim
        elif kind == "StorageClass":
            self.classes.pop(key, None)
            sc = _parsed(StorageClass.from_dict, obj)
            if sc is not None:
                self.classes[key] = sc
        elif kind == "CSINode":
            self.csi_nodes.pop(key, None)
            csi = _parsed(CSINode.from_dict, obj)
            if csi is not None:
                self.csi_nodes[key] = csi

    # ----------------------------------------------------------------------------- classes
    def _default_class(self) -> StorageClass | None:
        """kube: the newest of the classes marked default (by name when created at once)."""
        defaults = [c for c in self.classes.values() if c.is_default]
        return max(defaults, key=lambda c: (c.creation_ts, c.name), default=None)

    def _admit(self, obj: dict[str, Any]) -> dict[str, Any]:
        """DefaultStorageClass admission: a claim that names no class gets the default one."""
        spec = section(obj, "spec")
        if "storageClassName" in spec and spec["storageClassName"] is not None:
            return obj
        if BETA_STORAGE_CLASS_ANNOTATION in (meta_of(obj).get("annotations") or {}):
            return obj
        default = self._default_class()
        if default is None:
            return obj
        return with_sections(obj, spec={**spec, "storageClassName": default.name})

    def _delayed(self, claim: PersistentVolumeClaim) -> bool:
        sc = self._class_of(claim)
        return sc is not None and sc.binding_mode == WAIT_FOR_FIRST_CONSUMER

    def _class_of(self, claim: PersistentVolumeClaim) -> StorageClass | None:
        return self.classes.get(claim.storage_class) if claim.storage_class else None

    def _fully_bound(self, key: str) -> bool:
        claim = self.claims.get(key)
        if claim is None or not claim.volume_name or not claim.bind_completed or claim.phase != BOUND:
            return False
        pv = self.volumes.get(claim.volume_name)
        return pv is not None and pv.claim_ref is not None and pv.claim_ref.uid == claim.uid


def _parsed(parse: Callable[[Mapping[str, Any]], Any], obj: Mapping[str, Any] | None) -> Any:
    """The view of an object this world holds; None for one gone, or one whose view cannot be
    built (the input's were checked when loaded: only an object made here could be one)."""
    if obj is None:
        return None
    try:
        return parse(obj)
    except SpecError:
        return None
