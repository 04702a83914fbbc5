"""The cluster world that feeds the scheduler and carries out its decisions.

Informers list and watch Nodes, Pods, Namespaces, PodDisruptionBudgets, the storage objects
(PersistentVolumes and their claims, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities,
VolumeAttachments) and koordpy's custom resources and feed the scheduler's synchronous core; the
scheduling loop runs cycles and turns the decisions the core drains into API calls: bindings
(through `pods/binding`, after the volumes a pod's claims need are bound: `cluster.volumes`),
status patches (`cluster.writes`), evictions and `events.k8s.io/v1` Events (`cluster.events`).
Every call that blocks runs in its own task, so the next scheduling cycle never waits for the last
pod's binding.

All API traffic goes through `koordpy.kubeapi.KubeApi`. `cluster.app` wires a world into
`koordpy run` (health, leader election, the embedded operators).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from koordpy.api import names
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.cluster.changes import assigned_pod_changed, node_scheduling_changed
from koordpy.cluster.events import EventRecorder, pod_reference
from koordpy.cluster.evictions import evict
from koordpy.cluster.integrity import AUDIT_INTERVAL, Integrity, is_finished
from koordpy.cluster.volumes import VolumeBinder, VolumeBindingError
from koordpy.cluster.writes import PodStatusWriter
from koordpy.framework.effects import Bind, Effect, Evict, Nominate, PodUnschedulable, RecordEvent
from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi, pod_path
from koordpy.kubeapi.informer import (
    ADD,
    DELETE,
    UPDATE,
    WATCH_IDLE_TIMEOUT,
    WATCHED,
    EventHandler,
    Informer,
    Resource,
    meta_field,
    object_key,
)
from koordpy.metrics import SchedulerMetrics
from koordpy.scheduler import Scheduler
from koordpy.scheduler.core import FAILED_CYCLES_UNHEALTHY

log = logging.getLogger(__name__)

# kube-scheduler samples plugin durations in 10% of the cycles: timing every plugin call costs
# a visible share of a cycle
PLUGIN_METRICS_SAMPLE_PERCENT = 10
# the unschedulable pool's periodic flush scans it, so while busy time moves on at this pace
BUSY_TICK_INTERVAL = 1.0
# a standby never carries out decisions; these are the ones made from events before it led
MAX_HELD_EFFECTS = 10_000
# a standby's held effects are pruned once they have doubled, plus this many, since the last pruning
HELD_PRUNE_SLACK = 256
STANDBY_POLL = 1.0
RELEASE_TASK = "informers release"
# loop passes failing one after another before /healthz fails (each pass is retried after 1 s)
LOOP_FAILURES_UNHEALTHY = 3


EVENT_ACTIONS = {
    names.EVENT_SCHEDULED: "Binding",
    names.EVENT_FAILED_SCHEDULING: "Scheduling",
    names.EVENT_PREEMPTED: "Preempting",
}
# a verdict that only says a gang is not complete yet settles before it is written
SETTLING_REASONS = frozenset({names.GANG_NOT_READY})

# (action, object, previous object or None): another listener of the pods or nodes the world watches
Watcher = Callable[[str, dict[str, Any], "dict[str, Any] | None"], None]


class KubeWorld:
    """Informers in, decisions out, and the scheduling loop between them.

    Nothing is decided before every informer has listed: the informers hold their events until
    then and are released together, kinds before the pods that refer to them, so a gang is judged
    with all its members and its PodGroup known. Decisions go out on three lanes: bindings at once,
    each on its own; pod status writes coalesced per pod (`PodStatusWriter`); events aggregated and
    bounded (`EventRecorder`).

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
        watch_idle_timeout: float = WATCH_IDLE_TIMEOUT,
    ) -> None:
        self.api = api
        self.scheduler = scheduler
        self.metrics = metrics
        self.identity = identity
        self.leading: Callable[[], bool] = leading or (lambda: True)
        self.events = EventRecorder(
            api,
            identity,
            on_write=lambda ok: metrics.api_write("event", ok),
            on_drop=metrics.events_dropped.inc,
        )
        self.status_writes = PodStatusWriter(
            api, scheduler, self._stored_pod, self.events, on_write=metrics.api_write
        )
        metrics.track_write_backlog(
            lambda: {"status": self.status_writes.queued(), "events": self.events.queued()}
        )
        self.plugin_sample = plugin_metrics_sample_percent / 100.0
        by_kind: dict[str, Informer] = {}
        self.integrity = Integrity(scheduler, metrics, self.events, by_kind)
        self.informers: dict[Resource, Informer] = {}
        # the volume bindings a pod's binding carries out first, reading the informers' stores
        self.volumes = VolumeBinder(
            api,
            self._stored("PersistentVolume"),
            self._stored("PersistentVolumeClaim"),
            self._stored_pod,
            self._stored("Node"),
            on_write=metrics.api_write,
        )
        for resource in resources:
            handler = self.integrity.guard(resource.kind, resource.api_version, self._handler_for(resource))
            handler = metrics.timed_handler(resource.kind, handler)
            self.informers[resource] = by_kind[resource.kind] = Informer(
                api, resource, handler, metrics, hold=True, watch_idle_timeout=watch_idle_timeout
            )
        # passes of the loop that failed one after another (each is retried after a pause)
        self.loop_failures_in_a_row = 0
        self._next_audit = time.monotonic() + AUDIT_INTERVAL
        self._pods = next((i for r, i in self.informers.items() if r.kind == "Pod"), None)
        # other listeners of pod and node events (the embedded status operators)
        self.pod_watchers: list[Watcher] = []
        self.node_watchers: list[Watcher] = []
        # told once every informer has listed and what they listed has been delivered
        self.on_synced: list[Callable[[], None]] = []
        self.released = asyncio.Event()
        # awaited just before a binding request is sent; tests use it to act in that window
        self.before_bind: Callable[[Bind], Awaitable[None]] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._bindings: set[asyncio.Task[None]] = set()
        # the pod each binding task binds, to say which were cancelled
        self._binding_pods: dict[asyncio.Task[None], str] = {}
        self._writes: set[asyncio.Task[None]] = set()
        # the latest eviction task per victim: its condition and its deletion are carried out in order
        self._victim_chain: dict[str, asyncio.Task[None]] = {}
        # a standby's outbox is pruned again once it is this long (see _hold_effects)
        self._held_pruned_at = HELD_PRUNE_SLACK

    # ------------------------------------------------------------------ lifecycle
    @property
    def pod_store(self) -> dict[str, dict[str, Any]]:
        return self._pods.store if self._pods is not None else {}

    def _stored_pod(self, key: str) -> dict[str, Any] | None:
        return self._pods.store.get(key) if self._pods is not None else None

    def _stored(self, kind: str) -> Callable[[str], dict[str, Any] | None]:
        def lookup(key: str) -> dict[str, Any] | None:
            informer = next((i for r, i in self.informers.items() if r.kind == kind), None)
            return informer.store.get(key) if informer is not None else None

        return lookup

    def synced(self) -> bool:
        return self.released.is_set()

    def unsynced(self) -> list[str]:
        return [r.label for r, i in self.informers.items() if not i.synced.is_set()]

    def blind_informers(self) -> list[str]:
        """For /readyz: each informer that has not listed yet, or whose watch has not been heard
        from for longer than its idle bound (down, or given up as silent and not answered again),
        as `<resource>: <why>`; empty when every informer sees the cluster as it is."""
        problems: list[str] = []
        for resource, informer in self.informers.items():
            if not informer.synced.is_set():
                problems.append(f"{resource.label}: not synced")
                continue
            silent = informer.silent_for()
            if silent is not None and silent > informer.watch_idle_timeout:
                problems.append(f"{resource.label}: watch silent for {silent:.0f}s")
        return problems

    def health_problems(self) -> list[str]:
        """Why this scheduler cannot be trusted to schedule, for /healthz; empty when healthy."""
        problems: list[str] = []
        if self.loop_failures_in_a_row >= LOOP_FAILURES_UNHEALTHY:
            problems.append(f"the scheduling loop failed {self.loop_failures_in_a_row} times in a row")
        failed_cycles = self.scheduler.failed_cycles_in_a_row
        if failed_cycles >= FAILED_CYCLES_UNHEALTHY:
            problems.append(f"{failed_cycles} scheduling cycles in a row ended in an internal error")
        if self.scheduler.cache_problems:
            problems.append("the cache is inconsistent: " + "; ".join(self.scheduler.cache_problems[:3]))
        if not self._stopping:
            # every task but the one-shot release runs for the world's life
            problems += [
                f"{t.get_name()} stopped" for t in self._tasks if t.done() and t.get_name() != RELEASE_TASK
            ]
        return problems

    async def wait_synced(self) -> None:
        await self.released.wait()

    async def start(self) -> None:
        for resource, informer in self.informers.items():
            self._tasks.append(asyncio.create_task(informer.run(), name=f"informer {resource.label}"))
        self._tasks.append(asyncio.create_task(self._release_when_listed(), name=RELEASE_TASK))
        self._tasks.append(asyncio.create_task(self._loop(), name="scheduling loop"))
        self._tasks.append(asyncio.create_task(self.status_writes.run(), name="pod status writes"))
        self._tasks.append(asyncio.create_task(self.events.run(), name="events"))

    async def _release_when_listed(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.informers.values()))
        # kinds first (in WATCHED order), pods last: a pod arrives to a cache that knows its node,
        # its namespace and its PodGroup
        with self.scheduler.bulk():
            for informer in sorted(self.informers.values(), key=lambda i: i.resource.kind == "Pod"):
                informer.release()
        log.info(
            "caches synced: %s", ", ".join(f"{len(i.store)} {r.label}" for r, i in self.informers.items())
        )
        self.released.set()
        for callback in self.on_synced:
            callback()
        self._wake.set()

    def in_flight(self) -> int:
        return len(self._bindings)

    def abandon(self) -> dict[str, list[str]]:
        """Leadership lost: stop at once, and say what was queued and is now cancelled, by lane."""
        cancelled = {
            "bindings": sorted(pod for task, pod in self._binding_pods.items() if not task.done()),
            "pod status writes": self.status_writes.queued_pods(),
            "events": self.events.queued_events(),
            "preemptions": sorted(pod for pod, task in self._victim_chain.items() if not task.done()),
        }
        self.halt()
        return cancelled

    def halt(self) -> None:
        """Stop at once (leadership lost): no further cycle, no further write."""
        self._stopping = True
        self._wake.set()
        for task in (*self._bindings, *self._writes, *self._tasks):
            task.cancel()

    async def shutdown(self, timeout: float = 15.0) -> None:
        """Stop scheduling, let the bindings in flight finish (up to `timeout`), then the writes
        they lead to, then stop."""
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
            await asyncio.wait(pending, timeout=max(0.1, deadline - time.monotonic()))
        for lane in (self.status_writes, self.events):
            await lane.wait_idle(max(0.1, deadline - time.monotonic()))
        still = (
            self.status_writes.queued()
            + self.events.queued()
            + sum(not t.done() for t in (*self._bindings, *self._writes))
        )
        if still:
            log.warning("%d API call(s) still waiting after %.1fs; abandoning them", still, timeout)
        # events are best-effort, as kube's broadcaster makes them: what is left is counted as dropped
        if dropped := self.events.queued():
            self.metrics.events_dropped.inc(dropped)
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
        # a binding waiting for its claims (cluster.volumes) hears of each change to them, whatever
        # the scheduler made of it
        changed = {
            "PersistentVolume": self.volumes.volume_changed,
            "PersistentVolumeClaim": self.volumes.claim_changed,
        }.get(kind)

        def on_object(action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            try:
                self.scheduler.on_object(kind, action, obj, old)
            finally:
                if changed is not None:
                    changed(object_key(obj))
                self._wake.set()

        return on_object

    def _on_pod(self, action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for watcher in self.pod_watchers:
            watcher(action, obj, old)
        # finished pods hold nothing and reach the scheduler as deletions, as they do through
        # kube-scheduler's informer (which leaves them out)
        if is_finished(obj):
            if action == ADD or (old is not None and is_finished(old)):
                return
            action = DELETE
        elif (
            action == UPDATE
            and old is not None
            and (old.get("spec") or {}).get("nodeName")
            and not assigned_pod_changed(old, obj)
        ):
            return
        pod = Pod.from_dict(obj)
        if action == ADD:
            self.scheduler.on_pod_add(pod)
        elif action == UPDATE:
            self.scheduler.on_pod_update(pod)
        else:
            self.status_writes.forget(pod.key)
            self.events.forget_object(pod.uid)
            self.scheduler.on_pod_delete(pod)
            self.volumes.pod_gone(pod.key)
        self._wake.set()

    def _on_node(self, action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        for watcher in self.node_watchers:
            watcher(action, obj, old)
        # a binding waiting for its claims checks its volumes against the node as it is now
        self.volumes.node_changed(meta_field(obj, "name"))
        if action == DELETE:
            name = meta_field(obj, "name")
            self.integrity.node_gone(name)
            self.scheduler.on_node_delete(name)
        elif action == ADD:
            node = Node.from_dict(obj)
            self.integrity.node_seen(node, obj)
            self.scheduler.on_node_add(node)
        elif old is None or node_scheduling_changed(old, obj):
            node = Node.from_dict(obj)
            self.integrity.node_seen(node, obj)
            self.scheduler.on_node_update(node)
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
        while not self._stopping:
            try:
                await self._run_cycles()
            except asyncio.CancelledError:
                raise
            except Exception:
                # each cycle is contained on its own (Scheduler._contain); this is a failure around
                # them: counted for /healthz, the cache checked, and the loop goes on
                self.loop_failures_in_a_row += 1
                log.exception("scheduling loop failed (%d in a row); continuing", self.loop_failures_in_a_row)
                self.integrity.audit_due = True
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
            if self.integrity.audit_due or last_tick >= self._next_audit:
                self._next_audit = last_tick + AUDIT_INTERVAL
                self.integrity.audit()
                self._apply(sched.drain())
            self.loop_failures_in_a_row = 0
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
        """A standby keeps what its events decided for when it leads, but only for pods it still
        knows (as the same object), and of a pod's verdicts and nominations only the latest: the
        writer writes a pod's verdict as it stands when it writes, so an older one says nothing more.
        Held as they came, a standby's outbox would keep a view of every gang member it ever saw
        gated, long after the pod went. Pruned once the outbox has doubled since it was last pruned,
        so each effect costs O(1) however often the standby wakes."""
        outbox = self.scheduler.outbox
        if len(outbox) < self._held_pruned_at:
            return
        pods = self.scheduler.pods
        kept: list[Effect] = []
        seen: set[tuple[type, str]] = set()
        for effect in reversed(outbox):
            pod = effect.victim if isinstance(effect, Evict) else effect.pod
            known = pods.get(pod.key)
            if known is None or known.uid != pod.uid:
                continue
            if isinstance(effect, PodUnschedulable | Nominate):
                slot = (type(effect), pod.key)
                if slot in seen:
                    continue
                seen.add(slot)
            kept.append(effect)
        kept.reverse()
        outbox[:] = kept[-MAX_HELD_EFFECTS:]
        self._held_pruned_at = 2 * len(outbox) + HELD_PRUNE_SLACK

    # ------------------------------------------------------------------ decisions out
    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Bind):
                task = self._spawn(self._bind(effect), self._bindings)
                self._binding_pods[task] = effect.pod.key
                task.add_done_callback(self._binding_pods.pop)
            elif isinstance(effect, PodUnschedulable):
                self.status_writes.mark(
                    effect.pod,
                    nominated=effect.nominated_node,
                    settle=effect.reason in SETTLING_REASONS,
                    event=effect.attempted,
                )
            elif isinstance(effect, Nominate):
                self.status_writes.mark(effect.pod, nominated=effect.node_name)
            elif isinstance(effect, Evict):
                self._chain_victim(
                    effect.victim.key,
                    functools.partial(
                        evict,
                        effect,
                        self.api,
                        self.pod_store,
                        self.status_writes,
                        self.events,
                        self.metrics.api_write,
                    ),
                )
            elif isinstance(effect, RecordEvent):
                self.events.record(
                    pod_reference(effect.pod),
                    effect.event_type,
                    effect.reason,
                    EVENT_ACTIONS.get(effect.reason, "Scheduling"),
                    effect.message,
                    controller=effect.pod.scheduler_name,
                )

    def _spawn(self, coro: Coroutine[Any, Any, None], group: set[asyncio.Task[None]]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        group.add(task)
        task.add_done_callback(group.discard)
        return task

    def _chain_victim(self, key: str, call: Callable[[], Coroutine[Any, Any, None]]) -> None:
        previous = self._victim_chain.get(key)

        async def after_previous() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            await call()

        task = asyncio.create_task(after_previous())
        self._victim_chain[key] = task
        self._writes.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._writes.discard(t)
            if self._victim_chain.get(key) is t:
                del self._victim_chain[key]
            if not t.cancelled() and t.exception() is not None:
                log.error("API call for pod %s failed", key, exc_info=t.exception())

        task.add_done_callback(done)

    async def _bind(self, b: Bind) -> None:
        pod = b.pod
        if b.volumes is not None and (failed := await self._bind_volumes(b)) is not None:
            # PreBind's part failed (kube's BindPodVolumes): no Binding is sent
            log.info("binding %s to %s failed: %s", pod.key, b.node_name, failed)
            self.scheduler.binding_done(pod.key, failed)
            self._wake.set()
            return
        start = time.monotonic()
        error: str | None = None
        self.metrics.bindings_in_flight.inc()
        try:
            if self.before_bind is not None:
                await self.before_bind(b)
            # a PodScheduled=False already on the wire must land before the binding, not after it
            await self.status_writes.wait_written(pod.key)
            metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
            if b.annotations:
                # the apiserver copies a Binding's annotations onto the pod: one write, not two
                metadata["annotations"] = dict(b.annotations)
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                # the uid makes the apiserver refuse a pod that was deleted and created again
                "metadata": metadata,
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
        self.metrics.binding("error" if error else "success", time.monotonic() - start, b.profile)
        if error:
            log.info("binding %s to %s failed: %s", pod.key, b.node_name, error)
        else:
            self.status_writes.forget(pod.key)
            log.debug("bound %s to %s", pod.key, b.node_name)
        self.scheduler.binding_done(pod.key, error)
        self._wake.set()

    async def _bind_volumes(self, b: Bind) -> str | None:
        """The pod's volumes bound (`cluster.volumes`), or why not."""
        assert b.volumes is not None
        try:
            await self.volumes.bind(b.pod, b.volumes)
        except VolumeBindingError as err:
            return str(err)
        except Exception as err:
            # the core must hear of every binding's end, or the pod stays assumed for ever
            log.exception("binding the volumes of %s failed unexpectedly", b.pod.key)
            return f"binding volumes: {type(err).__name__}: {err}"
        return None
