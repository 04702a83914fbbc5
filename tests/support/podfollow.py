"""Following the pods of a namespace from outside the scheduler, through apiserver restarts: list,
then watch from the list's resourceVersion; a lost connection resumes the watch where it stopped,
a 410 Gone lists again. For tests and benchmarks that check what koordpy did."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi

# (pod, deleted): told of every pod listed and every change a watch delivers
PodSink = Callable[[dict[str, Any], bool], None]


async def follow_pods(
    api: KubeApi,
    namespace: str,
    sink: PodSink,
    listed: asyncio.Event,
    *,
    watch_seconds: int = 300,
    pause: float = 0.2,
    on_restart: Callable[[], None] | None = None,
) -> None:
    """Until cancelled; `listed` is set once the first list has been told to `sink`."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    version = ""
    while True:
        try:
            if not version:
                listing = await api.request("GET", path, timeout=120)
                for pod in listing.get("items") or ():
                    sink(pod, False)
                version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
                listed.set()
            query = [
                ("watch", "1"),
                ("resourceVersion", version),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", str(watch_seconds)),
            ]
            async for event in api.stream(path, query, watch_seconds + 30.0):
                obj = event.get("object") or {}
                kind = event.get("type")
                if kind == "ERROR":
                    if int(obj.get("code") or 0) == 410:
                        version = ""
                        break
                    raise ApiError(int(obj.get("code") or 500), str(obj.get("reason")), "")
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    sink(obj, kind == "DELETED")
        except ApiError as err:
            if on_restart is not None:
                on_restart()
            if err.status == 410:
                version = ""
            await asyncio.sleep(pause)
        except TRANSPORT_ERRORS:
            # the apiserver is away (restarting): resume from where the watch stopped
            if on_restart is not None:
                on_restart()
            await asyncio.sleep(pause)
