"""A gang group that stays pending says what would make it fit, after the reference systems' own
words: for a plain gang, how many members of each shape fit nowhere and how many more nodes with
how much free room would take them (counting only nodes that pass the members' other filters); for
a topology gang, the best domain of its MustGather layer, the slots it lacks, and the lower-priority
jobs there whose eviction would make the room when the gang may preempt.

Every expected number is worked out by hand from the nodes and requests of the case."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from koordpy.api.podgroup import SIGS_GROUP, SIGS_POD_LABEL
from koordpy.cli import main
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.plugins.coscheduling.explain import copies
from koordpy.plugins.coscheduling.registry import GANG_REGISTRY, GangRegistry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from koordpy.status.podgroup import GANG_SCHEDULED
from operators.podgroup import GroupKey
from tests.builders import make_node, network_topology, pod_dict, settle
from tests.operators.fakes import NAMESPACE, pod
from tests.operators.fakes import settle as settle_operator
from tests.operators.test_controllers import running as operator_running

GPU = "nvidia.com/gpu"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
GANG_MODE = "gang.scheduling.koordinator.sh/mode"
TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
BLOCK = "network.topology.nvidia.com/block"
MUST_GATHER_BLOCK = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}'
TOPOLOGY = network_topology(("BlockLayer", BLOCK))


def new_world() -> MemoryCluster:
    clock = VirtualClock(0.0)
    return MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)


def gang_registry(world: MemoryCluster) -> GangRegistry:
    found = world.scheduler.shared.get(GANG_REGISTRY)
    assert found is not None
    return found


@dataclass
class Member:
    name: str
    requests: Mapping[str, str]
    node_selector: Mapping[str, str] = field(default_factory=dict)


def add_gang(
    world: MemoryCluster,
    members: list[Member],
    min_member: int,
    annotations: Mapping[str, str] | None = None,
    priority: int | None = None,
) -> None:
    for m in members:
        body = pod_dict(
            m.name,
            extra_requests=dict(m.requests),
            priority=priority,
            annotations={GANG_NAME: "g", GANG_MIN: str(min_member), **(annotations or {})},
        )
        if m.node_selector:
            body["spec"]["nodeSelector"] = dict(m.node_selector)
        world.add_pod(body)


# ---------------------------------------------------------------------------- room as arrays
@pytest.mark.parametrize(
    ("free", "asked", "expected"),
    [
        pytest.param([[8, 32], [3, 40]], [4, 16], [2, 0], id="the scarcer column decides"),
        pytest.param([[8, 32], [-2, 40]], [4, 16], [2, 0], id="over-committed room holds nothing"),
        pytest.param([[9, 0], [16, 5]], [4, 0], [2, 4], id="columns not asked for do not count"),
    ],
)
def test_copies_are_the_floor_of_the_least_column(
    free: list[list[int]], asked: list[int], expected: list[int]
) -> None:
    got = copies(np.array(free, dtype=np.int64), np.array(asked, dtype=np.int64))
    assert got.tolist() == expected


# ---------------------------------------------------------------------------- plain gangs
def gpu_nodes(
    count: int, gpus: str = "8", labels: Mapping[str, str] | None = None, first: int = 0
) -> list[Any]:
    return [
        make_node(f"n{i}", cpu="32", memory="128Gi", labels=labels, extra={GPU: gpus})
        for i in range(first, first + count)
    ]


def same_shape(
    count: int, requests: Mapping[str, str], selector: Mapping[str, str] | None = None
) -> list[Member]:
    return [Member(f"g-{i}", requests, dict(selector or {})) for i in range(count)]


TRAINER = {"cpu": "4", "memory": "16Gi", GPU: "8"}

PLAIN_CASES = [
    pytest.param(
        gpu_nodes(3),
        same_shape(8, TRAINER),
        8,
        # one 8-GPU pod per node: 3 fit, 5 do not; an empty node of the cluster holds one, and GPU
        # is the only column short over the nodes (cpu 3 x 32 / 4 = 24 copies, memory 24)
        "5 of 8 pods (cpu 4, memory 16Gi, nvidia.com/gpu 8) fit nowhere: the 3 nodes that pass their "
        "other filters have room for 3; 5 more such pods would need 5 more nodes with nvidia.com/gpu 8 free",
        id="short by five one-per-node pods",
    ),
    pytest.param(
        gpu_nodes(2, gpus="16"),
        same_shape(10, {"cpu": "1", GPU: "4"}),
        10,
        # 16 / 4 = 4 per node: 8 fit, 2 do not; an empty node holds 4, so one node with room for
        # the two (8 GPUs) is enough
        "2 of 10 pods (cpu 1, nvidia.com/gpu 4) fit nowhere: the 2 nodes that pass their other filters "
        "have room for 8; 2 more such pods would need 1 more node with nvidia.com/gpu 8 free",
        id="several per node: the nodes are counted by how many each holds",
    ),
    pytest.param(
        [make_node("n0", cpu="8", memory="32Gi"), make_node("n1", cpu="8", memory="32Gi")],
        [
            Member("a-0", {"cpu": "2"}),
            Member("a-1", {"cpu": "2"}),
            Member("b-0", {"cpu": "8"}),
            Member("b-1", {"cpu": "8"}),
        ],
        4,
        # in member order the two 2-cpu pods take 4 cpus of n0; of the 8-cpu pods only one fits
        # (on n1), and the remaining one needs a whole 8-cpu node
        "1 of 2 pods (cpu 8) fit nowhere: the 2 nodes that pass their other filters have room for 1; "
        "1 more such pod would need 1 more node with cpu 8 free",
        id="two shapes: the second sees the room the first took",
    ),
    pytest.param(
        [*gpu_nodes(2, labels={"pool": "train"}), *gpu_nodes(2, first=2)],
        same_shape(4, {GPU: "8"}, {"pool": "train"}),
        4,
        # only n0 and n1 match the selector; each holds one
        "2 of 4 pods (nvidia.com/gpu 8) fit nowhere: the 2 nodes that pass their other filters have "
        "room for 2; 2 more such pods would need 2 more nodes with nvidia.com/gpu 8 free",
        id="affinity: the nodes that match have no room",
    ),
    pytest.param(
        gpu_nodes(4),
        same_shape(4, {GPU: "8"}, {"pool": "h100"}),
        4,
        "4 of 4 pods (nvidia.com/gpu 8) fit nowhere: no node passes their other filters "
        "(4 node(s) didn't match Pod's node affinity/selector); 4 such pods would need 4 nodes that do, "
        "with nvidia.com/gpu 8 free",
        id="affinity: no node matches",
    ),
]


@pytest.mark.parametrize(("nodes", "members", "min_member", "explanation"), PLAIN_CASES)
def test_a_plain_gang_says_how_many_pods_fit_nowhere_and_what_would_take_them(
    nodes: list[Any], members: list[Member], min_member: int, explanation: str
) -> None:
    world = new_world()
    for node in nodes:
        world.add_node(node)
    add_gang(world, members, min_member)
    settle(world)
    message = gang_registry(world).messages["default/g"]
    # Koordinator's words stay first; the explanation is the second sentence
    assert message.startswith("gang default/g cannot be placed as a whole: ")
    assert message.endswith(". " + explanation)


def test_a_non_strict_gang_counts_only_what_its_minimum_lacks() -> None:
    world = new_world()
    for node in gpu_nodes(3):
        world.add_node(node)
    # six members, four needed: NonStrict keeps the three that fit waiting on the three nodes, the
    # other three fit nowhere, and one more 8-GPU node places the minimum
    add_gang(world, same_shape(6, {GPU: "8"}), 4, annotations={GANG_MODE: "NonStrict"})
    settle(world)
    message = gang_registry(world).messages["default/g"]
    assert message.endswith(
        ". 3 of 3 pods (nvidia.com/gpu 8) fit nowhere: the 3 nodes that pass their other filters have "
        "room for 0; 1 more such pod would need 1 more node with nvidia.com/gpu 8 free"
    )


def test_a_gang_that_fits_is_told_nothing() -> None:
    world = new_world()
    for node in gpu_nodes(2):
        world.add_node(node)
    add_gang(world, same_shape(2, {GPU: "8"}), 2)
    settle(world)
    assert "default/g" not in gang_registry(world).messages
    assert all(world.views[f"default/g-{i}"].node_name for i in range(2))


# ---------------------------------------------------------------------------- topology gangs
def block_nodes(layout: Mapping[str, str]) -> list[Any]:
    return [
        make_node(name, cpu="32", memory="128Gi", labels={BLOCK: block}, extra={GPU: "8"})
        for name, block in layout.items()
    ]


# block b1: node-1 .. node-4, block b2: node-5, node-6; every node holds one 8-GPU pod
LAYOUT = {
    "node-1": "b1",
    "node-2": "b1",
    "node-3": "b1",
    "node-4": "b1",
    "node-5": "b2",
    "node-6": "b2",
}


def running(name: str, node: str, priority: int, owner: str | None = None) -> dict[str, Any]:
    body = pod_dict(name, node_name=node, priority=priority, extra_requests={GPU: "8"})
    if owner is not None:
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner, "controller": True}
        ]
    return body


TOPOLOGY_CASES = [
    pytest.param(
        [running("a", "node-3", 10), running("b", "node-4", 10)],
        100,
        # b1 and b2 both offer 2 of the 4 slots; b1 is first by name. Evicting a alone leaves 3
        "The group needs 4 pods in one BlockLayer domain; best is b1 with 2 free slots; 2 more nodes with "
        "nvidia.com/gpu 8 free in b1, or preempting jobs default/a, default/b (priority 10) would place it",
        id="two lower-priority jobs make the room",
    ),
    pytest.param(
        [running("a", "node-3", 10, owner="web"), running("b", "node-4", 10, owner="web")],
        100,
        # both pods belong to one controller: one job
        "The group needs 4 pods in one BlockLayer domain; best is b1 with 2 free slots; 2 more nodes with "
        "nvidia.com/gpu 8 free in b1, or preempting job default/ReplicaSet/web (priority 10) would place it",
        id="a job is counted once however many pods it has",
    ),
    pytest.param(
        [running("a", "node-3", 10), running("b", "node-4", 200)],
        100,
        # b outranks the gang: evicting a alone leaves b1 one slot short, so no job is named
        "The group needs 4 pods in one BlockLayer domain; best is b1 with 2 free slots; 2 more nodes with "
        "nvidia.com/gpu 8 free in b1 would place it",
        id="no lower-priority jobs would do",
    ),
    pytest.param(
        [running("a", "node-3", 200), running("b", "node-4", 200)],
        100,
        "The group needs 4 pods in one BlockLayer domain; best is b1 with 2 free slots; 2 more nodes with "
        "nvidia.com/gpu 8 free in b1 would place it",
        id="every pod there outranks the gang",
    ),
]


@pytest.mark.parametrize(("occupants", "priority", "explanation"), TOPOLOGY_CASES)
def test_a_topology_gang_names_the_best_domain_and_its_shortfall(
    occupants: list[dict[str, Any]], priority: int, explanation: str
) -> None:
    world = new_world()
    for node in block_nodes(LAYOUT):
        world.add_node(node)
    world.scheduler.on_object("ClusterNetworkTopology", "Add", TOPOLOGY)
    for body in occupants:
        world.add_pod(body)
    add_gang(
        world, same_shape(4, {GPU: "8"}), 4, annotations={TOPOLOGY_SPEC: MUST_GATHER_BLOCK}, priority=priority
    )
    world.apply(world.scheduler.drain())
    # the first pass: the group fits no block (job-level preemption may act after it)
    assert world.scheduler.schedule_one()
    world.apply(world.scheduler.drain())
    message = gang_registry(world).messages["default/g"]
    assert message.startswith("gang default/g cannot be placed as a whole: ")
    assert "no BlockLayer domain can hold the gang group (MustGather)" in message
    assert message.endswith(". " + explanation)


# ---------------------------------------------------------------------------- through simulate
SCENARIO = Path(__file__).parent.parent / "scenarios" / "gangs" / "explain_pending.yaml"


def test_simulate_reports_the_explanation_as_the_pod_groups_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", str(SCENARIO), "--output", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    messages = {g["name"]: g["message"] for g in report["podGroups"]}
    # six 8-GPU nodes, two held by serving pods that outrank the gangs: four free, two per block
    assert messages["trainer"].endswith(
        ". 4 of 8 pods (cpu 4, memory 16Gi, nvidia.com/gpu 8) fit nowhere: the 6 nodes that pass their "
        "other filters have room for 4; 4 more such pods would need 4 more nodes with nvidia.com/gpu 8 free"
    )
    assert messages["allreduce"].endswith(
        ". The group needs 4 pods in one BlockLayer domain; best is b1 with 2 free slots; 2 more nodes "
        "with nvidia.com/gpu 8 free in b1 would place it"
    )
    # and as the GangScheduled condition the PodGroup operator writes on a sigs PodGroup
    for group in report["podGroups"]:
        scheduled = [c for c in group.get("conditions", []) if c["type"] == "GangScheduled"]
        assert [(c["status"], c["reason"], c["message"]) for c in scheduled] == [
            ("False", "Unschedulable", messages[group["name"]])
        ]
    assert {p["name"]: p["phase"] for p in report["pods"]} == {
        **{f"trainer-{i}": "Pending" for i in range(8)},
        **{f"allreduce-{i}": "Pending" for i in range(4)},
        "serving-0": "Bound",
        "serving-1": "Bound",
    }


# ---------------------------------------------------------------------------- the operator
def pending_member(name: str, message: str | None) -> dict[str, Any]:
    conditions = (
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]
        if message is not None
        else None
    )
    return pod(name, {SIGS_POD_LABEL: "gang"}, conditions=conditions)


SHORT = (
    "gang default/gang cannot be placed as a whole: default/gang 1 of minMember 2 members could be placed; "
    "pod default/m1 does not fit: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu. 1 of 2 pods "
    "(nvidia.com/gpu 8) fit nowhere: the 1 node that passes their other filters has room for 1; 1 more "
    "such pod would need 1 more node with nvidia.com/gpu 8 free"
)


async def test_the_operator_writes_why_the_gang_is_pending_and_drops_it_once_placed() -> None:
    async with operator_running(member_batch=0) as cluster:
        key = GroupKey(SIGS_GROUP, NAMESPACE, "gang")
        cluster.facts.synced.set()
        cluster.create_group(key, 2)
        # the scheduler's message on its pending members becomes the group's condition
        cluster.pod_event(pending_member("m0", SHORT))
        cluster.pod_event(pending_member("m1", SHORT))
        await settle_operator()
        status = cluster.status(key)
        assert status["phase"] == "Scheduling"
        (condition,) = status["conditions"]
        assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
            "type": GANG_SCHEDULED,
            "status": "False",
            "reason": "Unschedulable",
            "message": SHORT,
        }
        # a new verdict of the scheduler replaces it
        later = SHORT.replace("1 more node", "2 more nodes")
        cluster.pod_event(pending_member("m0", later))
        cluster.pod_event(pending_member("m1", later))
        await settle_operator()
        assert cluster.status(key)["conditions"][0]["message"] == later
        # once the gang is placed, nothing is missing any more
        for name, node_name in (("m0", "n1"), ("m1", "n2")):
            cluster.pod_event(pod(name, {SIGS_POD_LABEL: "gang"}, node=node_name, phase="Running"))
        await settle_operator()
        status = cluster.status(key)
        assert status["phase"] == "Running"
        assert not status.get("conditions")
