"""The cluster world carries out a Bind's volume bindings before the pod's Binding: the storage
informers feed both the scheduler and the wait, the writes are counted, and a failure reaches the
scheduler as the binding's error, naming the claim, with no Binding sent."""

from __future__ import annotations

import dataclasses
from typing import Any

from koordpy.cluster.volumes import BIND_COMPLETED, PV_CLAIM_REF, PVC_SELECTED_NODE, SELECTED_NODE
from koordpy.framework.effects import Bind, ClaimKey, Effect, VolumeBindings, VolumeToClaim
from koordpy.kubeapi.informer import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS
from tests.cluster.test_volume_bindings import bumped, claim, claim_ref, volume
from tests.cluster.world_support import BINDINGS, Cluster, Start, pending_pod
from tests.support.fakeapi import FakeApiServer, until

DATA = ClaimKey("default", "data")
LOGS = ClaimKey("default", "logs")
PV_PATH = "/api/v1/persistentvolumes/*"
PVC_PATH = "/api/v1/namespaces/default/persistentvolumeclaims/*"


def with_volumes(cluster: Cluster, volumes: VolumeBindings) -> None:
    """Every Bind the scheduler decides carries `volumes`, as VolumeBinding's PreBind leaves them."""
    drain = cluster.scheduler.drain

    def draining() -> list[Effect]:
        return [dataclasses.replace(e, volumes=volumes) if isinstance(e, Bind) else e for e in drain()]

    cluster.scheduler.drain = draining  # type: ignore[method-assign]


def bound(obj: dict[str, Any], rv: str, **changes: Any) -> dict[str, Any]:
    """`obj` as the PV controller leaves it: Bound, with `changes` merged into its sections."""
    out = {**obj, "status": {"phase": "Bound"}}
    for section, values in changes.items():
        out[section] = {**out.get(section, {}), **values}
    out["metadata"] = {**out["metadata"], "resourceVersion": rv}
    return out


def writes(cluster: Cluster, operation: str, result: str) -> float | None:
    return cluster.world.metrics.registry.get_sample_value(
        "koordpy_api_writes_total", {"operation": operation, "result": result}
    )


async def test_the_binding_waits_until_the_pv_controller_has_bound_the_claims(
    start: Start, fake: FakeApiServer
) -> None:
    fake.on("PUT", PV_PATH, bumped)
    fake.on("PUT", PVC_PATH, bumped)
    cluster = await start()
    with_volumes(
        cluster,
        VolumeBindings((VolumeToClaim("pv-a", DATA, "uid-data"),), (LOGS,), (DATA, LOGS), "n1", 30.0),
    )
    volumes, claims = fake.watch(PERSISTENT_VOLUMES.path), fake.watch(PERSISTENT_VOLUME_CLAIMS.path)
    await volumes.watching()
    await claims.watching()
    pv, data, logs = volume("pv-a"), claim("data"), claim("logs")
    volumes.added(pv)
    claims.added(data)
    claims.added(logs)
    await until(lambda: "default/logs" in cluster.world.informers[PERSISTENT_VOLUME_CLAIMS].store)
    await fake.watch(PODS.path).watching()
    fake.watch(PODS.path).added(pending_pod("p"))

    pv_write, pvc_write = await fake.wait_for("PUT", "*", count=2)
    assert (pv_write.path, pvc_write.path) == (
        "/api/v1/persistentvolumes/pv-a",
        "/api/v1/namespaces/default/persistentvolumeclaims/logs",
    )
    await until(lambda: cluster.world.volumes.waiting() == 1, what="the binding waits")
    assert cluster.bindings() == []

    # the PV controller at work, as the watches tell it
    volumes.modified(bound(pv, "200", spec={"claimRef": claim_ref("data")}))
    annotated = {"annotations": {BIND_COMPLETED: "yes"}}
    claims.modified(bound(data, "201", spec={"volumeName": "pv-a"}, metadata=annotated))
    volumes.added(bound(volume("pv-new"), "202", spec={"claimRef": claim_ref("logs")}))
    logs_bound = {"annotations": {BIND_COMPLETED: "yes", SELECTED_NODE: "n1"}}
    claims.modified(bound(logs, "203", spec={"volumeName": "pv-new"}, metadata=logs_bound))

    (binding,) = await fake.wait_for("POST", BINDINGS)
    assert binding.arrived > pvc_write.answered  # type: ignore[operator]
    assert binding.body["target"]["name"] == "n1"
    await until(lambda: not cluster.scheduler.pending("default/p"), what="p bound")
    assert writes(cluster, PV_CLAIM_REF, "success") == 1.0
    assert writes(cluster, PVC_SELECTED_NODE, "success") == 1.0
    assert cluster.world.volumes.waiting() == 0


async def test_a_failed_provisioning_fails_the_binding_naming_the_claim(
    start: Start, fake: FakeApiServer
) -> None:
    fake.on("PUT", PVC_PATH, bumped)
    cluster = await start()
    with_volumes(cluster, VolumeBindings((), (LOGS,), (LOGS,), "n1", 30.0))
    claims = fake.watch(PERSISTENT_VOLUME_CLAIMS.path)
    await claims.watching()
    claims.added(claim("logs"))
    await until(lambda: "default/logs" in cluster.world.informers[PERSISTENT_VOLUME_CLAIMS].store)
    await fake.watch(PODS.path).watching()
    fake.watch(PODS.path).added(pending_pod("p"))
    await fake.wait_for("PUT", PVC_PATH)
    await until(lambda: cluster.world.volumes.waiting() == 1, what="the binding waits")

    # the retry decides nothing the world carries out: the first attempt's verdict stays to be read
    cluster.scheduler.drain = lambda: []  # type: ignore[method-assign]
    claims.modified(claim("logs", rv="300"))
    await until(lambda: cluster.scheduler.condition_of("default/p") is not None, what="the verdict")
    condition = cluster.scheduler.condition_of("default/p")
    assert condition is not None
    assert 'selectedNode annotation reset for PVC "default/logs"' in condition[1]
    assert cluster.bindings() == []
    assert cluster.world.volumes.waiting() == 0
