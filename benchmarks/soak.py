"""A soak of `koordpy run` on a real kube-apiserver with KWOK nodes: an hour (by default) of churn, with
an apiserver restart and a leader failover on the way. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/soak.py [--duration 3600] [--interval 30] [--rate 10] [--nodes 40]

Plain pods and gangs (scheduling.x-k8s.io PodGroups and Koordinator's annotations) are created at a
steady rate, completed once they have run for a while (phase Succeeded, as KWOK would for a Job's
pod) and deleted; KWOK nodes are added and removed. Two `koordpy run` instances share a Lease. Every
interval the harness prints the pods bound per second, the RSS of each koordpy process and what is
pending; at the end, every pod not bound within the grace period, every pod bound twice, and
whether the memory stayed flat. See benchmarks/README.md ("A soak").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import signal
import statistics
import sys
import tempfile
import time
import urllib.error
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_cluster import (  # noqa: E402
    NODE_CAPACITY,
    POD_GROUP_API,
    POD_GROUP_LABEL,
    Bench,
    SchedulerProcess,
    http_get,
    koordpy_command,
    machine,
    node_manifest,
    parse_metrics,
    pod_group_manifest,
    pod_manifest,
    prepare_binaries,
    process_tree,
)
from koordpy.kubeapi import TRANSPORT_ERRORS, ApiError, KubeApi  # noqa: E402
from tests.support.podfollow import follow_pods  # noqa: E402

NAMESPACE = "soak"
LEASE = "koordpy-soak"
SCHEDULER_NAME = "koord-scheduler"
GANG = "gang.scheduling.koordinator.sh"
POD_CPU_MILLIS = 100
# API calls of the churn in flight at once
CONCURRENCY = 16
# a create, status update or delete that fails (the apiserver restarting) is tried again this long
RETRY_FOR = 60.0
RSS_SAMPLE_SECONDS = 5.0
# seconds a cordoned node stays before it is deleted: what is being bound to it lands first
DRAIN_SECONDS = 10.0
# a pod bound but never seen Running (its node removed before KWOK got to it) is deleted this long
# after its lifetime
NOT_RUNNING_SLACK = 30.0
MIB = 1024.0


# --------------------------------------------------------------------------------------------------
# What the harness knows of each pod and gang
# --------------------------------------------------------------------------------------------------


@dataclass
class PodRecord:
    name: str
    gang: str | None
    lifetime: float
    # monotonic: when the create succeeded, or the pod was first seen, whichever came first
    created: float | None = None
    uids: list[str] = field(default_factory=list)
    # every node the pod was seen bound to, each change once: more than one is a pod bound twice
    nodes: list[str] = field(default_factory=list)
    bound_at: float | None = None
    running: bool = False
    completing: bool = False
    completed_at: float | None = None
    deleting: bool = False
    gone: bool = False
    # the harness gave it up (its create kept failing): left out of every check
    abandoned: bool = False


@dataclass
class GangRecord:
    name: str
    kind: str  # "podgroup" or "annotations"
    members: list[str]
    # every member bound
    complete: bool = False
    # every member gone (and its PodGroup deleted), or given up
    finished: bool = False


class Tracker:
    """A watch of the soak namespace of the harness's own, noting when each pod was first bound and
    every node it was seen on. It outlives an apiserver restart: it resumes where it stopped, or
    lists again after a 410."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.pods: dict[str, PodRecord] = {}
        self.bind_times: list[float] = []
        # pods seen as another object under the same name (never expected: names are unique)
        self.replaced: list[str] = []
        self.listed = asyncio.Event()
        self.restarts = 0
        self._task: asyncio.Task[None] | None = None

    def expect(self, record: PodRecord) -> None:
        self.pods[record.name] = record

    def _note(self, pod: dict[str, Any], deleted: bool = False) -> None:
        now = time.monotonic()
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        record = self.pods.get(name)
        if record is None:
            # a create whose answer was lost (the apiserver went away) but that was made
            annotations = meta.get("annotations") or {}
            labels = meta.get("labels") or {}
            gang = labels.get(POD_GROUP_LABEL) or annotations.get(f"{GANG}/name")
            record = PodRecord(name, gang, lifetime=30.0)
            self.pods[name] = record
        if record.created is None:
            record.created = now
        uid = str(meta.get("uid") or "")
        if record.uids and record.uids[-1] != uid:
            self.replaced.append(name)
        if not record.uids or record.uids[-1] != uid:
            record.uids.append(uid)
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (not record.nodes or record.nodes[-1] != node):
            record.nodes.append(str(node))
            if record.bound_at is None:
                record.bound_at = now
                self.bind_times.append(now)
        if (pod.get("status") or {}).get("phase") == "Running":
            record.running = True
        if deleted:
            record.gone = True

    def _restarted(self) -> None:
        self.restarts += 1

    async def _run(self) -> None:
        await follow_pods(
            self.api,
            self.namespace,
            self._note,
            self.listed,
            watch_seconds=600,
            pause=0.5,
            on_restart=self._restarted,
        )

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.listed.wait(), 60)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


