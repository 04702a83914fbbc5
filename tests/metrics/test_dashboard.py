"""The Grafana dashboard in the chart: every query names only metrics koordpy exports, and the chart
ships it (as a ConfigMap a Grafana sidecar picks up) only when asked to."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_chart import helm, render  # noqa: F401 - helm is a fixture
from tests.metrics.compare import families
from tests.metrics.test_kube_metric_names import scrape_after_simulate

DASHBOARD = (
    Path(__file__).resolve().parents[2] / "charts" / "koordpy" / "files" / "dashboards" / "koordpy.json"
)

# what is not a metric name in a PromQL expression
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
_SERIES_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    """The metrics an expression reads: identifiers that are neither functions (followed by a
    parenthesis), keywords, labels, strings, durations nor Grafana variables; a histogram's series
    are named by the histogram."""
    text = _STRINGS.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _LABEL_LISTS.sub(" ", text)
    text = re.sub(r"\$\w+", " ", text)
    names: set[str] = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group()
        rest = text[match.end() :].lstrip()
        if name in _KEYWORDS or rest.startswith("("):
            continue
        if text[match.start() - 1 : match.start()].isdigit():
            continue  # the exponent or unit of a number
        for suffix in _SERIES_SUFFIXES:
            if name.endswith(suffix):
                name = name.removesuffix(suffix)
                break
        names.add(name)
    return names


def expressions(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for value in node.values() for e in expressions(value)]
    if isinstance(node, list):
        return [e for value in node for e in expressions(value)]
    return []


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (result) (rate(a_total{job=~"$job"}[$__rate_interval]))', {"a_total"}),
        ("histogram_quantile(0.99, sum by (le, verb) (rate(b_seconds_bucket[5m])))", {"b_seconds"}),
        ("sum(rate(c_sum[1m])) / sum(rate(c_count[1m]))", {"c"}),
        ("(d and on (instance) (e == 1)) or (d unless on (instance) e)", {"d", "e"}),
        ('max(f{operation="binding"}) > 1e3', {"f"}),
    ],
)
def test_metric_names_are_read_out_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_dashboard_query_reads_only_metrics_koordpy_exports() -> None:
    exported: set[str] = set()
    for name, family in families(scrape_after_simulate()).items():
        exported.add(name + "_total" if family.type == "counter" else name)
    queries = expressions(dashboard()["panels"])
    assert queries
    unknown = {name: expr for expr in queries for name in metric_names(expr) if name not in exported}
    assert unknown == {}


def test_the_dashboard_shows_what_an_operator_of_koordpy_watches() -> None:
    read = {name for expr in expressions(dashboard()["panels"]) for name in metric_names(expr)}
    assert {
        "scheduler_schedule_attempts_total",
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_pending_pods",
        "koordpy_gang_groups_waiting",
        "koordpy_gang_time_to_bound_seconds",
        "scheduler_preemption_attempts_total",
        "koordpy_gpu_idle",
        "koordpy_gpu_fragmented",
        "scheduler_elastic_quota_status",
        "koordpy_capacity_quota_status",
        "koordpy_elastic_quota_pending_pods",
    } <= read


def dashboard_configmaps(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and (d["metadata"].get("labels") or {}).get("grafana_dashboard") == "1"
    ]


@pytest.mark.parametrize(
    ("sets", "namespace"),
    [
        ((), None),
        (("grafanaDashboard.enabled=false",), None),
        (("grafanaDashboard.enabled=true",), "koordpy-system"),
        (("grafanaDashboard.enabled=true", "grafanaDashboard.namespace=monitoring"), "monitoring"),
    ],
    ids=["by default", "turned off", "turned on", "in the sidecar's namespace"],
)
def test_the_chart_ships_the_dashboard_only_when_enabled(
    helm: str,  # noqa: F811 - the fixture imported above
    sets: tuple[str, ...],
    namespace: str | None,
) -> None:
    found = dashboard_configmaps(render(helm, *sets))
    if namespace is None:
        assert found == []
        return
    assert len(found) == 1
    configmap = found[0]
    assert configmap["metadata"]["namespace"] == namespace
    assert json.loads(configmap["data"]["koordpy.json"]) == dashboard()
