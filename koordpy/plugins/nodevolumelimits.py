"""NodeVolumeLimits (kube-scheduler's CSILimits): a node takes a pod only while, for every CSI
driver, the unique volumes its pods use plus the pod's new ones stay within the count the node's
CSINode reports as allocatable for that driver.

A volume is the CSI driver and volume handle it resolves to: a claim's bound PV (a CSI PV, or an
in-tree one migrated to CSI, translated as csi-translation-lib does), an unbound claim's class
provisioner (the volume to come, unique per claim), or an inline in-tree disk migrated to CSI.
Migration counts only on nodes with a CSINode; in-tree volumes that are not migrated are not counted
(kube-scheduler 1.37 has no in-tree limits any more). A node without a CSINode, or whose CSINode
reports no limits, takes any number of volumes.

A node's VolumeAttachments count too (kube 1.37): an attachment of a CSI PV is the PV's volume under
the attacher's name, merged with its pods' volumes so that a volume both attached and used is
counted once; it holds a slot until it is deleted, after its pods are gone.

Volumes pods on a node use come from the snapshot's volume index, so nominated pods and preemption
dry runs (snapshot trials) are counted. Only nodes where the index's bound on their pods' volumes
(claims plus inline disks), plus their attachments, and the pod's own could pass a limit are
counted volume by volume; on the others the pod's own volumes alone decide. Where no node limits
the pod's drivers, Filter is skipped.
"""

from __future__ import annotations

import secrets
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.podvolumes import MIGRATED_DRIVER
from koordpy.api.storage import PersistentVolumeClaim
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    POD_DELETE,
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
from koordpy.framework.status import SKIP, Status, error, unresolvable, unschedulable
from koordpy.plugins._volumes import claim_added_hint, claim_not_found, volume_shape
from koordpy.plugins.storagecatalog import (
    CSI_NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VOLUME_ATTACHMENT,
    StorageCatalog,
)

NAME = names.NODE_VOLUME_LIMITS

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

_STATE_KEY = "PreFilter" + NAME
_EXCEEDED = unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
# the in-tree plugins whose migration to CSI kube-scheduler 1.37 takes as on wherever the node has
# a CSINode (isCSIMigrationOn)
MIGRATED_PLUGINS = frozenset(MIGRATED_DRIVER)
# the in-tree provisioners csi-translation-lib can translate (IsMigratableIntreePluginByName); those
# whose migration is not on above count as no CSI driver at all
MIGRATABLE_PROVISIONERS = MIGRATED_PLUGINS | {"kubernetes.io/azure-file", "kubernetes.io/vsphere-volume"}
CSI_NODE_ADD = ClusterEvent(CSI_NODE, "Add")
CSI_NODE_UPDATE = ClusterEvent(CSI_NODE, "Update")
PVC_ADD = ClusterEvent(PERSISTENT_VOLUME_CLAIM, "Add")
VOLUME_ATTACHMENT_DELETE = ClusterEvent(VOLUME_ATTACHMENT, "Delete")

# (CSI driver, volume handle)
Volume = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _State:
    """The pod's new volumes on a node with a CSINode: unique name -> driver, and which of them
    are migrated in-tree volumes (not volumes at all on a node without one); or the status every
    node gets (a claim that does not exist)."""

    volumes: Mapping[str, str]
    migrated: frozenset[str]
    status: Status | None


@dataclass(slots=True)
class _NodeTables:
    """Per row, what the CSINodes say: whether the node has one, each driver's allocatable count
    (-1: no limit) and whether the driver is listed at all."""

    has_csi_node: np.ndarray
    limits: dict[str, np.ndarray]
    installed: dict[str, np.ndarray]


def missing_driver(driver: str) -> str:
    """VolumeLimitScaling's reason for a node without a driver the pod's volumes need."""
    return f"{driver} CSI driver is not installed on the node"


def migrated_driver(plugin: str) -> str:
    return MIGRATED_DRIVER.get(plugin, "") if plugin in MIGRATED_PLUGINS else ""


