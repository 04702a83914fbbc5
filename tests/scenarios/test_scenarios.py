"""`koordpy simulate` end to end: manifests in, the report contract out.

Each case names the scenario files, the configuration, and what the documented semantics say
must happen to each pod."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from koordpy.cli import main

HERE = Path(__file__).parent
NODES = "nodes_two_zones.yaml"


def run_simulate(
    capsys: pytest.CaptureFixture[str], files: Sequence[str], config: str | None = None, output: str = "json"
) -> tuple[int, str, str]:
    argv = ["simulate", *(str(HERE / f) for f in files), "--output", output]
    if config:
        argv += ["--config", str(HERE / "configs" / config)]
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@dataclass
class Expect:
    phase: str
    nodes: set[str] | None = None  # any of these
    reason: str | None = None
    message: str | None = None  # exact
    message_startswith: str | None = None
    message_contains: Sequence[str] = field(default_factory=tuple)


CASES: list[Any] = [
    pytest.param(
        [NODES, "resources_insufficient.yaml"],
        None,
        {
            "fits": Expect("Bound", nodes={"a1", "a2", "b1"}),
            "too-big": Expect(
                "Pending",
                reason="Unschedulable",
                message="0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: gitlab}, "
                "3 Insufficient cpu. preemption: 0/4 nodes are available: "
                "1 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod.",
            ),
        },
        id="insufficient-cpu-explained-per-node",
    ),
    pytest.param(
        [NODES, "taints.yaml"],
        None,
        {
            "tolerates-gitlab": Expect("Bound", nodes={"b2"}),
            "no-toleration": Expect(
                "Pending",
                reason="Unschedulable",
                message="0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: gitlab}, "
                "3 node(s) didn't match Pod's node affinity/selector. "
                "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
            ),
        },
        id="taint-blocks-pods-without-toleration",
    ),
    pytest.param(
        [NODES, "affinity_and_spread.yaml"],
        None,
        {
            "cache-0": Expect("Bound", nodes={"a1", "b1"}),
            "cache-1": Expect("Bound", nodes={"a1", "b1"}),
            "cache-2": Expect(
                "Pending",
                reason="Unschedulable",
                message="0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                "1 node(s) had untolerated taint {dedicated: gitlab}, "
                "2 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: "
                "2 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
            ),
            "web-0": Expect("Bound"),
        },
        id="required-affinity-and-one-per-host-anti-affinity",
    ),
    pytest.param(
        ["priority_first.yaml"],
        None,
        {
            "high": Expect("Bound", nodes={"only"}),
            "low": Expect(
                "Pending",
                reason="Unschedulable",
                message_startswith="0/1 nodes are available: 1 Insufficient cpu.",
            ),
        },
        id="higher-priority-pod-scheduled-first",
    ),
    pytest.param(
        [NODES, "bad_pods_do_not_block.yaml"],
        None,
        {
            "bad-quantity": Expect(
                "Pending",
                reason="InvalidSpec",
                message_contains=("spec.containers[0].resources.requests.memory", "10 gigs"),
            ),
            "bad-toleration": Expect(
                "Pending", reason="InvalidSpec", message_contains=("spec.tolerations[0]",)
            ),
            "other-scheduler": Expect("Pending", reason="SchedulerNotFound", message_contains=("volcano",)),
            "gated": Expect(
                "Pending",
                reason="SchedulingGated",
                message="Scheduling is blocked due to non-empty scheduling gates",
            ),
            "good": Expect("Bound"),
        },
        id="malformed-pods-reported-and-others-scheduled",
    ),
    pytest.param(
        [NODES, "preplaced.yaml"],
        None,
        {
            "running": Expect("Bound", nodes={"a1"}),
            "wants-a1": Expect(
                "Pending",
                reason="Unschedulable",
                message="0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint "
                "{dedicated: gitlab}, 2 node(s) didn't match Pod's node affinity/selector. "
                "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, "
                "3 Preemption is not helpful for scheduling.",
            ),
        },
        id="pre-placed-pod-occupies-its-node",
    ),
    pytest.param(
        ["binpack.yaml"],
        "binpack.yaml",
        {
            "db-0": Expect("Bound", nodes={"x1"}),
            "db-1": Expect("Bound", nodes={"x1"}),
            "db-2": Expect("Bound", nodes={"x1"}),
        },
        id="most-allocated-config-packs-one-node",
    ),
]


@pytest.mark.parametrize(("files", "config", "expected"), CASES)
def test_scenario(
    capsys: pytest.CaptureFixture[str], files: list[str], config: str | None, expected: dict[str, Expect]
) -> None:
    code, out, err = run_simulate(capsys, files, config)
    assert code == 0, err
    report = json.loads(out)
    pods = {p["name"]: p for p in report["pods"]}
    for name, exp in expected.items():
        got = pods[name]
        assert got["phase"] == exp.phase, got
        if exp.nodes is not None:
            assert got["node"] in exp.nodes, got
        if exp.reason is not None:
            assert got["reason"] == exp.reason, got
        if exp.message is not None:
            assert got["message"] == exp.message
        if exp.message_startswith is not None:
            assert got["message"].startswith(exp.message_startswith), got["message"]
        for fragment in exp.message_contains:
            assert fragment in got["message"], got["message"]


def test_default_spreading_balances_equal_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_simulate(capsys, ["binpack.yaml"])
    assert code == 0
    nodes = [p["node"] for p in json.loads(out)["pods"]]
    assert sorted(nodes.count(n) for n in ("x1", "x2")) == [1, 2]


def test_zone_spread_puts_two_replicas_in_each_zone(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_simulate(capsys, [NODES, "affinity_and_spread.yaml"])
    assert code == 0
    zone = {"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
    web = [zone[p["node"]] for p in json.loads(out)["pods"] if p["name"].startswith("web-")]
    assert sorted(web) == ["a", "a", "b", "b"]


def test_report_lists_every_pod_in_input_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_simulate(capsys, [NODES, "bad_pods_do_not_block.yaml"])
    assert code == 0
    report = json.loads(out)
    assert [p["name"] for p in report["pods"]] == [
        "bad-quantity",
        "bad-toleration",
        "other-scheduler",
        "gated",
        "good",
    ]
    assert set(report) >= {"pods", "podGroups", "preemptions", "virtualSeconds"}
    assert "clusterNetworkTopology" not in report


@pytest.mark.parametrize("output", ["table", "yaml"])
def test_other_outputs_render(capsys: pytest.CaptureFixture[str], output: str) -> None:
    code, out, _ = run_simulate(capsys, [NODES, "resources_insufficient.yaml"], output=output)
    assert code == 0
    assert "too-big" in out


@pytest.mark.parametrize(
    ("files", "config", "fragments"),
    [
        pytest.param(
            [NODES, "bad_input_node.yaml"],
            None,
            ("bad_input_node.yaml", "document 2", "Node broken", "status.allocatable.cpu"),
            id="unparsable-node-capacity-names-file-document-field",
        ),
        pytest.param(
            ["binpack.yaml"],
            "bad_strategy.yaml",
            ("profiles[0].pluginConfig[NodeResourcesFit].args.scoringStrategy.type",),
            id="bad-plugin-args-name-the-path",
        ),
        pytest.param(["does-not-exist.yaml"], None, ("does-not-exist.yaml",), id="missing-file"),
    ],
)
def test_invalid_input_exits_2_naming_what_is_wrong(
    capsys: pytest.CaptureFixture[str], files: list[str], config: str | None, fragments: Sequence[str]
) -> None:
    code, out, err = run_simulate(capsys, files, config)
    assert code == 2
    assert out == ""
    for fragment in fragments:
        assert fragment in err, err
