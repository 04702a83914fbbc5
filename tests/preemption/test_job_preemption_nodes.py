"""Job-level preemption touches as few nodes as it can: of victim sets that cost the same (budgets
broken, jobs disrupted, their priorities, pods), the one that evicts on the fewest nodes and keeps
the gang on the fewest wins; a cheaper set still wins however many nodes it spreads over.

Koordinator's "preempt success" case (coscheduling/core/preemption_test.go) is the model: two
nodes of 32 cpu each hold two 16-cpu low-priority pods; a gang of two 16-cpu members evicts both
pods of the first node and has both members nominated there, not one pod on each node. Its
placeToSchedulePods takes, member by member, the first of the cheapest nodes in name order; koordpy
weighs whole outcomes and prefers, of equal ones, the fewest nodes, whatever the names.

Every case runs until the first preemption, then until the members are bound: they are bound
where they were nominated.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.preemption.test_job_preemption import (
    bound,
    group,
    member,
    node,
    nominated,
    rs_pods,
    running,
    victims,
    world_of,
)


def gang_of(size: int, cpu: str) -> list[dict[str, Any]]:
    return [group("g", size), *(member(f"g-{i}", "g", cpu) for i in range(size))]


CASES = [
    # (objects, expected victims, expected nominations)
    pytest.param(
        [
            node("node-1", cpu="32"),
            node("node-2", cpu="32"),
            running("existing-pod-1", "node-1", "16", 1),
            running("existing-pod-2", "node-1", "16", 1),
            running("existing-pod-3", "node-2", "16", 1),
            running("existing-pod-4", "node-2", "16", 1),
            group("gang-a", 2),
            member("pending-pod-1", "gang-a", "16"),
            member("pending-pod-2", "gang-a", "16"),
        ],
        {"existing-pod-1", "existing-pod-2"},
        {"pending-pod-1": "node-1", "pending-pod-2": "node-1"},
        id="koordinator-preempt-success-both-victims-on-one-node",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            node("n3", cpu="12"),
            running("a", "n1", "4", 10),
            running("b", "n2", "4", 10),
            *(running(f"c{i}", "n3", "4", 10) for i in range(3)),
            *gang_of(3, "4"),
        ],
        # three pods of three jobs either way; only n3 holds the whole gang, and it sorts last
        {"c0", "c1", "c2"},
        {"g-0": "n3", "g-1": "n3", "g-2": "n3"},
        id="whole-gang-on-the-one-node-that-holds-it",
    ),
    pytest.param(
        [
            node("n1", cpu="8"),
            node("n2"),
            node("n3"),
            *rs_pods("web", "n1", ["2", "2", "2", "2"], 10, "web"),
            running("web-4", "n2", "4", 10, owner=("web", True)),
            running("web-5", "n3", "4", 10, owner=("web", True)),
            *gang_of(2, "4"),
        ],
        # one job either way: two pods on two nodes before four pods on one
        {"web-4", "web-5"},
        {"g-0": "n2", "g-1": "n3"},
        id="fewer-victims-before-fewer-nodes",
    ),
    pytest.param(
        [
            node("n1", cpu="8"),
            node("n2"),
            node("n3"),
            running("a", "n1", "4", 50),
            running("b", "n1", "4", 50),
            running("c", "n2", "4", 10),
            running("d", "n3", "4", 10),
            *gang_of(2, "4"),
        ],
        # two jobs either way: the lower priority on two nodes before the higher on one
        {"c", "d"},
        {"g-0": "n2", "g-1": "n3"},
        id="lower-priority-before-fewer-nodes",
    ),
    pytest.param(
        [
            node("n1", cpu="8"),
            node("n2", cpu="8"),
            running("b", "n1", "4", 10),
            running("c", "n1", "4", 10),
            running("a", "n2", "4", 10),
            *gang_of(2, "4"),
        ],
        # n2 has room for one member without evicting: the other joins it there (one victim on the
        # node the gang already uses) rather than evicting one pod on n1, first by name
        {"a"},
        {"g-0": "n2", "g-1": "n2"},
        id="member-joins-the-node-another-member-uses",
    ),
]


@pytest.mark.parametrize(("objs", "expected_victims", "expected_plan"), CASES)
def test_fewest_nodes_among_equally_cheap_evictions(
    objs: list[dict[str, Any]], expected_victims: set[str], expected_plan: dict[str, str]
) -> None:
    world = world_of(objs)
    world.run(1)
    assert victims(world) == expected_victims
    assert nominated(world) == expected_plan
    world.run(600)
    assert bound(world, list(expected_plan)) == expected_plan
    assert victims(world) == expected_victims, "nothing more is evicted"
