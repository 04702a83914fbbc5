"""The apiserver client's requests counted as client-go counts them (rest/request.go in client-go
v0.33): rest_client_requests_total by status code, HTTP method and host, "<error>" when no
response came; rest_client_request_duration_seconds by method and host, for every request but a
watch."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from koordpy.kubeapi.client import ApiError, KubeApi
from koordpy.kubeapi.ratelimit import TokenBucket
from koordpy.metrics import SchedulerMetrics
from tests.support.controlplane import free_port


async def answer(request: web.Request) -> web.Response:
    return web.json_response({}, status=int(request.query["status"]))


async def watch(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    await response.write(b'{"type":"ADDED","object":{}}\n')
    return response


@pytest_asyncio.fixture(loop_scope="function")
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/answer", answer)
    app.router.add_get("/watch", watch)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def api_for(host: str, metrics: SchedulerMetrics) -> KubeApi:
    configuration = k8s_client.Configuration(host=f"http://{host}")
    api = KubeApi(configuration)
    api.observe_request = metrics.api_request
    return api


@pytest.mark.parametrize(("method", "status"), [("POST", 201), ("GET", 200), ("GET", 404), ("PUT", 409)])
async def test_a_request_is_counted_by_code_method_and_host_and_timed_by_method(
    server: str, method: str, status: int
) -> None:
    metrics = SchedulerMetrics()
    api = api_for(server, metrics)
    try:
        with contextlib.suppress(ApiError):
            await api.request(method, "/answer", query=[("status", str(status))])
    finally:
        await api.close()
    registry = metrics.registry
    labels = {"code": str(status), "method": method, "host": server}
    assert registry.get_sample_value("rest_client_requests_total", labels) == 1
    timed = registry.get_sample_value(
        "rest_client_request_duration_seconds_count", {"verb": method, "host": server}
    )
    assert timed == 1


async def test_a_request_that_got_no_response_is_counted_as_an_error() -> None:
    metrics = SchedulerMetrics()
    host = f"127.0.0.1:{free_port()}"  # nothing listens there
    api = api_for(host, metrics)
    try:
        with pytest.raises(OSError):
            await api.request("GET", "/answer", query=[("status", "200")], timeout=5)
    finally:
        await api.close()
    labels = {"code": "<error>", "method": "GET", "host": host}
    assert metrics.registry.get_sample_value("rest_client_requests_total", labels) == 1


async def test_a_watch_is_counted_but_not_timed(server: str) -> None:
    metrics = SchedulerMetrics()
    api = api_for(server, metrics)
    try:
        events = [e async for e in api.stream("/watch", [], read_timeout=5)]
    finally:
        await api.close()
    assert events == [{"type": "ADDED", "object": {}}]
    registry = metrics.registry
    labels = {"code": "200", "method": "GET", "host": server}
    assert registry.get_sample_value("rest_client_requests_total", labels) == 1
    timed = registry.get_sample_value(
        "rest_client_request_duration_seconds_count", {"verb": "GET", "host": server}
    )
    assert not timed


@pytest.mark.parametrize(("limited", "waits_timed"), [(True, 1), (False, 0)])
async def test_the_wait_for_the_rate_limiter_is_timed_when_there_is_one(
    server: str, limited: bool, waits_timed: int
) -> None:
    """request.go's tryThrottle observes the wait only for a client with a rate limiter."""
    metrics = SchedulerMetrics()
    api = api_for(server, metrics)
    if limited:
        api.rate_limiter = TokenBucket(qps=100, burst=10)
    try:
        await api.request("GET", "/answer", query=[("status", "200")])
    finally:
        await api.close()
    waits = metrics.registry.get_sample_value(
        "rest_client_rate_limiter_duration_seconds_count", {"verb": "GET", "host": server}
    )
    assert (waits or 0) == waits_timed
