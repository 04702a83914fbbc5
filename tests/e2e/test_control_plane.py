"""Pin the behaviour of the e2e test control plane (apiserver, KWOK, CRDs)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.controlplane import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE, ControlPlane

PODGROUP_GROUPS = ("scheduling.sigs.k8s.io", "scheduling.x-k8s.io")
CNT_GROUP = "scheduling.koordinator.sh"
# Custom resources take JSON merge patches (the client would pick JSON patch).
MERGE_PATCH: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _eventually(
    probe: Callable[[], Awaitable[Any]], *, timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> Any:
    """Await ``probe()`` until it returns a truthy value; fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while True:
        last = await probe()
        if last:
            return last
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or probe}; last value: {last!r}")
        await asyncio.sleep(interval)


def kwok_node(name: str) -> client.V1Node:
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
            labels={"type": "kwok", "kubernetes.io/hostname": name},
        ),
        status=client.V1NodeStatus(capacity=resources, allocatable=dict(resources)),
    )


def _node_ready(node: client.V1Node) -> bool:
    conditions = (node.status and node.status.conditions) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


@pytest.fixture
async def ready_node(kube_api: client.ApiClient) -> AsyncIterator[str]:
    core = client.CoreV1Api(kube_api)
    name = _name("kwok-node")
    await core.create_node(kwok_node(name))

    async def ready() -> bool:
        return _node_ready(await core.read_node(name))

    await _eventually(ready, what=f"node {name} to become Ready")
    yield name
    await core.delete_node(name)


async def test_apiserver_version(kube_api: client.ApiClient, control_plane: ControlPlane) -> None:
    info = await client.VersionApi(kube_api).get_code()
    assert info.git_version.startswith("v1.37."), info
    assert (info.major, info.minor) == ("1", "37")
    assert control_plane.server.startswith("https://127.0.0.1:")


