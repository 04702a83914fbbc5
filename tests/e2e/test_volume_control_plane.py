"""Pin what the test control plane's kube-controller-manager (and the test provisioner beside it) do,
which the volume, DRA and Workload API tests build on: the PV controller binds an Immediate claim to
a matching volume, a WaitForFirstConsumer claim with a selected node gets a volume provisioned in
that node's zone, a deleted namespace takes its pods with it, a Job makes its pods and the garbage
collector removes them with it; and the APIs those tests use are served."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.kubeapi import KubeApi
from tests.support.controlplane import ControlPlane
from tests.support.polling import eventually
from tests.support.provisioner import PROVISIONER, SELECTED_NODE, ZONE, TestProvisioner

# no scheduler has this name: the pods here stay unscheduled, which is all these tests need
NOBODY = "e2e-nobody"
PAUSE = "registry.k8s.io/pause:3.10"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _pod_spec(**extra: Any) -> client.V1PodSpec:
    return client.V1PodSpec(
        scheduler_name=NOBODY,
        termination_grace_period_seconds=0,
        containers=[client.V1Container(name="main", image=PAUSE)],
        **extra,
    )


def _claim(
    name: str, storage_class: str, *, annotations: dict[str, str] | None = None
) -> client.V1PersistentVolumeClaim:
    return client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            storage_class_name=storage_class,
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
        ),
    )


@pytest.fixture
async def provisioner(control_plane: ControlPlane) -> AsyncIterator[TestProvisioner]:
    api = await KubeApi.connect(str(control_plane.kubeconfig))
    try:
        async with TestProvisioner(api) as running:
            yield running
    finally:
        await api.close()


@contextlib.asynccontextmanager
async def cluster_objects(kube_api: client.ApiClient) -> AsyncIterator[list[tuple[str, str]]]:
    """Cluster-scoped objects a test makes, as (kind, name), deleted afterwards: the session's other
    modules must not see them (some require a cluster without foreign nodes)."""
    made: list[tuple[str, str]] = []
    try:
        yield made
    finally:
        core, storage = client.CoreV1Api(kube_api), client.StorageV1Api(kube_api)
        delete = {
            "Node": core.delete_node,
            "PersistentVolume": core.delete_persistent_volume,
            "StorageClass": storage.delete_storage_class,
        }
        for kind, name in reversed(made):
            with contextlib.suppress(ApiException):
                await delete[kind](name)


async def test_the_workload_and_dra_apis_are_served(control_plane: ControlPlane) -> None:
    """scheduling.k8s.io/v1beta1 (GenericWorkload, asked for by --runtime-config) and
    resource.k8s.io/v1 (DRA, GA) are served with the resources their tests use."""

    async def resources(group_version: str) -> set[str]:
        status, body = await asyncio.to_thread(control_plane.request, "GET", f"/apis/{group_version}")
        assert status == 200, (group_version, body)
        return {r["name"] for r in json.loads(body)["resources"]}

    assert {"workloads", "podgroups", "podgroups/status"} <= await resources("scheduling.k8s.io/v1beta1")
    assert {"resourceclaims", "resourceclaimtemplates", "deviceclasses", "resourceslices"} <= await resources(
        "resource.k8s.io/v1"
    )


async def test_an_immediate_claim_binds_to_a_matching_volume(
    kube_api: client.ApiClient, namespace: str
) -> None:
    """The PV controller binds a claim of a class with no provisioner to a volume made beforehand."""
    core = client.CoreV1Api(kube_api)
    class_name, claim_name, volume = _name("manual"), _name("claim"), _name("pv")
    async with cluster_objects(kube_api) as made:
        await core.create_persistent_volume(
            client.V1PersistentVolume(
                metadata=client.V1ObjectMeta(name=volume),
                spec=client.V1PersistentVolumeSpec(
                    capacity={"storage": "2Gi"},
                    access_modes=["ReadWriteOnce"],
                    storage_class_name=class_name,
                    persistent_volume_reclaim_policy="Retain",
                    host_path=client.V1HostPathVolumeSource(path=f"/tmp/{volume}"),
                ),
            )
        )
        made.append(("PersistentVolume", volume))
        await core.create_namespaced_persistent_volume_claim(namespace, _claim(claim_name, class_name))

        async def bound() -> client.V1PersistentVolumeClaim | None:
            claim = await core.read_namespaced_persistent_volume_claim(claim_name, namespace)
            return claim if claim.status.phase == "Bound" else None

        claim = await eventually(bound, timeout=60, what="the claim to be Bound")
        assert claim.spec.volume_name == volume
        pv = await core.read_persistent_volume(volume)
        assert pv.status.phase == "Bound"
        assert (pv.spec.claim_ref.namespace, pv.spec.claim_ref.name) == (namespace, claim_name)


async def test_a_claim_waiting_for_its_consumer_is_provisioned_in_the_selected_nodes_zone(
    kube_api: client.ApiClient, namespace: str, provisioner: TestProvisioner
) -> None:
    """WaitForFirstConsumer: nothing happens until a node is selected (as a scheduler does, by the
    annotation); then the PV controller hands the claim to the provisioner, which makes a volume in
    that node's zone, and the PV controller binds the two."""
    core, storage = client.CoreV1Api(kube_api), client.StorageV1Api(kube_api)
    class_name = _name("zonal")
    nodes = {_name("vol-node-a"): "zone-a", _name("vol-node-b"): "zone-b"}
    async with cluster_objects(kube_api) as made:
        for node, zone in nodes.items():
            # no KWOK annotation: the node need not be Ready, only found with its labels
            await core.create_node(
                client.V1Node(
                    metadata=client.V1ObjectMeta(
                        name=node, labels={ZONE: zone, "kubernetes.io/hostname": node}
                    )
                )
            )
            made.append(("Node", node))
        await storage.create_storage_class(
            client.V1StorageClass(
                metadata=client.V1ObjectMeta(name=class_name),
                provisioner=PROVISIONER,
                volume_binding_mode="WaitForFirstConsumer",
                parameters={"topologyKey": ZONE},
            )
        )
        made.append(("StorageClass", class_name))

        waiting, chosen = _name("waiting"), _name("chosen")
        node_b = next(n for n, z in nodes.items() if z == "zone-b")
        await core.create_namespaced_persistent_volume_claim(namespace, _claim(waiting, class_name))
        await core.create_namespaced_persistent_volume_claim(
            namespace, _claim(chosen, class_name, annotations={SELECTED_NODE: node_b})
        )

        async def bound() -> client.V1PersistentVolumeClaim | None:
            claim = await core.read_namespaced_persistent_volume_claim(chosen, namespace)
            return claim if claim.status.phase == "Bound" else None

        claim = await eventually(bound, timeout=60, what="the claim with a selected node to be Bound")
        made.append(("PersistentVolume", claim.spec.volume_name))
        assert provisioner.provisioned == {claim.metadata.uid: claim.spec.volume_name}
        pv = await core.read_persistent_volume(claim.spec.volume_name)
        assert pv.spec.capacity == {"storage": "1Gi"}
        assert pv.spec.storage_class_name == class_name
        (term,) = pv.spec.node_affinity.required.node_selector_terms
        (expression,) = term.match_expressions
        assert (expression.key, expression.operator, expression.values) == (ZONE, "In", ["zone-b"])

        # the other claim has no node yet: still Pending, with nothing provisioned for it
        other = await core.read_namespaced_persistent_volume_claim(waiting, namespace)
        assert other.status.phase == "Pending" and not other.spec.volume_name
        with contextlib.suppress(ApiException):
            # the volume's reclaim policy is Delete, which only an external deleter carries out
            await core.delete_namespaced_persistent_volume_claim(chosen, namespace)


