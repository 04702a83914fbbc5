"""The simulate report shows the ClusterNetworkTopology status the operator would write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from koordpy.cli import main
from tests.topology.test_detail_status import SEED_DETAIL_STATUS, SEED_NODE_LABELS, SEED_SPEC


def write_scenario(tmp_path: Path, spec: object) -> Path:
    docs: list[object] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        }
        for name, labels in SEED_NODE_LABELS.items()
    ]
    docs.append(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"},
            "spec": spec,
        }
    )
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def run(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, object]:
    code = main(["simulate", str(path), "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


def test_report_has_the_seed_detail_status(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = run(capsys, write_scenario(tmp_path, SEED_SPEC))
    assert report["clusterNetworkTopology"] == {"status": {"detailStatus": SEED_DETAIL_STATUS}}


def test_broken_chain_is_reported_not_fatal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = {
        "networkTopologySpec": [
            {"labelKey": ["x"], "topologyLayer": "BlockLayer", "parentTopologyLayer": "NoSuchLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
        ]
    }
    report = run(capsys, write_scenario(tmp_path, spec))
    status = report["clusterNetworkTopology"]["status"]  # type: ignore[index]
    assert status["conditions"][0]["reason"] == "InvalidSpec"
    assert "NoSuchLayer" in status["message"]
