"""Hypothesis strategies for `koordpy simulate` input.

`scenarios()` draws valid scenarios: nodes (cpu, memory, pods, GPUs; hostname, zone, disk, tier,
spine and block labels, a hostname label now and then other than the name; taints; cordons),
PriorityClasses, Namespaces with labels, pods already running, pods to schedule (requests and limits,
init containers, nodeSelector, required node affinity, tolerations, required pod anti-affinity by
hostname and zone with namespaces and namespaceSelector, host ports, priorities, preemptionPolicy by
class, the non-preemptible labels, an unknown schedulerName), DoNotSchedule spread groups, gangs of
every kind (Koordinator annotations, PodGroups of both API groups, Strict and NonStrict, gang groups
across namespaces, network-topology gather rules), a ClusterNetworkTopology, PodDisruptionBudgets,
and workloads that stamp pods; optionally quantities beyond 2^53 canonical units.

`damaged_scenarios()` takes a valid scenario and damages one field of one object: deleted, null, of
the wrong type, a list where a map belongs (and back), huge, negative, nested deep, an unknown enum
value, garbage text, or a field added that the generator never writes; `gang_annotation_garbage()`
puts garbage in the gang annotations.

The generators are kept where the invariants in `tests.fuzz.invariants` are unambiguous: pods already
running fit their node and hold distinct host ports; a spread group's pods are the only pods its
selector counts, share one template and are never preemption victims; members of one gang share a
template and a priority; a gang group's gangs are Strict and agree on their group and gather rules.
Draws are made so that the simplest value hypothesis favours (and shrinks towards) is the plain one:
no taint, no constraint, roomy nodes.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import assume
from hypothesis import strategies as st

Doc = dict[str, Any]
Path = tuple[str | int, ...]
T = TypeVar("T")

# --------------------------------------------------------------------------------------------- names
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
DISK = "example.com/disk"
TIER = "example.com/tier"
ACCELERATOR = "example.com/accelerator"
GPU = "nvidia.com/gpu"
APP = "app"
# only the pods of one spread group carry this label, with the group's name
SPREAD_LABEL = "fuzz.koordpy.io/spread-group"
# the label of the Namespace objects, for namespaceSelector
NAMESPACE_TEAM = "fuzz.koordpy.io/team"
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"

# Koordinator's opt-outs from preemption: label -> the value that opts out
NON_PREEMPTIBLE_LABELS = {
    "scheduling.koordinator.sh/disable-preemptible": "true",
    "quota.scheduling.koordinator.sh/preemptible": "false",
}

GANG_PREFIX = "gang.scheduling.koordinator.sh"
GANG_NAME = f"{GANG_PREFIX}/name"
GANG_MIN = f"{GANG_PREFIX}/min-available"
GANG_TOTAL = f"{GANG_PREFIX}/total-number"
GANG_MODE = f"{GANG_PREFIX}/mode"
GANG_MATCH_POLICY = f"{GANG_PREFIX}/match-policy"
GANG_WAITING_TIME = f"{GANG_PREFIX}/waiting-time"
GANG_GROUPS = f"{GANG_PREFIX}/groups"
GANG_TOPOLOGY = f"{GANG_PREFIX}/network-topology-spec"
GANG_TOPOLOGY_INDEX = f"{GANG_PREFIX}/network-topology-index"
GANG_ANNOTATIONS = (
    GANG_NAME,
    GANG_MIN,
    GANG_TOTAL,
    GANG_MODE,
    GANG_MATCH_POLICY,
    GANG_WAITING_TIME,
    GANG_GROUPS,
    GANG_TOPOLOGY,
    GANG_TOPOLOGY_INDEX,
)
SIGS_GROUP = "scheduling.sigs.k8s.io"
X_K8S_GROUP = "scheduling.x-k8s.io"
SIGS_POD_LABEL = "pod-group.scheduling.sigs.k8s.io"
X_K8S_POD_LABEL = "scheduling.x-k8s.io/pod-group"
STRICT = "Strict"
NON_STRICT = "NonStrict"

SPINE_LAYER = "SpineLayer"
BLOCK_LAYER = "BlockLayer"
NODE_LAYER = "NodeTopologyLayer"
MUST_GATHER = "MustGather"
PREFER_GATHER = "PreferGather"

SCHEDULERS = ("default-scheduler", "koord-scheduler")
UNKNOWN_SCHEDULER = "fuzz-unknown-scheduler"
ZONES = ("zone-a", "zone-b", "zone-c")
SPINES = ("s1", "s2")
# the same block names under both spines: domains are told apart by their path, not their name
BLOCKS = ("b1", "b2")
APPS = ("web", "db", "cache", "batch")
HOST_PORTS = (80, 443, 9000)
HOST_IPS = (None, "0.0.0.0", "10.0.0.1", "10.0.0.2")
PROTOCOLS = (None, "TCP", "UDP")

# name -> (value, preemptionPolicy)
PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    "scavenger": (-10, "PreemptLowerPriority"),
    "low": (10, "PreemptLowerPriority"),
    "mid": (100, "PreemptLowerPriority"),
    "high": (1000, "PreemptLowerPriority"),
    "high-never": (1000, "Never"),
    "urgent": (5000, "PreemptLowerPriority"),
}

TAINTS: tuple[Doc, ...] = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
)
TOLERATIONS: tuple[Doc, ...] = (
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "dedicated", "value": "infra"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
    {"key": "spot", "operator": "Equal", "value": "true"},
    {"key": UNSCHEDULABLE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
)

TOPOLOGY_DOC: Doc = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "ClusterNetworkTopology",
    "metadata": {"name": "default"},
    "spec": {
        "networkTopologySpec": [
            {"topologyLayer": SPINE_LAYER, "labelKey": [SPINE]},
            {"topologyLayer": BLOCK_LAYER, "parentTopologyLayer": SPINE_LAYER, "labelKey": [BLOCK]},
            {"topologyLayer": NODE_LAYER, "parentTopologyLayer": BLOCK_LAYER},
        ]
    },
}


# Strategies are built once and draws are made by index: a new strategy object per draw costs
# Hypothesis a validation each time, which is most of the generation time of a scenario.
@functools.cache
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


def _int(draw: st.DrawFn, low: int, high: int) -> int:
    return draw(_ints(low, high))


def _pick(draw: st.DrawFn, values: Sequence[T]) -> T:
    return values[_int(draw, 0, len(values) - 1)]


def _chance(draw: st.DrawFn, one_in: int) -> bool:
    """True one time in `one_in`; False for the simplest draw, the one hypothesis favours and
    shrinks towards, so that rare features stay rare and shrinking takes them away."""
    return _int(draw, 0, one_in - 1) == one_in - 1


def _subset(draw: st.DrawFn, values: Sequence[T], low: int, high: int) -> list[T]:
    """Between `low` and `high` distinct elements of `values`, in a drawn order."""
    pool = list(values)
    out: list[T] = []
    for _ in range(_int(draw, low, min(high, len(pool)))):
        out.append(pool.pop(_int(draw, 0, len(pool) - 1)))
    return out


# --------------------------------------------------------------------------------------------- quantities
def _cpu_text(draw: st.DrawFn, milli: int) -> str | int:
    if milli % 1000 == 0:
        choices: list[str | int] = [milli // 1000, str(milli // 1000), f"{milli}m"]
        return _pick(draw, choices)
    return f"{milli}m"


def _memory_text(draw: st.DrawFn, mib: int) -> str | int:
    choices: list[str | int] = [f"{mib}Mi", mib * 2**20, str(mib * 2**20)]
    if mib % 1024 == 0:
        choices.append(f"{mib // 1024}Gi")
    return _pick(draw, choices)


def _count_text(draw: st.DrawFn, n: int) -> str | int:
    choices: list[str | int] = [n, str(n)]
    return _pick(draw, choices)


def _plain_cpu(value: str | int) -> int:
    text = str(value)
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000


def _plain_memory_mib(value: str | int) -> int:
    text = str(value)
    if text.endswith("Gi"):
        return int(text[:-2]) * 1024
    if text.endswith("Mi"):
        return int(text[:-2])
    return int(text) // 2**20


# --------------------------------------------------------------------------------------------- the world
@dataclass
class _World:
    """What the pods of a scenario are drawn against."""

    namespaces: tuple[str, ...]
    zones: tuple[str, ...]
    nodes: list[Doc]
    classes: dict[str, tuple[int, str]]
    topology: bool
    used: set[str] = field(default_factory=set)

    def unique(self, prefix: str) -> str:
        i = 0
        while f"{prefix}-{i}" in self.used:
            i += 1
        name = f"{prefix}-{i}"
        self.used.add(name)
        return name

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    @property
    def class_names(self) -> list[str | None]:
        """Highest value first, no class last: pods to place tend to outrank running ones."""
        return [*sorted(self.classes, key=lambda name: -self.classes[name][0]), None]


def _node(draw: st.DrawFn, name: str, zones: Sequence[str], slots: Sequence[tuple[str, str]]) -> Doc:
    # now and then a hostname label other than the node's name, which two nodes may share: a
    # topology key names a domain by the label's value, never by the node
    labels = {HOSTNAME: f"host-{_int(draw, 0, 2)}" if _chance(draw, 10) else name}
    if not _chance(draw, 8):
        labels[ZONE] = _pick(draw, zones)
    disk = _pick(draw, [None, "ssd", "hdd"])
    if disk:
        labels[DISK] = disk
    tier = _pick(draw, [None, "1", "2", "3", "4"])
    if tier:
        labels[TIER] = tier
    gpus = _pick(draw, [0, 0, 0, 2, 4, 8])
    if gpus:
        labels[ACCELERATOR] = _pick(draw, ["a100", "h100"])
    if slots:
        labels[SPINE], labels[BLOCK] = _pick(draw, slots)
    resources: Doc = {
        "cpu": _cpu_text(draw, _pick(draw, [8000, 16000, 4000, 4500, 2000, 1000])),
        "memory": _memory_text(draw, _pick(draw, [16384, 65536, 8192, 4096, 2048])),
        "pods": _count_text(draw, _pick(draw, [110, 110, 8, 4, 3, 2, 1])),
    }
    if gpus:
        resources[GPU] = _count_text(draw, gpus)
    node: Doc = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    spec: Doc = {}
    if _chance(draw, 4):
        # at most one taint of each key and effect, as the API server requires
        taints = _subset(draw, TAINTS, 1, 2)
        if len({(t["key"], t["effect"]) for t in taints}) == len(taints):
            spec["taints"] = copy.deepcopy(taints)
    if _chance(draw, 12):
        spec["unschedulable"] = True
    if spec:
        node["spec"] = spec
    # allocatable, or capacity alone (the simulator falls back to it)
    node["status"] = {"capacity" if _chance(draw, 8) else "allocatable": resources}
    return node


def node_allocatable(node: Doc) -> Doc:
    status = node["status"]
    found: Doc = status.get("allocatable") or status["capacity"]
    return found


# --------------------------------------------------------------------------------------------- pod parts
_CPU_REQUESTS = (None, 0, 100, 250, 500, 1000, 1500, 2000, 3000, 4000)
_MEMORY_REQUESTS = (None, 64, 256, 512, 1024, 2048, 4096, 8192)


def _requests(draw: st.DrawFn, gpu: bool, light: bool = False) -> Doc:
    out: Doc = {}
    cpu = _pick(draw, _CPU_REQUESTS[:6] if light else _CPU_REQUESTS)
    if cpu is not None:
        out["cpu"] = _cpu_text(draw, cpu)
    memory = _pick(draw, _MEMORY_REQUESTS[:5] if light else _MEMORY_REQUESTS)
    if memory is not None:
        out["memory"] = _memory_text(draw, memory)
    if gpu and _chance(draw, 16 if light else 8):
        out[GPU] = _pick(draw, [1, "1", 2, "4"])
    return out


def _resources(draw: st.DrawFn, gpu: bool, light: bool = False) -> Doc:
    """requests, limits alone (the request defaults to the limit), or both equal."""
    amounts = _requests(draw, gpu, light)
    if not amounts:
        return {}
    style = _pick(draw, ["requests", "requests", "limits", "both"])
    if style == "requests":
        return {"requests": amounts}
    if style == "limits":
        return {"limits": amounts}
    return {"requests": amounts, "limits": dict(amounts)}


def _host_ports(draw: st.DrawFn) -> list[Doc]:
    ports: list[Doc] = []
    seen: set[tuple[int, str]] = set()
    for i in range(_int(draw, 1, 2)):
        port = _pick(draw, HOST_PORTS)
        protocol = _pick(draw, PROTOCOLS)
        if (port, protocol or "TCP") in seen:
            continue
        seen.add((port, protocol or "TCP"))
        entry: Doc = {"containerPort": 8000 + i, "hostPort": port}
        if protocol:
            entry["protocol"] = protocol
        ip = _pick(draw, HOST_IPS)
        if ip:
            entry["hostIP"] = ip
        ports.append(entry)
    return ports


def _node_selector(draw: st.DrawFn, w: _World) -> dict[str, str]:
    which = _pick(draw, ["none", "none", "none", "zone", "disk", "accelerator"])
    if which == "zone":
        return {ZONE: _pick(draw, w.zones)}
    if which == "disk":
        return {DISK: _pick(draw, ["ssd", "hdd"])}
    if which == "accelerator":
        return {ACCELERATOR: "a100"}
    return {}


def _requirement(draw: st.DrawFn, w: _World) -> tuple[str, Doc]:
    """("matchExpressions" | "matchFields", requirement)."""
    which = _pick(
        draw,
        ["zone-in", "zone-notin", "disk-notin", "acc-exists", "disk-absent", "tier-gt", "tier-lt", "name"],
    )
    if which == "zone-in":
        return "matchExpressions", {"key": ZONE, "operator": "In", "values": _subset(draw, w.zones, 1, 2)}
    if which == "zone-notin":
        return "matchExpressions", {"key": ZONE, "operator": "NotIn", "values": [_pick(draw, w.zones)]}
    if which == "disk-notin":
        return "matchExpressions", {"key": DISK, "operator": "NotIn", "values": ["hdd"]}
    if which == "acc-exists":
        return "matchExpressions", {"key": ACCELERATOR, "operator": "Exists"}
    if which == "disk-absent":
        return "matchExpressions", {"key": DISK, "operator": "DoesNotExist"}
    if which in ("tier-gt", "tier-lt"):
        operator = "Gt" if which == "tier-gt" else "Lt"
        return "matchExpressions", {"key": TIER, "operator": operator, "values": [_pick(draw, "1234")]}
    operator = _pick(draw, ["In", "NotIn"])
    return "matchFields", {
        "key": "metadata.name",
        "operator": operator,
        "values": [_pick(draw, w.node_names)],
    }


def _required_node_affinity(draw: st.DrawFn, w: _World) -> Doc | None:
    if not _chance(draw, 4):
        return None
    terms = []
    for _ in range(_int(draw, 1, 2)):
        term: Doc = {}
        for _ in range(_int(draw, 1, 2)):
            where, requirement = _requirement(draw, w)
            term.setdefault(where, []).append(requirement)
        terms.append(term)
    return {"nodeSelectorTerms": terms}


def _anti_affinity_terms(draw: st.DrawFn, w: _World) -> list[Doc]:
    terms = []
    for _ in range(_pick(draw, [0, 0, 0, 1, 1, 2])):
        shape = _pick(draw, ["labels", "labels", "in", "exists"])
        selector: Doc
        if shape == "labels":
            selector = {"matchLabels": {APP: _pick(draw, APPS)}}
        elif shape == "in":
            selector = {
                "matchExpressions": [{"key": APP, "operator": "In", "values": _subset(draw, APPS, 1, 2)}]
            }
        else:
            selector = {"matchExpressions": [{"key": APP, "operator": "Exists"}]}
        term: Doc = {"labelSelector": selector, "topologyKey": _pick(draw, [HOSTNAME, HOSTNAME, ZONE])}
        if len(w.namespaces) > 1 and _chance(draw, 3):
            term["namespaces"] = _subset(draw, w.namespaces, 1, 2)
        if _chance(draw, 4):
            # with or without namespaces: the term selects the union
            term["namespaceSelector"] = _pick(draw, [{}, {"matchLabels": {NAMESPACE_TEAM: "b"}}])
        terms.append(term)
    return terms


@dataclass
class PodTemplate:
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: Doc


_DRAW = object()  # a template's priority class or scheduler name is drawn


def _pod_template(
    draw: st.DrawFn,
    w: _World,
    *,
    ports: bool = True,
    anti_affinity: bool = True,
    placement: bool = True,
    priority_class: object = _DRAW,
    scheduler: object = _DRAW,
    light: bool = False,
) -> PodTemplate:
    """A pod's labels, annotations and spec; `priority_class` and `scheduler` are drawn unless
    given. A `light` pod asks for less and is constrained less often: the template of pods that
    must be placed together."""
    labels = {APP: _pick(draw, APPS)}
    if _chance(draw, 5):
        key = _pick(draw, sorted(NON_PREEMPTIBLE_LABELS))
        labels[key] = NON_PREEMPTIBLE_LABELS[key]
    host_ports = _host_ports(draw) if ports and _chance(draw, 4) else []
    containers: list[Doc] = []
    for i in range(_pick(draw, [1, 1, 2])):
        container: Doc = {"name": f"c{i}", "image": "registry.example/app:1"}
        resources = _resources(draw, gpu=True, light=light)
        if resources:
            container["resources"] = resources
        if i == 0 and host_ports:
            container["ports"] = host_ports
        containers.append(container)
    spec: Doc = {"containers": containers}
    if _chance(draw, 6):
        init: Doc = {"name": "init", "image": "registry.example/init:1"}
        resources = _resources(draw, gpu=False)
        if resources:
            init["resources"] = resources
        spec["initContainers"] = [init]
    if placement and (not light or _chance(draw, 3)):
        selector = _node_selector(draw, w)
        if selector:
            spec["nodeSelector"] = selector
        required = _required_node_affinity(draw, w)
        if required is not None:
            spec.setdefault("affinity", {})["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": required
            }
        if _chance(draw, 3):
            spec["tolerations"] = copy.deepcopy(_subset(draw, TOLERATIONS, 1, 2))
    if anti_affinity and (not light or _chance(draw, 2)):
        terms = _anti_affinity_terms(draw, w)
        if terms:
            spec.setdefault("affinity", {})["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": terms
            }
    if priority_class is _DRAW:
        priority_class = _pick(draw, w.class_names)
    if isinstance(priority_class, str):
        spec["priorityClassName"] = priority_class
        if _chance(draw, 4):
            # admission accepts a policy that agrees with the class
            spec["preemptionPolicy"] = w.classes[priority_class][1]
    if scheduler is _DRAW:
        scheduler = UNKNOWN_SCHEDULER if _chance(draw, 25) else _pick(draw, [None, None, *SCHEDULERS])
    if isinstance(scheduler, str):
        spec["schedulerName"] = scheduler
    if _chance(draw, 3):
        spec["terminationGracePeriodSeconds"] = _pick(draw, [0, 5, 30])
    return PodTemplate(labels, {}, spec)


def _pod(name: str, namespace: str, t: PodTemplate) -> Doc:
    meta: Doc = {"name": name, "labels": dict(t.labels)}
    if namespace != "default":
        meta["namespace"] = namespace
    if t.annotations:
        meta["annotations"] = dict(t.annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(t.spec)}


def _workload(kind: str, name: str, namespace: str, t: PodTemplate, count: int) -> Doc:
    template_meta: Doc = {"labels": dict(t.labels)}
    if t.annotations:
        template_meta["annotations"] = dict(t.annotations)
    meta: Doc = {"name": name}
    if namespace != "default":
        meta["namespace"] = namespace
    spec: Doc = {"template": {"metadata": template_meta, "spec": copy.deepcopy(t.spec)}}
    if kind == "Job":
        spec["parallelism"] = count
        spec["template"]["spec"]["restartPolicy"] = "Never"
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
    spec["replicas"] = count
    spec["selector"] = {"matchLabels": dict(t.labels)}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec}


def _pods_of(
    draw: st.DrawFn, w: _World, prefix: str, namespace: str, t: PodTemplate, count: int
) -> list[Doc]:
    """`count` pods of one template: separate Pod objects, or one workload that stamps them."""
    kind = _pick(draw, ["Pod", "Pod", "ReplicaSet", "Deployment", "StatefulSet", "Job"])
    if kind == "Pod":
        return [_pod(w.unique(prefix), namespace, t) for _ in range(count)]
    return [_workload(kind, w.unique(prefix), namespace, t, count)]


# --------------------------------------------------------------------------------------------- pods
def _running_pods(draw: st.DrawFn, w: _World, scale: int) -> list[Doc]:
    """Pods already bound (spec.nodeName), each fitting what the earlier ones left of its node, with
    host ports unique on the node."""
    free: dict[str, dict[str, int]] = {}
    for node_doc in w.nodes:
        alloc = node_allocatable(node_doc)
        free[node_doc["metadata"]["name"]] = {
            "cpu": _plain_cpu(alloc["cpu"]),
            "memory": _plain_memory_mib(alloc["memory"]),
            "pods": int(alloc["pods"]),
            GPU: int(alloc.get(GPU, 0)),
        }
    ports_used: dict[str, set[int]] = {name: set() for name in free}
    pods: list[Doc] = []
    # lowest priority first: what runs already is what preemption may have to make room from
    classes = sorted(w.classes, key=lambda name: w.classes[name][0])
    for _ in range(scale * _pick(draw, [4, 0, 2, 6, 8, 10])):
        node = _pick(draw, w.node_names)
        room = free[node]
        if room["pods"] < 1:
            continue
        # the largest that fits first: nodes fill up, and pods to come must preempt
        cpu = _pick(draw, [c for c in (8000, 4000, 2000, 2000, 1000, 500, 0) if c <= room["cpu"]])
        memory = _pick(draw, [m for m in (4096, 1024, 256, 0) if m <= room["memory"]])
        gpus = _pick(draw, [g for g in (0, 1, 2) if g <= room[GPU]])
        room["cpu"] -= cpu
        room["memory"] -= memory
        room[GPU] -= gpus
        room["pods"] -= 1
        priority = _pick(draw, [*classes, None]) if classes else None
        t = _pod_template(draw, w, ports=False, placement=False, priority_class=priority)
        requests: Doc = {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}
        if gpus:
            requests[GPU] = gpus
        t.spec["containers"] = [
            {"name": "c0", "image": "registry.example/app:1", "resources": {"requests": requests}}
        ]
        t.spec.pop("initContainers", None)
        port = _pick(draw, [None, None, *HOST_PORTS])
        if port is not None and port not in ports_used[node]:
            ports_used[node].add(port)
            t.spec["containers"][0]["ports"] = [{"containerPort": 8000, "hostPort": port}]
        t.spec["nodeName"] = node
        pods.append(_pod(w.unique("running"), _pick(draw, w.namespaces), t))
    return pods


def _free_pods(draw: st.DrawFn, w: _World) -> list[list[Doc]]:
    chunks: list[list[Doc]] = []
    for _ in range(_int(draw, 0, 5)):
        t = _pod_template(draw, w)
        count = _pick(draw, [1, 1, 1, 2, 3])
        chunks.append(_pods_of(draw, w, "pod", _pick(draw, w.namespaces), t, count))
    return chunks


def _spread_group(draw: st.DrawFn, w: _World) -> list[Doc]:
    """Pods of one template whose DoNotSchedule constraints select exactly the group."""
    group = w.unique("spread")
    namespace = _pick(draw, w.namespaces)
    t = _pod_template(draw, w, light=True)
    t.labels[SPREAD_LABEL] = group
    # never victims: a victim taken out of a domain could leave the others too far ahead
    key = _pick(draw, sorted(NON_PREEMPTIBLE_LABELS))
    t.labels[key] = NON_PREEMPTIBLE_LABELS[key]
    constraints: list[Doc] = []
    for topology_key in _subset(draw, [ZONE, HOSTNAME], 1, 2):
        c: Doc = {
            "maxSkew": _int(draw, 1, 2),
            "topologyKey": topology_key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {SPREAD_LABEL: group}},
        }
        if _chance(draw, 4):
            c["minDomains"] = _int(draw, 1, 3)
        for field_name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = _pick(draw, [None, None, "Honor", "Ignore"])
            if policy:
                c[field_name] = policy
        constraints.append(c)
    if _chance(draw, 4):
        constraints.append(
            {
                "maxSkew": 1,
                "topologyKey": DISK,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {SPREAD_LABEL: group}},
            }
        )
    t.spec["topologySpreadConstraints"] = constraints
    return _pods_of(draw, w, group, namespace, t, _int(draw, 2, 5))


# --------------------------------------------------------------------------------------------- gangs
_GATHER_SHAPES = (
    ((BLOCK_LAYER, MUST_GATHER),),
    ((SPINE_LAYER, MUST_GATHER),),
    ((BLOCK_LAYER, PREFER_GATHER),),
    ((SPINE_LAYER, PREFER_GATHER), (BLOCK_LAYER, MUST_GATHER)),
    ((SPINE_LAYER, MUST_GATHER), (BLOCK_LAYER, PREFER_GATHER)),
)


def _gather_spec(draw: st.DrawFn) -> str:
    """A gang's network-topology-spec annotation."""
    rules = []
    for layer, strategy in _pick(draw, _GATHER_SHAPES):
        rule: Doc = {"layer": layer, "strategy": strategy}
        if _chance(draw, 5):
            rule["podCountMultiple"] = _pick(draw, [1, 2])
        rules.append(rule)
    return json.dumps({"gatherStrategy": rules})


