"""Job-level preemption over the node arrays against the trial, on random small clusters.

The trial (every legal victim taken off its node, the members planned with the real filters, the
victims each plan really needs found by giving them back one by one) is the documented algorithm
as written; planned over free + freeable capacity, the same clusters must get the same victims
evicted in the same order, the same nominations and the same message when nobody is evicted.
Clusters mix PodDisruptionBudgets, ReplicaSet-owned victims (one job for several pods), priorities,
opted-out pods, taints, node selectors, members of different sizes, pods nominated elsewhere, and
gangs with a MustGather topology rule.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from koordpy.plugins.coscheduling.preemption import JobPreemption
from koordpy.simulate.memory import MemoryCluster
from tests.builders import node_dict, pod_dict
from tests.preemption.test_job_preemption import DISABLE_PREEMPTIBLE, group, member, running
from tests.preemption.test_nominated_node import BLOCK, MUST_GATHER_BLOCK, TOPOLOGY, world_of

APPS = ("a", "b", "c")


def _cluster(seed: int, topology: bool) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = [TOPOLOGY] if topology else []
    for n in range(rng.randint(3, 8)):
        name = f"n{n}"
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.1 else []
        cores = rng.choice([2, 4, 8])
        objs.append(
            node_dict(
                name,
                cpu=str(cores),
                memory=f"{rng.choice([8, 16])}Gi",
                pods=rng.choice([4, 110]),
                labels={"zone": rng.choice(["z1", "z2"]), BLOCK: f"b{n % 3}", "kubernetes.io/hostname": name},
                taints=taints,
            )
        )
        # nodes mostly full, so that the gang must preempt
        free = cores * 1000 - rng.choice([0, 0, 500, 1000])
        i = 0
        while free >= 500:
            milli = rng.choice([m for m in (500, 1000, 1500, 2000) if m <= free])
            free -= milli
            i += 1
            labels = {"app": rng.choice(APPS)}
            if rng.random() < 0.1:
                labels.update(DISABLE_PREEMPTIBLE)
            owner = (f"rs-{rng.choice(APPS)}", True) if rng.random() < 0.4 else None
            cpu = f"{rng.choice([500, 1000, 1500, 2000])}m"
            objs.append(
                running(f"{name}-p{i}", name, cpu, rng.choice([0, 1, 5, 50, 2000]), labels, owner=owner)
            )
    for app in APPS:
        if rng.random() < 0.3:
            objs.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": f"pdb-{app}", "namespace": "default"},
                    "spec": {"maxUnavailable": rng.randint(0, 1), "selector": {"matchLabels": {"app": app}}},
                }
            )
    size = rng.randint(1, 5)
    annotations = (
        {"gang.scheduling.koordinator.sh/network-topology-spec": MUST_GATHER_BLOCK} if topology else {}
    )
    objs.append(group("g", size, **annotations))
    for i in range(size):
        spec: dict[str, Any] = {}
        if rng.random() < 0.2:
            spec["nodeSelector"] = {"zone": "z1"}
        objs.append(member(f"g-{i}", "g", f"{rng.choice([500, 1000, 2000, 3000])}m", **spec))
    if rng.random() < 0.3:
        # a pending pod of higher priority than the gang, holding room where it is nominated
        nominated = pod_dict("held", cpu="1", priority=5000)
        nominated["status"] = {"nominatedNodeName": f"n{rng.randint(0, 2)}"}
        nominated["spec"]["nodeSelector"] = {"zone": "nowhere"}
        objs.append(nominated)
    return objs


def _decisions(world: MemoryCluster) -> tuple[Any, ...]:
    evictions = [(e.victim, e.node) for e in world.evictions]
    nominations = {
        key: (raw.get("status") or {}).get("nominatedNodeName")
        for key, raw in world.pods.items()
        if (raw.get("status") or {}).get("nominatedNodeName")
    }
    outcome = world.scheduler.outcomes.get("default/g-0")
    return evictions, nominations, outcome.message if outcome is not None else ""


def _run(objs: list[dict[str, Any]], arrays: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    with monkeypatch.context() as m:
        m.setattr(JobPreemption, "arrays", arrays)
        world = world_of([o for o in objs if o["kind"] != "PodDisruptionBudget"])
        for o in objs:
            if o["kind"] == "PodDisruptionBudget":
                world.scheduler.on_object("PodDisruptionBudget", "Add", o)
        world.run(1.0)
        return _decisions(world)


@pytest.fixture
def array_outcomes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether each preemption was decided over the arrays (True) or went to the trial."""
    seen: list[bool] = []
    original = JobPreemption._cheapest_by_arrays

    def spy(self: JobPreemption, *args: Any) -> Any:
        found = original(self, *args)
        seen.append(found is not None)
        return found

    monkeypatch.setattr(JobPreemption, "_cheapest_by_arrays", spy)
    yield seen


@pytest.mark.parametrize("topology", [False, True], ids=["one-by-one", "must-gather"])
@pytest.mark.parametrize("seed", range(40))
def test_arrays_evict_and_nominate_as_the_trial_does(
    seed: int, topology: bool, monkeypatch: pytest.MonkeyPatch, array_outcomes: list[bool]
) -> None:
    objs = _cluster(seed, topology)
    assert _run(objs, True, monkeypatch) == _run(objs, False, monkeypatch)


def test_most_random_clusters_are_decided_over_the_arrays(
    monkeypatch: pytest.MonkeyPatch, array_outcomes: list[bool]
) -> None:
    for seed in range(20):
        for topology in (False, True):
            _run(_cluster(seed, topology), True, monkeypatch)
    assert array_outcomes
    assert sum(array_outcomes) >= 0.8 * len(array_outcomes)


@pytest.mark.parametrize(
    ("spec", "arrays"),
    [
        pytest.param({}, True, id="resources-only"),
        pytest.param({"nodeSelector": {"zone": "z1"}}, True, id="node-selector-reads-the-node-only"),
        pytest.param(
            {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "a"}},
                    }
                ]
            },
            False,
            id="spread-constraint-goes-to-the-trial",
        ),
        pytest.param(
            {"ports": [{"containerPort": 80, "hostPort": 80}]},
            False,
            id="host-port-goes-to-the-trial",
        ),
    ],
)
def test_only_resource_bound_gangs_are_planned_over_the_arrays(
    spec: dict[str, Any], arrays: bool, monkeypatch: pytest.MonkeyPatch, array_outcomes: list[bool]
) -> None:
    objs: list[dict[str, Any]] = [
        node_dict("n1", cpu="4", labels={"zone": "z1"}),
        running("low", "n1", "4", 1, {"app": "a"}),
        group("g", 1),
    ]
    gang_member = member("g-0", "g", "2", **{k: v for k, v in spec.items() if k != "ports"})
    if "ports" in spec:
        gang_member["spec"]["containers"][0]["ports"] = spec["ports"]
    objs.append(gang_member)
    decisions = _run(objs, True, monkeypatch)
    assert decisions[0] == [("default/low", "n1")]
    assert array_outcomes == [arrays]
