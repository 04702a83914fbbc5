"""How the simulated cluster carries out the volume bindings the scheduler decided (`Bind.volumes`,
kube's BindPodVolumes): writes delivered to the scheduler as informer events before the pod is
bound, and a binding that cannot complete failed through `binding_done`, as on a cluster."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from koordpy.api.node import Node
from koordpy.framework.clock import VirtualClock
from koordpy.framework.effects import Bind, ClaimKey, VolumeBindings, VolumeToClaim
from koordpy.scheduler import Scheduler
from koordpy.simulate.volumes import VolumeWorld
from tests.builders import make_pod
from tests.simulate.storage_builders import WFFC, ZONE, claim, node, storage_class, volume


class Recorder:
    """What the scheduler is told: object events, and how bindings ended."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Mapping[str, Any]]] = []
        self.done: list[tuple[str, str | None]] = []

    def on_object(self, kind: str, action: str, obj: Mapping[str, Any], old: Any = None) -> None:
        self.events.append((kind, action, obj))

    def binding_done(self, key: str, error: str | None = None) -> None:
        self.done.append((key, error))


def world(*objects: dict[str, Any]) -> tuple[VolumeWorld, Recorder, VirtualClock]:
    recorder = Recorder()
    clock = VirtualClock(0.0)
    out = VolumeWorld(cast(Scheduler, recorder), clock)
    out.node_added(Node.from_dict(node("node-1", **{ZONE: "zone-a"})))
    for obj in objects:
        out.add(obj["kind"], obj)
    recorder.events.clear()
    return out, recorder, clock


def bind(pod: str, static: tuple[VolumeToClaim, ...] = (), provision: tuple[str, ...] = ()) -> Bind:
    claims = tuple(ClaimKey("default", c) for c in provision)
    volumes = VolumeBindings(static, claims, (), "node-1", 30.0)
    return Bind(make_pod(pod), "node-1", "default-scheduler", (), volumes)


def uid(w: VolumeWorld, name: str) -> str:
    return w.claims[f"default/{name}"].uid


def test_a_static_binding_is_written_and_delivered_before_the_pod_is_bound() -> None:
    w, seen, _ = world(
        storage_class("local", mode=WFFC),
        volume("pv-1", "10Gi", "local", "node-1"),
        claim("a", "1Gi", "local"),
    )
    bound: list[str] = []
    w.bind(
        bind("p", (VolumeToClaim("pv-1", ClaimKey("default", "a"), uid(w, "a")),)), lambda: bound.append("p")
    )
    assert bound == ["p"] and seen.done == []
    assert [(k, a) for k, a, _ in seen.events] == [
        ("PersistentVolume", "Update"),  # claimRef, by the scheduler's binder
        ("PersistentVolume", "Update"),  # phase Bound, by the PV controller
        ("PersistentVolumeClaim", "Update"),  # volumeName, bind-completed, phase Bound
    ]
    versions = [int(obj["metadata"]["resourceVersion"]) for _, _, obj in seen.events]
    assert versions == sorted(versions) and len(set(versions)) == 3
    pvc = seen.events[-1][2]
    assert pvc["spec"]["volumeName"] == "pv-1" and pvc["status"]["phase"] == "Bound"
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    pv = seen.events[0][2]
    assert pv["spec"]["claimRef"]["uid"] == uid(w, "a")
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"


def test_a_volume_another_claim_took_fails_the_binding_as_a_conflict() -> None:
    w, seen, _ = world(
        storage_class("local", mode=WFFC),
        volume("pv-1", "10Gi", "local", "node-1"),
        claim("a", "1Gi", "local"),
        claim("b", "1Gi", "local"),
    )
    w.bind(bind("first", (VolumeToClaim("pv-1", ClaimKey("default", "b"), uid(w, "b")),)), lambda: None)
    bound: list[str] = []
    w.bind(
        bind("second", (VolumeToClaim("pv-1", ClaimKey("default", "a"), uid(w, "a")),)),
        lambda: bound.append("x"),
    )
    assert bound == []
    ((key, error),) = seen.done
    assert key == "default/second"
    assert error is not None and 'Operation cannot be fulfilled on persistentvolumes "pv-1"' in error
    assert w.claims["default/a"].phase == "Pending"


def test_a_claim_no_one_provisions_fails_the_binding_after_the_timeout() -> None:
    w, seen, clock = world(storage_class("nowhere", mode=WFFC), claim("c", "1Gi", "nowhere"))
    bound: list[str] = []
    w.bind(bind("p", provision=("c",)), lambda: bound.append("p"))
    assert bound == [] and seen.done == []
    assert w.claims["default/c"].selected_node == "node-1"
    assert w.next_deadline() == 30.0
    clock.advance_to(29.0)
    w.fire_due(clock.now())
    assert seen.done == []
    clock.advance_to(30.0)
    w.fire_due(clock.now())
    assert seen.done == [
        (
            "default/p",
            "binding volumes: timed out after 30s waiting for persistentvolumeclaim(s) default/c to be bound",
        )
    ]
    assert w.next_deadline() is None


def test_provisioning_follows_the_node_and_takes_the_request() -> None:
    w, _, _ = world(
        storage_class("zonal", "csi.example.com", WFFC, allowed={ZONE: ["zone-a"]}),
        claim("c", "3Gi", "zonal"),
    )
    bound: list[str] = []
    w.bind(bind("p", provision=("c",)), lambda: bound.append("p"))
    assert bound == ["p"]
    pvc = w.claims["default/c"]
    pv = w.volumes[pvc.volume_name]
    assert pv.capacity == 3 * 2**30 and pv.csi_driver == "csi.example.com"
    assert pv.node_affinity is not None
    assert pv.node_affinity.matches({ZONE: "zone-a"}, "node-1")
    assert not pv.node_affinity.matches({ZONE: "zone-b"}, "node-2")
    assert pv.claim_ref is not None and pv.claim_ref.uid == pvc.uid


def test_a_deleted_pods_ephemeral_claim_goes_with_it() -> None:
    w, seen, _ = world(storage_class("standard", "csi.example.com", default=True))
    pod = make_pod(
        "web",
        spec={
            "volumes": [
                {
                    "name": "scratch",
                    "ephemeral": {
                        "volumeClaimTemplate": {
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                            }
                        }
                    },
                }
            ]
        },
    )
    w.pod_created(pod.raw, pod.uid)
    created = w.claims["default/web-scratch"]
    assert created.controller_uid == pod.uid
    # the default class (admission), Immediate, with a provisioner: provisioned and bound at once
    assert created.storage_class == "standard" and created.phase == "Bound"
    name = created.volume_name
    w.pod_deleted(pod)
    assert "default/web-scratch" not in w.claims
    # the class's reclaim policy (Delete, the default) takes the volume with it
    assert name not in w.volumes
    assert ("PersistentVolumeClaim", "Delete") in [(k, a) for k, a, _ in seen.events]
