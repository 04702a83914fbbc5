"""The configurations Koordinator and scheduler-plugins ship load in koordpy unchanged: refused with
every plugin koordpy does not support named at once, or started without them when allowed.

The files under files/ are transcriptions of the published ones (each names its source). The
plugins expected below are read off those files against the plugin table in docs/migrating.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koordpy.cli import main
from koordpy.config.errors import ConfigError
from koordpy.config.models import load_document, read_configuration
from koordpy.framework.profile import CheckedConfiguration, check_configuration
from koordpy.plugins import registry

FILES = Path(__file__).parent / "files"
QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart.yaml"

KOORD_UNSUPPORTED = {
    "SchedulingHint",
    "Reservation",
    "NodeNUMAResource",
    "DeviceShare",
    "LoadAwareScheduling",
}

# file -> the plugins it names that koordpy does not support
REFERENCE_FILES: dict[str, set[str]] = {
    "koord-scheduler-chart-v1.8.yaml": KOORD_UNSUPPORTED,
    "koordinator-manager-scheduler-config.yaml": KOORD_UNSUPPORTED,
    "sigs-coscheduling.yaml": set(),
    "sigs-capacityscheduling.yaml": set(),
    "sigs-noderesources.yaml": {"NodeResourcesAllocatable"},
    "sigs-qos.yaml": {"QOSSort"},
    "sigs-podstate.yaml": {"PodState"},
    "sigs-trimaran.yaml": {"TargetLoadPacking"},
    "sigs-networktopology.yaml": {"NetworkOverhead", "TopologicalSort"},
    "sigs-noderesourcetopology.yaml": {"NodeResourceTopologyMatch"},
    "sigs-sysched.yaml": {"SySched"},
    "sigs-nodemetadata.yaml": {"NodeMetadata"},
    "sigs-chart-second-scheduler.yaml": {
        "NodeResourceTopologyMatch",
        "NodeResourcesAllocatable",
    },
}


def check(name: str, allow: bool) -> CheckedConfiguration:
    path = FILES / name
    return check_configuration(read_configuration(load_document(path), str(path)), registry(), allow)


def named_in(text: str, names: set[str]) -> set[str]:
    return {n for n in names if n in text}


@pytest.mark.parametrize(("name", "unsupported"), [(n, u) for n, u in REFERENCE_FILES.items() if u])
def test_without_the_flag_one_error_names_every_unsupported_plugin(name: str, unsupported: set[str]) -> None:
    with pytest.raises(ConfigError) as err:
        check(name, allow=False)
    # one problem per plugin, each naming it with what it does, and nothing else wrong
    assert len(err.value.problems) == len(unsupported)
    assert {p.message.split(" ", 1)[0] for p in err.value.problems} == unsupported
    assert all("is not supported by koordpy" in p.message for p in err.value.problems)
    assert "--allow-unsupported-plugins" in err.value.hint


@pytest.mark.parametrize(("name", "unsupported"), REFERENCE_FILES.items())
def test_with_the_flag_it_loads_and_one_warning_names_each_skipped_plugin(
    name: str, unsupported: set[str]
) -> None:
    checked = check(name, allow=True)
    assert set(checked.notices.skipped) == unsupported
    plugin_warnings = [w for w in checked.notices.warnings() if w.startswith("left out")]
    if unsupported:
        assert len(plugin_warnings) == 1
        assert named_in(plugin_warnings[0], unsupported) == unsupported
    else:
        assert plugin_warnings == []
    # the configuration koordpy runs names only koordpy's plugins
    for profile in checked.config.profiles:
        named = {pc.name for pc in profile.pluginConfig}
        if profile.plugins is not None:
            for point in type(profile.plugins).model_fields:
                named |= {ref.name for ref in getattr(profile.plugins, point).enabled}
        assert named <= set(registry())


def test_koordinators_default_pre_bind_is_accepted_without_a_warning() -> None:
    checked = check("koord-scheduler-chart-v1.8.yaml", allow=True)
    assert checked.notices.inert == ("DefaultPreBind",)
    assert not any("DefaultPreBind" in w for w in checked.notices.warnings())


def test_koordinators_profile_keeps_what_koordpy_has() -> None:
    profile = check("koord-scheduler-chart-v1.8.yaml", allow=True).config.profiles[0]
    assert profile.plugins is not None
    # queueSort: PrioritySort alone, as the file says; postFilter: Coscheduling and ElasticQuota are
    # left, as enableJobPreemption leaves DefaultPreemption out; bind: DefaultBinder
    assert [r.name for r in profile.plugins.queueSort.enabled] == ["PrioritySort"]
    assert [r.name for r in profile.plugins.postFilter.enabled] == ["Coscheduling", "ElasticQuota"]
    assert [r.name for r in profile.plugins.bind.enabled] == ["DefaultBinder"]
    assert [pc.name for pc in profile.pluginConfig] == ["NodeResourcesFit", "ElasticQuota", "Coscheduling"]


def test_a_skipped_only_queue_sort_gives_its_place_to_the_default() -> None:
    # QOSSort was the only queue sort (every default disabled): koordpy's default stands in
    checked = check("sigs-qos.yaml", allow=True)
    assert checked.notices.stand_ins == ("profiles[0].plugins.queueSort",)
    assert "profiles[0].plugins.queueSort" in checked.notices.warnings()[0]


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in REFERENCE_FILES
        if n.startswith("sigs-") and n not in ("sigs-chart-second-scheduler.yaml", "sigs-nodemetadata.yaml")
    ],
)
def test_scheduler_plugins_client_connection_is_honoured(name: str) -> None:
    warnings = check(name, allow=True).notices.warnings()
    assert not any("clientConnection" in w for w in warnings)


def test_simulate_runs_koordinators_configuration_with_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(FILES / "koord-scheduler-chart-v1.8.yaml")
    code = main(
        ["simulate", "--config", config, "--allow-unsupported-plugins", "-o", "json", str(QUICKSTART)]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    warnings = [line for line in out.err.splitlines() if line.startswith("koordpy: warning: ")]
    assert len(warnings) == 1
    assert named_in(warnings[0], KOORD_UNSUPPORTED) == KOORD_UNSUPPORTED
    phases = {p["name"]: (p["phase"], p["reason"]) for p in json.loads(out.out)["pods"]}
    # the web Deployment and the train Job ask for koord-scheduler and fit; the two bare pods ask
    # for no scheduler (default-scheduler), which Koordinator's configuration has no profile for
    assert phases == {
        **{f"web-{i}": ("Bound", None) for i in range(4)},
        **{f"train-{i}": ("Bound", None) for i in range(2)},
        "oversized": ("Pending", "SchedulerNotFound"),
        "typo": ("Pending", "SchedulerNotFound"),
    }


def test_simulate_without_the_flag_exits_2_listing_every_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(FILES / "koord-scheduler-chart-v1.8.yaml")
    code = main(["simulate", "--config", config, str(QUICKSTART)])
    out = capsys.readouterr()
    assert code == 2
    assert out.out == ""
    lines = out.err.splitlines()
    assert lines[0] == f"koordpy: invalid configuration: {config}: 5 problems:"
    assert named_in(out.err, KOORD_UNSUPPORTED) == KOORD_UNSUPPORTED
    assert "--allow-unsupported-plugins" in lines[-1]
