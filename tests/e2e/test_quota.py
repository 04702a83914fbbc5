"""Elastic quota on the real control plane, with the scheduler and the operators running.

Two KWOK nodes of 4 units each of an extended resource only they have (so that the cluster's total
of it, what Koordinator's root quota shares out, is theirs alone: 8), and two Koordinator quotas in
it: team-a (min 2, max 8) and team-b (min 6, max 8).

- team-a runs four 2-unit pods while team-b asks for nothing: it borrows team-b's idle min, every
  pod is bound, and the operator writes used 8 and runtime 8, child-request 8, and the
  non-preemptible request and used of the one pod labelled `preemptible: "false"` (2, its min).
- team-b's job arrives (a gang of three 2-unit pods, its min): team-a's runtime falls to its min,
  team-b is within its min, so it takes back what team-a borrowed: the three other pods of team-a
  get the DisruptionTarget condition and are deleted (the non-preemptible one is never a victim),
  the job is bound, and the operator writes team-a used 2 / runtime 2, team-b used 6 / runtime 6.
- a quota whose min is above its max gets Valid=False with the problem, and a Warning event; a pod
  naming a quota that does not exist waits with QuotaNotFound.

And one scheduler-plugins quota (the namespace's, min and max 1 cpu; CapacityScheduling also keeps
the quotas' used within the sum of their mins, and this is the only quota): a second pod that would
take the namespace past its max waits with a message naming the quota; status.used counts the
Running pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.elasticquota import LABEL_PREEMPTIBLE, LABEL_QUOTA_NAME
from koordpy.cluster.world import KubeWorld
from koordpy.status.quota import (
    ANNOTATION_CHILD_REQUEST,
    ANNOTATION_NON_PREEMPTIBLE_REQUEST,
    ANNOTATION_NON_PREEMPTIBLE_USED,
    ANNOTATION_RUNTIME,
)
from operators import run_operators
from tests.e2e.kwok import labelled_nodes
from tests.e2e.test_gangs import create_podgroup
from tests.e2e.test_run import NODE_LABEL, SCHEDULER_NAME, PodWatch, events_of, running_world
from tests.support.controlplane import ControlPlane
from tests.support.polling import eventually

SIGS, X_K8S = "scheduling.sigs.k8s.io", "scheduling.x-k8s.io"
GANG_LABEL = "pod-group.scheduling.sigs.k8s.io"
# an extended resource no other node of the control plane has
GPU = "e2e.koordpy.io/gpu"


@pytest.fixture(scope="module")
async def nodes(control_plane: ControlPlane) -> AsyncIterator[str]:
    resources = {"cpu": "32", "memory": "64Gi", "pods": "110", GPU: "4"}
    async with labelled_nodes(str(control_plane.kubeconfig), "eq-node", 2, NODE_LABEL, resources) as (
        label,
        _,
    ):
        yield label


@pytest.fixture
async def world(control_plane: ControlPlane, nodes: str) -> AsyncIterator[KubeWorld]:
    async with running_world(control_plane) as w:
        yield w


@pytest.fixture
async def operators(control_plane: ControlPlane) -> AsyncIterator[None]:
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_operators(str(control_plane.kubeconfig), stop, ready), name="operators")
    try:
        await asyncio.wait_for(ready.wait(), 30)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@pytest.fixture
async def quotas(kube_api: client.ApiClient) -> AsyncIterator[list[tuple[str, str, str]]]:
    """(group, namespace, name) of every ElasticQuota the test creates: deleted afterwards, since a
    Koordinator quota is cluster-wide in effect."""
    created: list[tuple[str, str, str]] = []
    yield created
    objects = client.CustomObjectsApi(kube_api)
    for group, namespace, name in created:
        with contextlib.suppress(ApiException):
            await objects.delete_namespaced_custom_object(group, "v1alpha1", namespace, "elasticquotas", name)


async def create_quota(
    kube_api: client.ApiClient,
    created: list[tuple[str, str, str]],
    group: str,
    namespace: str,
    name: str,
    min: dict[str, str],
    max: dict[str, str],
) -> None:
    body = {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name},
        "spec": {"min": min, "max": max},
    }
    await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        group, "v1alpha1", namespace, "elasticquotas", body
    )
    created.append((group, namespace, name))


async def read_quota(kube_api: client.ApiClient, group: str, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = await client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        group, "v1alpha1", namespace, "elasticquotas", name
    )
    return found


def pod_manifest(
    name: str,
    label: str,
    *,
    quota: str | None = None,
    gang: str | None = None,
    gpu: int = 0,
    cpu: str = "100m",
    non_preemptible: bool = False,
) -> client.V1Pod:
    labels = {"app": "e2e-quota"}
    if quota:
        labels[LABEL_QUOTA_NAME] = quota
    if non_preemptible:
        labels[LABEL_PREEMPTIBLE] = "false"
    if gang:
        labels[GANG_LABEL] = gang
    requests = {"cpu": cpu, "memory": "64Mi", **({GPU: str(gpu)} if gpu else {})}
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            scheduler_name=SCHEDULER_NAME,
            node_selector={NODE_LABEL: label},
            termination_grace_period_seconds=0,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests=requests, limits=dict(requests)),
                )
            ],
        ),
    )


async def pods_by_name(core: client.CoreV1Api, namespace: str) -> dict[str, Any]:
    return {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}


def figures(obj: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(status.used, runtime annotation) as written."""
    runtime = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_RUNTIME)
    return (obj.get("status") or {}).get("used") or {}, orjson.loads(runtime) if runtime else {}


