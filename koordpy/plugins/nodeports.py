"""NodePorts: a pod asking for host ports fits only nodes where no placed pod already holds one of
them (same protocol and port, and the same host IP or either side on 0.0.0.0). A pod without host
ports skips the filter."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import (
    NODE_ADD,
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
from koordpy.framework.status import SKIP, Status, unschedulable

NAME = names.NODE_PORTS

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

_STATUS = unschedulable(ERR_REASON)


class NodePorts(Plugin, PreFilterPlugin, FilterPlugin, QueueingHints):
    NAME = NAME

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # a pod holding the port went away; a new node has every port free
        return (POD_DELETE, NODE_ADD)

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        # a new node has every port free: no hint needed
        return (ClusterEventWithHint(POD_DELETE, self.after_pod_delete), ClusterEventWithHint(NODE_ADD))

    def hint_shape(self, pod: Pod) -> Hashable:
        return pod.host_ports

    def after_pod_delete(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterPodDeleted: a placed (or nominated) pod that held
        a port this pod wants."""
        if old is None or (not old.node_name and not old.nominated_node_name):
            return QueueingHint.QUEUE_SKIP
        for held in old.host_ports:
            for wanted in pod.host_ports:
                if wanted.conflicts(held):
                    return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, SKIP
        return None, None

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        if not pod.host_ports:
            return None
        # looked up at Filter time: nominated pods are added to the snapshot for a re-check
        taken = self.handle.snapshot.host_port_conflicts(pod.host_ports)
        if not taken:
            return None
        passed = ~np.isin(rows, np.fromiter(taken, dtype=np.int64, count=len(taken)))
        return FilterResult.uniform(passed, _STATUS)
