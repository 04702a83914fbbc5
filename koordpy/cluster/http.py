"""What `koordpy run` serves, as kube-scheduler serves it: `/metrics`, `/configz`, and the health
endpoints `/healthz`, `/livez`, `/readyz` in the format of apiserver's healthz package.

- `GET /healthz` answers `ok` when every check passes; with `?verbose` it lists each check
  (`[+]ping ok`) and ends with `healthz check passed`. When a check fails the answer is 500 and
  always verbose: `[-]<name> failed: reason withheld` for each failure (the reason goes to the log,
  not to whoever asked) and `healthz check failed` at the end. `?exclude=<name>` (repeatable) skips
  a check (`[+]<name> excluded: ok`); a name that matches no check is warned about in the answer.
  `/healthz/<name>` runs one check and says why it failed. `/livez` and `/readyz` alike.
- `GET /configz`: the configuration in use, as JSON, under `componentconfig`.
- `GET /metrics`: the Prometheus exposition of the scheduler's registry.
- `GET /metrics/slis`: component-base's health-check SLIs, `kubernetes_healthcheck{name,type}` (1
  healthy, 0 not, at the last run) and `kubernetes_healthchecks_total{name,type,status}`, recorded
  each time `/healthz`, `/livez` or `/readyz` runs its checks, as kube-scheduler serves them (the
  second endpoint of kube-prometheus's kube-scheduler ServiceMonitor scrapes it).

The secure port wraps these in delegated authentication and authorization (`koordpy.cluster.auth`):
401 for credentials the apiserver does not accept, 403 for a user not allowed the path, 500 when
the access review could not be made, each a `metav1.Status` as kube answers them. The plain-HTTP
port, served only when asked for, answers everyone.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from koordpy.cluster.auth import Authenticator, AuthorizationFailed, Authorizer, Unauthenticated
from koordpy.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

TEXT = "text/plain; charset=utf-8"
# as apiserver's WithCacheControl: nothing these endpoints answer may be kept by a cache
CACHE_CONTROL = "no-cache, private"


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """A named check: `check()` returns None when healthy, else why not (logged, never served)."""

    name: str
    check: Callable[[], str | None]


PING = HealthCheck("ping", lambda: None)


def _quoted(names: Sequence[str]) -> str:
    return ",".join(json.dumps(n) for n in names)


@dataclass(frozen=True, slots=True)
class HealthReport:
    status: int
    body: str
    # the failing checks with their reasons, for the log
    failures: tuple[str, ...]


class HealthSlis:
    """The health-check SLIs of component-base's `slis` package, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._last = Gauge(
            "kubernetes_healthcheck",
            "This metric records the result of a single healthcheck.",
            ("name", "type"),
            registry=self.registry,
        )
        self._total = Counter(
            "kubernetes_healthchecks",
            "This metric records the results of all healthcheck.",
            ("name", "type", "status"),
            registry=self.registry,
        )

    def observe(self, name: str, endpoint: str, healthy: bool) -> None:
        self._last.labels(name, endpoint).set(1 if healthy else 0)
        self._total.labels(name, endpoint, "success" if healthy else "error").inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def run_check(health: HealthCheck) -> str | None:
    try:
        return health.check()
    except Exception as err:  # a check that breaks is a failed check, not a failed server
        return f"the check raised {type(err).__name__}: {err}"


