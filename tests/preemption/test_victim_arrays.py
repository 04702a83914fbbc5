"""The array dry run of DefaultPreemption against the trial, node by node, on random small clusters.

The trial (every lower-priority pod taken off the node in a trial, the filters run, the victims
given back most important first, PDB-breaking ones before the others) is kube-scheduler's
SelectVictimsOnNode as written; the array path must give every node the same victims, in the same
order, the same PDB count, and the same status when the node cannot be a candidate. Nominated pods
and the filters that read only the node object (taints, node affinity) take part, as do pods
whose request is above allocatable.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.plugins import preemption_arrays as arrays
from koordpy.plugins.defaultpreemption import _NO_VICTIMS, DefaultPreemption, start_time
from koordpy.plugins.disruptionbudgets import DisruptionBudgets
from tests.builders import Harness, node_dict, pod_dict

PLUGINS = [
    "NodeUnschedulable",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "DefaultPreemption",
]
APPS = ("a", "b", "c")


def _cluster(seed: int) -> tuple[Harness, list[Pod], list[dict[str, Any]]]:
    rng = random.Random(seed)
    nodes = []
    pods: list[dict[str, Any]] = []
    for n in range(rng.randint(2, 7)):
        name = f"n{n}"
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.15 else []
        nodes.append(
            node_dict(
                name,
                cpu=str(rng.choice([2, 4, 8])),
                memory=f"{rng.choice([4, 8, 16])}Gi",
                pods=rng.choice([3, 5, 110]),
                labels={"zone": rng.choice(["z1", "z2"])},
                taints=taints,
            )
        )
        for i in range(rng.randint(0, 6)):
            labels = {"app": rng.choice(APPS)}
            if rng.random() < 0.1:
                labels["scheduling.koordinator.sh/disable-preemptible"] = "true"
            obj = pod_dict(
                f"{name}-p{i}",
                cpu=f"{rng.choice([250, 500, 1000, 1500])}m",
                memory=f"{rng.choice([256, 512, 1024, 2048])}Mi",
                priority=rng.choice([0, 1, 5, 10, 20]),
                node_name=name,
                labels=labels,
            )
            obj["status"] = {"phase": "Running", "startTime": f"2026-01-01T00:00:{rng.randint(0, 5):02d}Z"}
            pods.append(obj)
    pdbs = []
    for app in APPS:
        if rng.random() < 0.4:
            pdbs.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": f"pdb-{app}", "namespace": "default"},
                    "spec": {"selector": {"matchLabels": {"app": app}}},
                    "status": {"disruptionsAllowed": rng.randint(0, 2)},
                }
            )
    h = Harness(nodes, pods, plugins=PLUGINS)
    nominated = []
    for i in range(rng.randint(0, 3)):
        pod = Pod.from_dict(
            pod_dict(
                f"nominated-{i}",
                cpu=f"{rng.choice([500, 1000])}m",
                memory="512Mi",
                priority=rng.choice([5, 15, 30]),
            )
        )
        h.handle.nominator.add(pod, f"n{rng.randrange(len(nodes))}")
        nominated.append(pod)
    return h, nominated, pdbs


def _preemptor(seed: int) -> Pod:
    rng = random.Random(seed * 7919 + 1)
    spec: dict[str, Any] = {}
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"zone": "z1"}
    return Pod.from_dict(
        pod_dict(
            "preemptor",
            cpu=f"{rng.choice([500, 1000, 2000, 3000, 9000])}m",
            memory=f"{rng.choice([512, 1024, 4096])}Mi",
            priority=rng.choice([5, 10, 15, 25]),
            spec=spec,
        )
    )


def _outcome(victims: list[Pod], violations: int, status: Any) -> tuple[Any, ...]:
    st = None if status is None else (status.code, status.reasons, status.plugin)
    return ([v.key for v in victims], violations, st)


@pytest.mark.parametrize("seed", range(60))
def test_array_dry_run_matches_the_trial_on_every_node(seed: int) -> None:
    h, _, pdbs = _cluster(seed)
    budgets_plugin = DisruptionBudgets.shared(h.handle)
    for obj in pdbs:
        budgets_plugin.on_pdb("Add", obj)
    pod = _preemptor(seed)
    plugin = h.profile.plugin("DefaultPreemption")
    assert isinstance(plugin, DefaultPreemption)
    state = CycleState()
    _, status = h.profile.run_pre_filter(state, pod)
    assert status is None
    plan = arrays.array_plan(h.handle, state, pod)
    assert plan is not None
    rows = h.rows()
    budgets = budgets_plugin.budgets(h.snapshot)
    got = arrays.dry_run_rows(
        h.handle,
        plan,
        state,
        pod,
        rows,
        budgets,
        lambda row: plugin._potential(pod, row, False),
        start_time,
        _NO_VICTIMS,
    )
    for row, outcome in zip(rows.tolist(), got, strict=True):
        assert outcome is not None
        expected = plugin._select_victims(state, pod, row, budgets, False)
        assert _outcome(outcome.victims, outcome.violations, outcome.status) == _outcome(*expected), (
            h.snapshot.node_name(row)
        )


@pytest.mark.parametrize(
    ("spec", "victim_spec", "uses_arrays"),
    [
        pytest.param({}, {}, True, id="resources-only-on-arrays"),
        pytest.param(
            {},
            {"ports": [{"containerPort": 80, "hostPort": 8080}]},
            True,
            id="victim-port-without-nodeports-running",
        ),
        pytest.param(
            {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
                        ]
                    }
                }
            },
            {},
            False,
            id="preemptor-with-pod-anti-affinity-takes-the-trial",
        ),
    ],
)
def test_which_preemptors_the_arrays_take(
    spec: dict[str, Any], victim_spec: dict[str, Any], uses_arrays: bool
) -> None:
    victim = pod_dict("v", cpu="2", priority=0, node_name="n1", labels={"app": "a"})
    victim["spec"]["containers"][0].update(victim_spec)
    h = Harness([node_dict("n1", cpu="2")], [victim], plugins=[*PLUGINS, "InterPodAffinity"])
    pod = Pod.from_dict(pod_dict("p", cpu="2", priority=10, spec=spec))
    state = CycleState()
    h.profile.run_pre_filter(state, pod)
    assert (arrays.array_plan(h.handle, state, pod) is not None) is uses_arrays


def test_victim_with_host_port_goes_to_the_trial_when_the_preemptor_asks_for_ports() -> None:
    victim = pod_dict("v", cpu="1", priority=0, node_name="n1")
    victim["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    h = Harness(
        [node_dict("n1", cpu="2")],
        [victim, pod_dict("w", cpu="1", priority=0, node_name="n1")],
        plugins=PLUGINS,
    )
    spec = {
        "containers": [
            {
                "name": "main",
                "image": "x",
                "resources": {"requests": {"cpu": "1"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
            }
        ],
        "priority": 10,
    }
    pod = Pod.from_dict(pod_dict("p", spec=spec))
    state = CycleState()
    h.profile.run_pre_filter(state, pod)
    plan = arrays.array_plan(h.handle, state, pod)
    assert plan is not None and plan.watch_ports
    plugin = h.profile.plugin("DefaultPreemption")
    assert isinstance(plugin, DefaultPreemption)
    got = arrays.dry_run_rows(
        h.handle,
        plan,
        state,
        pod,
        h.rows(),
        [],
        lambda row: plugin._potential(pod, row, False),
        start_time,
        _NO_VICTIMS,
    )
    assert got == [None]


def test_search_starts_where_the_last_one_stopped() -> None:
    # 4 nodes, each with one low-priority pod; one candidate is enough, so each search stops at
    # its first candidate, and the next starts on the node after it (kube's candidate offset)
    nodes = [node_dict(f"n{i}", cpu="1") for i in range(4)]
    pods = [pod_dict(f"low-{i}", cpu="1", priority=0, node_name=f"n{i}") for i in range(4)]
    h = Harness(
        nodes,
        pods,
        plugins=PLUGINS,
        args={"DefaultPreemption": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}},
    )
    plugin = h.profile.plugin("DefaultPreemption")
    assert isinstance(plugin, DefaultPreemption)
    chosen = []
    for i in range(5):
        pod = Pod.from_dict(pod_dict(f"p{i}", cpu="1", priority=10))
        state = CycleState()
        h.profile.run_pre_filter(state, pod)
        candidates, _ = plugin._dry_run(state, pod, h.rows())
        chosen.append(candidates[0].node_name)
    assert chosen == ["n0", "n1", "n2", "n3", "n0"]


def test_nominated_checks_in_one_pass_match_one_node_at_a_time() -> None:
    nodes = [node_dict(f"n{i}", cpu="2", pods=3) for i in range(4)]
    pods = [pod_dict(f"on-{i}", cpu="1", priority=0, node_name=f"n{i}") for i in range(4)]
    h = Harness(nodes, pods, plugins=PLUGINS)
    for i, cpu in enumerate(["1", "500m", "2", "100m"]):
        h.handle.nominator.add(Pod.from_dict(pod_dict(f"nom-{i}", cpu=cpu, priority=10)), f"n{i}")
    pod = Pod.from_dict(pod_dict("p", cpu="600m", priority=5))
    state = CycleState()
    h.profile.run_pre_filter(state, pod)
    feasible = h.profile.run_filter_with_nominated(state, pod, h.rows(), None)
    one_by_one = [
        row
        for row in h.rows().tolist()
        if h.profile.filter_one_with_pods(
            state, pod, row, h.handle.nominator.pods_on(h.snapshot.node_name(row))
        )
        is None
    ]
    assert feasible.tolist() == one_by_one
    # with the room nominated there held: n0 1 + 1 + 0.6, n1 1 + 0.5 + 0.6, n2 1 + 2 + 0.6 CPUs
    # are above 2; n3 1 + 0.1 + 0.6 fits
    assert [h.snapshot.node_name(r) for r in feasible.tolist()] == ["n3"]
