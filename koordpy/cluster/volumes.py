"""Carrying out the volume bindings VolumeBinding decided, before the pod's Binding.

What kube-scheduler's BindPodVolumes does, in the same order and with the same checks:

1. each PersistentVolume chosen for a claim is updated (a PUT of the informer's copy, with its
   resourceVersion: a volume changed since the decision is a conflict, and a conflict fails the
   binding as it does in kube) with `spec.claimRef` naming the claim, and the annotation
   `pv.kubernetes.io/bound-by-controller: "yes"` unless the volume was already bound to that claim
   by its author;
2. each claim to be provisioned is updated with `volume.kubernetes.io/selected-node: <node>`: the
   PV controller (or an external provisioner) creates a volume there;
3. then the pod's binding waits until every claim it waits for is bound: phase Bound,
   `spec.volumeName` set, the `pv.kubernetes.io/bind-completed` annotation, and the volume's
   claimRef carrying the claim's uid. It fails when a claim's selected-node annotation is removed
   or changed (the provisioner gave up), when a volume's claimRef is reset, when a volume's node
   affinity no longer admits the node (relabelled meanwhile) or the node is gone, when a claim or
   the pod is deleted, or when the wait is longer than the plugin's bindTimeoutSeconds.

kube polls its informers' caches every second while it waits; here the informers' events wake the
wait instead (`claim_changed`, `volume_changed`, `node_changed`, `pod_gone`), so a binding goes on
as soon as the PV controller has written, nothing is asked of the API server while waiting, and a
thousand waiting pods cost nothing between events. Nothing is written when the informer's copy
already says what would be written: a binding tried again after a failure repeats no write.

What was written stays when the binding fails, as in kube: the PV controller finishes a binding it
was asked for, and the pod, tried again, finds its claims bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.nodeselector import NodeSelector
from koordpy.api.pod import Pod
from koordpy.framework.effects import ClaimKey, VolumeBindings, VolumeToClaim
from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi

log = logging.getLogger(__name__)

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"

# the operation label of koordpy_api_writes_total for each write made here
PV_CLAIM_REF = "pv_claim_ref"
PVC_SELECTED_NODE = "pvc_selected_node"

# an informer store's object by key ("name", or "namespace/name")
Lookup = Callable[[str], "Mapping[str, Any] | None"]


class VolumeBindingError(Exception):
    """The volumes of a pod could not be bound; the message names the claim or volume, and is what
    the pod's failed binding reports."""


def volume_path(name: str) -> str:
    return f"/api/v1/persistentvolumes/{name}"


def claim_path(claim: ClaimKey) -> str:
    return f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _section(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = _meta(obj).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def _version(obj: Mapping[str, Any]) -> int | None:
    """The resourceVersion as the number it is on every apiserver kube's versioner knows (etcd's
    revision); None when it is not one, and then nothing is compared."""
    try:
        return int(str(_meta(obj).get("resourceVersion") or ""))
    except ValueError:
        return None


def _older(obj: Mapping[str, Any], written: int | None) -> bool:
    """Whether the informer's copy predates what was written: its event has not arrived yet."""
    version = _version(obj)
    return written is not None and version is not None and version < written


def bound_to_claim(pv: Mapping[str, Any], claim: ClaimKey, uid: str) -> bool:
    """kube's IsVolumeBoundToClaim: the volume's claimRef names the claim, with its uid or none."""
    ref = _section(_section(pv, "spec"), "claimRef")
    if not ref or ref.get("name") != claim.name or ref.get("namespace") != claim.namespace:
        return False
    ref_uid = str(ref.get("uid") or "")
    return not ref_uid or ref_uid == uid


def volume_bound_to(pv: Mapping[str, Any], binding: VolumeToClaim, uid: str) -> dict[str, Any] | None:
    """The volume as it must be written to bind it to the claim, or None when it says so already
    (kube's GetBindVolumeToClaim): claimRef set to the claim, and bound-by-controller when the
    volume was not already bound to the claim (a volume its author pre-bound keeps saying so, and
    the PV controller then never unbinds it)."""
    claim = binding.claim
    ref = _section(_section(pv, "spec"), "claimRef")
    set_ref = not (
        ref
        and ref.get("name") == claim.name
        and ref.get("namespace") == claim.namespace
        and ref.get("uid") == uid
    )
    set_annotation = not bound_to_claim(pv, claim, uid) and BOUND_BY_CONTROLLER not in _annotations(pv)
    if not set_ref and not set_annotation:
        return None
    out = copy.deepcopy(dict(pv))
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "PersistentVolume")
    meta = out.setdefault("metadata", {})
    if set_ref:
        out.setdefault("spec", {})["claimRef"] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": uid,
        }
    if set_annotation:
        meta["annotations"] = {**(meta.get("annotations") or {}), BOUND_BY_CONTROLLER: "yes"}
    return out


