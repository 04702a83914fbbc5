"""A few hundred pods and gangs through `koordpy run` on the real control plane: every pod is bound,
and koordpy's API writes per pod, counted in kube-apiserver's audit log, are those of kube-scheduler.

One run serves every test of the module (the `scale_run` fixture), on a control plane of the
module's own whose apiserver audits the writes a scheduler makes:

1. Pending at start: 50 KWOK nodes; 200 plain pods and 10 gangs (declared by PodGroups of both API
   groups and by annotations alone) are created before `koordpy run` starts.
2. Created while running: more plain pods, a gang whose pods come before their PodGroup, the two
   gangs of a gang group with their members interleaved, and a gang whose last member is created
   only once koordpy has seen the others.
3. koordpy is stopped (SIGTERM) and the audit log read: its writes are told apart by the user of
   its own client certificate. Events are named `<pod name>.<suffix>`, which attributes them to
   their pod; a pod that waited has FailedScheduling Events besides its Scheduled one, so the
   Events' request bodies are audited too (Request level) for their `reason`.

kube-scheduler writes, per scheduled pod, one Binding and one Scheduled Event, and a PodScheduled
condition only when the pod failed or waited; metadata a scheduler wants on a pod (gang
annotations) rides on the Binding. Nothing here asserts on time: the deadlines only stop a hung run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config

from tests.e2e.kwok import create_ready_nodes
from tests.support.audit import Write, count_writes, read_audit_log, scheduler_writes_policy, user_kubeconfig
from tests.support.controlplane import ControlPlane, free_port

# read by the `audited_control_plane` fixture
AUDIT_POLICY = scheduler_writes_policy(events_level="Request")

SCHEDULER_NAME = "koord-scheduler"
KOORDPY_USER = "koordpy-e2e-scale"
REPO_ROOT = Path(__file__).resolve().parents[2]

NODE_COUNT = 50
NODE_RESOURCES = {"cpu": "8", "memory": "32Gi", "pods": "110"}
POD_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
# the cluster has room for every pod many times over: a pod left pending is the scheduler's doing
PLAIN_AT_START = 200
PLAIN_WHILE_RUNNING = 60
# only stops a hung run
DEADLINE = 300.0
CREATE_CONCURRENCY = 16

X_K8S = "scheduling.x-k8s.io"
SIGS = "scheduling.sigs.k8s.io"
ANNOTATIONS = "annotations"
G = "gang.scheduling.koordinator.sh"


# ---------------------------------------------------------------------------------------------- objects
@dataclass(frozen=True)
class Gang:
    name: str
    way: str  # X_K8S, SIGS (a PodGroup of that API group) or ANNOTATIONS
    size: int
    min_member: int
    # gang ids ("namespace/name") of its gang group; SIGS only
    groups: tuple[str, ...] = ()

    def members(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.size)]

    def member(self, name: str) -> dict[str, Any]:
        if self.way == X_K8S:
            return pod(name, labels={f"{X_K8S}/pod-group": self.name})
        if self.way == SIGS:
            return pod(name, labels={f"pod-group.{SIGS}": self.name})
        return pod(
            name,
            annotations={
                f"{G}/name": self.name,
                f"{G}/min-available": str(self.min_member),
                f"{G}/total-number": str(self.size),
            },
        )

    def podgroup(self) -> dict[str, Any] | None:
        if self.way == ANNOTATIONS:
            return None
        annotations = {f"{G}/groups": json.dumps(list(self.groups))} if self.groups else {}
        return {
            "apiVersion": f"{self.way}/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": self.name, "annotations": annotations},
            "spec": {"minMember": self.min_member},
        }


def pod(
    name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "e2e-scale", **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": POD_REQUESTS},
                }
            ],
        },
    }


@dataclass
class Creator:
    """Creates pods and PodGroups in one namespace, and remembers what it made."""

    core: client.CoreV1Api
    objects: client.CustomObjectsApi
    namespace: str
    pods: list[str] = field(default_factory=list)
    gang_members: set[str] = field(default_factory=set)
    podgroups: list[tuple[str, str]] = field(default_factory=list)  # (API group, name)

    async def pod(self, body: dict[str, Any], gang: bool = False) -> None:
        await self.core.create_namespaced_pod(self.namespace, body)
        name = body["metadata"]["name"]
        self.pods.append(name)
        if gang:
            self.gang_members.add(name)

    async def member(self, gang: Gang, name: str) -> None:
        await self.pod(gang.member(name), gang=True)

    async def podgroup(self, gang: Gang) -> None:
        body = gang.podgroup()
        assert body is not None
        await self.objects.create_namespaced_custom_object(
            gang.way, "v1alpha1", self.namespace, "podgroups", body
        )
        self.podgroups.append((gang.way, gang.name))


async def at_most(n: int, calls: Iterable[Callable[[], Awaitable[None]]]) -> None:
    semaphore = asyncio.Semaphore(n)

    async def one(call: Callable[[], Awaitable[None]]) -> None:
        async with semaphore:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


def gangs_at_start() -> list[Gang]:
    """Ten gangs of 10-20 pods, the three ways to declare one in turn; some may start below
    their size (minMember smaller than the number of pods)."""
    sizes = [10, 12, 14, 16, 18, 20, 11, 13, 15, 17]
    ways = [X_K8S, SIGS, ANNOTATIONS]
    gangs = []
    for k, size in enumerate(sizes):
        way = ways[k % len(ways)]
        short = {X_K8S: "xk8s", SIGS: "sigs", ANNOTATIONS: "anno"}[way]
        gangs.append(Gang(f"gang-{k}-{short}", way, size, size - 3 if k % 4 == 3 else size))
    return gangs


async def create_pending_at_start(c: Creator) -> None:
    gangs = gangs_at_start()
    for gang in gangs:
        if gang.way != ANNOTATIONS:
            await c.podgroup(gang)
    calls: list[Callable[[], Awaitable[None]]] = [
        lambda n=f"plain-{i}": c.pod(pod(n)) for i in range(PLAIN_AT_START)
    ]
    calls += [lambda g=g, n=n: c.member(g, n) for g in gangs for n in g.members()]
    await at_most(CREATE_CONCURRENCY, calls)


@dataclass
class RunningBatch:
    markers: list[str]  # plain pods created after every member of `late` but its last
    late: Gang
    last_member: str


async def create_while_running(c: Creator) -> RunningBatch:
    """One stream of creations, in an order a scheduler would not choose."""
    ns = c.namespace
    plain = [f"more-plain-{i}" for i in range(PLAIN_WHILE_RUNNING)]
    pods_first = Gang("pods-first", X_K8S, 12, 12)
    group_ids = (f"{ns}/group-a", f"{ns}/group-b")
    group_a = Gang("group-a", SIGS, 6, 6, group_ids)
    group_b = Gang("group-b", SIGS, 10, 10, group_ids)
    late = Gang("last-late", ANNOTATIONS, 8, 8)
    late_members = late.members()

    for name in plain[0:10]:
        await c.pod(pod(name))
    for name in late_members[0:3]:
        await c.member(late, name)
    for name in pods_first.members()[0:6]:
        await c.member(pods_first, name)
    for name in plain[10:20]:
        await c.pod(pod(name))
    # the members of a gang group interleaved; group-b's PodGroup arrives after some of its pods
    await c.podgroup(group_a)
    a, b = group_a.members(), group_b.members()
    for i in range(len(b)):
        if i < len(a):
            await c.member(group_a, a[i])
        await c.member(group_b, b[i])
        if i == 6:
            await c.podgroup(group_b)
    for name in pods_first.members()[6:]:
        await c.member(pods_first, name)
    for i, name in enumerate(plain[20:40]):
        await c.pod(pod(name))
        if i % 5 == 4:
            await c.member(late, late_members[3 + i // 5])
    # the PodGroup after all of its pods
    await c.podgroup(pods_first)
    for name in plain[40:]:
        await c.pod(pod(name))
    return RunningBatch(markers=plain[40:], late=late, last_member=late_members[-1])


# ---------------------------------------------------------------------------------------------- koordpy run
class KoordpyRun:
    """`koordpy run` (operators on, the default configuration) as a child process."""

    def __init__(self, kubeconfig: Path, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        script = Path(sys.executable).with_name("koordpy")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "koordpy.cli"]
        self.proc = subprocess.Popen(
            [
                *command,
                "run",
                "--kubeconfig",
                str(kubeconfig),
                # one instance, no Lease: kube-scheduler's default is to elect
                "--leader-elect=false",
                "--secure-port",
                "0",
                "--insecure-port",
                str(free_port()),
                "--bind-address",
                "127.0.0.1",
                "--identity",
                f"{KOORDPY_USER}-{uuid.uuid4().hex[:6]}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def running(self) -> bool:
        return self.proc.poll() is None

    async def stop(self) -> int | None:
        """SIGTERM, and the exit status once it has let its writes in flight finish."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(self.proc.wait, 60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait, 10)
            code = None
        self._log.close()
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


