from __future__ import annotations

import pytest

from koordpy.api import names
from koordpy.framework.interfaces import POD_UPDATE
from koordpy.framework.status import Code
from koordpy.plugins.schedulinggates import NAME
from tests.builders import Harness, make_pod, node_dict

# what the API server writes into PodScheduled for a pod created with gates (kube's
# pkg/registry/core/pod strategy_test.go TestSchedulingGatedCondition)
API_SERVER_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


@pytest.mark.parametrize(
    ("gates", "gated"),
    [([], False), (["gate-a"], True), (["gate-a", "gate-b"], True)],
    ids=["ungated-pod-is-queued", "one-gate-holds-the-pod", "two-gates-hold-the-pod"],
)
def test_pre_enqueue(gates: list[str], gated: bool) -> None:
    h = Harness([node_dict("n1")], plugins=[NAME])
    pod = make_pod("p", spec={"schedulingGates": [{"name": g} for g in gates]})
    status = h.profile.run_pre_enqueue(pod)
    if not gated:
        assert status is None
    else:
        assert status is not None
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert (status.reason, status.message) == (names.SCHEDULING_GATED, API_SERVER_MESSAGE)
        assert status.plugin == NAME


def test_gates_removed_by_pod_update() -> None:
    h = Harness([node_dict("n1")], plugins=[NAME])
    assert h.profile.events[NAME] == (POD_UPDATE,)
