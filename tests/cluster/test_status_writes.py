"""Pod status writes: the PodScheduled=False condition as it is patched, what is not written, and
the per-pod lane: writes for one pod are serialized, and an older verdict never lands after a
newer one (verdicts coalesce per pod, the latest wins).

The condition's reason is one of kube-scheduler's (core/v1 PodReasonUnschedulable,
PodReasonSchedulingGated, PodReasonSchedulerError; schedule_one.go handleSchedulingFailure writes
Unschedulable for a rejection, SchedulerError for an error); koordpy's finer reason leads the
message. A written verdict on a pod's own attempt is told as a FailedScheduling event (type Warning,
action Scheduling, note = the condition's message), reported by the pod's profile; a verdict that
only passes on the gang's outcome, or says a pod is gated, is not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.cluster.events import EventRecorder
from koordpy.cluster.writes import KUBE_REASONS, PodStatusWriter, pod_scheduled
from koordpy.kubeapi.client import STRATEGIC_MERGE_PATCH
from tests.builders import pod_dict
from tests.support.fakeapi import FakeApiServer, Reply, Request, until

POD_STATUS = "/api/v1/namespaces/default/pods/*/status"
EVENTS = "/apis/events.k8s.io/v1/namespaces/*/events"


@dataclass
class Verdicts:
    """What the scheduler says of each pod now."""

    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)
    not_pending: set[str] = field(default_factory=set)

    def pending(self, key: str) -> bool:
        return key not in self.not_pending

    def condition_of(self, key: str) -> tuple[str, str] | None:
        return self.conditions.get(key)


def stored_pod(name: str, scheduler: str = "koord-scheduler", **status: Any) -> dict[str, Any]:
    raw = pod_dict(name, spec={"schedulerName": scheduler})
    raw["metadata"]["uid"] = f"uid-{name}"
    raw["status"] = {"phase": "Pending", **status}
    return raw


def view(raw: Mapping[str, Any]) -> Pod:
    return Pod.from_dict(dict(raw))


@dataclass
class Lanes:
    fake: FakeApiServer
    verdicts: Verdicts
    store: dict[str, dict[str, Any]]
    writer: PodStatusWriter
    events: EventRecorder
    # (operation, ok) of every status write, as the metrics hear of them
    outcomes: list[tuple[str, bool]]

    def patches(self, name: str) -> list[Request]:
        return self.fake.matching("PATCH", f"/api/v1/namespaces/default/pods/{name}/status")

    def statuses(self, name: str) -> list[Any]:
        return [r.body["status"] for r in self.patches(name)]

    def writes(self) -> list[Request]:
        return [r for r in self.fake.requests if r.method != "GET"]

    def hold_status_writes(self) -> asyncio.Event:
        gate = asyncio.Event()
        self.fake.on("PATCH", POD_STATUS, Reply(200, hold=gate))
        return gate

    async def drain(self) -> None:
        assert await self.writer.wait_idle(5.0)
        assert await self.events.wait_idle(5.0)


@pytest_asyncio.fixture(loop_scope="function")
async def lanes(fake: FakeApiServer) -> AsyncIterator[Lanes]:
    fake.on("PATCH", POD_STATUS, Reply(200))
    fake.on("POST", EVENTS, Reply(201))
    fake.on("PATCH", f"{EVENTS}/*", Reply(200))
    api = fake.client()
    verdicts = Verdicts()
    store: dict[str, dict[str, Any]] = {}
    events = EventRecorder(api, "test")
    outcomes: list[tuple[str, bool]] = []
    writer = PodStatusWriter(
        api, verdicts, store.get, events, settle=0.2, on_write=lambda op, ok: outcomes.append((op, ok))
    )
    tasks = [asyncio.create_task(writer.run()), asyncio.create_task(events.run())]
    yield Lanes(fake, verdicts, store, writer, events, outcomes)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ---------------------------------------------------------------------------------- the condition
async def test_the_pod_scheduled_condition_is_a_strategic_merge_patch_of_the_status(lanes: Lanes) -> None:
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.verdicts.conditions["default/p"] = ("Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")
    lanes.writer.mark(view(raw), event=True)
    await lanes.drain()
    (patch,) = lanes.patches("p")
    assert patch.content_type == STRATEGIC_MERGE_PATCH
    (condition,) = patch.body["status"]["conditions"]
    assert patch.body == {"status": {"conditions": [condition]}}
    assert condition == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient cpu.",
        "lastProbeTime": None,
        "lastTransitionTime": condition["lastTransitionTime"],
    }
    assert condition["lastTransitionTime"].endswith("Z")
    (event,) = lanes.fake.matching("POST", EVENTS)
    assert (event.body["type"], event.body["reason"], event.body["action"], event.body["note"]) == (
        "Warning",
        "FailedScheduling",
        "Scheduling",
        condition["message"],
    )
    assert event.body["reportingController"] == "koord-scheduler"


def scheduled(status: str, reason: str, message: str, since: str = "2024-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


@pytest.mark.parametrize(
    ("stored", "written", "transition_kept"),
    [
        pytest.param([], True, False, id="no condition yet"),
        pytest.param([scheduled("False", "Unschedulable", "no")], False, False, id="the same condition"),
        pytest.param([scheduled("False", "Unschedulable", "other")], True, True, id="another message"),
        pytest.param([scheduled("False", "SchedulerError", "no")], True, True, id="another reason"),
        pytest.param([scheduled("True", "", "")], True, False, id="was scheduled"),
    ],
)
async def test_the_condition_is_written_only_when_it_changes(
    lanes: Lanes, stored: list[dict[str, Any]], written: bool, transition_kept: bool
) -> None:
    raw = lanes.store["default/p"] = stored_pod("p", conditions=stored)
    lanes.verdicts.conditions["default/p"] = ("Unschedulable", "no")
    lanes.writer.mark(view(raw))
    await lanes.drain()
    statuses = lanes.statuses("p")
    assert len(statuses) == (1 if written else 0)
    if written:
        since = statuses[0]["conditions"][0]["lastTransitionTime"]
        # the status stayed False: the transition is the one already stored
        assert (since == "2024-01-01T00:00:00Z") == transition_kept


# ---------------------------------------------------------------------------------- one pod's lane
async def test_writes_for_one_pod_are_serialized_and_the_newest_verdict_lands_last(lanes: Lanes) -> None:
    gate = lanes.hold_status_writes()
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.verdicts.conditions["default/p"] = ("Unschedulable", "verdict 1")
    lanes.writer.mark(view(raw))
    await until(lambda: len(lanes.patches("p")) == 1, what="the first write on the wire")
    for i in (2, 3):
        lanes.verdicts.conditions["default/p"] = ("Unschedulable", f"verdict {i}")
        lanes.writer.mark(view(raw))
    # eight workers, and still not a second write of the same pod while the first is on the wire
    await asyncio.sleep(0.1)
    assert len(lanes.patches("p")) == 1
    gate.set()
    await lanes.drain()
    first, second = lanes.patches("p")
    assert first.answered is not None and second.arrived > first.answered
    assert [s["conditions"][0]["message"] for s in lanes.statuses("p")] == ["verdict 1", "verdict 3"]


async def test_writes_for_different_pods_are_on_the_wire_together(lanes: Lanes) -> None:
    gate = lanes.hold_status_writes()
    for name in ("p", "q"):
        raw = lanes.store[f"default/{name}"] = stored_pod(name)
        lanes.verdicts.conditions[f"default/{name}"] = ("Unschedulable", "no")
        lanes.writer.mark(view(raw))
    await until(lambda: len(lanes.fake.matching("PATCH", POD_STATUS)) == 2, what="both writes on the wire")
    gate.set()
    await lanes.drain()


async def test_many_verdicts_on_one_pod_make_one_write_of_the_latest(lanes: Lanes) -> None:
    raw = lanes.store["default/p"] = stored_pod("p")
    for i in range(20):
        lanes.verdicts.conditions["default/p"] = ("Unschedulable", f"verdict {i}")
        lanes.writer.mark(view(raw))
    await lanes.drain()
    statuses = lanes.statuses("p")
    assert len(statuses) <= 2  # the first may go out before the others are marked
    assert statuses[-1]["conditions"][0]["message"] == "verdict 19"


async def test_a_binding_waits_for_a_status_write_on_the_wire(lanes: Lanes) -> None:
    gate = lanes.hold_status_writes()
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.verdicts.conditions["default/p"] = ("Unschedulable", "no")
    lanes.writer.mark(view(raw))
    await until(lambda: len(lanes.patches("p")) == 1, what="the write on the wire")
    waiting = asyncio.create_task(lanes.writer.wait_written("default/p"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    gate.set()
    await asyncio.wait_for(waiting, 5.0)
    assert lanes.patches("p")[0].answered is not None


# ---------------------------------------------------------------------------------- what is not written
@pytest.mark.parametrize(
    ("what", "stored", "pending", "condition"),
    [
        ("bound meanwhile", {"spec": {"nodeName": "n1"}}, True, ("Unschedulable", "no")),
        ("no longer pending for the scheduler", {}, False, ("Unschedulable", "no")),
        ("no verdict to write", {}, True, None),
        (
            "the stored condition already says it",
            {"status": {"conditions": [scheduled("False", "Unschedulable", "no")]}},
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
        lanes.verdicts.not_pending.add("default/p")
    if condition is not None:
        lanes.verdicts.conditions["default/p"] = condition
    lanes.writer.mark(pod)
    await lanes.drain()
    assert lanes.writes() == [], what


async def test_a_settling_verdict_is_dropped_when_the_pod_moves_on_in_time(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g")
    lanes.verdicts.conditions["default/g"] = ("GangNotReady", "gang default/g has 1 of minMember 2 pods")
    lanes.writer.mark(view(raw), settle=True)
    await asyncio.sleep(0.05)
    assert lanes.writes() == []
    # the gang completed and the pod was bound before the verdict settled
    lanes.verdicts.not_pending.add("default/g")
    await lanes.drain()
    assert lanes.writes() == []


async def test_a_settled_verdict_is_written_once_with_its_event(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g")
    lanes.verdicts.conditions["default/g"] = ("GangNotReady", "gang default/g has 1 of minMember 2 pods")
    lanes.writer.mark(view(raw), settle=True, event=True)
    await lanes.drain()
    assert len(lanes.patches("g")) == 1
    (event,) = lanes.fake.matching("POST", EVENTS)
    assert (event.body["reason"], event.body["regarding"]["name"]) == ("FailedScheduling", "g")


async def test_a_waiting_gangs_condition_is_not_rewritten_as_its_members_arrive(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g")
    for count in (1, 2, 3):
        lanes.verdicts.conditions["default/g"] = (
            "GangNotReady",
            f"gang default/g has {count} of minMember 4 pods",
        )
        lanes.writer.mark(view(raw), settle=True)
        await lanes.drain()
        # the informer shows the pod as written
        for status in lanes.statuses("g"):
            raw["status"] = {**raw["status"], **status}
    (status,) = lanes.statuses("g")
    assert status["conditions"][0]["message"] == "GangNotReady: gang default/g has 1 of minMember 4 pods"
    # a verdict of another kind is written at once
    lanes.verdicts.conditions["default/g"] = ("Unschedulable", "0/4 nodes are available: 4 Insufficient cpu.")
    lanes.writer.mark(view(raw))
    await lanes.drain()
    assert len(lanes.patches("g")) == 2


async def test_a_parked_refresh_does_not_hold_back_another_pods_verdict(lanes: Lanes) -> None:
    first = lanes.store["default/a"] = stored_pod("a")
    lanes.verdicts.conditions["default/a"] = ("GangNotReady", "gang default/a has 1 of minMember 2 pods")
    lanes.writer.mark(view(first), settle=True)
    await lanes.drain()
    # a's next verdict waits for its refresh, minutes away; b's settles in the usual moment
    lanes.verdicts.conditions["default/a"] = ("GangNotReady", "gang default/a has 2 of minMember 3 pods")
    lanes.writer.mark(view(first), settle=True)
    second = lanes.store["default/b"] = stored_pod("b")
    lanes.verdicts.conditions["default/b"] = ("GangNotReady", "gang default/b has 1 of minMember 2 pods")
    lanes.writer.mark(view(second), settle=True)
    await lanes.drain()
    assert len(lanes.patches("b")) == 1
    assert len(lanes.patches("a")) == 1


async def test_nomination_is_written_without_a_condition(lanes: Lanes) -> None:
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.writer.mark(view(raw), nominated="n3")
    await lanes.drain()
    assert lanes.statuses("p") == [{"nominatedNodeName": "n3"}]
    assert lanes.fake.matching("POST", EVENTS) == []


async def test_a_pod_gone_from_the_server_is_not_an_error(lanes: Lanes) -> None:
    lanes.fake.on("PATCH", POD_STATUS, Reply.error(404, "NotFound", 'pods "p" not found'))
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.verdicts.conditions["default/p"] = ("Unschedulable", "no")
    lanes.writer.mark(view(raw), event=True)
    await lanes.drain()
    # counted as a failed write; no event claims a condition that was never written
    assert lanes.outcomes == [("pod_condition", False)]
    assert lanes.fake.matching("POST", EVENTS) == []


# ---------------------------------------------------------------------------------- kube's reasons
@pytest.mark.parametrize(
    ("verdict", "condition"),
    [
        pytest.param(
            ("Unschedulable", "0/3 nodes are available: 3 Insufficient cpu."),
            ("Unschedulable", "0/3 nodes are available: 3 Insufficient cpu."),
            id="kube's own reason as it is",
        ),
        pytest.param(
            ("SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"),
            ("SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"),
            id="gated as the apiserver says it",
        ),
        pytest.param(
            ("SchedulerError", "binding rejected: the server is shutting down"),
            ("SchedulerError", "binding rejected: the server is shutting down"),
            id="an error",
        ),
        pytest.param(
            ("GangNotReady", "gang default/g has 1 of minMember 2 pods"),
            ("Unschedulable", "GangNotReady: gang default/g has 1 of minMember 2 pods"),
            id="a gang not ready is a rejection",
        ),
        pytest.param(
            ("InvalidSpec", "spec.containers[0].resources.requests.cpu: too large"),
            ("Unschedulable", "InvalidSpec: spec.containers[0].resources.requests.cpu: too large"),
            id="an invalid spec is a rejection",
        ),
        pytest.param(
            ("NetworkTopologyUnavailable", "no topology"),
            ("Unschedulable", "NetworkTopologyUnavailable: no topology"),
            id="no topology is a rejection",
        ),
        pytest.param(("SomethingNew", "why"), ("Unschedulable", "SomethingNew: why"), id="an unknown reason"),
        pytest.param(("GangNotReady", ""), ("Unschedulable", "GangNotReady"), id="no message"),
    ],
)
def test_the_condition_says_koordpys_verdict_with_kubes_reason(
    verdict: tuple[str, str], condition: tuple[str, str]
) -> None:
    assert pod_scheduled(*verdict) == condition


def test_every_reason_written_is_one_of_kubes() -> None:
    kube = {names.UNSCHEDULABLE, names.SCHEDULING_GATED, names.SCHEDULER_ERROR}
    assert set(KUBE_REASONS.values()) <= kube
    assert {r for r in kube if KUBE_REASONS[r] != r} == set()


async def test_a_finer_verdict_is_written_with_kubes_reason_and_leads_the_message(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g", scheduler="gang-scheduler")
    lanes.verdicts.conditions["default/g"] = ("GangNotReady", "gang default/g has 1 of minMember 2 pods")
    lanes.writer.mark(view(raw), event=True)
    await lanes.drain()
    ((condition,),) = [s["conditions"] for s in lanes.statuses("g")]
    assert (condition["reason"], condition["message"]) == (
        "Unschedulable",
        "GangNotReady: gang default/g has 1 of minMember 2 pods",
    )
    (event,) = lanes.fake.matching("POST", EVENTS)
    assert (event.body["note"], event.body["reportingController"]) == (condition["message"], "gang-scheduler")


@pytest.mark.parametrize(
    ("stored", "written"),
    [
        pytest.param(scheduled("False", "Unschedulable", "GangNotReady: g"), False, id="as written before"),
        # what an earlier koordpy wrote is brought to kube's reason
        pytest.param(scheduled("False", "GangNotReady", "g"), True, id="the fine reason as the reason"),
        pytest.param(scheduled("False", "Unschedulable", "g"), True, id="the message without the reason"),
    ],
)
async def test_the_stored_condition_is_compared_as_it_is_written(
    lanes: Lanes, stored: dict[str, Any], written: bool
) -> None:
    raw = lanes.store["default/p"] = stored_pod("p", conditions=[stored])
    lanes.verdicts.conditions["default/p"] = ("GangNotReady", "g")
    lanes.writer.mark(view(raw), event=True)
    await lanes.drain()
    assert len(lanes.patches("p")) == (1 if written else 0)


# ---------------------------------------------------------------------------------- events
@pytest.mark.parametrize(
    ("marks", "events"),
    [
        pytest.param([True], 1, id="the pod was attempted"),
        pytest.param([False], 0, id="only told its gang's outcome"),
        # verdicts coalesce into one write of the latest, which says whether it is an attempt's
        pytest.param([True, False], 0, id="attempted then told"),
        pytest.param([False, True], 1, id="told then attempted"),
        pytest.param([True, None], 1, id="attempted then nominated"),
    ],
)
async def test_only_a_verdict_on_the_pods_own_attempt_is_told_as_an_event(
    lanes: Lanes, marks: list[bool | None], events: int
) -> None:
    raw = lanes.store["default/p"] = stored_pod("p")
    for i, event in enumerate(marks):
        if event is None:
            lanes.writer.mark(view(raw), nominated="n1")
            continue
        lanes.verdicts.conditions["default/p"] = ("Unschedulable", f"gang default/g verdict {i}")
        lanes.writer.mark(view(raw), event=event)
    await lanes.drain()
    # the condition is state: written whoever was attempted
    (status,) = lanes.statuses("p")
    assert status["conditions"][0]["message"].startswith("gang default/g verdict ")
    assert len(lanes.fake.matching("POST", EVENTS)) == events


async def test_a_settling_attempt_overtaken_by_the_gangs_outcome_is_not_told(lanes: Lanes) -> None:
    raw = lanes.store["default/g"] = stored_pod("g")
    lanes.verdicts.conditions["default/g"] = ("GangNotReady", "gang default/g has 1 of minMember 2 pods")
    lanes.writer.mark(view(raw), settle=True, event=True)
    # the gang completed and failed as a whole before the verdict settled; this member was not tried
    lanes.verdicts.conditions["default/g"] = ("Unschedulable", "gang default/g cannot be placed as a whole")
    lanes.writer.mark(view(raw), event=False)
    await lanes.drain()
    (status,) = lanes.statuses("g")
    assert status["conditions"][0]["message"] == "gang default/g cannot be placed as a whole"
    assert lanes.fake.matching("POST", EVENTS) == []


async def test_a_gated_pod_gets_its_condition_and_no_event(lanes: Lanes) -> None:
    raw = lanes.store["default/p"] = stored_pod("p")
    lanes.verdicts.conditions["default/p"] = (
        "SchedulingGated",
        "Scheduling is blocked due to non-empty scheduling gates",
    )
    lanes.writer.mark(view(raw), event=True)
    await lanes.drain()
    assert len(lanes.patches("p")) == 1
    assert lanes.fake.matching("POST", EVENTS) == []