def has_must_gather(spec: str | None) -> bool:
    if not spec:
        return False
    return any(r["strategy"] == MUST_GATHER for r in json.loads(spec)["gatherStrategy"])


@dataclass(frozen=True)
class GangPlan:
    name: str
    namespace: str
    style: str  # "annotation", "sigs" or "x-k8s"
    min_member: int
    count: int
    mode: str | None  # None: the default (Strict)
    groups: tuple[str, ...] = ()
    topology: str | None = None


def _gang_docs(draw: st.DrawFn, plan: GangPlan, t: PodTemplate) -> list[Doc]:
    annotations: dict[str, str] = {}
    docs: list[Doc] = []
    if plan.mode is not None:
        annotations[GANG_MODE] = plan.mode
    if plan.groups:
        annotations[GANG_GROUPS] = json.dumps(list(plan.groups))
    if plan.topology is not None:
        annotations[GANG_TOPOLOGY] = plan.topology
    labels = dict(t.labels)
    if plan.style == "annotation":
        annotations[GANG_NAME] = plan.name
        annotations[GANG_MIN] = str(plan.min_member)
        pod_annotations = annotations
    else:
        group = SIGS_GROUP if plan.style == "sigs" else X_K8S_GROUP
        labels[SIGS_POD_LABEL if plan.style == "sigs" else X_K8S_POD_LABEL] = plan.name
        meta: Doc = {"name": plan.name}
        if plan.namespace != "default":
            meta["namespace"] = plan.namespace
        if plan.style == "sigs" and annotations:
            meta["annotations"] = annotations
        spec: Doc = {"minMember": plan.min_member}
        if _chance(draw, 4):
            spec["scheduleTimeoutSeconds"] = _pick(draw, [10, 120])
        docs.append({"apiVersion": f"{group}/v1alpha1", "kind": "PodGroup", "metadata": meta, "spec": spec})
        pod_annotations = {}
    member = PodTemplate(labels, pod_annotations, t.spec)
    kind = _pick(draw, ["Pod", "Pod", "Job", "StatefulSet"])
    if kind == "Pod":
        docs += [_pod(f"{plan.name}-m{i}", plan.namespace, member) for i in range(plan.count)]
    elif plan.count:
        docs.append(_workload(kind, f"{plan.name}-w", plan.namespace, member, plan.count))
    return docs


