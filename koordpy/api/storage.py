"""Storage objects as scheduling reads them: PersistentVolume, PersistentVolumeClaim, StorageClass,
CSINode, CSIDriver, CSIStorageCapacity, VolumeAttachment. Each view is built once per object;
malformed input raises a SpecError naming the field, whatever JSON value sits in any field (the
catalog remembers the error, and a pod needing the object waits with it rather than being placed
as if it were absent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from koordpy.api.errors import SpecError
from koordpy.api.fields import flag as _flag
from koordpy.api.fields import items as _list
from koordpy.api.fields import mapping as _mapping
from koordpy.api.fields import str_map as _str_map
from koordpy.api.fields import string as _string
from koordpy.api.fields import strings as _strings
from koordpy.api.labels import LabelSelector
from koordpy.api.nodeselector import IN, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from koordpy.api.podvolumes import (
    AWS_EBS,
    AZURE_DISK,
    CINDER,
    GCE_PD,
    IN_TREE_PLUGIN,
    MIGRATED_DRIVER,
    PORTWORX,
    ebs_volume_id,
)
from koordpy.api.podvolumes import InlineVolume as InlineVolume
from koordpy.api.podvolumes import PodVolume as PodVolume
from koordpy.api.quantity import QuantityError, parse_quantity, to_int
from koordpy.api.time import parse_timestamp

READ_WRITE_ONCE = "ReadWriteOnce"
READ_ONLY_MANY = "ReadOnlyMany"
READ_WRITE_MANY = "ReadWriteMany"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ACCESS_MODES = frozenset((READ_WRITE_ONCE, READ_ONLY_MANY, READ_WRITE_MANY, READ_WRITE_ONCE_POD))
FILESYSTEM = "Filesystem"
BLOCK = "Block"
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_DEFAULT_CLASS_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"

_INT32_MAX = 2**31 - 1
T = TypeVar("T")


# ----------------------------------------------------------------------------- field readers
def _bytes(obj: Any, path: str) -> int | None:
    """A storage quantity in bytes (rounded up, as Quantity.Value()); None when absent."""
    if obj is None:
        return None
    if isinstance(obj, bool) or not isinstance(obj, str | int | float):
        raise SpecError(path, f"expected a quantity, got {type(obj).__name__}")
    try:
        value = to_int(parse_quantity(obj))
    except QuantityError as err:
        raise SpecError(path, str(err)) from None
    if value < 0:
        raise SpecError(path, f"must not be negative, got {obj!r}")
    return value


def _access_modes(obj: Any, path: str) -> frozenset[str]:
    modes = _list(obj, path)
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            raise SpecError(
                f"{path}[{i}]", f"unsupported access mode {mode!r}; valid: {', '.join(sorted(ACCESS_MODES))}"
            )
    return frozenset(modes)


def _volume_mode(obj: Any, path: str) -> str:
    mode = _string(obj, path) or FILESYSTEM
    if mode not in (FILESYSTEM, BLOCK):
        raise SpecError(path, f"must be Filesystem or Block, got {mode!r}")
    return mode


@dataclass(frozen=True, slots=True)
class _Meta:
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    deleting: bool
    creation_ts: float


def _meta(obj: Mapping[str, Any], namespaced: bool) -> _Meta:
    meta = _mapping(obj.get("metadata"), "metadata")
    name = _string(meta.get("name"), "metadata.name")
    if not name:
        raise SpecError("metadata.name", "is required")
    namespace = _string(meta.get("namespace"), "metadata.namespace") or ("default" if namespaced else "")
    created = parse_timestamp(meta.get("creationTimestamp"))
    return _Meta(
        namespace=namespace,
        name=name,
        uid=_string(meta.get("uid"), "metadata.uid"),
        resource_version=_string(meta.get("resourceVersion"), "metadata.resourceVersion"),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        deleting=meta.get("deletionTimestamp") is not None,
        creation_ts=created if created is not None else 0.0,
    )


def _parsed(kind: str, build: Callable[[Mapping[str, Any]], T], obj: Any) -> T:
    """Run a parser so that nothing but a SpecError leaves it, whatever `obj` holds."""
    if not isinstance(obj, Mapping):
        raise SpecError("", f"a {kind} must be an object, got {type(obj).__name__}")
    try:
        return build(obj)
    except SpecError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as err:
        raise SpecError("", f"malformed {kind}: {err}") from None


# ----------------------------------------------------------------------------- PersistentVolume
@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _gce_handle(pd_name: str, labels: Mapping[str, str]) -> str:
    """csi-translation-lib's handle for a GCE PD PV: zonal from its zone label, regional when the
    label lists several zones (`a__b`)."""
    beta, zone = labels.get(BETA_ZONE_LABEL, ""), labels.get(ZONE_LABEL, "")
    if beta and zone and beta != zone:
        return ""  # the translation refuses labels that disagree
    zones = [z for z in (zone or beta).split("__") if z]
    if not zones:
        return f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{pd_name}"
    if len(zones) == 1:
        return f"projects/UNSPECIFIED/zones/{zones[0]}/disks/{pd_name}"
    region = zones[0].rsplit("-", 1)[0]
    return f"projects/UNSPECIFIED/regions/{region}/disks/{pd_name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    capacity: int
    access_modes: frozenset[str]
    storage_class: str
    volume_mode: str
    node_affinity: NodeSelector | None
    claim_ref: ClaimRef | None
    phase: str
    deleting: bool
    # the CSI driver and volume handle the volume counts as (a migrated in-tree volume's driver
    # and translated handle); "" when it is neither CSI nor migratable
    csi_driver: str
    in_tree_plugin: str
    volume_handle: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.name

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> PersistentVolume:
        return _parsed("PersistentVolume", _parse_pv, obj)


def _parse_pv(obj: Mapping[str, Any]) -> PersistentVolume:
    meta = _meta(obj, namespaced=False)
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    capacity = _mapping(spec.get("capacity"), "spec.capacity")
    # kube's GetPersistentVolumeClass: the beta annotation, when present, wins over the field
    if BETA_STORAGE_CLASS_ANNOTATION in meta.annotations:
        storage_class = meta.annotations[BETA_STORAGE_CLASS_ANNOTATION]
    else:
        storage_class = _string(spec.get("storageClassName"), "spec.storageClassName")
    affinity = _mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
    required = affinity.get("required")
    claim_ref: ClaimRef | None = None
    if spec.get("claimRef") is not None:
        ref = _mapping(spec.get("claimRef"), "spec.claimRef")
        claim_ref = ClaimRef(
            namespace=_string(ref.get("namespace"), "spec.claimRef.namespace"),
            name=_string(ref.get("name"), "spec.claimRef.name"),
            uid=_string(ref.get("uid"), "spec.claimRef.uid"),
        )
    csi_driver = in_tree = handle = ""
    if spec.get("csi") is not None:
        csi = _mapping(spec.get("csi"), "spec.csi")
        csi_driver = _string(csi.get("driver"), "spec.csi.driver")
        handle = _string(csi.get("volumeHandle"), "spec.csi.volumeHandle")
        if not csi_driver:
            raise SpecError("spec.csi.driver", "is required")
        if not handle:
            raise SpecError("spec.csi.volumeHandle", "is required")
    else:
        for kind in (GCE_PD, AWS_EBS, AZURE_DISK, CINDER, PORTWORX):
            if spec.get(kind) is None:
                continue
            path = f"spec.{kind}"
            source = _mapping(spec.get(kind), path)
            in_tree = IN_TREE_PLUGIN[kind]
            csi_driver = MIGRATED_DRIVER[in_tree]
            if kind == GCE_PD:
                handle = _gce_handle(_string(source.get("pdName"), f"{path}.pdName"), meta.labels)
            elif kind == AWS_EBS:
                handle = ebs_volume_id(_string(source.get("volumeID"), f"{path}.volumeID"))
            elif kind == AZURE_DISK:
                handle = _string(source.get("diskURI"), f"{path}.diskURI")
            else:
                handle = _string(source.get("volumeID"), f"{path}.volumeID")
            break
    return PersistentVolume(
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
        labels=meta.labels,
        annotations=meta.annotations,
        capacity=_bytes(capacity.get("storage"), "spec.capacity.storage") or 0,
        access_modes=_access_modes(spec.get("accessModes"), "spec.accessModes"),
        storage_class=storage_class,
        volume_mode=_volume_mode(spec.get("volumeMode"), "spec.volumeMode"),
        node_affinity=(
            NodeSelector.from_dict(required, "spec.nodeAffinity.required") if required is not None else None
        ),
        claim_ref=claim_ref,
        phase=_string(status.get("phase"), "status.phase"),
        deleting=meta.deleting,
        csi_driver=csi_driver,
        in_tree_plugin=in_tree,
        volume_handle=handle,
        raw=obj,
    )


# ----------------------------------------------------------------------------- PersistentVolumeClaim
@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    key: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    # None: unset (the default class applies); "": asks for no class
    storage_class: str | None
    access_modes: frozenset[str]
    volume_mode: str
    request: int
    selector: LabelSelector | None
    volume_name: str
    phase: str
    deleting: bool
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # the uid of the owner marked controller ("" if none): a generic ephemeral volume's claim must
    # be controlled by its pod
    controller_uid: str = ""

    @property
    def selected_node(self) -> str:
        return self.annotations.get(SELECTED_NODE_ANNOTATION, "")

    @property
    def bind_completed(self) -> bool:
        return BIND_COMPLETED_ANNOTATION in self.annotations

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
        return _parsed("PersistentVolumeClaim", _parse_pvc, obj)


def _controller_uid(meta_raw: Any) -> str:
    meta = _mapping(meta_raw, "metadata")
    refs = _list(meta.get("ownerReferences"), "metadata.ownerReferences")
    for i, ref in enumerate(refs):
        ref = _mapping(ref, f"metadata.ownerReferences[{i}]")
        if _flag(ref.get("controller"), f"metadata.ownerReferences[{i}].controller", False):
            return _string(ref.get("uid"), f"metadata.ownerReferences[{i}].uid")
    return ""


def _parse_pvc(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    meta = _meta(obj, namespaced=True)
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    resources = _mapping(spec.get("resources"), "spec.resources")
    requests = _mapping(resources.get("requests"), "spec.resources.requests")
    # kube's GetPersistentVolumeClaimClass: the beta annotation first, then the field
    storage_class: str | None
    if BETA_STORAGE_CLASS_ANNOTATION in meta.annotations:
        storage_class = meta.annotations[BETA_STORAGE_CLASS_ANNOTATION]
    elif spec.get("storageClassName") is not None:
        storage_class = _string(spec.get("storageClassName"), "spec.storageClassName")
    else:
        storage_class = None
    return PersistentVolumeClaim(
        namespace=meta.namespace,
        name=meta.name,
        key=f"{meta.namespace}/{meta.name}",
        uid=meta.uid,
        resource_version=meta.resource_version,
        labels=meta.labels,
        annotations=meta.annotations,
        storage_class=storage_class,
        access_modes=_access_modes(spec.get("accessModes"), "spec.accessModes"),
        volume_mode=_volume_mode(spec.get("volumeMode"), "spec.volumeMode"),
        request=_bytes(requests.get("storage"), "spec.resources.requests.storage") or 0,
        selector=LabelSelector.from_dict(spec.get("selector"), "spec.selector"),
        volume_name=_string(spec.get("volumeName"), "spec.volumeName"),
        phase=_string(status.get("phase"), "status.phase"),
        deleting=meta.deleting,
        raw=obj,
        controller_uid=_controller_uid(obj.get("metadata")),
    )


# ----------------------------------------------------------------------------- StorageClass
@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str
    allowed_topologies: NodeSelector | None
    is_default: bool
    parameters: Mapping[str, str]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # for picking the default class when several claim to be (kube: the newest)
    creation_ts: float = 0.0
    resource_version: str = ""

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> StorageClass:
        return _parsed("StorageClass", _parse_class, obj)


def _topology_terms(obj: Any, path: str) -> NodeSelector | None:
    """allowedTopologies (TopologySelectorTerms of key In values) as the NodeSelector it means."""
    terms: list[NodeSelectorTerm] = []
    for i, raw_term in enumerate(_list(obj, path)):
        term = _mapping(raw_term, f"{path}[{i}]")
        expressions_path = f"{path}[{i}].matchLabelExpressions"
        requirements = []
        for j, raw_expr in enumerate(_list(term.get("matchLabelExpressions"), expressions_path)):
            at = f"{expressions_path}[{j}]"
            expr = _mapping(raw_expr, at)
            key = _string(expr.get("key"), f"{at}.key")
            if not key:
                raise SpecError(f"{at}.key", "is required")
            values = _strings(expr.get("values"), f"{at}.values")
            if not values:
                raise SpecError(f"{at}.values", "must have at least one value")
            requirements.append(NodeSelectorRequirement(key, IN, values))
        terms.append(NodeSelectorTerm(tuple(requirements)))
    return NodeSelector(tuple(terms)) if terms else None


def _parse_class(obj: Mapping[str, Any]) -> StorageClass:
    meta = _meta(obj, namespaced=False)
    provisioner = _string(obj.get("provisioner"), "provisioner")
    if not provisioner:
        raise SpecError("provisioner", "is required")
    mode = _string(obj.get("volumeBindingMode"), "volumeBindingMode") or IMMEDIATE
    if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
        raise SpecError("volumeBindingMode", f"must be Immediate or WaitForFirstConsumer, got {mode!r}")
    annotations = meta.annotations
    return StorageClass(
        name=meta.name,
        provisioner=provisioner,
        binding_mode=mode,
        allowed_topologies=_topology_terms(obj.get("allowedTopologies"), "allowedTopologies"),
        is_default=(
            annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"
            or annotations.get(BETA_DEFAULT_CLASS_ANNOTATION) == "true"
        ),
        parameters=_str_map(obj.get("parameters"), "parameters"),
        raw=obj,
        creation_ts=meta.creation_ts,
        resource_version=meta.resource_version,
    )


# ----------------------------------------------------------------------------- CSINode, CSIDriver
@dataclass(frozen=True, slots=True)
class CSINodeDriver:
    name: str
    node_id: str
    topology_keys: tuple[str, ...]
    # how many volumes of this driver the node can attach; None: no limit reported
    allocatable_count: int | None


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    drivers: Mapping[str, CSINodeDriver]
    migrated_plugins: frozenset[str]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> CSINode:
        return _parsed("CSINode", _parse_csi_node, obj)


def _parse_csi_node(obj: Mapping[str, Any]) -> CSINode:
    meta = _meta(obj, namespaced=False)
    spec = _mapping(obj.get("spec"), "spec")
    drivers: dict[str, CSINodeDriver] = {}
    for i, raw_driver in enumerate(_list(spec.get("drivers"), "spec.drivers")):
        at = f"spec.drivers[{i}]"
        driver = _mapping(raw_driver, at)
        name = _string(driver.get("name"), f"{at}.name")
        if not name:
            raise SpecError(f"{at}.name", "is required")
        if name in drivers:
            raise SpecError(f"{at}.name", f"duplicate driver {name!r}")
        keys = _strings(driver.get("topologyKeys"), f"{at}.topologyKeys")
        allocatable = _mapping(driver.get("allocatable"), f"{at}.allocatable")
        count = allocatable.get("count")
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _INT32_MAX
        ):
            raise SpecError(
                f"{at}.allocatable.count", f"must be a non-negative 32-bit integer, got {count!r}"
            )
        drivers[name] = CSINodeDriver(
            name=name,
            node_id=_string(driver.get("nodeID"), f"{at}.nodeID"),
            topology_keys=keys,
            allocatable_count=count,
        )
    migrated = meta.annotations.get(MIGRATED_PLUGINS_ANNOTATION, "")
    return CSINode(
        name=meta.name,
        drivers=drivers,
        migrated_plugins=frozenset(p for p in migrated.split(",") if p),
        raw=obj,
    )


@dataclass(frozen=True, slots=True)
class CSIDriver:
    name: str
    attach_required: bool
    storage_capacity: bool
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # spec.preventPodSchedulingIfMissing (VolumeLimitScaling): a pod needing this driver does not
    # go to a node whose CSINode does not list it
    prevent_scheduling_if_missing: bool = False

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> CSIDriver:
        return _parsed("CSIDriver", _parse_csi_driver, obj)


def _parse_csi_driver(obj: Mapping[str, Any]) -> CSIDriver:
    meta = _meta(obj, namespaced=False)
    spec = _mapping(obj.get("spec"), "spec")
    return CSIDriver(
        name=meta.name,
        attach_required=_flag(spec.get("attachRequired"), "spec.attachRequired", True),
        storage_capacity=_flag(spec.get("storageCapacity"), "spec.storageCapacity", False),
        raw=obj,
        prevent_scheduling_if_missing=_flag(
            spec.get("preventPodSchedulingIfMissing"), "spec.preventPodSchedulingIfMissing", False
        ),
    )


# ----------------------------------------------------------------------------- CSIStorageCapacity
@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    namespace: str
    name: str
    storage_class: str
    node_topology: LabelSelector | None
    capacity: int | None
    maximum_volume_size: int | None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> CSIStorageCapacity:
        return _parsed("CSIStorageCapacity", _parse_capacity, obj)


def _parse_capacity(obj: Mapping[str, Any]) -> CSIStorageCapacity:
    meta = _meta(obj, namespaced=True)
    storage_class = _string(obj.get("storageClassName"), "storageClassName")
    if not storage_class:
        raise SpecError("storageClassName", "is required")
    return CSIStorageCapacity(
        namespace=meta.namespace,
        name=meta.name,
        storage_class=storage_class,
        node_topology=LabelSelector.from_dict(obj.get("nodeTopology"), "nodeTopology"),
        capacity=_bytes(obj.get("capacity"), "capacity"),
        maximum_volume_size=_bytes(obj.get("maximumVolumeSize"), "maximumVolumeSize"),
        raw=obj,
    )


# ----------------------------------------------------------------------------- VolumeAttachment
@dataclass(frozen=True, slots=True)
class VolumeAttachment:
    """A volume attached (or being attached, or not yet detached) to a node: it takes one of the
    node's slots for its driver whether or not a pod there still uses it."""

    name: str
    attacher: str
    node_name: str
    # spec.source.persistentVolumeName; "" for an inline volume (which is not counted)
    pv_name: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> VolumeAttachment:
        return _parsed("VolumeAttachment", _parse_attachment, obj)


def _parse_attachment(obj: Mapping[str, Any]) -> VolumeAttachment:
    meta = _meta(obj, namespaced=False)
    spec = _mapping(obj.get("spec"), "spec")
    source = _mapping(spec.get("source"), "spec.source")
    return VolumeAttachment(
        name=meta.name,
        attacher=_string(spec.get("attacher"), "spec.attacher"),
        node_name=_string(spec.get("nodeName"), "spec.nodeName"),
        pv_name=_string(source.get("persistentVolumeName"), "spec.source.persistentVolumeName"),
        raw=obj,
    )


def object_key(kind: str, obj: Mapping[str, Any]) -> str:
    """The key an object of `kind` is known by (ns/name for namespaced kinds, else its name), read
    as leniently as possible: a malformed object is remembered under it."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    name = name if isinstance(name, str) else ""
    if kind in NAMESPACED_KINDS:
        namespace = meta.get("namespace")
        namespace = namespace if isinstance(namespace, str) and namespace else "default"
        return f"{namespace}/{name}"
    return name


NAMESPACED_KINDS = frozenset(("PersistentVolumeClaim", "CSIStorageCapacity"))
