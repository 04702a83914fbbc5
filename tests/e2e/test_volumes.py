"""Volume scheduling on the real control plane, with kube-controller-manager's PV controller and the
test provisioner doing their part: koordpy binds local volumes to the claims of a StatefulSet-like
set of pods, asks for WaitForFirstConsumer claims to be provisioned in the chosen node's zone, and
binds a gang whose members each have a claim of their own. kube-apiserver's audit log is the judge
of what koordpy wrote: each volume's claimRef once, each claim's selected node once, each pod's
Binding once and after its claims, and nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.cluster.world import KubeWorld
from koordpy.config.models import parse_configuration
from koordpy.framework.clock import RealClock
from koordpy.kubeapi import KubeApi
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from tests.e2e.kwok import create_ready_nodes
from tests.support.audit import WRITE_VERBS, Write, read_audit_log, user_kubeconfig
from tests.support.controlplane import BINARIES, REPO_ROOT, ControlPlane
from tests.support.polling import eventually
from tests.support.provisioner import PROVISIONER, SELECTED_NODE, ZONE, TestProvisioner

pytestmark = pytest.mark.skipif(
    "kube-controller-manager" not in BINARIES,
    reason="the test control plane runs no kube-controller-manager: no PV controller binds the claims",
)

SCHEDULER_NAME = "koordpy-volumes"
# the user koordpy connects as, so that the audit log tells its writes from the PV controller's
SCHEDULER_USER = "koordpy-volumes-scheduler"
NODE_LABEL = "koordpy.e2e/volume-nodes"
HOSTNAME = "kubernetes.io/hostname"
NODES = 4
PAUSE = "registry.k8s.io/pause:3.10"
# read by the `audited_control_plane` fixture: every write to volumes, claims and bindings
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": list(WRITE_VERBS),
            "resources": [
                {"group": "", "resources": ["pods/binding", "persistentvolumes", "persistentvolumeclaims"]}
            ],
        },
        {"level": "None"},
    ],
}
CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": SCHEDULER_NAME}],
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 2,
}


def _suffix() -> str:
    return uuid.uuid4().hex[:6]


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture
async def admin(audited_control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(audited_control_plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration=configuration) as api:
        yield api


@pytest.fixture
async def nodes(admin: client.ApiClient) -> AsyncIterator[dict[str, str]]:
    """Four Ready KWOK nodes of this test's own label, two in zone a and two in zone b; yields
    {name: zone}."""
    core = client.CoreV1Api(admin)
    label = _suffix()
    zones = {f"vol-node-{label}-{i}": f"zone-{'ab'[i // 2]}-{label}" for i in range(NODES)}
    labels = {name: {NODE_LABEL: label, ZONE: zone} for name, zone in zones.items()}
    await create_ready_nodes(core, labels, {"cpu": "8", "memory": "32Gi", "pods": "110"})
    try:
        yield zones
    finally:
        for name in zones:
            with contextlib.suppress(ApiException):
                await core.delete_node(name)


@pytest.fixture
async def namespace(admin: client.ApiClient) -> AsyncIterator[str]:
    core = client.CoreV1Api(admin)
    name = f"e2e-volumes-{_suffix()}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            await core.delete_namespace(name)
        # the volumes bound to its claims (kept: Retain), cluster-scoped
        for pv in (await core.list_persistent_volume()).items:
            if pv.spec.claim_ref is not None and pv.spec.claim_ref.namespace == name:
                with contextlib.suppress(ApiException):
                    await core.delete_persistent_volume(pv.metadata.name)


@pytest.fixture
async def provisioner(audited_control_plane: ControlPlane) -> AsyncIterator[TestProvisioner]:
    api = await KubeApi.connect(str(audited_control_plane.kubeconfig))
    try:
        async with TestProvisioner(api) as running:
            yield running
    finally:
        await api.close()


@pytest.fixture
async def world(audited_control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[KubeWorld]:
    """koordpy in-process, as its own user."""
    kubeconfig = user_kubeconfig(audited_control_plane, tmp_path / "scheduler.kubeconfig", SCHEDULER_USER)
    api = await KubeApi.connect(str(kubeconfig))
    metrics = SchedulerMetrics()
    scheduler = Scheduler(parse_configuration(CONFIG), registry(), RealClock(), metrics)
    world = KubeWorld(api, scheduler, metrics, f"e2e-volumes-{_suffix()}")
    await world.start()
    try:
        await asyncio.wait_for(world.wait_synced(), 60)
        yield world
    finally:
        await world.shutdown(5.0)
        await api.close()


@contextlib.asynccontextmanager
async def storage_class(admin: client.ApiClient, provisioner: str, **fields: Any) -> AsyncIterator[str]:
    storage = client.StorageV1Api(admin)
    name = f"e2e-{_suffix()}"
    body: Any = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
        # volumes outlive their claims; the namespace fixture deletes them
        "reclaimPolicy": "Retain",
        **fields,
    }
    await storage.create_storage_class(body)
    try:
        yield name
    finally:
        with contextlib.suppress(ApiException):
            await storage.delete_storage_class(name)


# ---------------------------------------------------------------------------------------------- helpers
def claim_manifest(name: str, class_name: str) -> Any:
    """A claim, as the JSON the client sends (kubernetes_asyncio takes either)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class_name,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def pod_manifest(name: str, claim: str, node_label: str, labels: dict[str, str] | None = None) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "nodeSelector": {NODE_LABEL: node_label},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": PAUSE,
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


