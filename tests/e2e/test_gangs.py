# ruff: noqa: F811  - pytest fixtures shared with test_run are imported and then named as arguments
"""Gang scheduling on the real control plane: the ReplicaSet demo with a PodGroup, and a GangGroup,
bound all or nothing on KWOK nodes by `koordpy run`'s world."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from koordpy.cluster.world import KubeWorld
from tests.e2e.test_run import (  # noqa: F401  (fixtures shared with the run tests)
    CONFIG_DOC,
    NODE_LABEL,
    SCHEDULER_NAME,
    RunProcess,
    eventually,
    nodes,
    running_world,
    settle,
)
from tests.support.controlplane import ControlPlane, free_port

G = "gang.scheduling.koordinator.sh"


@pytest.fixture
async def world(control_plane: ControlPlane, nodes: str) -> AsyncIterator[KubeWorld]:
    async with running_world(control_plane) as w:
        yield w


def member(name: str, label: str, cpu: str, pod_labels: dict[str, str]) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=pod_labels),
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


async def create_podgroup(
    api: client.ApiClient,
    group: str,
    namespace: str,
    name: str,
    min_member: int,
    annotations: dict[str, str] | None = None,
) -> None:
    body = {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"minMember": min_member},
    }
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, "v1alpha1", namespace, "podgroups", body
    )


async def bound(core_api: client.CoreV1Api, namespace: str) -> dict[str, str | None]:
    pods = (await core_api.list_namespaced_pod(namespace)).items
    return {p.metadata.name: p.spec.node_name for p in pods}


async def quiet(world: KubeWorld, seconds: float = 3.0) -> None:
    """Let the scheduler finish what it will do, then a little longer to see that nothing more comes."""
    await settle(world)
    await asyncio.sleep(seconds)
    await settle(world)


# Three 8-cpu KWOK nodes take one 6-cpu pod each: the cluster affords three members.
@pytest.mark.parametrize(
    ("min_member", "expected_bound"),
    [(3, 3), (4, 0)],
    ids=["minimum-fits-three-bound", "minimum-does-not-fit-none-bound"],
)
async def test_replicaset_demo_with_a_podgroup(
    world: KubeWorld,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    nodes: str,
    min_member: int,
    expected_bound: int,
) -> None:
    pg = f"nginx-{uuid.uuid4().hex[:5]}"
    await create_podgroup(kube_api, "scheduling.x-k8s.io", namespace, pg, min_member)
    for i in range(6):
        await core.create_namespaced_pod(
            namespace, member(f"{pg}-{i}", nodes, "6", {"scheduling.x-k8s.io/pod-group": pg})
        )
    if expected_bound:
        await eventually(
            lambda: _count_bound(core, namespace, expected_bound),
            timeout=60,
            what=f"{expected_bound} members bound",
        )
    await quiet(world)
    placed = [n for n in (await bound(core, namespace)).values() if n]
    assert len(placed) == expected_bound
    assert len(set(placed)) == len(placed)  # one per node


async def _count_bound(core_api: client.CoreV1Api, namespace: str, n: int) -> bool:
    return sum(1 for v in (await bound(core_api, namespace)).values() if v) >= n


@pytest.mark.parametrize(
    ("worker_cpu", "expected_bound"),
    [("6", 3), ("9", 0)],
    ids=["whole-group-fits", "workers-do-not-fit-so-master-waits-too"],
)
async def test_gang_group_is_bound_all_or_nothing(
    world: KubeWorld,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    nodes: str,
    worker_cpu: str,
    expected_bound: int,
) -> None:
    suffix = uuid.uuid4().hex[:5]
    master, workers = f"master-{suffix}", f"worker-{suffix}"
    groups = f'["{namespace}/{master}", "{namespace}/{workers}"]'
    await create_podgroup(kube_api, "scheduling.sigs.k8s.io", namespace, master, 1, {f"{G}/groups": groups})
    await create_podgroup(kube_api, "scheduling.sigs.k8s.io", namespace, workers, 2, {f"{G}/groups": groups})
    await core.create_namespaced_pod(
        namespace, member(f"{master}-0", nodes, "6", {"pod-group.scheduling.sigs.k8s.io": master})
    )
    for i in range(2):
        await core.create_namespaced_pod(
            namespace,
            member(f"{workers}-{i}", nodes, worker_cpu, {"pod-group.scheduling.sigs.k8s.io": workers}),
        )
    if expected_bound:
        await eventually(
            lambda: _count_bound(core, namespace, expected_bound),
            timeout=60,
            what="the whole gang group bound",
        )
    await quiet(world)
    placed = [n for n in (await bound(core, namespace)).values() if n]
    assert len(placed) == expected_bound


async def test_koordpy_run_keeps_podgroup_status_with_its_embedded_operators(
    control_plane: ControlPlane,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    nodes: str,
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG_DOC))
    proc = RunProcess(
        ["--kubeconfig", str(control_plane.kubeconfig), "--config", str(config)],
        tmp_path / "run.log",
        free_port(),
        "embedded-operators",
    )
    try:
        pg = f"job-{uuid.uuid4().hex[:5]}"
        await create_podgroup(kube_api, "scheduling.sigs.k8s.io", namespace, pg, 2)
        for i in range(2):
            await core.create_namespaced_pod(
                namespace, member(f"{pg}-{i}", nodes, "1", {"pod-group.scheduling.sigs.k8s.io": pg})
            )
        objects = client.CustomObjectsApi(kube_api)

        async def running() -> bool:
            obj = await objects.get_namespaced_custom_object(
                "scheduling.sigs.k8s.io", "v1alpha1", namespace, "podgroups", pg
            )
            status = obj.get("status") or {}
            return status.get("phase") == "Running" and status.get("scheduled") == 2

        try:
            await eventually(running, timeout=90, what="the PodGroup status written by koordpy run")
        except BaseException:
            print(proc.log())
            raise
    finally:
        proc.proc.send_signal(signal.SIGTERM)
        try:
            proc.proc.wait(30)
        finally:
            proc.close()
