"""Koordinator's Job architecture page, in `koordpy simulate`.

Source: https://github.com/koordinator-sh/website/blob/main/docs/architecture/job.md
(https://koordinator.sh/docs/architecture/job), as kept in /work/shared/seeds/004_2514d148f28e9f66.txt.

- PodGroup: a PodGroup of minMember 2 and its member pods; the page writes the pods as `kind: pod`,
  which the API server refuses ("no kind "pod" is registered for version "v1"").
- GangGroup: two PodGroups bundled by `gang.scheduling.koordinator.sh/groups` "must complete the
  minimum number of accumulations separately", and are scheduled together.
- Network Topology Pod Index: members of gang-example annotated with their index.
- Cluster Network Topology: the ClusterNetworkTopology `default` and the status.detailStatus
  Koordinator maintains for it (two spines of two blocks of two nodes).
- Network Topology Spec: two GangGroups whose `groups` annotation is written as a YAML list, which the
  API server refuses ("cannot unmarshal array into Go struct field ObjectMeta.metadata.annotations of
  type string")."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manuals.simulation import MANUALS, Group, Pod, apply_in_steps, check_groups, check_pods, simulate

DIR = MANUALS / "job_architecture"


def f(*names: str) -> list[Path]:
    return [DIR / n for n in names]


GANG_GROUP = ("gang-example1-pod1", "gang-example2-pod1", "gang-example2-pod2")


@pytest.mark.parametrize(
    ("files", "expected", "groups"),
    [
        pytest.param(
            f("nodes.yaml", "ganggroup.yaml", "ganggroup-members.yaml"),
            {name: Pod("Pending", node=None) for name in GANG_GROUP[:2]},
            {},
            id="gang-group-waits-while-one-gang-is-short-of-its-minimum",
        ),
        pytest.param(
            f("nodes.yaml", "ganggroup.yaml", "ganggroup-members.yaml", "ganggroup-last-member.yaml"),
            {name: Pod("Bound", node="node-1") for name in GANG_GROUP},
            {"gang-example1": Group("Running", scheduled=1), "gang-example2": Group("Running", scheduled=2)},
            id="gang-group-runs-once-each-gang-has-its-minimum",
        ),
        pytest.param(
            f("nodes.yaml", "podgroup.yaml", "index-pods.yaml"),
            {name: Pod("Bound", node="node-1") for name in ("pod-example1", "pod-example2")},
            {"gang-example": Group("Running", scheduled=2)},
            id="indexed-members-of-gang-example-run-together",
        ),
    ],
)
def test_gangs(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: list[Path],
    expected: Mapping[str, Pod],
    groups: Mapping[str, Group],
) -> None:
    (report,) = apply_in_steps(capsys, tmp_path, [files])
    assert len(report["pods"]) == len(expected)
    check_pods(report, expected)
    check_groups(report, groups)


@pytest.mark.parametrize(
    ("files", "named"),
    [
        pytest.param(
            f("nodes.yaml", "podgroup.yaml", "pods.yaml"), ("pods.yaml", "kind"), id="lowercase-kind-pod"
        ),
        pytest.param(
            f("nodes.yaml", "prefer-gather-podgroups.yaml"),
            ("prefer-gather-podgroups.yaml", "metadata.annotations", "gang.scheduling.koordinator.sh/groups"),
            id="prefer-gather-groups-annotation-as-a-list",
        ),
        pytest.param(
            f("nodes.yaml", "must-gather-podgroups.yaml"),
            ("must-gather-podgroups.yaml", "metadata.annotations", "gang.scheduling.koordinator.sh/groups"),
            id="must-gather-groups-annotation-as-a-list",
        ),
    ],
)
def test_manifest_the_api_server_refuses_is_refused(
    capsys: pytest.CaptureFixture[str], files: list[Path], named: Sequence[str]
) -> None:
    code, report, err = simulate(capsys, files)
    assert (code, report) == (2, None)
    for text in named:
        assert text in err, err


def _tree(detail: Sequence[Mapping[str, Any]]) -> list[str]:
    """detailStatus entries in a canonical order: neither the order of the entries nor that of the
    child names carries meaning (the page itself lists b2 before b1)."""
    entries = []
    for entry in detail:
        entry = dict(entry)
        if "childTopologyNames" in entry:
            entry["childTopologyNames"] = sorted(entry["childTopologyNames"])
        entries.append(json.dumps(entry, sort_keys=True))
    return sorted(entries)


def test_topology_status_is_the_tree_the_page_shows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (report,) = apply_in_steps(capsys, tmp_path, [f("topology-nodes.yaml", "clusternetworktopology.yaml")])
    expected = yaml.safe_load((DIR / "detail-status.yaml").read_text())["status"]["detailStatus"]
    assert _tree(report["clusterNetworkTopology"]["status"]["detailStatus"]) == _tree(expected)