def local_volume(name: str, node: str, class_name: str, claim_ref: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": class_name,
        "local": {"path": "/mnt/disks/ssd1"},
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        },
    }
    if claim_ref is not None:
        spec["claimRef"] = claim_ref
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


@contextlib.asynccontextmanager
async def local_volumes(
    core: client.CoreV1Api, class_name: str, nodes: list[str]
) -> AsyncIterator[tuple[dict[str, str], str]]:
    """A local volume of the class on each node, the first pre-bound to another claim (not free);
    yields ({volume: node}, the taken volume) and deletes them after."""
    volumes = {f"local-{class_name}-{i}": node for i, node in enumerate(nodes)}
    taken = f"local-{class_name}-0"
    try:
        for pv_name, node in volumes.items():
            ref = {"namespace": "elsewhere", "name": "other"} if pv_name == taken else None
            await core.create_persistent_volume(local_volume(pv_name, node, class_name, ref))
        yield volumes, taken
    finally:
        for pv_name in volumes:
            with contextlib.suppress(ApiException):
                await core.delete_persistent_volume(pv_name)


async def on_their_volumes(
    core: client.CoreV1Api, namespace: str, pods: list[str], volumes: dict[str, str], taken: str
) -> tuple[dict[str, client.V1Pod], dict[str, client.V1PersistentVolumeClaim]]:
    """Waits until every pod is bound and every claim (`data-<pod>`) Bound; checks that each pod
    went to its own node, not the taken volume's, and that its claim's volume is on that node."""
    placed = await eventually(
        lambda: all_bound(core, namespace, pods), timeout=90, what=f"{len(pods)} pods bound"
    )
    claims = await eventually(
        lambda: _bound_claims(core, namespace, len(pods)), timeout=60, what="every claim Bound"
    )
    used_nodes = {placed[p].spec.node_name for p in pods}
    assert len(used_nodes) == len(pods) and volumes[taken] not in used_nodes
    for pod in pods:
        pv_name = claims[f"data-{pod}"].spec.volume_name
        assert volumes[pv_name] == placed[pod].spec.node_name, (pod, pv_name)
    return placed, claims


async def all_bound(
    core: client.CoreV1Api, namespace: str, pods: list[str]
) -> dict[str, client.V1Pod] | None:
    found = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
    if all(name in found and found[name].spec.node_name for name in pods):
        return found
    return None


async def claims_of(core: client.CoreV1Api, namespace: str) -> dict[str, client.V1PersistentVolumeClaim]:
    return {c.metadata.name: c for c in (await core.list_namespaced_persistent_volume_claim(namespace)).items}