async def test_kwok_node_becomes_ready(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    name = _name("kwok-node")
    await core.create_node(kwok_node(name))
    try:

        async def ready() -> client.V1Node | None:
            node = await core.read_node(name)
            return node if _node_ready(node) else None

        node = await _eventually(ready, what=f"node {name} to become Ready")
        assert node.status.allocatable["cpu"] == "32"
        assert node.status.allocatable["memory"] == "256Gi"
        assert node.status.allocatable["pods"] == "110"
        # No node-lifecycle controller and TaintNodesByCondition is disabled.
        assert not node.spec.taints
    finally:
        await core.delete_node(name)


async def test_unmanaged_node_is_left_alone(kube_api: client.ApiClient) -> None:
    """KWOK only adopts nodes with the kwok.x-k8s.io/node=fake annotation."""
    core = client.CoreV1Api(kube_api)
    name = _name("plain-node")
    node = kwok_node(name)
    node.metadata.annotations = {}
    await core.create_node(node)
    try:
        await asyncio.sleep(2)
        assert not _node_ready(await core.read_node(name))
    finally:
        await core.delete_node(name)


async def test_bound_pod_becomes_running(kube_api: client.ApiClient, namespace: str, ready_node: str) -> None:
    core = client.CoreV1Api(kube_api)
    pod_name = _name("pod")
    await core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=pod_name),
            spec=client.V1PodSpec(
                scheduler_name="e2e-nobody",
                containers=[
                    client.V1Container(
                        name="main",
                        image="registry.k8s.io/pause:3.10",
                        resources=client.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
                    )
                ],
            ),
        ),
    )
    pod = await core.read_namespaced_pod(pod_name, namespace)
    assert pod.spec.node_name is None
    assert pod.status.phase == "Pending"

    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod_name),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=ready_node),
    )
    # The response is a v1.Status that the client cannot deserialize into a
    # V1Binding, so read the raw response instead.
    resp = await core.create_namespaced_pod_binding(pod_name, namespace, binding, _preload_content=False)
    try:
        assert resp.status == 201, await resp.text()
    finally:
        resp.release()

    async def running() -> client.V1Pod | None:
        p = await core.read_namespaced_pod(pod_name, namespace)
        return p if p.status.phase == "Running" else None

    pod = await _eventually(running, what=f"pod {pod_name} to become Running")
    assert pod.spec.node_name == ready_node
    assert pod.status.pod_ip
    assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)

    # With _preload_content=False the client raises no ApiException for HTTP
    # errors either: the caller has to check the status. Binding again: 409.
    resp = await core.create_namespaced_pod_binding(pod_name, namespace, binding, _preload_content=False)
    try:
        assert resp.status == 409, await resp.text()
    finally:
        resp.release()

    # With KWOK acting as kubelet a graceful delete completes.
    await core.delete_namespaced_pod(pod_name, namespace, grace_period_seconds=1)

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod(pod_name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    await _eventually(gone, what=f"pod {pod_name} to be deleted")


async def test_crds_are_established(kube_api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(kube_api)
    expected = {
        "podgroups.scheduling.sigs.k8s.io": "Namespaced",
        "podgroups.scheduling.x-k8s.io": "Namespaced",
        "clusternetworktopologies.scheduling.koordinator.sh": "Cluster",
    }
    for name, scope in expected.items():
        crd = await ext.read_custom_resource_definition(name)
        assert crd.spec.scope == scope
        assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions), name

    resources = await client.ApisApi(kube_api).get_api_versions()
    groups = {g.name for g in resources.groups}
    assert {*PODGROUP_GROUPS, CNT_GROUP} <= groups


def _podgroup(group: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1alpha1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("group", PODGROUP_GROUPS)
async def test_podgroup_round_trip(kube_api: client.ApiClient, namespace: str, group: str) -> None:
    custom = client.CustomObjectsApi(kube_api)
    name = _name("pg")
    spec = {
        "minMember": 3,
        "minResources": {"cpu": "3", "memory": "3Gi", "nvidia.com/gpu": 2},
        "scheduleTimeoutSeconds": 30,
    }
    created = await custom.create_namespaced_custom_object(
        group, "v1alpha1", namespace, "podgroups", _podgroup(group, name, spec)
    )
    assert created["spec"] == spec

    status = {
        "phase": "Scheduling",
        "scheduled": 1,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "occupiedBy": f"{namespace}/job",
        "scheduleStartTime": "2025-01-01T00:00:00Z",
    }
    patched = await custom.patch_namespaced_custom_object_status(
        group,
        "v1alpha1",
        namespace,
        "podgroups",
        name,
        {"status": status},
        **MERGE_PATCH,
    )
    assert patched["status"] == status

    # The main resource ignores status; the status subresource ignores spec.
    patched = await custom.patch_namespaced_custom_object(
        group,
        "v1alpha1",
        namespace,
        "podgroups",
        name,
        {"status": {"phase": "Failed"}},
        **MERGE_PATCH,
    )
    assert patched["status"]["phase"] == "Scheduling"

    listed = await custom.list_namespaced_custom_object(group, "v1alpha1", namespace, "podgroups")
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]


@pytest.mark.parametrize("group", PODGROUP_GROUPS)
@pytest.mark.parametrize(
    "spec",
    [
        {"minMember": -1},
        {"minMember": "three"},
        {"minMember": 1, "scheduleTimeoutSeconds": -5},
        {"minMember": 1, "minResources": {"cpu": "lots"}},
        {"minMember": 1, "minResources": {"memory": "1Xi"}},
    ],
    ids=["negative-minMember", "string-minMember", "negative-timeout", "bad-cpu", "bad-memory"],
)
async def test_invalid_podgroup_rejected(
    kube_api: client.ApiClient, namespace: str, group: str, spec: dict[str, Any]
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    with pytest.raises(ApiException) as err:
        await custom.create_namespaced_custom_object(
            group, "v1alpha1", namespace, "podgroups", _podgroup(group, _name("pg"), spec)
        )
    assert err.value.status == 422, err.value.body


async def test_min_member_zero(kube_api: client.ApiClient, namespace: str) -> None:
    """Koordinator's group accepts minMember 0; scheduler-plugins' needs >= 1."""
    custom = client.CustomObjectsApi(kube_api)
    ok = await custom.create_namespaced_custom_object(
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        namespace,
        "podgroups",
        _podgroup("scheduling.sigs.k8s.io", _name("pg"), {"minMember": 0}),
    )
    assert ok["spec"]["minMember"] == 0
    with pytest.raises(ApiException) as err:
        await custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io",
            "v1alpha1",
            namespace,
            "podgroups",
            _podgroup("scheduling.x-k8s.io", _name("pg"), {"minMember": 0}),
        )
    assert err.value.status == 422


@pytest.mark.parametrize("group", PODGROUP_GROUPS)
@pytest.mark.parametrize(
    "status",
    [{"phase": "Exploded"}, {"running": -1}, {"scheduleStartTime": "yesterday"}],
    ids=["bad-phase", "negative-running", "bad-time"],
)
async def test_invalid_podgroup_status_rejected(
    kube_api: client.ApiClient, namespace: str, group: str, status: dict[str, Any]
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    name = _name("pg")
    await custom.create_namespaced_custom_object(
        group, "v1alpha1", namespace, "podgroups", _podgroup(group, name, {"minMember": 1})
    )
    with pytest.raises(ApiException) as err:
        await custom.patch_namespaced_custom_object_status(
            group,
            "v1alpha1",
            namespace,
            "podgroups",
            name,
            {"status": status},
            **MERGE_PATCH,
        )
    assert err.value.status == 422, err.value.body


def _cnt(name: str, layers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{CNT_GROUP}/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": name},
        "spec": {"networkTopologySpec": layers},
    }


async def test_cluster_network_topology_round_trip(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    name = _name("cnt")
    layers: list[dict[str, Any]] = [
        {"topologyLayer": "SpineLayer", "labelKey": ["network.topology.koordinator.sh/spine"]},
        {
            "topologyLayer": "BlockLayer",
            "parentTopologyLayer": "SpineLayer",
            "labelKey": ["network.topology.koordinator.sh/block"],
        },
        {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
    ]
    created = await custom.create_cluster_custom_object(
        CNT_GROUP, "v1alpha1", "clusternetworktopologies", _cnt(name, layers)
    )
    try:
        assert created["spec"]["networkTopologySpec"] == layers
        assert "namespace" not in created["metadata"]
        status = {
            "detailStatus": [
                {
                    "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
                    "childTopologyLayer": "BlockLayer",
                    "childTopologyNames": ["b1", "b2"],
                    "nodeNum": 4,
                },
                {
                    "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b1"},
                    "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
                    "childTopologyLayer": "NodeTopologyLayer",
                    "childTopologyNames": ["n1", "n2"],
                    "nodeNum": 2,
                },
            ],
            "conditions": [
                {
                    "type": "Valid",
                    "status": "True",
                    "reason": "Computed",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ],
            "message": "",
        }
        patched = await custom.patch_cluster_custom_object_status(
            CNT_GROUP,
            "v1alpha1",
            "clusternetworktopologies",
            name,
            {"status": status},
            **MERGE_PATCH,
        )
        assert patched["status"] == status

        for bad in (
            {"detailStatus": [{"nodeNum": -1}]},
            {
                "conditions": [
                    {
                        "type": "Valid",
                        "status": "Maybe",
                        "reason": "X",
                        "message": "",
                        "lastTransitionTime": "2025-01-01T00:00:00Z",
                    }
                ]
            },
        ):
            with pytest.raises(ApiException) as err:
                await custom.patch_cluster_custom_object_status(
                    CNT_GROUP,
                    "v1alpha1",
                    "clusternetworktopologies",
                    name,
                    {"status": bad},
                    **MERGE_PATCH,
                )
            assert err.value.status == 422, err.value.body
    finally:
        await custom.delete_cluster_custom_object(CNT_GROUP, "v1alpha1", "clusternetworktopologies", name)


@pytest.mark.parametrize(
    "layers",
    [
        [{"topologyLayer": ""}],
        [{"parentTopologyLayer": "SpineLayer"}],
        [{"topologyLayer": "A", "labelKey": "k"}],
    ],
    ids=["empty-layer", "missing-layer", "labelKey-not-list"],
)
async def test_invalid_cluster_network_topology_rejected(
    kube_api: client.ApiClient, layers: list[dict[str, Any]]
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    with pytest.raises(ApiException) as err:
        await custom.create_cluster_custom_object(
            CNT_GROUP, "v1alpha1", "clusternetworktopologies", _cnt(_name("cnt"), layers)
        )
    assert err.value.status == 422, err.value.body


def test_restart_apiserver_keeps_state(control_plane: ControlPlane) -> None:
    """The apiserver comes back on the same URL with the same etcd data."""
    name = _name("survivor")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
    status, raw = control_plane.request("POST", "/api/v1/namespaces/default/configmaps", body)
    assert status == 201, raw
    server = control_plane.server

    control_plane.restart_apiserver()

    assert control_plane.server == server
    status, raw = control_plane.request("GET", f"/api/v1/namespaces/default/configmaps/{name}")
    assert status == 200, raw
    assert json.loads(raw)["data"] == {"k": "v"}
    status, raw = control_plane.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups")
    assert status == 200, raw
    control_plane.request("DELETE", f"/api/v1/namespaces/default/configmaps/{name}")
