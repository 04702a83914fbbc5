"""`koordpy snapshot` and `koordpy simulate --from-cluster`, without a cluster: what a snapshot keeps
of each object, how it pages through lists, finds koordpy's configuration and keeps every pod
loadable; that the file it writes loads into `simulate` and reproduces the placements; and what the
dry run reports of a job added to a cluster. The same against the real control plane is in
tests/e2e/test_snapshot_dryrun.py."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest
import yaml

from koordpy.cli import main
from koordpy.cluster.snapshot import (
    REMOVE_AFTER_ANNOTATION,
    ConfigMapRef,
    SnapshotError,
    chart_configmap,
    config_beside,
    dump_document,
    kept_annotation,
    read_configuration_in_use,
    strip_object,
    take_snapshot,
)
from koordpy.config.models import parse_configuration
from koordpy.kubeapi.client import ApiError, KubeApi
from koordpy.simulate.documents import STDIN, STDIN_LABEL
from koordpy.simulate.dryrun import (
    DryRunReport,
    dry_run,
    new_pod_keys,
    render_dry_run_json,
    render_dry_run_table,
)
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import simulate

SCHEDULER = "koord-scheduler"
CONFIG = parse_configuration({"profiles": [{"schedulerName": SCHEDULER}]})
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


# ---------------------------------------------------------------------------------------------- stripping
@pytest.mark.parametrize(
    ("key", "kept"),
    [
        ("gang.scheduling.koordinator.sh/min-available", True),
        ("gang.scheduling.koordinator.sh/network-topology-spec", True),
        ("scheduling.koordinator.sh/network-topology-selector", True),
        ("quota.scheduling.koordinator.sh/namespaces", True),
        ("koordinator.sh/gpu-memory-ratio", True),
        ("pod-group.scheduling.sigs.k8s.io/min-available", True),
        ("scheduling.x-k8s.io/pod-group", True),
        # the simulator's timeline is not the cluster's: test_snapshot_simulation_annotations.py
        ("simulation.koordpy.io/run-for", False),
        ("snapshot.koordpy.io/recreated", True),
        (LAST_APPLIED, False),
        ("deployment.kubernetes.io/revision", False),
        ("prometheus.io/scrape", False),
        ("notkoordinator.sh/x", False),
        ("no-domain", False),
    ],
)
def test_annotations_the_scheduler_reads_are_kept(key: str, kept: bool) -> None:
    assert kept_annotation(key) is kept


def api_pod(**spec: Any) -> dict[str, Any]:
    """A pod as the apiserver lists it: every field a real one carries, the noise included."""
    return {
        "metadata": {
            "name": "p",
            "namespace": "team",
            "uid": "6f1c",
            "resourceVersion": "4711",
            "generation": 1,
            "generateName": "p-",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-group.scheduling.sigs.k8s.io": "job"},
            "annotations": {
                LAST_APPLIED: "{...}",
                "gang.scheduling.koordinator.sh/min-available": "2",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "job",
                    "uid": "9a",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
            "finalizers": ["example.com/keep"],
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeName": "n1",
            "priority": 10,
            "priorityClassName": "low",
            "preemptionPolicy": "PreemptLowerPriority",
            "serviceAccountName": "default",
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "volumes": [{"name": "token", "projected": {"sources": []}}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sleep", "inf"],
                    "env": [{"name": "A", "value": "b"}],
                    "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "1"}},
                    "volumeMounts": [{"name": "token", "mountPath": "/var/run"}],
                    "terminationMessagePath": "/dev/termination-log",
                }
            ],
            **spec,
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1",
            "qosClass": "Burstable",
            "startTime": "2025-01-01T00:00:05Z",
            "containerStatuses": [{"name": "main", "ready": True}],
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:06Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-01-01T00:00:01Z"},
            ],
        },
    }


def test_a_pod_keeps_what_scheduling_reads_and_nothing_else() -> None:
    assert strip_object("Pod", "v1", api_pod()) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team",
            "labels": {"app": "web", "pod-group.scheduling.sigs.k8s.io": "job"},
            "annotations": {"gang.scheduling.koordinator.sh/min-available": "2"},
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "9a", "controller": True}
            ],
        },
        "spec": {
            "nodeName": "n1",
            "schedulerName": SCHEDULER,
            "priority": 10,
            "priorityClassName": "low",
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "1"}},
                }
            ],
        },
        "status": {
            "phase": "Running",
            "startTime": "2025-01-01T00:00:05Z",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
        },
    }


@pytest.mark.parametrize(
    ("deletion", "now", "remove_after"),
    [
        ("2025-01-01T00:01:00Z", 1735689600.0, "60s"),  # 60 s of its grace period left
        ("2025-01-01T00:01:00Z", 1735689659.5, "1s"),  # rounded up: it is not gone yet
        ("2025-01-01T00:01:00Z", 1735689700.0, "0s"),  # overdue: goes at once
    ],
)
def test_a_pod_being_deleted_leaves_the_scenario_when_its_grace_period_ends(
    deletion: str, now: float, remove_after: str
) -> None:
    pod = api_pod()
    pod["metadata"]["deletionTimestamp"] = deletion
    stripped = strip_object("Pod", "v1", pod, now)
    assert stripped["metadata"]["deletionTimestamp"] == deletion
    assert stripped["metadata"]["annotations"][REMOVE_AFTER_ANNOTATION] == remove_after


def test_a_node_keeps_its_labels_taints_resources_and_images() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "uid": "x",
            "resourceVersion": "9",
            "labels": {"kubernetes.io/hostname": "n1", "network.topology/block": "b1"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "8"},
            "capacity": {"cpu": "8"},
            "images": [{"names": ["busybox"], "sizeBytes": 1000}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0"},
        },
    }
    assert strip_object("Node", "v1", node) == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "labels": {"kubernetes.io/hostname": "n1", "network.topology/block": "b1"},
        },
        "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "8"},
            "capacity": {"cpu": "8"},
            "images": [{"names": ["busybox"], "sizeBytes": 1000}],
        },
    }


@pytest.mark.parametrize(
    ("kind", "api_version", "obj", "expected"),
    [
        (
            "PriorityClass",
            "scheduling.k8s.io/v1",
            {"metadata": {"name": "low", "uid": "u"}, "value": 10, "description": "batch"},
            {"metadata": {"name": "low"}, "value": 10},
        ),
        (
            "PodDisruptionBudget",
            "policy/v1",
            {
                "metadata": {"name": "web", "namespace": "team", "resourceVersion": "1"},
                "spec": {"minAvailable": 1},
                "status": {"disruptionsAllowed": 0},
            },
            # preemption reads disruptionsAllowed
            {
                "metadata": {"name": "web", "namespace": "team"},
                "spec": {"minAvailable": 1},
                "status": {"disruptionsAllowed": 0},
            },
        ),
        (
            "ClusterNetworkTopology",
            "scheduling.koordinator.sh/v1alpha1",
            {"metadata": {"name": "default"}, "spec": {"networkTopologySpec": []}, "status": {"x": 1}},
            # the status is the operator's to compute from the nodes, as simulate does
            {"metadata": {"name": "default"}, "spec": {"networkTopologySpec": []}},
        ),
        (
            "Namespace",
            "v1",
            {"metadata": {"name": "team", "labels": {"tier": "a"}}, "spec": {"finalizers": ["kubernetes"]}},
            {"metadata": {"name": "team", "labels": {"tier": "a"}}},
        ),
    ],
)
def test_other_kinds_keep_what_scheduling_reads(
    kind: str, api_version: str, obj: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert strip_object(kind, api_version, obj) == {"apiVersion": api_version, "kind": kind, **expected}


# ------------------------------------------------------------------------------------ the configuration
def chart_pod(namespace: str = "koordpy-system", **container: Any) -> dict[str, Any]:
    """A pod of the chart's Deployment, as templates/deployment.yaml renders it."""
    return {
        "metadata": {
            "name": "koordpy-7d9-abc",
            "namespace": namespace,
            "labels": {
                "helm.sh/chart": "koordpy-0.1.0",
                "app.kubernetes.io/name": "koordpy",
                "app.kubernetes.io/component": "scheduler",
                "app.kubernetes.io/managed-by": "Helm",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "koordpy",
                    "args": ["--config=/etc/koordpy/config.yaml", "--leader-elect"],
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/koordpy", "readOnly": True},
                        {"name": "tmp", "mountPath": "/tmp"},
                    ],
                    **container,
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": "prod-koordpy"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        },
    }


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (chart_pod(), ConfigMapRef("koordpy-system", "prod-koordpy", "config.yaml")),
        (
            chart_pod(args=["--config", "/etc/koordpy/config.yaml", "--allow-unsupported-plugins"]),
            ConfigMapRef("koordpy-system", "prod-koordpy", "config.yaml", allow_unsupported_plugins=True),
        ),
        (
            chart_pod(args=["--config=/etc/koordpy/sched.yaml"]),
            ConfigMapRef("koordpy-system", "prod-koordpy", "sched.yaml"),
        ),
        # a file outside every configMap mount: not the chart's layout
        (chart_pod(args=["--config=/tmp/config.yaml"]), None),
        (chart_pod(args=["--leader-elect"]), None),
    ],
)
def test_the_charts_configmap_is_found_from_its_pods(
    pod: dict[str, Any], expected: ConfigMapRef | None
) -> None:
    assert chart_configmap(pod) == expected


