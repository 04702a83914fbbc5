"""DefaultPreemption: which pods a preemptor evicts and where, the messages when it cannot, and the
whole cycle in the simulator (eviction, grace period, binding, nominations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from koordpy.api.node import Node
from koordpy.api.pdb import PodDisruptionBudget
from koordpy.api.pod import Pod
from koordpy.config.errors import ConfigError
from koordpy.config.models import default_configuration
from koordpy.framework.diagnosis import Diagnosis, fit_error_message
from koordpy.framework.effects import Evict, Nominate
from koordpy.framework.interfaces import PostFilterResult
from koordpy.framework.status import Code
from koordpy.plugins.disruptionbudgets import DisruptionBudgets
from koordpy.simulate.loader import Scenario
from koordpy.simulate.runner import simulate
from tests.builders import Harness, node_dict, pod_dict

DP = "DefaultPreemption"
PLUGINS = ["NodeAffinity", "NodeResourcesFit", DP]
PREEMPTION_MESSAGE = (
    "{scheduler}: preempting to accommodate higher priority pods, "
    "preemptor: default/{pod}, triggerPod: default/{pod}"
)


def placed(
    name: str, node: str, cpu: str, priority: int, labels: dict[str, str] | None = None, **status: Any
) -> dict[str, Any]:
    """A running pod already bound to `node`."""
    obj = pod_dict(name, cpu=cpu, priority=priority, node_name=node, labels=labels)
    obj["status"] = {"phase": "Running", **status}
    return obj


def incoming(name: str, cpu: str, priority: int, **spec: Any) -> Pod:
    return Pod.from_dict(pod_dict(name, cpu=cpu, priority=priority, spec=spec))


def harness(
    nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], args: dict[str, Any] | None = None
) -> Harness:
    return Harness(list(nodes), list(pods), plugins=PLUGINS, args={DP: args} if args is not None else None)


def preempt(h: Harness, pod: Pod) -> tuple[PostFilterResult, str]:
    """One failed scheduling cycle for `pod`: filters, then PostFilter; the PostFilter result and
    the pod's message as the scheduler renders it."""
    state, allowed, status = h.pre_filter(pod)
    diagnosis = Diagnosis()
    if status is not None:
        diagnosis.pre_filter_msg = status.message
        diagnosis.pre_filter_status = status
    else:
        assert allowed is None
        feasible = h.profile.run_filter_with_nominated(state, pod, h.rows(), diagnosis)
        assert feasible.size == 0, "the pod must fit nowhere for preemption to run"
    result = h.profile.run_post_filter(state, pod, diagnosis)
    if result.status.message and not result.status.is_success:
        diagnosis.post_filter_msg = result.status.message
    return result, fit_error_message(h.snapshot.node_count, diagnosis)


def evicted(h: Harness) -> list[tuple[str, str]]:
    return [(e.victim.name, e.node_name) for e in h.handle.outbox if isinstance(e, Evict)]


def pdb(
    name: str, selector: dict[str, str], status: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }
    if status is not None:
        obj["status"] = status
    return obj


