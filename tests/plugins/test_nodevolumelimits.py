"""NodeVolumeLimits: unique CSI volumes per driver on a node, the pod's new ones included, against
the allocatable count the node's CSINode reports for the driver."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.interfaces import QueueingHint
from koordpy.framework.status import Code
from koordpy.plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits
from tests.builders import make_pod, node_dict
from tests.plugins.storage_objects import (
    StorageHarness,
    attachment,
    claim,
    claim_volume,
    csi_node,
    ephemeral_volume,
    pod_with,
    storage_class,
    volume,
    with_volumes,
)

NVL = "NodeVolumeLimits"
EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
OTHER = "other.csi.example.com"


def bound(name: str, driver: str = EBS, handle: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A claim `name` bound to a CSI PV `pv-name` of `driver`."""
    return claim(name, volume=f"pv-{name}"), volume(f"pv-{name}", csi=(driver, handle or f"h-{name}"))


def objects_for(*names: str, driver: str = EBS) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in names:
        out.extend(bound(n, driver))
    return out


def user(pod: str, *claims: str) -> dict[str, Any]:
    """A pod on n1 using the claims."""
    return with_volumes(pod, *(claim_volume(f"v{i}", c) for i, c in enumerate(claims)), node_name="n1")


def incoming(*claims: str) -> Any:
    return pod_with("x", *(claim_volume(f"v{i}", c) for i, c in enumerate(claims)))


def one_node(
    placed: list[dict[str, Any]], objects: list[dict[str, Any]], limits: dict[str, int | None] | None = None
) -> StorageHarness:
    if limits is not None:
        objects = [*objects, csi_node("n1", limits)]
    return StorageHarness([node_dict("n1")], placed, plugins=[NVL], objects=objects)


COUNT_CASES = [
    # (claims bound on n1's pods, the incoming pod's claims, limits, fits)
    ("within-limit", ["a", "b"], ["c", "d"], {EBS: 4}, True),
    ("over-limit", ["a", "b"], ["c", "d", "e"], {EBS: 4}, False),
    ("limit-zero", [], ["c"], {EBS: 0}, False),
    ("shared-volume-counted-once", ["a", "b", "c", "d"], ["a"], {EBS: 4}, True),
    ("same-claim-twice-in-pod", ["a", "b", "c"], ["d", "d"], {EBS: 4}, True),
    ("no-csinode-no-limit", ["a", "b"], ["c", "d", "e"], None, True),
    ("driver-without-allocatable", ["a", "b"], ["c", "d", "e"], {EBS: None}, True),
    ("limit-of-another-driver", ["a", "b"], ["c", "d", "e"], {OTHER: 1}, True),
]


@pytest.mark.parametrize(
    ("on_node", "wanted", "limits", "fits"), [c[1:] for c in COUNT_CASES], ids=[c[0] for c in COUNT_CASES]
)
def test_unique_volumes_against_the_limit(
    on_node: list[str], wanted: list[str], limits: dict[str, int | None] | None, fits: bool
) -> None:
    claims = sorted(set(on_node) | set(wanted))
    placed = [user(f"p{i}", c) for i, c in enumerate(on_node)]
    h = one_node(placed, objects_for(*claims), limits)
    names, diagnosis = h.feasible(incoming(*wanted))
    assert names == (["n1"] if fits else [])
    if not fits:
        assert (
            fit_error_message(1, diagnosis)
            == f"0/1 nodes are available: 1 {ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED}."
        )
        assert {s.code for s in diagnosis.statuses_by_row().values()} == {Code.UNSCHEDULABLE}


def test_limits_are_per_driver() -> None:
    objects = [*objects_for("a", "b"), *objects_for("g1", driver=GCE), *objects_for("g2", driver=GCE)]
    h = one_node([user("p", "a", "b")], objects, {EBS: 2, GCE: 5})
    assert h.feasible(incoming("g1", "g2"))[0] == ["n1"]
    h = one_node([user("p", "a")], [*objects, *objects_for("c")], {EBS: 2, GCE: 5})
    assert h.feasible(incoming("b", "c"))[0] == []