def _gang_template(draw: st.DrawFn, w: _World) -> PodTemplate:
    scheduler = _pick(draw, SCHEDULERS)
    return _pod_template(draw, w, priority_class=_pick(draw, w.class_names), scheduler=scheduler, light=True)


def _member_count(
    draw: st.DrawFn, min_member: int, topology: str | None, extra_must_gather: bool, *, at_least_one: bool
) -> int:
    if _chance(draw, 6) and (min_member > 1 or not at_least_one):
        return min_member - 1  # never enough members
    if has_must_gather(topology) and not extra_must_gather:
        return min_member
    return min_member + _pick(draw, [0, 0, 1, 2])


def _reserve_member_names(w: _World, name: str) -> None:
    w.used.update({f"{name}-w", *(f"{name}-m{i}" for i in range(8))})


def _gangs(draw: st.DrawFn, w: _World, extra_must_gather: bool) -> list[list[Doc]]:
    chunks: list[list[Doc]] = []
    for _ in range(_pick(draw, [1, 0, 1, 2, 3])):
        name = w.unique("gang")
        _reserve_member_names(w, name)
        style = _pick(draw, ["annotation", "sigs", "x-k8s"])
        min_member = _int(draw, 1, 4)
        gathers = style != "x-k8s" and _chance(draw, 2 if w.topology else 6)
        topology = _gather_spec(draw) if gathers else None
        plan = GangPlan(
            name=name,
            namespace=_pick(draw, w.namespaces),
            style=style,
            min_member=min_member,
            count=_member_count(draw, min_member, topology, extra_must_gather, at_least_one=False),
            mode=None if style == "x-k8s" else _pick(draw, [None, STRICT, NON_STRICT]),
            topology=topology,
        )
        chunks.append(_gang_docs(draw, plan, _gang_template(draw, w)))
    if _chance(draw, 3):
        chunks += _gang_group(draw, w, extra_must_gather)
    return chunks