def zone_affinity(zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


# --------------------------------------------------------------------------------------- victims
CHOICE_CASES = [
    # (nodes, placed pods, incoming (cpu, priority), PDBs, args, expected victims [(pod, node)])
    pytest.param(
        [node_dict("n1", cpu="4")],
        [placed("low", "n1", "2", 1), placed("mid", "n1", "2", 2)],
        ("2", 10),
        [],
        None,
        # both removed, then "mid" (more important) is added back and still leaves room; "low" is not
        [("low", "n1")],
        id="evicts-only-the-lowest-priority-pod-that-frees-enough-room",
    ),
    pytest.param(
        [node_dict("n1", cpu="4")],
        [placed("small-a", "n1", "1", 1), placed("small-b", "n1", "1", 1), placed("big", "n1", "2", 1)],
        ("2", 10),
        [],
        None,
        # reprieve order is priority then start (here: placement order): small-a, small-b fit back,
        # big does not
        [("big", "n1")],
        id="reprieves-in-importance-order",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [placed("a", "n1", "1", 1), placed("b", "n1", "1", 1), placed("c", "n2", "2", 1)],
        ("2", 10),
        [],
        None,
        # n1 needs two victims, n2 one of the same priority
        [("c", "n2")],
        id="fewest-victims-across-nodes",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [placed("five", "n1", "2", 5), placed("one", "n2", "2", 1)],
        ("2", 10),
        [],
        None,
        [("one", "n2")],
        id="lowest-highest-victim-priority",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [
            placed("old", "n1", "2", 1, startTime="2024-01-01T00:00:00Z"),
            placed("young", "n2", "2", 1, startTime="2024-06-01T00:00:00Z"),
        ],
        ("2", 10),
        [],
        None,
        # everything else equal: the victim that has run the shortest goes
        [("young", "n2")],
        id="latest-started-victim-on-a-tie",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [placed("a", "n1", "2", 1), placed("b", "n2", "2", 1)],
        ("2", 10),
        [],
        None,
        [("a", "n1")],
        id="first-node-on-a-full-tie",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [placed("guarded", "n1", "2", 1, labels={"app": "db"}), placed("free", "n2", "2", 1)],
        ("2", 10),
        [pdb("db", {"app": "db"}, minAvailable=1)],
        None,
        # one healthy pod, one must stay available: evicting it breaks the PDB
        [("free", "n2")],
        id="pdb-protected-pod-spared-when-another-choice-exists",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [placed("guarded", "n1", "2", 1, labels={"app": "db"}), placed("free", "n2", "5", 5)],
        ("2", 10),
        [pdb("db", {"app": "db"}, minAvailable=1)],
        None,
        # "free" has the higher priority, but fewer PDB violations comes first
        [("free", "n2")],
        id="pdb-violations-weigh-before-priority",
    ),
    pytest.param(
        [node_dict("n1", cpu="2")],
        [placed("guarded", "n1", "2", 1, labels={"app": "db"})],
        ("2", 10),
        [pdb("db", {"app": "db"}, minAvailable=1)],
        None,
        # a PDB never blocks preemption outright
        [("guarded", "n1")],
        id="pdb-violated-when-no-other-choice",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [placed("guarded", "n1", "2", 1, labels={"app": "db"}), placed("free", "n2", "2", 1)],
        ("2", 10),
        [pdb("db", {"app": "db"}, status={"disruptionsAllowed": 1}, minAvailable=1)],
        None,
        # the controller's status says one disruption is allowed: no violation, first node wins
        [("guarded", "n1")],
        id="pdb-status-disruptions-allowed-is-used",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [
            placed("pinned", "n1", "2", 1, labels={"scheduling.koordinator.sh/disable-preemptible": "true"}),
            placed("other", "n2", "2", 5),
        ],
        ("2", 10),
        [],
        None,
        [("other", "n2")],
        id="disable-preemptible-label-is-never-a-victim",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [
            placed("quota", "n1", "2", 1, labels={"quota.scheduling.koordinator.sh/preemptible": "false"}),
            placed("other", "n2", "2", 5),
        ],
        ("2", 10),
        [],
        None,
        [("other", "n2")],
        id="quota-preemptible-false-is-never-a-victim",
    ),
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [placed("five", "n1", "2", 5), placed("one", "n2", "2", 1)],
        ("2", 10),
        [],
        {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1},
        # one candidate is enough: the dry run stops at the first node
        [("five", "n1")],
        id="dry-run-stops-after-min-candidates",
    ),
]


@pytest.mark.parametrize(("nodes", "pods", "pod", "pdbs", "args", "victims"), CHOICE_CASES)
def test_victims_and_node(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    pod: tuple[str, int],
    pdbs: list[dict[str, Any]],
    args: dict[str, Any] | None,
    victims: list[tuple[str, str]],
) -> None:
    h = harness(nodes, pods, args)
    for obj in pdbs:
        DisruptionBudgets.shared(h.handle).on_pdb("Add", obj)
    result, _ = preempt(h, incoming("p", *pod))
    assert result.status.code == Code.SUCCESS
    assert result.nominated_node == victims[0][1]
    assert evicted(h) == victims
    evict = next(e for e in h.handle.outbox if isinstance(e, Evict))
    assert (evict.preemptor, evict.trigger_pod) == ("default/p", "default/p")
    assert evict.message == PREEMPTION_MESSAGE.format(scheduler="test-scheduler", pod="p")


def test_node_left_exactly_as_it_was() -> None:
    pods = [placed("a", "n1", "1", 1), placed("b", "n1", "1", 3), placed("c", "n1", "1", 2)]
    h = harness([node_dict("n1", cpu="3")], pods)
    snap = h.snapshot
    row = snap.row_of["n1"]
    requested = snap.requested.copy()
    order = list(snap.info(row).pods)
    preempt(h, incoming("p", "2", 10))
    assert np.array_equal(snap.requested, requested)
    assert list(snap.info(row).pods) == order


