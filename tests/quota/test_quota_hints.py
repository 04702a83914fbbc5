"""The quota plugins' queueing hints.

ElasticQuota with `enableQueueHint` follows Koordinator's isSchedulableAfterPodDeletion and
isSchedulableAfterQuotaChanged (pkg/scheduler/plugins/elasticquota/plugin.go): a placed pod of the
waiting pod's own quota leaving, or its own quota (checking parents: one on its path to the root)
changing what it grants; without the flag every registered event queues, as in Koordinator.
CapacityScheduling registers what scheduler-plugins does (pod deletes, ElasticQuota events) and
skips the events that cannot change a quota's verdict: a pod no quota counted leaving, a quota
update that leaves min and max alone."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.config.models import parse_configuration
from koordpy.framework.interfaces import QueueingHint
from koordpy.plugins.elasticquota import CapacityScheduling, ElasticQuota
from koordpy.queue import UNSCHEDULABLE
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_pod, pod_dict
from tests.quota.quotas import cores, koord_dict, xk8s_dict
from tests.quota.worlds import capacity_scheduling, elastic_quota, run, world

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.QUEUE_SKIP
PROFILE = "default-scheduler"


def config(**args: Any) -> Any:
    return parse_configuration(
        {"profiles": [{"schedulerName": PROFILE, "pluginConfig": [{"name": "ElasticQuota", "args": args}]}]}
    )


# parent p over a and b; t alone in a tree of its own
QUOTAS = [
    koord_dict("p", is_parent=True, max=cores(8), min=cores(4)),
    koord_dict("a", parent="p", max=cores(4), min=cores(2)),
    koord_dict("b", parent="p", max=cores(4), min=cores(2)),
    koord_dict("t", tree_id="other", max=cores(4), min=cores(2)),
]


def koordinator(check_parents: bool = False) -> ElasticQuota:
    cluster = world(
        [("n1", 8)], QUOTAS, config=config(enableQueueHint=True, enableCheckParentQuota=check_parents)
    )
    return elastic_quota(cluster, PROFILE)


def in_quota(name: str, quota: str, node: str = "") -> Pod:
    return make_pod(name, cpu="1", labels={"quota.scheduling.koordinator.sh/name": quota}, node_name=node)


WAITING = in_quota("waiting", "a")


@pytest.mark.parametrize(
    ("deleted", "expected"),
    [
        pytest.param(in_quota("o", "a", node="n1"), QUEUE, id="placed-pod-of-own-quota"),
        pytest.param(in_quota("o", "a"), SKIP, id="pending-pod-of-own-quota"),
        pytest.param(in_quota("o", "b", node="n1"), SKIP, id="placed-pod-of-sibling-quota"),
        pytest.param(in_quota("o", "t", node="n1"), SKIP, id="placed-pod-of-another-tree"),
        pytest.param(None, QUEUE, id="no-object"),
    ],
)
def test_koordinator_hint_after_a_pod_deleted(deleted: Pod | None, expected: QueueingHint) -> None:
    assert koordinator().after_pod_deleted(WAITING, deleted, None) is expected


@pytest.mark.parametrize(
    ("old", "new", "check_parents", "expected"),
    [
        pytest.param(
            QUOTAS[1], koord_dict("a", parent="p", max=cores(6), min=cores(2)), False, QUEUE, id="own-max"
        ),
        pytest.param(
            QUOTAS[1], koord_dict("a", parent="p", max=cores(4), min=cores(3)), False, QUEUE, id="own-min"
        ),
        pytest.param(
            QUOTAS[1],
            koord_dict("a", parent="p", max=cores(4), min=cores(2), annotations={"written": "status"}),
            False,
            SKIP,
            id="own-status-only",
        ),
        pytest.param(
            QUOTAS[2], koord_dict("b", parent="p", max=cores(6), min=cores(2)), False, SKIP, id="sibling"
        ),
        pytest.param(
            QUOTAS[0], koord_dict("p", is_parent=True, max=cores(9), min=cores(4)), False, SKIP, id="parent"
        ),
        pytest.param(
            QUOTAS[0],
            koord_dict("p", is_parent=True, max=cores(9), min=cores(4)),
            True,
            QUEUE,
            id="parent-checking-parents",
        ),
        pytest.param(
            QUOTAS[3],
            koord_dict("t", tree_id="other", max=cores(9), min=cores(2)),
            True,
            SKIP,
            id="other-tree",
        ),
        pytest.param(
            xk8s_dict("a", "default", max=cores(1)),
            xk8s_dict("a", "default", max=cores(9)),
            False,
            SKIP,
            id="x-k8s",
        ),
        pytest.param(None, QUOTAS[1], False, QUEUE, id="before-unknown"),
    ],
)
def test_koordinator_hint_after_a_quota_update(
    old: Any, new: Any, check_parents: bool, expected: QueueingHint
) -> None:
    assert koordinator(check_parents).after_quota_changed(WAITING, old, new) is expected


def test_koordinator_registers_without_hints_unless_asked() -> None:
    plugin = elastic_quota(world([("n1", 8)], QUOTAS), PROFILE)
    hints = plugin.queueing_hints()
    assert {h.event for h in hints} == set(plugin.events_to_register())
    assert all(h.hint is None for h in hints)


def capacity() -> CapacityScheduling:
    quotas = [xk8s_dict("team", "team", min=cores(2), max=cores(4))]
    return capacity_scheduling(world([("n1", 8)], quotas), PROFILE)


@pytest.mark.parametrize(
    ("deleted", "expected"),
    [
        pytest.param(make_pod("o", namespace="team", node_name="n1"), QUEUE, id="placed-pod-of-a-quota"),
        pytest.param(make_pod("o", namespace="team"), SKIP, id="pending-pod-of-a-quota"),
        pytest.param(make_pod("o", namespace="free", node_name="n1"), SKIP, id="placed-pod-of-no-quota"),
    ],
)
def test_capacity_scheduling_hint_after_a_pod_deleted(deleted: Pod, expected: QueueingHint) -> None:
    assert capacity().after_pod_deleted(make_pod("waiting", namespace="team"), deleted, None) is expected


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        pytest.param(xk8s_dict("team", "team", min=cores(2), max=cores(6)), QUEUE, id="max"),
        pytest.param(xk8s_dict("team", "team", min=cores(3), max=cores(4)), QUEUE, id="min"),
        pytest.param(xk8s_dict("team", "team", min=cores(2), max=cores(4), created=5), SKIP, id="neither"),
    ],
)
def test_capacity_scheduling_hint_after_a_quota_update(new: Any, expected: QueueingHint) -> None:
    old = xk8s_dict("team", "team", min=cores(2), max=cores(4))
    assert capacity().after_quota_changed(make_pod("waiting", namespace="team"), old, new) is expected


def where(cluster: MemoryCluster, name: str, namespace: str) -> str | None:
    return cluster.scheduler.queues[PROFILE].where.get(f"{namespace}/{name}")


def test_a_quota_held_pod_is_requeued_by_its_quota_freeing_room_not_by_other_events() -> None:
    # team's max is 4 CPUs and 3 are used: a 2-CPU pod is refused by CapacityScheduling
    quota = xk8s_dict("team", "team", min=cores(4), max=cores(4))
    pods = [
        pod_dict("used", cpu="3", namespace="team", node_name="n1"),
        pod_dict("elsewhere", cpu="1", namespace="free", node_name="n1"),
        pod_dict("waiting", cpu="2", namespace="team"),
    ]
    cluster = run(world([("n1", 16)], [quota], pods), 30)
    assert where(cluster, "waiting", "team") == UNSCHEDULABLE
    assert cluster.scheduler.queues[PROFILE].infos["team/waiting"].unschedulable_plugins == {
        "CapacityScheduling"
    }

    # irrelevant: a pod of no quota leaves, the quota's status is written
    cluster.delete_pod("free/elsewhere")
    written = dict(quota, status={"used": {"cpu": "3"}})
    cluster.scheduler.on_object("ElasticQuota", "Update", written, quota)
    assert where(cluster, "waiting", "team") == UNSCHEDULABLE

    # relevant: the quota's own pod leaves
    cluster.delete_pod("team/used")
    assert where(cluster, "waiting", "team") != UNSCHEDULABLE
    run(cluster, 60)
    assert cluster.views["team/waiting"].node_name == "n1"
