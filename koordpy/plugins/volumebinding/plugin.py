"""VolumeBinding: a pod's PersistentVolumeClaims decide where it can go, and are bound on the way
(kube-scheduler's volumebinding plugin).

PreFilter reads the pod's claims (a missing, lost, deleting or foreign ephemeral claim, or an
unbound claim of an Immediate class, keeps the pod waiting: UnschedulableAndUnresolvable); a pod
without claims skips the plugin. Filter answers for every row at once (decisions.py); its
rejections are UnschedulableAndUnresolvable, so preemption never evicts for them. Score prefers
nodes by how full their storage would be (scorer.py). Reserve assumes the chosen volumes' claimRef
and the provisioned claims' selected node in the StorageCatalog, where the next pod (a gang's next
member) sees them; Unreserve restores them. PreBind leaves the bindings to the world
(`state.binding_volumes`), which writes them and waits for the claims to be bound before binding
the pod, as kube's BindPodVolumes does.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.errors import SpecError
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.api.storage import MIGRATED_PLUGINS_ANNOTATION, SELECTED_NODE_ANNOTATION, CSIStorageCapacity
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.effects import ClaimKey, VolumeBindings, VolumeToClaim
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    NODE_ADD,
    NODE_UPDATE,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    QueueingHints,
    ReservePlugin,
    Rows,
    ScorePlugin,
    Scores,
)
from koordpy.framework.status import SKIP, Status, error, unresolvable
from koordpy.plugins._volumes import claim_added_hint, namespace_and_name
from koordpy.plugins.storagecatalog import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    StorageCatalog,
)
from koordpy.plugins.volumebinding.args import VolumeBindingArgs
from koordpy.plugins.volumebinding.decisions import (
    ERR_REASON_UNBOUND_IMMEDIATE,
    Decisions,
    PodClaims,
    bound_volumes_problem,
    decide,
    pod_claims,
    reason_statuses,
)
from koordpy.plugins.volumebinding.matching import bind_volume_to_claim, is_fully_bound
from koordpy.plugins.volumebinding.scorer import score_rows, shape_table
from koordpy.plugins.volumebinding.topology import RowMasks

NAME = names.VOLUME_BINDING

_STATE_KEY = "PreFilter" + NAME

PVC_ADD_OR_UPDATE = (
    ClusterEvent(PERSISTENT_VOLUME_CLAIM, "Add"),
    ClusterEvent(PERSISTENT_VOLUME_CLAIM, "Update"),
)
PV_ADD_OR_UPDATE = (ClusterEvent(PERSISTENT_VOLUME, "Add"), ClusterEvent(PERSISTENT_VOLUME, "Update"))
CLASS_ADD_OR_UPDATE = (ClusterEvent(STORAGE_CLASS, "Add"), ClusterEvent(STORAGE_CLASS, "Update"))
CSI_NODE_ADD_OR_UPDATE = (ClusterEvent(CSI_NODE, "Add"), ClusterEvent(CSI_NODE, "Update"))
CSI_DRIVER_UPDATE = ClusterEvent(CSI_DRIVER, "Update")
CAPACITY_ADD_OR_UPDATE = (
    ClusterEvent(CSI_STORAGE_CAPACITY, "Add"),
    ClusterEvent(CSI_STORAGE_CAPACITY, "Update"),
)


@dataclass(slots=True)
class _State:
    """The pod's claims (PreFilter), the per-row decisions (first Filter, kept while the catalog and
    the nodes stay the same), and what Reserve assumed."""

    claims: PodClaims
    decisions: Decisions | None = None
    # (catalog generation, node generation) the decisions were made at
    made_at: tuple[int, int] = (-1, -1)
    # Reserve's result: what PreBind hands to the world (nothing when every claim is bound)
    static: tuple[VolumeToClaim, ...] = ()
    provision: tuple[ClaimKey, ...] = ()
    assumed_volumes: list[str] = field(default_factory=list)
    assumed_claims: list[str] = field(default_factory=list)

    def clone(self) -> _State:
        # the decisions are never changed once made: a clone shares them
        return _State(
            self.claims,
            self.decisions,
            self.made_at,
            self.static,
            self.provision,
            list(self.assumed_volumes),
            list(self.assumed_claims),
        )


def _inline_csi_drivers(pod: Pod) -> frozenset[str]:
    """The drivers of the pod's inline CSI volumes (spec.volumes[].csi), which the CSIDriver hint
    looks at; the pod views keep no such volume, so this reads the spec."""
    spec = pod.raw.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    if not isinstance(volumes, list):
        return frozenset()
    out = set()
    for volume in volumes:
        csi = volume.get("csi") if isinstance(volume, Mapping) else None
        driver = csi.get("driver") if isinstance(csi, Mapping) else None
        if isinstance(driver, str):
            out.add(driver)
    return frozenset(out)


def _volume_limit(obj: Mapping[str, Any]) -> int | None:
    capacity = CSIStorageCapacity.from_dict(obj)
    return capacity.maximum_volume_size if capacity.maximum_volume_size is not None else capacity.capacity


class VolumeBinding(
    Plugin,
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    QueueingHints,
):
    NAME = NAME
    Args = VolumeBindingArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        config = args if isinstance(args, VolumeBindingArgs) else VolumeBindingArgs()
        self._timeout = float(config.bind_timeout_seconds)
        self._table = shape_table(config.points())
        self._catalog = StorageCatalog.shared(handle)
        self._masks = RowMasks()
        self._statuses = reason_statuses()

    # ----------------------------------------------------------------------------- events
    def events_to_register(self) -> Sequence[ClusterEvent]:
        return tuple(h.event for h in self.queueing_hints())

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            # a missing or mis-configured class (allowedTopologies) may have been fixed
            *(ClusterEventWithHint(e, self.after_class_change) for e in CLASS_ADD_OR_UPDATE),
            # the claims are bound to volumes: any change of either may help
            *(ClusterEventWithHint(e, self.after_claim_change) for e in PVC_ADD_OR_UPDATE),
            *(ClusterEventWithHint(e) for e in PV_ADD_OR_UPDATE),
            # node labels decide volume node affinity and allowed topologies
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_change),
            # in-tree volumes are looked at through the node's migrated CSI plugins
            *(ClusterEventWithHint(e, self.after_csi_node_change) for e in CSI_NODE_ADD_OR_UPDATE),
            ClusterEventWithHint(CSI_DRIVER_UPDATE, self.after_csi_driver_change),
            *(ClusterEventWithHint(e, self.after_capacity_change) for e in CAPACITY_ADD_OR_UPDATE),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        return pod.namespace, pod.claim_names, _inline_csi_drivers(pod)

    def after_claim_change(
        self, pod: Pod, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> QueueingHint:
        """A claim of the pod's (same namespace, one of its claim names, ephemeral ones too) was
        added or changed."""
        return claim_added_hint(pod, new, ephemeral=True)

    def after_class_change(
        self, pod: Pod, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> QueueingHint:
        """A new class, or new allowedTopologies (a class's binding mode cannot change)."""
        if old is None or new is None:
            return QueueingHint.QUEUE
        if old.get("allowedTopologies") != new.get("allowedTopologies"):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_node_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Only a label change of a node can change this plugin's answer (kube: UpdateNodeLabel)."""
        if isinstance(old, Node) and isinstance(new, Node) and old.labels == new.labels:
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE

    def after_csi_node_change(
        self, pod: Pod, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> QueueingHint:
        if old is None or new is None:
            return QueueingHint.QUEUE
        before = (old.get("metadata") or {}).get("annotations") or {}
        after = (new.get("metadata") or {}).get("annotations") or {}
        if before.get(MIGRATED_PLUGINS_ANNOTATION) != after.get(MIGRATED_PLUGINS_ANNOTATION):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_csi_driver_change(
        self, pod: Pod, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> QueueingHint:
        """A driver of the pod's inline CSI volumes stopped tracking storage capacity."""
        if old is None or new is None:
            return QueueingHint.QUEUE
        _, name = namespace_and_name(new)
        if name not in _inline_csi_drivers(pod):
            return QueueingHint.QUEUE_SKIP
        before = (old.get("spec") or {}).get("storageCapacity") is True
        after = (new.get("spec") or {}).get("storageCapacity") is True
        return QueueingHint.QUEUE if before and not after else QueueingHint.QUEUE_SKIP

    def after_capacity_change(
        self, pod: Pod, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> QueueingHint:
        """A new capacity, or a volume limit that grew (topology and class cannot change)."""
        if old is None or new is None:
            return QueueingHint.QUEUE
        try:
            before, after = _volume_limit(old), _volume_limit(new)
        except SpecError:
            return QueueingHint.QUEUE
        if after is not None and (before is None or after > before):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    # ----------------------------------------------------------------------------- PreFilter, Filter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.volumes or not pod.claim_names:
            return None, SKIP
        catalog = self._catalog
        claims, problem = pod_claims(pod, catalog)
        if claims is None:
            return None, problem
        if claims.immediate:
            # the PV controller binds these; the pod is tried again when a claim changes
            return None, unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)
        broken = bound_volumes_problem(claims, catalog)
        if broken is not None:
            return None, unresolvable(broken)
        st = _State(claims)
        state.write(_STATE_KEY, st)
        if not claims.delayed and not self._decisions(st).codes.any():
            # every claim bound, to volumes every node can reach: Filter would pass every node, and
            # skipped it leaves preemption's dry runs to the arrays (Reserve and PreBind still run)
            return None, SKIP
        return None, None

    def _decisions(self, st: _State) -> Decisions:
        snapshot = self.handle.snapshot
        made_at = (self._catalog.generation, snapshot.node_generation)
        if st.decisions is None or st.made_at != made_at:
            st.decisions = decide(snapshot, self._masks, self._catalog, st.claims)
            st.made_at = made_at
        return st.decisions

    def filter(self, state: CycleState, pod: Pod, rows: Rows) -> FilterResult | None:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return None
        codes = self._decisions(st).codes[rows]
        passed = codes == 0
        if passed.all():
            return None
        return FilterResult(passed, self._statuses, codes)

    # ----------------------------------------------------------------------------- score
    def pre_score(self, state: CycleState, pod: Pod, rows: Rows) -> Status | None:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return SKIP
        decisions = self._decisions(st)
        # no volume to bind and no capacity to weigh anywhere: every node would score 0
        if not decisions.has_static[rows].any() and not any(p.capacities for p in decisions.provisions):
            return SKIP
        return None

    def score(self, state: CycleState, pod: Pod, rows: Rows) -> Scores:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return np.zeros(rows.size, dtype=np.int64)
        return score_rows(self._decisions(st), rows, self._table)

    # ----------------------------------------------------------------------------- Reserve, PreBind
    def _all_bound(self, pod: Pod) -> bool:
        """kube's arePodVolumesBound, on the assumed views."""
        for name in pod.claim_names:
            claim = self._catalog.claim(pod.namespace, name)
            if claim is None or not is_fully_bound(claim):
                return False
        return True

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return None
        if self._all_bound(pod):
            st.static = ()
            return None
        row = self.handle.snapshot.row_of.get(node_name)
        if row is None:
            return error(f"node {node_name!r} is not in the snapshot")
        static, provision = self._decisions(st).on_row(row)
        catalog = self._catalog
        bindings = []
        for claim, pv in static:
            bound, dirty = bind_volume_to_claim(pv, claim)
            if dirty:
                catalog.assume_volume(bound)
                st.assumed_volumes.append(pv.name)
            bindings.append(VolumeToClaim(pv.name, ClaimKey(claim.namespace, claim.name), claim.uid))
        keys = []
        for claim in provision:
            # what the world writes to ask for provisioning on the node (kube's AnnSelectedNode)
            catalog.assume_claim(
                replace(claim, annotations={**claim.annotations, SELECTED_NODE_ANNOTATION: node_name})
            )
            st.assumed_claims.append(claim.key)
            keys.append(ClaimKey(claim.namespace, claim.name))
        st.static = tuple(bindings)
        st.provision = tuple(keys)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return
        for name in st.assumed_volumes:
            self._catalog.restore_volume(name)
        for key in st.assumed_claims:
            self._catalog.restore_claim(key)
        st.assumed_volumes.clear()
        st.assumed_claims.clear()
        st.static = ()
        st.provision = ()

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        st: _State | None = state.read(_STATE_KEY)
        if st is None or (not st.static and not st.provision):
            # no claims, or every one bound already
            return None
        wait_for = tuple(b.claim for b in st.static) + st.provision
        state.binding_volumes = VolumeBindings(st.static, st.provision, wait_for, node_name, self._timeout)
        return None
