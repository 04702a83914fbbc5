"""One scheduling cycle: nominated pods hold their room, and large clusters are sampled."""

from __future__ import annotations

import pytest

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler, num_feasible_nodes_to_find
from tests.builders import make_node, make_pod


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (None, 50, 50),  # small clusters: every node
        (None, 1000, 420),  # adaptive: 50 - 1000/125 = 42 %
        (None, 5000, 500),  # adaptive: 50 - 40 = 10 %
        (None, 10000, 500),  # adaptive floor 5 %
        (10, 500, 100),  # never fewer than 100 nodes
        (100, 5000, 5000),
        (30, 1000, 300),
    ],
)
def test_number_of_feasible_nodes_to_find(percentage: int | None, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def scheduler_with(*nodes: str, cpu: str = "4") -> Scheduler:
    s = Scheduler(default_configuration(), registry(), VirtualClock())
    for n in nodes:
        s.on_node_add(make_node(n, cpu=cpu))
    return s


def placed_on(s: Scheduler, name: str) -> str | None:
    s.schedule_one()
    for effect in s.drain():
        if type(effect).__name__ == "Bind" and effect.pod.name == name:  # type: ignore[attr-defined]
            return effect.node_name  # type: ignore[attr-defined, no-any-return]
    return None


@pytest.mark.parametrize(
    ("nominated_priority", "pod_priority", "expected"),
    [
        (100, 10, None),  # a higher-priority nomination keeps the room
        (10, 10, None),  # so does an equal one
        (5, 10, "only"),  # a lower-priority nomination does not
    ],
    ids=["higher-priority-nomination-holds", "equal-priority-nomination-holds", "lower-priority-ignored"],
)
def test_nominated_pods_are_counted_when_filtering_others(
    nominated_priority: int, pod_priority: int, expected: str | None
) -> None:
    s = scheduler_with("only")
    nominee = make_pod("nominee", cpu="3", priority=nominated_priority)
    s.nominator.add(nominee, "only")
    s.on_pod_add(make_pod("other", cpu="2", priority=pod_priority))
    assert placed_on(s, "other") == expected


def test_nominee_itself_is_not_blocked_by_its_own_nomination() -> None:
    s = scheduler_with("only")
    nominee = make_pod("nominee", cpu="3", priority=100)
    s.nominator.add(nominee, "only")
    s.on_pod_add(nominee)
    assert placed_on(s, "nominee") == "only"


def test_failed_pod_gets_the_aggregated_message() -> None:
    s = scheduler_with("a", "b", cpu="1")
    s.on_pod_add(make_pod("big", cpu="2"))
    s.schedule_one()
    assert s.outcomes["default/big"].message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_equal_scores_go_to_the_first_node_in_order() -> None:
    s = scheduler_with("n1", "n2", "n3")
    s.on_pod_add(make_pod("p", cpu="1"))
    assert placed_on(s, "p") == "n1"
