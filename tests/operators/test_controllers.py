"""The PodGroup and topology controllers fed by a ClusterFacts and a fake apiserver: nothing is
computed before the facts have synced, each reconcile takes one documented step from the latest
object seen, and status is written only when it changes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from koordpy.api.podgroup import SIGS_POD_LABEL, X_K8S_POD_LABEL
from koordpy.kubeapi.informer import ADD, DELETE, UPDATE
from operators.facts import ClusterFacts
from operators.podgroup import GroupKey, PodGroupController
from operators.topology import PATH as TOPOLOGY_PATH
from operators.topology import TopologyController
from tests.operators.fakes import NAMESPACE, FakeApi, node, pod, settle
from tests.topology.test_detail_status import SEED_DETAIL_STATUS, SEED_NODE_LABELS, SEED_SPEC

SIGS = "scheduling.sigs.k8s.io"
X_K8S = "scheduling.x-k8s.io"
LABELS = {SIGS: SIGS_POD_LABEL, X_K8S: X_K8S_POD_LABEL}


def podgroup_path(key: GroupKey) -> str:
    return f"/apis/{key.api_group}/v1alpha1/namespaces/{key.namespace}/podgroups/{key.name}"


def podgroup(key: GroupKey, min_member: Any, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": f"{key.api_group}/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": key.name, "namespace": key.namespace, "uid": f"uid-{key.name}"},
        "spec": {"minMember": min_member},
    }
    if status is not None:
        obj["status"] = status
    return obj


@dataclass
class Cluster:
    """A PodGroupController running against a FakeApi whose writes come back to it as kopf's
    watch would bring them."""

    api: FakeApi
    facts: ClusterFacts
    controller: PodGroupController
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)

    def create_group(self, key: GroupKey, min_member: Any, status: dict[str, Any] | None = None) -> None:
        stored = self.api.put(podgroup_path(key), podgroup(key, min_member, status))
        self.controller.podgroup_changed(key, stored)

    def pod_event(self, obj: dict[str, Any], action: str | None = None) -> None:
        name = obj["metadata"]["name"]
        old = self.pods.get(name)
        if action is None:
            action = UPDATE if old is not None else ADD
        self.facts.on_pod(action, obj, old)
        if action == DELETE:
            self.pods.pop(name, None)
        else:
            self.pods[name] = obj

    def status(self, key: GroupKey) -> dict[str, Any]:
        return dict(self.api.objects[podgroup_path(key)].get("status") or {})

    def phases_written(self, key: GroupKey) -> list[str]:
        return [patch["status"]["phase"] for patch in self.api.patches(podgroup_path(key) + "/status")]


@contextlib.asynccontextmanager
async def running(
    member_batch: float, *, groups_without_status: tuple[str, ...] = ()
) -> AsyncIterator[Cluster]:
    api, facts = FakeApi(groups_without_status=groups_without_status), ClusterFacts()
    controller = PodGroupController(api, facts, workers=2, member_batch=member_batch)

    def watched(path: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        controller.podgroup_changed(
            GroupKey(obj["apiVersion"].split("/")[0], meta["namespace"], meta["name"]), obj
        )

    api.watch = watched
    task = asyncio.create_task(controller.run())
    try:
        yield Cluster(api, facts, controller)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest_asyncio.fixture(loop_scope="function")
async def cluster() -> AsyncIterator[Cluster]:
    # member changes are reconciled at once here; their gathering has a test of its own
    async with running(member_batch=0) as c:
        yield c


def members(api_group: str, *specs: tuple[str, str, str]) -> list[dict[str, Any]]:
    """Member pods of group `gang`: (name, node, phase)."""
    return [pod(name, {LABELS[api_group]: "gang"}, node=n, phase=phase) for name, n, phase in specs]


# (API group, minMember, member pods, the status expected once it stops moving)
# Expected values follow koordpy.status.podgroup's documented phases.
SETTLED: dict[str, tuple[str, int, list[dict[str, Any]], dict[str, Any]]] = {
    "sigs: no members yet: Pending": (
        SIGS,
        2,
        [],
        {"phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0},
    ),
    "sigs: enough members, none placed: Scheduling since a start time": (
        SIGS,
        2,
        members(SIGS, ("m0", "", "Pending"), ("m1", "", "Pending")),
        {
            "phase": "Scheduling",
            "scheduled": 0,
            "running": 0,
            "succeeded": 0,
            "failed": 0,
            "occupiedBy": f"{NAMESPACE}/train",
        },
    ),
    "sigs: all placed, not yet running: Scheduled": (
        SIGS,
        2,
        members(SIGS, ("m0", "n1", "Pending"), ("m1", "n2", "Pending")),
        {
            "phase": "Scheduled",
            "scheduled": 2,
            "running": 0,
            "succeeded": 0,
            "failed": 0,
            "occupiedBy": f"{NAMESPACE}/train",
        },
    ),
    "sigs: all running: Running": (
        SIGS,
        2,
        members(SIGS, ("m0", "n1", "Running"), ("m1", "n2", "Running")),
        {
            "phase": "Running",
            "scheduled": 2,
            "running": 2,
            "succeeded": 0,
            "failed": 0,
            "occupiedBy": f"{NAMESPACE}/train",
        },
    ),
    "sigs: all succeeded: Finished, finished members counted": (
        SIGS,
        2,
        members(SIGS, ("m0", "n1", "Succeeded"), ("m1", "n2", "Succeeded")),
        {
            "phase": "Finished",
            "scheduled": 2,
            "running": 0,
            "succeeded": 2,
            "failed": 0,
            "occupiedBy": f"{NAMESPACE}/train",
        },
    ),
    "sigs: one failed among enough started: Failed": (
        SIGS,
        2,
        members(SIGS, ("m0", "n1", "Running"), ("m1", "n2", "Failed")),
        {
            "phase": "Failed",
            "scheduled": 2,
            "running": 1,
            "succeeded": 0,
            "failed": 1,
            "occupiedBy": f"{NAMESPACE}/train",
        },
    ),
    "x-k8s: too few members: Pending": (
        X_K8S,
        3,
        members(X_K8S, ("m0", "n1", "Running"), ("m1", "n2", "Running")),
        {"phase": "Pending", "running": 2, "succeeded": 0, "failed": 0},
    ),
    "x-k8s: enough members, not running: Scheduling": (
        X_K8S,
        2,
        members(X_K8S, ("m0", "n1", "Pending"), ("m1", "", "Pending")),
        {
            "phase": "Scheduling",
            "running": 0,
            "succeeded": 0,
            "failed": 0,
            "occupiedBy": f"{NAMESPACE}/train",
        },
    ),
    "x-k8s: running and succeeded reach minMember: Running": (
        X_K8S,
        2,
        members(X_K8S, ("m0", "n1", "Running"), ("m1", "n2", "Succeeded"), ("m2", "", "Pending")),
        {"phase": "Running", "running": 1, "succeeded": 1, "failed": 0, "occupiedBy": f"{NAMESPACE}/train"},
    ),
}


@pytest.mark.parametrize(
    ("api_group", "min_member", "pods", "expected"), SETTLED.values(), ids=SETTLED.keys()
)
async def test_status_settles_on_the_documented_phase(
    cluster: Cluster, api_group: str, min_member: int, pods: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    key = GroupKey(api_group, NAMESPACE, "gang")
    for obj in pods:
        cluster.pod_event(obj)
    cluster.create_group(key, min_member)
    cluster.facts.synced.set()
    await settle()
    status = cluster.status(key)
    start = status.pop("scheduleStartTime", None)
    assert status == expected
    # Scheduling records when it began (in both groups), and it stays recorded
    assert (start is not None) == ("Scheduling" in cluster.phases_written(key))
    # one step per write: a new group is Pending first, however many members it has
    assert cluster.phases_written(key)[0] == "Pending"
    # the object is never read: the controller works from what kopf (here, the watch) brought
    assert not [call for call in cluster.api.calls if call[0] == "GET"]


async def test_nothing_is_written_before_the_facts_have_synced(cluster: Cluster) -> None:
    key = GroupKey(X_K8S, NAMESPACE, "gang")
    cluster.create_group(key, 2)
    for obj in members(X_K8S, ("m0", "n1", "Running")):
        cluster.pod_event(obj)
    await settle()
    assert cluster.api.calls == []
    # the second member is listed last: the counts written must include it
    for obj in members(X_K8S, ("m1", "n2", "Running")):
        cluster.pod_event(obj)
    cluster.facts.synced.set()
    await settle()
    assert cluster.phases_written(key) == ["Pending", "Scheduling", "Running"]
    assert cluster.status(key)["running"] == 2


async def test_phases_follow_the_members_as_they_change(cluster: Cluster) -> None:
    key = GroupKey(X_K8S, NAMESPACE, "gang")
    cluster.facts.synced.set()
    cluster.create_group(key, 2)
    await settle()
    assert cluster.status(key)["phase"] == "Pending"
    for obj in members(X_K8S, ("m0", "", "Pending"), ("m1", "", "Pending")):
        cluster.pod_event(obj)
    await settle()
    assert cluster.status(key)["phase"] == "Scheduling"
    for obj in members(X_K8S, ("m0", "n1", "Running"), ("m1", "n2", "Running")):
        cluster.pod_event(obj)
    await settle()
    assert cluster.status(key)["phase"] == "Running"
    assert cluster.status(key)["running"] == 2

    # a member that goes away is counted too: fewer than minMember is Pending again
    cluster.pod_event(cluster.pods["m0"], DELETE)
    await settle()
    assert cluster.status(key)["running"] == 1
    assert cluster.status(key)["phase"] == "Pending"

    # a change of nothing the status counts writes nothing
    writes = len(cluster.api.patches())
    cluster.pod_event(
        pod("m1", {X_K8S_POD_LABEL: "gang"}, node="n2", phase="Running", conditions=[{"type": "Ready"}])
    )
    cluster.controller.podgroup_changed(
        key, cluster.api.put(podgroup_path(key), cluster.api.objects[podgroup_path(key)])
    )
    await settle()
    assert len(cluster.api.patches()) == writes


async def test_members_binding_together_make_one_status_write() -> None:
    async with running(member_batch=0.2) as cluster:
        key = GroupKey(X_K8S, NAMESPACE, "gang")
        cluster.facts.synced.set()
        cluster.create_group(key, 4)
        for obj in members(X_K8S, *((f"m{i}", "", "Pending") for i in range(4))):
            cluster.pod_event(obj)
        await asyncio.sleep(0.4)
        before = len(cluster.api.patches(podgroup_path(key) + "/status"))
        # the four members bind and start moments apart, within the gathering window
        for obj in members(X_K8S, *((f"m{i}", f"n{i}", "Running") for i in range(4))):
            cluster.pod_event(obj)
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.4)
        written = cluster.api.patches(podgroup_path(key) + "/status")[before:]
        assert [w["status"]["running"] for w in written] == [4]
        assert cluster.status(key)["phase"] == "Running"


@pytest.mark.parametrize("phase", ["Finished", "Failed"])
async def test_finished_and_failed_groups_are_left_alone(cluster: Cluster, phase: str) -> None:
    key = GroupKey(SIGS, NAMESPACE, "gang")
    cluster.facts.synced.set()
    cluster.create_group(key, 1, {"phase": phase, "succeeded": 1})
    for obj in members(SIGS, ("m0", "n1", "Running"), ("m1", "", "Pending")):
        cluster.pod_event(obj)
    await settle()
    assert cluster.api.calls == []
    assert len(cluster.controller.queue) == 0


@pytest.mark.parametrize(
    ("api_group", "min_member"),
    [(SIGS, -1), (X_K8S, 0), (SIGS, "two")],
    ids=["negative", "x-k8s zero", "not a number"],
)
async def test_an_invalid_spec_is_logged_once_and_not_written(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, api_group: str, min_member: Any
) -> None:
    key = GroupKey(api_group, NAMESPACE, "gang")
    cluster.facts.synced.set()
    with caplog.at_level(logging.WARNING, logger="koordpy.operators.podgroup"):
        cluster.create_group(key, min_member)
        await settle()
        for obj in members(api_group, ("m0", "n1", "Running")):
            cluster.pod_event(obj)
        cluster.create_group(key, min_member)
        await settle()
    assert cluster.api.calls == []
    invalid = [r for r in caplog.records if "is invalid" in r.getMessage()]
    assert len(invalid) == 1 and "spec.minMember" in invalid[0].getMessage()


async def test_a_step_from_an_outdated_object_is_refused_and_taken_again(cluster: Cluster) -> None:
    key = GroupKey(X_K8S, NAMESPACE, "gang")
    path = podgroup_path(key)
    cluster.create_group(key, 1)
    # another writer moves the object on; its event has not reached the controller yet
    newer = cluster.api.put(path, {**cluster.api.objects[path], "status": {"phase": "Pending", "running": 0}})
    cluster.controller._max_backoff = 0.01
    cluster.facts.synced.set()
    await settle()
    patches = cluster.api.patches(path + "/status")
    assert patches and patches[0]["metadata"]["resourceVersion"] != newer["metadata"]["resourceVersion"]
    assert cluster.status(key) == {"phase": "Pending", "running": 0}
    # once the newer object arrives, the next step is taken from its status
    cluster.controller.podgroup_changed(key, newer)
    await settle()
    assert cluster.status(key)["phase"] == "Pending"
    assert cluster.phases_written(key)[-1] == "Pending"
    assert cluster.status(key)["succeeded"] == 0


def owned_by(obj: dict[str, Any], *owners: str) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}"}
        for owner in owners
    ]
    return obj


# scheduler-plugins' TestFillGroupStatusOccupied (pkg/controllers/podgroup_controller_test.go): a
# group leaving Pending records the owners of a member as "<namespace>/<owner name>", sorted and
# joined by commas.
OCCUPANTS: dict[str, tuple[tuple[str, ...], str]] = {
    "fill the Occupied of PodGroup with a single ownerReference": (
        ("new-occupied",),
        f"{NAMESPACE}/new-occupied",
    ),
    "fill the Occupied of PodGroup with multi ownerReferences": (
        ("new-occupied-2", "new-occupied-1"),
        f"{NAMESPACE}/new-occupied-1,{NAMESPACE}/new-occupied-2",
    ),
    "no ownerReferences, no occupant": ((), ""),
}


@pytest.mark.parametrize("api_group", [X_K8S, SIGS])
@pytest.mark.parametrize(("owners", "occupied"), OCCUPANTS.values(), ids=OCCUPANTS.keys())
async def test_a_group_leaving_pending_records_its_occupant(
    cluster: Cluster, api_group: str, owners: tuple[str, ...], occupied: str
) -> None:
    key = GroupKey(api_group, NAMESPACE, "pg")
    cluster.facts.synced.set()
    for name in ("pod1", "pod2"):
        cluster.pod_event(owned_by(pod(name, {LABELS[api_group]: "pg"}, owner=None), *owners))
    cluster.create_group(key, 2)
    await settle()
    status = cluster.status(key)
    assert status["phase"] != "Pending"
    assert status.get("occupiedBy", "") == occupied


async def test_the_occupant_is_the_member_whose_name_sorts_first(cluster: Cluster) -> None:
    key = GroupKey(X_K8S, NAMESPACE, "pg")
    cluster.facts.synced.set()
    cluster.pod_event(owned_by(pod("worker-b", {X_K8S_POD_LABEL: "pg"}, owner=None), "job-b"))
    cluster.pod_event(owned_by(pod("worker-a", {X_K8S_POD_LABEL: "pg"}, owner=None), "job-a"))
    cluster.create_group(key, 2)
    await settle()
    assert cluster.status(key)["occupiedBy"] == f"{NAMESPACE}/job-a"


async def test_x_k8s_group_reaching_scheduling_records_when_and_keeps_it() -> None:
    async with running(member_batch=0) as cluster:
        key = GroupKey(X_K8S, NAMESPACE, "gang")
        cluster.facts.synced.set()
        cluster.create_group(key, 2)
        for obj in members(X_K8S, ("m0", "", "Pending"), ("m1", "", "Pending")):
            cluster.pod_event(obj)
        await settle()
        scheduling = cluster.status(key)
        assert scheduling["phase"] == "Scheduling"
        assert scheduling["scheduleStartTime"].endswith("Z")
        for obj in members(X_K8S, ("m0", "n1", "Running"), ("m1", "n2", "Running")):
            cluster.pod_event(obj)
        await settle()
        running_status = cluster.status(key)
        assert running_status["phase"] == "Running"
        assert running_status["scheduleStartTime"] == scheduling["scheduleStartTime"]
        assert "scheduled" not in running_status


async def test_status_is_written_to_the_object_where_the_crd_serves_no_status_subresource() -> None:
    # Koordinator's own scheduling.sigs.k8s.io CRD has no status subresource
    async with running(member_batch=0, groups_without_status=(SIGS,)) as cluster:
        key = GroupKey(SIGS, NAMESPACE, "gang")
        cluster.facts.synced.set()
        for obj in members(SIGS, ("m0", "n1", "Running"), ("m1", "n2", "Running")):
            cluster.pod_event(obj)
        cluster.create_group(key, 2)
        await settle()
        status = cluster.status(key)
        assert (status["phase"], status["running"], status["scheduled"]) == ("Running", 2, 2)
        path = podgroup_path(key)
        written = cluster.api.patches(path)
        assert written and all(set(patch) == {"status", "metadata"} for patch in written)
        # a group deleted meanwhile is not found either way, and is let go
        del cluster.api.objects[path]
        calls = len(cluster.api.calls)
        cluster.controller.podgroup_changed(key, podgroup(key, 2))
        await settle()
        assert [(method, p) for method, p, _ in cluster.api.calls[calls:]] == [
            ("PATCH", path + "/status"),
            ("PATCH", path),
        ]
        assert len(cluster.controller.queue) == 0


async def test_a_deleted_group_is_forgotten(cluster: Cluster) -> None:
    key = GroupKey(SIGS, NAMESPACE, "gang")
    cluster.create_group(key, 2)
    cluster.controller.podgroup_changed(key, None)
    for obj in members(SIGS, ("m0", "", "Pending")):
        cluster.pod_event(obj)
    cluster.facts.synced.set()
    await settle()
    assert cluster.api.calls == []


# ---------------------------------------------------------------------------------------------- topology
@dataclass
class Topology:
    api: FakeApi
    facts: ClusterFacts
    controller: TopologyController

    def reads(self) -> int:
        return sum(1 for method, _, _ in self.api.calls if method == "GET")

    def detail(self) -> Any:
        return (self.api.objects[TOPOLOGY_PATH].get("status") or {}).get("detailStatus")


@pytest_asyncio.fixture(loop_scope="function")
async def topology() -> AsyncIterator[Topology]:
    api, facts = FakeApi(), ClusterFacts()
    controller = TopologyController(api, facts, min_interval=0.0)
    task = asyncio.create_task(controller.run())
    try:
        yield Topology(api, facts, controller)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def seed_nodes(facts: ClusterFacts) -> None:
    for name, labels in SEED_NODE_LABELS.items():
        facts.on_node(ADD, node(name, labels), None)


def topology_object(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default", "generation": 1},
        "spec": spec,
    }


async def test_topology_is_computed_once_the_nodes_have_synced(topology: Topology) -> None:
    topology.api.put(TOPOLOGY_PATH, topology_object(SEED_SPEC))
    topology.controller.mark_stale()
    seed_nodes(topology.facts)
    await settle()
    assert topology.api.calls == []
    topology.facts.synced.set()
    await settle()
    assert topology.detail() == SEED_DETAIL_STATUS
    assert len(topology.api.patches()) == 1


Event = Callable[[ClusterFacts], None]

# (what happens to the nodes, whether the status is recomputed, the nodes the tree counts)
NODE_CHANGES: dict[str, tuple[Event, bool, int]] = {
    "a heartbeat": (
        lambda f: f.on_node(UPDATE, node("node-1", SEED_NODE_LABELS["node-1"], heartbeat="later"), None),
        False,
        8,
    ),
    "a relabelled node": (
        lambda f: f.on_node(UPDATE, node("node-1", {**SEED_NODE_LABELS["node-1"], "extra": "x"}), None),
        True,
        8,
    ),
    "a removed node": (
        lambda f: f.on_node(DELETE, node("node-2", SEED_NODE_LABELS["node-2"]), None),
        True,
        7,
    ),
    "a new node": (lambda f: f.on_node(ADD, node("node-9", SEED_NODE_LABELS["node-1"]), None), True, 9),
}


@pytest.mark.parametrize(
    ("change", "recomputed", "node_count"), NODE_CHANGES.values(), ids=NODE_CHANGES.keys()
)
async def test_only_node_set_and_label_changes_recompute_the_topology(
    topology: Topology, change: Event, recomputed: bool, node_count: int
) -> None:
    topology.api.put(TOPOLOGY_PATH, topology_object(SEED_SPEC))
    seed_nodes(topology.facts)
    topology.facts.synced.set()
    await settle()
    reads = topology.reads()
    change(topology.facts)
    await settle()
    assert topology.reads() == reads + (1 if recomputed else 0)
    assert topology.detail()[0]["nodeNum"] == node_count


async def test_a_broken_spec_is_reported_and_the_detail_dropped(topology: Topology) -> None:
    broken = {
        "networkTopologySpec": [
            SEED_SPEC["networkTopologySpec"][0],
            {**SEED_SPEC["networkTopologySpec"][1], "parentTopologyLayer": "RackLayer"},
            SEED_SPEC["networkTopologySpec"][2],
        ]
    }
    topology.api.put(
        TOPOLOGY_PATH, {**topology_object(broken), "status": {"detailStatus": SEED_DETAIL_STATUS}}
    )
    seed_nodes(topology.facts)
    topology.facts.synced.set()
    await settle()
    status = topology.api.objects[TOPOLOGY_PATH]["status"]
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Valid", "False", "InvalidSpec")
    assert status["message"] == condition["message"]
    assert "detailStatus" not in status
    assert topology.controller.tree is None


async def test_no_topology_object_means_nothing_to_write(topology: Topology) -> None:
    seed_nodes(topology.facts)
    topology.facts.synced.set()
    await settle()
    assert topology.api.patches() == []
    assert topology.controller.tree is None