def _must_gather_gang(draw: st.DrawFn, w: _World) -> list[Doc]:
    """A gang with a MustGather rule and more members than its minimum."""
    name = w.unique("gather")
    _reserve_member_names(w, name)
    min_member = _int(draw, 1, 3)
    rules = [{"layer": _pick(draw, [BLOCK_LAYER, SPINE_LAYER]), "strategy": MUST_GATHER}]
    plan = GangPlan(
        name=name,
        namespace=_pick(draw, w.namespaces),
        style=_pick(draw, ["annotation", "sigs"]),
        min_member=min_member,
        count=min_member + _int(draw, 1, 3),
        mode=_pick(draw, [None, STRICT, NON_STRICT]),
        topology=json.dumps({"gatherStrategy": rules}),
    )
    return _gang_docs(draw, plan, _gang_template(draw, w))


def _gang_group(draw: st.DrawFn, w: _World, extra_must_gather: bool) -> list[list[Doc]]:
    """Two or three Strict gangs released together, agreeing on the group and the gather rules;
    the gangs may be of different namespaces."""
    names = [w.unique("grp") for _ in range(_int(draw, 2, 3))]
    for name in names:
        _reserve_member_names(w, name)
    spans = _chance(draw, 3)
    first = _pick(draw, w.namespaces)
    namespaces = {name: _pick(draw, w.namespaces) if spans else first for name in names}
    ids = tuple(sorted(f"{namespaces[n]}/{n}" for n in names))
    topology = _gather_spec(draw) if _chance(draw, 2 if w.topology else 6) else None
    shared = _gang_template(draw, w) if _chance(draw, 2) else None
    chunks = []
    for name in names:
        min_member = _int(draw, 1, 3)
        plan = GangPlan(
            name=name,
            namespace=namespaces[name],
            style=_pick(draw, ["annotation", "sigs"]),
            min_member=min_member,
            count=_member_count(draw, min_member, topology, extra_must_gather, at_least_one=True),
            mode=_pick(draw, [None, STRICT]),
            groups=ids,
            topology=topology,
        )
        chunks.append(_gang_docs(draw, plan, shared if shared is not None else _gang_template(draw, w)))
    return chunks