async def scheduled_events_written(
    api: client.ApiClient, namespaces: list[str], want: int, deadline: float
) -> None:
    """Until the namespaces hold `want` Scheduled events, or the deadline (the caller's assertions
    then say what is missing)."""
    events = client.EventsV1Api(api)
    while time.monotonic() < deadline:
        written = 0
        for namespace in namespaces:
            listed = (await events.list_namespaced_event(namespace)).items
            written += sum(1 for e in listed if e.reason == "Scheduled")
        if written >= want:
            return
        await asyncio.sleep(0.5)


async def unbound_after(
    core: client.CoreV1Api, namespace: str, names: Iterable[str], koordpy: KoordpyRun, deadline: float
) -> list[str]:
    """Waits until every pod of `names` is bound (or koordpy exited, or the deadline passed) and
    returns those still unbound."""
    wanted = set(names)
    while True:
        listing = await core.list_namespaced_pod(namespace, field_selector="spec.nodeName=")
        unbound = sorted(wanted & {p.metadata.name for p in listing.items})
        if not unbound or not koordpy.running() or time.monotonic() > deadline:
            return unbound
        await asyncio.sleep(0.5)


def settled_writes(path: Path) -> list[Write]:
    """The audit log once two reads in a row agree (the last requests' events are written as they
    complete)."""
    writes = read_audit_log(path)
    for _ in range(20):
        time.sleep(0.5)
        again = read_audit_log(path)
        if len(again) == len(writes):
            return again
        writes = again
    return writes