def test_a_pod_of_another_chart_names_no_configuration() -> None:
    pod = chart_pod()
    pod["metadata"]["labels"]["helm.sh/chart"] = "kube-scheduler-1.0.0"
    assert chart_configmap(pod) is None


def test_a_projected_key_is_read_under_its_own_name() -> None:
    pod = chart_pod()
    pod["spec"]["volumes"][0]["configMap"]["items"] = [{"key": "scheduler", "path": "config.yaml"}]
    assert chart_configmap(pod) == ConfigMapRef("koordpy-system", "prod-koordpy", "scheduler")


@pytest.mark.parametrize(
    ("scenario", "config"),
    [
        ("cluster.yaml", "cluster.config.yaml"),
        ("out/cluster.yml", "out/cluster.config.yml"),
        ("snapshot", "snapshot.config.yaml"),
    ],
)
def test_the_configuration_goes_beside_the_scenario(scenario: str, config: str) -> None:
    assert config_beside(scenario) == config


# ----------------------------------------------------------------------------------- a cluster of dicts
def _field(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def _matches(obj: Mapping[str, Any], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path) == value:
                return False
        else:
            path, value = term.split("=", 1)
            if _field(obj, path) != value:
                return False
    return True


class FakeApi:
    """Lists and gets of an apiserver holding `objects` (by list path), paged as the apiserver pages
    (limit, continue), with field selectors; a path not held answers 404, as for a CRD not
    installed; `refused` paths answer 403. Every request is kept."""

    base = "https://apiserver.test"

    def __init__(self, objects: Mapping[str, Sequence[dict[str, Any]]], refused: Sequence[str] = ()) -> None:
        self.objects = objects
        self.refused = set(refused)
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    async def request(
        self, method: str, path: str, *, query: Sequence[tuple[str, str]] | None = None, **_: Any
    ) -> dict[str, Any]:
        params = dict(query or ())
        self.requests.append((method, path, params))
        if path in self.refused:
            raise ApiError(403, "Forbidden", f"cannot list resource at {path}")
        if path not in self.objects:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        held = self.objects[path]
        if not isinstance(held, list):
            return cast(dict[str, Any], held)
        items = [o for o in held if _matches(o, params.get("fieldSelector", ""))]
        start = int(params.get("continue") or 0)
        end = start + int(params.get("limit") or len(items))
        more = str(end) if end < len(items) else ""
        return {"metadata": {"continue": more}, "items": items[start:end]}


def node(name: str, cpu: str, gpu: str = "0") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "resourceVersion": "1"},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110", "nvidia.com/gpu": gpu},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    cpu: str,
    *,
    node_name: str | None = None,
    scheduler: str = SCHEDULER,
    created: str = "2025-01-01T00:00:00Z",
    priority_class: str | None = None,
    priority: int = 0,
    phase: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "priority": priority,
        "preemptionPolicy": "PreemptLowerPriority",
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "metadata": {"name": name, "namespace": "team", "creationTimestamp": created, "uid": name},
        "spec": spec,
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "value": value}


