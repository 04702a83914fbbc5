"""VolumeRestrictions: a pod may not mount an in-tree disk that a pod on the node already mounts
where the disk forbids it (GCE PD and iSCSI unless both read-only, AWS EBS never, Ceph RBD unless
both read-only), and may not use a ReadWriteOncePod claim that any pod in the cluster already uses.

The disk conflicts are looked up in the snapshot's volume index (rows holding the same disk), so
nominated pods and preemption dry runs, which go through snapshot trials, are seen. The
ReadWriteOncePod count is kube-scheduler's PreFilter state, kept true by AddPod/RemovePod.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.podvolumes import AWS_EBS, GCE_PD, ISCSI, RBD, InlineVolume
from koordpy.api.storage import READ_WRITE_ONCE_POD
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    NODE_ADD,
    POD_DELETE,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    QueueingHints,
)
from koordpy.framework.status import SKIP, Status, unschedulable
from koordpy.plugins._volumes import claim_added_hint, lookup_claim, volume_shape
from koordpy.plugins.storagecatalog import PERSISTENT_VOLUME_CLAIM, StorageCatalog

NAME = names.VOLUME_RESTRICTIONS

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
# kube-scheduler's wording since it stopped blaming a node for a claim used anywhere in the cluster
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)

_STATE_KEY = "PreFilter" + NAME
# the inline disks kube-scheduler checks for conflicts (needsRestrictionsCheck)
_CHECKED_KINDS = frozenset((GCE_PD, AWS_EBS, RBD, ISCSI))
_DISK_CONFLICT = unschedulable(ERR_REASON_DISK_CONFLICT)
_RWOP_CONFLICT = unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
PVC_ADD = ClusterEvent(PERSISTENT_VOLUME_CLAIM, "Add")


@dataclass(slots=True)
class _State:
    """The pod's inline disks to check, its ReadWriteOncePod claims (ns/name), and how many
    references pods on nodes hold to those claims."""

    disks: tuple[InlineVolume, ...]
    rwop_claims: frozenset[str]
    conflicts: int

    def clone(self) -> _State:
        return _State(self.disks, self.rwop_claims, self.conflicts)

    def references(self, other: Pod) -> int:
        """How many of the other pod's named claims are among the ReadWriteOncePod ones."""
        if not self.rwop_claims or not other.volumes:
            return 0
        namespace = other.namespace
        return sum(
            1
            for v in other.volumes
            if v.claim_name and not v.ephemeral and f"{namespace}/{v.claim_name}" in self.rwop_claims
        )


def disk_conflict(volume: InlineVolume, held: Sequence[InlineVolume]) -> bool:
    for other in held:  # noqa: SIM110 - no generator object per call on the filter path
        if volume.conflicts(other):
            return True
    return False


class VolumeRestrictions(Plugin, PreFilterPlugin, PreFilterExtensions, FilterPlugin, QueueingHints):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self.catalog = StorageCatalog.shared(handle)

    # ------------------------------------------------------------------------- events
    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (POD_DELETE, NODE_ADD, PVC_ADD)

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            # a pod holding the disk or the claim went away (spec.volumes is immutable: updates
            # change nothing here)
            ClusterEventWithHint(POD_DELETE, self.after_pod_delete),
            ClusterEventWithHint(NODE_ADD),
            # the claim did not exist: its access modes could not be read
            ClusterEventWithHint(PVC_ADD, self.after_claim_add),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        return volume_shape(pod)

    def after_pod_delete(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterAssignedPodDeleted: the deleted pod (placed or
        nominated, of the same namespace) mounted a disk conflicting with the pod's, or named one
        of its claims (the claim's access mode is not read: that is left to the next attempt)."""
        if not isinstance(old, Pod) or old.namespace != pod.namespace or not old.volumes:
            return QueueingHint.QUEUE_SKIP
        if not old.node_name and not old.nominated_node_name:
            return QueueingHint.QUEUE_SKIP  # it held nothing (kube registers AssignedPod deletes)
        held = [v.inline for v in old.volumes if v.inline is not None]
        for v in pod.volumes:
            if v.inline is not None and v.inline.kind in _CHECKED_KINDS and disk_conflict(v.inline, held):
                return QueueingHint.QUEUE
        wanted = {v.claim_name for v in pod.volumes if v.claim_name and not v.ephemeral}
        for v in old.volumes:
            if v.claim_name and not v.ephemeral and v.claim_name in wanted:
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_claim_add(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        return claim_added_hint(pod, new, ephemeral=False)

    # ------------------------------------------------------------------------- PreFilter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.volumes:
            return None, SKIP
        disks = tuple(
            v.inline for v in pod.volumes if v.inline is not None and v.inline.kind in _CHECKED_KINDS
        )
        rwop: set[str] = set()
        for v in pod.volumes:
            # kube reads persistentVolumeClaim volumes only (not generic ephemeral ones)
            if not v.claim_name or v.ephemeral:
                continue
            claim, status = lookup_claim(self.catalog, pod.namespace, v.claim_name)
            if status is not None:
                return None, status
            assert claim is not None
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.add(claim.key)
        index = self.handle.snapshot.volumes
        conflicts = sum(index.claim_users(key) for key in rwop)
        if not disks and not conflicts:
            return None, SKIP
        state.write(_STATE_KEY, _State(disks, frozenset(rwop), conflicts))
        return None, None

    def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        s = state.read(_STATE_KEY)
        if isinstance(s, _State):
            s.conflicts += s.references(other)

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        s = state.read(_STATE_KEY)
        if isinstance(s, _State):
            s.conflicts -= s.references(other)

    # ------------------------------------------------------------------------- Filter
    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        s = state.read(_STATE_KEY)
        if not isinstance(s, _State):
            return None
        # read at Filter time: nominated pods and dry runs change the snapshot's index in trials
        conflicting: set[int] = set()
        if s.disks:
            index = self.handle.snapshot.volumes
            for disk in s.disks:
                for row, held in index.rows_with_disk(disk.kind, disk.id).items():
                    if row not in conflicting and disk_conflict(disk, held):
                        conflicting.add(row)
        if s.conflicts <= 0 and not conflicting:
            return None
        if conflicting:
            disk_failed = np.isin(rows, np.fromiter(conflicting, dtype=np.int64, count=len(conflicting)))
        else:
            disk_failed = np.zeros(rows.size, dtype=bool)
        if s.conflicts <= 0:
            return FilterResult.uniform(~disk_failed, _DISK_CONFLICT)
        # a ReadWriteOncePod claim in use fails every node; a disk conflict is reported first
        reason_of = np.where(disk_failed, 0, 1)
        return FilterResult(np.zeros(rows.size, dtype=bool), [_DISK_CONFLICT, _RWOP_CONFLICT], reason_of)
