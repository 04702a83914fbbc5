"""koordpy's requests say who sends them, in client-go's format (rest.DefaultKubernetesUserAgent:
`<command>/<version> (<os>/<arch>) kubernetes/<commit>`), and the leader-election client adds
`/leader-election` as kube-scheduler's does (rest.AddUserAgent): an apiserver's audit log and its
APF flow schemas tell the scheduler's requests apart from its Lease's, and both from other
Python clients."""

from __future__ import annotations

import platform
import re
from typing import cast

import pytest

from koordpy import __version__
from koordpy.cli import _load_run_config, build_parser
from koordpy.cluster import flags
from koordpy.cluster.app import _elector
from koordpy.kubeapi.client import LEADER_ELECTION_USER_AGENT, USER_AGENT, default_user_agent
from koordpy.metrics import SchedulerMetrics
from tests.support.fakeapi import FakeApiServer, Reply

CLIENT_GO_FORMAT = re.compile(
    r"koordpy/v[0-9][^ /]* \([a-z0-9]+/[a-z0-9_]+\) kubernetes/(unknown|[0-9a-f]{7})"
)


def test_the_user_agent_is_client_gos_default_for_koordpy() -> None:
    assert CLIENT_GO_FORMAT.fullmatch(USER_AGENT), USER_AGENT
    assert USER_AGENT.startswith(f"koordpy/v{__version__} ({platform.system().lower()}/")
    assert LEADER_ELECTION_USER_AGENT == USER_AGENT + "/leader-election"


@pytest.mark.parametrize(
    ("machine", "arch"), [("x86_64", "amd64"), ("aarch64", "arm64"), ("arm64", "arm64"), ("s390x", "s390x")]
)
def test_the_machine_is_named_as_go_names_it(
    machine: str, arch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    assert default_user_agent() == f"koordpy/v{__version__} (linux/{arch}) kubernetes/unknown"


def test_the_version_loses_its_pre_release_and_the_commit_is_shortened_as_client_go_does() -> None:
    agent = default_user_agent("koordpy", "1.2.3-rc.1", "0123456789abcdef")
    assert agent.startswith("koordpy/v1.2.3 (") and agent.endswith(") kubernetes/0123456")


async def test_requests_carry_koordpys_user_agent(fake: FakeApiServer) -> None:
    fake.on("GET", "/api/v1/nodes/n1", Reply(200, {}))
    await fake.client().request("GET", "/api/v1/nodes/n1")
    (request,) = fake.matching("GET", "/api/v1/nodes/n1")
    assert request.user_agent == USER_AGENT
    assert "aiohttp" not in request.user_agent and "Python" not in request.user_agent


async def test_the_lease_client_of_koordpy_run_says_leader_election(fake: FakeApiServer) -> None:
    args = build_parser().parse_args(["run"])
    resolved = flags.resolve(args, _load_run_config(None, False).config, from_file=False)
    options = flags.run_options(args, resolved.config)
    election = _elector(fake.client(), options, cast(SchedulerMetrics, None))
    assert election is not None
    lease_client = election._make_api()
    try:
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/koordpy"
        fake.on("GET", path, Reply(200, {}))
        await lease_client.request("GET", path)
    finally:
        await lease_client.close()
    (request,) = fake.matching("GET", path)
    assert request.user_agent == LEADER_ELECTION_USER_AGENT
    assert request.user_agent.endswith(") kubernetes/unknown/leader-election")