def test_nodes_judged_each_by_its_own_pods_and_limits() -> None:
    nodes = [node_dict("n1"), node_dict("n2"), node_dict("n3"), node_dict("n4")]
    objects = [
        *objects_for("a", "b", "c"),
        csi_node("n1", {EBS: 2}),
        csi_node("n2", {EBS: 2}),
        csi_node("n3", {EBS: 1}),
    ]
    placed = [
        with_volumes("p1", claim_volume("v", "a"), node_name="n1"),
        with_volumes("p2", claim_volume("v", "b"), node_name="n1"),
    ]
    h = StorageHarness(nodes, placed, plugins=[NVL], objects=objects)
    # n1 is full, n2 empty with room, n3 has room for one only, n4 has no CSINode
    assert h.feasible(incoming("c"))[0] == ["n2", "n3", "n4"]
    assert h.feasible(incoming("a"))[0] == ["n1", "n2", "n3", "n4"]
    assert h.feasible(incoming("a", "c"))[0] == ["n2", "n4"]


# ----------------------------------------------------------------------------- how claims count
def test_unbound_claim_counts_against_its_class_provisioner() -> None:
    objects = [*objects_for("a"), claim("new", storage_class="fast"), storage_class("fast", EBS)]
    h = one_node([user("p", "a")], objects, {EBS: 1})
    assert h.feasible(incoming("new"))[0] == []
    h = one_node([user("p", "a")], objects, {EBS: 2})
    assert h.feasible(incoming("new"))[0] == ["n1"]


def test_unbound_claim_shared_with_a_pod_on_the_node_counts_once() -> None:
    objects = [claim("new", storage_class="fast"), storage_class("fast", EBS)]
    h = one_node([user("p", "new")], objects, {EBS: 1})
    assert h.feasible(incoming("new"))[0] == ["n1"]


def test_unbound_claim_without_class_is_not_counted() -> None:
    h = one_node([], [claim("new")], {EBS: 0})
    assert h.feasible(incoming("new"))[0] == ["n1"]


def test_claim_bound_to_an_unknown_volume_counts_by_its_class() -> None:
    objects = [claim("lost", volume="pv-gone", storage_class="fast"), storage_class("fast", EBS)]
    h = one_node([], objects, {EBS: 0})
    assert h.feasible(incoming("lost"))[0] == []


def test_in_tree_provisioner_counts_against_its_csi_driver() -> None:
    objects = [claim("new", storage_class="old"), storage_class("old", "kubernetes.io/aws-ebs")]
    h = one_node([], objects, {EBS: 0})
    assert h.feasible(incoming("new"))[0] == []


def test_in_tree_provisioner_not_migrated_is_not_counted() -> None:
    objects = [claim("new", storage_class="files"), storage_class("files", "kubernetes.io/azure-file")]
    h = one_node([], objects, {"kubernetes.io/azure-file": 0, "file.csi.azure.com": 0})
    assert h.feasible(incoming("new"))[0] == ["n1"]


def test_missing_claim_of_the_pod_is_unresolvable() -> None:
    h = one_node([], [], {EBS: 4})
    names, diagnosis = h.feasible(incoming("nope"))
    assert names == []
    (status,) = diagnosis.statuses_by_row().values()
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == 'looking up PVC default/nope: persistentvolumeclaim "nope" not found'


def test_missing_claim_of_a_pod_on_the_node_is_not_counted() -> None:
    h = one_node([user("p", "gone")], objects_for("a"), {EBS: 1})
    assert h.feasible(incoming("a"))[0] == ["n1"]


def test_malformed_claim_waits_with_its_error() -> None:
    bad = claim("data")
    bad["spec"]["volumeName"] = 7
    h = one_node([], [bad], {EBS: 4})
    _, _, status = h.pre_filter(incoming("data"))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == "PersistentVolumeClaim default/data: spec.volumeName: expected a string, got int"


def test_malformed_volume_waits_with_its_error() -> None:
    pvc, pv = bound("data")
    pv["spec"]["csi"] = {"driver": EBS}
    h = one_node([], [pvc, pv], {EBS: 4})
    _, _, status = h.pre_filter(incoming("data"))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == "PersistentVolume pv-data: spec.csi.volumeHandle: is required"


# ----------------------------------------------------------------------------- ephemeral volumes
def test_ephemeral_volume_owned_by_the_pod_counts() -> None:
    objects = [claim("x-scratch", storage_class="fast", owner_uid="uid-x"), storage_class("fast", EBS)]
    h = one_node([], objects, {EBS: 0})
    assert h.feasible(pod_with("x", ephemeral_volume("scratch"), uid="uid-x"))[0] == []


