"""A KubeWorld over a real Scheduler (built as `koordpy run` builds it) and a scripted apiserver,
for the cluster world's tests: `start` (a fixture in conftest) lists what is given and runs it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from koordpy.cluster.world import KubeWorld
from koordpy.config.models import parse_configuration
from koordpy.framework.clock import RealClock
from koordpy.kubeapi.client import KubeApi
from koordpy.kubeapi.informer import NAMESPACES, NODES, PDBS, PODS, STORAGE, WATCH_IDLE_TIMEOUT
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from tests.builders import node_dict, pod_dict
from tests.support.fakeapi import FakeApiServer, Reply

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
        api: KubeApi | None = None,
        watch_idle_timeout: float = WATCH_IDLE_TIMEOUT,
    ) -> Awaitable[Cluster]: ...


async def world_starter(fake: FakeApiServer) -> AsyncIterator[Start]:
    """Start a world over the scripted cluster: the default namespace, one node with 4 CPUs, the
    pods given, writes answered with success; the optional custom resources are not served. `api`:
    the client to reach it with (default: straight to the fake)."""
    worlds: list[KubeWorld] = []

    async def starter(
        pods: Sequence[dict[str, Any]] = (),
        *,
        nodes: Reply = ONE_NODE,
        leading: Callable[[], bool] | None = None,
        wait_synced: bool = True,
        api: KubeApi | None = None,
        watch_idle_timeout: float = WATCH_IDLE_TIMEOUT,
    ) -> Cluster:
        fake.on_list(NAMESPACES.path, [DEFAULT_NAMESPACE], "10")
        fake.on_list(PDBS.path, [], "10")
        for resource in STORAGE:
            # none at start: a test adds its storage objects through their watches
            fake.on_list(resource.path, [], "10")
        fake.on("GET", NODES.path, nodes)
        fake.on_list(PODS.path, pods, "10")
        fake.on("POST", BINDINGS, Reply(201, {"kind": "Status", "status": "Success", "code": 201}))
        fake.on("PATCH", POD_STATUS, Reply(200))
        fake.on("POST", EVENTS, Reply(201))
        fake.on("PATCH", f"{EVENTS}/*", Reply(200))
        metrics = SchedulerMetrics()
        scheduler = Scheduler(CONFIG, registry(), RealClock(), metrics)
        metrics.track_pending(scheduler.pending_counts)
        world = KubeWorld(
            api or fake.client(),
            scheduler,
            metrics,
            "koordpy-test",
            leading=leading,
            watch_idle_timeout=watch_idle_timeout,
        )
        worlds.append(world)
        await world.start()
        if wait_synced:
            await asyncio.wait_for(world.wait_synced(), 5.0)
        return Cluster(fake, world, scheduler)

    yield starter
    for world in worlds:
        await world.shutdown(1.0)
