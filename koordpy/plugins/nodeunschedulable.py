"""NodeUnschedulable: nodes marked spec.unschedulable (cordoned) take no new pods, unless the pod
tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.taints import NO_SCHEDULE, Taint
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
    QueueingHint,
    QueueingHints,
)
from koordpy.framework.status import unresolvable

NAME = names.NODE_UNSCHEDULABLE

ERR_REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)

_STATUS = unresolvable(ERR_REASON)


class NodeUnschedulable(Plugin, FilterPlugin, QueueingHints):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        # the snapshot and node generation `_cordoned` was read at
        self._snapshot: Any = None
        self._generation = -1
        # per snapshot row (sized to its row capacity): the node there is cordoned
        self._cordoned = np.zeros(0, dtype=bool)
        self._count = 0

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # a node added, or uncordoned
        return (NODE_ADD, NODE_UPDATE)

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(NODE_ADD, self.after_node_change),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_change),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        return ()  # a pod this plugin rejected does not tolerate cordons: the hint reads no pod

    def after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterNodeChange: a node added schedulable, or
        uncordoned."""
        if new is None or new.unschedulable:
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE if old is None or old.unschedulable else QueueingHint.QUEUE_SKIP

    def _cordoned_rows(self, snapshot: Any) -> np.ndarray:
        """Follows the snapshot's node changes row by row: only rows whose node was added, replaced
        or removed are read again, so a status heartbeat costs one attribute read."""
        if snapshot is self._snapshot and self._generation == snapshot.node_generation:
            return self._cordoned
        rows = snapshot.node_rows_changed_since(self._generation) if snapshot is self._snapshot else None
        if rows is not None and self._cordoned.size >= snapshot.capacity:
            cordoned = self._cordoned
            infos = snapshot.infos
            count = self._count
            for row in dict.fromkeys(rows):
                info = infos[row]
                now = info is not None and info.node.unschedulable
                if now != cordoned[row]:
                    cordoned[row] = now
                    count += 1 if now else -1
            self._count = count
        else:
            # the first time, a row capacity grown, or too far behind: every node read again
            cordoned = np.zeros(snapshot.capacity, dtype=bool)
            infos = snapshot.infos
            for row in snapshot.live_rows().tolist():
                if infos[row].node.unschedulable:
                    cordoned[row] = True
            self._cordoned = cordoned
            self._count = int(np.count_nonzero(cordoned))
        self._snapshot = snapshot
        self._generation = snapshot.node_generation
        return self._cordoned

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        cordoned = self._cordoned_rows(self.handle.snapshot)
        if not self._count:
            return None
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        return FilterResult.uniform(~cordoned[rows], _STATUS)
