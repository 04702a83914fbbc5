"""Many resource names: scheduler_perf's SchedulingWithExtendedResource (misc/) as a whole
`koordpy simulate` run. Prints figures; asserts nothing.

Every node advertises an extended resource of its own (`foo.com/bar-<i>: 1`, besides 4 CPUs,
32Gi and 110 pods, upstream's node-with-extended-resource.yaml) and pod i asks for one
`foo.com/bar-<i>` (pod-with-extended-resource.yaml), so each node adds a resource name (a sparse
one: a single node carries it) and each pod fits exactly one node. Peak RSS and process CPU are
printed beside the phases. kube-scheduler's CI floor for 5,000 nodes is 180 pods/s.

    python benchmarks/bench_resources.py            # 5,000 nodes, 5,000 pods (upstream's size)
    python benchmarks/bench_resources.py --quick    # 500 nodes, 500 pods
    python benchmarks/bench_resources.py --nodes 1000 --pods 1000
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine
from benchmarks.workload import simulate_in_phases

KUBE_FLOOR = 180  # pods/s, scheduler_perf's threshold for SchedulingWithExtendedResource


def extended_nodes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"scheduler-perf-extended-resource-{i}",
                "labels": {"node-with-extended-resource": "true"},
            },
            "status": {
                "capacity": {"pods": "110", "cpu": "4", "memory": "32Gi", f"foo.com/bar-{i}": "1"},
            },
        }
        for i in range(count)
    ]


def extended_pods(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"test-extended-resource-{i}"},
            "spec": {
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {
                            "requests": {f"foo.com/bar-{i}": "1"},
                            "limits": {f"foo.com/bar-{i}": "1"},
                        },
                    }
                ]
            },
        }
        for i in range(count)
    ]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(nodes: int, pods: int) -> None:
    # CPU time beside wall time: on a shared machine the wall figures move with the load
    cpu = _cpu_seconds()
    run = simulate_in_phases(extended_nodes(nodes) + extended_pods(pods))
    cpu = _cpu_seconds() - cpu
    print(
        f"SchedulingWithExtendedResource nodes={nodes} pods={pods} bound={run.bound}"
        f" resources={run.resource_names}\n{run.line()}  process CPU {cpu:.2f}s\n"
        f"  {pods / run.total:7.0f} pods/s (whole run)  {pods / run.schedule:7.0f} pods/s (scheduling only)"
        f"  kube-scheduler floor {KUBE_FLOOR} pods/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=None, help="default: as many as nodes")
    parser.add_argument("--quick", action="store_true", help="500 nodes and 500 pods")
    args = parser.parse_args()
    nodes = 500 if args.quick else args.nodes
    pods = nodes if args.pods is None else args.pods
    print(f"machine: {machine()}")
    run(nodes, pods)


if __name__ == "__main__":
    main()
