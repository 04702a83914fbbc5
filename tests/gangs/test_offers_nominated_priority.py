"""Offer slots of a gang next to a pod nominated to a node: each member counts the nominated pods of
its own priority or higher (kube-scheduler's addGENominatedPods, run for every member's filters),
so a member of higher priority than the nominated pod does not see its room taken, and one of lower
priority does. Members are taken in order, each with the earlier ones on the node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.api.pod import Pod
from koordpy.plugins.coscheduling.offers import _count_one_by_one, _Template, offer_slots
from tests.builders import Harness, node_dict, pod_dict


def member(name: str, priority: int, cpu: str = "2", **kw: Any) -> Pod:
    return Pod.from_dict(pod_dict(name, cpu=cpu, priority=priority, **kw))


# one node of 4 cpu with a pod of priority 5 asking 2 cpu nominated to it;
# (members in order, how many of them the node offers)
CASES = [
    ("higher then lower: the lower one sees the nomination", [("hi", 10), ("lo", 1)], 1),
    ("lower then higher: the higher one does not", [("lo", 1), ("hi", 10)], 2),
    ("both above the nominated pod", [("a", 10), ("b", 10)], 2),
    ("both below the nominated pod", [("a", 1), ("b", 1)], 1),
    ("one at the nominated pod's priority counts it", [("eq", 5), ("hi", 10)], 2),
    ("three levels, the middle one at its priority", [("hi", 10), ("eq", 5), ("lo", 1)], 1),
]


def harness() -> Harness:
    h = Harness([node_dict("n1", cpu="4")], plugins=["NodeResourcesFit"])
    h.handle.nominator.add(member("nominated", 5), "n1")
    return h


@pytest.mark.parametrize(("members", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_member_counts_the_nominated_pods_of_its_priority_or_higher(
    members: list[tuple[str, int]], expected: int
) -> None:
    h = harness()
    pods = [member(name, priority) for name, priority in members]
    row = h.snapshot.row_of["n1"]

    offers = offer_slots(h.profile, pods, h.rows())

    assert int(offers.slots[row]) == expected


@pytest.mark.parametrize("members", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_the_arithmetic_agrees_with_the_real_filters_pod_by_pod(members: list[tuple[str, int]]) -> None:
    h = harness()
    pods = [member(name, priority) for name, priority in members]
    rows = h.rows()
    offers = offer_slots(h.profile, pods, rows)
    # the same pods, counted with the real filters and the earlier members assumed on the node
    kinds = [_Template(p, h.pre_filter(p)[0]) for p in pods]
    slots = np.zeros_like(offers.slots)
    _count_one_by_one(h.profile, pods, kinds, rows, slots, None)
    assert offers.slots.tolist() == slots.tolist()


def test_a_node_without_nominations_is_counted_as_before() -> None:
    h = Harness([node_dict("n1", cpu="4"), node_dict("n2", cpu="4")], plugins=["NodeResourcesFit"])
    h.handle.nominator.add(member("nominated", 5), "n1")
    pods = [member("lo", 1), member("hi", 10)]
    offers = offer_slots(h.profile, pods, h.rows())
    snap = h.snapshot
    assert (int(offers.slots[snap.row_of["n1"]]), int(offers.slots[snap.row_of["n2"]])) == (2, 2)
