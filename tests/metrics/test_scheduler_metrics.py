"""What the scheduler's metrics record, each as kube-scheduler records it (pkg/scheduler in
Kubernetes v1.33): which cycles are timed, what is counted per node, how the queues label the
pods coming in, and what is read off the scheduler when scraped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.interfaces import NODE_ADD
from koordpy.framework.status import unresolvable
from koordpy.metrics import SchedulerMetrics, attempts_label, event_label
from koordpy.plugins import registry
from koordpy.queue import QueueSettings, SchedulingQueue
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, make_pod, pod_dict, settle

PROFILE = "default-scheduler"
G = "gang.scheduling.koordinator.sh"


def cluster(nodes: int = 1, cpu: str = "4") -> tuple[SchedulerMetrics, Scheduler, MemoryCluster]:
    metrics = SchedulerMetrics()
    clock = VirtualClock()
    sched = Scheduler(default_configuration(), registry(), clock, observer=metrics)
    metrics.track_scheduler(sched)
    world = MemoryCluster(sched, clock)
    for i in range(nodes):
        world.add_node(make_node(f"n{i}", cpu=cpu))
    return metrics, sched, world


def value(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def gang_member(name: str, min_available: int, cpu: str = "1") -> dict[str, Any]:
    annotations = {f"{G}/name": "gang", f"{G}/min-available": str(min_available)}
    return pod_dict(name, cpu=cpu, annotations=annotations)


# ------------------------------------------------------------------------------------ cycles
@pytest.mark.parametrize(("plugins_timed", "plugin_samples"), [(False, False), (True, True)])
def test_extension_points_are_timed_on_every_cycle_plugins_only_on_sampled_ones(
    plugins_timed: bool, plugin_samples: bool
) -> None:
    """framework.go observes FrameworkExtensionPointDuration on every run; runtime plugins'
    PluginExecutionDuration only when the cycle's state says to record plugin metrics."""
    metrics, sched, world = cluster()
    sched.observe_plugins = plugins_timed
    for i in range(3):
        world.add_pod(pod_dict(f"p{i}", cpu="1"))
    settle(world)
    points = "scheduler_framework_extension_point_duration_seconds_count"
    for point in ("PreFilter", "Filter", "Reserve", "Permit", "PreBind", "PostBind"):
        assert value(metrics, points, extension_point=point, status="Success", profile=PROFILE) == 3
    timed = value(
        metrics,
        "scheduler_plugin_execution_duration_seconds_count",
        plugin="NodeResourcesFit",
        extension_point="Filter",
        status="Success",
    )
    assert (timed > 0) is plugin_samples


def test_a_pod_that_fits_nowhere_has_its_algorithm_and_postfilter_timed() -> None:
    metrics, _, world = cluster()
    world.add_pod(pod_dict("too-big", cpu="100"))
    settle(world)
    assert value(metrics, "scheduler_scheduling_algorithm_duration_seconds_count") == 1
    assert (
        value(
            metrics,
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point="PostFilter",
            status="Unschedulable",
            profile=PROFILE,
        )
        == 1
    )


@pytest.mark.parametrize(
    ("point", "plugin", "per_cycle"),
    [
        ("PreFilter", "NodeResourcesFit", 1),
        ("Filter", "NodeResourcesFit", 3),
        ("Filter", "TaintToleration", 3),
        ("Score", "NodeResourcesFit", 3),
        ("Score", "ImageLocality", 3),
    ],
)
def test_plugin_evaluations_count_each_node_a_filter_or_score_plugin_looked_at(
    point: str, plugin: str, per_cycle: int
) -> None:
    """instrumented_plugins.go counts a PreFilter run once and a Filter or Score call once per node."""
    metrics, _, world = cluster(nodes=3)
    world.add_pod(pod_dict("p", cpu="1"))
    settle(world)
    evaluations = value(
        metrics, "scheduler_plugin_evaluation_total", plugin=plugin, extension_point=point, profile=PROFILE
    )
    assert evaluations == per_cycle


