"""The events that can make a pod VolumeBinding rejected schedulable, with kube's queueing hints,
and VolumeBinding in the default profile of a scheduler: its decisions reach the Bind effect, and
a claim arriving moves the pod it kept waiting."""

from __future__ import annotations

from typing import Any

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.framework.effects import Bind, ClaimKey, Evict, VolumeToClaim
from koordpy.framework.interfaces import ClusterEvent, QueueingHint
from koordpy.plugins import registry
from koordpy.plugins.storagecatalog import StorageCatalog
from koordpy.scheduler import Scheduler
from tests.builders import make_node, node_dict, pod_dict
from tests.plugins.volumebinding.storage import (
    HOSTNAME,
    VB,
    Storage,
    capacity,
    claim,
    claiming,
    csi_driver,
    host,
    storage_class,
    volume,
)

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.QUEUE_SKIP


def _plugin() -> Any:
    return Storage([host("node-a")]).plugin


def test_events_are_kubes() -> None:
    events = set(_plugin().events_to_register())
    assert events == {
        ClusterEvent("StorageClass", "Add"),
        ClusterEvent("StorageClass", "Update"),
        ClusterEvent("PersistentVolumeClaim", "Add"),
        ClusterEvent("PersistentVolumeClaim", "Update"),
        ClusterEvent("PersistentVolume", "Add"),
        ClusterEvent("PersistentVolume", "Update"),
        ClusterEvent("Node", "Add"),
        ClusterEvent("Node", "Update"),
        ClusterEvent("CSINode", "Add"),
        ClusterEvent("CSINode", "Update"),
        ClusterEvent("CSIDriver", "Update"),
        ClusterEvent("CSIStorageCapacity", "Add"),
        ClusterEvent("CSIStorageCapacity", "Update"),
    }


def test_a_claim_of_the_pod_queues_it_only() -> None:
    plugin = _plugin()
    pod = claiming("pod-a", "pvc-a", ephemeral=["scratch"])
    assert plugin.after_claim_change(pod, None, claim("pvc-a", "sc")) is QUEUE
    assert plugin.after_claim_change(pod, None, claim("pod-a-scratch", "sc")) is QUEUE
    assert plugin.after_claim_change(pod, None, claim("pvc-b", "sc")) is SKIP
    assert plugin.after_claim_change(pod, None, claim("pvc-a", "sc", namespace="other")) is SKIP


def test_a_class_queues_when_new_or_its_topologies_change() -> None:
    plugin = _plugin()
    pod = claiming("pod-a", "pvc-a")
    old = storage_class("sc")
    assert plugin.after_class_change(pod, None, old) is QUEUE
    assert plugin.after_class_change(pod, old, storage_class("sc", topologies=[{"zone": ["z1"]}])) is QUEUE
    relabelled = {**old, "metadata": {"name": "sc", "labels": {"a": "b"}}}
    assert plugin.after_class_change(pod, old, relabelled) is SKIP


def test_a_node_update_queues_only_when_its_labels_change() -> None:
    plugin = _plugin()
    pod = claiming("pod-a", "pvc-a")
    node = make_node("node-a", labels={"zone": "z1"})
    assert plugin.after_node_change(pod, node, make_node("node-a", labels={"zone": "z1"}, cpu="8")) is SKIP
    assert plugin.after_node_change(pod, node, make_node("node-a", labels={"zone": "z2"})) is QUEUE
    assert plugin.after_node_change(pod, None, node) is QUEUE


def _csi_node(migrated: str) -> dict[str, Any]:
    annotations = {"storage.alpha.kubernetes.io/migrated-plugins": migrated} if migrated else {}
    return {
        "kind": "CSINode",
        "metadata": {"name": "node-a", "annotations": annotations},
        "spec": {"drivers": []},
    }