# ---------------------------------------------------------------------------------------------- the run
@dataclass
class ScaleRun:
    at_start: Creator
    while_running: Creator
    unbound_at_start: list[str]
    unbound_while_running: list[str]
    # the last member of `last-late` was created after koordpy had bound pods created after the others
    late_member_after_others_seen: bool
    writes: list[Write]
    # the Events koordpy reported, as the apiserver holds them after the run: (namespace, name)
    stored_events: set[tuple[str, str]]
    koordpy_exit: int | None
    koordpy_log: str
    table: str = ""

    def creators(self) -> tuple[Creator, Creator]:
        return (self.at_start, self.while_running)

    def bound_pods(self) -> list[tuple[str, str]]:
        unbound = {(self.at_start.namespace, n) for n in self.unbound_at_start} | {
            (self.while_running.namespace, n) for n in self.unbound_while_running
        }
        return [k for k in self.all_pods() if k not in unbound]

    def all_pods(self) -> list[tuple[str, str]]:
        return [(c.namespace, n) for c in self.creators() for n in c.pods]

    def gang_members(self) -> set[tuple[str, str]]:
        return {(c.namespace, n) for c in self.creators() for n in c.gang_members}

    def koordpy_writes(self) -> list[Write]:
        return [w for w in self.writes if w.user == KOORDPY_USER]


