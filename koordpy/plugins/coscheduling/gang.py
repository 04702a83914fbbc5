"""Gangs: which gang a pod belongs to, and each gang's parameters from any of the ways to declare one.

- CRD way: pod label `pod-group.scheduling.sigs.k8s.io` (PodGroup in scheduling.sigs.k8s.io) or
  `scheduling.x-k8s.io/pod-group` (PodGroup in scheduling.x-k8s.io); the PodGroup object holds the
  parameters (and, for the sigs group, the gang annotations on the PodGroup).
- Annotation way: `gang.scheduling.koordinator.sh/name` and friends on the pods, or the deprecated
  lightweight labels `pod-group.scheduling.sigs.k8s.io/name` and `.../min-available`; the first pod
  whose annotations parse configures the gang.

A gang's id is `<namespace>/<name>`. Bad values are never defaulted silently: they make the gang
invalid, and its pods stay pending with a message naming the annotation and the value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from koordpy.api.duration import parse_duration
from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.podgroup import (
    BY_ANNOTATION,
    GANG_NAME_ANNOTATION,
    SIGS_GROUP,
    X_K8S_GROUP,
    PodGroup,
    gang_reference,
)
from koordpy.plugins.coscheduling.networktopology import (
    MAX_SPEC_NESTING,
    NetworkTopologySpec,
    json_nesting_depth,
    parse_network_topology_spec,
)

PREFIX = "gang.scheduling.koordinator.sh"
ANNOTATION_NAME = GANG_NAME_ANNOTATION
ANNOTATION_MIN = f"{PREFIX}/min-available"
ANNOTATION_TOTAL = f"{PREFIX}/total-number"
ANNOTATION_MODE = f"{PREFIX}/mode"
ANNOTATION_MATCH_POLICY = f"{PREFIX}/match-policy"
ANNOTATION_MATCH_POLICY_ALIAS = "pod-group.scheduling.sigs.k8s.io/match-policy"
ANNOTATION_WAITING_TIME = f"{PREFIX}/waiting-time"
ANNOTATION_GROUPS = f"{PREFIX}/groups"
ANNOTATION_TOPOLOGY_SPEC = f"{PREFIX}/network-topology-spec"
ANNOTATION_TOPOLOGY_INDEX = f"{PREFIX}/network-topology-index"
LIGHTWEIGHT_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"

STRICT = "Strict"
NON_STRICT = "NonStrict"
ONCE_SATISFIED = "once-satisfied"
ONLY_WAITING = "only-waiting"
WAITING_AND_RUNNING = "waiting-and-running"
MATCH_POLICIES = (ONCE_SATISFIED, ONLY_WAITING, WAITING_AND_RUNNING)

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


def _int_value(value: str, where: str, minimum: int) -> int:
    text = value.strip()
    if not text.lstrip("-").isdigit():
        raise SpecError(where, f"{value!r} is not an integer")
    n = int(text)
    if n < minimum:
        raise SpecError(where, f"{value!r} must be at least {minimum}")
    if n > 2**31 - 1:
        raise SpecError(where, f"{value!r} is too large")
    return n


def _group_ids(value: str | None, own_id: str, where: str) -> tuple[str, ...]:
    if value is None or value.strip() == "":
        return (own_id,)
    if json_nesting_depth(value) > MAX_SPEC_NESTING:
        raise SpecError(where, "is nested too deeply to be a JSON array of gang ids")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        raise SpecError(where, f"{value[:200]!r} is not a JSON array of gang ids: {err.msg}") from None
    except ValueError as err:  # an integer literal longer than Python converts
        raise SpecError(where, f"is not usable JSON: {str(err)[:120]}") from None
    if not isinstance(parsed, list) or not all(isinstance(x, str) and x for x in parsed):
        raise SpecError(where, f'{value!r} must be a JSON array of "namespace/name" strings')
    for gid in parsed:
        if gid.count("/") != 1 or gid.startswith("/") or gid.endswith("/"):
            raise SpecError(where, f"gang id {gid!r} in {value!r} is not of the form namespace/name")
    ids = set(parsed) or {own_id}
    ids.add(own_id)
    return tuple(sorted(ids))


def _common_annotations(
    annotations: Mapping[str, str], own_id: str, default_match_policy: str, min_member: int
) -> tuple[int, str, str, tuple[str, ...], NetworkTopologySpec | None]:
    total_raw = annotations.get(ANNOTATION_TOTAL)
    total = min_member
    if total_raw is not None and total_raw.strip() != "":
        total = max(_int_value(total_raw, f"annotation {ANNOTATION_TOTAL}", 0), min_member)
    mode = annotations.get(ANNOTATION_MODE) or STRICT
    if mode not in (STRICT, NON_STRICT):
        raise SpecError(f"annotation {ANNOTATION_MODE}", f"{mode!r} must be Strict or NonStrict")
    policy = annotations.get(ANNOTATION_MATCH_POLICY) or annotations.get(ANNOTATION_MATCH_POLICY_ALIAS) or ""
    if not policy:
        policy = default_match_policy
    elif policy not in MATCH_POLICIES:
        key = (
            ANNOTATION_MATCH_POLICY
            if annotations.get(ANNOTATION_MATCH_POLICY)
            else ANNOTATION_MATCH_POLICY_ALIAS
        )
        raise SpecError(f"annotation {key}", f"{policy!r} must be one of {', '.join(MATCH_POLICIES)}")
    group = _group_ids(annotations.get(ANNOTATION_GROUPS), own_id, f"annotation {ANNOTATION_GROUPS}")
    raw_topology = annotations.get(ANNOTATION_TOPOLOGY_SPEC)
    topology = None
    if raw_topology is not None and raw_topology.strip() != "":
        topology = parse_network_topology_spec(raw_topology, f"annotation {ANNOTATION_TOPOLOGY_SPEC}")
    return total, mode, policy, group, topology


def spec_from_pod(pod: Pod, m: Membership, default_match_policy: str) -> GangSpec:
    """The annotation way: parameters from the pod's annotations (and the lightweight labels)."""
    labels, annotations = pod.labels, pod.annotations
    if LIGHTWEIGHT_MIN_LABEL in labels:
        min_member = _int_value(labels[LIGHTWEIGHT_MIN_LABEL], f"label {LIGHTWEIGHT_MIN_LABEL}", 1)
    elif ANNOTATION_MIN in annotations:
        min_member = _int_value(annotations[ANNOTATION_MIN], f"annotation {ANNOTATION_MIN}", 1)
    else:
        raise SpecError(f"annotation {ANNOTATION_MIN}", "is required for a gang declared by annotations")
    wait: float | None = None
    raw_wait = annotations.get(ANNOTATION_WAITING_TIME)
    if raw_wait is not None and raw_wait.strip() != "":
        wait = parse_duration(raw_wait, f"annotation {ANNOTATION_WAITING_TIME}")
        if wait <= 0:
            raise SpecError(f"annotation {ANNOTATION_WAITING_TIME}", f"{raw_wait!r} must be positive")
    total, mode, policy, group, topology = _common_annotations(
        annotations, m.gang_id, default_match_policy, min_member
    )
    return GangSpec(min_member, total, mode, policy, wait, group, topology)


