"""A small external volume provisioner for end-to-end tests: it makes the PersistentVolumes a CSI
provisioner would, without any storage behind them.

kube-controller-manager's PV controller binds claims to volumes, but provisions only through the
volume plugins compiled into it; for any other StorageClass provisioner it marks the claim
(annotation ``volume.kubernetes.io/storage-provisioner``) and waits for someone to create a volume.
For a class with ``volumeBindingMode: WaitForFirstConsumer`` it marks the claim only once a
scheduler has chosen a node (annotation ``volume.kubernetes.io/selected-node``). This provisioner
watches claims, and for each one so marked with its name it creates a PersistentVolume:

- capacity: the claim's request; access modes and volume mode: the claim's; the class's reclaim
  policy and mount options;
- ``claimRef`` to the claim (its uid included), so the PV controller binds the two and nothing else
  takes the volume;
- node affinity: the selected node's value of the class's ``parameters.topologyKey`` (default
  ``topology.kubernetes.io/zone``; ``kubernetes.io/hostname`` when the node has no such label), or,
  with no selected node, the class's ``allowedTopologies``.

Run it beside the code under test::

    async with TestProvisioner(api):  # api: koordpy.kubeapi.KubeApi
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import TracebackType
from typing import Any

from koordpy.kubeapi import ApiError, KubeApi

# a DNS subdomain: also the CSI driver name of its volumes, which must be one
PROVISIONER = "provisioner.koordpy.test"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
# the older name the PV controller still writes beside the new one
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

log = logging.getLogger(__name__)


def volume_name(claim: dict[str, Any]) -> str:
    """As external-provisioner names its volumes: one name per claim, so a retry finds the volume it
    made rather than making another."""
    return f"pvc-{claim['metadata']['uid']}"


def wants_volume(claim: dict[str, Any], provisioner: str) -> bool:
    """The PV controller asked `provisioner` for a volume for this unbound claim."""
    meta = claim.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    asked = annotations.get(STORAGE_PROVISIONER) or annotations.get(BETA_STORAGE_PROVISIONER)
    return (
        asked == provisioner
        and not (claim.get("spec") or {}).get("volumeName")
        and not meta.get("deletionTimestamp")
    )


def node_affinity(storage_class: dict[str, Any], node: dict[str, Any] | None) -> dict[str, Any] | None:
    """The volume's node affinity: the selected node's topology domain, else the class's allowed
    topologies, else none (reachable from every node)."""
    if node is not None:
        labels = (node.get("metadata") or {}).get("labels") or {}
        key = ((storage_class.get("parameters") or {}).get("topologyKey")) or ZONE
        if key not in labels:
            key = HOSTNAME
        value = labels.get(key) or node["metadata"]["name"]
        terms = [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]
        return {"required": {"nodeSelectorTerms": terms}}
    allowed = storage_class.get("allowedTopologies") or []
    if not allowed:
        return None
    terms = [
        {
            "matchExpressions": [
                {"key": e["key"], "operator": "In", "values": list(e["values"])}
                for e in term.get("matchLabelExpressions") or []
            ]
        }
        for term in allowed
    ]
    return {"required": {"nodeSelectorTerms": terms}}


def volume_for(
    claim: dict[str, Any], storage_class: dict[str, Any], node: dict[str, Any] | None
) -> dict[str, Any]:
    """The PersistentVolume provisioned for `claim` of `storage_class` (on `node`, if selected)."""
    meta, spec = claim["metadata"], claim["spec"]
    pv_spec: dict[str, Any] = {
        "capacity": {"storage": spec["resources"]["requests"]["storage"]},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "storageClassName": storage_class["metadata"]["name"],
        "claimRef": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
        # no storage behind it: a volume source is required, and a CSI one is what an external
        # provisioner makes (nothing mounts it: KWOK runs no kubelet)
        "csi": {"driver": storage_class["provisioner"], "volumeHandle": volume_name(claim)},
    }
    if storage_class.get("mountOptions"):
        pv_spec["mountOptions"] = list(storage_class["mountOptions"])
    affinity = node_affinity(storage_class, node)
    if affinity is not None:
        pv_spec["nodeAffinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": volume_name(claim),
            "annotations": {PROVISIONED_BY: storage_class["provisioner"]},
        },
        "spec": pv_spec,
    }


class TestProvisioner:
    """Provisions volumes for the claims the PV controller hands to `name`, until stopped."""

    __test__ = False  # not a pytest test class

    def __init__(self, api: KubeApi, name: str = PROVISIONER) -> None:
        self.api = api
        self.name = name
        # claim uid -> the volume made for it
        self.provisioned: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TestProvisioner:
        self._task = asyncio.create_task(self._run(), name=f"provisioner {self.name}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        """List, then watch from the list's resourceVersion; after any error (an expired version,
        a closed watch) list again: a claim missed meanwhile is seen in the next list."""
        path = "/api/v1/persistentvolumeclaims"
        while True:
            try:
                listing = await self.api.request("GET", path)
                for claim in listing.get("items") or []:
                    await self._handle_one(claim)
                query = [
                    ("watch", "true"),
                    ("resourceVersion", listing["metadata"]["resourceVersion"]),
                    ("allowWatchBookmarks", "false"),
                    ("timeoutSeconds", "60"),
                ]
                async for event in self.api.stream(path, query, read_timeout=90):
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        await self._handle_one(event["object"])
                    elif event.get("type") == "ERROR":
                        break
            except asyncio.CancelledError:
                raise
            except Exception:  # a test helper keeps going; a test left without its volume fails
                log.exception("test provisioner %s: list/watch failed; listing again", self.name)
                await asyncio.sleep(0.5)

    async def _handle_one(self, claim: dict[str, Any]) -> None:
        """`handle`, with a refused request logged: one claim it cannot serve (a class or node gone,
        an invalid volume) must not stop it serving the others."""
        try:
            await self.handle(claim)
        except ApiError:
            meta = claim.get("metadata") or {}
            log.exception(
                "test provisioner %s: no volume for %s/%s", self.name, meta.get("namespace"), meta.get("name")
            )

    async def handle(self, claim: dict[str, Any]) -> None:
        """Create the volume `claim` asks for, once."""
        if not wants_volume(claim, self.name) or claim["metadata"]["uid"] in self.provisioned:
            return
        class_name = claim["spec"].get("storageClassName")
        if not class_name:
            return
        storage_class = await self.api.request("GET", f"/apis/storage.k8s.io/v1/storageclasses/{class_name}")
        if storage_class.get("provisioner") != self.name:
            return
        node_name = (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE)
        waits = storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"
        if waits and not node_name:
            return  # the PV controller does not ask before a node is chosen; be as strict
        node = await self.api.request("GET", f"/api/v1/nodes/{node_name}") if node_name else None
        volume = volume_for(claim, storage_class, node)
        try:
            await self.api.request("POST", "/api/v1/persistentvolumes", body=volume)
        except ApiError as exc:
            if exc.status != 409:  # 409: made by an earlier attempt
                raise
        self.provisioned[claim["metadata"]["uid"]] = volume["metadata"]["name"]
