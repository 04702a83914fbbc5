"""SchedulingGates: a pod that still has scheduling gates stays out of the active queue until
every gate is removed."""

from __future__ import annotations

from collections.abc import Sequence

from koordpy.api.pod import Pod
from koordpy.framework.interfaces import POD_UPDATE, ClusterEvent, Plugin
from koordpy.framework.status import Status, unresolvable

NAME = "SchedulingGates"


def gates_message(gates: Sequence[str]) -> str:
    # kube-scheduler prints the gate names as a Go string slice: `[gate-a gate-b]`
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


class SchedulingGates(Plugin):
    NAME = NAME

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # gates are only ever removed by a pod update
        return (POD_UPDATE,)

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.scheduling_gates:
            return None
        return unresolvable(gates_message(pod.scheduling_gates))
