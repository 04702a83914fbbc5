"""A pod's volumes as scheduling reads them: claims, generic ephemeral claims named after the pod,
and in-tree disks; a malformed entry makes the pod's spec_error with the entry's path."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import InlineVolume, Pod, PodVolume
from tests.builders import pod_dict


def pod(name: str, *volumes: Any) -> Pod:
    return Pod.from_dict(pod_dict(name, spec={"volumes": list(volumes)}))


def test_pod_without_volumes_has_none() -> None:
    assert Pod.from_dict(pod_dict("p")).volumes == ()
    # volumes scheduling never looks at are not kept
    assert pod("p", {"name": "c", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}}).volumes == ()


def test_claims_and_ephemeral_claims() -> None:
    p = pod(
        "web-0",
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0", "readOnly": True}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
    )
    assert p.volumes == (
        PodVolume("data", "data-web-0", False, True, None),
        PodVolume("scratch", "web-0-scratch", True, False, None),
    )
    assert p.claim_names == ("data-web-0", "web-0-scratch")


def test_ephemeral_claims_are_named_after_each_pod_of_a_template() -> None:
    spec = {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]}
    # one spec object shared by two pods: the parse is cached, the claim names are not
    a = Pod.from_dict(pod_dict("a", spec=spec))
    b = Pod.from_dict({**pod_dict("b"), "spec": a.raw["spec"]})
    assert a.claim_names == ("a-scratch",) and b.claim_names == ("b-scratch",)


INLINE = [
    (
        {"gcePersistentDisk": {"pdName": "pd1", "readOnly": True}},
        InlineVolume("gcePersistentDisk", "pd1", True),
    ),
    ({"awsElasticBlockStore": {"volumeID": "vol-1"}}, InlineVolume("awsElasticBlockStore", "vol-1", False)),
    (
        {"rbd": {"monitors": ["m1", "m2"], "image": "img"}},
        InlineVolume("rbd", "rbd/img", False, ("m1", "m2")),
    ),
    (
        {"rbd": {"monitors": ["m1"], "image": "img", "pool": "p"}},
        InlineVolume("rbd", "p/img", False, ("m1",)),
    ),
    ({"iscsi": {"targetPortal": "t", "iqn": "iqn.x", "lun": 1}}, InlineVolume("iscsi", "iqn.x", False)),
    ({"azureDisk": {"diskName": "d", "diskURI": "/u"}}, InlineVolume("azureDisk", "/u", False)),
    ({"cinder": {"volumeID": "c"}}, InlineVolume("cinder", "c", False)),
    ({"portworxVolume": {"volumeID": "px"}}, InlineVolume("portworxVolume", "px", False)),
]


@pytest.mark.parametrize(("source", "expected"), INLINE)
def test_inline_disks(source: dict[str, Any], expected: InlineVolume) -> None:
    (volume,) = pod("p", {"name": "v", **source}).volumes
    assert volume.inline is not None and volume.claim_name == ""
    got = volume.inline
    assert (got.kind, got.id, got.read_only, got.monitors) == (
        expected.kind,
        expected.id,
        expected.read_only,
        expected.monitors,
    )


def test_migrated_inline_disks_know_their_csi_volume() -> None:
    (volume,) = pod("p", {"name": "v", "awsElasticBlockStore": {"volumeID": "aws://zone-a/vol-7"}}).volumes
    assert volume.inline is not None
    assert (volume.inline.csi_driver, volume.inline.csi_handle) == ("ebs.csi.aws.com", "vol-7")
    (volume,) = pod("p", {"name": "v", "rbd": {"monitors": ["m"], "image": "i"}}).volumes
    assert volume.inline is not None and volume.inline.csi_driver == ""


MALFORMED = [
    ("not-a-list", {"a": 1}, "spec.volumes"),
    ("entry-not-an-object", [3], "spec.volumes[0]"),
    ("no-name", [{"persistentVolumeClaim": {"claimName": "c"}}], "spec.volumes[0].name"),
    (
        "duplicate-name",
        [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}],
        "spec.volumes[1].name",
    ),
    (
        "claim-name-missing",
        [{"name": "a", "persistentVolumeClaim": {}}],
        "spec.volumes[0].persistentVolumeClaim.claimName",
    ),
    (
        "claim-name-not-a-string",
        [{"name": "a", "persistentVolumeClaim": {"claimName": 3}}],
        "spec.volumes[0].persistentVolumeClaim.claimName",
    ),
    (
        "read-only-not-a-bool",
        [{"name": "a", "persistentVolumeClaim": {"claimName": "c", "readOnly": "yes"}}],
        "spec.volumes[0].persistentVolumeClaim.readOnly",
    ),
    (
        "ephemeral-template-not-an-object",
        [{"name": "a", "ephemeral": {"volumeClaimTemplate": []}}],
        "spec.volumes[0].ephemeral.volumeClaimTemplate",
    ),
    (
        "gce-without-disk",
        [{"name": "a", "gcePersistentDisk": {}}],
        "spec.volumes[0].gcePersistentDisk.pdName",
    ),
    ("rbd-without-monitors", [{"name": "a", "rbd": {"image": "i"}}], "spec.volumes[0].rbd.monitors"),
    (
        "rbd-monitor-not-a-string",
        [{"name": "a", "rbd": {"image": "i", "monitors": [1]}}],
        "spec.volumes[0].rbd.monitors[0]",
    ),
    (
        "iscsi-bad-lun",
        [{"name": "a", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 300}}],
        "spec.volumes[0].iscsi.lun",
    ),
]


@pytest.mark.parametrize(("volumes", "path"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_volumes_make_the_spec_error(volumes: Any, path: str) -> None:
    p = Pod.from_dict(pod_dict("p", spec={"volumes": volumes}))
    assert p.spec_error is not None and p.spec_error.path == path
    assert p.volumes == ()
