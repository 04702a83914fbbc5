"""`koordpy snapshot` and `koordpy simulate --from-cluster` against the real control plane, as a
user bound to the chart's read-only ClusterRole, with the configuration the chart's ConfigMap
holds, beside `koordpy run` scheduling the same cluster with that configuration:

1. a snapshot loads into `simulate` unchanged and reproduces the cluster: pods on nodes stay where
   they are, pods waiting stay pending for the reason the cluster gives;
2. a dry run of a high-priority gang that has to preempt prints the placement and the victims,
   changes nothing in the cluster, and `koordpy run` then does exactly that when the gang is
   submitted.

The cluster of (2) is tests/e2e/test_job_preemption.py's: three 4-cpu nodes, two standalone low
pods on node-0, a mid pod on node-1, a low PodGroup of two on node-2; the gang of two 2-cpu pods
fits on node-2 alone once that PodGroup is gone (fewest jobs disrupted, then the lowest
priorities)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config

from koordpy.cluster.snapshot import CONFIGMAPS, KINDS, PODS
from tests.e2e.cluster import admin_client, levelled_priority_classes
from tests.e2e.kwok import labelled_nodes
from tests.e2e.test_chart import (  # noqa: F401 - helm is a fixture
    CHART,
    RELEASE,
    _rules_with_reasons,
    helm,
    koordpy_process,
    render,
    run_helm,
)
from tests.e2e.test_job_preemption import EventWatch
from tests.support.controlplane import REPO_ROOT, ControlPlane, free_port
from tests.support.polling import eventually

NODE_LABEL = "koordpy.e2e/snapshot-nodes"
GANG_LABEL = "pod-group.scheduling.sigs.k8s.io"
VICTIM_GRACE = 30


@dataclass(frozen=True)
class Release:
    namespace: str
    name: str
    scheduler: str
    # the dry-run user: a ServiceAccount bound to the chart's <release>-dry-run ClusterRole alone
    dry_run_kubeconfig: Path
    config_path: Path

    @property
    def configmap(self) -> str:
        return f"{self.namespace}/{self.name}-koordpy"


def koordpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "koordpy.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
async def release(
    helm: str,  # noqa: F811 - the fixture
    control_plane: ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Release]:
    """The chart installed (its CRDs left out: the control plane has them), its dry-run ClusterRole
    bound to a ServiceAccount `dry-run` of the release namespace, and a kubeconfig with its token."""
    suffix = uuid.uuid4().hex[:6]
    namespace, name, scheduler = f"snapdry-{suffix}", f"sd{suffix}", f"koordpy-dry-{suffix}"
    kubeconfig = str(control_plane.kubeconfig)
    run_helm(
        helm,
        "install",
        name,
        str(CHART),
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        namespace,
        "--create-namespace",
        "--set",
        "crds.install=false",
        "--set",
        "replicas=1",
        "--set",
        "leaderElection.enabled=false",
        "--set-json",
        f'schedulerConfig.profiles=[{{"schedulerName": "{scheduler}"}}]',
        "--set",
        "schedulerConfig.podInitialBackoffSeconds=1",
        "--set",
        "schedulerConfig.podMaxBackoffSeconds=2",
        "--set-json",
        'dryRun.subjects=[{"kind": "ServiceAccount", "name": "dry-run"}]',
    )
    configuration = client.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    tmp = tmp_path_factory.mktemp("snapshot-dryrun")
    try:
        async with client.ApiClient(configuration=configuration) as api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_service_account(
                namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="dry-run"))
            )
            token = await core.create_namespaced_service_account_token(
                "dry-run",
                namespace,
                client.AuthenticationV1TokenRequest(
                    spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
                ),
            )
            configmap = await core.read_namespaced_config_map(f"{name}-koordpy", namespace)
        dry_run_kubeconfig = tmp / "dry-run.kubeconfig"
        dry_run_kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "dry-run",
                    "clusters": [
                        {
                            "name": "e2e",
                            "cluster": {
                                "server": control_plane.server,
                                "certificate-authority": str(control_plane.ca_file),
                            },
                        }
                    ],
                    "users": [{"name": "dry-run", "user": {"token": token.status.token}}],
                    "contexts": [{"name": "dry-run", "context": {"cluster": "e2e", "user": "dry-run"}}],
                }
            )
        )
        config_path = tmp / "config.yaml"
        config_path.write_text(configmap.data["config.yaml"])
        yield Release(namespace, name, scheduler, dry_run_kubeconfig, config_path)
    finally:
        run_helm(helm, "uninstall", name, "--kubeconfig", kubeconfig, "--namespace", namespace, check=False)


@pytest.fixture(scope="module")
async def scheduler(control_plane: ControlPlane, release: Release) -> AsyncIterator[Path]:
    """`koordpy run` with the configuration of the chart's ConfigMap, ready; yields its log."""
    port = free_port()
    log = release.config_path.parent / "run.log"
    args = [
        "--config",
        str(release.config_path),
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--secure-port",
        "0",
        "--insecure-port",
        str(port),
        "--bind-address",
        "127.0.0.1",
    ]
    with koordpy_process("run", args, log) as proc:

        async def ready() -> bool:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/readyz") as response,
            ):
                return response.status == 200

        await eventually(ready, timeout=60, what="koordpy run ready")
        yield log


