"""Preemption throughput on kube-scheduler's scheduler_perf preemption workloads
(test/integration/scheduler_perf/default_preemption/performance-config.yaml), recreated on the
in-memory world with the default configuration. Prints figures; asserts nothing.

- PreemptionBasic: nodes of 4 CPU / 32Gi / 110 pods, 4 low-priority pods per node (900m, 500Mi
  each), then high-priority pods (priority 10, 3 CPU, 500Mi) created at once: each must evict 3
  pods of a node. Measured: the high-priority pods, from creation to the last one bound.
- PreemptionAsync: the same cluster; while 5,000 (per 5,000 nodes) plain pods (100m, 500Mi) are
  created at once and measured, a high-priority pod is created every 200 ms of wall time (the
  `churn` op), as upstream.
- JobPreemption (`job`, koordpy's own: scheduler_perf has no job-level preemption): the same
  full cluster, then gangs of 8 high-priority pods (priority 10, 3 CPU; Koordinator gang
  annotations, min-available 8) created at once: each member must evict 3 pods of a node, so each
  gang evicts on 8 nodes through Coscheduling's PostFilter. Run on the virtual clock to the end.
- TopologyJobPreemption (`topology`): the same with the nodes in racks of 16
  (`topology.kubernetes.io/rack`, a ClusterNetworkTopology zone > rack > node) and each gang
  asking for MustGather on the rack.

Printed for the job-level cases: the whole run until every gang is bound, and the time spent in
job-level preemption itself (wall and CPU per preemption). `--compare` runs each job-level case
twice, the trial doing every step (`JobPreemption.arrays` off, as before the array planning) and
then over the arrays, and says whether both evicted the same pods on the same nodes and bound
every pod to the same node.

The virtual clock follows wall time during the measured phase (backoff and the victims' grace
period, 0 s here, run as on a cluster), and jumps ahead only when nothing else can happen.

    python benchmarks/bench_preemption.py [--quick] [--workload basic async job topology] [--compare]
        [--profile]
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

# the zone/rack ClusterNetworkTopology of the topology benchmark's TAS workload
from benchmarks.bench_topology import RACK_KEY, ZONE_KEY
from benchmarks.bench_topology import TAS_SPEC as RACK_SPEC
from benchmarks.bench_topology import TAS_TOPOLOGY as TOPOLOGY
from koordpy.api.node import Node
from koordpy.config.models import default_configuration
from koordpy.plugins.coscheduling.preemption import JobPreemption
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
# job-level cases: (nodes, init pods, gangs), each run at every size listed
JOB_SIZES = {
    "job": [(1000, 4000, 20), (5000, 20000, 20)],
    "topology": [(1000, 4000, 20), (5000, 20000, 20)],
}
JOB_QUICK = {
    "job": [(500, 2000, 10)],
    "topology": [(512, 2048, 10)],
}
GANG_SIZE = 8
RACK_SIZE = 16


def node(i: int, racks: bool = False) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": f"n{i}"}
    if racks:
        labels[ZONE_KEY] = f"zone-{i // (RACK_SIZE * 8)}"
        labels[RACK_KEY] = f"rack-{i // RACK_SIZE}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"scheduler-perf-{i:05d}", "labels": labels},
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


def gang_member(gang: int, i: int, topology: bool) -> dict[str, Any]:
    annotations = {
        "gang.scheduling.koordinator.sh/name": f"gang-{gang}",
        "gang.scheduling.koordinator.sh/min-available": str(GANG_SIZE),
    }
    if topology:
        annotations["gang.scheduling.koordinator.sh/network-topology-spec"] = RACK_SPEC
    obj = pod(f"gang-{gang}-{i}", {**HIGH, "schedulerName": "koord-scheduler"})
    obj["metadata"]["annotations"] = annotations
    return obj


class PreemptionTimer:
    """Time spent in job-level preemption, per call."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.cpu = 0.0
        self.original = JobPreemption.preempt

    def __enter__(self) -> PreemptionTimer:
        original = self.original

        def timed(jp: JobPreemption, *args: Any) -> Any:
            t, c = time.perf_counter(), time.process_time()
            try:
                return original(jp, *args)
            finally:
                self.seconds += time.perf_counter() - t
                self.cpu += time.process_time() - c
                self.calls += 1

        JobPreemption.preempt = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        JobPreemption.preempt = self.original  # type: ignore[method-assign]


