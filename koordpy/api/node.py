"""The scheduler's immutable view of a Node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.resources import ResourceList, parse_resource_list
from koordpy.api.taints import Taint
from koordpy.api.time import parse_timestamp

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
_INT64_MAX = 2**63 - 1
# Image sizes are summed per pod in int64 arrays (ImageLocality), whose score saturates at 1000 MiB
# per container: sizes are capped at 1 PiB, which leaves room for thousands of images in one sum and
# changes no score.
MAX_IMAGE_BYTES = 2**50


@dataclass(frozen=True, slots=True)
class NodeImage:
    names: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: ResourceList
    images: tuple[NodeImage, ...]
    creation_ts: float
    spec_error: SpecError | None
    raw: Mapping[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        return f"Node({self.name})"

    @staticmethod
    def from_dict(obj: Mapping[str, Any], *, creation_ts: float | None = None) -> Node:
        return parse_node(obj, creation_ts=creation_ts)


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise SpecError(path, f"expected an object, got {type(obj).__name__}")
    return obj


def _parse(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels"), "metadata.labels").items()}
    annotations = {
        str(k): str(v) for k, v in _mapping(meta.get("annotations"), "metadata.annotations").items()
    }
    raw_taints = spec.get("taints") or []
    if not isinstance(raw_taints, list):
        raise SpecError("spec.taints", "expected a list")
    taints = tuple(
        Taint.from_dict(_mapping(t, f"spec.taints[{i}]"), f"spec.taints[{i}]")
        for i, t in enumerate(raw_taints)
    )
    source = "status.allocatable" if status.get("allocatable") else "status.capacity"
    allocatable = parse_resource_list(status.get("allocatable") or status.get("capacity"), source)
    images = []
    raw_images = status.get("images") or []
    if not isinstance(raw_images, list):
        raise SpecError("status.images", "expected a list")
    for i, img in enumerate(raw_images):
        img = _mapping(img, f"status.images[{i}]")
        names = img.get("names") or []
        size = img.get("sizeBytes") or 0
        # an image of a size no int64 holds is left out, as one of no size at all
        if isinstance(names, list) and type(size) is int and 0 <= size <= _INT64_MAX:
            images.append(NodeImage(tuple(str(n) for n in names), min(size, MAX_IMAGE_BYTES)))
    return {
        "labels": labels,
        "annotations": annotations,
        "taints": taints,
        "unschedulable": spec.get("unschedulable") is True,
        "allocatable": allocatable,
        "images": tuple(images),
    }


def parse_node(obj: Mapping[str, Any], *, creation_ts: float | None = None) -> Node:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name = str(meta.get("name") or "")
    error: SpecError | None = None
    try:
        fields = _parse(obj)
    except SpecError as err:
        error = err
        fields = {
            "labels": {},
            "annotations": {},
            "taints": (),
            "unschedulable": True,
            "allocatable": {},
            "images": (),
        }
    labels = fields["labels"]
    if name and HOSTNAME_LABEL not in labels and error is None:
        # The kubelet always sets the hostname label; manifests written by hand often omit it.
        labels = {**labels, HOSTNAME_LABEL: name}
        fields["labels"] = labels
    ts = creation_ts if creation_ts is not None else parse_timestamp(meta.get("creationTimestamp"))
    return Node(
        name=name,
        uid=str(meta.get("uid") or name),
        creation_ts=ts or 0.0,
        spec_error=error,
        raw=obj,
        **fields,
    )
