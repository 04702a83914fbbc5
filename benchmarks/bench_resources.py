"""Many resource names: scheduler_perf's SchedulingWithExtendedResource (misc/) as a whole
`koordpy simulate` run. Prints figures; asserts nothing.

Every node advertises an extended resource of its own (`foo.com/bar-<i>: 1`, besides 4 CPUs,
32Gi and 110 pods, upstream's node-with-extended-resource.yaml) and pod i asks for one
`foo.com/bar-<i>` (pod-with-extended-resource.yaml), so each node adds a resource column and each
pod fits exactly one node. kube-scheduler's CI floor for 5,000 nodes is 180 pods/s.

    python benchmarks/bench_resources.py            # 5,000 nodes, 5,000 pods (upstream's size)
    python benchmarks/bench_resources.py --quick    # 500 nodes, 500 pods
    python benchmarks/bench_resources.py --nodes 1000 --pods 1000
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine
from benchmarks.workload import to_yaml
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import build_report, build_world

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


def run(nodes: int, pods: int) -> None:
    objects = extended_nodes(nodes) + extended_pods(pods)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "extended.yaml"
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
    print(
        f"SchedulingWithExtendedResource nodes={nodes} pods={pods} bound={bound} resources={width}\n"
        f"  load {t1 - t0:7.2f}s  cache {t2 - t1:7.2f}s  schedule {t3 - t2:7.2f}s  report {t4 - t3:6.2f}s"
        f"  total {t4 - t0:7.2f}s  peak RSS {peak_mib:,.0f} MiB\n"
        f"  {pods / (t4 - t0):7.0f} pods/s (whole run)  {pods / (t3 - t2):7.0f} pods/s (scheduling only)"
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