PODS = "/api/v1/pods"


def cluster(pods: list[dict[str, Any]], **more: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "/api/v1/namespaces": [{"metadata": {"name": "team"}}],
        "/apis/scheduling.k8s.io/v1/priorityclasses": more.pop("classes", []),
        "/api/v1/nodes": more.pop("nodes", [node("n1", "4"), node("n2", "4")]),
        "/apis/policy/v1/poddisruptionbudgets": [],
        PODS: pods,
        **more,
    }


async def snapshot_text(api: FakeApi, names: Sequence[str] = (SCHEDULER,), now: float = 0.0) -> str:
    out = io.StringIO()
    await take_snapshot(cast(KubeApi, api), lambda obj: out.write(dump_document(obj)), names, now)
    return out.getvalue()


def kinds_and_names(text: str) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in yaml.load_all(text, Loader=yaml.CSafeLoader)]


async def test_lists_are_paged_and_only_read() -> None:
    bound = [pod(f"b{i}", "10m", node_name="n1") for i in range(1234)]
    api = FakeApi(cluster(bound))
    text = await snapshot_text(api)
    assert [n for k, n in kinds_and_names(text) if k == "Pod"] == [p["metadata"]["name"] for p in bound]
    assert {method for method, _, _ in api.requests} == {"GET"}
    pod_pages = [q for _, path, q in api.requests if path == PODS and "spec.nodeName!=" in q["fieldSelector"]]
    assert [q.get("continue") for q in pod_pages] == [None, "500", "1000"]
    assert all(q["limit"] == "500" for _, _, q in api.requests)


