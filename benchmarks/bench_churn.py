"""kube-scheduler's scheduler_perf `Unschedulable` workload (misc/performance-config.yaml), offline:
schedulable pods measured while pods that fit nowhere keep arriving. Prints figures; asserts nothing.

    python benchmarks/bench_churn.py            # 5kNodes/20kInit/10kPods, the upstream size
    python benchmarks/bench_churn.py --quick    # 500Nodes/10Init/1kPods

The workload, as upstream has it:

- `initNodes` nodes of node-default.yaml (4 CPUs, 32Gi, 110 pods);
- `initPods` pods of pod-default.yaml (100m CPU, 500Mi), scheduled before the clock starts;
- churn: a pod of pod-high-priority-large-cpu.yaml (priority 10, 9 CPUs: more than any node has)
  created every 200 ms of wall time for as long as the measured pods are being scheduled; each is
  tried once (filters and a preemption attempt that cannot help), then waits in the unschedulable
  pool, and no later event can help it;
- `measurePods` pods of pod-default.yaml: the figure is how many of them are bound per second.

The scheduler runs on the simulator's in-memory world (bindings applied in place), default
configuration, so the figure is scheduling only: no API server. kube-scheduler's CI floor for
5kNodes/20kInit/10kPods with queueing hints is the one given beside it.

The churn pods arrive by wall time, so on a busy machine a slower run also meets more of them.
`--pace cpu` makes the churn interval and the scheduler's clock follow this process's CPU time
instead: the work done is then the same however busy the machine is, which is what comparing two
trees needs. The CPU seconds of the measured phase and the load average are printed either way.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from koordpy.api.node import Node
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster

KUBE_FLOOR_PODS_PER_S = 600
SIZES = {
    "5kNodes/20kInit/10kPods": (5000, 20000, 10000),
    "500Nodes/10Init/1kPods": (500, 10, 1000),
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def node(i: int) -> Node:
    return Node.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"scheduler-perf-{i}",
                "labels": {"kubernetes.io/hostname": f"scheduler-perf-{i}"},
            },
            "spec": {},
            "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"}},
        }
    )


def _pod(name: str, requests: dict[str, str], priority: int | None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "image": "registry.k8s.io/pause:3.10",
        "name": "pause",
        "ports": [{"containerPort": 80}],
        "resources": {"requests": requests},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def default_pod(name: str) -> dict[str, Any]:
    return _pod(name, {"cpu": "100m", "memory": "500Mi"}, None)


def large_cpu_pod(name: str) -> dict[str, Any]:
    return _pod(name, {"cpu": "9", "memory": "500Mi"}, 10)


def run(
    label: str,
    nodes: int,
    init_pods: int,
    measure_pods: int,
    interval: float,
    limit: float,
    pace: Callable[[], float] = time.perf_counter,
) -> None:
    clock = VirtualClock(0.0)
    sched = Scheduler(default_configuration(), registry(), clock)
    world = MemoryCluster(sched, clock)
    t0 = time.perf_counter()
    for i in range(nodes):
        world.add_node(node(i))
    with sched.bulk():
        for i in range(init_pods):
            world.add_pod(default_pod(f"init-{i}"))
    world.run(3600.0)
    t_init = time.perf_counter() - t0
    print(f"{label:<26} nodes and init pods placed in {t_init:.1f}s; measuring", flush=True)

    measured = [f"default/pod-{i}" for i in range(measure_pods)]
    churn = 0
    cycles = 0
    # the scheduler's clock follows the wall clock from here on, as a running scheduler's does:
    # backoffs end and the pool is flushed while the measured pods are being scheduled
    base = clock.now()
    load0 = os.getloadavg()[0]
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    start = pace()
    next_churn = start
    next_tick = start
    for i in range(measure_pods):
        world.add_pod(default_pod(f"pod-{i}"))
    world.apply(sched.drain())
    while True:
        now = pace()
        if now - start > limit:
            break  # the figure is then what was bound within the limit
        clock.advance_to(max(clock.now(), base + (now - start)))
        if now >= next_churn:
            world.add_pod(large_cpu_pod(f"pod-h-{churn}"))
            churn += 1
            next_churn += interval
        if now >= next_tick:
            # kube-scheduler flushes its backoff queue once a second; a tenth keeps the figure
            # from depending on when a backoff happens to end
            sched.tick()
            world.apply(sched.drain())
            next_tick = now + 0.1
        if sched.schedule_one():
            cycles += 1
            world.apply(sched.drain())
            continue
        if all(world.views[key].node_name for key in measured):
            break
        wake = sched.next_wakeup()
        if wake is None:
            break
        # nothing to do until a backoff ends: skip the wait
        base += max(0.0, wake - clock.now())
        clock.advance_to(max(clock.now(), wake))
        sched.tick()
        world.apply(sched.drain())
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    bound = sum(1 for key in measured if world.views[key].node_name)
    rate = bound / wall
    pool = sum(q.counts()["unschedulable"] for q in sched.queues.values())
    print(
        f"{label:<26} measured {bound}/{measure_pods} bound in {wall:6.2f}s: "
        f"{rate:7.0f} pods/s (kube floor {KUBE_FLOOR_PODS_PER_S}) | CPU {cpu:6.2f}s, "
        f"{bound / cpu if cpu else 0:7.0f} pods per CPU second | churn pods {churn}, "
        f"cycles {cycles} ({cycles - bound} for churn pods), unschedulable pool at the end {pool} | "
        f"load {load0:.1f}-{os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="500Nodes/10Init/1kPods")
    parser.add_argument(
        "--nodes", type=int, help="initNodes (with --init-pods and --pods: a size of your own)"
    )
    parser.add_argument("--init-pods", type=int)
    parser.add_argument("--pods", type=int, help="measurePods")
    parser.add_argument("--interval-ms", type=float, default=200.0, help="churn interval (upstream: 200)")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop measuring after this long")
    parser.add_argument(
        "--pace",
        choices=("wall", "cpu"),
        default="wall",
        help="what the churn interval and the scheduler's clock follow (upstream: wall)",
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if args.nodes is not None:
        label = f"{args.nodes}Nodes/{args.init_pods or 0}Init/{args.pods or 1000}Pods"
        sizes = {label: (args.nodes, args.init_pods or 0, args.pods or 1000)}
    elif args.quick:
        sizes = {k: v for k, v in SIZES.items() if k.startswith("500")}
    else:
        sizes = {k: v for k, v in SIZES.items() if k.startswith("5k")}
    for label, (n, init, pods) in sizes.items():
        pace = time.process_time if args.pace == "cpu" else time.perf_counter
        run(label, n, init, pods, args.interval_ms / 1000.0, args.max_seconds, pace)


if __name__ == "__main__":
    main()
