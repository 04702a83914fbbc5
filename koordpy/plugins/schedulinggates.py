"""SchedulingGates: a pod that still has scheduling gates stays out of the active queue until
every gate is removed.

kube-scheduler writes no PodScheduled condition for a gated pod: the API server gives every pod
created with gates `PodScheduled=False`, reason SchedulingGated, with the message below
(pkg/registry/core/pod/strategy.go, applySchedulingGatedCondition). The verdict here carries that
same reason and message, so what koordpy writes for a gated pod is what the pod already shows (the
status writer then has nothing to change) and the simulator shows what a cluster would.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.interfaces import POD_UPDATE, ClusterEvent, Plugin, PreEnqueuePlugin, PreEnqueueRecheck
from koordpy.framework.status import Code, Status

NAME = names.SCHEDULING_GATES

GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
_GATED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (GATED_MESSAGE,), NAME, names.SCHEDULING_GATED)


class SchedulingGates(Plugin, PreEnqueuePlugin, PreEnqueueRecheck):
    NAME = NAME

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # gates are only ever removed by a pod update
        return (POD_UPDATE,)

    def gated_pods_to_recheck(self) -> Iterable[str]:
        # a gate is lifted only by an update of the pod itself, which the queue checks anyway: no
        # other event needs to look at the pods gated here
        return ()

    def pre_enqueue(self, pod: Pod) -> Status | None:
        return _GATED if pod.scheduling_gates else None
