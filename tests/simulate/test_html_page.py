"""The `--html` page's weight and its time axis: plotly's library is packed into the page (it was
written out whole, 4.8 MB, into every page), the charts' data is written once, and the time axis
shows durations (1m, 1h30m) rather than raw virtual seconds, also once zoomed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from koordpy.cli import main
from koordpy.simulate.html import CHART_PENDING, CHART_PREEMPTIONS, CHART_UTILISATION, render_html
from tests.simulate.test_html import (  # noqa: F401 - chromium is a fixture
    REPORT,
    _chart,
    _rendered_dom,
    _step,
    chromium,
)

# the bound stated for a page: plotly's library, packed, is about 2 MB of it
PAGE_BOUND = 2_200_000
# what each step of the timeline adds to the page, at most, once the library is in
BYTES_PER_STEP = 50
SCENARIOS = Path(__file__).parent / "scenarios"


def long_report(steps: int, every: float) -> dict[str, Any]:
    timeline = [
        _step(i * every, float(i % 16), i % 8, pods=i % 40, gangs=i % 4, preempted=i % 3)
        for i in range(steps)
    ]
    return {"pods": [], "timeline": timeline, "virtualSeconds": (steps - 1) * every}


def test_a_typical_page_stays_under_the_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "run.html"
    assert main(["simulate", str(SCENARIOS / "run_for_frees_room_for_gang.yaml"), "--html", str(page)]) == 0
    capsys.readouterr()
    size = page.stat().st_size
    assert size < PAGE_BOUND, f"{size} bytes"
    # still self-contained: nothing is fetched
    text = page.read_text()
    assert not re.search(r"<script[^>]+src=", text)
    outside_library = re.sub(r'(id="koordpy-plotly">)[^<]*', r"\1", text)
    assert not re.search(r"https?://", outside_library)


def test_the_timeline_is_written_compactly() -> None:
    small = len(render_html(long_report(10, 37.123)))
    large = len(render_html(long_report(5010, 37.123)))
    assert small < PAGE_BOUND
    assert (large - small) / 5000 < BYTES_PER_STEP


def test_names_in_the_charts_data_stay_text() -> None:
    report = long_report(2, 1.0)
    for step in report["timeline"]:
        step["allocatable"]["</script><script>alert(1)</script>"] = 1
    page = render_html(report)
    assert "<script>alert(1)" not in page


def x_ticks(chart_markup: str) -> list[str]:
    return re.findall(r'class="xtick"><text[^>]*>([^<]*)<', chart_markup)


def test_browser_time_axis_shows_durations(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    page = tmp_path / "report.html"
    page.write_text(render_html(REPORT))
    dom = _rendered_dom(chromium, page, tmp_path / "profile")
    for chart in (CHART_UTILISATION, CHART_PENDING, CHART_PREEMPTIONS):
        assert x_ticks(_chart(dom, chart)) == ["0s", "10s", "20s", "30s", "40s", "50s", "1m"], chart


# once drawn, zoom the pending chart in to its first 90 seconds, as a drag on its axis would
_ZOOM = """
<script>
(function wait() {
  var div = document.getElementById("%s");
  if (!div || !div._fullLayout || !window.Plotly) { setTimeout(wait, 50); return; }
  window.Plotly.relayout(div, {"xaxis.range": [0, 90]});
})();
</script>
"""


def test_browser_long_runs_tick_at_round_durations_also_zoomed(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    page = tmp_path / "long.html"
    page.write_text(render_html(long_report(91, 60.0)) + _ZOOM % CHART_PENDING)
    dom = _rendered_dom(chromium, page, tmp_path / "profile")
    # 90 minutes: every 15 minutes
    assert x_ticks(_chart(dom, CHART_UTILISATION)) == ["0s", "15m", "30m", "45m", "1h", "1h15m", "1h30m"]
    # zoomed in to 90 seconds: every 15 seconds
    assert x_ticks(_chart(dom, CHART_PENDING)) == ["0s", "15s", "30s", "45s", "1m", "1m15s", "1m30s"]
