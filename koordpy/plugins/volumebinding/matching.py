"""Which PersistentVolume a claim would be bound to, as kube's FindMatchingVolume answers it on the
scheduler's path (component-helpers storage/volume pv_helpers.go). Pure: storage views in, a
choice out.

FindMatchingVolume walks the volumes of the claim's class once per node. Everything it checks
except the volume's node affinity is the same on every node, so `candidates` sorts that out once
per claim; what is left per node is "the first candidate whose node affinity the node matches and
no other claim of the pod took", which decisions.py answers for every row at once and
`find_matching_volume` answers for one node (the reference the tables test).
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from koordpy.api.storage import (
    BIND_COMPLETED_ANNOTATION,
    FILESYSTEM,
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
)
from koordpy.plugins.volumebinding.migration import translated_affinity

BOUND_BY_CONTROLLER_ANNOTATION = "pv.kubernetes.io/bound-by-controller"
VOLUME_AVAILABLE = "Available"
CLAIM_LOST = "Lost"


def claim_class_name(claim: PersistentVolumeClaim) -> str:
    """kube's GetPersistentVolumeClaimClass: the class the claim names ("" when none). An unset
    class is not the default class here: the admission plugin (or the PV controller) writes the
    default into the claim, and until then the scheduler treats the claim as asking for none."""
    return claim.storage_class or ""


def is_fully_bound(claim: PersistentVolumeClaim) -> bool:
    """A claim the PV controller finished binding: a volume named and bind-completed set."""
    return bool(claim.volume_name) and BIND_COMPLETED_ANNOTATION in claim.annotations


def is_bound_to_claim(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """kube's IsVolumeBoundToClaim: the claimRef names the claim (its uid too, when it has one)."""
    ref = pv.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.uid


def volume_mode_mismatch(claim: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    return (claim.volume_mode or FILESYSTEM) != (pv.volume_mode or FILESYSTEM)


def access_modes_fit(claim: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """kube's CheckAccessModes: the volume offers every mode the claim asks for."""
    return claim.access_modes <= pv.access_modes


def _attributes_class(raw: Mapping[str, Any]) -> str:
    # VolumeAttributesClass (GA): not part of the views, read where the API puts it
    spec = raw.get("spec")
    name = spec.get("volumeAttributesClassName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) else ""


@dataclass(frozen=True, slots=True)
class Candidates:
    """What FindMatchingVolume can choose for one claim on any node.

    `prebound`: the first volume (in listing order) whose claimRef names the claim and that is big
    enough, of the claim's volume mode and not being deleted; when there is one it decides alone:
    on a node its affinity matches it is the match, on any other node there is none.
    `volumes`: the volumes the claim could take otherwise (no claimRef, Available, matching the
    claim's selector, class, access modes and attributes class), smallest first, ties in listing
    order (FindMatchingVolume keeps the first of equal size)."""

    prebound: PersistentVolume | None
    volumes: tuple[PersistentVolume, ...]


def candidates(claim: PersistentVolumeClaim, volumes: Sequence[PersistentVolume]) -> Candidates:
    requested_class = claim_class_name(claim)
    attributes_class = _attributes_class(claim.raw)
    selector = claim.selector
    prebound: PersistentVolume | None = None
    free: list[PersistentVolume] = []
    for pv in volumes:
        if pv.claim_ref is not None and not is_bound_to_claim(pv, claim):
            continue
        if pv.capacity < claim.request or volume_mode_mismatch(claim, pv) or pv.deleting:
            continue
        if pv.claim_ref is not None:
            # pre-bound to this claim (by a user, or by an earlier assumption)
            if prebound is None:
                prebound = pv
            continue
        if pv.phase != VOLUME_AVAILABLE:
            # volumes that will become available are left alone: binding them now would likely
            # fail on an API conflict
            continue
        if selector is not None and not selector.matches(pv.labels):
            continue
        if pv.storage_class != requested_class or not access_modes_fit(claim, pv):
            continue
        if _attributes_class(pv.raw) != attributes_class:
            continue
        free.append(pv)
    # stable: among volumes of equal size the first listed stays first
    free.sort(key=lambda pv: pv.capacity)
    return Candidates(prebound, tuple(free))


def affinity_matches(pv: PersistentVolume, labels: Mapping[str, str], migrated: Collection[str] = ()) -> bool:
    """kube's CheckNodeAffinity: the node seen through its labels only (no name); an in-tree volume
    whose plugin the node migrated (`migrated`: its CSINode's migrated plugins) translated first."""
    affinity = translated_affinity(pv) if pv.in_tree_plugin in migrated else pv.node_affinity
    return affinity is None or affinity.matches(labels, "")


def find_matching_volume(
    claim: PersistentVolumeClaim,
    volumes: Sequence[PersistentVolume],
    node_labels: Mapping[str, str],
    excluded: Container[str] = (),
    migrated: Collection[str] = (),
) -> PersistentVolume | None:
    """The volume FindMatchingVolume picks for the claim on a node with these labels (and these
    migrated in-tree plugins), leaving out the volumes named in `excluded` (those other claims of
    the pod already took there)."""
    found = candidates(claim, [pv for pv in volumes if pv.name not in excluded])
    if found.prebound is not None:
        return found.prebound if affinity_matches(found.prebound, node_labels, migrated) else None
    for pv in found.volumes:
        if affinity_matches(pv, node_labels, migrated):
            return pv
    return None


def sorted_by_request(claims: Sequence[PersistentVolumeClaim]) -> list[PersistentVolumeClaim]:
    """The order findMatchingVolumes matches claims in: smallest request first, so that the
    smallest claims get the smallest volumes."""
    return sorted(claims, key=lambda claim: claim.request)


def bind_volume_to_claim(pv: PersistentVolume, claim: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """kube's GetBindVolumeToClaim: the volume with its claimRef set to the claim (and
    bound-by-controller when it was not pre-bound to it), and whether anything changed."""
    out = pv
    dirty = False
    ref = pv.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace or ref.uid != claim.uid:
        out = replace(out, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid))
        dirty = True
    if not is_bound_to_claim(pv, claim) and BOUND_BY_CONTROLLER_ANNOTATION not in pv.annotations:
        out = replace(out, annotations={**pv.annotations, BOUND_BY_CONTROLLER_ANNOTATION: "yes"})
        dirty = True
    return out, dirty
