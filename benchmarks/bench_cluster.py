"""Schedulers on a real kube-apiserver with KWOK nodes: koordpy beside kube-scheduler and two raw
binders (no scheduling logic: the ceiling). Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_cluster.py --scenario plain-pending --nodes 1000 \\
        --schedulers koordpy,koordpy-no-operators,kube-scheduler,raw-go,raw-python [--quick]

Each run gets a fresh control plane (etcd, kube-apiserver and KWOK from hack/controlplane/build.sh)
with its nodes, its own pods, and a scheduler process started for it and stopped after it. Runs
alternate between the schedulers. See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.leasewatch import LeaseWatch  # noqa: E402
from koordpy.kubeapi import TRANSPORT_ERRORS, ApiError, KubeApi  # noqa: E402
from tests.support.controlplane import (  # noqa: E402
    BUILD_SCRIPT,
    CRD_DIR,
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_ANNOTATION_VALUE,
    ControlPlane,
    bin_dir,
    free_port,
    missing_binaries,
)

SCHEDULERS = ("koordpy", "koordpy-no-operators", "kube-scheduler", "raw-go", "raw-python")
# the spec.schedulerName each kind serves; koordpy's default configuration serves koord-scheduler
SCHEDULER_NAMES = {
    "koordpy": "koord-scheduler",
    "koordpy-no-operators": "koord-scheduler",
    "kube-scheduler": "bench-kube-scheduler",
    "raw-go": "bench-raw-binder",
    "raw-python": "bench-raw-binder",
}
# kube-scheduler has no coscheduling: a gang would be bound as loose pods, which is another workload
NO_GANGS = {"kube-scheduler"}
# the schedulers that elect a leader with --leader-elect (the raw binders do not)
ELECTING = {"koordpy", "koordpy-no-operators", "kube-scheduler"}
# scheduler_perf's client limits (spec/control-plane.md 6.3); koordpy's client has none
CLIENT_QPS = 5000
CLIENT_BURST = 5000

RAWBINDER_DIR = Path(__file__).resolve().parent / "rawbinder"
RAWBINDER_GO_BINARY = "koordpy-bench-rawbinder"
# the limits scheduler_perf and kwokctl --disable-qps-limits lift: the apiserver's own throttling
# would otherwise be what is measured
APISERVER_BENCH_ARGS = (
    "--max-requests-inflight=0",
    "--max-mutating-requests-inflight=0",
    "--enable-priority-and-fairness=false",
)
PHASE_LABEL = "bench.koordpy.io/phase"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API = "/apis/scheduling.x-k8s.io/v1alpha1"
NODE_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110"}
POD_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
CREATE_CONCURRENCY = 32
# control-plane CPU (cores) under which a run may start
QUIET_CONTROLPLANE_CORES = 0.15
STOP_GRACE_SECONDS = 20.0
# loopback only, whatever the environment says about proxies
LOCAL_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# --------------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    name: str
    plain: int = 0
    gangs: int = 0
    gang_size: int = 0
    # created before the scheduler starts (else: created at once while it runs)
    at_start: bool = False

    @property
    def pods(self) -> int:
        return self.plain + self.gangs * self.gang_size


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    nodes: int
    phases: tuple[Phase, ...]
    quick_nodes: int
    quick_phases: tuple[Phase, ...]


SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            "plain-pending",
            "plain pods pending when the scheduler starts",
            1000,
            (Phase("pods", plain=5000, at_start=True),),
            100,
            (Phase("pods", plain=200, at_start=True),),
        ),
        Scenario(
            "gang-pending",
            "PodGroups (minMember = size) pending when the scheduler starts",
            1000,
            (Phase("gangs", gangs=100, gang_size=50, at_start=True),),
            100,
            (Phase("gangs", gangs=4, gang_size=50, at_start=True),),
        ),
        Scenario(
            "plain-created",
            "plain pods created at once while the scheduler runs",
            1000,
            (Phase("pods", plain=5000),),
            100,
            (Phase("pods", plain=200),),
        ),
        Scenario(
            "gang-created",
            "PodGroups created at once while the scheduler runs",
            1000,
            (Phase("gangs", gangs=100, gang_size=50),),
            100,
            (Phase("gangs", gangs=4, gang_size=50),),
        ),
        Scenario(
            "mixed",
            "plain pods pending at start, then PodGroups of 25 created at once",
            200,
            (Phase("plain", plain=500, at_start=True), Phase("gangs", gangs=20, gang_size=25)),
            100,
            (Phase("plain", plain=100, at_start=True), Phase("gangs", gangs=4, gang_size=25)),
        ),
    )
}


# --------------------------------------------------------------------------------------------------
# Processes: CPU, memory, metrics
# --------------------------------------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    # the command name may hold spaces and parentheses: fields start after the last ')'
    return text[text.rindex(")") + 2 :].split()


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants alive now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                children.setdefault(int(_stat_fields(int(entry.name))[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU of the processes (and of their children already reaped)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            f = _stat_fields(pid)
            # utime, stime, cutime, cstime: fields 14-17 of proc(5), 11-14 after the name
            total += sum(int(x) for x in f[11:15])
    return total / CLOCK_TICKS


def peak_rss_mib(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str, names: Iterable[str]) -> list[tuple[str, dict[str, str], float]]:
    """The samples of the named metrics in a Prometheus text exposition."""
    wanted = set(names)
    samples = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _SAMPLE.match(line)
        if m and m.group(1) in wanted:
            samples.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return samples


def http_get(url: str, timeout: float = 10.0) -> str:
    """GET on a loopback URL; an HTTPS one is the scheduler's self-signed serving port."""
    context = None
    if url.startswith("https"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    opener = (
        urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        if context
        else LOCAL_OPENER
    )
    with opener.open(url, timeout=timeout) as resp:
        return str(resp.read().decode())


WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE", "DELETECOLLECTION"}


def apiserver_writes(text: str) -> dict[str, float]:
    """apiserver_request_total of the writes, by 'VERB resource[/subresource]'."""
    out: dict[str, float] = {}
    for _, labels, value in parse_metrics(text, ["apiserver_request_total"]):
        verb = labels.get("verb", "")
        if verb not in WRITE_VERBS:
            continue
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        key = f"{verb} {resource}"
        out[key] = out.get(key, 0.0) + value
    return out


# --------------------------------------------------------------------------------------------------
# The schedulers under test
# --------------------------------------------------------------------------------------------------


class SchedulerProcess:
    """One scheduler as a child process, its output in a log file."""

    def __init__(self, kind: str, kubeconfig: Path, workdir: Path, log_path: Path) -> None:
        self.kind = kind
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.log_path = log_path
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        # (namespace, name) of the Lease to elect a leader on; None: no leader election
        self.lease: tuple[str, str] | None = None
        self.qps, self.burst = CLIENT_QPS, CLIENT_BURST

    def _koordpy_election(self) -> list[str]:
        if self.lease is None:
            return ["--leader-elect=false"]
        namespace, name = self.lease
        return [
            "--leader-elect",
            f"--leader-elect-resource-namespace={namespace}",
            f"--leader-elect-resource-name={name}",
        ]

    def _kube_election(self) -> str:
        if self.lease is None:
            return "leaderElection:\n  leaderElect: false\n"
        namespace, name = self.lease
        return (
            "leaderElection:\n  leaderElect: true\n  resourceLock: leases\n"
            f"  resourceNamespace: {namespace}\n  resourceName: {name}\n"
        )

    def command(self) -> list[str]:
        kc = str(self.kubeconfig)
        if self.kind in ("koordpy", "koordpy-no-operators"):
            return [
                str(koordpy_command()),
                "run",
                "--kubeconfig",
                kc,
                *self._koordpy_election(),
                # the client-side limit kube-scheduler gets below, in its clientConnection
                f"--kube-api-qps={self.qps}",
                f"--kube-api-burst={self.burst}",
                "--bind-address",
                "127.0.0.1",
                # /metrics over plain HTTP, without a token
                "--secure-port",
                "0",
                "--insecure-port",
                str(self.port),
                *(["--no-operators"] if self.kind == "koordpy-no-operators" else []),
            ]
        if self.kind == "kube-scheduler":
            config = self.workdir / "kube-scheduler.yaml"
            config.write_text(
                "apiVersion: kubescheduler.config.k8s.io/v1\n"
                "kind: KubeSchedulerConfiguration\n"
                "clientConnection:\n"
                f"  kubeconfig: {kc}\n"
                f"  qps: {self.qps}\n"
                f"  burst: {self.burst}\n" + self._kube_election() + "profiles:\n"
                f"- schedulerName: {SCHEDULER_NAMES['kube-scheduler']}\n"
            )
            cert_dir = self.workdir / "kube-scheduler-certs"
            cert_dir.mkdir(exist_ok=True)
            return [
                str(bin_dir() / "kube-scheduler"),
                f"--config={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={cert_dir}",
                # no delegated authentication (the test apiserver has no request-header CA, which
                # kube-scheduler would log as an error again and again): /metrics is read anonymously
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--v=1",
            ]
        if self.kind == "raw-go":
            return [
                str(bin_dir() / RAWBINDER_GO_BINARY),
                f"--kubeconfig={kc}",
                f"--scheduler-name={SCHEDULER_NAMES['raw-go']}",
                f"--qps={CLIENT_QPS}",
                f"--burst={CLIENT_BURST}",
            ]
        if self.kind == "raw-python":
            return [
                sys.executable,
                str(RAWBINDER_DIR / "rawbinder.py"),
                f"--kubeconfig={kc}",
                f"--scheduler-name={SCHEDULER_NAMES['raw-python']}",
            ]
        raise ValueError(self.kind)

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and k != "KUBECONFIG"}
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.command(), stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu(self) -> float:
        return cpu_seconds(process_tree(self.pid)) if self.alive() else 0.0

    def rss(self) -> float:
        return peak_rss_mib(self.pid) if self.alive() else 0.0

    def writes(self) -> dict[str, float] | None:
        """The API writes the scheduler counted itself, by what and result ('... dropped' entries
        were not written), or None when it cannot say."""
        out: dict[str, float] = {}
        try:
            if self.kind.startswith("koordpy"):
                text = http_get(f"http://127.0.0.1:{self.port}/metrics")
                for name, labels, v in parse_metrics(
                    text,
                    ["koordpy_bindings_total", "koordpy_api_writes_total", "koordpy_events_dropped_total"],
                ):
                    if name == "koordpy_events_dropped_total":
                        key = "event dropped"
                    elif name == "koordpy_bindings_total":
                        key = f"binding {labels.get('result')}"
                    else:
                        key = f"{labels.get('operation')} {labels.get('result')}"
                    out[key] = out.get(key, 0.0) + v
                return out
            if self.kind == "kube-scheduler":
                text = http_get(f"https://127.0.0.1:{self.port}/metrics")
                for _, labels, v in parse_metrics(text, ["rest_client_requests_total"]):
                    if labels.get("method") in WRITE_VERBS:
                        key = f"{labels.get('method')} {labels.get('code')}"
                        out[key] = out.get(key, 0.0) + v
                return out
            if self.kind.startswith("raw-") and self.alive():
                # the binders print their counts on SIGUSR1
                size = self.log_path.stat().st_size
                os.kill(self.pid, signal.SIGUSR1)
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    time.sleep(0.05)
                    if self.log_path.stat().st_size > size:
                        counts = self.last_counts()
                        if counts is not None:
                            return {
                                "binding success": float(counts["bound"]),
                                "binding error": float(counts["errors"]),
                            }
        except (OSError, ValueError, KeyError):
            return None
        return None

    def last_counts(self) -> dict[str, int] | None:
        for line in reversed(self.log_path.read_text(errors="replace").splitlines()):
            if line.startswith('{"rawbinder"'):
                with contextlib.suppress(ValueError):
                    return dict(json.loads(line)["rawbinder"])
        return None

    def stop(self) -> int | None:
        proc = self.proc
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            code = proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def log_summary(self) -> str:
        """Errors and warnings in the scheduler's log, in its own format."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        if self.kind == "raw-python":
            errors = sum(1 for x in lines if " ERROR " in x or " CRITICAL " in x or x.startswith("Traceback"))
            warnings = sum(1 for x in lines if " WARNING " in x)
        else:
            # klog (kube-scheduler, koordpy, client-go in the Go binder): a line's first letter is its
            # severity; without leader election kube-scheduler ends on SIGTERM with this "error"
            errors = sum(
                1 for x in lines if re.match(r"[EF]\d{4} ", x) and "finished without leader elect" not in x
            )
            warnings = sum(1 for x in lines if re.match(r"W\d{4} ", x))
        return f"{errors}E/{warnings}W"


def koordpy_command() -> Path:
    local = Path(sys.executable).parent / "koordpy"
    if local.exists():
        return local
    found = shutil.which("koordpy")
    if not found:
        raise SystemExit("bench_cluster: no koordpy command (install the project: make install)")
    return Path(found)


def prepare_binaries(kinds: Iterable[str]) -> None:
    """Build what the chosen schedulers need and is missing or stale."""
    kinds = set(kinds)
    if missing_binaries():
        _run_build([])
    if "kube-scheduler" in kinds:
        check = subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--check", "--with-kube-scheduler"], capture_output=True, check=False
        )
        if check.returncode != 0:
            _run_build(["--with-kube-scheduler"])
    if "raw-go" in kinds:
        if shutil.which("go") is None:
            if not (bin_dir() / RAWBINDER_GO_BINARY).exists():
                raise SystemExit("bench_cluster: raw-go needs a Go toolchain to build benchmarks/rawbinder")
            return
        env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
        print("building benchmarks/rawbinder ...", file=sys.stderr, flush=True)
        subprocess.run(
            ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(bin_dir() / RAWBINDER_GO_BINARY), "."],
            cwd=RAWBINDER_DIR,
            env=env,
            check=True,
        )


def _run_build(extra: list[str]) -> None:
    print(f"bench_cluster: running {BUILD_SCRIPT} {' '.join(extra)}", file=sys.stderr, flush=True)
    if subprocess.run(["bash", str(BUILD_SCRIPT), *extra], check=False).returncode != 0:
        raise SystemExit(f"bench_cluster: {BUILD_SCRIPT} failed")


# --------------------------------------------------------------------------------------------------
# Objects
# --------------------------------------------------------------------------------------------------


def node_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
        },
        "status": {"capacity": NODE_CAPACITY, "allocatable": NODE_CAPACITY},
    }


def pod_manifest(name: str, scheduler: str, phase: str, group: str | None = None) -> dict[str, Any]:
    labels = {PHASE_LABEL: phase}
    if group:
        labels[POD_GROUP_LABEL] = group
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": scheduler,
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


def pod_group_manifest(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }


async def bounded(concurrency: int, jobs: Iterable[Callable[[], Awaitable[Any]]]) -> None:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Awaitable[Any]]) -> None:
        async with semaphore:
            for attempt in range(5):
                try:
                    await job()
                    return
                except ApiError as err:
                    if err.status == 409:
                        return
                    if attempt == 4 or (err.status < 500 and err.status != 429):
                        raise
                except TRANSPORT_ERRORS:
                    if attempt == 4:
                        raise
                await asyncio.sleep(0.5)

    await asyncio.gather(*(one(j) for j in jobs))


async def create_phase_objects(
    api: KubeApi, namespace: str, index: int, phase: Phase, scheduler: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    groups = [f"g{index}-{g:03d}" for g in range(phase.gangs)]
    await bounded(
        CREATE_CONCURRENCY,
        (
            (
                lambda g=g: api.request(
                    "POST",
                    f"{POD_GROUP_API}/namespaces/{namespace}/podgroups",
                    body=pod_group_manifest(g, phase.gang_size),
                )
            )
            for g in groups
        ),
    )
    pods = [pod_manifest(f"p{index}-{i:05d}", scheduler, phase.name) for i in range(phase.plain)]
    pods += [
        pod_manifest(f"{g}-{i:03d}", scheduler, phase.name, group=g)
        for g in groups
        for i in range(phase.gang_size)
    ]
    await bounded(CREATE_CONCURRENCY, ((lambda p=p: api.request("POST", base, body=p)) for p in pods))


class BindWatch:
    """Watches the pods of a namespace and notes when each one is first seen bound."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.phase_of: dict[str, str] = {}
        self.bound_at: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    def _note(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        self.phase_of[name] = str((meta.get("labels") or {}).get(PHASE_LABEL, ""))
        if (pod.get("spec") or {}).get("nodeName") and name not in self.bound_at:
            self.bound_at[name] = time.monotonic()

    async def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while True:
            listing = await self.api.request("GET", path, timeout=120)
            for pod in listing.get("items") or []:
                self._note(pod)
            version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            try:
                while True:
                    query = [
                        ("watch", "1"),
                        ("resourceVersion", version),
                        ("allowWatchBookmarks", "true"),
                        ("timeoutSeconds", "600"),
                    ]
                    async for event in self.api.stream(path, query, 630):
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise ApiError(int(obj.get("code") or 500), str(obj.get("reason")), "")
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._note(obj)
            except (ApiError, *TRANSPORT_ERRORS):
                await asyncio.sleep(0.2)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def seen(self, phase: str) -> int:
        return sum(1 for p in self.phase_of.values() if p == phase)

    def bind_times(self, phase: str) -> list[float]:
        return sorted(t for name, t in self.bound_at.items() if self.phase_of.get(name) == phase)


# --------------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    phase: str
    nodes: int
    scheduler: str
    run: int
    pods: int
    bound: int = 0
    status: str = "ok"
    wall: float | None = None
    first_bind: float | None = None
    max_gap: float | None = None
    create: float | None = None
    cpu: float | None = None
    cpu_total: float | None = None
    controlplane_cpu: float | None = None
    rss: float | None = None
    writes: float | None = None
    apiserver_writes: dict[str, float] = field(default_factory=dict)
    scheduler_writes: dict[str, float] = field(default_factory=dict)
    log: str = ""
    log_path: str = ""
    # the machine's 1-minute load average when the phase started: other work skews every figure
    load: float | None = None
    # Events in the run's namespace once the scheduler has stopped (set on the last phase)
    events_after_stop: int | None = None
    # with --leader-elect: renewals of the Lease seen during the phase, the longest time between two,
    # and how many replicas held it (more than one: the lease was lost)
    renewals: int | None = None
    max_renewal_gap: float | None = None
    holders: int | None = None

    @property
    def rate(self) -> float | None:
        return self.bound / self.wall if self.wall and self.bound else None


class Bench:
    def __init__(self, args: argparse.Namespace, log_dir: Path) -> None:
        self.args = args
        self.log_dir = log_dir
        self.cp: ControlPlane | None = None
        self.api: KubeApi | None = None

    # ---- control plane ------------------------------------------------------------------------

    def controlplane_cpu(self) -> float:
        pids = [
            p
            for p in process_tree(os.getpid())
            if Path(f"/proc/{p}/exe").exists() and _exe_name(p) in ("etcd", "kube-apiserver", "kwok")
        ]
        return cpu_seconds(pids)

    async def apiserver_metrics(self) -> dict[str, float]:
        assert self.cp is not None
        status, body = await asyncio.to_thread(self.cp.request, "GET", "/metrics", timeout=30)
        return apiserver_writes(body.decode(errors="replace")) if status == 200 else {}

    async def start_controlplane(self, nodes: int) -> None:
        kwok_args = [f"--node-lease-duration-seconds={self.args.kwok_lease_seconds}"]
        # no kube-controller-manager: nothing here needs a controller, and its watches and garbage
        # collector would load the control plane the schedulers share (and whose CPU is measured)
        self.cp = ControlPlane(apiserver_args=APISERVER_BENCH_ARGS, kwok_args=kwok_args, controllers=False)
        t0 = time.monotonic()
        await asyncio.to_thread(self.cp.start)
        for attempt in range(3):
            try:
                await asyncio.to_thread(self.cp.apply_crds, sorted(CRD_DIR.glob("*.yaml")))
                break
            except TypeError:
                # apply_crds reads a CRD's `status.conditions: null` (just created) as a list
                if attempt == 2:
                    raise
                await asyncio.sleep(1)
        assert self.cp.kubeconfig is not None
        self.api = await KubeApi.connect(str(self.cp.kubeconfig))
        names = [f"bench-node-{i:05d}" for i in range(nodes)]
        await bounded(
            CREATE_CONCURRENCY,
            ((lambda n=n: self.api.request("POST", "/api/v1/nodes", body=node_manifest(n))) for n in names),
        )
        deadline = time.monotonic() + max(120.0, nodes / 20)
        while True:
            listing = await self.api.request("GET", "/api/v1/nodes", timeout=120)
            ready = sum(
                1
                for n in listing.get("items") or []
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or []
                )
            )
            if ready >= nodes:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"bench_cluster: only {ready}/{nodes} KWOK nodes Ready")
            await asyncio.sleep(2)
        # KWOK and the apiserver are still busy with the new nodes for a while after they are Ready
        # (with 5,000 nodes: over a core for 10-20 s); a run starts on a quiet control plane
        await asyncio.sleep(self.args.settle)
        quiet_by = time.monotonic() + 120
        while True:
            c0 = self.controlplane_cpu()
            await asyncio.sleep(2)
            idle = (self.controlplane_cpu() - c0) / 2
            if idle < QUIET_CONTROLPLANE_CORES or time.monotonic() > quiet_by:
                break
        print(
            f"control plane up with {nodes} Ready KWOK nodes in {time.monotonic() - t0:.0f}s; "
            f"idle control-plane CPU {idle:.2f} cores",
            file=sys.stderr,
            flush=True,
        )

    async def stop_controlplane(self) -> None:
        if self.api is not None:
            await self.api.close()
            self.api = None
        if self.cp is not None:
            await asyncio.to_thread(self.cp.stop)
            self.cp = None

    # ---- one run ------------------------------------------------------------------------------

    async def run(
        self, scenario: Scenario, phases: tuple[Phase, ...], nodes: int, kind: str, n: int
    ) -> list[Result]:
        namespace = f"{scenario.name}-{kind}-{n}"
        results = [Result(scenario.name, p.name, nodes, kind, n, p.pods) for p in phases]
        if kind in NO_GANGS and any(p.gangs for p in phases):
            for r, p in zip(results, phases, strict=True):
                if p.gangs:
                    r.status = "n/a (no gangs)"
            if all(p.gangs for p in phases):
                return results
        assert self.api is not None and self.cp is not None and self.cp.kubeconfig is not None
        api = self.api
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        watch = BindWatch(api, namespace)
        watch.start()
        scheduler_name = SCHEDULER_NAMES[kind]
        timeout = self.args.timeout
        workdir = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=self.log_dir))
        sched = SchedulerProcess(kind, self.cp.kubeconfig, workdir, self.log_dir / f"{namespace}.log")
        sched.qps, sched.burst = self.args.client_qps, self.args.client_burst
        lease: LeaseWatch | None = None
        if self.args.leader_elect and kind in ELECTING:
            sched.lease = (namespace, f"{kind}-lease")
            lease = LeaseWatch(api, namespace, f"{kind}-lease")
            lease.start()
        try:
            index = 0
            while index < len(phases) and phases[index].at_start:
                t0 = time.monotonic()
                await create_phase_objects(api, namespace, index, phases[index], scheduler_name)
                results[index].create = time.monotonic() - t0
                await self._wait_seen(watch, phases[index])
                index += 1
            writes0 = await self.apiserver_metrics()
            cp0 = self.controlplane_cpu()
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            sched.start()
            await asyncio.sleep(0.05)
            sched_cpu0 = 0.0
            if index == 0:
                # nothing was pending: the scheduler is ready once it binds a probe pod
                await api.request(
                    "POST",
                    f"/api/v1/namespaces/{namespace}/pods",
                    body=pod_manifest("probe", scheduler_name, "probe"),
                )
                if not await self._wait_bound(watch, "probe", 1, time.monotonic() + timeout, sched):
                    for r in results:
                        r.status = "not ready" if sched.alive() else f"exited {sched.stop()}"
                    return results
            writes_sched0: dict[str, float] = {}
            for i, phase in enumerate(phases):
                result = results[i]
                if result.status != "ok":
                    continue
                if i >= index:
                    # created at once while the scheduler runs: the clock starts at the first create
                    writes0 = await self.apiserver_metrics()
                    writes_sched0 = sched.writes() or {}
                    cp0 = self.controlplane_cpu()
                    sched_cpu0 = sched.cpu()
                    load = os.getloadavg()[0]
                    t0 = time.monotonic()
                    await create_phase_objects(api, namespace, i, phase, scheduler_name)
                    result.create = time.monotonic() - t0
                done = await self._wait_bound(watch, phase.name, phase.pods, t0 + timeout, sched)
                end = time.monotonic()
                times = watch.bind_times(phase.name)
                result.bound = len(times)
                result.load = load
                result.cpu = sched.cpu() - sched_cpu0
                result.cpu_total = sched.cpu()
                result.rss = sched.rss()
                result.controlplane_cpu = self.controlplane_cpu() - cp0
                # the writes that trail the last binding (events, PodGroup status) belong to the phase
                await asyncio.sleep(self.args.trail)
                writes = sched.writes()
                if writes is not None:
                    result.scheduler_writes = {
                        k: v - writes_sched0.get(k, 0.0)
                        for k, v in writes.items()
                        if v - writes_sched0.get(k, 0.0) > 0
                    }
                    result.writes = sum(
                        v for k, v in result.scheduler_writes.items() if not k.endswith("dropped")
                    )
                writes1 = await self.apiserver_metrics()
                result.apiserver_writes = {
                    k: v - writes0.get(k, 0.0) for k, v in writes1.items() if v - writes0.get(k, 0.0) > 0
                }
                if lease is not None:
                    seen = [r for r in lease.renewals if t0 <= r <= end]
                    result.renewals = len(seen)
                    result.max_renewal_gap = max((b - a for a, b in itertools.pairwise(seen)), default=None)
                    result.holders = len(lease.holders)
                if times:
                    result.first_bind = times[0] - t0
                    gaps = [b - a for a, b in itertools.pairwise(times)]
                    result.max_gap = max(gaps, default=0.0)
                if done:
                    result.wall = times[-1] - t0
                else:
                    result.wall = end - t0
                    result.status = (
                        "timeout" if sched.alive() else f"exited {sched.proc.poll() if sched.proc else '?'}"
                    )
                    for later in results[i + 1 :]:
                        if later.status == "ok":
                            later.status = "skipped"
        finally:
            code = sched.stop() if sched.proc else None
            summary = sched.log_summary() if sched.proc else ""
            for r in results:
                r.log = summary
                r.log_path = str(sched.log_path)
            await watch.stop()
            if lease is not None:
                await lease.stop()
            if results and results[-1].bound:
                # the events the scheduler wrote in the end, shutdown flush included: they may
                # trail the bindings by longer than --trail
                results[-1].events_after_stop = await self._count(
                    f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
                )
            if code not in (None, 0, -signal.SIGTERM) and not (kind == "kube-scheduler" and code == 1):
                print(f"  {kind} exited with {code}; log: {sched.log_path}", file=sys.stderr)
        return results

    async def _count(self, path: str) -> int | None:
        assert self.api is not None
        with contextlib.suppress(ApiError, *TRANSPORT_ERRORS):
            listing = await self.api.request("GET", path, query=[("limit", "1")])
            meta = listing.get("metadata") or {}
            if "remainingItemCount" in meta or not meta.get("continue"):
                return len(listing.get("items") or []) + int(meta.get("remainingItemCount") or 0)
            return len((await self.api.request("GET", path, timeout=120)).get("items") or [])
        return None

    async def _wait_seen(self, watch: BindWatch, phase: Phase) -> None:
        deadline = time.monotonic() + 120
        while watch.seen(phase.name) < phase.pods:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"bench_cluster: the pod watch saw {watch.seen(phase.name)}/{phase.pods} pods"
                )
            await asyncio.sleep(0.1)

    async def _wait_bound(
        self, watch: BindWatch, phase: str, count: int, deadline: float, sched: SchedulerProcess
    ) -> bool:
        while len(watch.bind_times(phase)) < count:
            if time.monotonic() > deadline or not sched.alive():
                return False
            await asyncio.sleep(0.1)
        return True


