"""Crash and restart keep gangs whole: `koordpy run` is disrupted while a gang's members are being
bound (SIGKILL and a restart, a leader failover, an apiserver restart), and the gang still ends up
whole, with every member bound once and none lost.

The members of a released gang are bound by separate requests sent at once, so the window in which
a gang is partly bound is a few milliseconds wide. To hit it every time, the `koordpy run`
subprocesses are started through a launcher that delays each binding by a random fraction of
`BIND_SPREAD` seconds through `KubeWorld.before_bind` (the hook the world offers for this): a gang's
bindings then land over a few seconds, as they would on a slow apiserver, and the disruption
strikes once some but not all of them have landed. Everything else is the real `koordpy run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from koordpy.kubeapi import KubeApi
from tests.e2e.kwok import labelled_nodes
from tests.e2e.test_run import CONFIG_DOC, SCHEDULER_NAME
from tests.support.controlplane import ControlPlane, free_port
from tests.support.podfollow import follow_pods
from tests.support.polling import eventually

REPO_ROOT = Path(__file__).resolve().parents[2]
# pods of these tests only go to the nodes this module made, whatever other tests leave around
NODE_LABEL = "koordpy.e2e/crash-nodes"
NODE_COUNT = 6
NODE_CPU_MILLIS = 4000
NODE_RESOURCES = {"cpu": "4", "memory": "16Gi", "pods": "110"}
POD_CPU_MILLIS = 500
GANGS = 3
GANG_SIZE = 8
# each binding waits a random 0..BIND_SPREAD seconds before it is sent (see the module docstring)
BIND_SPREAD = 3.0
# generous: a 2-core machine shared with other work; no assertion is about time
READY_TIMEOUT = 60.0
COMPLETE_TIMEOUT = 90.0
LEASE_DURATION = 4.0

G = "gang.scheduling.koordinator.sh"
X_K8S = "scheduling.x-k8s.io"

# `koordpy run` (the real CLI, argv passed through) with each binding delayed a little
LAUNCHER = """
import asyncio, os, random, sys
from koordpy.cluster import world

spread = float(os.environ["KOORDPY_E2E_BIND_SPREAD"])
original_init = world.KubeWorld.__init__

def init(self, *args, **kwargs):
    original_init(self, *args, **kwargs)

    async def slow_binding(_bind):
        await asyncio.sleep(random.uniform(0.0, spread))

    self.before_bind = slow_binding

world.KubeWorld.__init__ = init
from koordpy.cli import main
sys.exit(main())
"""


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
async def crash_nodes(control_plane: ControlPlane) -> AsyncIterator[str]:
    """KWOK nodes with a label unique to this module; yields the label's value."""
    kubeconfig = str(control_plane.kubeconfig)
    async with labelled_nodes(kubeconfig, "crash-node", NODE_COUNT, NODE_LABEL, NODE_RESOURCES) as (label, _):
        yield label


