"""`koordpy run`: a KubeWorld over the scheduler, served as kube-scheduler serves (`/metrics`,
`/configz`, `/healthz`, `/livez`, `/readyz` on the secure port, see `koordpy.cluster.http`),
under leader election when asked, with the PodGroup and ClusterNetworkTopology status operators in
the same process and event loop.

Stops on SIGTERM or SIGINT (bindings in flight finish first, then the operators, then the lease is
handed back: exit 0) or when the lease is lost (nothing more is written: exit 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
from kubernetes_asyncio import client as k8s_client

from koordpy import __version__, logs
from koordpy.cluster.auth import (
    ALLOWED_CACHE_SECONDS,
    DEFAULT_ALWAYS_ALLOW_PATHS,
    DENIED_CACHE_SECONDS,
    TOKEN_CACHE_SECONDS,
    Authenticator,
    Authorizer,
    path_matcher,
)
from koordpy.cluster.http import PING, Endpoints, Guard, HealthCheck, Listener
from koordpy.cluster.leader import ElectionThread, LeaseSettings
from koordpy.cluster.serving import CertificateError, ServingCertificate
from koordpy.cluster.world import KubeWorld
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import RealClock
from koordpy.kubeapi.client import LEADER_ELECTION_USER_AGENT, TRANSPORT_ERRORS, ApiError, KubeApi
from koordpy.kubeapi.credentials import CredentialsError, load_configuration
from koordpy.kubeapi.informer import WATCH_IDLE_TIMEOUT, Backoff, watched
from koordpy.kubeapi.prefetch import FirstLists
from koordpy.kubeapi.ratelimit import client_rate_limiter
from koordpy.metrics import SchedulerMetrics
from koordpy.scheduler import Scheduler

if TYPE_CHECKING:
    from operators.facts import ClusterFacts

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_LEADERSHIP_LOST = 1
# credentials, the API server or the port: what start-up needs is not there
EXIT_STARTUP_FAILED = 1
CREDENTIALS_HINT = (
    "pass --kubeconfig a readable kubeconfig (or set clientConnection.kubeconfig), or run in a pod "
    "with a service account"
)

klog = logs.get(__name__)


class StartupError(Exception):
    """What keeps `koordpy run` from starting, said in one line with what to do about it."""

    def __init__(self, message: str, code: int = EXIT_STARTUP_FAILED) -> None:
        super().__init__(message)
        self.code = code


# seconds the garbage collector's start-up pause lasts at most, synced or not
START_UP_PAUSE_LIMIT = 60.0

# the first answer of the API server may be slow (one starting, or throttled): each try waits longer
VERSION_TIMEOUT_FIRST, VERSION_TIMEOUT_MAX = 5.0, 60.0


@dataclass(slots=True)
class ApiServerReach:
    """Whether the API server has answered yet: a /readyz check until it has."""

    problem: str | None = "the API server has not answered yet"

    def check(self) -> str | None:
        return self.problem


async def wait_for_api_server(
    api: KubeApi,
    reach: ApiServerReach,
    backoff: Backoff | None = None,
    first_timeout: float = VERSION_TIMEOUT_FIRST,
) -> None:
    """Return once the API server answers (`GET /version`), however long that takes: one that is
    unreachable, failing or slow is tried again with backoff (and reported by `reach`), as
    kube-scheduler's clients keep trying; raise StartupError at once for what waiting cannot mend,
    a refusal of the credentials or a certificate that is not trusted."""
    backoff = backoff or Backoff(initial=0.5, maximum=10.0)
    request_timeout = first_timeout
    where = f"the API server at {api.base}"
    tries = 0
    while True:
        tries += 1
        try:
            await api.request("GET", "/version", timeout=request_timeout)
            reach.problem = None
            return
        except ApiError as err:
            if err.status == 401:
                raise StartupError(
                    f"{where} refused the credentials ({err}); check the kubeconfig's user"
                ) from None
            if err.status < 500 and err.status != 429:
                reach.problem = None
                return
            why = str(err)
        except aiohttp.ClientConnectorCertificateError as err:
            raise StartupError(
                f"{where} presented a certificate that is not trusted ({err.certificate_error}); check "
                "the kubeconfig's certificate-authority"
            ) from None
        except ValueError:
            raise StartupError(f"{where} did not answer as a Kubernetes API server") from None
        except TRANSPORT_ERRORS as err:
            why = str(err) or type(err).__name__
            if isinstance(err, TimeoutError):
                why = f"no answer within {request_timeout:.0f}s"
                request_timeout = min(VERSION_TIMEOUT_MAX, 2 * request_timeout)
        reach.problem = f"cannot reach {where}: {why}"
        if tries == 1:
            klog.warning("Waiting for the API server", server=api.base, err=why)
        elif v2 := klog.v(2):
            v2.info("Waiting for the API server", server=api.base, err=why, tries=tries)
        await asyncio.sleep(backoff.next())


def default_identity() -> str:
    """`<hostname>_<uuid>`, as kube-scheduler names its leader-election holder."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(slots=True)