# --------------------------------------------------------------------------------------- failures
FAILURE_CASES = [
    # (nodes, placed pods, incoming pod, pod's final message)
    pytest.param(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2"), node_dict("n3", cpu="2")],
        [placed("a", "n1", "2", 10), placed("b", "n2", "2", 20), placed("c", "n3", "2", 10)],
        incoming("p", "2", 10),
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
        id="no-victims-of-equal-or-higher-priority",
    ),
    pytest.param(
        [node_dict("n1", cpu="2")],
        [placed("a", "n1", "2", 1)],
        incoming("p", "2", 10, preemptionPolicy="Never"),
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never.",
        id="preemption-policy-never",
    ),
    pytest.param(
        [node_dict("n1", cpu="2", labels={"zone": "a"}), node_dict("n2", cpu="2", labels={"zone": "b"})],
        [placed("low", "n1", "2", 1), placed("high", "n2", "2", 100)],
        incoming("p", "2", 10, affinity=zone_affinity("b")),
        # n1 (with the only possible victim) fails NodeAffinity: no eviction can help there
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.",
        id="node-failing-node-affinity-is-never-a-candidate",
    ),
    pytest.param(
        [node_dict("n1", cpu="2", labels={"zone": "a"})],
        [placed("low", "n1", "2", 1)],
        incoming("p", "2", 10, affinity=zone_affinity("b")),
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        id="preemption-not-helpful-anywhere",
    ),
    pytest.param(
        [node_dict("n1", cpu="2")],
        [placed("high", "n1", "1500m", 100), placed("low", "n1", "500m", 1)],
        incoming("p", "1", 10),
        # without "low" only 500m is free: the node's own filter failure is the answer
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 Insufficient cpu.",
        id="evicting-every-lower-priority-pod-is-not-enough",
    ),
]


@pytest.mark.parametrize(("nodes", "pods", "pod", "message"), FAILURE_CASES)
def test_failure_message(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], pod: Pod, message: str
) -> None:
    h = harness(nodes, pods)
    result, text = preempt(h, pod)
    assert text == message
    assert result.status.code == Code.UNSCHEDULABLE
    # a pod that may not preempt keeps its nomination; one that found no candidate loses it
    assert result.nominated_node == (None if "not eligible" in message else "")
    assert evicted(h) == []


# --------------------------------------------------------------------------------------- nominations
def terminating_victim(name: str, node: str, cpu: str, priority: int) -> dict[str, Any]:
    obj = placed(
        name,
        node,
        cpu,
        priority,
        conditions=[{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}],
    )
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:30Z"
    return obj


def test_waits_for_its_victims_on_the_nominated_node() -> None:
    h = harness([node_dict("n1", cpu="2")], [terminating_victim("victim", "n1", "2", 1)])
    pod = incoming("p", "2", 10)
    h.handle.nominator.add(pod, "n1")
    result, text = preempt(h, pod)
    assert text == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    assert result.nominated_node is None
    assert evicted(h) == []


def test_nominated_node_that_can_never_fit_does_not_block_preempting_elsewhere() -> None:
    nodes = [node_dict("n1", cpu="2", labels={"zone": "a"}), node_dict("n2", cpu="2", labels={"zone": "b"})]
    pods = [terminating_victim("victim", "n1", "2", 1), placed("low", "n2", "2", 1)]
    h = harness(nodes, pods)
    pod = incoming("p", "2", 10, affinity=zone_affinity("b"))
    h.handle.nominator.add(pod, "n1")
    result, _ = preempt(h, pod)
    assert result.nominated_node == "n2"
    assert evicted(h) == [("low", "n2")]


def test_room_held_by_a_higher_priority_nominated_pod_is_not_taken() -> None:
    h = harness([node_dict("n1", cpu="2")], [placed("low", "n1", "2", 1)])
    h.handle.nominator.add(incoming("first", "2", 100), "n1")
    _, text = preempt(h, incoming("p", "2", 10))
    # even with "low" gone, the nominated pod takes the whole node
    assert text == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 Insufficient cpu."
    )
    assert evicted(h) == []


