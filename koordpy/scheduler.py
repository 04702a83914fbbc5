"""The scheduler: turns cluster events into cache and queue updates, runs scheduling cycles, and
hands decisions to the world through the outbox.

Everything here is synchronous. The world (the simulator, or `koordpy run` on a cluster) calls the
`on_*` event methods, calls `schedule_one()` while there is work, `tick()` when time passes,
drains `outbox` and carries out each decision, and reports binding results with `binding_done()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.cache import Cache
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import Clock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis, fit_error_message
from koordpy.framework.effects import Bind, Effect, Evict, Nominate, PodUnschedulable, RecordEvent
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    NODE_ADD,
    NODE_UPDATE,
    POD_ADD,
    POD_DELETE,
    POD_UPDATE,
    ClusterEvent,
)
from koordpy.framework.nominator import Nominator
from koordpy.framework.profile import Profile, Registry
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import Code, Status
from koordpy.framework.waiting import WaitingPod, WaitingPods
from koordpy.queue import QueueSettings, SchedulingQueue

REASON_UNSCHEDULABLE = "Unschedulable"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_SCHEDULER_ERROR = "SchedulerError"

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


class SchedulerObserver(Protocol):
    """Where the scheduler reports what it did (Prometheus in production; nothing in tests)."""

    def attempt(self, result: str, profile: str, seconds: float) -> None: ...
    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None: ...
    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None: ...
    # after PostFilter ran for a pod: how many victims it chose to evict (0 when preemption found none)
    def preemption(self, profile: str, victims: int) -> None: ...


class NullObserver:
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        pass

    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None:
        pass

    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None:
        pass

    def preemption(self, profile: str, victims: int) -> None:
        pass


@dataclass(slots=True)
class PodOutcome:
    """The latest verdict on a pod that is not bound: what its PodScheduled condition says."""

    reason: str
    message: str


@dataclass(slots=True)
class Binding:
    info: QueuedPodInfo
    profile: Profile
    state: CycleState
    node_name: str


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's adaptive sampling: in large clusters stop looking once enough fit."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct >= 100:
        return num_all_nodes
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    n = num_all_nodes * pct // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfiguration,
        registry: Registry,
        clock: Clock,
        observer: SchedulerObserver | None = None,
    ) -> None:
        self.clock = clock
        self.config = config
        self.cache = Cache()
        self.nominator = Nominator()
        self.waiting = WaitingPods()
        self.outbox: list[Effect] = []
        self.observer: SchedulerObserver = observer or NullObserver()
        self.services: dict[str, object] = {}
        self.profiles: dict[str, Profile] = {}
        self.queues: dict[str, SchedulingQueue] = {}
        settings = QueueSettings(
            initial_backoff=float(config.podInitialBackoffSeconds),
            max_backoff=float(config.podMaxBackoffSeconds),
            max_unschedulable_seconds=float(config.podMaxInUnschedulablePodsDuration),
        )
        for i, pc in enumerate(config.profiles):
            handle = Handle(clock, self.cache.snapshot, self.cache, self.nominator, self.waiting, self.outbox)
            handle.services = self.services
            profile = Profile(pc, registry, handle, i, config.percentageOfNodesToScore)
            profile.observe = self._observe_plugin
            self.profiles[profile.name] = profile
            self.queues[profile.name] = SchedulingQueue(
                profile.queue_sort.sort_key,  # type: ignore[attr-defined]
                profile.run_pre_enqueue,
                profile.events,
                settings,
                clock.now,
            )
        self._profile_order = list(self.profiles)
        self._rr = 0
        self._next_start = 0
        # every pod the scheduler knows of, by key
        self.pods: dict[str, Pod] = {}
        self.outcomes: dict[str, PodOutcome] = {}
        self._waiting_info: dict[str, tuple[QueuedPodInfo, Profile]] = {}
        self.bindings: dict[str, Binding] = {}
        self.observe_plugins = False
        # handlers for other kinds (PodGroup, PodDisruptionBudget, ClusterNetworkTopology, ...):
        # kind -> callables(action, obj) where action is Add, Update or Delete and obj the API dict
        self.object_handlers: dict[str, list[Callable[[str, Mapping[str, Any]], None]]] = {}

    def _observe_plugin(self, point: str, plugin: str, status: str, seconds: float) -> None:
        if self.observe_plugins:
            self.observer.extension_point(point, plugin, status, seconds)

    # ============================================================================ events in
    def _broadcast(self, event: ClusterEvent) -> None:
        for q in self.queues.values():
            q.on_event(event)

    def on_object(self, kind: str, action: str, obj: Mapping[str, Any]) -> None:
        """Any other watched kind: handed to the features that registered for it, then the queues
        hear of it (a PodGroup change can make its pods schedulable)."""
        for handler in self.object_handlers.get(kind, ()):
            handler(action, obj)
        self._broadcast(ClusterEvent(kind, action))

    def register_object_handler(self, kind: str, handler: Callable[[str, Mapping[str, Any]], None]) -> None:
        self.object_handlers.setdefault(kind, []).append(handler)

    def on_namespace(self, ns: Namespace) -> None:
        self.cache.set_namespace(ns)

    def on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self._broadcast(NODE_ADD)

    def on_node_update(self, node: Node) -> None:
        self.cache.update_node(node)
        self._broadcast(NODE_UPDATE)

    def on_node_delete(self, name: str) -> None:
        self.cache.remove_node(name)
        self._broadcast(ClusterEvent("Node", "Delete"))

    def serves(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.profiles

    def on_pod_add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        if pod.node_name:
            self._assigned(pod)
            self._broadcast(POD_ADD)
            return
        if not self.serves(pod) or pod.is_terminal or pod.deletion_ts is not None:
            return
        if pod.nominated_node_name:
            self.nominator.add(pod, pod.nominated_node_name)
        if pod.spec_error is not None:
            self._invalid(pod, str(pod.spec_error))
            return
        self.queues[pod.scheduler_name].add(pod)

    def on_pod_update(self, pod: Pod) -> None:
        old = self.pods.get(pod.key)
        self.pods[pod.key] = pod
        if pod.node_name:
            self._assigned(pod)
            self._broadcast(POD_UPDATE)
            return
        if old is None:
            self.on_pod_add(pod)
            return
        if not self.serves(pod):
            return
        if self.cache.is_assumed(pod.key):
            return  # our own binding is in flight; the bound pod will arrive as an update
        if pod.spec_error is not None:
            self.queues[pod.scheduler_name].delete(pod.key)
            self._invalid(pod, str(pod.spec_error))
            return
        if old.spec_error is not None:
            self.outcomes.pop(pod.key, None)
        self.queues[pod.scheduler_name].update(pod)

    def on_pod_delete(self, pod: Pod) -> None:
        key = pod.key
        known = self.pods.pop(key, pod)
        self.outcomes.pop(key, None)
        self.nominator.remove(known)
        wp = self.waiting.get(key)
        if wp is not None:
            wp.reject("", "pod deleted")
            self._resolve_waiting()
        state = self.cache.pod_state(key)
        if state is not None:
            self.cache.remove_pod(state.pod)
        for q in self.queues.values():
            q.delete(key)
        self._broadcast(POD_DELETE)

    def _assigned(self, pod: Pod) -> None:
        """A bound pod observed: confirm our assumption or learn of someone else's binding."""
        self.nominator.remove(pod)
        self.outcomes.pop(pod.key, None)
        binding = self.bindings.get(pod.key)
        if binding is not None and not self.cache.is_assumed(pod.key):
            self.bindings.pop(pod.key, None)
        if pod.is_terminal:
            # a finished pod releases its resources; a terminating one keeps them until deleted
            state = self.cache.pod_state(pod.key)
            if state is not None:
                self.cache.remove_pod(state.pod)
            return
        self.cache.add_pod(pod)
        q = self.queues.get(pod.scheduler_name)
        if q is not None:
            q.delete(pod.key)

    def _invalid(self, pod: Pod, message: str) -> None:
        self.outcomes[pod.key] = PodOutcome(REASON_INVALID_SPEC, message)
        self.outbox.append(PodUnschedulable(pod, REASON_INVALID_SPEC, message, pod.scheduler_name))

    # ============================================================================ the loop
    def has_work(self) -> bool:
        return any(q.has_active() for q in self.queues.values())

    def next_wakeup(self, include_flush: bool = True) -> float | None:
        times = [t for q in self.queues.values() if (t := q.next_deadline(include_flush)) is not None]
        for service in self.services.values():
            deadline = getattr(service, "next_deadline", None)
            if deadline is not None and (t := deadline()) is not None:
                times.append(t)
        deadline = self.waiting.next_deadline()
        if deadline is not None:
            times.append(deadline)
        return min(times) if times else None

    def tick(self) -> None:
        """Time moved: end backoffs, flush the pool, time out permit waits."""
        for q in self.queues.values():
            q.flush()
        self._resolve_waiting()

    def schedule_one(self) -> bool:
        """Run one scheduling cycle; False when no profile has an active pod."""
        n = len(self._profile_order)
        for i in range(n):
            name = self._profile_order[(self._rr + i) % n]
            q = self.queues[name]
            info = q.pop()
            if info is None:
                continue
            self._rr = (self._rr + i + 1) % n
            self._cycle(self.profiles[name], q, info)
            return True
        return False

    def _cycle(self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo) -> None:
        pod = self.pods.get(info.key, info.pod)
        info.pod = pod
        if pod.node_name or self.cache.pod_state(pod.key) is not None or pod.deletion_ts is not None:
            queue.done(pod.key)
            return
        start = time.perf_counter()
        state = CycleState()
        diagnosis = Diagnosis()
        row, status = self._find_node(profile, state, pod, diagnosis)
        if row is None:
            self._handle_failure(profile, queue, info, state, diagnosis, status)
            self.observer.attempt(
                "error" if status is not None and status.code == Code.ERROR else "unschedulable",
                profile.name,
                time.perf_counter() - start,
            )
            return
        node_name = self.cache.snapshot.node_name(row)
        self._assume_and_permit(profile, queue, info, state, node_name)
        self.observer.attempt("scheduled", profile.name, time.perf_counter() - start)

    def _find_node(
        self, profile: Profile, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[int | None, Status | None]:
        snap = self.cache.snapshot
        all_rows = snap.live_rows()
        if all_rows.size == 0:
            diagnosis.pre_filter_msg = "no nodes available to schedule pods"
            return None, Status(Code.UNSCHEDULABLE, ("no nodes available to schedule pods",))
        allowed, st = profile.run_pre_filter(state, pod)
        if st is not None:
            if st.code == Code.ERROR:
                return None, st
            diagnosis.pre_filter_msg = st.message
            diagnosis.unschedulable_plugins.add(st.plugin)
            diagnosis.pre_filter_status = st
            return None, st
        rows = all_rows
        if allowed is not None:
            rows = np.fromiter((snap.row_of[n] for n in allowed if n in snap.row_of), dtype=np.int64)
            rows.sort()
        # a pod that preempted before tries its nominated node first
        nominated = pod.nominated_node_name or self.nominator.node_of(pod.key) or ""
        if nominated and nominated in snap.row_of:
            nrow = snap.row_of[nominated]
            if allowed is None or nominated in allowed:
                one = np.array([nrow], dtype=np.int64)
                if profile.run_filter_with_nominated(state, pod, one, None).size:
                    return nrow, None
        feasible = profile.run_filter_with_nominated(state, pod, rows, diagnosis)
        if feasible.size == 0:
            return None, Status(Code.UNSCHEDULABLE)
        to_find = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, all_rows.size)
        if feasible.size > to_find:
            feasible = self._sample(feasible, all_rows, to_find)
        if feasible.size == 1:
            return int(feasible[0]), None
        st = profile.run_pre_score(state, pod, feasible)
        if st is not None:
            return None, st
        scores = profile.run_score(state, pod, feasible)
        return int(feasible[int(np.argmax(scores))]), None

    def _sample(self, feasible: np.ndarray, all_rows: np.ndarray, to_find: int) -> np.ndarray:
        """The first `to_find` feasible nodes in node order starting where the last search
        stopped, as kube-scheduler's search does; the start then moves past the last one taken."""
        n = all_rows.size
        start = self._next_start % n
        pos = np.searchsorted(all_rows, feasible)
        rotated = (pos - start) % n
        order = np.argsort(rotated, kind="stable")[:to_find]
        chosen = feasible[order]
        self._next_start = (start + int(rotated[order[-1]]) + 1) % n
        return chosen

    # ============================================================================ failure
    def _handle_failure(
        self,
        profile: Profile,
        queue: SchedulingQueue,
        info: QueuedPodInfo,
        state: CycleState,
        diagnosis: Diagnosis,
        status: Status | None,
    ) -> None:
        pod = info.pod
        if status is not None and status.code == Code.ERROR:
            message = status.message
            self.outcomes[pod.key] = PodOutcome(REASON_SCHEDULER_ERROR, message)
            self.outbox.append(PodUnschedulable(pod, REASON_SCHEDULER_ERROR, message, profile.name))
            queue.add_unschedulable(info, (), error=True)
            return
        nominated: str | None = None
        if profile.post_filter:
            outbox_before = len(self.outbox)
            result = profile.run_post_filter(state, pod, diagnosis)
            self.observer.preemption(
                profile.name, sum(1 for e in self.outbox[outbox_before:] if isinstance(e, Evict))
            )
            if result.status.message and not result.status.is_success:
                diagnosis.post_filter_msg = result.status.message
            if result.nominated_node is not None:
                nominated = result.nominated_node
                if nominated:
                    self.nominator.add(pod, nominated)
                else:
                    self.nominator.remove(pod)
        message = self.fit_message(diagnosis)
        self.outcomes[pod.key] = PodOutcome(REASON_UNSCHEDULABLE, message)
        self.outbox.append(PodUnschedulable(pod, REASON_UNSCHEDULABLE, message, profile.name, nominated))
        queue.add_unschedulable(info, diagnosis.unschedulable_plugins)

    def fit_message(self, diagnosis: Diagnosis) -> str:
        return fit_error_message(self.cache.snapshot.node_count, diagnosis)

    # ============================================================================ reserve / permit
    def _assume_and_permit(
        self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo, state: CycleState, node_name: str
    ) -> None:
        pod = info.pod
        self.cache.assume_pod(pod, node_name)
        self.nominator.remove(pod)
        st = profile.run_reserve(state, pod, node_name)
        if st is not None:
            self.cache.forget_pod(pod)
            self._requeue_with(profile, queue, info, st)
            return
        st, waits = profile.run_permit(state, pod, node_name)
        if st is not None:
            profile.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            self._requeue_with(profile, queue, info, st)
            return
        if waits:
            deadline = self.clock.now() + max(waits.values())
            self.waiting.add(WaitingPod(pod, node_name, state, profile.name, deadline, set(waits)))
            self._waiting_info[pod.key] = (info, profile)
            self._resolve_waiting()
            return
        self._start_binding(profile, info, state, node_name)

    def _requeue_with(
        self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo, st: Status
    ) -> None:
        pod = info.pod
        reason = REASON_SCHEDULER_ERROR if st.code == Code.ERROR else REASON_UNSCHEDULABLE
        self.outcomes[pod.key] = PodOutcome(reason, st.message)
        self.outbox.append(PodUnschedulable(pod, reason, st.message, profile.name))
        queue.add_unschedulable(info, (st.plugin,) if st.plugin else (), error=st.code == Code.ERROR)

    def _resolve_waiting(self) -> None:
        """Act on waiting pods that were allowed, rejected, or ran out of time."""
        if not len(self.waiting):
            return
        now = self.clock.now()
        for wp in self.waiting.all():
            if wp.rejected is None and wp.pending_plugins and wp.deadline <= now:
                plugins = ",".join(sorted(wp.pending_plugins))
                wp.reject(
                    plugins,
                    f"rejected due to timeout after waiting {wp.deadline - now:.0f}s at plugin {plugins}",
                )
            if wp.rejected is not None:
                self.waiting.pop(wp.pod.key)
                info, profile = self._waiting_info.pop(wp.pod.key)
                profile.run_unreserve(wp.state, wp.pod, wp.node_name)
                self.cache.forget_pod(wp.pod)
                if wp.pod.key in self.pods:
                    st = Status(Code.UNSCHEDULABLE, (wp.rejected,), wp.rejected_by)
                    self._requeue_with(profile, self.queues[profile.name], info, st)
                else:
                    self.queues[profile.name].done(wp.pod.key)
            elif wp.allowed:
                self.waiting.pop(wp.pod.key)
                info, profile = self._waiting_info.pop(wp.pod.key)
                self._start_binding(profile, info, wp.state, wp.node_name)

    # ============================================================================ binding
    def _start_binding(
        self, profile: Profile, info: QueuedPodInfo, state: CycleState, node_name: str
    ) -> None:
        pod = info.pod
        st, annotations = profile.run_pre_bind(state, pod, node_name)
        if st is not None:
            profile.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            self._requeue_with(profile, self.queues[profile.name], info, st)
            return
        self.bindings[pod.key] = Binding(info, profile, state, node_name)
        self.outbox.append(Bind(pod, node_name, profile.name, tuple(annotations)))

    def binding_done(self, key: str, error: str | None = None) -> None:
        """The world reports how a Bind decision ended."""
        binding = self.bindings.pop(key, None)
        if binding is None:
            return
        pod, profile, node = binding.info.pod, binding.profile, binding.node_name
        queue = self.queues[profile.name]
        if error is None:
            self.cache.finish_binding(pod)
            queue.done(key)
            self.outcomes.pop(key, None)
            profile.run_post_bind(binding.state, pod, node)
            self.outbox.append(
                RecordEvent(pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}")
            )
            self.observer.scheduled(
                profile.name, binding.info.attempts, self.clock.now() - binding.info.initial_attempt_timestamp
            )
            return
        profile.run_unreserve(binding.state, pod, node)
        self.cache.forget_pod(pod)
        if key not in self.pods:
            queue.done(key)
            return
        st = Status(Code.ERROR, (f"binding rejected: {error}",), "DefaultBinder")
        self._requeue_with(profile, queue, binding.info, st)

    # ============================================================================ helpers
    def drain(self) -> list[Effect]:
        out = list(self.outbox)
        self.outbox.clear()
        return out

    def pending_counts(self) -> Mapping[str, int]:
        totals: dict[str, int] = {}
        for q in self.queues.values():
            for where, n in q.counts().items():
                totals[where] = totals.get(where, 0) + n
        return totals

    def nominate(self, pod: Pod, node_name: str) -> None:
        self.nominator.add(pod, node_name) if node_name else self.nominator.remove(pod)
        self.outbox.append(Nominate(pod, node_name))
