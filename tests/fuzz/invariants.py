"""Invariants every `koordpy simulate` report keeps, checked against the scenario's manifests.

The manifests are read here on their own, without koordpy's parsers, for the part of the API that
`tests.fuzz.strategies` generates, with the semantics of kube-scheduler and Koordinator:

- the report lists every input pod once, in input order; a pod already running stays on its node;
- no node holds more than its allocatable of any resource, or more pods than its `pods`;
- a pod the scheduler placed matches its nodeSelector and required node affinity, tolerates every
  NoSchedule and NoExecute taint of its node (and the cordon), shares no host port with another
  pod of the node (same port and protocol, same host IP or either one 0.0.0.0), shares no topology
  domain with a pod its required anti-affinity selects (or that selects it), and keeps its
  DoNotSchedule spread constraints (maxSkew over the eligible domains, minDomains);
- a Strict gang has had no member placed or at least its minMember; a gang group is all or
  nothing; the placed members of a MustGather gang group share one domain of its layer;
- a pending pod has a reason and a message, never SchedulerError (an internal error); a pod of no
  profile is SchedulerNotFound; a pod of no gang, spread constraint or anti-affinity of its own is
  not left Unschedulable where every filter would now pass (the unschedulable pool's periodic flush
  would place it);
- a preemption victim has a lower priority than the pod that triggered it, carries none of the
  non-preemptible labels and is not of the trigger's gang group; a preemptionPolicy: Never pod
  never triggers one; each victim is listed once; every Preempted pod is a listed victim;
- each podGroups entry counts the members bound and the gang's minMember.

Every check returns the violations it finds, as sentences that name the pods and nodes.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.resources import MAX_AMOUNT
from koordpy.simulate.runner import DEFAULT_MAX_VIRTUAL_SECONDS
from tests.fuzz.strategies import (
    BLOCK,
    BLOCK_LAYER,
    GANG_GROUPS,
    GANG_MIN,
    GANG_MODE,
    GANG_NAME,
    GANG_TOPOLOGY,
    MUST_GATHER,
    NODE_LAYER,
    NON_PREEMPTIBLE_LABELS,
    SCHEDULERS,
    SIGS_GROUP,
    SIGS_POD_LABEL,
    SPINE,
    SPINE_LAYER,
    STRICT,
    UNSCHEDULABLE_TAINT_KEY,
    X_K8S_GROUP,
    X_K8S_POD_LABEL,
    Doc,
)

Report = Mapping[str, Any]
# the reason of a pod whose scheduling cycle raised: a bug, whatever the input
SCHEDULER_ERROR = "SchedulerError"
# `koordpy simulate --max-virtual-seconds` default: a run that reaches it was cut off
MAX_VIRTUAL_SECONDS = DEFAULT_MAX_VIRTUAL_SECONDS
CPU = "cpu"
PODS = "pods"
WORKLOAD_KINDS = ("ReplicaSet", "Deployment", "StatefulSet", "Job")
LAYER_DEPTH = {SPINE_LAYER: 1, BLOCK_LAYER: 2, NODE_LAYER: 3}


# --------------------------------------------------------------------------------------------- quantities
_QUANTITY = re.compile(r"^([0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_FACTORS: dict[str | None, int] = {
    None: 1,
    **{suffix: 10 ** (3 * i) for i, suffix in enumerate("kMGTPE", 1)},
    **{suffix: 2 ** (10 * i) for i, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
}


def quantity(value: Any, milli: bool) -> int:
    """A generated quantity in canonical units: millicores for cpu (`milli`), else whole units."""
    match = _QUANTITY.match(str(value))
    assert match is not None, f"not a quantity the generator writes: {value!r}"
    number, suffix = int(match.group(1)), match.group(2)
    if suffix == "m":
        return number if milli else -(-number // 1000)
    return number * _FACTORS[suffix] * (1000 if milli else 1)


def resource_list(obj: Mapping[str, Any] | None) -> dict[str, int]:
    return {name: quantity(value, name == CPU) for name, value in (obj or {}).items()}


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    # the API server defaults a missing request to the limit
    return {**resource_list(resources.get("limits")), **resource_list(resources.get("requests"))}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """The containers' sum, raised to any init container's request (none of them a sidecar)."""
    total: dict[str, int] = Counter()
    for container in spec.get("containers") or []:
        total.update(_container_requests(container))
    for init in spec.get("initContainers") or []:
        for name, value in _container_requests(init).items():
            total[name] = max(total.get(name, 0), value)
    return {k: v for k, v in total.items() if v}


# --------------------------------------------------------------------------------------------- selectors
@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, value: str | None) -> bool:
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if value is None or not re.fullmatch(r"[+-]?[0-9]+", value):
            return False
        bound = int(self.values[0])
        return int(value) > bound if op == "Gt" else int(value) < bound

    @staticmethod
    def of(obj: Mapping[str, Any]) -> Requirement:
        return Requirement(obj["key"], obj["operator"], tuple(obj.get("values") or ()))


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels.get(r.key)) for r in self.requirements)

    @staticmethod
    def of(obj: Mapping[str, Any]) -> LabelSelector:
        reqs = [Requirement(k, "In", (v,)) for k, v in (obj.get("matchLabels") or {}).items()]
        reqs += [Requirement.of(e) for e in obj.get("matchExpressions") or []]
        return LabelSelector(tuple(reqs))


@dataclass(frozen=True)
class NodeSelectorTerm:
    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, node: NodeFacts) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches no node
        return all(r.matches(node.labels.get(r.key)) for r in self.expressions) and all(
            r.matches(node.name) for r in self.fields
        )


# --------------------------------------------------------------------------------------------- taints
@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value

    @staticmethod
    def of(obj: Mapping[str, Any]) -> Toleration:
        return Toleration(
            obj.get("key") or "",
            obj.get("operator") or "Equal",
            obj.get("value") or "",
            obj.get("effect") or "",
        )


CORDON = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")


# --------------------------------------------------------------------------------------------- facts
@dataclass(frozen=True)
class NodeFacts:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Mapping[str, int]


@dataclass(frozen=True)
class AntiAffinityTerm:
    selector: LabelSelector
    namespaces: frozenset[str]
    # None: no namespaceSelector; an empty one selects every namespace
    namespace_selector: LabelSelector | None
    topology_key: str

    def selects(self, pod: PodFacts, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """kube's PodAffinityTerm: the pods of `namespaces` and of the namespaces the selector
        matches (the owner's namespace when neither is given) whose labels the selector matches."""
        in_scope = pod.namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(namespace_labels.get(pod.namespace, {}))
        )
        return in_scope and self.selector.matches(pod.labels)


