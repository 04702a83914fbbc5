"""KWOK nodes for the end-to-end tests: created with the annotation KWOK manages, and ready."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping

from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

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


@contextlib.asynccontextmanager
async def labelled_nodes(
    kubeconfig: str, prefix: str, count: int, label_key: str, resources: Mapping[str, str]
) -> AsyncIterator[tuple[str, list[str]]]:
    """`count` Ready KWOK nodes named `<prefix>-<label>-<i>`, all with `label_key: <label>` (a value
    of their own, so a module's pods go only to its nodes); yields (label, names) and deletes them."""
    configuration = client.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    label = uuid.uuid4().hex[:8]
    names = [f"{prefix}-{label}-{i}" for i in range(count)]
    async with client.ApiClient(configuration=configuration) as api:
        core = client.CoreV1Api(api)
        try:
            await create_ready_nodes(core, {name: {label_key: label} for name in names}, resources)
            yield label, names
        finally:
            for name in names:
                with contextlib.suppress(ApiException):
                    await core.delete_node(name)
