"""Koordinator's network-topology-aware scheduling manual, in `koordpy simulate`.

Source: https://github.com/koordinator-sh/website/blob/main/docs/user-manuals/network-topology-aware-scheduling.md
(https://koordinator.sh/docs/user-manuals/network-topology-aware-scheduling). Twelve 8-core nodes in
three spines (spine-0: block-0 of 3 nodes and block-1 of 2; spine-1: block-2 and block-3 of 2 each;
spine-2: block-4 of 3).

- The ClusterNetworkTopology's status is the tree of "Verify Topology Configuration".
- Example 1: a PreferGather gang of four whole-node pods on the idle cluster goes to spine-1, the
  smallest domain that holds it ("Binpack"), training-pod-i on node-(5+i).
- Example 2: low-priority pods occupy node-0, node-1 and node-5, so no spine has four free nodes; a
  high-priority gang of four with MustGather to SpineLayer is not spread over spines: while
  low-priority-pod-5 terminates the members wait, nominated to node-5..node-8, and then run there.
  low-priority-pod-0 and low-priority-pod-1 keep running.
- "Multi-PodGroup Coordinated Scheduling" prints a PodGroup without a name, which the API server
  refuses."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manuals.simulation import (
    MANUALS,
    Pod,
    Report,
    apply_in_steps,
    check_groups,
    check_pods,
    pods,
    replay_timeline,
    simulate,
)
from tests.manuals.simulation import Group as PodGroup

DIR = MANUALS / "network_topology_aware_scheduling"
CLUSTER = [DIR / "nodes.yaml", DIR / "clusternetworktopology.yaml"]
SPINE_1 = {"node-5", "node-6", "node-7", "node-8"}
EXAMPLE_1 = [CLUSTER, [DIR / "topology-demo-job.yaml"]]
EXAMPLE_2 = [
    [*CLUSTER, DIR / "priorityclasses.yaml"],
    [DIR / "low-priority-pods.yaml"],
    [DIR / "high-priority-training.yaml"],
]
HP = [f"hp-training-pod-{i}" for i in range(4)]
# "Immediately after submitting": the victim was chosen, its 30 s grace period is not over
IMMEDIATELY_AFTER = 5


def _tree(detail: Sequence[Mapping[str, Any]]) -> list[str]:
    """The entries of a detailStatus, in a canonical order; the order of entries and of child names
    carries no meaning (Koordinator's own examples list children unsorted)."""
    entries = []
    for entry in detail:
        entry = dict(entry)
        if "childTopologyNames" in entry:
            entry["childTopologyNames"] = sorted(entry["childTopologyNames"])
        entries.append(json.dumps(entry, sort_keys=True))
    return sorted(entries)


def test_topology_status_is_the_tree_the_manual_shows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (report,) = apply_in_steps(capsys, tmp_path, [CLUSTER])
    expected = yaml.safe_load((DIR / "detail-status.yaml").read_text())["status"]["detailStatus"]
    assert _tree(report["clusterNetworkTopology"]["status"]["detailStatus"]) == _tree(expected)


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, steps: Any, seconds: float | None = None
) -> Report:
    return apply_in_steps(capsys, tmp_path, steps, last_step_seconds=seconds)[-1]


def test_prefer_gather_gang_goes_to_the_spine_it_fills_exactly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = _run(capsys, tmp_path, EXAMPLE_1)
    check_pods(report, {f"training-pod-{i}": Pod("Bound", node=f"node-{5 + i}") for i in range(4)})
    check_groups(report, {"topology-demo-job": PodGroup("Running", scheduled=4)})


def test_must_gather_gang_waits_for_one_victim_in_spine_1_instead_of_spreading(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    during = _run(capsys, tmp_path, EXAMPLE_2, IMMEDIATELY_AFTER)
    # nine nodes are free, three in each spine: the members wait rather than span spines
    check_pods(
        during,
        {
            "low-priority-pod-0": Pod("Bound", node="node-0"),
            "low-priority-pod-1": Pod("Bound", node="node-1"),
            **{
                name: Pod(
                    "Pending",
                    node=None,
                    reason="Unschedulable",
                    message_contains=(
                        "SpineLayer/spine-0: 3",
                        "SpineLayer/spine-1: 3",
                        "SpineLayer/spine-2: 3",
                        "not eligible due to terminating pod on the nominated node",
                    ),
                )
                for name in HP
            },
        },
    )
    assert [p["victim"] for p in during["preemptions"]] == ["default/low-priority-pod-5"]
    (victim,) = during["preemptions"]
    assert victim["node"] == "node-5"
    assert victim["preemptor"] == "default/high-priority-training"
    assert {pods(during)[name]["nominatedNodeName"] for name in HP} == SPINE_1


def test_must_gather_gang_runs_in_spine_1_on_the_nodes_it_was_nominated_to(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    during = _run(capsys, tmp_path / "during", EXAMPLE_2, IMMEDIATELY_AFTER)
    final = _run(capsys, tmp_path / "final", EXAMPLE_2)
    check_pods(
        final,
        {
            "low-priority-pod-0": Pod("Bound", node="node-0"),
            "low-priority-pod-1": Pod("Bound", node="node-1"),
            "low-priority-pod-5": Pod("Preempted", node="node-5"),
            **{name: Pod("Bound", node=pods(during)[name]["nominatedNodeName"]) for name in HP},
        },
    )
    assert {pods(final)[name]["node"] for name in HP} == SPINE_1


def test_podgroup_without_a_name_is_refused_as_the_api_server_refuses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report, err = simulate(capsys, [*CLUSTER, DIR / "multi-podgroup.yaml"])
    assert (code, report) == (2, None)
    assert "multi-podgroup.yaml" in err and "metadata.name" in err, err


def test_example_2_as_one_timeline_the_gang_preempts_on_arrival_and_runs_in_spine_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Example 2 with its steps in virtual time: the low-priority pods at zero, the high-priority
    MustGather gang two minutes later. The one victim goes when the gang arrives; its 30 s grace
    period later the four members are bound in spine-1 together."""
    arrives, grace = 120.0, 30.0
    report = replay_timeline(capsys, tmp_path, EXAMPLE_2, [0.0, 0.0, arrives])
    check_pods(
        report,
        {
            "low-priority-pod-0": Pod("Bound", node="node-0"),
            "low-priority-pod-1": Pod("Bound", node="node-1"),
            "low-priority-pod-5": Pod("Preempted", node="node-5"),
            **{name: Pod("Bound", node=SPINE_1) for name in HP},
        },
    )
    found = pods(report)
    assert {found[name]["node"] for name in HP} == SPINE_1
    assert {(found[name]["createdAt"], found[name]["scheduledAt"]) for name in HP} == {
        (arrives, arrives + grace)
    }
    assert found["low-priority-pod-5"]["finishedAt"] == arrives + grace
    assert [(s["at"], s["preemptions"]) for s in report["timeline"] if s["preemptions"]] == [(arrives, 1)]
