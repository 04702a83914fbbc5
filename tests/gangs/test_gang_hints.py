"""Coscheduling's queueing hints: a pod it rejected is re-queued by what can change its gang group's
verdict (scheduler-plugins' EventsToRegister: pod adds, PodGroup adds and updates; narrowed here to
the pod's own group), and by room or topology that can let the group fit, never by anything else."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.interfaces import QueueingHint
from koordpy.plugins import registry
from koordpy.plugins.coscheduling.plugin import Coscheduling
from koordpy.queue import UNSCHEDULABLE
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, make_pod, pod_dict
from tests.builders import x_k8s_podgroup as podgroup

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.QUEUE_SKIP
X_K8S_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
GANG_GROUPS = "gang.scheduling.koordinator.sh/groups"
PROFILE = "default-scheduler"


def gang_pod(name: str, gang: str, **kw: Any) -> dict[str, Any]:
    return pod_dict(name, cpu="3", labels={X_K8S_LABEL: gang}, spec={"schedulerName": PROFILE}, **kw)


def grouped_pod(name: str, gang: str) -> dict[str, Any]:
    annotations = {GANG_NAME: gang, GANG_MIN: "1", GANG_GROUPS: '["default/left","default/right"]'}
    return pod_dict(name, cpu="1", annotations=annotations, spec={"schedulerName": PROFILE})


def new_world() -> MemoryCluster:
    clock = VirtualClock(0.0)
    world = MemoryCluster(Scheduler(default_configuration(), registry(), clock), clock)
    world.add_node(make_node("n0", cpu="4"))
    return world


def coscheduling(world: MemoryCluster) -> Coscheduling:
    plugin = world.scheduler.profiles[PROFILE].plugins["Coscheduling"]
    assert isinstance(plugin, Coscheduling)
    return plugin


@pytest.fixture(scope="module")
def gangs() -> tuple[Coscheduling, dict[str, Pod]]:
    """Gang a (a-0, a-1), gang b (b-0), and a gang group of left and right (left-0, right-0), all
    pending; the plugin knows them all."""
    world = new_world()
    for pg in ("a", "b"):
        world.scheduler.on_object("PodGroup", "Add", podgroup(pg, 2))
    with world.scheduler.bulk():
        for obj in (
            gang_pod("a-0", "a"),
            gang_pod("a-1", "a"),
            gang_pod("b-0", "b"),
            grouped_pod("left-0", "left"),
            grouped_pod("right-0", "right"),
        ):
            world.add_pod(obj)
    return coscheduling(world), dict(world.views)


def pod(gangs: tuple[Coscheduling, dict[str, Pod]], name: str) -> Pod:
    return gangs[1][f"default/{name}"]


def bound(p: Pod, node: str = "n0") -> Pod:
    return p.with_changes(node_name=node)


# (the waiting pod, the other pod before, after; None for a pod that is not there)
@pytest.mark.parametrize(
    ("waiting", "old", "new", "expected"),
    [
        pytest.param("a-0", None, ("a-1", "bound"), QUEUE, id="member-of-own-gang-added-bound"),
        pytest.param("a-0", ("a-1", "pending"), ("a-1", "bound"), QUEUE, id="member-of-own-gang-bound"),
        pytest.param("a-0", ("a-1", "bound"), None, QUEUE, id="member-of-own-gang-deleted"),
        pytest.param("a-0", ("a-1", "pending"), None, QUEUE, id="pending-member-of-own-gang-deleted"),
        pytest.param("a-0", None, ("b-0", "bound"), SKIP, id="other-gang-added-bound"),
        pytest.param("a-0", ("b-0", "pending"), ("b-0", "bound"), SKIP, id="other-gang-bound"),
        pytest.param("left-0", None, ("right-0", "bound"), QUEUE, id="other-gang-of-own-group-bound"),
        pytest.param("a-0", None, ("plain", "bound"), SKIP, id="plain-pod-bound"),
        pytest.param("a-0", ("plain", "bound"), None, QUEUE, id="placed-plain-pod-deleted-frees-room"),
        pytest.param("a-0", ("plain", "pending"), None, SKIP, id="pending-plain-pod-deleted"),
        pytest.param("a-0", ("plain", "bound"), ("plain", "finished"), QUEUE, id="placed-plain-pod-finished"),
        pytest.param(
            "a-0", ("plain", "bound"), ("plain", "relabelled"), SKIP, id="placed-plain-pod-relabelled"
        ),
    ],
)
def test_hint_after_a_pod_event(
    gangs: tuple[Coscheduling, dict[str, Pod]],
    waiting: str,
    old: tuple[str, str] | None,
    new: tuple[str, str] | None,
    expected: QueueingHint,
) -> None:
    def build(spec: tuple[str, str] | None) -> Pod | None:
        if spec is None:
            return None
        name, state = spec
        p = pod(gangs, name) if name != "plain" else make_pod("plain", cpu="1")
        if state == "bound":
            return bound(p)
        if state == "finished":
            return bound(p).with_changes(phase="Succeeded")
        if state == "relabelled":
            return bound(p).with_changes(labels={"x": "y"})
        return p

    plugin = gangs[0]
    assert plugin.after_pod_change(pod(gangs, waiting), build(old), build(new)) is expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(make_node("n0", cpu="4"), make_node("n0", cpu="4"), SKIP, id="heartbeat"),
        pytest.param(make_node("n0", cpu="4"), make_node("n0", cpu="8"), QUEUE, id="more-room"),
        pytest.param(make_node("n0"), make_node("n0", labels={"zone": "z1"}), QUEUE, id="labelled"),
        pytest.param(None, make_node("n0"), QUEUE, id="unknown-before"),
    ],
)
def test_hint_after_a_node_update(
    gangs: tuple[Coscheduling, dict[str, Pod]], old: Any, new: Any, expected: QueueingHint
) -> None:
    assert gangs[0].after_node_update(pod(gangs, "a-0"), old, new) is expected


@pytest.mark.parametrize(
    ("waiting", "old", "new", "expected"),
    [
        pytest.param("a-0", podgroup("a", 2), podgroup("a", 1), QUEUE, id="own-podgroup-updated"),
        pytest.param("a-0", None, podgroup("a", 2), QUEUE, id="own-podgroup-added"),
        pytest.param("a-0", podgroup("a", 2), None, QUEUE, id="own-podgroup-deleted"),
        pytest.param("a-0", podgroup("b", 2), podgroup("b", 1), SKIP, id="other-podgroup-updated"),
        pytest.param("b-0", podgroup("a", 2), podgroup("a", 1), SKIP, id="other-podgroup-for-gang-b"),
    ],
)
def test_hint_after_a_podgroup_event(
    gangs: tuple[Coscheduling, dict[str, Pod]], waiting: str, old: Any, new: Any, expected: QueueingHint
) -> None:
    assert gangs[0].after_podgroup_change(pod(gangs, waiting), old, new) is expected


def test_pods_of_one_gang_group_share_a_hint_shape(gangs: tuple[Coscheduling, dict[str, Pod]]) -> None:
    plugin = gangs[0]
    assert plugin.hint_shape(pod(gangs, "a-0")) == plugin.hint_shape(pod(gangs, "a-1"))
    assert plugin.hint_shape(pod(gangs, "left-0")) == plugin.hint_shape(pod(gangs, "right-0"))
    assert plugin.hint_shape(pod(gangs, "a-0")) != plugin.hint_shape(pod(gangs, "b-0"))


def test_a_rolled_back_member_waits_for_its_own_podgroup_not_another() -> None:
    # gang a needs both its 3-CPU members on one 4-CPU node: the pass places a-0, a-1 fits
    # nowhere, and the gang is rolled back; a-0 waits in the pool, rejected by Coscheduling
    world = new_world()
    world.scheduler.on_object("PodGroup", "Add", podgroup("a", 2))
    world.scheduler.on_object("PodGroup", "Add", podgroup("b", 2))
    with world.scheduler.bulk():
        world.add_pod(gang_pod("a-0", "a"))
        world.add_pod(gang_pod("a-1", "a"))
    world.run(30)
    queue = world.scheduler.queues[PROFILE]
    assert queue.where["default/a-0"] == UNSCHEDULABLE
    assert queue.infos["default/a-0"].unschedulable_plugins == {"Coscheduling"}

    # irrelevant: another gang's PodGroup changes, an unrelated pod is bound, a node heartbeat
    world.scheduler.on_object("PodGroup", "Update", podgroup("b", 1), podgroup("b", 2))
    world.scheduler.on_pod_add(make_pod("stranger", cpu="0", node_name="n0"))
    world.scheduler.on_node_update(make_node("n0", cpu="4"))
    assert queue.where["default/a-0"] == UNSCHEDULABLE

    # relevant: its own PodGroup now asks for one member only
    world.scheduler.on_object("PodGroup", "Update", podgroup("a", 1), podgroup("a", 2))
    assert queue.where["default/a-0"] != UNSCHEDULABLE
    world.run(60)
    assert world.views["default/a-0"].node_name == "n0"