# ---------------------------------------------------------------------------------------------- koordpy
class Koordpy:
    """`koordpy run` as a child process (through LAUNCHER), its log in a file."""

    def __init__(self, args: list[str], log_path: Path, identity: str) -> None:
        self.port = free_port()
        self.identity = identity
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "KOORDPY_E2E_BIND_SPREAD": str(BIND_SPREAD)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                LAUNCHER,
                "run",
                *args,
                # plain HTTP: only readiness is read here; the secure port has tests of its own
                "--secure-port",
                "0",
                "--insecure-port",
                str(self.port),
                "--bind-address",
                "127.0.0.1",
                "--identity",
                identity,
                "--log-level",
                "debug",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO_ROOT,
            env=env,
        )

    async def ready(self) -> bool:
        assert self.proc.poll() is None, f"koordpy exited early:\n{self.log()}"
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{self.port}/readyz", timeout=aiohttp.ClientTimeout(total=5)) as r,
        ):
            return r.status == 200

    def kill(self) -> None:
        """SIGKILL: nothing is flushed, nothing handed back; bindings not yet sent never are."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def failed_bindings(self) -> list[str]:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [line for line in lines if "binding " in line and " failed" in line]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


@dataclass
class Harness:
    """What a disruption acts on: the control plane, the namespace, the koordpy processes."""

    control_plane: ControlPlane
    coordination: client.CoordinationV1Api
    namespace: str
    tmp_path: Path
    procs: list[Koordpy] = field(default_factory=list)
    lease: str = field(default_factory=lambda: _name("lease"))
    # the instance expected to finish the work once the disruption is over
    survivor: Koordpy | None = None

    def start(self, *, leader_elect: bool) -> Koordpy:
        config = self.tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(CONFIG_DOC))
        args = ["--kubeconfig", str(self.control_plane.kubeconfig), "--config", str(config)]
        if leader_elect:
            args += [
                "--leader-elect",
                "--lease-name",
                self.lease,
                "--lease-namespace",
                self.namespace,
                "--lease-duration",
                str(LEASE_DURATION),
                "--renew-deadline",
                "3",
                "--retry-period",
                "0.5",
            ]
        else:
            args.append("--no-leader-elect")
        n = len(self.procs)
        proc = Koordpy(args, self.tmp_path / f"koordpy-{n}.log", _name(f"e2e-crash-{n}"))
        self.procs.append(proc)
        return proc

    async def wait_ready(self, *procs: Koordpy) -> None:
        async def all_ready() -> bool:
            return all([await p.ready() for p in procs])

        try:
            await eventually(all_ready, timeout=READY_TIMEOUT, what="koordpy ready (informers synced)")
        except BaseException:
            print(self.logs())
            raise

    async def holder(self) -> str:
        lease = await self.coordination.read_namespaced_lease(self.lease, self.namespace)
        return str(lease.spec.holder_identity or "")

    def logs(self) -> str:
        return "\n".join(f"--- {p.identity} (exit {p.proc.poll()}):\n{p.log()}" for p in self.procs)

    def close(self) -> None:
        for p in self.procs:
            p.close()


# ---------------------------------------------------------------------------------------------- the watch
@dataclass
class PodRecord:
    uids: list[str] = field(default_factory=list)
    # every node the pod was seen bound to, each change once
    nodes: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


class NodeNameWatch:
    """Every nodeName each pod of a namespace was ever seen with, from a watch of the test's own
    that outlives an apiserver restart (it resumes, or lists again after a 410)."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.pods: dict[str, PodRecord] = {}
        self._task: asyncio.Task[None] | None = None
        self.listed = asyncio.Event()

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.listed.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _note(self, pod: dict[str, Any], deleted: bool = False) -> None:
        if deleted:
            return
        meta = pod.get("metadata") or {}
        record = self.pods.setdefault(str(meta.get("name")), PodRecord())
        uid = str(meta.get("uid") or "")
        if not record.uids or record.uids[-1] != uid:
            record.uids.append(uid)
        record.labels = dict(meta.get("labels") or {})
        record.annotations = dict(meta.get("annotations") or {})
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (not record.nodes or record.nodes[-1] != node):
            record.nodes.append(str(node))

    async def _run(self) -> None:
        await follow_pods(self.api, self.namespace, self._note, self.listed)

    def bound_per_gang(self, gangs: dict[str, list[str]]) -> dict[str, int]:
        return {
            gang: sum(1 for m in members if m in self.pods and self.pods[m].nodes)
            for gang, members in gangs.items()
        }

    def moved(self) -> dict[str, PodRecord]:
        """Pods seen on more than one node, or seen as more than one object."""
        return {n: r for n, r in self.pods.items() if len(r.nodes) > 1 or len(r.uids) > 1}


def partly_bound(counts: dict[str, int]) -> list[str]:
    return [gang for gang, n in counts.items() if 0 < n < GANG_SIZE]


# ---------------------------------------------------------------------------------------------- gangs
@dataclass(frozen=True)
class GangKind:
    name: str
    # gang name -> (labels, annotations) of each of its members
    marks: Callable[[str], tuple[dict[str, str], dict[str, str]]]
    podgroup: bool = False


