"""kube-scheduler's scheduler_perf `volumes/` workloads (test/integration/scheduler_perf/volumes/
performance-config.yaml), offline on the in-memory world with the default configuration. Prints
figures; asserts nothing.

    python benchmarks/bench_volumes.py                      # every workload at its upstream size
    python benchmarks/bench_volumes.py --quick              # 500Nodes sizes (PreemptionPVs: 500 nodes)
    python benchmarks/bench_volumes.py --workload SchedulingCSIPVs --size 5000Nodes
    python benchmarks/bench_volumes.py --workload SchedulingCSIPVs --profile

The workloads, as upstream has them (each: `initNodes` nodes, `initPods` pods scheduled before the
clock starts, then `measurePods` pods measured):

- SchedulingSecrets: pods of pod-with-secret-volume.yaml (100m, 500Mi, a secret volume);
- SchedulingInTreePVs: each pod with a claim of its own, bound to an in-tree AWS EBS volume
  (pv-aws.yaml, pvc.yaml); nodes of node-default.yaml, no CSINode;
- SchedulingMigratedInTreePVs: the same volumes, on nodes whose CSINode has the
  `ebs.csi.aws.com` driver with 39 attachments and says `kubernetes.io/aws-ebs` is migrated to it
  (and `attachable-volumes-csi-ebs.csi.aws.com: 39` in the node's allocatable): NodeVolumeLimits
  counts each in-tree volume as the CSI driver's;
- SchedulingCSIPVs: the same nodes, with CSI volumes of that driver (pv-csi.yaml);
- PreemptionPVs: 4 low-priority pods a node (900m), then high-priority pods (3 CPU) with the
  in-tree volumes of SchedulingInTreePVs: each must evict 3 pods of a node.

The volumes are created as scheduler_perf creates them (CreatePodWithPersistentVolume with
bindVolume): for pod i of a `createPods` op in namespace `namespace-<op>`, the claim `pvc-i`
(pvc.yaml: ReadOnlyMany, 1Gi, `pv.kubernetes.io/bind-completed`) with `volumeName` set, then the
volume `<namespace>-vol-<i>` with a `claimRef` naming the claim (no uid), each created and then
given its Bound status by a second write, and only then the pod. scheduler_perf runs no PV
controller, and neither does this: the scheduler is handed each object as its informers would be
(an Add, then an Update), finds every claim bound, and has no volume to bind. The EBS volume ID is
`vol-<i>` (the same in both namespaces, as upstream: init pod i and measured pod i name the same
EBS volume); the CSI volume handle is the volume's name.

The measured phase counts from the first measured object handed to the scheduler to the last
measured pod bound: the claims' and volumes' intake is in it, as it is in kube's figure (its
objects are created while the scheduler runs). The clock follows wall time (backoffs and the
victims' grace period, 0 s, run as on a cluster) and jumps only when nothing else can happen.

kube floor: the workload's `threshold` in kubernetes' volumes/performance-config.yaml before the
thresholds were raised (commit 95f0849), and in brackets the newest one stored (commit 240d43d);
PreemptionPVs has none.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import os
import pstats
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_preemption import Driver, Progress
from benchmarks.bench_scheduling import machine
from koordpy.api.node import Node
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster

CSI_DRIVER = "ebs.csi.aws.com"
MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
ATTACH_LIMIT = 39
# the namespaces scheduler_perf gives the init and the measured createPods ops (their op index)
INIT_NS = "namespace-1"
MEASURE_NS = "namespace-2"
_VERSIONS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    # "secret", "aws" (in-tree EBS) or "csi": what each pod mounts; "" for none
    init_volume: str
    measure_volume: str
    # the nodes' CSINode: none, the CSI driver, or the CSI driver with aws-ebs migrated to it
    csi_node: str
    preemption: bool
    # upstream sizes: label -> (initNodes, initPods, measurePods)
    sizes: dict[str, tuple[int, int, int]]
    # the size with a threshold, its threshold before they were raised, and the newest one
    measured_size: str
    floor: int | None
    later_floor: int | None


WORKLOADS = {
    w.name: w
    for w in (
        Workload(
            "SchedulingSecrets",
            "secret",
            "secret",
            "",
            False,
            {
                "500Nodes": (500, 500, 1000),
                "5000Nodes": (5000, 5000, 1000),
                "5000Nodes_10000Pods": (5000, 1000, 10000),
            },
            "5000Nodes_10000Pods",
            260,
            790,
        ),
        Workload(
            "SchedulingInTreePVs",
            "aws",
            "aws",
            "",
            False,
            {
                "500Nodes": (500, 500, 1000),
                "5000Nodes": (5000, 5000, 1000),
                "5000Nodes_2000Pods": (5000, 1000, 2000),
            },
            "5000Nodes_2000Pods",
            90,
            290,
        ),
        Workload(
            "SchedulingMigratedInTreePVs",
            "aws",
            "aws",
            "migrated",
            False,
            {
                "500Nodes": (500, 500, 1000),
                "5000Nodes": (5000, 5000, 1000),
                "5000Nodes_5000Pods": (5000, 5000, 5000),
            },
            "5000Nodes_5000Pods",
            35,
            100,
        ),
        Workload(
            "SchedulingCSIPVs",
            "csi",
            "csi",
            "csi",
            False,
            {
                "500Nodes": (500, 500, 1000),
                "5000Nodes": (5000, 5000, 1000),
                "5000Nodes_5000Pods": (5000, 5000, 5000),
            },
            "5000Nodes_5000Pods",
            48,
            100,
        ),
        Workload(
            "PreemptionPVs",
            "",
            "aws",
            "",
            True,
            {"500Nodes": (500, 2000, 500), "1000Nodes": (1000, 4000, 1000)},
            "1000Nodes",
            None,
            None,
        ),
    )
}


def node(i: int, csi_node: str) -> Node:
    """node-default.yaml; with a CSINode, nodeAllocatableStrategy's allocatable as well."""
    capacity = {"pods": "110", "cpu": "4", "memory": "32Gi"}
    status: dict[str, Any] = {"capacity": capacity, "conditions": [{"type": "Ready", "status": "True"}]}
    if csi_node:
        # the API server defaults allocatable to capacity; the strategy adds the attach limit
        status["allocatable"] = {**capacity, f"attachable-volumes-csi-{CSI_DRIVER}": str(ATTACH_LIMIT)}
    return Node.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"scheduler-perf-{i}"},
            "spec": {},
            "status": status,
        }
    )