# --------------------------------------------------------------------------------------------- the rest
def _priority_class(name: str, global_default: bool) -> Doc:
    value, policy = PRIORITY_CLASSES[name]
    doc: Doc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
    doc["value"] = value
    if policy != "PreemptLowerPriority":
        doc["preemptionPolicy"] = policy
    if global_default:
        doc["globalDefault"] = True
    return doc


def _namespace(name: str, team: str) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {NAMESPACE_TEAM: team}},
    }


def _pdb(draw: st.DrawFn, w: _World) -> Doc:
    spec: Doc = {"selector": {"matchLabels": {APP: _pick(draw, APPS)}}}
    if _chance(draw, 2):
        spec["minAvailable"] = _pick(draw, [1, 2, "50%"])
    else:
        spec["maxUnavailable"] = _pick(draw, [0, 1, "50%"])
    meta: Doc = {"name": w.unique("pdb")}
    namespace = _pick(draw, w.namespaces)
    if namespace != "default":
        meta["namespace"] = namespace
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, "spec": spec}


def _scenario(draw: st.DrawFn, extra_must_gather: bool, must_gather: bool = False) -> list[Doc]:
    namespaces = _pick(draw, [("default",), ("default",), ("default", "team-b")])
    zones = ZONES[: _int(draw, 1, 3)]
    topology = must_gather or _chance(draw, 2)
    slots: list[tuple[str, str]] = []
    if topology:
        for spine in SPINES[: _int(draw, 1, 2)]:
            slots += [(spine, block) for block in BLOCKS[: _int(draw, 1, 2)]]
    # now and then a larger cluster, with more of everything on it
    scale = _pick(draw, [1, 1, 1, 1, 2, 3])
    nodes = [_node(draw, f"node-{i}", zones, slots) for i in range(scale * _pick(draw, [3, 1, 2, 4, 5, 6]))]
    class_names = _subset(draw, sorted(PRIORITY_CLASSES), 1, 4) if not _chance(draw, 5) else []
    default = _pick(draw, [None, None, *class_names])
    classes = {name: PRIORITY_CLASSES[name] for name in class_names}
    w = _World(namespaces, zones, nodes, classes, topology, used={n["metadata"]["name"] for n in nodes})

    chunks: list[list[Doc]] = [[_priority_class(n, n == default)] for n in class_names]
    chunks += [[node] for node in nodes]
    if must_gather or (topology and not _chance(draw, 8)):
        chunks.append([copy.deepcopy(TOPOLOGY_DOC)])
    if len(namespaces) > 1:
        chunks += [[_namespace(name, team)] for name, team in zip(namespaces, "ab", strict=True)]
    chunks += [[pod] for pod in _running_pods(draw, w, scale)]
    for _ in range(scale):
        chunks += _free_pods(draw, w)
        for _ in range(_pick(draw, [0, 0, 1, 2])):
            chunks.append(_spread_group(draw, w))
        chunks += _gangs(draw, w, extra_must_gather)
    if must_gather:
        chunks.append(_must_gather_gang(draw, w))
    if _chance(draw, 3):
        chunks.append([_pdb(draw, w)])
    # in any order: objects are read in order, pods created in order
    pool = list(range(len(chunks)))
    order = [pool.pop(_int(draw, 0, len(pool) - 1)) for _ in range(len(chunks))]
    return [doc for i in order for doc in chunks[i]]


