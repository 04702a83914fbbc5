"""Leadership fences every write, on the real control plane with the audit log as the judge.

Two replicas of `koordpy run` elect a leader; the leader is given more pending pods than its client
rate limit lets it bind at once, so a backlog of bindings waits in its token bucket. It is then
stopped (SIGSTOP) for longer than the lease, the standby takes over and binds, and the old leader is
resumed with its backlog. A paused leader cannot notice anything while it is stopped: only the
fence, which asks whether the lease is still held immediately before each write goes out, keeps
its backlog from reaching the API server after the new leader has started writing. The pods
together ask for more CPU than the nodes have, so two leaders binding at once would overcommit a
node.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config

from tests.e2e.kwok import create_ready_nodes
from tests.e2e.test_run import CONFIG_DOC, SCHEDULER_NAME
from tests.support.audit import read_audit_log, scheduler_writes_policy, user_kubeconfig
from tests.support.controlplane import ControlPlane, free_port
from tests.support.polling import eventually

pytestmark = pytest.mark.e2e

# read by the `audited_control_plane` fixture
AUDIT_POLICY = scheduler_writes_policy()
REPO_ROOT = Path(__file__).resolve().parents[2]

NODES = 4
NODE_CPU_MILLIS = 8000
NODE_RESOURCES = {"cpu": "8", "memory": "32Gi", "pods": "110"}
POD_CPU_MILLIS = 100
# 40,000m asked of 32,000m: a node given pods by two leaders at once ends up overcommitted
PODS = 400
# a backlog: each binding, status write and event takes a token, 20 a second
QPS, BURST = 20, 20
LEASE = {"--lease-duration": "4", "--renew-deadline": "3", "--retry-period": "0.5"}
# generous: a 2-core machine shared with other work; no assertion is about time
TIMEOUT = 120.0


class Replica:
    """`koordpy run` as a child process under a user of its own, so the audit log tells its writes
    apart."""

    def __init__(
        self,
        cp: ControlPlane,
        tmp: Path,
        lease: str,
        namespace: str,
        n: int,
        *,
        qps: int = QPS,
        burst: int = BURST,
        lease_flags: dict[str, str] = LEASE,
    ) -> None:
        self.user = f"koordpy-leader-{n}"
        self.log_path = tmp / f"{self.user}.log"
        kubeconfig = user_kubeconfig(cp, tmp / f"{self.user}.kubeconfig", self.user)
        config = tmp / "config.yaml"
        config.write_text(yaml.safe_dump(CONFIG_DOC))
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        lease_args = [item for pair in lease_flags.items() for item in pair]
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "koordpy.cli", "run",
                "--kubeconfig", str(kubeconfig), "--config", str(config),
                "--leader-elect", "--lease-name", lease, "--lease-namespace", namespace, *lease_args,
                "--kube-api-qps", str(qps), "--kube-api-burst", str(burst),
                "--secure-port", "0", "--insecure-port", str(free_port()), "--bind-address", "127.0.0.1",
                "--identity", self.user, "--no-operators", "-v", "2",
            ],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


async def bound_pods(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    pods = (await core.list_namespaced_pod(namespace)).items
    return [p for p in pods if p.spec.node_name]


@pytest.fixture
async def cluster(audited_control_plane: ControlPlane) -> AsyncIterator[tuple[client.CoreV1Api, str]]:
    configuration = client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(audited_control_plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration=configuration) as api:
        core = client.CoreV1Api(api)
        label = uuid.uuid4().hex[:6]
        nodes = {f"leader-node-{label}-{i}": {"koordpy.e2e/leader-nodes": label} for i in range(NODES)}
        await create_ready_nodes(core, nodes, NODE_RESOURCES)
        namespace = f"e2e-leadership-{label}"
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        for i in range(PODS):
            pod = client.V1Pod(
                metadata=client.V1ObjectMeta(name=f"p-{i:03d}"),
                spec=client.V1PodSpec(
                    scheduler_name=SCHEDULER_NAME,
                    node_selector={"koordpy.e2e/leader-nodes": label},
                    containers=[
                        client.V1Container(
                            name="c",
                            image="x",
                            resources=client.V1ResourceRequirements(
                                requests={"cpu": f"{POD_CPU_MILLIS}m", "memory": "16Mi"}
                            ),
                        )
                    ],
                ),
            )
            await core.create_namespaced_pod(namespace, pod)
        yield core, namespace


async def test_a_leader_paused_past_its_lease_sends_none_of_its_backlog_when_resumed(
    audited_control_plane: ControlPlane, cluster: tuple[client.CoreV1Api, str], tmp_path: Path
) -> None:
    cp = audited_control_plane
    assert cp.audit_log is not None
    core, namespace = cluster
    lease = f"lease-{uuid.uuid4().hex[:6]}"
    first = Replica(cp, tmp_path, lease, namespace, 0)
    replicas = [first]
    try:
        # the first replica leads alone, and is stopped while its bindings still queue
        await eventually(
            lambda: bound_pods(core, namespace), timeout=TIMEOUT, what="the first leader binding"
        )
        first.proc.send_signal(signal.SIGSTOP)
        stopped_with = len(await bound_pods(core, namespace))
        second = Replica(cp, tmp_path, lease, namespace, 1)
        replicas.append(second)

        async def second_binds() -> bool:
            writes = await asyncio.to_thread(read_audit_log, cp.audit_log)
            return any(w.user == second.user for w in writes)

        await eventually(second_binds, timeout=TIMEOUT, what="the new leader's first write")
        first.proc.send_signal(signal.SIGCONT)
        # the deposed leader notices, says what it cancelled and exits as kube-scheduler does
        exit_code = await asyncio.wait_for(asyncio.to_thread(first.proc.wait), TIMEOUT)
        assert exit_code == 1, first.log()[-3000:]
        assert "Leaderelection lost" in first.log()

        capacity = NODES * NODE_CPU_MILLIS // POD_CPU_MILLIS

        async def all_that_fit_bound() -> bool:
            return len(await bound_pods(core, namespace)) >= capacity

        await eventually(all_that_fit_bound, timeout=TIMEOUT, what=f"{capacity} pods bound")
        writes = await asyncio.to_thread(read_audit_log, cp.audit_log)
    finally:
        for replica in replicas:
            replica.close()

    ours = [w for w in writes if w.namespace == namespace]
    takeover = next(i for i, w in enumerate(ours) if w.user == second.user)
    late = [
        w
        for w in ours[takeover:]
        if w.user == first.user and w.subresource == "binding" and w.code is not None and w.code < 300
    ]
    assert not late, f"{len(late)} bindings of the deposed leader accepted after the takeover"
    assert stopped_with < capacity, "the first leader had no backlog when it was stopped"

    requested: dict[str, int] = defaultdict(int)
    for pod in await bound_pods(core, namespace):
        requested[pod.spec.node_name] += POD_CPU_MILLIS
    over = {node: cpu for node, cpu in requested.items() if cpu > NODE_CPU_MILLIS}
    assert not over, f"nodes overcommitted: {over}"


# what SIGTERM may take: --shutdown-timeout's 1.5 s for the writes and the release of the Lease,
# with room for a loaded machine
SIGTERM_BOUND = 5.0


async def test_sigterm_with_a_backlog_stops_at_once_and_hands_the_lease_back(
    audited_control_plane: ControlPlane, cluster: tuple[client.CoreV1Api, str], tmp_path: Path
) -> None:
    cp = audited_control_plane
    core, namespace = cluster
    lease = f"lease-{uuid.uuid4().hex[:6]}"
    leader = Replica(cp, tmp_path, lease, namespace, 0)
    try:
        await eventually(lambda: bound_pods(core, namespace), timeout=TIMEOUT, what="the leader binding")
        assert len(await bound_pods(core, namespace)) < PODS  # a backlog waits in the token bucket
        loop = asyncio.get_running_loop()
        sent = loop.time()
        leader.proc.send_signal(signal.SIGTERM)
        exit_code = await asyncio.wait_for(asyncio.to_thread(leader.proc.wait), TIMEOUT)
        took = loop.time() - sent
    finally:
        leader.close()
    print(f"SIGTERM to exit: {took:.2f}s")
    assert exit_code == 0, leader.log()[-3000:]
    assert took < SIGTERM_BOUND, leader.log()[-3000:]
    coordination = client.CoordinationV1Api(core.api_client)
    held = await coordination.read_namespaced_lease(lease, namespace)
    assert not held.spec.holder_identity, "the Lease was not handed back"
