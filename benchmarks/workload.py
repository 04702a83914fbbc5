"""Synthetic workloads for the scheduling benchmark: a cluster of N nodes over several zones (one in
ten a tainted GPU node) and pods stamped from a few templates: plain requests, a zone spread
constraint, a required node affinity, and a GPU pod with a toleration."""

from __future__ import annotations

from typing import Any

import yaml

ZONES = 8  # not a divisor of 10, so the GPU nodes (every tenth) sit in every zone
TEMPLATES = ("plain", "spread", "affinity", "gpu")


def nodes(count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        gpu = i % 10 == 9
        labels = {
            "kubernetes.io/hostname": f"node-{i}",
            "topology.kubernetes.io/zone": f"zone-{i % ZONES}",
            "node.kubernetes.io/instance-type": "gpu-8x" if gpu else ("cpu-large" if i % 3 else "cpu-medium"),
        }
        allocatable: dict[str, Any] = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        spec: dict[str, Any] = {}
        if gpu:
            allocatable["nvidia.com/gpu"] = "8"
            spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i}", "labels": labels},
                "spec": spec,
                "status": {"allocatable": allocatable},
            }
        )
    return out


def _template(kind: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": f"registry.example/{kind}:1.0",
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    spec: dict[str, Any] = {"schedulerName": "koord-scheduler", "containers": [container]}
    if kind == "spread":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            }
        ]
    elif kind == "affinity":
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "node.kubernetes.io/instance-type",
                                    "operator": "In",
                                    "values": ["cpu-large"],
                                },
                            ]
                        }
                    ],
                }
            }
        }
    elif kind == "gpu":
        container["resources"] = {
            "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        }
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"metadata": {"labels": {"app": kind}}, "spec": spec}


def deployments(total_pods: int) -> list[dict[str, Any]]:
    """The pods as one Deployment per template (the way most pods are created)."""
    per = total_pods // len(TEMPLATES)
    out = []
    for i, kind in enumerate(TEMPLATES):
        replicas = per + (total_pods - per * len(TEMPLATES) if i == 0 else 0)
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": kind},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": kind}},
                    "template": _template(kind),
                },
            }
        )
    return out


def explicit_pods(total_pods: int) -> list[dict[str, Any]]:
    """The same pods written out one manifest each, interleaved across templates."""
    out = []
    for i in range(total_pods):
        kind = TEMPLATES[i % len(TEMPLATES)]
        t = _template(kind)
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{kind}-{i}", **t["metadata"]},
                "spec": t["spec"],
            }
        )
    return out


def to_yaml(objects: list[dict[str, Any]]) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump_all(objects, Dumper=dumper, sort_keys=False)
