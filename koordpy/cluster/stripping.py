"""What `koordpy snapshot` keeps of each object: only what scheduling (and the simulator's loader)
reads. The rest (managed fields, resource versions, container commands, the volumes no plugin
reads, node conditions...) would make the file large without changing a placement."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from koordpy.api.time import parse_timestamp

# a pod the cluster is deleting goes away in the scenario when its grace period would end
REMOVE_AFTER_ANNOTATION = "simulation.koordpy.io/remove-after"

# Annotation domains the scheduler reads (gangs, gang groups, topology, quotas, koordpy's own): every
# other annotation (last-applied-configuration, tooling's) is left out.
_KEPT_ANNOTATION_DOMAINS = (
    "koordinator.sh",
    "scheduling.sigs.k8s.io",
    "scheduling.x-k8s.io",
    "koordpy.io",
    # storage: a claim's selected node and binding state (volume.kubernetes.io/selected-node,
    # pv.kubernetes.io/bind-completed, bound-by-controller), the beta storage-class annotation of
    # claims and volumes, the default StorageClass, a CSINode's migrated plugins
    "pv.kubernetes.io",
    "volume.kubernetes.io",
    "volume.beta.kubernetes.io",
    "storageclass.kubernetes.io",
    "storageclass.beta.kubernetes.io",
    "storage.alpha.kubernetes.io",
)
# ...but not the simulator's timeline (simulation.koordpy.io/arrive-after, run-for, remove-after):
# a snapshot is the cluster as it is now, and on a live object (applied from the manifests of a
# simulation, typically) they would replay a past that already happened: an object that exists
# arriving later, a pod that has run for a while running its whole time again. One that is
# malformed would also make the whole snapshot unloadable. They are left out and named once
# (SnapshotSummary.warnings); a pod being deleted gets the snapshot's own remove-after.
_SIMULATION_DOMAIN = "simulation.koordpy.io"


def _in_domain(domain: str, of: str) -> bool:
    return domain == of or domain.endswith("." + of)


def kept_annotation(key: str) -> bool:
    """Whether the snapshot keeps an annotation of this key: the scheduler reads its domain, and it
    is not one of the simulator's timeline annotations (see simulation_annotations)."""
    domain, slash, _ = key.partition("/")
    if not slash or _in_domain(domain, _SIMULATION_DOMAIN):
        return False
    return any(_in_domain(domain, d) for d in _KEPT_ANNOTATION_DOMAINS)


