"""KWOK nodes for the end-to-end tests: created with the annotation KWOK manages, and ready."""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes_asyncio import client

from tests.support.controlplane import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from tests.support.polling import eventually


async def create_ready_nodes(
    core: client.CoreV1Api, labels: Mapping[str, Mapping[str, str]], resources: Mapping[str, str]
) -> None:
    """Create a node per name in `labels` (each with its labels, its hostname and `type: kwok`) and
    wait until KWOK reports every one Ready."""
    for name, own in labels.items():
        await core.create_node(
            client.V1Node(
                metadata=client.V1ObjectMeta(
                    name=name,
                    annotations={KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
                    labels={**own, "kubernetes.io/hostname": name, "type": "kwok"},
                ),
                status=client.V1NodeStatus(capacity=dict(resources), allocatable=dict(resources)),
            )
        )

    async def all_ready() -> bool:
        for name in labels:
            node = await core.read_node(name)
            conditions = (node.status and node.status.conditions) or []
            if not any(c.type == "Ready" and c.status == "True" for c in conditions):
                return False
        return True

    await eventually(all_ready, timeout=60, what="KWOK nodes to become Ready")
