"""One pod's scheduling cycle: PreFilter, Filter (with nominated pods), sampling, PreScore and
Score pick a node; when none fits, PostFilter (preemption) runs and the pod is requeued with a
message that says why. The cycle returns how it ended."""

from __future__ import annotations

import time

import numpy as np

from koordpy import logs
from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.effects import Evict, PodUnschedulable
from koordpy.framework.interfaces import PostFilterResult, Rows
from koordpy.framework.profile import Profile
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import Code, Status
from koordpy.queue import SchedulingQueue
from koordpy.scheduler.binding import SEARCH_COUNTS, BindingStage
from koordpy.scheduler.core import Attempt, PodOutcome

log = logs.get(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


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


class PodCycle(BindingStage):
    # where the next node search starts (kube-scheduler's nextStartNodeIndex)
    _next_start: int = 0

    def _attempt(
        self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo, post_filter: bool = True
    ) -> Attempt:
        pod = info.pod
        if v3 := log.v(3):
            v3.info("Attempting to schedule pod", pod=pod.key)
        start = time.perf_counter()
        state = CycleState()
        diagnosis = Diagnosis()
        row, status = self._find_node(profile, state, pod, diagnosis)
        if row is None:
            message = self._handle_failure(profile, queue, info, state, diagnosis, status, post_filter)
            # as kube-scheduler's, a failed attempt's algorithm latency runs to the end of PostFilter
            self.observer.algorithm(time.perf_counter() - start)
            failed_on_error = status is not None and status.code == Code.ERROR
            self.observer.attempt(
                "error" if failed_on_error else "unschedulable", profile.name, time.perf_counter() - start
            )
            return Attempt(message, None if failed_on_error else (state, diagnosis))
        node_name = self.cache.snapshot.node_name(row)
        self.observer.algorithm(time.perf_counter() - start)
        # counted where it ends: at Reserve or Permit, or when the wait at Permit or the binding does
        return Attempt(self._assume_and_permit(profile, queue, info, state, node_name, start))

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
            if v5 := log.v(5):
                v5.info("Status after running PreFilter plugins for pod", pod=pod.key, status=st.message)
            return None, st
        rows = all_rows
        if allowed is not None:
            rows = np.fromiter((snap.row_of[n] for n in allowed if n in snap.row_of), dtype=np.int64)
            rows.sort()
            diagnosis.narrowed(state)
        # a pod that preempted before tries its nominated node first and takes it when it passes
        # the filters, without scoring the others (kube-scheduler's evaluateNominatedNode); the
        # nominator holds the latest nomination, the pod's status may not show it yet
        nominated = self.nominator.node_of(pod.key) or pod.nominated_node_name or ""
        # room nominated to the other members of the pod's own gang group is not held against it
        group = profile.group
        ignore = group.same_job(pod) if group is not None and self.nominator else None
        if nominated and nominated in snap.row_of:
            nrow = snap.row_of[nominated]
            if allowed is None or nominated in allowed:
                one = np.array([nrow], dtype=np.int64)
                if profile.run_filter_with_nominated(state, pod, one, None, ignore).size:
                    if logs.enabled(2):
                        state.write(SEARCH_COUNTS, (1, 1))
                    return nrow, None
        feasible = profile.run_filter_with_nominated(state, pod, rows, diagnosis, ignore)
        if feasible.size == 0:
            return None, Status(Code.UNSCHEDULABLE)
        to_find = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, all_rows.size)
        if feasible.size > to_find:
            feasible = self._sample(feasible, to_find)
        if logs.enabled(2):
            state.write(SEARCH_COUNTS, (int(rows.size), int(feasible.size)))
        if feasible.size == 1:
            return int(feasible[0]), None
        st = profile.run_pre_score(state, pod, feasible)
        if st is not None:
            return None, st
        scores = profile.run_score(state, pod, feasible)
        return int(feasible[int(np.argmax(scores))]), None

    def _sample(self, feasible: Rows, to_find: int) -> Rows:
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
            log.error("Error scheduling pod; retrying", err=message, pod=pod.key)
            self.outcomes[pod.key] = PodOutcome(names.SCHEDULER_ERROR, message)
            self.outbox.append(PodUnschedulable(pod, names.SCHEDULER_ERROR, message, profile.name))
            queue.add_unschedulable(info, (), error=True)
            return message
        nominated: str | None = None
        if profile.post_filter and post_filter:
            result = self._run_post_filter(profile, state, pod, diagnosis)
            if result.status.message and not result.status.is_success:
                diagnosis.post_filter_msg = result.status.message
            nominated = result.nominated_node
        elif post_filter and (v3 := log.v(3)):
            v3.info("No PostFilter plugins are registered, so no preemption will be performed")
        message = self.fit_message(diagnosis)
        if v2 := log.v(2):
            v2.info("Unable to schedule pod; no fit; waiting", pod=pod.key, err=message)
        self.outcomes[pod.key] = PodOutcome(names.UNSCHEDULABLE, message)
        self.outbox.append(PodUnschedulable(pod, names.UNSCHEDULABLE, message, profile.name, nominated))
        queue.add_unschedulable(info, diagnosis.unschedulable_plugins)
        return message

    def _run_post_filter(
        self, profile: Profile, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> PostFilterResult:
        """PostFilter (preemption); the pod's nomination follows the result."""
        outbox_before = len(self.outbox)
        result = profile.run_post_filter(state, pod, diagnosis)
        if result.status.code != Code.ERROR and (v5 := log.v(5)):
            v5.info(
                "Status after running PostFilter plugins for pod", pod=pod.key, status=result.status.message
            )
        self.observer.preemption(
            profile.name, sum(1 for e in self.outbox[outbox_before:] if isinstance(e, Evict))
        )
        if v2 := log.v(2):
            for e in self.outbox[outbox_before:]:
                if isinstance(e, Evict):
                    v2.info(
                        "Preemptor Pod preempted victim Pod",
                        preemptor=e.preemptor,
                        victim=e.victim.key,
                        node=e.node_name,
                        triggerPod=e.trigger_pod,
                    )
        if result.nominated_node is not None:
            if result.nominated_node:
                self.nominator.add(pod, result.nominated_node)
            else:
                self.nominator.remove(pod)
        return result
