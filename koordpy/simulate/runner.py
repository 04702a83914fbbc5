"""Run a scenario through the real scheduler on a virtual clock and report the outcome."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from types import TracebackType
from typing import Any, TextIO

from koordpy.api import names
from koordpy.api.elasticquota import KOORDINATOR_GROUP, QuotaIndex, quota_of_pod
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.plugins.coscheduling.gang import membership
from koordpy.scheduler import Scheduler
from koordpy.simulate.claims import STORAGE_KINDS
from koordpy.simulate.gangs import PodGroupHistory, add_pod_groups
from koordpy.simulate.jobs import JobState, job_statuses
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import SUCCEEDED, Eviction, MemoryCluster
from koordpy.simulate.quotas import add_quotas
from koordpy.simulate.report import PodGroupResult, PodResult, PreemptionResult, Report
from koordpy.simulate.timeline import Timeline
from koordpy.simulate.volumereport import add_volumes
from koordpy.simulate.volumes import VolumeWorld
from koordpy.status.fragmentation import GPU, fragmentation
from koordpy.status.topology import TopologySpecError, build_tree, detail_status, parse_layer_chain

REASON_SCHEDULER_NOT_FOUND = names.SCHEDULER_NOT_FOUND
REASON_SCHEDULING_GATED = names.SCHEDULING_GATED
# a pod whose arrive-after the run did not reach
NOT_CREATED = "NotCreated"
# `--max-virtual-seconds` when not given: a week of virtual time, so that a replayed day (the
# README's timeline example) with its last pods' run-for ends by itself rather than at the cap
DEFAULT_MAX_VIRTUAL_SECONDS = 7 * 24 * 3600.0

# Extra sections of the report (PodGroup status, topology status, ...) come from the features that
# own them; each contributes through a hook that sees the finished world.
ReportHook = Callable[[MemoryCluster, Scenario, Report], None]
SetupHook = Callable[[MemoryCluster, Scenario], None]

SETUP_HOOKS: list[SetupHook] = []
REPORT_HOOKS: list[ReportHook] = []


def build_world(scenario: Scenario, config: SchedulerConfiguration) -> MemoryCluster:
    clock = VirtualClock(0.0)
    scheduler = Scheduler(config, registry(), clock)
    world = MemoryCluster(scheduler, clock)
    world.volumes = volumes = VolumeWorld(scheduler, clock)
    if scenario.has_timeline:
        world.timeline = Timeline()
        PodGroupHistory(world).install()
        _watch_jobs(world, scenario)
    arrive = _Arrivals(world, scenario)
    for ns in scenario.namespaces:
        arrive(("Namespace", "", ns.name), partial(world.add_namespace, ns))
    for node in scenario.nodes:
        arrive(("Node", "", node.name), partial(world.add_node, node))
    # the scheduler takes these kinds as an informer delivers them, as API objects: each gets the
    # very object it was loaded from, never one rebuilt from the parsed view
    for pg in scenario.pod_groups:
        arrive(("PodGroup", pg.namespace, pg.name), _handing(scheduler, "PodGroup", pg.raw))
    for pdb in scenario.pdbs:
        key = ("PodDisruptionBudget", pdb.namespace, pdb.name)
        arrive(key, _handing(scheduler, "PodDisruptionBudget", pdb.raw))
    for topology in scenario.topologies:
        name = str((topology.get("metadata") or {}).get("name"))
        arrive(("ClusterNetworkTopology", "", name), _handing(scheduler, "ClusterNetworkTopology", topology))
    for quota in scenario.elastic_quotas:
        arrive(("ElasticQuota", quota.namespace, quota.name), _handing(scheduler, "ElasticQuota", quota.raw))
    # classes and volumes before the claims that bind to them (see koordpy.simulate.claims)
    for kind in STORAGE_KINDS:
        for obj in scenario.storage:
            if obj.kind == kind:
                arrive(obj.key, partial(volumes.add, obj.kind, obj.raw))
    for pc in scenario.priority_classes:
        # admission read it already; its arrival is a step of the timeline all the same
        arrive(("PriorityClass", "", pc.name), _nothing)
    for hook in SETUP_HOOKS:
        hook(world, scenario)
    with scheduler.bulk():
        for pod in scenario.pods:
            meta = pod["metadata"]
            arrive(("Pod", meta["namespace"], meta["name"]), partial(world.add_pod, pod))
    arrive.removals()
    return world


def _watch_jobs(world: MemoryCluster, scenario: Scenario) -> None:
    """The Job controller's count of each Job's pods (see koordpy.simulate.jobs): the pods stamped
    at the start are its first active pods."""
    for spec in scenario.jobs:
        if not spec.pods:
            continue
        job = JobState(
            spec.pods[0],
            spec.parallelism,
            spec.completions,
            spec.indexed,
            spec.replace_terminating,
            backoff_limit=spec.backoff_limit,
            failure_rules=spec.failure_rules,
            name=f"{spec.namespace}/{spec.name}",
        )
        for index, key in enumerate(spec.pods):
            job.started(key, index if spec.indexed else None)
            world.jobs[key] = job


def _handing(scheduler: Scheduler, kind: str, obj: Mapping[str, Any]) -> Callable[[], object]:
    return partial(scheduler.on_object, kind, "Add", obj)


def _nothing() -> None:
    pass


class _Arrivals:
    """Creates each object at zero, or plans it at the virtual time its arrive-after names; notes
    the run-for and remove-after of nodes and pods for the world."""

    def __init__(self, world: MemoryCluster, scenario: Scenario) -> None:
        self.world = world
        self.scenario = scenario

    def __call__(self, key: tuple[str, str, str], add: Callable[[], object]) -> None:
        timeline = self.world.timeline
        timing = self.scenario.timing.get(key)
        if key[0] == "Pod" and timeline is not None:
            pod_key = f"{key[1]}/{key[2]}"
            if timing is not None and timing.run_for is not None:
                self.world.run_for[pod_key] = timing.run_for
        if timeline is None or timing is None or timing.arrive <= 0:
            if timeline is not None and key[0] not in ("Pod", "Node"):
                timeline.happened(0.0)
            add()
            return
        when = timing.arrive
        if key[0] in ("Pod", "Node"):
            timeline.at(when, add)
            return

        def arrive() -> None:
            timeline.happened(when)
            add()

        timeline.at(when, arrive)

    def removals(self) -> None:
        """After every arrival is planned, so that at one instant arrivals come first."""
        world, timeline = self.world, self.world.timeline
        if timeline is None:
            return
        for pod in self.scenario.pods:
            meta = pod["metadata"]
            pod_key = f"{meta['namespace']}/{meta['name']}"
            if pod_key in self.scenario.workload_pods:
                world.stamped[pod_key] = pod
            timing = self.scenario.timing.get(("Pod", meta["namespace"], meta["name"]))
            if timing is not None and timing.remove is not None:
                uid = str(meta.get("uid") or pod_key)
                timeline.at(timing.remove, partial(world.remove_pod, pod_key, uid))
        for node in self.scenario.nodes:
            timing = self.scenario.timing.get(("Node", "", node.name))
            if timing is not None and timing.remove is not None:
                timeline.at(timing.remove, partial(world.remove_node, node.name))


class ProgressLine:
    """How far a long run is, on one line of a terminal rewritten in place: nothing when the
    stream is not a terminal (a pipe, a file, a test) or when the run ends within `after` seconds.
    The counts are taken on the simulation's own thread, between batches of decisions; a
    background thread only writes the latest line."""

    def __init__(
        self,
        stream: TextIO,
        after: float = 2.0,
        every: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        background: bool = True,
    ) -> None:
        self.stream = stream
        self.after = after
        self.every = every
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self._clock = clock
        self._started = clock()
        self._text = ""
        self._shown = False
        self._next_count = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.enabled and background:
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()

    def stage(self, text: str) -> None:
        self._text = text

    def watch(self, world: MemoryCluster) -> None:
        """Count the pods still pending after each batch of decisions (at most every `every`)."""
        if not self.enabled:
            return
        total = len(world.order)

        def count() -> None:
            now = self._clock()
            if now < self._next_count:
                return
            self._next_count = now + self.every
            pending = sum(world.scheduler.pending_counts().values())
            self._text = (
                f"scheduling {total:,} pods: {pending:,} pending, virtual time {world.clock.now():.0f}s"
            )

        world.after_effects.append(count)

    def tick(self) -> None:
        elapsed = self._clock() - self._started
        if not self.enabled or elapsed < self.after or not self._text:
            return
        width = shutil.get_terminal_size().columns - 1
        line = f"koordpy: {self._text} ({elapsed:.0f}s)"[: max(width, 20)]
        self.stream.write(f"\r\x1b[K{line}")
        self.stream.flush()
        self._shown = True

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.tick()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._shown:
            # the line goes away: what follows (the report, an error) starts on a clean line
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def simulate(
    scenario: Scenario,
    config: SchedulerConfiguration,
    max_virtual_seconds: float = DEFAULT_MAX_VIRTUAL_SECONDS,
    progress: ProgressLine | None = None,
) -> Report:
    world = build_world(scenario, config)
    if progress is not None:
        progress.watch(world)
    world.run(max_virtual_seconds)
    report = build_report(world, scenario)
    add_cut_off(world, report, max_virtual_seconds)
    return report


def add_cut_off(world: MemoryCluster, report: Report, max_virtual_seconds: float) -> None:
    """`cutOff`, only when the run reached --max-virtual-seconds with events still to come: what
    the report shows is then where the run stopped, not where the scenario ends."""
    if world.cut_before is None:
        return
    report.extras["cutOff"] = {
        "maxVirtualSeconds": max_virtual_seconds,
        "nextEventAt": round(world.cut_before, 3),
        "message": cut_off_message(max_virtual_seconds, world.cut_before),
    }


def cut_off_message(max_virtual_seconds: float, next_event: float) -> str:
    return (
        f"the run was cut at --max-virtual-seconds {max_virtual_seconds:g} with events still to come "
        f"(the next at {next_event:g}s); raise it to see the rest"
    )


def add_topology_status(world: MemoryCluster, scenario: Scenario, report: Report) -> None:
    """The status the ClusterNetworkTopology operator would write for the object named `default`."""
    topology = next(
        (t for t in scenario.topologies if (t.get("metadata") or {}).get("name") == "default"), None
    )
    if topology is None:
        if scenario.topologies:
            report.clusterNetworkTopology = {"status": {"message": "only the object named default is used"}}
        return
    snap = world.scheduler.cache.snapshot
    nodes = [snap.info(int(r)).node for r in snap.live_rows()]
    spec = topology.get("spec")
    try:
        chain = parse_layer_chain(spec.get("networkTopologySpec") if isinstance(spec, Mapping) else None)
    except TopologySpecError as err:
        report.clusterNetworkTopology = {
            "status": {
                "conditions": [
                    {"type": "Valid", "status": "False", "reason": names.INVALID_SPEC, "message": str(err)}
                ],
                "message": str(err),
            }
        }
        return
    report.clusterNetworkTopology = {"status": {"detailStatus": detail_status(build_tree(chain, nodes))}}


def add_fragmentation(world: MemoryCluster, report: Report) -> None:
    """The GPU fragmentation figure, when the cluster has GPUs (see koordpy.status.fragmentation)."""
    snap = world.scheduler.cache.snapshot
    col = snap.resource_col.get(GPU)
    if col is None:
        return
    rows = snap.live_rows()
    if not snap.allocatable_column(col, rows).any():
        return
    nodes = zip(
        snap.allocatable_column(col, rows).tolist(), snap.requested_column(col, rows).tolist(), strict=True
    )
    requests = [p.requests.get(GPU, 0) for k, p in world.views.items() if k not in world.deleted]
    report.extras["fragmentation"] = fragmentation(nodes, requests).to_dict()


def _pod_result(world: MemoryCluster, key: str, evicted: Mapping[str, Eviction]) -> PodResult:
    result = _pod_outcome(world, key, evicted)
    nominated = world.nominated.get(key)
    if nominated:
        # additive: where the pod was last nominated, bound or not (nominatedNodeName is the
        # status field, which binding clears)
        result.extras["nominatedNode"] = nominated
    return result


def _pod_outcome(world: MemoryCluster, key: str, evicted: Mapping[str, Eviction]) -> PodResult:
    sched = world.scheduler
    pod = world.views[key]
    raw = world.pods[key]
    nominated = (raw.get("status") or {}).get("nominatedNodeName") or None
    if key in evicted and key in world.deleted:
        return PodResult(pod.namespace, pod.name, evicted[key].node, names.EVENT_PREEMPTED, None, None, None)
    if world.timeline is not None:
        removal = world.removed.get(key)
        if removal is not None:
            return PodResult(
                pod.namespace, pod.name, removal.node, removal.phase, None, removal.reason, removal.message
            )
        if pod.phase == SUCCEEDED and pod.node_name:
            return PodResult(pod.namespace, pod.name, pod.node_name, SUCCEEDED, None, None, None)
    if pod.node_name:
        return PodResult(pod.namespace, pod.name, pod.node_name, "Bound", None, None, None)
    reason: str | None
    message: str | None
    outcome = sched.outcomes.get(key)
    if outcome is not None:
        reason, message = outcome.reason, outcome.message
    elif not sched.serves(pod):
        reason = REASON_SCHEDULER_NOT_FOUND
        message = f"no profile serves schedulerName {pod.scheduler_name!r}"
    else:
        queue = sched.queues[pod.scheduler_name]
        info = queue.infos.get(key)
        if info is not None and info.gated_message:
            reason = names.GANG_NOT_READY if info.gated_by == names.COSCHEDULING else REASON_SCHEDULING_GATED
            message = info.gated_message
        else:
            reason, message = names.UNSCHEDULABLE, "not scheduled before the simulation ended"
    return PodResult(pod.namespace, pod.name, None, "Pending", nominated, reason, message)


def _timeline_pods(
    world: MemoryCluster, scenario: Scenario, evicted: Mapping[str, Eviction]
) -> list[PodResult]:
    """Every pod of the input in input order, then those controllers created again, each with its
    times; a pod whose arrival the run did not reach is reported as not created."""
    timeline = world.timeline
    assert timeline is not None
    pods: list[PodResult] = []
    keys = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in scenario.pods]
    for key in [*keys, *world.replacements]:
        if key in world.views:
            result = _pod_result(world, key, evicted)
        else:
            namespace, name = key.split("/", 1)
            arrive = scenario.arrival("Pod", namespace, name)
            result = PodResult(
                namespace,
                name,
                None,
                "Pending",
                None,
                NOT_CREATED,
                f"arrives at {arrive:g}s, after the simulation ended at {world.clock.now():g}s",
            )
        result.extras.update(timeline.times_of(key))
        pods.append(result)
    return pods


def _groups_of(world: MemoryCluster, scenario: Scenario) -> Callable[[str], list[tuple[str, str]]]:
    """The statistics' groups a pod counts in: its priority class, its gang, its quotas."""
    indexes = [
        QuotaIndex.build(scenario.elastic_quotas, group)
        for group in sorted({q.api_group for q in scenario.elastic_quotas})
    ]
    shown = {(q.api_group, q.name if q.is_koordinator else q.key): q.key for q in scenario.elastic_quotas}

    def groups(key: str) -> list[tuple[str, str]]:
        pod = world.views[key]
        out = [("byPriorityClass", pod.priority_class_name or "(none)")]
        m = membership(pod)
        if m is not None:
            out.append(("byGang", m.gang_id))
        for index in indexes:
            found = quota_of_pod(pod, index)
            if found is None:
                continue
            name = found.name if index.api_group == KOORDINATOR_GROUP else f"{pod.namespace}/{found.name}"
            out.append(("byQuota", shown.get((index.api_group, name), name)))
        return out

    return groups


