"""CapacityScheduling's view of the pods nominated to nodes, as scheduler-plugins' PreFilter reads
it (pkg/capacityscheduling/capacity_scheduling.go): over the snapshot's nodes, every nominated pod
but the pod itself; of the pod's own namespace those of its priority or higher, of other
namespaces with an ElasticQuota within its min those of any priority; nothing of namespaces
without a quota or over their min."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from tests.builders import pod_dict
from tests.quota.quotas import xk8s_dict
from tests.quota.worlds import capacity_scheduling, world


def _pod(name: str, namespace: str, memory: int, priority: int) -> Pod:
    return Pod.from_dict(pod_dict(name, memory=str(memory), namespace=namespace, priority=priority))


def _world(ns2_used: int) -> Any:
    quotas = [
        xk8s_dict(ns, ns, min={"memory": "1000"}, max={"memory": "4000"}) for ns in ("ns1", "ns2", "ns4")
    ]
    placed = [pod_dict("used-2", memory=str(ns2_used), namespace="ns2", node_name="n1")] if ns2_used else []
    return world([("n1", 8), ("n2", 8)], quotas, placed)


# (nominations as (name, namespace, memory, priority, node), ns2's use, expected memory held
# in the pod's quota, expected memory held elsewhere); the asking pod is ns1/p, priority 5
CASES = [
    ("same namespace, higher priority", [("hi", "ns1", 100, 10, "n1")], 0, 100, 0),
    ("same namespace, equal priority", [("eq", "ns1", 100, 5, "n2")], 0, 100, 0),
    ("same namespace, lower priority", [("lo", "ns1", 100, 1, "n1")], 0, 0, 0),
    ("the pod itself", [("p", "ns1", 100, 5, "n1")], 0, 0, 0),
    ("other namespace within min, lower priority", [("o", "ns2", 200, 1, "n1")], 0, 0, 200),
    ("other namespace within min, higher priority", [("o", "ns2", 200, 9, "n2")], 0, 0, 200),
    ("other namespace over its min", [("o", "ns2", 200, 9, "n1")], 1500, 0, 0),
    ("namespace without a quota", [("o", "ns3", 200, 9, "n1")], 0, 0, 0),
    ("a node the snapshot lacks", [("hi", "ns1", 100, 10, "gone"), ("o", "ns2", 200, 1, "gone")], 0, 0, 0),
    (
        "a mix",
        [
            ("hi", "ns1", 100, 10, "n1"),
            ("lo", "ns1", 1, 1, "n1"),
            ("o", "ns2", 200, 1, "n2"),
            ("q", "ns4", 300, 0, "n1"),
            ("r", "ns3", 7, 9, "n2"),
        ],
        0,
        100,
        500,
    ),
]


@pytest.mark.parametrize(
    ("nominated", "ns2_used", "in_quota", "elsewhere"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_nominated_pods_counted_as_scheduler_plugins_counts_them(
    nominated: list[tuple[str, str, int, int, str]], ns2_used: int, in_quota: int, elsewhere: int
) -> None:
    cluster = _world(ns2_used)
    nominator = cluster.scheduler.nominator
    for name, namespace, memory, priority, node in nominated:
        nominator.add(_pod(name, namespace, memory, priority), node)
    plugin: Any = capacity_scheduling(cluster)
    ask = plugin._ask(_pod("p", "ns1", 10, 5))
    assert ask.nominated_in_quota.get("memory", 0) == in_quota
    assert ask.nominated_elsewhere.get("memory", 0) == elsewhere


def test_many_nominated_nodes_are_selected_by_arrays_alike() -> None:
    # beyond a few nominated nodes the nominator selects with its arrays: the same pods count
    cluster = _world(0)
    nominator = cluster.scheduler.nominator
    for i in range(40):
        node = "n1" if i % 2 else "n2"
        nominator.add(_pod(f"own-{i}", "ns1", 1, i % 10), node)
        nominator.add(_pod(f"other-{i}", "ns2", 10, i % 10), node)
        # nominated to nodes the snapshot lacks: never counted
        nominator.add(_pod(f"gone-{i}", "ns2", 100, 9), f"absent-{i}")
    plugin: Any = capacity_scheduling(cluster)
    ask = plugin._ask(_pod("p", "ns1", 10, 5))
    # own pods of priority 5 to 9, half of the 40, 1 each; every other-namespace pod, 10 each
    assert ask.nominated_in_quota.get("memory", 0) == 20
    assert ask.nominated_elsewhere.get("memory", 0) == 400
