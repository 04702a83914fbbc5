"""The simulate report's `quotas`: every ElasticQuota of the input, with what the scheduler's quota
book says of it when the run ends (min, max, runtime, used, pending pods, and the problem that
keeps it out of scheduling, if any)."""

from __future__ import annotations

from typing import Any

from koordpy.plugins.elasticquota import (
    KOORDINATOR_BOOK,
    NAMESPACE_BOOK,
    KoordinatorBook,
    NamespaceBook,
    QuotaBook,
)
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.report import Report


def _standalone(world: MemoryCluster, scenario: Scenario, koordinator: bool) -> QuotaBook:
    """A book of the final world, for a configuration whose profiles run no quota plugin: the
    quotas are reported as they would stand, though nothing enforced them."""
    snapshot = world.scheduler.cache.snapshot
    book: QuotaBook = KoordinatorBook(snapshot) if koordinator else NamespaceBook(snapshot)
    for quota in scenario.elastic_quotas:
        book.on_object("Add", quota.raw)
    for key, pod in world.views.items():
        if key not in world.deleted:
            book.on_pod("Add", pod)
    return book


def add_quotas(world: MemoryCluster, scenario: Scenario, report: Report) -> None:
    if not scenario.elastic_quotas:
        return
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    shared = world.scheduler.shared
    for koordinator in (True, False):
        if not any(q.is_koordinator == koordinator for q in scenario.elastic_quotas):
            continue
        book: QuotaBook | None = shared.get(KOORDINATOR_BOOK) if koordinator else shared.get(NAMESPACE_BOOK)
        if book is None:
            book = _standalone(world, scenario, koordinator)
        for row in book.summary():
            rows[(row["apiGroup"], f"{row['namespace']}/{row['name']}")] = row
    ordered = [rows[(q.api_group, q.key)] for q in scenario.elastic_quotas if (q.api_group, q.key) in rows]
    report.extras["quotas"] = ordered
