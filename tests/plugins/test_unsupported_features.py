"""UnsupportedFeatures: a pod asking for a Koordinator feature koordpy does not implement is never
placed as if it had not asked. Which request needs which feature, and whether koord-scheduler
would give the pod something koordpy cannot, is from Koordinator's apis/extension
(reservation.go, operating_pod.go, device_share.go, numa_aware.go, qos.go, priority.go,
elastic_quota.go, multi_scheduler.go) and its plugins' PreFilter (reservation, deviceshare,
nodenumaresource, schedulinghint)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration, parse_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import Plugin, PreFilterPlugin, PreFilterResult
from koordpy.framework.status import Status
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict, settle

UNSUPPORTED = "UnsupportedFeature"
NOT_HELPFUL = "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
# what the nodes offer, so that a pod is never pending for want of it
ALLOCATABLE = {
    "nvidia.com/gpu": 8,
    "koordinator.sh/gpu": 800,
    "koordinator.sh/gpu.shared": 8,
    "koordinator.sh/gpu-core": 800,
    "koordinator.sh/gpu-memory": "640Gi",
    "koordinator.sh/gpu-memory-ratio": 800,
    "koordinator.sh/rdma": 200,
    "koordinator.sh/fpga": 200,
    "huawei.com/npu-core": 64,
    "huawei.com/npu-cpu": 64,
    "huawei.com/npu-dvpp": 64,
}


def new_world(config: Any = None, extra: dict[str, type[Plugin]] | None = None) -> MemoryCluster:
    clock = VirtualClock(0.0)
    scheduler = Scheduler(config or default_configuration(), {**registry(), **(extra or {})}, clock)
    world = MemoryCluster(scheduler, clock)
    for name in ("n0", "n1"):
        world.add_node(make_node(name, cpu="16", memory="64Gi", extra=ALLOCATABLE))
    return world


def a_pod(
    name: str = "p",
    requests: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    return pod_dict(
        name,
        cpu="2",
        memory="1Gi",
        extra_requests=requests,
        labels=labels,
        annotations=annotations,
        priority=priority,
    )


def warnings(world: MemoryCluster, name: str = "p") -> list[str]:
    return [
        e.message
        for e in world.events
        if e.pod.name == name and e.event_type == "Warning" and e.reason == UNSUPPORTED
    ]


def needs(feature: str, how: str) -> str:
    return f"pod needs Koordinator's {feature} ({how}), which koordpy does not implement"


def asks(feature: str, how: str) -> str:
    return (
        f"pod asks for Koordinator's {feature} ({how}), which koordpy does not implement; "
        "it is scheduled without it"
    )


RESERVATION_AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
NUMA_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
PARTITION = "scheduling.koordinator.sh/gpu-partition-spec"


@pytest.mark.parametrize(
    ("pod", "sentences"),
    [
        pytest.param(
            a_pod(annotations={RESERVATION_AFFINITY: json.dumps({"reservationSelector": {"app": "web"}})}),
            [needs("Reservation", f"annotation {RESERVATION_AFFINITY}")],
            id="reservation-affinity",
        ),
        pytest.param(
            a_pod(annotations={RESERVATION_AFFINITY: ""}),
            [needs("Reservation", f"annotation {RESERVATION_AFFINITY}")],
            id="empty-reservation-affinity-still-asks-for-a-reservation",
        ),
        pytest.param(
            a_pod(labels={"scheduling.koordinator.sh/operating-mode": "Reservation"}),
            [needs("Reservation", "label scheduling.koordinator.sh/operating-mode=Reservation")],
            id="pod-operating-as-a-reservation",
        ),
        pytest.param(
            a_pod(requests={"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50}),
            [needs("DeviceShare", "resources koordinator.sh/gpu-core, koordinator.sh/gpu-memory-ratio")],
            id="shared-gpu-fraction",
        ),
        pytest.param(
            a_pod(
                requests={"nvidia.com/gpu": 1, "koordinator.sh/rdma": 100},
                annotations={
                    "scheduling.koordinator.sh/device-joint-allocate": json.dumps(
                        {"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}
                    )
                },
            ),
            [
                needs("DeviceShare", "resource koordinator.sh/rdma"),
                needs("DeviceShare", "annotation scheduling.koordinator.sh/device-joint-allocate"),
            ],
            id="gpu-and-rdma-joint-allocated",
        ),
        pytest.param(
            a_pod(
                requests={"nvidia.com/gpu": 2},
                annotations={"scheduling.koordinator.sh/device-allocate-hint": json.dumps({"gpu": {}})},
            ),
            [needs("DeviceShare", "annotation scheduling.koordinator.sh/device-allocate-hint")],
            id="whole-gpus-with-an-allocation-hint",
        ),
        pytest.param(
            a_pod(
                requests={"nvidia.com/gpu": 2},
                annotations={PARTITION: json.dumps({"allocatePolicy": "Restricted"})},
            ),
            [needs("DeviceShare", f"annotation {PARTITION} with allocatePolicy Restricted")],
            id="whole-gpus-restricted-to-a-partition",
        ),
        pytest.param(
            a_pod(labels={"koordinator.sh/qosClass": "LSR"}),
            [needs("NodeNUMAResource", "label koordinator.sh/qosClass=LSR: CPUs bound by FullPCPUs")],
            id="lsr-pod-gets-bound-cpus-by-default",
        ),
        pytest.param(
            a_pod(
                labels={"koordinator.sh/qosClass": "LSE", "koordinator.sh/priority-class": "koord-prod"},
                annotations={RESOURCE_SPEC: json.dumps({"requiredCPUBindPolicy": "SpreadByPCPUs"})},
            ),
            [needs("NodeNUMAResource", "label koordinator.sh/qosClass=LSE: CPUs bound by SpreadByPCPUs")],
            id="lse-pod-requiring-a-bind-policy",
        ),
        pytest.param(
            a_pod(labels={"koordinator.sh/qosClass": "LSR"}, priority=9500),
            [needs("NodeNUMAResource", "label koordinator.sh/qosClass=LSR: CPUs bound by FullPCPUs")],
            id="lsr-pod-of-prod-priority-value",
        ),
        pytest.param(
            a_pod(annotations={NUMA_SPEC: json.dumps({"numaTopologyPolicy": "SingleNUMANode"})}),
            [needs("NodeNUMAResource", f"annotation {NUMA_SPEC}: numaTopologyPolicy SingleNUMANode")],
            id="single-numa-node-alignment",
        ),
        pytest.param(
            a_pod(annotations={RESOURCE_SPEC: "{not json"}),
            [needs("NodeNUMAResource", f"annotation {RESOURCE_SPEC}, not a valid spec")],
            id="resource-spec-that-koord-scheduler-cannot-read",
        ),
        pytest.param(
            a_pod(annotations={HINT: json.dumps({"nodeNames": ["n1"]})}),
            [needs("SchedulingHint", f"annotation {HINT} with nodeNames")],
            id="scheduling-hint-naming-nodes",
        ),
    ],
)
def test_pod_needing_a_missing_feature_stays_pending(pod: dict[str, Any], sentences: list[str]) -> None:
    world = new_world()
    world.add_pod(pod)
    settle(world)
    outcome = world.scheduler.outcomes["default/p"]
    assert outcome.reason == names.UNSCHEDULABLE
    assert outcome.message == f"0/2 nodes are available: {', '.join(sentences)}. {NOT_HELPFUL}"
    assert warnings(world) == ["; ".join(sentences)]


@pytest.mark.parametrize(
    ("pod", "sentences"),
    [
        pytest.param(a_pod(), [], id="plain-pod"),
        pytest.param(a_pod(requests={"nvidia.com/gpu": 1}), [], id="whole-gpu-is-a-kube-extended-resource"),
        pytest.param(
            a_pod(annotations={"scheduling.koordinator.sh/device-joint-allocate": "{}"}),
            [],
            id="device-annotation-without-a-device-request-is-ignored-as-koordinator-does",
        ),
        pytest.param(a_pod(labels={"koordinator.sh/qosClass": "LS"}), [], id="ls-pod-binds-no-cpus"),
        pytest.param(
            a_pod(labels={"koordinator.sh/qosClass": "LSR", "koordinator.sh/priority-class": "koord-batch"}),
            [],
            id="lsr-pod-of-batch-priority-binds-no-cpus",
        ),
        pytest.param(
            a_pod(
                labels={"koordinator.sh/qosClass": "LSR"},
                annotations={RESOURCE_SPEC: json.dumps({"preferredCPUBindPolicy": "ConstrainedBurst"})},
            ),
            [],
            id="lsr-pod-preferring-constrained-burst-binds-no-cpus",
        ),
        pytest.param(
            a_pod(labels={"scheduling.koordinator.sh/reservation-ignored": "true"}),
            [],
            id="pod-ignoring-reservations",
        ),
        pytest.param(
            a_pod(
                annotations={"scheduling.koordinator.sh/exact-match-reservation": '{"resourceNames":["cpu"]}'}
            ),
            [asks("Reservation", "annotation scheduling.koordinator.sh/exact-match-reservation")],
            id="exact-match-reservation",
        ),
        pytest.param(
            a_pod(annotations={NUMA_SPEC: json.dumps({"numaTopologyPolicy": "BestEffort"})}),
            [asks("NodeNUMAResource", f"annotation {NUMA_SPEC}: numaTopologyPolicy BestEffort")],
            id="best-effort-numa-alignment",
        ),
        pytest.param(
            a_pod(requests={"nvidia.com/gpu": 1}, annotations={PARTITION: "{}"}),
            [asks("DeviceShare", f"annotation {PARTITION}")],
            id="gpu-partition-preferred",
        ),
        pytest.param(
            a_pod(
                annotations={
                    "scheduling.koordinator.sh/scheduling-hint": json.dumps({"preferredNodeNames": ["n1"]})
                }
            ),
            [
                asks(
                    "SchedulingHint",
                    "annotation scheduling.koordinator.sh/scheduling-hint with preferredNodeNames",
                )
            ],
            id="scheduling-hint-preferring-nodes",
        ),
    ],
)
def test_pod_is_scheduled_when_nothing_it_needs_is_missing(pod: dict[str, Any], sentences: list[str]) -> None:
    world = new_world()
    world.add_pod(pod)
    settle(world)
    assert world.views["default/p"].node_name
    assert warnings(world) == (["; ".join(sentences)] if sentences else [])


@pytest.mark.parametrize(
    "resource",
    [
        "koordinator.sh/gpu",
        "koordinator.sh/gpu.shared",
        "koordinator.sh/gpu-core",
        "koordinator.sh/gpu-memory",
        "koordinator.sh/gpu-memory-ratio",
        "koordinator.sh/rdma",
        "koordinator.sh/fpga",
        "huawei.com/npu-core",
        "huawei.com/npu-cpu",
        "huawei.com/npu-dvpp",
    ],
)
def test_every_device_share_resource_needs_device_share(resource: str) -> None:
    world = new_world()
    world.add_pod(a_pod(requests={resource: 1}))
    settle(world)
    assert not world.views["default/p"].node_name
    assert warnings(world) == [needs("DeviceShare", f"resource {resource}")]


def test_warned_once_however_often_the_pod_is_tried() -> None:
    world = new_world()
    world.add_pod(a_pod(annotations={RESERVATION_AFFINITY: "{}"}))
    settle(world)
    for i in range(3):
        # each update of the pod (another controller's label) sends it round again
        raw = dict(world.pods["default/p"])
        raw["metadata"] = {**raw["metadata"], "labels": {"touched": str(i)}}
        world.scheduler.on_pod_update(world._replace("default/p", raw))
        world.run(60)
    info = world.scheduler.queues["default-scheduler"].infos["default/p"]
    assert info.attempts == 4
    assert len(warnings(world)) == 1


def test_warned_again_when_what_it_asks_for_changes() -> None:
    world = new_world()
    world.add_pod(a_pod(annotations={RESERVATION_AFFINITY: "{}"}))
    settle(world)
    raw = dict(world.pods["default/p"])
    raw["metadata"] = {**raw["metadata"], "annotations": {NUMA_SPEC: '{"numaTopologyPolicy": "Restricted"}'}}
    world.scheduler.on_pod_update(world._replace("default/p", raw))
    world.run(60)
    assert warnings(world) == [
        needs("Reservation", f"annotation {RESERVATION_AFFINITY}"),
        needs("NodeNUMAResource", f"annotation {NUMA_SPEC}: numaTopologyPolicy Restricted"),
    ]


def test_a_pod_created_again_is_warned_again() -> None:
    world = new_world()
    world.add_pod(a_pod(annotations={RESERVATION_AFFINITY: "{}"}))
    settle(world)
    world.delete_pod("default/p")
    settle(world)
    world.deleted.discard("default/p")
    world.add_pod(a_pod(annotations={RESERVATION_AFFINITY: "{}"}))
    settle(world)
    assert len(warnings(world)) == 2


class Reservation(Plugin, PreFilterPlugin):
    """Stands for a Reservation plugin a profile might run."""

    NAME = "Reservation"

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        return None, None


def test_feature_left_to_the_plugin_the_profile_runs() -> None:
    config = parse_configuration(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"preFilter": {"enabled": [{"name": "Reservation"}]}},
                }
            ],
        }
    )
    world = new_world(config, {"Reservation": Reservation})
    world.add_pod(a_pod(annotations={RESERVATION_AFFINITY: "{}"}))
    settle(world)
    assert world.views["default/p"].node_name
    assert warnings(world) == []
