"""The cluster world: `koordpy run` against a kube-apiserver.

Informers list and watch Nodes, Pods, Namespaces, PodDisruptionBudgets and koordpy's custom
resources and feed the scheduler's synchronous core; the scheduling loop runs cycles and turns the
decisions the core drains into API calls: bindings (through `pods/binding`), status patches,
evictions and `events.k8s.io/v1` Events. Every call that blocks runs in its own task, so the next
scheduling cycle never waits for the last pod's binding.

All API traffic goes through `KubeApi`, which asks kubernetes-asyncio for the raw response and parses
the JSON itself: the generated models cost more than the scheduling cycle they would feed, and some of
them (the Binding's `v1.Status` answer) cannot be deserialized at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import random
import signal
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException

from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import RealClock
from koordpy.framework.effects import Bind, Effect, Evict, Nominate, PodUnschedulable, RecordEvent
from koordpy.metrics import SchedulerMetrics
from koordpy.scheduler import Scheduler

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

REPORTING_CONTROLLER = "koordpy"
# events.k8s.io/v1 validation limits
EVENT_NOTE_LIMIT = 1024
REPORTING_INSTANCE_LIMIT = 128
# client-go's events recorder treats repeats within this window as one series
EVENT_SERIES_WINDOW = 6 * 60.0
EVENT_CACHE_SIZE = 4096

# kube-scheduler samples plugin durations in 10% of the cycles: timing every plugin call costs
# a visible share of a cycle
PLUGIN_METRICS_SAMPLE_PERCENT = 10
# the unschedulable pool's periodic flush scans it, so while busy time moves on at this pace
BUSY_TICK_INTERVAL = 1.0
# a standby never carries out decisions; these are the ones made from events before it led
MAX_HELD_EFFECTS = 10_000
STANDBY_POLL = 1.0


class ApiError(Exception):
    """A response outside 2xx, with the apiserver's `Status` reason and message when it sent one."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message

    @staticmethod
    def from_body(status: int, body: bytes) -> ApiError:
        reason, message = "", body.decode(errors="replace")[:500]
        with contextlib.suppress(ValueError, AttributeError):
            data = json.loads(body)
            reason = str(data.get("reason") or "")
            message = str(data.get("message") or "")
        return ApiError(status, reason, message)


# what a request may fail with besides ApiError: the apiserver unreachable, the connection cut,
# a reply that is not JSON
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, OSError, ValueError)


class KubeApi:
    """Raw JSON requests through kubernetes-asyncio's configured client (auth, TLS, proxy)."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        self.api_client = api_client

    @staticmethod
    async def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeApi:
        """From the kubeconfig when one is named, else the in-cluster service account, else the
        default kubeconfig ($KUBECONFIG or ~/.kube/config)."""
        configuration = k8s_client.Configuration()
        if kubeconfig:
            await k8s_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)
            except ConfigException:
                await k8s_config.load_kube_config(context=context, client_configuration=configuration)
        return KubeApi(k8s_client.ApiClient(configuration=configuration))

    async def close(self) -> None:
        await self.api_client.close()

    async def _call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None,
        body: Any,
        content_type: str,
        timeout: float | aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": JSON, "Content-Type": content_type}
        response: aiohttp.ClientResponse = await self.api_client.call_api(
            path,
            method,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        response = await self._call(method, path, query, body, content_type, timeout)
        try:
            data = await response.read()
        finally:
            response.release()
        if not 200 <= response.status < 300:
            raise ApiError.from_body(response.status, data)
        if not data:
            return {}
        parsed = json.loads(data)
        return parsed if isinstance(parsed, dict) else {}

    async def stream(
        self, path: str, query: list[tuple[str, str]], read_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """The JSON lines of a watch. Lines are split by hand: aiohttp's readline refuses lines
        longer than 128 KiB, and a pod with large annotations makes one."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=read_timeout)
        response = await self._call("GET", path, query, None, JSON, timeout)
        try:
            if response.status != 200:
                raise ApiError.from_body(response.status, await response.read())
            buffer = bytearray()
            async for chunk in response.content.iter_any():
                buffer += chunk
                start = 0
                while (end := buffer.find(b"\n", start)) >= 0:
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if line.strip():
                        yield json.loads(line)
                del buffer[:start]
        finally:
            # a watch given up half-way must not go back to the pool with unread data
            response.close()


