"""A pod its quota holds says what holds it now: kube-scheduler rewrites PodScheduled on every failed
attempt, and a held pod is attempted again on the events its rejector registers (scheduler-plugins'
CapacityScheduling: a pod deleted, any ElasticQuota event), not on others.

scheduler-plugins' capacity scheduling demo (pkg/capacityscheduling/README.md), step by step:
quota1 and quota2 (min 4, max 6 cpu each) on 8 cpus. quota1's fourth 2-cpu pod is held by its max
(used 6). quota2's first pod binding changes nothing that could admit it (quota1 still uses 6; no
re-attempt, and the message, still true, stays). quota2's second pod, within its min, preempts one
of quota1's; that deletion re-attempts the held pod, which is now held by the sum of the mins."""

from __future__ import annotations

from tests.builders import pod_dict
from tests.quota.quotas import xk8s_dict
from tests.quota.worlds import placed, run, verdict, world

QUOTAS = [xk8s_dict(ns, ns, min={"cpu": "4"}, max={"cpu": "6"}) for ns in ("quota1", "quota2")]
BY_MAX = "quota quota1/quota1: cpu used 6 + requested 2 > max 6"
BY_TOTAL = "quotas in total: cpu used 8 + requested 2 > min 8"


def test_the_held_pods_message_follows_what_holds_it_after_each_attempt() -> None:
    cluster = run(
        world(
            [("n1", 4), ("n2", 4)],
            QUOTAS,
            [pod_dict(f"app1-{i}", cpu="2", namespace="quota1") for i in range(4)],
        ),
        60,
    )
    (held,) = {f"app1-{i}" for i in range(4)} - set(placed(cluster))
    assert BY_MAX in verdict(cluster, held, "quota1")[1]

    cluster.add_pod(pod_dict("app2-0", cpu="2", namespace="quota2"))
    run(cluster, 60)
    assert "app2-0" in placed(cluster)
    assert BY_MAX in verdict(cluster, held, "quota1")[1]

    cluster.add_pod(pod_dict("app2-1", cpu="2", namespace="quota2"))
    run(cluster, 60)
    assert [e.victim.split("/")[0] for e in cluster.evictions] == ["quota1"]
    assert "app2-1" in placed(cluster)
    message = verdict(cluster, held, "quota1")[1]
    assert BY_TOTAL in message and BY_MAX not in message
