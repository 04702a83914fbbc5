"""`koordpy run` on the real control plane exports kube-scheduler's metrics as kube-scheduler v1.33
does: each one koordpy claims, with kube's type, labels and buckets (tests/metrics has the list)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from koordpy.metrics import KUBE_SCHEDULER_METRICS
from tests.e2e.kwok import labelled_nodes
from tests.e2e.test_run import CONFIG_DOC, NODE_LABEL, RunProcess, create_pods, pod_manifest
from tests.metrics.compare import mismatches
from tests.metrics.kube_scheduler_metrics import BY_NAME
from tests.support.controlplane import ControlPlane, free_port
from tests.support.polling import eventually

G = "gang.scheduling.koordinator.sh"
# plugin timings are taken on a sample of the cycles, as kube-scheduler's are: pods are added in
# batches until some have been
BATCH = 20
BATCHES = 10
SCRAPES_PER_BATCH = 10
SCRAPE_INTERVAL = 1.0


async def scrape_metrics(run: RunProcess) -> str:
    """The one place that reads /metrics from `koordpy run`."""
    status, text = await run.get("/metrics")
    assert status == 200, text
    return text


@pytest.fixture(scope="module")
async def nodes(control_plane: ControlPlane) -> AsyncIterator[str]:
    resources = {"cpu": "32", "memory": "64Gi", "pods": "110"}
    async with labelled_nodes(str(control_plane.kubeconfig), "metrics-node", 2, NODE_LABEL, resources) as (
        label,
        _,
    ):
        yield label


async def test_koordpy_run_exports_kube_scheduler_metrics_as_kube_scheduler_does(
    control_plane: ControlPlane, core: client.CoreV1Api, namespace: str, nodes: str, tmp_path: Path
) -> None:
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(CONFIG_DOC))
    identity = f"metrics-{uuid.uuid4().hex[:6]}"
    run = RunProcess(
        [
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--config",
            str(config_path),
            "--leader-elect",
            "--lease-name",
            f"metrics-{uuid.uuid4().hex[:6]}",
            "--lease-namespace",
            namespace,
        ],
        tmp_path / "koordpy.log",
        free_port(),
        identity,
    )
    try:
        # what the metrics describe: pods bound, one that fits nowhere, one gated, a gang that
        # waits at Permit for its second member
        too_big = pod_manifest("too-big", nodes, cpu="1000")
        gated = pod_manifest("gated", nodes)
        gated.spec.scheduling_gates = [client.V1PodSchedulingGate(name="example.com/hold")]
        for pod in (too_big, gated):
            await core.create_namespaced_pod(namespace, pod)
        for i in range(2):
            member = pod_manifest(f"gang-{i}", nodes)
            member.metadata.annotations = {f"{G}/name": "gang", f"{G}/min-available": "2"}
            await core.create_namespaced_pod(namespace, member)

        expected = [BY_NAME[n] for n in sorted(KUBE_SCHEDULER_METRICS)]
        await eventually(lambda: run.get("/readyz"), timeout=60, what="koordpy run to answer")
        problems: list[str] = ["not scraped yet"]
        for batch in range(BATCHES):
            await create_pods(core, namespace, nodes, BATCH, prefix=f"b{batch}", cpu="10m")
            for _ in range(SCRAPES_PER_BATCH):
                await asyncio.sleep(SCRAPE_INTERVAL)
                problems = mismatches(await scrape_metrics(run), expected)
                if not problems:
                    break
            if not problems:
                break
        assert run.proc.poll() is None, run.log()
        assert problems == [], run.log()
    finally:
        run.close()
