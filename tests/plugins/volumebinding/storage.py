"""Storage objects as the API server serves them, and a harness running VolumeBinding alone with
those objects fed through the scheduler's object events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.status import Status
from koordpy.plugins.storagecatalog import StorageCatalog
from tests.builders import Harness, make_pod, node_dict

VB = "VolumeBinding"
WAIT = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
HOSTNAME = "kubernetes.io/hostname"
GI = 1024**3


def storage_class(
    name: str,
    mode: str = WAIT,
    provisioner: str = NO_PROVISIONER,
    topologies: Sequence[Mapping[str, Sequence[str]]] = (),
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if topologies:
        obj["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in term.items()]}
            for term in topologies
        ]
    return obj


def claim(
    name: str,
    class_name: str | None,
    request: str = "1Gi",
    volume_name: str = "",
    bound: bool = False,
    phase: str = "",
    modes: Sequence[str] = ("ReadWriteOnce",),
    selector: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str = "default",
    uid: str = "",
    deleting: bool = False,
    owner_uid: str = "",
    volume_mode: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "annotations": dict(annotations or {}),
    }
    if bound:
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}
        ]
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": request}}}
    if class_name is not None:
        spec["storageClassName"] = class_name
    if volume_name:
        spec["volumeName"] = volume_name
    if selector is not None:
        spec["selector"] = {"matchLabels": dict(selector)}
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec,
    }
    if phase or bound:
        obj["status"] = {"phase": phase or "Bound"}
    return obj


def volume(
    name: str,
    class_name: str,
    capacity: str = "1Gi",
    affinity: Mapping[str, Sequence[str]] | None = None,
    claim_ref: tuple[str, str] | tuple[str, str, str] | None = None,
    phase: str = "Available",
    modes: Sequence[str] = ("ReadWriteOnce",),
    labels: Mapping[str, str] | None = None,
    volume_mode: str | None = None,
    deleting: bool = False,
    fields: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "capacity": {"storage": capacity},
        "accessModes": list(modes),
        "storageClassName": class_name,
        "csi": {"driver": "csi.example.com", "volumeHandle": name},
    }
    if affinity is not None or fields is not None:
        term: dict[str, Any] = {}
        if affinity is not None:
            term["matchExpressions"] = [
                {"key": k, "operator": "In", "values": list(v)} for k, v in affinity.items()
            ]
        if fields is not None:
            term["matchFields"] = [{"key": k, "operator": "In", "values": list(v)} for k, v in fields.items()]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    if claim_ref is not None:
        ref = {"namespace": claim_ref[0], "name": claim_ref[1]}
        if len(claim_ref) == 3:
            ref["uid"] = claim_ref[2]
        spec["claimRef"] = ref
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def csi_driver(name: str, storage_capacity: bool) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"storageCapacity": storage_capacity},
    }


def capacity(
    name: str,
    class_name: str,
    capacity: str | None,
    topology: Mapping[str, str] | None,
    maximum: str | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": class_name,
    }
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    if topology is not None:
        obj["nodeTopology"] = {"matchLabels": dict(topology)}
    return obj


def host(name: str, **labels: str) -> dict[str, Any]:
    return node_dict(name, labels={HOSTNAME: name, **labels})


def claiming(
    name: str, *claims: str, ephemeral: Sequence[str] = (), uid: str = "", namespace: str = "default"
) -> Pod:
    """A pod using the named claims (and generic ephemeral volumes)."""
    volumes: list[dict[str, Any]] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    volumes += [{"name": e, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for e in ephemeral]
    pod = make_pod(name, namespace=namespace, spec={"volumes": volumes})
    if uid:
        raw = dict(pod.raw)
        raw["metadata"] = {**raw["metadata"], "uid": uid}
        pod = Pod.from_dict(raw)
    return pod


class Storage:
    """VolumeBinding (alone, or with `plugins`) over nodes, with storage objects fed as the world
    feeds them."""

    def __init__(
        self,
        nodes: Sequence[dict[str, Any]],
        objects: Sequence[Mapping[str, Any]] = (),
        plugins: Sequence[str] = (VB,),
        args: Mapping[str, Any] | None = None,
    ) -> None:
        self.harness = Harness(nodes, plugins=plugins, args={VB: args} if args is not None else None)
        self.catalog = StorageCatalog.shared(self.harness.handle)
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping[str, Any], action: str = "Add") -> None:
        for handler in self.harness.handle.shared.object_handlers.get(str(obj["kind"]), ()):
            handler(action, obj)

    @property
    def plugin(self) -> Any:
        return self.harness.profile.plugins[VB]

    def pre_filter(self, pod: Pod) -> tuple[CycleState, Status | None]:
        state, _, status = self.harness.pre_filter(pod)
        return state, status

    def filter_messages(self, pod: Pod) -> dict[str, str]:
        """Per node, "" when it passes, else its status message (PreFilter must pass)."""
        state, status = self.pre_filter(pod)
        assert status is None, status
        rows = self.harness.rows()
        result = self.plugin.filter(state, pod, rows)
        out = {}
        for i, row in enumerate(rows.tolist()):
            name = self.harness.snapshot.node_name(row)
            out[name] = "" if result is None or result.passed[i] else result.status_at(i).message
        return out

    def scores(self, pod: Pod) -> dict[str, int]:
        """VolumeBinding's score per feasible node ({} when PreScore skips)."""
        state, status = self.pre_filter(pod)
        assert status is None, status
        rows = self.harness.rows()
        result = self.plugin.filter(state, pod, rows)
        if result is not None:
            rows = rows[result.passed]
        if self.plugin.pre_score(state, pod, rows) is not None:
            return {}
        scores = self.plugin.score(state, pod, rows)
        return {self.harness.snapshot.node_name(int(r)): int(s) for r, s in zip(rows, scores, strict=True)}

    def place(self, pod: Pod, node: str) -> CycleState:
        """PreFilter, Filter, Reserve and PreBind of the pod on the node, as a cycle runs them."""
        state, status = self.pre_filter(pod)
        assert status is None, status
        rows = np.array([self.harness.snapshot.row_of[node]], dtype=np.int64)
        result = self.plugin.filter(state, pod, rows)
        assert result is None, result.status_at(0)
        assert self.harness.profile.run_reserve(state, pod, node) is None
        assert self.harness.profile.run_pre_bind(state, pod, node) is None
        return state
