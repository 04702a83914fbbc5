"""MustGather holds for every member of a gang group, however late it is placed.

The invariant: every placed member of a gang group whose network-topology-spec has MustGather on a
layer lies in one domain of that layer, including members placed after the group first reached its
minimum (members beyond minMember, members that did not fit in the group's pass, replacements).
Koordinator confines such a member to the MustGather domain of its group's bound members
(`preFilterLateMemberOfSatisfiedGang` / `getMustGatherDomainOfBoundMembers` in
pkg/scheduler/plugins/coscheduling/core/network_topology_workflow.go), and rejects it when that
domain cannot be told.

The scenarios use zone anti-affinity between members: the offers count each node on its own (one
member per node), so the plan can put two members into one zone and the member planned last fails
its filters; the group still reaches its minimum and is bound, and that member is placed later,
on its own (once-satisfied) or in a pass of its own (waiting-and-running).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.cli import main
from koordpy.framework.clock import VirtualClock
from koordpy.plugins.coscheduling.networktopology import GatherDomain, placed_domain
from koordpy.plugins.coscheduling.registry import GangRegistry
from koordpy.status.topology import CLUSTER_LAYER, NODE_LAYER, build_tree, parse_layer_chain
from tests.builders import network_topology
from tests.topology.test_detail_status import BLOCK_KEY, SEED_NODE_LABELS, SEED_SPEC

SPINE_LABEL = "example.com/spine"
ZONE_LABEL = "topology.kubernetes.io/zone"
GANG = "gang.scheduling.koordinator.sh"
SPEC = f"{GANG}/network-topology-spec"
GROUPS = f"{GANG}/groups"
PG_LABEL = "pod-group.scheduling.sigs.k8s.io"

MUST_SPINE = json.dumps({"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather"}]})
PREFER_SPINE = json.dumps({"gatherStrategy": [{"layer": "SpineLayer", "strategy": "PreferGather"}]})

TOPOLOGY = network_topology(("SpineLayer", SPINE_LABEL))

# (node, spine, zone). Spine s1's nodes are listed so that the plan, filling nodes in name order,
# puts the last member into a zone an earlier member holds.
NO_ROOM_IN_S1 = (
    ("n1", "s1", "za"),
    ("n2", "s1", "zb"),
    ("n3", "s1", "za"),
    ("n4", "s2", "zc"),
    ("n5", "s2", "zd"),
)
ROOM_IN_S1 = (*NO_ROOM_IN_S1, ("n6", "s1", "ze"))
# for a group of four: s1 has four nodes but three zones, s2 two nodes in two zones
GROUP_NODES = (
    ("n1", "s1", "za"),
    ("n2", "s1", "zb"),
    ("n3", "s1", "zc"),
    ("n4", "s1", "za"),
    ("n5", "s2", "zd"),
    ("n6", "s2", "ze"),
)
SPINE_OF = {name: spine for name, spine, _ in ROOM_IN_S1}


# ------------------------------------------------------------------------------------------------ builders
def node(name: str, spine: str, zone: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, SPINE_LABEL: spine, ZONE_LABEL: zone},
        },
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        # no two members share a zone
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "job"}}, "topologyKey": ZONE_LABEL}
                ]
            }
        },
        "containers": [{"name": "c", "image": "trainer", "resources": {"requests": {"cpu": "1"}}}],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "job", **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def annotated_gang(
    count: int, min_member: int, spec: str, policy: str = "once-satisfied", bound: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Gang `job` declared by annotations: `count` pods job-0.., the first ones bound to `bound`."""
    annotations = {
        f"{GANG}/name": "job",
        f"{GANG}/min-available": str(min_member),
        f"{GANG}/match-policy": policy,
        SPEC: spec,
    }
    return [
        pod(f"job-{i}", annotations=annotations, node_name=bound[i] if i < len(bound) else None)
        for i in range(count)
    ]


def pod_group(name: str, min_member: int, spec: str | None) -> dict[str, Any]:
    annotations = {GROUPS: json.dumps(["default/launcher", "default/workers"])}
    if spec is not None:
        annotations[SPEC] = spec
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"minMember": min_member},
    }


def launcher_and_workers(launcher_spec: str | None, workers_spec: str | None) -> list[dict[str, Any]]:
    """A gang group: PodGroup launcher (minMember 1, one pod) and workers (minMember 2, three pods)."""
    return [
        pod_group("launcher", 1, launcher_spec),
        pod_group("workers", 2, workers_spec),
        pod("launcher", labels={PG_LABEL: "launcher"}),
        *(pod(f"worker-{i}", labels={PG_LABEL: "workers"}) for i in range(3)),
    ]


