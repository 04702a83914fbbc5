"""An update of a pod in flight, as kube-scheduler's PriorityQueue.Update handles it: the pod is
left to its attempt (not put back in activeQ), the update is kept as an event of its flight
(addEventsIfPodInFlight), and if the attempt fails the pod is judged by its rejectors' hints on
that event and comes back as the update has it."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.framework.clock import VirtualClock
from koordpy.framework.interfaces import POD_UPDATE, ClusterEventWithHint, QueueingHint
from koordpy.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from tests.builders import make_pod


def own_tolerations_changed(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """TaintToleration's isSchedulableAfterPodTolerationChange: only the pod's own update helps."""
    return QueueingHint.QUEUE if new is not None and new.key == pod.key else QueueingHint.QUEUE_SKIP


def new_queue(clock: VirtualClock) -> SchedulingQueue:
    return SchedulingQueue(
        lambda info: (-info.pod.priority, info.timestamp),
        lambda pod: None,
        {
            "Taints": (ClusterEventWithHint(POD_UPDATE, own_tolerations_changed),),
            "Fit": (),
        },
        QueueSettings(initial_backoff=1, max_backoff=10, max_unschedulable_seconds=300),
        clock.now,
    )


UPDATED = make_pod("p", labels={"version": "2"})


# (what ends the attempt, where the pod is then, or None: the queue no longer holds it)
CASES = [
    ("rejected by a plugin whose hint queues the pod's own update", ("fail", {"Taints"}), BACKOFF),
    ("rejected by a plugin that registered no pod update", ("fail", {"Fit"}), UNSCHEDULABLE),
    ("rejected with an error", ("error", set()), BACKOFF),
    ("put back at once (a gang member not tried)", ("requeue", set()), ACTIVE),
    ("bound", ("done", set()), None),
]


@pytest.mark.parametrize(("end", "where"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_update_in_flight_is_left_to_the_attempt(end: tuple[str, set[str]], where: str | None) -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None

    q.update(UPDATED)

    # not back in activeQ while its attempt runs, and the attempt keeps the object it started with
    assert q.pop() is None
    assert "default/p" not in q.where
    assert info.pod is not UPDATED
    how, rejectors = end
    if how == "fail":
        q.add_unschedulable(info, rejectors)
    elif how == "error":
        q.add_unschedulable(info, rejectors, error=True)
    elif how == "requeue":
        q.requeue_immediately(info)
    else:
        q.done(info.key)
    assert q.where.get("default/p") == where
    if where is not None:
        assert q.infos["default/p"].pod is UPDATED
    assert not q.in_flight


def test_update_in_flight_is_judged_for_the_other_pods_in_flight() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    q.add(make_pod("other"))
    first, second = q.pop(), q.pop()
    assert first is not None and second is not None
    mine = first if first.key == "default/p" else second
    other = second if mine is first else first
    q.update(UPDATED)
    # another pod's update does not help a pod its hint rejected
    q.add_unschedulable(other, {"Taints"})
    q.add_unschedulable(mine, {"Taints"})
    assert q.where["default/other"] == UNSCHEDULABLE
    assert q.where["default/p"] == BACKOFF


def test_updates_in_flight_keep_the_latest_object() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.update(make_pod("p", labels={"version": "1"}))
    q.update(UPDATED)
    q.add_unschedulable(info, {"Fit"})
    assert q.infos["default/p"].pod is UPDATED
    # once landed, an update is its rejectors' to judge: Fit registered no pod update, so the pod
    # waits on in the pool, as updated
    clock.advance(20)
    third = make_pod("p", labels={"version": "3"})
    q.update(third)
    assert q.where["default/p"] == UNSCHEDULABLE
    assert q.infos["default/p"].pod is third


def test_pending_pod_update_is_unchanged() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    q.update(UPDATED)
    assert q.where["default/p"] == ACTIVE
    popped = q.pop()
    assert popped is not None and popped.pod is UPDATED
