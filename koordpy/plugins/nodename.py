"""NodeName: a pod whose spec.nodeName names a node fits only that node."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import NODE_ADD, ClusterEvent, FilterPlugin, FilterResult, Plugin
from koordpy.framework.status import unresolvable

NAME = names.NODE_NAME

ERR_REASON = "node(s) didn't match the requested node name"

_STATUS = unresolvable(ERR_REASON)


class NodeName(Plugin, FilterPlugin):
    NAME = NAME

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # only the named node appearing can help
        return (NODE_ADD,)

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        if not pod.node_name:
            return None
        row = self.handle.snapshot.row_of.get(pod.node_name)
        passed = rows == row if row is not None else np.zeros(rows.size, dtype=bool)
        return FilterResult.uniform(passed, _STATUS)