# Valid quantities on both sides of 2^53 canonical units (~9.007e12 cores, 8 PiB), all within the
# int64 milli-units kube-scheduler compares exactly: nodes larger than any real one, pods that ask
# for more than some of them have.
HUGE_NODE_CPU = ("5000000000000", "50000000000000", "1000000000000000")
HUGE_POD_CPU = ("4000000000000", "60000000000000", "2000000000000000")
HUGE_NODE_MEMORY = ("4Pi", "10Pi", "100Pi", "5Ei")
HUGE_POD_MEMORY = ("3Pi", "20Pi", "1Ei")


def _pod_specs(doc: Doc) -> list[Doc]:
    """The specs of the pods a document creates that are not running yet."""
    if doc["kind"] == "Pod":
        return [] if doc["spec"].get("nodeName") else [doc["spec"]]
    if doc["kind"] in ("ReplicaSet", "Deployment", "StatefulSet", "Job"):
        return [doc["spec"]["template"]["spec"]]
    return []


def _enlarge(draw: st.DrawFn, docs: list[Doc]) -> None:
    """Huge allocatable for some nodes (never less than before: running pods still fit) and huge
    requests for some containers of the pods to place."""
    for doc in docs:
        if doc["kind"] == "Node":
            alloc = node_allocatable(doc)
            if _chance(draw, 2):
                alloc["cpu"] = _pick(draw, HUGE_NODE_CPU)
            if _chance(draw, 2):
                alloc["memory"] = _pick(draw, HUGE_NODE_MEMORY)
        for spec in _pod_specs(doc):
            for container in spec["containers"]:
                for amounts in (container.get("resources") or {}).values():
                    if _chance(draw, 3):
                        amounts["cpu"] = _pick(draw, HUGE_POD_CPU)
                    if _chance(draw, 4):
                        amounts["memory"] = _pick(draw, HUGE_POD_MEMORY)


