"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.status import Code
from tests.builders import Harness, make_pod, node_dict

NU = "NodeUnschedulable"
KEY = "node.kubernetes.io/unschedulable"

CASES = [
    ([], ["open"]),
    ([{"key": KEY, "operator": "Exists", "effect": "NoSchedule"}], ["cordoned", "open"]),
    ([{"key": KEY, "operator": "Exists"}], ["cordoned", "open"]),
    ([{"operator": "Exists"}], ["cordoned", "open"]),
    ([{"key": KEY, "operator": "Exists", "effect": "NoExecute"}], ["open"]),
    ([{"key": KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}], ["open"]),
    ([{"key": KEY, "operator": "Equal", "value": "", "effect": "NoSchedule"}], ["cordoned", "open"]),
]
IDS = [
    "no-toleration",
    "tolerates-exactly",
    "tolerates-any-effect",
    "tolerates-everything",
    "wrong-effect",
    "wrong-value",
    "equal-empty-value",
]


@pytest.mark.parametrize(("tolerations", "feasible"), CASES, ids=IDS)
def test_filter(tolerations: list[dict[str, Any]], feasible: list[str]) -> None:
    h = Harness([node_dict("cordoned", unschedulable=True), node_dict("open")], plugins=[NU])
    assert h.feasible(make_pod("x", spec={"tolerations": tolerations}))[0] == feasible


def test_failure_message_and_code() -> None:
    h = Harness([node_dict("a", unschedulable=True), node_dict("b", unschedulable=True)], plugins=[NU])
    _, diagnosis = h.feasible(make_pod("x"))
    assert fit_error_message(2, diagnosis) == "0/2 nodes are available: 2 node(s) were unschedulable."
    assert {s.code for s in diagnosis.statuses_by_row().values()} == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_uncordon_is_seen() -> None:
    h = Harness([node_dict("a", unschedulable=True)], plugins=[NU])
    pod = make_pod("x")
    assert h.feasible(pod)[0] == []
    h.cache.update_node(Node.from_dict(node_dict("a")))
    assert h.feasible(pod)[0] == ["a"]