async def test_pods_are_those_on_nodes_and_those_waiting_for_koordpy_oldest_first() -> None:
    pods = [
        pod("on-node", "1", node_name="n1"),
        pod("other-scheduler", "1", scheduler="default-scheduler"),
        pod("late", "1", created="2025-01-01T00:00:09Z"),
        pod("early", "1", created="2025-01-01T00:00:01Z"),
        pod("finished", "1", node_name="n1", phase="Succeeded"),
        pod("failed", "1", phase="Failed"),
    ]
    text = await snapshot_text(FakeApi(cluster(pods)))
    assert [n for k, n in kinds_and_names(text) if k == "Pod"] == ["on-node", "early", "late"]


async def test_an_absent_crd_is_skipped_and_a_forbidden_list_is_named() -> None:
    text = await snapshot_text(FakeApi(cluster([])))
    assert {k for k, _ in kinds_and_names(text)} == {"Namespace", "Node"}
    api = FakeApi(cluster([]), refused=["/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups"])
    with pytest.raises(SnapshotError, match=r"forbidden to list podgroups\.scheduling\.sigs\.k8s\.io"):
        await snapshot_text(api)


async def test_every_pod_stays_loadable_when_its_priority_class_is_gone_or_changed() -> None:
    pods = [
        # its class was deleted: recreated with the pod's priority
        pod("orphan", "1", node_name="n1", priority_class="gone", priority=50),
        # its class was deleted and created again with another value
        pod("stale", "1", node_name="n2", priority_class="batch", priority=5),
        pod("fine", "1", node_name="n2", priority_class="batch", priority=7),
    ]
    text = await snapshot_text(FakeApi(cluster(pods, classes=[priority_class("batch", 7)])))
    scenario = load_scenario([STDIN], stdin=io.StringIO(text))
    priorities = {p["metadata"]["name"]: p["spec"]["priority"] for p in scenario.pods}
    assert priorities == {"orphan": 50, "stale": 7, "fine": 7}
    assert ("PriorityClass", "gone") in kinds_and_names(text)


