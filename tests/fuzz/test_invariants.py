"""The invariant checks themselves: each one finds the violation it is about in a report made up
for a small scenario, and finds nothing in a report that keeps it. A check that can never fail
would let the fuzz tests pass whatever the scheduler does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fuzz.invariants import (
    Check,
    anti_affinity_holds,
    bound_pods_are_on_known_nodes,
    every_pod_reported_once_in_input_order,
    gang_groups_are_all_or_nothing,
    host_ports_are_free,
    must_gather_groups_share_one_domain,
    nodes_hold_their_pods,
    pending_pods_say_why,
    placed_pods_match_node_affinity,
    placed_pods_tolerate_their_node,
    plain_pods_are_not_left_pending_where_they_fit,
    pod_groups_count_their_bound_members,
    preemption_spares_the_protected,
    report_is_well_formed,
    spread_constraints_hold,
    strict_gangs_reach_min_member_or_nothing,
    violations,
)
from tests.fuzz.strategies import (
    BLOCK,
    BLOCK_LAYER,
    GANG_GROUPS,
    GANG_MIN,
    GANG_NAME,
    GANG_TOPOLOGY,
    HOSTNAME,
    MUST_GATHER,
    SPINE,
    SPREAD_LABEL,
    TOPOLOGY_DOC,
    ZONE,
    Doc,
)

pytestmark = pytest.mark.fuzz


def _node(name: str, zone: str, spine: str, block: str, **spec: Any) -> Doc:
    labels = {HOSTNAME: name, ZONE: zone, SPINE: spine, BLOCK: block}
    doc: Doc = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    doc["status"] = {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "5"}}
    if spec:
        doc["spec"] = spec
    return doc


def _pod(name: str, cpu: str = "500m", labels: dict[str, str] | None = None, **spec: Any) -> Doc:
    container: Doc = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    ports = spec.pop("ports", None)
    if ports:
        container["ports"] = ports
    meta: Doc = {"name": name, "labels": labels or {"app": "other"}}
    annotations = spec.pop("annotations", None)
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container], **spec}}


def _class(name: str, value: int, policy: str = "PreemptLowerPriority") -> Doc:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": policy,
    }


def _gang(name: str, min_member: int, **extra: str) -> dict[str, str]:
    return {GANG_NAME: name, GANG_MIN: str(min_member), **extra}


_ANTI = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}
        ]
    }
}
_SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {SPREAD_LABEL: "s"}},
    }
]
_GROUP = json.dumps(["default/ga", "default/gb"])
_MUST_BLOCK = json.dumps({"gatherStrategy": [{"layer": BLOCK_LAYER, "strategy": MUST_GATHER}]})

DOCS: list[Doc] = [
    _class("low", 10),
    _class("high", 1000),
    _class("never", 2000, "Never"),
    TOPOLOGY_DOC,
    _node("n1", "zone-a", "s1", "b1"),
    _node("n2", "zone-a", "s1", "b2", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    _node("n3", "zone-b", "s2", "b1", unschedulable=True),
    # the same block path as n1: one BlockLayer domain
    _node("n4", "zone-b", "s1", "b1"),
    _pod("running-low", "1", nodeName="n1", priorityClassName="low"),
    _pod(
        "running-kept",
        "500m",
        {"app": "other", "scheduling.koordinator.sh/disable-preemptible": "true"},
        nodeName="n2",
        priorityClassName="low",
    ),
    _pod("web-0", labels={"app": "web"}, affinity=_ANTI, ports=[{"containerPort": 8080, "hostPort": 80}]),
    _pod("web-1", labels={"app": "web"}, affinity=_ANTI, ports=[{"containerPort": 8080, "hostPort": 80}]),
    _pod("ssd", nodeSelector={"disk": "ssd"}),
    _pod("big", "3700m"),
    _pod("tolerant", tolerations=[{"key": "dedicated", "operator": "Exists"}], priorityClassName="high"),
    _pod("never", priorityClassName="never"),
    *(_pod(f"spread-{i}", "100m", {SPREAD_LABEL: "s"}, topologySpreadConstraints=_SPREAD) for i in range(3)),
    *(_pod(f"g-{i}", "100m", annotations=_gang("g", 2)) for i in range(3)),
    _pod("ga-0", "100m", annotations=_gang("ga", 1, **{GANG_GROUPS: _GROUP})),
    *(_pod(f"gb-{i}", "100m", annotations=_gang("gb", 2, **{GANG_GROUPS: _GROUP})) for i in range(2)),
    *(_pod(f"mg-{i}", "100m", annotations=_gang("mg", 2, **{GANG_TOPOLOGY: _MUST_BLOCK})) for i in range(2)),
]


def _report(
    bound: dict[str, str],
    preempted: dict[str, str] | None = None,
    preemptions: list[tuple[str, str]] | None = None,
    pod_groups: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A report of DOCS: the running pods where they run unless preempted, `bound` pods placed,
    every other pod pending with a reason and a message."""
    preempted = preempted or {}
    placed = {"running-low": "n1", "running-kept": "n2", **bound}
    pods = []
    for doc in DOCS:
        if doc["kind"] != "Pod":
            continue
        name = doc["metadata"]["name"]
        pod: dict[str, Any] = {"namespace": "default", "name": name, "nominatedNodeName": None}
        if name in preempted:
            pod.update(node=preempted[name], phase="Preempted", reason=None, message=None)
        elif name in placed:
            pod.update(node=placed[name], phase="Bound", reason=None, message=None)
        else:
            pod.update(node=None, phase="Pending", reason="Unschedulable", message="0/3 nodes are available")
        pods.append(pod)
    return {
        "pods": pods,
        "podGroups": pod_groups or [],
        "preemptions": [
            {
                "victim": f"default/{v}",
                "node": "n1",
                "preemptor": f"default/{t}",
                "triggerPod": f"default/{t}",
            }
            for v, t in preemptions or []
        ],
        "virtualSeconds": 0.0,
    }


