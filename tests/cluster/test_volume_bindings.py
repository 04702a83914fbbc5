"""Carrying out VolumeBinding's decisions on a cluster (`koordpy.cluster.volumes`), against a
scripted apiserver: the PV and claim updates made and their order, nothing written twice, the wait
for the PV controller woken by informer events (never by asking the apiserver), and each way the
binding fails: a conflict, the provisioner giving up, a reset claimRef, a node relabelled or deleted
meanwhile, a deleted pod, the timeout, and a write refused because the leadership was lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from koordpy.api.pod import Pod
from koordpy.cluster.volumes import (
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    PV_CLAIM_REF,
    PVC_SELECTED_NODE,
    SELECTED_NODE,
    VolumeBinder,
    VolumeBindingError,
)
from koordpy.framework.effects import ClaimKey, VolumeBindings, VolumeToClaim
from koordpy.kubeapi.client import KubeApi
from tests.cluster.world_support import node, pending_pod
from tests.support.fakeapi import FakeApiServer, Reply, Request

PV_PATH = "/api/v1/persistentvolumes/*"
PVC_PATH = "/api/v1/namespaces/default/persistentvolumeclaims/*"
DATA = ClaimKey("default", "data")
LOGS = ClaimKey("default", "logs")


def volume(name: str, rv: str = "5", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], **spec},
        "status": {"phase": "Available"},
    }


def claim(name: str, rv: str = "7", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "annotations": dict(annotations or {}),
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Pending"},
    }


def claim_ref(name: str) -> dict[str, str]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "default",
        "name": name,
        "uid": f"uid-{name}",
    }


def bumped(request: Request) -> Reply:
    """The apiserver's answer to an update: the object as written, with a newer resourceVersion."""
    body = dict(request.body)
    body["metadata"] = {**body["metadata"], "resourceVersion": "100"}
    return Reply(200, body)


@dataclass
class Setup:
    fake: FakeApiServer
    api: KubeApi
    binder: VolumeBinder
    pod: Pod
    volumes: dict[str, dict[str, Any]] = field(default_factory=dict)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: list[tuple[str, bool]] = field(default_factory=list)

    def pv_controller_binds(self, name: str, pv_name: str, rv: str = "200") -> None:
        """What the PV controller writes once it has bound a claim to a volume: the volume's
        claimRef, then the claim's volumeName, bind-completed and phase, each told as an event."""
        pv = self.volumes.get(pv_name) or volume(pv_name)
        self.volumes[pv_name] = {
            **pv,
            "metadata": {**pv["metadata"], "resourceVersion": rv},
            "spec": {**pv["spec"], "claimRef": claim_ref(name)},
            "status": {"phase": "Bound"},
        }
        self.binder.volume_changed(pv_name)
        pvc = self.claims[f"default/{name}"]
        self.claims[f"default/{name}"] = {
            **pvc,
            "metadata": {
                **pvc["metadata"],
                "resourceVersion": rv,
                "annotations": {**pvc["metadata"]["annotations"], BIND_COMPLETED: "yes"},
            },
            "spec": {**pvc["spec"], "volumeName": pv_name},
            "status": {"phase": "Bound"},
        }
        self.binder.claim_changed(f"default/{name}")


@pytest_asyncio.fixture(loop_scope="function")
async def setup() -> AsyncIterator[Setup]:
    async with FakeApiServer() as fake:
        fake.on("PUT", PV_PATH, bumped)
        fake.on("PUT", PVC_PATH, bumped)
        api = fake.client()
        raw = pending_pod("p")
        stores: dict[str, dict[str, dict[str, Any]]] = {"volumes": {}, "claims": {}, "pods": {}, "nodes": {}}
        writes: list[tuple[str, bool]] = []
        binder = VolumeBinder(
            api,
            lambda name: stores["volumes"].get(name),
            lambda key: stores["claims"].get(key),
            lambda key: stores["pods"].get(key),
            lambda name: stores["nodes"].get(name),
            on_write=lambda operation, ok: writes.append((operation, ok)),
        )
        s = Setup(
            fake,
            api,
            binder,
            Pod.from_dict(raw),
            volumes=stores["volumes"],
            claims=stores["claims"],
            pods=stores["pods"],
            nodes=stores["nodes"],
            writes=writes,
        )
        s.pods["default/p"] = raw
        s.nodes["n1"] = node("n1")
        yield s


