"""`koordpy run` against the real test control plane: binding, status and events, a pod deleted
during its binding, an apiserver restart, leader election between two processes, and metrics.

The scheduler runs in-process on the test's event loop where the test needs to look inside it
(the cache, the binding hook), and as `koordpy run` subprocesses for leader election."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Self, cast

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.cluster.http import Endpoints, HealthCheck, Listener
from koordpy.cluster.world import KubeWorld
from koordpy.config.models import SchedulerConfiguration, parse_configuration
from koordpy.framework.clock import RealClock
from koordpy.framework.effects import Bind
from koordpy.kubeapi import Informer, KubeApi, Resource
from koordpy.kubeapi.informer import PODS
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from tests.e2e.kwok import labelled_nodes
from tests.support.controlplane import (
    ControlPlane,
    free_port,
)
from tests.support.polling import eventually

SCHEDULER_NAME = "koord-scheduler"
# pods of these tests only go to the nodes these tests made, whatever other tests leave around
NODE_LABEL = "koordpy.e2e/run-nodes"
NODE_COUNT = 3
REPO_ROOT = Path(__file__).resolve().parents[2]

CONFIG_DOC: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": SCHEDULER_NAME}],
    # short backoffs keep a retried pod from idling through a test's time budget
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 2,
}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _config() -> SchedulerConfiguration:
    return parse_configuration(CONFIG_DOC)


def pod_manifest(
    name: str, nodes_label: str, cpu: str = "100m", priority_class: str | None = None, grace_seconds: int = 0
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "e2e-run"}),
        spec=client.V1PodSpec(
            scheduler_name=SCHEDULER_NAME,
            node_selector={NODE_LABEL: nodes_label},
            priority_class_name=priority_class,
            termination_grace_period_seconds=grace_seconds,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests={"cpu": cpu, "memory": "64Mi"}),
                )
            ],
        ),
    )


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
async def nodes(control_plane: ControlPlane) -> AsyncIterator[str]:
    """Three KWOK nodes with a label unique to this module; yields the label's value."""
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    async with labelled_nodes(
        str(control_plane.kubeconfig), "run-node", NODE_COUNT, NODE_LABEL, resources
    ) as (
        label,
        _,
    ):
        yield label


@contextlib.asynccontextmanager
async def running_world(control_plane: ControlPlane) -> AsyncIterator[KubeWorld]:
    """The scheduler in-process, on this event loop, with every informer synced."""
    api = await KubeApi.connect(str(control_plane.kubeconfig))
    metrics = SchedulerMetrics()
    scheduler = Scheduler(_config(), registry(), RealClock(), metrics)
    metrics.track_pending(scheduler.pending_counts)
    world = KubeWorld(api, scheduler, metrics, _name("e2e-koordpy"))
    await world.start()
    try:
        await asyncio.wait_for(world.wait_synced(), 60)
        yield world
    finally:
        await world.shutdown(5.0)
        await api.close()


@pytest.fixture
async def world(control_plane: ControlPlane, nodes: str) -> AsyncIterator[KubeWorld]:
    async with running_world(control_plane) as w:
        yield w


# ---------------------------------------------------------------------------------------------- helpers
async def create_pods(
    core: client.CoreV1Api, namespace: str, label: str, count: int, prefix: str = "p", cpu: str = "100m"
) -> list[str]:
    names = [f"{prefix}-{i}-{uuid.uuid4().hex[:5]}" for i in range(count)]
    for name in names:
        await core.create_namespaced_pod(namespace, pod_manifest(name, label, cpu=cpu))
    return names


async def wait_running(
    core: client.CoreV1Api, namespace: str, names: list[str], timeout: float = 60.0
) -> None:
    async def all_running() -> bool:
        pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
        return all(n in pods and pods[n].spec.node_name and pods[n].status.phase == "Running" for n in names)

    await eventually(all_running, timeout=timeout, what=f"{len(names)} pods bound and Running")


async def events_of(kube_api: client.ApiClient, namespace: str, reason: str) -> list[Any]:
    events = await client.EventsV1Api(kube_api).list_namespaced_event(namespace)
    return [e for e in events.items if e.reason == reason]


def assumed(world: KubeWorld) -> list[str]:
    return [key for key, state in world.scheduler.cache.pods.items() if state.assumed]


async def settle(world: KubeWorld, timeout: float = 30.0) -> None:
    """Until no binding is in flight and the cache holds no assumption."""

    async def settled() -> bool:
        return world.in_flight() == 0 and not assumed(world) and not world.scheduler.bindings

    await eventually(settled, timeout=timeout, what="bindings to settle")