async def test_a_snapshot_loads_into_simulate_and_keeps_the_placements() -> None:
    """Pods on nodes stay there; a pod that fits nowhere is pending for the reason it is pending on
    the cluster; a pod of another scheduler is not koordpy's to place."""
    pods = [
        pod("a", "3", node_name="n1"),
        pod("b", "3", node_name="n2"),
        pod("too-big", "2"),
        pod("kube-schedulers", "1", scheduler="default-scheduler"),
    ]
    pods[2]["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}
    ]
    text = await snapshot_text(FakeApi(cluster(pods)))
    report = simulate(load_scenario([STDIN], stdin=io.StringIO(text)), CONFIG)
    placed = {p.name: (p.node, p.phase, p.reason) for p in report.pods}
    assert placed == {
        "a": ("n1", "Bound", None),
        "b": ("n2", "Bound", None),
        "too-big": (None, "Pending", "Unschedulable"),
    }


async def test_the_configuration_in_use_is_the_charts_configmap() -> None:
    config_text = "profiles:\n- schedulerName: batch-scheduler\n"
    objects = {
        PODS: [chart_pod()],
        "/api/v1/namespaces/koordpy-system/configmaps/prod-koordpy": {"data": {"config.yaml": config_text}},
    }
    found = await read_configuration_in_use(cast(KubeApi, FakeApi(cast(Any, objects))), None)
    assert found.document == {"profiles": [{"schedulerName": "batch-scheduler"}]}
    assert found.text == config_text
    assert found.source == "ConfigMap koordpy-system/prod-koordpy (key config.yaml)"
    nothing = await read_configuration_in_use(cast(KubeApi, FakeApi({PODS: []})), None)
    assert nothing.document is None
    with pytest.raises(SnapshotError, match="has no key 'other'"):
        await read_configuration_in_use(
            cast(KubeApi, FakeApi(cast(Any, objects))), "koordpy-system/prod-koordpy:other"
        )


# ---------------------------------------------------------------------------------------------- the dry run
GPU_NODES = """
apiVersion: v1
kind: Node
metadata: {name: n0, labels: {kubernetes.io/hostname: n0}}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110", nvidia.com/gpu: "8"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110", nvidia.com/gpu: "8"}}
"""


def gpu_manifest(
    name: str, gpus: int, node_name: str | None = None, priority_class: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [
            {
                "name": "c",
                "resources": {
                    "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def run_dry(
    cluster_docs: list[dict[str, Any]],
    job_docs: list[dict[str, Any]],
    tmp_path: Any,
    everything: bool = False,
) -> DryRunReport:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump_all(job_docs))
    snapshot = io.StringIO(GPU_NODES + "".join(dump_document(d) for d in cluster_docs))
    scenario = load_scenario([STDIN, str(job)], stdin=snapshot)
    return dry_run(
        scenario, CONFIG, new_pod_keys(scenario, STDIN_LABEL), everything=everything, configuration="test"
    )


def test_the_new_pod_and_the_fragmentation_it_leaves(tmp_path: Any) -> None:
    """n0 has 2 GPUs idle, n1 has 4: a 4-GPU pod fits on n1 alone. The most common request is 4
    (the new pod and one running), so n0's 2 idle GPUs are fragmented before and after, and n1's 4
    idle are taken."""
    report = run_dry(
        [gpu_manifest("six", 6, "n0"), gpu_manifest("four", 4, "n1")], [gpu_manifest("new", 4)], tmp_path
    )
    assert [(p.key, p.node, p.phase, p.nominatedNodeName) for p in report.pods] == [
        ("default/new", "n1", "Bound", None)
    ]
    assert report.victims == []
    assert report.fragmentationBefore == {
        "resource": "nvidia.com/gpu",
        "commonRequest": 4,
        "idle": 6,
        "fragmented": 2,
    }
    assert report.fragmentationAfter == {
        "resource": "nvidia.com/gpu",
        "commonRequest": 4,
        "idle": 2,
        "fragmented": 2,
    }


def test_a_pod_that_fits_nowhere_is_reported_with_kubes_reason(tmp_path: Any) -> None:
    report = run_dry(
        [gpu_manifest("six", 6, "n0"), gpu_manifest("four", 4, "n1")], [gpu_manifest("new", 5)], tmp_path
    )
    (new,) = report.pods
    assert (new.node, new.phase, new.reason) == (None, "Pending", "Unschedulable")
    assert new.message is not None
    assert new.message.startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


PRIORITIES = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    },
]


