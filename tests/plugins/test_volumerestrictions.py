"""VolumeRestrictions: in-tree disks mounted twice where the disk forbids it, and ReadWriteOncePod
claims already in use anywhere in the cluster."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.interfaces import QueueingHint
from koordpy.framework.status import Code
from koordpy.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    VolumeRestrictions,
)
from tests.builders import make_pod, node_dict
from tests.plugins.storage_objects import (
    StorageHarness,
    claim,
    claim_volume,
    ephemeral_volume,
    pod_with,
    with_volumes,
)

VR = "VolumeRestrictions"
RWOP = "ReadWriteOncePod"


def gce(pd: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": f"gce-{pd}", "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}


def ebs(volume_id: str, read_only: bool = False) -> dict[str, Any]:
    return {
        "name": f"ebs-{volume_id}",
        "awsElasticBlockStore": {"volumeID": volume_id, "readOnly": read_only},
    }


def rbd(monitors: list[str], image: str, pool: str = "rbd", read_only: bool = False) -> dict[str, Any]:
    source = {"monitors": monitors, "image": image, "pool": pool, "readOnly": read_only}
    return {"name": f"rbd-{image}", "rbd": source}


def iscsi(iqn: str, read_only: bool = False) -> dict[str, Any]:
    source = {"targetPortal": "10.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": read_only}
    return {"name": f"iscsi-{iqn}", "iscsi": source}


def two_nodes(*placed: dict[str, Any], objects: tuple[dict[str, Any], ...] = ()) -> StorageHarness:
    return StorageHarness([node_dict("n1"), node_dict("n2")], list(placed), plugins=[VR], objects=objects)


# ----------------------------------------------------------------------------- disk conflicts
DISK_CASES = [
    # (volume of the pod on n1, volume of the incoming pod, nodes it fits)
    ("gce-same-disk-read-write", gce("pd1"), gce("pd1"), ["n2"]),
    ("gce-same-disk-both-read-only", gce("pd1", True), gce("pd1", True), ["n1", "n2"]),
    ("gce-same-disk-one-read-only", gce("pd1", True), gce("pd1"), ["n2"]),
    ("gce-other-disk", gce("pd1"), gce("pd2"), ["n1", "n2"]),
    ("ebs-same-volume", ebs("vol-1"), ebs("vol-1"), ["n2"]),
    ("ebs-same-volume-read-only-still-conflicts", ebs("vol-1", True), ebs("vol-1", True), ["n2"]),
    ("ebs-other-volume", ebs("vol-1"), ebs("vol-2"), ["n1", "n2"]),
    ("rbd-shared-monitor-same-image", rbd(["a", "b"], "img"), rbd(["b", "c"], "img"), ["n2"]),
    ("rbd-no-shared-monitor", rbd(["a"], "img"), rbd(["c"], "img"), ["n1", "n2"]),
    ("rbd-other-image", rbd(["a"], "img"), rbd(["a"], "img2"), ["n1", "n2"]),
    ("rbd-other-pool", rbd(["a"], "img", pool="p1"), rbd(["a"], "img", pool="p2"), ["n1", "n2"]),
    (
        "rbd-both-read-only",
        rbd(["a"], "img", read_only=True),
        rbd(["a"], "img", read_only=True),
        ["n1", "n2"],
    ),
    ("iscsi-same-iqn", iscsi("iqn.1"), iscsi("iqn.1"), ["n2"]),
    ("iscsi-same-iqn-both-read-only", iscsi("iqn.1", True), iscsi("iqn.1", True), ["n1", "n2"]),
    ("iscsi-other-iqn", iscsi("iqn.1"), iscsi("iqn.2"), ["n1", "n2"]),
]


@pytest.mark.parametrize(
    ("placed", "wanted", "feasible"), [c[1:] for c in DISK_CASES], ids=[c[0] for c in DISK_CASES]
)
def test_disk_conflicts(placed: dict[str, Any], wanted: dict[str, Any], feasible: list[str]) -> None:
    h = two_nodes(with_volumes("p1", placed, node_name="n1"))
    names, _ = h.feasible(pod_with("x", wanted))
    assert names == feasible


def test_disk_conflict_message_and_code() -> None:
    h = two_nodes(
        with_volumes("p1", gce("pd1"), node_name="n1"), with_volumes("p2", gce("pd1"), node_name="n2")
    )
    names, diagnosis = h.feasible(pod_with("x", gce("pd1")))
    assert names == []
    assert fit_error_message(2, diagnosis) == f"0/2 nodes are available: 2 {ERR_REASON_DISK_CONFLICT}."
    assert {s.code for s in diagnosis.statuses_by_row().values()} == {Code.UNSCHEDULABLE}


def test_disk_freed_when_the_holder_leaves() -> None:
    h = two_nodes(with_volumes("p1", ebs("vol-1"), node_name="n1"))
    holder = h.cache.snapshot.info(h.cache.snapshot.row_of["n1"]).pods["default/p1"]
    h.cache.remove_pod(holder)
    assert h.feasible(pod_with("x", ebs("vol-1")))[0] == ["n1", "n2"]


def test_pod_without_volumes_skips() -> None:
    h = two_nodes(with_volumes("p1", gce("pd1"), node_name="n1"))
    state, _, status = h.pre_filter(make_pod("x"))
    assert status is None and VR in state.skip_filter


def test_volumes_without_checks_skip() -> None:
    """Only a claim without ReadWriteOncePod, and a disk kind that is never checked: nothing to do."""
    h = two_nodes(objects=(claim("data"),))
    cinder = {"name": "c", "cinder": {"volumeID": "v1"}}
    state, _, status = h.pre_filter(pod_with("x", claim_volume("d", "data"), cinder))
    assert status is None and VR in state.skip_filter


# ----------------------------------------------------------------------------- ReadWriteOncePod
def test_missing_claim_is_unresolvable() -> None:
    h = two_nodes()
    _, _, status = h.pre_filter(pod_with("x", claim_volume("d", "data")))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == 'persistentvolumeclaim "data" not found'


def test_malformed_claim_is_unresolvable_with_its_error() -> None:
    bad = claim("data")
    bad["spec"]["resources"]["requests"]["storage"] = "lots"
    h = two_nodes(objects=(bad,))
    _, _, status = h.pre_filter(pod_with("x", claim_volume("d", "data")))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith("PersistentVolumeClaim default/data: spec.resources.requests.storage:")


RWOP_CASES = [
    # (claims, placed pods, incoming pod's claim, nodes it fits)
    ("unused-claim", [claim("data", modes=[RWOP])], [], "data", ["n1", "n2"]),
    (
        "used-on-a-node-fails-everywhere",
        [claim("data", modes=[RWOP])],
        [with_volumes("p1", claim_volume("d", "data"), node_name="n1")],
        "data",
        [],
    ),
    (
        "used-but-not-read-write-once-pod",
        [claim("data", modes=["ReadWriteOnce"])],
        [with_volumes("p1", claim_volume("d", "data"), node_name="n1")],
        "data",
        ["n1", "n2"],
    ),
    (
        "same-name-other-namespace",
        [claim("data", modes=[RWOP]), claim("data", modes=[RWOP], namespace="other")],
        [with_volumes("p1", claim_volume("d", "data"), node_name="n1", namespace="other")],
        "data",
        ["n1", "n2"],
    ),
    (
        "another-claim-in-use",
        [claim("data", modes=[RWOP]), claim("logs", modes=[RWOP])],
        [with_volumes("p1", claim_volume("d", "logs"), node_name="n2")],
        "data",
        ["n1", "n2"],
    ),
]


@pytest.mark.parametrize(
    ("claims", "placed", "wanted", "feasible"), [c[1:] for c in RWOP_CASES], ids=[c[0] for c in RWOP_CASES]
)
def test_read_write_once_pod(
    claims: list[dict[str, Any]], placed: list[dict[str, Any]], wanted: str, feasible: list[str]
) -> None:
    h = two_nodes(*placed, objects=tuple(claims))
    names, diagnosis = h.feasible(pod_with("x", claim_volume("d", wanted)))
    assert names == feasible
    for st in diagnosis.statuses_by_row().values():
        assert st.code == Code.UNSCHEDULABLE
        assert st.message == ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT


def test_claim_used_by_an_ephemeral_volume_is_not_counted() -> None:
    """kube counts persistentVolumeClaim volumes only (PVCRefCounts)."""
    h = two_nodes(
        with_volumes("p1", ephemeral_volume("scratch"), node_name="n1"),
        objects=(claim("p1-scratch", modes=[RWOP]),),
    )
    state, _, status = h.pre_filter(pod_with("x", claim_volume("d", "p1-scratch")))
    assert status is None and VR in state.skip_filter


def _plugin(h: StorageHarness) -> VolumeRestrictions:
    p = h.profile.plugins[VR]
    assert isinstance(p, VolumeRestrictions)
    return p


def test_removing_the_user_in_a_dry_run_clears_the_conflict() -> None:
    user = pod_with("p1", claim_volume("d", "data"), node_name="n1")
    h = two_nodes(user, objects=(claim("data", modes=[RWOP]),))
    pod = pod_with("x", claim_volume("d", "data"))
    state, _, status = h.pre_filter(pod)
    assert status is None
    rows = h.rows()
    plugin = _plugin(h)
    assert plugin.filter(state, pod, rows) is not None
    trial_state = state.clone()
    plugin.pre_filter_remove_pod(trial_state, pod, user, int(rows[0]))
    assert plugin.filter(trial_state, pod, rows) is None
    # the clone kept the original count
    assert plugin.filter(state, pod, rows) is not None


def test_unused_read_write_once_pod_claim_skips() -> None:
    """No pod uses the claim yet: PreFilter skips the plugin, as kube does."""
    h = two_nodes(objects=(claim("data", modes=[RWOP]),))
    state, _, status = h.pre_filter(pod_with("x", claim_volume("d", "data")))
    assert status is None and VR in state.skip_filter


def test_a_nominated_user_adds_the_conflict() -> None:
    h = two_nodes(objects=(claim("data", modes=[RWOP]),))
    pod = pod_with("y", claim_volume("d", "data"), gce("pd"))  # the disk keeps the filter running
    state, _, status = h.pre_filter(pod)
    assert status is None and VR not in state.skip_filter
    plugin = _plugin(h)
    rows = h.rows()
    assert plugin.filter(state, pod, rows) is None
    nominated = pod_with("nom", claim_volume("d", "data"))
    plugin.pre_filter_add_pod(state, pod, nominated, int(rows[1]))
    result = plugin.filter(state, pod, rows)
    assert result is not None and not result.passed.any()


def test_disk_conflict_reported_before_the_claim_conflict() -> None:
    h = two_nodes(
        with_volumes("p1", gce("pd1"), node_name="n1"),
        with_volumes("p2", claim_volume("d", "data"), node_name="n2"),
        objects=(claim("data", modes=[RWOP]),),
    )
    names, diagnosis = h.feasible(pod_with("x", gce("pd1"), claim_volume("d", "data")))
    assert names == []
    by_node = {h.snapshot.node_name(r): s.message for r, s in diagnosis.statuses_by_row().items()}
    assert by_node == {"n1": ERR_REASON_DISK_CONFLICT, "n2": ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT}


# ----------------------------------------------------------------------------- queueing hints
def test_hint_after_pod_delete() -> None:
    h = two_nodes()
    plugin = _plugin(h)
    waiting = pod_with("x", gce("pd1"), claim_volume("d", "data"))
    cases = [
        (pod_with("a", gce("pd1"), node_name="n1"), QueueingHint.QUEUE),
        (pod_with("b", gce("pd1", True), node_name="n1"), QueueingHint.QUEUE),
        (pod_with("c", gce("pd2"), node_name="n1"), QueueingHint.QUEUE_SKIP),
        (pod_with("d", claim_volume("v", "data"), node_name="n1"), QueueingHint.QUEUE),
        (
            pod_with("e", claim_volume("v", "data"), node_name="n1", namespace="other"),
            QueueingHint.QUEUE_SKIP,
        ),
        (make_pod("f", node_name="n1"), QueueingHint.QUEUE_SKIP),
        (pod_with("g", gce("pd1")), QueueingHint.QUEUE_SKIP),
        (pod_with("h", gce("pd1")).with_changes(nominated_node_name="n2"), QueueingHint.QUEUE),
    ]
    for deleted, expected in cases:
        assert plugin.after_pod_delete(waiting, deleted, None) == expected, deleted


def test_hint_after_claim_add() -> None:
    h = two_nodes()
    plugin = _plugin(h)
    waiting = pod_with("x", claim_volume("d", "data"))
    assert plugin.after_claim_add(waiting, None, claim("data")) == QueueingHint.QUEUE
    assert plugin.after_claim_add(waiting, None, claim("logs")) == QueueingHint.QUEUE_SKIP
    assert plugin.after_claim_add(waiting, None, claim("data", namespace="other")) == QueueingHint.QUEUE_SKIP


def test_filter_reads_rows_in_any_order() -> None:
    h = two_nodes(with_volumes("p1", ebs("vol-1"), node_name="n2"))
    pod = pod_with("x", ebs("vol-1"))
    state, _, _ = h.pre_filter(pod)
    rows = np.array([h.snapshot.row_of["n2"], h.snapshot.row_of["n1"]], dtype=np.int64)
    result = _plugin(h).filter(state, pod, rows)
    assert result is not None and result.passed.tolist() == [False, True]
