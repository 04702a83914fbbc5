"""Watches cannot go silent, on the real control plane: `koordpy run` reaches kube-apiserver through
a loopback TCP proxy (tests.support.tcpproxy) that can stop carrying bytes without closing anything,
as a dead peer or a NAT that dropped the connection's state does.

- The connections open at the freeze (the watches among them) go silent, new ones pass: pods created
  meanwhile are bound once the pod watch has been given up as idle and resumed on a new connection,
  well before the server would have ended the silent watch itself (5-10 minutes), and
  koordpy_watch_restarts_total counts the restart under reason "idle".
- Every connection goes silent, new ones too: /readyz fails, naming the pods' informer, while
  /healthz stays ok; once bytes flow again /readyz passes.

The idle bound is a few seconds here (the default is 90s): no assertion is about time, the waits
are generous.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes_asyncio import client

from tests.e2e.kwok import labelled_nodes
from tests.e2e.test_run import CONFIG_DOC, RunProcess, pod_manifest
from tests.support.controlplane import ControlPlane, free_port
from tests.support.polling import eventually
from tests.support.tcpproxy import TcpProxy

NODE_LABEL = "koordpy.e2e/run-nodes"
IDLE_BOUND = 5.0
# generous: a shared test machine; the bound, a restart, a scheduling cycle and a binding
BOUND_TIMEOUT = IDLE_BOUND * 4 + 60.0
IDLE_RESTARTS = re.compile(
    r'^koordpy_watch_restarts_total\{reason="idle",resource="pods"\} ([0-9.e+]+)$', re.MULTILINE
)


@pytest.fixture(scope="module")
async def silent_nodes(control_plane: ControlPlane) -> AsyncIterator[str]:
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    async with labelled_nodes(str(control_plane.kubeconfig), "silent-node", 2, NODE_LABEL, resources) as (
        label,
        _,
    ):
        yield label


async def idle_restarts(koordpy: RunProcess) -> float:
    status, text = await koordpy.get("/metrics")
    assert status == 200
    found = IDLE_RESTARTS.search(text)
    return float(found.group(1)) if found else 0.0


async def test_a_silent_watch_is_resumed_and_readiness_says_so(
    control_plane: ControlPlane, core: client.CoreV1Api, namespace: str, silent_nodes: str, tmp_path: Path
) -> None:
    server = urlsplit(control_plane.server)
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(CONFIG_DOC))
    async with TcpProxy(str(server.hostname), int(server.port or 443)) as proxy:
        koordpy = RunProcess(
            [
                "--kubeconfig",
                str(control_plane.kubeconfig),
                # the same certificate and credentials, through the proxy (127.0.0.1 is in the
                # apiserver certificate's names)
                "--master",
                f"https://127.0.0.1:{proxy.port}",
                "--config",
                str(config_path),
                "--watch-idle-timeout",
                f"{IDLE_BOUND:g}s",
                # only the scheduler's own connections, no operators beside it
                "--no-operators",
                "-v",
                "2",
            ],
            tmp_path / "koordpy.log",
            free_port(),
            f"e2e-silent-{uuid.uuid4().hex[:8]}",
        )
        try:

            async def ready() -> bool:
                assert koordpy.proc.poll() is None, f"koordpy exited early:\n{koordpy.log()}"
                return (await koordpy.get("/readyz"))[0] == 200

            await eventually(ready, timeout=60, what="koordpy ready")
            before = await idle_restarts(koordpy)

            # the watches open now go silent; connections opened from now on pass
            assert proxy.freeze() > 0
            names = [f"during-freeze-{i}-{uuid.uuid4().hex[:5]}" for i in range(3)]
            for name in names:
                await core.create_namespaced_pod(namespace, pod_manifest(name, silent_nodes))

            async def all_bound() -> bool:
                pods = (await core.list_namespaced_pod(namespace)).items
                bound = {p.metadata.name for p in pods if p.spec.node_name}
                return set(names) <= bound

            try:
                await eventually(
                    all_bound, timeout=BOUND_TIMEOUT, what="pods created during the freeze bound"
                )
            except BaseException:
                print(koordpy.log())
                raise
            assert await idle_restarts(koordpy) > before

            # now nothing passes, new connections included: the watches stay cut off
            proxy.thaw()
            proxy.freeze(new_connections=True)

            async def unready() -> str:
                status, _ = await koordpy.get("/readyz")
                if status == 200:
                    return ""
                _, why = await koordpy.get("/readyz/informer-watch")
                return why if "pods: watch silent for" in why else ""

            why = await eventually(
                unready, timeout=BOUND_TIMEOUT, what="/readyz to name the silent pod watch"
            )
            assert re.search(r"pods: watch silent for \d+s", why), why
            # liveness is not readiness: kube-scheduler's /healthz has no informer check either
            assert (await koordpy.get("/healthz"))[0] == 200

            proxy.thaw()
            await eventually(
                ready, timeout=BOUND_TIMEOUT, what="/readyz to pass once the watches are answered"
            )
            assert koordpy.proc.poll() is None, koordpy.log()
        finally:
            koordpy.close()
