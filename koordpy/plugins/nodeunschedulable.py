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
        self._key: tuple[int, int] = (-1, -1)
        self._cordoned = np.zeros(0, dtype=bool)
        self._any = False

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
        key = (id(snapshot), snapshot.node_generation)
        if key != self._key:
            # only on a node change: one pass over the node objects
            cordoned = np.zeros(snapshot.high_water, dtype=bool)
            infos = snapshot.infos
            for row in snapshot.live_rows().tolist():
                if infos[row].node.unschedulable:
                    cordoned[row] = True
            self._cordoned = cordoned
            self._any = bool(cordoned.any())
            self._key = key
        return self._cordoned

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        cordoned = self._cordoned_rows(self.handle.snapshot)
        if not self._any:
            return None
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        return FilterResult.uniform(~cordoned[rows], _STATUS)
