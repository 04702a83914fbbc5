"""Keeping the scheduler's view of the cluster true to what the informers hold, whatever the API
server sends.

Three guards, each reported through metrics, Warning events and `/healthz`:

- every informer event is applied inside a guard: an exception ends that event only, is followed by
  a cache check, and the object is applied once more from the informer's store; an object that
  fails again is left out of scheduling (a Warning event names it and the error) until it changes;
- a periodic audit checks the cache's arrays against its records (rebuilding them when they
  disagree) and the scheduler's nodes, pods and storage objects against the informers' stores
  (re-delivering what differs: what a re-list would do, without asking the API server again). A
  storage object the scheduler does not hold is re-delivered unless the storage catalog holds it as
  malformed: a volume, claim, class or CSINode missing there would be placed around as if it did
  not exist, while a malformed one holds the pods that need it with a message naming it;
- nodes whose spec koordpy cannot use are left out of scheduling with a Warning event, once per
  change of the object.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.api import names
from koordpy.api.node import Node
from koordpy.cluster.events import EventRecorder, truncate
from koordpy.kubeapi.informer import ADD, DELETE, UPDATE, EventHandler, Informer, meta_field, object_key
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins.storagecatalog import STORAGE_CATALOG, StorageCatalog
from koordpy.scheduler import Scheduler

log = logging.getLogger(__name__)

# how often the audit runs while nothing has gone wrong (seconds)
AUDIT_INTERVAL = 60.0
# how much of an exception's text goes into a Warning event
_ERROR_TEXT_LIMIT = 300


def object_reference(kind: str, api_version: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    ref = {"apiVersion": api_version, "kind": kind, "name": meta.get("name"), "uid": meta.get("uid")}
    if meta.get("namespace"):
        ref["namespace"] = meta.get("namespace")
    return ref


def _error_text(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}"
    return text if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 3] + "..."


@dataclass(slots=True)
class Integrity:
    scheduler: Scheduler
    metrics: SchedulerMetrics
    events: EventRecorder
    informers: Mapping[str, Informer]
    # the world's own handlers, by kind, to re-deliver objects through
    handlers: dict[str, EventHandler] = field(default_factory=dict)
    # objects left out after failing twice: (kind, key) -> the resourceVersion that failed
    quarantined: dict[tuple[str, str], str] = field(default_factory=dict)
    # nodes already reported as unusable: name -> resourceVersion reported
    reported_nodes: dict[str, str] = field(default_factory=dict)
    audit_due: bool = False
    event_failures: int = 0

    def guard(self, kind: str, api_version: str, handler: EventHandler) -> EventHandler:
        """`handler` with the first guard (see the module's docstring)."""
        self.handlers[kind] = handler

        def guarded(action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            key = (kind, object_key(obj))
            version = str(meta_field(obj, "resourceVersion"))
            if action != DELETE and self.quarantined.get(key) == version:
                return
            self.quarantined.pop(key, None)
            try:
                handler(action, obj, old)
                return
            except Exception as err:
                first = err
            self.event_failures += 1
            self.metrics.event_failures.labels(kind).inc()
            log.error(
                "applying %s %s %s failed; checking the cache and trying once more",
                action,
                kind,
                key[1],
                exc_info=first,
            )
            self.scheduler.check_cache()
            try:
                handler(action, obj, None)
                return
            except Exception as err:
                second = err
            log.error(
                "applying %s %s %s failed again; it is left out until it changes",
                action,
                kind,
                key[1],
                exc_info=second,
            )
            self.audit_due = True
            if action != DELETE:
                self.quarantined[key] = version
                self.events.record(
                    object_reference(kind, api_version, obj),
                    "Warning",
                    names.SCHEDULER_ERROR,
                    "Scheduling",
                    truncate(
                        f"koordpy could not apply this {kind} and leaves it out of scheduling until it "
                        f"changes: {_error_text(second)}",
                        1024,
                    ),
                )

        return guarded

    def node_seen(self, node: Node, obj: Mapping[str, Any]) -> None:
        """A node koordpy cannot use enters the cache unschedulable (its view says so); this says
        why, on the node, once per version."""
        if node.spec_error is None:
            self.reported_nodes.pop(node.name, None)
            return
        version = str(meta_field(obj, "resourceVersion"))
        if self.reported_nodes.get(node.name) == version:
            return
        self.reported_nodes[node.name] = version
        log.warning("node %s is left out of scheduling: %s", node.name, node.spec_error)
        self.events.record(
            object_reference("Node", "v1", obj),
            "Warning",
            names.INVALID_SPEC,
            "Scheduling",
            f"koordpy leaves this node out of scheduling: {node.spec_error}",
        )

    def node_gone(self, name: str) -> None:
        """The node was deleted: what was reported of it goes with it."""
        self.reported_nodes.pop(name, None)

    # ------------------------------------------------------------------ the audit
    def audit(self) -> list[str]:
        """The cache check, then the scheduler's nodes and pods against the informers' stores;
        returns what differed (each difference already re-delivered)."""
        self.audit_due = False
        found = [f"cache: {p}" for p in self.scheduler.check_cache()]
        found += self._reconcile_nodes()
        found += self._reconcile_pods()
        found += self._reconcile_storage()
        if found:
            log.warning("audit found %d difference(s), repaired: %s", len(found), "; ".join(found[:5]))
        return found

    def _redeliver(self, kind: str, action: str, obj: dict[str, Any]) -> None:
        handler = self.handlers.get(kind)
        if handler is not None:
            handler(action, obj, None)

    def _reconcile_nodes(self) -> list[str]:
        informer = self.informers.get("Node")
        if informer is None or not informer.synced.is_set():
            return []
        found: list[str] = []
        cached = self.scheduler.cache.snapshot.row_of
        for name, obj in informer.store.items():
            if name not in cached and ("Node", name) not in self.quarantined:
                found.append(f"node {name} missing from the cache")
                self._redeliver("Node", ADD, obj)
        for name in [n for n in cached if n not in informer.store]:
            found.append(f"node {name} deleted on the server but cached")
            self._redeliver("Node", DELETE, {"metadata": {"name": name}})
        return found

    def _reconcile_pods(self) -> list[str]:
        informer = self.informers.get("Pod")
        if informer is None or not informer.synced.is_set():
            return []
        found: list[str] = []
        sched = self.scheduler
        for key, obj in informer.store.items():
            if ("Pod", key) in self.quarantined:
                continue
            spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
            assert isinstance(spec, Mapping)
            node_name = spec.get("nodeName") or ""
            state = sched.cache.pod_state(key)
            finished = is_finished(obj)
            if finished:
                if key in sched.pods or (state is not None and not state.assumed):
                    found.append(f"pod {key} finished on the server but held")
                    self._redeliver("Pod", UPDATE, obj)
            elif node_name:
                if state is None or (not state.assumed and state.node_name != node_name):
                    found.append(f"pod {key} bound to {node_name} on the server, not in the cache")
                    self._redeliver("Pod", UPDATE, obj)
            elif key not in sched.pods:
                found.append(f"pod {key} pending on the server, unknown to the scheduler")
                self._redeliver("Pod", ADD, obj)
        for key, state in list(sched.cache.pods.items()):
            if not state.assumed and key not in informer.store:
                found.append(f"pod {key} deleted on the server but cached")
                sched.on_pod_delete(state.pod)
        return found

    def _reconcile_storage(self) -> list[str]:
        catalog = self.scheduler.shared.get(STORAGE_CATALOG)
        if catalog is None:
            return []  # no plugin of this scheduler reads storage
        found: list[str] = []
        capacities: dict[str, set[str]] = {}
        for kind in STORAGE_KINDS:
            informer = self.informers.get(kind)
            if informer is None or not informer.synced.is_set():
                continue
            for key, obj in list(informer.store.items()):
                if (kind, key) in self.quarantined or catalog.malformed(kind, key) is not None:
                    continue
                if not _held(catalog, kind, key, obj, capacities):
                    found.append(f"{kind} {key} missing from the storage catalog")
                    self._redeliver(kind, ADD, obj)
        return found


# the storage kinds the audit holds the catalog to
STORAGE_KINDS = (
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "VolumeAttachment",
)


def _held(
    catalog: StorageCatalog, kind: str, key: str, obj: Mapping[str, Any], capacities: dict[str, set[str]]
) -> bool:
    """Whether the catalog holds the object an informer holds under `key`."""
    if kind == "PersistentVolume":
        return catalog.volume(key) is not None
    if kind == "PersistentVolumeClaim":
        namespace, _, name = key.partition("/")
        return catalog.claim(namespace, name) is not None
    if kind == "StorageClass":
        return catalog.storage_class(key) is not None
    if kind == "CSINode":
        return catalog.csi_node(key) is not None
    if kind == "CSIDriver":
        return catalog.csi_driver(key) is not None
    if kind == "VolumeAttachment":
        return catalog.attachment(key) is not None
    class_name = str(obj.get("storageClassName") or "")
    if class_name not in capacities:
        # each class's capacities once per audit: a cluster publishes one per topology segment
        capacities[class_name] = {c.key for c in catalog.capacities(class_name)}
    return key in capacities[class_name]


def is_finished(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status")
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")
