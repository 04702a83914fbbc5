"""Preemption throughput on kube-scheduler's scheduler_perf preemption workloads
(test/integration/scheduler_perf/default_preemption/performance-config.yaml), recreated on the
in-memory world with the default configuration. Prints figures; asserts nothing.

- PreemptionBasic: nodes of 4 CPU / 32Gi / 110 pods, 4 low-priority pods per node (900m, 500Mi
  each), then high-priority pods (priority 10, 3 CPU, 500Mi) created at once: each must evict 3
  pods of a node. Measured: the high-priority pods, from creation to the last one bound.
- PreemptionAsync: the same cluster; while 5,000 (per 5,000 nodes) plain pods (100m, 500Mi) are
  created at once and measured, a high-priority pod is created every 200 ms of wall time (the
  `churn` op), as upstream.

The virtual clock follows wall time during the measured phase (backoff and the victims' grace
period, 0 s here, run as on a cluster), and jumps ahead only when nothing else can happen.

    python benchmarks/bench_preemption.py [--quick] [--workload basic async] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import heapq
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine
from koordpy.api.node import Node
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.runner import build_world

# upstream sizes: (nodes, init pods, measured pods), and kube-scheduler's CI threshold (pods/s)
SIZES = {
    "basic": ((1000, 4000, 1000), None),
    "async": ((5000, 20000, 5000), 570),
}
QUICK = {
    "basic": (500, 2000, 500),
    "async": (500, 2000, 500),
}
CHURN_INTERVAL = 0.2


def node(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"scheduler-perf-{i:05d}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
        "status": {"allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"}},
    }


def _spec(cpu: str, priority: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "ports": [{"containerPort": 80}],
                "resources": {
                    "requests": {"cpu": cpu, "memory": "500Mi"},
                    "limits": {"cpu": cpu, "memory": "500Mi"},
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return spec


LOW = _spec("900m", None)
HIGH = _spec("3000m", 10)
DEFAULT = _spec("100m", None)


def pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


class Driver:
    """The memory world's loop, with pods created while it runs and the clock on wall time."""

    def __init__(self, world: MemoryCluster) -> None:
        self.world = world
        self.offset = 0.0
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0 + self.offset

    def step(self) -> bool:
        """One scheduling attempt or one move of the clock; False when nothing can happen."""
        world, sched = self.world, self.world.scheduler
        t = max(self.now(), world.clock.now())
        world.clock.advance_to(t)
        due = False
        while world._deletions and world._deletions[0][0] <= t:
            _, _, key = heapq.heappop(world._deletions)
            world.delete_pod(key)
            due = True
        if due:
            sched.tick()
            world.apply(sched.drain())
        if sched.schedule_one():
            world.apply(sched.drain())
            return True
        times = [
            x
            for x in (
                sched.next_wakeup(include_flush=False),
                world._deletions[0][0] if world._deletions else None,
            )
            if x is not None
        ]
        if not times:
            return False
        wake = min(times)
        if wake > t:
            # nothing to do until then: jump, as the simulator does
            self.offset += wake - t
            world.clock.advance_to(wake)
        sched.tick()
        world.apply(sched.drain())
        return True


class Progress:
    """How many of the measured pods are bound, checked from where the last look stopped (pods
    are bound roughly in creation order)."""

    def __init__(self, world: MemoryCluster, keys: list[str]) -> None:
        self.world = world
        self.keys = keys
        self.checked = 0

    def done(self) -> bool:
        views = self.world.views
        while self.checked < len(self.keys) and views[self.keys[self.checked]].node_name:
            self.checked += 1
        if self.checked < len(self.keys):
            return False
        # a pod bound earlier may have been evicted since: count again
        self.checked = 0
        return self.bound() == len(self.keys)

    def bound(self) -> int:
        views = self.world.views
        return sum(1 for k in self.keys if views[k].node_name and k not in self.world.deleted)


def run(workload: str, nodes: int, init: int, measured: int, floor: int | None, profile: bool) -> None:
    scenario = Scenario()
    scenario.nodes.extend(Node.from_dict(node(i)) for i in range(nodes))
    world = build_world(scenario, default_configuration())
    for i in range(init):
        world.add_pod(pod(f"low-{i}", LOW))
    t_init = time.perf_counter()
    world.run(3600)
    t_init = time.perf_counter() - t_init
    prof = cProfile.Profile() if profile else None
    driver = Driver(world)
    driver.t0 = time.perf_counter()
    keys: list[str] = []
    preemptors: list[str] = []
    if workload == "basic":
        for i in range(measured):
            keys.append(world.add_pod(pod(f"high-{i}", HIGH)).key)
    else:
        for i in range(measured):
            keys.append(world.add_pod(pod(f"measured-{i}", DEFAULT)).key)
    progress = Progress(world, keys)
    next_churn = 0.0
    if prof is not None:
        prof.enable()
    start = time.perf_counter()
    while True:
        if workload == "async" and time.perf_counter() - start >= next_churn:
            preemptors.append(world.add_pod(pod(f"churn-{len(preemptors)}", HIGH)).key)
            next_churn += CHURN_INTERVAL
        if not driver.step():
            break
        if progress.done():
            break
    elapsed = time.perf_counter() - start
    if prof is not None:
        prof.disable()
    done = progress.bound()
    evicted = len(world.evictions)
    floor_text = f"kube CI floor {floor} pods/s" if floor else "kube: no floor"
    extra = f" preemptors={len(preemptors)}" if workload == "async" else ""
    print(
        f"Preemption{workload.capitalize():<6} nodes={nodes:<5} init={init:<6} measured={measured:<5} "
        f"bound={done:<5} evicted={evicted:<5}{extra} init-run={t_init:6.2f}s measured-run={elapsed:6.2f}s "
        f"{done / elapsed:7.0f} pods/s  {1000 * elapsed / max(done, 1):6.2f} ms/pod  ({floor_text})"
    )
    if prof is not None:
        pstats.Stats(prof).sort_stats(os.environ.get("SORT", "cumulative")).print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="500 nodes, 2,000 init pods, 500 measured")
    parser.add_argument("--workload", nargs="+", choices=sorted(SIZES), default=["basic", "async"])
    parser.add_argument("--profile", action="store_true", help="cProfile the measured phase")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    for workload in args.workload:
        sizes, floor = SIZES[workload]
        if args.quick:
            sizes = QUICK[workload]
        run(workload, *sizes, floor, args.profile)


if __name__ == "__main__":
    main()