def annotation(obj: dict[str, Any], key: str) -> dict[str, str]:
    text = (obj["metadata"].get("annotations") or {}).get(key)
    return orjson.loads(text) if text else {}


async def test_team_b_reclaims_what_team_a_borrowed_and_the_status_follows(
    world: KubeWorld,
    operators: None,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    nodes: str,
    quotas: list[tuple[str, str, str]],
) -> None:
    suffix = uuid.uuid4().hex[:6]
    team_a, team_b, bad = f"team-a-{suffix}", f"team-b-{suffix}", f"bad-{suffix}"
    await create_quota(kube_api, quotas, SIGS, namespace, team_a, {GPU: "2"}, {GPU: "8"})
    await create_quota(kube_api, quotas, SIGS, namespace, team_b, {GPU: "6"}, {GPU: "8"})
    borrowers = [f"a-{i}" for i in range(4)]
    job = f"job-b-{suffix}"
    members = [f"{job}-{i}" for i in range(3)]

    async with PodWatch(kube_api, namespace) as watch:
        # team-a borrows: 8 units against a min of 2, team-b idle
        for name in borrowers:
            # the first within team-a's min, and not to be taken back
            manifest = pod_manifest(name, nodes, quota=team_a, gpu=2, non_preemptible=name == borrowers[0])
            await core.create_namespaced_pod(namespace, manifest)

        async def borrowed() -> bool:
            pods = await pods_by_name(core, namespace)
            return all(n in pods and pods[n].status.phase == "Running" for n in borrowers)

        await eventually(borrowed, timeout=30, what="team-a's four pods bound and Running")

        async def a_borrowing() -> tuple[dict[str, str], dict[str, str]] | None:
            got = figures(await read_quota(kube_api, SIGS, namespace, team_a))
            return got if got == ({GPU: "8"}, {GPU: "8"}) else None

        await eventually(a_borrowing, timeout=15, what="team-a's status: used 8, runtime 8")
        stored = await read_quota(kube_api, SIGS, namespace, team_a)
        # the pods' cpu and memory are not in the quota's max: only the units count
        assert annotation(stored, ANNOTATION_CHILD_REQUEST) == {GPU: "8"}
        assert annotation(stored, ANNOTATION_NON_PREEMPTIBLE_REQUEST) == {GPU: "2"}
        assert annotation(stored, ANNOTATION_NON_PREEMPTIBLE_USED) == {GPU: "2"}

        # team-b's job arrives, asking for its min
        await create_podgroup(kube_api, SIGS, namespace, job, len(members))
        for name in members:
            await core.create_namespaced_pod(
                namespace, pod_manifest(name, nodes, quota=team_b, gang=job, gpu=2)
            )

        async def job_bound() -> bool:
            pods = await pods_by_name(core, namespace)
            return all(n in pods and pods[n].spec.node_name for n in members)

        await eventually(job_bound, timeout=45, what="team-b's job bound")

        async def reclaimed() -> dict[str, tuple[dict[str, str], dict[str, str]]] | None:
            a = figures(await read_quota(kube_api, SIGS, namespace, team_a))
            b = figures(await read_quota(kube_api, SIGS, namespace, team_b))
            want = {team_a: ({GPU: "2"}, {GPU: "2"}), team_b: ({GPU: "6"}, {GPU: "6"})}
            got = {team_a: a, team_b: b}
            return got if got == want else None

        await eventually(reclaimed, timeout=20, what="the status after reclaim")

    final = await pods_by_name(core, namespace)
    victims = {n for n in borrowers if watch.conditions(n, "DisruptionTarget")}
    assert len(victims) == 3, victims
    for name in victims:
        (mark, *_) = watch.conditions(name, "DisruptionTarget")
        assert mark["status"] == "True" and mark["reason"] == "PreemptionByScheduler", mark
        assert name not in final, f"{name} was marked but not deleted"
    (kept,) = set(borrowers) - victims
    assert kept == borrowers[0]
    assert final[kept].spec.node_name and final[kept].metadata.deletion_timestamp is None
    for name in members:
        assert not watch.conditions(name, "DisruptionTarget")

    # bad input: a quota whose min is above its max, and a pod naming a quota that does not exist
    await create_quota(kube_api, quotas, SIGS, namespace, bad, {GPU: "4"}, {GPU: "2"})
    ghost = f"ghost-{suffix}"
    await core.create_namespaced_pod(namespace, pod_manifest("lost", nodes, quota=ghost, gpu=1))

    async def bad_condition() -> dict[str, Any] | None:
        status = (await read_quota(kube_api, SIGS, namespace, bad)).get("status") or {}
        valid = [c for c in status.get("conditions") or () if c["type"] == "Valid"]
        return valid[0] if valid else None

    condition = await eventually(bad_condition, timeout=15, what="the bad quota's Valid condition")
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec"), condition
    assert "min 4 is above max 2" in condition["message"], condition

    async def bad_event() -> list[Any]:
        found = await events_of(kube_api, namespace, "InvalidSpec")
        return [e for e in found if e.regarding.kind == "ElasticQuota" and e.regarding.name == bad]

    (event,) = await eventually(bad_event, timeout=15, what="the bad quota's Warning event")
    assert event.type == "Warning" and event.note == condition["message"]

    async def lost_held() -> str | None:
        pod = (await pods_by_name(core, namespace)).get("lost")
        for c in (pod.status.conditions or []) if pod is not None else ():
            if c.type == "PodScheduled" and c.status == "False" and "QuotaNotFound" in (c.message or ""):
                return str(c.message)
        return None

    message = await eventually(lost_held, timeout=15, what="the pod of a missing quota held")
    assert f"quota {ghost}" in message and "does not exist" in message