async def test_a_deleted_namespace_takes_its_pods_with_it(kube_api: client.ApiClient) -> None:
    """The namespace controller empties a deleted namespace, then removes it."""
    core = client.CoreV1Api(kube_api)
    name = _name("e2e-volume-control-plane-gone")
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    for i in range(2):
        await core.create_namespaced_pod(
            name, client.V1Pod(metadata=client.V1ObjectMeta(name=f"pod-{i}"), spec=_pod_spec())
        )
    await core.delete_namespace(name)

    async def gone() -> bool:
        try:
            await core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gone, timeout=60, what=f"namespace {name} to be removed")
    pods = await core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={name}")
    assert pods.items == []


async def test_a_job_makes_its_pods_and_they_go_with_it(kube_api: client.ApiClient, namespace: str) -> None:
    """The Job controller creates a Job's pods (controlled by it); the garbage collector deletes them
    when the Job is deleted."""
    core, batch = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api)
    name = _name("job")
    await batch.create_namespaced_job(
        namespace,
        client.V1Job(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1JobSpec(
                parallelism=2,
                completions=2,
                template=client.V1PodTemplateSpec(spec=_pod_spec(restart_policy="Never")),
            ),
        ),
    )
    selector = f"batch.kubernetes.io/job-name={name}"

    async def pods() -> list[client.V1Pod]:
        found = (await core.list_namespaced_pod(namespace, label_selector=selector)).items
        return found if len(found) == 2 else []

    made = await eventually(pods, timeout=60, what="the Job's 2 pods")
    for pod in made:
        (owner,) = pod.metadata.owner_references
        assert (owner.kind, owner.name, owner.controller) == ("Job", name, True)

    await batch.delete_namespaced_job(name, namespace, propagation_policy="Background")

    async def none_left() -> bool:
        return not (await core.list_namespaced_pod(namespace, label_selector=selector)).items

    await eventually(none_left, timeout=60, what="the garbage collector to delete the Job's pods")
