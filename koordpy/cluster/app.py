"""`koordpy run`: a KubeWorld over the scheduler, served with `/metrics`, `/healthz` and `/readyz`,
under leader election when asked, with the PodGroup and ClusterNetworkTopology status operators in
the same process and event loop.

Stops on SIGTERM or SIGINT (bindings in flight finish first, then the operators, then the lease is
handed back: exit 0) or when the lease is lost (nothing more is written: exit 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from koordpy.cluster.http import HealthServer
from koordpy.cluster.leader import LeaderElector, LeaseSettings
from koordpy.cluster.world import KubeWorld
from koordpy.config.models import SchedulerConfiguration
from koordpy.framework.clock import RealClock
from koordpy.kubeapi.client import KubeApi
from koordpy.kubeapi.credentials import CredentialsError
from koordpy.kubeapi.informer import ALL_PODS, PODS, WATCHED
from koordpy.metrics import SchedulerMetrics
from koordpy.scheduler import Scheduler

if TYPE_CHECKING:
    from operators.facts import ClusterFacts

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_LEADERSHIP_LOST = 1
# as `koordpy operators` answers credentials it cannot load
EXIT_NO_CREDENTIALS = 2


def default_identity() -> str:
    """`<hostname>_<uuid>`, as kube-scheduler names its leader-election holder."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(slots=True)
class RunOptions:
    config: SchedulerConfiguration
    kubeconfig: str | None = None
    context: str | None = None
    leader_elect: bool = False
    lease_name: str = "koordpy"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    bind_address: str = "0.0.0.0"
    metrics_port: int = 10259
    shutdown_timeout: float = 15.0
    identity: str = field(default_factory=default_identity)
    # the PodGroup and ClusterNetworkTopology status operators, in this process and event loop
    operators: bool = True


class EmbeddedOperators:
    """The status operators beside the scheduler. They read pods and nodes from the world's own
    informers, and only the instance that schedules runs them (only it writes status)."""

    def __init__(self, options: RunOptions, world: KubeWorld, on_signal: Callable[[], object]) -> None:
        from operators.facts import ClusterFacts

        self._options = options
        self._on_signal = on_signal
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
                facts=self.facts,
                # kopf takes the signal handlers at start-up; these go back in their place
                signal_handler=self._on_signal,
            )
        except Exception:  # the status operators failing must not stop the scheduling
            log.exception("the status operators stopped; the scheduler goes on without them")

    async def stop(self, timeout: float) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            self._task.cancel()


def _elector(api: KubeApi, options: RunOptions, metrics: SchedulerMetrics) -> LeaderElector | None:
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
    return LeaderElector(api, settings, metrics)


def _health_server(
    options: RunOptions, metrics: SchedulerMetrics, world: KubeWorld, elector: LeaderElector | None
) -> HealthServer:
    def healthy() -> tuple[bool, str]:
        problems = world.health_problems()
        if elector is not None and elector.lost.is_set():
            problems.insert(0, "leader election lost")
        return not problems, "; ".join(problems)

    def ready() -> tuple[bool, str]:
        missing = world.unsynced()
        if missing:
            return False, "informers not synced: " + ", ".join(missing)
        return healthy()

    return HealthServer(metrics, ready, healthy, options.bind_address, options.metrics_port)


async def run(options: RunOptions) -> int:
    """`koordpy run`: schedule until SIGTERM (exit 0) or until the lease is lost (exit 1)."""
    from koordpy.plugins import registry

    metrics = SchedulerMetrics()
    scheduler = Scheduler(options.config, registry(), RealClock(), metrics)
    metrics.track_pending(scheduler.pending_counts)
    metrics.track_gauges(scheduler.scrape_gauges)
    try:
        api = await KubeApi.connect(options.kubeconfig, options.context)
    except CredentialsError as err:
        log.error("cannot load the cluster credentials: %s", err)
        return EXIT_NO_CREDENTIALS
    elector = _elector(api, options, metrics)
    # the embedded operators count finished members too, so the pods are watched whole; the
    # scheduler still hears of a finished pod as a deletion
    resources = tuple(ALL_PODS if r is PODS and options.operators else r for r in WATCHED)
    world = KubeWorld(
        api,
        scheduler,
        metrics,
        options.identity,
        leading=elector.is_leader if elector is not None else None,
        resources=resources,
    )
    stop = asyncio.Event()
    operators = EmbeddedOperators(options, world, stop.set) if options.operators else None
    if elector is not None:
        elector.on_started.append(world.wake)
        if operators is not None:
            elector.on_started.append(operators.start)
    server = _health_server(options, metrics, world, elector)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("koordpy %s starting; profiles: %s", options.identity, ", ".join(scheduler.profiles))
    try:
        await server.start()
        await world.start()
        if elector is None and operators is not None:
            operators.start()
        return await _serve(options, world, elector, operators, stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await server.stop()
        await api.close()


async def _serve(
    options: RunOptions,
    world: KubeWorld,
    elector: LeaderElector | None,
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
        # from here (kube-scheduler exits the same way)
        world.halt()
        if operators is not None:
            await operators.stop(options.shutdown_timeout)
        for waiter in waiters:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is not None:
                log.error("leader election failed", exc_info=waiter.exception())
            waiter.cancel()
        log.error("leader election lost; exiting")
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
