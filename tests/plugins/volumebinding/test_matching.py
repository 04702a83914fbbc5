"""Which volume a claim is matched to on one node (kube's FindMatchingVolume on the scheduler's
path), and what assuming a binding writes (GetBindVolumeToClaim)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.storage import PersistentVolume, PersistentVolumeClaim
from koordpy.plugins.volumebinding.matching import bind_volume_to_claim, find_matching_volume
from tests.plugins.volumebinding.storage import HOSTNAME, claim, volume

ZONE = "topology.kubernetes.io/zone"


def _pvc(**kw: Any) -> PersistentVolumeClaim:
    kw.setdefault("class_name", "fast")
    return PersistentVolumeClaim.from_dict(claim("data", **kw))


def _pvs(*objs: dict[str, Any]) -> list[PersistentVolume]:
    return [PersistentVolume.from_dict(o) for o in objs]


NODE = {HOSTNAME: "n1", ZONE: "z1"}

CASES = [
    # (claim, volumes, excluded, expected volume name or None)
    pytest.param(
        _pvc(request="5Gi"),
        [volume("small", "fast", "1Gi"), volume("big", "fast", "10Gi")],
        (),
        "big",
        id="too-small-skipped",
    ),
    pytest.param(
        _pvc(request="1Gi"),
        [volume("big", "fast", "10Gi"), volume("mid", "fast", "5Gi"), volume("mid2", "fast", "5Gi")],
        (),
        "mid",
        id="smallest-fit-first-of-equals",
    ),
    pytest.param(_pvc(request="1Gi"), [volume("v", "slow", "1Gi")], (), None, id="other-class"),
    pytest.param(_pvc(class_name=""), [volume("v", "", "1Gi")], (), "v", id="no-class-matches-no-class"),
    pytest.param(
        _pvc(),
        [volume("v", "fast", affinity={HOSTNAME: ["n2"]}), volume("w", "fast", "2Gi")],
        (),
        "w",
        id="affinity-elsewhere",
    ),
    pytest.param(_pvc(), [volume("v", "fast", affinity={ZONE: ["z1"]})], (), "v", id="affinity-here"),
    pytest.param(
        _pvc(),
        [volume("v", "fast", fields={"metadata.name": ["n1"]})],
        (),
        None,
        id="node-name-fields-never-match",
    ),
    pytest.param(_pvc(), [volume("v", "fast", phase="Released")], (), None, id="not-available"),
    pytest.param(_pvc(), [volume("v", "fast", deleting=True)], (), None, id="being-deleted"),
    pytest.param(
        _pvc(), [volume("v", "fast", claim_ref=("default", "other"))], (), None, id="bound-to-another-claim"
    ),
    pytest.param(
        _pvc(), [volume("v", "fast"), volume("w", "fast")], ("v",), "w", id="excluded-by-another-claim"
    ),
    pytest.param(_pvc(modes=("ReadWriteMany",)), [volume("v", "fast")], (), None, id="access-mode-missing"),
    pytest.param(
        _pvc(modes=("ReadWriteOnce",)),
        [volume("v", "fast", modes=("ReadWriteOnce", "ReadOnlyMany"))],
        (),
        "v",
        id="access-modes-superset",
    ),
    pytest.param(_pvc(volume_mode="Block"), [volume("v", "fast")], (), None, id="volume-mode-mismatch"),
    pytest.param(
        _pvc(volume_mode="Block"), [volume("v", "fast", volume_mode="Block")], (), "v", id="block-to-block"
    ),
    pytest.param(
        _pvc(selector={"tier": "gold"}),
        [volume("v", "fast"), volume("w", "fast", labels={"tier": "gold"})],
        (),
        "w",
        id="selector",
    ),
    pytest.param(
        _pvc(),
        [volume("free", "fast", "1Gi"), volume("mine", "fast", "10Gi", claim_ref=("default", "data"))],
        (),
        "mine",
        id="prebound-wins-over-smaller",
    ),
    pytest.param(
        _pvc(),
        [
            volume("free", "fast"),
            volume("mine", "fast", affinity={HOSTNAME: ["n2"]}, claim_ref=("default", "data")),
        ],
        (),
        None,
        id="prebound-elsewhere-means-no-match",
    ),
    pytest.param(
        _pvc(),
        [volume("mine", "fast", claim_ref=("default", "data", "another-uid")), volume("free", "fast")],
        (),
        "free",
        id="prebound-to-an-older-claim-of-the-name",
    ),
    pytest.param(
        _pvc(),
        [volume("mine", "fast", phase="Bound", claim_ref=("default", "data"))],
        (),
        "mine",
        id="prebound-any-phase",
    ),
]


@pytest.mark.parametrize(("pvc", "objs", "excluded", "expected"), CASES)
def test_find_matching_volume(
    pvc: PersistentVolumeClaim, objs: list[dict[str, Any]], excluded: tuple[str, ...], expected: str | None
) -> None:
    found = find_matching_volume(pvc, _pvs(*objs), NODE, excluded)
    assert (found.name if found is not None else None) == expected


def test_binding_a_free_volume_sets_its_claim_ref_and_bound_by_controller() -> None:
    pvc = _pvc()
    (pv,) = _pvs(volume("v", "fast"))
    bound, dirty = bind_volume_to_claim(pv, pvc)
    assert dirty
    assert bound.claim_ref is not None and (bound.claim_ref.key, bound.claim_ref.uid) == (
        "default/data",
        pvc.uid,
    )
    assert bound.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"


def test_binding_a_volume_prebound_by_the_user_fills_in_the_uid_only() -> None:
    pvc = _pvc()
    (pv,) = _pvs(volume("v", "fast", claim_ref=("default", "data")))
    bound, dirty = bind_volume_to_claim(pv, pvc)
    assert dirty and bound.claim_ref is not None and bound.claim_ref.uid == pvc.uid
    assert "pv.kubernetes.io/bound-by-controller" not in bound.annotations


def test_binding_a_volume_already_bound_to_the_claim_changes_nothing() -> None:
    pvc = _pvc()
    (pv,) = _pvs(volume("v", "fast", claim_ref=("default", "data", pvc.uid)))
    assert bind_volume_to_claim(pv, pvc) == (pv, False)