@st.composite
def scenarios(
    draw: st.DrawFn, *, extra_must_gather_members: bool = False, huge_quantities: bool = False
) -> list[Doc]:
    """A valid scenario, as the list of objects of its manifests.

    With `extra_must_gather_members`, gangs with a MustGather rule may have more members than
    their minimum; otherwise they have at most their minimum. With `huge_quantities`, some nodes
    and requests are beyond 2^53 canonical units (the amounts of a container's requests and limits
    may then differ: a limit is never checked against a request)."""
    docs = _scenario(draw, extra_must_gather_members)
    if huge_quantities and _chance(draw, 2):
        _enlarge(draw, docs)
    return docs


@st.composite
def must_gather_scenarios(draw: st.DrawFn) -> list[Doc]:
    """A valid scenario with a ClusterNetworkTopology and at least one MustGather gang that has
    more members than its minimum."""
    return _scenario(draw, extra_must_gather=True, must_gather=True)


# ============================================================================================= damage
DELETE = "delete"
INSERT = "insert"
FAMILIES = ("delete", "null", "type", "swap", "huge", "negative", "nest", "enum", "garbage", INSERT)
# what the insert family adds: fields of the objects the generator never writes (or not there)
INSERTED_FIELDS = (
    "status",
    "spec",
    "metadata",
    "nodeName",
    "priority",
    "overhead",
    "schedulingGates",
    "initContainers",
    "nominatedNodeName",
    "deletionTimestamp",
    "creationTimestamp",
    "ownerReferences",
    "uid",
    "namespace",
    "labels",
    "annotations",
    "conditions",
    "startTime",
    "phase",
    "minResources",
    "scheduleTimeoutSeconds",
    "completions",
    "suspend",
    "completionMode",
    "disruptionsAllowed",
    "unschedulable",
    "taints",
    "images",
    "restartPolicy",
    "matchLabelKeys",
    "mismatchLabelKeys",
    "namespaceSelector",
    "namespaces",
    "preemptionPolicy",
    "globalDefault",
    "value",
    "items",
    "podAffinity",
    "preferredDuringSchedulingIgnoredDuringExecution",
    "topologySpreadConstraints",
    "minDomains",
    "hostIP",
    "protocol",
)

HUGE_VALUES: tuple[Any, ...] = (
    10**30,
    -(10**30),
    2**63,
    2**64,
    -(2**63) - 1,
    "1e18",
    "1e30",
    "1e18m",
    "99999999999999999999Gi",
    "9Ei",
    1e308,
    float("inf"),
    float("nan"),
)
WRONG_TYPES: tuple[Any, ...] = (True, False, 0, 1, 1.5, "text", "", [], {}, [1, "a"], {"x": 1}, [[]])
UNKNOWN_ENUMS = ("Bogus", "", "noschedule", "TCPX", "mustgather", "Exists ", "in", "NEVER", "Honour")
GARBAGE = (
    "",
    " ",
    "null",
    "~",
    "[[",
    "{",
    "}{",
    "0x10",
    "1e999999999",
    "-1",
    "NaN",
    "\u0000",
    "\ufeff",
    "\U0001f642",
    "a" * 2000,
    "\t\n",
    "true",
    "1/2",
)
# what a gang annotation may be garbled into: near misses of every syntax they are read in
GANG_GARBAGE = (
    *GARBAGE,
    "0",
    "2147483648",
    "99999999999999999999999999",
    " 3 ",
    "+2",
    "1.5",
    "1e3",
    "[]",
    "[1]",
    '["x"]',
    '["default/"]',
    '["/x"]',
    '["a/b/c"]',
    '"default/x"',
    "{}",
    '{"gatherStrategy": 5}',
    '{"gatherStrategy": [5]}',
    '{"gatherStrategy": [{}]}',
    '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": -1}]}',
    '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 1e30}]}',
    '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", '
    '"podCountMultiple": 1000000000000000000000000000000}]}',
    '{"gatherStrategy": [{"layer": "blocklayer", "strategy": "MustGather"}]}',
    '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}, '
    '{"layer": "BlockLayer", "strategy": "PreferGather"}]}',
    '{"gatherStrategy": [{"layer": "NodeTopologyLayer", "strategy": "MustGather"}]}',
    '{"gatherStrategy": [{"layer": "ClusterTopologyLayer", "strategy": "MustGather"}]}',
    '{"gatherStrategy": null, "extra": 1}',
    "NonStrict ",
    "strict",
    "1h",
    "-5s",
    "0s",
    "1e400s",
    "9999999999999h",
    "once-satisfied ",
)


@dataclass(frozen=True)
class Damage:
    """One field of one object changed: `value` put at `path` (or the key deleted)."""

    doc_index: int
    kind: str
    path: Path
    family: str
    value: Any = None

    @property
    def deleted(self) -> bool:
        return self.family == DELETE

    def describe(self) -> str:
        where = ".".join(str(p) for p in self.path)
        if self.deleted:
            return f"document {self.doc_index + 1} ({self.kind}): {where} deleted"
        shown = repr(self.value)
        if len(shown) > 120:
            shown = shown[:120] + "..."
        return f"document {self.doc_index + 1} ({self.kind}): {where} = {shown} ({self.family})"