def _exe_name(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(os.readlink(f"/proc/{pid}/exe")).name
    return ""


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024 // 1024
    return f"{cpu}, {os.cpu_count()} cores, {mem} GiB, Python {platform.python_version()}"


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


COLUMNS = (
    "scenario",
    "phase",
    "nodes",
    "scheduler",
    "bound",
    "create s",
    "wall s",
    "pods/s",
    "1st bind s",
    "max gap s",
    "cpu s",
    "cp cpu s",
    "peak RSS MiB",
    "writes",
    "renewals",
    "max renew gap s",
    "holders",
    "log",
)


def table(results: list[Result]) -> str:
    rows = []
    for r in results:
        bound = f"{r.bound}/{r.pods}" + ("" if r.status == "ok" else f" {r.status}")
        rows.append(
            (
                r.scenario,
                r.phase,
                str(r.nodes),
                r.scheduler,
                bound,
                _fmt(r.create, ".1f"),
                _fmt(r.wall, ".1f"),
                _fmt(r.rate, ".0f"),
                _fmt(r.first_bind, ".2f"),
                _fmt(r.max_gap, ".2f"),
                _fmt(r.cpu, ".1f"),
                _fmt(r.controlplane_cpu, ".1f"),
                _fmt(r.rss, ".0f"),
                _fmt(r.writes, ".0f"),
                _fmt(r.renewals, "d"),
                _fmt(r.max_renewal_gap, ".1f"),
                _fmt(r.holders, "d"),
                r.log,
            )
        )
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(COLUMNS)]
    numeric = set(range(4, 17))

    def line(cells: Iterable[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.rjust(w) if i in numeric else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    sep = (
        "| "
        + " | ".join(("-" * (w - 1) + ":") if i in numeric else "-" * w for i, w in enumerate(widths))
        + " |"
    )
    return "\n".join([line(COLUMNS), sep, *(line(row) for row in rows)])


def details(results: list[Result]) -> str:
    out = []
    for r in results:
        if not r.apiserver_writes and r.create is None:
            continue
        writes = ", ".join(
            f"{k} {v:.0f}" for k, v in sorted(r.apiserver_writes.items()) if not k.endswith(" leases")
        )
        total = f"scheduler CPU since start {r.cpu_total:.1f}s; " if r.cpu_total is not None else ""
        load = f"load {r.load:.1f}; " if r.load is not None else ""
        if r.scheduler_writes:
            own = ", ".join(f"{k} {v:.0f}" for k, v in sorted(r.scheduler_writes.items()))
            writes = f"{writes}; its own count: {own}"
        if r.events_after_stop is not None:
            writes = f"{writes}; Events in the namespace once it stopped: {r.events_after_stop}"
        out.append(f"- {r.scenario}/{r.phase} {r.scheduler} #{r.run}: {load}{total}apiserver writes {writes}")
        out.append(f"  log: {r.log_path}")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


async def bench(args: argparse.Namespace, log_dir: Path) -> list[Result]:
    results: list[Result] = []
    for name in args.scenarios:
        scenario = SCENARIOS[name]
        phases = scenario.quick_phases if args.quick else scenario.phases
        nodes = args.nodes or (scenario.quick_nodes if args.quick else scenario.nodes)
        print(f"== {name} ({scenario.description}), {nodes} nodes", file=sys.stderr, flush=True)
        for n in range(args.repeat):
            for kind in args.schedulers:
                t0 = time.monotonic()
                runner = Bench(args, log_dir)
                if kind in NO_GANGS and all(p.gangs for p in phases):
                    got = await runner.run(scenario, phases, nodes, kind, n)
                else:
                    # a fresh control plane per run: deleting thousands of pods takes longer than
                    # creating the nodes again, and leaves the apiserver's caches and etcd unequal
                    await runner.start_controlplane(nodes)
                    try:
                        got = await runner.run(scenario, phases, nodes, kind, n)
                    finally:
                        await runner.stop_controlplane()
                results.extend(got)
                summary = "; ".join(
                    f"{r.phase} {r.bound}/{r.pods} {r.status} {_fmt(r.wall, '.1f')}s" for r in got
                )
                print(
                    f"  {kind} #{n}: {summary} (run took {time.monotonic() - t0:.0f}s)",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenario",
        default="plain-pending",
        help=f"comma-separated, or 'all': {', '.join(SCENARIOS)}",
    )
    parser.add_argument("--nodes", type=int, help="KWOK nodes (default: the scenario's; 100 with --quick)")
    parser.add_argument(
        "--schedulers", default=",".join(SCHEDULERS), help="comma-separated: " + ",".join(SCHEDULERS)
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (about 200 pods) to check the harness"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each scheduler, alternating")
    parser.add_argument(
        "--timeout", type=float, help="seconds a phase may take (default 600; 120 with --quick)"
    )
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of quiet once the nodes are Ready")
    parser.add_argument(
        "--trail",
        type=float,
        default=2.0,
        help="seconds after a phase's last binding its writes are still counted",
    )
    parser.add_argument(
        "--kwok-lease-seconds",
        type=int,
        default=0,
        help="KWOK's --node-lease-duration-seconds. KWOK v0.7.0 picks its node heartbeat stage the "
        "wrong way round: with leases (the control plane's 40) it also patches every node's status "
        "every 20-25 s (1,000 nodes: 45 node updates a second that every scheduler must take in) and "
        "renews every lease each 10 s; with 0 it keeps no leases and patches node status every 10 "
        "minutes (default 0: a quiet cluster)",
    )
    parser.add_argument(
        "--leader-elect",
        action="store_true",
        help="koordpy and kube-scheduler elect a leader on a Lease of their own (15s/10s/2s): the table "
        "shows the renewals seen, the longest gap between two and how many held it (2: lost)",
    )
    parser.add_argument(
        "--client-qps",
        type=float,
        default=CLIENT_QPS,
        help=f"client QPS of every scheduler ({CLIENT_QPS:.0f}, scheduler_perf's; the chart's is 50)",
    )
    parser.add_argument(
        "--client-burst",
        type=int,
        default=CLIENT_BURST,
        help=f"client burst of every scheduler ({CLIENT_BURST}; the chart's is 100)",
    )
    parser.add_argument("--log-dir", type=Path, help="where scheduler logs go (default: a new /tmp dir)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    args.scenarios = list(SCENARIOS) if args.scenario == "all" else args.scenario.split(",")
    args.schedulers = args.schedulers.split(",")
    for s in args.scenarios:
        if s not in SCENARIOS:
            parser.error(f"unknown scenario {s!r}; choose from {', '.join(SCENARIOS)}")
    for s in args.schedulers:
        if s not in SCHEDULERS:
            parser.error(f"unknown scheduler {s!r}; choose from {', '.join(SCHEDULERS)}")
    if args.timeout is None:
        args.timeout = 120.0 if args.quick else 600.0
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="koordpy-bench-cluster-"))
    log_dir.mkdir(parents=True, exist_ok=True)

    prepare_binaries(args.schedulers)
    started = time.monotonic()
    results = asyncio.run(bench(args, log_dir))
    elapsed = time.monotonic() - started
    print(f"\nMachine: {machine()}; {time.strftime('%Y-%m-%d')}; whole benchmark {elapsed:.0f}s\n")
    print(table(results))
    print()
    print(details(results))
    print(f"\nlogs: {log_dir}")
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "rate": r.rate} for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
