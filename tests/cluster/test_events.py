"""`events.k8s.io/v1` Events as client-go's events broadcaster records them (the one kube-scheduler
uses): the first of a kind is created; the second turns it into a series with one PATCH
(`series.count: 2`); later ones are only counted, and the count is written when the series is
refreshed or finishes (not seen for 6 minutes); a series whose event expired on the server is
created again, series included. Two events are of a kind when type, action, reason, reporting
controller and instance, regarding object and related object match (client-go's eventKey); the note
does not count.

Each event is reported by the profile it is about (kube-scheduler's recorder per profile, made by
client-go's NewRecorder(scheme, schedulerName)): reportingController is the schedulerName and
reportingInstance `<reportingController>-<host>`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from koordpy.cluster.events import (
    EVENT_NOTE_LIMIT,
    REPORTING_INSTANCE_LIMIT,
    SERIES_FINISH_SECONDS,
    EventRecorder,
)
from koordpy.kubeapi.client import MERGE_PATCH
from tests.support.fakeapi import FakeApiServer, Reply

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def pod_ref(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": name, "uid": f"uid-{name}"}


class Recorder:
    def __init__(self, fake: FakeApiServer, events: EventRecorder, clock: list[float]) -> None:
        self.fake = fake
        self.events = events
        self.clock = clock

    async def record(
        self,
        name: str = "p",
        reason: str = "FailedScheduling",
        note: str = "0/3 nodes are available",
        *,
        action: str = "Scheduling",
        event_type: str = "Warning",
        related: str | None = None,
        controller: str = "koord-scheduler",
    ) -> None:
        """Record one event and wait until what it leads to was sent."""
        self.events.record(
            pod_ref(name),
            event_type,
            reason,
            action,
            note,
            pod_ref(related) if related else None,
            controller=controller,
        )
        assert await self.events.wait_idle(5.0)

    def writes(self) -> list[tuple[str, Any]]:
        return [(r.method, r.body) for r in self.fake.requests if r.path.startswith(EVENTS)]


@pytest_asyncio.fixture(loop_scope="function")
async def recorder(fake: FakeApiServer) -> AsyncIterator[Recorder]:
    fake.on("POST", EVENTS, Reply(201))
    fake.on("PATCH", f"{EVENTS}/*", Reply(200))
    clock = [1000.0]
    events = EventRecorder(fake.client(), "koordpy-0", now=lambda: clock[0])
    task = asyncio.create_task(events.run())
    yield Recorder(fake, events, clock)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def series_counts(writes: list[tuple[str, Any]]) -> list[tuple[str, int | None]]:
    return [(method, (body.get("series") or {}).get("count")) for method, body in writes]


@pytest.mark.parametrize(
    ("occurrences", "finished", "expected"),
    [
        (1, False, [("POST", None)]),
        (2, False, [("POST", None), ("PATCH", 2)]),
        (10, False, [("POST", None), ("PATCH", 2)]),
        # a series that ends tells the apiserver its last count
        (10, True, [("POST", None), ("PATCH", 2), ("PATCH", 10)]),
        # nothing new since the last write: nothing to tell
        (2, True, [("POST", None), ("PATCH", 2)]),
    ],
)
async def test_a_repeated_event_is_a_series_patched_not_a_new_event(
    recorder: Recorder, occurrences: int, finished: bool, expected: list[tuple[str, int | None]]
) -> None:
    for i in range(occurrences):
        await recorder.record(note=f"attempt {i}")
    if finished:
        recorder.clock[0] += SERIES_FINISH_SECONDS
        recorder.events.finish_series(recorder.clock[0])
        await asyncio.sleep(0.05)
    assert series_counts(recorder.writes()) == expected


async def test_the_series_patch_names_the_event_and_is_a_merge_patch(recorder: Recorder) -> None:
    await recorder.record()
    recorder.clock[0] += 7.0
    await recorder.record()
    post = recorder.fake.matching("POST", EVENTS)[0]
    (patch,) = recorder.fake.matching("PATCH", f"{EVENTS}/*")
    assert patch.path == f"{EVENTS}/{post.body['metadata']['name']}"
    assert patch.content_type == MERGE_PATCH
    assert patch.body == {
        "series": {"count": 2, "lastObservedTime": patch.body["series"]["lastObservedTime"]}
    }
    assert patch.body["series"]["lastObservedTime"].endswith("Z")


async def test_a_series_that_finished_starts_again_as_a_new_event(recorder: Recorder) -> None:
    for _ in range(3):
        await recorder.record()
    recorder.clock[0] += SERIES_FINISH_SECONDS
    recorder.events.finish_series(recorder.clock[0])
    await asyncio.sleep(0.05)
    await recorder.record()
    assert series_counts(recorder.writes()) == [("POST", None), ("PATCH", 2), ("PATCH", 3), ("POST", None)]


async def test_a_series_whose_event_expired_on_the_server_is_created_again(recorder: Recorder) -> None:
    await recorder.record()
    recorder.fake.on("PATCH", f"{EVENTS}/*", Reply.error(404, "NotFound", "events not found"))
    await recorder.record()
    assert series_counts(recorder.writes()) == [("POST", None), ("PATCH", 2), ("POST", 2)]


@pytest.mark.parametrize(
    ("second", "one_series"),
    [
        ({"note": "another note"}, True),
        ({"event_type": "Normal"}, False),
        ({"controller": "default-scheduler"}, False),
        ({"reason": "Scheduled"}, False),
        ({"name": "q"}, False),
        ({"action": "Binding"}, False),
        ({"related": "victim"}, False),
    ],
)
async def test_what_makes_two_events_one_series(
    recorder: Recorder, second: dict[str, Any], one_series: bool
) -> None:
    await recorder.record()
    await recorder.record(**second)
    methods = [method for method, _ in recorder.writes()]
    assert methods == (["POST", "PATCH"] if one_series else ["POST", "POST"])


async def test_the_created_event_says_what_about_which_pod(recorder: Recorder) -> None:
    await recorder.record(note="x" * (EVENT_NOTE_LIMIT + 100), related="victim")
    (post,) = recorder.fake.matching("POST", EVENTS)
    body = post.body
    assert (body["apiVersion"], body["kind"]) == ("events.k8s.io/v1", "Event")
    assert (body["type"], body["reason"], body["action"]) == ("Warning", "FailedScheduling", "Scheduling")
    assert (body["regarding"], body["related"]) == (pod_ref("p"), pod_ref("victim"))
    assert body["metadata"]["namespace"] == "default" and body["metadata"]["name"].startswith("p.")
    assert len(body["note"].encode()) <= EVENT_NOTE_LIMIT and body["note"].endswith("...")
    assert "series" not in body
    # events.k8s.io/v1 refuses a deprecatedSource on create: the core/v1 view's From is the
    # reportingController
    assert "deprecatedSource" not in body


@pytest.mark.parametrize(
    ("controller", "reporting_controller"),
    [
        pytest.param("koord-scheduler", "koord-scheduler", id="a profile"),
        pytest.param("default-scheduler", "default-scheduler", id="another profile"),
        pytest.param("example.com/gpu-scheduler", "example.com/gpu-scheduler", id="a prefixed name"),
        pytest.param(None, "koordpy", id="no profile"),
        # the apiserver takes only a qualified name: the profile's events are not lost
        pytest.param("GPU Scheduler", "koordpy", id="a space"),
        pytest.param("s" * 64, "koordpy", id="a name over 63 characters"),
        pytest.param("-scheduler", "koordpy", id="not starting alphanumeric"),
        pytest.param("a/b/c", "koordpy", id="two slashes"),
        pytest.param("/scheduler", "koordpy", id="an empty prefix"),
        pytest.param("Example.com/scheduler", "koordpy", id="a prefix that is no DNS subdomain"),
    ],
)
async def test_the_event_is_reported_by_the_profile_it_is_about(
    fake: FakeApiServer, controller: str | None, reporting_controller: str
) -> None:
    fake.on("POST", EVENTS, Reply(201))
    events = EventRecorder(fake.client(), "host-1")
    task = asyncio.create_task(events.run())
    try:
        if controller is None:
            events.record(pod_ref("p"), "Normal", "Scheduled", "Binding", "x")
        else:
            events.record(pod_ref("p"), "Normal", "Scheduled", "Binding", "x", controller=controller)
        assert await events.wait_idle(5.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    (post,) = fake.matching("POST", EVENTS)
    assert (post.body["reportingController"], post.body["reportingInstance"]) == (
        reporting_controller,
        f"{reporting_controller}-host-1",
    )


async def test_the_reporting_instance_is_cut_to_the_apiservers_limit(recorder: Recorder) -> None:
    recorder.events.instance = "h" * 200
    await recorder.record()
    (post,) = recorder.fake.matching("POST", EVENTS)
    instance = post.body["reportingInstance"]
    assert len(instance) == REPORTING_INSTANCE_LIMIT and instance.startswith("koord-scheduler-hhh")


async def test_events_beyond_the_queue_bound_are_dropped_and_counted(fake: FakeApiServer) -> None:
    dropped: list[int] = []
    events = EventRecorder(fake.client(), "test", max_queued=3, on_drop=lambda: dropped.append(1))
    for i in range(5):
        events.record(pod_ref(f"p{i}"), "Warning", "FailedScheduling", "Scheduling", "x")
    assert (events.queued(), len(dropped)) == (3, 2)


@pytest.mark.parametrize(
    ("refusals", "posts"),
    [
        # the last POST is the one answered 201
        pytest.param(
            [Reply.error(429, "TooManyRequests", "the apiserver is shutting down")], 2, id="429-then-sent"
        ),
        pytest.param([Reply.error(503, "ServiceUnavailable", "not ready")] * 2, 3, id="503-twice-then-sent"),
        pytest.param([Reply.error(422, "Invalid", "bad event")], 1, id="a-refused-event-is-not-sent-again"),
        pytest.param([Reply.error(500, "InternalError", "down")] * 3, 3, id="given-up-after-the-last-try"),
    ],
)
async def test_an_event_the_apiserver_could_not_take_is_sent_again(
    fake: FakeApiServer, refusals: list[Reply], posts: int
) -> None:
    fake.on("POST", EVENTS, *refusals, Reply(201))
    events = EventRecorder(fake.client(), "koordpy-0", tries=3, retry_seconds=0.01)
    task = asyncio.create_task(events.run())
    try:
        events.record(pod_ref("p"), "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n1")
        assert await events.wait_idle(5.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(fake.matching("POST", EVENTS)) == posts