class RunOptions:
    config: SchedulerConfiguration
    kubeconfig: str | None = None
    # --master: the API server's address, in place of the kubeconfig's
    master: str | None = None
    context: str | None = None
    # client-go's token bucket for every API request (clientConnection.qps and burst)
    qps: float = 50.0
    burst: int = 100
    leader_elect: bool = False
    lease_name: str = "koordpy"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    bind_address: str = "0.0.0.0"
    secure_port: int = 10259
    # the secure port's certificate: these files, else one generated into cert_dir, else one
    # generated in memory (koordpy.cluster.serving)
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    cert_dir: str | None = None
    # paths anyone may get on the secure port without the API server being asked
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    # a plain-HTTP port without authentication, only when asked for (0: none)
    insecure_port: int = 0
    # the credentials the TokenReviews and SubjectAccessReviews are made with (kube's
    # --authentication-kubeconfig, --authorization-kubeconfig); None: the scheduler's own
    authentication_kubeconfig: str | None = None
    authorization_kubeconfig: str | None = None
    # how long review answers are kept (kube's webhook cache TTLs)
    token_cache_ttl: float = TOKEN_CACHE_SECONDS
    allowed_cache_ttl: float = ALLOWED_CACHE_SECONDS
    denied_cache_ttl: float = DENIED_CACHE_SECONDS
    # SIGTERM: bindings in flight, then queued writes get this long; kube-scheduler stops at once
    shutdown_timeout: float = 1.5
    identity: str = field(default_factory=default_identity)
    # the PodGroup and ClusterNetworkTopology status operators, in this process and event loop
    operators: bool = True
    # a watch silent this long is resumed; an informer unheard from longer fails /readyz
    watch_idle_timeout: float = WATCH_IDLE_TIMEOUT


class EmbeddedOperators:
    """The status operators beside the scheduler. They read pods and nodes from the world's own
    informers, and only the instance that schedules runs them (only it writes status)."""

    def __init__(
        self,
        options: RunOptions,
        world: KubeWorld,
        on_signal: Callable[[], object],
        fence: Callable[[], bool] | None = None,
    ) -> None:
        from operators.facts import ClusterFacts

        self._options = options
        self._on_signal = on_signal
        self._fence = fence
        # the operators' quota writes count in koordpy_api_writes_total, as the scheduler's do
        self._on_write = world.metrics.api_write
        self.facts: ClusterFacts = ClusterFacts()
        world.pod_watchers.append(self.facts.on_pod)
        world.node_watchers.append(self.facts.on_node)
        world.on_synced.append(self.facts.synced.set)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="operators")

    async def _run(self) -> None:
        from operators import run_operators

        try:
            await run_operators(
                self._options.kubeconfig,
                self._stop,
                context=self._options.context,
                master=self._options.master,
                facts=self.facts,
                # kopf takes the signal handlers at start-up; these go back in their place
                signal_handler=self._on_signal,
                fence=self._fence,
                on_write=self._on_write,
            )
        except Exception:  # the status operators failing must not stop the scheduling
            log.exception("the status operators stopped; the scheduler goes on without them")

    async def stop(self, timeout: float) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            self._task.cancel()


