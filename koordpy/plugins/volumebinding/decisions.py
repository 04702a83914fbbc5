"""What VolumeBinding decides for a pod: its claims sorted as kube's GetPodVolumeClaims sorts them
(PreFilter), then, for every row of the snapshot at once, what kube's FindPodVolumes answers for
one node (Filter): the reasons the node cannot take the pod, which volume each unbound claim would
be bound to there, and which claims would be provisioned there (with the CSIStorageCapacity that
vouched for the space, which the score reads).

Per node, FindPodVolumes:
1. checks the bound claims' volumes in order: the first whose node affinity the node fails makes
   "had volume node affinity conflict"; the first that does not exist (before any conflict) makes
   "pvc(s) bound to non-existent pv(s)";
2. fails the node at once ("didn't find available persistent volumes to bind") when a delayed
   claim was already given to another node (selected-node annotation);
3. matches the other delayed claims, smallest request first, each to the smallest fitting volume
   (matching.py) that no earlier claim took on that node;
4. checks the claims left to provision, selected-node claims first: the first whose class cannot
   provision or whose allowedTopologies the node fails makes "didn't find available persistent
   volumes to bind", the first no CSIStorageCapacity vouches for makes "did not have enough free
   storage" (only for drivers with storageCapacity).
Steps 1 and 2-4 each contribute their reason, in kube's order. A volume of an in-tree plugin is
read, on a node whose CSINode lists the plugin as migrated, as the CSI volume it translates to
(migration.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from koordpy.api.pod import Pod
from koordpy.api.storage import (
    SELECTED_NODE_ANNOTATION,
    WAIT_FOR_FIRST_CONSUMER,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
)
from koordpy.cache import Snapshot
from koordpy.framework.status import SUCCESS, Status, unresolvable
from koordpy.plugins._volumes import claim_not_found
from koordpy.plugins.storagecatalog import (
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    StorageCatalog,
)
from koordpy.plugins.volumebinding.matching import (
    CLAIM_LOST,
    candidates,
    claim_class_name,
    is_fully_bound,
    sorted_by_request,
)
from koordpy.plugins.volumebinding.migration import translated_affinity, translates
from koordpy.plugins.volumebinding.topology import Mask, RowIndex, RowMasks

ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

# reason bits of a row, in the order kube appends the reasons
NODE_CONFLICT = 1
BIND_CONFLICT = 2
NOT_ENOUGH_SPACE = 4
PV_NOT_EXIST = 8
_REASONS = (
    (NODE_CONFLICT, ERR_REASON_NODE_CONFLICT),
    (BIND_CONFLICT, ERR_REASON_BIND_CONFLICT),
    (NOT_ENOUGH_SPACE, ERR_REASON_NOT_ENOUGH_SPACE),
    (PV_NOT_EXIST, ERR_REASON_PV_NOT_EXIST),
)


def reason_statuses() -> list[Status]:
    """The status of a row by its reason bits (index 0: never a failure)."""
    out = [SUCCESS]
    for bits in range(1, 16):
        out.append(unresolvable(*(text for bit, text in _REASONS if bits & bit)))
    return out


# ----------------------------------------------------------------------------- PreFilter
@dataclass(frozen=True, slots=True)
class PodClaims:
    """The pod's claims as GetPodVolumeClaims sorts them; a claim two volumes name counts once
    (kube would match it twice, to two volumes)."""

    bound: tuple[PersistentVolumeClaim, ...]
    # unbound, of a WaitForFirstConsumer class, naming no volume: the scheduler binds them
    delayed: tuple[PersistentVolumeClaim, ...]
    # unbound otherwise: the PV controller should have bound them already
    immediate: tuple[PersistentVolumeClaim, ...]


def _claim_problem(pod: Pod, catalog: StorageCatalog, name: str, ephemeral: bool) -> str | None:
    """kube's podHasPVCs for one volume: why the claim keeps the pod from being placed at all."""
    claim = catalog.claim(pod.namespace, name)
    if claim is None:
        broken = catalog.malformed(PERSISTENT_VOLUME_CLAIM, f"{pod.namespace}/{name}")
        if broken is not None:
            return broken
        if ephemeral:
            # normal right after the pod was created: the ephemeral volume controller is late
            return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
        return claim_not_found(name)
    if claim.phase == CLAIM_LOST:
        return f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{claim.volume_name}"'
    if claim.deleting:
        return f'persistentvolumeclaim "{name}" is being deleted'
    if ephemeral and (claim.namespace != pod.namespace or not pod.uid or claim.controller_uid != pod.uid):
        return (
            f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} "
            "(pod is not owner)"
        )
    return None