def labelled(doc: dict[str, Any], **labels: str) -> dict[str, Any]:
    doc["metadata"]["labels"] = labels
    return doc


def test_a_gang_that_preempts_names_its_victims_their_job_and_its_nominated_node(tmp_path: Any) -> None:
    """n0 is full with a high-priority pod; n1 with a low-priority PodGroup of two. The high gang of
    two 4-GPU pods fits only where the low gang is: job-level preemption evicts that whole job, the
    members are nominated to n1 and bound there once the victims are gone."""
    gang_label = "pod-group.scheduling.sigs.k8s.io"
    low_gang = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "low-job", "namespace": "default"},
        "spec": {"minMember": 2},
    }
    cluster_docs: list[dict[str, Any]] = [
        *PRIORITIES,
        low_gang,
        gpu_manifest("keeper", 8, "n0", "high"),
        labelled(gpu_manifest("low-0", 4, "n1", "low"), **{gang_label: "low-job"}),
        labelled(gpu_manifest("low-1", 4, "n1", "low"), **{gang_label: "low-job"}),
    ]
    high_gang = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train"},
        "spec": {"minMember": 2},
    }
    job = [
        high_gang,
        *(labelled(gpu_manifest(f"train-{i}", 4, None, "high"), **{gang_label: "train"}) for i in range(2)),
    ]
    report = run_dry(cluster_docs, job, tmp_path)
    assert [(p.key, p.node, p.phase, p.nominatedNodeName, p.gang, p.priority) for p in report.pods] == [
        ("default/train-0", "n1", "Bound", "n1", "default/train", 1000),
        ("default/train-1", "n1", "Bound", "n1", "default/train", 1000),
    ]
    assert sorted((v.key, v.node, v.priority, v.job, v.preemptor) for v in report.victims) == [
        ("default/low-0", "n1", 10, "gang default/low-job", "default/train"),
        ("default/low-1", "n1", 10, "gang default/low-job", "default/train"),
    ]
    assert [(g.key, g.phase, g.scheduled) for g in report.podGroups] == [("default/train", "Running", 2)]
    table = render_dry_run_table(report)
    assert "WOULD PREEMPT" in table and "gang default/low-job" in table
    assert "2 pod(s): 2 would be bound, 0 would wait; 2 pod(s) would be preempted" in table
    document = json.loads(render_dry_run_json(report))
    assert [v["victim"] for v in document["victims"]] == [v.key for v in report.victims]
    assert document["scope"] == "new" and document["newPods"] == 2
    assert set(document["fragmentation"]) == {"before", "after"}

    everything = run_dry(cluster_docs, job, tmp_path, everything=True)
    assert [p.key for p in everything.pods] == [
        "default/keeper",
        "default/low-0",
        "default/low-1",
        "default/train-0",
        "default/train-1",
    ]
    assert [p.phase for p in everything.pods[1:3]] == ["Preempted", "Preempted"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--from-cluster", "-"], "name the manifests as files"),
        (
            ["simulate", "--from-cluster", "--config", "c.yaml", "--configmap", "a/b", "j.yaml"],
            "exclude each other",
        ),
        (["snapshot", "--config", "c.yaml", "--configmap", "a/b"], "exclude each other"),
        (["simulate", "--kubeconfig", "k", "--all", "j.yaml"], "--kubeconfig, --all can only be used with"),
    ],
)
def test_the_command_lines_refuse_what_cannot_work(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1, 2]\nb: *x\n", "YAML aliases are not read"),
        ("profiles: " + "[" * 150 + "]" * 150 + "\n", "nested deeper than 100 levels"),
        # deep enough for libyaml's own limit (1000) to stop its parser first: the bound still speaks
        ("profiles: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 100 levels"),
        ("profiles: [\n", "not valid YAML"),
    ],
)
async def test_a_configmap_is_read_within_bounds(text: str, message: str) -> None:
    objects: dict[str, Any] = {"/api/v1/namespaces/ns/configmaps/cm": {"data": {"config.yaml": text}}}
    with pytest.raises(SnapshotError, match=message):
        await read_configuration_in_use(cast(KubeApi, FakeApi(objects)), "ns/cm")
