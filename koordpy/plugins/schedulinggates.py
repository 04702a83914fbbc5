"""SchedulingGates: a pod that still has scheduling gates stays out of the active queue until
every gate is removed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.interfaces import POD_UPDATE, ClusterEvent, Plugin, PreEnqueuePlugin, PreEnqueueRecheck
from koordpy.framework.status import Status, unresolvable

NAME = names.SCHEDULING_GATES


def gates_message(gates: Sequence[str]) -> str:
    # kube-scheduler prints the gate names as a Go string slice: `[gate-a gate-b]`
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


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
        if not pod.scheduling_gates:
            return None
        return unresolvable(gates_message(pod.scheduling_gates))
