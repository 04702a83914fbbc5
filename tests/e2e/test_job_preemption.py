"""Job-level preemption on the real control plane: a high-priority gang that cannot fit evicts the
cheapest set of lower-priority pods for the whole gang at once, every member is nominated, and once
the victims are gone every member is bound.

Three KWOK nodes of 4 cpu, each full of lower-priority pods bound there at creation:

    node-0: two standalone low pods of 2 cpu        -> 2 jobs, lowest priority, 2 pods
    node-1: one standalone mid pod of 4 cpu         -> 1 job,  higher priority, 1 pod
    node-2: a low PodGroup of two pods of 2 cpu     -> 1 job,  lowest priority, 2 pods

The gang (a PodGroup of two high pods of 2 cpu) fits on any one node once it is emptied. The cost
order (fewest jobs disrupted, then their priorities, then fewest pods) makes node-2 the only
answer: node-0 disrupts more jobs, node-1 a job of higher priority, and node-2 has the largest name,
so no name tie-break can pick it by chance. The victims are exactly the low PodGroup's two pods."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest
from kubernetes_asyncio import client

from koordpy.cluster.world import KubeWorld
from tests.e2e.cluster import levelled_priority_classes
from tests.e2e.kwok import labelled_nodes
from tests.e2e.test_gangs import create_podgroup
from tests.e2e.test_run import NODE_LABEL, SCHEDULER_NAME, PodWatch, events_of, running_world, settle
from tests.support.controlplane import ControlPlane
from tests.support.polling import eventually

GANG_LABEL = "pod-group.scheduling.sigs.k8s.io"
NODE_CPU = "4"
# a victim's grace period: the deletion is graceful (KWOK finalizes it at once on its nodes)
VICTIM_GRACE = 30


@dataclass(frozen=True)
class Nodes:
    label: str
    names: list[str]


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
async def nodes(control_plane: ControlPlane) -> AsyncIterator[Nodes]:
    """Three 4-cpu KWOK nodes with a NODE_LABEL value of this module's own."""
    resources = {"cpu": NODE_CPU, "memory": "32Gi", "pods": "110"}
    async with labelled_nodes(str(control_plane.kubeconfig), "jp-node", 3, NODE_LABEL, resources) as (
        label,
        names,
    ):
        yield Nodes(label, names)


@pytest.fixture
async def world(control_plane: ControlPlane, nodes: Nodes) -> AsyncIterator[KubeWorld]:
    async with running_world(control_plane) as w:
        yield w


@pytest.fixture
async def priority_classes(kube_api: client.ApiClient) -> AsyncIterator[dict[str, str]]:
    """PriorityClasses low (10), mid (500) and high (1000), uniquely named; deleted afterwards."""
    async with levelled_priority_classes(kube_api, "e2e-jp") as names:
        yield names


# ---------------------------------------------------------------------------------------------- helpers
def pod_manifest(
    name: str,
    label: str,
    cpu: str,
    priority_class: str,
    *,
    node_name: str | None = None,
    gang: str | None = None,
    grace_seconds: int = 0,
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={GANG_LABEL: gang} if gang else {"app": "e2e-jp"}),
        spec=client.V1PodSpec(
            scheduler_name=SCHEDULER_NAME,
            node_name=node_name,
            node_selector={NODE_LABEL: label},
            priority_class_name=priority_class,
            termination_grace_period_seconds=grace_seconds,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests={"cpu": cpu, "memory": "64Mi"}),
                )
            ],
        ),
    )


@dataclass(frozen=True)
class Seen:
    seq: int
    type: str
    obj: dict[str, Any]

    @property
    def node_name(self) -> str | None:
        return cast("str | None", (self.obj.get("spec") or {}).get("nodeName"))

    @property
    def nominated(self) -> str | None:
        return cast("str | None", (self.obj.get("status") or {}).get("nominatedNodeName"))

    @property
    def deleting(self) -> bool:
        return bool(self.obj["metadata"].get("deletionTimestamp"))

    def conditions(self, condition_type: str) -> list[dict[str, Any]]:
        found = (self.obj.get("status") or {}).get("conditions") or ()
        return [c for c in found if c.get("type") == condition_type]


class EventWatch(PodWatch):
    """The namespace's pod watch, its events read as `Seen` records."""

    def of(self, pod: str) -> list[Seen]:
        return [Seen(seq, kind, obj) for seq, kind, obj in self.events.get(pod, ())]

    def all(self) -> dict[str, list[Seen]]:
        return {name: self.of(name) for name in self.events}

    def first(self, pod: str, what: str, test: Callable[[Seen], object]) -> Seen:
        for s in self.of(pod):
            if test(s):
                return s
        raise AssertionError(
            f"{pod}: never seen {what}; seen: {[(s.type, s.obj['status']) for s in self.of(pod)]}"
        )


