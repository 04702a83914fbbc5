"""CapacityScheduling's PreFilter sums of the pods nominated to nodes (scheduler-plugins'
capacity_scheduling.go, PreFilter): pods of the preemptor's namespace at no lower priority count in
its quota, pods of other namespaces whose quota is within its min count in the total; the pod
itself, its gang group's pending members, pods of namespaces without a quota and pods of quotas
over their min do not. Resources no quota names are summed by name."""

from __future__ import annotations

import pytest

from koordpy.api.pod import Pod
from koordpy.api.resources import MAX_AMOUNT
from koordpy.cache import Snapshot
from koordpy.plugins.elasticquota.namespace_book import NamespaceBook, nominated_requests
from tests.builders import pod_dict
from tests.quota.quotas import cores, xk8s_dict

FOO = "example.com/foo"


def pod(name: str, ns: str, cpu: str = "1", priority: int = 0, node: str = "", foo: int = 0) -> Pod:
    extra = {FOO: str(foo)} if foo else None
    return Pod.from_dict(
        pod_dict(name, cpu=cpu, namespace=ns, priority=priority, node_name=node, extra_requests=extra)
    )


def new_book() -> NamespaceBook:
    book = NamespaceBook(Snapshot())
    book.on_object("Add", xk8s_dict("qa", "a", min=cores(4), max=cores(8)))
    book.on_object("Add", xk8s_dict("qb", "b", min=cores(4), max=cores(8)))
    book.on_object("Add", xk8s_dict("qc", "c", min=cores(1), max=cores(8)))
    # c uses 2 cores of a min of 1: over its min
    book.on_pod("Add", pod("c-running", "c", cpu="2", node="n1"))
    return book


PREEMPTOR = pod("me", "a", priority=10)

# (nominated pods, the gang members beside the pod, expected in the quota, expected elsewhere);
# cpu in millicores
CASES = [
    ("none", [], (), {}, {}),
    (
        "same namespace at higher and equal priority count, lower does not",
        [pod("hi", "a", "2", 20), pod("eq", "a", "1", 10), pod("lo", "a", "4", 5)],
        (),
        {"cpu": 3000},
        {},
    ),
    (
        "another namespace within its min counts in the total whatever its priority",
        [pod("b1", "b", "1", 0), pod("b2", "b", "2", 100)],
        (),
        {},
        {"cpu": 3000},
    ),
    ("a namespace over its min does not count", [pod("c1", "c", "3", 100)], (), {}, {}),
    ("a namespace without a quota does not count", [pod("x1", "x", "3", 100)], (), {}, {}),
    (
        "the pod itself and its gang's members are left out",
        [PREEMPTOR, pod("mate", "a", "2", 20), pod("hi", "a", "1", 20)],
        ("a/mate",),
        {"cpu": 1000},
        {},
    ),
    (
        "a resource no quota names is summed by name",
        [pod("hi", "a", "1", 20, foo=2), pod("b1", "b", "1", foo=3), pod("b2", "b", "1", foo=4)],
        (),
        {"cpu": 1000, FOO: 2},
        {"cpu": 2000, FOO: 7},
    ),
]


@pytest.mark.parametrize(
    ("nominated", "members", "in_quota", "elsewhere"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_nominated_pods_count_where_capacity_scheduling_counts_them(
    nominated: list[Pod], members: tuple[str, ...], in_quota: dict[str, int], elsewhere: dict[str, int]
) -> None:
    book = new_book()
    for p in nominated:
        book.on_pod("Add", p)
    assert nominated_requests(book, PREEMPTOR, nominated, frozenset(members)) == (in_quota, elsewhere)


def test_pods_unknown_to_the_book_or_changed_since_count_as_they_are() -> None:
    book = new_book()
    known = pod("hi", "a", "1", 20)
    book.on_pod("Add", known)
    # the nominator holds a newer object of the pod than the book, and a pod the book never saw
    resized = pod("hi", "a", "3", 20)
    unseen = pod("b1", "b", "2")
    assert nominated_requests(book, PREEMPTOR, [resized, unseen], frozenset()) == (
        {"cpu": 3000},
        {"cpu": 2000},
    )


def test_the_sum_saturates_as_each_amount_does() -> None:
    book = new_book()
    huge = [pod(f"h{i}", "a", str(MAX_AMOUNT // 1000), 20) for i in range(2000)]
    in_quota, _ = nominated_requests(book, PREEMPTOR, huge, frozenset())
    assert in_quota == {"cpu": MAX_AMOUNT}