def health_report(
    endpoint: str,
    checks: Sequence[HealthCheck],
    *,
    verbose: bool,
    exclude: Sequence[str] = (),
    slis: HealthSlis | None = None,
) -> HealthReport:
    """The answer of `/<endpoint>` over `checks`, in the healthz package's words; each check run
    is recorded in `slis` (an excluded one is not run, so not recorded)."""
    excluded = set(exclude)
    lines: list[str] = []
    failures: list[str] = []
    for health in checks:
        if health.name in excluded:
            excluded.discard(health.name)
            lines.append(f"[+]{health.name} excluded: ok\n")
            continue
        problem = run_check(health)
        if slis is not None:
            slis.observe(health.name, endpoint, problem is None)
        if problem is not None:
            lines.append(f"[-]{health.name} failed: reason withheld\n")
            failures.append(f"[-]{health.name} failed: {problem}")
        else:
            lines.append(f"[+]{health.name} ok\n")
    if excluded:
        lines.append(
            f"warn: some health checks cannot be excluded: no matches for {_quoted(sorted(excluded))}\n"
        )
    if failures:
        return HealthReport(500, f"{''.join(lines)}{endpoint} check failed\n", tuple(failures))
    if not verbose:
        return HealthReport(200, "ok", ())
    return HealthReport(200, f"{''.join(lines)}{endpoint} check passed\n", ())


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A `metav1.Status` failure, as the apiserver's filters write it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    }


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.Response(
        status=code,
        text=json.dumps(status_body(code, reason, message)),
        content_type="application/json",
        headers={"X-Content-Type-Options": "nosniff"},
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Guard:
    """Delegated authentication, then authorization, of every request to the secure port."""

    def __init__(self, authenticator: Authenticator, authorizer: Authorizer) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer

    async def check(self, request: web.Request) -> web.Response | None:
        """None when the request may go on, else the refusal to send."""
        try:
            user = await self.authenticator.authenticate(request.headers.get("Authorization"))
        except Unauthenticated:
            return _status(401, "Unauthorized", "Unauthorized")
        verb = request.method.lower()
        try:
            decision = await self.authorizer.authorize(user, verb, request.path)
        except AuthorizationFailed as err:
            return _status(500, "InternalError", f"Internal error occurred: {err}")
        if decision.allowed:
            return None
        message = f"forbidden: User {json.dumps(user.name)} cannot {verb} path {json.dumps(request.path)}"
        if decision.reason:
            message += f": {decision.reason}"
        return _status(403, "Forbidden", message)


class Endpoints:
    """The handlers, shared by the secure port and the plain-HTTP one."""

    def __init__(
        self,
        metrics: SchedulerMetrics,
        *,
        healthz: Sequence[HealthCheck] = (),
        readyz: Sequence[HealthCheck] = (),
        livez: Sequence[HealthCheck] | None = None,
        configz: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.metrics = metrics
        # as the healthz package: an endpoint with no checks has ping
        self.checks: dict[str, tuple[HealthCheck, ...]] = {
            "healthz": tuple(healthz) or (PING,),
            "livez": tuple(healthz if livez is None else livez) or (PING,),
            "readyz": tuple(readyz) or (PING,),
        }
        self._configz = configz
        self.slis = HealthSlis()
        # the last failures logged per endpoint: probes ask every few seconds, the log says it once
        self._logged: dict[str, tuple[str, ...]] = {}

    def application(self, guard: Guard | None = None) -> web.Application:
        @web.middleware
        async def filters(request: web.Request, handler: Handler) -> web.StreamResponse:
            refusal = await guard.check(request) if guard is not None else None
            try:
                response = refusal if refusal is not None else await handler(request)
            except web.HTTPException as answer:  # 404, 405: answers too
                answer.headers.setdefault("Cache-Control", CACHE_CONTROL)
                raise
            response.headers.setdefault("Cache-Control", CACHE_CONTROL)
            return response

        app = web.Application(middlewares=[filters])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/metrics/slis", self._slis)
        app.router.add_get("/configz", self._config)
        for endpoint, checks in self.checks.items():
            app.router.add_get(f"/{endpoint}", self._health_of(endpoint))
            for health in checks:
                app.router.add_get(f"/{endpoint}/{health.name}", self._one_check(health))
        return app

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": self.metrics.content_type})

    async def _slis(self, request: web.Request) -> web.Response:
        return web.Response(body=self.slis.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _config(self, request: web.Request) -> web.Response:
        if self._configz is None:
            raise web.HTTPNotFound()
        return web.Response(
            text=json.dumps({"componentconfig": dict(self._configz())}),
            content_type="application/json",
            headers={"X-Content-Type-Options": "nosniff"},
        )

    def _health_of(self, endpoint: str) -> Handler:
        checks = self.checks[endpoint]

        async def handle(request: web.Request) -> web.Response:
            report = health_report(
                endpoint,
                checks,
                verbose="verbose" in request.query,
                exclude=request.query.getall("exclude", []),
                slis=self.slis,
            )
            if report.failures != self._logged.get(endpoint, ()):
                self._logged[endpoint] = report.failures
                if report.failures:
                    log.info("%s check failed:\n%s", endpoint, "\n".join(report.failures))
            return web.Response(
                status=report.status,
                text=report.body,
                headers={"Content-Type": TEXT, "X-Content-Type-Options": "nosniff"},
            )

        return handle

    def _one_check(self, health: HealthCheck) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            problem = run_check(health)
            if problem is None:
                return web.Response(text="ok", headers={"Content-Type": TEXT})
            return web.Response(
                status=500,
                text=f"internal server error: {problem}\n",
                headers={"Content-Type": TEXT, "X-Content-Type-Options": "nosniff"},
            )

        return handle


class Listener:
    """One port serving an application, over TLS when given a context."""

    def __init__(
        self, app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._runner: web.AppRunner | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        addresses = self._runner.addresses
        if addresses:
            # port 0 asks the OS for a free port; report the one it gave
            self.port = int(addresses[0][1])
        log.info(
            "serving /metrics, /configz, /healthz, /livez and /readyz on %s://%s:%d",
            self.scheme,
            self.host,
            self.port,
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
