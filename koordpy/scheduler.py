"""The scheduler: turns cluster events into cache and queue updates, runs scheduling cycles, and
hands decisions to the world through the outbox.

Everything here is synchronous. The world (the simulator, or `koordpy run` on a cluster) calls the
`on_*` event methods, calls `schedule_one()` while there is work, `tick()` when time passes,
drains `outbox` and carries out each decision, and reports binding results with `binding_done()`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
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
    BatchResult,
    ClusterEvent,
    PostFilterResult,
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
REASON_SCHEDULING_GATED = "SchedulingGated"

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


class SchedulerObserver(Protocol):
    """Where the scheduler reports what it did (Prometheus in production; nothing in tests)."""

    def attempt(self, result: str, profile: str, seconds: float) -> None: ...
    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None: ...
    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None: ...
    # after PostFilter ran for a pod: how many victims it chose to evict (0 when preemption found none)
    def preemption(self, profile: str, victims: int) -> None: ...
    def gang_event(self, event: str, value: float) -> None: ...


class NullObserver:
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        pass

    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None:
        pass

    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None:
        pass

    def preemption(self, profile: str, victims: int) -> None:
        pass

    def gang_event(self, event: str, value: float) -> None:
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
        self.services: dict[str, Any] = {}
        # features that follow every pod event (e.g. the gang registry): callables(action, pod)
        self.pod_listeners: list[Callable[[str, Pod], None]] = []
        # handlers for other kinds (PodGroup, PodDisruptionBudget, ClusterNetworkTopology, ...):
        # kind -> callables(action, obj) where action is Add, Update or Delete and obj the API dict
        self.object_handlers: dict[str, list[Callable[[str, Mapping[str, Any]], None]]] = {}
        self.services["pod_listeners"] = self.pod_listeners
        self.services["gang_event"] = lambda event, value: self.observer.gang_event(event, value)
        self.services["register_object_handler"] = self.register_object_handler
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
            self.profiles[profile.name] = profile
            self.queues[profile.name] = SchedulingQueue(
                profile.queue_sort.sort_key,  # type: ignore[attr-defined]
                profile.run_pre_enqueue,
                profile.events,
                settings,
                clock.now,
                on_gate=self._gate_observer(profile.name),
                targeted_gates=frozenset(p.NAME for p in profile.gate_wakers),
            )
        self._profile_order = list(self.profiles)
        # every pod the scheduler knows of, by key (set before queues can call back)
        self.pods: dict[str, Pod] = {}
        self.outcomes: dict[str, PodOutcome] = {}
        self._rr = 0
        self._next_start = 0
        self._waiting_info: dict[str, tuple[QueuedPodInfo, Profile]] = {}
        self.bindings: dict[str, Binding] = {}
        # pending pods heard of during a bulk delivery, queued when it ends (see bulk)
        self._deferred: dict[str, None] | None = None
        self._observe_plugins = False
        # the cycle state and diagnosis of the last attempt that found no node
        self._last_failure: tuple[CycleState, Diagnosis] | None = None

    def _gate_observer(self, profile: str) -> Callable[[QueuedPodInfo, Status | None], None]:
        def on_gate(info: QueuedPodInfo, st: Status | None) -> None:
            pod = info.pod
            if st is None:
                self.outcomes.pop(pod.key, None)
                return
            reason = st.reason or (
                REASON_SCHEDULING_GATED if st.plugin == "SchedulingGates" else REASON_UNSCHEDULABLE
            )
            self.outcomes[pod.key] = PodOutcome(reason, st.message)
            self.outbox.append(PodUnschedulable(pod, reason, st.message, profile))

        return on_gate

    @property
    def observe_plugins(self) -> bool:
        return self._observe_plugins

    @observe_plugins.setter
    def observe_plugins(self, on: bool) -> None:
        """Time every plugin call (for metrics); off by default, as the timing itself costs."""
        self._observe_plugins = on
        for profile in self.profiles.values():
            profile.observe = self.observer.extension_point if on else None

    # ============================================================================ events in
    def _broadcast(self, event: ClusterEvent) -> None:
        for q in self.queues.values():
            q.on_event(event)
        self._recheck_gates()

    def _recheck_gates(self) -> None:
        """Let the gating plugins name the gated pods whose verdict may have changed."""
        if self._deferred is not None:
            return  # bulk ends with one check
        keys: set[str] = set()
        for profile in self.profiles.values():
            for plugin in profile.gate_wakers:
                keys.update(plugin.gated_pods_to_recheck())
        if keys:
            for q in self.queues.values():
                q.recheck(keys)

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

    def _tell_listeners(self, action: str, pod: Pod) -> None:
        for listener in self.pod_listeners:
            listener(action, pod)

    def on_pod_add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        self._tell_listeners("Add", pod)
        if pod.node_name:
            self._assigned(pod)
            self._broadcast(POD_ADD)
            return
        if not self.serves(pod) or pod.is_terminal or pod.deletion_ts is not None:
            return
        if self._deferred is not None:
            self._deferred[pod.key] = None
            return
        self._enqueue(pod)
        # a new pending pod can open the gate of pods waiting for it (a gang reaching its minimum)
        self._recheck_gates()

    def _enqueue(self, pod: Pod) -> None:
        if pod.nominated_node_name:
            self.nominator.add(pod, pod.nominated_node_name)
        if pod.spec_error is not None:
            self._invalid(pod, str(pod.spec_error))
            return
        self.queues[pod.scheduler_name].add(pod)

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Many objects at once (an informer's initial lists, a scenario): pending pods join their
        queues at the end, once every pod is known, so each is judged once on complete data (a
        gang's gate sees all its members) rather than once for every member that came before it."""
        if self._deferred is not None:
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            deferred, self._deferred = self._deferred, None
            for key in deferred:
                pod = self.pods.get(key)
                if pod is None or pod.node_name or pod.is_terminal or pod.deletion_ts is not None:
                    continue
                if self.serves(pod) and key not in self.queues[pod.scheduler_name].infos:
                    self._enqueue(pod)
            self._recheck_gates()

    def on_pod_update(self, pod: Pod) -> None:
        old = self.pods.get(pod.key)
        self.pods[pod.key] = pod
        self._tell_listeners("Update", pod)
        if pod.node_name:
            self._assigned(pod)
            self._broadcast(POD_UPDATE)
            return
        if old is None:
            self.on_pod_add(pod)
            return
        if not self.serves(pod):
            return
        if self._deferred is not None and pod.key in self._deferred:
            return  # queued with its latest view when the bulk ends
        if self.cache.is_assumed(pod.key):
            return  # our own binding is in flight; the bound pod will arrive as an update
        if pod.spec_error is not None:
            self.queues[pod.scheduler_name].delete(pod.key)
            self._invalid(pod, str(pod.spec_error))
            return
        if old.spec_error is not None:
            self.outcomes.pop(pod.key, None)
        self.queues[pod.scheduler_name].update(pod)
        # a pod that changed its gang changes two gangs' readiness
        self._recheck_gates()

    def on_pod_delete(self, pod: Pod) -> None:
        key = pod.key
        known = self.pods.pop(key, pod)
        self._tell_listeners("Delete", known)
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
        # On a cluster the watch often shows our own binding (and the kubelet's next status
        # update) before the binding call returns: only a binding to another node is someone
        # else's, and ours still ends in binding_done()
        if binding is not None and not self.cache.is_assumed(pod.key) and binding.node_name != pod.node_name:
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
            q.recheck_untargeted()
        self._recheck_gates()
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
        batcher = profile.batcher
        members = batcher.batch_members(pod) if batcher is not None else None  # type: ignore[attr-defined]
        if members is None:
            self._attempt(profile, queue, info)
        else:
            self._cycle_batch(profile, queue, info, members)

    def _attempt(
        self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo, post_filter: bool = True
    ) -> str | None:
        """One pod's scheduling cycle; None when it was placed (reserved), else why it was not."""
        pod = info.pod
        start = time.perf_counter()
        self._last_failure = None
        state = CycleState()
        diagnosis = Diagnosis()
        row, status = self._find_node(profile, state, pod, diagnosis)
        if row is None:
            message = self._handle_failure(profile, queue, info, state, diagnosis, status, post_filter)
            self.observer.attempt(
                "error" if status is not None and status.code == Code.ERROR else "unschedulable",
                profile.name,
                time.perf_counter() - start,
            )
            return message
        node_name = self.cache.snapshot.node_name(row)
        held = self._assume_and_permit(profile, queue, info, state, node_name)
        self.observer.attempt(
            "scheduled" if held is None else "unschedulable", profile.name, time.perf_counter() - start
        )
        return held

    def _cycle_batch(
        self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo, members: list[Pod]
    ) -> None:
        """Place a gang group as a unit: every pending member back to back, each seeing the earlier
        ones assumed; then the batcher releases, keeps or rolls back the group. A group that could
        not be placed has one PostFilter run (job-level preemption), for its first failing member,
        once whatever the pass held has been given back."""
        from_batcher: Any = profile.batcher
        assert from_batcher is not None
        infos: list[QueuedPodInfo] = []
        seen = False
        for member in members:
            if member.key == info.key:
                infos.append(info)
                seen = True
                continue
            taken = queue.take(member.key)
            if taken is not None:
                taken.pod = self.pods.get(member.key, taken.pod)
                infos.append(taken)
        if not seen:
            infos.insert(0, info)
        runnable: list[QueuedPodInfo] = []
        for member_info in infos:
            if member_info.pod.spec_error is not None or member_info.key not in self.pods:
                queue.done(member_info.key)
            else:
                runnable.append(member_info)
        attempted: list[str] = []
        failed: dict[str, str] = {}
        trigger: tuple[QueuedPodInfo, CycleState, Diagnosis] | None = None
        no_room = from_batcher.plan_batch(info.pod, [i.pod for i in runnable])
        if no_room is not None:
            # the planner found no topology domain for the group: nobody is tried
            message, diagnosis = no_room
            for member_info in runnable:
                attempted.append(member_info.key)
                failed[member_info.key] = message
                self.outcomes[member_info.key] = PodOutcome(REASON_UNSCHEDULABLE, message)
                queue.add_unschedulable(member_info, (from_batcher.NAME,))
            if runnable:
                trigger = (runnable[0], CycleState(), diagnosis)
        else:
            stop_on_failure = from_batcher.stops_on_failure(info.pod)
            for member_info in runnable:
                if failed and stop_on_failure:
                    # the gang is rolled back anyway; members not tried wait for the next pass
                    queue.add_unschedulable(member_info, (from_batcher.NAME,))
                    continue
                attempted.append(member_info.key)
                message = self._attempt(profile, queue, member_info, post_filter=False)
                if message is not None:
                    failed[member_info.key] = message
                    if trigger is None and self._last_failure is not None:
                        trigger = (member_info, *self._last_failure)
        result = BatchResult(attempted, failed)
        message = from_batcher.batch_end(info.pod, result, self.cache.snapshot.node_count)
        self._resolve_waiting()
        if message and trigger is not None and profile.post_filter:
            trigger_info, state, diagnosis = trigger
            post = self._run_post_filter(profile, state, trigger_info.pod, diagnosis)
            if post.status.message:
                message = f"{message}; {post.status.message}"
        if message:
            self._stamp_group(profile, info.pod, message)

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
        # room nominated to the other members of the pod's own gang group is not held against it
        batcher: Any = profile.batcher
        ignore = batcher.same_job(pod) if batcher is not None and self.nominator else None
        if nominated and nominated in snap.row_of:
            nrow = snap.row_of[nominated]
            if allowed is None or nominated in allowed:
                one = np.array([nrow], dtype=np.int64)
                if profile.run_filter_with_nominated(state, pod, one, None, ignore).size:
                    return nrow, None
        feasible = profile.run_filter_with_nominated(state, pod, rows, diagnosis, ignore)
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
        stopped, as kube-scheduler's search does; the start then moves past the last one taken.
        `feasible` is in row order, so the rotation is one split."""
        start = self._next_start
        split = int(np.searchsorted(feasible, start))
        if split == 0:
            chosen = feasible[:to_find]
        else:
            chosen = np.concatenate(
                (feasible[split : split + to_find], feasible[: max(0, to_find - (feasible.size - split))])
            )
        self._next_start = int(chosen[-1]) + 1
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
        post_filter: bool = True,
    ) -> str:
        """Record why the pod fits nowhere (after PostFilter had its chance) and requeue it."""
        pod = info.pod
        if status is not None and status.code == Code.ERROR:
            message = status.message
            self.outcomes[pod.key] = PodOutcome(REASON_SCHEDULER_ERROR, message)
            self.outbox.append(PodUnschedulable(pod, REASON_SCHEDULER_ERROR, message, profile.name))
            queue.add_unschedulable(info, (), error=True)
            return message
        nominated: str | None = None
        self._last_failure = (state, diagnosis)
        if profile.post_filter and post_filter:
            result = self._run_post_filter(profile, state, pod, diagnosis)
            if result.status.message and not result.status.is_success:
                diagnosis.post_filter_msg = result.status.message
            nominated = result.nominated_node
        message = self.fit_message(diagnosis)
        self.outcomes[pod.key] = PodOutcome(REASON_UNSCHEDULABLE, message)
        self.outbox.append(PodUnschedulable(pod, REASON_UNSCHEDULABLE, message, profile.name, nominated))
        queue.add_unschedulable(info, diagnosis.unschedulable_plugins)
        return message

    def _run_post_filter(
        self, profile: Profile, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> PostFilterResult:
        """PostFilter (preemption); the pod's nomination follows the result."""
        outbox_before = len(self.outbox)
        result = profile.run_post_filter(state, pod, diagnosis)
        self.observer.preemption(
            profile.name, sum(1 for e in self.outbox[outbox_before:] if isinstance(e, Evict))
        )
        if result.nominated_node is not None:
            if result.nominated_node:
                self.nominator.add(pod, result.nominated_node)
            else:
                self.nominator.remove(pod)
        return result

    def fit_message(self, diagnosis: Diagnosis) -> str:
        return fit_error_message(self.cache.snapshot.node_count, diagnosis)

    # ============================================================================ reserve / permit
    def _assume_and_permit(
        self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo, state: CycleState, node_name: str
    ) -> str | None:
        """Assume, Reserve, Permit; None when the pod holds its node (binding or waiting)."""
        pod = info.pod
        self.cache.assume_pod(pod, node_name)
        self.nominator.remove(pod)
        st = profile.run_reserve(state, pod, node_name)
        if st is not None:
            self.cache.forget_pod(pod)
            self._requeue_with(profile, queue, info, st)
            return st.message
        st, waits = profile.run_permit(state, pod, node_name)
        if st is not None:
            profile.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            self._requeue_with(profile, queue, info, st)
            return st.message
        if waits:
            timeout = max(waits.values())
            self.waiting.add(
                WaitingPod(
                    pod,
                    node_name,
                    state,
                    profile.name,
                    self.clock.now() + timeout,
                    set(waits),
                    timeout=timeout,
                )
            )
            self._waiting_info[pod.key] = (info, profile)
            self._resolve_waiting()
            return None
        return self._start_binding(profile, info, state, node_name)

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
        restamp: list[tuple[Profile, Pod, str]] = []
        for wp in self.waiting.due(now):
            if wp.rejected is None and wp.pending_plugins and wp.deadline <= now:
                plugins = ",".join(sorted(wp.pending_plugins))
                wp.timed_out = True
                wp.reject(
                    plugins, f"rejected due to timeout after waiting {wp.timeout:g}s at plugin {plugins}"
                )
            if wp.rejected is not None:
                self.waiting.pop(wp.pod.key)
                info, profile = self._waiting_info.pop(wp.pod.key)
                profile.run_unreserve(wp.state, wp.pod, wp.node_name)
                self.cache.forget_pod(wp.pod)
                if wp.pod.key in self.pods:
                    message = wp.rejected
                    if profile.batcher is not None and (
                        wp.timed_out or wp.rejected_by != profile.batcher.NAME
                    ):
                        # a gang member timed out or was rejected elsewhere: the whole group hears why
                        group_message = profile.batcher.group_failure(wp.pod, wp.rejected)  # type: ignore[attr-defined]
                        if group_message:
                            message = group_message
                            restamp.append((profile, wp.pod, group_message))
                    st = Status(Code.UNSCHEDULABLE, (message,), wp.rejected_by)
                    self._requeue_with(profile, self.queues[profile.name], info, st)
                else:
                    self.queues[profile.name].done(wp.pod.key)
            elif wp.allowed:
                self.waiting.pop(wp.pod.key)
                info, profile = self._waiting_info.pop(wp.pod.key)
                self._start_binding(profile, info, wp.state, wp.node_name)
        for profile, pod, message in restamp:
            self._stamp_group(profile, pod, message)

    def _stamp_group(self, profile: Profile, pod: Pod, message: str) -> None:
        """Give every pending member of the pod's gang group the same explanation."""
        batcher = profile.batcher
        if batcher is None:
            return
        outcome = PodOutcome(REASON_UNSCHEDULABLE, message)
        for member in batcher.batch_members(pod) or ():  # type: ignore[attr-defined]
            pending = member.key in self.pods and not self.cache.is_assumed(member.key)
            if pending and self.outcomes.get(member.key) != outcome:
                self.outcomes[member.key] = outcome
                self.outbox.append(PodUnschedulable(member, REASON_UNSCHEDULABLE, message, profile.name))

    # ============================================================================ binding
    def _start_binding(
        self, profile: Profile, info: QueuedPodInfo, state: CycleState, node_name: str
    ) -> str | None:
        pod = info.pod
        st, annotations = profile.run_pre_bind(state, pod, node_name)
        if st is not None:
            profile.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            self._requeue_with(profile, self.queues[profile.name], info, st)
            return st.message
        self.bindings[pod.key] = Binding(info, profile, state, node_name)
        self.outbox.append(Bind(pod, node_name, profile.name, tuple(annotations)))
        return None

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
        current = self.pods.get(key)
        if current is None or current.node_name:
            # deleted, or bound by someone else meanwhile (another scheduler, a previous leader):
            # nothing to retry
            queue.done(key)
            return
        st = Status(Code.ERROR, (f"binding rejected: {error}",), "DefaultBinder")
        self._requeue_with(profile, queue, binding.info, st)

    # ============================================================================ helpers
    def drain(self) -> list[Effect]:
        out = list(self.outbox)
        self.outbox.clear()
        return out

    def scrape_gauges(self) -> dict[str, float]:
        """Values for gauges computed at scrape time (gang groups waiting, GPU fragmentation)."""
        from koordpy.status.fragmentation import GPU, fragmentation

        out: dict[str, float] = {}
        gangs = self.services.get("coscheduling.registry")
        if gangs is not None:
            out["koordpy_gang_groups_waiting"] = float(gangs.waiting_groups())
        snap = self.cache.snapshot
        col = snap.resource_col.get(GPU)
        if col is not None:
            rows = snap.live_rows()
            nodes = zip(snap.allocatable[rows, col].tolist(), snap.requested[rows, col].tolist(), strict=True)
            requests = [p.requests.get(GPU, 0) for p in self.pods.values()]
            f = fragmentation(nodes, requests)
            out["koordpy_gpu_idle"] = float(f.idle)
            out["koordpy_gpu_fragmented"] = float(f.fragmented)
        return out

    def pending_counts(self) -> Mapping[str, int]:
        totals: dict[str, int] = {}
        for q in self.queues.values():
            for where, n in q.counts().items():
                totals[where] = totals.get(where, 0) + n
        return totals

    # ============================================================================ what the world writes
    def pending(self, key: str) -> bool:
        """Whether the pod still waits for a node: known, not bound, not assumed (being bound or
        waiting at Permit)."""
        pod = self.pods.get(key)
        return (
            pod is not None
            and not pod.node_name
            and not self.cache.is_assumed(key)
            and key not in self.bindings
        )

    def condition_of(self, key: str) -> tuple[str, str] | None:
        """(reason, message) of the pod's PodScheduled=False condition as the scheduler sees it now."""
        outcome = self.outcomes.get(key)
        return (outcome.reason, outcome.message) if outcome is not None else None

    def nominate(self, pod: Pod, node_name: str) -> None:
        self.nominator.add(pod, node_name) if node_name else self.nominator.remove(pod)
        self.outbox.append(Nominate(pod, node_name))
