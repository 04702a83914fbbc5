"""The nominator's arrays: which nominated pods hold room against a pod, by snapshot row, as
kube-scheduler's addGENominatedPods picks them (priority greater or equal, never the pod itself),
kept right while nominations and nodes come and go."""

from __future__ import annotations

import random

import numpy as np
import pytest

from koordpy.api.pod import Pod
from koordpy.cache.cache import Cache
from koordpy.framework.nominator import Nominator
from tests.builders import make_node, make_pod


def cluster(*names: str) -> Cache:
    cache = Cache()
    for name in names:
        cache.add_node(make_node(name))
    return cache


def names(cache: Cache, held: dict[int, list[Pod]]) -> dict[str, list[str]]:
    snap = cache.snapshot
    return {snap.node_name(row): [p.name for p in pods] for row, pods in held.items()}


# nominations (pod, priority, node), the pod asking, and what holds room against it
@pytest.mark.parametrize(
    ("nominated", "asking", "expected"),
    [
        pytest.param([], ("p", 5), {}, id="nothing-nominated"),
        pytest.param([("a", 5, "n1")], ("p", 5), {"n1": ["a"]}, id="equal-priority-holds"),
        pytest.param([("a", 9, "n1")], ("p", 5), {"n1": ["a"]}, id="higher-priority-holds"),
        pytest.param([("a", 4, "n1")], ("p", 5), {}, id="lower-priority-does-not"),
        pytest.param([("p", 5, "n1")], ("p", 5), {}, id="the-pod-itself-does-not"),
        pytest.param(
            [("a", 5, "n1"), ("b", 1, "n1"), ("c", 7, "n1")],
            ("p", 5),
            {"n1": ["a", "c"]},
            id="only-the-qualifying-pods-of-a-node",
        ),
        pytest.param(
            [("a", 5, "n1"), ("b", 6, "n2"), ("c", 1, "n3")],
            ("p", 5),
            {"n1": ["a"], "n2": ["b"]},
            id="several-nodes",
        ),
        pytest.param([("a", 5, "gone")], ("p", 0), {}, id="a-node-the-snapshot-lacks"),
    ],
)
def test_pods_holding_room_against_a_pod(
    nominated: list[tuple[str, int, str]], asking: tuple[str, int], expected: dict[str, list[str]]
) -> None:
    cache = cluster("n1", "n2", "n3")
    nominator = Nominator()
    for name, priority, node in nominated:
        nominator.add(make_pod(name, priority=priority), node)
    pod = make_pod(asking[0], priority=asking[1])
    assert names(cache, nominator.holding(pod, cache.snapshot)) == expected


def test_only_the_rows_asked_for_are_looked_at() -> None:
    cache = cluster("n1", "n2")
    nominator = Nominator()
    nominator.add(make_pod("a", priority=5), "n1")
    nominator.add(make_pod("b", priority=5), "n2")
    within = np.zeros(cache.snapshot.capacity, dtype=bool)
    within[cache.snapshot.row_of["n2"]] = True
    assert names(cache, nominator.holding(make_pod("p"), cache.snapshot, within)) == {"n2": ["b"]}


def test_pods_of_the_same_job_are_ignored_when_asked() -> None:
    cache = cluster("n1")
    nominator = Nominator()
    nominator.add(make_pod("sibling"), "n1")
    nominator.add(make_pod("stranger"), "n1")
    held = nominator.holding(make_pod("p"), cache.snapshot, ignore=lambda o: o.name == "sibling")
    assert names(cache, held) == {"n1": ["stranger"]}


def test_a_renomination_moves_the_pod_and_a_removal_forgets_it() -> None:
    cache = cluster("n1", "n2")
    nominator = Nominator()
    a = make_pod("a")
    nominator.add(a, "n1")
    nominator.add(a, "n2")
    assert names(cache, nominator.holding(make_pod("p"), cache.snapshot)) == {"n2": ["a"]}
    nominator.remove(a)
    assert nominator.holding(make_pod("p"), cache.snapshot) == {}
    assert not nominator


def test_a_node_removed_and_added_again_is_found_at_its_new_row() -> None:
    cache = cluster("n1", "n2")
    nominator = Nominator()
    nominator.add(make_pod("a"), "n2")
    assert names(cache, nominator.holding(make_pod("p"), cache.snapshot)) == {"n2": ["a"]}
    cache.remove_node("n2")
    assert nominator.holding(make_pod("p"), cache.snapshot) == {}
    cache.remove_node("n1")
    cache.add_node(make_node("n2"))  # takes a row that may differ from its old one
    assert names(cache, nominator.holding(make_pod("p"), cache.snapshot)) == {"n2": ["a"]}


def test_random_nominations_agree_with_a_walk_over_every_nomination() -> None:
    rng = random.Random(7)
    nodes = [f"n{i}" for i in range(12)]
    cache = cluster(*nodes)
    nominator = Nominator()
    live: dict[str, tuple[Pod, str]] = {}
    for step in range(600):
        name = f"p{rng.randrange(40)}"
        if rng.random() < 0.3 and name in live:
            nominator.remove(live.pop(name)[0])
        else:
            pod = make_pod(name, priority=rng.randrange(4))
            node = rng.choice([*nodes, "missing"])
            nominator.add(pod, node)
            live[name] = (pod, node)
        if step % 50 == 0:
            # nodes change under the nominations now and then
            gone = rng.choice(nodes[:6])
            if gone in cache.snapshot.row_of:
                cache.remove_node(gone)
            back = rng.choice(nodes[:6])
            if back not in cache.snapshot.row_of:
                cache.add_node(make_node(back))
        asking = make_pod(f"p{rng.randrange(40)}", priority=rng.randrange(4))
        expected: dict[str, list[str]] = {}
        for pod, node in live.values():
            if node in cache.snapshot.row_of and pod.priority >= asking.priority and pod.key != asking.key:
                expected.setdefault(node, []).append(pod.name)
        got = names(cache, nominator.holding(asking, cache.snapshot))
        assert {n: sorted(v) for n, v in got.items()} == {n: sorted(v) for n, v in expected.items()}