def claim_on_node(pvc: Mapping[str, Any], node: str) -> dict[str, Any] | None:
    """The claim as it must be written to have it provisioned on `node`, or None when it says so."""
    if _annotations(pvc).get(SELECTED_NODE) == node:
        return None
    out = copy.deepcopy(dict(pvc))
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "PersistentVolumeClaim")
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), SELECTED_NODE: node}
    return out


def fully_bound(pvc: Mapping[str, Any], volume: Lookup) -> bool:
    """Bound as the pod may use it: the PV controller has finished (volumeName, bind-completed,
    phase Bound), and the volume it names is bound back to this claim, by uid."""
    name = str(_section(pvc, "spec").get("volumeName") or "")
    if not name or BIND_COMPLETED not in _annotations(pvc):
        return False
    if _section(pvc, "status").get("phase") != "Bound":
        return False
    pv = volume(name)
    if pv is None:
        return False
    ref = _section(_section(pv, "spec"), "claimRef")
    return bool(ref) and str(ref.get("uid") or "") == str(_meta(pvc).get("uid") or "")


def affinity_problem(pv: Mapping[str, Any], name: str, node: Mapping[str, Any], node_name: str) -> str | None:
    """Why the volume cannot be used on the node (kube's CheckNodeAffinity), or None."""
    raw = _section(_section(pv, "spec"), "nodeAffinity").get("required")
    if raw is None:
        return None
    try:
        selector = NodeSelector.from_dict(raw, "spec.nodeAffinity.required")
    except SpecError as err:
        return f'pv "{name}" has a node affinity that cannot be read: {err}'
    labels = _meta(node).get("labels")
    if not selector.matches(labels if isinstance(labels, Mapping) else {}, node_name):
        return f'pv "{name}" node affinity doesn\'t match node "{node_name}"'
    return None


def _claims_of(bindings: VolumeBindings) -> list[str]:
    """Every claim the binding waits for, each once, in the order given."""
    claims = (*bindings.wait_for, *(b.claim for b in bindings.static), *bindings.provision)
    return list(dict.fromkeys(str(c) for c in claims))


class _Waiter:
    __slots__ = ("claims", "node", "pod", "volumes", "woken")

    def __init__(self, pod: str, node: str, claims: Iterable[str]) -> None:
        self.pod = pod
        self.node = node
        self.claims = frozenset(claims)
        # the volumes whose events matter: changes as claims come to name theirs
        self.volumes: frozenset[str] = frozenset()
        self.woken = asyncio.Event()