def bindings(
    static: tuple[VolumeToClaim, ...] = (),
    provision: tuple[ClaimKey, ...] = (),
    timeout: float = 5.0,
) -> VolumeBindings:
    wait_for = tuple(dict.fromkeys([*(b.claim for b in static), *provision]))
    return VolumeBindings(static, provision, wait_for, "n1", timeout)


async def still_waiting(task: asyncio.Task[None]) -> None:
    await asyncio.sleep(0.05)
    assert not task.done(), task.exception() if task.done() else None


async def test_volumes_then_claims_are_written_and_the_pod_waits_for_both_to_be_bound(setup: Setup) -> None:
    s = setup
    s.volumes["pv-a"] = volume("pv-a")
    s.claims["default/data"] = claim("data")
    s.claims["default/logs"] = claim("logs")
    vb = bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),), provision=(LOGS,))
    task = asyncio.create_task(s.binder.bind(s.pod, vb))
    pv_write, pvc_write = await s.fake.wait_for("PUT", "*", count=2)

    # the volume first, as kube's bindAPIUpdate: its claimRef and bound-by-controller, written over
    # the informer's copy with its resourceVersion (a volume changed since is a conflict)
    assert pv_write.path == "/api/v1/persistentvolumes/pv-a"
    assert pv_write.body["spec"]["claimRef"] == claim_ref("data")
    assert pv_write.body["metadata"]["annotations"] == {BOUND_BY_CONTROLLER: "yes"}
    assert pv_write.body["metadata"]["resourceVersion"] == "5"
    assert pv_write.body["spec"]["capacity"] == {"storage": "1Gi"}
    # then the claim to provision: its selected node
    assert pvc_write.path == "/api/v1/namespaces/default/persistentvolumeclaims/logs"
    assert pvc_write.arrived > pv_write.answered  # type: ignore[operator]
    assert pvc_write.body["metadata"]["annotations"] == {SELECTED_NODE: "n1"}
    assert pvc_write.body["metadata"]["resourceVersion"] == "7"
    # the informers' copies are never edited in place
    assert "claimRef" not in s.volumes["pv-a"]["spec"]
    assert s.writes == [(PV_CLAIM_REF, True), (PVC_SELECTED_NODE, True)]

    await still_waiting(task)
    s.pv_controller_binds("data", "pv-a")
    await still_waiting(task)
    # the provisioner's volume, then the claim bound to it
    s.claims["default/logs"]["metadata"]["annotations"][SELECTED_NODE] = "n1"
    s.pv_controller_binds("logs", "pv-new")
    await asyncio.wait_for(task, 1.0)
    # the wait asked nothing of the apiserver: the informers' events woke it
    assert s.fake.matching("GET") == []
    assert s.binder.waiting() == 0


async def test_what_the_informer_shows_written_already_is_not_written_again(setup: Setup) -> None:
    s = setup
    s.claims["default/data"] = claim("data")
    s.claims["default/logs"] = claim("logs", annotations={SELECTED_NODE: "n1"})
    s.volumes["pv-a"] = volume("pv-a", claimRef=claim_ref("data"))
    s.volumes["pv-a"]["metadata"]["annotations"] = {BOUND_BY_CONTROLLER: "yes"}
    s.pv_controller_binds("data", "pv-a")
    s.pv_controller_binds("logs", "pv-b")
    vb = bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),), provision=(LOGS,))
    await asyncio.wait_for(s.binder.bind(s.pod, vb), 1.0)
    assert s.fake.requests == []
    assert s.writes == []


