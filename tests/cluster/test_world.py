"""KubeWorld over a real Scheduler (built as `koordpy run` builds it) and a scripted apiserver:
what it lists at start is scheduled, decisions become bindings, status patches and events, a
binding the apiserver refuses is retried, and a standby writes nothing."""

from __future__ import annotations

import asyncio

from koordpy.kubeapi.informer import PODS
from tests.cluster.world_support import BINDINGS, EVENTS, POD_STATUS, Start, node, pending_pod
from tests.support.fakeapi import FakeApiServer, Reply, until


async def test_a_pending_pod_listed_at_start_is_bound(start: Start) -> None:
    cluster = await start([pending_pod("p")])
    (binding,) = await cluster.fake.wait_for("POST", BINDINGS)
    assert binding.path == "/api/v1/namespaces/default/pods/p/binding"
    assert binding.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        # the uid makes the apiserver refuse the binding of a pod deleted and created again
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    (event,) = await cluster.fake.wait_for("POST", EVENTS)
    assert (event.body["reason"], event.body["note"]) == (
        "Scheduled",
        "Successfully assigned default/p to n1",
    )
    await until(lambda: not cluster.scheduler.pending("default/p"), what="p no longer pending")
    # bound at the first try: no status write was needed
    assert cluster.fake.matching("PATCH", POD_STATUS) == []


async def test_a_binding_refused_with_a_conflict_is_tried_again(start: Start, fake: FakeApiServer) -> None:
    cluster = await start([pending_pod("p")])
    # scripted after the start's defaults: the first binding is refused, the next accepted
    fake.on(
        "POST",
        BINDINGS,
        Reply.error(409, "Conflict", "Operation cannot be fulfilled on pods/binding"),
        Reply(201),
    )
    first, second = await fake.wait_for("POST", BINDINGS, count=2)
    assert first.answered is not None and second.arrived > first.answered
    assert first.body == second.body
    await fake.wait_for("POST", EVENTS)
    assert [r.body["reason"] for r in fake.matching("POST", EVENTS)] == ["Scheduled"]
    assert not cluster.scheduler.pending("default/p")


async def test_a_pod_that_fits_nowhere_gets_its_condition_and_event(start: Start) -> None:
    cluster = await start([pending_pod("big", cpu="16")])
    (patch,) = await cluster.fake.wait_for("PATCH", POD_STATUS)
    assert patch.path == "/api/v1/namespaces/default/pods/big/status"
    (condition,) = patch.body["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    (event,) = await cluster.fake.wait_for("POST", EVENTS)
    assert (event.body["reason"], event.body["note"]) == ("FailedScheduling", condition["message"])
    assert cluster.bindings() == []


async def test_nothing_is_decided_before_every_informer_has_listed(start: Start) -> None:
    nodes_listed = asyncio.Event()
    cluster = await start(
        [pending_pod("p")], nodes=Reply.items([node("n1")], "10", hold=nodes_listed), wait_synced=False
    )
    await cluster.fake.watch(PODS.path).watching()
    await asyncio.sleep(0.1)
    # the pods are known, the nodes not yet: a verdict now would say "0/0 nodes are available"
    assert cluster.writes() == []
    assert not cluster.world.synced() and cluster.world.unsynced() == ["nodes"]
    nodes_listed.set()
    await cluster.fake.wait_for("POST", BINDINGS)
    assert cluster.fake.matching("PATCH", POD_STATUS) == []


async def test_a_pod_created_while_running_is_bound(start: Start) -> None:
    cluster = await start()
    await cluster.fake.watch(PODS.path).watching()
    cluster.fake.watch(PODS.path).added(pending_pod("late"))
    (binding,) = await cluster.fake.wait_for("POST", BINDINGS)
    assert binding.body["metadata"]["name"] == "late"


async def test_a_standby_writes_nothing_until_it_leads(start: Start) -> None:
    leader = False
    cluster = await start([pending_pod("p"), pending_pod("big", cpu="16")], leading=lambda: leader)
    await asyncio.sleep(0.2)
    assert cluster.writes() == []
    leader = True
    cluster.world.wake()
    await cluster.fake.wait_for("POST", BINDINGS)
    await cluster.fake.wait_for("PATCH", POD_STATUS)
