"""The scheduling queue: ordering, backoff, the unschedulable pool, events and gates."""

from __future__ import annotations

import pytest

from koordpy.framework.clock import VirtualClock
from koordpy.framework.interfaces import NODE_ADD, POD_DELETE, ClusterEvent
from koordpy.framework.status import unresolvable
from koordpy.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from tests.builders import make_pod


def new_queue(
    clock: VirtualClock,
    gate: set[str] | None = None,
    events: dict[str, tuple[ClusterEvent, ...]] | None = None,
) -> SchedulingQueue:
    def pre_enqueue(pod):  # type: ignore[no-untyped-def]
        if gate and pod.name in gate:
            return unresolvable("gated", plugin="SchedulingGates")
        return None

    return SchedulingQueue(
        lambda info: (-info.pod.priority, info.timestamp),
        pre_enqueue,
        events or {"NodeResourcesFit": (NODE_ADD,)},
        QueueSettings(initial_backoff=1, max_backoff=10, max_unschedulable_seconds=300),
        clock.now,
    )


def test_higher_priority_pops_first_then_earlier() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("low", priority=1))
    clock.advance(1)
    q.add(make_pod("high", priority=10))
    q.add(make_pod("high-later", priority=10))
    assert [q.pop().pod.name for _ in range(3)] == ["high", "high-later", "low"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("attempts", "expected"), [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (9, 10)])
def test_backoff_doubles_from_initial_up_to_max(attempts: int, expected: float) -> None:
    q = new_queue(VirtualClock())
    assert q.backoff_duration(attempts) == expected


def test_rejected_pod_waits_in_pool_until_a_helpful_event() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, {"NodeResourcesFit"})
    assert q.where["default/p"] == UNSCHEDULABLE
    q.on_event(POD_DELETE)  # NodeResourcesFit did not register pod deletes in this test
    assert q.where["default/p"] == UNSCHEDULABLE
    clock.advance(5)  # past its 1 s backoff
    q.on_event(NODE_ADD)
    assert q.where["default/p"] == ACTIVE


def test_event_during_backoff_moves_pod_to_backoff_then_active_when_it_ends() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, {"NodeResourcesFit"})
    q.on_event(NODE_ADD)
    assert q.where["default/p"] == BACKOFF
    clock.advance(0.5)
    q.flush()
    assert q.where["default/p"] == BACKOFF
    clock.advance(0.5)
    q.flush()
    assert q.where["default/p"] == ACTIVE


def test_event_arriving_during_the_cycle_sends_pod_to_backoff_not_the_pool() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.on_event(NODE_ADD)  # arrives while p is being scheduled
    q.add_unschedulable(info, {"NodeResourcesFit"})
    assert q.where["default/p"] == BACKOFF


def test_pool_is_flushed_after_five_minutes() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, {"NodeResourcesFit"})
    clock.advance(299)
    q.flush()
    assert q.where["default/p"] == UNSCHEDULABLE
    clock.advance(1)
    q.flush()
    assert q.where["default/p"] == ACTIVE


def test_error_goes_to_backoff_directly() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, (), error=True)
    assert q.where["default/p"] == BACKOFF


def test_gated_pod_is_never_active_until_pre_enqueue_passes() -> None:
    clock = VirtualClock()
    gate = {"p"}
    q = new_queue(clock, gate=gate)
    q.add(make_pod("p"))
    assert q.where["default/p"] == GATED
    assert q.pop() is None
    gate.clear()
    q.on_event(ClusterEvent("Pod", "Update"))
    assert q.where["default/p"] == ACTIVE


def test_deleted_pod_is_never_popped() -> None:
    q = new_queue(VirtualClock())
    q.add(make_pod("p"))
    q.delete("default/p")
    assert q.pop() is None


def test_pending_counts_by_queue() -> None:
    q = new_queue(VirtualClock(), gate={"g"})
    q.add(make_pod("a"))
    q.add(make_pod("g"))
    assert q.counts() == {ACTIVE: 1, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}


def test_a_queue_never_popped_keeps_no_entry_of_pods_gone() -> None:
    # a standby hears of every pod the leader binds and deletes, and pops none of them
    queue = new_queue(VirtualClock())
    for i in range(1000):
        queue.add(make_pod(f"p{i}"))
        queue.update(make_pod(f"p{i}", priority=5))
        queue.delete(f"default/p{i}")
    assert len(queue) == 0
    assert len(queue._active) <= 64 and len(queue._backoff) <= 64
