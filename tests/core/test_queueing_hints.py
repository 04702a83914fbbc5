"""Queueing hints: per plugin, which cluster events can make a pod it rejected schedulable (the
tables follow kube-scheduler's *_test.go hint tables, in values of our own), and the queue moving
only the pods an event can help."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.framework.clock import VirtualClock
from koordpy.framework.interfaces import (
    NODE_ADD,
    NODE_UPDATE,
    POD_ALL,
    POD_DELETE,
    POD_UPDATE,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    QueueingHints,
)
from koordpy.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, QueueSettings, SchedulingQueue
from tests.builders import Harness, make_node, make_pod

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.QUEUE_SKIP
NODE_DELETE = ClusterEvent("Node", "Delete")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GPU = "example.com/gpu"


def plugin(name: str, args: dict[str, Any] | None = None) -> QueueingHints:
    p = Harness([make_node("n0")], plugins=[name], args={name: args} if args else None).profile.plugins[name]
    assert isinstance(p, QueueingHints)
    return p


def hint_of(name: str, event: ClusterEvent, args: dict[str, Any] | None = None) -> Any:
    found = [h.hint for h in plugin(name, args).queueing_hints() if h.event == event]
    assert len(found) == 1 and found[0] is not None
    return found[0]


def placed(name: str, node: str = "n1", **kw: Any) -> Pod:
    return make_pod(name, node_name=node, **kw)


# -------------------------------------------------------------------------------- every plugin
HINTED = [
    "NodeResourcesFit",
    "NodeAffinity",
    "TaintToleration",
    "NodePorts",
    "NodeUnschedulable",
    "PodTopologySpread",
    "InterPodAffinity",
]


@pytest.mark.parametrize("name", HINTED)
def test_hints_cover_exactly_the_registered_events(name: str) -> None:
    p = plugin(name)
    assert {h.event for h in p.queueing_hints()} == set(p.events_to_register())  # type: ignore[attr-defined]


# -------------------------------------------------------------------------------- NodeResourcesFit
@pytest.mark.parametrize(
    ("pending", "old", "new", "expected"),
    [
        pytest.param(make_pod("p", cpu="2"), placed("o", cpu="1"), None, QUEUE, id="placed-pod-deleted"),
        pytest.param(make_pod("p", cpu="2"), make_pod("o", cpu="1"), None, SKIP, id="pending-pod-deleted"),
        pytest.param(
            make_pod("p", cpu="2"),
            make_pod("o", cpu="1", spec={"nodeName": ""}).with_changes(nominated_node_name="n1"),
            None,
            QUEUE,
            id="nominated-pod-deleted",
        ),
        pytest.param(
            make_pod("p", cpu="2"), make_pod("o", cpu="1"), placed("o", cpu="1"), SKIP, id="binding"
        ),
        pytest.param(make_pod("p", cpu="2"), None, placed("o", cpu="1"), SKIP, id="placed-pod-added"),
        pytest.param(
            make_pod("p", cpu="2"), placed("o", cpu="2"), placed("o", cpu="1"), QUEUE, id="cpu-scaled-down"
        ),
        pytest.param(
            make_pod("p", cpu="2"),
            placed("o", cpu="1", memory="2Gi"),
            placed("o", cpu="1", memory="1Gi"),
            SKIP,
            id="scaled-down-a-resource-not-asked-for",
        ),
        pytest.param(
            make_pod("p", cpu="2"), placed("o", cpu="1"), placed("o", cpu="2"), SKIP, id="cpu-scaled-up"
        ),
        pytest.param(
            make_pod("p", cpu="2"),
            placed("o", cpu="1"),
            placed("o", cpu="1").with_changes(phase="Succeeded"),
            QUEUE,
            id="placed-pod-finished",
        ),
        pytest.param(
            make_pod("p", cpu="2"),
            placed("o", cpu="1", labels={"a": "1"}),
            placed("o", cpu="1", labels={"a": "2"}),
            SKIP,
            id="placed-pod-relabelled",
        ),
    ],
)
def test_node_resources_fit_after_pod_change(
    pending: Pod, old: Pod | None, new: Pod | None, expected: Any
) -> None:
    event = POD_DELETE if new is None else POD_UPDATE
    assert hint_of("NodeResourcesFit", event)(pending, old, new) is expected


@pytest.mark.parametrize(
    ("pending", "old", "new", "expected"),
    [
        pytest.param(make_pod("p", cpu="2"), None, make_node("n", cpu="4"), QUEUE, id="added-node-fits"),
        pytest.param(make_pod("p", cpu="6"), None, make_node("n", cpu="4"), SKIP, id="added-node-too-small"),
        pytest.param(
            make_pod("p", cpu="1", extra_requests={GPU: 1}),
            None,
            make_node("n", cpu="4"),
            SKIP,
            id="added-node-without-the-extended-resource",
        ),
        pytest.param(
            make_pod("p", cpu="1"), None, make_node("n", pods=0), SKIP, id="added-node-holds-no-pods"
        ),
        pytest.param(
            make_pod("p", cpu="6"),
            make_node("n", cpu="4"),
            make_node("n", cpu="8"),
            QUEUE,
            id="cpu-grew-enough",
        ),
        pytest.param(
            make_pod("p", cpu="6"),
            make_node("n", cpu="4"),
            make_node("n", cpu="5"),
            SKIP,
            id="cpu-grew-too-little",
        ),
        pytest.param(
            make_pod("p", cpu="2"),
            make_node("n", cpu="4", memory="8Gi"),
            make_node("n", cpu="4", memory="16Gi"),
            SKIP,
            id="grew-a-resource-not-asked-for",
        ),
        pytest.param(
            make_pod("p", cpu="2"),
            make_node("n", pods=10),
            make_node("n", pods=20),
            QUEUE,
            id="pod-count-grew",
        ),
        pytest.param(
            make_pod("p", cpu="2"),
            make_node("n", cpu="4"),
            make_node("n", cpu="4", labels={"a": "b"}),
            SKIP,
            id="relabelled-only",
        ),
    ],
)
def test_node_resources_fit_after_node_change(
    pending: Pod, old: Node | None, new: Node, expected: Any
) -> None:
    event = NODE_ADD if old is None else NODE_UPDATE
    assert hint_of("NodeResourcesFit", event)(pending, old, new) is expected


def test_node_resources_fit_ignored_resource_does_not_hold_a_pod_back() -> None:
    hint = hint_of("NodeResourcesFit", NODE_ADD, {"ignoredResources": [GPU]})
    assert hint(make_pod("p", cpu="1", extra_requests={GPU: 1}), None, make_node("n", cpu="4")) is QUEUE


# -------------------------------------------------------------------------------- NodeAffinity
AFFINITY = {
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}
                ]
            }
        }
    }
}


@pytest.mark.parametrize(
    ("pending", "old", "new", "expected"),
    [
        pytest.param(
            make_pod("p", spec={"nodeSelector": {"disk": "ssd"}}),
            None,
            make_node("n", labels={"disk": "ssd"}),
            QUEUE,
            id="added-node-matches-selector",
        ),
        pytest.param(
            make_pod("p", spec={"nodeSelector": {"disk": "ssd"}}),
            None,
            make_node("n", labels={"disk": "hdd"}),
            SKIP,
            id="added-node-does-not-match",
        ),
        pytest.param(
            make_pod("p", spec=AFFINITY),
            make_node("n", labels={ZONE: "z2"}),
            make_node("n", labels={ZONE: "z1"}),
            QUEUE,
            id="relabelled-into-affinity",
        ),
        pytest.param(
            make_pod("p", spec=AFFINITY),
            make_node("n", labels={ZONE: "z1"}),
            make_node("n", labels={ZONE: "z1", "x": "y"}),
            SKIP,
            id="matched-before-and-after",
        ),
        pytest.param(
            make_pod("p", spec=AFFINITY),
            make_node("n", labels={ZONE: "z1"}),
            make_node("n", labels={ZONE: "z2"}),
            SKIP,
            id="relabelled-out-of-affinity",
        ),
    ],
)
def test_node_affinity_after_node_change(pending: Pod, old: Node | None, new: Node, expected: Any) -> None:
    assert hint_of("NodeAffinity", NODE_ADD)(pending, old, new) is expected


def test_node_affinity_enforced_affinity_must_match_too() -> None:
    added = {"addedAffinity": AFFINITY["affinity"]["nodeAffinity"]}
    hint = hint_of("NodeAffinity", NODE_ADD, added)
    pending = make_pod("p", spec={"nodeSelector": {"disk": "ssd"}})
    assert hint(pending, None, make_node("n", labels={"disk": "ssd", ZONE: "z2"})) is SKIP
    assert hint(pending, None, make_node("n", labels={"disk": "ssd", ZONE: "z1"})) is QUEUE


# -------------------------------------------------------------------------------- TaintToleration
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATES = {
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
}


@pytest.mark.parametrize(
    ("pending", "old", "new", "expected"),
    [
        pytest.param(make_pod("p"), None, make_node("n"), QUEUE, id="added-untainted-node"),
        pytest.param(
            make_pod("p"), None, make_node("n", taints=[TAINT]), SKIP, id="added-node-with-untolerated-taint"
        ),
        pytest.param(
            make_pod("p", spec=TOLERATES),
            None,
            make_node("n", taints=[TAINT]),
            QUEUE,
            id="added-node-taint-tolerated",
        ),
        pytest.param(
            make_pod("p"), make_node("n", taints=[TAINT]), make_node("n"), QUEUE, id="taint-removed"
        ),
        pytest.param(
            make_pod("p"), make_node("n"), make_node("n", labels={"a": "b"}), SKIP, id="tolerated-before"
        ),
        pytest.param(
            make_pod("p"),
            make_node("n", taints=[TAINT]),
            make_node("n", taints=[{**TAINT, "effect": "PreferNoSchedule"}]),
            QUEUE,
            id="taint-softened-to-prefer",
        ),
    ],
)
def test_taint_toleration_after_node_change(pending: Pod, old: Node | None, new: Node, expected: Any) -> None:
    assert hint_of("TaintToleration", NODE_ADD)(pending, old, new) is expected


def test_taint_toleration_another_pods_update_cannot_help() -> None:
    hint = hint_of("TaintToleration", POD_UPDATE)
    assert hint(make_pod("p"), placed("o"), placed("o", labels={"a": "b"})) is SKIP
    assert hint(make_pod("p"), make_pod("p"), make_pod("p", spec=TOLERATES)) is QUEUE


# -------------------------------------------------------------------------------- NodePorts
def with_port(name: str, port: int, node: str = "", protocol: str = "TCP") -> Pod:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "x",
                "ports": [{"containerPort": port, "hostPort": port, "protocol": protocol}],
            }
        ]
    }
    return make_pod(name, node_name=node, spec=spec)


@pytest.mark.parametrize(
    ("pending", "deleted", "expected"),
    [
        pytest.param(with_port("p", 8080), with_port("o", 8080, "n1"), QUEUE, id="placed-pod-held-the-port"),
        pytest.param(
            with_port("p", 8080), with_port("o", 9090, "n1"), SKIP, id="placed-pod-held-another-port"
        ),
        pytest.param(
            with_port("p", 8080), with_port("o", 8080, "n1", "UDP"), SKIP, id="same-port-other-protocol"
        ),
        pytest.param(with_port("p", 8080), with_port("o", 8080), SKIP, id="pending-pod-held-nothing"),
        pytest.param(with_port("p", 8080), placed("o"), SKIP, id="placed-pod-without-ports"),
    ],
)
def test_node_ports_after_pod_delete(pending: Pod, deleted: Pod, expected: Any) -> None:
    assert hint_of("NodePorts", POD_DELETE)(pending, deleted, None) is expected


def test_node_ports_a_new_node_always_helps() -> None:
    (add,) = [h for h in plugin("NodePorts").queueing_hints() if h.event == NODE_ADD]
    assert add.hint is None


# -------------------------------------------------------------------------------- NodeUnschedulable
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(None, make_node("n"), QUEUE, id="added-schedulable"),
        pytest.param(None, make_node("n", unschedulable=True), SKIP, id="added-cordoned"),
        pytest.param(make_node("n", unschedulable=True), make_node("n"), QUEUE, id="uncordoned"),
        pytest.param(make_node("n"), make_node("n", unschedulable=True), SKIP, id="cordoned"),
        pytest.param(make_node("n"), make_node("n", labels={"a": "b"}), SKIP, id="relabelled"),
    ],
)
def test_node_unschedulable_after_node_change(old: Node | None, new: Node, expected: Any) -> None:
    assert hint_of("NodeUnschedulable", NODE_ADD)(make_pod("p"), old, new) is expected


# -------------------------------------------------------------------------------- PodTopologySpread
SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
}
WEB = {"app": "web"}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(None, placed("o", labels=WEB), QUEUE, id="matching-pod-added"),
        pytest.param(None, placed("o", labels={"app": "db"}), SKIP, id="other-pod-added"),
        pytest.param(
            None, placed("o", labels=WEB, namespace="other"), SKIP, id="matching-pod-other-namespace"
        ),
        pytest.param(make_pod("o", labels=WEB), placed("o", labels=WEB), QUEUE, id="matching-pod-bound"),
        pytest.param(placed("o", labels=WEB), None, QUEUE, id="matching-pod-deleted"),
        pytest.param(make_pod("o", labels=WEB), None, SKIP, id="pending-matching-pod-deleted"),
        pytest.param(placed("o", labels=WEB), placed("o", labels={"app": "db"}), QUEUE, id="relabelled-out"),
        pytest.param(
            placed("o", labels={"app": "db"}),
            placed("o", labels={"app": "x"}),
            SKIP,
            id="relabelled-elsewhere",
        ),
        pytest.param(
            placed("o", labels=WEB), placed("o", labels={**WEB, "v": "2"}), SKIP, id="still-matching"
        ),
        pytest.param(
            placed("o", labels=WEB),
            placed("o", labels=WEB).with_changes(phase="Succeeded"),
            QUEUE,
            id="matching-pod-finished",
        ),
    ],
)
def test_pod_topology_spread_after_pod_change(old: Pod | None, new: Pod | None, expected: Any) -> None:
    pending = make_pod("p", labels=WEB, spec=SPREAD)
    assert hint_of("PodTopologySpread", POD_ALL)(pending, old, new) is expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(None, make_node("n", labels={ZONE: "z1"}), QUEUE, id="added-with-key"),
        pytest.param(None, make_node("n"), SKIP, id="added-without-key"),
        pytest.param(make_node("n", labels={ZONE: "z1"}), None, QUEUE, id="deleted-with-key"),
        pytest.param(make_node("n"), make_node("n", labels={ZONE: "z1"}), QUEUE, id="key-gained"),
        pytest.param(
            make_node("n", labels={ZONE: "z1"}), make_node("n", labels={ZONE: "z2"}), QUEUE, id="key-changed"
        ),
        pytest.param(
            make_node("n", labels={ZONE: "z1"}),
            make_node("n", labels={ZONE: "z1", "a": "b"}),
            SKIP,
            id="other-label",
        ),
        pytest.param(
            make_node("n", labels={ZONE: "z1"}),
            make_node("n", labels={ZONE: "z1"}, taints=[TAINT]),
            QUEUE,
            id="taints-changed",
        ),
    ],
)
def test_pod_topology_spread_after_node_change(old: Node | None, new: Node | None, expected: Any) -> None:
    pending = make_pod("p", labels=WEB, spec=SPREAD)
    assert hint_of("PodTopologySpread", NODE_ADD)(pending, old, new) is expected


# -------------------------------------------------------------------------------- InterPodAffinity
def pod_affinity(kind: str, app: str, key: str = ZONE) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


WITH_AFFINITY = make_pod("p", spec=pod_affinity("podAffinity", "db"))
WITH_ANTI = make_pod("p", spec=pod_affinity("podAntiAffinity", "db"))


@pytest.mark.parametrize(
    ("pending", "old", "new", "expected"),
    [
        pytest.param(
            WITH_AFFINITY, None, placed("o", labels={"app": "db"}), QUEUE, id="affinity-target-added"
        ),
        pytest.param(WITH_AFFINITY, None, placed("o", labels={"app": "web"}), SKIP, id="unrelated-pod-added"),
        pytest.param(
            WITH_AFFINITY,
            make_pod("o", labels={"app": "db"}),
            placed("o", labels={"app": "db"}),
            QUEUE,
            id="affinity-target-bound",
        ),
        pytest.param(WITH_AFFINITY, None, make_pod("o", labels={"app": "db"}), SKIP, id="pending-pod-added"),
        pytest.param(
            WITH_ANTI, placed("o", labels={"app": "db"}), None, QUEUE, id="anti-affinity-target-deleted"
        ),
        pytest.param(WITH_ANTI, placed("o", labels={"app": "web"}), None, SKIP, id="unrelated-pod-deleted"),
        pytest.param(
            WITH_ANTI, None, placed("o", labels={"app": "db"}), SKIP, id="anti-affinity-target-added"
        ),
        pytest.param(
            WITH_ANTI,
            placed("o", labels={"app": "db"}),
            placed("o", labels={"app": "web"}),
            QUEUE,
            id="relabelled-out-of-anti",
        ),
        pytest.param(
            WITH_AFFINITY,
            placed("o", labels={"app": "web"}),
            placed("o", labels={"app": "db"}),
            QUEUE,
            id="relabelled-into-affinity",
        ),
        pytest.param(
            WITH_AFFINITY,
            placed("o", labels={"app": "db"}),
            placed("o", labels={"app": "db"}),
            SKIP,
            id="labels-unchanged",
        ),
        pytest.param(
            make_pod("p", labels={"app": "db"}),
            placed("o", spec=pod_affinity("podAntiAffinity", "db")),
            None,
            QUEUE,
            id="existing-pod-with-anti-affinity-deleted",
        ),
    ],
)
def test_inter_pod_affinity_after_pod_change(
    pending: Pod, old: Pod | None, new: Pod | None, expected: Any
) -> None:
    assert hint_of("InterPodAffinity", POD_ALL)(pending, old, new) is expected


@pytest.mark.parametrize(
    ("pending", "old", "new", "expected"),
    [
        pytest.param(
            WITH_AFFINITY, None, make_node("n", labels={ZONE: "z1"}), QUEUE, id="added-with-affinity-key"
        ),
        pytest.param(WITH_AFFINITY, None, make_node("n"), SKIP, id="added-without-affinity-key"),
        pytest.param(
            WITH_AFFINITY,
            make_node("n"),
            make_node("n", labels={ZONE: "z1"}),
            QUEUE,
            id="affinity-key-gained",
        ),
        pytest.param(
            WITH_AFFINITY,
            make_node("n", labels={ZONE: "z1"}),
            make_node("n", labels={ZONE: "z1", "a": "b"}),
            SKIP,
            id="other-label",
        ),
        pytest.param(WITH_ANTI, None, make_node("n"), QUEUE, id="any-node-added-for-anti-affinity"),
        pytest.param(
            WITH_ANTI, make_node("n", labels={ZONE: "z1"}), make_node("n"), QUEUE, id="anti-affinity-key-lost"
        ),
        pytest.param(
            WITH_ANTI,
            make_node("n"),
            make_node("n", labels={ZONE: "z1"}),
            SKIP,
            id="anti-affinity-key-gained",
        ),
    ],
)
def test_inter_pod_affinity_after_node_change(
    pending: Pod, old: Node | None, new: Node, expected: Any
) -> None:
    assert hint_of("InterPodAffinity", NODE_ADD)(pending, old, new) is expected


# -------------------------------------------------------------------------------- the queue
def fit_queue(clock: VirtualClock) -> SchedulingQueue:
    fit = plugin("NodeResourcesFit")
    return SchedulingQueue(
        lambda info: (-info.pod.priority, info.timestamp),
        lambda pod: None,
        {"NodeResourcesFit": tuple(fit.queueing_hints()), "Other": (NODE_ADD,)},
        QueueSettings(initial_backoff=1, max_backoff=10, max_unschedulable_seconds=300),
        clock.now,
        shape_of_plugin={"NodeResourcesFit": fit.hint_shape},
    )


def rejected(q: SchedulingQueue, pod: Pod, plugins: set[str]) -> None:
    q.add(pod)
    info = q.pop()
    assert info is not None and info.key == pod.key
    q.add_unschedulable(info, plugins)


def test_a_binding_leaves_pods_that_need_room_in_the_pool() -> None:
    clock = VirtualClock()
    q = fit_queue(clock)
    rejected(q, make_pod("big", cpu="9"), {"NodeResourcesFit"})
    clock.advance(20)
    assert q.on_event(POD_UPDATE, make_pod("o", cpu="1"), placed("o", cpu="1")) == 0
    assert q.where["default/big"] == UNSCHEDULABLE


def test_a_node_event_moves_only_the_shapes_it_fits() -> None:
    clock = VirtualClock()
    q = fit_queue(clock)
    for name, cpu in [("small-1", "2"), ("big", "9"), ("small-2", "2")]:
        rejected(q, make_pod(name, cpu=cpu), {"NodeResourcesFit"})
    clock.advance(20)  # past every backoff
    assert q.on_event(NODE_ADD, None, make_node("n", cpu="4")) == 2
    assert [q.pop().pod.name for _ in range(2)] == ["small-1", "small-2"]  # type: ignore[union-attr]
    assert q.where["default/big"] == UNSCHEDULABLE


def test_a_pod_moves_when_any_of_its_rejectors_says_queue() -> None:
    clock = VirtualClock()
    q = fit_queue(clock)
    rejected(q, make_pod("p", cpu="9"), {"NodeResourcesFit", "Other"})
    # NodeResourcesFit would skip a node this small, but Other registered node adds without a hint
    assert q.on_event(NODE_ADD, None, make_node("n", cpu="4")) == 1
    assert q.where["default/p"] == BACKOFF


def test_a_pod_no_plugin_rejected_moves_on_any_event() -> None:
    clock = VirtualClock()
    q = fit_queue(clock)
    rejected(q, make_pod("p", cpu="1"), set())
    clock.advance(20)
    assert q.on_event(ClusterEvent("PodGroup", "Add")) == 1
    assert q.where["default/p"] == ACTIVE


def test_an_event_without_its_objects_queues_every_interested_pod() -> None:
    clock = VirtualClock()
    q = fit_queue(clock)
    rejected(q, make_pod("p", cpu="9"), {"NodeResourcesFit"})
    assert q.on_event(NODE_ADD) == 1


def test_unregistered_event_moves_nothing() -> None:
    clock = VirtualClock()
    q = fit_queue(clock)
    rejected(q, make_pod("p", cpu="1"), {"NodeResourcesFit"})
    assert q.on_event(NODE_DELETE, make_node("n"), None) == 0


def test_a_plain_registration_is_a_hint_that_always_queues() -> None:
    registered = ClusterEventWithHint(NODE_ADD)
    assert registered.hint is None


def test_a_hint_that_fails_queues_the_pod() -> None:
    def broken(pod: Pod, old: Any, new: Any) -> QueueingHint:
        raise ValueError("broken hint")

    q = SchedulingQueue(
        lambda info: (-info.pod.priority, info.timestamp),
        lambda pod: None,
        {"Broken": (ClusterEventWithHint(NODE_ADD, broken),)},
        QueueSettings(),
        VirtualClock().now,
    )
    rejected(q, make_pod("p"), {"Broken"})
    assert q.on_event(NODE_ADD, None, make_node("n")) == 1
