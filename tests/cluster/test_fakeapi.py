"""The fake apiserver the cluster tests stand on, through the real client: scripts, recording,
errors as the apiserver sends them, watch streams."""

from __future__ import annotations

import pytest

from koordpy.kubeapi.client import MERGE_PATCH, ApiError
from tests.support.fakeapi import FakeApiServer, Reply, Request


async def test_scripted_replies_are_served_in_order_and_the_last_one_repeats(fake: FakeApiServer) -> None:
    fake.on("GET", "/api/v1/namespaces/*/pods/p", Reply(200, {"n": 1}), Reply(200, {"n": 2}))
    api = fake.client()
    answers = [await api.request("GET", "/api/v1/namespaces/default/pods/p") for _ in range(3)]
    assert answers == [{"n": 1}, {"n": 2}, {"n": 2}]


async def test_an_unscripted_path_is_not_found_and_an_error_carries_its_status(fake: FakeApiServer) -> None:
    fake.on("DELETE", "/api/v1/namespaces/default/pods/p", Reply.error(409, "Conflict", "uid differs"))
    api = fake.client()
    with pytest.raises(ApiError) as missing:
        await api.request("GET", "/api/v1/nodes/n1")
    with pytest.raises(ApiError) as conflict:
        await api.request("DELETE", "/api/v1/namespaces/default/pods/p")
    assert (missing.value.status, missing.value.reason) == (404, "NotFound")
    assert (conflict.value.status, conflict.value.reason, conflict.value.message) == (
        409,
        "Conflict",
        "uid differs",
    )


async def test_requests_are_recorded_with_query_body_and_content_type(fake: FakeApiServer) -> None:
    def echo(request: Request) -> Reply:
        return Reply(200, {"seen": request.body})

    fake.on("PATCH", "/apis/example.com/v1/widgets/*", echo)
    api = fake.client()
    answer = await api.request(
        "PATCH",
        "/apis/example.com/v1/widgets/w",
        query=[("fieldManager", "koordpy")],
        body={"spec": {"size": 2}},
        content_type=MERGE_PATCH,
    )
    (request,) = fake.matching("PATCH")
    assert answer == {"seen": {"spec": {"size": 2}}}
    assert (request.path, request.query, request.body, request.content_type) == (
        "/apis/example.com/v1/widgets/w",
        {"fieldManager": "koordpy"},
        {"spec": {"size": 2}},
        MERGE_PATCH,
    )


async def test_a_watch_streams_what_is_pushed_and_ends_after_an_error(fake: FakeApiServer) -> None:
    stream = fake.watch("/api/v1/pods")
    stream.added({"metadata": {"name": "a"}})
    stream.bookmark("7")
    stream.gone()
    stream.added({"metadata": {"name": "after the end"}})
    api = fake.client()
    events = [e async for e in api.stream("/api/v1/pods", [("watch", "true")], read_timeout=5.0)]
    assert [(e["type"], e["object"].get("code")) for e in events] == [
        ("ADDED", None),
        ("BOOKMARK", None),
        ("ERROR", 410),
    ]
    # what was pushed after the error waits for the next watch
    async for event in api.stream("/api/v1/pods", [("watch", "true")], read_timeout=5.0):
        assert event["object"]["metadata"]["name"] == "after the end"
        break
    assert len(stream.requests) == 2