# --------------------------------------------------------------------------------------------------
# koordpy under leader election
# --------------------------------------------------------------------------------------------------


class Instance(SchedulerProcess):
    """`koordpy run --leader-elect` on the soak's Lease."""

    def __init__(self, identity: str, kubeconfig: Path, log_dir: Path, lease_duration: float) -> None:
        workdir = log_dir / identity
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__("koordpy", kubeconfig, workdir, log_dir / f"{identity}.log")
        self.identity = identity
        self.lease_duration = lease_duration
        # seconds into the soak it was started (0: before the soak began)
        self.started = 0.0

    def command(self) -> list[str]:
        # client-go's proportions: renew deadline 2/3 of the lease, retry period 2/15 of it
        return [
            str(koordpy_command()),
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--leader-elect",
            "--lease-name",
            LEASE,
            "--lease-namespace",
            NAMESPACE,
            "--lease-duration",
            f"{self.lease_duration:g}",
            "--renew-deadline",
            f"{self.lease_duration * 2 / 3:g}",
            "--retry-period",
            f"{self.lease_duration * 2 / 15:g}",
            "--identity",
            self.identity,
            "--bind-address",
            "127.0.0.1",
            # /metrics over plain HTTP, without a token
            "--secure-port",
            "0",
            "--insecure-port",
            str(self.port),
        ]

    def ready(self) -> bool:
        try:
            http_get(f"http://127.0.0.1:{self.port}/readyz", timeout=3)
            return True
        except (OSError, urllib.error.URLError):
            return False

    def rss_mib(self) -> float | None:
        """VmRSS now (not the peak) of the process and its children; None once it has exited."""
        if not self.alive():
            return None
        total = 0
        for pid in process_tree(self.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        # nothing read: it exited while being read
        return total / MIB if total else None

    def metrics(self) -> str:
        try:
            return http_get(f"http://127.0.0.1:{self.port}/metrics", timeout=5)
        except (OSError, urllib.error.URLError):
            return ""


# --------------------------------------------------------------------------------------------------
# The soak
# --------------------------------------------------------------------------------------------------


@dataclass
class Interval:
    t: float
    bound_per_s: float
    created: int
    bound: int
    completed: int
    deleted: int
    pending: int
    oldest_pending_s: float
    nodes: int
    rss_mib: dict[str, float]
    leader: str
    queues: dict[str, float]


@dataclass
class Incident:
    t: float
    what: str
    seconds: float
    detail: str = ""


@dataclass
class Report:
    duration: float
    intervals: list[Interval] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


class Soak:
    def __init__(self, args: argparse.Namespace, log_dir: Path) -> None:
        self.args = args
        self.log_dir = log_dir
        self.bench = Bench(args, log_dir)
        self.api: KubeApi | None = None
        self.tracker: Tracker | None = None
        self.instances: list[Instance] = []
        self.gangs: dict[str, GangRecord] = {}
        self.nodes: list[str] = []
        self.cordoned: set[str] = set()
        self.node_counts: list[int] = []
        self.report = Report(args.duration)
        self.rss: list[tuple[float, dict[str, float]]] = []
        self.t0 = 0.0
        self.stopping = asyncio.Event()
        self.slots = asyncio.Semaphore(CONCURRENCY)
        self.counter = itertools.count()
        self.api_failures = 0
        self.max_alive = 0
        # the Lease's holder when last read, and (t, holder) each time it was seen to change
        self.holder = ""
        self.leader_changes: list[tuple[float, str]] = []
        # instances the harness stopped on purpose (the failover): their exit is no incident
        self.killed: set[str] = set()

    # ---- plumbing ------------------------------------------------------------------------------

    def now(self) -> float:
        """Seconds into the soak (0 before it starts)."""
        return time.monotonic() - self.t0 if self.t0 else 0.0

    def say(self, text: str) -> None:
        print(f"[{self.now():6.0f}s] {text}", flush=True)

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "") -> bool:
        """One API call of the churn, tried again while the apiserver is away; True once made (a 404
        or 409 counts: the object is gone, or there already)."""
        assert self.api is not None
        deadline = time.monotonic() + RETRY_FOR
        while True:
            async with self.slots:
                try:
                    if content_type:
                        await self.api.request(method, path, body=body, content_type=content_type)
                    else:
                        await self.api.request(method, path, body=body)
                    return True
                except ApiError as err:
                    if err.status in (404, 409):
                        return True
                    if err.status < 500 and err.status != 429:
                        self.api_failures += 1
                        return False
                except TRANSPORT_ERRORS:
                    pass
            if time.monotonic() > deadline:
                self.api_failures += 1
                return False
            await asyncio.sleep(0.5)

    @property
    def pods(self) -> dict[str, PodRecord]:
        assert self.tracker is not None
        return self.tracker.pods

    def leader(self) -> Instance | None:
        holder = self.holder
        return next((i for i in self.instances if i.identity == holder and i.alive()), None)

    async def read_holder(self) -> str:
        assert self.api is not None
        with contextlib.suppress(ApiError, *TRANSPORT_ERRORS):
            lease = await self.api.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}"
            )
            holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
            if holder != self.holder:
                self.leader_changes.append((self.now(), holder))
            self.holder = holder
        return self.holder

    # ---- set-up --------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.bench.start_controlplane(self.args.nodes)
        self.api = self.bench.api
        assert self.api is not None
        self.nodes = [f"bench-node-{i:05d}" for i in range(self.args.nodes)]
        await self.api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
        self.tracker = Tracker(self.api, NAMESPACE)
        await self.tracker.start()
        for _ in range(2):
            self.launch()
        await self.wait_ready(self.instances)
        deadline = time.monotonic() + 120
        while not await self.read_holder():
            if time.monotonic() > deadline:
                raise SystemExit("soak: no koordpy instance took the lease")
            await asyncio.sleep(0.5)

    def launch(self) -> Instance:
        assert self.bench.cp is not None and self.bench.cp.kubeconfig is not None
        instance = Instance(
            f"koordpy-{len(self.instances)}", self.bench.cp.kubeconfig, self.log_dir, self.args.lease_duration
        )
        instance.start()
        instance.started = self.now() if self.t0 else 0.0
        self.instances.append(instance)
        return instance

    async def wait_ready(self, instances: Iterable[Instance]) -> None:
        deadline = time.monotonic() + 120
        for instance in instances:
            while not await asyncio.to_thread(instance.ready):
                if not instance.alive() or time.monotonic() > deadline:
                    raise SystemExit(f"soak: {instance.identity} not ready; log: {instance.log_path}")
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        for instance in self.instances:
            await asyncio.to_thread(instance.stop)
        if self.tracker is not None:
            await self.tracker.stop()
        await self.bench.stop_controlplane()

    # ---- churn: pods and gangs -----------------------------------------------------------------

    def lifetime(self) -> float:
        return random.uniform(self.args.lifetime_min, self.args.lifetime_max)

    async def create_pod(self, record: PodRecord, manifest: dict[str, Any]) -> bool:
        assert self.tracker is not None
        self.tracker.expect(record)
        ok = await self.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", manifest)
        if ok and record.created is None:
            record.created = time.monotonic()
        if not ok and not record.uids:
            record.abandoned = True
        return ok

    async def create_plain(self) -> None:
        name = f"p-{next(self.counter):07d}"
        await self.create_pod(
            PodRecord(name, None, self.lifetime()), pod_manifest(name, SCHEDULER_NAME, "soak")
        )

    async def create_gang(self, size: int) -> None:
        n = next(self.counter)
        kind = "podgroup" if n % 2 else "annotations"
        name = f"g-{n:07d}"
        members = [f"{name}-{i:02d}" for i in range(size)]
        gang = GangRecord(name, kind, members)
        self.gangs[name] = gang
        lifetime = self.lifetime()
        if kind == "podgroup":
            path = f"{POD_GROUP_API}/namespaces/{NAMESPACE}/podgroups"
            if not await self.call("POST", path, pod_group_manifest(name, size)):
                gang.finished = True
                for m in members:
                    self.pods[m] = PodRecord(m, name, lifetime, abandoned=True)
                return
        created = True
        for m in members:
            if kind == "podgroup":
                manifest = pod_manifest(m, SCHEDULER_NAME, "soak", group=name)
            else:
                manifest = pod_manifest(m, SCHEDULER_NAME, "soak")
                manifest["metadata"]["annotations"] = {
                    f"{GANG}/name": name,
                    f"{GANG}/min-available": str(size),
                }
            created = await self.create_pod(PodRecord(m, name, lifetime), manifest) and created
        if not created:
            # a gang short of a member never reaches its minimum: give the whole of it up
            for m in members:
                self.pods[m].abandoned = True
                await self.delete_pod(self.pods[m])

    async def creator(self) -> None:
        budget = 0.0
        tick = time.monotonic()
        jobs: set[asyncio.Task[None]] = set()
        while not self.stopping.is_set():
            budget += self.args.rate
            while budget >= 1:
                if random.random() < self.args.gang_share:
                    size = random.randint(self.args.gang_min, self.args.gang_max)
                    job = asyncio.create_task(self.create_gang(size))
                    budget -= size
                else:
                    job = asyncio.create_task(self.create_plain())
                    budget -= 1
                jobs.add(job)
                job.add_done_callback(jobs.discard)
            tick += 1.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), max(0.0, tick - time.monotonic()))
        if jobs:
            await asyncio.gather(*jobs, return_exceptions=True)

    async def complete(self, record: PodRecord) -> None:
        """Phase Succeeded through the status subresource, as the kubelet (or KWOK) writes it."""
        record.completing = True
        ok = await self.call(
            "PATCH",
            f"/api/v1/namespaces/{NAMESPACE}/pods/{record.name}/status",
            {"status": {"phase": "Succeeded"}},
            "application/merge-patch+json",
        )
        if ok:
            record.completed_at = time.monotonic()
        else:
            record.completing = False

    async def delete_pod(self, record: PodRecord) -> None:
        record.deleting = True
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        if not await self.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{record.name}", body):
            record.deleting = False

    async def completer(self) -> None:
        """Complete what has run its lifetime, delete what completed a little while ago, and the
        PodGroups whose members are all gone."""
        tasks: set[asyncio.Task[None]] = set()

        def spawn(job: Awaitable[Any]) -> None:
            task = asyncio.ensure_future(job)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        while not self.stopping.is_set():
            now = time.monotonic()
            for record in list(self.pods.values()):
                if record.abandoned or record.gone or record.deleting or record.gang is not None:
                    continue
                self._churn_one(record, now, spawn)
            for gang in list(self.gangs.values()):
                members = [self.pods[m] for m in gang.members if m in self.pods]
                if gang.finished or not members:
                    continue
                if all(m.gone for m in members):
                    gang.finished = True
                    if gang.kind == "podgroup":
                        path = f"{POD_GROUP_API}/namespaces/{NAMESPACE}/podgroups/{gang.name}"
                        spawn(self.call("DELETE", path))
                    continue
                if any(m.abandoned for m in members):
                    continue
                if all(m.bound_at is not None for m in members):
                    gang.complete = True
                    # the members of a job end together, a lifetime after the last one started
                    last = max(m.bound_at or 0.0 for m in members)
                    for m in members:
                        if not m.gone and not m.deleting:
                            self._churn_one(m, now, spawn, started=last)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 1.0)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _churn_one(
        self,
        record: PodRecord,
        now: float,
        spawn: Callable[[Awaitable[Any]], None],
        started: float | None = None,
    ) -> None:
        if record.completed_at is not None:
            if now - record.completed_at >= self.args.linger:
                spawn(self.delete_pod(record))
            return
        if record.bound_at is None or record.completing:
            return
        start = started if started is not None else record.bound_at
        if now - start < record.lifetime:
            return
        if record.running:
            spawn(self.complete(record))
        elif now - start >= record.lifetime + NOT_RUNNING_SLACK:
            # bound to a node that was removed before KWOK marked the pod Running
            spawn(self.delete_pod(record))

    # ---- churn: nodes --------------------------------------------------------------------------

    async def node_churn(self) -> None:
        """Every period: add some nodes, cordon as many of the oldest, delete those a little later."""
        period = self.args.node_churn_period
        if period <= 0:
            return
        serial = itertools.count()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), period)
            if self.stopping.is_set():
                return
            added = [f"soak-node-{next(serial):05d}" for _ in range(self.args.node_churn)]
            for name in added:
                if await self.call("POST", "/api/v1/nodes", node_manifest(name)):
                    self.nodes.append(name)
            leaving = [n for n in self.nodes if n not in self.cordoned][: len(added)]
            for name in leaving:
                if await self.call(
                    "PATCH",
                    f"/api/v1/nodes/{name}",
                    {"spec": {"unschedulable": True}},
                    "application/merge-patch+json",
                ):
                    self.cordoned.add(name)
            self.say(f"nodes: added {', '.join(added)}; cordoned {', '.join(leaving)}")
            await asyncio.sleep(DRAIN_SECONDS)
            for name in leaving:
                if await self.call("DELETE", f"/api/v1/nodes/{name}"):
                    self.nodes.remove(name)
                    self.cordoned.discard(name)

    # ---- disruptions ---------------------------------------------------------------------------

    async def disruptions(self) -> None:
        plan = sorted(
            [
                (self.args.failover_at * self.args.duration, self.failover),
                (self.args.restart_at * self.args.duration, self.restart_apiserver),
            ],
            key=lambda p: p[0],
        )
        for at, action in plan:
            if at <= 0:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), max(0.0, at - self.now()))
            if self.stopping.is_set():
                return
            await action()

    async def failover(self) -> None:
        holder = await self.read_holder()
        leader = self.leader()
        if leader is None:
            self.say(f"leader failover skipped: no live instance holds the lease ({holder!r})")
            return
        at = self.now()
        assert leader.proc is not None
        self.killed.add(leader.identity)
        leader.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(leader.proc.wait)
        killed = time.monotonic()
        self.say(f"leader failover: SIGKILL {leader.identity} (the leader)")
        deadline = killed + self.args.lease_duration * 4 + 60
        while await self.read_holder() in ("", leader.identity):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        took = time.monotonic() - killed
        self.say(f"leader failover: {self.holder or 'nobody'} holds the lease {took:.1f}s after the kill")
        replacement = self.launch()
        await self.wait_ready([replacement])
        self.say(f"leader failover: {replacement.identity} started as the new standby")
        self.report.incidents.append(
            Incident(at, "leader failover", took, f"{leader.identity} killed, {self.holder} took over")
        )

    async def restart_apiserver(self) -> None:
        assert self.bench.cp is not None
        at = self.now()
        self.say("apiserver restart: stopping kube-apiserver")
        started = time.monotonic()
        await asyncio.to_thread(self.bench.cp.restart_apiserver)
        took = time.monotonic() - started
        self.say(f"apiserver restart: serving again after {took:.1f}s")
        self.report.incidents.append(Incident(at, "apiserver restart", took))

    async def supervisor(self) -> None:
        """An instance that exits on its own (it lost the lease: it stops writing at once and exits
        1, as kube-scheduler does) is started again, as its Deployment would."""
        while True:
            for instance in list(self.instances):
                if instance.identity in self.killed or instance.alive() or instance.proc is None:
                    continue
                self.killed.add(instance.identity)
                code = instance.proc.poll()
                why = "lost the lease" if code == 1 else "exited"
                self.say(f"{instance.identity} {why} (exit {code}); starting a replacement")
                replacement = self.launch()
                self.report.incidents.append(
                    Incident(
                        self.now(), f"{instance.identity} {why} (exit {code})", 0.0, replacement.identity
                    )
                )
            await asyncio.sleep(1.0)

    # ---- sampling and reporting ----------------------------------------------------------------

    async def sampler(self) -> None:
        while True:
            sample = {}
            for instance in self.instances:
                rss = await asyncio.to_thread(instance.rss_mib)
                if rss is not None:
                    sample[instance.identity] = rss
            self.rss.append((self.now(), sample))
            alive = sum(1 for r in self.pods.values() if r.bound_at is not None and not r.gone)
            self.max_alive = max(self.max_alive, alive)
            self.node_counts.append(len(self.nodes))
            await asyncio.sleep(RSS_SAMPLE_SECONDS)

    def counts(self) -> tuple[int, int, int, int, list[PodRecord]]:
        records = [r for r in self.pods.values() if not r.abandoned and r.created is not None]
        bound = sum(1 for r in records if r.bound_at is not None)
        completed = sum(1 for r in records if r.completed_at is not None)
        deleted = sum(1 for r in records if r.gone)
        pending = [r for r in records if r.bound_at is None and not r.gone]
        return len(records), bound, completed, deleted, pending

    async def reporter(self) -> None:
        assert self.tracker is not None
        interval = self.args.interval
        last = time.monotonic()
        while True:
            await asyncio.sleep(max(0.0, last + interval - time.monotonic()))
            now = time.monotonic()
            recent = sum(1 for t in self.tracker.bind_times if last < t <= now)
            rate = recent / (now - last)
            last = now
            created, bound, completed, deleted, pending = self.counts()
            oldest = max((now - (r.created or now) for r in pending), default=0.0)
            await self.read_holder()
            leader = self.leader()
            queues: dict[str, float] = {}
            if leader is not None:
                text = await asyncio.to_thread(leader.metrics)
                for _, labels, value in parse_metrics(text, ["scheduler_pending_pods"]):
                    queues[labels.get("queue", "")] = value
            rss = {i.identity: r for i in self.instances if (r := i.rss_mib()) is not None}
            row = Interval(
                round(self.now()),
                rate,
                created,
                bound,
                completed,
                deleted,
                len(pending),
                oldest,
                len(self.nodes),
                rss,
                self.holder,
                queues,
            )
            self.report.intervals.append(row)
            memory = " ".join(
                f"{name}{'*' if name == self.holder else ''} {value:.0f}" for name, value in rss.items()
            )
            q = "/".join(f"{queues.get(k, 0):.0f}" for k in ("active", "backoff", "unschedulable", "gated"))
            self.say(
                f"bound/s {rate:6.1f} | created {created} bound {bound} completed {completed} "
                f"deleted {deleted} | pending {len(pending)} (oldest {oldest:.1f}s; koordpy "
                f"active/backoff/unschedulable/gated {q}) | nodes {len(self.nodes)} | RSS MiB {memory}"
            )

    # ---- the run -------------------------------------------------------------------------------

    async def run(self) -> Report:
        await self.start()
        self.t0 = time.monotonic()
        assert self.tracker is not None
        leader = self.holder
        self.say(
            f"soak starts: {self.args.duration:.0f}s, {self.args.rate:g} pods/s, {len(self.nodes)} nodes, "
            f"instances {', '.join(i.identity for i in self.instances)} (leader {leader}); "
            f"logs in {self.log_dir}"
        )
        background = [
            asyncio.create_task(self.sampler()),
            asyncio.create_task(self.reporter()),
            asyncio.create_task(self.supervisor()),
        ]
        churn = [
            asyncio.create_task(self.creator()),
            asyncio.create_task(self.completer()),
            asyncio.create_task(self.node_churn()),
            asyncio.create_task(self.disruptions()),
        ]
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.args.duration)
            self.stopping.set()
            await asyncio.gather(*churn)
            end = time.monotonic()
            self.say(f"churn stopped; waiting up to {self.args.grace:.0f}s for the pods still pending")
            # the pods created last get their grace period too
            while time.monotonic() < end + self.args.grace:
                _, _, _, _, pending = self.counts()
                if not pending:
                    break
                await asyncio.sleep(1.0)
            self.summarize(end)
        finally:
            for task in (*background, *churn):
                task.cancel()
            await asyncio.gather(*background, *churn, return_exceptions=True)
        return self.report

    # ---- the summary ---------------------------------------------------------------------------

    def summarize(self, end: float) -> None:
        assert self.tracker is not None
        args = self.args
        now = time.monotonic()
        records = [r for r in self.pods.values() if not r.abandoned and r.created is not None]
        waits = sorted(max(0.0, r.bound_at - (r.created or 0.0)) for r in records if r.bound_at is not None)
        late = [r for r in records if r.bound_at is not None and r.bound_at - (r.created or 0.0) > args.grace]
        never = [r for r in records if r.bound_at is None and now - (r.created or now) > args.grace]
        twice = [r for r in records if len(r.nodes) > 1]
        gangs_split = []
        for gang in self.gangs.values():
            members = [self.pods[m] for m in gang.members if m in self.pods]
            if any(m.abandoned for m in members) or not members:
                continue
            bound = [m for m in members if m.bound_at is not None]
            if bound and len(bound) < len(members):
                gangs_split.append(f"{gang.name} ({len(bound)}/{len(members)} bound)")
        spreads = []
        for gang in self.gangs.values():
            times = [self.pods[m].bound_at for m in gang.members if m in self.pods]
            if times and all(t is not None for t in times):
                spreads.append(max(t or 0.0 for t in times) - min(t or 0.0 for t in times))
        run_seconds = end - self.t0
        bound_in_run = sum(1 for t in self.tracker.bind_times if self.t0 <= t <= end)
        rates = [i.bound_per_s for i in self.report.intervals]

        def pct(p: float) -> float:
            return waits[min(len(waits) - 1, int(p * len(waits)))] if waits else 0.0

        capacity = len(self.nodes) * int(NODE_CAPACITY["pods"])
        memory = memory_verdicts(
            self.rss, {i.identity: i.started for i in self.instances}, args.duration, args.memory_tolerance
        )
        survivor = self.leader() or next((i for i in self.instances if i.alive()), None)
        bindings: dict[str, float] = {}
        if survivor is not None:
            for _, labels, value in parse_metrics(survivor.metrics(), ["koordpy_bindings_total"]):
                bindings[labels.get("result", "")] = value
        summary: dict[str, Any] = {
            "duration_s": round(run_seconds),
            "pods_created": len(records),
            "plain_pods": sum(1 for r in records if r.gang is None),
            "gangs": len(
                [g for g in self.gangs.values() if not all(self.pods[m].abandoned for m in g.members)]
            ),
            "pods_bound": sum(1 for r in records if r.bound_at is not None),
            "pods_completed": sum(1 for r in records if r.completed_at is not None),
            "pods_deleted": sum(1 for r in records if r.gone),
            "pods_abandoned_by_harness": sum(1 for r in self.pods.values() if r.abandoned),
            "bound_per_s_mean": bound_in_run / run_seconds if run_seconds else 0.0,
            "bound_per_s_min_interval": min(rates, default=0.0),
            "bound_per_s_max_interval": max(rates, default=0.0),
            "time_to_bind_p50_s": pct(0.50),
            "time_to_bind_p99_s": pct(0.99),
            "time_to_bind_max_s": waits[-1] if waits else 0.0,
            "not_bound_within_grace": [
                f"{r.name} (created t={(r.created or 0) - self.t0:.0f}s)" for r in never
            ],
            "bound_late": [
                f"{r.name} (created t={(r.created or 0) - self.t0:.0f}s, "
                f"bound after {(r.bound_at or 0) - (r.created or 0):.0f}s)"
                for r in late
            ],
            "bound_twice": [f"{r.name}: {' -> '.join(r.nodes)}" for r in twice],
            "replaced": list(self.tracker.replaced),
            "gangs_partly_bound": gangs_split,
            "gang_bind_spread_max_s": max(spreads, default=0.0),
            "max_pods_alive": self.max_alive,
            "pod_capacity_at_end": capacity,
            "nodes_min": min(self.node_counts, default=len(self.nodes)),
            "nodes_max": max(self.node_counts, default=len(self.nodes)),
            "harness_api_calls_given_up": self.api_failures,
            "watch_restarts": self.tracker.restarts,
            "koordpy_bindings_total": bindings,
            "memory": memory,
            "leaders": [f"t={t:.0f}s {h or '(none)'}" for t, h in self.leader_changes],
            "logs": {i.identity: f"{i.log_summary()} {i.log_path}" for i in self.instances},
        }
        self.report.summary = summary


