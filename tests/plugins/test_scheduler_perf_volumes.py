"""scheduler_perf's volumes/ workloads (benchmarks/bench_volumes.py) at their smallest upstream size
(the `5Nodes` cases: 5 nodes, 5 init pods, 10 measured; PreemptionPVs: 5 nodes, 20 init pods, 5
measured), held to what scheduler_perf itself checks: every pod of each createPods op is scheduled.

What the workloads mean for the outcome:

- every claim is created bound to its volume (scheduler_perf runs no PV controller), so no pod
  asks the world to bind a volume: each Bind carries no volume bindings;
- no volume has node affinity, so no pod is held to a node by its volume: any node will do;
- SchedulingMigratedInTreePVs and SchedulingCSIPVs: 39 attachments a node, far more than 3 pods a
  node use, so the volume limits hold nobody back;
- PreemptionPVs: 4 low-priority pods of 900m fill each 4-CPU node to 3.6 CPUs, so each
  high-priority pod of 3 CPUs evicts 3 of them on a node of its own (each node keeps one
  low-priority pod and takes one high-priority one: 3.9 CPUs).
"""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.bench_volumes import WORKLOADS, measure
from koordpy.framework.effects import Bind, Effect
from koordpy.simulate.memory import MemoryCluster

SMALL = {
    "SchedulingSecrets": (5, 5, 10),
    "SchedulingInTreePVs": (5, 5, 10),
    "SchedulingMigratedInTreePVs": (5, 5, 10),
    "SchedulingCSIPVs": (5, 5, 10),
    "PreemptionPVs": (5, 20, 5),
}


def test_every_volumes_workload_is_covered() -> None:
    assert set(SMALL) == set(WORKLOADS)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_pod_is_scheduled(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    binds: list[Bind] = []
    apply = MemoryCluster.apply

    def recording(self: MemoryCluster, effects: list[Effect]) -> None:
        binds.extend(e for e in effects if isinstance(e, Bind))
        apply(self, effects)

    monkeypatch.setattr(MemoryCluster, "apply", recording)
    w = WORKLOADS[name]
    nodes, init_pods, measure_pods = SMALL[name]
    world, keys, figures = measure(w, nodes, init_pods, measure_pods)

    assert figures.bound == measure_pods
    assert all(world.views[k].node_name for k in keys)
    if w.preemption:
        # one preemptor a node, each evicting 3 of its 4 low-priority pods
        assert figures.evicted == 3 * measure_pods
        assert sorted(Counter(world.views[k].node_name for k in keys).values()) == [1] * nodes
        assert figures.init_bound == init_pods
    else:
        # nothing was evicted: the init pods stay where they were scheduled
        assert figures.evicted == 0
        assert figures.init_bound == init_pods
    # the claims were bound before the pods came: nothing for the world to bind
    assert binds
    assert all(b.volumes is None for b in binds)


@pytest.mark.parametrize("name", ["SchedulingMigratedInTreePVs", "SchedulingCSIPVs"])
def test_the_attach_limit_holds_on_nodes_reporting_it(name: str) -> None:
    """Not a check of scheduler_perf's, but what its CSINodes say: 39 attachments a node. On one
    node, the 40th pod with a volume of its own stays pending (the init pod and measured pod i
    share an EBS volume ID, `vol-<i>`, and an attachment with it, so the in-tree run has no init
    pods here)."""
    world, keys, figures = measure(WORKLOADS[name], 1, 0, 40)
    assert figures.bound == 39
    assert sum(1 for k in keys if not world.views[k].node_name) == 1