@pytest.fixture(scope="module")
async def priority_classes(control_plane: ControlPlane) -> AsyncIterator[dict[str, str]]:
    """low (10), mid (500) and high (1000), uniquely named."""
    async with admin_client(control_plane) as api, levelled_priority_classes(api, "e2e-sd") as names:
        yield names


def pod_manifest(
    name: str,
    namespace: str,
    scheduler: str,
    label: str,
    cpu: str,
    *,
    priority_class: str | None = None,
    node_name: str | None = None,
    gang: str | None = None,
    gated: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "nodeSelector": {NODE_LABEL: label},
        "terminationGracePeriodSeconds": VICTIM_GRACE,
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_name:
        spec["nodeName"] = node_name
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/quota"}]
    labels = {GANG_LABEL: gang} if gang else {"app": "e2e-snapshot"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def podgroup_manifest(name: str, namespace: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


async def create(kube_api: client.ApiClient, doc: dict[str, Any]) -> None:
    namespace = doc["metadata"]["namespace"]
    if doc["kind"] == "Pod":
        await client.CoreV1Api(kube_api).create_namespaced_pod(namespace, doc)
    else:
        group, version = doc["apiVersion"].split("/")
        await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            group, version, namespace, "podgroups", doc
        )


def report_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


async def pods_of(core: client.CoreV1Api, namespace: str) -> dict[str, Any]:
    return {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}


def condition(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or () if c.type == kind), None)


# ---------------------------------------------------------------------------------------------- tests
async def test_a_snapshot_loads_into_simulate_and_reproduces_the_cluster(
    control_plane: ControlPlane,
    release: Release,
    scheduler: Path,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    async with labelled_nodes(
        str(control_plane.kubeconfig), "sd-rt", 2, NODE_LABEL, {"cpu": "4", "memory": "32Gi", "pods": "110"}
    ) as (label, _):
        placed = [pod_manifest(f"fit-{i}", namespace, release.scheduler, label, "1500m") for i in range(4)]
        too_big = pod_manifest("too-big", namespace, release.scheduler, label, "3")
        gated = pod_manifest("gated", namespace, release.scheduler, label, "100m", gated=True)
        for doc in [*placed, too_big, gated]:
            await create(kube_api, doc)

        async def settled() -> dict[str, Any] | None:
            pods = await pods_of(core, namespace)
            waiting = condition(pods["too-big"], "PodScheduled")
            done = all(pods[p["metadata"]["name"]].spec.node_name for p in placed)
            return pods if done and waiting is not None and waiting.reason == "Unschedulable" else None

        cluster = await eventually(settled, timeout=60, what="4 pods bound and one unschedulable")

        # the chart's scheduler pod, as its Deployment would make it (no controller runs here): the
        # snapshot finds the configuration in use through it, in whatever namespace it runs
        deployment = await client.AppsV1Api(kube_api).read_namespaced_deployment(
            f"{release.name}-koordpy", release.namespace
        )
        template = kube_api.sanitize_for_serialization(deployment.spec.template)
        template["spec"]["nodeSelector"] = {"koordpy.e2e/nowhere": "true"}
        await core.create_namespaced_pod(
            release.namespace,
            {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": "chart-pod"}}
            | {"spec": template["spec"]},
        )

        scenario = tmp_path / "cluster.yaml"
        result = koordpy("snapshot", "--kubeconfig", str(release.dry_run_kubeconfig), "-o", str(scenario))
        assert result.returncode == 0, result.stderr
        config = tmp_path / "cluster.config.yaml"
        assert f"ConfigMap {release.configmap} (key config.yaml)" in result.stderr
        assert f"koordpy simulate {scenario} --config {config}" in result.stderr
        assert config.read_text() == release.config_path.read_text()

        report = report_of(koordpy("simulate", str(scenario), "--config", str(config), "-o", "json"))
        mine = {p["name"]: p for p in report["pods"] if p["namespace"] == namespace}
        assert set(mine) == {*(p["metadata"]["name"] for p in placed), "too-big", "gated"}
        for doc in placed:
            name = doc["metadata"]["name"]
            assert (mine[name]["phase"], mine[name]["node"]) == ("Bound", cluster[name].spec.node_name)
        for name in ("too-big", "gated"):
            on_cluster = condition(cluster[name], "PodScheduled")
            assert (mine[name]["phase"], mine[name]["reason"]) == ("Pending", on_cluster.reason), name


async def test_a_dry_run_of_a_gang_is_what_koordpy_run_then_does(
    control_plane: ControlPlane,
    release: Release,
    scheduler: Path,
    priority_classes: dict[str, str],
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    low, mid, high = priority_classes["low"], priority_classes["mid"], priority_classes["high"]
    async with labelled_nodes(
        str(control_plane.kubeconfig), "sd-jp", 3, NODE_LABEL, {"cpu": "4", "memory": "32Gi", "pods": "110"}
    ) as (label, nodes):
        node0, node1, node2 = nodes

        def pod(name: str, cpu: str, pc: str, **more: Any) -> dict[str, Any]:
            return pod_manifest(name, namespace, release.scheduler, label, cpu, priority_class=pc, **more)

        workload = [
            podgroup_manifest("low-job", namespace, 2),
            pod("solo-a", "2", low, node_name=node0),
            pod("solo-b", "2", low, node_name=node0),
            pod("mid", "4", mid, node_name=node1),
            pod("low-job-0", "2", low, node_name=node2, gang="low-job"),
            pod("low-job-1", "2", low, node_name=node2, gang="low-job"),
        ]
        for doc in workload:
            await create(kube_api, doc)

        async def running() -> bool:
            pods = await pods_of(core, namespace)
            group = await client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
                "scheduling.sigs.k8s.io", "v1alpha1", namespace, "podgroups", "low-job"
            )
            # the PodGroup operator of `koordpy run` has written what it will write
            counted = (group.get("status") or {}).get("running") == 2
            return counted and len(pods) == 5 and all(p.status.phase == "Running" for p in pods.values())

        await eventually(running, timeout=60, what="the workload Running, its PodGroup's status written")

        gang = [
            podgroup_manifest("train", namespace, 2),
            *(pod(f"train-{i}", "2", high, gang="train") for i in range(2)),
        ]
        manifests = tmp_path / "train.yaml"
        manifests.write_text(yaml.safe_dump_all(gang))

        async def state() -> dict[str, Any]:
            custom = client.CustomObjectsApi(kube_api)
            groups = await custom.list_namespaced_custom_object(
                "scheduling.sigs.k8s.io", "v1alpha1", namespace, "podgroups"
            )
            everywhere = await core.list_pod_for_all_namespaces()
            return {
                "pods": {n: p.metadata.resource_version for n, p in (await pods_of(core, namespace)).items()},
                "podgroups": {
                    g["metadata"]["name"]: g["metadata"]["resourceVersion"] for g in groups["items"]
                },
                "all pods": sorted(f"{p.metadata.namespace}/{p.metadata.name}" for p in everywhere.items),
                "configmap": (
                    await core.read_namespaced_config_map(f"{release.name}-koordpy", release.namespace)
                ).metadata.resource_version,
            }

        before = await state()
        result = koordpy(
            "simulate",
            "--from-cluster",
            "--kubeconfig",
            str(release.dry_run_kubeconfig),
            "--configmap",
            release.configmap,
            "-o",
            "json",
            str(manifests),
        )
        dry = report_of(result)
        # the dry run changed nothing
        assert await state() == before

        # what the dry run says, as job-level preemption decides it
        assert dry["configuration"] == f"ConfigMap {release.configmap} (key config.yaml)"
        planned = {p["name"]: (p["node"], p["phase"], p["nominatedNodeName"]) for p in dry["pods"]}
        assert planned == {f"train-{i}": (node2, "Bound", node2) for i in range(2)}
        victims = {v["name"]: v for v in dry["victims"]}
        assert set(victims) == {"low-job-0", "low-job-1"}
        for victim in victims.values():
            assert (victim["node"], victim["priority"], victim["priorityClassName"]) == (node2, 10, low)
            assert (victim["gang"], victim["preemptor"]) == (f"{namespace}/low-job", f"{namespace}/train")

        # the gang submitted for real, to `koordpy run`: the same placement, the same victims
        async with EventWatch(kube_api, namespace) as watch:
            for doc in gang:
                await create(kube_api, doc)

            async def members_bound() -> dict[str, Any] | None:
                pods = await pods_of(core, namespace)
                members = [pods.get(f"train-{i}") for i in range(2)]
                return pods if all(m is not None and m.spec.node_name for m in members) else None

            final = await eventually(members_bound, timeout=60, what="the gang bound")
            await asyncio.sleep(1)
        marked = {
            name for name, seen in watch.all().items() if any(s.conditions("DisruptionTarget") for s in seen)
        }
        assert marked == set(victims)
        assert {n: (final[n].spec.node_name, "Bound") for n in planned} == {
            n: (node, phase) for n, (node, phase, _) in planned.items()
        }
        for name, (_, _, nominated) in planned.items():
            assert {s.nominated for s in watch.of(name) if s.nominated} == {nominated}
        assert set(final) == {"solo-a", "solo-b", "mid", "train-0", "train-1"}


# ---------------------------------------------------------------------------------------------- the chart
def dry_run_role(docs: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{RELEASE}-dry-run"]
    return found[0] if found else None


def test_the_dry_run_role_lists_what_the_snapshot_reads_and_writes_nothing(
    helm: str,  # noqa: F811 - the fixture
) -> None:
    docs = render(helm)
    role = dry_run_role(docs)
    assert role is not None, "on by default"
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    # exactly the lists the snapshot makes, and the get of the release's ConfigMap
    read = {(k.api_version.rpartition("/")[0], k.plural, "list") for k in (*KINDS, PODS)}
    assert granted == read | {("", CONFIGMAPS.plural, "get")}
    (configmap_rule,) = [r for r in role["rules"] if "configmaps" in r["resources"]]
    assert configmap_rule["resourceNames"] == [f"{RELEASE}"], "the release's ConfigMap alone"
    assert not [d for d in docs if d["kind"] == "ClusterRoleBinding" and "dry-run" in d["metadata"]["name"]]
    for rule, reason in _rules_with_reasons(CHART / "templates" / "dryrun-clusterrole.yaml"):
        assert set(rule["verbs"]) <= {"get", "list"}
        assert all(f"{verb}:" in reason for verb in rule["verbs"]), (rule, reason)


def test_the_dry_run_role_is_bound_to_the_subjects_named_and_can_be_left_out(
    helm: str,  # noqa: F811 - the fixture
) -> None:
    subjects = [{"kind": "Group", "name": "ml"}, {"kind": "ServiceAccount", "name": "ci"}]
    docs = render(helm, "dryRun.subjects=" + json.dumps(subjects))
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding" and "dry-run" in d["metadata"]["name"]]
    assert binding["roleRef"]["name"] == f"{RELEASE}-dry-run"
    assert binding["subjects"] == [
        {"kind": "Group", "name": "ml", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "ServiceAccount", "name": "ci", "namespace": "koordpy-system"},
    ]
    assert dry_run_role(render(helm, "dryRun.clusterRole=false")) is None
    assert dry_run_role(render(helm, "rbac.create=false")) is None


@pytest.mark.parametrize(
    ("data", "says"),
    [
        pytest.param({"config.yaml": "profiles: [\n"}, "not valid YAML", id="not-yaml"),
        pytest.param({"config.yaml": "a: &x [1]\nb: *x\n"}, "YAML aliases are not read", id="aliases"),
        pytest.param({"other.yaml": "profiles: []\n"}, "has no key 'config.yaml'", id="no-such-key"),
    ],
)
async def test_a_configmap_that_holds_no_readable_configuration_is_exit_2(
    control_plane: ControlPlane, kube_api: client.ApiClient, tmp_path: Path, data: dict[str, str], says: str
) -> None:
    """What the ConfigMap holds is the user's input, as a --config file is: a located line and exit
    status 2, not the exit 1 of a cluster that cannot be reached."""
    core = client.CoreV1Api(kube_api)
    name = f"bad-config-{uuid.uuid4().hex[:6]}"
    await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)
    )
    manifest = tmp_path / "job.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    try:
        result = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable, "-m", "koordpy.cli", "simulate", "--from-cluster",
                "--kubeconfig", str(control_plane.kubeconfig), "--configmap", f"default/{name}",
                str(manifest),
            ],
            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
        )  # fmt: skip
    finally:
        await core.delete_namespaced_config_map(name, "default")
    assert result.returncode == 2, result.stderr
    prefix = f"koordpy: invalid configuration: ConfigMap default/{name}"
    assert result.stderr.startswith(prefix), result.stderr
    assert says in result.stderr and result.stderr.count("\n") == 1, result.stderr