def filled_world(nodes: int, init: int, topology: bool = False) -> tuple[MemoryCluster, float]:
    """`nodes` nodes (in zones and racks with `topology`) filled with `init` low-priority pods, all
    scheduled; returns the world and the seconds the initial run took."""
    scenario = Scenario()
    scenario.nodes.extend(Node.from_dict(node(i, racks=topology)) for i in range(nodes))
    if topology:
        scenario.topologies.append(TOPOLOGY)
    world = build_world(scenario, default_configuration())
    for i in range(init):
        world.add_pod(pod(f"low-{i}", LOW))
    t_init = time.perf_counter()
    world.run(3600)
    return world, time.perf_counter() - t_init


def run_jobs(
    workload: str, nodes: int, init: int, gangs: int, profile: bool, arrays: bool = True
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """One job-level case; returns the evictions (victim, node) and where each gang pod is bound."""
    JobPreemption.arrays = arrays
    topology = workload == "topology"
    world, t_init = filled_world(nodes, init, topology)
    keys = [world.add_pod(gang_member(g, i, topology)).key for g in range(gangs) for i in range(GANG_SIZE)]
    prof = cProfile.Profile() if profile else None
    with PreemptionTimer() as timer:
        if prof is not None:
            prof.enable()
        start = time.perf_counter()
        world.run(3600)
        elapsed = time.perf_counter() - start
        if prof is not None:
            prof.disable()
    views = world.views
    bound = sum(1 for k in keys if views[k].node_name and k not in world.deleted)
    name = "TopologyJobPreemption" if topology else "JobPreemption"
    calls = max(timer.calls, 1)
    print(
        f"{name:<21} {'arrays' if arrays else 'trial ':<6} nodes={nodes:<5} init={init:<6} "
        f"gangs={gangs}x{GANG_SIZE} bound={bound:<4} evicted={len(world.evictions):<4} "
        f"init-run={t_init:6.2f}s measured-run={elapsed:6.2f}s {1000 * elapsed / gangs:7.1f} ms/gang  "
        f"preemptions={timer.calls} {1000 * timer.seconds / calls:7.1f} ms/preemption "
        f"({1000 * timer.cpu / calls:7.1f} ms CPU)"
    )
    if prof is not None:
        pstats.Stats(prof).sort_stats(os.environ.get("SORT", "cumulative")).print_stats(40)
    JobPreemption.arrays = True
    return [(e.victim, e.node) for e in world.evictions], {k: views[k].node_name for k in keys}


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
    world, t_init = filled_world(nodes, init)
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
    parser.add_argument(
        "--quick", action="store_true", help="500 nodes, 2,000 init pods, 500 measured (job cases: 10 gangs)"
    )
    parser.add_argument(
        "--workload", nargs="+", choices=[*SIZES, *JOB_SIZES], default=["basic", "async", "job", "topology"]
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the measured phase")
    parser.add_argument(
        "--compare", action="store_true", help="job-level cases: the trial first, then the arrays"
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    for workload in args.workload:
        if workload in JOB_SIZES:
            for job_sizes in (JOB_QUICK if args.quick else JOB_SIZES)[workload]:
                if args.compare:
                    trial = run_jobs(workload, *job_sizes, args.profile, arrays=False)
                    same = run_jobs(workload, *job_sizes, args.profile) == trial
                    print(f"  same evictions and bindings as the trial: {'yes' if same else 'NO'}")
                else:
                    run_jobs(workload, *job_sizes, args.profile)
            continue
        sizes, floor = SIZES[workload]
        if args.quick:
            sizes = QUICK[workload]
        run(workload, *sizes, floor, args.profile)


if __name__ == "__main__":
    main()