async def test_a_volume_its_author_bound_to_the_claim_keeps_saying_so(setup: Setup) -> None:
    """kube's GetBindVolumeToClaim: a volume pre-bound to the claim by name gets the claim's uid,
    not bound-by-controller (the PV controller never unbinds such a volume)."""
    s = setup
    s.claims["default/data"] = claim("data")
    prebound = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data"}
    s.volumes["pv-a"] = volume("pv-a", claimRef=prebound)
    task = asyncio.create_task(
        s.binder.bind(s.pod, bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),)))
    )
    (write,) = await s.fake.wait_for("PUT", PV_PATH)
    assert write.body["spec"]["claimRef"]["uid"] == "uid-data"
    assert BOUND_BY_CONTROLLER not in (write.body["metadata"].get("annotations") or {})
    task.cancel()


async def test_a_conflict_on_the_volume_fails_the_binding_naming_it(setup: Setup) -> None:
    s = setup
    s.fake.on("PUT", PV_PATH, Reply.error(409, "Conflict", 'the object has been modified: "pv-a"'))
    s.volumes["pv-a"] = volume("pv-a")
    s.claims["default/data"] = claim("data")
    s.claims["default/logs"] = claim("logs")
    vb = bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),), provision=(LOGS,))
    with pytest.raises(VolumeBindingError) as failed:
        await s.binder.bind(s.pod, vb)
    message = str(failed.value)
    assert 'persistentvolume "pv-a"' in message and 'claim "default/data"' in message and "409" in message
    # nothing after the failed write, as kube's bindAPIUpdate stops at the first error
    assert s.fake.matching("PUT", PVC_PATH) == []
    assert s.writes == [(PV_CLAIM_REF, False)]
    assert s.binder.waiting() == 0


async def test_a_provisioning_the_provisioner_gave_up_fails_the_binding(setup: Setup) -> None:
    s = setup
    s.claims["default/logs"] = claim("logs")
    task = asyncio.create_task(s.binder.bind(s.pod, bindings(provision=(LOGS,))))
    await s.fake.wait_for("PUT", PVC_PATH)
    # an event from before the write (its resourceVersion is older) says nothing of the provisioning
    s.binder.claim_changed("default/logs")
    await still_waiting(task)
    # the provisioner removes the annotation to say it failed
    s.claims["default/logs"] = claim("logs", rv="300")
    s.binder.claim_changed("default/logs")
    with pytest.raises(VolumeBindingError, match='selectedNode annotation reset for PVC "default/logs"'):
        await asyncio.wait_for(task, 1.0)
    assert s.binder.waiting() == 0


async def test_a_volume_whose_claim_ref_was_reset_fails_the_binding(setup: Setup) -> None:
    s = setup
    s.claims["default/data"] = claim("data")
    s.volumes["pv-a"] = volume("pv-a")
    task = asyncio.create_task(
        s.binder.bind(s.pod, bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),)))
    )
    await s.fake.wait_for("PUT", PV_PATH)
    await still_waiting(task)
    s.volumes["pv-a"] = volume("pv-a", rv="300")
    s.binder.volume_changed("pv-a")
    with pytest.raises(VolumeBindingError, match='ClaimRef got reset for pv "pv-a"'):
        await asyncio.wait_for(task, 1.0)


async def test_a_pod_deleted_while_it_waits_ends_the_wait(setup: Setup) -> None:
    s = setup
    s.claims["default/logs"] = claim("logs")
    task = asyncio.create_task(s.binder.bind(s.pod, bindings(provision=(LOGS,))))
    await s.fake.wait_for("PUT", PVC_PATH)
    del s.pods["default/p"]
    s.binder.pod_gone("default/p")
    with pytest.raises(VolumeBindingError, match="pod default/p does not exist any more"):
        await asyncio.wait_for(task, 1.0)


async def test_a_claim_not_bound_in_time_fails_the_binding_naming_it(setup: Setup) -> None:
    s = setup
    s.claims["default/data"] = claim("data")
    s.claims["default/logs"] = claim("logs")
    s.volumes["pv-a"] = volume("pv-a")
    vb = bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),), provision=(LOGS,), timeout=0.3)
    task = asyncio.create_task(s.binder.bind(s.pod, vb))
    await s.fake.wait_for("PUT", PVC_PATH)
    s.pv_controller_binds("data", "pv-a")
    with pytest.raises(VolumeBindingError) as failed:
        await asyncio.wait_for(task, 2.0)
    # only the claim still unbound is named
    assert str(failed.value) == (
        "binding volumes: timed out after 0.3s waiting for persistentvolumeclaim(s) default/logs to be bound"
    )
    assert s.binder.waiting() == 0