def test_ephemeral_claim_of_another_owner_is_an_error() -> None:
    objects = [claim("x-scratch", storage_class="fast", owner_uid="someone"), storage_class("fast", EBS)]
    h = one_node([], objects, {EBS: 5})
    _, _, status = h.pre_filter(pod_with("x", ephemeral_volume("scratch"), uid="uid-x"))
    assert status.code == Code.ERROR
    assert status.message == "PVC default/x-scratch was not created for pod default/x (pod is not owner)"


def test_ephemeral_claim_not_created_yet() -> None:
    h = one_node([], [], {EBS: 5})
    names, diagnosis = h.feasible(pod_with("x", ephemeral_volume("scratch"), uid="uid-x"))
    assert names == []
    (status,) = diagnosis.statuses_by_row().values()
    assert status.message == 'looking up PVC default/x-scratch: persistentvolumeclaim "x-scratch" not found'


# ----------------------------------------------------------------------------- migrated in-tree volumes
def ebs_pv(name: str, volume_id: str) -> dict[str, Any]:
    return volume(name, source={"awsElasticBlockStore": {"volumeID": volume_id}})


def test_in_tree_volumes_count_against_the_migrated_driver() -> None:
    objects = [
        claim("a", volume="pv-a"),
        ebs_pv("pv-a", "aws://us-east-1a/vol-1"),
        *bound("csi", EBS, handle="vol-2"),
    ]
    h = one_node([user("p", "a")], objects, {EBS: 1})
    assert h.feasible(incoming("csi"))[0] == []
    # the in-tree PV and a CSI PV with the same handle are one volume
    objects.extend(bound("same", EBS, handle="vol-1"))
    h = one_node([user("p", "a")], objects, {EBS: 1})
    assert h.feasible(incoming("same"))[0] == ["n1"]


def test_inline_in_tree_disks_count_when_migrated() -> None:
    inline = {"name": "disk", "awsElasticBlockStore": {"volumeID": "vol-9"}}
    placed = [with_volumes("p", inline, node_name="n1")]
    h = one_node(placed, objects_for("a"), {EBS: 1})
    assert h.feasible(incoming("a"))[0] == []
    # the same disk inline again: counted once
    assert h.feasible(pod_with("y", {**inline, "name": "again"}))[0] == ["n1"]


def test_disks_that_are_not_migrated_are_not_counted() -> None:
    rbd = {"name": "r", "rbd": {"monitors": ["m"], "image": "i"}}
    h = one_node([with_volumes("p", rbd, node_name="n1")], objects_for("a"), {EBS: 1})
    assert h.feasible(incoming("a"))[0] == ["n1"]
    state, _, _ = h.pre_filter(pod_with("y", rbd))
    assert NVL in state.skip_filter


def test_pod_without_volumes_skips() -> None:
    h = one_node([], [], {EBS: 0})
    state, _, status = h.pre_filter(make_pod("x"))
    assert status is None and NVL in state.skip_filter


def test_skips_where_no_node_limits_the_drivers() -> None:
    """Filter could fail no node (no CSINode limits the pod's driver, no CSIDriver keeps pods
    off nodes without it): skipped, which lets preemption dry-run over the arrays."""
    no_limit: list[dict[str, int | None] | None] = [None, {OTHER: 1}, {EBS: None}]
    for limits in no_limit:
        h = one_node([user("p", "a")], objects_for("a", "b"), limits)
        state, _, status = h.pre_filter(incoming("b"))
        assert status is None and NVL in state.skip_filter
    h = one_node([user("p", "a")], objects_for("a", "b"), {EBS: 1})
    state, _, _ = h.pre_filter(incoming("b"))
    assert NVL not in state.skip_filter


