"""The cluster world: `koordpy run` against a kube-apiserver.

Informers list and watch Nodes, Pods, Namespaces, PodDisruptionBudgets and koordpy's custom
resources and feed the scheduler's synchronous core; the scheduling loop runs cycles and turns the
decisions the core drains into API calls: bindings (through `pods/binding`), status patches,
evictions and `events.k8s.io/v1` Events. Every call that blocks runs in its own task, so the next
scheduling cycle never waits for the last pod's binding.

All API traffic goes through `koordpy.kubeapi.KubeApi`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import signal
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import RealClock
from koordpy.framework.effects import Bind, Effect, Evict, Nominate, PodUnschedulable, RecordEvent
from koordpy.kubeapi.client import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    KubeApi,
    micro_time,
    pod_path,
    rfc3339,
)
from koordpy.kubeapi.informer import (
    ADD,
    DELETE,
    PODS,
    UPDATE,
    WATCHED,
    EventHandler,
    Informer,
    Resource,
    meta_field,
)
from koordpy.metrics import SchedulerMetrics
from koordpy.scheduler import Scheduler

log = logging.getLogger(__name__)

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


def default_identity() -> str:
    """`<hostname>_<uuid>`, as kube-scheduler names its leader-election holder."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


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
            self.scheduler.on_node_delete(meta_field(obj, "name"))
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
        if raw is None or meta_field(raw, "uid") != pod.uid:
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
        if raw is None or meta_field(raw, "uid") != victim.uid or meta_field(raw, "deletionTimestamp"):
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