def test_a_csinode_queues_when_new_or_its_migrated_plugins_change() -> None:
    plugin = _plugin()
    pod = claiming("pod-a", "pvc-a")
    assert plugin.after_csi_node_change(pod, None, _csi_node("")) is QUEUE
    assert plugin.after_csi_node_change(pod, _csi_node(""), _csi_node("kubernetes.io/gce-pd")) is QUEUE
    assert plugin.after_csi_node_change(pod, _csi_node("x"), _csi_node("x")) is SKIP


def test_a_capacity_queues_when_new_or_its_limit_grows() -> None:
    plugin = _plugin()
    pod = claiming("pod-a", "pvc-a")
    small = capacity("c", "sc", "10Gi", {"zone": "z1"})
    assert plugin.after_capacity_change(pod, None, small) is QUEUE
    assert plugin.after_capacity_change(pod, small, capacity("c", "sc", "20Gi", {"zone": "z1"})) is QUEUE
    assert plugin.after_capacity_change(pod, small, capacity("c", "sc", "5Gi", {"zone": "z1"})) is SKIP
    # the maximum volume size is the limit when given
    capped = capacity("c", "sc", "100Gi", {"zone": "z1"}, maximum="10Gi")
    assert plugin.after_capacity_change(pod, small, capped) is SKIP


def test_a_csidriver_queues_pods_of_its_inline_volumes_when_it_stops_tracking_capacity() -> None:
    plugin = _plugin()
    inline = Pod.from_dict(
        {
            "metadata": {"name": "pod-a", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "image": "x"}],
                "volumes": [{"name": "v", "csi": {"driver": "csi.example.com"}}],
            },
        }
    )
    on, off = csi_driver("csi.example.com", True), csi_driver("csi.example.com", False)
    assert plugin.after_csi_driver_change(inline, on, off) is QUEUE
    assert plugin.after_csi_driver_change(inline, off, on) is SKIP
    assert plugin.after_csi_driver_change(claiming("pod-b", "pvc-a"), on, off) is SKIP


def test_pods_of_one_shape_share_the_hints() -> None:
    plugin = _plugin()
    assert plugin.hint_shape(claiming("pod-a", "pvc-a")) == plugin.hint_shape(claiming("pod-b", "pvc-a"))
    assert plugin.hint_shape(claiming("pod-a", "pvc-a")) != plugin.hint_shape(claiming("pod-a", "pvc-b"))


# ----------------------------------------------------------------------------- a scheduler
def _scheduler() -> Scheduler:
    sched = Scheduler(default_configuration(), registry(), VirtualClock(0.0))
    for name in ("node-a", "node-b"):
        sched.on_node_add(Node.from_dict(host(name)))
    return sched


def _binds(sched: Scheduler) -> list[Bind]:
    while sched.schedule_one():
        pass
    return [e for e in sched.drain() if isinstance(e, Bind)]


def test_the_default_profile_runs_volume_binding_at_kubes_points() -> None:
    profile = _scheduler().profiles["default-scheduler"]
    plugin = profile.plugins[VB]
    assert plugin is not None
    for point in ("preFilter", "filter", "preScore", "score", "reserve", "preBind"):
        assert VB in profile.resolved.points[point]
    assert profile.resolved.weights[VB] == 1


def test_the_bind_carries_the_volumes_to_bind_first() -> None:
    sched = _scheduler()
    for obj in (
        storage_class("local"),
        claim("pvc-a", "local"),
        volume("pv-b", "local", affinity={HOSTNAME: ["node-b"]}),
    ):
        sched.on_object(str(obj["kind"]), "Add", obj)
    sched.on_pod_add(claiming("pod-a", "pvc-a"))
    (bind,) = _binds(sched)
    assert bind.node_name == "node-b"
    assert bind.volumes is not None
    assert bind.volumes.static == (VolumeToClaim("pv-b", ClaimKey("default", "pvc-a"), "uid-pvc-a"),)