@dataclass(frozen=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    min_domains: int
    honor_affinity: bool
    honor_taints: bool
    selector: LabelSelector


@dataclass(frozen=True)
class HostPort:
    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if (self.port, self.protocol) != (other.port, other.protocol):
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)


@dataclass(frozen=True)
class PodFacts:
    key: str
    namespace: str
    labels: Mapping[str, str]
    scheduler: str
    # set for a pod that is already running when the simulation starts
    running_on: str | None
    requests: Mapping[str, int]
    node_selector: Mapping[str, str]
    required_terms: tuple[NodeSelectorTerm, ...] | None
    tolerations: tuple[Toleration, ...]
    anti_affinity: tuple[AntiAffinityTerm, ...]
    host_ports: tuple[HostPort, ...]
    spread: tuple[SpreadConstraint, ...]
    priority: int
    preemption_policy: str
    gang: str | None

    def fits_node_affinity(self, node: NodeFacts) -> bool:
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.required_terms is None or any(t.matches(node) for t in self.required_terms)

    def untolerated(self, node: NodeFacts) -> list[Taint]:
        taints = [t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")]
        return [t for t in taints if not any(tol.tolerates(t) for tol in self.tolerations)]

    @property
    def non_preemptible(self) -> bool:
        return any(self.labels.get(k) == v for k, v in NON_PREEMPTIBLE_LABELS.items())


@dataclass(frozen=True)
class GangFacts:
    id: str
    min_member: int
    strict: bool
    # every gang id of its group, its own included
    group: tuple[str, ...]
    must_gather_layer: str | None
    members: tuple[str, ...]


@dataclass
class Facts:
    nodes: dict[str, NodeFacts] = field(default_factory=dict)
    pods: dict[str, PodFacts] = field(default_factory=dict)
    gangs: dict[str, GangFacts] = field(default_factory=dict)
    # a ClusterNetworkTopology named default (the one the scheduler uses) is in the input
    topology: bool = False
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)


