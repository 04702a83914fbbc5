"""A kube-scheduler manifest and a Prometheus scrape written for kube-scheduler work for koordpy with
only the image, the command and the schedulerName changed, on the real control plane:

- the second scheduler of the Kubernetes documentation (a Deployment with `--config` and HTTPS
  probes of /healthz on 10259) and kubeadm's static pod (`--authentication-kubeconfig`,
  `--authorization-kubeconfig`, `--bind-address=127.0.0.1`, `--kubeconfig`, `--leader-elect=true`,
  probes of /livez and /readyz), each transcribed in `manifests/`: `koordpy run` starts with
  exactly the container's arguments, binds a pod that names the profile, and answers every probe;
- kube-prometheus's scrape of kube-scheduler (HTTPS, a service account's bearer token, the
  certificate not verified, the service account bound to its ClusterRole with `get` on the
  `/metrics` path) reads kube-scheduler's metrics.

A container sees its volumes at their mount paths; here each mount path is a directory or file of
the test's own (the only change to an argument), holding what the volume holds: the ConfigMap's
files, or for kubeadm's scheduler.conf a kubeconfig of the control plane. A pod without
`--kubeconfig` uses its service account; here `$KUBECONFIG` stands in for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from koordpy.cluster.flags import RUN_PROFILE
from tests.e2e.kwok import labelled_nodes
from tests.support.controlplane import REPO_ROOT, ControlPlane
from tests.support.polling import eventually

MANIFESTS = Path(__file__).resolve().parent / "manifests"
NODE_LABEL = "koordpy.e2e/kube-manifests-nodes"
# the secure port the manifests' probes name, kube-scheduler's default
SECURE_PORT = 10259
# what Prometheus asks for when it scrapes (scrape.go's default scrape protocols, 2.x)
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)
# kube-scheduler metrics a kube-scheduler dashboard or alert reads
SCRAPED = (
    "scheduler_schedule_attempts_total",
    "scheduler_pending_pods",
    "scheduler_scheduling_attempt_duration_seconds_bucket",
)


@dataclass(frozen=True)
class Probe:
    kind: str
    path: str
    port: int
    scheme: str
    host: str


@dataclass(frozen=True)
class Container:
    command: list[str]
    probes: list[Probe]
    # mount path -> the volume's definition
    mounts: dict[str, dict[str, Any]]


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def container_of(name: str) -> tuple[Container, list[dict[str, Any]]]:
    """The scheduler's container in a manifest (a Deployment's template or a Pod), and the
    manifest's other documents."""
    docs = documents(name)
    (workload,) = [d for d in docs if d["kind"] in ("Deployment", "Pod")]
    spec = workload["spec"]["template"]["spec"] if workload["kind"] == "Deployment" else workload["spec"]
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    # a probe names its port by number or by the name of one of the container's ports (kubeadm's)
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    probes = [
        Probe(
            kind,
            container[kind]["httpGet"]["path"],
            int(ports.get(container[kind]["httpGet"]["port"], container[kind]["httpGet"]["port"])),
            container[kind]["httpGet"].get("scheme", "HTTP"),
            # a probe without a host goes to the pod's address; the process here is on loopback
            container[kind]["httpGet"].get("host", "127.0.0.1"),
        )
        for kind in ("livenessProbe", "readinessProbe", "startupProbe")
        if kind in container
    ]
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}
    return Container(list(container["command"]), probes, mounts), docs


def mount(
    container: Container, others: list[dict[str, Any]], root: Path, kubeconfig: Path
) -> dict[str, Path]:
    """Each volume's content at a path of the test's own, by mount path."""
    config_maps = {d["metadata"]["name"]: d for d in others if d["kind"] == "ConfigMap"}
    local: dict[str, Path] = {}
    for i, (mount_path, volume) in enumerate(container.mounts.items()):
        target = root / f"volume-{i}"
        if "configMap" in volume:
            target.mkdir()
            for file, text in config_maps[volume["configMap"]["name"]]["data"].items():
                (target / file).write_text(text)
        elif "hostPath" in volume and volume["hostPath"]["path"].endswith(".conf"):
            # kubeadm's scheduler.conf: a kubeconfig for the scheduler's user
            shutil.copy(kubeconfig, target)
        else:
            raise AssertionError(f"no stand-in for the volume {volume}")
        local[mount_path] = target
    return local