def spec_from_podgroup(pg: PodGroup, default_match_policy: str) -> GangSpec:
    """The CRD way: parameters from the PodGroup (and, for the sigs group, its annotations)."""
    if pg.spec_error is not None:
        raise SpecError(f"PodGroup {pg.key} {pg.spec_error.path}", pg.spec_error.message)
    wait = float(pg.schedule_timeout_seconds) if pg.schedule_timeout_seconds else None
    own = pg.key
    if pg.api_group == X_K8S_GROUP:
        # scheduler-plugins' PodGroup has no modes or groups; its failures follow the reject percentage
        return GangSpec(pg.min_member, pg.min_member, STRICT, WAITING_AND_RUNNING, wait, (own,), None)
    total, mode, policy, group, topology = _common_annotations(
        pg.annotations, own, default_match_policy, pg.min_member
    )
    return GangSpec(pg.min_member, total, mode, policy, wait, group, topology)


@dataclass(slots=True)
class Gang:
    id: str
    namespace: str
    name: str
    source: str
    spec: GangSpec | None = None
    # why the gang cannot be scheduled as declared (InvalidSpec), when it cannot
    error: str | None = None
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


def topology_index(pod: Pod) -> int | None:
    raw = pod.annotations.get(ANNOTATION_TOPOLOGY_INDEX)
    if raw is None:
        return None
    text = raw.strip()
    return int(text) if text.lstrip("-").isdigit() else None


def member_order_key(pod: Pod) -> tuple[int, int, str]:
    """Deterministic member order: indexed pods first by index, then by name."""
    idx = topology_index(pod)
    return (0, idx, pod.name) if idx is not None else (1, 0, pod.name)