async def scheduler_writes(cp: ControlPlane, namespace: str, volumes: set[str]) -> list[Write]:
    """koordpy's writes to this test's pods, claims and volumes, in the audit log's order."""
    assert cp.audit_log is not None
    return [
        w
        for w in read_audit_log(cp.audit_log)
        if w.user == SCHEDULER_USER and (w.namespace == namespace or w.name in volumes)
    ]


def bindings(writes: list[Write]) -> Counter[str]:
    return Counter(
        w.name for w in writes if (w.resource, w.subresource, w.verb) == ("pods", "binding", "create")
    )


# ---------------------------------------------------------------------------------------------- tests
async def test_a_set_of_pods_gets_the_free_local_volumes(
    audited_control_plane: ControlPlane,
    admin: client.ApiClient,
    world: KubeWorld,
    nodes: dict[str, str],
    namespace: str,
) -> None:
    """Three pods, each with its own claim of a no-provisioner WaitForFirstConsumer class, and one
    local volume per node, one of them already taken: each pod goes to the node of a free volume,
    and every claim is Bound to the volume on its pod's node."""
    core = client.CoreV1Api(admin)
    names = sorted(nodes)
    label = next(iter(nodes.values())).rsplit("-", 1)[-1]
    async with (
        storage_class(admin, "kubernetes.io/no-provisioner") as local,
        local_volumes(core, local, names) as (volumes, taken),
    ):
        pods = [f"web-{i}" for i in range(3)]
        for i, pod in enumerate(pods):
            await core.create_namespaced_persistent_volume_claim(
                namespace, claim_manifest(f"data-web-{i}", local)
            )
            await core.create_namespaced_pod(namespace, pod_manifest(pod, f"data-web-{i}", label))
        placed, claims = await on_their_volumes(core, namespace, pods, volumes, taken)

        writes = await scheduler_writes(audited_control_plane, namespace, set(volumes))
        # each free volume bound once (its claimRef), each pod bound once, no claim written
        pv_updates = Counter(w.name for w in writes if w.resource == "persistentvolumes")
        assert pv_updates == Counter({claims[f"data-web-{i}"].spec.volume_name: 1 for i in range(3)})
        assert all(w.verb == "update" and w.code == 200 for w in writes if w.resource == "persistentvolumes")
        assert bindings(writes) == Counter(dict.fromkeys(pods, 1))
        assert not [w for w in writes if w.resource == "persistentvolumeclaims"]
        _volume_written_before_its_pod(writes, claims, placed)


async def test_a_statefulset_with_local_volumes_runs_on_the_nodes_of_its_free_volumes(
    admin: client.ApiClient,
    world: KubeWorld,
    nodes: dict[str, str],
    namespace: str,
) -> None:
    """A StatefulSet of three replicas with a volumeClaimTemplate of a no-provisioner
    WaitForFirstConsumer class, and one local volume per node, one of them already taken: the
    StatefulSet controller creates the claims and the pods, koordpy puts each pod on the node of a
    free volume, and the PV controller binds each claim to the volume on its pod's node."""
    core, apps = client.CoreV1Api(admin), client.AppsV1Api(admin)
    names = sorted(nodes)
    label = next(iter(nodes.values())).rsplit("-", 1)[-1]
    async with (
        storage_class(admin, "kubernetes.io/no-provisioner") as local,
        local_volumes(core, local, names) as (volumes, taken),
    ):
        try:
            template = pod_manifest("unused", "unused", label, labels={"app": "db"})
            template["spec"]["volumes"] = []
            body: Any = {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db"},
                "spec": {
                    "replicas": 3,
                    "podManagementPolicy": "Parallel",
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}}, "spec": template["spec"]},
                    "volumeClaimTemplates": [claim_manifest("data", local)],
                },
            }
            await apps.create_namespaced_stateful_set(namespace, body)
            pods = [f"db-{i}" for i in range(3)]
            await on_their_volumes(core, namespace, pods, volumes, taken)
        finally:
            with contextlib.suppress(ApiException):
                await apps.delete_namespaced_stateful_set("db", namespace)