def add_timeline(world: MemoryCluster, scenario: Scenario, report: Report) -> None:
    """The report's `timeline` and `waitingTime` (see koordpy.simulate.timeline)."""
    timeline = world.timeline
    if timeline is None:
        return
    report.extras["timeline"] = timeline.timeline()
    keys = [p.key for p in report.pods if p.key in world.views]
    waiting = timeline.waiting(keys, _groups_of(world, scenario))
    out: dict[str, Any] = {"byPriorityClass": waiting.get("byPriorityClass", {})}
    out["byGang"] = waiting.get("byGang", {})
    if scenario.elastic_quotas:
        out["byQuota"] = waiting.get("byQuota", {})
    report.extras["waitingTime"] = out
    if scenario.jobs:
        # the Jobs' controller state, in input order: the first pod each stamped names its Job
        report.extras["jobs"] = job_statuses(
            world.jobs[spec.pods[0]] for spec in scenario.jobs if spec.pods and spec.pods[0] in world.jobs
        )


def build_report(world: MemoryCluster, scenario: Scenario) -> Report:
    evicted = {e.victim: e for e in world.evictions}
    if world.timeline is None:
        pods = [_pod_result(world, key, evicted) for key in world.order]
    else:
        pods = _timeline_pods(world, scenario, evicted)
    preemptions = [
        PreemptionResult(e.victim, e.node, e.preemptor, e.trigger_pod, e.message) for e in world.evictions
    ]
    report = Report(
        pods=pods,
        podGroups=[],
        preemptions=preemptions,
        clusterNetworkTopology=None,
        virtualSeconds=round(world.clock.now(), 3),
        extras={},
    )
    add_pod_groups(world, scenario, report)
    add_quotas(world, scenario, report)
    add_fragmentation(world, report)
    add_topology_status(world, scenario, report)
    add_timeline(world, scenario, report)
    add_volumes(world, report)
    for hook in REPORT_HOOKS:
        hook(world, scenario, report)
    return report


__all__ = [
    "DEFAULT_MAX_VIRTUAL_SECONDS",
    "REPORT_HOOKS",
    "SETUP_HOOKS",
    "PodGroupResult",
    "ProgressLine",
    "build_report",
    "build_world",
    "cut_off_message",
    "simulate",
]
