"""The operators against the real test control plane: PodGroup status for both API groups as member
pods are created, bound and run (KWOK runs them), the ClusterNetworkTopology's detailStatus for the
seed's spine/block example as nodes are relabelled and removed, a broken spec reported on the object,
the operators fed pod and node facts by their caller (as `koordpy run` embeds them), and
`koordpy operators` as its own process.

The operators run in-process on the test's event loop, except in the last test."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.kubeapi import Informer, KubeApi, Resource
from koordpy.kubeapi.informer import NODES
from operators import run_operators
from operators.facts import ClusterFacts
from operators.podgroup import GroupKey
from tests.support.controlplane import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE, ControlPlane
from tests.support.polling import eventually as poll
from tests.topology.test_detail_status import SEED_DETAIL_STATUS, SEED_NODE_LABELS

REPO_ROOT = Path(__file__).resolve().parents[2]
# no scheduler serves it: the tests bind the pods themselves
NOBODY = "e2e-nobody"
CNT = ("scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies")


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def eventually(
    probe: Callable[[], Awaitable[Any]], *, timeout: float = 20.0, interval: float = 0.2, what: str = ""
) -> Any:
    return await poll(probe, timeout=timeout, interval=interval, what=what)


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture
async def operators(control_plane: ControlPlane) -> AsyncIterator[None]:
    """The operators on the test's loop, as `koordpy run` embeds them, with pod and node informers
    of their own (no ClusterFacts given); on the way out, checks that they leave the loop as they
    found it (signal handlers, no tasks left behind)."""
    sigint, sigterm = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    tasks_before = asyncio.all_tasks()
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_operators(str(control_plane.kubeconfig), stop, ready), name="operators")
    try:
        await asyncio.wait_for(ready.wait(), 30)
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == (sigint, sigterm)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    await asyncio.sleep(0)
    left = [t for t in asyncio.all_tasks() - tasks_before if not t.done() and t is not asyncio.current_task()]
    assert not left, f"tasks left running: {left}"


@pytest.fixture
def objects(kube_api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_api)


@pytest.fixture(scope="module")
async def kwok_nodes(control_plane: ControlPlane) -> AsyncIterator[list[str]]:
    """Two Ready KWOK nodes for member pods."""
    configuration = client.Configuration()
    from kubernetes_asyncio import config as k8s_config

    await k8s_config.load_kube_config(
        config_file=str(control_plane.kubeconfig), client_configuration=configuration
    )
    suffix = uuid.uuid4().hex[:6]
    names = [f"ops-node-{suffix}-{i}" for i in range(2)]
    async with client.ApiClient(configuration=configuration) as api:
        core = client.CoreV1Api(api)
        resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        for name in names:
            await core.create_node(
                client.V1Node(
                    metadata=client.V1ObjectMeta(
                        name=name,
                        annotations={KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
                        labels={"kubernetes.io/hostname": name, "type": "kwok"},
                    ),
                    status=client.V1NodeStatus(capacity=resources, allocatable=dict(resources)),
                )
            )

        async def ready() -> bool:
            for name in names:
                node = await core.read_node(name)
                if not any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []):
                    return False
            return True

        await eventually(ready, timeout=60, what="KWOK nodes to become Ready")
        yield names
        for name in names:
            with contextlib.suppress(ApiException):
                await core.delete_node(name)


# ---------------------------------------------------------------------------------------------- PodGroups
def member_pod(name: str, labels: dict[str, str], owner: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name,
            labels=labels,
            owner_references=[
                # not a Job: KWOK completes the pods of Jobs
                client.V1OwnerReference(
                    api_version="kubeflow.org/v1", kind="PyTorchJob", name=owner, uid=str(uuid.uuid4())
                )
            ],
        ),
        spec=client.V1PodSpec(
            scheduler_name=NOBODY,
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


async def bind(core: client.CoreV1Api, namespace: str, pod: str, node: str) -> None:
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # the response is a Status the client cannot read as a V1Binding
    response = await core.create_namespaced_pod_binding(pod, namespace, binding, _preload_content=False)
    try:
        assert response.status == 201, await response.text()
    finally:
        response.release()


@pytest.mark.parametrize(
    ("api_group", "label", "phases_before_binding"),
    [
        ("scheduling.sigs.k8s.io", "pod-group.scheduling.sigs.k8s.io", {"Scheduling"}),
        ("scheduling.x-k8s.io", "scheduling.x-k8s.io/pod-group", {"Scheduling"}),
    ],
    ids=["sigs", "x-k8s"],
)
async def test_podgroup_runs_when_its_members_run(
    operators: None,
    core: client.CoreV1Api,
    objects: client.CustomObjectsApi,
    namespace: str,
    kwok_nodes: list[str],
    api_group: str,
    label: str,
    phases_before_binding: set[str],
) -> None:
    group = _name("gang")
    await objects.create_namespaced_custom_object(
        api_group,
        "v1alpha1",
        namespace,
        "podgroups",
        {
            "apiVersion": f"{api_group}/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": group},
            "spec": {"minMember": 2},
        },
    )

    async def status() -> dict[str, Any]:
        obj = await objects.get_namespaced_custom_object(api_group, "v1alpha1", namespace, "podgroups", group)
        return dict(obj.get("status") or {})

    async def phase_is(*phases: str) -> dict[str, Any] | None:
        current = await status()
        return current if current.get("phase") in phases else None

    await eventually(lambda: phase_is("Pending"), what=f"{group} to be Pending")

    pods = [f"{group}-{i}" for i in range(2)]
    for pod in pods:
        await core.create_namespaced_pod(namespace, member_pod(pod, {label: group}, owner="train"))
    waiting = await eventually(
        lambda: phase_is(*phases_before_binding), what=f"{group} to wait for its members to be placed"
    )
    assert waiting["occupiedBy"] == f"{namespace}/train"
    if api_group == "scheduling.sigs.k8s.io":
        assert waiting["scheduled"] == 0
        assert waiting["scheduleStartTime"]

    for pod, node in zip(pods, kwok_nodes):
        await bind(core, namespace, pod, node)
    running = await eventually(lambda: phase_is("Running"), what=f"{group} to be Running")
    assert running["running"] == 2
    # only the status is written: kopf keeps no state of its own on the objects it watches
    obj = await objects.get_namespaced_custom_object(api_group, "v1alpha1", namespace, "podgroups", group)
    pod = await core.read_namespaced_pod(pods[1], namespace)
    for written in (obj["metadata"].get("annotations") or {}, pod.metadata.annotations or {}):
        assert not [key for key in written if "kopf" in key]
    assert not obj["metadata"].get("finalizers") and not pod.metadata.finalizers
    assert running["succeeded"] == running["failed"] == 0
    if api_group == "scheduling.sigs.k8s.io":
        assert running["scheduled"] == 2

    # a member going away is counted too
    await core.delete_namespaced_pod(pods[0], namespace, grace_period_seconds=0)

    async def one_left() -> dict[str, Any] | None:
        current = await status()
        return current if current.get("running") == 1 else None

    after = await eventually(one_left, what=f"{group} to count one running member")
    assert after["phase"] == ("Scheduling" if api_group == "scheduling.sigs.k8s.io" else "Pending")


async def test_embedded_operators_count_the_members_their_caller_feeds(
    control_plane: ControlPlane,
    core: client.CoreV1Api,
    objects: client.CustomObjectsApi,
    namespace: str,
    kwok_nodes: list[str],
) -> None:
    """`koordpy run`'s way: the caller's informers feed a ClusterFacts and say when it is synced;
    the operators count nothing before."""
    api_group, group = "scheduling.sigs.k8s.io", _name("fed")
    key = GroupKey(api_group, namespace, group)
    await objects.create_namespaced_custom_object(
        api_group,
        "v1alpha1",
        namespace,
        "podgroups",
        {
            "apiVersion": f"{api_group}/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": group},
            "spec": {"minMember": 2},
        },
    )
    pods = [f"{group}-{i}" for i in range(2)]
    for pod in pods:
        await core.create_namespaced_pod(
            namespace, member_pod(pod, {"pod-group.scheduling.sigs.k8s.io": group}, owner="train")
        )

    async def status() -> dict[str, Any]:
        obj = await objects.get_namespaced_custom_object(api_group, "v1alpha1", namespace, "podgroups", group)
        return dict(obj.get("status") or {})

    facts = ClusterFacts()
    api = await KubeApi.connect(str(control_plane.kubeconfig))
    # every pod, finished ones too: the status counts succeeded and failed members
    informers = [
        Informer(api, Resource("Pod", "v1", "pods"), facts.on_pod),
        Informer(api, NODES, facts.on_node),
    ]
    feeding: list[asyncio.Task[None]] = []
    stop, ready = asyncio.Event(), asyncio.Event()
    operators = asyncio.create_task(
        run_operators(str(control_plane.kubeconfig), stop, ready, facts=facts), name="embedded operators"
    )
    try:
        # the facts are not synced: the PodGroup is seen, but no status is computed for it
        await asyncio.sleep(3)
        assert not ready.is_set()
        assert await status() == {}

        feeding = [asyncio.create_task(i.run(), name=f"test {i.resource.plural}") for i in informers]
        for informer in informers:
            await asyncio.wait_for(informer.synced.wait(), 30)
        facts.synced.set()
        await asyncio.wait_for(ready.wait(), 30)
        assert sorted(p.name for p in facts.members(key)) == pods

        async def phase_is(phase: str) -> dict[str, Any] | None:
            current = await status()
            return current if current.get("phase") == phase else None

        waiting = await eventually(lambda: phase_is("Scheduling"), what=f"{group} to wait for its members")
        assert waiting["occupiedBy"] == f"{namespace}/train"
        assert waiting["scheduled"] == 0
        for pod, node in zip(pods, kwok_nodes):
            await bind(core, namespace, pod, node)
        running = await eventually(lambda: phase_is("Running"), what=f"{group} to be Running")
        assert (running["scheduled"], running["running"], running["succeeded"], running["failed"]) == (
            2,
            2,
            0,
            0,
        )
    finally:
        stop.set()
        await asyncio.wait_for(operators, 30)
        for task in feeding:
            task.cancel()
        await asyncio.gather(*feeding, return_exceptions=True)
        await api.close()


# ---------------------------------------------------------------------------------------------- topology
async def replace_topology(objects: client.CustomObjectsApi, spec: dict[str, Any]) -> None:
    with contextlib.suppress(ApiException):
        await objects.delete_cluster_custom_object(*CNT, "default")

    async def gone() -> bool:
        try:
            await objects.get_cluster_custom_object(*CNT, "default")
        except ApiException as err:
            return err.status == 404
        return False

    await eventually(gone, what="the old ClusterNetworkTopology to go")
    await objects.create_cluster_custom_object(
        *CNT,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"},
            "spec": spec,
        },
    )


async def topology_status(objects: client.CustomObjectsApi) -> dict[str, Any]:
    obj = await objects.get_cluster_custom_object(*CNT, "default")
    return dict(obj.get("status") or {})


@pytest.fixture
async def topology_nodes(
    core: client.CoreV1Api, objects: client.CustomObjectsApi
) -> AsyncIterator[dict[str, Any]]:
    """The seed's eight nodes under label keys of their own (nodes other tests leave behind cannot
    join the tree; label keys do not appear in detailStatus), and the seed's spec over those keys."""
    prefix = f"e2e-{uuid.uuid4().hex[:6]}.koordpy.io"
    spine, block = f"{prefix}/spine", f"{prefix}/block"
    names = {name: f"topo-{prefix[4:10]}-{name}" for name in SEED_NODE_LABELS}
    for seed_name, labels in SEED_NODE_LABELS.items():
        values = list(labels.values())
        await core.create_node(
            client.V1Node(
                metadata=client.V1ObjectMeta(
                    name=names[seed_name], labels={spine: values[0], block: values[1]}
                )
            )
        )
    spec = {
        "networkTopologySpec": [
            {"labelKey": [spine], "topologyLayer": "SpineLayer"},
            {"labelKey": [block], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
        ]
    }
    try:
        yield {"spec": spec, "names": names, "spine": spine, "block": block}
    finally:
        for name in names.values():
            with contextlib.suppress(ApiException):
                await core.delete_node(name)
        with contextlib.suppress(ApiException):
            await objects.delete_cluster_custom_object(*CNT, "default")


def counts(detail: list[dict[str, Any]]) -> dict[tuple[str, ...], int]:
    return {
        (e["topologyInfo"]["topologyLayer"], e["topologyInfo"]["topologyName"]): e["nodeNum"] for e in detail
    }


async def test_seed_topology_status_follows_the_nodes(
    operators: None, core: client.CoreV1Api, objects: client.CustomObjectsApi, topology_nodes: dict[str, Any]
) -> None:
    await replace_topology(objects, topology_nodes["spec"])
    expected = SEED_DETAIL_STATUS

    async def detail_is(want: list[dict[str, Any]]) -> bool:
        return (await topology_status(objects)).get("detailStatus") == want

    await eventually(lambda: detail_is(expected), what="the seed's detailStatus")

    # node-1 moves from s1/b2 to s2/b4
    names, spine, block = topology_nodes["names"], topology_nodes["spine"], topology_nodes["block"]
    await core.patch_node(names["node-1"], {"metadata": {"labels": {spine: "s2", block: "b4"}}})

    async def moved() -> dict[tuple[str, ...], int] | None:
        detail = (await topology_status(objects)).get("detailStatus") or []
        found = counts(detail)
        return found if found.get(("BlockLayer", "b4")) == 3 else None

    found = await eventually(moved, what="detailStatus to follow the relabelled node")
    assert found == {
        ("ClusterTopologyLayer", ""): 8,
        ("SpineLayer", "s1"): 3,
        ("BlockLayer", "b1"): 2,
        ("BlockLayer", "b2"): 1,
        ("SpineLayer", "s2"): 5,
        ("BlockLayer", "b3"): 2,
        ("BlockLayer", "b4"): 3,
    }

    # removing node-2 empties block b2
    await core.delete_node(names["node-2"])

    async def removed() -> dict[tuple[str, ...], int] | None:
        found = counts((await topology_status(objects)).get("detailStatus") or [])
        return found if ("BlockLayer", "b2") not in found else None

    found = await eventually(removed, what="detailStatus to drop the removed node")
    assert found[("ClusterTopologyLayer", "")] == 7
    assert found[("SpineLayer", "s1")] == 2


async def test_broken_spec_is_reported_and_cleared_when_fixed(
    operators: None, objects: client.CustomObjectsApi, topology_nodes: dict[str, Any]
) -> None:
    spec = topology_nodes["spec"]
    broken = {
        "networkTopologySpec": [
            spec["networkTopologySpec"][0],
            {**spec["networkTopologySpec"][1], "parentTopologyLayer": "RackLayer"},
            spec["networkTopologySpec"][2],
        ]
    }
    await replace_topology(objects, broken)

    async def invalid() -> dict[str, Any] | None:
        current = await topology_status(objects)
        for condition in current.get("conditions") or []:
            if condition["type"] == "Valid" and condition["status"] == "False":
                return {"status": current, "condition": condition}
        return None

    found = await eventually(invalid, what="condition Valid=False")
    condition = found["condition"]
    assert condition["reason"] == "InvalidSpec"
    assert "BlockLayer" in condition["message"] and "RackLayer" in condition["message"]
    assert found["status"].get("message") == condition["message"]
    assert not found["status"].get("detailStatus")

    await objects.patch_cluster_custom_object(
        *CNT, "default", {"spec": spec}, _content_type="application/merge-patch+json"
    )

    async def fixed() -> dict[str, Any] | None:
        current = await topology_status(objects)
        return current if current.get("detailStatus") == SEED_DETAIL_STATUS else None

    current = await eventually(fixed, what="the detailStatus once the spec is fixed")
    assert not any(c["type"] == "Valid" for c in current.get("conditions") or [])
    assert "message" not in current


# ---------------------------------------------------------------------------------------------- CLI
async def test_standalone_command_writes_status_and_stops_on_sigterm(
    control_plane: ControlPlane, objects: client.CustomObjectsApi, namespace: str
) -> None:
    group = _name("solo")
    await objects.create_namespaced_custom_object(
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        namespace,
        "podgroups",
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": group},
            "spec": {"minMember": 1},
        },
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "koordpy.cli", "operators", "--kubeconfig", str(control_plane.kubeconfig)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:

        async def pending() -> bool:
            obj = await objects.get_namespaced_custom_object(
                "scheduling.sigs.k8s.io", "v1alpha1", namespace, "podgroups", group
            )
            return (obj.get("status") or {}).get("phase") == "Pending"

        await eventually(pending, timeout=30, what="the standalone operators to write the PodGroup's status")
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 20)
        output = proc.stdout.read() if proc.stdout else ""
        assert code == 0, output
        assert "operators stopped" in output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