async def test_a_wait_for_first_consumer_claim_is_provisioned_in_the_chosen_nodes_zone(
    audited_control_plane: ControlPlane,
    admin: client.ApiClient,
    world: KubeWorld,
    nodes: dict[str, str],
    namespace: str,
    provisioner: TestProvisioner,
) -> None:
    core = client.CoreV1Api(admin)
    label = next(iter(nodes.values())).rsplit("-", 1)[-1]
    async with storage_class(admin, PROVISIONER) as fast:
        await core.create_namespaced_persistent_volume_claim(namespace, claim_manifest("data", fast))
        await core.create_namespaced_pod(namespace, pod_manifest("app", "data", label))
        placed = await eventually(lambda: all_bound(core, namespace, ["app"]), timeout=90, what="app bound")
        node = placed["app"].spec.node_name
        claims = await eventually(lambda: _bound_claims(core, namespace, 1), timeout=60, what="data Bound")
        claim = claims["data"]
        assert claim.metadata.annotations[SELECTED_NODE] == node
        pv = await core.read_persistent_volume(claim.spec.volume_name)
        (term,) = pv.spec.node_affinity.required.node_selector_terms
        (expression,) = term.match_expressions
        # provisioned in the zone of the node koordpy chose
        assert (expression.key, expression.values) == (ZONE, [nodes[node]])

        writes = await scheduler_writes(audited_control_plane, namespace, {pv.metadata.name})
        claim_updates = [w for w in writes if w.resource == "persistentvolumeclaims"]
        assert [(w.verb, w.name, w.code) for w in claim_updates] == [("update", "data", 200)]
        assert not [w for w in writes if w.resource == "persistentvolumes"]
        assert bindings(writes) == Counter({"app": 1})
        assert writes.index(claim_updates[0]) < next(
            i for i, w in enumerate(writes) if w.subresource == "binding"
        )


async def test_a_gang_whose_members_each_have_a_claim_is_bound_whole(
    audited_control_plane: ControlPlane,
    admin: client.ApiClient,
    world: KubeWorld,
    nodes: dict[str, str],
    namespace: str,
    provisioner: TestProvisioner,
) -> None:
    core = client.CoreV1Api(admin)
    label = next(iter(nodes.values())).rsplit("-", 1)[-1]
    group = f"train-{_suffix()}"
    await client.CustomObjectsApi(admin).create_namespaced_custom_object(
        "scheduling.x-k8s.io",
        "v1alpha1",
        namespace,
        "podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": group},
            "spec": {"minMember": 8},
        },
    )
    async with storage_class(admin, PROVISIONER) as fast:
        members = [f"{group}-{i}" for i in range(8)]
        for member in members:
            await core.create_namespaced_persistent_volume_claim(
                namespace, claim_manifest(f"data-{member}", fast)
            )
            await core.create_namespaced_pod(
                namespace,
                pod_manifest(member, f"data-{member}", label, {"scheduling.x-k8s.io/pod-group": group}),
            )
        placed = await eventually(
            lambda: all_bound(core, namespace, members), timeout=120, what="8 members bound"
        )
        claims = await eventually(
            lambda: _bound_claims(core, namespace, 8), timeout=60, what="8 claims Bound"
        )
        for member in members:
            assert (
                claims[f"data-{member}"].metadata.annotations[SELECTED_NODE] == placed[member].spec.node_name
            )

        volumes = {c.spec.volume_name for c in claims.values()}
        writes = await scheduler_writes(audited_control_plane, namespace, volumes)
        claim_updates = Counter(w.name for w in writes if w.resource == "persistentvolumeclaims")
        assert claim_updates == Counter({f"data-{m}": 1 for m in members})
        assert bindings(writes) == Counter(dict.fromkeys(members, 1))
        assert not [w for w in writes if w.resource == "persistentvolumes"]
        for member in members:
            selected = next(i for i, w in enumerate(writes) if w.name == f"data-{member}")
            bound = next(i for i, w in enumerate(writes) if w.subresource == "binding" and w.name == member)
            assert selected < bound, member


