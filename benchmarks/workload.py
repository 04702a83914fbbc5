"""Synthetic workloads for the scheduling benchmark: a cluster of N nodes over several zones (one in
ten a tainted GPU node) and pods stamped from a few templates: plain requests, a zone spread
constraint, a required node affinity, and a GPU pod with a toleration."""

from __future__ import annotations

import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
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


@dataclass(frozen=True, slots=True)
class Phases:
    """Seconds spent in each phase of one `koordpy simulate` run, and what it placed."""

    load: float
    cache: float
    schedule: float
    report: float
    bound: int
    resource_names: int
    peak_mib: float

    @property
    def total(self) -> float:
        return self.load + self.cache + self.schedule + self.report

    def line(self) -> str:
        return (
            f"  load {self.load:7.2f}s  cache {self.cache:7.2f}s  schedule {self.schedule:7.2f}s"
            f"  report {self.report:6.2f}s  total {self.total:7.2f}s  peak RSS {self.peak_mib:,.0f} MiB"
        )


def simulate_in_phases(objects: list[dict[str, Any]]) -> Phases:
    """The objects run as `koordpy simulate` runs them, each phase timed."""
    from koordpy.config.models import default_configuration
    from koordpy.simulate.loader import load_scenario
    from koordpy.simulate.runner import build_report, build_world

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "objects.yaml"
        path.write_text(to_yaml(objects))
        t0 = time.perf_counter()
        scenario = load_scenario([str(path)])
        t1 = time.perf_counter()
        world = build_world(scenario, default_configuration())
        t2 = time.perf_counter()
        world.run(3600.0)
        t3 = time.perf_counter()
        report = build_report(world, scenario)
        t4 = time.perf_counter()
    bound = sum(1 for p in report.pods if p.phase == "Bound")
    width = len(world.scheduler.cache.snapshot.resource_names)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return Phases(t1 - t0, t2 - t1, t3 - t2, t4 - t3, bound, width, peak_mib)
