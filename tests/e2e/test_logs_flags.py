"""`koordpy run` logs and starts as kube-scheduler does, on the real control plane:

- at `-v=2`, one klog line per binding (`"Successfully bound pod to node" pod=... node=...
  evaluatedNodes=... feasibleNodes=...`, schedule_one.go) and per failed attempt (`"Unable to
  schedule pod; no fit; waiting" pod=... err=...`);
- with `--logging-format=json`, every line is a JSON object, the binding's with those keys;
- a start-up that cannot go on (no kubeconfig, the port taken) says so in one line and exits 1.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from koordpy.cluster.serving import generate_self_signed
from tests.e2e.kwok import labelled_nodes
from tests.e2e.test_run import CONFIG_DOC, SCHEDULER_NAME, RunProcess
from tests.support.controlplane import ControlPlane, free_port
from tests.support.polling import eventually

NODE_LABEL = "koordpy.e2e/logs-nodes"
NODE_COUNT = 3
REPO_ROOT = Path(__file__).resolve().parents[2]
# klog's header: Lmmdd hh:mm:ss.uuuuuu, the process id right-aligned in 7 columns, file:line]
KLOG_HEADER = r"I\d{4} \d{2}:\d{2}:\d{2}\.\d{6} [ \d]{7} (?P<file>[\w.]+):\d+\] "


@pytest.fixture(scope="module")
async def nodes(control_plane: ControlPlane) -> AsyncIterator[tuple[str, list[str]]]:
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    async with labelled_nodes(
        str(control_plane.kubeconfig), "logs-node", NODE_COUNT, NODE_LABEL, resources
    ) as (
        label,
        names,
    ):
        yield label, names


def pod(name: str, label: str, cpu: str = "100m") -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            scheduler_name=SCHEDULER_NAME,
            node_selector={NODE_LABEL: label},
            termination_grace_period_seconds=0,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests={"cpu": cpu, "memory": "64Mi"}),
                )
            ],
        ),
    )


def start(control_plane: ControlPlane, tmp_path: Path, *flags: str) -> RunProcess:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG_DOC))
    args = ["--kubeconfig", str(control_plane.kubeconfig), "--config", str(config), "--no-operators", *flags]
    return RunProcess(args, tmp_path / "koordpy.log", free_port(), f"e2e-logs-{uuid.uuid4().hex[:6]}")


async def ready(proc: RunProcess) -> None:
    async def answers() -> bool:
        assert proc.proc.poll() is None, f"koordpy run exited:\n{proc.log()}"
        try:
            status, _ = await proc.get("/readyz")
        except OSError:
            return False
        return status == 200

    await eventually(answers, timeout=60, what="koordpy ready")


async def bound_to(core: client.CoreV1Api, namespace: str, name: str) -> str:
    async def node() -> str | None:
        found = await core.read_namespaced_pod(name, namespace)
        return found.spec.node_name or None

    await eventually(node, timeout=60, what=f"{name} bound")
    return str(await node())


def lines_of(proc: RunProcess) -> list[str]:
    return proc.log_path.read_text(errors="replace").splitlines()


async def test_v2_logs_a_line_per_binding_and_per_failed_attempt(
    control_plane: ControlPlane,
    core: client.CoreV1Api,
    namespace: str,
    nodes: tuple[str, list[str]],
    tmp_path: Path,
) -> None:
    label, names = nodes
    proc = start(control_plane, tmp_path, "-v=2")
    try:
        await ready(proc)
        await core.create_namespaced_pod(namespace, pod("fits", label))
        await core.create_namespaced_pod(namespace, pod("too-big", label, cpu="100"))
        node = await bound_to(core, namespace, "fits")
        assert node in names
        bind = re.compile(
            KLOG_HEADER + r'"Successfully bound pod to node" '
            rf'pod="{namespace}/fits" node="{node}" evaluatedNodes=(?P<evaluated>\d+) '
            rf'feasibleNodes=(?P<feasible>\d+) profile="{SCHEDULER_NAME}"$'
        )
        no_fit = re.compile(
            KLOG_HEADER + rf'"Unable to schedule pod; no fit; waiting" pod="{namespace}/too-big" '
            r'err="0/\d+ nodes are available: .*3 Insufficient cpu.*"$'
        )

        async def logged() -> bool:
            text = lines_of(proc)
            return any(bind.match(line) for line in text) and any(no_fit.match(line) for line in text)

        await eventually(logged, timeout=30, what=f"the binding and the failure logged\n{proc.log()}")
        (match,) = [m for line in lines_of(proc) if (m := bind.match(line))]
        assert match["file"] == "binding.py"
        # every node of the cluster was looked at, and only this module's fit its selector
        assert int(match["evaluated"]) >= NODE_COUNT
        assert int(match["feasible"]) == NODE_COUNT
    finally:
        proc.close()


async def test_json_format_lines_parse_with_the_binding_keys(
    control_plane: ControlPlane,
    core: client.CoreV1Api,
    namespace: str,
    nodes: tuple[str, list[str]],
    tmp_path: Path,
) -> None:
    label, _ = nodes
    proc = start(control_plane, tmp_path, "-v=2", "--logging-format=json")
    try:
        await ready(proc)
        await core.create_namespaced_pod(namespace, pod("json", label))
        node = await bound_to(core, namespace, "json")

        def bindings() -> list[dict[str, object]]:
            entries = [json.loads(line) for line in lines_of(proc) if line.strip()]
            return [e for e in entries if e.get("msg") == "Successfully bound pod to node"]

        async def logged() -> bool:
            return any(e.get("pod") == f"{namespace}/json" for e in bindings())

        await eventually(logged, timeout=30, what=f"the binding logged\n{proc.log()}")
        (entry,) = [e for e in bindings() if e.get("pod") == f"{namespace}/json"]
        assert list(entry)[:4] == ["ts", "caller", "msg", "v"]
        assert entry["v"] == 2 and entry["node"] == node
        assert isinstance(entry["ts"], float)
        assert re.fullmatch(r"scheduler/binding\.py:\d+", str(entry["caller"]))
        assert entry["evaluatedNodes"] >= NODE_COUNT  # type: ignore[operator]
        assert entry["feasibleNodes"] == NODE_COUNT
        # and nothing else on the stream is anything but JSON
        for line in lines_of(proc):
            if line.strip():
                json.loads(line)
    finally:
        proc.close()


def run_to_the_end(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "koordpy.cli", "run", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


def test_a_missing_kubeconfig_is_one_line_and_exit_1() -> None:
    result = run_to_the_end("--kubeconfig", "/nonexistent/kubeconfig")
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "koordpy: cannot load the cluster credentials: no kubeconfig at /nonexistent/kubeconfig"
    )
    assert "pass --kubeconfig" in line


@pytest.mark.parametrize("certificate", ["self-signed in memory", "files"])
def test_a_port_in_use_is_one_line_and_exit_1(
    control_plane: ControlPlane, tmp_path: Path, certificate: str
) -> None:
    flags: list[str] = []
    if certificate == "files":
        chain, key = generate_self_signed("localhost")
        (tmp_path / "tls.crt").write_bytes(chain)
        (tmp_path / "tls.key").write_bytes(key)
        flags = [f"--tls-cert-file={tmp_path / 'tls.crt'}", f"--tls-private-key-file={tmp_path / 'tls.key'}"]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = run_to_the_end(
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            *flags,
        )
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"koordpy: cannot serve on 127.0.0.1:{port}: ")
    assert "address already in use" in line and "--secure-port" in line
