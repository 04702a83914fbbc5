"""What each step of `koordpy run`'s client path costs per pod, offline: decoding a pod from the
watch (stdlib json against orjson), the pod's typed view, the scheduler's handling of the event, one
scheduling cycle, and encoding the Binding. Prints figures; asserts nothing.

    python benchmarks/bench_client_path.py [--pods 5000] [--nodes 1000]

The costs that need an apiserver (the HTTP round trips) are measured by bench_cluster.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler


def watched_pod(i: int) -> dict[str, Any]:
    """A pod as a watch delivers it: the metadata, spec and status an apiserver fills in."""
    name = f"load-{i}"
    return {
        "type": "ADDED",
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"6f1c2b7e-0000-4000-8000-{i:012d}",
                "resourceVersion": str(100000 + i),
                "creationTimestamp": "2026-11-23T10:00:00Z",
                "labels": {"app": "load", "pod-template-hash": "5d9c7b6f4"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "load-5d9c7b6f4",
                        "uid": "0c3e0d1e-0000-4000-8000-000000000001",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "schedulerName": "default-scheduler",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example.com/app:1.0",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "imagePullPolicy": "IfNotPresent",
                    }
                ],
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "default",
                "securityContext": {},
                "tolerations": [
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
                ],
                "priority": 0,
                "enableServiceLinks": True,
                "preemptionPolicy": "PreemptLowerPriority",
            },
            "status": {"phase": "Pending", "qosClass": "Burstable"},
        },
    }


def per_pod(label: str, n: int, step: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for i in range(n):
        step(i)
    micros = (time.perf_counter() - start) / n * 1e6
    print(f"  {label:<44} {micros:9.1f} µs/pod")
    return micros


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"{args.pods} pods, {args.nodes} nodes")
    lines = [json.dumps(watched_pod(i)).encode() for i in range(args.pods)]
    per_pod("decode a watch line (json)", args.pods, lambda i: json.loads(lines[i]))
    per_pod("decode a watch line (orjson)", args.pods, lambda i: orjson.loads(lines[i]))
    objects = [orjson.loads(line)["object"] for line in lines]
    pods: list[Pod] = []
    per_pod("typed view (Pod.from_dict)", args.pods, lambda i: pods.append(Pod.from_dict(objects[i])))

    scheduler = Scheduler(default_configuration(), registry(), VirtualClock())
    for n in range(args.nodes):
        node = {
            "metadata": {"name": f"node-{n}", "labels": {"kubernetes.io/hostname": f"node-{n}"}},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
        }
        scheduler.on_node_add(Node.from_dict(node))
    per_pod("scheduler hears of the pod (on_pod_add)", args.pods, lambda i: scheduler.on_pod_add(pods[i]))
    per_pod("scheduling cycle (schedule_one)", args.pods, lambda i: scheduler.schedule_one())
    binds = scheduler.drain()
    per_pod(
        "encode the Binding (orjson)",
        len(binds),
        lambda i: orjson.dumps(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": f"load-{i}", "namespace": "default"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
            }
        ),
    )


if __name__ == "__main__":
    main()
