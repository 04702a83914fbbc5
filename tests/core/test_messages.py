"""The PodScheduled message of a pod that is not placed, word for word as kube-scheduler (and the
API server, for a gated pod) writes it. Expected strings come from kube-scheduler's tests
(pkg/scheduler/schedule_one_test.go TestSchedulerSchedulePod, pkg/registry/core/pod
strategy_test.go TestSchedulingGatedCondition) and from the events kube-scheduler writes for
DaemonSet pods, each of which is pinned to its node with `matchFields metadata.name`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration, parse_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import (
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterPlugin,
    PreFilterResult,
    Rows,
)
from koordpy.framework.status import Status, unschedulable
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict, settle

GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
GATED = "Scheduling is blocked due to non-empty scheduling gates"


def narrowing(name: str, nodes: Sequence[str]) -> type[Plugin]:
    """A PreFilter plugin whose result allows only `nodes` (kube's FakePreFilterPlugin)."""

    class Narrowing(Plugin, PreFilterPlugin):
        NAME = name

        def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
            return PreFilterResult(frozenset(nodes)), None

    return Narrowing


class FakeFilter(Plugin, FilterPlugin):
    """Fails node2 (kube's FakeFilterPlugin with `{"node2": Unschedulable}`)."""

    NAME = "FakeFilter"

    def filter(self, state: CycleState, pod: Pod, rows: Rows) -> FilterResult | None:
        row = self.handle.snapshot.row_of.get("node2")
        failure = unschedulable(f"injecting failure for pod {pod.name}")
        return FilterResult.uniform(rows != row, failure)


def world_of(
    nodes: Sequence[str], plugins: Sequence[type[Plugin]] = (), cpu: dict[str, str] | None = None
) -> MemoryCluster:
    """Nodes with 4 cpus (or `cpu[name]`); with `plugins`, one profile that adds them to the
    defaults and runs no PostFilter (kube's tests render the FitError before preemption)."""
    if plugins:
        enabled: dict[str, list[dict[str, str]]] = {"preFilter": [], "filter": []}
        for p in plugins:
            enabled["preFilter" if "preFilter" in p.extension_points() else "filter"].append({"name": p.NAME})
        config = parse_configuration(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "plugins": {
                            **{point: {"enabled": refs} for point, refs in enabled.items() if refs},
                            "postFilter": {"disabled": [{"name": "*"}]},
                        },
                    }
                ],
            }
        )
    else:
        config = default_configuration()
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(config, {**registry(), **{p.NAME: p for p in plugins}}, clock), clock)
    for n in nodes:
        world.add_node(make_node(n, cpu=(cpu or {}).get(n, "4")))
    return world