# ---------------------------------------------------------------------------------------------- tests
async def test_pods_are_bound_and_run(
    world: KubeWorld, core: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, nodes: str
) -> None:
    names = await create_pods(core, namespace, nodes, 6)
    await wait_running(core, namespace, names)
    for name in names:
        pod = await core.read_namespaced_pod(name, namespace)
        conditions = {c.type: c for c in pod.status.conditions or []}
        assert conditions["PodScheduled"].status == "True"
        assert pod.spec.node_name.startswith(f"run-node-{nodes}-")

    async def scheduled_events() -> list[Any]:
        found = await events_of(kube_api, namespace, "Scheduled")
        return found if len(found) == len(names) else []

    events = await eventually(scheduled_events, what="a Scheduled event per pod")
    assert sorted(e.regarding.name for e in events) == sorted(names)
    for e in events:
        # kube-scheduler's recorder per profile: reported by the schedulerName, from this instance
        assert e.reporting_controller == SCHEDULER_NAME
        assert e.reporting_instance == f"{SCHEDULER_NAME}-{world.identity}"
        assert e.type == "Normal"
        assert (
            e.note
            == f"Successfully assigned {namespace}/{e.regarding.name} to "
            + (await core.read_namespaced_pod(e.regarding.name, namespace)).spec.node_name
        )
    await settle(world)
    assert not assumed(world)


async def test_unschedulable_pod_gets_condition_and_event(
    world: KubeWorld, core: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, nodes: str
) -> None:
    name = _name("too-big")
    await core.create_namespaced_pod(namespace, pod_manifest(name, nodes, cpu="1000"))

    async def condition() -> Any:
        pod = await core.read_namespaced_pod(name, namespace)
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False":
                return c
        return None

    cond = await eventually(condition, what="PodScheduled=False")
    assert cond.reason == "Unschedulable"
    assert re.match(r"^0/\d+ nodes are available: ", cond.message), cond.message
    assert f"{NODE_COUNT} Insufficient cpu" in cond.message, cond.message

    async def failed_events() -> list[Any]:
        return await events_of(kube_api, namespace, "FailedScheduling")

    events = await eventually(failed_events, what="a FailedScheduling event")
    event = events[0]
    assert event.type == "Warning"
    assert event.reporting_controller == SCHEDULER_NAME
    assert event.regarding.name == name
    assert event.note.startswith("0/")
    assert (await core.read_namespaced_pod(name, namespace)).spec.node_name is None


@pytest.mark.parametrize(
    "wait_for_delete_event", [True, False], ids=["delete-seen-first", "binding-fails-first"]
)
async def test_pod_deleted_while_binding_leaves_nothing_assumed(
    world: KubeWorld, core: client.CoreV1Api, namespace: str, nodes: str, wait_for_delete_event: bool
) -> None:
    name = _name("vanishing")
    key = f"{namespace}/{name}"
    hooked = asyncio.Event()
    assumed_when_binding: list[bool] = []

    async def delete_first(b: Bind) -> None:
        if b.pod.key != key or hooked.is_set():
            return
        assumed_when_binding.append(world.scheduler.cache.is_assumed(key))
        await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        if wait_for_delete_event:

            async def gone() -> bool:
                return key not in world.informers[PODS].store

            await eventually(gone, what="the informer to see the deletion")
        hooked.set()

    world.before_bind = delete_first
    await core.create_namespaced_pod(namespace, pod_manifest(name, nodes))
    await asyncio.wait_for(hooked.wait(), 30)

    async def forgotten() -> bool:
        s = world.scheduler
        return (
            key not in world.informers[PODS].store
            and s.cache.pod_state(key) is None
            and key not in s.bindings
            and key not in s.pods
            and all(key not in q.infos for q in s.queues.values())
            and world.in_flight() == 0
        )

    await eventually(forgotten, what="the scheduler to forget the deleted pod")
    # assume before bind: the cache held the pod on its node while the binding was on its way
    assert assumed_when_binding == [True]
    assert not assumed(world)
    failed = world.metrics.registry.get_sample_value("koordpy_bindings_total", {"result": "error"})
    assert failed is not None and failed >= 1
    # and the scheduler goes on: the next pod binds normally
    world.before_bind = None
    names = await create_pods(core, namespace, nodes, 1, prefix="after")
    await wait_running(core, namespace, names)
    await settle(world)


