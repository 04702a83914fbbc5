"""Leadership fences writes (`KubeApi.fence`) and the election runs where the scheduler cannot
starve it (`ElectionThread`), against the fake API server."""

from __future__ import annotations

import asyncio

import pytest

from koordpy.cluster.leader import ElectionThread, LeaseSettings
from koordpy.kubeapi.client import ApiError, KubeApi, NotLeader
from koordpy.metrics import SchedulerMetrics
from tests.support.fakeapi import FakeApiServer, Reply, until

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
LEASE = f"{LEASES}/l"


@pytest.mark.parametrize(
    ("method", "leading", "sent"),
    [
        pytest.param("POST", True, True, id="a-leader-writes"),
        pytest.param("POST", False, False, id="a-binding-of-a-deposed-leader-is-not-sent"),
        pytest.param("PATCH", False, False, id="a-status-patch-is-fenced-too"),
        pytest.param("DELETE", False, False, id="an-eviction-is-fenced-too"),
        pytest.param("GET", False, True, id="reads-are-not-fenced"),
    ],
)
async def test_each_write_asks_the_fence_immediately_before_it_is_sent(
    fake: FakeApiServer, method: str, leading: bool, sent: bool
) -> None:
    fake.on(method, "/api/v1/namespaces/ns/pods/p*", Reply(200, {}))
    api = fake.client()
    api.fence = lambda: leading
    try:
        body = None if method == "GET" else {}
        await api.request(method, "/api/v1/namespaces/ns/pods/p/binding", body=body)
    except NotLeader as err:
        assert isinstance(err, ApiError)  # every caller's handler of API errors takes it
        assert api.fenced == {method: 1}
    assert bool(fake.matching(method, "*/pods/p*")) is sent


async def test_a_write_queued_behind_the_rate_limit_is_fenced_when_its_turn_comes(
    fake: FakeApiServer,
) -> None:
    """The fence is asked after the token bucket's wait, not when the write was queued: a backlog
    that outlives the leadership is never sent."""
    from koordpy.kubeapi.ratelimit import TokenBucket

    fake.on("POST", "*", Reply(201, {}))
    api = fake.client()
    api.rate_limiter = TokenBucket(qps=10, burst=1)
    leading = True
    api.fence = lambda: leading
    await api.request("POST", "/api/v1/namespaces/ns/pods/a/binding", body={})
    queued = asyncio.ensure_future(api.request("POST", "/api/v1/namespaces/ns/pods/b/binding", body={}))
    await asyncio.sleep(0)
    leading = False  # lost while the second binding waits for its token
    with pytest.raises(NotLeader):
        await queued
    assert [r.path.rsplit("/", 2)[1] for r in fake.matching("POST")] == ["a"]


async def test_the_election_thread_leads_and_hands_the_lease_back(fake: FakeApiServer) -> None:
    lease: dict[str, object] = {}

    def create(request: object) -> Reply:
        body = request.body
        lease.update(body, metadata={**body["metadata"], "resourceVersion": "1"})
        return Reply(201, lease)

    def update(request: object) -> Reply:
        lease.update(request.body)
        return Reply(200, lease)

    fake.on("GET", LEASE, lambda _r: Reply(200, lease) if lease else Reply.error(404, "NotFound"))
    fake.on("POST", LEASES, create)
    fake.on("PUT", LEASE, update)
    settings = LeaseSettings("l", "ns", "me", lease_duration=3.0, renew_deadline=2.0, retry_period=0.2)
    clients: list[KubeApi] = []

    def make_api() -> KubeApi:
        clients.append(fake.client())
        return clients[-1]

    metrics = SchedulerMetrics()
    election = ElectionThread(make_api, settings, metrics)

    def renewals() -> float:
        count = metrics.registry.get_sample_value(
            "koordpy_leader_election_renewal_interval_seconds_count", {"name": "l"}
        )
        return count or 0.0

    started: list[bool] = []
    election.on_started.append(lambda: started.append(election.is_leader()))
    runner = asyncio.create_task(election.run())
    await asyncio.wait_for(election.acquired.wait(), 5.0)
    assert started == [True]
    await until(lambda: renewals() >= 2, what="renewals counted in the renewal-interval histogram")
    assert election.is_leader()
    runner.cancel()
    await election.release()
    spec = lease["spec"]
    assert isinstance(spec, dict) and spec["holderIdentity"] == ""
    assert not election.lost.is_set()
    assert not election.is_leader()
