"""Decisions the core hands to the world (the cluster, or the simulator) to carry out.

The core never calls an API. It appends effects to the handle's outbox; the world drains it after
each step and turns each effect into API calls (or in-memory changes)."""

from __future__ import annotations

from dataclasses import dataclass

from koordpy.api.pod import Pod


@dataclass(frozen=True, slots=True)
class Bind:
    pod: Pod
    node_name: str
    profile: str
    # annotations PreBind plugins want on the pod before it is bound
    annotations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PodUnschedulable:
    """Write PodScheduled=False with this reason and message (and a FailedScheduling event when
    the pod was attempted).

    `reason` is koordpy's own diagnosis (InvalidSpec, GangNotReady, ...), as the simulator reports
    it; a world that writes to a cluster turns it into one of kube-scheduler's reasons."""

    pod: Pod
    reason: str
    message: str
    profile: str
    # None: leave status.nominatedNodeName alone; "": clear it; a name: set it
    nominated_node: str | None = None
    # False when the pod was not itself tried, only told how its gang's attempt ended: kube-scheduler
    # records a FailedScheduling only for a pod it attempted; the condition is written either way
    attempted: bool = True


@dataclass(frozen=True, slots=True)
class Nominate:
    pod: Pod
    node_name: str  # "" clears the nomination


@dataclass(frozen=True, slots=True)
class Evict:
    """Preemption: mark the victim with the DisruptionTarget condition, then delete it gracefully."""

    victim: Pod
    node_name: str
    preemptor: str  # namespace/job or namespace/pod
    trigger_pod: str
    message: str
    scheduler_name: str


@dataclass(frozen=True, slots=True)
class RecordEvent:
    pod: Pod
    event_type: str  # Normal | Warning
    reason: str
    message: str


Effect = Bind | PodUnschedulable | Nominate | Evict | RecordEvent
