"""The storage objects of a scenario, and the claims its other objects make.

- StorageClass, PersistentVolume, PersistentVolumeClaim, CSINode, CSIDriver, CSIStorageCapacity
  and VolumeAttachment documents are each checked by building the typed view the scheduler
  builds of them, and by the API server's validation of what a claim, a volume and an attachment
  must hold (a storage size, an access mode; an attacher, a node, one source): an object the
  API server would refuse is an input error, located in its document.
- A StatefulSet's controller creates a claim per volumeClaimTemplate and ordinal, named
  `<template>-<statefulset>-<ordinal>`, labelled with the template's labels and the set's
  selector, and gives the pod a volume of that name naming it (kube's updateStorage). A claim of
  that name that exists already is used as it is, as the controller uses it.
- The ephemeral volume controller creates a claim `<pod>-<volume>` for each generic ephemeral volume
  of a pod, controlled by the pod, when the pod is created (see koordpy.simulate.volumes).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError, join_path
from koordpy.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)
from koordpy.simulate.objects import Entry
from koordpy.simulate.typecheck import type_name

__all__ = [
    "CLAIM",
    "STORAGE_KINDS",
    "VOLUME",
    "StorageObject",
    "check_claim",
    "check_ephemeral_volumes",
    "claim_templates",
    "ephemeral_claims",
    "read_storage",
    "stateful_claim",
    "with_claim_volumes",
]

CLAIM = "PersistentVolumeClaim"
VOLUME = "PersistentVolume"
# in the order the world creates those of one instant: a claim finds the classes and volumes it
# binds to already there, as on a cluster whose storage was set up before its workloads
STORAGE_KINDS = (
    "StorageClass",
    "CSIDriver",
    "CSINode",
    VOLUME,
    CLAIM,
    "CSIStorageCapacity",
    # after the volumes it names, as a node's attachments come after the volumes
    "VolumeAttachment",
)


@dataclass(frozen=True, slots=True)
class StorageObject:
    """A storage object of the scenario, as read (or as a StatefulSet's controller made it)."""

    kind: str
    namespace: str
    name: str
    raw: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


def _first_error(modes: Any, field: str) -> SpecError | None:
    if not isinstance(modes, list) or not modes:
        return SpecError(field, "at least 1 access mode is required")
    return None


def _storage_value(section: Any) -> Any:
    return section.get("storage") if isinstance(section, Mapping) else None


def check_claim(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    """The claim's view; raises SpecError where the view cannot be built or where the API server's
    validation refuses the claim (no access mode, no storage request)."""
    claim = PersistentVolumeClaim.from_dict(obj)
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    error = _first_error(spec.get("accessModes"), "spec.accessModes")
    if error is not None:
        raise error
    resources = spec.get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    if _storage_value(requests) is None:
        raise SpecError("spec.resources.requests.storage", "required: the size the claim asks for")
    return claim


def _check_volume(obj: Mapping[str, Any]) -> PersistentVolume:
    volume = PersistentVolume.from_dict(obj)
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if _storage_value(spec.get("capacity")) is None:
        raise SpecError("spec.capacity.storage", "required: the size of the volume")
    error = _first_error(spec.get("accessModes"), "spec.accessModes")
    if error is not None:
        raise error
    return volume


def _check_attachment(obj: Mapping[str, Any]) -> VolumeAttachment:
    """The API server's validation of what the scheduler reads: an attacher, a node, and one
    source (a PV's name or an inline volume's spec)."""
    attachment = VolumeAttachment.from_dict(obj)
    if not attachment.attacher:
        raise SpecError("spec.attacher", "is required")
    if not attachment.node_name:
        raise SpecError("spec.nodeName", "is required")
    spec = obj.get("spec")
    source = spec.get("source") if isinstance(spec, Mapping) else None
    inline = source.get("inlineVolumeSpec") if isinstance(source, Mapping) else None
    if bool(attachment.pv_name) == (inline is not None):
        raise SpecError("spec.source", "must name exactly one of persistentVolumeName, inlineVolumeSpec")
    return attachment


_VIEWS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "StorageClass": StorageClass.from_dict,
    "CSIDriver": CSIDriver.from_dict,
    "CSINode": CSINode.from_dict,
    VOLUME: _check_volume,
    CLAIM: check_claim,
    "CSIStorageCapacity": CSIStorageCapacity.from_dict,
    "VolumeAttachment": _check_attachment,
}


def read_storage(entry: Entry) -> StorageObject:
    """The storage object of `entry`; raises ScenarioError, naming the field, when it is malformed."""
    try:
        _VIEWS[entry.kind](entry.obj)
    except SpecError as err:
        raise entry.spec_error(err) from err
    return StorageObject(entry.kind, entry.namespace, entry.name, entry.obj)


# --- StatefulSet ----------------------------------------------------------------------------------


def _template_name(template: Mapping[str, Any]) -> str:
    meta = template.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def claim_templates(entry: Entry) -> list[Mapping[str, Any]]:
    """A StatefulSet's volumeClaimTemplates, each checked as the claim it makes."""
    spec = entry.obj.get("spec")
    templates = spec.get("volumeClaimTemplates") if isinstance(spec, Mapping) else None
    if not templates:
        return []
    out: list[Mapping[str, Any]] = []
    names: set[str] = set()
    for i, template in enumerate(templates):
        at = f"spec.volumeClaimTemplates[{i}]"
        if not isinstance(template, Mapping):
            raise entry.error(at, f"expected an object, got {type_name(template)}")
        name = _template_name(template)
        if not name:
            raise entry.error(join_path(at, "metadata.name"), "every claim template needs a name")
        if name in names:
            raise entry.error(join_path(at, "metadata.name"), f"duplicate claim template {name!r}")
        names.add(name)
        try:
            check_claim(stateful_claim(entry, template, 0))
        except SpecError as err:
            raise entry.spec_error(err, at) from err
        out.append(template)
    return out


def _string_map(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def stateful_claim(entry: Entry, template: Mapping[str, Any], ordinal: int) -> dict[str, Any]:
    """The claim the StatefulSet's controller creates from `template` for the pod `ordinal`."""
    meta = _string_map(template.get("metadata"))
    labels = _string_map(meta.get("labels"))
    spec = entry.obj.get("spec")
    selector = spec.get("selector") if isinstance(spec, Mapping) else None
    # kube's getPersistentVolumeClaims: the set's selector labels too, so that the set finds them
    labels.update(_string_map(selector.get("matchLabels") if isinstance(selector, Mapping) else None))
    claim_meta: dict[str, Any] = {
        "name": f"{_template_name(template)}-{entry.name}-{ordinal}",
        "namespace": entry.namespace,
        "labels": labels,
    }
    annotations = _string_map(meta.get("annotations"))
    if annotations:
        claim_meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": CLAIM,
        "metadata": claim_meta,
        "spec": copy.deepcopy(_string_map(template.get("spec"))),
    }


def with_claim_volumes(
    spec: Mapping[str, Any], templates: list[Mapping[str, Any]], set_name: str, ordinal: int
) -> dict[str, Any]:
    """The pod spec with a volume per claim template naming its claim, in place of a volume of the
    same name (kube's updateStorage), then the pod's other volumes."""
    claims = {name: f"{name}-{set_name}-{ordinal}" for name in map(_template_name, templates)}
    volumes: list[Any] = [
        {"name": name, "persistentVolumeClaim": {"claimName": claim}} for name, claim in claims.items()
    ]
    own = spec.get("volumes")
    for volume in own if isinstance(own, list) else []:
        if not (isinstance(volume, Mapping) and volume.get("name") in claims):
            volumes.append(volume)
    return {**spec, "volumes": volumes}


# --- generic ephemeral volumes -------------------------------------------------------------------


def _ephemeral_templates(spec: Any) -> list[tuple[int, str, Mapping[str, Any]]]:
    """(index, volume name, claim template) of each generic ephemeral volume in a pod spec."""
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    out: list[tuple[int, str, Mapping[str, Any]]] = []
    for i, volume in enumerate(volumes if isinstance(volumes, list) else []):
        ephemeral = volume.get("ephemeral") if isinstance(volume, Mapping) else None
        if not isinstance(ephemeral, Mapping):
            continue
        name = volume.get("name")
        template = ephemeral.get("volumeClaimTemplate")
        out.append((i, name if isinstance(name, str) else "", _string_map(template)))
    return out


def _ephemeral_claim(
    namespace: str, pod_name: str, pod_uid: str, volume: str, template: Mapping[str, Any]
) -> dict[str, Any]:
    meta = _string_map(template.get("metadata"))
    claim_meta: dict[str, Any] = {
        "name": f"{pod_name}-{volume}",
        "namespace": namespace,
        # the pod controls its claim: the scheduler uses no claim of that name that another made
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_name,
                "uid": pod_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    for field in ("labels", "annotations"):
        values = _string_map(meta.get(field))
        if values:
            claim_meta[field] = values
    return {
        "apiVersion": "v1",
        "kind": CLAIM,
        "metadata": claim_meta,
        "spec": copy.deepcopy(_string_map(template.get("spec"))),
    }


def ephemeral_claims(pod: Mapping[str, Any], uid: str) -> list[dict[str, Any]]:
    """The claims the ephemeral volume controller creates for `pod` (an API dict, whose uid is
    `uid`)."""
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
    return [
        _ephemeral_claim(namespace, name, uid, volume, template)
        for _, volume, template in _ephemeral_templates(pod.get("spec"))
    ]


def check_ephemeral_volumes(entry: Entry, spec: Any, under: str) -> None:
    """Raises ScenarioError when a generic ephemeral volume's claim template (in the pod spec at
    `under`) is one the API server refuses: its claim could never be created."""
    for i, volume, template in _ephemeral_templates(spec):
        at = f"{under}.volumes[{i}].ephemeral.volumeClaimTemplate"
        try:
            check_claim(_ephemeral_claim(entry.namespace, "pod", "", volume or "volume", template))
        except SpecError as err:
            raise entry.spec_error(err, at) from err