# ---------------------------------------------------------------------------------------------- test
async def test_gang_preempts_the_cheapest_job_and_is_bound_once_it_is_gone(
    world: KubeWorld,
    kube_api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    nodes: Nodes,
    priority_classes: dict[str, str],
) -> None:
    suffix = uuid.uuid4().hex[:5]
    node0, node1, node2 = nodes.names
    low, mid, high = priority_classes["low"], priority_classes["mid"], priority_classes["high"]
    low_job = f"low-job-{suffix}"
    # name -> (node, cpu, priority class, gang)
    workload: dict[str, tuple[str, str, str, str | None]] = {
        f"solo-a-{suffix}": (node0, "2", low, None),
        f"solo-b-{suffix}": (node0, "2", low, None),
        f"mid-{suffix}": (node1, "4", mid, None),
        f"{low_job}-0": (node2, "2", low, low_job),
        f"{low_job}-1": (node2, "2", low, low_job),
    }
    expected_victims = {f"{low_job}-0", f"{low_job}-1"}
    bystanders = set(workload) - expected_victims
    gang = f"high-gang-{suffix}"
    members = [f"{gang}-0", f"{gang}-1"]

    async with EventWatch(kube_api, namespace) as watch:
        await create_podgroup(kube_api, "scheduling.sigs.k8s.io", namespace, low_job, 2)
        for name, (node, cpu, pc, pod_gang) in workload.items():
            await core.create_namespaced_pod(
                namespace,
                pod_manifest(
                    name, nodes.label, cpu, pc, node_name=node, gang=pod_gang, grace_seconds=VICTIM_GRACE
                ),
            )

        async def workload_running_and_cached() -> bool:
            pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
            return all(
                n in pods
                and pods[n].status.phase == "Running"
                and world.scheduler.cache.pod_state(f"{namespace}/{n}") is not None
                for n in workload
            )

        # the scheduler must count the workload on its nodes before the gang comes
        await eventually(workload_running_and_cached, timeout=60, what="the workload Running and cached")

        await create_podgroup(kube_api, "scheduling.sigs.k8s.io", namespace, gang, 2)
        for name in members:
            await core.create_namespaced_pod(namespace, pod_manifest(name, nodes.label, "2", high, gang=gang))

        async def members_bound() -> bool:
            pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
            return all(n in pods and pods[n].spec.node_name for n in members)

        await eventually(members_bound, timeout=90, what="every gang member bound")
        await settle(world)
        # a little longer, to see that nothing more is evicted or moved
        await asyncio.sleep(3)
        await settle(world)

    final = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}

    # exactly the expected victims were marked, by one preemption of the gang
    marked = {
        name for name, seen in watch.all().items() if any(s.conditions("DisruptionTarget") for s in seen)
    }
    assert marked == expected_victims
    message = re.compile(
        rf"^{re.escape(SCHEDULER_NAME)}: preempting to accommodate higher priority pods, "
        rf"preemptor: {re.escape(namespace)}/{re.escape(gang)}, "
        rf"triggerPod: {re.escape(namespace)}/({'|'.join(re.escape(m) for m in members)})$"
    )
    messages = set()
    for victim in sorted(expected_victims):
        cond = watch.first(victim, "DisruptionTarget", lambda s: s.conditions("DisruptionTarget"))
        mark = cond.conditions("DisruptionTarget")[-1]
        assert mark["status"] == "True", mark
        assert mark["reason"] == "PreemptionByScheduler", mark
        assert message.match(mark["message"]), mark["message"]
        messages.add(mark["message"])
        # then deleted through the API with the pod's grace period, and gone
        deleting = watch.first(victim, "a deletionTimestamp", lambda s: s.deleting)
        assert deleting.obj["metadata"].get("deletionGracePeriodSeconds") == VICTIM_GRACE, deleting.obj
        assert cond.seq < deleting.seq, "deleted before being marked"
        assert deleting.conditions("DisruptionTarget"), "the mark was lost on deletion"
        watch.first(victim, "DELETED", lambda s: s.type == "DELETED")
        assert victim not in final
        assert watch.of(victim)[0].node_name == node2
    assert len(messages) == 1, messages

    # no other pod was touched: not marked, not deleted, still on its node
    for name in bystanders:
        assert not any(s.deleting or s.type == "DELETED" for s in watch.of(name)), name
        assert name in final and final[name].spec.node_name == workload[name][0], name
        assert final[name].metadata.deletion_timestamp is None, name

    # every member was nominated to the emptied node before binding, and bound there after the
    # victims were gone, once each
    victims_gone = max(watch.first(v, "DELETED", lambda s: s.type == "DELETED").seq for v in expected_victims)
    for name in members:
        nominated = watch.first(
            name, "nominatedNodeName before binding", lambda s: s.nominated and not s.node_name
        )
        assert nominated.nominated == node2, nominated.obj["status"]
        assert {s.nominated for s in watch.of(name) if s.nominated} == {node2}
        bound = watch.first(name, "bound", lambda s: s.node_name)
        # the scheduler honours the nomination: the member is bound on the node it was last given
        given = [s.nominated for s in watch.of(name) if s.nominated and not s.node_name]
        assert bound.node_name == given[-1], (bound.node_name, given)
        assert bound.node_name == node2
        assert bound.seq > victims_gone, f"{name} bound before the victims were gone"
        assert {s.node_name for s in watch.of(name) if s.node_name} == {node2}
        assert final[name].spec.node_name == node2
        assert not any(s.conditions("DisruptionTarget") or s.deleting for s in watch.of(name)), name

    async def preempted_events() -> list[Any]:
        found = await events_of(kube_api, namespace, "Preempted")
        return found if len(found) >= len(expected_victims) else []

    events = await eventually(preempted_events, what="a Preempted event per victim")
    assert sorted(e.regarding.name for e in events) == sorted(expected_victims)
    trigger = message.match(messages.pop())
    assert trigger is not None
    for e in events:
        assert e.reporting_controller == SCHEDULER_NAME
        assert e.note == f"Preempted by {namespace}/{trigger.group(1)} on node {node2}"
