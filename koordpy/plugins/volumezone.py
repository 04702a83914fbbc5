"""VolumeZone: a pod whose claims are bound to PersistentVolumes labelled with a zone or region
(topology.kubernetes.io/zone|region, or the deprecated failure-domain.beta.kubernetes.io ones) fits
only nodes in one of those zones and regions. A node with none of those labels fits (a cluster
without zones); an unbound claim of a WaitForFirstConsumer class is VolumeBinding's to place.

The verdict reads node labels only, so Filter answers for all rows from the snapshot's label
columns.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.api.storage import (
    BETA_REGION_LABEL,
    BETA_ZONE_LABEL,
    REGION_LABEL,
    WAIT_FOR_FIRST_CONSUMER,
    ZONE_LABEL,
    PersistentVolumeClaim,
)
from koordpy.cache.snapshot import Snapshot
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    NODE_ADD,
    NODE_UPDATE,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    QueueingHints,
)
from koordpy.framework.status import SKIP, Status, unresolvable
from koordpy.plugins._volumes import claim_added_hint, labels_of, lookup_claim, volume_shape
from koordpy.plugins.storagecatalog import (
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    StorageCatalog,
)

NAME = names.VOLUME_ZONE

ERR_REASON_CONFLICT = "node(s) had no available volume zone"

_STATE_KEY = "PreFilter" + NAME
# kube's topologyLabels, in its order
TOPOLOGY_LABELS = (BETA_ZONE_LABEL, BETA_REGION_LABEL, ZONE_LABEL, REGION_LABEL)
_GA_LABEL = {BETA_ZONE_LABEL: ZONE_LABEL, BETA_REGION_LABEL: REGION_LABEL}
# a PV's label may list several zones, joined by this (volume helpers' LabelMultiZoneDelimiter)
MULTI_ZONE_DELIMITER = "__"
_CONFLICT = unresolvable(ERR_REASON_CONFLICT)

PVC_CHANGE = (ClusterEvent(PERSISTENT_VOLUME_CLAIM, "Add"), ClusterEvent(PERSISTENT_VOLUME_CLAIM, "Update"))
PV_CHANGE = (ClusterEvent(PERSISTENT_VOLUME, "Add"), ClusterEvent(PERSISTENT_VOLUME, "Update"))
CLASS_ADD = ClusterEvent(STORAGE_CLASS, "Add")

# (label key, the values a node's label may have)
Topology = tuple[str, frozenset[str]]


def label_zones(value: str) -> frozenset[str] | None:
    """The zones a PV label lists (volume helpers' LabelZonesToSet); None when one is empty, and
    kube then ignores the label."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    if any(not z for z in zones):
        return None
    return frozenset(zones)


def pv_topologies(labels: Mapping[str, Any]) -> tuple[Topology, ...]:
    """kube's getPVTopologies: the topology labels of a PV that parse."""
    out: list[Topology] = []
    for key in TOPOLOGY_LABELS:
        value = labels.get(key)
        if isinstance(value, str):
            zones = label_zones(value)
            if zones is not None:
                out.append((key, zones))
    return tuple(out)


class VolumeZone(Plugin, PreFilterPlugin, FilterPlugin, QueueingHints):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self.catalog = StorageCatalog.shared(handle)

    # ------------------------------------------------------------------------- events
    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (CLASS_ADD, NODE_ADD, NODE_UPDATE, *PVC_CHANGE, *PV_CHANGE)

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            # a new WaitForFirstConsumer class lets an unbound claim wait for this pod's node
            # (volumeBindingMode is immutable: updates change nothing)
            ClusterEventWithHint(CLASS_ADD, self.after_class_add),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_update),
            *(ClusterEventWithHint(e, self.after_claim_change) for e in PVC_CHANGE),
            *(ClusterEventWithHint(e, self.after_volume_change) for e in PV_CHANGE),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        return volume_shape(pod)

    def after_class_add(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        mode = new.get("volumeBindingMode") if isinstance(new, Mapping) else None
        return QueueingHint.QUEUE if mode == WAIT_FOR_FIRST_CONSUMER else QueueingHint.QUEUE_SKIP

    def after_node_update(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Only a node's topology labels decide here (kube registers label updates)."""
        if not isinstance(old, Node) or not isinstance(new, Node):
            return QueueingHint.QUEUE
        for key in TOPOLOGY_LABELS:
            if old.labels.get(key) != new.labels.get(key):
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_claim_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        return claim_added_hint(pod, new, ephemeral=False)

    def after_volume_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A new PV, or a PV whose topology labels changed."""
        if old is None:
            return QueueingHint.QUEUE
        if pv_topologies(labels_of(old)) != pv_topologies(labels_of(new)):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    # ------------------------------------------------------------------------- PreFilter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.volumes:
            return None, SKIP
        topologies, status = self._topologies(pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, SKIP
        state.write(_STATE_KEY, topologies)
        return None, None

    def _topologies(self, pod: Pod) -> tuple[tuple[Topology, ...], Status | None]:
        """kube's getPVbyPod: the topologies of the PVs the pod's named claims are bound to."""
        catalog = self.catalog
        out: list[Topology] = []
        for v in pod.volumes:
            if not v.claim_name or v.ephemeral:
                continue
            claim, status = lookup_claim(catalog, pod.namespace, v.claim_name)
            if status is not None:
                return (), status
            assert claim is not None
            if not claim.volume_name:
                sc_status, wait = self._unbound(claim)
                if sc_status is not None:
                    return (), sc_status
                if wait:
                    continue  # VolumeBinding places it
                return (), unresolvable("PersistentVolume had no name")
            bad = catalog.malformed(PERSISTENT_VOLUME, claim.volume_name)
            if bad is not None:
                return (), unresolvable(bad)
            pv = catalog.volume(claim.volume_name)
            if pv is None:
                return (), unresolvable(f'persistentvolume "{claim.volume_name}" not found')
            out.extend(pv_topologies(pv.labels))
        return tuple(out), None

    def _unbound(self, claim: PersistentVolumeClaim) -> tuple[Status | None, bool]:
        """For an unbound claim: (why it cannot be used, whether its class waits for the first
        consumer). A claim naming no class gets the default one, as the API server's admission
        would have given it."""
        catalog = self.catalog
        class_name = claim.storage_class
        if class_name:
            bad = catalog.malformed(STORAGE_CLASS, class_name)
            if bad is not None:
                return unresolvable(bad), False
        sc = catalog.claim_class(claim)
        if sc is None:
            if class_name:
                return unresolvable(f'storageclass.storage.k8s.io "{class_name}" not found'), False
            return unresolvable("PersistentVolumeClaim had no pv name and storageClass name"), False
        return None, sc.binding_mode == WAIT_FOR_FIRST_CONSUMER

    # ------------------------------------------------------------------------- Filter
    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        topologies = state.read(_STATE_KEY)
        if not topologies:
            return None
        snap = self.handle.snapshot
        zoned = np.zeros(rows.size, dtype=bool)
        for key in TOPOLOGY_LABELS:
            zoned |= _present(snap, key, rows)
        if not zoned.any():
            return None  # no node here has zones: nothing to hold against them
        fits = np.ones(rows.size, dtype=bool)
        for key, values in topologies:
            # the PV's key on the node, else (for a beta key) the GA one
            present, matches = _matches(snap, key, rows, values)
            ga = _GA_LABEL.get(key)
            if ga is not None:
                ga_present, ga_matches = _matches(snap, ga, rows, values)
                matches = np.where(present, matches, ga_matches)
                present = present | ga_present
            fits &= present & matches
        return FilterResult.uniform(~zoned | fits, _CONFLICT)


def _present(snap: Snapshot, key: str, rows: np.ndarray) -> np.ndarray:
    column = snap.labels.get(key)
    if column is None:
        return np.zeros(rows.size, dtype=bool)
    out: np.ndarray = column.codes[rows] >= 0
    return out


def _matches(
    snap: Snapshot, key: str, rows: np.ndarray, values: frozenset[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(whether each row has the label, whether its value is one of `values`)."""
    column = snap.labels.get(key)
    if column is None:
        none = np.zeros(rows.size, dtype=bool)
        return none, none
    codes = column.codes[rows]
    present = codes >= 0
    if not column.values:
        return present, np.zeros(rows.size, dtype=bool)
    # memoized per distinct value set: pods bound to volumes of one zone share it
    per_code, _ = column.value_mask((NAME, values), lambda v: v is not None and v in values)
    matches: np.ndarray = per_code[np.maximum(codes, 0)] & present
    return present, matches
