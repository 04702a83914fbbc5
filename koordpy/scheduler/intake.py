"""The scheduler: turns cluster events into cache and queue updates, and runs the loop.

Everything here is synchronous. The world (the simulator, or `koordpy run` on a cluster) calls the
`on_*` event methods, calls `schedule_one()` while there is work, `tick()` when time passes,
drains `outbox` and carries out each decision, and reports binding results with `binding_done()`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from koordpy import logs
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.framework.interfaces import NODE_ADD, NODE_UPDATE, POD_ADD, POD_DELETE, POD_UPDATE, ClusterEvent
from koordpy.framework.observer import Timed
from koordpy.framework.profile import Profile
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import Code, Status
from koordpy.queue import SchedulingQueue
from koordpy.scheduler.group import GroupCycle

log = logging.getLogger(__name__)
klog = logs.get(__name__)

# how much of an exception's text goes into a pod's condition
_ERROR_TEXT_LIMIT = 300


class Scheduler(GroupCycle):
    """The scheduler the worlds drive: cluster events in, scheduling cycles while there is work."""

    # ============================================================================ events in
    def _broadcast(self, event: ClusterEvent, old: object = None, new: object = None) -> None:
        """`old` and `new`: the object before and after the event, for the queueing hints."""
        for q in self.queues.values():
            q.on_event(event, old, new)
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

    def on_object(
        self, kind: str, action: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
    ) -> None:
        """Any other watched kind: handed to the features that subscribed to it, then the queues
        hear of it (a PodGroup change can make its pods schedulable). `old`: the object before an
        update, when the world knows it."""
        for handler in self.shared.object_handlers.get(kind, ()):
            handler(action, obj)
        if action == "Delete":
            self._broadcast(ClusterEvent(kind, action), obj, None)
        else:
            self._broadcast(ClusterEvent(kind, action), old, obj)

    def on_namespace(self, ns: Namespace) -> None:
        self.cache.set_namespace(ns)

    def on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self._broadcast(NODE_ADD, None, node)

    def on_node_update(self, node: Node) -> None:
        old = self.cache.node(node.name)
        self.cache.update_node(node)
        self._broadcast(NODE_UPDATE, old, node)

    def on_node_delete(self, name: str) -> None:
        old = self.cache.node(name)
        # a pod waiting at Permit there would be bound to a node that is gone: rejected, it gives
        # its reservation back and is tried again (a gang member takes its group back with it)
        gone = [wp for wp in self.waiting.all() if wp.node_name == name]
        for wp in gone:
            wp.reject("", f"node {name} was deleted")
        if gone:
            self._resolve_waiting()
        self.cache.remove_node(name)
        self._broadcast(ClusterEvent("Node", "Delete"), old, None)

    def _tell_listeners(self, action: str, pod: Pod) -> None:
        for listener in self.shared.pod_listeners:
            listener(action, pod)

    def on_pod_add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        self._tell_listeners("Add", pod)
        if pod.node_name:
            self._assigned(pod)
            self._broadcast(POD_ADD, None, pod)
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
            self._broadcast(POD_UPDATE, old, pod)
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
            if not known.node_name:
                # assumed (waiting at Permit, or binding): the hints see the room it gave back
                known = known.with_changes(node_name=state.node_name)
        for q in self.queues.values():
            q.delete(key)
        self._broadcast(POD_DELETE, known, None)

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

    # ============================================================================ the loop
    def _contain(self, profile: Profile, queue: SchedulingQueue, keys: list[str], err: Exception) -> None:
        """A cycle raised: only that attempt ends. The pods it was about (the popped pod, and a
        gang group's members) give back what they hold: those waiting at Permit are rejected, those
        taken from the queue and not placed get SchedulerError with the exception's text and back
        off (kube-scheduler's handling of an Error status). Then the cache is checked, since the
        cycle may have stopped half way through a change."""
        log.error("scheduling cycle of %s failed", keys[0], exc_info=err)
        self.failed_cycles_in_a_row += 1
        text = f"{type(err).__name__}: {err}"
        if len(text) > _ERROR_TEXT_LIMIT:
            text = text[: _ERROR_TEXT_LIMIT - 3] + "..."
        message = f"internal error while scheduling: {text}"
        for key in keys:
            waiting = self.waiting.get(key)
            if waiting is not None:
                waiting.reject("", message)
        try:
            self._resolve_waiting()
        except Exception:
            log.exception("giving back the pods of the failed cycle of %s failed", keys[0])
        # after the rejections, whose group message would otherwise replace this one
        for key in keys:
            info = queue.infos.get(key)
            if info is not None and key in queue.in_flight and self.pending(key):
                self._requeue_with(profile, queue, info, Status(Code.ERROR, (message,)))
                self.observer.attempt("error", profile.name, 0.0)
        self.check_cache()

    def has_work(self) -> bool:
        return any(q.has_active() for q in self.queues.values())

    def next_wakeup(self, include_flush: bool = True) -> float | None:
        times = [t for q in self.queues.values() if (t := q.next_deadline(include_flush)) is not None]
        for shared in self.shared.objects():
            if isinstance(shared, Timed) and (t := shared.next_deadline()) is not None:
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
        if v4 := klog.v(4):
            v4.info("About to try and schedule pod", pod=pod.key)
        if pod.node_name or self.cache.pod_state(pod.key) is not None or pod.deletion_ts is not None:
            if pod.deletion_ts is not None and (v3 := klog.v(3)):
                v3.info("Skip schedule deleting pod", pod=pod.key)
            queue.done(pod.key)
            return
        members: list[Pod] | None = None
        try:
            group = profile.group
            members = group.batch_members(pod) if group is not None else None
            if group is None or members is None:
                self._attempt(profile, queue, info)
            else:
                self._cycle_group(profile, group, queue, info, members)
        except Exception as err:
            # one pod (or gang) that trips a bug must not stop the others: see _contain
            others = [m.key for m in members or () if m.key != pod.key]
            self._contain(profile, queue, [pod.key, *others], err)
        else:
            self.failed_cycles_in_a_row = 0
