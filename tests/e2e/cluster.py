"""What the end-to-end modules share to work on the control plane: the admin client of a module's
own, kubectl, nodes that must be the cluster's only ones, and PriorityClasses of their own."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from tests.e2e.kwok import create_ready_nodes
from tests.support.ci import in_ci, shout
from tests.support.controlplane import ControlPlane

KUBECTL_CANDIDATES = ("/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "kubectl")


def find_kubectl(request: pytest.FixtureRequest, unapplied: str) -> str:
    """The kubectl binary; without one the module is skipped, or fails with CI=true, saying that
    `unapplied` are not applied."""
    for candidate in KUBECTL_CANDIDATES:
        found = candidate if os.access(candidate, os.X_OK) else shutil.which(candidate)
        if found:
            return found
    reason = f"!!! KUBECTL UNAVAILABLE: none of {KUBECTL_CANDIDATES}; {unapplied} are not applied."
    shout(request.config, reason)
    if in_ci():
        pytest.fail(reason + " (CI=true: failing instead of skipping)", pytrace=False)
    pytest.skip(reason)


@contextlib.asynccontextmanager
async def admin_client(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    """An admin ApiClient of its own: `kube_api`'s, and that of a fixture wider than a function."""
    configuration = client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(control_plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration=configuration) as api:
        yield api


@contextlib.asynccontextmanager
async def only_nodes(
    control_plane: ControlPlane, names: Sequence[str], resources: Mapping[str, str], whose: str
) -> AsyncIterator[tuple[str, ...]]:
    """Ready KWOK nodes `names`, which must be the cluster's only ones: `whose` pods select no node.
    Deleted afterwards."""
    async with admin_client(control_plane) as api:
        core = client.CoreV1Api(api)
        others = [n.metadata.name for n in (await core.list_node()).items]
        assert not others, f"{whose} pods select no node, so these nodes would take them: {others}"
        try:
            await create_ready_nodes(core, {name: {} for name in names}, resources)
            yield tuple(names)
        finally:
            for name in names:
                with contextlib.suppress(ApiException):
                    await core.delete_node(name)


@contextlib.asynccontextmanager
async def levelled_priority_classes(api: client.ApiClient, prefix: str) -> AsyncIterator[dict[str, str]]:
    """PriorityClasses low (10), mid (500) and high (1000), named `<prefix>-<level>-<random>`;
    deleted afterwards."""
    scheduling = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:8]
    names = {level: f"{prefix}-{level}-{suffix}" for level in ("low", "mid", "high")}
    values = {"low": 10, "mid": 500, "high": 1000}
    try:
        for level, name in names.items():
            await scheduling.create_priority_class(
                client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=values[level])
            )
        yield names
    finally:
        for name in names.values():
            with contextlib.suppress(ApiException):
                await scheduling.delete_priority_class(name)
