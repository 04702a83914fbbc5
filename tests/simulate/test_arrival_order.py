"""Pods of equal priority that arrive at one virtual instant are scheduled in the order they were
created, as on a cluster, where the queue's timestamps (nanoseconds) tell them apart: the contract
creates pods in the order they appear, a workload's in index order. Their names decide nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import node_dict, pod_dict
from tests.simulate.test_timelines import run, write


def replica_set(name: str, replicas: int, scheduler: str | None) -> dict[str, Any]:
    spec = dict(pod_dict("x", cpu="1")["spec"])
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }


@pytest.mark.parametrize("scheduler", [None, "koord-scheduler"], ids=["default-scheduler", "koord-scheduler"])
def test_a_replica_set_binds_its_first_pods_by_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scheduler: str | None
) -> None:
    """12 one-cpu pods on a 5-cpu node: web-0..web-4 run, as a ReplicaSet's first five on a cluster
    (not web-0, web-1, web-10, web-11, web-2, which sort first by name)."""
    report = run(
        capsys, write(tmp_path / "in.yaml", node_dict("node-1", cpu="5"), replica_set("web", 12, scheduler))
    )
    bound = [p["name"] for p in report["pods"] if p["phase"] == "Bound"]
    assert bound == [f"web-{i}" for i in range(5)]


def test_plain_pods_bind_in_input_order_not_name_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["zeta", "alpha", "mid", "beta"]
    report = run(
        capsys,
        write(tmp_path / "in.yaml", node_dict("node-1", cpu="2"), *(pod_dict(n, cpu="1") for n in names)),
    )
    assert [p["name"] for p in report["pods"] if p["phase"] == "Bound"] == ["zeta", "alpha"]
