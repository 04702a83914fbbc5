"""The Lease of a scheduler under benchmark, watched from outside: every renewal as the API server
holds it, whoever the scheduler is. A leader renews every retry period (2 s by default); a gap near
the renew deadline (10 s) is a lease about to be given up, and a change of holder is a lease lost."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from koordpy.kubeapi import TRANSPORT_ERRORS, ApiError, KubeApi

# often enough to see each renewal of a 2 s retry period apart
POLL_SECONDS = 0.25


@dataclass
class LeaseWatch:
    api: KubeApi
    namespace: str
    name: str
    # monotonic times at which a new renewTime was first seen
    renewals: list[float] = field(default_factory=list)
    # holders in the order they held the Lease
    holders: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        last = None
        while True:
            with contextlib.suppress(ApiError, *TRANSPORT_ERRORS):
                spec = (await self.api.request("GET", self.path, timeout=5.0)).get("spec") or {}
                holder = str(spec.get("holderIdentity") or "")
                if holder and (not self.holders or self.holders[-1] != holder):
                    self.holders.append(holder)
                renewed = spec.get("renewTime")
                if renewed and renewed != last:
                    last = renewed
                    self.renewals.append(time.monotonic())
            await asyncio.sleep(POLL_SECONDS)
