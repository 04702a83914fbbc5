"""NodeName: spec.nodeName pins a pod to one node."""

from __future__ import annotations

import pytest

from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.status import Code
from tests.builders import Harness, make_pod, node_dict

NN = "NodeName"


@pytest.mark.parametrize(
    ("node_name", "feasible"),
    [("", ["n1", "n2", "n3"]), ("n2", ["n2"]), ("gone", [])],
    ids=["unset-any-node", "named-node-only", "unknown-node-none"],
)
def test_filter(node_name: str, feasible: list[str]) -> None:
    h = Harness([node_dict("n1"), node_dict("n2"), node_dict("n3")], plugins=[NN])
    assert h.feasible(make_pod("x", node_name=node_name))[0] == feasible


def test_failure_message_and_code() -> None:
    h = Harness([node_dict("n1"), node_dict("n2")], plugins=[NN])
    _, diagnosis = h.feasible(make_pod("x", node_name="n3"))
    assert (
        fit_error_message(2, diagnosis)
        == "0/2 nodes are available: 2 node(s) didn't match the requested node name."
    )
    assert {s.code for s in diagnosis.statuses_by_row().values()} == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
