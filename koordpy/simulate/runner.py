"""Run a scenario through the real scheduler on a virtual clock and report the outcome."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TextIO

from koordpy.api import names
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.gangs import add_pod_groups
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.quotas import add_quotas
from koordpy.simulate.report import PodGroupResult, PodResult, PreemptionResult, Report
from koordpy.status.fragmentation import GPU, fragmentation
from koordpy.status.topology import TopologySpecError, build_tree, detail_status, parse_layer_chain

REASON_SCHEDULER_NOT_FOUND = names.SCHEDULER_NOT_FOUND
REASON_SCHEDULING_GATED = names.SCHEDULING_GATED

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
    for ns in scenario.namespaces:
        world.add_namespace(ns)
    for node in scenario.nodes:
        world.add_node(node)
    # the scheduler takes these kinds as an informer delivers them, as API objects: each gets the
    # very object it was loaded from, never one rebuilt from the parsed view
    for pg in scenario.pod_groups:
        scheduler.on_object("PodGroup", "Add", pg.raw)
    for pdb in scenario.pdbs:
        scheduler.on_object("PodDisruptionBudget", "Add", pdb.raw)
    for topology in scenario.topologies:
        scheduler.on_object("ClusterNetworkTopology", "Add", topology)
    for quota in scenario.elastic_quotas:
        scheduler.on_object("ElasticQuota", "Add", quota.raw)
    for hook in SETUP_HOOKS:
        hook(world, scenario)
    with scheduler.bulk():
        for pod in scenario.pods:
            world.add_pod(pod)
    return world


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
    max_virtual_seconds: float = 3600.0,
    progress: ProgressLine | None = None,
) -> Report:
    world = build_world(scenario, config)
    if progress is not None:
        progress.watch(world)
    world.run(max_virtual_seconds)
    return build_report(world, scenario)


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
    if not snap.allocatable[rows, col].any():
        return
    nodes = zip(snap.allocatable[rows, col].tolist(), snap.requested[rows, col].tolist(), strict=True)
    requests = [p.requests.get(GPU, 0) for k, p in world.views.items() if k not in world.deleted]
    report.extras["fragmentation"] = fragmentation(nodes, requests).to_dict()


def build_report(world: MemoryCluster, scenario: Scenario) -> Report:
    sched = world.scheduler
    evicted = {e.victim: e for e in world.evictions}
    pods: list[PodResult] = []
    for key in world.order:
        pod = world.views[key]
        raw = world.pods[key]
        nominated = (raw.get("status") or {}).get("nominatedNodeName") or None
        if key in evicted and key in world.deleted:
            pods.append(
                PodResult(pod.namespace, pod.name, evicted[key].node, names.EVENT_PREEMPTED, None, None, None)
            )
            continue
        if pod.node_name:
            pods.append(PodResult(pod.namespace, pod.name, pod.node_name, "Bound", None, None, None))
            continue
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
                reason = (
                    names.GANG_NOT_READY if info.gated_by == names.COSCHEDULING else REASON_SCHEDULING_GATED
                )
                message = info.gated_message
            else:
                reason, message = names.UNSCHEDULABLE, "not scheduled before the simulation ended"
        pods.append(PodResult(pod.namespace, pod.name, None, "Pending", nominated, reason, message))
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
    for hook in REPORT_HOOKS:
        hook(world, scenario, report)
    return report


__all__ = [
    "REPORT_HOOKS",
    "SETUP_HOOKS",
    "PodGroupResult",
    "ProgressLine",
    "build_report",
    "build_world",
    "simulate",
]
