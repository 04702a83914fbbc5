"""Informers: list, then watch, a resource of the apiserver, keeping a store of its objects.

As client-go's reflector: a 410 Gone re-lists and reconciles the store (deletions missed while away
are delivered as deletions); a lost connection resumes the watch where it stopped, after a back-off.
A watch that goes silent (a dead peer, a NAT that dropped the connection's state: nothing arrives
and nothing closes) is given up after `watch_idle_timeout` seconds without a byte and resumed: the
apiserver sends a BOOKMARK about every minute to a watch that asks for them, so a live watch is
never that quiet. client-go notices the same within ~45 s through HTTP/2 pings.
An informer built with `hold=True` keeps what it lists and watches to itself until `release()`, so
that a program can wait until every informer has listed before it hears of any object: decisions
are then made on a complete view, never on the half of the cluster that happened to arrive first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi

log = logging.getLogger(__name__)


class InformerObserver(Protocol):
    """Where an informer reports its traffic (Prometheus in production)."""

    def informer_event(self, resource: str, event_type: str) -> None: ...
    def watch_restart(self, resource: str, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str
    api_version: str
    plural: str
    namespaced: bool = True
    field_selector: str = ""
    # a custom resource whose CRD may not be installed: its absence is waited out, not an error
    optional: bool = False

    @property
    def path(self) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{base}/{self.plural}"

    @property
    def label(self) -> str:
        group = self.api_version.rsplit("/", 1)[0] if "/" in self.api_version else ""
        return f"{self.plural}.{group}" if group else self.plural


# kube-scheduler's own pod informer leaves out finished pods: they hold no resources, and one that
# finishes reaches the scheduler as a deletion
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

NODES = Resource("Node", "v1", "nodes", namespaced=False)
PODS = Resource("Pod", "v1", "pods", field_selector=POD_FIELD_SELECTOR)
# every pod, finished ones too: the PodGroup status counts succeeded and failed members
ALL_PODS = Resource("Pod", "v1", "pods")
NAMESPACES = Resource("Namespace", "v1", "namespaces", namespaced=False)
PDBS = Resource("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets")
POD_GROUPS_SIGS = Resource("PodGroup", "scheduling.sigs.k8s.io/v1alpha1", "podgroups", optional=True)
POD_GROUPS_X_K8S = Resource("PodGroup", "scheduling.x-k8s.io/v1alpha1", "podgroups", optional=True)
NETWORK_TOPOLOGIES = Resource(
    "ClusterNetworkTopology",
    "scheduling.koordinator.sh/v1alpha1",
    "clusternetworktopologies",
    namespaced=False,
    optional=True,
)
ELASTIC_QUOTAS_SIGS = Resource(
    "ElasticQuota", "scheduling.sigs.k8s.io/v1alpha1", "elasticquotas", optional=True
)
ELASTIC_QUOTAS_X_K8S = Resource(
    "ElasticQuota", "scheduling.x-k8s.io/v1alpha1", "elasticquotas", optional=True
)
# storage, as kube-scheduler's informers watch it whatever its profile runs: VolumeBinding matches
# claims to volumes, VolumeZone, VolumeRestrictions and NodeVolumeLimits read them, and the cluster
# world follows the claims a binding waits for (cluster.volumes)
PERSISTENT_VOLUMES = Resource("PersistentVolume", "v1", "persistentvolumes", namespaced=False)
PERSISTENT_VOLUME_CLAIMS = Resource("PersistentVolumeClaim", "v1", "persistentvolumeclaims")
STORAGE_CLASSES = Resource("StorageClass", "storage.k8s.io/v1", "storageclasses", namespaced=False)
CSI_NODES = Resource("CSINode", "storage.k8s.io/v1", "csinodes", namespaced=False)
CSI_DRIVERS = Resource("CSIDriver", "storage.k8s.io/v1", "csidrivers", namespaced=False)
CSI_STORAGE_CAPACITIES = Resource("CSIStorageCapacity", "storage.k8s.io/v1", "csistoragecapacities")
VOLUME_ATTACHMENTS = Resource(
    "VolumeAttachment", "storage.k8s.io/v1", "volumeattachments", namespaced=False
)
STORAGE = (
    STORAGE_CLASSES,
    PERSISTENT_VOLUMES,
    PERSISTENT_VOLUME_CLAIMS,
    CSI_NODES,
    CSI_DRIVERS,
    CSI_STORAGE_CAPACITIES,
    VOLUME_ATTACHMENTS,
)
WATCHED = (
    NAMESPACES,
    NODES,
    PDBS,
    *STORAGE,
    POD_GROUPS_SIGS,
    POD_GROUPS_X_K8S,
    NETWORK_TOPOLOGIES,
    ELASTIC_QUOTAS_SIGS,
    ELASTIC_QUOTAS_X_K8S,
    PODS,
)


def watched(all_pods: bool) -> tuple[Resource, ...]:
    """What `koordpy run` watches; with `all_pods`, finished pods too (the embedded operators
    count finished members; the scheduler still hears of a finished pod as a deletion)."""
    return tuple(ALL_PODS if r is PODS and all_pods else r for r in WATCHED)


ADD, UPDATE, DELETE = "Add", "Update", "Delete"

# why a watch was started again (the `reason` of koordpy_watch_restarts_total): the resourceVersion
# expired (410 Gone: listed again), the server ended the watch, nothing arrived for the idle bound,
# or the list or watch failed (after a back-off)
EXPIRED, CLOSED, IDLE, ERROR = "expired", "closed", "idle", "error"
# the apiserver's watch cache sends a BOOKMARK to each watch about once a minute: this leaves a live
# but quiet watch half a minute to spare
WATCH_IDLE_TIMEOUT = 90.0
# as client-go's reflector: the server ends each watch after 5-10 minutes, spread so that watches
# do not all end together
WATCH_SECONDS = (300, 600)

# (action, object, previous object or None)
# client-go's reflector pages its lists by 500
PAGE_SIZE = 500

EventHandler = Callable[[str, dict[str, Any], "dict[str, Any] | None"], None]


def list_query(resource: Resource, page_size: int, *, from_cache: bool, cont: str) -> list[tuple[str, str]]:
    """One page of a list. The first list may come from the apiserver's watch cache
    (resourceVersion 0), as client-go's reflector asks for it: no quorum read of every object from
    etcd at start-up, and the watch that follows catches up from there; a list after a 410 reads
    fresh."""
    query = [("limit", str(page_size))]
    if from_cache and not cont:
        query.append(("resourceVersion", "0"))
    if resource.field_selector:
        query.append(("fieldSelector", resource.field_selector))
    if cont:
        query.append(("continue", cont))
    return query


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _drop_managed_fields(obj: dict[str, Any]) -> None:
    """Nobody here reads them, and they are often the largest part of an object: the store holds
    every pod of the cluster (kube-scheduler's informers drop them the same way)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


def meta_field(obj: Mapping[str, Any], name: str) -> str:
    return str((obj.get("metadata") or {}).get(name) or "")


class Backoff:
    """Exponential with jitter, as client-go's reflector backs off after a failed list or watch."""

    def __init__(self, initial: float = 0.5, maximum: float = 10.0) -> None:
        self.initial = initial
        self.maximum = maximum
        self._next = initial

    def reset(self) -> None:
        self._next = self.initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.maximum, self._next * 2)
        return delay * random.uniform(0.8, 1.2)


