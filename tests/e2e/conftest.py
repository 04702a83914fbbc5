"""Fixtures for end-to-end tests against a real control plane.

``control_plane`` (session): etcd + kube-apiserver v1.37 + kube-controller-manager +
KWOK on loopback, with the CRDs from ``crds/*.yaml`` installed. Missing binaries
are built with ``hack/controlplane/build.sh`` (needs Go); without Go the tests
are skipped, or fail when ``CI=true``.

``kube_api`` (function): a kubernetes_asyncio ``ApiClient`` for the admin user,
built from its own ``Configuration()``.

``audited_control_plane`` (module): a control plane of the module's own whose
kube-apiserver keeps an audit log, with the module's ``AUDIT_POLICY`` (default:
``tests.support.audit.scheduler_writes_policy()``).

Every test in this directory is marked ``e2e``, and its async tests run in the
session event loop (the loop async fixtures use, see pyproject.toml).
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from pytest_asyncio import is_async_test

from tests.e2e.cluster import admin_client
from tests.support.audit import scheduler_writes_policy
from tests.support.ci import in_ci, shout
from tests.support.controlplane import (
    BUILD_SCRIPT,
    CRD_DIR,
    ControlPlane,
    ControlPlaneError,
    bin_dir,
    binaries_up_to_date,
    build_binaries,
    missing_binaries,
)

E2E_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR not in Path(item.path).resolve().parents:
            continue
        item.add_marker(pytest.mark.e2e)
        if is_async_test(item):
            # Same loop as the (session-loop) async fixtures such as kube_api.
            item.add_marker(pytest.mark.asyncio(loop_scope="session"), append=False)


def _ensure_binaries(request: pytest.FixtureRequest) -> None:
    if binaries_up_to_date():
        return
    missing = missing_binaries()
    if shutil.which("go") is None:
        if not missing:
            shout(
                request.config,
                f"WARNING: control-plane binaries in {bin_dir()} are stale "
                f"and there is no 'go' to rebuild them; using them anyway",
            )
            return
        reason = (
            f"!!! E2E CONTROL PLANE UNAVAILABLE: binaries missing from {bin_dir()} "
            f"({', '.join(missing)}) and no 'go' on PATH to build them with {BUILD_SCRIPT}. "
            "Install Go >= 1.26 (with access to a Go module proxy) and re-run."
        )
        shout(request.config, reason)
        if in_ci():
            pytest.fail(reason + " (CI=true: failing instead of skipping)", pytrace=False)
        pytest.skip(reason)
    capture = request.config.pluginmanager.getplugin("capturemanager")
    shout(
        request.config,
        f"Building the e2e control plane with {BUILD_SCRIPT} (a cold build takes about 10 minutes) ...",
    )
    try:
        if capture is not None:
            with capture.global_and_fixture_disabled():
                build_binaries()
        else:
            build_binaries()
    except ControlPlaneError as exc:
        pytest.fail(f"building the control plane failed: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    yield from _running(request, ControlPlane(), "the control plane")


@pytest.fixture(scope="module")
def audited_control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    policy = getattr(request.module, "AUDIT_POLICY", None) or scheduler_writes_policy()
    yield from _running(request, ControlPlane(audit_policy=policy), "the audited control plane")


def _running(request: pytest.FixtureRequest, cp: ControlPlane, what: str) -> Iterator[ControlPlane]:
    """Start `cp` with koordpy's CRDs, yield it, stop it."""
    _ensure_binaries(request)
    try:
        cp.start()
        cp.apply_crds(sorted(CRD_DIR.glob("*.yaml")))
    except ControlPlaneError as exc:
        cp.stop()
        pytest.fail(f"starting {what} failed: {exc}", pytrace=False)
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
async def kube_api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    async with admin_client(control_plane) as api:
        yield api


@pytest.fixture
def core(kube_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api)


@pytest.fixture
async def namespace(request: pytest.FixtureRequest, core: client.CoreV1Api) -> AsyncIterator[str]:
    """A fresh namespace for one test, named after its module."""
    prefix = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    name = f"e2e-{prefix}-{uuid.uuid4().hex[:8]}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    # remove its pods at once (a graceful deletion of a pod on a KWOK node waits for KWOK), then the
    # namespace, which the namespace controller empties of everything else in the background
    with contextlib.suppress(ApiException):
        await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    with contextlib.suppress(ApiException):
        await core.delete_namespace(name)
