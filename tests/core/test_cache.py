"""The cache: assume, forget, confirm, and the array snapshot kept in step."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.api.labels import LabelSelector
from koordpy.cache import Cache, CacheError, PodMatcher
from tests.builders import make_node, make_pod


def requested_cpu(cache: Cache, node: str) -> int:
    snap = cache.snapshot
    return int(snap.requested[snap.row_of[node], snap.resource_col["cpu"]])


def test_assume_counts_the_pod_and_forget_releases_it() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    pod = make_pod("p", cpu="1500m")
    cache.assume_pod(pod, "n1")
    assert requested_cpu(cache, "n1") == 1500
    cache.forget_pod(pod)
    assert requested_cpu(cache, "n1") == 0


def test_confirmation_replaces_the_assumed_pod_without_double_counting() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.assume_pod(make_pod("p", cpu="1"), "n1")
    cache.add_pod(make_pod("p", cpu="1", node_name="n1"))
    assert requested_cpu(cache, "n1") == 1000
    assert not cache.is_assumed("default/p")


def test_assuming_twice_is_an_error() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.assume_pod(make_pod("p"), "n1")
    with pytest.raises(CacheError):
        cache.assume_pod(make_pod("p"), "n1")


def test_pod_seen_before_its_node_is_counted_once_the_node_arrives() -> None:
    cache = Cache()
    cache.add_pod(make_pod("p", cpu="2", node_name="late"))
    cache.add_node(make_node("late"))
    assert requested_cpu(cache, "late") == 2000


def test_removed_node_row_is_reused_and_cleared() -> None:
    cache = Cache()
    cache.add_node(make_node("a", labels={"zone": "z1"}))
    cache.add_node(make_node("b"))
    row_a = cache.snapshot.row_of["a"]
    cache.remove_node("a")
    cache.add_node(make_node("c"))
    assert cache.snapshot.row_of["c"] == row_a
    assert cache.snapshot.labels["zone"].codes[row_a] == -1
    assert sorted(cache.snapshot.node_name(int(r)) for r in cache.snapshot.live_rows()) == ["b", "c"]


def test_extended_resource_first_seen_on_a_pod_gets_a_column() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.add_pod(make_pod("p", node_name="n1", extra_requests={"example.com/foo": 3}))
    snap = cache.snapshot
    assert snap.requested[snap.row_of["n1"], snap.resource_col["example.com/foo"]] == 3


def test_pod_counter_follows_adds_and_removes() -> None:
    cache = Cache()
    for n in ("a", "b"):
        cache.add_node(make_node(n))
    matcher = PodMatcher(
        LabelSelector.from_dict({"matchLabels": {"app": "web"}}, "s"), frozenset({"default"})
    )  # type: ignore[arg-type]
    cache.add_pod(make_pod("w1", labels={"app": "web"}, node_name="a"))
    counts = cache.snapshot.pod_count_by_row(matcher)
    cache.add_pod(make_pod("w2", labels={"app": "web"}, node_name="b"))
    cache.add_pod(make_pod("other", labels={"app": "db"}, node_name="b"))
    cache.add_pod(make_pod("w3", labels={"app": "web"}, node_name="b", namespace="elsewhere"))
    rows = [cache.snapshot.row_of[n] for n in ("a", "b")]
    assert np.array_equal(counts[rows], [1, 1])
    cache.remove_pod(make_pod("w1", labels={"app": "web"}, node_name="a"))
    assert np.array_equal(counts[rows], [0, 1])
