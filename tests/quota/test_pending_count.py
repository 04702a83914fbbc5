"""The pods of each quota that hold nothing yet (koordpy_elastic_quota_pending_pods), kept by the
quota books as events come rather than counted at each scrape: exact through pods added, moved
between quotas, resized, reserved, unreserved, bound, finished and deleted, and through quotas
added, changed and deleted (a pod whose quota is gone, or not there yet, is in no quota's count).

Each step's expected counts are worked by hand; after every step they are also compared with a
count over every pod the book knows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koordpy.api.elasticquota import LABEL_QUOTA_NAME
from koordpy.api.pod import Pod
from koordpy.cache import Snapshot
from koordpy.plugins.elasticquota.book import QuotaBook
from koordpy.plugins.elasticquota.koordinator_book import KoordinatorBook
from koordpy.plugins.elasticquota.namespace_book import NamespaceBook
from tests.builders import pod_dict
from tests.quota.quotas import cores, koord_dict, xk8s_dict

Step = Callable[[QuotaBook], None]


def pod(name: str, quota: str | None = None, cpu: str = "1", node: str = "", ns: str = "default") -> Pod:
    labels = {LABEL_QUOTA_NAME: quota} if quota else {}
    return Pod.from_dict(pod_dict(name, cpu=cpu, namespace=ns, labels=labels, node_name=node))


def finished(p: Pod) -> Pod:
    raw = pod_dict(p.name, cpu="1", namespace=p.namespace, labels=dict(p.labels), node_name=p.node_name)
    raw["status"] = {"phase": "Succeeded"}
    return Pod.from_dict(raw)


def added(p: Pod) -> Step:
    return lambda book: book.on_pod("Add", p)


def updated(p: Pod) -> Step:
    return lambda book: book.on_pod("Update", p)


def deleted(p: Pod) -> Step:
    return lambda book: book.on_pod("Delete", p)


def reserved(p: Pod) -> Step:
    return lambda book: book.reserve(p)


def unreserved(p: Pod) -> Step:
    return lambda book: book.unreserve(p)


def quota(action: str, obj: dict[str, Any]) -> Step:
    return lambda book: book.on_object(action, obj)


def names_of(book: QuotaBook) -> tuple[str, ...]:
    if isinstance(book, KoordinatorBook):
        return book.tree.names
    assert isinstance(book, NamespaceBook)
    return book.quotas.names


def counted(book: QuotaBook) -> dict[str, int]:
    """quota name -> pending pods, from the book's counts (zero counts left out)."""
    pending = book.pending_pods()
    names = names_of(book)
    return {names[row]: int(n) for row, n in enumerate(pending) if n}


def walked(book: QuotaBook) -> dict[str, int]:
    """The same, counted over every pod the book knows."""
    book.ensure()
    names = names_of(book)
    out: dict[str, int] = {}
    for entry in book.entries.values():
        if entry.row >= 0 and not entry.holds:
            out[names[entry.row]] = out.get(names[entry.row], 0) + 1
    return out


A1, A2, B1 = pod("a1", "team-a"), pod("a2", "team-a"), pod("b1", "team-b")
C1 = pod("c1", "team-c")
TEAM_A = koord_dict("team-a", min=cores(2), max=cores(8), created=1)

