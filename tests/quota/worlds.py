"""Small in-memory clusters with quotas, run by the real scheduler on a virtual clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordpy.api.elasticquota import LABEL_QUOTA_NAME
from koordpy.api.node import Node
from koordpy.config.models import SchedulerConfiguration, default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.plugins.elasticquota import KOORDINATOR_BOOK, NAMESPACE_BOOK, CapacityScheduling, ElasticQuota
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import node_dict, pod_dict

GANG = "gang.scheduling.koordinator.sh"


def quota_pod(
    name: str,
    cpu: str | int,
    quota: str | None = None,
    *,
    namespace: str = "default",
    node: str = "",
    priority: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    memory: str | None = None,
) -> dict[str, Any]:
    """A pod asking for `cpu` cores, in the Koordinator quota `quota` (by label) when given."""
    all_labels = dict(labels or {})
    if quota is not None:
        all_labels[LABEL_QUOTA_NAME] = quota
    return pod_dict(
        name,
        cpu=str(cpu),
        memory=memory,
        namespace=namespace,
        labels=all_labels,
        node_name=node,
        priority=priority,
        annotations=annotations,
    )


def gang_annotations(gang: str, members: int, mode: str | None = None) -> dict[str, str]:
    out = {f"{GANG}/name": gang, f"{GANG}/min-available": str(members)}
    if mode is not None:
        out[f"{GANG}/mode"] = mode
    return out


def world(
    nodes: Sequence[tuple[str, int] | tuple[str, int, str]],
    quotas: Sequence[Mapping[str, Any]] = (),
    pods: Sequence[Mapping[str, Any]] = (),
    config: SchedulerConfiguration | None = None,
) -> MemoryCluster:
    """Nodes (name, cpu cores[, memory], 64Gi unless given), the quotas as API objects, then the
    pods, delivered as an informer would; nothing is scheduled yet."""
    clock = VirtualClock(0.0)
    scheduler = Scheduler(config or default_configuration(), registry(), clock)
    cluster = MemoryCluster(scheduler, clock)
    for name, cpu, *memory in nodes:
        cluster.add_node(
            Node.from_dict(node_dict(name, cpu=str(cpu), memory=memory[0] if memory else "64Gi"))
        )
    for quota in quotas:
        scheduler.on_object("ElasticQuota", "Add", quota)
    with scheduler.bulk():
        for pod in pods:
            cluster.add_pod(pod)
    return cluster


def run(cluster: MemoryCluster, seconds: float = 3600.0) -> MemoryCluster:
    cluster.run(seconds)
    return cluster


def placed(cluster: MemoryCluster) -> dict[str, str]:
    """pod name -> node of every pod that is bound now (evicted pods are gone)."""
    return {
        pod.name: pod.node_name
        for key, pod in cluster.views.items()
        if pod.node_name and key not in cluster.deleted
    }


def evicted(cluster: MemoryCluster) -> list[str]:
    return sorted(e.victim.split("/", 1)[1] for e in cluster.evictions)


def verdict(cluster: MemoryCluster, name: str, namespace: str = "default") -> tuple[str, str]:
    """(reason, message) of a pending pod's PodScheduled condition as the scheduler has it."""
    outcome = cluster.scheduler.outcomes.get(f"{namespace}/{name}")
    assert outcome is not None, f"{namespace}/{name} has no verdict"
    return outcome.reason, outcome.message


def elastic_quota(cluster: MemoryCluster, profile: str = "default-scheduler") -> ElasticQuota:
    plugin = cluster.scheduler.profiles[profile].plugins["ElasticQuota"]
    assert isinstance(plugin, ElasticQuota)
    return plugin


def capacity_scheduling(cluster: MemoryCluster, profile: str = "default-scheduler") -> CapacityScheduling:
    plugin = cluster.scheduler.profiles[profile].plugins["CapacityScheduling"]
    assert isinstance(plugin, CapacityScheduling)
    return plugin


def summary(cluster: MemoryCluster) -> dict[str, dict[str, Any]]:
    """name -> the report row of every quota the scheduler's books hold."""
    rows: dict[str, dict[str, Any]] = {}
    shared = cluster.scheduler.shared
    for book in (shared.get(KOORDINATOR_BOOK), shared.get(NAMESPACE_BOOK)):
        if book is not None:
            rows.update({row["name"]: row for row in book.summary()})
    return rows
