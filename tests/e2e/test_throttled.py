"""A throttled API server: tiny in-flight limits on the server and the chart's client limits on two
replicas of `koordpy run`, started with well over a thousand pods pending, so that the leader's
first pass queues more bindings, status writes and events than its token bucket lets out in half a
minute. Leadership must not change hands while the leader is alive (its renewals may not wait
behind that backlog), no strict gang may be left partly bound, and every pod that cannot be placed
is told why (its PodScheduled condition)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from tests.e2e.cluster import admin_client
from tests.e2e.conftest import _running
from tests.e2e.kwok import create_ready_nodes
from tests.e2e.test_leadership import Replica
from tests.e2e.test_run import SCHEDULER_NAME
from tests.support.controlplane import ControlPlane
from tests.support.polling import eventually

pytestmark = pytest.mark.e2e

# the server takes 5 requests at a time (APF shares them out among its priority levels)
APISERVER_ARGS = ["--max-requests-inflight=5", "--max-mutating-requests-inflight=3"]
# the chart's defaults
QPS, BURST = 50, 100
# kube-scheduler's lease timings
LEASE = {"--lease-duration": "15", "--renew-deadline": "10", "--retry-period": "2"}
NODES = 20
NODE_RESOURCES = {"cpu": "8", "memory": "32Gi", "pods": "110"}
# the scale at which a Lease sharing the scheduler's client was lost to its backlog: 1,500 pods that
# fit (gang members and plain pods, 150 of the nodes' 160 CPUs), all pending when koordpy starts
GANGS, GANG_SIZE, POD_CPU = 10, 40, "100m"
PLAIN = 1100
# more than any node has: pending, each with its reason written
TOO_BIG, TOO_BIG_CPU = 100, "9"
# pods created at once by the test
CREATE_BATCH = 50
KOORD_GANG = "gang.scheduling.koordinator.sh"
TIMEOUT = 300.0


@pytest.fixture(scope="module")
def throttled_control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    yield from _running(request, ControlPlane(apiserver_args=APISERVER_ARGS), "the throttled control plane")


def pod(name: str, label: str, cpu: str, annotations: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        spec=client.V1PodSpec(
            scheduler_name=SCHEDULER_NAME,
            node_selector={"koordpy.e2e/throttled-nodes": label},
            containers=[
                client.V1Container(
                    name="c", image="x", resources=client.V1ResourceRequirements(requests={"cpu": cpu})
                )
            ],
        ),
    )


@pytest.fixture
async def core(throttled_control_plane: ControlPlane) -> AsyncIterator[client.CoreV1Api]:
    async with admin_client(throttled_control_plane) as api:
        yield client.CoreV1Api(api)


async def test_under_a_throttled_api_server_leadership_holds_and_gangs_stay_whole(
    throttled_control_plane: ControlPlane, core: client.CoreV1Api, tmp_path: Path
) -> None:
    cp = throttled_control_plane
    label = uuid.uuid4().hex[:6]
    nodes = {f"throttled-{label}-{i}": {"koordpy.e2e/throttled-nodes": label} for i in range(NODES)}
    await create_ready_nodes(core, nodes, NODE_RESOURCES)
    namespace = f"e2e-throttled-{label}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    gangs = {f"gang-{g}": [f"gang-{g}-{i:02d}" for i in range(GANG_SIZE)] for g in range(GANGS)}
    too_big = [f"big-{i:03d}" for i in range(TOO_BIG)]
    wanted = [
        pod(name, label, POD_CPU, {f"{KOORD_GANG}/name": gang, f"{KOORD_GANG}/min-available": str(GANG_SIZE)})
        for gang, members in gangs.items()
        for name in members
    ]
    wanted += [pod(f"plain-{i:04d}", label, POD_CPU) for i in range(PLAIN)]
    wanted += [pod(name, label, TOO_BIG_CPU) for name in too_big]
    for start in range(0, len(wanted), CREATE_BATCH):
        batch = wanted[start : start + CREATE_BATCH]
        await asyncio.gather(*(core.create_namespaced_pod(namespace, p) for p in batch))
    lease = f"lease-{label}"
    replicas = [
        Replica(cp, tmp_path, lease, namespace, n, qps=QPS, burst=BURST, lease_flags=LEASE) for n in range(2)
    ]
    coordination = client.CoordinationV1Api(core.api_client)
    try:

        async def held() -> str:
            return (await coordination.read_namespaced_lease(lease, namespace)).spec.holder_identity or ""

        first_holder = await eventually(held, timeout=TIMEOUT, what="a leader")

        async def settled() -> dict[str, client.V1Pod] | None:
            pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
            fitting = [p.metadata.name for p in wanted if p.metadata.name not in too_big]
            if not all(pods[name].spec.node_name for name in fitting):
                return None
            told = [
                name
                for name in too_big
                if any(
                    c.type == "PodScheduled" and c.status == "False"
                    for c in (pods[name].status.conditions or [])
                )
            ]
            return pods if len(told) == len(too_big) else None

        pods = await eventually(
            settled, timeout=TIMEOUT, interval=1.0, what="every gang bound, every big pod told why"
        )
        current = await coordination.read_namespaced_lease(lease, namespace)
    finally:
        for replica in replicas:
            replica.close()
        logs = "\n".join(f"--- {r.user}\n{r.log()[-2000:]}" for r in replicas)

    assert current.spec.holder_identity == first_holder, logs
    assert not current.spec.lease_transitions, f"leadership changed hands:\n{logs}"
    bound = Counter(name.rsplit("-", 1)[0] for name, p in pods.items() if p.spec.node_name)
    partly = {g: bound[g] for g in gangs if 0 < bound[g] < GANG_SIZE}
    assert not partly, f"strict gangs partly bound: {partly}"