def simulation_annotations(obj: Mapping[str, Any]) -> list[str]:
    """The simulator's annotations (simulation.koordpy.io/...) a live object carries, which the
    snapshot leaves out: the cluster as it is now has no timeline."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping):
        return []
    found: list[str] = []
    for key in annotations:
        domain, slash, _ = str(key).partition("/")
        if slash and _in_domain(domain, _SIMULATION_DOMAIN):
            found.append(str(key))
    return found


def _metadata(meta: Mapping[str, Any], namespaced: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": meta.get("name")}
    if namespaced:
        out["namespace"] = meta.get("namespace") or "default"
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if kept_annotation(str(k))}
    if annotations:
        out["annotations"] = annotations
    for key in ("creationTimestamp", "deletionTimestamp"):
        if meta.get(key):
            out[key] = meta[key]
    refs = meta.get("ownerReferences")
    if refs:
        # who owns a pod names its job in the dry run's victims, and default spreading's selector
        out["ownerReferences"] = [
            {k: ref[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in ref}
            for ref in refs
            if isinstance(ref, Mapping)
        ]
    return out


def _some(obj: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {k: obj[k] for k in keys if obj.get(k) not in (None, "", [], {})}


# what the scheduler reads of a container: its name (messages), image (ImageLocality), ports (host
# ports), resources (fit) and restartPolicy (an init container that runs beside the app)
_CONTAINER_KEYS = ("name", "image", "ports", "resources", "restartPolicy")
_POD_SPEC_KEYS = (
    "nodeName",
    "schedulerName",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "schedulingGates",
    "overhead",
    "resources",
    "terminationGracePeriodSeconds",
    "hostNetwork",
    "os",
)
# what preemption reads of a pod's status (startTime orders victims, DisruptionTarget marks a pod
# already on its way out), what the queue reads (nominatedNodeName), and why a pod waits
_POD_STATUS_KEYS = ("phase", "nominatedNodeName", "startTime")
_POD_CONDITIONS = ("PodScheduled", "DisruptionTarget")


# the volume sources a plugin reads: claims (VolumeBinding, VolumeZone, the limits), generic
# ephemeral volumes (their claim), and the inline disks VolumeRestrictions checks for conflicts and
# NodeVolumeLimits counts; configMaps, secrets, emptyDirs and the like change no placement
_VOLUME_SOURCES = frozenset(
    {
        "persistentVolumeClaim",
        "ephemeral",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "azureDisk",
        "cinder",
        "rbd",
        "iscsi",
        "csi",
    }
)


def _volumes(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    for volume in spec.get("volumes") or ():
        if isinstance(volume, Mapping) and not _VOLUME_SOURCES.isdisjoint(volume):
            kept.append({k: v for k, v in volume.items() if k == "name" or k in _VOLUME_SOURCES})
    return kept


def _pod(obj: Mapping[str, Any], now: float | None) -> dict[str, Any]:
    meta_in = obj.get("metadata") or {}
    meta = _metadata(meta_in, namespaced=True)
    spec_in = obj.get("spec") or {}
    spec = _some(spec_in, _POD_SPEC_KEYS)
    for key in ("containers", "initContainers"):
        if spec_in.get(key):
            spec[key] = [_some(c, _CONTAINER_KEYS) for c in spec_in[key] if isinstance(c, Mapping)]
    if volumes := _volumes(spec_in):
        spec["volumes"] = volumes
        if any("ephemeral" in v for v in volumes) and meta_in.get("uid"):
            # a generic ephemeral volume's claim is the pod's only when the pod owns it (its uid)
            meta["uid"] = meta_in["uid"]
    status_in = obj.get("status") or {}
    status = _some(status_in, _POD_STATUS_KEYS)
    conditions = [
        _some(c, ("type", "status", "reason", "message"))
        for c in status_in.get("conditions") or ()
        if isinstance(c, Mapping) and c.get("type") in _POD_CONDITIONS
    ]
    if conditions:
        status["conditions"] = conditions
    deleting = parse_timestamp(meta.get("deletionTimestamp"))
    if deleting is not None and now is not None:
        left = max(0, math.ceil(deleting - now))
        meta.setdefault("annotations", {})[REMOVE_AFTER_ANNOTATION] = f"{left}s"
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if status:
        out["status"] = status
    return out


def _node(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = _some(obj.get("spec") or {}, ("unschedulable", "taints"))
    # images: ImageLocality scores by the sizes of the images a node holds already
    status = _some(obj.get("status") or {}, ("allocatable", "capacity", "images"))
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _metadata(obj.get("metadata") or {}, namespaced=False),
    }
    if spec:
        out["spec"] = spec
    out["status"] = status
    return out


# kinds without a namespace
_CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "PriorityClass",
        "ClusterNetworkTopology",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
        "CSIDriver",
        "VolumeAttachment",
    }
)
# what is read of a StorageClass and a CSIStorageCapacity: their fields are at the top level
_TOP_LEVEL = {
    "StorageClass": (
        "provisioner",
        "parameters",
        "reclaimPolicy",
        "volumeBindingMode",
        "allowedTopologies",
        "allowVolumeExpansion",
        "mountOptions",
    ),
    "CSIStorageCapacity": ("storageClassName", "nodeTopology", "capacity", "maximumVolumeSize"),
}


def strip_object(
    kind: str, api_version: str, obj: Mapping[str, Any], now: float | None = None
) -> dict[str, Any]:
    """The object with only what the scheduler (and the simulator's loader) reads: for `now` (epoch
    seconds) given, a pod being deleted gets the timeline annotation that removes it when its grace
    period ends."""
    if kind == "Pod":
        return _pod(obj, now)
    if kind == "Node":
        return _node(obj)
    meta_in = obj.get("metadata") or {}
    out: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _metadata(meta_in, kind not in _CLUSTER_SCOPED),
    }
    if kind in ("PersistentVolume", "PersistentVolumeClaim") and meta_in.get("uid"):
        # a volume is bound to a claim by its uid (spec.claimRef.uid)
        out["metadata"]["uid"] = meta_in["uid"]
    if kind in _TOP_LEVEL:
        out.update(_some(obj, _TOP_LEVEL[kind]))
    elif kind == "PriorityClass":
        out.update(_some(obj, ("value", "globalDefault", "preemptionPolicy")))
        out.setdefault("value", 0)
    elif kind == "ClusterNetworkTopology":
        # its status is what the topology operator computes from the nodes: simulate does the same
        if "spec" in obj:
            out["spec"] = obj["spec"]
    elif kind != "Namespace":
        # PodGroups (a gang's status carries its schedule start), PodDisruptionBudgets
        # (disruptionsAllowed), ElasticQuotas (used), PersistentVolumes and their claims (the
        # phase, what a claim is bound to), CSINodes, CSIDrivers and VolumeAttachments: spec and
        # status are what is read
        for key in ("spec", "status"):
            if obj.get(key) is not None:
                out[key] = obj[key]
    return out