async def test_apiserver_restart_is_survived(
    world: KubeWorld,
    control_plane: ControlPlane,
    core: client.CoreV1Api,
    kube_api: client.ApiClient,
    namespace: str,
    nodes: str,
) -> None:
    before = await create_pods(core, namespace, nodes, 3, prefix="before")
    await wait_running(core, namespace, before)
    # the restart blocks for a while; the scheduler keeps running on this loop meanwhile
    await asyncio.to_thread(control_plane.restart_apiserver)
    after: list[str] = []

    async def create_after() -> bool:
        after.extend(await create_pods(core, namespace, nodes, 3, prefix="after"))
        return True

    await eventually(create_after, timeout=60, what="pods to be created after the restart")
    await wait_running(core, namespace, before + after, timeout=90)

    async def one_scheduled_each() -> Counter[str]:
        counts = Counter(e.regarding.name for e in await events_of(kube_api, namespace, "Scheduled"))
        return counts if set(counts) == set(before + after) else Counter()

    counts = await eventually(one_scheduled_each, what="Scheduled events for all pods")
    assert set(counts.values()) == {1}, counts
    repeated = [e.regarding.name for e in await events_of(kube_api, namespace, "Scheduled") if e.series]
    assert not repeated, f"scheduled more than once: {repeated}"
    # a pod bound twice, or a binding the scheduler lost track of, would have failed and said so
    assert not await events_of(kube_api, namespace, "FailedScheduling")
    await settle(world)
    assert world.informers[PODS].synced.is_set()


async def test_metrics_health_and_readiness(
    world: KubeWorld, core: client.CoreV1Api, namespace: str, nodes: str
) -> None:
    endpoints = Endpoints(
        world.metrics,
        readyz=[HealthCheck("sched-handler-sync", lambda: None if world.synced() else "not synced")],
    )
    server = Listener(endpoints.application(), "127.0.0.1", 0)
    await server.start()
    try:
        names = await create_pods(core, namespace, nodes, 2)
        await wait_running(core, namespace, names)
        base = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as r:
                assert r.status == 200 and await r.text() == "ok"
            async with http.get(f"{base}/readyz") as r:
                assert r.status == 200
            async with http.get(f"{base}/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain")
                text = await r.text()
        match = re.search(
            r'^scheduler_schedule_attempts_total\{profile="koord-scheduler",result="scheduled"\} (\S+)$',
            text,
            re.M,
        )
        assert match and float(match.group(1)) >= 2, text
        assert re.search(r'^scheduler_pending_pods\{queue="active"\} ', text, re.M)
        assert "scheduler_scheduling_attempt_duration_seconds_bucket" in text
        assert re.search(r'^koordpy_bindings_total\{result="success"\} ', text, re.M)
    finally:
        await server.stop()


async def test_preemption_marks_deletes_and_reports_the_victim(
    world: KubeWorld, core: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, nodes: str
) -> None:
    scheduling = client.SchedulingV1Api(kube_api)
    low, high = _name("e2e-low"), _name("e2e-high")
    for name, value in ((low, 10), (high, 1000)):
        await scheduling.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value)
        )
    try:
        async with PodWatch(kube_api, namespace) as watch:
            # one low-priority pod fills most of each node; a grace period makes the deletion visible
            victims = [f"low-{i}-{uuid.uuid4().hex[:5]}" for i in range(NODE_COUNT)]
            for name in victims:
                await core.create_namespaced_pod(
                    namespace, pod_manifest(name, nodes, cpu="7", priority_class=low, grace_seconds=30)
                )
            await wait_running(core, namespace, victims)
            preemptor = _name("high")
            await core.create_namespaced_pod(
                namespace, pod_manifest(preemptor, nodes, cpu="5", priority_class=high)
            )
            await wait_running(core, namespace, [preemptor])

            remaining = {p.metadata.name for p in (await core.list_namespaced_pod(namespace)).items}
            evicted = [v for v in victims if v not in remaining]
            assert len(evicted) == 1, evicted
            victim = evicted[0]
            node = watch.node_names(victim)[0]
            assert watch.node_names(preemptor) == [node]
            marks = watch.conditions(victim, "DisruptionTarget")
            assert marks and marks[-1]["status"] == "True" and marks[-1]["reason"] == "PreemptionByScheduler"
            nominated = [(o.get("status") or {}).get("nominatedNodeName") for o in watch.seen[preemptor]]
            assert node in nominated

        async def preempted_events() -> list[Any]:
            return await events_of(kube_api, namespace, "Preempted")

        events = await eventually(preempted_events, what="a Preempted event")
        assert [e.regarding.name for e in events] == [victim]
        assert events[0].reporting_controller == SCHEDULER_NAME
        assert events[0].note == f"Preempted by {namespace}/{preemptor} on node {node}"
        assert events[0].related is not None and events[0].related.name == preemptor
        registry_ = world.metrics.registry
        assert (registry_.get_sample_value("scheduler_preemption_attempts_total") or 0) >= 1
        assert registry_.get_sample_value("scheduler_preemption_victims_sum") == 1
    finally:
        for name in (low, high):
            with contextlib.suppress(ApiException):
                await scheduling.delete_priority_class(name)


