"""Pods waiting at Permit: which are resolved, and in what order."""

from __future__ import annotations

import pytest

from koordpy.framework.cycle_state import CycleState
from koordpy.framework.waiting import WaitingPod, WaitingPods
from tests.builders import make_pod


def waiting(*names: str, deadline: float = 100.0) -> WaitingPods:
    pods = WaitingPods()
    for name in names:
        pods.add(WaitingPod(make_pod(name), "n1", CycleState(), "p", deadline, {"Coscheduling"}))
    return pods


def names(pods: list[WaitingPod]) -> list[str]:
    return [wp.pod.name for wp in pods]


@pytest.mark.parametrize(
    ("settle", "now", "expected"),
    [
        ([], 0.0, []),
        (["c", "a"], 0.0, ["a", "c"]),
        ([], 100.0, ["a", "b", "c"]),
        (["b"], 50.0, ["b"]),
    ],
    ids=["none-settled", "settled-in-the-order-they-waited", "all-past-deadline", "only-the-settled-one"],
)
def test_due_pods_come_in_the_order_they_started_to_wait(
    settle: list[str], now: float, expected: list[str]
) -> None:
    pods = waiting("a", "b", "c")
    for name in settle:
        wp = pods.get(f"default/{name}")
        assert wp is not None
        wp.allow("Coscheduling")
    assert names(list(pods.due(now))) == expected


def test_a_pod_settled_during_a_pass_joins_it_only_if_it_waited_later() -> None:
    pods = waiting("a", "b", "c")
    a, b, c = (pods.get(f"default/{n}") for n in "abc")
    assert a is not None and b is not None and c is not None
    b.reject("Coscheduling", "gang rejected")
    seen = []
    for wp in pods.due(0.0):
        seen.append(wp.pod.name)
        pods.pop(wp.pod.key)
        # resolving b rejects its whole gang: c waited later (this pass), a earlier (the next)
        a.reject("Coscheduling", "gang rejected")
        c.reject("Coscheduling", "gang rejected")
    assert seen == ["b", "c"]
    assert names(list(pods.due(0.0))) == ["a"]


def test_next_deadline_skips_pods_that_left() -> None:
    pods = WaitingPods()
    for name, deadline in (("a", 5.0), ("b", 9.0)):
        pods.add(WaitingPod(make_pod(name), "n1", CycleState(), "p", deadline, {"Coscheduling"}))
    pods.pop("default/a")
    assert pods.next_deadline() == 9.0
