"""What the cluster world keeps for pods lets go of them when they go: a standby's held decisions and
the status writer's marks. Sizes of the structures after rounds of pods created and deleted, not
memory: a structure that grows by one entry per pod is a leak under churn."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from koordpy.api.pod import Pod
from koordpy.cluster.events import EventRecorder, pod_reference
from koordpy.cluster.world import HELD_PRUNE_SLACK, KubeWorld
from koordpy.cluster.writes import LATER_SLACK, PodStatusWriter
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.effects import PodUnschedulable
from koordpy.kubeapi.client import KubeApi
from koordpy.kubeapi.informer import PODS, Informer
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from tests.builders import make_node, node_dict, pod_dict

X_K8S_LABEL = "scheduling.x-k8s.io/pod-group"
ROUNDS = 20
PER_ROUND = 60
# no API call is made by what these tests do
NO_API = cast(KubeApi, object())


def gang_member(name: str, gang: str) -> Pod:
    raw = pod_dict(name, cpu="100m", labels={X_K8S_LABEL: gang})
    raw["metadata"]["uid"] = f"uid-{name}"
    return Pod.from_dict(raw)


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-pg-{name}"},
        "spec": {"minMember": min_member},
    }


def standby() -> KubeWorld:
    scheduler = Scheduler(default_configuration(), registry(), VirtualClock(0.0))
    scheduler.on_node_add(make_node("n1", cpu="64"))
    return KubeWorld(NO_API, scheduler, SchedulerMetrics(), "standby", leading=lambda: False)


def test_a_standby_holds_no_decision_on_pods_that_are_gone() -> None:
    """A standby runs no cycle, but its events decide (a gang member short of its gang is gated,
    with a verdict to write once it leads): what it holds for a pod goes when the pod goes."""
    world = standby()
    sched = world.scheduler
    for r in range(ROUNDS):
        # gangs that never complete: each member is gated with a verdict, then deleted
        sched.on_object("PodGroup", "Add", podgroup(f"g{r}", PER_ROUND + 1))
        members = [gang_member(f"g{r}-{m}", f"g{r}") for m in range(PER_ROUND)]
        for pod in members:
            sched.on_pod_add(pod)
        world._hold_effects()
        for pod in members:
            sched.on_pod_delete(pod)
        sched.on_object("PodGroup", "Delete", podgroup(f"g{r}", PER_ROUND + 1))
        world._hold_effects()
    outbox = sched.outbox
    assert len(outbox) <= 2 * PER_ROUND + HELD_PRUNE_SLACK, f"{len(outbox)} effects held"


def test_a_standby_keeps_the_latest_verdict_of_a_pod_that_stays() -> None:
    world = standby()
    sched = world.scheduler
    sched.on_object("PodGroup", "Add", podgroup("stays", ROUNDS * PER_ROUND + 2))
    kept = gang_member("stays-0", "stays")
    sched.on_pod_add(kept)
    for r in range(ROUNDS):
        gone = [gang_member(f"gone{r}-{m}", "stays") for m in range(PER_ROUND)]
        for pod in gone:
            sched.on_pod_add(pod)
        for pod in gone:
            sched.on_pod_delete(pod)
        world._hold_effects()
    held = [e for e in sched.outbox if isinstance(e, PodUnschedulable) and e.pod.key == kept.key]
    assert held, "the pod that stays keeps a verdict to write"
    assert len(sched.outbox) <= 2 * PER_ROUND + HELD_PRUNE_SLACK


def test_the_status_writer_forgets_the_marks_of_pods_that_go() -> None:
    """A gang member's verdict settles before it is written; a pod bound or deleted before then
    leaves no mark, and no entry in the queue of later marks."""
    events = EventRecorder(NO_API, "test")
    writer = PodStatusWriter(NO_API, cast(Any, None), lambda key: None, events, now=lambda: 0.0)
    for r in range(ROUNDS):
        pods = [gang_member(f"p{r}-{m}", "g") for m in range(PER_ROUND)]
        for pod in pods:
            writer.mark(pod, settle=True)
        assert writer.queued() == PER_ROUND
        for pod in pods:
            writer.forget(pod.key)
        assert writer.queued() == 0
        assert writer.queued_pods() == []
    assert len(writer._later) <= PER_ROUND + 2 * LATER_SLACK


def test_nodes_reported_unusable_are_forgotten_when_deleted() -> None:
    """A node koordpy cannot use is reported once per version; a deleted node's report goes."""
    world = standby()
    for r in range(ROUNDS):
        raw = node_dict(f"bad-{r}", cpu="lots")
        raw["metadata"].update(uid=f"uid-bad-{r}", resourceVersion="1")
        world._on_node("Add", raw, None)
        assert f"bad-{r}" in world.integrity.reported_nodes
        world._on_node("Delete", raw, raw)
    assert world.integrity.reported_nodes == {}


def test_a_list_drops_managed_fields_page_by_page() -> None:
    """A list after a 410 holds every object twice until it is delivered (the store's and the
    list's): each page is trimmed as it arrives, so the peak is the trimmed list and one page, not
    the whole list as the apiserver sent it."""
    first_page: list[dict[str, Any]] = []
    trimmed_when_next_asked: list[bool] = []

    def item(i: int) -> dict[str, Any]:
        raw = pod_dict(f"p{i}")
        raw["metadata"].update(
            uid=f"uid-p{i}", resourceVersion=str(i + 10), managedFields=[{"manager": "kubelet"}]
        )
        return raw

    class Pages:
        async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
            if dict(kw.get("query") or ()).get("continue"):
                trimmed_when_next_asked.append(all("managedFields" not in i["metadata"] for i in first_page))
                return {"metadata": {"resourceVersion": "99"}, "items": [item(2), item(3)]}
            first_page[:] = [item(0), item(1)]
            return {"metadata": {"resourceVersion": "99", "continue": "next"}, "items": first_page}

    informer = Informer(cast(KubeApi, Pages()), PODS, lambda action, obj, old: None, page_size=2)
    asyncio.run(informer._list())
    assert trimmed_when_next_asked == [True]
    assert len(informer.store) == 4
    assert all("managedFields" not in o["metadata"] for o in informer.store.values())


def test_the_event_series_of_a_deleted_pod_are_forgotten_with_it() -> None:
    """Events are correlated into series for minutes; the series of a pod that is gone cannot
    repeat (its uid is in the key), so they go with the pod, and repeats not yet written are
    written first."""
    sent: list[tuple[str, str, Any]] = []

    class Api:
        async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
            sent.append((method, path, kw.get("body")))
            return {}

    async def churn() -> EventRecorder:
        events = EventRecorder(cast(KubeApi, Api()), "test")
        for r in range(ROUNDS):
            pods = [gang_member(f"p{r}-{m}", "g") for m in range(PER_ROUND)]
            for pod in pods:
                # three of a kind: created, turned into a series, then counted in memory only
                for _ in range(3):
                    events.record(pod_reference(pod), "Warning", "FailedScheduling", "Scheduling", "no")
            while events._queue:
                await events._send(events._queue.popleft())
            assert events.cached() == PER_ROUND
            for pod in pods:
                events.forget_object(pod.uid)
            assert events.cached() == 0
            await asyncio.sleep(0)
        return events

    events = asyncio.run(churn())
    assert events._keys_of == {}
    # each pod's third repeat is written when its series ends with the pod
    counts = [body["series"]["count"] for method, _, body in sent if method == "PATCH"]
    assert counts.count(3) == ROUNDS * PER_ROUND