def test_a_pod_waiting_for_its_claim_is_placed_when_the_claim_arrives() -> None:
    sched = _scheduler()
    sched.on_object("StorageClass", "Add", storage_class("dyn", provisioner="csi.example.com"))
    sched.on_pod_add(claiming("pod-a", "pvc-a"))
    assert _binds(sched) == []
    assert 'persistentvolumeclaim "pvc-a" not found' in sched.outcomes["default/pod-a"].message
    sched.on_object("PersistentVolumeClaim", "Add", claim("pvc-a", "dyn"))
    sched.clock.advance(5)  # type: ignore[attr-defined]
    sched.tick()
    (bind,) = _binds(sched)
    assert bind.volumes is not None and bind.volumes.provision == (ClaimKey("default", "pvc-a"),)


def _busy_scheduler() -> Scheduler:
    """Two full nodes, each running one low-priority pod."""
    sched = Scheduler(default_configuration(), registry(), VirtualClock(0.0))
    for name in ("node-a", "node-b"):
        sched.on_node_add(Node.from_dict(node_dict(name, cpu="4", labels={HOSTNAME: name})))
        low = pod_dict(f"low-{name}", cpu="4", priority=0, node_name=name)
        low["status"] = {"phase": "Running"}
        sched.on_pod_add(Pod.from_dict(low))
    sched.on_object("StorageClass", "Add", storage_class("local"))
    sched.on_object("PersistentVolumeClaim", "Add", claim("pvc-a", "local"))
    return sched


def _urgent() -> Pod:
    spec = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}],
        "priority": 100,
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "pvc-a"}}],
    }
    return Pod.from_dict(pod_dict("urgent", spec=spec))


def test_preemption_evicts_only_where_the_volumes_fit() -> None:
    sched = _busy_scheduler()
    sched.on_object("PersistentVolume", "Add", volume("pv-b", "local", affinity={HOSTNAME: ["node-b"]}))
    sched.on_pod_add(_urgent())
    while sched.schedule_one():
        pass
    evicted = [e.victim.name for e in sched.drain() if isinstance(e, Evict)]
    assert evicted == ["low-node-b"]


def test_no_preemption_for_volumes_that_fit_nowhere() -> None:
    sched = _busy_scheduler()
    sched.on_pod_add(_urgent())
    while sched.schedule_one():
        pass
    assert not [e for e in sched.drain() if isinstance(e, Evict)]
    # NodeResourcesFit rejects first; the preemption dry runs then meet VolumeBinding's rejection
    assert sched.outcomes["default/urgent"].message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )


GANG = "gang.scheduling.koordinator.sh"


def _member(name: str, claim_name: str) -> Pod:
    annotations = {f"{GANG}/name": "g", f"{GANG}/min-available": "2"}
    spec = {
        "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim_name}}],
    }
    return Pod.from_dict(pod_dict(name, spec=spec, annotations=annotations))


def _gang_scheduler(*pvs: str) -> Scheduler:
    sched = Scheduler(default_configuration(), registry(), VirtualClock(0.0))
    sched.on_node_add(Node.from_dict(host("node-a")))
    for obj in (storage_class("local"), claim("pvc-1", "local"), claim("pvc-2", "local")):
        sched.on_object(str(obj["kind"]), "Add", obj)
    for name in pvs:
        sched.on_object("PersistentVolume", "Add", volume(name, "local", affinity={HOSTNAME: ["node-a"]}))
    for pod in (_member("m1", "pvc-1"), _member("m2", "pvc-2")):
        sched.on_pod_add(pod)
    return sched


def test_gang_members_get_volumes_of_their_own() -> None:
    sched = _gang_scheduler("pv-1", "pv-2")
    binds = _binds(sched)
    assert sorted((b.pod.name, b.volumes.static[0].pv_name) for b in binds if b.volumes is not None) == [
        ("m1", "pv-1"),
        ("m2", "pv-2"),
    ]


def test_a_gang_that_cannot_be_placed_gives_its_volumes_back() -> None:
    sched = _gang_scheduler("pv-1")
    assert _binds(sched) == []
    catalog = StorageCatalog.shared(sched.profiles["default-scheduler"].handle)
    assert not catalog.is_assumed_volume("pv-1")
    pv = catalog.volume("pv-1")
    assert pv is not None and pv.claim_ref is None