def pinned(name: str, node: str, cpu: str = "1") -> dict[str, Any]:
    """A pod placed as the DaemonSet controller places its pods."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    return pod_dict(name, cpu=cpu, spec={"affinity": affinity})


def outcome(world: MemoryCluster, name: str) -> tuple[str, str]:
    found = world.scheduler.outcomes[f"default/{name}"]
    return found.reason, found.message


@pytest.mark.parametrize(
    ("plugins", "nodes", "expected"),
    [
        pytest.param(
            [narrowing("FakePreFilter2", ["node2"]), narrowing("FakePreFilter3", ["node1"])],
            ["node1", "node2", "node3"],
            "0/3 nodes are available: node(s) didn't satisfy plugin(s) [FakePreFilter2 FakePreFilter3] "
            "simultaneously.",
            id="prefilter-results-with-no-node-in-common-name-every-plugin",
        ),
        pytest.param(
            [narrowing("FakePreFilter2", [])],
            ["node1"],
            "0/1 nodes are available: node(s) didn't satisfy plugin FakePreFilter2.",
            id="one-prefilter-result-with-no-node-names-the-plugin",
        ),
        pytest.param(
            [narrowing("FakePreFilter", ["invalid-node"])],
            ["1", "2"],
            "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [FakePreFilter].",
            id="prefilter-result-naming-a-missing-node-counts-every-node",
        ),
        pytest.param(
            [narrowing("FakePreFilter", ["node2"]), FakeFilter],
            ["node1", "node2"],
            "0/2 nodes are available: 1 injecting failure for pod test-prefilter, "
            "1 node(s) didn't satisfy plugin(s) [FakePreFilter].",
            id="nodes-left-out-by-prefilter-count-beside-filter-failures",
        ),
    ],
)
def test_prefilter_results_in_the_message(
    plugins: list[type[Plugin]], nodes: list[str], expected: str
) -> None:
    world = world_of(nodes, plugins)
    world.add_pod(pod_dict("test-prefilter"))
    settle(world)
    assert outcome(world, "test-prefilter") == (names.UNSCHEDULABLE, expected)


@pytest.mark.parametrize(
    ("pod", "cpu", "expected"),
    [
        pytest.param(
            pinned("agent", "n0", cpu="2"),
            {"n0": "1"},
            "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
            "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, "
            "3 Preemption is not helpful for scheduling.",
            id="daemonset-pod-on-a-full-node-counts-the-other-nodes-as-nodeaffinity",
        ),
        pytest.param(
            pinned("agent", "gone"),
            {},
            "0/4 nodes are available: 4 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
            "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
            id="pod-pinned-to-a-missing-node-counts-every-node",
        ),
    ],
)
def test_pinned_pod(pod: dict[str, Any], cpu: dict[str, str], expected: str) -> None:
    world = world_of(["n0", "n1", "n2", "n3"], cpu=cpu)
    world.add_pod(pod)
    settle(world)
    assert outcome(world, "agent") == (names.UNSCHEDULABLE, expected)


def test_pod_pinned_to_a_missing_node_is_placed_when_the_node_appears() -> None:
    world = world_of(["n0"])
    world.add_pod(pinned("agent", "n1"))
    settle(world)
    world.add_node(make_node("n1"))
    # the node's arrival moves the pod out of the unschedulable pool; its backoff then runs out
    world.run(60)
    assert world.views["default/agent"].node_name == "n1"


def test_no_node_at_all() -> None:
    # kube-scheduler's ErrNoNodesAvailable: no FitError, its own sentence
    world = world_of([])
    world.add_pod(pod_dict("p", cpu="1"))
    settle(world)
    assert outcome(world, "p") == (names.UNSCHEDULABLE, "no nodes available to schedule pods")


@pytest.mark.parametrize("gates", [["example.com/a"], ["example.com/a", "example.com/b"]], ids=["one", "two"])
def test_gated_pod_keeps_the_api_servers_condition(gates: list[str]) -> None:
    world = world_of(["n0"])
    world.add_pod(pod_dict("p", cpu="1", spec={"schedulingGates": [{"name": g} for g in gates]}))
    settle(world)
    assert outcome(world, "p") == (names.SCHEDULING_GATED, GATED)
    condition = next(
        c for c in world.pods["default/p"]["status"]["conditions"] if c["type"] == "PodScheduled"
    )
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "SchedulingGated",
        GATED,
    )


def gang_member(name: str, gated: bool, min_available: int) -> dict[str, Any]:
    spec = {"schedulingGates": [{"name": "example.com/a"}]} if gated else None
    return pod_dict(name, cpu="1", annotations={GANG_NAME: "g", GANG_MIN: str(min_available)}, spec=spec)


@pytest.mark.parametrize(
    ("gated", "min_available", "expected"),
    [
        pytest.param(
            ["m2", "m3"],
            3,
            {
                "m1": (names.GANG_NOT_READY, "gang default/g waits for 2 gated member(s)"),
                "m2": (names.SCHEDULING_GATED, GATED),
                "m3": (names.SCHEDULING_GATED, GATED),
            },
            id="gang-short-of-its-minimum-without-its-gated-members-waits-for-them",
        ),
        pytest.param(
            ["m3"],
            2,
            {"m3": (names.SCHEDULING_GATED, GATED)},
            id="gang-reaching-its-minimum-without-its-gated-member-is-placed",
        ),
    ],
)
def test_gang_with_gated_members(
    gated: list[str], min_available: int, expected: dict[str, tuple[str, str]]
) -> None:
    world = world_of(["n0"])
    for name in ("m1", "m2", "m3"):
        world.add_pod(gang_member(name, name in gated, min_available))
    settle(world)
    for name, verdict in expected.items():
        assert outcome(world, name) == verdict
    placed = {n for n in ("m1", "m2", "m3") if world.views[f"default/{n}"].node_name}
    assert placed == {"m1", "m2", "m3"} - set(expected)


def test_gang_waiting_for_gated_members_is_placed_once_their_gates_are_lifted() -> None:
    world = world_of(["n0"])
    for name in ("m1", "m2", "m3"):
        world.add_pod(gang_member(name, name != "m1", 3))
    settle(world)
    for name in ("m2", "m3"):
        raw = dict(world.pods[f"default/{name}"])
        raw["spec"] = {k: v for k, v in raw["spec"].items() if k != "schedulingGates"}
        world.scheduler.on_pod_update(world._replace(f"default/{name}", raw))
    settle(world)
    assert {world.views[f"default/{n}"].node_name for n in ("m1", "m2", "m3")} == {"n0"}