def micro_time(t: float | None = None) -> str:
    """A `metav1.MicroTime` as the apiserver writes it."""
    moment = datetime.fromtimestamp(time.time() if t is None else t, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(t: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if t is None else t, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def default_identity() -> str:
    """`<hostname>_<uuid>`, as kube-scheduler names its leader-election holder."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}" + (f"/{sub}" if sub else "")


# ============================================================================== informers
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
WATCHED = (NAMESPACES, NODES, PDBS, POD_GROUPS_SIGS, POD_GROUPS_X_K8S, NETWORK_TOPOLOGIES, PODS)

ADD, UPDATE, DELETE = "Add", "Update", "Delete"

# (action, object, previous object or None)
EventHandler = Callable[[str, dict[str, Any], "dict[str, Any] | None"], None]


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _meta(obj: Mapping[str, Any], name: str) -> str:
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
        metrics: SchedulerMetrics | None = None,
        *,
        page_size: int = 500,
        missing_retry: float = 30.0,
    ) -> None:
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
        self._backoff = Backoff()

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
                expired = await self._watch()
                if expired:
                    log.info("watch of %s expired (410 Gone); listing again", label)
                    self.resource_version = None
                    self._restart("expired")
                else:
                    self._restart("closed")
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.status == 410:
                    self.resource_version = None
                    self._restart("expired")
                    continue
                if err.status == 404 and self.resource.optional:
                    # the CRD is not installed, or was just removed: what it served is gone
                    self._replace({})
                    self.resource_version = None
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
                self._restart("error")
                delay = self._backoff.next()
                log.warning("list/watch of %s failed: %s; retrying in %.1fs", label, err, delay)
                await asyncio.sleep(delay)
            except TRANSPORT_ERRORS as err:
                self._restart("error")
                delay = self._backoff.next()
                log.warning(
                    "list/watch of %s failed: %s; retrying in %.1fs", label, err or type(err).__name__, delay
                )
                await asyncio.sleep(delay)

    def _restart(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.watch_restart(self.resource.label, reason)

    async def _list(self) -> str:
        items: dict[str, dict[str, Any]] = {}
        cont = ""
        while True:
            query = [("limit", str(self.page_size))]
            if self.resource.field_selector:
                query.append(("fieldSelector", self.resource.field_selector))
            if cont:
                query.append(("continue", cont))
            page = await self.api.request("GET", self.resource.path, query=query, timeout=120.0)
            for item in page.get("items") or ():
                # list items come without their type; handlers and views expect it
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", self.resource.kind)
                items[object_key(item)] = item
            meta = page.get("metadata") or {}
            cont = str(meta.get("continue") or "")
            if not cont:
                self._replace(items)
                return str(meta.get("resourceVersion") or "")

    def _replace(self, items: dict[str, dict[str, Any]]) -> None:
        """Reconcile the store with a fresh list, as events."""
        for key in [k for k in self.store if k not in items]:
            self._deliver("DELETED", self.store[key])
        for item in items.values():
            self._deliver("SYNC", item)

    async def _watch(self) -> bool:
        """Watch until the server ends the watch (False) or the resourceVersion expires (True)."""
        assert self.resource_version is not None
        # client-go spreads watch timeouts over 5-10 minutes so watches do not all end together
        timeout = random.randint(300, 600)
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(timeout)),
        ]
        if self.resource.field_selector:
            query.append(("fieldSelector", self.resource.field_selector))
        async for event in self.api.stream(self.resource.path, query, read_timeout=timeout + 30.0):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 0)
                if code == 410:
                    return True
                raise ApiError(code, str(obj.get("reason") or ""), str(obj.get("message") or ""))
            rv = _meta(obj, "resourceVersion")
            if kind != "BOOKMARK":
                self._deliver(str(kind), obj)
            if rv:
                self.resource_version = rv
            self._backoff.reset()
        return False

    def _deliver(self, kind: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        old = self.store.get(key)
        events: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        if kind == "DELETED":
            if old is None:
                return
            del self.store[key]
            events.append((DELETE, obj, old))
        else:
            if old is not None and _meta(old, "uid") != _meta(obj, "uid"):
                # deleted and created again under the same name while we were not looking
                events.append((DELETE, old, old))
                old = None
            if old is not None and _meta(old, "resourceVersion") == _meta(obj, "resourceVersion"):
                return
            self.store[key] = obj
            events.append((ADD if old is None else UPDATE, obj, old))
        for action, o, previous in events:
            if self.metrics is not None:
                self.metrics.informer_event(self.resource.label, action)
            try:
                self.handler(action, o, previous)
            except Exception:
                # one object the scheduler chokes on must not stop the watch of all others
                log.exception("handling %s %s %s failed", action, self.resource.kind, key)


def node_scheduling_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a node update can matter to scheduling. Most node updates are status heartbeats;
    passing them on would send every unschedulable pod back to the active queue each time, which
    kube-scheduler avoids the same way."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    return (
        old_meta.get("labels") != new_meta.get("labels")
        or old_meta.get("annotations") != new_meta.get("annotations")
        or old.get("spec") != new.get("spec")
        or any(old_status.get(f) != new_status.get(f) for f in ("allocatable", "capacity", "images"))
        or _condition_states(old_status) != _condition_states(new_status)
    )


def _condition_states(status: Mapping[str, Any]) -> dict[str, str]:
    conditions = status.get("conditions") or ()
    return {str(c.get("type")): str(c.get("status")) for c in conditions if isinstance(c, dict)}


# ============================================================================== events
@dataclass(slots=True)
class _Series:
    namespace: str
    name: str
    count: int
    last: float


class EventRecorder:
    """`events.k8s.io/v1` Events. Repeats of one event (same object, reason, action and related
    object) within six minutes update the first one's `series`, as client-go's recorder does,
    rather than piling up new objects."""

    def __init__(self, api: KubeApi, instance: str, metrics: SchedulerMetrics | None = None) -> None:
        self.api = api
        self.instance = instance[:REPORTING_INSTANCE_LIMIT]
        self.metrics = metrics
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()

    async def record(
        self,
        regarding: Mapping[str, Any],
        event_type: str,
        reason: str,
        action: str,
        note: str,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        namespace = str(regarding.get("namespace") or "default")
        key = (
            str(regarding.get("uid") or ""),
            namespace,
            str(regarding.get("name") or ""),
            reason,
            action,
            str((related or {}).get("uid") or ""),
        )
        now = time.time()
        series = self._series.get(key)
        ok = True
        try:
            if series is not None and now - series.last < EVENT_SERIES_WINDOW:
                series.count += 1
                series.last = now
                self._series.move_to_end(key)
                patch = {"series": {"count": series.count, "lastObservedTime": micro_time(now)}}
                await self.api.request(
                    "PATCH",
                    f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}",
                    body=patch,
                    content_type=MERGE_PATCH,
                    timeout=15.0,
                )
                return
            name = f"{regarding.get('name')}.{time.time_ns():x}"
            event: dict[str, Any] = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "eventTime": micro_time(now),
                "reportingController": REPORTING_CONTROLLER,
                "reportingInstance": self.instance,
                "action": action,
                "reason": reason,
                "type": event_type,
                "note": _truncate(note, EVENT_NOTE_LIMIT),
                "regarding": dict(regarding),
            }
            if related:
                event["related"] = dict(related)
            await self.api.request(
                "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=event, timeout=15.0
            )
            log.debug("event %s %s for %s/%s", event_type, reason, namespace, regarding.get("name"))
            self._series[key] = _Series(namespace, name, 1, now)
            if len(self._series) > EVENT_CACHE_SIZE:
                self._series.popitem(last=False)
        except ApiError as err:
            ok = False
            if series is not None and err.status == 404:
                # the first event was garbage-collected; the next repeat starts a new one
                self._series.pop(key, None)
            log.warning(
                "recording event %s for %s/%s failed: %s", reason, namespace, regarding.get("name"), err
            )
        except TRANSPORT_ERRORS as err:
            ok = False
            log.warning(
                "recording event %s for %s/%s failed: %s", reason, namespace, regarding.get("name"), err
            )
        finally:
            if self.metrics is not None:
                self.metrics.api_write("event", ok)


def _truncate(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode(errors="ignore") + "..."


def pod_reference(pod: Pod | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(pod, Pod):
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        }
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }


# ============================================================================== the world
EVENT_ACTIONS = {"Scheduled": "Binding", "FailedScheduling": "Scheduling", "Preempted": "Preempting"}


class KubeWorld:
    """Informers in, decisions out, and the scheduling loop between them.

    `leading()` says whether this instance may act; a standby keeps its informers (and so the
    scheduler's cache and queues) warm but runs no cycle and writes nothing."""

    def __init__(
        self,
        api: KubeApi,
        scheduler: Scheduler,
        metrics: SchedulerMetrics,
        identity: str,
        *,
        leading: Callable[[], bool] | None = None,
        resources: tuple[Resource, ...] = WATCHED,
        plugin_metrics_sample_percent: int = PLUGIN_METRICS_SAMPLE_PERCENT,
    ) -> None:
        self.api = api
        self.scheduler = scheduler
        self.metrics = metrics
        self.identity = identity
        self.leading: Callable[[], bool] = leading or (lambda: True)
        self.events = EventRecorder(api, identity, metrics)
        self.plugin_sample = plugin_metrics_sample_percent / 100.0
        self.informers: dict[Resource, Informer] = {}
        for resource in resources:
            self.informers[resource] = Informer(api, resource, self._handler_for(resource), metrics)
        # awaited just before a binding request is sent; tests use it to act in that window
        self.before_bind: Callable[[Bind], Awaitable[None]] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._bindings: set[asyncio.Task[None]] = set()
        self._writes: set[asyncio.Task[None]] = set()
        # the latest write task per pod: writes to one pod are carried out in order
        self._pod_chain: dict[str, asyncio.Task[None]] = {}

    # ------------------------------------------------------------------ lifecycle
    @property
    def pod_store(self) -> dict[str, dict[str, Any]]:
        informer = self.informers.get(PODS)
        return informer.store if informer is not None else {}

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def unsynced(self) -> list[str]:
        return [r.label for r, i in self.informers.items() if not i.synced.is_set()]

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.informers.values()))

    async def start(self) -> None:
        for resource, informer in self.informers.items():
            self._tasks.append(asyncio.create_task(informer.run(), name=f"informer {resource.label}"))
        self._tasks.append(asyncio.create_task(self._loop(), name="scheduling loop"))

    def in_flight(self) -> int:
        return len(self._bindings)

    def halt(self) -> None:
        """Stop at once (leadership lost): no further cycle, no further write."""
        self._stopping = True
        self._wake.set()
        for task in (*self._bindings, *self._writes, *self._tasks):
            task.cancel()

    async def shutdown(self, timeout: float = 15.0) -> None:
        """Stop scheduling, let the bindings in flight finish (up to `timeout`), then stop."""
        self._stopping = True
        self._wake.set()
        deadline = time.monotonic() + timeout
        if self._bindings:
            log.info("waiting for %d binding(s) in flight", len(self._bindings))
            await asyncio.wait(list(self._bindings), timeout=timeout)
        # what the finished bindings decided (Scheduled events, failures) is still reported;
        # nothing new is bound
        if self.leading():
            self._apply([e for e in self.scheduler.drain() if not isinstance(e, Bind)])
        pending = [t for t in (*self._bindings, *self._writes) if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=max(0.1, deadline - time.monotonic()))
            if still:
                log.warning(
                    "%d API call(s) still in flight after %.0fs; abandoning them", len(still), timeout
                )
        for task in (*self._bindings, *self._writes, *self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._bindings, *self._writes, return_exceptions=True)

    # ------------------------------------------------------------------ events in
    def _handler_for(self, resource: Resource) -> EventHandler:
        if resource.kind == "Pod":
            return self._on_pod
        if resource.kind == "Node":
            return self._on_node
        if resource.kind == "Namespace":
            return self._on_namespace
        kind = resource.kind

        def on_object(action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            self.scheduler.on_object(kind, action, obj)
            self._wake.set()

        return on_object

    def _on_pod(self, action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        pod = Pod.from_dict(obj)
        if action == ADD:
            self.scheduler.on_pod_add(pod)
        elif action == UPDATE:
            self.scheduler.on_pod_update(pod)
        else:
            self.scheduler.on_pod_delete(pod)
        self._wake.set()

    def _on_node(self, action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if action == DELETE:
            self.scheduler.on_node_delete(_meta(obj, "name"))
        elif action == ADD:
            self.scheduler.on_node_add(Node.from_dict(obj))
        elif old is None or node_scheduling_changed(old, obj):
            self.scheduler.on_node_update(Node.from_dict(obj))
        else:
            return
        self._wake.set()

    def _on_namespace(self, action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if action != DELETE:
            self.scheduler.on_namespace(Namespace.from_dict(obj))

    # ------------------------------------------------------------------ the loop
    def wake(self) -> None:
        self._wake.set()

    async def _loop(self) -> None:
        await self.wait_synced()
        log.info("caches synced")
        while not self._stopping:
            try:
                await self._run_cycles()
            except asyncio.CancelledError:
                raise
            except Exception:
                # a bug met by one pod must not end scheduling for all the others
                log.exception("scheduling loop failed; continuing")
                await asyncio.sleep(1.0)

    async def _run_cycles(self) -> None:
        sched = self.scheduler
        clock = sched.clock
        while not self._stopping:
            self._wake.clear()
            if not self.leading():
                self._hold_effects()
                # leadership may arrive without any cluster event to wake us
                await self._sleep(STANDBY_POLL)
                continue
            sched.tick()
            self._apply(sched.drain())
            last_tick = time.monotonic()
            while not self._stopping and self.leading():
                sched.observe_plugins = random.random() < self.plugin_sample
                if not sched.schedule_one():
                    break
                self._apply(sched.drain())
                # watches and bindings progress between cycles
                await asyncio.sleep(0)
                if time.monotonic() - last_tick >= BUSY_TICK_INTERVAL:
                    sched.tick()
                    self._apply(sched.drain())
                    last_tick = time.monotonic()
            if self._stopping or not self.leading():
                continue
            self._apply(sched.drain())
            wakeup = sched.next_wakeup()
            await self._sleep(None if wakeup is None else max(0.0, wakeup - clock.now()))

    async def _sleep(self, timeout: float | None) -> None:
        if self._wake.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    def _hold_effects(self) -> None:
        outbox = self.scheduler.outbox
        if len(outbox) > MAX_HELD_EFFECTS:
            del outbox[: len(outbox) - MAX_HELD_EFFECTS]

    # ------------------------------------------------------------------ decisions out
    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Bind):
                self._chain(effect.pod.key, functools.partial(self._bind, effect), binding=True)
            elif isinstance(effect, PodUnschedulable):
                self._chain(effect.pod.key, functools.partial(self._unschedulable, effect))
            elif isinstance(effect, Nominate):
                self._chain(effect.pod.key, functools.partial(self._nominate, effect))
            elif isinstance(effect, Evict):
                self._chain(effect.victim.key, functools.partial(self._evict, effect))
            elif isinstance(effect, RecordEvent):
                self._spawn(
                    self.events.record(
                        pod_reference(effect.pod),
                        effect.event_type,
                        effect.reason,
                        EVENT_ACTIONS.get(effect.reason, "Scheduling"),
                        effect.message,
                    )
                )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def _chain(self, key: str, call: Callable[[], Coroutine[Any, Any, None]], binding: bool = False) -> None:
        previous = self._pod_chain.get(key)

        async def after_previous() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            await call()

        task = asyncio.create_task(after_previous())
        self._pod_chain[key] = task
        group = self._bindings if binding else self._writes
        group.add(task)

        def done(t: asyncio.Task[None]) -> None:
            group.discard(t)
            if self._pod_chain.get(key) is t:
                del self._pod_chain[key]
            if not t.cancelled() and t.exception() is not None:
                log.error("API call for pod %s failed", key, exc_info=t.exception())

        task.add_done_callback(done)

    def _current(self, pod: Pod) -> dict[str, Any] | None:
        """The informer's copy of the pod if it is the same pod and still waits for a node."""
        raw = self.pod_store.get(pod.key)
        if raw is None or _meta(raw, "uid") != pod.uid:
            return None
        if (raw.get("spec") or {}).get("nodeName"):
            return None
        return raw

    async def _bind(self, b: Bind) -> None:
        pod = b.pod
        start = time.monotonic()
        error: str | None = None
        self.metrics.bindings_in_flight.inc()
        try:
            if self.before_bind is not None:
                await self.before_bind(b)
            if b.annotations:
                await self.api.request(
                    "PATCH",
                    pod_path(pod.namespace, pod.name),
                    body={"metadata": {"uid": pod.uid, "annotations": dict(b.annotations)}},
                    content_type=MERGE_PATCH,
                )
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                # the uid makes the apiserver refuse a pod that was deleted and created again
                "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": b.node_name},
            }
            await self.api.request("POST", pod_path(pod.namespace, pod.name, "binding"), body=binding)
        except ApiError as err:
            error = str(err)
        except TRANSPORT_ERRORS as err:
            error = f"{type(err).__name__}: {err}"
        except Exception as err:
            # the core must hear of every binding's end, or the pod stays assumed for ever
            log.exception("binding %s failed unexpectedly", pod.key)
            error = f"{type(err).__name__}: {err}"
        finally:
            self.metrics.bindings_in_flight.dec()
        self.metrics.binding("error" if error else "success", time.monotonic() - start)
        if error:
            log.info("binding %s to %s failed: %s", pod.key, b.node_name, error)
        else:
            log.debug("bound %s to %s", pod.key, b.node_name)
        self.scheduler.binding_done(pod.key, error)
        self._wake.set()

    async def _patch_status(self, pod: Pod, status: dict[str, Any], operation: str) -> bool:
        try:
            await self.api.request(
                "PATCH",
                pod_path(pod.namespace, pod.name, "status"),
                body={"status": status},
                content_type=STRATEGIC_MERGE_PATCH,
            )
        except ApiError as err:
            if err.status != 404:
                log.warning("%s of %s failed: %s", operation, pod.key, err)
            self.metrics.api_write(operation, False)
            return False
        except TRANSPORT_ERRORS as err:
            log.warning("%s of %s failed: %s", operation, pod.key, err)
            self.metrics.api_write(operation, False)
            return False
        self.metrics.api_write(operation, True)
        return True

    async def _unschedulable(self, e: PodUnschedulable) -> None:
        raw = self._current(e.pod)
        if raw is None:
            # deleted, or bound meanwhile (by us or another scheduler): nothing true to say
            return
        status = raw.get("status") or {}
        patch: dict[str, Any] = {}
        old = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
        if old is None or (old.get("status"), old.get("reason"), old.get("message")) != (
            "False",
            e.reason,
            e.message,
        ):
            transition = rfc3339()
            if old is not None and old.get("status") == "False" and old.get("lastTransitionTime"):
                transition = str(old["lastTransitionTime"])
            patch["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": e.reason,
                    "message": e.message,
                    "lastProbeTime": None,
                    "lastTransitionTime": transition,
                }
            ]
        if e.nominated_node is not None and (status.get("nominatedNodeName") or "") != e.nominated_node:
            patch["nominatedNodeName"] = e.nominated_node or None
        if patch:
            await self._patch_status(e.pod, patch, "pod_condition")
        await self.events.record(pod_reference(e.pod), "Warning", "FailedScheduling", "Scheduling", e.message)

    async def _nominate(self, e: Nominate) -> None:
        raw = self._current(e.pod)
        if raw is None or ((raw.get("status") or {}).get("nominatedNodeName") or "") == e.node_name:
            return
        await self._patch_status(e.pod, {"nominatedNodeName": e.node_name or None}, "nominate")

    async def _evict(self, e: Evict) -> None:
        victim = e.victim
        raw = self.pod_store.get(victim.key)
        if raw is None or _meta(raw, "uid") != victim.uid or _meta(raw, "deletionTimestamp"):
            return
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": e.message,
            "lastTransitionTime": rfc3339(),
        }
        marked = await self._patch_status(victim, {"conditions": [condition]}, "disruption_condition")
        if not marked and victim.key not in self.pod_store:
            return
        ok = True
        try:
            await self.api.request(
                "DELETE",
                pod_path(victim.namespace, victim.name),
                body={
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": victim.termination_grace_seconds,
                    "preconditions": {"uid": victim.uid},
                },
            )
        except ApiError as err:
            ok = err.status == 404
            if not ok:
                log.warning("deleting preemption victim %s failed: %s", victim.key, err)
        except TRANSPORT_ERRORS as err:
            ok = False
            log.warning("deleting preemption victim %s failed: %s", victim.key, err)
        self.metrics.api_write("preemption_delete", ok)
        if not ok:
            return
        trigger = self.pod_store.get(e.trigger_pod)
        await self.events.record(
            pod_reference(victim),
            "Normal",
            "Preempted",
            "Preempting",
            f"Preempted by {e.trigger_pod} on node {e.node_name}",
            related=pod_reference(trigger) if trigger is not None else None,
        )