# the Lease client's connections: one request at a time, and one spare for a release at shutdown
LEASE_CONNECTIONS = 2


def _elector(api: KubeApi, options: RunOptions, metrics: SchedulerMetrics) -> ElectionThread | None:
    if not options.leader_elect:
        return None
    settings = LeaseSettings(
        name=options.lease_name,
        namespace=options.lease_namespace,
        identity=options.identity,
        lease_duration=options.lease_duration,
        renew_deadline=options.renew_deadline,
        retry_period=options.retry_period,
    )

    def lease_client() -> KubeApi:
        # the same credentials and the same limits as kube-scheduler's leader-election client, but
        # a token bucket of its own: the Lease never waits behind the scheduler's writes
        client = KubeApi(
            api.configuration, connections=LEASE_CONNECTIONS, user_agent=LEADER_ELECTION_USER_AGENT
        )
        client.rate_limiter = client_rate_limiter(options.qps, options.burst)
        client.observe_request = api.observe_request
        return client

    return ElectionThread(lease_client, settings, metrics)


def _health_checks(
    world: KubeWorld, elector: ElectionThread | None, stop: asyncio.Event, reach: ApiServerReach
) -> tuple[list[HealthCheck], list[HealthCheck]]:
    """The checks of /healthz (and /livez) and of /readyz, under kube-scheduler's names where it has
    them (leaderElection, shutdown, sched-handler-sync), and koordpy's own `scheduler`: the
    scheduling loop, its cycles and the cache are sound and no task of the world has stopped."""

    def scheduler() -> str | None:
        return "; ".join(world.health_problems()) or None

    def handlers_synced() -> str | None:
        missing = world.unsynced()
        return "informers not synced: " + ", ".join(missing) if missing else None

    def shutdown() -> str | None:
        return "process is shutting down" if stop.is_set() else None

    election: list[HealthCheck] = []
    if elector is not None:
        lost = elector.lost
        election.append(
            HealthCheck("leaderElection", lambda: "leader election lost" if lost.is_set() else None)
        )
    sound = HealthCheck("scheduler", scheduler)
    healthz = [PING, *election, sound]
    readyz = [
        *election,
        HealthCheck("shutdown", shutdown),
        HealthCheck("api-server", reach.check),
        HealthCheck("sched-handler-sync", handlers_synced),
        HealthCheck("informer-watch", lambda: "; ".join(world.blind_informers()) or None),
        sound,
    ]
    return healthz, readyz


# kube's delegated authentication and authorization clients: a budget of their own, so that
# requests to the secure port never take the scheduler's
REVIEW_QPS = 200.0
REVIEW_BURST = 400
REVIEW_CONNECTIONS = 8


async def review_credentials(
    options: RunOptions, api: KubeApi
) -> tuple[k8s_client.Configuration, k8s_client.Configuration]:
    """The credentials of the token reviews and of the access reviews: each from its kubeconfig
    flag when given (read as kube's delegated clients read it: its current context, neither
    --master nor --context applied), else the scheduler's own. Raises StartupError for a file that
    cannot be read, as kube-scheduler stops on it."""
    loaded: dict[str, k8s_client.Configuration] = {}
    chosen = []
    for flag, path in (
        ("--authentication-kubeconfig", options.authentication_kubeconfig),
        ("--authorization-kubeconfig", options.authorization_kubeconfig),
    ):
        if not path:
            chosen.append(api.configuration)
            continue
        if path not in loaded:
            try:
                loaded[path] = await load_configuration(path)
            except CredentialsError as err:
                raise StartupError(
                    f"{flag}: cannot load the credentials of the delegated reviews: {err}; pass a "
                    "readable kubeconfig, or leave the flag out to make the reviews with the "
                    "scheduler's own credentials"
                ) from None
        chosen.append(loaded[path])
    return chosen[0], chosen[1]


