"""Job-level preemption for a topology-aware gang: which member is nominated to which node, and what
the pending members are told preemption would do.

Koordinator (pkg/scheduler/plugins/coscheduling/core: preemption.go, network_topology_workflow.go's
PlanNodes, network_topology_solver.go) plans the members on the nodes with every potential victim
gone, with each node scored by minus its preemption cost (estimatePreemptionCost: over the distinct
victim jobs on the node, the rank of their priority among all potential victims' priorities, the
lowest rank 0), and nominates them as distributePods fills the leaves: the chosen domain's children
visited largest offer first, then highest score, then name, down to the nodes. koordpy picks the
same nodes (and victims) by its job-aware cost, and nominates the members (in index order) to them
in that visiting order.

Each expected nomination is worked out by hand from that order; each victim set from the cheapest
eviction that frees one domain."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.cli import main
from tests.builders import network_topology, node_dict, pod_dict

BLOCK = "network.topology.nvidia.com/block"
SPINE = "network.topology.nvidia.com/spine"
GANG = "gang.scheduling.koordinator.sh/name"
MIN = "gang.scheduling.koordinator.sh/min-available"
INDEX = "gang.scheduling.koordinator.sh/network-topology-index"
SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
KOORD = {"schedulerName": "koord-scheduler"}
MANUAL = Path(__file__).resolve().parents[1] / "manuals" / "network_topology_aware_scheduling"
MANUAL_FILES = [
    MANUAL / name
    for name in (
        "nodes.yaml",
        "clusternetworktopology.yaml",
        "priorityclasses.yaml",
        "low-priority-pods.yaml",
        "high-priority-training.yaml",
    )
]


def must_gather(layer: str) -> str:
    return json.dumps({"gatherStrategy": [{"layer": layer, "strategy": "MustGather"}]})


@dataclass(frozen=True)
class Case:
    # node -> (spine, block)
    nodes: Mapping[str, tuple[str, str]]
    # (name, node, priority) of the pods already running, one whole node each
    running: Sequence[tuple[str, str, int]]
    members: int
    layer: str
    # member index -> the node it is nominated to (and then bound to)
    nominated: Mapping[int, str]
    victims: frozenset[str]


CASES = [
    pytest.param(
        Case(
            {
                "n1": ("s0", "b1"),
                "n2": ("s0", "b1"),
                "n3": ("s0", "b1"),
                "n4": ("s0", "b2"),
                "n5": ("s0", "b2"),
            },
            [("low", "n1", 1), ("mid", "n2", 5)],
            3,
            "BlockLayer",
            # only b1 has three nodes; ranks: low 0, mid 1; scores n1 0, n3 0 (no victim), n2 -1
            {0: "n1", 1: "n3", 2: "n2"},
            frozenset({"low", "mid"}),
        ),
        id="two priority ranks: the dearer victim's node comes last",
    ),
    pytest.param(
        Case(
            {
                "n1": ("s0", "b1"),
                "n2": ("s0", "b1"),
                "n3": ("s0", "b1"),
                "n4": ("s0", "b2"),
                "n5": ("s0", "b2"),
            },
            [("a", "n1", 1), ("b", "n2", 1)],
            3,
            "BlockLayer",
            # one priority: every victim's rank is 0, so every node scores 0 and name decides
            {0: "n1", 1: "n2", 2: "n3"},
            frozenset({"a", "b"}),
        ),
        id="one priority rank: nodes by name, victims or not",
    ),
    pytest.param(
        Case(
            {
                "m1": ("s0", "b1"),
                "m2": ("s0", "b1"),
                "m3": ("s0", "b1"),
                "m4": ("s0", "b2"),
                "m5": ("s0", "b2"),
                "m6": ("s1", "b3"),
                "m7": ("s1", "b3"),
                "m8": ("s1", "b4"),
                "m9": ("s1", "b4"),
            },
            [("x", "m1", 1), ("z", "m2", 1), ("y", "m6", 1)],
            4,
            "SpineLayer",
            # each spine has three free nodes; s1 holds exactly four once y is gone (s0 would hold
            # five once x and z are: the tighter s1 wins, and evicts one job rather than two); its
            # blocks offer two each and score 0, so b3 then b4, and their nodes by name
            {0: "m6", 1: "m7", 2: "m8", 3: "m9"},
            frozenset({"y"}),
        ),
        id="the manual's shape: MustGather spine, the victim's node first",
    ),
]


def _scenario(case: Case, tmp_path: Path) -> Path:
    docs: list[dict[str, Any]] = [network_topology(("SpineLayer", SPINE), ("BlockLayer", BLOCK))]
    for value in sorted({100, *(priority for _, _, priority in case.running)}):
        docs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"p{value}"},
                "value": value,
            }
        )
    for name, (spine, block) in case.nodes.items():
        docs.append(node_dict(name, cpu="8", memory="32Gi", labels={SPINE: spine, BLOCK: block}))
    for name, node, priority in case.running:
        docs.append(
            pod_dict(
                name,
                cpu="8",
                memory="32Gi",
                node_name=node,
                spec={**KOORD, "priorityClassName": f"p{priority}"},
            )
        )
    for i in range(case.members):
        docs.append(
            pod_dict(
                f"g-{i}",
                cpu="8",
                memory="32Gi",
                spec={**KOORD, "priorityClassName": "p100"},
                annotations={GANG: "g", MIN: str(case.members), INDEX: str(i), SPEC: must_gather(case.layer)},
            )
        )
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return path


def simulate(capsys: pytest.CaptureFixture[str], files: Sequence[Path], seconds: float | None = None) -> Any:
    argv = ["simulate", *(str(f) for f in files), "--output", "json"]
    if seconds is not None:
        argv += ["--max-virtual-seconds", str(seconds)]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def by_name(report: Any) -> dict[str, Any]:
    return {p["name"]: p for p in report["pods"]}


@pytest.mark.parametrize("case", CASES)
def test_members_are_nominated_as_koordinator_distributes_them_and_run_there(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: Case
) -> None:
    scenario = _scenario(case, tmp_path)
    # the victims' 30 s grace period is not over: the members wait, nominated
    during = by_name(simulate(capsys, [scenario], seconds=5))
    assert {i: during[f"g-{i}"]["nominatedNodeName"] for i in range(case.members)} == case.nominated
    final = simulate(capsys, [scenario])
    assert {v["victim"].split("/")[1] for v in final["preemptions"]} == case.victims
    pods = by_name(final)
    for i, node in case.nominated.items():
        member = pods[f"g-{i}"]
        # bound where it was nominated; the report keeps the nomination once the pod is bound
        assert (member["phase"], member["node"], member["nominatedNode"]) == ("Bound", node, node)
        assert member["nominatedNodeName"] is None
    # a pod nobody nominated has no such field
    assert all("nominatedNode" not in pods[name] for name, _, _ in case.running)


@pytest.mark.parametrize("case", CASES)
def test_the_pending_message_names_the_jobs_preemption_evicts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: Case
) -> None:
    report = simulate(capsys, [_scenario(case, tmp_path)], seconds=0)
    evicted = {v["victim"] for v in report["preemptions"]}
    assert {v.split("/")[1] for v in evicted} == case.victims
    message = by_name(report)["g-0"]["message"]
    named = re.search(r"or preempting jobs? (.*?) would place it", message)
    assert named is not None, message
    assert set(re.findall(r"default/[a-z0-9-]+", named.group(1))) == evicted, message


def test_manual_example_2_names_the_pod_it_evicts_and_nominates_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """network-topology-aware-scheduling.md, example 2: low-priority-pod-5 is the one evicted (spine-1
    holds the group exactly once it is gone), so it is the job the pending members are told of; the
    members are nominated to spine-1's nodes in Koordinator's order, hp-training-pod-i to node-(5+i)."""
    report = simulate(capsys, MANUAL_FILES, seconds=0)
    assert [v["victim"] for v in report["preemptions"]] == ["default/low-priority-pod-5"]
    pods = by_name(report)
    for i in range(4):
        member = pods[f"hp-training-pod-{i}"]
        assert member["nominatedNodeName"] == f"node-{5 + i}", member
        assert "preempting job default/low-priority-pod-5 (priority 1000) in spine-1" in member["message"]
        assert "low-priority-pod-0" not in member["message"]


def test_while_the_victim_terminates_no_further_preemption_is_suggested(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Once the victim is terminating, preemption evicts nobody more (its room is on its way): the
    message suggests no other eviction, and says why preemption waits."""
    report = simulate(capsys, MANUAL_FILES, seconds=5)
    message = by_name(report)["hp-training-pod-0"]["message"]
    assert "or preempting" not in message
    assert message.endswith("not eligible due to terminating pod on the nominated node.")