def _node_facts(doc: Doc) -> NodeFacts:
    meta, spec, status = doc["metadata"], doc.get("spec") or {}, doc["status"]
    return NodeFacts(
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        taints=tuple(Taint(t["key"], t.get("value") or "", t["effect"]) for t in spec.get("taints") or []),
        unschedulable=bool(spec.get("unschedulable")),
        # koordpy takes a node's amounts at most at MAX_AMOUNT (documented): pods asking for that
        # much are refused, and a node reporting more holds what that bound holds
        allocatable={
            name: min(amount, MAX_AMOUNT)
            for name, amount in resource_list(status.get("allocatable") or status.get("capacity")).items()
        },
    )


def _stamped(doc: Doc) -> Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(name, metadata, spec) of the pods a Pod or workload document creates."""
    meta = doc["metadata"]
    if doc["kind"] == "Pod":
        yield meta["name"], meta, doc["spec"]
        return
    spec = doc["spec"]
    count = spec["parallelism"] if doc["kind"] == "Job" else spec["replicas"]
    for i in range(count):
        yield f"{meta['name']}-{i}", spec["template"]["metadata"], spec["template"]["spec"]


def _gang_of(namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    name = labels.get(SIGS_POD_LABEL) or labels.get(X_K8S_POD_LABEL) or annotations.get(GANG_NAME)
    return f"{namespace}/{name}" if name else None


def _must_gather_layer(raw: str | None) -> str | None:
    if not raw:
        return None
    layers = [r["layer"] for r in json.loads(raw)["gatherStrategy"] if r["strategy"] == MUST_GATHER]
    return max(layers, key=LAYER_DEPTH.__getitem__) if layers else None


def facts_of(docs: list[Doc]) -> Facts:
    facts = Facts()
    classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PriorityClass"}
    default = next((c for c in classes.values() if c.get("globalDefault")), None)
    pod_groups = {
        (d["apiVersion"].split("/")[0], d["metadata"].get("namespace") or "default", d["metadata"]["name"]): d
        for d in docs
        if d["kind"] == "PodGroup"
    }
    gang_members: dict[str, list[str]] = defaultdict(list)
    gang_source: dict[str, tuple[str, Mapping[str, str]]] = {}
    for doc in docs:
        kind = doc["kind"]
        if kind == "Node":
            node = _node_facts(doc)
            facts.nodes[node.name] = node
        elif kind == "Namespace":
            facts.namespace_labels[doc["metadata"]["name"]] = dict(doc["metadata"].get("labels") or {})
        elif kind == "ClusterNetworkTopology":
            facts.topology = facts.topology or doc["metadata"]["name"] == "default"
        elif kind == "Pod" or kind in WORKLOAD_KINDS:
            namespace = doc["metadata"].get("namespace") or "default"
            for name, meta, spec in _stamped(doc):
                pod = _pod_facts(namespace, name, meta, spec, classes, default)
                facts.pods[pod.key] = pod
                if pod.gang is not None:
                    gang_members[pod.gang].append(pod.key)
                    labels = meta.get("labels") or {}
                    source = SIGS_GROUP if SIGS_POD_LABEL in labels else None
                    source = source or (X_K8S_GROUP if X_K8S_POD_LABEL in labels else "annotation")
                    gang_source.setdefault(pod.gang, (source, meta.get("annotations") or {}))
    for gang_id, members in gang_members.items():
        source, annotations = gang_source[gang_id]
        namespace, name = gang_id.split("/", 1)
        if source == "annotation":
            min_member = int(annotations[GANG_MIN])
        else:
            pg = pod_groups[(source, namespace, name)]
            min_member = int(pg["spec"]["minMember"])
            annotations = pg["metadata"].get("annotations") or {} if source == SIGS_GROUP else {}
        groups = tuple(json.loads(annotations[GANG_GROUPS])) if GANG_GROUPS in annotations else ()
        facts.gangs[gang_id] = GangFacts(
            id=gang_id,
            min_member=min_member,
            strict=(annotations.get(GANG_MODE) or STRICT) == STRICT,
            group=tuple(sorted({gang_id, *groups})),
            must_gather_layer=_must_gather_layer(annotations.get(GANG_TOPOLOGY)),
            members=tuple(members),
        )
    return facts


def _pod_facts(
    namespace: str,
    name: str,
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    classes: Mapping[str, Doc],
    default: Doc | None,
) -> PodFacts:
    labels = dict(meta.get("labels") or {})
    affinity = spec.get("affinity") or {}
    node_affinity = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if node_affinity is not None:
        terms = tuple(
            NodeSelectorTerm(
                tuple(Requirement.of(e) for e in t.get("matchExpressions") or []),
                tuple(Requirement.of(f) for f in t.get("matchFields") or []),
            )
            for t in node_affinity["nodeSelectorTerms"]
        )
    anti = tuple(
        AntiAffinityTerm(
            LabelSelector.of(t["labelSelector"]),
            frozenset(t.get("namespaces") or (() if "namespaceSelector" in t else (namespace,))),
            LabelSelector.of(t["namespaceSelector"]) if "namespaceSelector" in t else None,
            t["topologyKey"],
        )
        for t in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        or []
    )
    spread = tuple(
        SpreadConstraint(
            max_skew=c["maxSkew"],
            topology_key=c["topologyKey"],
            min_domains=c.get("minDomains") or 1,
            honor_affinity=(c.get("nodeAffinityPolicy") or "Honor") == "Honor",
            honor_taints=(c.get("nodeTaintsPolicy") or "Ignore") == "Honor",
            selector=LabelSelector.of(c["labelSelector"]),
        )
        for c in spec.get("topologySpreadConstraints") or []
        if c["whenUnsatisfiable"] == "DoNotSchedule"
    )
    ports = tuple(
        HostPort(p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", p["hostPort"])
        for c in spec.get("containers") or []
        for p in c.get("ports") or []
        if p.get("hostPort")
    )
    pc = classes.get(spec["priorityClassName"]) if spec.get("priorityClassName") else default
    return PodFacts(
        key=f"{namespace}/{name}",
        namespace=namespace,
        labels=labels,
        scheduler=spec.get("schedulerName") or "default-scheduler",
        running_on=spec.get("nodeName"),
        requests=pod_requests(spec),
        node_selector=dict(spec.get("nodeSelector") or {}),
        required_terms=terms,
        tolerations=tuple(Toleration.of(t) for t in spec.get("tolerations") or []),
        anti_affinity=anti,
        host_ports=ports,
        spread=spread,
        priority=pc["value"] if pc is not None else 0,
        preemption_policy=(pc.get("preemptionPolicy") if pc is not None else None) or "PreemptLowerPriority",
        gang=_gang_of(namespace, labels, meta.get("annotations") or {}),
    )


# --------------------------------------------------------------------------------------------- the report
@dataclass(frozen=True)
class Outcome:
    """The report's pods by key: where each is bound, and which were preempted."""

    report: Report
    phase: Mapping[str, str]
    bound: Mapping[str, str]
    preempted: Mapping[str, str]

    @staticmethod
    def of(report: Report) -> Outcome:
        phase, bound, preempted = {}, {}, {}
        for p in report["pods"]:
            key = f"{p['namespace']}/{p['name']}"
            phase[key] = p["phase"]
            if p["phase"] == "Bound":
                bound[key] = p["node"]
            elif p["phase"] == "Preempted":
                preempted[key] = p["node"]
        return Outcome(report, phase, bound, preempted)


