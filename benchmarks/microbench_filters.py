"""Per-plugin cost of one pod's scheduling cycle at 5000 nodes, in microseconds per pod.

Each plugin runs alone over every node: PreFilter, Filter, PreScore, Score and NormalizeScore as
the profile would call them. Pods are distinct objects stamped from one template, as a
Deployment's pods are, so the numbers include each plugin's per-pod lookups. `cold` drops the
plugin's node-derived caches before each pod (a node changed between every two pods).

    .venv/bin/python -m benchmarks.microbench_filters [--nodes 5000] [--pods 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.cache import Cache
from koordpy.config.models import PluginConfig, PluginRef, Plugins, PluginSet
from koordpy.config.models import Profile as ProfileConfig
from koordpy.framework.clock import VirtualClock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import Plugin
from koordpy.framework.nominator import Nominator
from koordpy.framework.profile import Profile
from koordpy.framework.status import Code
from koordpy.framework.waiting import WaitingPods
from koordpy.plugins import registry

ZONES = ("zone-a", "zone-b", "zone-c", "zone-d")
POOLS = ("general", "memory", "gpu", "batch", "infra")


def node_object(i: int) -> Node:
    pool = POOLS[i % len(POOLS)]
    taints: list[dict[str, str]] = []
    if pool == "gpu":
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if pool == "batch":
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    if pool == "infra":
        taints.append({"key": "dedicated", "value": "infra", "effect": "NoSchedule"})
        taints.append({"key": "dedicated", "value": "infra", "effect": "NoExecute"})
    return Node.from_dict(
        {
            "metadata": {
                "name": f"node-{i:05d}",
                "labels": {
                    "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
                    "pool": pool,
                    "cores": str(8 * (1 + i % 8)),
                    "node.kubernetes.io/instance-type": f"m{i % 6}.xlarge",
                },
            },
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": 110}},
        }
    )


def pod_object(i: int) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": f"web-{i}", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {"name": "main", "image": "web:1", "resources": {"requests": {"cpu": "500m"}}}
                ],
                "nodeSelector": {"node.kubernetes.io/instance-type": "m1.xlarge"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "pool",
                                            "operator": "In",
                                            "values": ["general", "memory", "batch"],
                                        },
                                        {"key": "cores", "operator": "Gt", "values": ["8"]},
                                    ]
                                },
                            ]
                        },
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 20,
                                "preference": {
                                    "matchExpressions": [
                                        {
                                            "key": "topology.kubernetes.io/zone",
                                            "operator": "In",
                                            "values": ["zone-a"],
                                        }
                                    ]
                                },
                            },
                            {
                                "weight": 5,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "pool", "operator": "NotIn", "values": ["batch"]}
                                    ]
                                },
                            },
                        ],
                    }
                },
                "tolerations": [
                    {
                        "key": "node.kubernetes.io/not-ready",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    },
                    {
                        "key": "node.kubernetes.io/unreachable",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    },
                    {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
                ],
                "schedulingGates": [{"name": "example.com/quota"}] if i % 2 else [],
            },
        }
    )


def build_profile(nodes: int, plugin: str) -> Profile:
    cache = Cache()
    for i in range(nodes):
        cache.add_node(node_object(i))
    handle = Handle(VirtualClock(0.0), cache, Nominator(), WaitingPods(), [])
    config = ProfileConfig(
        schedulerName="bench",
        plugins=Plugins(
            multiPoint=PluginSet(enabled=[PluginRef(name=plugin)], disabled=[PluginRef(name="*")]),
            queueSort=PluginSet(enabled=[PluginRef(name="PrioritySort")]),
            bind=PluginSet(enabled=[PluginRef(name="DefaultBinder")]),
        ),
        pluginConfig=[PluginConfig(name=plugin, args={})] if registry()[plugin].Args is not None else [],
    )
    return Profile(config, registry(), handle)


def one_cycle(plugin: Any, pod: Pod, rows: np.ndarray) -> None:
    state = CycleState()
    skip_filter = skip_score = False
    if hasattr(plugin, "pre_enqueue"):
        plugin.pre_enqueue(pod)
    if hasattr(plugin, "pre_filter"):
        _, status = plugin.pre_filter(state, pod)
        skip_filter = status is not None and status.code == Code.SKIP
    if hasattr(plugin, "filter") and not skip_filter:
        result = plugin.filter(state, pod, rows)
        if result is not None:
            rows = rows[result.passed]
    if hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, rows)
        skip_score = status is not None and status.code == Code.SKIP
    if hasattr(plugin, "score") and not skip_score:
        scores = plugin.score(state, pod, rows)
        if hasattr(plugin, "normalize_score"):
            plugin.normalize_score(state, pod, rows, scores)


def measure(
    profile: Profile, plugin: Plugin, pods: list[Pod], before_each: Callable[[], None] | None, repeats: int
) -> float:
    """Microseconds per pod, the best of `repeats` passes (the least disturbed by other load)."""
    rows = profile.handle.snapshot.live_rows()
    one_cycle(plugin, pods[0], rows)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for pod in pods:
            if before_each is not None:
                before_each()
            one_cycle(plugin, pod, rows)
        best = min(best, time.perf_counter() - start)
    return best / len(pods) * 1e6


def forget_node_caches(plugin: Plugin) -> Callable[[], None]:
    """Invalidate what the plugin derived from node objects, as a node change would."""
    snapshot = plugin.handle.snapshot

    def bump() -> None:
        snapshot.node_generation += 1
        for column in snapshot.labels.values():
            column._match_cache.clear()

    return bump


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args()
    pods = [pod_object(i) for i in range(opts.pods)]
    print(f"{opts.nodes} nodes, {opts.pods} pods from one template; microseconds per pod")
    print(f"{'plugin':<20}{'warm':>10}{'cold':>10}")
    for name in ("NodeAffinity", "TaintToleration", "SchedulingGates"):
        profile = build_profile(opts.nodes, name)
        plugin = profile.plugins[name]
        warm = measure(profile, plugin, pods, None, opts.repeats)
        few = pods[: max(1, opts.pods // 10)]
        cold = measure(profile, plugin, few, forget_node_caches(plugin), opts.repeats)
        print(f"{name:<20}{warm:>10.1f}{cold:>10.1f}")


if __name__ == "__main__":
    main()