@dataclass(slots=True)
class Serving:
    """The secure port (unless --secure-port=0) and the plain one (when --insecure-port asks), with
    the certificate's reloads and the clients the reviews are made with."""

    listeners: list[Listener] = field(default_factory=list)
    certificate: ServingCertificate | None = None
    reviews: list[KubeApi] = field(default_factory=list)
    _reloads: asyncio.Task[None] | None = None

    def _review_client(self, configuration: k8s_client.Configuration) -> KubeApi:
        for client in self.reviews:
            if client.configuration is configuration:
                return client
        client = KubeApi(configuration, connections=REVIEW_CONNECTIONS)
        client.rate_limiter = client_rate_limiter(REVIEW_QPS, REVIEW_BURST)
        self.reviews.append(client)
        return client

    @staticmethod
    def build(
        options: RunOptions,
        api: KubeApi,
        endpoints: Endpoints,
        credentials: tuple[k8s_client.Configuration, k8s_client.Configuration] | None = None,
    ) -> Serving:
        """Raises StartupError for a certificate that cannot be had or paths that cannot be read.
        `credentials`: those of the token and the access reviews (default: `api`'s)."""
        serving = Serving()
        if options.secure_port:
            try:
                serving.certificate = ServingCertificate.choose(
                    options.tls_cert_file,
                    options.tls_private_key_file,
                    options.cert_dir,
                    options.bind_address,
                )
                path_matcher(options.always_allow_paths)
            except CertificateError as err:
                raise StartupError(str(err)) from None
            except ValueError as err:
                raise StartupError(f"--authorization-always-allow-paths: {err}", code=2) from None
            token_credentials, access_credentials = credentials or (api.configuration, api.configuration)
            authenticator = Authenticator(
                serving._review_client(token_credentials), cache_ttl=options.token_cache_ttl
            )
            authorizer = Authorizer(
                serving._review_client(access_credentials),
                always_allow_paths=options.always_allow_paths,
                allowed_ttl=options.allowed_cache_ttl,
                denied_ttl=options.denied_cache_ttl,
            )
            secure = endpoints.application(Guard(authenticator, authorizer))
            context = serving.certificate.context
            serving.listeners.append(Listener(secure, options.bind_address, options.secure_port, context))
        if options.insecure_port:
            plain = endpoints.application()
            serving.listeners.append(Listener(plain, options.bind_address, options.insecure_port))
        return serving

    async def start(self) -> None:
        for listener in self.listeners:
            try:
                await listener.start()
            except OSError as err:
                flag = "--secure-port" if listener.ssl_context is not None else "--insecure-port"
                raise StartupError(
                    f"cannot serve on {listener.host}:{listener.port}: {err.strerror or err}; "
                    f"choose another {flag} or --bind-address, or stop what holds that port"
                ) from None
        if self.certificate is not None:
            self._reloads = asyncio.create_task(self.certificate.watch(), name="serving certificate")

    async def stop(self) -> None:
        if self._reloads is not None:
            self._reloads.cancel()
        for listener in self.listeners:
            await listener.stop()
        for client in self.reviews:
            await client.close()


