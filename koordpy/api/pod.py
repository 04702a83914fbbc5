"""The scheduler's immutable view of a Pod, built once per API object.

Everything the scheduler asks of a pod is computed here up front: the effective request as
kube-scheduler computes it, the QoS class, parsed affinity, tolerations and spread constraints.
A pod whose spec cannot be understood still gets a view, with `spec_error` set, so it can be
reported as `InvalidSpec` while every other pod keeps being scheduled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from koordpy.api.affinity import (
    AffinityTerm,
    TopologySpreadConstraint,
    WeightedAffinityTerm,
    parse_required_terms,
    parse_spread_constraints,
    parse_weighted_terms,
)
from koordpy.api.errors import SpecError
from koordpy.api.nodeselector import NodeSelector, PreferredSchedulingTerm
from koordpy.api.podvolumes import InlineVolume as InlineVolume
from koordpy.api.podvolumes import PodVolume as PodVolume
from koordpy.api.podvolumes import name_ephemeral_claims, parse_pod_volumes
from koordpy.api.resources import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MAX_AMOUNT,
    MEMORY,
    ResourceList,
    add_into,
    format_amount,
    max_into,
    parse_resource_list,
)
from koordpy.api.taints import Toleration
from koordpy.api.time import parse_timestamp

DEFAULT_SCHEDULER_NAME = "default-scheduler"
QOS_GUARANTEED = "Guaranteed"
QOS_BURSTABLE = "Burstable"
QOS_BEST_EFFORT = "BestEffort"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"

EMPTY: Mapping[str, str] = {}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or self.ip == "0.0.0.0" or other.ip == "0.0.0.0"


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    namespace: str
    name: str
    # namespace/name, stored: it keys every map the scheduler keeps
    key: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    scheduler_name: str
    node_name: str
    priority: int
    priority_class_name: str
    preemption_policy: str
    creation_ts: float
    phase: str
    deletion_ts: float | None
    nominated_node_name: str
    owners: tuple[OwnerRef, ...]
    requests: ResourceList
    # cpu and memory with kube-scheduler's defaults for containers that ask for none
    nonzero_cpu: int
    nonzero_memory: int
    qos_class: str
    node_selector: Mapping[str, str]
    required_node_affinity: NodeSelector | None
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...]
    tolerations: tuple[Toleration, ...]
    required_affinity: tuple[AffinityTerm, ...]
    required_anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[WeightedAffinityTerm, ...]
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...]
    spread_constraints: tuple[TopologySpreadConstraint, ...]
    host_ports: tuple[HostPort, ...]
    images: tuple[str, ...]
    scheduling_gates: tuple[str, ...]
    # the claims and in-tree disks scheduling looks at (koordpy.api.podvolumes); empty for most pods
    volumes: tuple[PodVolume, ...]
    conditions: tuple[Mapping[str, Any], ...]
    termination_grace_seconds: int
    spec_error: SpecError | None
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def has_pod_affinity(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )

    @property
    def claim_names(self) -> tuple[str, ...]:
        """The names of the claims the pod uses (named and generic ephemeral), in spec order."""
        return tuple(v.claim_name for v in self.volumes if v.claim_name)

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def controller(self) -> OwnerRef | None:
        for owner in self.owners:
            if owner.controller:
                return owner
        return None

    def with_changes(self, **changes: Any) -> Pod:
        """A copy with some fields replaced; for the few fields a binding or a status write
        changes (nodeName, phase, annotations, raw), without parsing the object again."""
        new = object.__new__(Pod)
        for name in Pod.__slots__:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new

    def __hash__(self) -> int:
        return hash(self.uid)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pod) and other.uid == self.uid and other.raw is self.raw

    def __repr__(self) -> str:
        return f"Pod({self.key})"

    @staticmethod
    def from_dict(obj: Mapping[str, Any], *, creation_ts: float | None = None, uid: str | None = None) -> Pod:
        return parse_pod(obj, creation_ts=creation_ts, uid=uid)


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise SpecError(path, f"expected an object, got {type(obj).__name__}")
    return obj


def _str_map(obj: Any, path: str) -> dict[str, str]:
    m = _mapping(obj, path)
    out: dict[str, str] = {}
    for k, v in m.items():
        if not isinstance(k, str):
            raise SpecError(path, f"key {k!r} is not a string")
        if isinstance(v, bool) or v is None:
            raise SpecError(f"{path}.{k}", f"value {v!r} is not a string")
        out[k] = v if isinstance(v, str) else str(v)
    return out


def _string(obj: Any, path: str) -> str:
    if obj is None:
        return ""
    if not isinstance(obj, str):
        raise SpecError(path, f"expected a string, got {type(obj).__name__}")
    return obj


def _list(obj: Any, path: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise SpecError(path, f"expected a list, got {type(obj).__name__}")
    return obj


@dataclass(slots=True)
class _ContainerRequests:
    requests: ResourceList
    nonzero_cpu: int
    nonzero_memory: int
    limits: ResourceList


def _container_requests(c: Mapping[str, Any], path: str) -> _ContainerRequests:
    resources = _mapping(c.get("resources"), f"{path}.resources")
    limits = parse_resource_list(resources.get("limits"), f"{path}.resources.limits")
    requests = parse_resource_list(resources.get("requests"), f"{path}.resources.requests")
    # The apiserver defaults a missing request to the limit; the simulator sees raw manifests.
    for name, value in limits.items():
        requests.setdefault(name, value)
    for name, value in requests.items():
        if value >= MAX_AMOUNT:
            source = "requests" if name in (resources.get("requests") or {}) else "limits"
            raise _beyond_limit(f"{path}.resources.{source}.{name}", name)
    return _ContainerRequests(
        requests=requests,
        nonzero_cpu=requests.get(CPU, DEFAULT_MILLI_CPU_REQUEST),
        nonzero_memory=requests.get(MEMORY, DEFAULT_MEMORY_REQUEST),
        limits=limits,
    )


def _beyond_limit(path: str, name: str, what: str = "asks for") -> SpecError:
    """A request koordpy refuses rather than compares wrongly: at MAX_AMOUNT amounts saturate, and
    a saturated request would look as if it fitted a node that reports as much."""
    return SpecError(
        path,
        f"{what} more {name} than koordpy schedules (at most {format_amount(name, MAX_AMOUNT - 1)}); "
        "no node can hold it",
    )


def effective_requests(
    containers: list[_ContainerRequests],
    init_containers: list[tuple[_ContainerRequests, bool]],
    overhead: ResourceList,
) -> tuple[ResourceList, int, int]:
    """kube-scheduler's pod request: containers summed, sidecars added, each init container's peak
    (with the sidecars started before it) taken as a floor, then the pod overhead on top."""
    total: ResourceList = {}
    nz_cpu = nz_mem = 0
    for c in containers:
        add_into(total, c.requests)
        nz_cpu += c.nonzero_cpu
        nz_mem += c.nonzero_memory
    sidecars: ResourceList = {}
    sidecar_cpu = sidecar_mem = 0
    init_peak: ResourceList = {}
    init_cpu = init_mem = 0
    for c, restartable in init_containers:
        if restartable:
            add_into(sidecars, c.requests)
            sidecar_cpu += c.nonzero_cpu
            sidecar_mem += c.nonzero_memory
            max_into(init_peak, sidecars)
            init_cpu = max(init_cpu, sidecar_cpu)
            init_mem = max(init_mem, sidecar_mem)
        else:
            peak = dict(c.requests)
            add_into(peak, sidecars)
            max_into(init_peak, peak)
            init_cpu = max(init_cpu, c.nonzero_cpu + sidecar_cpu)
            init_mem = max(init_mem, c.nonzero_memory + sidecar_mem)
    add_into(total, sidecars)
    nz_cpu += sidecar_cpu
    nz_mem += sidecar_mem
    max_into(total, init_peak)
    nz_cpu = max(nz_cpu, init_cpu)
    nz_mem = max(nz_mem, init_mem)
    add_into(total, overhead)
    nz_cpu += overhead.get(CPU, 0)
    nz_mem += overhead.get(MEMORY, 0)
    # the "non-zero" sums saturate like every amount (see MAX_AMOUNT)
    return {k: v for k, v in total.items() if v}, min(nz_cpu, MAX_AMOUNT), min(nz_mem, MAX_AMOUNT)


def _qos_class(all_containers: list[_ContainerRequests]) -> str:
    best_effort = True
    guaranteed = True
    for c in all_containers:
        for name in (CPU, MEMORY):
            req = c.requests.get(name, 0)
            lim = c.limits.get(name, 0)
            if req or lim:
                best_effort = False
            if not lim or req != lim:
                guaranteed = False
    if best_effort:
        return QOS_BEST_EFFORT
    return QOS_GUARANTEED if guaranteed else QOS_BURSTABLE


def _host_ports(containers: list[Mapping[str, Any]], path: str) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for i, c in enumerate(containers):
        for j, p in enumerate(_list(c.get("ports"), f"{path}[{i}].ports")):
            p = _mapping(p, f"{path}[{i}].ports[{j}]")
            host_port = p.get("hostPort") or 0
            if not isinstance(host_port, int) or isinstance(host_port, bool) or not 0 <= host_port <= 65535:
                raise SpecError(f"{path}[{i}].ports[{j}].hostPort", f"invalid port {host_port!r}")
            if host_port > 0:
                # both key the sets of ports in use: they must be strings
                ip = _string(p.get("hostIP"), f"{path}[{i}].ports[{j}].hostIP") or "0.0.0.0"
                protocol = _string(p.get("protocol"), f"{path}[{i}].ports[{j}].protocol") or "TCP"
                ports.append(HostPort(ip, protocol, host_port))
    return tuple(ports)


def _parse_spec(obj: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    spec = _mapping(obj.get("spec"), "spec")
    containers_raw = [
        _mapping(c, f"spec.containers[{i}]")
        for i, c in enumerate(_list(spec.get("containers"), "spec.containers"))
    ]
    init_raw = [
        _mapping(c, f"spec.initContainers[{i}]")
        for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers"))
    ]
    containers = [_container_requests(c, f"spec.containers[{i}]") for i, c in enumerate(containers_raw)]
    inits = [
        (_container_requests(c, f"spec.initContainers[{i}]"), c.get("restartPolicy") == "Always")
        for i, c in enumerate(init_raw)
    ]
    overhead = parse_resource_list(spec.get("overhead"), "spec.overhead")
    requests, nz_cpu, nz_mem = effective_requests(containers, inits, overhead)
    for name, value in requests.items():
        if value >= MAX_AMOUNT:  # each part below the bound, their sum not
            raise _beyond_limit("spec", name, "the pod's containers together ask for")

    affinity = _mapping(spec.get("affinity"), "spec.affinity")
    node_aff = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    required_node = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    preferred_node = _list(
        node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"),
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
    )
    pod_aff = _mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_aff = _mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    pref_key = "preferredDuringSchedulingIgnoredDuringExecution"

    tolerations = tuple(
        Toleration.from_dict(_mapping(t, f"spec.tolerations[{i}]"), f"spec.tolerations[{i}]")
        for i, t in enumerate(_list(spec.get("tolerations"), "spec.tolerations"))
    )
    priority = spec.get("priority", 0) or 0
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise SpecError("spec.priority", f"must be an integer, got {priority!r}")
    # int32 in the API; priorities are kept in int32 arrays
    if not _INT32_MIN <= priority <= _INT32_MAX:
        raise SpecError("spec.priority", f"must be a 32-bit integer, got {priority}")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace is None:
        grace = 30
    if not isinstance(grace, int) or isinstance(grace, bool) or not 0 <= grace <= _INT64_MAX:
        raise SpecError(
            "spec.terminationGracePeriodSeconds", f"must be a non-negative 64-bit integer, got {grace!r}"
        )
    policy = spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        raise SpecError("spec.preemptionPolicy", f"must be PreemptLowerPriority or Never, got {policy!r}")
    gates = tuple(
        str(_mapping(g, f"spec.schedulingGates[{i}]").get("name", ""))
        for i, g in enumerate(_list(spec.get("schedulingGates"), "spec.schedulingGates"))
    )
    return {
        "requests": requests,
        "nonzero_cpu": nz_cpu,
        "nonzero_memory": nz_mem,
        "qos_class": _qos_class([*containers, *(c for c, _ in inits)]),
        "node_selector": _str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        "required_node_affinity": (
            NodeSelector.from_dict(required_node, f"spec.affinity.nodeAffinity.{req_key}")
            if required_node is not None
            else None
        ),
        "preferred_node_affinity": tuple(
            PreferredSchedulingTerm.from_dict(
                _mapping(t, f"spec.affinity.nodeAffinity.{pref_key}[{i}]"),
                f"spec.affinity.nodeAffinity.{pref_key}[{i}]",
            )
            for i, t in enumerate(preferred_node)
        ),
        "tolerations": tolerations,
        "required_affinity": parse_required_terms(
            pod_aff.get(req_key), f"spec.affinity.podAffinity.{req_key}", namespace, labels
        ),
        "required_anti_affinity": parse_required_terms(
            anti_aff.get(req_key), f"spec.affinity.podAntiAffinity.{req_key}", namespace, labels
        ),
        "preferred_affinity": parse_weighted_terms(
            pod_aff.get(pref_key), f"spec.affinity.podAffinity.{pref_key}", namespace, labels
        ),
        "preferred_anti_affinity": parse_weighted_terms(
            anti_aff.get(pref_key), f"spec.affinity.podAntiAffinity.{pref_key}", namespace, labels
        ),
        "spread_constraints": parse_spread_constraints(
            spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints", labels
        ),
        "host_ports": _host_ports(containers_raw, "spec.containers"),
        "images": tuple(str(c["image"]) for c in containers_raw if c.get("image")),
        "priority": priority,
        "priority_class_name": str(spec.get("priorityClassName") or ""),
        "preemption_policy": policy,
        "termination_grace_seconds": grace,
        "scheduling_gates": gates,
        "volumes": parse_pod_volumes(spec.get("volumes"), "spec.volumes"),
    }


_INVALID_DEFAULTS: dict[str, Any] = {
    "requests": {},
    "nonzero_cpu": 0,
    "nonzero_memory": 0,
    "qos_class": QOS_BEST_EFFORT,
    "node_selector": {},
    "required_node_affinity": None,
    "preferred_node_affinity": (),
    "tolerations": (),
    "required_affinity": (),
    "required_anti_affinity": (),
    "preferred_affinity": (),
    "preferred_anti_affinity": (),
    "spread_constraints": (),
    "host_ports": (),
    "images": (),
    "priority": 0,
    "priority_class_name": "",
    "preemption_policy": PREEMPT_LOWER_PRIORITY,
    "termination_grace_seconds": 30,
    "scheduling_gates": (),
    "volumes": (),
}


# Pods stamped from one template parse to the same fields: what is parsed from a spec (with the
# namespace and labels it depends on) is reused. In the simulator such pods share one spec object,
# found by identity (the entry keeps a reference to the spec, so its id cannot be recycled while
# cached). Pods decoded from an apiserver each have their own copy, found by content: the spec's
# canonical JSON without `nodeName` (which parsing does not read), a few microseconds against a
# parse that costs well over a hundred.
#
# Both are kept small and hold little: in a cluster every Job's or gang's pods carry labels of their
# own, so entries keep coming; the identity cache keeps the spec itself alive (only the simulator's
# pods of one template, stamped in a row, find it), and the content cache is keyed by a digest of
# the content, not the content (a spec's JSON is kilobytes).
_SPEC_CACHE: dict[tuple[int, str, frozenset[tuple[str, str]]], tuple[Any, dict[str, Any]]] = {}
_SPEC_CONTENT_CACHE: dict[tuple[bytes, str, frozenset[tuple[str, str]]], dict[str, Any]] = {}
_SPEC_CACHE_LIMIT = 256
_SPEC_CONTENT_CACHE_LIMIT = 1024


def _spec_content(spec: Any) -> bytes | None:
    """A digest of the spec's canonical JSON (128 bits: two different specs never share one in
    practice)."""
    if not isinstance(spec, Mapping):
        return None
    try:
        without_node = {k: v for k, v in spec.items() if k != "nodeName"}
        content = orjson.dumps(without_node, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON (an object built in code, a YAML date): parsed without the cache
        return None
    return hashlib.blake2b(content, digest_size=16).digest()


def _remember(cache: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    if len(cache) >= limit:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _parse_spec_cached(obj: Mapping[str, Any], namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    spec = obj.get("spec")
    label_set = frozenset(labels.items())
    key = (id(spec), namespace, label_set)
    hit = _SPEC_CACHE.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    content = _spec_content(spec)
    if content is not None:
        found = _SPEC_CONTENT_CACHE.get((content, namespace, label_set))
        if found is not None:
            return found
    fields = _parse_spec(obj, namespace, labels)
    _remember(_SPEC_CACHE, key, (spec, fields), _SPEC_CACHE_LIMIT)
    if content is not None:
        _remember(_SPEC_CONTENT_CACHE, (content, namespace, label_set), fields, _SPEC_CONTENT_CACHE_LIMIT)
    return fields


def parse_pod(obj: Mapping[str, Any], *, creation_ts: float | None = None, uid: str | None = None) -> Pod:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    error: SpecError | None = None
    try:
        labels = _str_map(meta.get("labels"), "metadata.labels")
        annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    except SpecError as err:
        labels, annotations, error = {}, {}, err
    spec_raw = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec_raw, Mapping)
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    fields = _INVALID_DEFAULTS
    if error is None:
        try:
            fields = _parse_spec_cached(obj, namespace, labels)
        except SpecError as err:
            error = err
        except (TypeError, AttributeError, ValueError, KeyError) as err:
            error = SpecError("spec", f"malformed pod spec: {err}")
    owners = []
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping):
            owners.append(
                OwnerRef(
                    str(ref.get("kind", "")),
                    str(ref.get("name", "")),
                    str(ref.get("uid", "")),
                    bool(ref.get("controller", False)),
                )
            )
    raw_conditions = status.get("conditions")
    conditions = tuple(
        c for c in (raw_conditions if isinstance(raw_conditions, list) else ()) if isinstance(c, Mapping)
    )
    ts = creation_ts if creation_ts is not None else parse_timestamp(meta.get("creationTimestamp"))
    return Pod(
        namespace=namespace,
        name=name,
        key=f"{namespace}/{name}",
        uid=uid or str(meta.get("uid") or f"{namespace}/{name}"),
        labels=labels,
        annotations=annotations,
        scheduler_name=str(spec_raw.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
        node_name=str(spec_raw.get("nodeName") or ""),
        priority_class_name=fields["priority_class_name"] or str(spec_raw.get("priorityClassName") or ""),
        creation_ts=ts if ts is not None else 0.0,
        phase=str(status.get("phase") or "Pending"),
        deletion_ts=parse_timestamp(meta.get("deletionTimestamp")),
        nominated_node_name=str(status.get("nominatedNodeName") or ""),
        owners=tuple(owners),
        conditions=conditions,
        spec_error=error,
        raw=obj,
        # a generic ephemeral volume's claim is named after the pod, which the cached parse is not
        volumes=name_ephemeral_claims(fields["volumes"], name) if fields["volumes"] else (),
        **{k: v for k, v in fields.items() if k not in ("priority_class_name", "volumes")},
    )