def csi_node_object(name: str, migrated: bool) -> dict[str, Any]:
    """The CSINode nodeAllocatableStrategy creates beside each node."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {
            "name": name,
            "annotations": {MIGRATED_PLUGINS: "kubernetes.io/aws-ebs" if migrated else ""},
        },
        "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": name, "allocatable": {"count": ATTACH_LIMIT}}]},
    }


def _spec(cpu: str, priority: int | None = None, grace: int | None = None) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "500Mi"}
    spec: dict[str, Any] = {
        "containers": [
            {
                "image": "registry.k8s.io/pause:3.10",
                "name": "pause",
                "ports": [{"containerPort": 80}],
                "resources": {"requests": resources, "limits": resources},
            }
        ]
    }
    if priority is not None:
        spec["priority"] = priority
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return spec


# the pod templates: scheduler_perf's default pod (and pod-with-secret-volume.yaml's, less its
# volume), pod-low-priority.yaml and pod-high-priority.yaml
DEFAULT = _spec("100m")
LOW = _spec("900m", grace=0)
HIGH = _spec("3000m", priority=10)


def pod(namespace: str, name: str, spec: dict[str, Any], volume: dict[str, Any] | None) -> dict[str, Any]:
    if volume is not None:
        spec = {**spec, "volumes": [volume]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def claim(namespace: str, i: int, volume_name: str, phase: str) -> dict[str, Any]:
    """pvc.yaml as `pvc-<i>`, bound to its volume by name."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"pvc-{i}",
            "namespace": namespace,
            "annotations": {"pv.kubernetes.io/bind-completed": "true"},
        },
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": volume_name,
        },
        "status": {"phase": phase},
    }


def volume(namespace: str, i: int, source: str, phase: str) -> dict[str, Any]:
    """pv-aws.yaml or pv-csi.yaml as getCustomVolumeFactory and CreatePodWithPersistentVolume make
    it: named `<namespace>-vol-<i>`, pre-bound to `pvc-<i>` by a claimRef without uid."""
    name = f"{namespace}-vol-{i}"
    spec: dict[str, Any] = {
        "accessModes": ["ReadOnlyMany"],
        "capacity": {"storage": "1Gi"},
        "persistentVolumeReclaimPolicy": "Retain",
        "claimRef": {
            "kind": "PersistentVolumeClaim",
            "namespace": namespace,
            "name": f"pvc-{i}",
            "apiVersion": "v1",
        },
    }
    if source == "csi":
        spec["csi"] = {"driver": CSI_DRIVER, "volumeHandle": name}
    else:
        spec["awsElasticBlockStore"] = {"volumeID": f"vol-{i}"}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"phase": phase},
    }