GANG_KINDS = [
    # Koordinator's annotations with the default match policy, once-satisfied: once a member is
    # bound, the others go as they fit
    GangKind(
        "annotations",
        lambda gang: ({}, {f"{G}/name": gang, f"{G}/min-available": str(GANG_SIZE)}),
    ),
    # waiting-and-running: a scheduler that starts afresh must count the members already bound
    # toward the minimum, or the rest wait for ever
    GangKind(
        "annotations-waiting-and-running",
        lambda gang: (
            {},
            {
                f"{G}/name": gang,
                f"{G}/min-available": str(GANG_SIZE),
                f"{G}/match-policy": "waiting-and-running",
            },
        ),
    ),
    # scheduler-plugins' PodGroup (waiting-and-running, as its own coscheduling counts)
    GangKind("podgroup", lambda gang: ({f"{X_K8S}/pod-group": gang}, {}), podgroup=True),
]


def member(name: str, label: str, labels: dict[str, str], annotations: dict[str, str]) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels, annotations=annotations),
        spec=client.V1PodSpec(
            scheduler_name=SCHEDULER_NAME,
            node_selector={NODE_LABEL: label},
            termination_grace_period_seconds=0,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": f"{POD_CPU_MILLIS}m", "memory": "64Mi"}
                    ),
                )
            ],
        ),
    )


async def create_gangs(
    kube_api: client.ApiClient, core: client.CoreV1Api, namespace: str, label: str, kind: GangKind
) -> dict[str, list[str]]:
    gangs: dict[str, list[str]] = {}
    for g in range(GANGS):
        gang = f"gang{g}-{uuid.uuid4().hex[:5]}"
        if kind.podgroup:
            body = {
                "apiVersion": f"{X_K8S}/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": gang},
                "spec": {"minMember": GANG_SIZE},
            }
            await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
                X_K8S, "v1alpha1", namespace, "podgroups", body
            )
        gangs[gang] = [f"{gang}-{i}" for i in range(GANG_SIZE)]
    # members of all gangs interleaved: no gang is complete in the apiserver before the others start
    for i in range(GANG_SIZE):
        for gang, members in gangs.items():
            labels, annotations = kind.marks(gang)
            await core.create_namespaced_pod(namespace, member(members[i], label, labels, annotations))
    return gangs


# ---------------------------------------------------------------------------------------------- disruptions
@dataclass(frozen=True)
class Disruption:
    name: str
    # start the koordpy instance(s) and wait until they are ready to schedule
    prepare: Callable[[Harness], Awaitable[None]]
    # strike while a gang is partly bound; returns the pods bound per gang right after the strike,
    # before anything could have bound more
    strike: Callable[[Harness, NodeNameWatch, dict[str, list[str]]], Awaitable[dict[str, int]]]


async def prepare_one(h: Harness) -> None:
    h.survivor = h.start(leader_elect=False)
    await h.wait_ready(h.survivor)


async def kill_and_restart(h: Harness, watch: NodeNameWatch, gangs: dict[str, list[str]]) -> dict[str, int]:
    assert h.survivor is not None
    h.survivor.kill()
    # bindings the process had sent before it died may still land: let them, then look
    await asyncio.sleep(1.0)
    after = watch.bound_per_gang(gangs)
    h.survivor = h.start(leader_elect=False)
    return after


async def prepare_two(h: Harness) -> None:
    first, second = h.start(leader_elect=True), h.start(leader_elect=True)
    # both ready, the standby too: its caches are warm when it takes over
    await h.wait_ready(first, second)
    await eventually(h.holder, timeout=READY_TIMEOUT, what="a leader")


async def kill_the_leader(h: Harness, watch: NodeNameWatch, gangs: dict[str, list[str]]) -> dict[str, int]:
    leader_id = await h.holder()
    leader = next(p for p in h.procs if p.identity == leader_id)
    leader.kill()
    # the standby cannot take over before the lease expires (LEASE_DURATION): nothing binds meanwhile
    await asyncio.sleep(1.0)
    after = watch.bound_per_gang(gangs)
    h.survivor = next(p for p in h.procs if p is not leader)

    async def taken_over() -> bool:
        return await h.holder() == (h.survivor.identity if h.survivor else "")

    await eventually(taken_over, timeout=LEASE_DURATION + 30, what="the standby to take over")
    return after