async def test_a_claim_bound_to_a_volume_bound_elsewhere_is_not_bound(setup: Setup) -> None:
    """The volume the claim names must name the claim back, by uid."""
    s = setup
    s.claims["default/data"] = claim("data")
    s.volumes["pv-a"] = volume("pv-a")
    vb = bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),), timeout=0.3)
    task = asyncio.create_task(s.binder.bind(s.pod, vb))
    await s.fake.wait_for("PUT", PV_PATH)
    s.pv_controller_binds("data", "pv-a")
    s.volumes["pv-a"]["spec"]["claimRef"] = {**claim_ref("data"), "uid": "uid-someone-else"}
    s.binder.volume_changed("pv-a")
    with pytest.raises(VolumeBindingError, match="timed out"):
        await asyncio.wait_for(task, 2.0)


async def test_a_claim_created_again_since_the_decision_is_not_bound_to_the_volume(setup: Setup) -> None:
    s = setup
    s.claims["default/data"] = claim("data")
    s.volumes["pv-a"] = volume("pv-a")
    with pytest.raises(VolumeBindingError, match='"default/data" was deleted and created again'):
        await s.binder.bind(s.pod, bindings(static=(VolumeToClaim("pv-a", DATA, "uid-old"),)))
    assert s.fake.requests == []


async def test_writes_are_fenced_by_leadership(setup: Setup) -> None:
    s = setup
    s.api.fence = lambda: False
    s.claims["default/logs"] = claim("logs")
    with pytest.raises(VolumeBindingError, match="leadership lost"):
        await s.binder.bind(s.pod, bindings(provision=(LOGS,)))
    # refused before it was sent, and counted as a failed write
    assert s.fake.requests == []
    assert s.api.fenced == {"PUT": 1}
    assert s.writes == [(PVC_SELECTED_NODE, False)]


def on_node(name: str) -> dict[str, Any]:
    """A node affinity that admits the node of this hostname only."""
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [name]}]}
    return {"required": {"nodeSelectorTerms": [term]}}


async def test_a_node_relabelled_away_from_its_volume_fails_the_binding(setup: Setup) -> None:
    """kube's checkBindings: the chosen volume must still be reachable from the node."""
    s = setup
    s.nodes["n1"]["metadata"]["labels"]["kubernetes.io/hostname"] = "n1"
    s.claims["default/data"] = claim("data")
    s.volumes["pv-a"] = volume("pv-a", nodeAffinity=on_node("n1"))
    task = asyncio.create_task(
        s.binder.bind(s.pod, bindings(static=(VolumeToClaim("pv-a", DATA, "uid-data"),)))
    )
    (write,) = await s.fake.wait_for("PUT", PV_PATH)
    s.volumes["pv-a"] = {**write.body, "metadata": {**write.body["metadata"], "resourceVersion": "100"}}
    s.binder.volume_changed("pv-a")
    await still_waiting(task)
    relabelled = node("n1")
    relabelled["metadata"]["labels"]["kubernetes.io/hostname"] = "elsewhere"
    s.nodes["n1"] = relabelled
    s.binder.node_changed("n1")
    with pytest.raises(VolumeBindingError, match='pv "pv-a" node affinity doesn\'t match node "n1"'):
        await asyncio.wait_for(task, 1.0)


async def test_a_node_deleted_while_its_pod_waits_fails_the_binding(setup: Setup) -> None:
    s = setup
    s.claims["default/logs"] = claim("logs")
    task = asyncio.create_task(s.binder.bind(s.pod, bindings(provision=(LOGS,))))
    await s.fake.wait_for("PUT", PVC_PATH)
    await still_waiting(task)
    del s.nodes["n1"]
    s.binder.node_changed("n1")
    with pytest.raises(VolumeBindingError, match='node "n1" does not exist any more'):
        await asyncio.wait_for(task, 1.0)
    assert s.binder.waiting() == 0
