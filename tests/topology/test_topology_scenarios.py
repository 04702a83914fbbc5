"""Network-topology-aware gang placement through `koordpy simulate`, on the seed cluster: eight
8-CPU nodes, spine s1 = blocks b2 (node-1, node-2) and b1 (node-3, node-4), spine s2 = blocks b3
(node-5, node-6) and b4 (node-7, node-8), under ClusterNetworkTopology `default`.

The gang pods ask for 4 CPU: a node holds two, a block four, a spine eight."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api import names
from koordpy.cli import main
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import build_world
from tests.topology.test_detail_status import BLOCK_KEY, SEED_NODE_LABELS, SPINE_KEY

TOPOLOGY = Path(__file__).parent.parent / "scenarios" / "topology"
CLUSTER = "seed_cluster.yaml"

BLOCK_OF = {name: (labels[SPINE_KEY], labels[BLOCK_KEY]) for name, labels in SEED_NODE_LABELS.items()}
SPINE_OF = {name: labels[SPINE_KEY] for name, labels in SEED_NODE_LABELS.items()}


def gather(layer: str, strategy: str) -> str:
    return json.dumps({"gatherStrategy": [{"layer": layer, "strategy": strategy}]})


def simulate(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    *files: str,
    replace: dict[str, str] | None = None,
    without_topology: bool = False,
) -> dict[str, Any]:
    paths = []
    for i, name in enumerate(files):
        text = (TOPOLOGY / name).read_text()
        for old, new in (replace or {}).items():
            text = text.replace(old, new)
        if without_topology:
            docs = [d for d in yaml.safe_load_all(text) if d and d.get("kind") != "ClusterNetworkTopology"]
            text = yaml.safe_dump_all(docs)
        path = tmp_path / f"{i:02d}-{name}"
        path.write_text(text)
        paths.append(str(path))
    code = main(["simulate", *paths, "--output", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report: dict[str, Any] = json.loads(out.out)
    return report


def gang_job(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    replicas: int,
    spec: str,
    *extra: str,
    without_topology: bool = False,
) -> dict[str, Any]:
    """The `job` gang of gather_gang.yaml with `replicas` pods and `spec` as its topology request."""
    return simulate(
        capsys,
        tmp_path,
        CLUSTER,
        *extra,
        "gather_gang.yaml",
        replace={"REPLICAS": str(replicas), "SPEC": spec},
        without_topology=without_topology,
    )


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def nodes_of(report: dict[str, Any], prefix: str) -> dict[str, str]:
    got = {name: p for name, p in pods(report).items() if name.startswith(prefix)}
    assert got, prefix
    assert {p["phase"] for p in got.values()} == {"Bound"}, got
    return {name: p["node"] for name, p in got.items()}


# ---------------------------------------------------------------------------------------------- PreferGather
def test_prefer_gather_gang_lands_inside_one_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = gang_job(capsys, tmp_path, 3, gather("BlockLayer", "PreferGather"))
    placed = nodes_of(report, "job-")
    assert len(placed) == 3
    # every block offers four: the tie goes to the name, b1, not to b2 that holds the first node
    assert {BLOCK_OF[n] for n in placed.values()} == {("s1", "b1")}


def test_gang_too_big_for_a_block_lands_inside_one_spine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = gang_job(capsys, tmp_path, 6, gather("BlockLayer", "PreferGather"))
    placed = nodes_of(report, "job-")
    assert len(placed) == 6
    assert len({SPINE_OF[n] for n in placed.values()}) == 1, placed
    assert len({BLOCK_OF[n] for n in placed.values()}) == 2, "six pods need two blocks"


def test_existing_pods_make_the_tighter_block_win(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # b3 offers three slots (node-5 is half used), every other block four: b3 fits three best
    report = gang_job(capsys, tmp_path, 3, gather("BlockLayer", "PreferGather"), "occupied_block.yaml")
    placed = nodes_of(report, "job-")
    assert {BLOCK_OF[n] for n in placed.values()} == {("s2", "b3")}
    assert sorted(placed.values()) == ["node-5", "node-6", "node-6"]
    assert pods(report)["running"]["node"] == "node-5"


# ---------------------------------------------------------------------------------------------- MustGather
def test_must_gather_block_that_no_block_can_hold_stays_pending(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = gang_job(capsys, tmp_path, 6, gather("BlockLayer", "MustGather"))
    members = {name: p for name, p in pods(report).items() if name.startswith("job-")}
    assert len(members) == 6
    for p in members.values():
        assert (p["phase"], p["reason"], p["node"]) == ("Pending", "Unschedulable", None)
    messages = {p["message"] for p in members.values()}
    assert len(messages) == 1, "every member carries the same explanation"
    (message,) = messages
    assert "MustGather" in message and "6" in message, message
    for block in ("b1", "b2", "b3", "b4"):
        assert f"BlockLayer/{block}: 4" in message, message


def test_must_gather_block_gang_that_fits_stays_in_one_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = gang_job(capsys, tmp_path, 4, gather("BlockLayer", "MustGather"))
    placed = nodes_of(report, "job-")
    assert len({BLOCK_OF[n] for n in placed.values()}) == 1, placed


# ---------------------------------------------------------------------------------------------- index order
def test_consecutive_topology_indices_share_nodes_and_blocks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(capsys, tmp_path, CLUSTER, "indexed_gang.yaml")
    placed = nodes_of(report, "worker-")
    # worker-h has index 0 ... worker-a index 7
    by_rank = [placed[f"worker-{letter}"] for letter in "hgfedcba"]
    assert len({SPINE_OF[n] for n in by_rank}) == 1, "eight ranks fit one spine"
    for rank in range(0, 8, 2):
        assert by_rank[rank] == by_rank[rank + 1], by_rank
    for rank in range(0, 8, 4):
        assert len({BLOCK_OF[n] for n in by_rank[rank : rank + 4]}) == 1, by_rank
    assert len(set(by_rank)) == 4


# ---------------------------------------------------------------------------------------------- gang group
def test_gang_group_is_placed_in_one_domain(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = simulate(capsys, tmp_path, CLUSTER, "gang_group.yaml")
    placed = {name: p["node"] for name, p in pods(report).items()}
    assert {p["phase"] for p in report["pods"]} == {"Bound"}
    assert len(placed) == 4
    # launcher and workers are two gangs: MustGather BlockLayer holds for the group as a whole
    assert len({BLOCK_OF[n] for n in placed.values()}) == 1, placed
    assert {g["name"]: g["phase"] for g in report["podGroups"]} == {
        "launcher": "Running",
        "workers": "Running",
    }


def test_gang_group_ranks_spanning_its_gangs_are_assigned_in_index_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = simulate(capsys, tmp_path, CLUSTER, "gang_group_ranks.yaml")
    placed = {name: p["node"] for name, p in pods(report).items()}
    assert {p["phase"] for p in report["pods"]} == {"Bound"}
    # ranks 0 and 1 (two workers) share a node, as do ranks 2 and 3 (the last worker and the launcher)
    assert placed["worker-0"] == placed["worker-1"], placed
    assert placed["worker-2"] == placed["launcher"], placed


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        pytest.param(
            gather("spineLayer", "MustGather"),
            ("unknown layer 'spineLayer'", "did you mean 'SpineLayer'"),
            id="unknown-layer",
        ),
    ],
)
def test_bad_topology_request_is_invalid_spec_and_nothing_is_placed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, fragments: tuple[str, ...]
) -> None:
    report = gang_job(capsys, tmp_path, 3, spec)
    members = pods(report)
    assert len(members) == 3
    for p in members.values():
        assert (p["phase"], p["reason"], p["node"]) == ("Pending", "InvalidSpec", None)
        for fragment in fragments:
            assert fragment in p["message"], p["message"]
    # the PodGroup says why as well
    (group,) = report["podGroups"]
    for fragment in fragments:
        assert fragment in (group["message"] or ""), group


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        # koord-scheduler's json.Unmarshal fails: the gang asks for no topology at all
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}',
            ("network-topology-spec", "not valid JSON", "no network-topology constraint"),
            id="invalid-json",
        ),
        # its solver asks only whether a rule is MustGather: any other strategy gathers by preference
        pytest.param(
            gather("BlockLayer", "AlwaysGather"),
            ("network-topology-spec", "'AlwaysGather'", "using PreferGather"),
            id="unknown-strategy",
        ),
    ],
)
def test_topology_request_koord_scheduler_defaults_is_placed_and_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, fragments: tuple[str, ...]
) -> None:
    report = gang_job(capsys, tmp_path, 3, spec)
    members = pods(report)
    assert len(members) == 3
    assert {p["phase"] for p in members.values()} == {"Bound"}, members
    (group,) = report["podGroups"]
    (condition,) = group["conditions"]
    for fragment in fragments:
        assert fragment in condition["message"], condition


# ---------------------------------------------------------------------------------------------- fallback
def test_gang_is_placed_without_a_cluster_network_topology(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # MustGather BlockLayer for six pods cannot be met on the seed tree (see above); with no
    # ClusterNetworkTopology at all, the gang is placed without topology instead of waiting forever
    report = gang_job(capsys, tmp_path, 6, gather("BlockLayer", "MustGather"), without_topology=True)
    assert "clusterNetworkTopology" not in report or not report["clusterNetworkTopology"]
    assert len(nodes_of(report, "job-")) == 6


def test_offers_follow_the_real_filters_not_just_resources(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # one pod per node (anti-affinity): a block holds two, so the smallest domain that holds three
    # is a spine, with each pod on a node of its own
    report = simulate(capsys, tmp_path, CLUSTER, "one_per_node_gang.yaml")
    placed = nodes_of(report, "apart-")
    assert len(placed) == 3, report["pods"]
    assert len(set(placed.values())) == 3, placed
    assert len({SPINE_OF[n] for n in placed.values()}) == 1, placed


# --------------------------------------------------------------------------------- layers it lacks
def two_rules(prefer: str, must: str) -> str:
    return json.dumps(
        {
            "gatherStrategy": [
                {"layer": prefer, "strategy": "PreferGather"},
                {"layer": must, "strategy": "MustGather"},
            ]
        }
    )


def test_prefer_gather_for_a_layer_the_topology_lacks_is_ignored_and_told_once(tmp_path: Path) -> None:
    # koord-scheduler matches rules to domains by layer: a PreferGather rule for a layer the
    # topology does not have matches nothing; the MustGather rule beside it still holds
    paths = []
    for i, name in enumerate((CLUSTER, "gather_gang.yaml")):
        text = (TOPOLOGY / name).read_text().replace("REPLICAS", "3")
        text = text.replace("SPEC", two_rules("AcceleratorLayer", "BlockLayer"))
        path = tmp_path / f"{i:02d}-{name}"
        path.write_text(text)
        paths.append(str(path))
    world = build_world(load_scenario(paths), default_configuration())
    world.run(3600.0)
    placed = {p.name: p.node_name for p in world.views.values() if p.name.startswith("job-")}
    assert len(placed) == 3 and all(placed.values()), placed
    assert len({BLOCK_OF[n] for n in placed.values() if n}) == 1, placed
    told: dict[str, list[str]] = {}
    for event in world.events:
        if event.reason == names.GANG_ANNOTATION_DEFAULTED:
            told.setdefault(event.pod.name, []).append(event.message)
    assert sorted(told) == sorted(placed), told
    for messages in told.values():
        (message,) = messages
        assert "'AcceleratorLayer'" in message and "no preference for that layer" in message, message
