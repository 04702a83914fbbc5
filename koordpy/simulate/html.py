"""`koordpy simulate --html FILE`: the report as one self-contained page.

The page reads only the report's JSON form (what `--output json` prints), so that it shows exactly
what a script would see: the timeline as charts over virtual time (how much of each resource is
allocated, pending pods and gangs, preemptions), the waiting-time statistics, and the per-pod table.

The charts are drawn by plotly, whose JavaScript is written into the page itself: the file opens
offline, from a mail attachment or a CI artefact, with nothing fetched. The library is 4.8 MB as
plotly ships it (plotly.min.js, the only bundle the Python package has); the page carries it
gzip-compressed (base64, 2 MB), and the browser unpacks it with DecompressionStream (Chromium 80,
Firefox 113, Safari 16.4 and later) before it draws. The charts' data is written once, compactly:
the time axis is shared by every trace.

The time axis shows durations (`1h30m`, `45s`), ticked at round steps (1 s, 5 s, 1 m, 15 m, 1 h,
6 h, 1 d...) for the range shown, again when zoomed."""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
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


def _figures(timeline: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(element id, title, plotly figure) of each chart of the timeline. The traces have no `x`: the
    page gives every trace the one time axis (and its durations, for the hover labels)."""
    times = [float(step.get("at", 0.0)) for step in timeline]
    # the charts share one time axis, so that a preemption lines up with the pending pods it served
    span = [0.0, max(max(times, default=0.0), 1.0)]

    def layout(title: str, yaxis: dict[str, Any]) -> dict[str, Any]:
        return {
            "title": {"text": title},
            "xaxis": {"title": {"text": "virtual time"}, "range": span},
            "yaxis": yaxis,
            "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
            "height": 320,
            "legend": {"orientation": "h"},
        }

    def line(name: str, y: Sequence[float | int | None], hover: str) -> dict[str, Any]:
        return {
            "type": "scatter",
            "name": name,
            "y": list(y),
            "mode": "lines",
            "line": {"shape": "hv"},
            "hovertemplate": f"%{{customdata}}: {hover}<extra>%{{fullData.name}}</extra>",
        }

    utilisation = {
        "data": [
            line(name, [None if v is None else round(v, 2) for v in values], "%{y:.1f}%")
            for name, values in _utilisation_percent(timeline).items()
        ],
        "layout": layout("Allocated, % of allocatable", {"title": {"text": "%"}, "range": [0, 105]}),
    }
    counts = {"title": {"text": "count"}, "rangemode": "tozero", "tickformat": ",d"}
    pending = {
        "data": [
            line(label, [int(s.get(key) or 0) for s in timeline], "%{y}")
            for key, label in (("pendingPods", "pending pods"), ("pendingGangs", "pending gangs"))
        ],
        "layout": layout("Pending", counts),
    }
    victims = {"title": {"text": "victims"}, "rangemode": "tozero", "tickformat": ",d"}
    preemptions = {
        "data": [
            {
                "type": "bar",
                "name": "victims evicted",
                "y": [int(s.get("preemptions") or 0) for s in timeline],
                "hovertemplate": "%{customdata}: %{y}<extra>victims evicted</extra>",
            }
        ],
        "layout": layout("Preemptions", victims),
    }
    return [
        (CHART_UTILISATION, "Utilisation", utilisation),
        (CHART_PENDING, "Pending pods and gangs", pending),
        (CHART_PREEMPTIONS, "Preemptions", preemptions),
    ]


def _json_in_script(value: object) -> str:
    """JSON that stays text inside a <script> element, whatever the names it holds."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@functools.cache
def _plotly_bundle() -> tuple[str, str]:
    """plotly.js's licence banner, as text, and the library gzip-compressed, in base64."""
    from plotly.offline import get_plotlyjs

    library = get_plotlyjs()
    end = library.find("*/")
    banner = library[: end + 2] if library.startswith("/*") and end > 0 else "/* plotly.js */"
    packed = gzip.compress(library.encode("utf-8"), compresslevel=9, mtime=0)
    return banner, base64.b64encode(packed).decode("ascii")


# Unpacks plotly (unless the page already has it), then draws each chart with the shared time axis,
# ticked with durations at round steps, and ticked again when the range changes (zoom, pan, reset).
_DRAW = """
(function () {
  "use strict";
  var spec = JSON.parse(document.getElementById("koordpy-charts").textContent);
  var UNITS = [["d", 86400], ["h", 3600], ["m", 60]];
  function duration(seconds) {
    var ms = Math.round(Math.abs(seconds) * 1000), sign = seconds < 0 && ms ? "-" : "";
    if (ms === 0) return "0s";
    if (ms < 1000) return sign + ms + "ms";
    var out = "";
    for (var i = 0; i < UNITS.length; i++) {
      var n = Math.floor(ms / (UNITS[i][1] * 1000));
      if (n) { out += n + UNITS[i][0]; ms -= n * UNITS[i][1] * 1000; }
    }
    if (ms) out += String(ms / 1000) + "s";
    return sign + out;
  }
  var STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300,
    600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];
  function ticks(lo, hi) {
    var span = Math.max(hi - lo, 0.001), step = null;
    for (var i = 0; i < STEPS.length && step === null; i++) if (span / STEPS[i] <= 8) step = STEPS[i];
    if (step === null) step = 604800 * Math.ceil(span / (8 * 604800));
    var values = [];
    for (var k = Math.ceil(lo / step - 1e-9); k * step <= hi + 1e-9 * step; k++) {
      values.push(Math.round(k * step * 1000) / 1000);
    }
    return {"xaxis.tickmode": "array", "xaxis.tickvals": values, "xaxis.ticktext": values.map(duration)};
  }
  function say(text) {
    spec.charts.forEach(function (chart) {
      document.getElementById(chart.id).textContent = text;
    });
  }
  function draw() {
    var labels = spec.t.map(duration);
    spec.charts.forEach(function (chart) {
      var div = document.getElementById(chart.id), range = chart.layout.xaxis.range;
      chart.data.forEach(function (trace) { trace.x = spec.t; trace.customdata = labels; });
      chart.layout.template = spec.template;
      var first = ticks(range[0], range[1]);
      chart.layout.xaxis.tickmode = "array";
      chart.layout.xaxis.tickvals = first["xaxis.tickvals"];
      chart.layout.xaxis.ticktext = first["xaxis.ticktext"];
      window.Plotly.newPlot(div, chart.data, chart.layout, spec.config).then(function () {
        div.on("plotly_relayout", function (change) {
          var moved = Object.keys(change).some(function (key) {
            return key.indexOf("xaxis.range") === 0 || key === "xaxis.autorange";
          });
          if (!moved) return;
          var shown = div._fullLayout.xaxis.range;
          window.Plotly.relayout(div, ticks(Number(shown[0]), Number(shown[1])));
        });
      });
    });
  }
  function unpack() {
    if (window.Plotly) return Promise.resolve();
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot unpack the charts' library " +
        "(it needs DecompressionStream: Chromium 80, Firefox 113, Safari 16.4 or later)"));
    }
    var packed = atob(document.getElementById("koordpy-plotly").textContent.trim());
    var bytes = new Uint8Array(packed.length);
    for (var i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (library) {
      var script = document.createElement("script");
      script.textContent = library;
      document.head.appendChild(script);
    });
  }
  unpack().then(draw).catch(function (err) { say("The charts could not be drawn: " + err.message); });
})();
"""


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


def _charts(timeline: Sequence[Mapping[str, Any]]) -> list[str]:
    """The charts' elements, their data once, plotly packed, and the script that draws them."""
    import plotly.io as pio

    parts: list[str] = []
    charts: list[dict[str, Any]] = []
    for element_id, heading, figure in _figures(timeline):
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.append(f'<div id="{element_id}" class="chart" style="height:320px"></div>')
        charts.append({"id": element_id, **figure})
    template = pio.templates[pio.templates.default].to_plotly_json() if pio.templates.default else {}
    spec = {
        "t": [round(float(step.get("at", 0.0)), 3) for step in timeline],
        "charts": charts,
        "template": template,
        "config": {"displaylogo": False, "responsive": True},
    }
    banner, packed = _plotly_bundle()
    parts += [
        f'<script type="application/json" id="koordpy-charts">{_json_in_script(spec)}</script>',
        # plotly's library once, packed, in the page: the page fetches nothing
        f"<script>{banner}\nwindow.PlotlyConfig = {{MathJaxConfig: 'local'}};</script>",
        f'<script type="application/octet-stream" id="koordpy-plotly">{packed}</script>',
        f"<script>{_DRAW}</script>",
    ]
    return parts


def render_html(report: Mapping[str, Any], title: str = "koordpy simulate") -> str:
    """The page for a report in its JSON form (Report.to_dict())."""
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
        parts += _charts(timeline)
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
    claims: Sequence[Mapping[str, Any]] = report.get("persistentVolumeClaims") or []
    if claims:
        columns = ("namespace", "name", "phase", "volume", "storageClass", "request", "selectedNode")
        parts.append("<h2>Volume claims</h2>")
        parts.append(_table("claims", columns, ([c.get(k) for k in columns] for c in claims)))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: Mapping[str, Any], path: str, title: str = "koordpy simulate") -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(render_html(report, title))
