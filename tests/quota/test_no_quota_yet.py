"""A cluster in which no ElasticQuota of a plugin's API group exists yet is scheduled as the reference
schedules it without quotas.

- scheduler-plugins (pkg/capacityscheduling capacity_scheduling.go): CapacityScheduling's PostFilter
  is always the preemption evaluator; SelectVictimsOnNode lets a preemptor of no quota evict the
  lower-priority pods of no quota, which, while no quota exists, is every lower-priority pod
  (capacity_scheduling_test.go TestPostFilter "without elasticQuotas"). With scheduler-plugins' own
  configuration (manifests/capacityscheduling/scheduler-config.yaml: CapacityScheduling the only
  PostFilter) that is the only preemption there is.
- Koordinator (pkg/scheduler/plugins/elasticquota plugin_helper.go getPodAssociateQuotaNameAndTreeID,
  and the pod webhook's getQuotaNameFromPodNoLock): a pod whose quota label names a quota that does
  not exist joins `koordinator-default-quota`, unlimited unless configured; with no quota at all the
  pod is scheduled as without the plugin. koordpy holds such a pod with QuotaNotFound only once
  quotas are in use (a deliberate, documented difference: docs/migrating.md), never before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api import names
from koordpy.api.node import Node
from koordpy.config.models import parse_configuration
from tests.builders import node_dict, pod_dict
from tests.quota.quotas import cores, koord_dict, xk8s_dict
from tests.quota.worlds import evicted, placed, quota_pod, run, verdict, world

SIGS_CONFIG = Path(__file__).parents[1] / "config" / "files" / "sigs-capacityscheduling.yaml"


def _sigs_configuration() -> Any:
    return parse_configuration(yaml.safe_load(SIGS_CONFIG.read_text()), str(SIGS_CONFIG))


def _pod(name: str, namespace: str, priority: int, node: str = "") -> dict[str, Any]:
    return pod_dict(name, cpu="2", namespace=namespace, priority=priority, node_name=node)


@pytest.mark.parametrize(
    ("quotas", "low", "victims", "preemptor_placed"),
    [
        # no quota of scheduling.x-k8s.io anywhere: kube-scheduler's preemption, by priority
        pytest.param([], [("low-a", "ns1"), ("low-b", "ns2")], 1, True, id="no quota at all"),
        # a quota exists, in another namespace: the preemptor (of no quota) evicts only pods of no
        # quota; the node holds only pods of the quota's namespace, so nothing
        pytest.param(
            [xk8s_dict("q", "ns-q", min={"cpu": "4"}, max={"cpu": "8"})],
            [("low-a", "ns-q"), ("low-b", "ns-q")],
            0,
            False,
            id="a quota elsewhere: pods of a quota are not the victims of a pod of none",
        ),
    ],
)
def test_capacity_scheduling_alone_preempts_by_priority_while_no_quota_concerns_the_pods(
    quotas: list[dict[str, Any]], low: list[tuple[str, str]], victims: int, preemptor_placed: bool
) -> None:
    pods = [_pod(name, ns, 0, "n1") for name, ns in low]
    pods.append(_pod("high", "ns1", 100))
    cluster = run(world([("n1", 4)], quotas, pods, config=_sigs_configuration()), 120)
    assert len(evicted(cluster)) == victims
    assert ("high" in placed(cluster)) is preemptor_placed


def test_capacity_scheduling_preempts_nothing_of_equal_priority_without_quotas() -> None:
    pods = [_pod("a", "ns1", 100, "n1"), _pod("b", "ns2", 100, "n1"), _pod("late", "ns1", 100)]
    cluster = run(world([("n1", 4)], [], pods, config=_sigs_configuration()), 120)
    assert evicted(cluster) == []
    assert "late" not in placed(cluster)


@pytest.mark.parametrize(
    ("quotas", "expected"),
    [
        # Koordinator: the default quota takes the pod; with no quota at all nothing holds it
        pytest.param([], "placed", id="no ElasticQuota at all"),
        # quotas of the other API group do not put Koordinator's quota in use
        pytest.param([xk8s_dict("q", "elsewhere", max={"cpu": "8"})], "placed", id="x-k8s quotas only"),
        # quotas in use, not the one named: koordpy's QuotaNotFound (documented difference)
        pytest.param([koord_dict("team", max=cores(8))], names.QUOTA_NOT_FOUND, id="quotas in use"),
    ],
)
def test_a_pod_naming_a_quota_is_held_only_while_quotas_are_in_use(
    quotas: list[dict[str, Any]], expected: str
) -> None:
    cluster = run(world([("n1", 8)], quotas, [quota_pod("p", 1, "ghost")]), 60)
    if expected == "placed":
        assert placed(cluster) == {"p": "n1"}
    else:
        assert placed(cluster) == {}
        assert verdict(cluster, "p")[0] == expected


def test_once_quotas_are_in_use_a_pod_naming_a_missing_one_is_held() -> None:
    # no room for the pod while no quota exists; quotas come into use (not its own) and a node with
    # room arrives: the pod is held with QuotaNotFound; its own quota created, it is placed
    cluster = run(world([("n1", 1)], [], [quota_pod("p", 2, "ghost")]), 60)
    assert verdict(cluster, "p")[0] == names.UNSCHEDULABLE
    cluster.scheduler.on_object("ElasticQuota", "Add", koord_dict("team", max=cores(8)))
    cluster.add_node(Node.from_dict(node_dict("n2", cpu="4", memory="64Gi")))
    run(cluster, 60)
    assert verdict(cluster, "p")[0] == names.QUOTA_NOT_FOUND
    cluster.scheduler.on_object("ElasticQuota", "Add", koord_dict("ghost", max=cores(8), created=2))
    run(cluster, 60)
    assert placed(cluster) == {"p": "n2"}