async def restart_the_apiserver(
    h: Harness, watch: NodeNameWatch, gangs: dict[str, list[str]]
) -> dict[str, int]:
    # koordpy keeps running through it: the bindings it sends meanwhile fail and are tried again
    at_strike = watch.bound_per_gang(gangs)
    await asyncio.to_thread(h.control_plane.restart_apiserver)
    return at_strike


DISRUPTIONS = [
    Disruption("sigkill-and-restart", prepare_one, kill_and_restart),
    Disruption("leader-failover", prepare_two, kill_the_leader),
    Disruption("apiserver-restart", prepare_one, restart_the_apiserver),
]


# ---------------------------------------------------------------------------------------------- the test
@pytest.mark.parametrize("kind", GANG_KINDS, ids=[k.name for k in GANG_KINDS])
@pytest.mark.parametrize("disruption", DISRUPTIONS, ids=[d.name for d in DISRUPTIONS])
async def test_gang_disrupted_mid_binding_is_completed_with_every_member_bound_once(
    control_plane: ControlPlane,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    crash_nodes: str,
    tmp_path: Path,
    disruption: Disruption,
    kind: GangKind,
) -> None:
    h = Harness(control_plane, client.CoordinationV1Api(kube_api), namespace, tmp_path)
    api = await KubeApi.connect(str(control_plane.kubeconfig))
    try:
        await disruption.prepare(h)
        async with NodeNameWatch(api, namespace) as watch:
            gangs = await create_gangs(kube_api, core, namespace, crash_nodes, kind)
            everyone = [m for members in gangs.values() for m in members]

            async def some_gang_partly_bound() -> list[str]:
                return partly_bound(watch.bound_per_gang(gangs))

            await eventually(
                some_gang_partly_bound, timeout=COMPLETE_TIMEOUT, interval=0.02, what="a gang partly bound"
            )
            after_strike = await disruption.strike(h, watch, gangs)
            # the disruption hit a gang in the middle of its binding, or the test proves nothing
            assert partly_bound(after_strike), (after_strike, h.logs())

            async def all_bound() -> bool:
                return all(watch.pods.get(m) is not None and watch.pods[m].nodes for m in everyone)

            try:
                await eventually(all_bound, timeout=COMPLETE_TIMEOUT, what="every member of every gang bound")
            except BaseException:
                print(h.logs())
                raise
            assert h.survivor is not None and h.survivor.proc.poll() is None, h.logs()

            # the apiserver's word, not only the watch's: every member bound, none lost
            pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
            assert sorted(pods) == sorted(everyone)
            unbound = [n for n, p in pods.items() if not p.spec.node_name]
            assert not unbound, unbound
            # bound once: a pod's nodeName never changed once set, and no pod was replaced
            assert not watch.moved(), watch.moved()
            for name, pod in pods.items():
                assert watch.pods[name].nodes == [pod.spec.node_name], (name, watch.pods[name])
            # no node took more than it holds: a scheduler that lost track of the members bound
            # before the disruption would place the others over them
            per_node = Counter(p.spec.node_name for p in pods.values())
            for node, count in per_node.items():
                assert count * POD_CPU_MILLIS <= NODE_CPU_MILLIS, (node, count, per_node)

        # no pod was reported scheduled twice (a binding that lands on a pod already bound fails,
        # and must not be reported as a success)
        events = await client.EventsV1Api(kube_api).list_namespaced_event(namespace)
        scheduled = Counter(e.regarding.name for e in events.items if e.reason == "Scheduled")
        twice = {n: c for n, c in scheduled.items() if c > 1}
        assert not twice, twice
        repeated = [e.regarding.name for e in events.items if e.reason == "Scheduled" and e.series]
        assert not repeated, repeated
    finally:
        await api.close()
        h.close()
