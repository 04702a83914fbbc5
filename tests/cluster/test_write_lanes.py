"""The write lanes of the cluster world, against a fake apiserver that records every request: pod
status writes coalesce per pod and skip what is moot; events aggregate as client-go's recorder does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from koordpy.api.pod import Pod
from koordpy.cluster.events import SERIES_FINISH_SECONDS, EventRecorder
from koordpy.cluster.writes import PodStatusWriter
from koordpy.kubeapi.client import ApiError
from tests.builders import pod_dict


@dataclass
class FakeApi:
    """Answers every request with success (or the error queued for its path) and records it."""

    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    errors: dict[str, ApiError] = field(default_factory=dict)
    delay: float = 0.0
    # (method, path) of the requests that have been answered
    answered: list[tuple[str, str]] = field(default_factory=list)

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.requests.append((method, path, kw.get("body")))
        if self.delay:
            await asyncio.sleep(self.delay)
        self.answered.append((method, path))
        error = self.errors.pop(path, None)
        if error is not None:
            raise error
        return {}

    def writes(self, method: str, suffix: str = "") -> list[Any]:
        return [body for m, p, body in self.requests if m == method and p.endswith(suffix)]


@dataclass
class FakeScheduler:
    """What the scheduler says of each pod now."""

    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)
    not_pending: set[str] = field(default_factory=set)

    def pending(self, key: str) -> bool:
        return key not in self.not_pending

    def condition_of(self, key: str) -> tuple[str, str] | None:
        return self.conditions.get(key)


def stored_pod(name: str, **status: Any) -> dict[str, Any]:
    raw = pod_dict(name)
    raw["metadata"]["uid"] = f"uid-{name}"
    raw["status"] = {"phase": "Pending", **status}
    return raw


def view(raw: Mapping[str, Any]) -> Pod:
    return Pod.from_dict(dict(raw))


@dataclass
class Lanes:
    api: FakeApi
    scheduler: FakeScheduler
    store: dict[str, dict[str, Any]]
    writer: PodStatusWriter
    events: EventRecorder


@pytest_asyncio.fixture(loop_scope="function")
async def lanes() -> AsyncIterator[Lanes]:
    api = FakeApi()
    scheduler = FakeScheduler()
    store: dict[str, dict[str, Any]] = {}
    events = EventRecorder(api, "test")  # type: ignore[arg-type]
    writer = PodStatusWriter(api, scheduler, store.get, events, settle=0.2)  # type: ignore[arg-type]
    tasks = [asyncio.create_task(writer.run()), asyncio.create_task(events.run())]
    yield Lanes(api, scheduler, store, writer, events)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def drain(writer: PodStatusWriter, events: EventRecorder) -> None:
    assert await writer.wait_idle(5.0)
    assert await events.wait_idle(5.0)


async def test_many_verdicts_on_one_pod_make_one_write_of_the_latest(lanes: Lanes) -> None:
    raw = lanes.store["default/p"] = stored_pod("p")
    for i in range(20):
        lanes.scheduler.conditions["default/p"] = ("Unschedulable", f"verdict {i}")
        lanes.writer.mark(view(raw))
    await drain(lanes.writer, lanes.events)
    patches = lanes.api.writes("PATCH", "/pods/p/status")
    assert len(patches) <= 2  # the first may go out before the others are marked
    assert patches[-1]["status"]["conditions"][0]["message"] == "verdict 19"


@pytest.mark.parametrize(
    ("what", "stored", "pending", "condition"),
    [
        ("bound meanwhile", {"spec": {"nodeName": "n1"}}, True, ("Unschedulable", "no")),
        ("no longer pending for the scheduler", {}, False, ("Unschedulable", "no")),
        ("no verdict to write", {}, True, None),
        (
            "the stored condition already says it",
            {
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "no",
                        }
                    ]
                }
            },
            True,
            ("Unschedulable", "no"),
        ),
        ("deleted and created again", {"metadata": {"uid": "another"}}, True, ("Unschedulable", "no")),
    ],
)
async def test_moot_status_writes_are_skipped(
    lanes: Lanes, what: str, stored: dict[str, Any], pending: bool, condition: tuple[str, str] | None
) -> None:
    raw = stored_pod("p")
    pod = view(raw)
    for part, value in stored.items():
        raw[part] = {**raw[part], **value}
    lanes.store["default/p"] = raw
    if not pending:
        lanes.scheduler.not_pending.add("default/p")
    if condition is not None:
        lanes.scheduler.conditions["default/p"] = condition
    lanes.writer.mark(pod)
    await drain(lanes.writer, lanes.events)
    assert lanes.api.requests == [], what


async def test_a_settling_verdict_is_dropped_when_the_pod_moves_on_in_time(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g")
    lanes.scheduler.conditions["default/g"] = ("GangNotReady", "gang default/g has 1 of minMember 2 pods")
    lanes.writer.mark(view(raw), settle=True)
    await asyncio.sleep(0.05)
    assert lanes.api.requests == []
    # the gang completed and the pod was bound before the verdict settled
    lanes.scheduler.not_pending.add("default/g")
    await drain(lanes.writer, lanes.events)
    assert lanes.api.requests == []


async def test_a_settled_verdict_is_written_once_with_its_event(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g")
    lanes.scheduler.conditions["default/g"] = ("GangNotReady", "gang default/g has 1 of minMember 2 pods")
    lanes.writer.mark(view(raw), settle=True)
    await drain(lanes.writer, lanes.events)
    assert len(lanes.api.writes("PATCH", "/pods/g/status")) == 1
    (event,) = lanes.api.writes("POST", "/events")
    assert (event["reason"], event["regarding"]["name"]) == ("FailedScheduling", "g")


async def test_a_waiting_gangs_condition_is_not_rewritten_as_its_members_arrive(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g")
    for count in (1, 2, 3):
        lanes.scheduler.conditions["default/g"] = (
            "GangNotReady",
            f"gang default/g has {count} of minMember 4 pods",
        )
        lanes.writer.mark(view(raw), settle=True)
        await drain(lanes.writer, lanes.events)
        # the informer shows the pod as written
        for body in lanes.api.writes("PATCH", "/pods/g/status"):
            raw["status"] = {**raw["status"], **body["status"]}
    (patch,) = lanes.api.writes("PATCH", "/pods/g/status")
    assert patch["status"]["conditions"][0]["message"] == "gang default/g has 1 of minMember 4 pods"
    # a verdict of another kind is written at once
    lanes.scheduler.conditions["default/g"] = (
        "Unschedulable",
        "0/4 nodes are available: 4 Insufficient cpu.",
    )
    lanes.writer.mark(view(raw))
    await drain(lanes.writer, lanes.events)
    assert len(lanes.api.writes("PATCH", "/pods/g/status")) == 2


async def test_a_parked_refresh_does_not_hold_back_another_pods_verdict(lanes: Lanes) -> None:
    first = lanes.store["default/a"] = stored_pod("a")
    lanes.scheduler.conditions["default/a"] = ("GangNotReady", "gang default/a has 1 of minMember 2 pods")
    lanes.writer.mark(view(first), settle=True)
    await drain(lanes.writer, lanes.events)
    # a's next verdict waits for its refresh, minutes away; b's settles in the usual moment
    lanes.scheduler.conditions["default/a"] = ("GangNotReady", "gang default/a has 2 of minMember 3 pods")
    lanes.writer.mark(view(first), settle=True)
    second = lanes.store["default/b"] = stored_pod("b")
    lanes.scheduler.conditions["default/b"] = ("GangNotReady", "gang default/b has 1 of minMember 2 pods")
    lanes.writer.mark(view(second), settle=True)
    await drain(lanes.writer, lanes.events)
    assert len(lanes.api.writes("PATCH", "/pods/b/status")) == 1
    assert len(lanes.api.writes("PATCH", "/pods/a/status")) == 1


async def test_nomination_is_written_without_a_condition(lanes: Lanes) -> None:
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.writer.mark(view(raw), nominated="n3")
    await drain(lanes.writer, lanes.events)
    assert lanes.api.writes("PATCH", "/pods/p/status") == [{"status": {"nominatedNodeName": "n3"}}]
    assert lanes.api.writes("POST", "/events") == []


async def test_a_binding_waits_for_a_status_write_on_the_wire(lanes: Lanes) -> None:
    lanes.api.delay = 0.1
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.scheduler.conditions["default/p"] = ("Unschedulable", "no")
    lanes.writer.mark(view(raw))
    await asyncio.sleep(0.02)
    assert lanes.api.answered == []
    await lanes.writer.wait_written("default/p")
    assert lanes.api.answered == [("PATCH", "/api/v1/namespaces/default/pods/p/status")]


def pending_event(events: EventRecorder, name: str, reason: str, note: str) -> None:
    events.record(
        {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": name, "uid": f"uid-{name}"},
        "Warning",
        reason,
        "Scheduling",
        note,
    )


async def test_repeats_of_an_event_make_a_series_of_two_writes(lanes: Lanes) -> None:
    for i in range(10):
        # the note is not part of what makes two events the same, as in client-go
        pending_event(lanes.events, "p", "FailedScheduling", f"attempt {i}")
        await drain(lanes.writer, lanes.events)
    assert len(lanes.api.writes("POST", "/events")) == 1
    assert [b["series"]["count"] for b in lanes.api.writes("PATCH")] == [2]


async def test_different_reasons_and_pods_are_different_events(lanes: Lanes) -> None:
    pending_event(lanes.events, "p", "FailedScheduling", "x")
    pending_event(lanes.events, "p", "Scheduled", "y")
    pending_event(lanes.events, "q", "FailedScheduling", "x")
    await drain(lanes.writer, lanes.events)
    assert len(lanes.api.writes("POST", "/events")) == 3


async def test_a_finished_series_tells_its_last_count_and_starts_again() -> None:
    api = FakeApi()
    clock = [0.0]
    events = EventRecorder(api, "test", now=lambda: clock[0])  # type: ignore[arg-type]
    task = asyncio.create_task(events.run())
    try:
        for _ in range(5):
            pending_event(events, "p", "FailedScheduling", "x")
            await events.wait_idle(5.0)
        clock[0] += SERIES_FINISH_SECONDS
        events.finish_series(clock[0])
        await asyncio.sleep(0.05)
        assert [b["series"]["count"] for b in api.writes("PATCH")] == [2, 5]
        pending_event(events, "p", "FailedScheduling", "x")
        await events.wait_idle(5.0)
        assert len(api.writes("POST", "/events")) == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_events_beyond_the_queue_bound_are_dropped_and_counted() -> None:
    api = FakeApi()
    dropped: list[int] = []
    events = EventRecorder(api, "test", max_queued=3, on_drop=lambda: dropped.append(1))  # type: ignore[arg-type]
    for i in range(5):
        pending_event(events, f"p{i}", "FailedScheduling", "x")
    assert (events.queued(), len(dropped)) == (3, 2)


async def test_an_expired_series_event_is_created_again() -> None:
    api = FakeApi()
    events = EventRecorder(api, "test")  # type: ignore[arg-type]
    task = asyncio.create_task(events.run())
    try:
        pending_event(events, "p", "FailedScheduling", "x")
        await events.wait_idle(5.0)
        name = api.writes("POST", "/events")[0]["metadata"]["name"]
        api.errors[f"/apis/events.k8s.io/v1/namespaces/default/events/{name}"] = ApiError(
            404, "NotFound", "gone"
        )
        pending_event(events, "p", "FailedScheduling", "x")
        await events.wait_idle(5.0)
        posts = api.writes("POST", "/events")
        assert len(posts) == 2 and posts[1]["series"]["count"] == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
