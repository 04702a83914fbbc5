"""KubeWorld over a real Scheduler (built as `koordpy run` builds it) and a scripted apiserver:
what it lists at start is scheduled, decisions become bindings, status patches and events, a
binding the apiserver refuses is retried, and a standby writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pytest_asyncio

from koordpy.cluster.world import KubeWorld
from koordpy.config.models import parse_configuration
from koordpy.framework.clock import RealClock
from koordpy.kubeapi.informer import NAMESPACES, NODES, PDBS, PODS
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from tests.builders import node_dict, pod_dict
from tests.support.fakeapi import FakeApiServer, Reply, until

SCHEDULER_NAME = "koord-scheduler"
CONFIG = parse_configuration(
    {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": SCHEDULER_NAME}],
        # a pod whose binding failed is tried again at once, not a second later
        "podInitialBackoffSeconds": 0,
        "podMaxBackoffSeconds": 0,
    }
)
BINDINGS = "/api/v1/namespaces/default/pods/*/binding"
POD_STATUS = "/api/v1/namespaces/default/pods/*/status"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
DEFAULT_NAMESPACE = {"metadata": {"name": "default", "uid": "uid-default", "resourceVersion": "1"}}


def pending_pod(name: str, cpu: str = "100m") -> dict[str, Any]:
    raw = pod_dict(name, cpu=cpu, memory="64Mi", spec={"schedulerName": SCHEDULER_NAME})
    raw["metadata"].update(uid=f"uid-{name}", resourceVersion="2")
    raw["status"] = {"phase": "Pending"}
    return raw


def node(name: str) -> dict[str, Any]:
    raw = node_dict(name, cpu="4", memory="8Gi")
    raw["metadata"].update(uid=f"uid-{name}", resourceVersion="1")
    return raw


ONE_NODE = Reply.items([node("n1")], "10")


@dataclass
class Cluster:
    fake: FakeApiServer
    world: KubeWorld
    scheduler: Scheduler

    def bindings(self) -> list[Any]:
        return [r.body for r in self.fake.matching("POST", BINDINGS)]

    def writes(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.fake.requests if r.method != "GET"]


class Start(Protocol):
    def __call__(
        self,
        pods: Sequence[dict[str, Any]] = ...,
        *,
        nodes: Reply = ...,
        leading: Callable[[], bool] | None = None,
        wait_synced: bool = True,
    ) -> Awaitable[Cluster]: ...


@pytest_asyncio.fixture(loop_scope="function")
async def start(fake: FakeApiServer) -> AsyncIterator[Start]:
    """Start a world over the scripted cluster: the default namespace, one node with 4 CPUs, the
    pods given, writes answered with success; the optional custom resources are not served."""
    worlds: list[KubeWorld] = []

    async def starter(
        pods: Sequence[dict[str, Any]] = (),
        *,
        nodes: Reply = ONE_NODE,
        leading: Callable[[], bool] | None = None,
        wait_synced: bool = True,
    ) -> Cluster:
        fake.on_list(NAMESPACES.path, [DEFAULT_NAMESPACE], "10")
        fake.on_list(PDBS.path, [], "10")
        fake.on("GET", NODES.path, nodes)
        fake.on_list(PODS.path, pods, "10")
        fake.on("POST", BINDINGS, Reply(201, {"kind": "Status", "status": "Success", "code": 201}))
        fake.on("PATCH", POD_STATUS, Reply(200))
        fake.on("POST", EVENTS, Reply(201))
        fake.on("PATCH", f"{EVENTS}/*", Reply(200))
        metrics = SchedulerMetrics()
        scheduler = Scheduler(CONFIG, registry(), RealClock(), metrics)
        metrics.track_pending(scheduler.pending_counts)
        world = KubeWorld(fake.client(), scheduler, metrics, "koordpy-test", leading=leading)
        worlds.append(world)
        await world.start()
        if wait_synced:
            await asyncio.wait_for(world.wait_synced(), 5.0)
        return Cluster(fake, world, scheduler)

    yield starter
    for world in worlds:
        await world.shutdown(1.0)


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
