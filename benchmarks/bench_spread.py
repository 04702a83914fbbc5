"""Default spreading per owner: scheduler_perf's podgroup/basicscheduling at 5,000 nodes and 3,000
groups of 3 pods, with each group's pods made by a ReplicaSet of its own, as a whole
`koordpy simulate` run. Prints figures; asserts nothing.

A pod with no spread constraints of its own gets PodTopologySpread's system default constraints
(hostname and zone, ScheduleAnyway) over the pods of its own controller, so every group brings a
selector never seen before. Pods ask for 100m CPU and 100Mi (upstream's basic-pod.yaml); nodes have
4 CPUs, 32Gi and 110 pods, a hostname label and one of three zones. kube-scheduler runs the same
groups at about 12 ms a group.

    python benchmarks/bench_spread.py              # 5,000 nodes, 3,000 gangs of 3
    python benchmarks/bench_spread.py --quick      # 500 nodes, 300 gangs of 3
    python benchmarks/bench_spread.py --nodes 5000 --gangs 1000 --size 3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine
from benchmarks.workload import simulate_in_phases

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def cluster(nodes: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"node-{i}",
                "labels": {
                    "kubernetes.io/hostname": f"node-{i}",
                    "topology.kubernetes.io/zone": f"moon-{i % 3 + 1}",
                },
            },
            "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"}},
        }
        for i in range(nodes)
    ]


def replica_set_gangs(gangs: int, size: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for g in range(gangs):
        name = f"group-{g}"
        out.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": size},
            }
        )
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": name},
                "spec": {
                    "replicas": size,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name, GROUP_LABEL: name}},
                        "spec": {
                            "schedulerName": "koord-scheduler",
                            "containers": [
                                {
                                    "name": "pause",
                                    "image": "registry.k8s.io/pause:3.10.1",
                                    "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
                                }
                            ],
                        },
                    },
                },
            }
        )
    return out


def run(nodes: int, gangs: int, size: int) -> None:
    pods = gangs * size
    run = simulate_in_phases(cluster(nodes) + replica_set_gangs(gangs, size))
    print(
        f"ReplicaSet gangs nodes={nodes} gangs={gangs}x{size} pods={pods} bound={run.bound}\n{run.line()}\n"
        f"  {1000 * run.schedule / gangs:6.2f} ms per gang (scheduling only)  {pods / run.total:6.0f} pods/s"
        f" (whole run)  {pods / run.schedule:6.0f} pods/s (scheduling only)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=3000)
    parser.add_argument("--size", type=int, default=3, help="pods per gang")
    parser.add_argument("--quick", action="store_true", help="500 nodes, 300 gangs")
    args = parser.parse_args()
    nodes, gangs = (500, 300) if args.quick else (args.nodes, args.gangs)
    print(f"machine: {machine()}")
    run(nodes, gangs, args.size)


if __name__ == "__main__":
    main()