def end_start_up_pause() -> None:
    """The cyclic garbage collector is paused while `koordpy run` starts (koordpy.cli): once the
    scheduler has synced, what start-up built (modules, the cluster's objects) is set aside from
    its walks for good (gc.freeze: those objects are still freed when nothing refers to them) and
    it runs again as usual."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


async def run(options: RunOptions, early: FirstLists | None = None) -> int:
    """`koordpy run`: schedule until SIGTERM (exit 0) or until the lease is lost (exit 1);
    `early`: the informers' first lists, already asked for."""
    from koordpy.plugins import registry

    metrics = SchedulerMetrics(process=True)
    scheduler = Scheduler(options.config, registry(), RealClock(), metrics)
    metrics.track_scheduler(scheduler)
    try:
        api = KubeApi(await load_configuration(options.kubeconfig, options.context, options.master))
    except CredentialsError as err:
        raise StartupError(f"cannot load the cluster credentials: {err}; {CREDENTIALS_HINT}") from None
    api.rate_limiter = client_rate_limiter(options.qps, options.burst)
    api.observe_request = metrics.api_request
    elector = _elector(api, options, metrics)
    if elector is not None:
        # every write is asked, immediately before it is sent, whether this instance still leads
        api.fence = elector.is_leader
    resources = watched(all_pods=options.operators)
    world = KubeWorld(
        api,
        scheduler,
        metrics,
        options.identity,
        leading=elector.is_leader if elector is not None else None,
        resources=resources,
        watch_idle_timeout=options.watch_idle_timeout,
    )
    world.on_synced.append(end_start_up_pause)
    if early is not None:
        early.report_requests(api.observe_request)
        for resource, informer in world.informers.items():
            informer.prefetched = early.take(resource, informer.page_size)
    stop = asyncio.Event()
    operators = EmbeddedOperators(options, world, stop.set, api.fence) if options.operators else None
    if elector is not None:
        elector.on_started.append(world.wake)
        if operators is not None:
            elector.on_started.append(operators.start)
    reach = ApiServerReach()
    healthz, readyz = _health_checks(world, elector, stop, reach)
    # the configuration in use (flags applied) does not change while running
    configz = options.config.model_dump(mode="json", exclude_none=True)
    endpoints = Endpoints(metrics, healthz=healthz, readyz=readyz, configz=lambda: configz)
    serving = Serving()
    loop = asyncio.get_running_loop()
    # an API server that never lets the informers sync does not keep the collector paused for good
    loop.call_later(START_UP_PAUSE_LIMIT, end_start_up_pause)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        credentials = await review_credentials(options, api) if options.secure_port else None
        serving = Serving.build(options, api, endpoints, credentials)
        await serving.start()
        if not await _unless_stopped(wait_for_api_server(api, reach), stop):
            return EXIT_OK
        # after the checks that can stop start-up, so that a failed start says one thing only
        klog.info(
            "Starting koordpy",
            version=__version__,
            identity=options.identity,
            profiles=list(scheduler.profiles),
        )
        await world.start()
        if elector is None and operators is not None:
            operators.start()
        return await _serve(options, world, elector, operators, stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await serving.stop()
        await api.close()


async def _unless_stopped(work: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run `work` until it ends (True) or until `stop` is set first (False)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


# after the lease is lost the operators' writes are fenced off: they are given a moment, not the
# shutdown timeout
LOST_OPERATORS_TIMEOUT = 1.0


def _say_cancelled(cancelled: dict[str, list[str]], fenced: Mapping[str, int]) -> None:
    """What leadership's loss cancelled, and the writes the fence refused before it was noticed:
    counts always, the objects at -v=2."""
    klog.error(
        "Leadership lost: cancelled queued writes",
        **{lane.replace(" ", "_"): len(items) for lane, items in cancelled.items()},
        refused_by_fence=sum(fenced.values()),
    )
    if v2 := klog.v(2):
        for lane, items in cancelled.items():
            if items:
                v2.info("Cancelled on leadership loss", lane=lane, objects=items)


async def _serve(
    options: RunOptions,
    world: KubeWorld,
    elector: ElectionThread | None,
    operators: EmbeddedOperators | None,
    stop: asyncio.Event,
) -> int:
    stopped = asyncio.create_task(stop.wait())
    waiters: list[asyncio.Task[Any]] = [stopped]
    if elector is not None:
        waiters.append(asyncio.create_task(elector.run()))
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    if not stopped.done():
        # the election ended: another instance may be the leader already, so not one more write
        # from here (kube-scheduler exits the same way); the fence already refuses every write
        _say_cancelled(world.abandon(), world.api.fenced)
        if operators is not None:
            await operators.stop(LOST_OPERATORS_TIMEOUT)
        for waiter in waiters:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is not None:
                log.error("leader election failed", exc_info=waiter.exception())
            waiter.cancel()
        klog.error("Leaderelection lost")
        return EXIT_LEADERSHIP_LOST
    log.info("shutting down")
    # scheduling first (nothing half-bound), then the operators, then the lease
    await world.shutdown(options.shutdown_timeout)
    if operators is not None:
        await operators.stop(options.shutdown_timeout)
    for waiter in waiters:
        waiter.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    if elector is not None:
        await elector.release()
    return EXIT_OK