def pod_claims(pod: Pod, catalog: StorageCatalog) -> tuple[PodClaims | None, Status | None]:
    """PreFilter's reading of the pod's claims: (claims, None), or (None, why the pod waits)."""
    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate: list[PersistentVolumeClaim] = []
    seen: set[str] = set()
    for volume in pod.volumes:
        if not volume.claim_name:
            continue
        problem = _claim_problem(pod, catalog, volume.claim_name, volume.ephemeral)
        if problem is not None:
            return None, unresolvable(problem)
    for volume in pod.volumes:
        name = volume.claim_name
        if not name or name in seen:
            continue
        seen.add(name)
        claim = catalog.claim(pod.namespace, name)
        assert claim is not None  # checked above
        if is_fully_bound(claim):
            bound.append(claim)
            continue
        class_name = claim_class_name(claim)
        storage_class = catalog.storage_class(class_name) if class_name else None
        if class_name and storage_class is None:
            broken = catalog.malformed(STORAGE_CLASS, class_name)
            if broken is not None:
                return None, unresolvable(broken)
        delay = storage_class is not None and storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER
        # a claim naming its volume is pre-bound: the PV controller binds it, as an immediate one
        (delayed if delay and not claim.volume_name else immediate).append(claim)
    return PodClaims(tuple(bound), tuple(delayed), tuple(immediate)), None


def bound_volumes_problem(claims: PodClaims, catalog: StorageCatalog) -> str | None:
    """A bound claim's volume that exists but could not be read: the pod waits with its error."""
    for claim in claims.bound:
        if catalog.volume(claim.volume_name) is None:
            broken = catalog.malformed(PERSISTENT_VOLUME, claim.volume_name)
            if broken is not None:
                return broken
    return None


# ----------------------------------------------------------------------------- Filter, per row
@dataclass(frozen=True, slots=True)
class Match:
    """A delayed claim matched against volumes: `choice[row]` indexes `volumes`, -1 where no
    volume fits (the claim is provisioned there instead)."""

    claim: PersistentVolumeClaim
    volumes: tuple[PersistentVolume, ...]
    choice: npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class Provision:
    """A delayed claim that may be provisioned: always (`match` -1: it has a selected node) or
    where matches[match] found no volume. `capacity[row]` indexes `capacities`: the
    CSIStorageCapacity that vouched for the space there (-1: none was needed, or none did)."""

    claim: PersistentVolumeClaim
    match: int
    capacities: tuple[CSIStorageCapacity, ...]
    capacity: npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class Decisions:
    """FindPodVolumes for rows [0, size): `codes[row]` the reason bits (0: the node can take the
    pod), and what would be bound or provisioned on a row that can."""

    codes: npt.NDArray[np.int8]
    matches: tuple[Match, ...]
    provisions: tuple[Provision, ...]
    # rows where at least one claim would be bound to an existing volume
    has_static: Mask

    def on_row(
        self, row: int
    ) -> tuple[list[tuple[PersistentVolumeClaim, PersistentVolume]], list[PersistentVolumeClaim]]:
        """(claim, volume) pairs to bind and the claims to provision on the row's node."""
        static = []
        for m in self.matches:
            index = int(m.choice[row])
            if index >= 0:
                static.append((m.claim, m.volumes[index]))
        provision = [
            p.claim for p in self.provisions if p.match < 0 or int(self.matches[p.match].choice[row]) < 0
        ]
        return static, provision


