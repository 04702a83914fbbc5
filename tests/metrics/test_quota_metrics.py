"""Quota metrics read off the scheduler's quota books when scraped: Koordinator's
scheduler_elastic_quota_status (pkg/scheduler/plugins/elasticquota/metrics.go: labels name,
resource, tree, is_parent, parent, field; cpu in millicores) for its quotas, koordpy's own for
scheduler-plugins' quotas, and the pending pods of each."""

from __future__ import annotations

import pytest

from koordpy.api.node import Node
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import node_dict
from tests.metrics.compare import families
from tests.quota.quotas import koord_dict, xk8s_dict
from tests.quota.worlds import quota_pod

ROOT = "koordinator-root-quota"


def scraped_cluster() -> SchedulerMetrics:
    """Two 4-cpu nodes; team-a (min 2, max 8 cpu) holds all 8 cores while team-b (min 6) has three
    2-cpu pods waiting; a scheduler-plugins quota in namespace `ns` with one pod bound on a 1-cpu
    node of its own, one not. The `ns` pods are in Koordinator's default quota, whose use comes off
    what the tree shares: the small node keeps the tree's total at 8 cores."""
    metrics = SchedulerMetrics()
    clock = VirtualClock(0.0)
    scheduler = Scheduler(default_configuration(), registry(), clock, observer=metrics)
    metrics.track_scheduler(scheduler)
    cluster = MemoryCluster(scheduler, clock)
    for name, cpu in (("n1", "4"), ("n2", "4"), ("n3", "1")):
        cluster.add_node(Node.from_dict(node_dict(name, cpu=cpu, memory="64Gi")))
    for quota in (
        koord_dict("team-a", min={"cpu": 2}, max={"cpu": 8}),
        koord_dict("team-b", min={"cpu": 6}, max={"cpu": 8}),
        xk8s_dict("eq", namespace="ns", min={"cpu": 1}, max={"cpu": 4, "memory": "8Gi"}),
    ):
        scheduler.on_object("ElasticQuota", "Add", quota)
    with scheduler.bulk():
        for i in range(4):
            cluster.add_pod(quota_pod(f"a-{i}", 2, "team-a", node=f"n{1 + i // 2}"))
        for i in range(3):
            cluster.add_pod(quota_pod(f"b-{i}", 2, "team-b"))
        cluster.add_pod(quota_pod("ns-bound", 1, namespace="ns", node="n3"))
        cluster.add_pod(quota_pod("ns-pending", 1, namespace="ns"))
    return metrics


@pytest.fixture(scope="module")
def metrics() -> SchedulerMetrics:
    return scraped_cluster()


def value(metrics: SchedulerMetrics, metric: str, labels: dict[str, str]) -> float | None:
    return metrics.registry.get_sample_value(metric, labels)


def koordinator_labels(name: str, field: str, resource: str = "cpu") -> dict[str, str]:
    return {
        "name": name,
        "resource": resource,
        "tree": "",
        "is_parent": "false",
        "parent": ROOT,
        "field": field,
    }


# (quota, field, cores) worked from Koordinator's runtime split: team-b asks for its min, so
# team-a's runtime falls to its own min
@pytest.mark.parametrize(
    ("quota", "field", "cores"),
    [
        ("team-a", "min", 2),
        ("team-a", "max", 8),
        ("team-a", "used", 8),
        ("team-a", "request", 8),
        ("team-a", "runtime", 2),
        ("team-b", "min", 6),
        ("team-b", "used", 0),
        ("team-b", "request", 6),
        ("team-b", "runtime", 6),
    ],
)
def test_koordinator_quotas_have_koordinators_metric(
    metrics: SchedulerMetrics, quota: str, field: str, cores: int
) -> None:
    got = value(metrics, "scheduler_elastic_quota_status", koordinator_labels(quota, field))
    assert got == cores * 1000


def test_a_resource_the_quota_does_not_manage_has_no_series(metrics: SchedulerMetrics) -> None:
    assert (
        value(metrics, "scheduler_elastic_quota_status", koordinator_labels("team-a", "used", "memory"))
        is None
    )


@pytest.mark.parametrize(
    ("field", "resource", "amount"),
    [("min", "cpu", 1000), ("max", "cpu", 4000), ("max", "memory", 8 << 30), ("used", "cpu", 1000)],
)
def test_scheduler_plugins_quotas_have_koordpys_metric(
    metrics: SchedulerMetrics, field: str, resource: str, amount: int
) -> None:
    labels = {"namespace": "ns", "name": "eq", "resource": resource, "field": field}
    assert value(metrics, "koordpy_capacity_quota_status", labels) == amount


@pytest.mark.parametrize(
    ("api_group", "namespace", "name", "pending"),
    [
        ("scheduling.sigs.k8s.io", "quotas", "team-a", 0),
        ("scheduling.sigs.k8s.io", "quotas", "team-b", 3),
        ("scheduling.x-k8s.io", "ns", "eq", 1),
    ],
)
def test_pending_pods_are_counted_per_quota(
    metrics: SchedulerMetrics, api_group: str, namespace: str, name: str, pending: int
) -> None:
    labels = {"api_group": api_group, "namespace": namespace, "name": name}
    assert value(metrics, "koordpy_elastic_quota_pending_pods", labels) == pending


def test_without_quotas_the_families_are_there_and_empty() -> None:
    metrics = SchedulerMetrics()
    scheduler = Scheduler(default_configuration(), registry(), VirtualClock(0.0), observer=metrics)
    metrics.track_scheduler(scheduler)
    found = families(metrics.render().decode())
    for name in (
        "scheduler_elastic_quota_status",
        "koordpy_capacity_quota_status",
        "koordpy_elastic_quota_pending_pods",
    ):
        assert name in found and found[name].samples == []