def arguments(container: Container, local: dict[str, Path]) -> list[str]:
    """The container's arguments to `koordpy run`, each mount path where the test put it."""
    assert container.command[:2] == ["koordpy", "run"], container.command
    out = []
    for arg in container.command[2:]:
        for mount_path in sorted(local, key=len, reverse=True):
            arg = arg.replace(mount_path, str(local[mount_path]))
        out.append(arg)
    return out


def profile_of(args: list[str]) -> str:
    for arg in args:
        if arg.startswith("--config="):
            config = yaml.safe_load(Path(arg.removeprefix("--config=")).read_text())
            return str(config["profiles"][0]["schedulerName"])
    return RUN_PROFILE


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def koordpy_run(args: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "koordpy.cli", "run", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO_ROOT,
            env=env,
        )
    try:
        yield proc
    finally:
        # as the kubelet stops a container: SIGTERM, then SIGKILL after the grace period
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def https_get(url: str, token: str | None = None, accept: str | None = None) -> tuple[int, str, str]:
    """As the kubelet probes and as Prometheus with insecureSkipVerify scrapes: TLS, unverified."""
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if accept:
        headers["Accept"] = accept
    async with (
        aiohttp.ClientSession() as http,
        http.get(url, headers=headers, ssl=False, timeout=aiohttp.ClientTimeout(total=10)) as response,
    ):
        return response.status, response.headers.get("Content-Type", ""), await response.text()


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
async def nodes(control_plane: ControlPlane) -> AsyncIterator[str]:
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    async with labelled_nodes(str(control_plane.kubeconfig), "manifests-node", 2, NODE_LABEL, resources) as (
        label,
        _,
    ):
        yield label


RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture
async def scraper_token(
    control_plane: ControlPlane, core: client.CoreV1Api, namespace: str
) -> AsyncIterator[str]:
    """The token of a service account bound to kube-prometheus's prometheus-k8s ClusterRole (named
    apart here, so that tests leave nothing of a real installation's name behind)."""
    (role,) = [d for d in documents("kube_prometheus_kube_scheduler.yaml") if d["kind"] == "ClusterRole"]
    name = f"{role['metadata']['name']}-{uuid.uuid4().hex[:6]}"
    role = {**role, "metadata": {**role["metadata"], "name": name}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": namespace}],
    }
    await core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="prometheus-k8s"))
    )
    try:
        for path, body in ((f"{RBAC}/clusterroles", role), (f"{RBAC}/clusterrolebindings", binding)):
            status, reply = control_plane.request("POST", path, body)
            assert status == 201, reply[:300]
        answer = await core.create_namespaced_service_account_token(
            "prometheus-k8s",
            namespace,
            client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
            ),
        )
        yield str(answer.status.token)
    finally:
        control_plane.request("DELETE", f"{RBAC}/clusterrolebindings/{name}")
        control_plane.request("DELETE", f"{RBAC}/clusterroles/{name}")


def pod(name: str, scheduler_name: str, label: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            scheduler_name=scheduler_name,
            node_selector={NODE_LABEL: label},
            termination_grace_period_seconds=0,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
                )
            ],
        ),
    )


