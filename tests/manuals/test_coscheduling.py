"""scheduler-plugins' Coscheduling docs, in `koordpy simulate`.

Sources:
- https://github.com/kubernetes-sigs/scheduler-plugins/blob/master/pkg/coscheduling/README.md and
  site/content/en/docs/plugins/coscheduling.md (https://scheduler-plugins.sigs.k8s.io/docs/plugins/coscheduling/):
  "Suppose we have a cluster which can only afford 3 nginx pods. We create a ReplicaSet with
  replicas=6, and set the value of minMember to 3": three run, three stay Pending. "If minMember is set
  to 4 at this time, all nginx pods are in pending state because the resource does not meet the
  requirements of minMember". The same with the scheduler configurations of "Config" and "Advanced
  Configuration".
- https://github.com/kubernetes-sigs/scheduler-plugins/blob/master/doc/install.md, "Test
  Coscheduling": PodGroup pg1 of minMember 3 and a Deployment of 2 replicas: "All pods are expected
  to be Pending as they cannot be co-scheduled altogether"; scaled to 3, "all Pods get into running
  state" and the PodGroup shows `phase: Running, running: 3, scheduled: 3`. The same with the
  scheduler configuration of "As a single scheduler" (sched-cc.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.manuals.simulation import MANUALS, Group, Pod, check_groups, check_pods, pods, simulate

DIR = MANUALS / "coscheduling"
NODES = {"node-1", "node-2", "node-3"}
NGINX = [f"nginx-{i}" for i in range(6)]
DEMO_CONFIGS = [
    pytest.param(None, id="default-config"),
    pytest.param(DIR / "config.yaml", id="docs-config"),
    pytest.param(DIR / "advanced-config.yaml", id="docs-advanced-config"),
]
INSTALL_CONFIGS = [
    pytest.param(None, id="default-config"),
    pytest.param(DIR / "sched-cc.yaml", id="sched-cc"),
]


@pytest.mark.parametrize("config", DEMO_CONFIGS)
def test_demo_min_member_3_runs_the_three_pods_the_cluster_affords(
    capsys: pytest.CaptureFixture[str], config: Path | None
) -> None:
    code, report, err = simulate(capsys, [DIR / "nodes.yaml", DIR / "demo.yaml"], config=config)
    assert code == 0 and report is not None, err
    found = pods(report)
    running = [name for name in NGINX if found[name]["phase"] == "Bound"]
    assert len(running) == 3, found
    check_pods(report, {name: Pod("Bound", node=NODES) for name in running})
    check_pods(
        report,
        {
            name: Pod("Pending", node=None, reason="Unschedulable", message_contains=("Insufficient cpu",))
            for name in NGINX
            if name not in running
        },
    )


@pytest.mark.parametrize("config", DEMO_CONFIGS)
def test_demo_min_member_4_leaves_every_pod_pending(
    capsys: pytest.CaptureFixture[str], config: Path | None
) -> None:
    code, report, err = simulate(capsys, [DIR / "nodes.yaml", DIR / "demo-min-member-4.yaml"], config=config)
    assert code == 0 and report is not None, err
    check_pods(report, {name: Pod("Pending", node=None) for name in NGINX})


PG1 = ["pause-0", "pause-1", "pause-2"]


@pytest.mark.parametrize("config", INSTALL_CONFIGS)
@pytest.mark.parametrize(
    ("deployment", "expected", "groups"),
    [
        pytest.param(
            "deploy.yaml",
            {name: Pod("Pending", node=None, reason="GangNotReady") for name in PG1[:2]},
            {},
            id="two-replicas-of-min-member-3-stay-pending",
        ),
        pytest.param(
            "deploy-scaled.yaml",
            {name: Pod("Bound", node="kind-control-plane") for name in PG1},
            {"pg1": Group("Running", scheduled=3, running=3)},
            id="scaled-to-three-all-run",
        ),
    ],
)
def test_install_guide_podgroup_and_deployment(
    capsys: pytest.CaptureFixture[str],
    config: Path | None,
    deployment: str,
    expected: Mapping[str, Pod],
    groups: Mapping[str, Group],
) -> None:
    files = [DIR / "kind-node.yaml", DIR / "podgroup.yaml", DIR / deployment]
    code, report, err = simulate(capsys, files, config=config)
    assert code == 0 and report is not None, err
    assert len(report["pods"]) == len(expected)
    check_pods(report, expected)
    check_groups(report, groups)
