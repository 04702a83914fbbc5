"""Events heard while a pod is in flight (popped, and not yet back in the queue or bound), judged
when it comes back rejected, as kube-scheduler's scheduling queue does with its inFlightEvents
(determineSchedulingHintForInFlightPod): only an event one of the pod's rejectors' hints answers
QUEUE for sends it to backoff; otherwise it waits in the unschedulable pool."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.framework.clock import VirtualClock
from koordpy.framework.interfaces import (
    NODE_ADD,
    POD_DELETE,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from koordpy.queue import BACKOFF, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from tests.builders import make_node, make_pod

BIG = "big-node"


def big_node_only(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A hint that is helped only by a node named BIG."""
    return QueueingHint.QUEUE if new is not None and new.name == BIG else QueueingHint.QUEUE_SKIP


def new_queue(clock: VirtualClock) -> SchedulingQueue:
    return SchedulingQueue(
        lambda info: (-info.pod.priority, info.timestamp),
        lambda pod: None,
        {
            "Fit": (ClusterEventWithHint(NODE_ADD, big_node_only),),
            "Plain": (POD_DELETE,),
        },
        QueueSettings(initial_backoff=1, max_backoff=10, max_unschedulable_seconds=300),
        clock.now,
        shape_of_plugin={"Fit": lambda pod: ()},
    )


@pytest.mark.parametrize(
    ("rejectors", "events", "expected"),
    [
        pytest.param({"Fit"}, [], UNSCHEDULABLE, id="no-event"),
        pytest.param({"Fit"}, [(NODE_ADD, None, make_node("small"))], UNSCHEDULABLE, id="hint-skips"),
        pytest.param({"Fit"}, [(NODE_ADD, None, make_node(BIG))], BACKOFF, id="hint-queues"),
        pytest.param(
            {"Fit"},
            [(NODE_ADD, None, make_node("small")), (NODE_ADD, None, make_node(BIG))],
            BACKOFF,
            id="any-event-of-the-flight-queues",
        ),
        pytest.param({"Fit"}, [(POD_DELETE, make_pod("o"), None)], UNSCHEDULABLE, id="event-not-registered"),
        pytest.param({"Fit"}, [(NODE_ADD, None, None)], BACKOFF, id="event-without-objects"),
        pytest.param({"Plain"}, [(POD_DELETE, make_pod("o"), None)], BACKOFF, id="registered-without-hint"),
        pytest.param(
            {"Fit", "Plain"}, [(POD_DELETE, make_pod("o"), None)], BACKOFF, id="one-rejector-of-two"
        ),
        pytest.param(set(), [(ClusterEvent("PodGroup", "Add"), None, None)], BACKOFF, id="no-rejector"),
    ],
)
def test_a_rejected_pod_is_judged_on_the_events_of_its_flight(
    rejectors: set[str], events: list[tuple[ClusterEvent, Any, Any]], expected: str
) -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    for event, old, new in events:
        q.on_event(event, old, new)
    q.add_unschedulable(info, rejectors)
    assert q.where["default/p"] == expected


def test_events_before_the_pod_took_off_do_not_count() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("early"))
    q.add(make_pod("late"))
    early = q.pop()
    assert early is not None
    q.on_event(NODE_ADD, None, make_node(BIG))  # heard while only `early` flies
    late = q.pop()
    assert late is not None
    q.add_unschedulable(late, {"Fit"})
    q.add_unschedulable(early, {"Fit"})
    assert q.where["default/late"] == UNSCHEDULABLE
    assert q.where["default/early"] == BACKOFF


def test_events_after_a_pod_landed_do_not_count_for_its_next_flight() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, {"Fit"})
    clock.advance(20)
    q.on_event(NODE_ADD, None, make_node("small"))
    q.activate(["default/p"])  # back to activeQ (a label update no longer moves it: Fit has no hint for it)
    again = q.pop()
    assert again is not None
    q.add_unschedulable(again, {"Fit"})
    assert q.where["default/p"] == UNSCHEDULABLE


def test_a_gang_rejected_together_shares_its_verdict_and_the_kept_events_are_dropped() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    for i in range(3):
        q.add(make_pod(f"m{i}"))
    members = [q.pop() for _ in range(3)]
    q.on_event(NODE_ADD, None, make_node(BIG))
    for m in members:
        assert m is not None
        q.add_unschedulable(m, {"Fit"})
    assert [q.where[f"default/m{i}"] for i in range(3)] == [BACKOFF] * 3
    # nobody is in flight: nothing is kept for later flights
    assert not q.in_flight
    assert len(q._flight_events) == 0


def test_a_pod_bound_or_deleted_in_flight_lets_its_events_go() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("bound"))
    q.add(make_pod("deleted"))
    bound, deleted = q.pop(), q.pop()
    assert bound is not None and deleted is not None
    q.on_event(NODE_ADD, None, make_node(BIG))
    q.done(bound.key)
    assert len(q._flight_events) == 1  # `deleted` still flies
    q.delete(deleted.key)
    assert len(q._flight_events) == 0
