from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.status import Code
from koordpy.plugins.tainttoleration import NAME
from tests.builders import Harness, make_node, make_pod, node_dict


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"operator": operator}
    if key:
        out["key"] = key
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out


def pod_tolerating(*tolerations: dict[str, Any]) -> Pod:
    return make_pod("p", spec={"tolerations": list(tolerations)})


GITLAB_NS = taint("dedicated", "gitlab", "NoSchedule")
GPU_NE = taint("gpu", "true", "NoExecute")
SPOT_PNS = taint("spot", "yes", "PreferNoSchedule")


@pytest.mark.parametrize(
    ("node_taints", "tolerations", "passes"),
    [
        ([], [], True),
        ([GITLAB_NS], [], False),
        ([GPU_NE], [], False),
        ([SPOT_PNS], [], True),
        ([GITLAB_NS], [tol("dedicated", "Equal", "gitlab", "NoSchedule")], True),
        ([GITLAB_NS], [tol("dedicated", "Equal", "gitlab")], True),
        ([GITLAB_NS], [tol("dedicated", "Equal", "other", "NoSchedule")], False),
        ([GITLAB_NS], [tol("dedicated", "Equal", "gitlab", "NoExecute")], False),
        ([GITLAB_NS], [tol("dedicated", "Exists")], True),
        ([GITLAB_NS, GPU_NE], [tol(operator="Exists")], True),
        ([GITLAB_NS, GPU_NE], [tol(operator="Exists", effect="NoSchedule")], False),
        ([GITLAB_NS, GPU_NE], [tol("dedicated", "Exists"), tol("gpu", "Equal", "true", "NoExecute")], True),
    ],
    ids=[
        "untainted-node",
        "noschedule-untolerated",
        "noexecute-untolerated",
        "prefernoschedule-never-filters",
        "equal-key-value-effect",
        "empty-effect-tolerates-any-effect",
        "value-mismatch",
        "effect-mismatch",
        "exists-on-key-ignores-value",
        "exists-with-empty-key-tolerates-everything",
        "exists-with-empty-key-limited-by-effect",
        "every-taint-needs-a-toleration",
    ],
)
def test_filter(node_taints: list[dict[str, str]], tolerations: list[dict[str, Any]], passes: bool) -> None:
    h = Harness([node_dict("n1", taints=node_taints)], plugins=[NAME])
    feasible, diagnosis = h.feasible(pod_tolerating(*tolerations))
    assert feasible == (["n1"] if passes else [])
    for status in diagnosis.statuses_by_row().values():
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_failure_message_names_the_first_untolerated_taint_per_node() -> None:
    nodes = [
        node_dict("n1", taints=[GITLAB_NS]),
        node_dict("n2", taints=[SPOT_PNS, GITLAB_NS, GPU_NE]),
        node_dict("n3", taints=[GPU_NE]),
        node_dict("n4"),
    ]
    h = Harness(nodes, plugins=[NAME])
    feasible, diagnosis = h.feasible(pod_tolerating(tol("spot", "Exists")))
    assert feasible == ["n4"]
    assert fit_error_message(4, diagnosis) == (
        "0/4 nodes are available: 1 node(s) had untolerated taint {gpu: true}, "
        "2 node(s) had untolerated taint {dedicated: gitlab}."
    )


def test_failure_message_with_empty_taint_value() -> None:
    h = Harness([node_dict("n1", taints=[taint("maintenance", "", "NoExecute")])], plugins=[NAME])
    _, diagnosis = h.feasible(pod_tolerating())
    assert fit_error_message(1, diagnosis) == (
        "0/1 nodes are available: 1 node(s) had untolerated taint {maintenance: }."
    )


OLD_PNS = taint("old", "x", "PreferNoSchedule")
SLOW_PNS = taint("slow", "", "PreferNoSchedule")
SCORE_NODES = [
    node_dict("none"),
    node_dict("one", taints=[SPOT_PNS]),
    node_dict("two", taints=[SPOT_PNS, OLD_PNS]),
    node_dict("three", taints=[SPOT_PNS, OLD_PNS, SLOW_PNS]),
]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        # untolerated counts 0,1,2,3; max 3: 100 - count*100//3
        ([], {"none": 100, "one": 67, "two": 34, "three": 0}),
        # spot tolerated: counts 0,0,1,2; max 2
        ([tol("spot", "Equal", "yes", "PreferNoSchedule")], {"none": 100, "one": 100, "two": 50, "three": 0}),
        ([tol("spot", "Exists")], {"none": 100, "one": 100, "two": 50, "three": 0}),
        # a NoSchedule toleration does not tolerate a PreferNoSchedule taint
        ([tol("spot", "Equal", "yes", "NoSchedule")], {"none": 100, "one": 67, "two": 34, "three": 0}),
        ([tol(operator="Exists")], {"none": 100, "one": 100, "two": 100, "three": 100}),
    ],
    ids=[
        "fewer-untolerated-scores-higher",
        "toleration-with-prefernoschedule-effect",
        "toleration-with-empty-effect",
        "noschedule-toleration-ignored-for-scoring",
        "all-tolerated-all-max",
    ],
)
def test_score(tolerations: list[dict[str, Any]], expected: dict[str, int]) -> None:
    h = Harness(SCORE_NODES, plugins=[NAME])
    assert h.plugin_scores(NAME, pod_tolerating(*tolerations)) == expected


def test_noschedule_taints_do_not_count_in_score() -> None:
    h = Harness([node_dict("a"), node_dict("b", taints=[GITLAB_NS])], plugins=[NAME])
    assert h.plugin_scores(NAME, pod_tolerating()) == {"a": 100, "b": 100}


def test_score_normalized_over_the_scored_nodes_only() -> None:
    h = Harness(SCORE_NODES, plugins=[NAME], weights={NAME: 3})
    # among none/one the max count is 1: 100 and 0, weighted by 3
    assert h.scores(pod_tolerating(), ["none", "one"]) == {"none": 300, "one": 0}


def test_taint_change_is_seen_by_the_next_pod() -> None:
    h = Harness([node_dict("n1"), node_dict("n2", taints=[GITLAB_NS])], plugins=[NAME])
    pod = pod_tolerating()
    assert h.feasible(pod)[0] == ["n1"]
    h.cache.update_node(make_node("n1", taints=[GPU_NE]))
    h.cache.update_node(make_node("n2"))
    assert h.feasible(pod)[0] == ["n2"]


def test_added_and_replaced_nodes_are_seen_by_the_next_pod() -> None:
    h = Harness([node_dict("n1"), node_dict("n2", taints=[GITLAB_NS])], plugins=[NAME])
    pod = pod_tolerating()
    assert h.feasible(pod)[0] == ["n1"]
    h.cache.add_node(make_node("n3"))
    assert h.feasible(pod)[0] == ["n1", "n3"]
    # the removed node's row is reused by the next node added
    h.cache.remove_node("n1")
    h.cache.add_node(make_node("n4", taints=[GPU_NE]))
    feasible, diagnosis = h.feasible(pod)
    assert feasible == ["n3"]
    assert fit_error_message(3, diagnosis) == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gitlab}, "
        "1 node(s) had untolerated taint {gpu: true}."
    )
