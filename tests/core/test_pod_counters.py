"""Per-row pod counters made late: a counter first asked for after pods are placed counts them (by
the pods carrying its anchor label when it has one), and follows adds and removes afterwards, for
every kind of selector."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.api.labels import LabelSelector
from koordpy.api.namespace import Namespace
from koordpy.cache import Cache
from koordpy.cache.snapshot import PodMatcher
from tests.builders import make_node, make_pod

# (name, namespace, labels, node) placed before the counter is made
BEFORE = [
    ("a1", "default", {"app": "a", "tier": "web"}, "n1"),
    ("a2", "default", {"app": "a", "tier": "db"}, "n2"),
    ("a3", "default", {"app": "a"}, "n2"),
    ("b1", "default", {"app": "b", "tier": "web"}, "n1"),
    ("a-other", "other", {"app": "a", "tier": "web"}, "n3"),
    ("plain", "default", {}, "n3"),
]
# placed after
AFTER = [
    ("a4", "default", {"app": "a", "tier": "web"}, "n3"),
    ("b2", "other", {"app": "b"}, "n1"),
]


def matcher(
    selector: dict[str, Any], namespaces: tuple[str, ...], ns_selector: dict[str, Any] | None = None
) -> PodMatcher:
    sel = LabelSelector.from_dict(selector, "s")
    assert sel is not None
    return PodMatcher(sel, frozenset(namespaces), LabelSelector.from_dict(ns_selector, "n"))


CASES = [
    # expected counts on n1, n2, n3: after the BEFORE pods, then after AFTER, then after a1 and a2 leave
    pytest.param(
        matcher({"matchLabels": {"app": "a"}}, ("default",)),
        [1, 2, 0],
        [1, 2, 1],
        [0, 1, 1],
        id="match-labels",
    ),
    pytest.param(
        matcher({"matchLabels": {"app": "a", "tier": "web"}}, ("default",)),
        [1, 0, 0],
        [1, 0, 1],
        [0, 0, 1],
        id="two-match-labels",
    ),
    pytest.param(
        matcher(
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
            ("default", "other"),
        ),
        [2, 2, 1],
        [3, 2, 2],
        [2, 1, 2],
        id="in-several-values-and-namespaces",
    ),
    pytest.param(
        matcher({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, ("default",)),
        [2, 1, 0],
        [2, 1, 1],
        [1, 0, 1],
        id="exists-has-no-anchor",
    ),
    pytest.param(
        matcher({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, ("default",)),
        [1, 0, 1],
        [1, 0, 1],
        [1, 0, 1],
        id="not-in-counts-pods-without-the-label",
    ),
    pytest.param(
        matcher({}, ("other",)), [0, 0, 1], [1, 0, 1], [1, 0, 1], id="empty-selector-counts-the-namespace"
    ),
    pytest.param(
        matcher({"matchLabels": {"app": "a"}}, (), {"matchLabels": {"team": "x"}}),
        [0, 0, 1],
        [0, 0, 1],
        [0, 0, 1],
        id="namespace-selector",
    ),
]


@pytest.mark.parametrize(("m", "before", "after", "after_removal"), CASES)
def test_a_late_counter_counts_what_is_placed_and_follows_changes(
    m: PodMatcher, before: list[int], after: list[int], after_removal: list[int]
) -> None:
    cache = Cache()
    cache.set_namespace(Namespace.from_dict({"metadata": {"name": "other", "labels": {"team": "x"}}}))
    for n in ("n1", "n2", "n3"):
        cache.add_node(make_node(n))
    snap = cache.snapshot
    # an anchored counter made first builds the label index; the case's counter then uses it
    snap.pod_count_by_row(matcher({"matchLabels": {"unrelated": "x"}}, ("default",)))
    for name, ns, labels, node in BEFORE:
        cache.add_pod(make_pod(name, namespace=ns, labels=labels, node_name=node))
    rows = [snap.row_of[n] for n in ("n1", "n2", "n3")]
    counts = snap.pod_count_by_row(m)
    assert counts[rows].tolist() == before
    for name, ns, labels, node in AFTER:
        cache.add_pod(make_pod(name, namespace=ns, labels=labels, node_name=node))
    assert snap.pod_count_by_row(m)[rows].tolist() == after
    for name, node in (("a1", "n1"), ("a2", "n2")):
        cache.remove_pod(make_pod(name, node_name=node))
    assert snap.pod_count_by_row(m)[rows].tolist() == after_removal
    assert cache.problems() == []


def test_many_owners_each_count_their_own_pods_through_evictions() -> None:
    cache = Cache()
    for n in ("n1", "n2"):
        cache.add_node(make_node(n))
    snap = cache.snapshot
    rows = [snap.row_of["n1"], snap.row_of["n2"]]
    # more owners than the counters kept: older counters are dropped and made again when asked
    for owner in range(400):
        for replica, node in enumerate(("n1", "n2", "n2")):
            cache.add_pod(make_pod(f"o{owner}-{replica}", labels={"app": f"o{owner}"}, node_name=node))
        counts = snap.pod_count_by_row(matcher({"matchLabels": {"app": f"o{owner}"}}, ("default",)))
        assert counts[rows].tolist() == [1, 2]
    for owner in (0, 150, 399):
        counts = snap.pod_count_by_row(matcher({"matchLabels": {"app": f"o{owner}"}}, ("default",)))
        assert counts[rows].tolist() == [1, 2]
    assert np.all(snap.pod_count_by_row(matcher({}, ("default",)))[rows] == [400, 800])
    assert cache.problems() == []