def test_many_nodes_full_count_only_where_a_limit_is_near() -> None:
    """Nodes whose pods use fewer volumes than the limit less the pod's own are passed without
    their volumes being counted; the node at the limit is still refused."""
    nodes = [node_dict(f"n{i}") for i in range(1, 6)]
    placed = [with_volumes(f"p{i}", claim_volume("v", f"c{i}"), node_name=f"n{i}") for i in range(1, 6)]
    placed.append(with_volumes("q", claim_volume("v", "extra"), node_name="n3"))
    objects = objects_for("c1", "c2", "c3", "c4", "c5", "extra", "new")
    objects += [csi_node(f"n{i}", {EBS: 2}) for i in range(1, 6)]
    h = StorageHarness(nodes, placed, plugins=[NVL], objects=objects)
    assert sorted(h.feasible(incoming("new"))[0]) == ["n1", "n2", "n4", "n5"]
    # the pod's volume already attached on n3 adds nothing there
    assert "n3" in h.feasible(incoming("extra"))[0]


# ----------------------------------------------------------------------------- trials and events
def test_nominated_pods_are_counted_through_the_snapshot() -> None:
    h = one_node([], objects_for("a", "b"), {EBS: 1})
    pod = incoming("b")
    state, _, _ = h.pre_filter(pod)
    plugin = h.profile.plugins[NVL]
    assert isinstance(plugin, NodeVolumeLimits)
    rows = h.rows()
    assert plugin.filter(state, pod, rows) is None
    with h.snapshot.trial() as trial:
        trial.add_pod(pod_with("nom", claim_volume("v", "a"), node_name="n1"), int(rows[0]))
        result = plugin.filter(state, pod, rows)
        assert result is not None and not result.passed.any()
    assert plugin.filter(state, pod, rows) is None


def test_limits_follow_csinode_changes() -> None:
    h = one_node([user("p", "a")], objects_for("a", "b"), {EBS: 1})
    assert h.feasible(incoming("b"))[0] == []
    h.add(csi_node("n1", {EBS: 2}), "Update")
    assert h.feasible(incoming("b"))[0] == ["n1"]
    h.add(csi_node("n1", {EBS: 2}), "Delete")
    assert h.feasible(incoming("a", "b"))[0] == ["n1"]


def test_hints() -> None:
    h = one_node([], [], {EBS: 1})
    plugin = h.profile.plugins[NVL]
    assert isinstance(plugin, NodeVolumeLimits)
    waiting = incoming("a")
    assert plugin.after_claim_add(waiting, None, claim("a")) == QueueingHint.QUEUE
    assert plugin.after_claim_add(waiting, None, claim("b")) == QueueingHint.QUEUE_SKIP
    eph = pod_with("e", ephemeral_volume("s"))
    assert plugin.after_claim_add(eph, None, claim("e-s")) == QueueingHint.QUEUE
    assert plugin.after_pod_delete(waiting, pod_with("p", claim_volume("v", "z"), node_name="n1"), None) == (
        QueueingHint.QUEUE
    )
    assert (
        plugin.after_pod_delete(waiting, pod_with("p", claim_volume("v", "z")), None)
        == QueueingHint.QUEUE_SKIP
    )
    assert plugin.after_pod_delete(waiting, make_pod("p", node_name="n1"), None) == QueueingHint.QUEUE_SKIP
    nominated = pod_with("p", claim_volume("v", "z")).with_changes(nominated_node_name="n1")
    assert plugin.after_pod_delete(waiting, nominated, None) == QueueingHint.QUEUE


CSI_NODE_UPDATES = [
    ("count-raised", {EBS: 1}, {EBS: 2}, QueueingHint.QUEUE),
    ("count-unchanged", {EBS: 1}, {EBS: 1}, QueueingHint.QUEUE_SKIP),
    ("count-lowered", {EBS: 2}, {EBS: 1}, QueueingHint.QUEUE_SKIP),
    ("limit-removed", {EBS: 1}, {EBS: None}, QueueingHint.QUEUE),
    ("driver-added", {EBS: 1}, {EBS: 1, GCE: 1}, QueueingHint.QUEUE),
    ("driver-removed", {EBS: 1, GCE: 1}, {EBS: 1}, QueueingHint.QUEUE_SKIP),
]


@pytest.mark.parametrize(
    ("before", "after", "hint"), [c[1:] for c in CSI_NODE_UPDATES], ids=[c[0] for c in CSI_NODE_UPDATES]
)
def test_hint_after_csi_node_update(
    before: dict[str, int | None], after: dict[str, int | None], hint: QueueingHint
) -> None:
    h = one_node([], [], {EBS: 1})
    plugin = h.profile.plugins[NVL]
    assert isinstance(plugin, NodeVolumeLimits)
    assert plugin.after_csi_node_update(incoming("a"), csi_node("n1", before), csi_node("n1", after)) == hint


