"""TaintToleration and NodeUnschedulable follow node updates row by row: an update that changes a
node's taints or its cordon is seen at once, and one that changes only its status (a heartbeat,
allocatable, labels) leaves what they derived from the nodes as it was."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.plugins.nodeunschedulable import NAME as NU
from koordpy.plugins.tainttoleration import NAME as TT
from tests.builders import Harness, make_pod, node_dict

GPU = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
SPOT = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}
DEDICATED = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}


def _nodes() -> list[dict[str, Any]]:
    return [
        node_dict("a"),
        node_dict("b", taints=[GPU]),
        node_dict("c", taints=[SPOT]),
        node_dict("d", unschedulable=True),
    ]


def _heartbeat(name: str, **changes: Any) -> Node:
    """Node `name` as _nodes() has it, with `changes` to node_dict's arguments."""
    base = {n["metadata"]["name"]: n for n in _nodes()}[name]
    spec = base["spec"]
    kwargs: dict[str, Any] = {"taints": spec["taints"], "unschedulable": spec["unschedulable"]}
    kwargs.update(changes)
    return Node.from_dict(node_dict(name, **kwargs))


# (update, nodes a pod without tolerations passes after it, TaintToleration re-derived anything)
TAINT_CASES = [
    ("status-only update of a tainted node", _heartbeat("b", cpu="8"), ["a", "c", "d"], False),
    ("status-only update of a clean node", _heartbeat("a", memory="16Gi"), ["a", "c", "d"], False),
    ("label change only", _heartbeat("c", labels={"zone": "z1"}), ["a", "c", "d"], False),
    ("taint removed", _heartbeat("b", taints=[]), ["a", "b", "c", "d"], True),
    ("taint added", _heartbeat("a", taints=[DEDICATED]), ["c", "d"], True),
    ("taint swapped for a preference", _heartbeat("b", taints=[SPOT]), ["a", "b", "c", "d"], True),
    ("taints reordered", _heartbeat("b", taints=[SPOT, GPU]), ["a", "c", "d"], True),
]


@pytest.mark.parametrize(
    ("update", "passing", "rederived"), [c[1:] for c in TAINT_CASES], ids=[c[0] for c in TAINT_CASES]
)
def test_taint_toleration_follows_node_updates(update: Node, passing: list[str], rederived: bool) -> None:
    h = Harness(_nodes(), plugins=[TT])
    plugin: Any = h.profile.plugins[TT]
    pod = make_pod("p")
    assert h.feasible(pod)[0] == ["a", "c", "d"]
    verdict = plugin._verdict(pod)
    version, reason = plugin._taint_sets.version, verdict.reason

    h.cache.update_node(update)

    assert h.feasible(pod)[0] == passing
    after = plugin._verdict(pod)
    assert after is verdict
    assert (plugin._taint_sets.version != version) is rederived
    if not rederived:
        assert after.reason is reason


# kube's TaintToleration Score: fewest untolerated PreferNoSchedule taints scores highest
SCORE_CASES = [
    ("preference added", _heartbeat("a", taints=[SPOT]), {"a": 0, "b": 100, "c": 0, "d": 100}),
    ("preference removed", _heartbeat("c", taints=[]), {"a": 100, "b": 100, "c": 100, "d": 100}),
    ("heartbeat", _heartbeat("c", cpu="2"), {"a": 100, "b": 100, "c": 0, "d": 100}),
]


@pytest.mark.parametrize(("update", "scores"), [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_taint_toleration_score_follows_node_updates(update: Node, scores: dict[str, int]) -> None:
    h = Harness(_nodes(), plugins=[TT])
    pod = make_pod("p")
    assert h.plugin_scores(TT, pod) == {"a": 100, "b": 100, "c": 0, "d": 100}
    h.cache.update_node(update)
    assert h.plugin_scores(TT, pod) == scores


def test_taint_toleration_follows_nodes_coming_and_going() -> None:
    h = Harness(_nodes(), plugins=[TT])
    pod = make_pod("p")
    assert h.feasible(pod)[0] == ["a", "c", "d"]
    h.cache.remove_node("a")
    h.cache.add_node(Node.from_dict(node_dict("e", taints=[GPU])))
    # "e" takes the row "a" left: the row's taints are read again
    assert h.feasible(pod)[0] == ["c", "d"]
    # enough new nodes to grow the snapshot's rows
    for i in range(100):
        h.cache.add_node(Node.from_dict(node_dict(f"n{i}", taints=[GPU] if i % 2 else [])))
    assert h.feasible(pod)[0] == ["c", "d", *(f"n{i}" for i in range(0, 100, 2))]


# (update, nodes a pod without tolerations passes after it, the cordons re-read in full)
CORDON_CASES = [
    ("status-only update of a cordoned node", _heartbeat("d", cpu="8"), ["a", "b", "c"]),
    ("status-only update of an open node", _heartbeat("a", cpu="8"), ["a", "b", "c"]),
    ("uncordoned", _heartbeat("d", unschedulable=False), ["a", "b", "c", "d"]),
    ("cordoned", _heartbeat("a", unschedulable=True), ["b", "c"]),
]


@pytest.mark.parametrize(
    ("update", "passing"), [c[1:] for c in CORDON_CASES], ids=[c[0] for c in CORDON_CASES]
)
def test_node_unschedulable_follows_node_updates(update: Node, passing: list[str]) -> None:
    h = Harness(_nodes(), plugins=[NU])
    plugin: Any = h.profile.plugins[NU]
    pod = make_pod("p")
    assert h.feasible(pod)[0] == ["a", "b", "c"]
    cordoned = plugin._cordoned

    h.cache.update_node(update)

    assert h.feasible(pod)[0] == passing
    # only the updated row was read: the per-row array is the same one
    assert plugin._cordoned is cordoned


def test_node_unschedulable_all_uncordoned_lets_everything_through() -> None:
    h = Harness(_nodes(), plugins=[NU])
    pod = make_pod("p")
    assert h.feasible(pod)[0] == ["a", "b", "c"]
    h.cache.update_node(_heartbeat("d", unschedulable=False))
    h.cache.remove_node("a")
    assert h.feasible(pod)[0] == ["b", "c", "d"]
    h.cache.add_node(Node.from_dict(node_dict("a", unschedulable=True)))
    assert h.feasible(pod)[0] == ["b", "c", "d"]
