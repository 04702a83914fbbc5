"""The cluster world's guards: an object the scheduler fails on is retried once and then left out
with a Warning event, a node koordpy cannot use is left out with a Warning event, the audit puts
back what the cache lost, and /healthz reports what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.kubeapi.informer import PODS
from tests.cluster.world_support import BINDINGS, EVENTS, Start, node, pending_pod
from tests.support.fakeapi import Reply, until


def unusable_node(name: str) -> dict[str, Any]:
    raw = node(name)
    raw["status"]["allocatable"]["cpu"] = "-4"
    return raw


async def test_a_node_koordpy_cannot_use_is_left_out_with_a_warning(start: Start) -> None:
    cluster = await start([pending_pod("p")], nodes=Reply.items([unusable_node("bad"), node("n1")], "10"))
    (binding,) = await cluster.fake.wait_for("POST", BINDINGS)
    assert binding.body["target"]["name"] == "n1"
    await until(lambda: len(cluster.fake.matching("POST", EVENTS)) >= 2, what="two events")
    warnings = [r.body for r in cluster.fake.matching("POST", EVENTS) if r.body["type"] == "Warning"]
    (warning,) = warnings
    assert warning["regarding"]["kind"] == "Node" and warning["regarding"]["name"] == "bad"
    assert warning["reason"] == names.INVALID_SPEC
    assert "status.allocatable.cpu" in warning["note"]
    assert cluster.world.health_problems() == []


async def test_an_object_that_fails_twice_is_left_out_and_the_others_are_scheduled(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = await start(wait_synced=False)
    sched = cluster.scheduler
    real_add = sched.on_pod_add

    def choking_add(pod: Pod) -> None:
        if pod.name == "poison":
            raise ValueError("cannot digest this pod")
        real_add(pod)

    monkeypatch.setattr(sched, "on_pod_add", choking_add)
    await cluster.world.wait_synced()
    watch = cluster.fake.watch(PODS.path)
    await watch.watching()
    watch.added(pending_pod("poison"))
    watch.added(pending_pod("good"))
    (binding,) = await cluster.fake.wait_for("POST", BINDINGS)
    assert binding.body["metadata"]["name"] == "good"
    await until(
        lambda: any(r.body["type"] == "Warning" for r in cluster.fake.matching("POST", EVENTS)),
        what="a Warning event",
    )
    (warning,) = [r.body for r in cluster.fake.matching("POST", EVENTS) if r.body["type"] == "Warning"]
    assert warning["regarding"]["name"] == "poison"
    assert warning["reason"] == names.SCHEDULER_ERROR
    assert "ValueError: cannot digest this pod" in warning["note"]
    assert ("Pod", "default/poison") in cluster.world.integrity.quarantined
    assert cluster.world.metrics.event_failures.labels("Pod")._value.get() == 1
    # the same version delivered again (a re-list) is not tried again
    cluster.world.integrity.audit()
    assert cluster.world.metrics.event_failures.labels("Pod")._value.get() == 1


async def test_the_audit_puts_back_a_bound_pod_the_cache_lost(start: Start) -> None:
    cluster = await start([pending_pod("p")])
    await cluster.fake.wait_for("POST", BINDINGS)
    await until(lambda: not cluster.scheduler.pending("default/p"), what="p bound")
    # the server's view of the pod after the binding, as the watch would deliver it
    bound = pending_pod("p")
    bound["spec"]["nodeName"] = "n1"
    bound["metadata"]["resourceVersion"] = "3"
    cluster.fake.watch(PODS.path).modified(bound)
    await until(lambda: not cluster.scheduler.cache.is_assumed("default/p"), what="binding confirmed")
    state = cluster.scheduler.cache.pod_state("default/p")
    assert state is not None
    cluster.scheduler.cache.remove_pod(state.pod)

    found = cluster.world.integrity.audit()

    assert found == ["pod default/p bound to n1 on the server, not in the cache"]
    restored = cluster.scheduler.cache.pod_state("default/p")
    assert restored is not None and restored.node_name == "n1"
    assert cluster.world.integrity.audit() == []


async def test_health_names_each_reason_scheduling_cannot_be_trusted(start: Start) -> None:
    cluster = await start()
    world, sched = cluster.world, cluster.scheduler
    assert world.health_problems() == []
    sched.failed_cycles_in_a_row = 20
    world.loop_failures_in_a_row = 3
    sched.cache_problems = ["node n1: requested differs from the sum of its 0 pods"]
    assert world.health_problems() == [
        "the scheduling loop failed 3 times in a row",
        "20 scheduling cycles in a row ended in an internal error",
        "the cache is inconsistent: node n1: requested differs from the sum of its 0 pods",
    ]
