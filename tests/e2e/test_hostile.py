"""Objects the API server accepts and no scheduler should choke on, created on the real control
plane between good pods: `koordpy run` stays up and healthy, every good pod is bound (those
created after the hostile objects too), and every hostile pod says why it waits."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.e2e.test_run import CONFIG_DOC, SCHEDULER_NAME, RunProcess
from tests.support.controlplane import (
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_ANNOTATION_VALUE,
    ControlPlane,
    free_port,
)
from tests.support.polling import eventually

NODE_LABEL = "koordpy.e2e/hostile-nodes"


def node_body(name: str, label: str, allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
            "labels": {NODE_LABEL: label, "kubernetes.io/hostname": name, "type": "kwok"},
        },
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def pod_body(
    name: str,
    label: str,
    requests: dict[str, str],
    containers: int = 1,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    resources = {"requests": requests, "limits": limits} if limits else {"requests": requests}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "nodeSelector": {NODE_LABEL: label},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": f"c{i}", "image": "registry.k8s.io/pause:3.10", "resources": resources}
                for i in range(containers)
            ],
        },
    }


def hostile_pods(label: str) -> dict[str, dict[str, Any]]:
    """Each is accepted by the API server; none can be placed."""
    return {
        "cpu-1e18": pod_body("cpu-1e18", label, {"cpu": "1e18"}),
        "cpu-and-memory-beyond-int64": pod_body("beyond-int64", label, {"cpu": "1e30", "memory": "1e40"}),
        "many-huge-containers": pod_body("many-huge", label, {"cpu": "9e17"}, containers=50),
        # extended resources are not overcommitted: the limit must equal the request
        "extended-resource-1e20": pod_body(
            "gpu-1e20", label, {"example.com/gpu": "1e20"}, limits={"example.com/gpu": "1e20"}
        ),
        "garbage-gang-annotations": pod_body(
            "garbage-gang",
            label,
            {"cpu": "100m"},
            annotations={
                "gang.scheduling.koordinator.sh/name": "g-" + "x" * 60,
                "gang.scheduling.koordinator.sh/min-available": "2147483647",
                "gang.scheduling.koordinator.sh/network-topology-spec": '{"gatherStrategy": [[[[{}]]]]}',
            },
        ),
        "huge-annotation": pod_body(
            "huge-annotation",
            label,
            {"cpu": "1e18"},
            annotations={f"example.com/a{i}": "v" * 2000 for i in range(100)},
            labels={f"example.com/l{i}": "v" for i in range(300)},
        ),
    }


async def test_hostile_objects_stop_nobody_and_each_says_why(
    control_plane: ControlPlane, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    label = uuid.uuid4().hex[:8]
    good_nodes = [f"hostile-good-{label}-{i}" for i in range(2)]
    huge_node = f"hostile-huge-{label}"
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(CONFIG_DOC))
    proc = RunProcess(
        ["--kubeconfig", str(control_plane.kubeconfig), "--config", str(config_path)],
        tmp_path / "koordpy.log",
        free_port(),
        f"e2e-hostile-{label}",
    )
    try:
        for name in good_nodes:
            await core.create_node(node_body(name, label, {"cpu": "8", "memory": "32Gi", "pods": "110"}))

        async def ready() -> bool:
            assert proc.proc.poll() is None, f"koordpy exited:\n{proc.log()}"
            return (await proc.get("/readyz"))[0] == 200

        await eventually(ready, timeout=60, what="koordpy ready")
        good = [f"before-{i}" for i in range(4)]
        for name in good:
            await core.create_namespaced_pod(namespace, pod_body(name, label, {"cpu": "100m"}))
        # a node agent reporting more than int64 can hold: it must not poison the cache
        await core.create_node(
            node_body(
                huge_node, label, {"cpu": "8", "memory": "1e19", "ephemeral-storage": "1e30", "pods": "110"}
            )
        )
        hostile = hostile_pods(label)
        for body in hostile.values():
            await core.create_namespaced_pod(namespace, body)
        after = [f"after-{i}" for i in range(4)]
        for name in after:
            await core.create_namespaced_pod(namespace, pod_body(name, label, {"cpu": "100m"}))

        async def all_good_bound() -> bool:
            for name in good + after:
                pod = await core.read_namespaced_pod(name, namespace)
                if not pod.spec.node_name:
                    return False
            return True

        await eventually(all_good_bound, timeout=60, what=f"every good pod bound\n{proc.log()}")

        async def each_hostile_explained() -> dict[str, str]:
            said: dict[str, str] = {}
            for body in hostile.values():
                name = body["metadata"]["name"]
                pod = await core.read_namespaced_pod(name, namespace)
                assert not pod.spec.node_name, f"{name} was bound to {pod.spec.node_name}"
                conditions = [c for c in (pod.status.conditions or []) if c.type == "PodScheduled"]
                if not conditions or conditions[0].status != "False" or not conditions[0].message:
                    return {}
                said[name] = f"{conditions[0].reason}: {conditions[0].message}"
            return said

        said = await eventually(each_hostile_explained, timeout=60, what="a condition on every hostile pod")
        # beyond the largest amount koordpy compares exactly: refused with the field, not misjudged;
        # kube's reason, so autoscalers see the pod, and koordpy's own leading the message
        assert said["cpu-1e18"].startswith(
            "Unschedulable: InvalidSpec: spec.containers[0].resources.requests.cpu: "
        ), said
        assert "more example.com/gpu than koordpy schedules" in said["gpu-1e20"], said

        status, body = await proc.get("/healthz")
        assert (status, body) == (200, "ok"), proc.log()
        log = proc.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-4000:]
        assert "scheduling loop failed" not in log
    finally:
        proc.close()
        for name in [*good_nodes, huge_node]:
            with contextlib.suppress(ApiException):
                await core.delete_node(name)
