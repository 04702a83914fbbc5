"""Why preemption cannot help on nodes where the preemptor's request is above allocatable.

kube-scheduler dry-runs every node whose filter status was Unschedulable (NodeResourcesFit's
Insufficient is), and on each says "No preemption victims found for incoming pod" when no pod there
may be evicted, else the first filter that fails with every lower-priority pod gone. On a node
smaller than the request the choice of victims never matters, so koordpy reads these verdicts off
the node arrays: the messages must be kube's, and equal, node for node, to the dry run's.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.status import Status
from koordpy.plugins import preemption_arrays as arrays
from koordpy.plugins import registry
from koordpy.plugins.defaultpreemption import _NO_VICTIMS, DefaultPreemption
from koordpy.plugins.disruptionbudgets import DisruptionBudgets
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import node_dict, pod_dict, settle
from tests.preemption.test_victim_arrays import _cluster

NO_VICTIMS = "No preemption victims found for incoming pod"
OPT_OUT = {"scheduling.koordinator.sh/disable-preemptible": "true"}


def _message(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], preemptor: dict[str, Any]) -> str:
    clock = VirtualClock(0.0)
    sched = Scheduler(default_configuration(), registry(), clock)
    world = MemoryCluster(sched, clock)
    for n in nodes:
        world.add_node(Node.from_dict(n))
    for p in pods:
        world.add_pod(p)
    settle(world)
    world.add_pod(preemptor)
    settle(world)
    found = sched.outcomes[f"default/{preemptor['metadata']['name']}"]
    return found.message


def _big(priority: int = 10, memory: str = "1Gi") -> dict[str, Any]:
    return pod_dict("big", cpu="9", memory=memory, priority=priority)


@pytest.mark.parametrize(
    ("nodes", "pods", "expected"),
    [
        pytest.param(
            [node_dict(f"n{i}", cpu="4") for i in range(4)],
            [
                pod_dict("low", cpu="1", priority=0, node_name="n1"),
                pod_dict("high", cpu="1", priority=20, node_name="n2"),
                pod_dict("kept", cpu="1", priority=0, node_name="n3", labels=OPT_OUT),
            ],
            "0/4 nodes are available: 4 Insufficient cpu. preemption: 0/4 nodes are available: "
            f"1 Insufficient cpu, 3 {NO_VICTIMS}.",
            id="only-a-node-with-a-lower-priority-preemptible-pod-has-victims",
        ),
        pytest.param(
            [node_dict("n0", cpu="4", memory="4Gi")],
            [pod_dict("low", cpu="1", memory="3584Mi", priority=0, node_name="n0")],
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. "
            "preemption: 0/1 nodes are available: 1 Insufficient cpu.",
            id="memory-freed-by-the-victims-is-not-reported",
        ),
        pytest.param(
            [node_dict("n0", cpu="4", memory="4Gi")],
            [
                pod_dict("high", cpu="1", memory="3584Mi", priority=20, node_name="n0"),
                pod_dict("low", cpu="1", priority=0, node_name="n0"),
            ],
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. "
            "preemption: 0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
            id="memory-held-by-a-more-important-pod-is-reported",
        ),
        pytest.param(
            [node_dict("n0", cpu="4", memory="4Gi"), node_dict("n1", cpu="4", memory="4Gi")],
            [
                pod_dict("low0", cpu="1", memory="3584Mi", priority=0, node_name="n0"),
                pod_dict("low0b", cpu="1", priority=0, node_name="n0"),
                pod_dict("high1", cpu="1", memory="3584Mi", priority=20, node_name="n1"),
                pod_dict("low1", cpu="1", priority=0, node_name="n1"),
            ],
            "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory. "
            "preemption: 0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu.",
            id="each-node-counts-the-columns-short-with-its-own-victims-gone",
        ),
        pytest.param(
            [
                node_dict("n0", cpu="4", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
                node_dict("n1", cpu="4"),
            ],
            [pod_dict("low", cpu="1", priority=0, node_name="n1")],
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {k: v}. "
            "preemption: 0/2 nodes are available: 1 Insufficient cpu, "
            "1 Preemption is not helpful for scheduling.",
            id="an-unresolvable-node-is-not-helpful-whatever-it-holds",
        ),
        pytest.param(
            [node_dict(f"n{i}", cpu="4") for i in range(3)],
            [],
            f"0/3 nodes are available: 3 Insufficient cpu. "
            f"preemption: 0/3 nodes are available: 3 {NO_VICTIMS}.",
            id="empty-nodes-have-no-victims",
        ),
    ],
)
def test_message_when_the_request_is_above_every_node(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], expected: str
) -> None:
    assert _message(nodes, pods, _big()) == expected


def test_a_preemptor_of_lowest_priority_finds_no_victims_anywhere() -> None:
    nodes = [node_dict(f"n{i}", cpu="4") for i in range(2)]
    pods = [pod_dict(f"p{i}", cpu="1", priority=0, node_name=f"n{i}") for i in range(2)]
    assert _message(nodes, pods, _big(priority=0)) == (
        f"0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 {NO_VICTIMS}."
    )


def _histogram(statuses: list[tuple[Status, int]]) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for st, count in statuses:
        out[(st.code, st.reasons, st.plugin)] += count
    return out


@pytest.mark.parametrize("seed", range(60))
def test_verdicts_read_off_the_arrays_equal_the_dry_run_on_every_node(seed: int) -> None:
    h, _, pdbs = _cluster(seed)
    budgets_plugin = DisruptionBudgets.shared(h.handle)
    for obj in pdbs:
        budgets_plugin.on_pdb("Add", obj)
    rng = random.Random(seed)
    spec: dict[str, Any] = {"nodeSelector": {"zone": "z1"}} if rng.random() < 0.3 else {}
    pod = Pod.from_dict(
        pod_dict(
            "preemptor",
            cpu="9",
            memory=f"{rng.choice([512, 4096, 12288])}Mi",
            priority=rng.choice([1, 5, 10, 25]),
            spec=spec,
        )
    )
    plugin = h.profile.plugin("DefaultPreemption")
    assert isinstance(plugin, DefaultPreemption)
    state = CycleState()
    _, status = h.profile.run_pre_filter(state, pod)
    assert status is None
    plan = arrays.array_plan(h.handle, state, pod)
    rows = h.rows()
    budgets = budgets_plugin.budgets(h.snapshot)
    told, left = arrays.hopeless_verdicts(h.handle, plan, state, pod, rows, _NO_VICTIMS)

    def dry_run(some: np.ndarray) -> list[tuple[Status, int]]:
        statuses = (plugin._select_victims(state, pod, r, budgets, False)[2] for r in some.tolist())
        return [(st, 1) for st in statuses if st is not None]

    assert _histogram(told) + _histogram(dry_run(left)) == _histogram(dry_run(rows))
    assert np.isin(left, rows).all()


def test_evictable_pods_per_node_follow_adds_removes_and_trials() -> None:
    h, _, _ = _cluster(3)
    snap = h.snapshot

    def recount() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for row in h.rows().tolist():
            for p in snap.pods_on(row):
                if p.labels.get("scheduling.koordinator.sh/disable-preemptible") != "true":
                    out.setdefault(p.priority, [0] * snap.capacity)[row] += 1
        return out

    def held() -> dict[int, list[int]]:
        return {prio: list(counts) for prio, counts in snap.preemptible_counts.items() if any(counts)}

    assert held() == recount()
    row = int(h.rows()[0])
    placed = list(snap.pods_on(row))
    with snap.trial() as trial:
        for p in placed:
            trial.remove_pod(p, row)
        assert held() == recount()
    assert held() == recount()