@dataclass(frozen=True)
class Damaged:
    docs: list[Doc]
    damage: Damage


def paths_of(node: Any, prefix: Path = ()) -> list[Path]:
    """Every path into a document, parents before children."""
    out: list[Path] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*prefix, key))
            out += paths_of(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.append((*prefix, i))
            out += paths_of(value, (*prefix, i))
    return out


def value_at(doc: Any, path: Path) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def apply_damage(docs: list[Doc], damage: Damage) -> list[Doc]:
    out = copy.deepcopy(docs)
    parent = value_at(out[damage.doc_index], damage.path[:-1])
    last = damage.path[-1]
    if damage.deleted:
        del parent[last]
    else:
        parent[last] = copy.deepcopy(damage.value)
    return out


def _nested(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"x": value}
    return value


_TEXT = st.text(max_size=16)


def _garbage(draw: st.DrawFn, choices: Sequence[str]) -> str:
    return _pick(draw, choices) if _chance(draw, 2) else draw(_TEXT)


def _damage_value(draw: st.DrawFn, family: str, current: Any) -> Any:
    if family == "null":
        return None
    if family == "type":
        return _pick(draw, [v for v in WRONG_TYPES if type(v) is not type(current)])
    if family == "swap":
        if isinstance(current, dict):
            return _pick(draw, [[current], [list(item) for item in current.items()]])
        if isinstance(current, list):
            return {str(i): v for i, v in enumerate(current)}
        return _pick(draw, [[current], {"value": current}])
    if family == "huge":
        return _pick(draw, HUGE_VALUES)
    if family == "negative":
        if isinstance(current, bool) or not isinstance(current, int | float | str):
            return -1
        if isinstance(current, int | float):
            return -abs(current) - 1
        return f"-{current}" if current else "-1"
    if family == "nest":
        return _nested(current, _int(draw, 20, 150), _chance(draw, 2))
    if family == "enum":
        return _pick(draw, UNKNOWN_ENUMS)
    return _garbage(draw, GARBAGE)


Where = Callable[[str, Path], bool]


def everywhere(kind: str, path: Path) -> bool:
    return True


@st.composite
def damaged_scenarios(
    draw: st.DrawFn,
    *,
    where: Where = everywhere,
    families: Sequence[str] = FAMILIES,
    exclude: Callable[[Damage], bool] | None = None,
    child: str | None = None,
) -> Damaged:
    """A valid scenario with one field of one object damaged. `where(kind, path)` limits the fields
    that may be damaged, `families` the kinds of damage; a damage `exclude` accepts is replaced by
    garbage text in the same field (or, if that is excluded too, by an unknown kind). With `child`,
    `where` selects objects and their field `child` is damaged (set if it is absent)."""
    docs = _scenario(draw, extra_must_gather=False)
    family = _pick(draw, families)
    if family == INSERT and child is None:
        # a field added to an object (or to an object inside one): the targets are the objects
        objects = [
            (i, p)
            for i, doc in enumerate(docs)
            for p in [(), *paths_of(doc)]
            if isinstance(value_at(doc, p), dict) and where(doc["kind"], p)
        ]
        index, path = _pick(draw, objects)
        targets = [(index, (*path, _pick(draw, INSERTED_FIELDS)))]
        family = _pick(draw, [f for f in FAMILIES if f not in (DELETE, INSERT)])
    else:
        targets = [(i, p) for i, doc in enumerate(docs) for p in paths_of(doc) if where(doc["kind"], p)]
        if child is not None:
            targets = [(i, (*p, child)) for i, p in targets if isinstance(value_at(docs[i], p), dict)]
    if not targets:
        # nothing of that kind in this scenario: damage a kind instead
        targets, family = [(0, ("kind",))], "enum"
    family = "garbage" if family == INSERT else family
    index, path = _pick(draw, targets)
    parent = value_at(docs[index], path[:-1])
    present = path[-1] in parent if isinstance(parent, dict) else True
    if family == DELETE and not (isinstance(parent, dict) and present):
        family = "null"
    current = parent[path[-1]] if present else None
    value = None if family == DELETE else _damage_value(draw, family, current)
    damage = Damage(index, docs[index]["kind"], path, family, value)
    if exclude is not None and exclude(damage):
        damage = Damage(index, docs[index]["kind"], path, "garbage", "\u0000garbage")
        if exclude(damage):
            damage = Damage(0, docs[0]["kind"], ("kind",), "enum", "Bogus")
    return Damaged(apply_damage(docs, damage), damage)


def _gang_annotation_target(doc: Doc) -> list[Path]:
    """Where a document holds gang annotations (or PodGroup labels): its own or its template's."""
    out: list[Path] = []
    for meta_path in (("metadata",), ("spec", "template", "metadata")):
        try:
            meta = value_at(doc, meta_path)
        except (KeyError, TypeError):
            continue
        if not isinstance(meta, dict):
            continue
        annotations = meta.get("annotations") or {}
        for key in annotations:
            if key.startswith(GANG_PREFIX):
                out.append((*meta_path, "annotations", key))
        for key in meta.get("labels") or {}:
            if key in (SIGS_POD_LABEL, X_K8S_POD_LABEL):
                out.append((*meta_path, "labels", key))
        if any(k.startswith(GANG_PREFIX) for k in annotations):
            # an annotation the gang does not have yet
            missing = [k for k in GANG_ANNOTATIONS if k not in annotations]
            out += [(*meta_path, "annotations", k) for k in missing]
    return out


@st.composite
def gang_annotation_garbage(draw: st.DrawFn) -> Damaged:
    """A valid scenario with one gang annotation (or PodGroup label) of one object garbled."""
    docs = _scenario(draw, extra_must_gather=False)
    targets = [(i, p) for i, doc in enumerate(docs) for p in _gang_annotation_target(doc)]
    assume(targets)
    index, path = _pick(draw, targets)
    damage = Damage(index, docs[index]["kind"], path, "garbage", _garbage(draw, GANG_GARBAGE))
    return Damaged(apply_damage(docs, damage), damage)
