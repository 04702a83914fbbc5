"""A binder with no scheduling logic, in Python on koordpy's apiserver client (KubeApi).

Lists and watches the unbound pods of one schedulerName and POSTs a Binding per pod to the nodes in
round-robin order, from a pool of concurrent tasks: what binding costs in Python when scheduling
costs nothing. The Go binder beside it (main.go) is the same thing on client-go.

It prints one JSON line with its counts on SIGUSR1, and again on SIGTERM or SIGINT before it exits.

    python benchmarks/rawbinder/rawbinder.py --kubeconfig FILE [--scheduler-name NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from koordpy.kubeapi import TRANSPORT_ERRORS, ApiError, KubeApi

WATCH_TIMEOUT_SECONDS = 300
RETRY_DELAY = 0.2


class RawBinder:
    def __init__(self, api: KubeApi, scheduler_name: str, workers: int) -> None:
        self.api = api
        self.selector = f"spec.schedulerName={scheduler_name},spec.nodeName="
        self.workers = workers
        self.queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        # pods handed to a worker and not refused: a watch replays a pod after a re-list
        self.taken: set[str] = set()
        self.nodes: list[str] = []
        self.ring: itertools.cycle[str] = itertools.cycle(())
        self.counts = {"bound": 0, "errors": 0, "writes": 0, "retries": 0}

    async def load_nodes(self) -> None:
        body = await self.api.request("GET", "/api/v1/nodes")
        self.nodes = sorted(n["metadata"]["name"] for n in body.get("items") or [])
        self.ring = itertools.cycle(self.nodes)

    def offer(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        if (pod.get("spec") or {}).get("nodeName") or uid in self.taken:
            return
        self.taken.add(uid)
        self.queue.put_nowait((str(meta.get("namespace")), str(meta.get("name")), uid))

    async def list_and_watch(self) -> None:
        while True:
            listing = await self.api.request(
                "GET", "/api/v1/pods", query=[("fieldSelector", self.selector)], timeout=120
            )
            for pod in listing.get("items") or []:
                self.offer(pod)
            version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
            try:
                while True:
                    query = [
                        ("watch", "1"),
                        ("fieldSelector", self.selector),
                        ("resourceVersion", version),
                        ("allowWatchBookmarks", "true"),
                        ("timeoutSeconds", str(WATCH_TIMEOUT_SECONDS)),
                    ]
                    async for event in self.api.stream("/api/v1/pods", query, WATCH_TIMEOUT_SECONDS + 30):
                        obj = event.get("object") or {}
                        kind = event.get("type")
                        if kind == "ERROR":
                            raise ApiError(int(obj.get("code") or 500), str(obj.get("reason")), "")
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                        if kind == "ADDED":
                            self.offer(obj)
            except (ApiError, *TRANSPORT_ERRORS):
                # 410 Gone and everything else alike: list again, as an informer does
                await asyncio.sleep(RETRY_DELAY)

    async def bind_worker(self) -> None:
        while True:
            namespace, name, uid = await self.queue.get()
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": next(self.ring)},
            }
            self.counts["writes"] += 1
            try:
                await self.api.request(
                    "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body
                )
                self.counts["bound"] += 1
            except ApiError as err:
                self.counts["errors"] += 1
                if err.status not in (404, 409):
                    self.counts["retries"] += 1
                    await asyncio.sleep(RETRY_DELAY)
                    self.queue.put_nowait((namespace, name, uid))
            except TRANSPORT_ERRORS:
                self.counts["errors"] += 1
                self.counts["retries"] += 1
                await asyncio.sleep(RETRY_DELAY)
                self.queue.put_nowait((namespace, name, uid))

    def report(self) -> None:
        print(json.dumps({"rawbinder": self.counts}), flush=True)

    async def run(self, stop: asyncio.Event) -> None:
        await self.load_nodes()
        tasks = [asyncio.create_task(self.bind_worker()) for _ in range(self.workers)]
        tasks.append(asyncio.create_task(self.list_and_watch()))
        print(f"rawbinder.py: ready, {len(self.nodes)} nodes", file=sys.stderr, flush=True)
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in [waiter, *tasks]:
            task.cancel()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception():
                print(f"rawbinder.py: {task.exception()!r}", file=sys.stderr)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


async def main(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    api = await KubeApi.connect(args.kubeconfig)
    binder = RawBinder(api, args.scheduler_name, args.workers)
    loop.add_signal_handler(signal.SIGUSR1, binder.report)
    try:
        await binder.run(stop)
    finally:
        await api.close()
        binder.report()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", default="bench-raw-binder")
    parser.add_argument("--workers", type=int, default=64, help="concurrent Binding requests")
    sys.exit(asyncio.run(main(parser.parse_args())))
