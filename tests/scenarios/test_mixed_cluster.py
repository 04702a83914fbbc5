"""The mixed GPU/CPU example: GPU pods fill GPU machines, CPU pods spread over CPU machines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koordpy.cli import main

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "gpu-mixed"


def test_gpu_pods_pack_gpu_nodes_and_cpu_pods_avoid_them(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            str(EXAMPLE / "cluster.yaml"),
            "--config",
            str(EXAMPLE / "scheduler-config.yaml"),
            "-o",
            "json",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    nodes = {p["name"]: p["node"] for p in report["pods"]}
    train = [n for name, n in nodes.items() if name.startswith("train-")]
    api = [n for name, n in nodes.items() if name.startswith("api-")]
    # four 2-GPU workers fill one 8-GPU machine before the next is touched
    assert train == ["gpu-1"] * 4
    # no CPU service lands on a GPU machine, and they spread two per CPU machine
    assert sorted(api) == ["cpu-1", "cpu-1", "cpu-2", "cpu-2", "cpu-3", "cpu-3"]
    assert report["fragmentation"] == {
        "resource": "nvidia.com/gpu",
        "commonRequest": 2,
        "idle": 8,
        "fragmented": 0,
    }