def _version(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server stores it: under the next resourceVersion."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(next(_VERSIONS))}}


def _bound(obj: dict[str, Any], phase: str) -> dict[str, Any]:
    """The object after its UpdateStatus: a new resourceVersion, the Bound phase."""
    return _version({**obj, "status": {"phase": phase}})


def create_pods(
    world: MemoryCluster, namespace: str, count: int, kind: str, spec: dict[str, Any]
) -> Iterator[str]:
    """One createPods op: each pod's claim and volume first (as scheduler_perf creates them), then
    the pod; yields each pod's key."""
    sched = world.scheduler
    for i in range(count):
        mount: dict[str, Any] | None = None
        if kind == "secret":
            mount = {"name": "secret", "secret": {"secretName": "secret"}}
        elif kind:
            pv = _version(volume(namespace, i, kind, "Pending"))
            pvc = _version(claim(namespace, i, pv["metadata"]["name"], "Pending"))
            sched.on_object("PersistentVolumeClaim", "Add", pvc)
            sched.on_object("PersistentVolumeClaim", "Update", _bound(pvc, "Bound"), pvc)
            sched.on_object("PersistentVolume", "Add", pv)
            sched.on_object("PersistentVolume", "Update", _bound(pv, "Bound"), pv)
            mount = {"name": "vol", "persistentVolumeClaim": {"claimName": f"pvc-{i}"}}
        yield world.add_pod(pod(namespace, f"pod-{i}", spec, mount)).key


def build(w: Workload, nodes: int, init_pods: int) -> tuple[MemoryCluster, list[str], float]:
    """The cluster with its init pods scheduled; returns the world, the init pods' keys and the
    seconds it took."""
    t0 = time.perf_counter()
    clock = VirtualClock(0.0)
    sched = Scheduler(default_configuration(), registry(), clock)
    # no storage world: scheduler_perf runs no PV controller, and its claims are bound already
    world = MemoryCluster(sched, clock)
    for i in range(nodes):
        n = node(i, w.csi_node)
        world.add_node(n)
        if w.csi_node:
            sched.on_object("CSINode", "Add", csi_node_object(n.name, w.csi_node == "migrated"))
    with sched.bulk():
        keys = list(create_pods(world, INIT_NS, init_pods, w.init_volume, LOW if w.preemption else DEFAULT))
    world.run(3600.0)
    return world, keys, time.perf_counter() - t0


@dataclass(frozen=True, slots=True)
class Figures:
    bound: int
    init_bound: int
    init_seconds: float
    seconds: float
    cpu: float
    evicted: int


def measure(
    w: Workload, nodes: int, init_pods: int, measure_pods: int, profile: bool = False
) -> tuple[MemoryCluster, list[str], Figures]:
    """The workload at that size: the world at the end, the measured pods' keys, the figures."""
    world, init_keys, t_init = build(w, nodes, init_pods)
    init_bound = sum(1 for k in init_keys if world.views[k].node_name)
    prof = cProfile.Profile() if profile else None
    if prof is not None:
        prof.enable()
    cpu0 = time.process_time()
    start = time.perf_counter()
    driver = Driver(world)
    spec = HIGH if w.preemption else DEFAULT
    keys = list(create_pods(world, MEASURE_NS, measure_pods, w.measure_volume, spec))
    progress = Progress(world, keys)
    while not progress.done() and driver.step():
        pass
    seconds = time.perf_counter() - start
    cpu_s = time.process_time() - cpu0
    if prof is not None:
        prof.disable()
        pstats.Stats(prof).sort_stats(os.environ.get("SORT", "cumulative")).print_stats(40)
    return world, keys, Figures(progress.bound(), init_bound, t_init, seconds, cpu_s, len(world.evictions))


def floor_text(w: Workload) -> str:
    if w.floor is None:
        return "kube: no floor"
    return f"kube floor {w.floor} ({w.later_floor}) pods/s at {w.measured_size}"


def run(w: Workload, size: str, profile: bool) -> None:
    nodes, init_pods, measure_pods = w.sizes[size]
    load0 = os.getloadavg()[0]
    print(f"{w.name} {size}: {nodes} nodes, {init_pods} init pods, {measure_pods} measured", flush=True)
    _, _, f = measure(w, nodes, init_pods, measure_pods, profile)
    print(f"  init: {f.init_bound}/{init_pods} bound in {f.init_seconds:.1f}s (nodes, objects, scheduling)")
    evicted = f" evicted={f.evicted}" if w.preemption else ""
    print(
        f"{w.name:<28} {size:<20} measured {f.bound}/{measure_pods} bound{evicted} in {f.seconds:6.2f}s: "
        f"{f.bound / f.seconds:7.0f} pods/s (scheduling, {floor_text(w)}) | CPU {f.cpu:6.2f}s, "
        f"{1000 * f.cpu / max(f.bound, 1):6.2f} ms CPU per pod | load {load0:.1f}-{os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", nargs="+", choices=sorted(WORKLOADS), help="default: every one")
    parser.add_argument(
        "--size", help="one of the workload's upstream sizes (default: the one with a threshold)"
    )
    parser.add_argument("--quick", action="store_true", help="the 500Nodes sizes")
    parser.add_argument("--profile", action="store_true", help="cProfile the measured phase")
    args = parser.parse_args()
    print(f"machine: {machine()}", flush=True)
    for name in args.workload or list(WORKLOADS):
        w = WORKLOADS[name]
        size = args.size or ("500Nodes" if args.quick else w.measured_size)
        if size not in w.sizes:
            parser.error(f"{name} has the sizes {', '.join(w.sizes)}")
        run(w, size, args.profile)


if __name__ == "__main__":
    main()