async def test_a_resource_that_is_not_served_does_not_block_sync(control_plane: ControlPlane) -> None:
    """An optional kind whose CRD is not installed counts as synced (empty) and is looked for
    again later; the scheduler is not held back by it."""
    api = await KubeApi.connect(str(control_plane.kubeconfig))
    absent = Resource("Widget", "widgets.e2e.koordpy.io/v1", "widgets", optional=True)
    seen: list[str] = []
    informer = Informer(api, absent, lambda action, obj, old: seen.append(action), missing_retry=60.0)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert informer.missing
        assert not informer.store and not seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await api.close()


# ---------------------------------------------------------------------------------------------- subprocesses
class RunProcess:
    """`koordpy run` as a child process, its log in a file."""

    def __init__(self, args: list[str], log_path: Path, port: int, identity: str) -> None:
        self.port = port
        self.identity = identity
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "koordpy.cli",
                "run",
                # kube-scheduler's default is to elect: a test that wants a Lease says so in `args`
                "--leader-elect=false",
                *args,
                # plain HTTP: /metrics is read without a token; the secure port has tests of its own
                "--secure-port",
                "0",
                "--insecure-port",
                str(port),
                "--bind-address",
                "127.0.0.1",
                "--identity",
                identity,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO_ROOT,
            env=env,
        )

    async def get(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{self.port}{path}", timeout=aiohttp.ClientTimeout(total=5)) as r,
        ):
            return r.status, await r.text()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


class PodWatch:
    """Every state of every pod of a namespace, in order, from a watch of the test's own."""

    def __init__(self, kube_api: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(kube_api)
        self.namespace = namespace
        self.seen: dict[str, list[dict[str, Any]]] = {}
        # every ADDED / MODIFIED / DELETED event per pod: (number in arrival order, type, object)
        self.events: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
        self._seq = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        listing = await self.core.list_namespaced_pod(self.namespace)
        self._task = asyncio.create_task(self._run(listing.metadata.resource_version))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self, rv: str) -> None:
        while True:
            response = cast(
                aiohttp.ClientResponse,
                await self.core.list_namespaced_pod(
                    self.namespace,
                    watch=True,
                    resource_version=rv,
                    timeout_seconds=300,
                    _preload_content=False,
                ),
            )
            async with response:
                while line := await response.content.readline():
                    event = json.loads(line)
                    obj = event["object"]
                    rv = obj["metadata"]["resourceVersion"]
                    if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    name = obj["metadata"]["name"]
                    self._seq += 1
                    self.seen.setdefault(name, []).append(obj)
                    self.events.setdefault(name, []).append((self._seq, event["type"], obj))

    def node_names(self, pod: str) -> list[str]:
        """The nodes the pod was seen bound to, each change once."""
        nodes: list[str] = []
        for obj in self.seen.get(pod, ()):
            node = (obj.get("spec") or {}).get("nodeName")
            if node and (not nodes or nodes[-1] != node):
                nodes.append(node)
        return nodes

    def conditions(self, pod: str, condition_type: str) -> list[dict[str, Any]]:
        return [
            c
            for obj in self.seen.get(pod, ())
            for c in (obj.get("status") or {}).get("conditions") or ()
            if c.get("type") == condition_type
        ]