# ----------------------------------------------------------------------------- VolumeLimitScaling
def csi_driver(name: str, prevent: bool) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"preventPodSchedulingIfMissing": prevent},
    }


def test_nodes_without_the_driver_are_refused_when_the_driver_asks() -> None:
    nodes = [node_dict("with"), node_dict("without"), node_dict("no-csinode")]
    objects = [
        *objects_for("a"),
        csi_driver(EBS, True),
        csi_node("with", {EBS: None}),
        csi_node("without", {GCE: 5}),
    ]
    h = StorageHarness(nodes, plugins=[NVL], objects=objects)
    names, diagnosis = h.feasible(incoming("a"))
    assert names == ["with"]
    messages = {h.snapshot.node_name(r): (s.code, s.message) for r, s in diagnosis.statuses_by_row().items()}
    missing = (Code.UNSCHEDULABLE, f"{EBS} CSI driver is not installed on the node")
    assert messages == {"without": missing, "no-csinode": missing}


def test_missing_driver_allowed_unless_the_driver_asks() -> None:
    nodes = [node_dict("without"), node_dict("no-csinode")]
    objects = [*objects_for("a"), csi_driver(EBS, False), csi_node("without", {GCE: 5})]
    h = StorageHarness(nodes, plugins=[NVL], objects=objects)
    assert h.feasible(incoming("a"))[0] == ["without", "no-csinode"]


def test_migrated_volume_needs_no_driver_on_a_node_without_csinode() -> None:
    """Without a CSINode an in-tree volume is not migrated: it is no CSI volume there."""
    objects = [
        claim("a", volume="pv-a"),
        volume("pv-a", source={"awsElasticBlockStore": {"volumeID": "vol-1"}}),
    ]
    objects += [csi_driver(EBS, True), csi_node("without", {GCE: 5})]
    h = StorageHarness([node_dict("without"), node_dict("no-csinode")], plugins=[NVL], objects=objects)
    assert h.feasible(incoming("a"))[0] == ["no-csinode"]


# ----------------------------------------------------------------------------- VolumeAttachments
def test_attachments_take_slots_on_a_node_without_pods() -> None:
    """Volumes still attached to a node count though no pod there uses them."""
    objects = objects_for("old1", "old2", "new")
    full = one_node(
        [], [*objects, attachment("va1", "n1", "pv-old1"), attachment("va2", "n1", "pv-old2")], {EBS: 2}
    )
    names, diagnosis = full.feasible(incoming("new"))
    assert names == []
    assert (
        fit_error_message(1, diagnosis)
        == f"0/1 nodes are available: 1 {ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED}."
    )
    room = one_node([], [*objects, attachment("va1", "n1", "pv-old1")], {EBS: 2})
    assert room.feasible(incoming("new"))[0] == ["n1"]


def test_an_attached_volume_a_pod_uses_is_counted_once() -> None:
    objects = [*objects_for("a", "b"), attachment("va-a", "n1", "pv-a")]
    h = one_node([user("p", "a")], objects, {EBS: 2})
    assert h.feasible(incoming("b"))[0] == ["n1"]


def test_the_pods_volume_attached_without_a_user_counts_again() -> None:
    """As kube: the pod's volumes are matched against the node's pods only, so a volume still
    attached with no pod using it is counted for the attachment and for the pod."""
    h = one_node([], [*objects_for("a"), attachment("va-a", "n1", "pv-a")], {EBS: 1})
    assert h.feasible(incoming("a"))[0] == []
    h = one_node([user("p", "a")], [*objects_for("a"), attachment("va-a", "n1", "pv-a")], {EBS: 1})
    assert h.feasible(incoming("a"))[0] == ["n1"]


def test_attachments_that_count_as_no_volume() -> None:
    """Another node's, an inline volume's, one of an unknown PV, of a PV that is not CSI, or
    without an attacher: none takes a slot on n1."""
    objects = [
        *objects_for("new"),
        ebs_pv("pv-intree", "vol-7"),
        attachment("elsewhere", "n2", "pv-new"),
        attachment("inline", "n1"),
        attachment("unknown", "n1", "pv-gone"),
        attachment("in-tree", "n1", "pv-intree"),
        attachment("no-attacher", "n1", "pv-new", attacher=""),
    ]
    h = one_node([], objects, {EBS: 1})
    assert h.feasible(incoming("new"))[0] == ["n1"]


