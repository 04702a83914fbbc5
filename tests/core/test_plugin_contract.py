"""The plugin contract: a plugin implements the extension points it declares, with the
signatures the protocols give, and the profile runs it at exactly those points."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mypy import api as mypy_api

from koordpy.api.pod import Pod
from koordpy.config.models import Plugins
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import (
    EXTENSION_POINTS,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    Rows,
)
from koordpy.framework.status import Status, unschedulable
from koordpy.plugins import registry

FIXTURE = Path(__file__).parent.parent / "fixtures" / "wrong_plugins.py"


def test_mypy_rejects_plugins_with_wrong_signatures() -> None:
    out, _, status = mypy_api.run([str(FIXTURE), "--strict", "--ignore-missing-imports"])
    assert status == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    wrong_filter = 'error: Argument 3 of "filter" is incompatible with supertype'
    wrong_score = 'error: Return type "float" of "score" incompatible'
    assert any(wrong_filter in e and "FilterPlugin" in e for e in errors), out
    assert any(wrong_score in e for e in errors), out


def test_a_declared_point_without_its_method_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match="declares FilterPlugin but has no filter"):

        class NoFilter(Plugin, FilterPlugin):
            NAME = "NoFilter"


def test_an_optional_protocol_needs_every_method() -> None:
    with pytest.raises(TypeError, match="declares PreFilterExtensions but has no pre_filter_remove_pod"):

        class HalfExtensions(Plugin, PreFilterPlugin, PreFilterExtensions):
            NAME = "HalfExtensions"

            def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
                return None, None

            def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
                pass


class FilterByNameOnly(Plugin):
    """Has a `filter` method but declares nothing: it runs at no extension point."""

    NAME = "FilterByNameOnly"

    def filter(self, state: CycleState, pod: Pod, rows: Rows) -> FilterResult | None:
        return FilterResult.uniform(np.zeros(rows.size, dtype=bool), unschedulable("never"))


@pytest.mark.parametrize(
    ("plugin", "points"),
    [
        (FilterByNameOnly, []),
        ("NodePorts", ["preFilter", "filter"]),
        ("DefaultBinder", ["bind"]),
        ("SchedulingGates", ["preEnqueue"]),
        ("DefaultPreemption", ["postFilter"]),
        ("PodTopologySpread", ["preFilter", "filter", "preScore", "score"]),
        (
            "Coscheduling",
            [
                "queueSort",
                "preEnqueue",
                "preFilter",
                "postFilter",
                "preScore",
                "score",
                "reserve",
                "permit",
                "preBind",
                "postBind",
            ],
        ),
    ],
)
def test_extension_points_are_the_declared_ones(plugin: type[Plugin] | str, points: list[str]) -> None:
    cls = registry()[plugin] if isinstance(plugin, str) else plugin
    assert cls.extension_points() == points


def test_the_table_of_extension_points_matches_the_configuration_fields() -> None:
    fields = [name for name in Plugins.model_fields if name != "multiPoint"]
    assert [p.field for p in EXTENSION_POINTS] == fields