@pytest.fixture(scope="module")
async def scale_run(
    audited_control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ScaleRun]:
    cp = audited_control_plane
    assert cp.audit_log is not None
    tmp = tmp_path_factory.mktemp("scale")
    kubeconfig = user_kubeconfig(cp, tmp / "koordpy.kubeconfig", KOORDPY_USER)
    configuration = client.Configuration()
    await k8s_config.load_kube_config(config_file=str(cp.kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration=configuration) as api:
        core, objects = client.CoreV1Api(api), client.CustomObjectsApi(api)
        await create_ready_nodes(core, {f"scale-node-{i}": {} for i in range(NODE_COUNT)}, NODE_RESOURCES)
        creators = []
        for phase in ("start", "running"):
            namespace = f"e2e-scale-{phase}-{uuid.uuid4().hex[:6]}"
            await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
            creators.append(Creator(core, objects, namespace))
        at_start, while_running = creators

        await create_pending_at_start(at_start)
        koordpy = KoordpyRun(kubeconfig, tmp / "koordpy.log")
        try:
            deadline = time.monotonic() + DEADLINE
            unbound_at_start = await unbound_after(core, at_start.namespace, at_start.pods, koordpy, deadline)

            deadline = time.monotonic() + DEADLINE
            batch = await create_while_running(while_running)
            # one watch delivers the pods in the order they were created: once koordpy has bound
            # pods created after the others of the gang, it has seen those others
            markers_unbound = await unbound_after(
                core, while_running.namespace, batch.markers, koordpy, deadline
            )
            await while_running.member(batch.late, batch.last_member)
            unbound_while_running = await unbound_after(
                core, while_running.namespace, while_running.pods, koordpy, deadline
            )
            # Events are best effort and trail the bindings: SIGTERM does not wait for them
            # (docs/deploy.md), so the writes are counted once koordpy has had the time to send them
            bound = len(at_start.pods) + len(while_running.pods)
            bound -= len(unbound_at_start) + len(unbound_while_running)
            await scheduled_events_written(api, [c.namespace for c in creators], bound, deadline)
        finally:
            koordpy_exit = await koordpy.stop()
        writes = await asyncio.to_thread(settled_writes, cp.audit_log)
        events = client.EventsV1Api(api)
        stored_events = {
            (c.namespace, e.metadata.name)
            for c in creators
            for e in (await events.list_namespaced_event(c.namespace)).items
            # reported under the profile's name, or koordpy's own for what concerns no profile
            if e.reporting_controller in (SCHEDULER_NAME, "koordpy")
        }

    run = ScaleRun(
        at_start=at_start,
        while_running=while_running,
        unbound_at_start=unbound_at_start,
        unbound_while_running=unbound_while_running,
        late_member_after_others_seen=not markers_unbound,
        writes=writes,
        stored_events=stored_events,
        koordpy_exit=koordpy_exit,
        koordpy_log=koordpy.log(),
    )
    run.table = report(run)
    print(run.table)
    yield run


# ---------------------------------------------------------------------------------------------- counting
KINDS = (
    "create pods/binding",
    "Scheduled events",
    "FailedScheduling events",
    "other events",
    "pods/status writes",
    "pods writes (metadata)",
)


def writes_per_pod(run: ScaleRun) -> tuple[dict[tuple[str, str], Counter[str]], int]:
    """koordpy's writes per pod and kind (KINDS), and how many of its Event writes named no pod of
    the run. An Event belongs to the pod whose name is its own up to the last dot; a series patch
    has the reason of the Event it patches."""
    per_pod: dict[tuple[str, str], Counter[str]] = {key: Counter() for key in run.all_pods()}
    writes = run.koordpy_writes()
    reasons = {
        (w.namespace, w.name): w.reason for w in writes if w.resource == "events" and w.verb == "create"
    }
    unattributed = 0
    for w in writes:
        if w.resource == "pods":
            counts = per_pod.get((w.namespace, w.name))
            if counts is None:
                continue
            if w.subresource == "binding" and w.verb == "create":
                counts["create pods/binding"] += 1
            elif w.subresource == "status" and w.verb in ("patch", "update"):
                counts["pods/status writes"] += 1
            elif w.subresource == "" and w.verb in ("patch", "update"):
                counts["pods writes (metadata)"] += 1
        elif w.resource == "events":
            counts = per_pod.get((w.namespace, w.name.rpartition(".")[0]))
            if counts is None:
                unattributed += 1
                continue
            reason = reasons.get((w.namespace, w.name))
            kind = f"{reason} events" if reason in ("Scheduled", "FailedScheduling") else "other events"
            counts[kind] += 1
    return per_pod, unattributed


def _stats(values: list[int]) -> str:
    if not values:
        return f"{'-':>5} {'-':>7} {'-':>5} {0:>7}"
    return f"{min(values):>5} {statistics.median(values):>7g} {max(values):>5} {sum(values):>7}"


def report(run: ScaleRun) -> str:
    per_pod, unattributed = writes_per_pod(run)
    bound = run.bound_pods()
    gang = run.gang_members()
    writes = run.koordpy_writes()
    lines = [
        "",
        f"koordpy's API writes from the audit log (user {KOORDPY_USER}): {len(per_pod)} pods, {len(bound)} "
        f"bound, {len(gang)} of them gang members; koordpy exit status {run.koordpy_exit}",
        f"{'per pod':<34} {'pods':<6} {'min':>5} {'median':>7} {'max':>5} {'total':>7}",
    ]
    groups = (
        ("all", list(per_pod)),
        ("plain", [k for k in per_pod if k not in gang]),
        ("gang", sorted(gang)),
    )
    for kind in KINDS:
        for label, keys in groups:
            lines.append(f"{kind:<34} {label:<6} {_stats([per_pod[k][kind] for k in keys])}")
    pg_writes = Counter(
        (w.namespace, w.name) for w in writes if w.resource == "podgroups" and w.subresource == "status"
    )
    podgroups = [(c.namespace, name) for c in run.creators() for _, name in c.podgroups]
    lines.append(f"{'podgroups/status writes':<34} {'per PG':<6} {_stats([pg_writes[k] for k in podgroups])}")
    by_resource = Counter(
        f"{w.verb} {w.resource}{'/' + w.subresource if w.subresource else ''}" for w in writes
    )
    lines.append(
        f"all writes by koordpy: {len(writes)} ("
        + ", ".join(f"{k} {n}" for k, n in sorted(by_resource.items()))
        + f"); Event writes naming no pod of the run: {unattributed}"
    )
    failed = Counter(w.code for w in writes if w.code is None or w.code >= 400)
    if failed:
        lines.append(f"koordpy writes refused, by HTTP status: {dict(failed)}")
    others = Counter(
        f"{w.user}: {w.verb} {w.resource}{'/' + w.subresource if w.subresource else ''}"
        for w in run.writes
        if w.user != KOORDPY_USER
    )
    lines.append(
        "audited writes by others: " + (", ".join(f"{k} {n}" for k, n in sorted(others.items())) or "none")
    )
    # klog's severity letter opens each line
    noisy = [line for line in run.koordpy_log.splitlines() if line[:1] in ("W", "E")]
    lines.append(f"koordpy log: {len(noisy)} warning/error lines" + ("; first: " + noisy[0] if noisy else ""))
    return "\n".join(lines)


def offenders(
    per_pod: dict[tuple[str, str], Counter[str]],
    keys: Iterable[tuple[str, str]],
    kind: str,
    ok: Callable[[int], bool],
) -> dict[str, int]:
    return {
        f"{ns}/{name}": per_pod[(ns, name)][kind] for ns, name in keys if not ok(per_pod[(ns, name)][kind])
    }


def _few(found: dict[str, int] | list[str]) -> str:
    items = list(found.items()) if isinstance(found, dict) else found
    return f"{len(items)}: {items[:10]}{' ...' if len(items) > 10 else ''}"


# ---------------------------------------------------------------------------------------------- tests
def test_every_pod_pending_at_start_is_bound(scale_run: ScaleRun) -> None:
    assert not scale_run.unbound_at_start, (
        f"of {len(scale_run.at_start.pods)} pods created before koordpy started, still unbound "
        f"{_few(scale_run.unbound_at_start)}\n{scale_run.table}"
    )


def test_every_pod_created_while_running_is_bound(scale_run: ScaleRun) -> None:
    assert scale_run.late_member_after_others_seen, (
        "koordpy never bound the pods created after the late gang's"
    )
    assert not scale_run.unbound_while_running, (
        f"of {len(scale_run.while_running.pods)} pods created while koordpy ran, still unbound "
        f"{_few(scale_run.unbound_while_running)}\n{scale_run.table}"
    )


def test_each_bound_pod_is_bound_by_exactly_one_binding(scale_run: ScaleRun) -> None:
    per_pod, _ = writes_per_pod(scale_run)
    wrong = offenders(per_pod, scale_run.bound_pods(), "create pods/binding", lambda n: n == 1)
    assert not wrong, f"bound pods without exactly one binding {_few(wrong)}\n{scale_run.table}"


def test_each_bound_pod_gets_exactly_one_scheduled_event(scale_run: ScaleRun) -> None:
    per_pod, _ = writes_per_pod(scale_run)
    wrong = offenders(per_pod, scale_run.bound_pods(), "Scheduled events", lambda n: n == 1)
    assert not wrong, f"bound pods without exactly one Scheduled event write {_few(wrong)}\n{scale_run.table}"


def test_no_pod_gets_more_than_one_status_write(scale_run: ScaleRun) -> None:
    per_pod, _ = writes_per_pod(scale_run)
    wrong = offenders(per_pod, scale_run.all_pods(), "pods/status writes", lambda n: n <= 1)
    assert not wrong, f"pods with more than one pods/status write {_few(wrong)}\n{scale_run.table}"


def test_koordpy_stops_cleanly_on_sigterm_after_the_load(scale_run: ScaleRun) -> None:
    # exit 0 on SIGTERM is kube-scheduler's contract, and what a Deployment's rollout relies on
    assert scale_run.koordpy_exit == 0, f"koordpy exit status {scale_run.koordpy_exit}"


def test_gang_annotations_need_no_write_to_pod_metadata(scale_run: ScaleRun) -> None:
    metadata = [w for w in scale_run.koordpy_writes() if w.resource == "pods" and w.subresource == ""]
    assert not metadata, (
        f"koordpy patched or updated pods {_few([f'{w.verb} {w.namespace}/{w.name}' for w in metadata])}\n"
        f"{scale_run.table}"
    )


def test_the_audit_log_holds_every_event_koordpy_created(scale_run: ScaleRun) -> None:
    """The instrument is complete: the Events the apiserver holds are the Event creations the
    audit log has of koordpy."""
    created = {
        (w.namespace, w.name)
        for w in scale_run.koordpy_writes()
        if w.resource == "events" and w.verb == "create" and w.code is not None and w.code < 400
    }
    assert scale_run.stored_events, "koordpy reported no Event at all"
    assert created == scale_run.stored_events, (
        f"only stored {_few(sorted(scale_run.stored_events - created))}; "
        f"only audited {_few(sorted(created - scale_run.stored_events))}"
    )


def test_the_audit_log_counts_each_scheduler_write_once(audited_control_plane: ControlPlane) -> None:
    """The instrument counts what it should: each kind of write the policy names once, the reason
    of an Event from its request body, and no reads or writes it does not name."""
    cp = audited_control_plane
    assert cp.audit_log is not None
    ns = f"e2e-scale-probe-{uuid.uuid4().hex[:6]}"
    merge = "application/merge-patch+json"

    def call(method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        status, text = cp.request(method, path, body, content_type=content_type)
        assert status < 400, (method, path, status, text)
        return json.loads(text)

    call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    pods = f"/api/v1/namespaces/{ns}/pods"
    probe = pod("probe")
    probe["spec"]["schedulerName"] = "no-such-scheduler"
    call("POST", pods, probe)
    call("PATCH", f"{pods}/probe", {"metadata": {"labels": {"patched": "yes"}}}, merge)
    call("PUT", f"{pods}/probe", call("GET", f"{pods}/probe"))
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "probe"}
    call("PATCH", f"{pods}/probe/status", {"status": {"conditions": [condition]}}, merge)
    binding = {"metadata": {"name": "probe"}, "target": {"kind": "Node", "name": "no-such-node"}}
    call("POST", f"{pods}/probe/binding", {"apiVersion": "v1", "kind": "Binding", **binding})
    regarding = {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "probe"}
    call(
        "POST",
        f"/api/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "probe.core"},
            "involvedObject": regarding,
            "reason": "Probe",
            "type": "Normal",
        },
    )
    new_events = f"/apis/events.k8s.io/v1/namespaces/{ns}/events"
    call(
        "POST",
        new_events,
        {
            "metadata": {"name": "probe.new"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "probe",
            "reportingInstance": "probe",
            "action": "Binding",
            "reason": "Scheduled",
            "type": "Normal",
            "regarding": regarding,
        },
    )
    series = {"series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:01.000000Z"}}
    call("PATCH", f"{new_events}/probe.new", series, merge)
    podgroups = f"/apis/{SIGS}/v1alpha1/namespaces/{ns}/podgroups"
    call(
        "POST", podgroups, {"apiVersion": f"{SIGS}/v1alpha1", "kind": "PodGroup", "metadata": {"name": "pg"}}
    )
    call("PATCH", f"{podgroups}/pg", {"metadata": {"labels": {"patched": "yes"}}}, merge)
    call("PATCH", f"{podgroups}/pg/status", {"status": {"phase": "Pending"}}, merge)

    writes = [w for w in settled_writes(cp.audit_log) if w.namespace == ns]
    assert count_writes(writes) == Counter(
        {
            ("patch", "pods", "", ns, "probe"): 1,
            ("update", "pods", "", ns, "probe"): 1,
            ("patch", "pods", "status", ns, "probe"): 1,
            ("create", "pods", "binding", ns, "probe"): 1,
            ("create", "events", "", ns, "probe.core"): 1,
            ("create", "events", "", ns, "probe.new"): 1,
            ("patch", "events", "", ns, "probe.new"): 1,
            ("patch", "podgroups", "status", ns, "pg"): 1,
        }
    )
    reasons = {w.name: w.reason for w in writes if w.resource == "events" and w.verb == "create"}
    assert reasons == {"probe.core": "Probe", "probe.new": "Scheduled"}
