"""VolumeRestrictions, VolumeZone and NodeVolumeLimits in the default profile, through
`koordpy simulate`: what a pod that one of them holds back reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import node_dict
from tests.plugins.storage_objects import claim, claim_volume, csi_node, volume, with_volumes
from tests.simulate.storage_builders import by_name, run

ZONE = "topology.kubernetes.io/zone"
DRIVER = "csi.example.com"


def bound_claim(name: str, modes: tuple[str, ...] = ("ReadWriteOnce",), **pv: Any) -> list[dict[str, Any]]:
    """A claim and the PV it is bound to, as a cluster holds them once bound."""
    pvc = claim(name, modes=modes, volume=f"pv-{name}")
    pvc["status"] = {"phase": "Bound"}
    pv_obj = volume(f"pv-{name}", **pv)
    pv_obj["spec"]["claimRef"] = {"namespace": "default", "name": name}
    pv_obj["spec"]["accessModes"] = list(modes)
    pv_obj["status"] = {"phase": "Bound"}
    return [pvc, pv_obj]


def pods_of(capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: list[Any]) -> dict[str, Any]:
    code, report, err = run(capsys, tmp_path, docs)
    assert code == 0, err
    assert report is not None
    return by_name(report["pods"])


def test_read_write_once_pod_claim_goes_to_one_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = [
        node_dict("n1"),
        node_dict("n2"),
        *bound_claim("data", modes=("ReadWriteOncePod",), csi=(DRIVER, "h1")),
        with_volumes("first", claim_volume("d", "data")),
        with_volumes("second", claim_volume("d", "data")),
    ]
    pods = pods_of(capsys, tmp_path, docs)
    placed = [p for p in pods.values() if p["phase"] != "Pending"]
    waiting = [p for p in pods.values() if p["phase"] == "Pending"]
    assert len(placed) == 1 and len(waiting) == 1
    assert "2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode" in (
        waiting[0]["message"] or ""
    )


def test_volume_zone_keeps_the_pod_in_its_volume_zone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = [
        node_dict("in-a", labels={ZONE: "a"}),
        node_dict("in-b", labels={ZONE: "b"}),
        *bound_claim("data", labels={ZONE: "b"}, csi=(DRIVER, "h1")),
        with_volumes("app", claim_volume("d", "data")),
    ]
    assert pods_of(capsys, tmp_path, docs)["app"]["node"] == "in-b"


def test_volume_limits_hold_the_extra_pod(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    docs = [
        node_dict("n1"),
        csi_node("n1", {DRIVER: 1}),
        *bound_claim("a", csi=(DRIVER, "h-a")),
        *bound_claim("b", csi=(DRIVER, "h-b")),
        with_volumes("first", claim_volume("d", "a")),
        with_volumes("second", claim_volume("d", "b")),
    ]
    pods = pods_of(capsys, tmp_path, docs)
    assert sorted(p["phase"] == "Pending" for p in pods.values()) == [False, True]
    (waiting,) = [p for p in pods.values() if p["phase"] == "Pending"]
    assert "node(s) exceed max volume count" in (waiting["message"] or "")
