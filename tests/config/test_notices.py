"""What loads but is not acted on is said, once per kind, never dropped silently."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.models import read_configuration
from koordpy.framework.profile import CheckedConfiguration, check_configuration
from koordpy.plugins import registry

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def check(data: dict[str, Any], allow: bool = False) -> CheckedConfiguration:
    return check_configuration(read_configuration(data), registry(), allow)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        pytest.param(
            {"clientConnection": {"contentType": "application/vnd.kubernetes.protobuf"}},
            ["clientConnection.contentType"],
            id="protobuf",
        ),
        pytest.param({"parallelism": 32}, ["parallelism"], id="parallelism"),
        pytest.param({"enableProfiling": True}, ["enableProfiling"], id="profiling-on"),
        # kube-scheduler's addresses are both named, in one warning
        pytest.param(
            {"healthzBindAddress": "0.0.0.0:10251", "metricsBindAddress": "0.0.0.0:10251"},
            ["healthzBindAddress", "metricsBindAddress"],
            id="addresses",
        ),
        pytest.param({"delayCacheUntilActive": True}, ["delayCacheUntilActive"], id="delay-cache"),
        pytest.param({"featureGates": {"SomeGate": True}}, ["featureGates"], id="feature-gates"),
        pytest.param(
            {"leaderElection": {"resourceLock": "endpointsleases"}},
            ["leaderElection.resourceLock"],
            id="other-lock",
        ),
    ],
)
def test_settings_koordpy_does_not_act_on_are_named_in_one_warning(
    fields: dict[str, Any], named: list[str]
) -> None:
    warnings = check({**V1, **fields}).notices.warnings()
    assert len(warnings) == 1
    assert warnings[0].startswith("settings koordpy does not act on: ")
    assert [n for n in named if f"{n}: " in warnings[0]] == named


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"enableProfiling": False, "enableContentionProfiling": False}, id="profiling-off"),
        pytest.param({"delayCacheUntilActive": False}, id="cache-filled-anyway"),
        pytest.param({"leaderElection": {"resourceLock": "leases"}}, id="lease-lock"),
        pytest.param({"featureGates": {}}, id="no-gates"),
        pytest.param({"podInitialBackoffSeconds": 2, "percentageOfNodesToScore": 40}, id="honoured"),
        pytest.param(
            {"clientConnection": {"kubeconfig": "/etc/k.conf", "qps": 100, "burst": 200}}, id="client"
        ),
        pytest.param({"clientConnection": {"contentType": "application/json"}}, id="json"),
    ],
)
def test_a_setting_koordpy_already_behaves_as_is_not_named(fields: dict[str, Any]) -> None:
    assert check({**V1, **fields}).notices.warnings() == []


def test_coscheduling_args_of_both_projects_load_and_the_unused_ones_are_named() -> None:
    args = {
        # koord-scheduler's CoschedulingArgs
        "defaultTimeout": "300s",
        "controllerWorkers": 2,
        "skipCheckScheduleCycle": True,
        "enablePreemption": False,
        "awareNetworkTopology": False,
        "defaultMatchPolicy": "waiting-and-running",
        # scheduler-plugins' CoschedulingArgs
        "permitWaitingTimeSeconds": 30,
        "podGroupBackoffSeconds": 5,
        "podGroupRejectPercentage": 20,
    }
    data = {
        **V1,
        "profiles": [{"schedulerName": "s", "pluginConfig": [{"name": "Coscheduling", "args": args}]}],
    }
    warnings = check(data).notices.warnings()
    assert len(warnings) == 1
    path = "profiles[0].pluginConfig[Coscheduling].args"
    assert f"{path}.controllerWorkers: " in warnings[0]
    assert f"{path}.skipCheckScheduleCycle: " in warnings[0]
    assert "permitWaitingTimeSeconds" not in warnings[0]


def test_a_reference_point_koordpy_serves_elsewhere_loads_silently() -> None:
    # kube-scheduler's TaintToleration has a PreScore; koordpy's does all of its work in Score
    data = {
        **V1,
        "profiles": [
            {"schedulerName": "s", "plugins": {"preScore": {"enabled": [{"name": "TaintToleration"}]}}}
        ],
    }
    checked = check(data)
    assert checked.notices.warnings() == []
    profile = checked.config.profiles[0]
    assert profile.plugins is not None and profile.plugins.preScore.enabled == []


def test_a_plugin_accepted_without_effect_is_an_info_line_and_not_a_warning() -> None:
    data = {
        **V1,
        "profiles": [
            {"schedulerName": "s", "plugins": {"preBind": {"enabled": [{"name": "DefaultPreBind"}]}}}
        ],
    }
    notices = check(data).notices
    assert notices.warnings() == []
    assert len(notices.info()) == 1 and "DefaultPreBind" in notices.info()[0]
