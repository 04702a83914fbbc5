"""A pod as the scheduling queue holds it (kube-scheduler's QueuedPodInfo)."""

from __future__ import annotations

from dataclasses import dataclass, field

from koordpy.api.pod import Pod


@dataclass(slots=True)
class QueuedPodInfo:
    pod: Pod
    # when the pod was last put into the queue (ordering among equal priorities)
    timestamp: float
    # when it was first added; scheduling latency is measured from here
    initial_attempt_timestamp: float
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    # when the current backoff ends
    backoff_expiry: float = 0.0
    gated_by: str = ""
    gated_reason: str = ""
    gated_message: str = ""
    seq: int = 0
    # the order in which the pod first entered its queue: pods created at one virtual instant
    # tie on every timestamp, where on a cluster the clock (nanoseconds) tells them apart in the
    # order they were created; ties are broken by this, never by name
    arrival: int = 0

    @property
    def key(self) -> str:
        return self.pod.key