async def test_a_namespace_quota_holds_what_would_pass_its_max(
    world: KubeWorld,
    operators: None,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    nodes: str,
    quotas: list[tuple[str, str, str]],
) -> None:
    await create_quota(
        kube_api,
        quotas,
        X_K8S,
        namespace,
        "eq",
        {"cpu": "1", "memory": "1Gi"},
        {"cpu": "1", "memory": "1Gi"},
    )
    await core.create_namespaced_pod(namespace, pod_manifest("first", nodes, cpu="600m"))

    async def first_running() -> bool:
        pod = (await pods_by_name(core, namespace)).get("first")
        return pod is not None and pod.status.phase == "Running"

    await eventually(first_running, timeout=30, what="the first pod Running")
    await core.create_namespaced_pod(namespace, pod_manifest("second", nodes, cpu="600m"))

    async def second_held() -> str | None:
        pod = (await pods_by_name(core, namespace)).get("second")
        for c in (pod.status.conditions or []) if pod is not None else ():
            if (
                c.type == "PodScheduled"
                and c.status == "False"
                and f"quota {namespace}/eq" in (c.message or "")
            ):
                return str(c.message)
        return None

    message = await eventually(second_held, timeout=20, what="the second pod held by its quota")
    assert "cpu" in message, message
    assert not (await pods_by_name(core, namespace))["second"].spec.node_name

    async def used() -> dict[str, str] | None:
        status = (await read_quota(kube_api, X_K8S, namespace, "eq")).get("status") or {}
        got: dict[str, str] = status.get("used") or {}
        return got if got == {"cpu": "600m", "memory": "64Mi"} else None

    await eventually(used, timeout=15, what="status.used of the Running pod")
