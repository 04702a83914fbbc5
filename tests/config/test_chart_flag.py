"""The Helm chart's allowUnsupportedPlugins value: koordpy started without the plugins it does not
support, as `--allow-unsupported-plugins` does. Rendered with `helm template`, with the helm that
`make controlplane` builds (skipped without it, a failure under CI=true; the chart's own tests in
tests/e2e build it when they can)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.config.models import read_configuration
from koordpy.framework.profile import check_configuration
from koordpy.plugins import registry
from tests.e2e.test_chart import _find_helm, only, render, run_helm, scheduler_config, template_args
from tests.support.ci import in_ci

FLAG = "--allow-unsupported-plugins"
KOORD_CHART_CONFIG = Path(__file__).parent / "files" / "koord-scheduler-chart-v1.8.yaml"


@pytest.fixture(scope="module")
def helm() -> str:
    found = _find_helm()
    if found is None:
        reason = "no helm: run `make controlplane` to build it"
        if in_ci():
            pytest.fail(reason + " (CI=true: failing instead of skipping)", pytrace=False)
        pytest.skip(reason)
    return found


def container_args(docs: list[dict[str, Any]]) -> list[str]:
    return list(only(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])


@pytest.mark.parametrize(
    ("sets", "passed"),
    [
        pytest.param((), False, id="off-by-default"),
        pytest.param(("allowUnsupportedPlugins=false",), False, id="false"),
        pytest.param(("allowUnsupportedPlugins=true",), True, id="true"),
    ],
)
def test_the_value_passes_the_flag(helm: str, sets: tuple[str, ...], passed: bool) -> None:
    assert (FLAG in container_args(render(helm, *sets))) is passed


def test_the_value_must_be_a_boolean(helm: str) -> None:
    refused = run_helm(helm, "template", *template_args("allowUnsupportedPlugins=yes please"), check=False)
    assert refused.returncode != 0
    assert "allowUnsupportedPlugins" in refused.stderr


def test_koordinators_profiles_in_the_chart_start_with_the_value(helm: str) -> None:
    # what a user moving from Koordinator's chart puts in the values: its profiles as they are
    profiles = yaml.safe_load(KOORD_CHART_CONFIG.read_text())["profiles"]
    docs = render(helm, "schedulerConfig.profiles=" + json.dumps(profiles), "allowUnsupportedPlugins=true")
    assert FLAG in container_args(docs)
    checked = check_configuration(read_configuration(scheduler_config(docs)), registry(), True)
    # SchedulingHint, Reservation, NodeNUMAResource, DeviceShare, LoadAwareScheduling (ElasticQuota runs)
    assert len(checked.notices.skipped) == 5