async def test_leader_failover_binds_every_pod_once(
    control_plane: ControlPlane,
    core: client.CoreV1Api,
    kube_api: client.ApiClient,
    namespace: str,
    nodes: str,
    tmp_path: Path,
) -> None:
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(CONFIG_DOC))
    lease = _name("lease")
    lease_duration = 4.0
    common = [
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--config",
        str(config_path),
        "--leader-elect",
        "--lease-name",
        lease,
        "--lease-namespace",
        namespace,
        "--lease-duration",
        str(lease_duration),
        "--renew-deadline",
        "3",
        "--retry-period",
        "0.5",
        "--shutdown-timeout",
        "5",
        "--log-level",
        "debug",
    ]
    procs = [
        RunProcess(common, tmp_path / f"koordpy-{i}.log", free_port(), _name(f"e2e-koordpy-{i}"))
        for i in range(2)
    ]
    coordination = client.CoordinationV1Api(kube_api)
    try:
        async with PodWatch(kube_api, namespace) as watch:

            async def all_ready() -> bool:
                for p in procs:
                    assert p.proc.poll() is None, f"koordpy exited early:\n{p.log()}"
                    if (await p.get("/readyz"))[0] != 200:
                        return False
                return True

            await eventually(all_ready, timeout=60, what="both schedulers ready (the standby too)")

            async def holder() -> str:
                return (await coordination.read_namespaced_lease(lease, namespace)).spec.holder_identity or ""

            leader_id = await eventually(holder, what="a leader")
            leader = next(p for p in procs if p.identity == leader_id)
            standby = next(p for p in procs if p is not leader)
            assert "leader_election_master_status" in (await standby.get("/metrics"))[1]

            first = await create_pods(core, namespace, nodes, 5, prefix="first")
            await wait_running(core, namespace, first)

            async def first_events() -> list[Any]:
                found = await events_of(kube_api, namespace, "Scheduled")
                return found if len(found) >= len(first) else []

            scheduled = await eventually(first_events, what="Scheduled events of the first pods")
            # the standby wrote nothing
            assert {e.reporting_instance for e in scheduled} == {f"{SCHEDULER_NAME}-{leader.identity}"}

            leader.proc.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            second = await create_pods(core, namespace, nodes, 5, prefix="second")

            async def taken_over() -> bool:
                return await holder() == standby.identity

            await eventually(
                taken_over, timeout=lease_duration + 10, interval=0.1, what="the standby to take over"
            )
            takeover = time.monotonic() - killed_at
            # lease duration, plus one retry period and the standby's first look at the record
            assert takeover < lease_duration + 3.0, takeover
            await wait_running(core, namespace, second, timeout=30)
            assert standby.proc.poll() is None, standby.log()

            status, text = await standby.get("/metrics")
            assert status == 200
            attempts = r'^scheduler_schedule_attempts_total\{profile="koord-scheduler",result="scheduled"\} '
            assert re.search(attempts, text, re.M), text
            assert re.search(r'^leader_election_master_status\{name="' + lease + r'"\} 1\.0$', text, re.M)

            async def every_pod_once() -> bool:
                counts = Counter(e.regarding.name for e in await events_of(kube_api, namespace, "Scheduled"))
                everyone = first + second
                return all(counts[n] == 1 for n in everyone) and all(watch.node_names(n) for n in everyone)

            await eventually(every_pod_once, what="one Scheduled event per pod")
            for name in first + second:
                assert len(watch.node_names(name)) == 1, (name, watch.node_names(name))
            scheduled = await events_of(kube_api, namespace, "Scheduled")
            by_instance = Counter(e.reporting_instance for e in scheduled)
            assert by_instance[f"{SCHEDULER_NAME}-{standby.identity}"] >= len(second)

            # SIGTERM: a clean exit that hands the lease back
            standby.proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(standby.proc.wait, 20)
            assert code == 0, standby.log()
            assert await holder() == "", "the lease was not released"
    finally:
        for p in procs:
            p.close()


async def test_losing_the_lease_exits_non_zero(
    control_plane: ControlPlane, kube_api: client.ApiClient, namespace: str, nodes: str, tmp_path: Path
) -> None:
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(CONFIG_DOC))
    lease = _name("lease")
    args = [
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--config",
        str(config_path),
        "--leader-elect",
        "--lease-name",
        lease,
        "--lease-namespace",
        namespace,
        "--lease-duration",
        "4",
        "--renew-deadline",
        "3",
        "--retry-period",
        "0.5",
    ]
    proc = RunProcess(args, tmp_path / "koordpy.log", free_port(), _name("e2e-koordpy"))
    coordination = client.CoordinationV1Api(kube_api)
    try:

        async def held() -> bool:
            current = await coordination.read_namespaced_lease(lease, namespace)
            return bool(current.spec.holder_identity == proc.identity)

        await eventually(held, timeout=60, what="the lease to be held")

        async def steal() -> bool:
            # the leader renews every half second: a stale read loses with 409 and is tried again
            current = await coordination.read_namespaced_lease(lease, namespace)
            current.spec.holder_identity = "someone-else"
            await coordination.replace_namespaced_lease(lease, namespace, current)
            return True

        await eventually(steal, what="the lease to be taken away")
        code = await asyncio.to_thread(proc.proc.wait, 10)
        assert code == 1, proc.log()
        assert "Leaderelection lost" in proc.log()
    finally:
        proc.close()


def test_run_rejects_an_invalid_configuration(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {**CONFIG_DOC, "profiles": [{"schedulerName": SCHEDULER_NAME, "percentageOfNodesToScore": 300}]}
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "koordpy.cli", "run", "--config", str(bad), "--kubeconfig", "/nonexistent"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "profiles[0].percentageOfNodesToScore" in result.stderr
