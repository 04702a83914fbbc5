"""Gangs: which gang a pod belongs to, and each gang's parameters from any of the ways to declare one.

- CRD way: pod label `pod-group.scheduling.sigs.k8s.io` (PodGroup in scheduling.sigs.k8s.io) or
  `scheduling.x-k8s.io/pod-group` (PodGroup in scheduling.x-k8s.io); the PodGroup object holds the
  parameters (and, for the sigs group, the gang annotations on the PodGroup).
- Annotation way: `gang.scheduling.koordinator.sh/name` and friends on the pods, or the deprecated
  lightweight labels `pod-group.scheduling.sigs.k8s.io/name` and `.../min-available`; the first pod
  whose annotations parse configures the gang.

A gang's id is `<namespace>/<name>`. Annotations are read as koord-scheduler reads them
(`koordpy.status.gang_annotations`): where it falls back to a default, so does koordpy, and the
spec carries a Fallback for each, which the Coscheduling plugin tells the members (a Warning
event) and the PodGroup operator writes on the PodGroup (a condition).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.podgroup import (
    BY_ANNOTATION,
    SIGS_GROUP,
    X_K8S_GROUP,
    PodGroup,
    gang_reference,
)

# re-exported: the plugin, the registry and tests name annotations and values from here
from koordpy.status.gang_annotations import ANNOTATION_GROUPS as ANNOTATION_GROUPS
from koordpy.status.gang_annotations import ANNOTATION_TOPOLOGY_SPEC as ANNOTATION_TOPOLOGY_SPEC
from koordpy.status.gang_annotations import MATCH_POLICIES as MATCH_POLICIES
from koordpy.status.gang_annotations import NON_STRICT as NON_STRICT
from koordpy.status.gang_annotations import ONCE_SATISFIED as ONCE_SATISFIED
from koordpy.status.gang_annotations import ONLY_WAITING as ONLY_WAITING
from koordpy.status.gang_annotations import STRICT as STRICT
from koordpy.status.gang_annotations import WAITING_AND_RUNNING as WAITING_AND_RUNNING
from koordpy.status.gang_annotations import (
    Fallback,
    NetworkTopologySpec,
    min_available,
    read_gang_annotations,
    topology_index,
    waiting_time,
)

FROM_SIGS = SIGS_GROUP
FROM_X_K8S = X_K8S_GROUP
FROM_ANNOTATION = BY_ANNOTATION


@dataclass(frozen=True, slots=True)
class Membership:
    """Which gang a pod names, and how."""

    gang_id: str
    name: str
    source: str  # FROM_SIGS, FROM_X_K8S or FROM_ANNOTATION


def membership(pod: Pod) -> Membership | None:
    ref = gang_reference(pod.labels, pod.annotations)
    if ref is None:
        return None
    source, name = ref
    return Membership(f"{pod.namespace}/{name}", name, source)


@dataclass(frozen=True, slots=True)
class GangSpec:
    min_member: int
    total: int
    mode: str
    match_policy: str
    # None: the plugin's default for this kind of gang
    wait_seconds: float | None
    # every gang id of the gang group, sorted, this gang's own included
    group: tuple[str, ...]
    # network-topology-aware placement, when the gang asks for it
    topology_spec: NetworkTopologySpec | None
    # the annotations read otherwise than written, and what was used instead
    fallbacks: tuple[Fallback, ...] = ()


def spec_from_pod(pod: Pod, m: Membership, default_match_policy: str) -> GangSpec:
    """The annotation way: parameters from the pod's annotations (and the lightweight labels).
    MinAvailableError when this pod cannot configure its gang; SpecError when the gang it would
    configure can never be scheduled."""
    min_member, where = min_available(pod.labels, pod.annotations)
    fallbacks: list[Fallback] = []
    if min_member < 0:
        # koord-scheduler keeps it, and a gang that needs fewer than no members needs none
        fallbacks.append(Fallback(where, repr(str(min_member)), "is negative", "0 (no minimum)"))
        min_member = 0
    wait = waiting_time(pod.annotations, fallbacks)
    a = read_gang_annotations(pod.annotations, m.gang_id, default_match_policy, min_member)
    fallbacks.extend(a.fallbacks)
    return GangSpec(
        min_member, a.total, a.mode, a.match_policy, wait, a.group, a.topology_spec, tuple(fallbacks)
    )


def spec_from_podgroup(pg: PodGroup, default_match_policy: str) -> GangSpec:
    """The CRD way: parameters from the PodGroup (and, for the sigs group, its annotations; the
    waiting-time annotation is not read there, scheduleTimeoutSeconds is)."""
    if pg.spec_error is not None:
        raise SpecError(f"PodGroup {pg.key} {pg.spec_error.path}", pg.spec_error.message)
    wait = float(pg.schedule_timeout_seconds) if pg.schedule_timeout_seconds else None
    own = pg.key
    if pg.api_group == X_K8S_GROUP:
        # scheduler-plugins' PodGroup has no modes or groups; its failures follow the reject percentage
        return GangSpec(pg.min_member, pg.min_member, STRICT, WAITING_AND_RUNNING, wait, (own,), None)
    a = read_gang_annotations(pg.annotations, own, default_match_policy, pg.min_member)
    # told to the members: they say whose annotations they are
    named = tuple(Fallback(f"PodGroup {own} {f.key}", f.value, f.why, f.used) for f in a.fallbacks)
    return GangSpec(pg.min_member, a.total, a.mode, a.match_policy, wait, a.group, a.topology_spec, named)


@dataclass(slots=True)
class Gang:
    id: str
    namespace: str
    name: str
    source: str
    spec: GangSpec | None = None
    # why the gang cannot be scheduled as declared (InvalidSpec), when it cannot
    error: str | None = None
    # declared by annotations: the member whose annotations configured the gang (the first with
    # a usable min-available, as in koord-scheduler; no later member changes it)
    configured_by: str | None = None
    create_time: float = 0.0
    pod_group: PodGroup | None = None
    # every member pod we know, by key; and the subsets waiting at Permit and bound
    children: set[str] = field(default_factory=set)
    waiting: set[str] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)
    # when the gang last failed as a whole, for queue order; until when it backs off
    last_failure: float | None = None
    backoff_until: float = 0.0
    first_seen: float | None = None
    # members Coscheduling's PreEnqueue holds back now: the only ones an event of the gang can
    # let through, so the only ones it looks at again
    held: set[str] = field(default_factory=set)
    # members their scheduling gates hold (counted as they come and go, not per verdict)
    gated: int = 0
    # the shortfall the held members were last all told ((gang, minMember) pairs, members then),
    # while the group is short of members; None when they are to be told again at the next event
    told_short: tuple[tuple[tuple[str, int], ...], int] | None = None

    @property
    def initialized(self) -> bool:
        return self.spec is not None and self.error is None

    @property
    def min_member(self) -> int:
        return self.spec.min_member if self.spec is not None else 0

    @property
    def group(self) -> tuple[str, ...]:
        return self.spec.group if self.spec is not None else (self.id,)

    @property
    def group_id(self) -> str:
        return ",".join(self.group)

    @property
    def api_group(self) -> str:
        return self.source if self.source in (FROM_SIGS, FROM_X_K8S) else FROM_SIGS


def member_order_key(pod: Pod) -> tuple[int, int, str]:
    """Deterministic member order: indexed pods first by index, then by name."""
    idx = topology_index(pod.annotations)
    return (0, idx, pod.name) if idx is not None else (1, 0, pod.name)
