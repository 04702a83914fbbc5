"""The scheduler's construction and the state every stage shares: profiles and their queues, the
cache, nominations, waiting pods, the outbox, and each pending pod's latest verdict."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.cache import Cache
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import Clock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis, fit_error_message
from koordpy.framework.effects import Effect, Nominate, PodUnschedulable
from koordpy.framework.handle import Handle, Shared
from koordpy.framework.interfaces import NODE_ALL, POD_ALL
from koordpy.framework.nominator import Nominator
from koordpy.framework.observer import GaugeSource, NullObserver, SchedulerObserver
from koordpy.framework.profile import Profile, Registry
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import Code, Status
from koordpy.framework.waiting import WaitingPods
from koordpy.queue import QueueSettings, SchedulingQueue

log = logging.getLogger(__name__)

# cycles that end in an internal error one after another before the scheduler calls itself unhealthy
FAILED_CYCLES_UNHEALTHY = 20


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
    # when the scheduling cycle that chose the node began, on the scheduler's clock: the attempt
    # ends (and is counted) when the binding does, as kube-scheduler's bindingCycle counts it
    started: float = 0.0


@dataclass(slots=True)
class Held:
    """A pod waiting at Permit: its queue entry, its profile, and when its attempt began (on the
    scheduler's clock)."""

    info: QueuedPodInfo
    profile: Profile
    started: float


@dataclass(slots=True)
class Attempt:
    """How one pod's scheduling cycle ended: `message` None when the pod holds a node (binding
    or waiting at Permit); `failure` the cycle's state and diagnosis when no node fit."""

    message: str | None
    failure: tuple[CycleState, Diagnosis] | None = None


class SchedulerCore:
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
        # what the plugins of every profile share, and the pod and object events they follow
        self.shared = Shared()
        self.profiles: dict[str, Profile] = {}
        self.queues: dict[str, SchedulingQueue] = {}
        settings = QueueSettings(
            initial_backoff=float(config.podInitialBackoffSeconds),
            max_backoff=float(config.podMaxBackoffSeconds),
            max_unschedulable_seconds=float(config.podMaxInUnschedulablePodsDuration),
        )
        for i, pc in enumerate(config.profiles):
            handle = Handle(
                clock, self.cache, self.nominator, self.waiting, self.outbox, self.shared, self.observer
            )
            profile = Profile(pc, registry, handle, i, config.percentageOfNodesToScore)
            self.profiles[profile.name] = profile
            self.queues[profile.name] = SchedulingQueue(
                profile.queue_sort.sort_key,
                profile.run_pre_enqueue,
                profile.hints,
                settings,
                clock.now,
                on_gate=self._gate_observer(profile.name),
                targeted_gates=frozenset(p.NAME for p in profile.gate_wakers),
                shape_of_plugin=profile.hint_shapes,
            )
        self._profile_order = list(self.profiles)
        # every pod the scheduler knows of, by key (set before queues can call back)
        self.pods: dict[str, Pod] = {}
        self.outcomes: dict[str, PodOutcome] = {}
        self._waiting_info: dict[str, Held] = {}
        self.bindings: dict[str, Binding] = {}
        self._observe_plugins = False
        # the profile whose queue is popped next (round robin)
        self._rr = 0
        # pending pods heard of during a bulk delivery, queued when it ends (see Scheduler.bulk)
        self._deferred: dict[str, None] | None = None
        # cycles ended by an internal error since the last one that ended normally
        self.failed_cycles_in_a_row = 0
        # problems the last cache check found and could not repair (empty: consistent)
        self.cache_problems: list[str] = []

    def _gate_observer(self, profile: str) -> Callable[[QueuedPodInfo, Status | None], None]:
        def on_gate(info: QueuedPodInfo, st: Status | None) -> None:
            pod = info.pod
            if st is None:
                self.outcomes.pop(pod.key, None)
                return
            reason = st.reason or (
                names.SCHEDULING_GATED if st.plugin == names.SCHEDULING_GATES else names.UNSCHEDULABLE
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

    def serves(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.profiles

    # ============================================================================ verdicts
    def _invalid(self, pod: Pod, message: str) -> None:
        self.outcomes[pod.key] = PodOutcome(names.INVALID_SPEC, message)
        self.outbox.append(PodUnschedulable(pod, names.INVALID_SPEC, message, pod.scheduler_name))

    def _attempt_ended(self, profile: Profile, st: Status | None, seconds: float) -> None:
        """One scheduling attempt counted with kube-scheduler's result: `scheduled` once the
        binding succeeded, `unschedulable` for a rejection (a filter, Reserve, Permit or its wait),
        `error` for anything else (an internal error, PreBind, a failed binding)."""
        if st is None:
            result = "scheduled"
        elif st.is_rejection:
            result = "unschedulable"
        else:
            result = "error"
        self.observer.attempt(result, profile.name, max(0.0, seconds))

    def _requeue_with(
        self, profile: Profile, queue: SchedulingQueue, info: QueuedPodInfo, st: Status
    ) -> None:
        pod = info.pod
        reason = names.SCHEDULER_ERROR if st.code == Code.ERROR else names.UNSCHEDULABLE
        self.outcomes[pod.key] = PodOutcome(reason, st.message)
        self.outbox.append(PodUnschedulable(pod, reason, st.message, profile.name))
        queue.add_unschedulable(info, (st.plugin,) if st.plugin else (), error=st.code == Code.ERROR)

    def _stamp_group(self, profile: Profile, pod: Pod, message: str, attempted: Collection[str] = ()) -> None:
        """Give every pending member of the pod's gang group the same explanation; only the
        `attempted` ones were tried in the attempt it explains."""
        group = profile.group
        if group is None:
            return
        outcome = PodOutcome(names.UNSCHEDULABLE, message)
        for member in group.batch_members(pod) or ():
            pending = member.key in self.pods and not self.cache.is_assumed(member.key)
            if pending and self.outcomes.get(member.key) != outcome:
                self.outcomes[member.key] = outcome
                self.outbox.append(
                    PodUnschedulable(
                        member,
                        names.UNSCHEDULABLE,
                        message,
                        profile.name,
                        attempted=member.key in attempted,
                    )
                )

    # ============================================================================ cache health
    def check_cache(self) -> list[str]:
        """Compare the cache's arrays with its records and rebuild them when they disagree. Returns
        what was found (empty when consistent); `cache_problems` keeps what a repair left."""
        snapshot = self.cache.snapshot
        if snapshot.in_trial:
            # only a trial whose undo itself failed is still open here: what it changed is lost
            # track of, and the rebuild below puts the records back
            snapshot._open_trials.clear()
            found = ["a trial was left open"]
        else:
            found = []
        found += self.cache.problems()
        if not found:
            self.cache_problems = []
            self.observer.cache_check("consistent")
            return found
        log.warning("cache inconsistent (%s); rebuilding it from its records", "; ".join(found[:5]))
        try:
            self.cache.repair()
            self.cache_problems = self.cache.problems()
        except Exception as err:  # the repair's own failure is reported through health
            log.exception("rebuilding the cache failed")
            self.cache_problems = [f"repair failed: {err}"]
        self.observer.cache_check("repaired" if not self.cache_problems else "failed")
        for q in self.queues.values():
            # what the pods were judged against changed: pods rejected by it try again
            q.on_event(NODE_ALL)
            q.on_event(POD_ALL)
        return found

    def fit_message(self, diagnosis: Diagnosis) -> str:
        return fit_error_message(self.cache.snapshot.node_count, diagnosis)

    # ============================================================================ what the world reads
    def drain(self) -> list[Effect]:
        out = list(self.outbox)
        self.outbox.clear()
        return out

    def scrape_gauges(self) -> dict[str, float]:
        """Values for gauges computed at scrape time (gang groups waiting, GPU fragmentation)."""
        from koordpy.status.fragmentation import GPU, fragmentation

        out: dict[str, float] = {}
        for source in self.shared.objects():
            if isinstance(source, GaugeSource):
                out.update(source.gauges())
        snap = self.cache.snapshot
        col = snap.resource_col.get(GPU)
        if col is not None:
            rows = snap.live_rows()
            nodes = zip(
                snap.allocatable_column(col, rows).tolist(),
                snap.requested_column(col, rows).tolist(),
                strict=True,
            )
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
