"""VolumeZone: the zone and region labels of the PVs a pod's claims are bound to, against node
labels (beta labels on the PV matched by GA labels on the node too)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.interfaces import QueueingHint
from koordpy.framework.status import Code
from koordpy.plugins.volumezone import ERR_REASON_CONFLICT, VolumeZone, label_zones
from tests.builders import make_pod, node_dict
from tests.plugins.storage_objects import StorageHarness, claim, claim_volume, pod_with, storage_class, volume

VZ = "VolumeZone"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"


def harness(pv_labels: dict[str, str], node_labels: dict[str, str]) -> StorageHarness:
    objects = (claim("data", volume="pv1"), volume("pv1", labels=pv_labels))
    return StorageHarness([node_dict("n1", labels=node_labels)], plugins=[VZ], objects=objects)


LABEL_CASES = [
    # (PV labels, node labels, fits)
    ("node-without-zones-fits", {BETA_ZONE: "us-west1-a"}, {}, True),
    ("node-with-unrelated-labels-fits", {BETA_ZONE: "us-west1-a"}, {"disk": "ssd"}, True),
    ("beta-zone-matches", {BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, True),
    ("beta-zone-differs", {BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-b"}, False),
    ("beta-region-matches", {BETA_REGION: "us-west1"}, {BETA_REGION: "us-west1"}, True),
    ("beta-region-differs", {BETA_REGION: "us-west1"}, {BETA_REGION: "us-east1"}, False),
    ("ga-zone-matches", {ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
    ("ga-zone-differs", {ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, False),
    ("beta-on-volume-ga-on-node", {BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
    ("beta-on-volume-other-ga-zone-on-node", {BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, False),
    # a GA key on the volume is not looked for under the beta key on the node
    ("ga-on-volume-beta-on-node", {ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, False),
    (
        "zone-and-region-match",
        {ZONE: "us-west1-a", REGION: "us-west1"},
        {ZONE: "us-west1-a", REGION: "us-west1"},
        True,
    ),
    (
        "zone-matches-region-differs",
        {ZONE: "us-west1-a", REGION: "us-west1"},
        {ZONE: "us-west1-a", REGION: "x"},
        False,
    ),
    # the node has zones but not the volume's key: it cannot show it is in the volume's zone
    ("node-has-region-only", {ZONE: "us-west1-a"}, {REGION: "us-west1"}, False),
    ("multi-zone-volume-second-zone", {ZONE: "us-west1-b__us-west1-c"}, {ZONE: "us-west1-c"}, True),
    ("multi-zone-volume-other-zone", {ZONE: "us-west1-b__us-west1-c"}, {ZONE: "us-west1-a"}, False),
    ("multi-zone-spaces-trimmed", {ZONE: "us-west1-b__ us-west1-c"}, {ZONE: "us-west1-c"}, True),
    # a label listing an empty zone is ignored, as kube ignores labels it cannot parse
    ("unparsable-label-ignored", {ZONE: "us-west1-b____"}, {ZONE: "us-west1-a"}, True),
    ("volume-without-zones", {}, {ZONE: "us-west1-a"}, True),
]


@pytest.mark.parametrize(
    ("pv_labels", "node_labels", "fits"), [c[1:] for c in LABEL_CASES], ids=[c[0] for c in LABEL_CASES]
)
def test_zone_labels(pv_labels: dict[str, str], node_labels: dict[str, str], fits: bool) -> None:
    h = harness(pv_labels, node_labels)
    names, diagnosis = h.feasible(pod_with("x", claim_volume("d", "data")))
    assert names == (["n1"] if fits else [])
    if not fits:
        (status,) = diagnosis.statuses_by_row().values()
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.message == ERR_REASON_CONFLICT


def test_every_node_judged_at_once() -> None:
    nodes = [
        node_dict("a1", labels={ZONE: "a"}),
        node_dict("b1", labels={ZONE: "b"}),
        node_dict("plain"),
        node_dict("a2", labels={ZONE: "a", REGION: "r"}),
        node_dict("beta-a", labels={BETA_ZONE: "a"}),
    ]
    objects = (claim("data", volume="pv1"), volume("pv1", labels={BETA_ZONE: "a"}))
    h = StorageHarness(nodes, plugins=[VZ], objects=objects)
    names, diagnosis = h.feasible(pod_with("x", claim_volume("d", "data")))
    assert names == ["a1", "plain", "a2", "beta-a"]
    assert fit_error_message(5, diagnosis) == f"0/5 nodes are available: 1 {ERR_REASON_CONFLICT}."


def test_every_volume_must_fit() -> None:
    objects = (
        claim("a", volume="pv-a"),
        claim("b", volume="pv-b"),
        volume("pv-a", labels={ZONE: "z1"}),
        volume("pv-b", labels={ZONE: "z2"}),
    )
    h = StorageHarness([node_dict("n1", labels={ZONE: "z1"})], plugins=[VZ], objects=objects)
    assert h.feasible(pod_with("x", claim_volume("a", "a"), claim_volume("b", "b")))[0] == []
    assert h.feasible(pod_with("y", claim_volume("a", "a")))[0] == ["n1"]


# ----------------------------------------------------------------------------- claims and bindings
def _prefilter_message(
    objects: tuple[dict[str, Any], ...], *volumes: dict[str, Any]
) -> tuple[Code | None, str]:
    h = StorageHarness([node_dict("n1", labels={ZONE: "z1"})], plugins=[VZ], objects=objects)
    state, _, status = h.pre_filter(pod_with("x", *volumes))
    if status is None:
        return (Code.SKIP if VZ in state.skip_filter else None), ""
    return status.code, status.message


BINDING_CASES = [
    ("claim-missing", (), 'persistentvolumeclaim "data" not found'),
    ("volume-missing", (claim("data", volume="pv1"),), 'persistentvolume "pv1" not found'),
    ("unbound-without-class", (claim("data"),), "PersistentVolumeClaim had no pv name and storageClass name"),
    (
        "unbound-class-missing",
        (claim("data", storage_class="fast"),),
        'storageclass.storage.k8s.io "fast" not found',
    ),
    (
        "unbound-immediate-class",
        (claim("data", storage_class="fast"), storage_class("fast")),
        "PersistentVolume had no name",
    ),
]


@pytest.mark.parametrize(
    ("objects", "message"), [c[1:] for c in BINDING_CASES], ids=[c[0] for c in BINDING_CASES]
)
def test_claims_that_cannot_be_used(objects: tuple[dict[str, Any], ...], message: str) -> None:
    code, got = _prefilter_message(objects, claim_volume("d", "data"))
    assert (code, got) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


def test_unbound_wait_for_first_consumer_claim_is_left_to_binding() -> None:
    objects = (claim("data", storage_class="late"), storage_class("late", wait=True))
    assert _prefilter_message(objects, claim_volume("d", "data")) == (Code.SKIP, "")


def test_unbound_claim_without_class_gets_the_default() -> None:
    default = storage_class("standard", wait=True)
    default["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    assert _prefilter_message((claim("data"), default), claim_volume("d", "data")) == (Code.SKIP, "")


def test_ephemeral_volumes_are_not_looked_at() -> None:
    eph = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}
    assert _prefilter_message((), eph) == (Code.SKIP, "")


def test_pod_without_volumes_skips() -> None:
    h = harness({ZONE: "a"}, {ZONE: "b"})
    state, _, status = h.pre_filter(make_pod("x"))
    assert status is None and VZ in state.skip_filter


def test_malformed_volume_or_claim_waits_with_its_error() -> None:
    bad_pv = volume("pv1")
    bad_pv["spec"]["capacity"]["storage"] = []
    code, message = _prefilter_message((claim("data", volume="pv1"), bad_pv), claim_volume("d", "data"))
    assert code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert message.startswith("PersistentVolume pv1: spec.capacity.storage:")
    bad_claim = claim("data")
    bad_claim["spec"]["accessModes"] = ["Sometimes"]
    code, message = _prefilter_message((bad_claim,), claim_volume("d", "data"))
    assert code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert message.startswith("PersistentVolumeClaim default/data: spec.accessModes[0]:")


def test_label_zones() -> None:
    assert label_zones("a") == frozenset({"a"})
    assert label_zones("a__b") == frozenset({"a", "b"})
    assert label_zones("a__") is None


# ----------------------------------------------------------------------------- queueing hints
def _plugin() -> VolumeZone:
    h = harness({}, {})
    p = h.profile.plugins[VZ]
    assert isinstance(p, VolumeZone)
    return p


def test_hints() -> None:
    plugin = _plugin()
    waiting = pod_with("x", claim_volume("d", "data"))
    assert plugin.after_class_add(waiting, None, storage_class("late", wait=True)) == QueueingHint.QUEUE
    assert plugin.after_class_add(waiting, None, storage_class("now")) == QueueingHint.QUEUE_SKIP
    assert plugin.after_claim_change(waiting, None, claim("data")) == QueueingHint.QUEUE
    assert plugin.after_claim_change(waiting, None, claim("other")) == QueueingHint.QUEUE_SKIP
    assert plugin.after_volume_change(waiting, None, volume("pv")) == QueueingHint.QUEUE
    old, moved, relabelled = (
        volume("pv", labels={ZONE: "a"}),
        volume("pv", labels={ZONE: "b"}),
        volume("pv", labels={ZONE: "a", "tier": "x"}),
    )
    assert plugin.after_volume_change(waiting, old, moved) == QueueingHint.QUEUE
    assert plugin.after_volume_change(waiting, old, relabelled) == QueueingHint.QUEUE_SKIP
    before = Node.from_dict(node_dict("n", labels={ZONE: "a"}))
    zone_moved = Node.from_dict(node_dict("n", labels={ZONE: "b"}))
    other_label = Node.from_dict(node_dict("n", labels={ZONE: "a", "x": "y"}))
    assert plugin.after_node_update(waiting, before, zone_moved) == QueueingHint.QUEUE
    assert plugin.after_node_update(waiting, before, other_label) == QueueingHint.QUEUE_SKIP
