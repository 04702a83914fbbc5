"""The table of the reference schedulers' plugins: complete, true to koordpy's registry, and the
same as the one docs/migrating.md shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from koordpy.config.known_plugins import (
    KNOWN_PLUGINS,
    KNOWN_PLUGINS_BY_NAME,
    KOORD_SCHEDULER,
    SCHEDULER_PLUGINS,
    Support,
)
from koordpy.config.unhonoured import UNHONOURED_SETTINGS
from koordpy.plugins import registry

MIGRATING = Path(__file__).parents[2] / "docs" / "migrating.md"

# the plugins each reference binary registers, read from its source
KOORD_SCHEDULER_REGISTRY = (
    # koordinator-sh/koordinator v1.8.0, cmd/koord-scheduler/main.go, koordinatorPlugins
    "LoadAwareScheduling",
    "NodeNUMAResource",
    "Reservation",
    "Coscheduling",
    "DeviceShare",
    "ElasticQuota",
    "DefaultPreBind",
    "NodeResourcesFitPlus",
    "ScarceResourceAvoidance",
    "SchedulingHint",
)
SCHEDULER_PLUGINS_REGISTRY = (
    # kubernetes-sigs/scheduler-plugins, cmd/scheduler/main.go (CrossNodePreemption is a sample
    # there, commented out)
    "CapacityScheduling",
    "Coscheduling",
    "LoadVariationRiskBalancing",
    "NetworkOverhead",
    "TopologicalSort",
    "NodeMetadata",
    "NodeResourcesAllocatable",
    "NodeResourceTopologyMatch",
    "PreemptionToleration",
    "TargetLoadPacking",
    "LowRiskOverCommitment",
    "SySched",
    "Peaks",
    "PodState",
    "QOSSort",
    "CrossNodePreemption",
)


@pytest.mark.parametrize(
    ("project", "names"),
    [(KOORD_SCHEDULER, KOORD_SCHEDULER_REGISTRY), (SCHEDULER_PLUGINS, SCHEDULER_PLUGINS_REGISTRY)],
)
def test_every_plugin_a_reference_scheduler_registers_is_in_the_table(
    project: str, names: tuple[str, ...]
) -> None:
    missing = [n for n in names if n not in KNOWN_PLUGINS_BY_NAME]
    assert missing == []
    assert [n for n in names if project not in KNOWN_PLUGINS_BY_NAME[n].projects] == []


def test_supported_is_exactly_the_listed_plugins_koordpy_has() -> None:
    # a plugin koordpy gains under a listed name turns its row to supported (and the guide's row
    # with it); koordpy's own plugins, under names of their own, are not migration matters
    supported = {p.name for p in KNOWN_PLUGINS if p.support == Support.SUPPORTED}
    assert supported == set(registry()) & set(KNOWN_PLUGINS_BY_NAME)


def test_every_plugin_kube_scheduler_enables_by_default_is_supported() -> None:
    # kube-scheduler v1's default profile, without its volume plugins (koordpy leaves volumes out)
    defaults = [
        "SchedulingGates",
        "PrioritySort",
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "DefaultPreemption",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "DefaultBinder",
    ]
    assert [n for n in defaults if KNOWN_PLUGINS_BY_NAME[n].support != Support.SUPPORTED] == []


def test_names_are_unique() -> None:
    assert len(KNOWN_PLUGINS_BY_NAME) == len(KNOWN_PLUGINS)


def test_other_points_are_points_koordpys_plugin_lacks() -> None:
    # a point koordpy's plugin comes to implement must leave the table, or its note would lie
    for plugin in KNOWN_PLUGINS:
        if not plugin.other_points:
            continue
        assert plugin.support == Support.SUPPORTED
        implemented = registry()[plugin.name].extension_points()
        assert [p for p, _ in plugin.other_points if p in implemented] == []


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _rows(section: str) -> dict[str, list[str]]:
    rows = {}
    for line in section.splitlines():
        match = re.match(r"^\| `([^`]+)` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def test_the_migration_guide_shows_every_plugin_as_the_table_has_it() -> None:
    rows = _rows(_section(MIGRATING.read_text(), "## Plugins"))
    assert list(rows) == [p.name for p in KNOWN_PLUGINS]
    for plugin in KNOWN_PLUGINS:
        cells = [", ".join(plugin.projects), plugin.does, plugin.support.value, plugin.advice]
        expected = f"| `{plugin.name}` | " + " | ".join(cells) + " |"
        assert rows[plugin.name] == cells, f"docs/migrating.md should have the row\n{expected}"


def test_the_migration_guide_names_every_setting_koordpy_does_not_act_on() -> None:
    rows = _rows(_section(MIGRATING.read_text(), "## Configuration settings"))
    assert list(rows) == [".".join(s.path) for s in UNHONOURED_SETTINGS]
    for setting in UNHONOURED_SETTINGS:
        assert rows[".".join(setting.path)][0].startswith(setting.instead)