def least_squares_slope(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var


def memory_verdicts(
    samples: list[tuple[float, dict[str, float]]],
    started: dict[str, float],
    duration: float,
    tolerance: float,
) -> dict[str, dict[str, Any]]:
    """For each koordpy process that ran from before the second quarter to the end: mean RSS in the
    second and last quarters, the slope from the second quarter on, and whether it stayed flat. A
    process started later is still filling its caches in the second quarter: it is not judged."""
    q2 = (duration / 4, duration / 2)
    q4 = (duration * 3 / 4, duration)
    out: dict[str, dict[str, Any]] = {}
    names = {n for _, s in samples for n in s}
    for name in sorted(names):
        series = [(t, s[name]) for t, s in samples if name in s]
        in_q2 = [v for t, v in series if q2[0] <= t < q2[1]]
        in_q4 = [v for t, v in series if q4[0] <= t <= q4[1]]
        if started.get(name, 0.0) > q2[0]:
            out[name] = {"verdict": f"not judged: started at t={started[name]:.0f}s, after the first quarter"}
            continue
        if not in_q2 or not in_q4 or series[-1][0] < q4[1] - 2 * RSS_SAMPLE_SECONDS:
            out[name] = {"verdict": "not judged: not running through the second and last quarters"}
            continue
        tail = [(t, v) for t, v in series if t >= q2[0]]
        slope_per_hour = least_squares_slope(tail) * 3600
        mean2, mean4 = statistics.fmean(in_q2), statistics.fmean(in_q4)
        growth = (mean4 - mean2) / mean2 if mean2 else 0.0
        out[name] = {
            "q2_mean_mib": mean2,
            "q4_mean_mib": mean4,
            "growth": growth,
            "slope_mib_per_hour": slope_per_hour,
            "verdict": "flat" if growth <= tolerance else "growing",
        }
    return out


def print_summary(report: Report, args: argparse.Namespace) -> None:
    s = report.summary
    print()
    print(f"== soak summary: {machine()}; {time.strftime('%Y-%m-%d')}")
    print(
        f"run {s['duration_s']}s: {s['pods_created']} pods created ({s['plain_pods']} plain, "
        f"{s['pods_created'] - s['plain_pods']} in {s['gangs']} gangs), {s['pods_bound']} bound, "
        f"{s['pods_completed']} completed, {s['pods_deleted']} deleted"
        + (
            f"; {s['pods_abandoned_by_harness']} given up by the harness"
            if s["pods_abandoned_by_harness"]
            else ""
        )
    )
    print(
        f"throughput: {s['bound_per_s_mean']:.1f} pods bound/s on average; per interval "
        f"{s['bound_per_s_min_interval']:.1f} to {s['bound_per_s_max_interval']:.1f}"
    )
    print(
        f"time to bind: p50 {s['time_to_bind_p50_s']:.2f}s, p99 {s['time_to_bind_p99_s']:.2f}s, "
        f"max {s['time_to_bind_max_s']:.1f}s; gang members bound within {s['gang_bind_spread_max_s']:.1f}s "
        "of each other at most"
    )
    for incident in report.incidents:
        detail = f" ({incident.detail})" if incident.detail else ""
        print(f"{incident.what} at t={incident.t:.0f}s: {incident.seconds:.1f}s{detail}")
    print(
        f"capacity: {s['nodes_min']}-{s['nodes_max']} nodes, at most {s['max_pods_alive']} pods bound and "
        f"not deleted at once, room for {s['pod_capacity_at_end']} pods at the end"
    )

    def listing(title: str, items: list[str]) -> None:
        shown = "; ".join(items[:10]) + (f"; ... {len(items) - 10} more" if len(items) > 10 else "")
        print(f"{title}: {len(items)}" + (f" -- {shown}" if items else ""))

    listing(f"not bound within the grace period ({args.grace:.0f}s)", s["not_bound_within_grace"])
    listing(f"bound, but later than the grace period ({args.grace:.0f}s)", s["bound_late"])
    listing("bound twice (nodeName changed once set)", s["bound_twice"])
    listing("replaced under the same name", s["replaced"])
    listing("gangs partly bound at the end", s["gangs_partly_bound"])
    bindings = ", ".join(f"{k} {v:.0f}" for k, v in sorted(s["koordpy_bindings_total"].items()))
    print(f"koordpy_bindings_total of the last leader (since it started): {bindings or 'n/a'}")
    print(
        f"harness: {s['harness_api_calls_given_up']} API calls given up, {s['watch_restarts']} watch restarts"
    )
    print(
        f"memory (RSS; flat = last-quarter mean within {args.memory_tolerance:.0%} of the second quarter's):"
    )
    for name, m in s["memory"].items():
        if "q2_mean_mib" not in m:
            print(f"  {name}: {m['verdict']}")
            continue
        print(
            f"  {name}: second quarter {m['q2_mean_mib']:.1f} MiB, last quarter {m['q4_mean_mib']:.1f} MiB "
            f"({m['growth']:+.1%}), slope {m['slope_mib_per_hour']:+.1f} MiB/h: {m['verdict']}"
        )
    print(f"lease holders: {', '.join(s['leaders'])}")
    for name, text in s["logs"].items():
        print(f"log {name}: {text}")


async def soak(args: argparse.Namespace, log_dir: Path) -> Report:
    runner = Soak(args, log_dir)
    try:
        return await runner.run()
    finally:
        await runner.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of churn (default 3600)")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between reports (30)")
    parser.add_argument("--nodes", type=int, default=40, help="KWOK nodes at the start (40)")
    parser.add_argument("--rate", type=float, default=10.0, help="pods created per second (10)")
    parser.add_argument("--gang-share", type=float, default=0.5, help="share of creations that are gangs")
    parser.add_argument("--gang-min", type=int, default=4, help="smallest gang (4)")
    parser.add_argument("--gang-max", type=int, default=12, help="largest gang (12)")
    parser.add_argument("--lifetime-min", type=float, default=20.0, help="shortest run of a pod, s (20)")
    parser.add_argument("--lifetime-max", type=float, default=90.0, help="longest run of a pod, s (90)")
    parser.add_argument(
        "--linger", type=float, default=5.0, help="seconds a completed pod stays before it is deleted (5)"
    )
    parser.add_argument(
        "--node-churn-period", type=float, default=60.0, help="seconds between node changes (60; 0: none)"
    )
    parser.add_argument("--node-churn", type=int, default=2, help="nodes added and removed each time (2)")
    parser.add_argument(
        "--restart-at", type=float, default=0.5, help="when the apiserver restarts, share of the run (0.5)"
    )
    parser.add_argument(
        "--failover-at", type=float, default=0.2, help="when the leader is killed, share of the run (0.2)"
    )
    parser.add_argument("--lease-duration", type=float, default=15.0, help="koordpy's --lease-duration (15)")
    parser.add_argument(
        "--grace", type=float, default=60.0, help="seconds a pod may wait to be bound before it counts (60)"
    )
    parser.add_argument(
        "--memory-tolerance",
        type=float,
        default=0.10,
        help="growth of the mean RSS from the second to the last quarter still called flat (0.10)",
    )
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of quiet once the nodes are Ready")
    parser.add_argument(
        "--kwok-lease-seconds",
        type=int,
        default=0,
        help="KWOK's --node-lease-duration-seconds (0: no node leases; see bench_cluster.py)",
    )
    parser.add_argument("--log-dir", type=Path, help="where the koordpy logs go (default: a new /tmp dir)")
    parser.add_argument("--json", type=Path, help="also write the intervals and the summary here")
    args = parser.parse_args(argv)
    if args.gang_min < 1 or args.gang_max < args.gang_min:
        parser.error("--gang-min must be at least 1 and at most --gang-max")
    if args.duration <= 0 or args.interval <= 0:
        parser.error("--duration and --interval must be positive")
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="koordpy-soak-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    prepare_binaries(["koordpy"])
    report = asyncio.run(soak(args, log_dir))
    print_summary(report, args)
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
