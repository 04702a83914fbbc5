"""koordpy's metrics against kube-scheduler's: every kube-scheduler metric is either exported with
kube's name, type, labels and buckets, or left out with a reason that docs/deploy.md gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.metrics import KUBE_SCHEDULER_METRICS, KUBE_SCHEDULER_METRICS_LEFT_OUT, SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict
from tests.metrics.compare import mismatches, sample_names
from tests.metrics.kube_scheduler_metrics import BY_NAME

DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
G = "gang.scheduling.koordinator.sh"


def scrape_after_simulate() -> str:
    """A run that goes through every path a kube-scheduler metric describes: pods bound, one that
    fits nowhere, one gated, a preemption, a gang waiting at Permit; then what only the cluster
    world reports (an API request, an informer event, a binding call, the lease)."""
    metrics = SchedulerMetrics(process=True)
    clock = VirtualClock()
    sched = Scheduler(default_configuration(), registry(), clock, observer=metrics)
    metrics.track_scheduler(sched)
    sched.observe_plugins = True
    world = MemoryCluster(sched, clock)
    for name in ("n1", "n2"):
        world.add_node(make_node(name, cpu="4"))
        world.add_pod(pod_dict(f"low-{name}", cpu="4", node_name=name, priority=1))
    world.add_pod(pod_dict("high", cpu="3", priority=100))
    world.add_pod(pod_dict("too-big", cpu="100"))
    world.add_pod(pod_dict("gated", cpu="1", spec={"schedulingGates": [{"name": "example.com/hold"}]}))
    for i in range(2):
        world.add_pod(
            pod_dict(
                f"gang-{i}",
                cpu="100m",
                priority=100,
                annotations={f"{G}/name": "gang", f"{G}/min-available": "2"},
            )
        )
    world.run(3600)
    metrics.api_request("POST", "201", "127.0.0.1:6443", 0.01, 0.0)
    metrics.timed_handler("Node", lambda action, obj, old: None)("Add", {}, None)
    metrics.binding("success", 0.01, "default-scheduler")
    metrics.set_leader("koordpy", True)
    return metrics.render().decode()


@pytest.fixture(scope="module")
def scrape() -> str:
    return scrape_after_simulate()


def test_every_kube_scheduler_metric_is_exported_or_left_out_with_a_reason() -> None:
    assert KUBE_SCHEDULER_METRICS.isdisjoint(KUBE_SCHEDULER_METRICS_LEFT_OUT)
    assert set(BY_NAME) == KUBE_SCHEDULER_METRICS | set(KUBE_SCHEDULER_METRICS_LEFT_OUT)


@pytest.mark.parametrize("name", sorted(KUBE_SCHEDULER_METRICS))
def test_a_kube_scheduler_metric_koordpy_exports_has_kube_type_labels_and_buckets(
    scrape: str, name: str
) -> None:
    assert mismatches(scrape, [BY_NAME[name]]) == []


def test_no_created_series_is_exported(scrape: str) -> None:
    assert not [n for n in sample_names(scrape) if n.endswith("_created")]


def test_koordpy_own_metrics_carry_the_koordpy_prefix(scrape: str) -> None:
    kube_families = {n.removesuffix("_total") for n in BY_NAME} | set(BY_NAME)
    own = {
        n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count").removesuffix("_total")
        for n in sample_names(scrape)
    } - kube_families
    assert own and all(n.startswith("koordpy_") for n in own), sorted(own)


@pytest.mark.parametrize("name", sorted(KUBE_SCHEDULER_METRICS | set(KUBE_SCHEDULER_METRICS_LEFT_OUT)))
def test_the_deployment_guide_names_each_kube_scheduler_metric(name: str) -> None:
    assert f"`{name}`" in DEPLOY_DOC.read_text()
