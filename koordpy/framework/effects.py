"""Decisions the core hands to the world (the cluster, or the simulator) to carry out.

The core never calls an API. It appends effects to the handle's outbox; the world drains it after
each step and turns each effect into API calls (or in-memory changes)."""

from __future__ import annotations

from dataclasses import dataclass

from koordpy.api.pod import Pod


@dataclass(frozen=True, slots=True)
class ClaimKey:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class VolumeToClaim:
    """A PersistentVolume VolumeBinding chose for a claim: the world sets the PV's claimRef."""

    pv_name: str
    claim: ClaimKey
    claim_uid: str


@dataclass(frozen=True, slots=True)
class VolumeBindings:
    """What VolumeBinding's PreBind leaves for the world to carry out before the pod's Binding, as
    kube-scheduler's BindPodVolumes does: bind the chosen PVs to their claims (PV claimRef), ask for
    the delayed claims to be provisioned on the node (the claim's `volume.kubernetes.io/selected-node`
    annotation), then wait until every claim in `wait_for` is Bound to a PV before the pod is bound;
    a failed write, a provisioning the PV controller gave up (the annotation removed) or a wait
    longer than `timeout_seconds` fails the binding (then Unreserve forgets what was assumed; what
    was written stays, as in kube)."""

    static: tuple[VolumeToClaim, ...]
    provision: tuple[ClaimKey, ...]
    wait_for: tuple[ClaimKey, ...]
    node_name: str
    timeout_seconds: float


@dataclass(frozen=True, slots=True)
class Bind:
    pod: Pod
    node_name: str
    profile: str
    # annotations PreBind plugins want on the pod before it is bound
    annotations: tuple[tuple[str, str], ...] = ()
    # volumes VolumeBinding's PreBind left to bind first (None: the pod's claims are all bound)
    volumes: VolumeBindings | None = None


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