class _Affinity:
    """Rows a volume's node affinity allows, as kube reads it on each node: translated to CSI on
    the nodes whose CSINode lists the volume's in-tree plugin as migrated (migration.py)."""

    __slots__ = ("_catalog", "_masks", "_migrated", "_snapshot")

    def __init__(self, snapshot: Snapshot, masks: RowMasks, catalog: StorageCatalog) -> None:
        self._snapshot = snapshot
        self._masks = masks
        self._catalog = catalog
        self._migrated: dict[str, Mask] = {}

    def _migrated_rows(self, plugin: str) -> Mask:
        rows = self._migrated.get(plugin)
        if rows is None:
            # only volumes of in-tree plugins ask, and the pass over the nodes is made once per
            # node and CSINode generation, not for each pod
            version = self._catalog.csi_nodes_generation
            scan = partial(self._scan_migrated, plugin)
            rows = self._masks.cached(self._snapshot, ("migrated", plugin), version, scan)
            self._migrated[plugin] = rows
        return rows

    def _scan_migrated(self, plugin: str) -> Mask:
        rows = np.zeros(self._masks.size, dtype=bool)
        for row in self._snapshot.live_rows().tolist():
            csi_node = self._catalog.csi_node(self._snapshot.node_name(row))
            if row < rows.size and csi_node is not None and plugin in csi_node.migrated_plugins:
                rows[row] = True
        return rows

    def mask(self, pv: PersistentVolume) -> Mask:
        plain = self._masks.node_selector(self._snapshot, pv.node_affinity)
        if not translates(pv):
            return plain
        migrated = self._migrated_rows(pv.in_tree_plugin)
        if not migrated.any():
            return plain
        out: Mask = np.where(
            migrated, self._masks.node_selector(self._snapshot, translated_affinity(pv)), plain
        )
        return out

    def rows(self, pv: PersistentVolume) -> RowIndex:
        if translates(pv) and self._migrated_rows(pv.in_tree_plugin).any():
            return np.flatnonzero(self.mask(pv)).astype(np.int64)
        return self._masks.node_selector_rows(self._snapshot, pv.node_affinity)


def _bound_codes(
    affinity: _Affinity, size: int, catalog: StorageCatalog, claims: PodClaims, codes: npt.NDArray[np.int8]
) -> None:
    # rows every earlier bound claim's volume allows: only there does the next claim decide
    undecided = np.ones(size, dtype=bool)
    for claim in claims.bound:
        pv = catalog.volume(claim.volume_name)
        if pv is None:
            codes[undecided] |= PV_NOT_EXIST
            return
        allowed = affinity.mask(pv)
        codes[undecided & ~allowed] |= NODE_CONFLICT
        undecided &= allowed


def _match(
    affinity: _Affinity,
    size: int,
    volumes: tuple[PersistentVolume, ...],
    prebound: bool,
    active: Mask,
    taken: list[npt.NDArray[np.int32]],
    ids: dict[str, int],
) -> npt.NDArray[np.int32]:
    """Per row, the index of the first volume whose node affinity the row matches and that no
    earlier claim took there (`taken`: per earlier claim, the id of its volume per row)."""
    choice = np.full(size, -1, dtype=np.int32)
    left = int(np.count_nonzero(active))
    for index, pv in enumerate(volumes):
        if left == 0:
            break
        rows = affinity.rows(pv)
        rows = rows[active[rows] & (choice[rows] < 0)]
        pv_id = ids.setdefault(pv.name, len(ids))
        for other in taken:
            rows = rows[other[rows] != pv_id]
        choice[rows] = index
        left -= rows.size
        if prebound:
            # the volume pre-bound to the claim decides alone
            break
    return choice