# a placement that keeps every invariant
GOOD = {
    "web-0": "n1",
    "tolerant": "n2",
    "spread-0": "n1",
    "spread-1": "n4",
    "g-0": "n4",
    "g-1": "n4",
    "mg-0": "n1",
    "mg-1": "n4",
    "never": "n4",
}


def test_a_report_that_keeps_every_invariant_has_no_violations() -> None:
    report = _report(
        GOOD,
        preempted={"running-low": "n1"},
        preemptions=[("running-low", "tolerant")],
        pod_groups=[{"namespace": "default", "name": "g", "minMember": 2, "scheduled": 2}],
    )
    assert violations(DOCS, report) == []
    assert report_is_well_formed(report) == []


def test_a_strict_gang_member_placed_then_preempted_counts_as_placed() -> None:
    report = _report(
        {k: v for k, v in GOOD.items() if k != "g-1"},
        preempted={"g-1": "n4"},
        preemptions=[("g-1", "tolerant")],
    )
    assert violations(DOCS, report, [strict_gangs_reach_min_member_or_nothing]) == []


VIOLATIONS: list[Any] = [
    pytest.param(nodes_hold_their_pods, _report({**GOOD, "big": "n1"}), id="cpu-overcommitted"),
    pytest.param(nodes_hold_their_pods, _report({**GOOD, "web-1": "n4", "ga-0": "n4"}), id="too-many-pods"),
    pytest.param(placed_pods_match_node_affinity, _report({**GOOD, "ssd": "n2"}), id="node-selector"),
    pytest.param(placed_pods_tolerate_their_node, _report({**GOOD, "never": "n2"}), id="untolerated-taint"),
    pytest.param(placed_pods_tolerate_their_node, _report({**GOOD, "never": "n3"}), id="cordoned-node"),
    pytest.param(anti_affinity_holds, _report({**GOOD, "web-1": "n1"}), id="anti-affinity"),
    pytest.param(host_ports_are_free, _report({**GOOD, "web-1": "n1"}), id="host-port"),
    pytest.param(spread_constraints_hold, _report({**GOOD, "spread-1": "n1"}), id="spread-skew"),
    pytest.param(
        strict_gangs_reach_min_member_or_nothing,
        _report({k: v for k, v in GOOD.items() if k != "g-1"}),
        id="strict-gang-below-min",
    ),
    pytest.param(gang_groups_are_all_or_nothing, _report({**GOOD, "ga-0": "n1"}), id="gang-group-part"),
    pytest.param(must_gather_groups_share_one_domain, _report({**GOOD, "mg-1": "n2"}), id="must-gather"),
    pytest.param(
        must_gather_groups_share_one_domain,
        _report({**GOOD, "mg-1": "n3"}),
        id="must-gather-same-block-name-under-another-spine",
    ),
    pytest.param(
        preemption_spares_the_protected,
        _report(GOOD, {"running-kept": "n2"}, [("running-kept", "tolerant")]),
        id="non-preemptible-victim",
    ),
    pytest.param(
        preemption_spares_the_protected,
        _report(GOOD, {"running-low": "n1"}, [("running-low", "never")]),
        id="preemption-policy-never",
    ),
    pytest.param(
        preemption_spares_the_protected,
        _report(GOOD, {"running-low": "n1"}, [("running-low", "ssd")]),
        id="victim-not-lower-priority",
    ),
    pytest.param(preemption_spares_the_protected, _report(GOOD, {"running-low": "n1"}), id="unlisted-victim"),
    pytest.param(
        pod_groups_count_their_bound_members,
        _report(GOOD, pod_groups=[{"namespace": "default", "name": "g", "minMember": 2, "scheduled": 3}]),
        id="pod-group-count",
    ),
    pytest.param(bound_pods_are_on_known_nodes, _report({**GOOD, "ssd": "n9"}), id="unknown-node"),
    pytest.param(
        plain_pods_are_not_left_pending_where_they_fit,
        _report({k: v for k, v in GOOD.items() if k != "never"}),
        id="pending-though-it-fits",
    ),
    pytest.param(
        bound_pods_are_on_known_nodes, _report({**GOOD, "running-low": "n2"}), id="running-pod-moved"
    ),
]


@pytest.mark.parametrize(("check", "report"), VIOLATIONS)
def test_each_invariant_check_finds_its_violation(check: Check, report: dict[str, Any]) -> None:
    found = violations(DOCS, report, [check])
    assert found, f"{check.__name__} found nothing"
    assert all(v.startswith(f"{check.__name__}: ") for v in found)


def test_a_missing_or_reordered_pod_is_found() -> None:
    report = _report(GOOD)
    report["pods"] = report["pods"][1:] + report["pods"][:1]
    assert violations(DOCS, report, [every_pod_reported_once_in_input_order])


def test_a_pending_pod_without_a_message_or_with_an_internal_error_is_found() -> None:
    report = _report(GOOD)
    pending = [p for p in report["pods"] if p["phase"] == "Pending"]
    pending[0]["message"] = None
    pending[1]["reason"] = "SchedulerError"
    assert len(violations(DOCS, report, [pending_pods_say_why])) == 2
    assert len(report_is_well_formed(report)) == 2