class VolumeBinder:
    """Writes the volume bindings of a pod and waits, on the informers' events, until its claims
    are bound. `volume`, `claim`, `pod` and `node` read the informers' stores (without `node`, the
    volumes' node affinity is not checked again); `on_write(operation, ok)` counts each write
    (koordpy_api_writes_total)."""

    def __init__(
        self,
        api: KubeApi,
        volume: Lookup,
        claim: Lookup,
        pod: Lookup,
        node: Lookup | None = None,
        *,
        on_write: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.api = api
        self.volume = volume
        self.claim = claim
        self.pod = pod
        self.node = node
        self.on_write = on_write
        self._by_claim: dict[str, set[_Waiter]] = {}
        self._by_volume: dict[str, set[_Waiter]] = {}
        self._by_pod: dict[str, set[_Waiter]] = {}
        self._by_node: dict[str, set[_Waiter]] = {}

    # ------------------------------------------------------------------ informer events in
    def claim_changed(self, key: str) -> None:
        for waiter in self._by_claim.get(key, ()):
            waiter.woken.set()

    def volume_changed(self, name: str) -> None:
        for waiter in self._by_volume.get(name, ()):
            waiter.woken.set()

    def pod_gone(self, key: str) -> None:
        for waiter in self._by_pod.get(key, ()):
            waiter.woken.set()

    def node_changed(self, name: str) -> None:
        for waiter in self._by_node.get(name, ()):
            waiter.woken.set()

    def waiting(self) -> int:
        """Pods whose binding waits for their claims to be bound."""
        return sum(len(w) for w in self._by_pod.values())

    # ------------------------------------------------------------------ the binding
    async def bind(self, pod: Pod, bindings: VolumeBindings) -> None:
        """Write what `bindings` asks for, then wait until the claims are bound. Raises
        VolumeBindingError, naming the claim or volume, when that cannot be done."""
        written_volumes = {b.pv_name: await self._bind_volume(b) for b in bindings.static}
        written_claims = {str(c): await self._provision(c, bindings.node_name) for c in bindings.provision}
        await self._wait(pod, bindings, written_volumes, written_claims)

    async def _write(self, operation: str, path: str, body: dict[str, Any], what: str) -> int | None:
        ok = False
        try:
            answer = await self.api.request("PUT", path, body=body)
            ok = True
        except ApiError as err:
            raise VolumeBindingError(f"binding volumes: {what}: {err}") from err
        except TRANSPORT_ERRORS as err:
            raise VolumeBindingError(f"binding volumes: {what}: {type(err).__name__}: {err}") from err
        finally:
            if self.on_write is not None:
                self.on_write(operation, ok)
        return _version(answer)

    async def _bind_volume(self, binding: VolumeToClaim) -> int | None:
        claim = binding.claim
        pvc = self.claim(str(claim))
        if pvc is None:
            raise VolumeBindingError(f'binding volumes: persistentvolumeclaim "{claim}" not found')
        uid = str(_meta(pvc).get("uid") or "")
        if binding.claim_uid and uid != binding.claim_uid:
            raise VolumeBindingError(
                f'binding volumes: persistentvolumeclaim "{claim}" was deleted and created again '
                f"(uid {uid}, not {binding.claim_uid})"
            )
        pv = self.volume(binding.pv_name)
        if pv is None:
            raise VolumeBindingError(f'binding volumes: persistentvolume "{binding.pv_name}" not found')
        body = volume_bound_to(pv, binding, uid)
        if body is None:
            return None
        version = await self._write(
            PV_CLAIM_REF,
            volume_path(binding.pv_name),
            body,
            f'updating persistentvolume "{binding.pv_name}" to bind it to claim "{claim}"',
        )
        log.info(
            "bound persistentvolume %s to claim %s; waiting for the binding to complete",
            binding.pv_name,
            claim,
        )
        return version

    async def _provision(self, claim: ClaimKey, node: str) -> int | None:
        pvc = self.claim(str(claim))
        if pvc is None:
            raise VolumeBindingError(f'binding volumes: persistentvolumeclaim "{claim}" not found')
        body = claim_on_node(pvc, node)
        if body is None:
            return None
        version = await self._write(
            PVC_SELECTED_NODE,
            claim_path(claim),
            body,
            f'updating persistentvolumeclaim "{claim}" to provision it on node "{node}"',
        )
        log.info("claim %s selected node %s; waiting for its volume to be provisioned", claim, node)
        return version

    async def _wait(
        self,
        pod: Pod,
        bindings: VolumeBindings,
        written_volumes: Mapping[str, int | None],
        written_claims: Mapping[str, int | None],
    ) -> None:
        keys = _claims_of(bindings)
        waiter = _Waiter(pod.key, bindings.node_name, keys)
        for key in waiter.claims:
            self._by_claim.setdefault(key, set()).add(waiter)
        self._by_pod.setdefault(pod.key, set()).add(waiter)
        self._by_node.setdefault(waiter.node, set()).add(waiter)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bindings.timeout_seconds
        try:
            while True:
                waiter.woken.clear()
                if self._check(pod, bindings, written_volumes, written_claims, waiter):
                    return
                left = deadline - loop.time()
                if left <= 0:
                    # the claims not bound yet (all of them while a write's event is still awaited)
                    pending = [k for k in keys if not self._bound(k)] or keys
                    raise VolumeBindingError(
                        f"binding volumes: timed out after {bindings.timeout_seconds:g}s waiting for "
                        f"persistentvolumeclaim(s) {', '.join(pending)} to be bound"
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.woken.wait(), left)
        finally:
            self._forget(waiter)

    def _bound(self, key: str) -> bool:
        pvc = self.claim(key)
        return pvc is not None and fully_bound(pvc, self.volume)

    def _check(
        self,
        pod: Pod,
        bindings: VolumeBindings,
        written_volumes: Mapping[str, int | None],
        written_claims: Mapping[str, int | None],
        waiter: _Waiter,
    ) -> bool:
        """kube's checkBindings: True when every claim is bound; raises when the binding cannot
        complete any more; False to wait for the next event."""
        stored = self.pod(pod.key)
        if stored is None or str(_meta(stored).get("uid") or "") != pod.uid:
            raise VolumeBindingError(f"binding volumes: pod {pod.key} does not exist any more")
        node_name = bindings.node_name
        node: Mapping[str, Any] | None = None
        if self.node is not None:
            node = self.node(node_name)
            if node is None:
                raise VolumeBindingError(f'binding volumes: node "{node_name}" does not exist any more')

        def check_affinity(pv: Mapping[str, Any], name: str) -> None:
            problem = affinity_problem(pv, name, node, node_name) if node is not None else None
            if problem is not None:
                raise VolumeBindingError(f"binding volumes: {problem}")

        done = True
        watched: set[str] = set()
        for binding in bindings.static:
            watched.add(binding.pv_name)
            pv = self.volume(binding.pv_name)
            if pv is None:
                raise VolumeBindingError(
                    f'binding volumes: persistentvolume "{binding.pv_name}" was deleted before claim '
                    f'"{binding.claim}" was bound to it'
                )
            if _older(pv, written_volumes.get(binding.pv_name)):
                done = False
                continue
            # the node may have been relabelled since the volume was chosen for it
            check_affinity(pv, binding.pv_name)
            ref = _section(_section(pv, "spec"), "claimRef")
            if not ref or not ref.get("uid"):
                raise VolumeBindingError(f'binding volumes: ClaimRef got reset for pv "{binding.pv_name}"')
        for claim in bindings.provision:
            key = str(claim)
            pvc = self.claim(key)
            if pvc is None:
                raise VolumeBindingError(f'binding volumes: persistentvolumeclaim "{key}" was deleted')
            if _older(pvc, written_claims.get(key)):
                done = False
                continue
            selected = _annotations(pvc).get(SELECTED_NODE)
            if selected is None:
                # the provisioner signals a failure by removing the annotation
                raise VolumeBindingError(
                    f'binding volumes: selectedNode annotation reset for PVC "{key}": provisioning failed'
                )
            if selected != node_name:
                raise VolumeBindingError(
                    f'binding volumes: provisioning failed for PVC "{key}": its selected node is now '
                    f'"{selected}", not "{node_name}"'
                )
            # a volume provisioned where the node cannot reach it
            provisioned = str(_section(pvc, "spec").get("volumeName") or "")
            pv = self.volume(provisioned) if provisioned else None
            if pv is not None:
                check_affinity(pv, provisioned)
        # kube waits for the claims of both kinds of binding too, whatever `wait_for` lists
        for key in _claims_of(bindings):
            pvc = self.claim(key)
            if pvc is None:
                raise VolumeBindingError(f'binding volumes: persistentvolumeclaim "{key}" was deleted')
            name = str(_section(pvc, "spec").get("volumeName") or "")
            if name:
                watched.add(name)
            if not fully_bound(pvc, self.volume):
                done = False
        self._watch_volumes(waiter, frozenset(watched))
        return done

    def _watch_volumes(self, waiter: _Waiter, names: frozenset[str]) -> None:
        if names == waiter.volumes:
            return
        for name in waiter.volumes - names:
            self._drop(self._by_volume, name, waiter)
        for name in names - waiter.volumes:
            self._by_volume.setdefault(name, set()).add(waiter)
        waiter.volumes = names

    def _forget(self, waiter: _Waiter) -> None:
        for key in waiter.claims:
            self._drop(self._by_claim, key, waiter)
        for name in waiter.volumes:
            self._drop(self._by_volume, name, waiter)
        self._drop(self._by_pod, waiter.pod, waiter)
        self._drop(self._by_node, waiter.node, waiter)

    @staticmethod
    def _drop(index: dict[str, set[_Waiter]], key: str, waiter: _Waiter) -> None:
        waiters = index.get(key)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del index[key]
