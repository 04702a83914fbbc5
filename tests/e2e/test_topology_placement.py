"""Network-topology-aware gang placement on the real control plane: `koordpy run` (with its embedded
operators) schedules gangs that ask for MustGather on the BlockLayer of ClusterNetworkTopology
`default`, over eight KWOK nodes laid out as the seed's two spines of two blocks of two nodes.

The nodes carry label keys of this module's own (as in test_operators), so nodes other tests leave
behind cannot join the tree; the ClusterNetworkTopology `default` is a singleton, so any earlier one
is replaced and this module's is deleted when the module is done."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from tests.e2e.kwok import create_ready_nodes
from tests.e2e.test_gangs import G, create_podgroup, member
from tests.e2e.test_run import CONFIG_DOC, NODE_LABEL, RunProcess
from tests.support.controlplane import (
    ControlPlane,
    free_port,
)
from tests.support.polling import eventually
from tests.topology.test_detail_status import SEED_DETAIL_STATUS, SEED_NODE_LABELS

CNT = ("scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies")
GANG_LABEL = "pod-group.scheduling.sigs.k8s.io"
# each node holds two 2-cpu members, each block (two nodes) four
NODE_CPU = "4"
MEMBER_CPU = "2"
PER_BLOCK = 4
MUST_GATHER_BLOCK = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]})


@dataclass(frozen=True)
class Topology:
    # value of NODE_LABEL on this module's nodes (the members' nodeSelector)
    label: str
    spine_key: str
    block_key: str
    # node name -> block name
    blocks: dict[str, str]
    process: RunProcess


def _blocks() -> set[str]:
    return {block for _, block in (labels.values() for labels in SEED_NODE_LABELS.values())}


async def _api(control_plane: ControlPlane) -> client.ApiClient:
    configuration = client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(control_plane.kubeconfig), client_configuration=configuration
    )
    return client.ApiClient(configuration=configuration)


async def _detail_status(objects: client.CustomObjectsApi) -> list[dict[str, Any]] | None:
    obj = await objects.get_cluster_custom_object(*CNT, "default")
    return (obj.get("status") or {}).get("detailStatus")


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
async def topology(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Topology]:
    """The seed's eight nodes (Ready under KWOK), ClusterNetworkTopology `default` over them, and
    `koordpy run` serving the test configuration's scheduler name, ready and writing detailStatus."""
    suffix = uuid.uuid4().hex[:6]
    prefix = f"e2e-{suffix}.koordpy.io"
    spine_key, block_key = f"{prefix}/spine", f"{prefix}/block"
    label = f"topo-{suffix}"
    names = {seed: f"topo-place-{suffix}-{seed}" for seed in SEED_NODE_LABELS}
    spec = {
        "networkTopologySpec": [
            {"labelKey": [spine_key], "topologyLayer": "SpineLayer"},
            {"labelKey": [block_key], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
        ]
    }
    async with await _api(control_plane) as api:
        core = client.CoreV1Api(api)
        objects = client.CustomObjectsApi(api)
        proc: RunProcess | None = None
        try:
            resources = {"cpu": NODE_CPU, "memory": "32Gi", "pods": "110"}
            blocks: dict[str, str] = {}
            node_labels: dict[str, dict[str, str]] = {}
            for seed, labels in SEED_NODE_LABELS.items():
                spine, block = labels.values()
                name = names[seed]
                blocks[name] = block
                node_labels[name] = {NODE_LABEL: label, spine_key: spine, block_key: block}
            await create_ready_nodes(core, node_labels, resources)

            # the object is a singleton: replace whatever an earlier test left behind
            with contextlib.suppress(ApiException):
                await objects.delete_cluster_custom_object(*CNT, "default")

            async def gone() -> bool:
                try:
                    await objects.get_cluster_custom_object(*CNT, "default")
                except ApiException as err:
                    return err.status == 404
                return False

            await eventually(gone, timeout=30, what="an earlier ClusterNetworkTopology default to go")
            await objects.create_cluster_custom_object(
                *CNT,
                {
                    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                    "kind": "ClusterNetworkTopology",
                    "metadata": {"name": "default"},
                    "spec": spec,
                },
            )

            tmp = tmp_path_factory.mktemp("topology-placement")
            config = tmp / "config.yaml"
            config.write_text(yaml.safe_dump(CONFIG_DOC))
            proc = RunProcess(
                ["--kubeconfig", str(control_plane.kubeconfig), "--config", str(config)],
                tmp / "run.log",
                free_port(),
                f"topology-placement-{suffix}",
            )
            running = proc

            async def ready() -> bool:
                assert running.proc.poll() is None, f"koordpy run exited:\n{running.log()}"
                status, _ = await running.get("/readyz")
                return status == 200

            async def has_detail() -> bool:
                return bool(await _detail_status(objects))

            try:
                await eventually(ready, timeout=60, what="koordpy run to be ready")
                await eventually(has_detail, timeout=60, what="the embedded operator's detailStatus")
            except BaseException:
                print(proc.log())
                raise
            yield Topology(label, spine_key, block_key, blocks, proc)
        finally:
            if proc is not None:
                proc.proc.send_signal(signal.SIGTERM)
                try:
                    proc.proc.wait(30)
                finally:
                    proc.close()
            with contextlib.suppress(ApiException):
                await objects.delete_cluster_custom_object(*CNT, "default")
            for name in names.values():
                with contextlib.suppress(ApiException):
                    await core.delete_node(name)


# ---------------------------------------------------------------------------------------------- helpers
async def create_gang(
    kube_api: client.ApiClient, core: client.CoreV1Api, namespace: str, topo: Topology, size: int
) -> list[str]:
    """A PodGroup of `size` members gathered on the BlockLayer (MustGather), and its members."""
    group = f"train-{uuid.uuid4().hex[:5]}"
    await create_podgroup(
        kube_api,
        "scheduling.sigs.k8s.io",
        namespace,
        group,
        size,
        {f"{G}/network-topology-spec": MUST_GATHER_BLOCK},
    )
    names = [f"{group}-{i}" for i in range(size)]
    for name in names:
        await core.create_namespaced_pod(namespace, member(name, topo.label, MEMBER_CPU, {GANG_LABEL: group}))
    return names


async def still_pending(
    core: client.CoreV1Api, namespace: str, names: list[str], seconds: float = 5.0
) -> None:
    """After `seconds`, none of `names` is bound."""
    await asyncio.sleep(seconds)
    pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
    assert {n: pods[n].spec.node_name for n in names} == dict.fromkeys(names)
    assert all(pods[n].status.phase == "Pending" for n in names)


# ---------------------------------------------------------------------------------------------- tests
async def test_must_gather_gang_is_placed_inside_one_block(
    topology: Topology, kube_api: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    objects = client.CustomObjectsApi(kube_api)
    # the embedded operator's detailStatus is the seed's tree (node names sort as the seed's do)
    detail = await eventually(
        lambda: _detail_status(objects), timeout=30, what="detailStatus of ClusterNetworkTopology default"
    )
    assert detail == SEED_DETAIL_STATUS

    # four 2-cpu members: a 4-cpu node holds two of them, a block all four
    names = await create_gang(kube_api, core, namespace, topology, PER_BLOCK)

    async def all_bound() -> dict[str, str] | None:
        pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
        placed = {n: pods[n].spec.node_name for n in names if n in pods and pods[n].spec.node_name}
        return placed if len(placed) == len(names) else None

    try:
        placed = await eventually(all_bound, timeout=60, what="every member of the gang bound")
    except BaseException:
        print(topology.process.log())
        raise
    assert set(placed.values()) <= set(topology.blocks), placed
    blocks: set[str] = set()
    for node_name in set(placed.values()):
        node = await core.read_node(node_name)
        blocks.add(node.metadata.labels[topology.block_key])
    assert len(blocks) == 1, f"members spread over blocks {sorted(blocks)}: {placed}"
    # one node cannot hold the gang: it fills both nodes of the block
    assert len(set(placed.values())) == 2, placed


async def test_must_gather_gang_no_block_can_hold_stays_pending(
    topology: Topology, kube_api: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    # one member more than a block holds, though the cluster holds four times as many
    size = PER_BLOCK + 1
    names = await create_gang(kube_api, core, namespace, topology, size)

    async def explained() -> dict[str, str] | None:
        messages: dict[str, str] = {}
        for name in names:
            pod = await core.read_namespaced_pod(name, namespace)
            for c in (pod.status and pod.status.conditions) or []:
                if c.type == "PodScheduled" and c.status == "False" and "MustGather" in (c.message or ""):
                    messages[name] = c.message
        return messages if len(messages) == len(names) else None

    try:
        messages = await eventually(explained, timeout=60, what="PodScheduled=False naming MustGather")
    except BaseException:
        print(topology.process.log())
        raise
    for name, message in messages.items():
        offers = {block: int(n) for block, n in re.findall(r"BlockLayer/([\w.-]+): (\d+)", message)}
        assert set(offers) == _blocks(), f"{name}: {message}"
        assert all(n < size for n in offers.values()), f"{name}: {message}"
        for block in _blocks():
            assert re.search(rf"\b{re.escape(block)}\b", message), f"{name}: {message}"

    # and nothing is bound a while later
    await still_pending(core, namespace, names)