@pytest.mark.parametrize(("attempts", "label"), [(1, "1"), (2, "2"), (14, "14"), (15, "15+"), (40, "15+")])
def test_the_sli_attempts_label_stops_at_15(attempts: int, label: str) -> None:
    """schedule_one.go's getAttemptsLabel."""
    assert attempts_label(attempts) == label


@pytest.mark.parametrize(
    ("members", "result"),
    [(2, "Success"), (3, "Unschedulable")],
    ids=["the gang completes", "the last member never fits"],
)
def test_a_wait_at_permit_is_timed_by_how_it_ended(members: int, result: str) -> None:
    metrics, _, world = cluster(cpu="2")
    for i in range(members):
        world.add_pod(gang_member(f"g{i}", members))
    world.run(3600)
    results = {
        s.labels["result"]
        for family in metrics.registry.collect()
        if family.name == "scheduler_permit_wait_duration_seconds"
        for s in family.samples
        if s.name.endswith("_count")
    }
    assert results == {result}


# ------------------------------------------------------------------------------------ scrape time
def test_unschedulable_pods_are_counted_by_the_plugin_that_rejected_or_gates_them() -> None:
    metrics, _, world = cluster()
    world.add_pod(pod_dict("too-big", cpu="100"))
    world.add_pod(pod_dict("gated", cpu="1", spec={"schedulingGates": [{"name": "example.com/hold"}]}))
    world.add_pod(pod_dict("fits", cpu="1"))
    settle(world)
    by_plugin = {
        s.labels["plugin"]: s.value
        for family in metrics.registry.collect()
        if family.name == "scheduler_unschedulable_pods"
        for s in family.samples
    }
    assert by_plugin == {"NodeResourcesFit": 1, "SchedulingGates": 1}


def test_the_cache_size_and_the_binding_work_count_a_pod_whose_binding_is_unanswered() -> None:
    """A pod placed and not bound yet is assumed in the cache (cache.go's assumedPods, counted in
    its pods too) and its binding goroutine is still running."""
    metrics, sched, world = cluster(nodes=2)
    world.add_pod(pod_dict("bound", cpu="1", node_name="n0"))
    world.add_pod(pod_dict("placed", cpu="1"))
    world.apply(sched.drain())
    assert sched.schedule_one()
    for name in ("scheduler_cache_size", "scheduler_scheduler_cache_size"):
        assert value(metrics, name, type="nodes") == 2
        assert value(metrics, name, type="pods") == 2
        assert value(metrics, name, type="assumed_pods") == 1
    assert value(metrics, "scheduler_goroutines", operation="binding") == 1


def new_queue(clock: VirtualClock, gated: frozenset[str] = frozenset()) -> SchedulingQueue:
    def pre_enqueue(pod: Any) -> Any:
        return unresolvable("held", plugin="SchedulingGates") if pod.name in gated else None

    return SchedulingQueue(
        lambda info: (info.timestamp,),
        pre_enqueue,
        {"NodeResourcesFit": (NODE_ADD,)},
        QueueSettings(initial_backoff=1, max_backoff=10, max_unschedulable_seconds=300),
        clock.now,
    )


Step = Callable[[VirtualClock, SchedulingQueue], object]


def pop_and_fail(q: SchedulingQueue, error: bool = False) -> None:
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, () if error else ("NodeResourcesFit",), error=error)


def rejected(clock: VirtualClock, q: SchedulingQueue) -> None:
    pop_and_fail(q)


def failed_on_error(clock: VirtualClock, q: SchedulingQueue) -> None:
    pop_and_fail(q, error=True)


def wait(seconds: float) -> Step:
    return lambda clock, q: clock.advance(seconds)


def node_added(clock: VirtualClock, q: SchedulingQueue) -> None:
    q.on_event(NODE_ADD)


def time_passed(clock: VirtualClock, q: SchedulingQueue) -> None:
    q.flush()


def activated(clock: VirtualClock, q: SchedulingQueue) -> None:
    q.activate(["default/p"])


