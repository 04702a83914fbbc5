"""The health and metrics server of `koordpy run`: `/metrics`, `/healthz` and `/readyz` on one port,
as kube-scheduler serves them on its secure port."""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web

from koordpy.metrics import SchedulerMetrics

log = logging.getLogger(__name__)


class HealthServer:
    def __init__(
        self,
        metrics: SchedulerMetrics,
        ready: Callable[[], tuple[bool, str]],
        healthy: Callable[[], tuple[bool, str]],
        host: str = "0.0.0.0",
        port: int = 10259,
    ) -> None:
        self.metrics = metrics
        self._ready = ready
        self._healthy = healthy
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/livez", self._health)
        app.router.add_get("/readyz", self._readiness)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        addresses = self._runner.addresses
        if addresses:
            # port 0 asks the OS for a free port; report the one it gave
            self.port = int(addresses[0][1])
        log.info("serving /metrics, /healthz and /readyz on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = self.metrics.render()
        return web.Response(body=body, headers={"Content-Type": self.metrics.content_type})

    async def _health(self, request: web.Request) -> web.Response:
        ok, why = self._healthy()
        return web.Response(status=200 if ok else 500, text="ok" if ok else why)

    async def _readiness(self, request: web.Request) -> web.Response:
        ok, why = self._ready()
        return web.Response(status=200 if ok else 500, text="ok" if ok else why)