# ============================================================================== koordpy run
@dataclass(slots=True)
class RunOptions:
    config: SchedulerConfiguration
    kubeconfig: str | None = None
    context: str | None = None
    leader_elect: bool = False
    lease_name: str = "koordpy"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    bind_address: str = "0.0.0.0"
    metrics_port: int = 10259
    shutdown_timeout: float = 15.0
    identity: str = field(default_factory=default_identity)
    # the PodGroup and ClusterNetworkTopology status operators, in this process and event loop
    operators: bool = True


EXIT_OK = 0
EXIT_LEADERSHIP_LOST = 1


async def run(options: RunOptions) -> int:
    """`koordpy run`: schedule until SIGTERM (exit 0) or until the lease is lost (exit 1)."""
    from koordpy.cluster.http import HealthServer
    from koordpy.cluster.leader import LeaderElector, LeaseSettings
    from koordpy.plugins import registry

    metrics = SchedulerMetrics()
    scheduler = Scheduler(options.config, registry(), RealClock(), metrics)
    metrics.track_pending(scheduler.pending_counts)
    metrics.track_gauges(scheduler.scrape_gauges)
    api = await KubeApi.connect(options.kubeconfig, options.context)
    elector: LeaderElector | None = None
    if options.leader_elect:
        elector = LeaderElector(
            api,
            LeaseSettings(
                name=options.lease_name,
                namespace=options.lease_namespace,
                identity=options.identity,
                lease_duration=options.lease_duration,
                renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
            ),
            metrics,
        )
    world = KubeWorld(
        api, scheduler, metrics, options.identity, leading=elector.is_leader if elector is not None else None
    )
    operators_stop = asyncio.Event()
    operators_task: asyncio.Task[None] | None = None

    async def operators_until_stopped() -> None:
        from operators import run_operators

        try:
            await run_operators(options.kubeconfig, operators_stop, context=options.context)
        except Exception:  # the status operators failing must not stop the scheduling
            log.exception("the status operators stopped; the scheduler goes on without them")

    def start_operators() -> None:
        # only the instance that schedules writes PodGroup and topology status
        nonlocal operators_task
        if options.operators and operators_task is None:
            operators_task = asyncio.get_running_loop().create_task(operators_until_stopped())

    async def stop_operators() -> None:
        operators_stop.set()
        if operators_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(operators_task), options.shutdown_timeout)
            operators_task.cancel()

    if elector is not None:
        elector.on_started.append(world.wake)
        elector.on_started.append(start_operators)

    def ready() -> tuple[bool, str]:
        missing = world.unsynced()
        return (not missing, "informers not synced: " + ", ".join(missing))

    def healthy() -> tuple[bool, str]:
        if elector is not None and elector.lost.is_set():
            return False, "leader election lost"
        return True, ""

    server = HealthServer(metrics, ready, healthy, options.bind_address, options.metrics_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("koordpy %s starting; profiles: %s", options.identity, ", ".join(scheduler.profiles))
    try:
        await server.start()
        await world.start()
        if elector is None:
            start_operators()
        stopped = asyncio.create_task(stop.wait())
        waiters: list[asyncio.Task[Any]] = [stopped]
        if elector is not None:
            waiters.append(asyncio.create_task(elector.run()))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if not stopped.done():
            # the election ended: another instance may be the leader already, so not one more
            # write from here (kube-scheduler exits the same way)
            world.halt()
            await stop_operators()
            for waiter in waiters:
                if waiter.done() and not waiter.cancelled() and waiter.exception() is not None:
                    log.error("leader election failed", exc_info=waiter.exception())
                waiter.cancel()
            log.error("leader election lost; exiting")
            return EXIT_LEADERSHIP_LOST
        log.info("shutting down")
        # scheduling first (nothing half-bound), then the operators, then the lease
        await world.shutdown(options.shutdown_timeout)
        await stop_operators()
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        if elector is not None:
            await elector.release()
        return EXIT_OK
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await server.stop()
        await api.close()