def simulate(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    nodes: Sequence[tuple[str, str, str]],
    workload: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    docs = [TOPOLOGY, *(node(*n) for n in nodes), *workload]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["simulate", str(path), "--output", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report: dict[str, Any] = json.loads(out.out)
    return report


def pods_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def bound_spines(report: dict[str, Any]) -> set[str]:
    return {SPINE_OF[p["node"]] for p in report["pods"] if p["phase"] == "Bound"}


# ------------------------------------------------------------------------------------- late members
@pytest.mark.parametrize(
    "policy",
    [
        # once-satisfied: the late member is scheduled on its own, as an ordinary pod
        pytest.param("once-satisfied", id="once-satisfied"),
        # waiting-and-running: the late member comes back in a pass of its own
        pytest.param("waiting-and-running", id="waiting-and-running"),
    ],
)
@pytest.mark.parametrize(
    ("nodes", "late_node"),
    [
        # s1's two zones are taken, s2 has two free zones: the late member must not go there
        pytest.param(NO_ROOM_IN_S1, None, id="no-room-left-in-the-domain-stays-pending"),
        # s1 still has a free zone (n6): the late member goes there, not to s2
        pytest.param(ROOM_IN_S1, "n6", id="room-left-in-the-domain-is-used"),
    ],
)
def test_member_beyond_min_member_stays_in_the_must_gather_domain(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    policy: str,
    nodes: Sequence[tuple[str, str, str]],
    late_node: str | None,
) -> None:
    report = simulate(capsys, tmp_path, nodes, annotated_gang(3, 2, MUST_SPINE, policy))
    members = pods_of(report)
    # the plan fills s1's nodes in name order: job-0 on n1 (za), job-1 on n2 (zb), job-2 on n3 (za)
    assert (members["job-0"]["node"], members["job-1"]["node"]) == ("n1", "n2"), members
    assert bound_spines(report) == {"s1"}, members
    late = members["job-2"]
    if late_node is None:
        assert (late["phase"], late["node"]) == ("Pending", None), late
    else:
        assert (late["phase"], late["node"]) == ("Bound", late_node), late


def test_prefer_gather_does_not_confine_a_member_placed_later(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Koordinator confines late members only under MustGather ("no must-gather requirement, the
    # topology is only a soft preference"): the late member takes a free zone in s2
    report = simulate(capsys, tmp_path, NO_ROOM_IN_S1, annotated_gang(3, 2, PREFER_SPINE))
    members = pods_of(report)
    assert {members["job-0"]["node"], members["job-1"]["node"]} == {"n1", "n2"}
    assert members["job-2"]["phase"] == "Bound"
    assert SPINE_OF[members["job-2"]["node"]] == "s2"


def test_members_already_in_two_domains_leave_the_late_member_pending_with_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # bound before the scheduler saw the spec (or by someone else): no one spine holds the group
    workload = annotated_gang(3, 2, MUST_SPINE, bound=("n1", "n4"))
    report = simulate(capsys, tmp_path, NO_ROOM_IN_S1, workload)
    late = pods_of(report)["job-2"]
    assert (late["phase"], late["node"]) == ("Pending", None), late
    for fragment in ("MustGather", "2 SpineLayer domains", "s1: default/job-0", "s2: default/job-1"):
        assert fragment in late["message"], late["message"]


# --------------------------------------------------------------------------------------------- gang group
@pytest.mark.parametrize(
    ("launcher_spec", "workers_spec"),
    [
        pytest.param(MUST_SPINE, None, id="spec-on-the-launcher-only"),
        pytest.param(None, MUST_SPINE, id="spec-on-the-workers-only"),
        pytest.param(MUST_SPINE, MUST_SPINE, id="spec-on-both"),
    ],
)
def test_one_gangs_spec_confines_the_whole_gang_group_late_members_included(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, launcher_spec: str | None, workers_spec: str | None
) -> None:
    # Koordinator plans every pending pod of the gang group into one domain (FindOneNode over
    # getPendingPods(gangGroup)). s1 has four nodes but three zones: launcher n1 (za), worker-0 n2
    # (zb), worker-1 n3 (zc) are bound; worker-2, planned on n4 (za), does not fit, and s2's free
    # zones are not for it
    report = simulate(capsys, tmp_path, GROUP_NODES, launcher_and_workers(launcher_spec, workers_spec))
    members = pods_of(report)
    placed = {name: p["node"] for name, p in members.items() if p["phase"] == "Bound"}
    assert placed == {"launcher": "n1", "worker-0": "n2", "worker-1": "n3"}, members
    assert (members["worker-2"]["phase"], members["worker-2"]["node"]) == ("Pending", None)


def test_gangs_of_a_group_with_different_specs_are_refused_on_every_member(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Koordinator would use the spec of whichever gang's pod opens the round; koordpy refuses
    prefer = PREFER_SPINE
    report = simulate(capsys, tmp_path, GROUP_NODES, launcher_and_workers(MUST_SPINE, prefer))
    members = pods_of(report)
    assert len(members) == 4
    for p in members.values():
        assert (p["phase"], p["reason"], p["node"]) == ("Pending", "InvalidSpec", None), p
        for fragment in (
            "default/launcher (MustGather SpineLayer)",
            "default/workers (PreferGather SpineLayer)",
        ):
            assert fragment in p["message"], p["message"]
    for group in report["podGroups"]:
        assert "different placements" in (group["message"] or ""), group


def test_gangs_of_a_group_listing_the_same_rules_in_another_order_agree(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rules = [
        {"layer": "SpineLayer", "strategy": "MustGather"},
        {"layer": "NodeTopologyLayer", "strategy": "PreferGather"},
    ]
    one, other = json.dumps({"gatherStrategy": rules}), json.dumps({"gatherStrategy": rules[::-1]})
    report = simulate(capsys, tmp_path, GROUP_NODES, launcher_and_workers(one, other))
    members = pods_of(report)
    assert "InvalidSpec" not in {p["reason"] for p in members.values()}
    placed = {name: p["node"] for name, p in members.items() if p["phase"] == "Bound"}
    assert placed == {"launcher": "n1", "worker-0": "n2", "worker-1": "n3"}, members


# ------------------------------------------------------------------------------------- the domain rule
# the seed tree: s1 = b2 (node-1, node-2), b1 (node-3, node-4); s2 = b3 (node-5, node-6), b4 (node-7,
# node-8); plus node-9, which has a block label but no spine label and so is left out of the tree
SEED_WITH_STRAY = {**SEED_NODE_LABELS, "node-9": {BLOCK_KEY: "b9"}}
STRAY_TREE = build_tree(
    parse_layer_chain(SEED_SPEC),
    [Node.from_dict({"metadata": {"name": n, "labels": dict(lab)}}) for n, lab in SEED_WITH_STRAY.items()],
)


@pytest.mark.parametrize(
    ("layer", "placed", "expected"),
    [
        pytest.param("SpineLayer", {}, None, id="nothing-placed-confines-nothing"),
        pytest.param(
            "SpineLayer",
            {"a": "node-1", "b": "node-3"},
            ("s1",),
            id="two-blocks-of-one-spine-are-one-spine-domain",
        ),
        pytest.param("BlockLayer", {"a": "node-1", "b": "node-2"}, ("s1", "b2"), id="one-block"),
        pytest.param(NODE_LAYER, {"a": "node-5", "b": "node-5"}, ("s2", "b3", "node-5"), id="one-node"),
        pytest.param(CLUSTER_LAYER, {"a": "node-1", "b": "node-8"}, (), id="the-cluster-holds-all"),
        pytest.param(
            "BlockLayer",
            {"a": "node-1", "b": "node-3"},
            "2 BlockLayer domains (s1/b1: b; s1/b2: a)",
            id="two-blocks-under-block-must-gather",
        ),
        pytest.param(
            NODE_LAYER, {"a": "node-1", "b": "node-2"}, "2 NodeTopologyLayer domains", id="two-nodes"
        ),
        pytest.param(
            "SpineLayer",
            {"a": "node-1", "b": "node-9"},
            "member b is on node node-9, which is not in the ClusterNetworkTopology's tree "
            "(no label network.topology.nvidia.com/spine for layer SpineLayer)",
            id="member-on-a-node-left-out-of-the-tree",
        ),
        pytest.param(
            "SpineLayer",
            {"a": "gone"},
            "member a is on node gone, which is not in",
            id="member-on-an-unknown-node",
        ),
    ],
)
def test_placed_domain_is_the_one_must_gather_domain_of_the_placed_members(
    layer: str, placed: dict[str, str], expected: tuple[str, ...] | str | None
) -> None:
    found = placed_domain(STRAY_TREE, layer, placed)
    if expected is None or isinstance(expected, str):
        if isinstance(expected, str):
            assert isinstance(found, str) and expected in found, found
        else:
            assert found is None
        return
    assert isinstance(found, GatherDomain), found
    assert found.path == expected
    if layer == NODE_LAYER:
        assert found.nodes == {expected[-1]}
    else:
        assert found.nodes == set(STRAY_TREE.leaves(expected))
        assert "node-9" not in found.nodes


# --------------------------------------------------------------------------------- the satisfied mark
def annotated_member(name: str, node_name: str | None = None) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {f"{GANG}/name": "job", f"{GANG}/min-available": "1", SPEC: MUST_SPINE},
            },
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "x"}]},
        }
    )


def test_a_job_created_again_after_all_its_pods_went_is_not_once_satisfied() -> None:
    # a gang group's shared state (and its once-satisfied mark) goes with its last gang: a job
    # recreated under the same name is placed as a group again, not confined to where the old
    # one was (it has no placed member to tell that anyway)
    registry = GangRegistry(VirtualClock(), "once-satisfied")
    bound = annotated_member("job-0", "node-1")
    registry.on_pod("Add", bound)
    gang = registry.gang(bound)
    assert gang is not None and registry.once_satisfied(gang)
    registry.on_pod("Delete", bound)
    again = annotated_member("job-0")
    registry.on_pod("Add", again)
    gang = registry.gang(again)
    assert gang is not None and not registry.once_satisfied(gang)
