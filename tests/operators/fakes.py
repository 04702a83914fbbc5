"""Small stand-ins for the apiserver side of the operators' unit tests: pod and node objects as
informers deliver them, and an API that keeps custom objects and applies merge patches."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from koordpy.kubeapi.client import JSON, MERGE_PATCH, ApiError

NAMESPACE = "team"


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    node: str = "",
    phase: str = "Pending",
    owner: str | None = "train",
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "uid": uid or f"uid-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": owner, "uid": f"uid-{owner}"}
        ]
    spec: dict[str, Any] = {"schedulerName": "koord-scheduler", "containers": [{"name": "main"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase, "conditions": conditions or []},
    }


def node(name: str, labels: dict[str, str], heartbeat: str = "2024-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels)},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]},
    }


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class FakeApi:
    """Objects by path; GET, and merge-PATCH of an object or its `/status` subresource, with
    resourceVersion preconditions as the apiserver checks them. `watch` hears of every write, on
    the next turn of the loop (as a watch event would come).

    The CRDs of `groups_without_status` serve no status subresource, as Koordinator's
    scheduling.sigs.k8s.io CRD: `/status` is not found and the object takes its status in a patch
    of its own. Elsewhere a patch of the object leaves its status alone."""

    def __init__(self, *, groups_without_status: tuple[str, ...] = ()) -> None:
        self._without_status = tuple(f"/apis/{group}/" for group in groups_without_status)
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, Any]] = []
        self.watch: Callable[[str, dict[str, Any]], None] | None = None
        self._version = 100

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store (or replace) an object as another writer would, with a new resourceVersion."""
        self._version += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self.objects[path] = stored
        return copy.deepcopy(stored)

    def patches(self, path: str | None = None) -> list[Any]:
        return [body for method, p, body in self.calls if method == "PATCH" and (path is None or p == path)]

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self.calls.append((method, path, copy.deepcopy(body)))
        if method == "GET":
            if path not in self.objects:
                raise ApiError(404, "NotFound", f"{path} not found")
            return copy.deepcopy(self.objects[path])
        assert method == "PATCH" and content_type == MERGE_PATCH, (method, content_type)
        status_served = not path.startswith(self._without_status)
        if path.endswith("/status"):
            target = path.removesuffix("/status")
            if not status_served:
                raise ApiError(404, "NotFound", f"{path} not found")
            # a write to the status subresource changes the status alone
            changes = {"status": body.get("status")}
        else:
            target = path
            changes = {key: value for key, value in body.items() if key != "metadata"}
            if status_served:
                changes.pop("status", None)
        if target not in self.objects:
            raise ApiError(404, "NotFound", f"{target} not found")
        stored = self.objects[target]
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != stored["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        written = self.put(target, merge_patch(stored, changes))
        if self.watch is not None:
            asyncio.get_running_loop().call_soon(self.watch, target, copy.deepcopy(written))
        return written


async def settle(turns: int = 200) -> None:
    """Let every task run until nothing is left to do (nothing here waits on real I/O)."""
    for _ in range(turns):
        await asyncio.sleep(0)
