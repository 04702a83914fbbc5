"""From a chosen node to a bound pod: assume, Reserve, Permit (and waiting there), PreBind, the
Bind decision handed to the world, and what its result changes."""

from __future__ import annotations

import time

from koordpy import logs
from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.effects import Bind, RecordEvent
from koordpy.framework.profile import Profile
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import Code, Status
from koordpy.framework.waiting import WaitingPod
from koordpy.queue import SchedulingQueue
from koordpy.scheduler.core import Binding, Held, SchedulerCore

log = logs.get(__name__)
# (evaluatedNodes, feasibleNodes) of the search that chose the node, for the line logged on binding
SEARCH_COUNTS = "koordpy/search-counts"


class BindingStage(SchedulerCore):
    def _assume_and_permit(
        self,
        profile: Profile,
        queue: SchedulingQueue,
        info: QueuedPodInfo,
        state: CycleState,
        node_name: str,
        start: float,
    ) -> str | None:
        """Assume, Reserve, Permit; None when the pod holds its node (binding or waiting). `start`
        is the cycle's beginning on time.perf_counter(): an attempt that ends here is counted now,
        one that goes on is counted when its wait or binding ends."""
        pod = info.pod
        self.cache.assume_pod(pod, node_name)
        self.nominator.remove(pod)
        st = profile.run_reserve(state, pod, node_name)
        if st is not None:
            self.cache.forget_pod(pod)
            self._requeue_with(profile, queue, info, st)
            self._attempt_ended(profile, st, time.perf_counter() - start)
            return st.message
        st, waits = profile.run_permit(state, pod, node_name)
        if st is not None:
            profile.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            self._requeue_with(profile, queue, info, st)
            self._attempt_ended(profile, st, time.perf_counter() - start)
            return st.message
        # the cycle's start on the scheduler's clock: its computing counted back from now (a
        # virtual clock stands still while the cycle computes), the wait and the binding after it
        started = self.clock.now() - (time.perf_counter() - start)
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
            self._waiting_info[pod.key] = Held(info, profile, started)
            if v4 := log.v(4):
                v4.info("Pod waiting on permit", pod=pod.key)
            self._resolve_waiting()
            return None
        return self._start_binding(profile, info, state, node_name, started)

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
                if v4 := log.v(4):
                    v4.info("Pod rejected while waiting on permit", pod=wp.pod.key, status=wp.rejected)
                # a waiting pod keeps its deadline and timeout, not when its wait began
                self.observer.permit_waited("Unschedulable", now - wp.deadline + wp.timeout)
                held = self._waiting_info.pop(wp.pod.key)
                info, profile = held.info, held.profile
                profile.run_unreserve(wp.state, wp.pod, wp.node_name)
                self.cache.forget_pod(wp.pod)
                # whoever rejected it (a gang rolled back, a timeout, a deletion), kube's
                # waitingPod.Reject makes an Unschedulable status: an unschedulable attempt
                self._attempt_ended(profile, Status(Code.UNSCHEDULABLE), now - held.started)
                if wp.pod.key in self.pods:
                    message = wp.rejected
                    group = profile.group
                    if group is not None and (wp.timed_out or wp.rejected_by != group.NAME):
                        # a gang member timed out or was rejected elsewhere: the whole group hears why
                        group_message = group.group_failure(wp.pod, wp.rejected)
                        if group_message:
                            message = group_message
                            restamp.append((profile, wp.pod, group_message))
                    st = Status(Code.UNSCHEDULABLE, (message,), wp.rejected_by)
                    self._requeue_with(profile, self.queues[profile.name], info, st)
                else:
                    self.queues[profile.name].done(wp.pod.key)
            elif wp.allowed:
                self.waiting.pop(wp.pod.key)
                self.observer.permit_waited("Success", now - wp.deadline + wp.timeout)
                held = self._waiting_info.pop(wp.pod.key)
                self._start_binding(held.profile, held.info, wp.state, wp.node_name, held.started)
        for profile, pod, message in restamp:
            self._stamp_group(profile, pod, message)

    def _start_binding(
        self, profile: Profile, info: QueuedPodInfo, state: CycleState, node_name: str, started: float
    ) -> str | None:
        pod = info.pod
        st = profile.run_pre_bind(state, pod, node_name)
        if st is not None:
            profile.run_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod)
            self._requeue_with(profile, self.queues[profile.name], info, st)
            self._attempt_ended(profile, st, self.clock.now() - started)
            return st.message
        self.bindings[pod.key] = Binding(info, profile, state, node_name, started)
        self.outbox.append(
            Bind(pod, node_name, profile.name, tuple(state.binding_annotations), state.binding_volumes)
        )
        return None

    def binding_done(self, key: str, error: str | None = None) -> None:
        """The world reports how a Bind decision ended."""
        binding = self.bindings.pop(key, None)
        if binding is None:
            return
        pod, profile, node = binding.info.pod, binding.profile, binding.node_name
        queue = self.queues[profile.name]
        seconds = self.clock.now() - binding.started
        if error is None:
            self._attempt_ended(profile, None, seconds)
            if v2 := log.v(2):
                evaluated, feasible = binding.state.read(SEARCH_COUNTS) or (0, 0)
                v2.info(
                    "Successfully bound pod to node",
                    pod=key,
                    node=node,
                    evaluatedNodes=evaluated,
                    feasibleNodes=feasible,
                    profile=profile.name,
                )
            self.cache.finish_binding(pod)
            queue.done(key)
            self.outcomes.pop(key, None)
            profile.run_post_bind(binding.state, pod, node)
            self.outbox.append(
                RecordEvent(
                    pod, "Normal", names.EVENT_SCHEDULED, f"Successfully assigned {pod.key} to {node}"
                )
            )
            self.observer.scheduled(
                profile.name, binding.info.attempts, self.clock.now() - binding.info.initial_attempt_timestamp
            )
            return
        # kube's handleBindingCycleError: a binding that failed is an error, whatever follows
        self._attempt_ended(profile, Status(Code.ERROR), seconds)
        profile.run_unreserve(binding.state, pod, node)
        self.cache.forget_pod(pod)
        current = self.pods.get(key)
        if current is None or current.node_name:
            # deleted, or bound by someone else meanwhile (another scheduler, a previous leader):
            # nothing to retry
            queue.done(key)
            return
        st = Status(Code.ERROR, (f"binding rejected: {error}",), names.DEFAULT_BINDER)
        self._requeue_with(profile, queue, binding.info, st)