def test_attachments_are_counted_per_attacher() -> None:
    objects = [
        *objects_for("g", driver=GCE),
        *objects_for("new"),
        attachment("va-g", "n1", "pv-g", attacher=GCE),
    ]
    h = one_node([], objects, {EBS: 1, GCE: 1})
    assert h.feasible(incoming("new"))[0] == ["n1"]


def test_nodes_with_attachments_are_not_skipped_by_the_bound() -> None:
    """Pods with volumes elsewhere make the index non-empty; n1's pods use none, its attachments
    fill it: the bound must still send n1 to the full count."""
    nodes = [node_dict("n1"), node_dict("n2")]
    placed = [with_volumes("p", claim_volume("v", "c"), node_name="n2")]
    objects = [*objects_for("c", "old", "new"), attachment("va", "n1", "pv-old")]
    objects += [csi_node("n1", {EBS: 1}), csi_node("n2", {EBS: 2})]
    h = StorageHarness(nodes, placed, plugins=[NVL], objects=objects)
    assert h.feasible(incoming("new"))[0] == ["n2"]


def test_attachments_follow_their_events() -> None:
    h = one_node([], [*objects_for("old", "new"), attachment("va", "n1", "pv-old")], {EBS: 1})
    assert h.feasible(incoming("new"))[0] == []
    # detached from n1 and attached to n2
    h.add(attachment("va", "n2", "pv-old"), "Update")
    assert h.feasible(incoming("new"))[0] == ["n1"]
    h.add(attachment("va", "n1", "pv-old"), "Update")
    assert h.feasible(incoming("new"))[0] == []
    h.add(attachment("va", "n1", "pv-old"), "Delete")
    assert h.feasible(incoming("new"))[0] == ["n1"]


def test_attachment_delete_is_registered() -> None:
    h = one_node([], [], {EBS: 1})
    plugin = h.profile.plugins[NVL]
    assert isinstance(plugin, NodeVolumeLimits)
    events = {(e.resource, e.action) for e in plugin.events_to_register()}
    assert ("VolumeAttachment", "Delete") in events
    hinted = {(e.event.resource, e.event.action) for e in plugin.queueing_hints() if e.hint is not None}
    assert ("VolumeAttachment", "Delete") in hinted


ATTACHMENT_DELETES = [
    # (the waiting pod's volumes, the deleted attachment's attacher, hint)
    ("claim", [claim_volume("v", "a")], EBS, QueueingHint.QUEUE),
    (
        "inline-disk-of-the-attacher",
        [{"name": "d", "awsElasticBlockStore": {"volumeID": "vol-3"}}],
        EBS,
        QueueingHint.QUEUE,
    ),
    (
        "inline-disk-of-another-driver",
        [{"name": "d", "gcePersistentDisk": {"pdName": "disk-3"}}],
        EBS,
        QueueingHint.QUEUE_SKIP,
    ),
    (
        "inline-disk-and-claim",
        [{"name": "d", "gcePersistentDisk": {"pdName": "disk-3"}}, claim_volume("v", "a")],
        EBS,
        QueueingHint.QUEUE,
    ),
    ("ephemeral-only", [ephemeral_volume("s")], EBS, QueueingHint.QUEUE_SKIP),
    ("no-volumes", [], EBS, QueueingHint.QUEUE_SKIP),
]


@pytest.mark.parametrize(
    ("volumes", "attacher", "hint"),
    [c[1:] for c in ATTACHMENT_DELETES],
    ids=[c[0] for c in ATTACHMENT_DELETES],
)
def test_hint_after_attachment_delete(
    volumes: list[dict[str, Any]], attacher: str, hint: QueueingHint
) -> None:
    h = one_node([], [], {EBS: 1})
    plugin = h.profile.plugins[NVL]
    assert isinstance(plugin, NodeVolumeLimits)
    deleted = attachment("va", "n1", "pv-x", attacher=attacher)
    assert plugin.after_attachment_delete(pod_with("w", *volumes), deleted, None) == hint