ADDED = ("active", "UnschedulablePodAdd")
REJECTED = ("unschedulable", "ScheduleAttemptFailure")
ERRORED = ("backoff", "ScheduleAttemptFailure")
# the first backoff is 1 s, the pool is flushed after 300 s
INCOMING_CASES: dict[str, tuple[tuple[Step, ...], dict[tuple[str, str], int]]] = {
    "a new pod": ((), {ADDED: 1}),
    "a rejected pod": ((rejected,), {ADDED: 1, REJECTED: 1}),
    "a pod that failed on an error": ((failed_on_error,), {ADDED: 1, ERRORED: 1}),
    "a rejected pod a node event helps": (
        (rejected, wait(2), node_added),
        {ADDED: 1, REJECTED: 1, ("active", "NodeAdd"): 1},
    ),
    "a pod whose backoff ended": (
        (failed_on_error, wait(2), time_passed),
        {ADDED: 1, ERRORED: 1, ("active", "BackoffComplete"): 1},
    ),
    "a rejected pod left in the pool too long": (
        (rejected, wait(301), time_passed),
        {ADDED: 1, REJECTED: 1, ("active", "UnschedulableTimeout"): 1},
    ),
    "a rejected pod activated by a plugin": (
        (rejected, activated),
        {ADDED: 1, REJECTED: 1, ("active", "ForceActivate"): 1},
    ),
}


@pytest.mark.parametrize(("steps", "incoming"), INCOMING_CASES.values(), ids=INCOMING_CASES.keys())
def test_pods_coming_into_a_queue_are_counted_by_queue_and_event(
    steps: tuple[Step, ...], incoming: dict[tuple[str, str], int]
) -> None:
    """scheduling_queue.go's labels: UnschedulablePodAdd for a new pod, ScheduleAttemptFailure
    after an attempt, the cluster event's label, BackoffComplete, UnschedulableTimeout and
    ForceActivate for the moves of their names."""
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    for step in steps:
        step(clock, q)
    assert q.incoming == incoming


def test_a_gated_pod_comes_into_the_unschedulable_queue_once() -> None:
    """Gated pods wait in kube-scheduler's unschedulablePods; a pod already there is not counted
    again when PreEnqueue turns it away once more."""
    clock = VirtualClock()
    q = new_queue(clock, gated=frozenset({"p"}))
    q.add(make_pod("p"))
    q.update(make_pod("p", labels={"changed": "yes"}))
    assert q.incoming == {("unschedulable", "UnschedulablePodAdd"): 1}


# ------------------------------------------------------------------------------------ the world's side
@pytest.mark.parametrize(
    ("kind", "action", "obj", "label"),
    [
        ("Pod", "Add", {"spec": {"nodeName": "n1"}}, "AssignedPodAdd"),
        ("Pod", "Delete", {"spec": {"nodeName": "n1"}}, "AssignedPodDelete"),
        ("Pod", "Add", {"spec": {}}, "UnschedulablePodAdd"),
        ("Pod", "Update", {"spec": {"nodeName": ""}}, "UnschedulablePodUpdate"),
        ("Node", "Add", {}, "NodeAdd"),
        ("Node", "Delete", {}, "NodeDelete"),
    ],
)
def test_informer_events_are_labelled_as_kube_scheduler_labels_them(
    kind: str, action: str, obj: dict[str, Any], label: str
) -> None:
    """framework/events.go: pods are AssignedPod or UnschedulablePod, then the action."""
    assert event_label(kind, action, obj) == label


@pytest.mark.parametrize(("result", "status"), [("success", "Success"), ("error", "Error")])
def test_a_binding_call_is_the_bind_extension_point(result: str, status: str) -> None:
    metrics = SchedulerMetrics()
    metrics.binding(result, 0.02, PROFILE)
    count = "scheduler_framework_extension_point_duration_seconds_count"
    assert value(metrics, count, extension_point="Bind", status=status, profile=PROFILE) == 1