class Informer:
    """List, then watch from the list's resourceVersion; a 410 Gone re-lists and reconciles the
    store (deletions missed while away are delivered as deletions); a lost connection resumes
    the watch where it stopped, after a back-off."""

    def __init__(
        self,
        api: KubeApi,
        resource: Resource,
        handler: EventHandler,
        metrics: InformerObserver | None = None,
        *,
        page_size: int = PAGE_SIZE,
        missing_retry: float = 30.0,
        hold: bool = False,
        watch_idle_timeout: float = WATCH_IDLE_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not watch_idle_timeout > 0:
            raise ValueError(f"watch_idle_timeout must be greater than zero, got {watch_idle_timeout}")
        self.api = api
        self.resource = resource
        self.handler = handler
        self.metrics = metrics
        self.page_size = page_size
        self.missing_retry = missing_retry
        self.store: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self.missing = False
        self.resource_version: str | None = None
        self.watch_idle_timeout = watch_idle_timeout
        self._clock = clock
        # when the apiserver last showed that this informer's view is current: a list page, a watch
        # answered, an event or a bookmark; None before the first list and while the resource is
        # not served (nothing is watched then)
        self._heard_at: float | None = None
        self._backoff = Backoff()
        # events kept back until release(), in the order they happened
        self._held: list[tuple[str, dict[str, Any], dict[str, Any] | None]] | None = [] if hold else None
        # the first page, asked for before the informer ran (koordpy.kubeapi.prefetch)
        self.prefetched: concurrent.futures.Future[dict[str, Any]] | None = None

    def release(self) -> None:
        """Deliver what was held back, then everything as it comes."""
        held, self._held = self._held, None
        for action, obj, old in held or ():
            self._handle(action, obj, old)

    async def run(self) -> None:
        label = self.resource.label
        while True:
            try:
                if self.resource_version is None:
                    self.resource_version = await self._list()
                    if self.missing:
                        log.info("%s is served now; watching it", label)
                        self.missing = False
                    self.synced.set()
                    self._backoff.reset()
                ended = await self._watch()
                if ended == EXPIRED:
                    log.info("watch of %s expired (410 Gone); listing again", label)
                    self.resource_version = None
                elif ended == IDLE:
                    log.warning(
                        "watch of %s delivered nothing for %gs; resuming it from resourceVersion %s",
                        label,
                        self.watch_idle_timeout,
                        self.resource_version,
                    )
                self._restart(ended)
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.status == 410:
                    self.resource_version = None
                    self._restart(EXPIRED)
                    continue
                if err.status == 404 and self.resource.optional:
                    # the CRD is not installed, or was just removed: what it served is gone
                    self._replace({})
                    self.resource_version = None
                    self._heard_at = None
                    if not self.missing:
                        log.warning(
                            "%s is not served (is its CRD installed?); checking again every %.0fs",
                            label,
                            self.missing_retry,
                        )
                        self.missing = True
                    # nothing to wait for: the scheduler can run without it
                    self.synced.set()
                    await asyncio.sleep(self.missing_retry)
                    continue
                self._restart(ERROR)
                delay = self._backoff.next()
                log.warning("list/watch of %s failed: %s; retrying in %.1fs", label, err, delay)
                await asyncio.sleep(delay)
            except TRANSPORT_ERRORS as err:
                self._restart(ERROR)
                delay = self._backoff.next()
                log.warning(
                    "list/watch of %s failed: %s; retrying in %.1fs", label, err or type(err).__name__, delay
                )
                await asyncio.sleep(delay)
            except Exception:
                # a response this code did not expect (a malformed list or event): the watch must
                # not end for good; listing again from scratch puts the store right
                self.resource_version = None
                self._restart(ERROR)
                delay = self._backoff.next()
                log.exception("list/watch of %s failed unexpectedly; listing again in %.1fs", label, delay)
                await asyncio.sleep(delay)

    def _restart(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.watch_restart(self.resource.label, reason)

    def silent_for(self) -> float | None:
        """Seconds since the apiserver last showed this informer's view is current (a list page, a
        watch answered, an event or a bookmark); None when there is nothing to hear: not listed
        yet, or a resource that is not served. More than `watch_idle_timeout` means the watch is
        down or was given up as silent, and has not been answered again since."""
        if self._heard_at is None:
            return None
        return max(0.0, self._clock() - self._heard_at)

    def _heard(self) -> None:
        self._heard_at = self._clock()

    async def _list(self) -> str:
        items: dict[str, dict[str, Any]] = {}
        cont = ""
        from_cache = not self.synced.is_set()
        while True:
            page = await self._first_page() if from_cache and not cont else None
            if page is None:
                query = list_query(self.resource, self.page_size, from_cache=from_cache, cont=cont)
                page = await self.api.request("GET", self.resource.path, query=query, timeout=120.0)
            self._heard()
            for item in page.get("items") or ():
                # list items come without their type; handlers and views expect it
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", self.resource.kind)
                # dropped as each page arrives, not when the list is delivered: a list after a 410
                # holds every object twice until then (the store's and the list's), and the peak
                # stays in the process's footprint
                _drop_managed_fields(item)
                items[object_key(item)] = item
            meta = page.get("metadata") or {}
            cont = str(meta.get("continue") or "")
            if not cont:
                self._replace(items)
                return str(meta.get("resourceVersion") or "")

    async def _first_page(self) -> dict[str, Any] | None:
        """The first page asked for before the informer ran (koordpy.kubeapi.prefetch), once;
        None when there is none or it failed (the informer then asks itself)."""
        future, self.prefetched = self.prefetched, None
        if future is None:
            return None
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.debug("first list of %s asked early failed (%s); asking again", self.resource.label, err)
            return None

    def _replace(self, items: dict[str, dict[str, Any]]) -> None:
        """Reconcile the store with a fresh list, as events."""
        for key in [k for k in self.store if k not in items]:
            self._deliver("DELETED", self.store[key])
        for item in items.values():
            self._deliver("SYNC", item)

    async def _watch(self) -> str:
        """Watch until the server ends the watch (CLOSED), the resourceVersion expires (EXPIRED) or
        nothing arrives for `watch_idle_timeout` seconds (IDLE)."""
        assert self.resource_version is not None
        timeout = random.randint(*WATCH_SECONDS)
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(timeout)),
        ]
        if self.resource.field_selector:
            query.append(("fieldSelector", self.resource.field_selector))
        # aiohttp's sock_read: the longest wait for any byte, the answer's headers included; never
        # longer than the server's own end of the watch, with time for it to say so
        read_timeout = min(self.watch_idle_timeout, timeout + 30.0)
        try:
            async for event in self.api.stream(self.resource.path, query, read_timeout, self._heard):
                self._heard()
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = int(obj.get("code") or 0)
                    if code == 410:
                        return EXPIRED
                    raise ApiError(code, str(obj.get("reason") or ""), str(obj.get("message") or ""))
                rv = meta_field(obj, "resourceVersion")
                if kind != "BOOKMARK":
                    self._deliver(str(kind), obj)
                if rv:
                    self.resource_version = rv
                self._backoff.reset()
        except aiohttp.SocketTimeoutError:
            return IDLE
        return CLOSED

    def _deliver(self, kind: str, obj: dict[str, Any]) -> None:
        _drop_managed_fields(obj)
        key = object_key(obj)
        old = self.store.get(key)
        events: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        if kind == "DELETED":
            if old is None:
                return
            del self.store[key]
            events.append((DELETE, obj, old))
        else:
            if old is not None and meta_field(old, "uid") != meta_field(obj, "uid"):
                # deleted and created again under the same name while we were not looking
                events.append((DELETE, old, old))
                old = None
            if old is not None and meta_field(old, "resourceVersion") == meta_field(obj, "resourceVersion"):
                return
            self.store[key] = obj
            events.append((ADD if old is None else UPDATE, obj, old))
        for action, o, previous in events:
            if self.metrics is not None:
                self.metrics.informer_event(self.resource.label, action)
            if self._held is not None:
                self._held.append((action, o, previous))
            else:
                self._handle(action, o, previous)

    def _handle(self, action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        try:
            self.handler(action, obj, old)
        except Exception:
            # one object the handler chokes on must not stop the watch of all others
            log.exception("handling %s %s %s failed", action, self.resource.kind, object_key(obj))