async def test_a_snapshot_holds_the_storage_and_a_dry_run_places_a_claim_on_its_free_volume(
    audited_control_plane: ControlPlane,
    admin: client.ApiClient,
    nodes: dict[str, str],
    namespace: str,
    tmp_path: Path,
) -> None:
    """`koordpy snapshot` reads the six storage kinds, and `simulate --from-cluster` places a new
    pod whose claim only one free local volume can serve on that volume's node."""
    core, storage = client.CoreV1Api(admin), client.StorageV1Api(admin)
    names = sorted(nodes)
    label = next(iter(nodes.values())).rsplit("-", 1)[-1]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    kubeconfig = str(audited_control_plane.kubeconfig)
    driver, suffix = f"csi-{_suffix()}.koordpy.test", _suffix()
    made: list[tuple[Any, str]] = []
    async with storage_class(admin, "kubernetes.io/no-provisioner") as local:
        try:
            # a local volume per node; all but the last are taken by other claims
            for i, node in enumerate(names):
                ref = {"namespace": "elsewhere", "name": f"other-{i}"} if i < len(names) - 1 else None
                await core.create_persistent_volume(local_volume(f"local-{local}-{i}", node, local, ref))
                made.append((core.delete_persistent_volume, f"local-{local}-{i}"))
            await core.create_namespaced_persistent_volume_claim(namespace, claim_manifest("data", local))
            body: Any = {
                "metadata": {"name": driver},
                "spec": {"attachRequired": False, "storageCapacity": True},
            }
            await storage.create_csi_driver(body)
            made.append((storage.delete_csi_driver, driver))
            body = {
                "metadata": {"name": names[0]},
                "spec": {"drivers": [{"name": driver, "nodeID": names[0], "allocatable": {"count": 4}}]},
            }
            await storage.create_csi_node(body)
            made.append((storage.delete_csi_node, names[0]))
            body = {
                "metadata": {"name": f"cap-{suffix}"},
                "storageClassName": local,
                "nodeTopology": {"matchLabels": {HOSTNAME: names[0]}},
                "capacity": "100Gi",
            }
            await storage.create_namespaced_csi_storage_capacity(namespace, body)

            scenario = tmp_path / "cluster.yaml"
            result = _koordpy(
                "snapshot", "--kubeconfig", kubeconfig, "--config", str(config), "-o", str(scenario)
            )
            assert result.returncode == 0, result.stderr
            held = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(scenario.read_text())}
            assert {
                ("StorageClass", local),
                ("PersistentVolume", f"local-{local}-0"),
                ("PersistentVolumeClaim", "data"),
                ("CSIDriver", driver),
                ("CSINode", names[0]),
                ("CSIStorageCapacity", f"cap-{suffix}"),
            } <= held

            new_pod = tmp_path / "pod.yaml"
            manifest = pod_manifest("new", "data", label)
            manifest["metadata"]["namespace"] = namespace
            new_pod.write_text(yaml.safe_dump(manifest))
            result = _koordpy(
                "simulate",
                "--from-cluster",
                "--kubeconfig",
                kubeconfig,
                "--config",
                str(config),
                "-o",
                "json",
                str(new_pod),
            )
            assert result.returncode == 0, result.stderr
            report = json.loads(result.stdout)
            assert [(p["name"], p["node"]) for p in report["pods"]] == [("new", names[-1])]
        finally:
            for delete, name in reversed(made):
                with contextlib.suppress(ApiException):
                    await delete(name)


def _koordpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "koordpy.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


async def _bound_claims(
    core: client.CoreV1Api, namespace: str, count: int
) -> dict[str, client.V1PersistentVolumeClaim] | None:
    claims = await claims_of(core, namespace)
    bound = {n: c for n, c in claims.items() if c.status.phase == "Bound" and c.spec.volume_name}
    return bound if len(bound) == count else None


def _volume_written_before_its_pod(
    writes: list[Write], claims: dict[str, client.V1PersistentVolumeClaim], pods: dict[str, client.V1Pod]
) -> None:
    """Each pod's Binding comes after the update of its claim's volume."""
    for name, pod in pods.items():
        claim = pod.spec.volumes[0].persistent_volume_claim.claim_name
        volume = claims[claim].spec.volume_name
        written = next(
            i for i, w in enumerate(writes) if w.resource == "persistentvolumes" and w.name == volume
        )
        bound = next(i for i, w in enumerate(writes) if w.subresource == "binding" and w.name == name)
        assert written < bound, name
