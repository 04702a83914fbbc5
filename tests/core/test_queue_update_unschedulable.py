"""An update of a pod waiting in the unschedulable pool, as kube-scheduler's PriorityQueue.Update
handles it with queueing hints: the pod's own update event is asked of the hints of the plugins
that rejected it (isPodWorthRequeuing, requeuePodViaQueueingHint). QUEUE moves it to backoffQ
while its backoff runs, to activeQ after; otherwise it stays in the pool, as the update has it."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.interfaces import NODE_ADD, POD_DELETE, POD_UPDATE, ClusterEventWithHint, QueueingHint
from koordpy.plugins import registry
from koordpy.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, make_pod, pod_dict, settle


def own_tolerations_changed(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """TaintToleration's isSchedulableAfterPodTolerationChange."""
    if new is not None and new.key == pod.key and new.tolerations != old.tolerations:
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP


def new_queue(clock: VirtualClock) -> SchedulingQueue:
    return SchedulingQueue(
        lambda info: (-info.pod.priority, info.timestamp),
        lambda pod: None,
        {
            "Taints": (ClusterEventWithHint(POD_UPDATE, own_tolerations_changed),),
            # registered for pod updates without a hint: every update queues
            "Unhinted": (POD_UPDATE,),
            # no pod update registered (NodePorts: pod deletes and node adds only)
            "Ports": (POD_DELETE, NODE_ADD),
        },
        QueueSettings(initial_backoff=1, max_backoff=10, max_unschedulable_seconds=300),
        clock.now,
    )


TOLERATING = {"tolerations": [{"key": "gpu", "operator": "Exists"}]}

# (rejectors, the update, seconds waited in the pool before it, where the pod is then)
CASES = [
    ("a hint that queues the update, backoff still running", {"Taints"}, TOLERATING, 0, BACKOFF),
    ("a hint that queues the update, backoff over", {"Taints"}, TOLERATING, 20, ACTIVE),
    ("a hint that skips the update", {"Taints"}, {"labels": {"v": "2"}}, 20, UNSCHEDULABLE),
    ("a rejector not registered for pod updates", {"Ports"}, TOLERATING, 20, UNSCHEDULABLE),
    ("a rejector registered without a hint", {"Unhinted"}, {"labels": {"v": "2"}}, 20, ACTIVE),
    ("one rejector of two queues it", {"Ports", "Taints"}, TOLERATING, 20, ACTIVE),
    ("no rejector at all", set(), {"labels": {"v": "2"}}, 20, ACTIVE),
]


@pytest.mark.parametrize(
    ("rejectors", "update", "waited", "where"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_update_of_a_pod_in_the_pool_asks_its_rejectors_hints(
    rejectors: set[str], update: dict[str, Any], waited: float, where: str
) -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, rejectors)
    assert q.where["default/p"] == UNSCHEDULABLE
    clock.advance(waited)

    labels = update.get("labels")
    spec = {k: v for k, v in update.items() if k != "labels"}
    updated = make_pod("p", labels=labels, spec=spec)
    q.update(updated)

    assert q.where["default/p"] == where
    # wherever it waits, it waits as the update has it
    assert q.infos["default/p"].pod is updated


def test_a_pod_left_in_the_pool_keeps_waiting_for_cluster_events_as_updated() -> None:
    clock = VirtualClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, {"Ports"})
    q.update(make_pod("p", labels={"v": "2"}))
    assert q.where["default/p"] == UNSCHEDULABLE
    # its counted entry into the pool is not repeated (kube's addOrUpdate of a pod already there)
    assert q.incoming.get((UNSCHEDULABLE, "ScheduleAttemptFailure")) == 1
    assert (UNSCHEDULABLE, "UnschedulablePodUpdate") not in q.incoming
    clock.advance(20)
    q.on_event(NODE_ADD, None, make_node("n"))
    assert q.where["default/p"] == ACTIVE


# ------------------------------------------------------------------- with the default profile's hints
def pending_world(node: dict[str, Any]) -> MemoryCluster:
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    world.add_node(make_node("n1", cpu="4", **node))
    return world


def update_pod(world: MemoryCluster, raw: dict[str, Any]) -> None:
    key = f"default/{raw['metadata']['name']}"
    old = world.views[key]
    raw["status"] = {"phase": "Pending"}
    pod = Pod.from_dict(raw, creation_ts=old.creation_ts, uid=old.uid)
    world.pods[key] = raw
    world.views[key] = pod
    world.scheduler.on_pod_update(pod)


def where(world: MemoryCluster, key: str) -> str | None:
    for q in world.scheduler.queues.values():
        if key in q.where:
            return q.where[key]
    return None


TAINTED = {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}
TOLERATION = {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}

# (node, the pod as created, the pod as updated, whether the update moves it out of the pool)
WORLD_CASES = [
    (
        "too big, relabelled: NodeResourcesFit skips it",
        {},
        {"cpu": "8"},
        {"cpu": "8", "labels": {"v": "2"}},
        False,
    ),
    ("too big, scaled down: NodeResourcesFit queues it", {}, {"cpu": "8"}, {"cpu": "2"}, True),
    ("too big, scaled up further", {}, {"cpu": "8"}, {"cpu": "16"}, False),
    ("untolerated taint, toleration added", TAINTED, {"cpu": "1"}, {"cpu": "1", "spec": TOLERATION}, True),
]


@pytest.mark.parametrize(
    ("node", "created", "updated", "moves"), [c[1:] for c in WORLD_CASES], ids=[c[0] for c in WORLD_CASES]
)
def test_update_of_a_rejected_pod_with_the_default_profile(
    node: dict[str, Any], created: dict[str, Any], updated: dict[str, Any], moves: bool
) -> None:
    world = pending_world(node)
    world.add_pod(pod_dict("p", **created))
    settle(world)
    assert where(world, "default/p") == UNSCHEDULABLE

    update_pod(world, pod_dict("p", **updated))

    assert (where(world, "default/p") != UNSCHEDULABLE) is moves
