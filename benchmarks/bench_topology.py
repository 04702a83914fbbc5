"""Network-topology-aware gang placement at scale: the gather for one gang on a 3-layer tree
(spines x blocks x nodes, 4,096 nodes by default), with the default `koord-scheduler` profile.
Prints figures (median of several runs); asserts nothing.

Each node has 8 GPUs and 64 CPUs; one node in four (chosen with a fixed seed) already runs a pod
holding 1 to 7 of its GPUs, so few blocks are whole and the gang's offers differ from node to
node. Gang pods ask for 1 GPU and 4 CPUs. Timed separately:

- tree:   the topology tree from the nodes' labels, and its arrays (one level per layer), both
          kept by the scheduler until the nodes change;
- offers: `offer_slots`, how many of the gang's pods each node takes one after the other (the
          profile's real PreFilter and Filter over every node, then the arithmetic);
- plan:   `plan_placement`, offers summed per layer, candidate search, binpack and distribution;
- total:  Coscheduling's `plan_batch` as a scheduling cycle calls it (offers + plan + bookkeeping).

Then a stream of node updates on the same 4,096 nodes, as a real cluster sends them (status
updates that reach the scheduler, and with `moves` one node per gang relabelled to another block),
`--updates-per-gang` of them between consecutive 4-pod gangs that must gather in one block; printed
as milliseconds per node update and per gang, with the tree rebuilt after any node change (the rule
before) and with the tree following only the nodes' presence and the labels its layers read.

Then kube-scheduler's scheduler_perf podgroup/tas workload (5000Nodes_750Gangs_3000Pods): 5,000
nodes of 4 CPUs, 100 per zone and per rack (node-i in zone-(i/100) and rack-(i/100)), 750 gangs of
4 pods (100m CPU, 100Mi) that must gather in one rack, scheduled to the end on the virtual clock
as `koordpy simulate` does; printed as milliseconds per gang (scheduling only, the pods' intake
apart).

    .venv/bin/python benchmarks/bench_topology.py [--spines 8] [--blocks 16] [--nodes-per-block 32]
        [--gang 256] [--repeats 7] [--tas-nodes 5000] [--tas-gangs 750] [--tas-pods 4] [--only-tas]
        [--stream-gangs 200] [--stream-pods 4] [--updates-per-gang 8] [--only-stream]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.plugins.coscheduling.networktopology import (
    Placement,
    parse_network_topology_spec,
    plan_placement,
)
from koordpy.plugins.coscheduling.offers import offer_slots
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from koordpy.status.topology import build_tree, parse_layer_chain

SPINE_KEY = "network.topology.nvidia.com/spine"
BLOCK_KEY = "network.topology.nvidia.com/block"
GPU = "nvidia.com/gpu"
TOPOLOGY: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "ClusterNetworkTopology",
    "metadata": {"name": "default"},
    "spec": {
        "networkTopologySpec": [
            {"labelKey": [SPINE_KEY], "topologyLayer": "SpineLayer"},
            {"labelKey": [BLOCK_KEY], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
        ]
    },
}


def node(name: str, spine: str, block: str) -> Node:
    return Node.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {SPINE_KEY: spine, BLOCK_KEY: block}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}},
        }
    )


def pod(
    name: str,
    gpus: int,
    annotations: dict[str, str] | None = None,
    node_name: str = "",
    host_port: int | None = None,
    spread: bool = False,
) -> Pod:
    container: dict[str, Any] = {
        "name": "main",
        "image": "trainer",
        "resources": {"requests": {"cpu": str(4 * gpus), "memory": "16Gi", GPU: str(gpus)}},
    }
    if host_port is not None:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    spec: dict[str, Any] = {"schedulerName": "koord-scheduler", "containers": [container]}
    labels: dict[str, str] = {}
    if spread:
        labels["app"] = "train"
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 64,
                "topologyKey": "network.topology.nvidia.com/block",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "train"}},
            }
        ]
    if node_name:
        spec["nodeName"] = node_name
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": annotations or {},
                "labels": labels,
            },
            "spec": spec,
        }
    )


def cluster(spines: int, blocks: int, per_block: int, seed: int = 7) -> tuple[Scheduler, list[Node]]:
    scheduler = Scheduler(default_configuration(), registry(), VirtualClock(0.0))
    rng = random.Random(seed)
    nodes: list[Node] = []
    for s in range(spines):
        for b in range(blocks):
            for n in range(per_block):
                item = node(f"node-{s:02d}-{b:02d}-{n:02d}", f"s{s}", f"b{b}")
                scheduler.on_node_add(item)
                nodes.append(item)
    for item in nodes:
        if rng.random() < 0.25:
            scheduler.on_pod_add(pod(f"busy-{item.name}", rng.randint(1, 7), node_name=item.name))
    scheduler.on_object("ClusterNetworkTopology", "Add", TOPOLOGY)
    return scheduler, nodes


def gang(size: int, spec: str, host_port: int | None, spread: bool = False) -> list[Pod]:
    annotations = {
        "gang.scheduling.koordinator.sh/name": "train",
        "gang.scheduling.koordinator.sh/min-available": str(size),
        "gang.scheduling.koordinator.sh/network-topology-spec": spec,
    }
    return [
        pod(
            f"train-{i:04d}",
            1,
            {**annotations, "gang.scheduling.koordinator.sh/network-topology-index": str(i)},
            host_port=host_port,
            spread=spread,
        )
        for i in range(size)
    ]


def median_ms(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000, result


def run_case(
    name: str, args: argparse.Namespace, spec: str, host_port: int | None = None, spread: bool = False
) -> None:
    scheduler, nodes = cluster(args.spines, args.blocks, args.nodes_per_block)
    profile = scheduler.profiles["koord-scheduler"]
    snap = scheduler.cache.snapshot
    members = gang(args.gang, spec, host_port, spread)
    for member in members:
        scheduler.on_pod_add(member)
    rows = snap.live_rows()
    chain = parse_layer_chain(TOPOLOGY["spec"])
    topology_spec = parse_network_topology_spec(spec, "bench")

    def tree_and_levels() -> Any:
        made = build_tree(chain, nodes)
        made.levels()
        return made

    tree_ms, tree = median_ms(tree_and_levels, args.repeats)
    offers_ms, offers = median_ms(lambda: offer_slots(profile, members, rows), args.repeats)
    slots = {snap.node_name(r): int(n) for r, n in enumerate(offers.slots.tolist()) if n}
    plan_ms, plan = median_ms(lambda: plan_placement(tree, topology_spec, members, slots), args.repeats)
    coscheduling: Any = profile.plugin("Coscheduling")
    total_ms, verdict = median_ms(lambda: coscheduling.plan_batch(members[0], members), args.repeats)

    if isinstance(plan, Placement):
        where = (
            f"{plan.layer} {'/'.join(plan.domain) or '(cluster)'} on {len(set(plan.nodes.values()))} nodes"
        )
    else:
        where = f"not placed: {plan.message[:80]}"
    if verdict is not None:
        where += f" (plan_batch: {verdict[0][:60]})"
    print(
        f"{name:<28} nodes={len(nodes):<5} gang={args.gang:<4} slots={sum(slots.values()):<6} "
        f"tree={tree_ms:7.1f} ms  offers={offers_ms:7.1f} ms  plan={plan_ms:7.1f} ms  "
        f"plan_batch={total_ms:7.1f} ms  -> {where}"
    )


ZONE_KEY = "topology.kubernetes.io/zone"
RACK_KEY = "topology.kubernetes.io/rack"
TAS_TOPOLOGY: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "ClusterNetworkTopology",
    "metadata": {"name": "default"},
    "spec": {
        "networkTopologySpec": [
            {"labelKey": [ZONE_KEY], "topologyLayer": "ZoneLayer"},
            {"labelKey": [RACK_KEY], "parentTopologyLayer": "ZoneLayer", "topologyLayer": "RackLayer"},
            {"parentTopologyLayer": "RackLayer", "topologyLayer": "NodeTopologyLayer"},
        ]
    },
}
TAS_SPEC = '{"gatherStrategy":[{"layer":"RackLayer","strategy":"MustGather"}]}'


def tas_world(node_count: int, gangs: int, per_gang: int) -> MemoryCluster:
    """scheduler_perf podgroup/tas: templates/node.yaml, podgroup.yaml (a gang of minCount pods
    whose topology constraint is the rack) and gang-pod.yaml, as Koordinator gang annotations."""
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    for i in range(node_count):
        world.add_node(
            Node.from_dict(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": f"node-{i}",
                        "labels": {
                            "kubernetes.io/hostname": f"node-{i}",
                            ZONE_KEY: f"zone-{i // 100}",
                            RACK_KEY: f"rack-{i // 100}",
                        },
                    },
                    "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
                }
            )
        )
    world.scheduler.on_object("ClusterNetworkTopology", "Add", TAS_TOPOLOGY)
    spec = {
        "schedulerName": "koord-scheduler",
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10.1",
                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
            }
        ],
    }
    with world.scheduler.bulk():
        for i in range(gangs * per_gang):
            name = f"gang-{i // per_gang}"
            annotations = {
                "gang.scheduling.koordinator.sh/name": name,
                "gang.scheduling.koordinator.sh/min-available": str(per_gang),
                "gang.scheduling.koordinator.sh/network-topology-spec": TAS_SPEC,
            }
            world.add_pod(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"test-tas-scheduling-{i}",
                        "namespace": "tas-0",
                        "annotations": annotations,
                    },
                    "spec": spec,
                }
            )
    return world


def run_tas(args: argparse.Namespace) -> None:
    if args.tas_gangs <= 0:
        return
    world = tas_world(args.tas_nodes, args.tas_gangs, args.tas_pods)
    t0 = time.perf_counter()
    world.run(3600.0)
    elapsed = time.perf_counter() - t0
    cache = world.scheduler.cache
    racks: dict[int, set[int]] = {}
    bound = 0
    for i, key in enumerate(world.order):
        state = cache.pod_state(key)
        if state is not None:
            bound += 1
            racks.setdefault(i // args.tas_pods, set()).add(int(state.node_name.split("-")[1]) // 100)
    gathered = sum(1 for held in racks.values() if len(held) == 1)
    gangs = args.tas_gangs
    print(
        f"{'podgroup/tas, MustGather rack':<28} nodes={args.tas_nodes:<5} gangs={gangs}x{args.tas_pods:<3} "
        f"bound={bound:<5} in one rack={gathered:<4} schedule={elapsed:6.2f} s  "
        f"{elapsed * 1000 / gangs:6.2f} ms per gang  {bound / elapsed:6.0f} pods/s"
    )


BLOCK_SPEC = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}'


def stream_world(args: argparse.Namespace) -> tuple[MemoryCluster, list[Node]]:
    """The 3-layer cluster of the gather cases (4,096 nodes by default), its topology, and a
    MemoryCluster to carry out the bindings."""
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    nodes = [
        node(f"node-{s:02d}-{b:02d}-{n:02d}", f"s{s}", f"b{b}")
        for s in range(args.spines)
        for b in range(args.blocks)
        for n in range(args.nodes_per_block)
    ]
    for item in nodes:
        world.add_node(item)
    world.scheduler.on_object("ClusterNetworkTopology", "Add", TOPOLOGY)
    return world, nodes


def updated(item: Node, beat: int, block: str | None = None) -> Node:
    """The node as a status update that reaches the scheduler shows it (an annotation written with
    the heartbeat, so the world passes it on); with `block`, moved to that block as well."""
    labels = {SPINE_KEY: item.labels[SPINE_KEY], BLOCK_KEY: block or item.labels[BLOCK_KEY]}
    return Node.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": item.name,
                "labels": labels,
                "annotations": {"example.com/heartbeat": str(beat)},
            },
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}},
        }
    )


def run_stream(args: argparse.Namespace, moves: bool, every_change_rebuilds: bool) -> dict[str, str]:
    """Node updates streaming in between 4-pod topology gangs, as on a real cluster: per gang,
    `--updates-per-gang` node updates, then the gang's pods, scheduled to the end. With `moves`,
    one of the updates per gang also moves its node to another block. With
    `every_change_rebuilds`, the topology tree is dropped after the updates, as it was before the
    tree followed only the labels its layers read (the next plan builds it anew). Returns where
    each pod went."""
    world, nodes = stream_world(args)
    scheduler = world.scheduler
    coscheduling: Any = scheduler.profiles["koord-scheduler"].plugin("Coscheduling")
    view = coscheduling.topology
    world.run(60.0)
    rng = random.Random(16)
    update_s = gang_s = 0.0
    beat = 0
    for g in range(args.stream_gangs):
        batch = []
        for u in range(args.updates_per_gang):
            beat += 1
            i = rng.randrange(len(nodes))
            block = f"b{rng.randrange(args.blocks)}" if moves and u == 0 else None
            nodes[i] = updated(nodes[i], beat, block)
            batch.append(nodes[i])
        t0 = time.perf_counter()
        for item in batch:
            scheduler.on_node_update(item)
        update_s += time.perf_counter() - t0
        if every_change_rebuilds:
            view._reset()  # the rule before: any node change, a new tree at the next plan
        t0 = time.perf_counter()
        with scheduler.bulk():
            for i in range(args.stream_pods):
                world.add_pod(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"g{g}-{i}",
                            "namespace": "default",
                            "annotations": {
                                "gang.scheduling.koordinator.sh/name": f"g{g}",
                                "gang.scheduling.koordinator.sh/min-available": str(args.stream_pods),
                                "gang.scheduling.koordinator.sh/network-topology-spec": BLOCK_SPEC,
                            },
                        },
                        "spec": {
                            "schedulerName": "koord-scheduler",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "trainer",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: "1"}},
                                }
                            ],
                        },
                    }
                )
        world.run(60.0)
        gang_s += time.perf_counter() - t0
    updates = max(args.stream_gangs * args.updates_per_gang, 1)
    bound = sum(1 for key in world.order if scheduler.cache.pod_state(key) is not None)
    rule = "before (any change rebuilds)" if every_change_rebuilds else "after (labels the layers read)"
    print(
        f"{'stream, moves' if moves else 'stream, heartbeats':<20} {rule:<31} nodes={len(nodes):<5} "
        f"gangs={args.stream_gangs}x{args.stream_pods} updates={updates:<5} bound={bound:<5} "
        f"{update_s * 1000 / updates:6.3f} ms per node update  "
        f"{gang_s * 1000 / args.stream_gangs:6.2f} ms per gang  "
        f"(tree builds {view.builds}, updates {view.updates})"
    )
    return {key: state.node_name for key in world.order if (state := scheduler.cache.pod_state(key))}


def run_streams(args: argparse.Namespace) -> None:
    for moves in (False, True):
        before = run_stream(args, moves, every_change_rebuilds=True)
        after = run_stream(args, moves, every_change_rebuilds=False)
        print(f"{'':<20} same placements before and after: {'yes' if before == after else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spines", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=16, help="blocks per spine")
    parser.add_argument("--nodes-per-block", type=int, default=32)
    parser.add_argument("--gang", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--tas-nodes", type=int, default=5000)
    parser.add_argument("--tas-gangs", type=int, default=750)
    parser.add_argument("--tas-pods", type=int, default=4, help="pods per gang")
    parser.add_argument("--only-tas", action="store_true", help="run only the podgroup/tas workload")
    parser.add_argument("--stream-gangs", type=int, default=200, help="gangs of the node-update stream")
    parser.add_argument("--stream-pods", type=int, default=4, help="pods per gang of the stream")
    parser.add_argument("--updates-per-gang", type=int, default=8)
    parser.add_argument("--only-stream", action="store_true", help="run only the node-update stream")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if args.only_tas:
        run_tas(args)
        return
    if args.only_stream:
        run_streams(args)
        return
    print(f"median of {args.repeats} runs")
    prefer = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"PreferGather"}]}'
    whole_nodes = (
        '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"},'
        '{"layer":"NodeTopologyLayer","strategy":"PreferGather","podCountMultiple":8}]}'
    )
    run_case("PreferGather BlockLayer", args, prefer)
    run_case("MustGather Spine, 8 per node", args, whole_nodes)
    # one host port for the whole gang: at most one pod per node, still counted with arrays
    run_case("hostPort, one per node", args, prefer, host_port=8470)
    # a spread constraint makes each pod's fit depend on its siblings: the node-by-node path
    run_case("spread, node by node", args, prefer, spread=True)
    run_streams(args)
    run_tas(args)


if __name__ == "__main__":
    main()
