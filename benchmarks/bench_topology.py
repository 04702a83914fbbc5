"""Network-topology-aware gang placement at scale: the gather for one gang on a 3-layer tree
(spines x blocks x nodes, 4,096 nodes by default), with the default `koord-scheduler` profile.
Prints figures (median of several runs); asserts nothing.

Each node has 8 GPUs and 64 CPUs; one node in four (chosen with a fixed seed) already runs a pod
holding 1 to 7 of its GPUs, so few blocks are whole and the gang's offers differ from node to
node. Gang pods ask for 1 GPU and 4 CPUs. Timed separately:

- tree:   the topology tree from the nodes' labels (cached by the scheduler until nodes change);
- offers: `offer_slots`, how many of the gang's pods each node takes one after the other (the
          profile's real PreFilter and Filter over every node, then the arithmetic);
- plan:   `plan_placement`, the candidate search, binpack and distribution over the tree;
- total:  Coscheduling's `plan_batch` as a scheduling cycle calls it (offers + plan + bookkeeping).

    .venv/bin/python benchmarks/bench_topology.py [--spines 8] [--blocks 16] [--nodes-per-block 32]
        [--gang 256] [--repeats 7]
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

    tree_ms, tree = median_ms(lambda: build_tree(chain, nodes), args.repeats)
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spines", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=16, help="blocks per spine")
    parser.add_argument("--nodes-per-block", type=int, default=32)
    parser.add_argument("--gang", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"machine: {machine()}")
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


if __name__ == "__main__":
    main()
