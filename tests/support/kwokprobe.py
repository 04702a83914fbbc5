"""KWOK on the test control plane: the annotation of the nodes it manages, and the check that it
works."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from tests.support.processes import ControlPlaneError

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"

# ControlPlane.request: (method, path, body) -> (status, body)
Request = Callable[..., tuple[int, bytes]]


def kwok_probe(request: Request) -> Callable[[], bool]:
    """A check that creates a KWOK node, sees it Ready, then deletes it: KWOK works. `request` is
    `ControlPlane.request`."""
    name = f"kwok-probe-{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
        },
        "status": {"capacity": {"cpu": "1", "memory": "1Gi", "pods": "1"}},
    }
    created = False

    def check() -> bool:
        nonlocal created
        if not created:
            status, body = request("POST", "/api/v1/nodes", node)
            if status not in (201, 409):
                raise ControlPlaneError(f"creating probe node: HTTP {status}: {body!r}")
            created = True
        status, body = request("GET", f"/api/v1/nodes/{name}")
        if status != 200:
            return False
        conditions = json.loads(body).get("status", {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return False
        status, body = request("DELETE", f"/api/v1/nodes/{name}")
        if status not in (200, 404):
            raise ControlPlaneError(f"deleting probe node: HTTP {status}: {body!r}")
        request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
        return True

    return check