Check = Callable[[Facts, Outcome], list[str]]


def every_pod_reported_once_in_input_order(facts: Facts, out: Outcome) -> list[str]:
    listed = [f"{p['namespace']}/{p['name']}" for p in out.report["pods"]]
    if listed != list(facts.pods):
        return [f"the report lists {listed}, the input holds {list(facts.pods)}"]
    return []


def bound_pods_are_on_known_nodes(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for key, node in {**out.bound, **out.preempted}.items():
        if node not in facts.nodes:
            bad.append(f"{key} is {out.phase[key]} on {node!r}, which is no node of the input")
        running_on = facts.pods[key].running_on
        if running_on is not None and node != running_on:
            bad.append(f"{key} runs on {running_on} but is reported {out.phase[key]} on {node}")
    return bad


def pending_pods_say_why(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for p in out.report["pods"]:
        key = f"{p['namespace']}/{p['name']}"
        if p["phase"] == "Pending":
            if not p.get("reason") or not p.get("message"):
                bad.append(f"{key} is pending with reason {p.get('reason')!r}, message {p.get('message')!r}")
            if p.get("node"):
                bad.append(f"{key} is pending but names node {p['node']}")
            if p.get("reason") == SCHEDULER_ERROR:
                bad.append(f"{key} is pending on an internal error: {p.get('message')}")
        pod = facts.pods.get(key)
        unserved = pod is not None and pod.running_on is None and pod.scheduler not in SCHEDULERS
        if unserved and (p["phase"] != "Pending" or p.get("reason") != "SchedulerNotFound"):
            bad.append(f"{key} asks for an unknown scheduler, yet is {p['phase']} ({p.get('reason')})")
    return bad


def nodes_hold_their_pods(facts: Facts, out: Outcome) -> list[str]:
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for key, node in out.bound.items():
        used[node].update(facts.pods[key].requests)
        used[node][PODS] += 1
    bad = []
    for node, amounts in used.items():
        allocatable = facts.nodes[node].allocatable
        for resource, amount in amounts.items():
            if amount > allocatable.get(resource, 0):
                on = sorted(k for k, n in out.bound.items() if n == node)
                bad.append(
                    f"{node} holds {amount} {resource} of {allocatable.get(resource, 0)} allocatable: {on}"
                )
    return bad


def placed_pods_match_node_affinity(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for key, node_name in out.bound.items():
        pod, node = facts.pods[key], facts.nodes[node_name]
        if pod.running_on is None and not pod.fits_node_affinity(node):
            bad.append(
                f"{key} is on {node_name} ({dict(node.labels)}), outside its nodeSelector/node affinity"
            )
    return bad


def placed_pods_tolerate_their_node(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for key, node_name in out.bound.items():
        pod, node = facts.pods[key], facts.nodes[node_name]
        if pod.running_on is not None:
            continue
        untolerated = pod.untolerated(node)
        if untolerated:
            bad.append(f"{key} is on {node_name} without tolerating {untolerated}")
        if node.unschedulable and not any(t.tolerates(CORDON) for t in pod.tolerations):
            bad.append(f"{key} was placed on cordoned {node_name}")
    return bad


def _placed_pairs(facts: Facts, out: Outcome) -> Iterable[tuple[PodFacts, str, PodFacts, str]]:
    """Ordered pairs of distinct bound pods of which the scheduler placed at least one."""
    bound = list(out.bound.items())
    for key_a, node_a in bound:
        a = facts.pods[key_a]
        for key_b, node_b in bound:
            b = facts.pods[key_b]
            if key_a != key_b and (a.running_on is None or b.running_on is None):
                yield a, node_a, b, node_b


def anti_affinity_holds(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for a, node_a, b, node_b in _placed_pairs(facts, out):
        for term in a.anti_affinity:
            if not term.selects(b, facts.namespace_labels):
                continue
            value_a = facts.nodes[node_a].labels.get(term.topology_key)
            if value_a is not None and value_a == facts.nodes[node_b].labels.get(term.topology_key):
                bad.append(
                    f"{a.key} on {node_a} and {b.key} on {node_b} share {term.topology_key}={value_a}, "
                    f"which {a.key}'s required anti-affinity forbids"
                )
    return bad


def host_ports_are_free(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for a, node_a, b, node_b in _placed_pairs(facts, out):
        if node_a != node_b or a.key > b.key:
            continue
        clashes = [(p, q) for p in a.host_ports for q in b.host_ports if p.conflicts(q)]
        if clashes:
            bad.append(f"{a.key} and {b.key} on {node_a} hold the same host port: {clashes}")
    return bad


def _eligible(facts: Facts, pod: PodFacts, c: SpreadConstraint) -> list[NodeFacts]:
    """kube's PodTopologySpread nodes: carrying every DoNotSchedule key of the pod, and passing
    the node inclusion policies."""
    keys = {s.topology_key for s in pod.spread}
    nodes = [n for n in facts.nodes.values() if keys <= n.labels.keys()]
    if c.honor_affinity:
        nodes = [n for n in nodes if pod.fits_node_affinity(n)]
    if c.honor_taints:
        nodes = [n for n in nodes if not pod.untolerated(n)]
    return nodes


def spread_constraints_hold(facts: Facts, out: Outcome) -> list[str]:
    """Each placement kept count(domain) + 1 - min <= maxSkew over the eligible domains (the
    minimum taken as 0 while fewer than minDomains domains exist). The pods a generated constraint
    selects all carry it and are never removed, so the final counts keep max - min <= maxSkew, or
    max <= maxSkew below minDomains."""
    bad = []
    seen: set[tuple[Any, ...]] = set()
    for key, node_name in out.bound.items():
        pod = facts.pods[key]
        if pod.running_on is not None:
            continue
        missing = sorted({c.topology_key for c in pod.spread} - facts.nodes[node_name].labels.keys())
        if missing:
            bad.append(f"{key} is on {node_name}, which lacks its spread topology key(s) {missing}")
        for c in pod.spread:
            eligible = _eligible(facts, pod, c)
            counts: Counter[str] = Counter({n.labels[c.topology_key]: 0 for n in eligible})
            on_eligible = {n.name: n.labels[c.topology_key] for n in eligible}
            for other_key, other_node in out.bound.items():
                other = facts.pods[other_key]
                counted = other.namespace == pod.namespace and other_node in on_eligible
                if counted and c.selector.matches(other.labels):
                    counts[on_eligible[other_node]] += 1
            state = (c, tuple(sorted(counts.items())))
            if state in seen:
                continue
            seen.add(state)
            if len(counts) < c.min_domains:
                worst, floor = max(counts.values(), default=0), 0
            else:
                worst, floor = max(counts.values()), min(counts.values())
            if worst - floor > c.max_skew:
                bad.append(
                    f"{key} on {node_name}: {c.topology_key} counts {dict(counts)} skew {worst - floor} "
                    f"> maxSkew {c.max_skew} (minDomains {c.min_domains})"
                )
    return bad


def _ever_placed(gang: GangFacts, out: Outcome) -> int:
    return sum(1 for m in gang.members if m in out.bound or m in out.preempted)


def strict_gangs_reach_min_member_or_nothing(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for gang in facts.gangs.values():
        placed = _ever_placed(gang, out)
        if gang.strict and 0 < placed < gang.min_member:
            bad.append(f"Strict gang {gang.id} had {placed} of minMember {gang.min_member} placed")
    return bad


def gang_groups_are_all_or_nothing(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for group in sorted({g.group for g in facts.gangs.values() if len(g.group) > 1}):
        gangs = [facts.gangs[i] for i in group if i in facts.gangs]
        placed = {g.id: _ever_placed(g, out) for g in gangs}
        if any(placed.values()) and any(placed[g.id] < g.min_member for g in gangs):
            mins = {g.id: g.min_member for g in gangs}
            bad.append(f"gang group {list(group)} is partly placed: {placed} of minMember {mins}")
    return bad


def _domain(node: NodeFacts, layer: str) -> tuple[str, ...]:
    if layer == NODE_LAYER:
        return (node.name,)
    path = (node.labels.get(SPINE, ""), node.labels.get(BLOCK, ""))
    return path[: LAYER_DEPTH[layer]]


def must_gather_groups_share_one_domain(facts: Facts, out: Outcome) -> list[str]:
    if not facts.topology:
        return []
    bad = []
    for group in sorted({g.group for g in facts.gangs.values() if g.must_gather_layer is not None}):
        gangs = [facts.gangs[i] for i in group if i in facts.gangs]
        layers = {g.must_gather_layer for g in gangs if g.must_gather_layer is not None}
        layer = max(layers, key=LAYER_DEPTH.__getitem__)
        placed = {m: out.bound[m] for g in gangs for m in g.members if m in out.bound}
        domains = {_domain(facts.nodes[n], layer) for n in placed.values()}
        if len(domains) > 1:
            bad.append(f"MustGather {layer} gang group {list(group)} spans {sorted(domains)}: {placed}")
    return bad


def preemption_spares_the_protected(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    victims = Counter(e["victim"] for e in out.report["preemptions"])
    bad += [f"{v} is listed as a victim {n} times" for v, n in victims.items() if n > 1]
    bad += [f"{k} is Preempted but no preemption lists it" for k in out.preempted if k not in victims]
    for e in out.report["preemptions"]:
        victim, trigger = facts.pods[e["victim"]], facts.pods[e["triggerPod"]]
        if victim.priority >= trigger.priority:
            bad.append(
                f"{victim.key} (priority {victim.priority}) preempted for {trigger.key} "
                f"(priority {trigger.priority})"
            )
        if trigger.preemption_policy == "Never":
            bad.append(f"{trigger.key} has preemptionPolicy Never, yet preempted {victim.key}")
        if victim.non_preemptible:
            bad.append(f"{victim.key} is labelled non-preemptible, yet was preempted for {trigger.key}")
        group = facts.gangs[trigger.gang].group if trigger.gang in facts.gangs else ()
        if victim.gang is not None and victim.gang in group:
            bad.append(f"{victim.key} was preempted for {trigger.key} of its own gang group")
    return bad


def pod_groups_count_their_bound_members(facts: Facts, out: Outcome) -> list[str]:
    bad = []
    for g in out.report["podGroups"]:
        gang = facts.gangs.get(f"{g['namespace']}/{g['name']}")
        if gang is None:
            continue
        bound = sum(1 for m in gang.members if m in out.bound)
        if g["scheduled"] != bound or g["minMember"] != gang.min_member:
            bad.append(
                f"podGroup {gang.id} reports scheduled {g['scheduled']}, minMember {g['minMember']}; "
                f"{bound} members are bound, minMember is {gang.min_member}"
            )
    return bad


def _blocks(q: PodFacts, q_node: NodeFacts, p: PodFacts, node: NodeFacts, facts: Facts) -> bool:
    """Whether pod q, on q_node, keeps pod p off `node` by its required anti-affinity."""
    for term in q.anti_affinity:
        value = q_node.labels.get(term.topology_key)
        shared = value is not None and value == node.labels.get(term.topology_key)
        if shared and term.selects(p, facts.namespace_labels):
            return True
    return False


def _fits(p: PodFacts, node: NodeFacts, holders: list[tuple[PodFacts, NodeFacts]], facts: Facts) -> bool:
    """kube-scheduler's filters for a pod without anti-affinity and spread constraints of its own,
    `holders` being the pods that count on the cluster (bound, or nominated with at least p's
    priority)."""
    if not p.fits_node_affinity(node) or p.untolerated(node):
        return False
    if node.unschedulable and not any(t.tolerates(CORDON) for t in p.tolerations):
        return False
    on_node = [q for q, n in holders if n.name == node.name]
    used: Counter[str] = Counter()
    for q in on_node:
        used.update(q.requests)
    if len(on_node) + 1 > node.allocatable.get(PODS, 0):
        return False
    if any(used[r] + amount > node.allocatable.get(r, 0) for r, amount in p.requests.items()):
        return False
    if any(port.conflicts(other) for q in on_node for other in q.host_ports for port in p.host_ports):
        return False
    return not any(_blocks(q, n, p, node, facts) for q, n in holders)


def plain_pods_are_not_left_pending_where_they_fit(facts: Facts, out: Outcome) -> list[str]:
    """Liveness: a pod left Unschedulable while the run went quiet would be retried by the
    unschedulable pool's periodic flush and placed if it fits now. Checked for pods of no gang and
    without spread constraints or anti-affinity of their own, against every filter they meet:
    resources and pod count, node affinity, taints and cordons, host ports, the anti-affinity of
    placed pods; pods nominated to a node with at least the pod's priority count there."""
    if "cutOff" in out.report or float(out.report.get("virtualSeconds", 0.0)) >= MAX_VIRTUAL_SECONDS:
        return []  # the run was cut off, not done
    nominated = {
        f"{p['namespace']}/{p['name']}": p["nominatedNodeName"]
        for p in out.report["pods"]
        if p["phase"] == "Pending" and p.get("nominatedNodeName") in facts.nodes
    }
    bad = []
    for p in out.report["pods"]:
        key = f"{p['namespace']}/{p['name']}"
        pod = facts.pods[key]
        plain = not (pod.gang or pod.spread or pod.anti_affinity or pod.running_on)
        if p["phase"] != "Pending" or p.get("reason") != "Unschedulable" or not plain:
            continue
        if pod.scheduler not in SCHEDULERS:
            continue
        holders = [(facts.pods[k], facts.nodes[n]) for k, n in out.bound.items()]
        holders += [
            (facts.pods[k], facts.nodes[n])
            for k, n in nominated.items()
            if k != key and facts.pods[k].priority >= pod.priority
        ]
        fits = [n.name for n in facts.nodes.values() if _fits(pod, n, holders, facts)]
        if fits:
            bad.append(f"{key} is left pending ({p.get('message')}) yet fits {fits}")
    return bad


INVARIANTS: tuple[Check, ...] = (
    every_pod_reported_once_in_input_order,
    bound_pods_are_on_known_nodes,
    pending_pods_say_why,
    nodes_hold_their_pods,
    placed_pods_match_node_affinity,
    placed_pods_tolerate_their_node,
    anti_affinity_holds,
    host_ports_are_free,
    spread_constraints_hold,
    strict_gangs_reach_min_member_or_nothing,
    gang_groups_are_all_or_nothing,
    must_gather_groups_share_one_domain,
    preemption_spares_the_protected,
    pod_groups_count_their_bound_members,
    plain_pods_are_not_left_pending_where_they_fit,
)


def violations(docs: list[Doc], report: Report, checks: Iterable[Check] = INVARIANTS) -> list[str]:
    facts = facts_of(docs)
    out = Outcome.of(report)
    return [f"{check.__name__}: {v}" for check in checks for v in check(facts, out)]


def report_is_well_formed(report: Report) -> list[str]:
    """What any report keeps, whatever its input: the contract's fields, and a reason and a
    message for every pending pod."""
    bad = []
    for name in ("pods", "podGroups", "preemptions", "virtualSeconds"):
        if name not in report:
            bad.append(f"the report has no {name}")
    for p in report.get("pods", []):
        if p.get("phase") not in ("Bound", "Pending", "Preempted", "Succeeded"):
            bad.append(f"{p.get('namespace')}/{p.get('name')} has phase {p.get('phase')!r}")
        if p.get("phase") == "Pending" and (not p.get("reason") or not p.get("message")):
            bad.append(f"{p.get('namespace')}/{p.get('name')} is pending without a reason and a message")
        if p.get("reason") == SCHEDULER_ERROR:
            bad.append(
                f"{p.get('namespace')}/{p.get('name')} is pending on an internal error: {p.get('message')}"
            )
    return bad
