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
    objects = cluster(nodes) + replica_set_gangs(gangs, size)
    pods = gangs * size
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gangs.yaml"
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
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"ReplicaSet gangs nodes={nodes} gangs={gangs}x{size} pods={pods} bound={bound}\n"
        f"  load {t1 - t0:7.2f}s  cache {t2 - t1:7.2f}s  schedule {t3 - t2:7.2f}s  report {t4 - t3:6.2f}s"
        f"  total {t4 - t0:7.2f}s  peak RSS {peak_mib:,.0f} MiB\n"
        f"  {1000 * (t3 - t2) / gangs:6.2f} ms per gang (scheduling only)  {pods / (t4 - t0):6.0f} pods/s"
        f" (whole run)  {pods / (t3 - t2):6.0f} pods/s (scheduling only)"
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
