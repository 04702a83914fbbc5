"""The scheduling queue of one profile: activeQ, backoffQ, the unschedulable pool and gated pods.

- activeQ is a heap ordered by the profile's QueueSort plugin.
- A pod that failed waits in backoffQ until its exponential backoff ends (Error) or in the
  unschedulable pool until a cluster event that could help arrives (rejection); the pool is also
  flushed after `max_unschedulable_seconds` in case no such event comes.
- PreEnqueue plugins gate pods before they ever reach activeQ. A gated pod is checked again when it
  changes itself, when its gating plugin names it (`recheck`: the plugin knows which event can open
  which gate, e.g. a gang's gate opens when its own members arrive), or, for a plugin that names
  none, on the cluster events that plugin registered. Nothing looks at every gated pod per event.
- Heaps use lazy deletion: an entry is live only while its sequence number matches the pod's.
- The pool is indexed by the plugins that rejected each pod and by the pod's shape for their
  queueing hints: an event asks each hint once per group of pods it cannot tell apart, not once
  per pod, and a group whose plugins did not register the event is passed over whole.
- Events that arrive while pods are in flight (popped, and not yet bound or back in the queue:
  waiting at Permit, binding) are kept, as kube-scheduler's inFlightEvents; a pod rejected at the
  end of its attempt is judged against the events of its own flight by its rejectors' hints
  (determineSchedulingHintForInFlightPod): one that says QUEUE sends it to backoff, otherwise it
  waits in the pool. Events older than the oldest pod in flight are dropped.
- An update of a pod in flight is one such event, and the pod is left to its attempt, as
  kube-scheduler's Update does; if it comes back, it comes back as its latest update has it.
- An update of a pod in the unschedulable pool is an event for its own rejectors' hints: it moves
  the pod only when one of them says QUEUE (a pod no plugin rejected always moves); otherwise the
  pod waits on with its new object. A gated pod's update runs PreEnqueue again.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy import logs
from koordpy.api.pod import Pod
from koordpy.framework.interfaces import POD_UPDATE, ClusterEvent, ClusterEventWithHint, QueueingHint
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import Status
from koordpy.queue.placement import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, Placement, PoolGroup

log = logging.getLogger(__name__)
klog = logs.get(__name__)

# the queues as kube-scheduler's log lines name them
_LOGGED_NAME = {ACTIVE: "Active", BACKOFF: "Backoff", UNSCHEDULABLE: "Unschedulable", GATED: "Unschedulable"}
def _say_moved(pod: str, event: str, queue: str) -> None:
    """kube-scheduler's V(5) line for a pod entering a queue; a gated pod's says why."""
    if v5 := klog.v(5):
        message = "Pod moved to an internal scheduling queue"
        if queue == GATED:
            message += ", because the pod is gated"
        v5.info(message, pod=pod, event=event, queue=_LOGGED_NAME[queue])


# kube-scheduler's queueingStrategy, as its log lines give it: queueSkip, queueAfterBackoff
_HINT_SKIP = 0
_HINT_AFTER_BACKOFF = 1
# stale heap entries tolerated beyond the live ones before a heap is rebuilt (see _compact)
_STALE_SLACK = 64

# why a pod entered a queue, as kube-scheduler labels scheduler_queue_incoming_pods_total; a cluster
# event is labelled with its resource and action (NodeAdd, PodDelete)
POD_ADD_EVENT = "UnschedulablePodAdd"
POD_UPDATE_EVENT = "UnschedulablePodUpdate"
ATTEMPT_FAILURE_EVENT = "ScheduleAttemptFailure"
BACKOFF_COMPLETE_EVENT = "BackoffComplete"
FORCE_ACTIVATE_EVENT = "ForceActivate"
UNSCHEDULABLE_TIMEOUT_EVENT = "UnschedulableTimeout"

SortKey = Callable[[QueuedPodInfo], tuple[Any, ...]]
PreEnqueue = Callable[[Pod], Status | None]
# told when a pod is gated (with the PreEnqueue status) or released from the gate (None)
GateObserver = Callable[[QueuedPodInfo, Status | None], None]
# what a plugin's hints read of a pod (see QueueingHints.hint_shape)
HintShape = Callable[[Pod], Hashable]


@dataclass(slots=True)
class _FlightEvent:
    """An event heard while pods were in flight, with the verdict of each pool group judged
    against it so far (the members of a gang group rejected together ask once)."""

    event: ClusterEvent
    old: object
    new: object
    helps: dict[PoolGroup, bool]


def _with_hint(registered: ClusterEvent | ClusterEventWithHint) -> ClusterEventWithHint:
    return registered if isinstance(registered, ClusterEventWithHint) else ClusterEventWithHint(registered)


@dataclass(slots=True)
class QueueSettings:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    max_unschedulable_seconds: float = 300.0


class SchedulingQueue:
    def __init__(
        self,
        sort_key: SortKey,
        pre_enqueue: PreEnqueue,
        events_of_plugin: Mapping[str, Sequence[ClusterEvent | ClusterEventWithHint]],
        settings: QueueSettings,
        now: Callable[[], float],
        on_gate: GateObserver | None = None,
        targeted_gates: frozenset[str] = frozenset(),
        shape_of_plugin: Mapping[str, HintShape] | None = None,
    ) -> None:
        self._on_gate = on_gate
        # PreEnqueue plugins that name the gated pods an event may open (see recheck)
        self._targeted_gates = targeted_gates
        self._sort_key = sort_key
        self._pre_enqueue = pre_enqueue
        # a plain ClusterEvent registered is one whose every occurrence queues
        self._hints_of_plugin: dict[str, tuple[ClusterEventWithHint, ...]] = {
            name: tuple(_with_hint(r) for r in registered) for name, registered in events_of_plugin.items()
        }
        self._events_of_plugin = {
            name: tuple(r.event for r in h) for name, h in self._hints_of_plugin.items()
        }
        self._shape_of_plugin = dict(shape_of_plugin or {})
        # (rejecting plugins, event) -> the hints of those plugins registered for it
        self._interested: dict[tuple[frozenset[str], ClusterEvent], tuple[ClusterEventWithHint, ...]] = {}
        self.settings = settings
        self._now = now
        self._seq = itertools.count()
        self._active: list[tuple[tuple[Any, ...], int, QueuedPodInfo]] = []
        self._backoff: list[tuple[float, int, QueuedPodInfo]] = []
        self.where = Placement()
        self.infos: dict[str, QueuedPodInfo] = {}
        self._unschedulable_since: dict[str, float] = {}
        # pods in flight -> the number of the first event of their flight
        self.in_flight: dict[str, int] = {}
        # (pod, its flight's first event) in the order pods took off; entries of pods that have
        # landed leave from the front (see _land)
        self._take_offs: deque[tuple[str, int]] = deque()
        # the events heard since the oldest pod in flight took off, the first numbered
        # `_flight_base`
        self._flight_events: deque[_FlightEvent] = deque()
        self._flight_base = 0
        # the latest object of each pod updated in flight: the pod comes back as it (see _land)
        self._updated_in_flight: dict[str, Pod] = {}
        # pods that entered each queue, by (queue, event): read when metrics are scraped. Gated
        # pods count as entering the unschedulable queue, where kube-scheduler keeps them.
        self.incoming: dict[tuple[str, str], int] = {}
        # attempts started from this queue (kube-scheduler's schedulingCycle, for the log)
        self.scheduling_cycle = 0

    # ----------------------------------------------------------------------------- counts
    def counts(self) -> dict[str, int]:
        return {where: len(keys) for where, keys in self.where.keys_in.items()}

    def __len__(self) -> int:
        return len(self.where)

    def has_active(self) -> bool:
        self._drop_stale_active()
        return bool(self._active)

    # ----------------------------------------------------------------------------- adding
    def add(self, pod: Pod) -> None:
        """A new pending pod."""
        now = self._now()
        info = QueuedPodInfo(pod, timestamp=now, initial_attempt_timestamp=now, arrival=next(self._seq))
        self.infos[pod.key] = info
        self._enqueue(info, POD_ADD_EVENT)

    def _count(self, queue: str, event: str) -> None:
        key = (queue, event)
        self.incoming[key] = self.incoming.get(key, 0) + 1

    def _enqueue(self, info: QueuedPodInfo, event: str) -> None:
        """PreEnqueue, then activeQ or the gated set."""
        if self._gate(info, event):
            return
        self._push_active(info, event)

    def _gate(self, info: QueuedPodInfo, event: str) -> bool:
        """Run PreEnqueue; True (and the pod parked as gated) when it says not yet."""
        st = self._pre_enqueue(info.pod)
        if st is not None:
            if self.where.get(info.key) != GATED:
                self._count(UNSCHEDULABLE, event)
                _say_moved(info.key, event, GATED)
            changed = (info.gated_by, info.gated_reason, info.gated_message) != (
                st.plugin,
                st.reason,
                st.message,
            )
            info.gated_by, info.gated_reason, info.gated_message = st.plugin, st.reason, st.message
            self.where.gate(info.key, st.plugin)
            if changed and self._on_gate is not None:
                self._on_gate(info, st)
            return True
        if info.gated_by:
            info.gated_by = info.gated_reason = info.gated_message = ""
            if self._on_gate is not None:
                self._on_gate(info, None)
        return False

    def _push_active(self, info: QueuedPodInfo, event: str | None) -> None:
        """`event` None: the pod is in activeQ already and only its place changes."""
        if event is not None:
            self._count(ACTIVE, event)
            _say_moved(info.key, event, ACTIVE)
        info.seq = next(self._seq)
        self.where[info.key] = ACTIVE
        self._unschedulable_since.pop(info.key, None)
        heapq.heappush(self._active, (self._sort_key(info), info.seq, info))

    def _push_backoff(self, info: QueuedPodInfo, event: str) -> None:
        self._count(BACKOFF, event)
        _say_moved(info.key, event, BACKOFF)
        info.seq = next(self._seq)
        self.where[info.key] = BACKOFF
        self._unschedulable_since.pop(info.key, None)
        heapq.heappush(self._backoff, (info.backoff_expiry, info.seq, info))

    def update(self, pod: Pod) -> None:
        """The pod object changed while pending: it may have become schedulable. A pod in flight is
        left to its attempt (kube-scheduler's Update with addEventsIfPodInFlight): the update is an
        event of its flight, for its rejectors' hints to judge if the attempt fails. A pod of the
        unschedulable pool moves only when its rejectors' hints say its own update could help it;
        otherwise it stays, as the update has it (kube-scheduler's Update with queueing hints)."""
        info = self.infos.get(pod.key)
        if info is None:
            self.add(pod)
            return
        if pod.key in self.in_flight:
            old = self._updated_in_flight.get(pod.key, info.pod)
            self._flight_events.append(_FlightEvent(POD_UPDATE, old, pod, {}))
            self._updated_in_flight[pod.key] = pod
            return
        before, info.pod = info.pod, pod
        where = self.where.get(pod.key)
        if where == UNSCHEDULABLE:
            # the shape the hints read may have changed with the pod
            group = self._group(info)
            if self._helps(group, pod, POD_UPDATE, before, pod):
                self._requeue_after_event(info, POD_UPDATE_EVENT)
            else:
                self.where.regroup(pod.key, group)
        elif where == GATED or where is None:
            # a gated pod is asked its gate again: PreEnqueue is what its own update can open
            self._requeue_after_event(info, POD_UPDATE_EVENT)
        elif where == ACTIVE:
            # the sort key may have changed (priority); re-push, the old entry goes stale
            self._push_active(info, None)
            self._compact()

    def delete(self, key: str) -> None:
        self.where.pop(key, None)
        self.infos.pop(key, None)
        self._unschedulable_since.pop(key, None)
        self._land(key)
        self._compact()

    def _current(self, where: str, seq: int, info: QueuedPodInfo) -> bool:
        """Whether a heap entry is the pod's latest in that heap (entries of deleted or moved pods
        stay in the heaps until they reach the top)."""
        return self.where.get(info.key) == where and info.seq == seq and self.infos.get(info.key) is info

    def _compact(self) -> None:
        """Stale entries leave a heap lazily, at its top; a queue that is not popped for a while (a
        standby's: it hears of every pod the leader binds and deletes) would keep them, and their
        pods, without bound. A heap mostly stale is rebuilt from its current entries."""
        if len(self._active) > 2 * len(self.where.keys_in[ACTIVE]) + _STALE_SLACK:
            self._active = [e for e in self._active if self._current(ACTIVE, e[1], e[2])]
            heapq.heapify(self._active)
        if len(self._backoff) > 2 * len(self.where.keys_in[BACKOFF]) + _STALE_SLACK:
            self._backoff = [e for e in self._backoff if self._current(BACKOFF, e[1], e[2])]
            heapq.heapify(self._backoff)

    # ----------------------------------------------------------------------------- popping
    def _drop_stale_active(self) -> None:
        while self._active:
            _, seq, info = self._active[0]
            if self._current(ACTIVE, seq, info):
                return
            heapq.heappop(self._active)

    def pop(self) -> QueuedPodInfo | None:
        self._drop_stale_active()
        if not self._active:
            return None
        _, _, info = heapq.heappop(self._active)
        del self.where[info.key]
        info.attempts += 1
        self._take_off(info.key)
        return info

    def peek_key(self) -> tuple[Any, ...] | None:
        self._drop_stale_active()
        return self._active[0][0] if self._active else None

    def done(self, key: str) -> None:
        """The pod left the scheduler (bound, or deleted)."""
        self._land(key)
        if key not in self.where:
            self.infos.pop(key, None)

    # ----------------------------------------------------------------------------- in flight
    def _take_off(self, key: str) -> None:
        self.scheduling_cycle += 1
        self._land(key)
        start = self._flight_base + len(self._flight_events)
        self.in_flight[key] = start
        self._take_offs.append((key, start))

    def _land(self, key: str) -> int | None:
        """The pod is no longer in flight: the number of its flight's first event (None when it
        was not in flight). Events no pod in flight can still be judged against are dropped, and
        a pod updated in flight takes its latest object (kube-scheduler requeues the informer's)."""
        start = self.in_flight.pop(key, None)
        if start is None:
            return None
        updated = self._updated_in_flight.pop(key, None)
        if updated is not None:
            info = self.infos.get(key)
            if info is not None:
                info.pod = updated
        in_flight = self.in_flight
        take_offs = self._take_offs
        while take_offs and in_flight.get(take_offs[0][0]) != take_offs[0][1]:
            take_offs.popleft()
        events = self._flight_events
        if not take_offs:
            self._flight_base += len(events)
            events.clear()
        else:
            oldest = take_offs[0][1]
            while self._flight_base < oldest:
                events.popleft()
                self._flight_base += 1
        return start

    def _flight_helps(self, info: QueuedPodInfo, group: PoolGroup, start: int) -> bool:
        """Whether an event of the pod's flight could make it schedulable, as its rejectors' hints
        judge it (the flight's events are still kept: the pod has not landed yet)."""
        skip = start - self._flight_base
        if skip >= len(self._flight_events):
            return False
        for record in itertools.islice(self._flight_events, max(0, skip), None):
            # hints answer a pod's own update apart from the pods of its group (TaintToleration
            # queues only the pod whose tolerations changed): that answer is not the group's
            own = getattr(record.new, "key", None) == info.key
            found = None if own else record.helps.get(group)
            if found is None:
                # a pod no plugin rejected is helped by any event, as in the pool
                found = not group[0] or (
                    bool(self._hints_for(group[0], record.event))
                    and self._helps(group, info.pod, record.event, record.old, record.new)
                )
                if not own:
                    record.helps[group] = found
            if found:
                return True
        return False

    # ----------------------------------------------------------------------------- failures
    def backoff_duration(self, attempts: int) -> float:
        duration = self.settings.initial_backoff
        for _ in range(1, attempts):
            duration *= 2
            if duration >= self.settings.max_backoff:
                return self.settings.max_backoff
        return min(duration, self.settings.max_backoff)

    def add_unschedulable(self, info: QueuedPodInfo, plugins: Iterable[str], error: bool = False) -> None:
        """After a failed attempt: the pool (rejection) or backoffQ (error, or an event of the
        pod's flight that its rejectors' hints say could help)."""
        key = info.key
        if key not in self.infos:
            self._land(key)
            return  # deleted meanwhile
        now = self._now()
        info.timestamp = now
        info.unschedulable_plugins = set(plugins)
        info.backoff_expiry = now + self.backoff_duration(info.attempts)
        updated = self._updated_in_flight.get(key)
        if updated is not None:
            # judged as it is now, as kube-scheduler judges the informer's latest object
            info.pod = updated
        group = self._group(info)
        start = self.in_flight.get(key)
        helped = start is not None and self._flight_helps(info, group, start)
        self._land(key)
        if error or helped:
            self._push_backoff(info, ATTEMPT_FAILURE_EVENT)
        else:
            self._count(UNSCHEDULABLE, ATTEMPT_FAILURE_EVENT)
            self.where.park(key, group)
            # re-inserted, so that the pool stays in the order pods entered it (see flush)
            self._unschedulable_since.pop(key, None)
            self._unschedulable_since[key] = now
        if v3 := klog.v(3):
            where = BACKOFF if error or helped else UNSCHEDULABLE
            v3.info(
                "Pod moved to an internal scheduling queue",
                pod=key,
                event=ATTEMPT_FAILURE_EVENT,
                queue=_LOGGED_NAME[where],
                schedulingCycle=self.scheduling_cycle,
                hint=_HINT_AFTER_BACKOFF if error or helped else _HINT_SKIP,
                **{"unschedulable plugins": sorted(info.unschedulable_plugins)},
            )

    def requeue_immediately(self, info: QueuedPodInfo) -> None:
        """Put an in-flight pod straight back into activeQ (e.g. a gang member not tried yet)."""
        self._land(info.key)
        if info.key in self.infos:
            self._enqueue(info, FORCE_ACTIVATE_EVENT)

    # ----------------------------------------------------------------------------- moving
    def _requeue_after_event(self, info: QueuedPodInfo, event: str) -> None:
        if info.backoff_expiry > self._now() and info.attempts > 0:
            if self._gate(info, event):
                return
            self._push_backoff(info, event)
        else:
            self._enqueue(info, event)

    def _group(self, info: QueuedPodInfo) -> PoolGroup:
        """The pool group of a rejected pod: pods of one group get one answer from every hint of
        the plugins that rejected them (a plugin without shapes makes each pod its own group)."""
        plugins = frozenset(info.unschedulable_plugins)
        shapes: list[Hashable] = []
        for name in sorted(plugins):
            shape = self._shape_of_plugin.get(name)
            shapes.append(shape(info.pod) if shape is not None else info.key)
        return plugins, tuple(shapes)

    def _hints_for(self, plugins: frozenset[str], event: ClusterEvent) -> tuple[ClusterEventWithHint, ...]:
        """The hints of these plugins registered for the event (kube-scheduler's
        isEventOfInterest, per group of the pool)."""
        cache_key = (plugins, event)
        found = self._interested.get(cache_key)
        if found is None:
            found = tuple(
                registered
                for name in sorted(plugins)
                for registered in self._hints_of_plugin.get(name, ())
                if registered.event.covers(event)
            )
            self._interested[cache_key] = found
        return found

    def _helps(self, group: PoolGroup, pod: Pod, event: ClusterEvent, old: object, new: object) -> bool:
        """kube-scheduler's isPodWorthRequeuing: a pod no plugin rejected always moves; otherwise
        it moves when a hint of a plugin that rejected it says QUEUE (a registration without a hint,
        or an event that carries no object to judge, counts as QUEUE)."""
        plugins = group[0]
        if not plugins:
            return True
        for registered in self._hints_for(plugins, event):
            hint = registered.hint
            if hint is None or (old is None and new is None):
                return True
            try:
                if hint(pod, old, new) is QueueingHint.QUEUE:
                    return True
            except Exception:
                # as kube-scheduler does with a hint's error: queue, never strand the pod
                log.exception("queueing hint for %s on %s%s failed", pod.key, event.resource, event.action)
                return True
        return False

    def on_event(self, event: ClusterEvent, old: object = None, new: object = None) -> int:
        """Move unschedulable pods that `event` could help, and re-check the gated pods of plugins
        that registered it and do not name their pods themselves. `old` and `new` are the event's
        object before and after (a Node, a Pod), for the plugins' queueing hints."""
        if self.in_flight:
            # judged when each pod in flight lands (see add_unschedulable)
            self._flight_events.append(_FlightEvent(event, old, new, {}))
        moved = 0
        label = event.resource + event.action
        helped: list[tuple[int, str]] = []
        for group, members in self.where.pool_groups.items():
            if group[0] and not self._hints_for(group[0], event):
                continue
            if self._helps(group, self.infos[next(iter(members))].pod, event, old, new):
                helped.extend((seq, key) for key, seq in members.items())
        # in the order the pool was entered, as a pass over the whole pool would move them
        helped.sort()
        for _, key in helped:
            self._requeue_after_event(self.infos[key], label)
            moved += 1
        for plugin in list(self.where.gated_by):
            if plugin in self._targeted_gates:
                continue
            registered = self._events_of_plugin.get(plugin)
            if registered is None or any(r.covers(event) for r in registered):
                moved += self.recheck(list(self.where.gated_by.get(plugin, ())), label)
        return moved

    def recheck(self, keys: Iterable[str], event: str = FORCE_ACTIVATE_EVENT) -> int:
        """Run PreEnqueue again for these pods where they are gated; how many it let through."""
        opened = 0
        for key in keys:
            if self.where.get(key) != GATED:
                continue
            info = self.infos[key]
            if not self._gate(info, event):
                self._requeue_after_event(info, event)
                opened += 1
        return opened

    def recheck_untargeted(self) -> None:
        """Time passed: the gated pods of plugins that do not name their pods are checked again
        (their verdicts may depend on time)."""
        for plugin in list(self.where.gated_by):
            if plugin not in self._targeted_gates:
                self.recheck(list(self.where.gated_by.get(plugin, ())), UNSCHEDULABLE_TIMEOUT_EVENT)

    def take(self, key: str) -> QueuedPodInfo | None:
        """Pull a waiting pod out of the queue to schedule it now (a gang member of the pod being
        scheduled); None when it is gated, in flight, or not here."""
        where = self.where.get(key)
        if where == GATED and not self._gate(self.infos[key], FORCE_ACTIVATE_EVENT):
            where = ACTIVE  # the gate has just opened (e.g. the gang now has enough members)
        if where not in (ACTIVE, BACKOFF, UNSCHEDULABLE):
            return None
        info = self.infos[key]
        del self.where[key]
        self._unschedulable_since.pop(key, None)
        info.attempts += 1
        self._take_off(key)
        return info

    def activate(self, keys: Iterable[str]) -> None:
        """Move these pods to activeQ now, wherever they wait (gang siblings)."""
        for key in keys:
            info = self.infos.get(key)
            if info is None or key in self.in_flight:
                continue
            if self.where.get(key) in (UNSCHEDULABLE, BACKOFF, GATED):
                self._enqueue(info, FORCE_ACTIVATE_EVENT)

    def flush(self) -> None:
        """Backoff that has ended goes to activeQ; pods in the pool too long go back too."""
        now = self._now()
        while self._backoff:
            expiry, seq, info = self._backoff[0]
            if not self._current(BACKOFF, seq, info):
                heapq.heappop(self._backoff)
                continue
            if expiry > now:
                break
            heapq.heappop(self._backoff)
            self._enqueue(info, BACKOFF_COMPLETE_EVENT)
        limit = self.settings.max_unschedulable_seconds
        # the pool is kept in the order pods entered it, so the scan stops at the first one that
        # has not been there long enough: a tick costs what it moves, not the size of the pool
        overdue: list[str] = []
        for key, since in self._unschedulable_since.items():
            if now - since < limit:
                break
            overdue.append(key)
        for key in overdue:
            if self.where.get(key) == UNSCHEDULABLE:
                self._requeue_after_event(self.infos[key], UNSCHEDULABLE_TIMEOUT_EVENT)
            else:
                self._unschedulable_since.pop(key, None)

    def next_deadline(self, include_flush: bool = True) -> float | None:
        """When flush() will next have something to do (`include_flush` False: leave out the
        periodic flush of the unschedulable pool)."""
        times: list[float] = []
        while self._backoff:
            expiry, seq, info = self._backoff[0]
            if self._current(BACKOFF, seq, info):
                times.append(expiry)
                break
            heapq.heappop(self._backoff)
        if include_flush and self._unschedulable_since:
            # the oldest entry is the first: the pool is kept in the order pods entered it
            times.append(
                next(iter(self._unschedulable_since.values())) + self.settings.max_unschedulable_seconds
            )
        return min(times) if times else None

    def pending(self, where: str | None = None) -> list[QueuedPodInfo]:
        keys = list(self.where) if where is None else self.where.keys_at(where)
        return [self.infos[k] for k in keys]
