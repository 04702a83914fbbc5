"""Preemption with quota: which pods a preemptor may evict (the victim rules both preemptions
consult), and a dry run that counts what its victims give back to their quota.

Cases from Koordinator's pkg/scheduler/plugins/elasticquota/preempt_test.go (TestPlugin_canPreempt,
TestPlugin_SelectVictimsOnNode) and scheduler-plugins' pkg/capacityscheduling
capacity_scheduling_test.go (TestDryRunPreemption, TestPostFilter), with the reclaim of borrowed
quota (the issue's must-have: a pod within its min takes back what other quotas borrow; beyond its
min, only lower-priority pods of its own quota) worked by hand from the runtime rules."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.elasticquota import LABEL_PREEMPTIBLE
from tests.builders import pod_dict
from tests.quota.quotas import cores, koord_dict, xk8s_dict
from tests.quota.worlds import (
    capacity_scheduling,
    elastic_quota,
    evicted,
    gang_annotations,
    placed,
    quota_pod,
    run,
    world,
)

Q1_Q2 = [koord_dict("q1", min=cores(8), max=cores(16)), koord_dict("q2", min=cores(8), max=cores(16))]


@pytest.mark.parametrize(
    ("placed_pods", "preemptor", "victim", "allowed"),
    [
        # TestPlugin_canPreempt
        pytest.param(
            [quota_pod("victim", 1, "q1", node="n1", priority=5, labels={LABEL_PREEMPTIBLE: "false"})],
            quota_pod("preemptor", 1, "q1", priority=10),
            "victim",
            False,
            id="victim is non-preemptible",
        ),
        pytest.param(
            [quota_pod("victim", 1, node="n1", priority=5)],
            quota_pod("preemptor", 1, priority=10),
            "victim",
            False,
            id="default-quota victims are off limits (disableDefaultQuotaPreemption)",
        ),
        pytest.param(
            [quota_pod("victim", 1, "q1", node="n1", priority=10)],
            quota_pod("preemptor", 1, "q1", priority=10),
            "victim",
            False,
            id="same priority",
        ),
        pytest.param(
            [quota_pod("victim", 1, "q1", node="n1", priority=15)],
            quota_pod("preemptor", 1, "q1", priority=5),
            "victim",
            False,
            id="victim priority higher",
        ),
        pytest.param(
            [quota_pod("victim", 1, "q2", node="n1", priority=5)],
            quota_pod("preemptor", 1, "q1", priority=10),
            "victim",
            False,
            id="different quota that borrows nothing",
        ),
        pytest.param(
            [quota_pod("victim", 1, "q1", node="n1", priority=5)],
            quota_pod("preemptor", 1, "q1", priority=10),
            "victim",
            True,
            id="all conditions met",
        ),
        # reclaim: q1 asks for its min (8); q2 uses 12, above the 8 it may use now
        pytest.param(
            [quota_pod(f"q2-{i}", 4, "q2", node="n1", priority=100) for i in range(3)],
            quota_pod("preemptor", 8, "q1", priority=10),
            "q2-0",
            True,
            id="within its min, a pod reclaims from a quota above its runtime, whatever the priority",
        ),
        pytest.param(
            [
                *[quota_pod(f"q2-{i}", 4, "q2", node="n1", priority=0) for i in range(3)],
                quota_pod("q1-0", 4, "q1", node="n1", priority=0),
            ],
            quota_pod("preemptor", 8, "q1", priority=10),
            "q2-0",
            False,
            id="beyond its min, other quotas' pods are off limits",
        ),
    ],
)
def test_koordinator_victims(
    placed_pods: list[dict[str, Any]], preemptor: dict[str, Any], victim: str, allowed: bool
) -> None:
    cluster = world([("n1", 16)], Q1_Q2, [*placed_pods, preemptor])
    plugin = elastic_quota(cluster)
    views = cluster.views
    mask = plugin.victim_filter(views["default/preemptor"], [views[f"default/{victim}"]])
    assert mask is not None
    assert mask.tolist() == [allowed]


def _ns_pod(name: str, namespace: str, priority: int, node: str = "n1") -> dict[str, Any]:
    return pod_dict(name, cpu="1", namespace=namespace, priority=priority, node_name=node)


@pytest.mark.parametrize(
    ("preemptor", "victim", "allowed"),
    [
        # a preemptor of no quota evicts lower-priority pods of no quota only
        pytest.param(_ns_pod("p", "free", 10, ""), _ns_pod("v", "free", 5), True, id="no quota, no quota"),
        pytest.param(_ns_pod("p", "free", 10, ""), _ns_pod("v", "over", 5), False, id="no quota, quota"),
        # within its min (used 0 + 1 <= 2): pods of quotas above their min, whatever the priority
        pytest.param(_ns_pod("p", "within", 10, ""), _ns_pod("v", "over", 50), True, id="reclaim"),
        pytest.param(_ns_pod("p", "within", 10, ""), _ns_pod("v", "at-min", 5), False, id="quota at its min"),
        pytest.param(_ns_pod("p", "within", 10, ""), _ns_pod("v", "within", 5), False, id="own quota"),
        # beyond its min (used 3 + 1 > 2): lower-priority pods of its own quota
        pytest.param(_ns_pod("p", "over", 10, ""), _ns_pod("v", "over", 5), True, id="own, lower"),
        pytest.param(_ns_pod("p", "over", 10, ""), _ns_pod("v", "over", 50), False, id="own, higher"),
        pytest.param(_ns_pod("p", "over", 60, ""), _ns_pod("v", "borrow", 5), False, id="other, borrowing"),
    ],
)
def test_capacity_scheduling_victims(
    preemptor: dict[str, Any], victim: dict[str, Any], allowed: bool
) -> None:
    quotas = [
        xk8s_dict(ns, ns, min={"cpu": "2"}, max={"cpu": "8"}) for ns in ("within", "over", "at-min", "borrow")
    ]
    filler = [_ns_pod(f"used-{i}", "over", 0) for i in range(2)]
    filler += [_ns_pod(f"at-{i}", "at-min", 0) for i in range(1)]
    filler += [_ns_pod(f"b-{i}", "borrow", 0) for i in range(3)]
    cluster = world([("n1", 32)], quotas, [*filler, victim, preemptor])
    plugin = capacity_scheduling(cluster)
    views = cluster.views
    pod = views[f"{preemptor['metadata']['namespace']}/p"]
    mask = plugin.victim_filter(pod, [views[f"{victim['metadata']['namespace']}/v"]])
    assert mask is not None
    assert mask.tolist() == [allowed]


# ----------------------------------------------------------------------------- through the cycle
MID, HIGH = 50, 100


def _mem_pod(name: str, namespace: str, priority: int, node: str = "") -> dict[str, Any]:
    return pod_dict(name, memory="50", namespace=namespace, priority=priority, node_name=node)


@pytest.mark.parametrize(
    ("ns1_min", "ns2_min", "t1_p2_priority", "victims"),
    [
        # ns1 would use 100 of its min 50: only its own lower-priority pods
        pytest.param("50", "200", MID, ["t1-p1"], id="in-namespace preemption"),
        # ns1 within its min 150, ns2 above its min 50: ns2's pods, the high one given back first
        pytest.param("150", "50", HIGH, ["t1-p3"], id="cross-namespace preemption"),
    ],
)
def test_capacity_scheduling_dry_run_preemption(
    ns1_min: str, ns2_min: str, t1_p2_priority: int, victims: list[str]
) -> None:
    # TestDryRunPreemption: node-a holds 150 of memory, full with three 50 pods
    quotas = [
        xk8s_dict("ns1", "ns1", min={"memory": ns1_min}, max={"memory": "200"}),
        xk8s_dict("ns2", "ns2", min={"memory": ns2_min}, max={"memory": "200"}),
    ]
    pods = [
        _mem_pod("t1-p1", "ns1", MID, "node-a"),
        _mem_pod("t1-p2", "ns2", t1_p2_priority, "node-a"),
        _mem_pod("t1-p3", "ns2", MID, "node-a"),
        _mem_pod("t1-p", "ns1", HIGH),
    ]
    cluster = run(world([("node-a", 4, "150")], quotas, pods))
    assert evicted(cluster) == victims
    assert placed(cluster)["t1-p"] == "node-a"


def test_without_quotas_preemption_is_kube_schedulers() -> None:
    # TestPostFilter "without elasticQuotas": the lower-priority pods are the victims
    pods = [
        _mem_pod("t1-p2", "ns1", MID, "n1"),
        _mem_pod("t1-p3", "ns2", MID, "n1"),
        _mem_pod("t1-p4", "ns2", MID, "n1"),
        _mem_pod("t1-p1", "ns1", HIGH),
    ]
    cluster = run(world([("n1", 4, "150")], [], pods))
    assert len(evicted(cluster)) == 1
    assert placed(cluster)["t1-p1"] == "n1"


def test_the_dry_run_gives_back_only_what_the_quota_needs() -> None:
    # TestPlugin_SelectVictimsOnNode "quota exceeded - victim becomes actual victim": the node has
    # room for the preemptor beside both low pods, its quota (8) does not: one victim, not two
    pods = [quota_pod(f"low-{i}", 4, "team-a", node="n1", priority=0) for i in range(2)]
    pods.append(quota_pod("high", 4, "team-a", priority=10))
    cluster = run(world([("n1", 16)], [koord_dict("team-a", min=cores(8), max=cores(8))], pods))
    assert evicted(cluster) == ["low-1"]
    assert placed(cluster) == {"low-0": "n1", "high": "n1"}


def test_beyond_its_min_a_pod_evicts_only_lower_priority_pods_of_its_own_quota() -> None:
    # runtimes 8 and 8 (mins 4 and 4 of 16, the rest split by equal weights); team-a uses 4 and asks
    # 4 more (within its runtime, beyond its min 4), team-b uses 12 of its 8: team-b's pods stay
    quotas = [
        koord_dict("team-a", min=cores(4), max=cores(16)),
        koord_dict("team-b", min=cores(4), max=cores(16)),
    ]
    pods = [quota_pod(f"b-{i}", 4, "team-b", node="n1", priority=0) for i in range(3)]
    pods += [
        quota_pod("a-low", 4, "team-a", node="n1", priority=0),
        quota_pod("a-high", 4, "team-a", priority=10),
    ]
    cluster = run(world([("n1", 16)], quotas, pods))
    assert evicted(cluster) == ["a-low"]
    assert placed(cluster)["a-high"] == "n1"


def test_within_its_min_a_pod_reclaims_even_from_higher_priority_borrowers() -> None:
    # team-b asks 16 of a 16-cpu cluster; team-a asks 4 of its min 8 and lends the rest: runtime_b
    # is 12 and it uses 16; its pods' priority (20) is above the preemptor's (10)
    quotas = [
        koord_dict("team-a", min=cores(8), max=cores(16)),
        koord_dict("team-b", min=cores(8), max=cores(16)),
    ]
    pods = [quota_pod(f"b-{i}", 4, "team-b", node="n1", priority=20) for i in range(4)]
    pods.append(quota_pod("a", 4, "team-a", priority=10))
    cluster = run(world([("n1", 16)], quotas, pods))
    assert len(evicted(cluster)) == 1
    assert evicted(cluster)[0].startswith("b-")
    assert placed(cluster)["a"] == "n1"


def test_a_gang_within_its_min_reclaims_through_job_level_preemption() -> None:
    # team-a borrowed the whole cluster (16 of its min 4); team-b's gang of two asks 8 of its min 12:
    # runtime_a drops to 8, the gang is admitted, and the fewest borrowed pods make room for it
    # although they have its priority
    quotas = [
        koord_dict("team-a", min=cores(4), max=cores(16)),
        koord_dict("team-b", min=cores(12), max=cores(16)),
    ]
    pods = [quota_pod(f"a-{i}", 4, "team-a", node=f"n{1 + i // 2}") for i in range(4)]
    pods += [quota_pod(f"job-{i}", 4, "team-b", annotations=gang_annotations("job", 2)) for i in range(2)]
    cluster = run(world([("n1", 8), ("n2", 8)], quotas, pods))
    victims = evicted(cluster)
    assert len(victims) == 2 and all(v.startswith("a-") for v in victims)
    bound = placed(cluster)
    assert {"job-0", "job-1"} <= set(bound)
    # the victims made room on one node, and the gang went there together
    assert bound["job-0"] == bound["job-1"]
