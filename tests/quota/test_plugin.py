"""The ElasticQuota and CapacityScheduling plugins in the scheduling cycle: their args, admission
(a pod, and a gang group as a unit), accounting as pods are reserved, bound and deleted, the queue's
order, and bad input that holds only its own pods.

Expected outcomes are worked by hand from the reference rules: Koordinator's
pkg/scheduler/plugins/elasticquota (plugin.go PreFilter, Reserve/Unreserve, EventsToRegister; the
defaults of ElasticQuotaArgs in pkg/scheduler/apis/config/v1/defaults.go; the webhook's checks in
pkg/webhook/elasticquota) and scheduler-plugins' pkg/capacityscheduling (capacity_scheduling.go,
capacity_scheduling_test.go TestPreFilter)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api import names
from koordpy.config.models import parse_configuration
from koordpy.framework.effects import Evict
from koordpy.framework.interfaces import ClusterEvent
from koordpy.framework.profile import validate_args
from koordpy.framework.queued import QueuedPodInfo
from koordpy.kubeapi.informer import ELASTIC_QUOTAS_SIGS, ELASTIC_QUOTAS_X_K8S, PODS, WATCHED
from koordpy.plugins.elasticquota import CapacityScheduling, ElasticQuota, ElasticQuotaArgs
from tests.builders import pod_dict
from tests.quota.quotas import cores, koord_dict, xk8s_dict
from tests.quota.worlds import (
    elastic_quota,
    gang_annotations,
    placed,
    quota_pod,
    run,
    summary,
    verdict,
    world,
)


# ------------------------------------------------------------------------------------------ args
@pytest.mark.parametrize(
    ("raw", "field", "expected"),
    [
        ({}, "enable_runtime_quota", True),
        ({}, "enable_check_parent_quota", False),
        ({}, "enable_min_quota_scale", True),
        ({}, "disable_default_quota_preemption", True),
        ({}, "monitor_all_quotas", False),
        ({}, "delay_evict_time", 120.0),
        ({}, "revoke_pod_interval", 1.0),
        ({}, "quota_group_namespace", "koordinator-system"),
        ({"delayEvictTime": "5m"}, "delay_evict_time", 300.0),
        ({"enableRuntimeQuota": False}, "enable_runtime_quota", False),
        ({"defaultQuotaGroupMax": {"cpu": "8"}}, "default_quota_group_max", {"cpu": "8"}),
    ],
)
def test_args_read_koordinators_file_with_its_defaults(
    raw: dict[str, Any], field: str, expected: Any
) -> None:
    args, problems = validate_args(ElasticQuota, raw, "args")
    assert problems == []
    assert getattr(args, field) == expected


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"defaultQuotaGroupMax": {"cpu": "lots"}}, "args.defaultQuotaGroupMax"),
        ({"revokePodInterval": "-1s"}, "args.revokePodInterval"),
        ({"enableRuntimeQuota": "sometimes"}, "args.enableRuntimeQuota"),
        ({"quotaTree": "x"}, "args.quotaTree"),
    ],
)
def test_bad_args_are_named_at_their_path(raw: dict[str, Any], path: str) -> None:
    _, problems = validate_args(ElasticQuota, raw, "args")
    assert [p.path for p in problems] == [path]


def test_capacity_scheduling_takes_no_args() -> None:
    _, problems = validate_args(CapacityScheduling, {"x": 1}, "args")
    assert problems and "takes no args" in problems[0].message


@pytest.mark.parametrize(
    ("raw", "told"),
    [
        ({}, []),
        # where koord-scheduler keeps its system and default quota objects: nothing to do here
        ({"quotaGroupNamespace": "koordinator-system"}, []),
        ({"enableQueueHint": True, "quotaSnapshotUpdateInterval": "60s"}, []),
        # the revoke loop's timing means nothing while the loop is off
        ({"revokePodInterval": "60s", "delayEvictTime": "300s"}, []),
        (
            {"monitorAllQuotas": True, "revokePodInterval": "60s", "delayEvictTime": "300s"},
            ["delayEvictTime", "monitorAllQuotas", "revokePodInterval"],
        ),
        ({"hookPlugins": [{"key": "a", "factoryKey": "b"}]}, ["hookPlugins"]),
    ],
)
def test_a_warning_names_what_koordpy_does_not_do(raw: dict[str, Any], told: list[str]) -> None:
    args = ElasticQuotaArgs.model_validate(raw)
    assert sorted(args.unhonoured_fields()) == told


@pytest.mark.parametrize(
    ("plugin", "events"),
    [
        (
            ElasticQuota,
            {ClusterEvent("ElasticQuota"), ClusterEvent("Pod", "Delete"), ClusterEvent("Node")},
        ),
        (CapacityScheduling, {ClusterEvent("ElasticQuota"), ClusterEvent("Pod", "Delete")}),
    ],
)
def test_a_held_pod_is_tried_again_when_a_quota_pod_or_node_changes(
    plugin: type, events: set[ClusterEvent]
) -> None:
    # Koordinator: EventsToRegister (pod deletion, every ElasticQuota event); its runtime also
    # follows the nodes' total. scheduler-plugins: pod deletion and ElasticQuota events.
    cluster = world([("n1", 8)])
    instance = cluster.scheduler.profiles["default-scheduler"].plugins[plugin.__name__]
    assert set(instance.events_to_register()) == events


# ------------------------------------------------------------------------------------- admission
def test_a_quota_borrows_idle_capacity_up_to_max_and_the_pod_beyond_says_why() -> None:
    # team-a is guaranteed 4 cpu of 16; nobody else asks, so its runtime is its max (12)
    cluster = run(
        world(
            [("n1", 8), ("n2", 8)],
            [koord_dict("team-a", min=cores(4), max=cores(12))],
            [quota_pod(f"a-{i}", 4, "team-a") for i in range(4)],
        )
    )
    assert sorted(placed(cluster)) == ["a-0", "a-1", "a-2"]
    reason, message = verdict(cluster, "a-3")
    assert reason == names.UNSCHEDULABLE
    assert "quota team-a: cpu used 12 + requested 4 > runtime 12" in message
    assert summary(cluster)["team-a"]["used"] == {"cpu": "12"}


@pytest.mark.parametrize(
    ("placed_pods", "pending", "bound"),
    [
        # TestPreFilter "pod subjects to ElasticQuota": ns1 min 1000, max 2000, used 300
        pytest.param(
            [("used", "ns1", "300")],
            [("ns1-p1", "ns1", "500"), ("ns1-p2", "ns1", "1800")],
            {"used", "ns1-p1"},
            id="within max, then beyond it",
        ),
        # TestPreFilter "the sum of used is bigger than the sum of min": ns1 uses 1800, ns2 200;
        # refused in PreFilter, ns2-p1 is within ns2's min, and ns1 uses more than its own: it
        # takes back what ns1 borrowed (SelectVictimsOnNode)
        pytest.param(
            [("used-1", "ns1", "1800"), ("used-2", "ns2", "200")],
            [("ns2-p1", "ns2", "500")],
            {"used-2", "ns2-p1"},
            id="all quotas together beyond the sum of mins",
        ),
        # TestPreFilter "without elasticQuotaInfo": a namespace without a quota is not limited
        pytest.param([], [("ns3-p1", "ns3", "500")], {"ns3-p1"}, id="namespace without quota"),
    ],
)
def test_capacity_scheduling_admits_within_max_and_within_the_sum_of_mins(
    placed_pods: list[tuple[str, str, str]], pending: list[tuple[str, str, str]], bound: set[str]
) -> None:
    quotas = [xk8s_dict(ns, ns, min={"memory": "1000"}, max={"memory": "2000"}) for ns in ("ns1", "ns2")]
    pods = [pod_dict(name, memory=mem, namespace=ns, node_name="n1") for name, ns, mem in placed_pods]
    pods += [pod_dict(name, memory=mem, namespace=ns) for name, ns, mem in pending]
    cluster = run(world([("n1", 8)], quotas, pods))
    assert set(placed(cluster)) == bound


def test_capacity_scheduling_message_names_the_quota_resource_and_limit() -> None:
    quotas = [xk8s_dict("ns1", "ns1", min={"memory": "1000"}, max={"memory": "2000"})]
    pods = [pod_dict("used", memory="300", namespace="ns1", node_name="n1")]
    pods += [pod_dict("big", memory="1800", namespace="ns1")]
    cluster = run(world([("n1", 8)], quotas, pods))
    _, message = verdict(cluster, "big", "ns1")
    assert "quota ns1/ns1: memory used 300 + requested 1800 > max 2000" in message


def test_a_placed_pod_counts_from_reserve_and_its_deletion_frees_the_quota() -> None:
    cluster = run(
        world(
            [("n1", 16)],
            [koord_dict("team-a", min=cores(8), max=cores(8))],
            [quota_pod(f"a-{i}", 4, "team-a") for i in range(3)],
        )
    )
    assert sorted(placed(cluster)) == ["a-0", "a-1"]
    assert summary(cluster)["team-a"]["used"] == {"cpu": "8"}
    assert summary(cluster)["team-a"]["pendingPods"] == 1
    cluster.delete_pod("default/a-0")
    run(cluster)
    assert sorted(placed(cluster)) == ["a-1", "a-2"]
    assert summary(cluster)["team-a"]["used"] == {"cpu": "8"}


# ---------------------------------------------------------------------------------------- gangs
@pytest.mark.parametrize("mode", ["Strict", "NonStrict"])
def test_a_gang_that_fits_its_quota_only_in_part_waits_as_a_unit(mode: str) -> None:
    # four 4-cpu members, a quota of 12: member by member, three would fit and hold 12 cpu
    pods = [
        quota_pod(f"job-{i}", 4, "team-a", annotations=gang_annotations("job", 4, mode)) for i in range(4)
    ]
    quota = koord_dict("team-a", min=cores(4), max=cores(12))
    cluster = run(world([("n1", 8), ("n2", 8)], [quota], pods))
    assert placed(cluster) == {}
    assert summary(cluster)["team-a"]["used"] == {"cpu": "0"}
    for i in range(4):
        _, message = verdict(cluster, f"job-{i}")
        assert "quota team-a: cpu used 0 + requested 16 > runtime 12" in message
        assert "the 4 pending pods of gang group" in message
    # room in the quota for the whole gang: all four go at once
    cluster.scheduler.on_object("ElasticQuota", "Update", koord_dict("team-a", min=cores(4), max=cores(16)))
    run(cluster)
    assert sorted(placed(cluster)) == [f"job-{i}" for i in range(4)]


def test_a_gang_within_its_quota_is_placed_whole() -> None:
    pods = [quota_pod(f"job-{i}", 4, "team-a", annotations=gang_annotations("job", 3)) for i in range(3)]
    cluster = run(world([("n1", 8), ("n2", 8)], [koord_dict("team-a", min=cores(4), max=cores(12))], pods))
    assert sorted(placed(cluster)) == ["job-0", "job-1", "job-2"]


# ------------------------------------------------------------------------------------ bad input
GOOD = koord_dict("ok", min=cores(1), max=cores(4), created=0)


@pytest.mark.parametrize(
    ("quotas", "label", "reason", "said"),
    [
        pytest.param(
            [koord_dict("bad", min=cores(2), max=cores(1), created=1)],
            "bad",
            names.QUOTA_INVALID,
            ["quota bad", "min 2 is above max 1"],
            id="min above max",
        ),
        pytest.param(
            [koord_dict("orphan", parent="nobody", max=cores(4), created=1)],
            "orphan",
            names.QUOTA_INVALID,
            ["quota orphan", "parent quota nobody does not exist"],
            id="unknown parent",
        ),
        pytest.param(
            [
                koord_dict("x", parent="y", is_parent=True, max=cores(4), created=1),
                koord_dict("y", parent="x", is_parent=True, max=cores(4), created=2),
                koord_dict("z", parent="x", max=cores(4), created=3),
            ],
            "z",
            names.QUOTA_INVALID,
            ["quota z", "quota x above it is out of scheduling", "never reaches koordinator-root-quota"],
            id="parent cycle",
        ),
        pytest.param(
            [
                koord_dict("org", is_parent=True, min=cores(4), max=cores(8), created=1),
                koord_dict("big", parent="org", min=cores(6), max=cores(8), created=2),
            ],
            "big",
            names.QUOTA_INVALID,
            ["quota big", "above parent org's min 4"],
            id="child min above parent min",
        ),
        pytest.param(
            [koord_dict("org", is_parent=True, min=cores(4), max=cores(8), created=1)],
            "org",
            names.QUOTA_INVALID,
            ["quota org is a parent quota"],
            id="pod of a parent quota",
        ),
        pytest.param(
            [], "ghost", names.QUOTA_NOT_FOUND, ["quota ghost", "does not exist"], id="quota not found"
        ),
    ],
)
def test_bad_input_holds_its_own_pods_and_every_other_quota_keeps_working(
    quotas: list[dict[str, Any]], label: str, reason: str, said: list[str]
) -> None:
    pods = [quota_pod("held", 1, label), quota_pod("fine", 1, "ok")]
    cluster = run(world([("n1", 8)], [GOOD, *quotas], pods))
    assert placed(cluster) == {"fine": "n1"}
    got_reason, message = verdict(cluster, "held")
    assert got_reason == reason
    for text in said:
        assert text in message
    # the condition carries it, as an informer's reader sees it
    conditions = cluster.pods["default/held"]["status"]["conditions"]
    assert [c["reason"] for c in conditions if c["type"] == "PodScheduled"] == [reason]


def test_a_quota_put_right_lets_its_pods_go() -> None:
    cluster = run(
        world([("n1", 8)], [koord_dict("team", min=cores(2), max=cores(1))], [quota_pod("p", 1, "team")])
    )
    assert verdict(cluster, "p")[0] == names.QUOTA_INVALID
    cluster.scheduler.on_object("ElasticQuota", "Update", koord_dict("team", min=cores(1), max=cores(2)))
    run(cluster)
    assert placed(cluster) == {"p": "n1"}


def test_unsupported_features_says_nothing_of_the_quota_label_when_elastic_quota_runs() -> None:
    cluster = run(world([("n1", 8)], [koord_dict("team-a", max=cores(8))], [quota_pod("p", 1, "team-a")]))
    assert placed(cluster) == {"p": "n1"}
    assert [e.reason for e in cluster.events if e.reason == names.EVENT_UNSUPPORTED_FEATURE] == []


# ---------------------------------------------------------------------------------- queue order
def _key(cluster: Any, name: str, priority: int | None = None) -> tuple[Any, ...]:
    pod = cluster.views[f"default/{name}"]
    sort = cluster.scheduler.profiles["default-scheduler"].queue_sort
    key: tuple[Any, ...] = sort.sort_key(QueuedPodInfo(pod, 0.0, 0.0))
    return key


def test_of_equal_priority_the_pod_of_the_quota_below_its_share_goes_first() -> None:
    # team-a uses 8 cpu and asks for 1 more; team-b uses nothing: runtimes 7 and 1 (mins 4 + 4 of 8,
    # team-b lends what it does not ask for), team-a above its share, team-b at none of it
    quotas = [
        koord_dict("team-a", min=cores(4), max=cores(16)),
        koord_dict("team-b", min=cores(4), max=cores(16)),
    ]
    pods = [quota_pod("a-0", 4, "team-a", node="n1"), quota_pod("a-1", 4, "team-a", node="n1")]
    pods += [quota_pod("a-late", 1, "team-a"), quota_pod("b-late", 1, "team-b")]
    pods += [quota_pod("a-urgent", 1, "team-a", priority=10)]
    cluster = world([("n1", 8)], quotas, pods)
    assert _key(cluster, "b-late") < _key(cluster, "a-late")
    # priority first, whatever the share
    assert _key(cluster, "a-urgent") < _key(cluster, "b-late")


def test_without_quotas_the_queue_order_is_unchanged() -> None:
    cluster = world([("n1", 8)], [], [quota_pod("b", 1), quota_pod("a", 1)])
    assert _key(cluster, "a") < _key(cluster, "b")
    assert elastic_quota(cluster).queue_share(cluster.views["default/a"]) == 0.0


def test_no_quota_plugin_no_change_with_the_default_configuration_disabling_them() -> None:
    # a configuration that turns both plugins off runs no quota rule at all
    config = parse_configuration(
        {
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {
                        "multiPoint": {"disabled": [{"name": "ElasticQuota"}, {"name": "CapacityScheduling"}]}
                    },
                }
            ]
        }
    )
    cluster = run(
        world(
            [("n1", 8)],
            [koord_dict("team-a", max=cores(1))],
            [quota_pod("p", 4, "team-a")],
            config=config,
        )
    )
    assert placed(cluster) == {"p": "n1"}


def test_a_pod_refused_for_the_sum_of_mins_is_told_so_before_it_reclaims() -> None:
    quotas = [xk8s_dict(ns, ns, min={"memory": "1000"}, max={"memory": "2000"}) for ns in ("ns1", "ns2")]
    pods = [
        pod_dict("used-1", memory="1800", namespace="ns1", node_name="n1"),
        pod_dict("used-2", memory="200", namespace="ns2", node_name="n1"),
        pod_dict("ns2-p1", memory="500", namespace="ns2"),
    ]
    cluster = world([("n1", 8)], quotas, pods)
    cluster.apply(cluster.scheduler.drain())
    assert cluster.scheduler.schedule_one()
    _, message = verdict(cluster, "ns2-p1", "ns2")
    assert "quotas in total: memory used 2000 + requested 500 > min 2000" in message
    assert [e.victim.key for e in cluster.scheduler.drain() if isinstance(e, Evict)] == ["ns1/used-1"]


@pytest.mark.parametrize(
    ("resource", "path"),
    [
        (ELASTIC_QUOTAS_SIGS, "/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas"),
        (ELASTIC_QUOTAS_X_K8S, "/apis/scheduling.x-k8s.io/v1alpha1/elasticquotas"),
    ],
)
def test_the_cluster_watches_both_elastic_quota_apis_once_their_crds_are_served(
    resource: Any, path: str
) -> None:
    # as the PodGroups: listed and watched cluster-wide, waited for while the CRD is not installed,
    # and handed to the scheduler before the pods
    assert resource in WATCHED and WATCHED.index(resource) < WATCHED.index(PODS)
    assert (resource.kind, resource.path, resource.optional) == ("ElasticQuota", path, True)