# ---------------------------------------------------------------------------------------------- the test
@pytest.mark.parametrize(
    ("manifest", "in_cluster"),
    [("kube_scheduler_deployment.yaml", True), ("kubeadm_kube_scheduler.yaml", False)],
    ids=["second-scheduler-deployment", "kubeadm-static-pod"],
)
async def test_a_kube_scheduler_manifest_runs_koordpy_unchanged_and_prometheus_scrapes_it(
    control_plane: ControlPlane,
    core: client.CoreV1Api,
    namespace: str,
    nodes: str,
    scraper_token: str,
    tmp_path: Path,
    manifest: str,
    in_cluster: bool,
) -> None:
    assert control_plane.kubeconfig is not None
    container, others = container_of(manifest)
    assert container.probes and all((p.port, p.scheme) == (SECURE_PORT, "HTTPS") for p in container.probes), (
        container.probes
    )
    if not port_is_free(SECURE_PORT):
        pytest.skip(f"port {SECURE_PORT}, which the manifest's probes name, is taken on this machine")
    args = arguments(container, mount(container, others, tmp_path, control_plane.kubeconfig))
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"PYTHONUNBUFFERED": "1"}
    if in_cluster:
        env["KUBECONFIG"] = str(control_plane.kubeconfig)
    log = tmp_path / "koordpy.log"
    profile = profile_of(args)
    with koordpy_run(args, log, env) as proc:

        async def probes_pass() -> bool:
            assert proc.poll() is None, f"koordpy run {args} exited:\n{log.read_text()[-4000:]}"
            for probe in container.probes:
                try:
                    status, _, _ = await https_get(f"https://{probe.host}:{probe.port}{probe.path}")
                except (OSError, aiohttp.ClientError):
                    return False
                # the kubelet's httpGet success: 200 <= status < 400
                if not 200 <= status < 400:
                    return False
            return True

        await eventually(probes_pass, timeout=60, what=f"every probe of {manifest} passes")

        await core.create_namespaced_pod(namespace, pod("placed", profile, nodes))

        async def bound() -> str | None:
            found = await core.read_namespaced_pod("placed", namespace)
            return found.spec.node_name or None

        await eventually(bound, timeout=60, what=f"a {profile} pod bound\n{log.read_text()[-4000:]}")

        endpoint = next(
            e
            for d in documents("kube_prometheus_kube_scheduler.yaml")
            if d["kind"] == "ServiceMonitor"
            for e in d["spec"]["endpoints"]
            if e.get("path", "/metrics") == "/metrics"
        )
        assert (endpoint["scheme"], endpoint["tlsConfig"]) == ("https", {"insecureSkipVerify": True})
        host = next(p.host for p in container.probes)
        scraped: dict[str, list[tuple[dict[str, str], float]]] = {}

        async def scrape() -> bool:
            # the ClusterRoleBinding may take a moment to reach the apiserver's authorizer
            status, content_type, body = await https_get(
                f"https://{host}:{SECURE_PORT}/metrics", scraper_token, PROMETHEUS_ACCEPT
            )
            if status != 200:
                return False
            assert content_type.startswith(("text/plain", "application/openmetrics-text")), content_type
            scraped.clear()
            for family in text_string_to_metric_families(body):
                for sample in family.samples:
                    scraped.setdefault(sample.name, []).append((sample.labels, sample.value))
            counted = scraped.get("scheduler_schedule_attempts_total", [])
            return any(
                labels == {"result": "scheduled", "profile": profile} and value >= 1
                for labels, value in counted
            )

        await eventually(scrape, timeout=30, what="Prometheus's scrape of /metrics with the bind counted")
        assert set(SCRAPED) <= set(scraped)
        queues = {labels["queue"] for labels, _ in scraped["scheduler_pending_pods"]}
        assert {"active", "backoff", "unschedulable", "gated"} <= queues

        # the ServiceMonitor's second endpoint, kube's health-check SLIs: authorized as kube-scheduler
        # authorizes it (only /healthz, /livez and /readyz are always allowed), so kube-prometheus's
        # role, which grants `get` on /metrics alone, is refused there, by koordpy as by kube-scheduler
        slis = next(
            e
            for d in documents("kube_prometheus_kube_scheduler.yaml")
            if d["kind"] == "ServiceMonitor"
            for e in d["spec"]["endpoints"]
            if e.get("path") == "/metrics/slis"
        )
        status, _, body = await https_get(
            f"https://{host}:{SECURE_PORT}{slis['path']}", scraper_token, PROMETHEUS_ACCEPT
        )
        assert status == 403, body
        assert 'cannot get path \\"/metrics/slis\\"' in body, body
