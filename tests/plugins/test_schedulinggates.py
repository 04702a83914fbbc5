from __future__ import annotations

import pytest

from koordpy.framework.interfaces import POD_UPDATE
from koordpy.framework.status import Code
from koordpy.plugins.schedulinggates import NAME
from tests.builders import Harness, make_pod, node_dict


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ([], None),
        (["gate-a"], "waiting for scheduling gates: [gate-a]"),
        (["gate-a", "gate-b"], "waiting for scheduling gates: [gate-a gate-b]"),
    ],
    ids=["ungated-pod-is-queued", "one-gate-holds-the-pod", "gates-listed-in-spec-order"],
)
def test_pre_enqueue(gates: list[str], message: str | None) -> None:
    h = Harness([node_dict("n1")], plugins=[NAME])
    pod = make_pod("p", spec={"schedulingGates": [{"name": g} for g in gates]})
    status = h.profile.run_pre_enqueue(pod)
    if message is None:
        assert status is None
    else:
        assert status is not None
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.message == message
        assert status.plugin == NAME


def test_gates_removed_by_pod_update() -> None:
    h = Harness([node_dict("n1")], plugins=[NAME])
    assert h.profile.events[NAME] == (POD_UPDATE,)