class NodeVolumeLimits(Plugin, PreFilterPlugin, FilterPlugin, QueueingHints):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self.catalog = StorageCatalog.shared(handle)
        # an unbound claim's volume is named after the claim under this prefix (kube: random),
        # so that it cannot be taken for a real volume handle
        self._unbound_prefix = secrets.token_hex(16)
        # claim key -> its volume on a node with a CSINode, for one catalog generation
        self._resolved: dict[str, Volume | None] = {}
        self._resolved_generation = -1
        # what the CSINodes say per row, for one CSINode and node generation
        self._tables = _NodeTables(np.zeros(0, dtype=bool), {}, {})
        self._tables_key: tuple[int, int, int] = (-1, -1, -1)
        # per row, how many VolumeAttachments name the node, for one attachment and node generation
        self._attached = np.zeros(0, dtype=np.int64)
        self._attached_key: tuple[int, int, int] = (-1, -1, -1)

    # ------------------------------------------------------------------------- events
    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (CSI_NODE_ADD, CSI_NODE_UPDATE, POD_DELETE, PVC_ADD, VOLUME_ATTACHMENT_DELETE)

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            # any new CSINode may report room (no hint, as kube)
            ClusterEventWithHint(CSI_NODE_ADD),
            ClusterEventWithHint(CSI_NODE_UPDATE, self.after_csi_node_update),
            ClusterEventWithHint(POD_DELETE, self.after_pod_delete),
            ClusterEventWithHint(PVC_ADD, self.after_claim_add),
            ClusterEventWithHint(VOLUME_ATTACHMENT_DELETE, self.after_attachment_delete),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        return volume_shape(pod)

    def after_csi_node_update(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube's isSchedulableAfterCSINodeUpdated: a driver's allocatable count went up (or its
        limit went away), or a driver was added (MutableCSINodeAllocatableCount, and the
        VolumeLimitScaling presence check)."""
        if old is None:
            return QueueingHint.QUEUE
        before, after = _limits_of(old), _limits_of(new)
        for driver, count in after.items():
            if driver not in before:
                return QueueingHint.QUEUE
            was = before[driver]
            if was is not None and (count is None or count > was):
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_pod_delete(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube's isSchedulableAfterPodDeleted: a placed pod that used a claim or a migratable
        inline disk."""
        if not isinstance(old, Pod) or not old.volumes or not (old.node_name or old.nominated_node_name):
            return QueueingHint.QUEUE_SKIP
        for v in old.volumes:
            if v.claim_name or (v.inline is not None and v.inline.in_tree_plugin):
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_claim_add(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        return claim_added_hint(pod, new, ephemeral=True)

    def after_attachment_delete(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube's isSchedulableAfterVolumeAttachmentDeleted: the pod names a claim (a generic
        ephemeral volume does not count, as in kube), or has an inline disk migrated to the
        deleted attachment's attacher."""
        spec = old.get("spec") if isinstance(old, Mapping) else None
        attacher = spec.get("attacher") if isinstance(spec, Mapping) else None
        for v in pod.volumes:
            if v.claim_name and not v.ephemeral:
                return QueueingHint.QUEUE
            plugin = v.inline.in_tree_plugin if v.inline is not None else ""
            if plugin and attacher == migrated_driver(plugin):
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    # ------------------------------------------------------------------------- PreFilter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.volumes or not any(
            v.claim_name or (v.inline is not None and v.inline.in_tree_plugin) for v in pod.volumes
        ):
            return None, SKIP
        catalog = self.catalog
        self._fresh()
        volumes: dict[str, str] = {}
        migrated: set[str] = set()
        for v in pod.volumes:
            inline = v.inline
            if inline is not None:
                driver = migrated_driver(inline.in_tree_plugin)
                if driver and inline.csi_handle:
                    unique = f"{driver}/{inline.csi_handle}"
                    volumes[unique] = driver
                    migrated.add(unique)
                continue
            key = f"{pod.namespace}/{v.claim_name}"
            bad = catalog.malformed(PERSISTENT_VOLUME_CLAIM, key)
            if bad is not None:
                return None, unresolvable(bad)
            claim = catalog.claim(pod.namespace, v.claim_name)
            if claim is None:
                # kube finds this at Filter, for every node alike
                missing = f"looking up PVC {key}: {claim_not_found(v.claim_name)}"
                state.write(_STATE_KEY, _State({}, frozenset(), unresolvable(missing)))
                return None, None
            if v.ephemeral and claim.controller_uid != pod.uid:
                # kube's ephemeral.VolumeIsForPod: an error that ends the attempt (kube finds it at
                # Filter, where an error also ends it), not a verdict on nodes
                return None, error(f"PVC {key} was not created for pod {pod.key} (pod is not owner)")
            status = self._malformed_source(claim)
            if status is not None:
                return None, status
            resolved = self._volume(claim)
            if resolved is not None:
                unique = f"{resolved[0]}/{resolved[1]}"
                volumes[unique] = resolved[0]
                if self._is_migrated(claim):
                    migrated.add(unique)
        state.write(_STATE_KEY, _State(volumes, frozenset(migrated), None))
        if not self._can_fail(volumes):
            # Filter would pass every node: skipped, it leaves preemption's dry runs to the arrays
            return None, SKIP
        return None, None

    def _can_fail(self, volumes: Mapping[str, str]) -> bool:
        """Whether Filter can fail a node for these volumes: some node limits one of their
        drivers, or a driver's CSIDriver keeps pods off nodes without it."""
        limits = self._node_tables().limits
        for driver in set(volumes.values()):
            if driver in limits:
                return True
            csi_driver = self.catalog.csi_driver(driver)
            if csi_driver is not None and csi_driver.prevent_scheduling_if_missing:
                return True
        return False

    def _malformed_source(self, claim: PersistentVolumeClaim) -> Status | None:
        """The claim's PV or class did not parse: the pod waits with that, never counted as if the
        volume were absent."""
        catalog = self.catalog
        if claim.volume_name:
            bad = catalog.malformed(PERSISTENT_VOLUME, claim.volume_name)
            if bad is not None:
                return unresolvable(bad)
            if catalog.volume(claim.volume_name) is not None:
                return None
        if claim.storage_class:
            bad = catalog.malformed(STORAGE_CLASS, claim.storage_class)
            if bad is not None:
                return unresolvable(bad)
        return None

    def _is_migrated(self, claim: PersistentVolumeClaim) -> bool:
        """Whether the claim's volume is an in-tree one counted as its CSI driver's (only where
        the node has a CSINode)."""
        pv = self.catalog.volume(claim.volume_name) if claim.volume_name else None
        if pv is not None:
            return bool(pv.in_tree_plugin)
        sc = self.catalog.claim_class(claim)
        return sc is not None and sc.provisioner in MIGRATED_PLUGINS

    def _fresh(self) -> None:
        if self._resolved_generation != self.catalog.generation:
            self._resolved.clear()
            self._resolved_generation = self.catalog.generation

    def _volume(self, claim: PersistentVolumeClaim) -> Volume | None:
        """kube's getCSIDriverInfo on a node with a CSINode: the volume the claim counts as; None
        when it counts as none."""
        if claim.key in self._resolved:
            return self._resolved[claim.key]
        volume = self._resolve(claim)
        self._resolved[claim.key] = volume
        return volume

    def _resolve(self, claim: PersistentVolumeClaim) -> Volume | None:
        catalog = self.catalog
        pv = catalog.volume(claim.volume_name) if claim.volume_name else None
        if pv is not None:
            if pv.in_tree_plugin:
                driver = migrated_driver(pv.in_tree_plugin)
                return (driver, pv.volume_handle) if driver and pv.volume_handle else None
            return (pv.csi_driver, pv.volume_handle) if pv.csi_driver and pv.volume_handle else None
        # unbound, or bound to a PV not (yet) known: the class's provisioner will make it
        sc = catalog.claim_class(claim)
        if sc is None:
            return None  # no class: an immediate claim, bound before it gets here
        provisioner = sc.provisioner
        if provisioner in MIGRATABLE_PROVISIONERS:
            provisioner = migrated_driver(provisioner)
            if not provisioner:
                return None
        return provisioner, f"{self._unbound_prefix}-{claim.key}"

    # ------------------------------------------------------------------------- Filter
    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        s = state.read(_STATE_KEY)
        if not isinstance(s, _State):
            return None
        if s.status is not None:
            return FilterResult(np.zeros(rows.size, dtype=bool), [s.status])
        if not s.volumes:
            return None
        tables = self._node_tables()
        statuses = [_EXCEEDED]
        reason_of = np.zeros(rows.size, dtype=np.int64)
        failed = self._missing_drivers(s, tables, rows, statuses, reason_of)
        limits = tables.limits
        wanted: dict[str, int] = {}
        for driver in s.volumes.values():
            if driver in limits:
                wanted[driver] = wanted.get(driver, 0) + 1
        if wanted:
            # rows whose pods use no volume: the pod's own volumes against the limit
            exceeded = np.zeros(rows.size, dtype=bool)
            per_driver = [(limits[driver][rows], count) for driver, count in wanted.items()]
            for limit, count in per_driver:
                exceeded |= (limit >= 0) & (count > limit)
            index = self.handle.snapshot.volumes
            if index:
                # a row's pods use at most `bound` distinct volumes, so only where that many
                # besides the pod's own could pass a limit can the full count say no: counting
                # every row with volumes for each pod would grow with pods x nodes
                bound = index.volume_bounds(rows)
            else:
                bound = np.zeros(rows.size, dtype=np.int64)
            if index or self.catalog.attachments_generation:
                # each attachment is at most one more distinct volume on its node
                bound = bound + self._attachment_counts()[rows]
                maybe = np.zeros(rows.size, dtype=bool)
                for limit, count in per_driver:
                    maybe |= (limit >= 0) & (bound + count > limit)
                maybe &= (bound > 0) & ~failed
                if maybe.any():
                    self._fresh()
                    at_rows = np.flatnonzero(maybe)
                    for at, row in zip(at_rows.tolist(), rows[at_rows].tolist(), strict=True):
                        exceeded[at] = self._exceeds(row, s.volumes, limits)
            failed |= exceeded
        if not failed.any():
            return None
        return FilterResult(~failed, statuses, reason_of if len(statuses) > 1 else None)

    def _missing_drivers(
        self, s: _State, tables: _NodeTables, rows: np.ndarray, statuses: list[Status], reason_of: np.ndarray
    ) -> np.ndarray:
        """VolumeLimitScaling: rows without a driver whose CSIDriver asks pods not to go to such
        nodes (preventPodSchedulingIfMissing); on a node without a CSINode only volumes that are
        not migrated in-tree ones are the pod's there. Their statuses are appended to `statuses`
        and `reason_of` points at them."""
        failed = np.zeros(rows.size, dtype=bool)
        guarded = sorted(
            {
                d
                for d in s.volumes.values()
                if (cd := self.catalog.csi_driver(d)) and cd.prevent_scheduling_if_missing
            }
        )
        for driver in guarded:
            unmigrated = any(d == driver and u not in s.migrated for u, d in s.volumes.items())
            needed = tables.has_csi_node[rows] | unmigrated
            listed = tables.installed.get(driver)
            present = listed[rows] if listed is not None else np.zeros(rows.size, dtype=bool)
            missing = needed & ~present & ~failed
            if missing.any():
                statuses.append(unschedulable(missing_driver(driver)))
                reason_of[missing] = len(statuses) - 1
                failed |= missing
        return failed

    def _exceeds(self, row: int, new: Mapping[str, str], limits: Mapping[str, np.ndarray]) -> bool:
        """The full count on a node whose pods use volumes or that has attachments (kube's Filter,
        for one node)."""
        snap = self.handle.snapshot
        node_name = snap.node_name(row)
        if self.catalog.csi_node(node_name) is None:
            return False
        index = snap.volumes
        in_use: dict[str, str] = {}
        catalog = self.catalog
        for key in index.claims_on(row):
            namespace, _, name = key.partition("/")
            claim = catalog.claim(namespace, name)
            if claim is None:
                continue  # an existing pod's missing claim is not counted
            volume = self._volume(claim)
            if volume is not None:
                in_use[f"{volume[0]}/{volume[1]}"] = volume[0]
        for inline in index.inline_on(row):
            driver = migrated_driver(inline.in_tree_plugin)
            if driver and inline.csi_handle:
                in_use[f"{driver}/{inline.csi_handle}"] = driver
        # the attachments merged with the pods' volumes by unique name (kube's
        # getNodeVolumeAttachmentInfo): a volume both attached and used takes one slot
        attached = {**self._attachment_volumes(node_name), **in_use}
        used: dict[str, int] = {}
        for driver in attached.values():
            used[driver] = used.get(driver, 0) + 1
        adding: dict[str, int] = {}
        for unique, driver in new.items():
            # as kube, the pod's volumes are matched against its node's pods' only: one that is
            # attached with no pod using it (still detaching) is counted once more
            if unique not in in_use:
                adding[driver] = adding.get(driver, 0) + 1
        for driver, count in adding.items():
            per_row = limits.get(driver)
            if per_row is None:
                continue
            limit = int(per_row[row])
            if limit >= 0 and used.get(driver, 0) + count > limit:
                return True
        return False

    def _attachment_volumes(self, node_name: str) -> dict[str, str]:
        """The node's attachments of CSI PVs, unique name -> attacher; those without an attacher or
        a PV, or whose PV is unknown or not CSI, count as none (as kube)."""
        out: dict[str, str] = {}
        for va in self.catalog.attachments_on(node_name):
            if not va.attacher or not va.pv_name:
                continue
            pv = self.catalog.volume(va.pv_name)
            # an in-tree PV is not translated here (kube reads spec.csi alone)
            if pv is None or pv.in_tree_plugin or not pv.csi_driver or not pv.volume_handle:
                continue
            out[f"{va.attacher}/{pv.volume_handle}"] = va.attacher
        return out

    def _attachment_counts(self) -> np.ndarray:
        """Per row, the VolumeAttachments naming the node: a bound on the volumes they add."""
        snap = self.handle.snapshot
        key = (self.catalog.attachments_generation, snap.node_generation, snap.capacity)
        if key == self._attached_key:
            return self._attached
        counts = np.zeros(snap.capacity, dtype=np.int64)
        for row in snap.live_rows().tolist():
            counts[row] = self.catalog.attachment_count(snap.node_name(row))
        self._attached, self._attached_key = counts, key
        return counts

    def _node_tables(self) -> _NodeTables:
        """What the CSINodes say per row, rebuilt when a CSINode or a node changes."""
        snap = self.handle.snapshot
        key = (self.catalog.csi_nodes_generation, snap.node_generation, snap.capacity)
        if key == self._tables_key:
            return self._tables
        tables = _NodeTables(np.zeros(snap.capacity, dtype=bool), {}, {})
        for row in snap.live_rows().tolist():
            csi_node = self.catalog.csi_node(snap.node_name(row))
            if csi_node is None:
                continue
            tables.has_csi_node[row] = True
            for driver in csi_node.drivers.values():
                listed = tables.installed.get(driver.name)
                if listed is None:
                    listed = tables.installed[driver.name] = np.zeros(snap.capacity, dtype=bool)
                listed[row] = True
                if driver.allocatable_count is None:
                    continue
                per_row = tables.limits.get(driver.name)
                if per_row is None:
                    per_row = tables.limits[driver.name] = np.full(snap.capacity, -1, dtype=np.int64)
                per_row[row] = driver.allocatable_count
        self._tables, self._tables_key = tables, key
        return tables


def _limits_of(obj: Any) -> dict[str, Any]:
    """A raw CSINode's drivers and their allocatable counts (read leniently, for hints)."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    drivers = spec.get("drivers") if isinstance(spec, Mapping) else None
    out: dict[str, Any] = {}
    for d in drivers if isinstance(drivers, list) else ():
        if isinstance(d, Mapping):
            allocatable = d.get("allocatable")
            out[str(d.get("name"))] = allocatable.get("count") if isinstance(allocatable, Mapping) else None
    return out