KOORDINATOR_STEPS: list[tuple[str, Step, dict[str, int]]] = [
    ("quotas added", quota("Add", TEAM_A), {}),
    ("team-b added", quota("Add", koord_dict("team-b", min=cores(2), max=cores(8), created=2)), {}),
    ("a pod added", added(A1), {"team-a": 1}),
    ("another", added(A2), {"team-a": 2}),
    ("one of team-b", added(B1), {"team-a": 2, "team-b": 1}),
    (
        "a pod without the label joins the default quota",
        added(pod("d1")),
        {"team-a": 2, "team-b": 1, "koordinator-default-quota": 1},
    ),
    ("the default one deleted", deleted(pod("d1")), {"team-a": 2, "team-b": 1}),
    ("reserved", reserved(A1), {"team-a": 1, "team-b": 1}),
    ("reserved twice", reserved(A1), {"team-a": 1, "team-b": 1}),
    ("seen bound", updated(pod("a1", "team-a", node="n1")), {"team-a": 1, "team-b": 1}),
    ("unreserved without a reservation", unreserved(A2), {"team-a": 1, "team-b": 1}),
    ("reserved", reserved(A2), {"team-b": 1}),
    ("given up", unreserved(A2), {"team-a": 1, "team-b": 1}),
    ("moved to team-a", updated(pod("b1", "team-a")), {"team-a": 2}),
    ("resized", updated(pod("a2", "team-a", cpu="3")), {"team-a": 2}),
    ("the bound one finished", updated(finished(pod("a1", "team-a", node="n1"))), {"team-a": 2}),
    ("a pending one deleted", deleted(A2), {"team-a": 1}),
    ("a pod of a quota not there yet", added(C1), {"team-a": 1}),
    (
        "its quota arrives",
        quota("Add", koord_dict("team-c", min=cores(1), max=cores(4), created=3)),
        {"team-a": 1, "team-c": 1},
    ),
    (
        "a quota changed",
        quota("Update", koord_dict("team-a", min=cores(2), max=cores(4), created=1)),
        {"team-a": 1, "team-c": 1},
    ),
    ("a quota deleted", quota("Delete", TEAM_A), {"team-c": 1}),
    ("bound by another scheduler", updated(pod("c1", "team-c", node="n2")), {}),
    ("the deleted quota back", quota("Add", TEAM_A), {"team-a": 1}),
    ("the last one finished while pending", updated(finished(pod("b1", "team-a"))), {}),
]


def test_koordinator_pending_counts_stay_exact_through_events() -> None:
    book = KoordinatorBook(Snapshot())
    for said, step, expected in KOORDINATOR_STEPS:
        step(book)
        assert counted(book) == expected, said
        assert walked(book) == expected, said


NS_STEPS: list[tuple[str, Step, dict[str, int]]] = [
    ("a pod before any quota", added(pod("p1", ns="ns1")), {}),
    ("the namespace's quota", quota("Add", xk8s_dict("eq1", "ns1", min=cores(1), max=cores(4))), {"eq1": 1}),
    ("a pod of a namespace without a quota", added(pod("q1", ns="ns2")), {"eq1": 1}),
    ("another in ns1", added(pod("p2", ns="ns1")), {"eq1": 2}),
    ("reserved", reserved(pod("p1", ns="ns1")), {"eq1": 1}),
    ("seen bound", updated(pod("p1", ns="ns1", node="n1")), {"eq1": 1}),
    (
        "ns2 gets a quota",
        quota("Add", xk8s_dict("eq2", "ns2", min=cores(1), max=cores(4))),
        {"eq1": 1, "eq2": 1},
    ),
    ("deleted", deleted(pod("p2", ns="ns1")), {"eq2": 1}),
    ("ns2's quota deleted", quota("Delete", xk8s_dict("eq2", "ns2", min=cores(1), max=cores(4))), {}),
]


def test_scheduler_plugins_pending_counts_stay_exact_through_events() -> None:
    book = NamespaceBook(Snapshot())
    for said, step, expected in NS_STEPS:
        step(book)
        assert counted(book) == expected, said
        assert walked(book) == expected, said


@pytest.mark.parametrize("book_type", [KoordinatorBook, NamespaceBook])
def test_the_metric_figures_read_the_counts(book_type: type[QuotaBook]) -> None:
    book = book_type(Snapshot())
    if book_type is KoordinatorBook:
        book.on_object("Add", TEAM_A)
        for p in (A1, A2):
            book.on_pod("Add", p)
        name = "team-a"
    else:
        book.on_object("Add", xk8s_dict("eq1", "default", min=cores(1), max=cores(4)))
        for p in (pod("p1"), pod("p2"), pod("p3", node="n1")):
            book.on_pod("Add", p)
        name = "eq1"
    figures = {f.name: f.pending_pods for f in book.figures()}
    assert figures[name] == 2
