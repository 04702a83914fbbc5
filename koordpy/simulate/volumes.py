"""The storage of the in-memory cluster, and the controllers that act on it.

The world holds StorageClasses, PersistentVolumes, claims, CSINodes, CSIDrivers,
CSIStorageCapacities and VolumeAttachments as API dicts, writes each change under a new
resourceVersion (as the API server does: the scheduler's assume cache tells its own assumptions
from newer objects by it) and hands it to the scheduler as an informer would (`on_object`). It
plays, at once and in virtual time zero:

- admission's DefaultStorageClass: a claim created without a class gets the default one (and,
  as kube's PV controller does since 1.28, a claim left without one gets it when a default appears);
- the PV controller: binds each Immediate claim to the smallest available volume that matches it,
  or provisions one when its class has a provisioner (not `kubernetes.io/no-provisioner`); binds a
  claim to the volume whose claimRef names it; provisions a WaitForFirstConsumer claim once the
  scheduler has written the node it chose (`volume.kubernetes.io/selected-node`), in that node's
  topology: the keys of the class's allowedTopologies, else the CSI driver's topologyKeys on the
  node's CSINode, with the node's values;
- the ephemeral volume controller: a claim `<pod>-<volume>` per generic ephemeral volume, created
  with the pod, controlled by it, deleted with it (the garbage collector; its volume is deleted or
  released, as its reclaim policy says);
- what the scheduler's `Bind.volumes` asks of the world before the pod's binding (kube's
  BindPodVolumes): each chosen volume's claimRef set, each claim to provision given its node, then
  the pod is bound once every claim is bound, or its binding fails, as on a cluster, when that can
  no longer happen (a volume another claim took since, a provisioning given up) or takes longer
  than the plugin's bind timeout (a claim no one provisions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.api.storage import (
    BIND_COMPLETED_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from koordpy.framework.clock import VirtualClock
from koordpy.framework.effects import Bind, ClaimKey, VolumeBindings, VolumeToClaim
from koordpy.scheduler import Scheduler
from koordpy.simulate.claims import CLAIM, VOLUME, ephemeral_claims
from koordpy.simulate.volumestore import (
    AVAILABLE,
    BOUND,
    VolumeStore,
    bound_to,
    meta_of,
    section,
    with_sections,
)

__all__ = ["NO_PROVISIONER", "BindingFailed", "VolumeWorld"]

NO_PROVISIONER = "kubernetes.io/no-provisioner"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
RELEASED = "Released"


class BindingFailed(Exception):
    """The volumes of a pod cannot be bound: the message is what the failed binding says."""


@dataclass(slots=True)
class _Wait:
    bind: Bind
    then: Callable[[], None]
    deadline: float


class VolumeWorld(VolumeStore):
    """The storage of the in-memory cluster (see VolumeStore) and the controllers acting on it."""

    def __init__(self, scheduler: Scheduler, clock: VirtualClock) -> None:
        super().__init__(scheduler, clock)
        # claims not bound yet, in creation order; those of them the PV controller looks at next
        self._unbound: dict[str, None] = {}
        self._dirty: dict[str, None] = {}
        # the bindings waiting for their claims to be bound, by pod
        self._waits: dict[str, _Wait] = {}

    # ----------------------------------------------------------------------------- objects in
    def add(self, kind: str, obj: Mapping[str, Any]) -> None:
        """An object created (from the input, or by a controller)."""
        self._create(kind, obj)
        self._settle()

    def node_added(self, node: Node) -> None:
        self.node_labels[node.name] = node.labels

    def pod_created(self, pod: Mapping[str, Any], uid: str) -> None:
        """The ephemeral volume controller: the pod's generic ephemeral volumes get their claims,
        controlled by the pod (`uid`). A claim of that name that exists already is left alone (the
        scheduler says whose it is)."""
        made = False
        for claim in ephemeral_claims(pod, uid):
            meta = claim["metadata"]
            if f"{meta['namespace']}/{meta['name']}" not in self.raw[CLAIM]:
                self._create(CLAIM, claim)
                made = True
        if made:
            self._settle()

    def pod_deleted(self, pod: Pod) -> None:
        """The garbage collector: the claims the pod controlled go, and what they bound with them."""
        wait = self._waits.pop(pod.key, None)
        if wait is not None:
            self.scheduler.binding_done(pod.key, f"binding volumes: pod {pod.key} was deleted")
        for name in pod.claim_names:
            claim = self.claims.get(f"{pod.namespace}/{name}")
            if claim is not None and claim.controller_uid and claim.controller_uid == pod.uid:
                self._delete_claim(claim)
        self._settle()

    # ----------------------------------------------------------------------------- Bind.volumes
    def bind(self, bind: Bind, then: Callable[[], None]) -> None:
        """Carry out `bind.volumes`, then `then()` (the pod's binding) once every claim is bound;
        or fail the binding through the scheduler."""
        volumes = bind.volumes
        assert volumes is not None
        try:
            for static in volumes.static:
                self._bind_static(static)
            for claim in volumes.provision:
                self._select_node(claim, volumes.node_name)
            # the PV controller looks at every claim the pod waits for (it finishes a binding
            # half done, such as a claim naming its volume)
            self._dirty.update(dict.fromkeys(str(k) for k in volumes.wait_for))
            self._settle(recheck=False)
            done = self._check(volumes)
        except BindingFailed as err:
            self._settle()
            self.scheduler.binding_done(bind.pod.key, str(err))
            return
        if done:
            then()
        else:
            self._waits[bind.pod.key] = _Wait(bind, then, self.clock.now() + volumes.timeout_seconds)
        # what was written here may be what another pod's binding waits for
        self._recheck_waits()

    def next_deadline(self) -> float | None:
        return min((w.deadline for w in self._waits.values()), default=None)

    def fire_due(self, now: float) -> None:
        """The bindings whose wait is over: failed, naming the claims not bound."""
        for key, wait in list(self._waits.items()):
            if wait.deadline > now:
                continue
            del self._waits[key]
            volumes = wait.bind.volumes
            assert volumes is not None
            pending = [c for c in _claims_of(volumes) if not self._fully_bound(c)] or _claims_of(volumes)
            self.scheduler.binding_done(
                key,
                f"binding volumes: timed out after {volumes.timeout_seconds:g}s waiting for "
                f"persistentvolumeclaim(s) {', '.join(pending)} to be bound",
            )

    def _bind_static(self, static: VolumeToClaim) -> None:
        key = str(static.claim)
        claim = self.claims.get(key)
        if claim is None:
            raise BindingFailed(f'binding volumes: persistentvolumeclaim "{key}" not found')
        if static.claim_uid and claim.uid != static.claim_uid:
            raise BindingFailed(
                f'binding volumes: persistentvolumeclaim "{key}" was deleted and created again'
            )
        pv = self.volumes.get(static.pv_name)
        if pv is None:
            raise BindingFailed(f'binding volumes: persistentvolume "{static.pv_name}" not found')
        if pv.claim_ref is not None and not bound_to(pv, claim):
            # the scheduler's copy is older than the volume another claim took: the API server
            # refuses the update as a conflict
            raise BindingFailed(
                f'binding volumes: updating persistentvolume "{pv.name}" to bind it to claim "{key}": '
                f'Operation cannot be fulfilled on persistentvolumes "{pv.name}": the object has been '
                "modified; please apply your changes to the latest version and try again"
            )
        if pv.claim_ref is None or pv.claim_ref.uid != claim.uid:
            self._set_claim_ref(pv, claim)
        self._dirty[claim.key] = None

    def _select_node(self, key: ClaimKey, node: str) -> None:
        claim = self.claims.get(str(key))
        if claim is None:
            raise BindingFailed(f'binding volumes: persistentvolumeclaim "{key}" not found')
        if claim.selected_node != node:
            raw = self.raw[CLAIM][claim.key]
            meta = meta_of(raw)
            meta["annotations"] = {**claim.annotations, SELECTED_NODE_ANNOTATION: node}
            self._write(CLAIM, claim.key, with_sections(raw, metadata=meta))
        self._dirty[claim.key] = None

    def _check(self, volumes: VolumeBindings) -> bool:
        """kube's checkBindings: True when every claim is bound; raises BindingFailed when the
        binding cannot complete any more; False to wait."""
        for static in volumes.static:
            pv = self.volumes.get(static.pv_name)
            if pv is None:
                raise BindingFailed(
                    f'binding volumes: persistentvolume "{static.pv_name}" was deleted before claim '
                    f'"{static.claim}" was bound to it'
                )
            if pv.claim_ref is None or not pv.claim_ref.uid:
                raise BindingFailed(f'binding volumes: ClaimRef got reset for pv "{pv.name}"')
            claim = self.claims.get(str(static.claim))
            if claim is not None and pv.claim_ref.uid != claim.uid:
                raise BindingFailed(
                    f'binding volumes: ClaimRef UID for pv "{pv.name}" does not match pvc "{static.claim}"'
                )
        for provision in volumes.provision:
            claim = self.claims.get(str(provision))
            if claim is None:
                raise BindingFailed(f'binding volumes: persistentvolumeclaim "{provision}" was deleted')
            if not claim.selected_node:
                raise BindingFailed(
                    f'binding volumes: selectedNode annotation reset for PVC "{provision}": '
                    "provisioning failed"
                )
        keys = _claims_of(volumes)
        for key in keys:
            if key not in self.claims:
                raise BindingFailed(f'binding volumes: persistentvolumeclaim "{key}" was deleted')
        return all(self._fully_bound(key) for key in keys)

    def _recheck_waits(self) -> None:
        for key, wait in list(self._waits.items()):
            volumes = wait.bind.volumes
            assert volumes is not None
            try:
                done = self._check(volumes)
            except BindingFailed as err:
                del self._waits[key]
                self.scheduler.binding_done(key, str(err))
                continue
            if done:
                del self._waits[key]
                wait.then()

    def _created(self, kind: str, key: str) -> None:
        if kind == CLAIM:
            self._unbound[key] = None
            self._dirty[key] = None
        elif kind == VOLUME:
            self._volume_added(key)
        elif kind == "StorageClass":
            self._class_added(key)

    def _class_added(self, name: str) -> None:
        sc = self.classes.get(name)
        if sc is None:
            return
        default = sc.is_default and self._default_class() is sc
        for key in list(self._unbound):
            claim = self.claims.get(key)
            if claim is None or claim.volume_name:
                continue
            if claim.storage_class is None and default:
                # the PV controller's retroactive default class for a claim still without one
                raw = self.raw[CLAIM][key]
                self._write(
                    CLAIM, key, with_sections(raw, spec={**section(raw, "spec"), "storageClassName": name})
                )
                self._dirty[key] = None
            elif claim.storage_class == name:
                self._dirty[key] = None

    def _volume_added(self, name: str) -> None:
        """The claims a new volume may be for: the one it names or that names it, and the
        Immediate claims of its class still waiting for a volume."""
        pv = self.volumes.get(name)
        if pv is None:
            return
        if pv.claim_ref is not None:
            self._dirty[pv.claim_ref.key] = None
            return
        for key in self._unbound:
            claim = self.claims.get(key)
            if claim is None:
                continue
            if claim.volume_name == name or (
                not claim.volume_name
                and (claim.storage_class or "") == pv.storage_class
                and not self._delayed(claim)
            ):
                self._dirty[key] = None

    # ----------------------------------------------------------------------------- the PV controller
    def _settle(self, recheck: bool = True) -> None:
        """The PV controller's pass over the claims something happened to; then the bindings
        waiting on them. Only those claims: a scenario of many claims costs no pass over all of
        them for each object."""
        while self._dirty:
            key = next(iter(self._dirty))
            del self._dirty[key]
            claim = self.claims.get(key)
            if claim is None or claim.deleting or self._fully_bound(key):
                self._unbound.pop(key, None)
                continue
            self._sync_claim(claim)
            if self._fully_bound(key):
                self._unbound.pop(key, None)
        if recheck:
            self._recheck_waits()

    def _sync_claim(self, claim: PersistentVolumeClaim) -> None:
        """kube's syncClaim, for a claim not fully bound."""
        if claim.volume_name:
            pv = self.volumes.get(claim.volume_name)
            if pv is not None and (pv.claim_ref is None or bound_to(pv, claim)):
                self._bind(pv, claim)
            return
        sc = self._class_of(claim)
        delayed = self._delayed(claim)
        pv = self._find(claim, prebound_only=delayed)
        if pv is not None:
            self._bind(pv, claim)
        elif delayed and not claim.selected_node:
            return  # waits for its first consumer: the scheduler decides
        elif sc is not None and sc.provisioner != NO_PROVISIONER:
            self._provision(claim, sc)

    def _find(self, claim: PersistentVolumeClaim, prebound_only: bool) -> PersistentVolume | None:
        """kube's FindMatchingVolume without a node: the volume pre-bound to the claim, else (for an
        Immediate claim) the smallest available one of its class that fits it."""
        named = self._named.get(claim.key)
        pv = self.volumes.get(named) if named is not None else None
        if pv is not None and self._fits(pv, claim) and bound_to(pv, claim):
            return pv
        if prebound_only:
            return None
        best: PersistentVolume | None = None
        for name in self._of_class.get(claim.storage_class or "", {}):
            pv = self.volumes[name]
            if pv.claim_ref is not None or pv.phase != AVAILABLE or not self._fits(pv, claim):
                continue
            if claim.selector is not None and not claim.selector.matches(pv.labels):
                continue
            if not claim.access_modes <= pv.access_modes:
                continue
            if best is None or pv.capacity < best.capacity:
                best = pv
        return best

    @staticmethod
    def _fits(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
        return pv.capacity >= claim.request and pv.volume_mode == claim.volume_mode and not pv.deleting

    def _set_claim_ref(self, pv: PersistentVolume, claim: PersistentVolumeClaim) -> None:
        raw = self.raw[VOLUME][pv.name]
        meta = meta_of(raw)
        if not bound_to(pv, claim):
            meta["annotations"] = {**pv.annotations, BOUND_BY_CONTROLLER: "yes"}
        ref = {
            "apiVersion": "v1",
            "kind": CLAIM,
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": claim.uid,
        }
        self._write(
            VOLUME, pv.name, with_sections(raw, metadata=meta, spec={**section(raw, "spec"), "claimRef": ref})
        )

    def _bind(self, pv: PersistentVolume, claim: PersistentVolumeClaim) -> None:
        """kube's bind: the volume's claimRef and phase, then the claim's volumeName, annotations
        and status; each written only when it says something new."""
        if pv.claim_ref is None or pv.claim_ref.uid != claim.uid:
            self._set_claim_ref(pv, claim)
        pv = self.volumes[pv.name]
        if pv.phase != BOUND:
            raw = self.raw[VOLUME][pv.name]
            self._write(
                VOLUME, pv.name, with_sections(raw, status={**section(raw, "status"), "phase": BOUND})
            )
            pv = self.volumes[pv.name]
        if self._fully_bound(claim.key):
            return
        raw = self.raw[CLAIM][claim.key]
        meta = meta_of(raw)
        annotations = {**claim.annotations, BIND_COMPLETED_ANNOTATION: "yes"}
        if not claim.volume_name:
            annotations[BOUND_BY_CONTROLLER] = "yes"
        meta["annotations"] = annotations
        pv_spec = section(pv.raw, "spec")
        status = {
            **section(raw, "status"),
            "phase": BOUND,
            "accessModes": pv_spec.get("accessModes"),
            "capacity": pv_spec.get("capacity"),
        }
        spec = {**section(raw, "spec"), "volumeName": pv.name}
        self._write(CLAIM, claim.key, with_sections(raw, metadata=meta, spec=spec, status=status))

    def _provision(self, claim: PersistentVolumeClaim, sc: StorageClass) -> None:
        """The provisioner creates a volume for the claim: its size the claim's request, in the
        topology of the node the scheduler chose (or of the class, for an Immediate claim)."""
        node = claim.selected_node
        if node and node not in self.node_labels:
            # the provisioner gives up on a node that is gone: it takes the annotation back, and
            # the scheduler tries the pod again
            raw = self.raw[CLAIM][claim.key]
            meta = meta_of(raw)
            meta["annotations"] = {
                k: v for k, v in claim.annotations.items() if k != SELECTED_NODE_ANNOTATION
            }
            self._write(CLAIM, claim.key, with_sections(raw, metadata=meta))
            return
        claim_spec = section(claim.raw, "spec")
        requests = section(section(claim_spec, "resources"), "requests")
        name = f"pvc-{claim.uid}"
        spec: dict[str, Any] = {
            "capacity": {"storage": requests.get("storage")},
            "accessModes": list(claim_spec.get("accessModes") or []),
            "volumeMode": claim.volume_mode,
            "storageClassName": sc.name,
            "persistentVolumeReclaimPolicy": sc.raw.get("reclaimPolicy") or "Delete",
            "claimRef": {
                "apiVersion": "v1",
                "kind": CLAIM,
                "namespace": claim.namespace,
                "name": claim.name,
                "uid": claim.uid,
            },
        }
        if not sc.provisioner.startswith("kubernetes.io/"):
            spec["csi"] = {"driver": sc.provisioner, "volumeHandle": name}
        affinity = self._topology(sc, node)
        if affinity:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": affinity}]}}
        raw_claim = self.raw[CLAIM][claim.key]
        meta = meta_of(raw_claim)
        meta["annotations"] = {**claim.annotations, STORAGE_PROVISIONER: sc.provisioner}
        self._write(CLAIM, claim.key, with_sections(raw_claim, metadata=meta))
        self._create(
            VOLUME,
            {
                "apiVersion": "v1",
                "kind": VOLUME,
                "metadata": {"name": name, "annotations": {PROVISIONED_BY: sc.provisioner}},
                "spec": spec,
                "status": {"phase": AVAILABLE},
            },
        )
        pv = self.volumes.get(name)
        current = self.claims.get(claim.key)
        if pv is not None and current is not None:
            self._bind(pv, current)

    def _topology(self, sc: StorageClass, node: str) -> list[dict[str, Any]]:
        """The node affinity of a volume provisioned for `node`: each topology key with the node's
        value; for an Immediate claim (no node), the first segment the class allows."""
        allowed = sc.allowed_topologies
        if not node:
            if allowed is None or not allowed.terms:
                return []
            return [
                {"key": r.key, "operator": "In", "values": [r.values[0]]}
                for r in allowed.terms[0].match_expressions
                if r.values
            ]
        if allowed is not None:
            keys = list(dict.fromkeys(r.key for t in allowed.terms for r in t.match_expressions))
        else:
            csi = self.csi_nodes.get(node)
            driver = csi.drivers.get(sc.provisioner) if csi is not None else None
            keys = list(driver.topology_keys) if driver is not None else []
        labels = self.node_labels.get(node, {})
        return [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys if k in labels]

    def _delete_claim(self, claim: PersistentVolumeClaim) -> None:
        self._delete(CLAIM, claim.key)
        self._unbound.pop(claim.key, None)
        pv = self.volumes.get(claim.volume_name) if claim.volume_name else None
        if pv is None or pv.claim_ref is None or pv.claim_ref.uid != claim.uid:
            return
        if (section(pv.raw, "spec").get("persistentVolumeReclaimPolicy") or "Retain") == "Delete":
            self._delete(VOLUME, pv.name)
        else:
            raw = self.raw[VOLUME][pv.name]
            self._write(
                VOLUME, pv.name, with_sections(raw, status={**section(raw, "status"), "phase": RELEASED})
            )


def _claims_of(volumes: VolumeBindings) -> list[str]:
    """Every claim the binding waits for, each once, in the order given."""
    keys = (*volumes.wait_for, *(s.claim for s in volumes.static), *volumes.provision)
    return list(dict.fromkeys(str(k) for k in keys))