async def test_simulation_annotations_on_live_pods_are_left_out_and_named(
    control_plane: ControlPlane,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """A pod applied from a simulation's manifests carries its timeline annotations, one malformed:
    the snapshot still loads (they are left out, and named once on stderr), and so does every
    `simulate --from-cluster`. As the admin, with a --config file: no chart needed."""
    scheduler = f"koordpy-sim-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"profiles: [{{schedulerName: {scheduler}}}]\n"
    )
    kubeconfig = str(control_plane.kubeconfig)
    async with labelled_nodes(
        kubeconfig, "sd-sim", 1, NODE_LABEL, {"cpu": "4", "memory": "32Gi", "pods": "110"}
    ) as (label, (node_name,)):
        running = pod_manifest("broken", namespace, scheduler, label, "1", node_name=node_name)
        running["metadata"]["annotations"] = {"simulation.koordpy.io/run-for": "for a while"}
        waiting = pod_manifest("later", namespace, scheduler, label, "1")
        waiting["metadata"]["annotations"] = {"simulation.koordpy.io/arrive-after": "10m"}
        for doc in (running, waiting):
            await create(kube_api, doc)

        scenario = tmp_path / "cluster.yaml"
        result = koordpy("snapshot", "--kubeconfig", kubeconfig, "--config", str(config), "-o", str(scenario))
        assert result.returncode == 0, result.stderr
        assert result.stderr.count("timeline annotations") == 1, result.stderr
        assert f"Pod {namespace}/broken (simulation.koordpy.io/run-for)" in result.stderr
        assert f"Pod {namespace}/later (simulation.koordpy.io/arrive-after)" in result.stderr
        assert "simulation.koordpy.io/run-for" not in scenario.read_text()

        report = report_of(koordpy("simulate", str(scenario), "--config", str(config), "-o", "json"))
        mine = {p["name"]: p for p in report["pods"] if p["namespace"] == namespace}
        assert (mine["broken"]["phase"], mine["broken"]["node"]) == ("Bound", node_name)
        # the pending pod is there now, not in ten minutes: placed at once on the node's free room
        assert mine["later"]["node"] == node_name

        job = tmp_path / "job.yaml"
        job.write_text(yaml.safe_dump(pod_manifest("new", namespace, scheduler, label, "1")))
        result = koordpy(
            "simulate",
            "--from-cluster",
            "--kubeconfig",
            kubeconfig,
            "--config",
            str(config),
            "-o",
            "json",
            str(job),
        )
        dry = report_of(result)
        assert result.stderr.count("timeline annotations") == 1, result.stderr
        assert [(p["name"], p["node"]) for p in dry["pods"]] == [("new", node_name)]