def test_lower_priority_nominations_on_the_chosen_node_are_cleared() -> None:
    h = harness([node_dict("n1", cpu="4")], [placed("low", "n1", "4", 1)])
    lesser = incoming("lesser", "1", 5)
    greater = incoming("greater", "1", 50)
    h.handle.nominator.add(lesser, "n1")
    h.handle.nominator.add(greater, "n1")
    result, _ = preempt(h, incoming("p", "2", 10))
    assert result.nominated_node == "n1"
    assert h.handle.nominator.node_of(lesser.key) is None
    assert h.handle.nominator.node_of(greater.key) == "n1"
    assert [(e.pod.name, e.node_name) for e in h.handle.outbox if isinstance(e, Nominate)] == [("lesser", "")]


# --------------------------------------------------------------------------------------- args
BAD_ARGS = [
    ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage"),
    ({"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage"),
    ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute"),
    ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "minCandidateNodesAbsolute"),
    ({"minCandidateNodes": 1}, "minCandidateNodes"),
]


@pytest.mark.parametrize(
    ("args", "field"),
    BAD_ARGS,
    ids=["percentage-above-100", "negative-percentage", "negative-absolute", "both-zero", "unknown-key"],
)
def test_bad_args_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        harness([node_dict("n1")], [], args)
    assert err.value.path == f"profiles[0].pluginConfig[{DP}].args.{field}"


# --------------------------------------------------------------------------------------- simulator
def scenario(
    nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], pdbs: Sequence[dict[str, Any]] = ()
) -> Scenario:
    sc = Scenario()
    sc.nodes.extend(Node.from_dict(n) for n in nodes)
    sc.pods.extend(pods)
    sc.pdbs.extend(PodDisruptionBudget.from_dict(p) for p in pdbs)
    return sc


def graceful(obj: dict[str, Any], seconds: int) -> dict[str, Any]:
    obj["spec"]["terminationGracePeriodSeconds"] = seconds
    return obj


def test_simulated_preemption_evicts_then_binds_after_the_grace_period() -> None:
    sc = scenario(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [
            graceful(pod_dict("victim", cpu="2", priority=1, node_name="n1"), 10),
            pod_dict("keeper", cpu="2", priority=50, node_name="n2"),
            pod_dict("preemptor", cpu="2", priority=100),
        ],
    )
    report = simulate(sc, default_configuration())
    pods = {p.name: p for p in report.pods}
    assert (pods["victim"].phase, pods["victim"].node) == ("Preempted", "n1")
    assert (pods["preemptor"].phase, pods["preemptor"].node) == ("Bound", "n1")
    assert (pods["keeper"].phase, pods["keeper"].node) == ("Bound", "n2")
    assert report.virtualSeconds == 10
    assert [(p.victim, p.node, p.preemptor, p.triggerPod, p.message) for p in report.preemptions] == [
        (
            "default/victim",
            "n1",
            "default/preemptor",
            "default/preemptor",
            PREEMPTION_MESSAGE.format(scheduler="default-scheduler", pod="preemptor"),
        )
    ]


def test_simulated_nomination_is_honoured_by_a_later_lower_priority_pod() -> None:
    # The victim is gone at t=2. The preemptor, having retried at t=1 (and waited: its victim was
    # still terminating), is backing off until t=3, while "later" is ready at t=2: the room is free
    # but nominated to the preemptor, so "later" must not take it.
    sc = scenario(
        [node_dict("n1", cpu="2")],
        [
            graceful(pod_dict("victim", cpu="2", priority=1, node_name="n1"), 2),
            pod_dict("preemptor", cpu="2", priority=100),
            pod_dict("later", cpu="2", priority=50),
        ],
    )
    report = simulate(sc, default_configuration())
    pods = {p.name: p for p in report.pods}
    assert pods["victim"].phase == "Preempted"
    assert (pods["preemptor"].phase, pods["preemptor"].node) == ("Bound", "n1")
    assert pods["later"].phase == "Pending"
    assert [p.victim for p in report.preemptions] == ["default/victim"]


def test_simulated_pdb_spares_the_protected_pod() -> None:
    sc = scenario(
        [node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        [
            pod_dict("db", cpu="2", priority=1, node_name="n1", labels={"app": "db"}),
            pod_dict("batch", cpu="2", priority=1, node_name="n2"),
            pod_dict("preemptor", cpu="2", priority=100),
        ],
        [pdb("db", {"app": "db"}, minAvailable=1)],
    )
    report = simulate(sc, default_configuration())
    pods = {p.name: p for p in report.pods}
    assert (pods["db"].phase, pods["db"].node) == ("Bound", "n1")
    assert (pods["batch"].phase, pods["batch"].node) == ("Preempted", "n2")
    assert (pods["preemptor"].phase, pods["preemptor"].node) == ("Bound", "n2")