def _capacity_rows(
    snapshot: Snapshot,
    masks: RowMasks,
    claim: PersistentVolumeClaim,
    capacities: tuple[CSIStorageCapacity, ...],
) -> npt.NDArray[np.int32]:
    """kube's hasEnoughCapacity per row: the first capacity of the class whose limit (the maximum
    volume size when given, else the capacity) holds the request and whose nodeTopology the row's
    labels match."""
    found = np.full(masks.size, -1, dtype=np.int32)
    for index, capacity in enumerate(capacities):
        limit = (
            capacity.maximum_volume_size if capacity.maximum_volume_size is not None else capacity.capacity
        )
        if limit is None or limit < claim.request or capacity.node_topology is None:
            continue
        reach = masks.label_selector(snapshot, capacity.node_topology)
        found[reach & (found < 0)] = index
    return found


def decide(snapshot: Snapshot, masks: RowMasks, catalog: StorageCatalog, claims: PodClaims) -> Decisions:
    masks.sync(snapshot)
    size = masks.size
    codes = np.zeros(size, dtype=np.int8)
    affinity = _Affinity(snapshot, masks, catalog)
    _bound_codes(affinity, size, catalog, claims, codes)

    # a claim already given to a node fails every other node at once
    active = np.ones(size, dtype=bool)
    selected = [c for c in claims.delayed if SELECTED_NODE_ANNOTATION in c.annotations]
    for claim in selected:
        here = np.zeros(size, dtype=bool)
        row = snapshot.row_of.get(claim.selected_node)
        if row is not None and row < size:
            here[row] = True
        active &= here
    codes[~active] |= BIND_CONFLICT

    matches: list[Match] = []
    taken: list[npt.NDArray[np.int32]] = []
    ids: dict[str, int] = {}
    to_match = sorted_by_request([c for c in claims.delayed if SELECTED_NODE_ANNOTATION not in c.annotations])
    for claim in to_match:
        found = candidates(claim, catalog.volumes_of_class(claim_class_name(claim)))
        volumes = (found.prebound,) if found.prebound is not None else found.volumes
        choice = _match(affinity, size, volumes, found.prebound is not None, active, taken, ids)
        matches.append(Match(claim, volumes, choice))
        ids_of = np.array([ids.get(pv.name, -1) for pv in volumes] + [-1], dtype=np.int32)
        # choice -1 picks the trailing -1: no volume taken on that row
        taken.append(ids_of[choice])

    provisions: list[Provision] = []
    # rows where every claim so far could be provisioned
    fine = active.copy()
    order = [(claim, -1) for claim in selected] + [(m.claim, i) for i, m in enumerate(matches)]
    for claim, match in order:
        needs = fine.copy() if match < 0 else fine & (matches[match].choice < 0)
        capacities: tuple[CSIStorageCapacity, ...] = ()
        capacity = np.full(size, -1, dtype=np.int32)
        if needs.any():
            storage_class = catalog.storage_class(claim_class_name(claim))
            if storage_class is None or storage_class.provisioner in ("", NOT_SUPPORTED_PROVISIONER):
                cannot = needs
            else:
                cannot = needs & ~masks.node_selector(snapshot, storage_class.allowed_topologies)
                driver = catalog.csi_driver(storage_class.provisioner)
                if driver is not None and driver.storage_capacity:
                    capacities = tuple(catalog.capacities(storage_class.name))
                    capacity = _capacity_rows(snapshot, masks, claim, capacities)
                    short = needs & ~cannot & (capacity < 0)
                    codes[short] |= NOT_ENOUGH_SPACE
                    fine &= ~short
            codes[cannot] |= BIND_CONFLICT
            fine &= ~cannot
        provisions.append(Provision(claim, match, capacities, capacity))

    has_static = np.zeros(size, dtype=bool)
    for m in matches:
        has_static |= m.choice >= 0
    return Decisions(codes, tuple(matches), tuple(provisions), has_static)
