"""`koordpy simulate --html FILE`: the report as one self-contained page.

The page reads only the report's JSON form (what `--output json` prints), so that it shows exactly
what a script would see: the timeline as charts over virtual time (how much of each resource is
allocated, pending pods and gangs, preemptions), the waiting-time statistics, and the per-pod table.

The charts are drawn by plotly, whose JavaScript is written into the page itself: the file opens
offline, from a mail attachment or a CI artefact, with nothing fetched."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# the chart ids are the page's contract with its readers (and with the browser test)
CHART_UTILISATION = "chart-utilisation"
CHART_PENDING = "chart-pending"
CHART_PREEMPTIONS = "chart-preemptions"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.summary { color: #444; }
"""

_PHASE_COLUMNS = ("namespace", "name", "phase", "node", "createdAt", "scheduledAt", "finishedAt")


def _utilisation_percent(timeline: Sequence[Mapping[str, Any]]) -> dict[str, list[float | None]]:
    """Per resource, allocated over allocatable in percent at each step; None where the cluster
    had none of it (a gap in the line, not a misleading zero)."""
    names: list[str] = []
    for step in timeline:
        for name in step.get("allocatable") or {}:
            if name not in names:
                names.append(name)
    series: dict[str, list[float | None]] = {name: [] for name in names}
    for step in timeline:
        allocated = step.get("allocated") or {}
        allocatable = step.get("allocatable") or {}
        for name in names:
            total = float(allocatable.get(name) or 0)
            series[name].append(100.0 * float(allocated.get(name) or 0) / total if total > 0 else None)
    return series


def _figures(timeline: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Any]]:
    """(element id, title, plotly figure) of each chart of the timeline."""
    import plotly.graph_objects as go

    times = [float(step.get("at", 0.0)) for step in timeline]
    # the charts share one time axis, so that a preemption lines up with the pending pods it served
    span = [0.0, max(max(times, default=0.0), 1.0)]
    layout = {
        "xaxis": {"title": {"text": "virtual seconds"}, "range": span},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
        "height": 320,
        "legend": {"orientation": "h"},
    }

    utilisation = go.Figure(layout=layout)
    for name, values in _utilisation_percent(timeline).items():
        utilisation.add_trace(go.Scatter(x=times, y=values, name=name, mode="lines", line_shape="hv"))
    utilisation.update_layout(
        title={"text": "Allocated, % of allocatable"}, yaxis={"title": {"text": "%"}, "range": [0, 105]}
    )

    pending = go.Figure(layout=layout)
    for key, label in (("pendingPods", "pending pods"), ("pendingGangs", "pending gangs")):
        pending.add_trace(
            go.Scatter(
                x=times, y=[int(s.get(key) or 0) for s in timeline], name=label, mode="lines", line_shape="hv"
            )
        )
    pending.update_layout(
        title={"text": "Pending"},
        yaxis={"title": {"text": "count"}, "rangemode": "tozero", "tickformat": ",d"},
    )

    preemptions = go.Figure(layout=layout)
    preemptions.add_trace(
        go.Bar(x=times, y=[int(s.get("preemptions") or 0) for s in timeline], name="victims evicted")
    )
    preemptions.update_layout(
        title={"text": "Preemptions"},
        yaxis={"title": {"text": "victims"}, "rangemode": "tozero", "tickformat": ",d"},
    )

    return [
        (CHART_UTILISATION, "Utilisation", utilisation),
        (CHART_PENDING, "Pending pods and gangs", pending),
        (CHART_PREEMPTIONS, "Preemptions", preemptions),
    ]


def _cell(value: object) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td>{html.escape(str(value).lower())}</td>"
    if isinstance(value, int | float):
        text = f"{value:g}" if isinstance(value, float) else str(value)
        return f'<td class="num">{html.escape(text)}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def _table(element_id: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f'<table id="{element_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _waiting_rows(waiting: Mapping[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []
    for by, label in (("byPriorityClass", "priority class"), ("byGang", "gang"), ("byQuota", "quota")):
        for group, stats in sorted((waiting.get(by) or {}).items()):
            rows.append(
                [
                    label,
                    group,
                    stats.get("count"),
                    stats.get("p50"),
                    stats.get("p90"),
                    stats.get("max"),
                    stats.get("pending"),
                ]
            )
    return rows


def _pod_rows(pods: Sequence[Mapping[str, Any]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for pod in pods:
        created, scheduled = pod.get("createdAt"), pod.get("scheduledAt")
        waited = (
            scheduled - created
            if isinstance(created, int | float) and isinstance(scheduled, int | float)
            else None
        )
        rows.append([*(pod.get(c) for c in _PHASE_COLUMNS), waited, pod.get("reason"), pod.get("message")])
    return rows


def render_html(report: Mapping[str, Any], title: str = "koordpy simulate") -> str:
    """The page for a report in its JSON form (Report.to_dict())."""
    import plotly.io as pio

    pods: Sequence[Mapping[str, Any]] = report.get("pods") or []
    timeline: Sequence[Mapping[str, Any]] = report.get("timeline") or []
    bound = sum(1 for p in pods if p.get("phase") in ("Bound", "Succeeded"))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="summary">{len(pods)} pods, {bound} bound or finished, '
        f"{len(report.get('preemptions') or [])} preempted; "
        f"run ended at {float(report.get('virtualSeconds') or 0.0):g} virtual seconds.</p>",
    ]
    if timeline:
        for i, (element_id, heading, figure) in enumerate(_figures(timeline)):
            parts.append(f"<h2>{html.escape(heading)}</h2>")
            # plotly's library once, inline, with the first chart: the page fetches nothing
            parts.append(
                pio.to_html(
                    figure,
                    full_html=False,
                    include_plotlyjs=i == 0,
                    div_id=element_id,
                    config={"displaylogo": False, "responsive": True},
                )
            )
    else:
        parts.append("<p>This run has no timeline.</p>")
    waiting = report.get("waitingTime") or {}
    waiting_rows = _waiting_rows(waiting)
    if waiting_rows:
        parts.append("<h2>Waiting time (virtual seconds, from creation to scheduling)</h2>")
        parts.append(
            _table("waiting", ["by", "group", "scheduled", "p50", "p90", "max", "pending"], waiting_rows)
        )
    parts.append("<h2>Pods</h2>")
    parts.append(_table("pods", [*_PHASE_COLUMNS, "waited", "reason", "message"], _pod_rows(pods)))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: Mapping[str, Any], path: str, title: str = "koordpy simulate") -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(render_html(report, title))
