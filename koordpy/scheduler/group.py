"""A gang group's cycle: every pending member placed back to back as a unit, through the
profile's `GroupPlugin` (kube-scheduler makes the same cut between schedule_one.go and its
pod-group algorithm)."""

from __future__ import annotations

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.effects import PodUnschedulable
from koordpy.framework.interfaces import BatchResult, GroupPlugin
from koordpy.framework.profile import Profile
from koordpy.framework.queued import QueuedPodInfo
from koordpy.queue import SchedulingQueue
from koordpy.scheduler.core import PodOutcome
from koordpy.scheduler.cycle import PodCycle

# the member whose failure preemption answers for, with that attempt's state and diagnosis
Trigger = tuple[QueuedPodInfo, CycleState, Diagnosis]


class GroupCycle(PodCycle):
    def _cycle_group(
        self,
        profile: Profile,
        group: GroupPlugin,
        queue: SchedulingQueue,
        info: QueuedPodInfo,
        members: list[Pod],
    ) -> None:
        """Place a gang group as a unit: every pending member back to back, each seeing the earlier
        ones assumed; then the group plugin releases, keeps or rolls back the group. A group that
        could not be placed has one PostFilter run (job-level preemption), for its first failing
        member, once whatever the pass held has been given back."""
        runnable = self._runnable_members(queue, info, members)
        result = BatchResult([], {})
        no_room = group.plan_batch(info.pod, [i.pod for i in runnable])
        if no_room is not None:
            trigger = self._no_room(profile, group, queue, runnable, result, *no_room)
        else:
            trigger = self._try_members(profile, group, queue, info, runnable, result)
        message = group.batch_end(info.pod, result, self.cache.snapshot.node_count)
        self._resolve_waiting()
        if message and trigger is not None and profile.post_filter:
            trigger_info, state, diagnosis = trigger
            post = self._run_post_filter(profile, state, trigger_info.pod, diagnosis)
            if post.status.message:
                message = f"{message}; {post.status.message}"
        if message:
            self._stamp_group(profile, info.pod, message, frozenset(result.attempted))

    def _runnable_members(
        self, queue: SchedulingQueue, info: QueuedPodInfo, members: list[Pod]
    ) -> list[QueuedPodInfo]:
        """The popped pod and every other member taken out of the queue, in the group plugin's
        order; members that cannot run (invalid spec, deleted) are done with."""
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
        return runnable

    def _no_room(
        self,
        profile: Profile,
        group: GroupPlugin,
        queue: SchedulingQueue,
        runnable: list[QueuedPodInfo],
        result: BatchResult,
        message: str,
        diagnosis: Diagnosis,
    ) -> Trigger | None:
        """The planner found no topology domain for the group: the pass fails for every member
        before any is placed, and each is told why at once; the group may still be placed as a
        whole (these are members beyond a minimum already waiting), and then no message of the
        group's own follows to tell them."""
        for member_info in runnable:
            result.attempted.append(member_info.key)
            result.failed[member_info.key] = message
            self.outcomes[member_info.key] = PodOutcome(names.UNSCHEDULABLE, message)
            self.outbox.append(PodUnschedulable(member_info.pod, names.UNSCHEDULABLE, message, profile.name))
            queue.add_unschedulable(member_info, (group.NAME,))
        return (runnable[0], CycleState(), diagnosis) if runnable else None

    def _try_members(
        self,
        profile: Profile,
        group: GroupPlugin,
        queue: SchedulingQueue,
        info: QueuedPodInfo,
        runnable: list[QueuedPodInfo],
        result: BatchResult,
    ) -> Trigger | None:
        trigger: Trigger | None = None
        stop_on_failure = group.stops_on_failure(info.pod)
        for member_info in runnable:
            if result.failed and stop_on_failure:
                # the gang is rolled back anyway; members not tried wait for the next pass
                queue.add_unschedulable(member_info, (group.NAME,))
                continue
            result.attempted.append(member_info.key)
            attempt = self._attempt(profile, queue, member_info, post_filter=False)
            if attempt.message is not None:
                result.failed[member_info.key] = attempt.message
                if trigger is None and attempt.failure is not None:
                    trigger = (member_info, *attempt.failure)
        return trigger
