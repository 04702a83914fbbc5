"""koordpy's operators, built on kopf: PodGroup status (`operators.podgroup`), the
ClusterNetworkTopology's `status.detailStatus` (`operators.topology`) and ElasticQuota status
(`operators.quota`).

kopf watches only the custom resources the operators own (PodGroups and ElasticQuotas of both API
groups and the ClusterNetworkTopology). What the status needs of pods and nodes comes from an
`operators.facts.ClusterFacts`: fed by the embedding program's own informers when it passes one
(`koordpy run`), else by one pod and one node informer that `run_operators` starts itself.

They run embedded in another program's event loop (`koordpy run` awaits `run_operators`) or on
their own (`koordpy operators`, through `main`). Either way the program that runs them owns the
process: kopf gets a stop flag instead of the signals, and its shutdown touches only its own tasks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import kopf
from kubernetes_asyncio import client

from koordpy.kubeapi import CredentialsError, Informer, KubeApi, load_configuration

# every pod, finished ones included: a PodGroup counts its succeeded and failed members
from koordpy.kubeapi.informer import ALL_PODS, NODES
from operators import podgroup, quota, topology
from operators.facts import ClusterFacts
from operators.podgroup import PodGroupController
from operators.quota import QuotaController
from operators.topology import TopologyController

__all__ = [
    "ClusterFacts",
    "connection_info",
    "feed_facts",
    "main",
    "operator_settings",
    "register",
    "run_operators",
]

logger = logging.getLogger("koordpy.operators")


def register(registry: kopf.OperatorRegistry) -> None:
    """Every handler of the operators. The memo given to kopf must hold a PodGroupController, a
    TopologyController and a QuotaController under `podgroup.MEMO_KEY`, `topology.MEMO_KEY` and
    `quota.MEMO_KEY` (run_operators does this)."""
    podgroup.register(registry)
    topology.register(registry)
    quota.register(registry)


async def connection_info(configuration: client.Configuration) -> kopf.ConnectionInfo:
    """kopf's view of the credentials `koordpy.kubeapi.load_configuration` chose (the ones the
    operators' own requests use), with the token refreshed (service account tokens and exec plugins
    rotate theirs)."""
    authorization = await configuration.get_api_key_with_prefix("BearerToken")
    token = username = password = None
    scheme = None
    if authorization:
        scheme, _, value = str(authorization).partition(" ")
        if scheme.lower() == "basic":
            username, _, password = base64.b64decode(value).decode().partition(":")
            scheme = None
        else:
            token = value
    elif configuration.username:
        username, password = configuration.username, configuration.password
    return kopf.ConnectionInfo(
        server=str(configuration.host),
        ca_path=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl,
        scheme=scheme if token else None,
        token=token,
        username=username,
        password=password,
        certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None,
        proxy_url=configuration.proxy or None,
    )


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # one instance per scheduler; `koordpy run` elects its leader with its own Lease
    settings.peering.standalone = True
    # the handlers would otherwise post a Kubernetes Event for every log line on the PodGroups
    settings.posting.enabled = False
    # kopf's last-resort SIGKILL would take the embedding scheduler down with it
    settings.process.ultimate_exiting_timeout = None
    return settings


class _EventHandlerSuccessFilter(logging.Filter):
    """Drops kopf's INFO line for every handled event: the handlers here run on every change of
    every PodGroup (each status write is one), and would flood the log with "Handler '...'
    succeeded."."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and record.getMessage().endswith(" succeeded."))


def _quiet_event_handler_logs() -> None:
    objects_logger = logging.getLogger("kopf.objects")
    if not any(isinstance(f, _EventHandlerSuccessFilter) for f in objects_logger.filters):
        objects_logger.addFilter(_EventHandlerSuccessFilter())


@contextlib.contextmanager
def _signal_handlers_kept(handler: Callable[[], object] | None = None) -> Iterator[None]:
    """Undo the SIGINT/SIGTERM handlers kopf installs on startup: they would stop kopf alone and
    take the signals from the program that embeds it. `handler` is that program's own handler, put
    back in their place; without it the loop's previous handlers are looked up (only asyncio's own
    loop lets them be read)."""
    loop = asyncio.get_running_loop()
    watched = (signal.SIGINT, signal.SIGTERM)
    loop_handlers = dict(getattr(loop, "_signal_handlers", None) or {})
    python_handlers = {sig: signal.getsignal(sig) for sig in watched}
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig in watched:
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
                handle = loop_handlers.get(sig)
                callback = getattr(handle, "_callback", None)
                if handler is not None:
                    loop.add_signal_handler(sig, handler)
                elif callback is not None:
                    loop.add_signal_handler(sig, callback, *getattr(handle, "_args", ()))
                elif python_handlers[sig] is not None:
                    signal.signal(sig, python_handlers[sig])


async def _stop(tasks: set[asyncio.Task[Any]], timeout: float, what: str) -> None:
    pending = {t for t in tasks if not t.done()}
    for task in pending:
        task.cancel()
    if pending:
        _, stuck = await asyncio.wait(pending, timeout=timeout)
        if stuck:
            logger.warning(
                "%d %s task(s) did not stop within %.0fs: %s",
                len(stuck),
                what,
                timeout,
                ", ".join(sorted(t.get_name() for t in stuck)),
            )
    for task in tasks:
        if task.done() and not task.cancelled():
            # retrieved here so that asyncio does not report it as never retrieved
            task.exception()


async def feed_facts(api: KubeApi, facts: ClusterFacts) -> None:
    """Feed `facts` from one pod and one node informer until cancelled; set `facts.synced` once
    both have listed. Raises when an informer stops by itself."""
    informers = [Informer(api, ALL_PODS, facts.on_pod), Informer(api, NODES, facts.on_node)]
    async with asyncio.TaskGroup() as tasks:
        for informer in informers:
            tasks.create_task(informer.run(), name=f"operators {informer.resource.plural} informer")
        for informer in informers:
            await informer.synced.wait()
        facts.synced.set()
        logger.info("operators: pods and nodes listed")


async def _all_set(*events: asyncio.Event) -> None:
    for event in events:
        await event.wait()


async def _serve(
    stop: asyncio.Event,
    tasks: set[asyncio.Task[Any]],
    started_when: list[asyncio.Event],
    ready: asyncio.Event | None,
) -> None:
    stopping = asyncio.create_task(stop.wait(), name="operators stop")
    started = asyncio.create_task(_all_set(*started_when), name="operators ready")
    waiting: set[asyncio.Task[Any]] = {*tasks, stopping, started}
    try:
        while True:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if started in done:
                waiting.discard(started)
                logger.info(
                    "operators started: PodGroup status, ClusterNetworkTopology status, ElasticQuota status"
                )
                if ready is not None:
                    ready.set()
            if stopping in done:
                return
            ended = done & tasks
            if ended:
                task = ended.pop()
                error = None if task.cancelled() else task.exception()
                raise RuntimeError(
                    f"the operators stopped unexpectedly: {task.get_name()} ended"
                    + (f": {error!r}" if error else "")
                ) from error
    finally:
        for waiter in (stopping, started):
            waiter.cancel()


async def run_operators(
    kubeconfig: str | None,
    stop: asyncio.Event,
    ready: asyncio.Event | None = None,
    *,
    context: str | None = None,
    facts: ClusterFacts | None = None,
    shutdown_timeout: float = 10.0,
    signal_handler: Callable[[], object] | None = None,
    master: str | None = None,
    fence: Callable[[], bool] | None = None,
    on_write: Callable[[str, bool], None] | None = None,
) -> None:
    """Run the operators on the running event loop until `stop` is set.

    `on_write`, when given, hears of each ElasticQuota status, object and Event write with its
    operation and whether it was taken (`koordpy run` counts them in koordpy_api_writes_total).

    `fence`, when given, is asked before each status write is sent (`KubeApi.fence`): the
    scheduler's leadership, so that a deposed instance writes no status.

    `signal_handler` is the program's own handler of SIGINT and SIGTERM: kopf installs its own at
    startup, and this one is put back in their place.

    With `facts`, the pods and nodes come from it alone: the caller feeds it (`on_pod`, `on_node`
    for every informer event, finished pods included) and sets its `synced` once its initial lists
    are delivered; no status is computed before. Without, one pod and one node informer of the
    operators' own feed a ClusterFacts of theirs.

    `ready` is set once kopf has started (its handlers then receive the PodGroups and the
    ClusterNetworkTopology) and the facts have synced. Returns after kopf, the informers and the
    status workers have stopped; raises when they stop by themselves (a failed login, say). Never
    leaves signal handlers of its own and never cancels tasks it did not start."""
    configuration = await load_configuration(kubeconfig, context, master)
    _quiet_event_handler_logs()
    registry = kopf.OperatorRegistry()
    register(registry)

    @kopf.on.login(id="koordpy-login", registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return await connection_info(configuration)

    api = KubeApi(configuration)
    api.fence = fence
    try:
        await _run_with(api, registry, stop, ready, facts, shutdown_timeout, signal_handler, on_write)
    finally:
        await api.close()


async def _run_with(
    api: KubeApi,
    registry: kopf.OperatorRegistry,
    stop: asyncio.Event,
    ready: asyncio.Event | None,
    given_facts: ClusterFacts | None,
    shutdown_timeout: float,
    signal_handler: Callable[[], object] | None,
    on_write: Callable[[str, bool], None] | None = None,
) -> None:
    facts = given_facts if given_facts is not None else ClusterFacts()
    podgroups = PodGroupController(api, facts)
    topologies = TopologyController(api, facts)
    quotas = QuotaController(api, facts, on_write=on_write)
    memo = kopf.Memo({podgroup.MEMO_KEY: podgroups, topology.MEMO_KEY: topologies, quota.MEMO_KEY: quotas})
    kopf_stop = asyncio.Event()
    kopf_ready = asyncio.Event()
    with _signal_handlers_kept(signal_handler):
        root_tasks = set(
            await kopf.spawn_tasks(
                registry=registry,
                settings=operator_settings(),
                standalone=True,
                clusterwide=True,
                stop_flag=kopf_stop,
                ready_flag=kopf_ready,
                memo=memo,
            )
        )
    workers = {
        asyncio.create_task(podgroups.run(), name="podgroup status"),
        asyncio.create_task(topologies.run(), name="topology status"),
        asyncio.create_task(quotas.run(), name="elasticquota status"),
    }
    feeders: set[asyncio.Task[Any]] = set()
    if given_facts is None:
        feeders.add(asyncio.create_task(feed_facts(api, facts), name="operators informers"))
    try:
        await _serve(stop, root_tasks | workers | feeders, [kopf_ready, facts.synced], ready)
    finally:
        kopf_stop.set()
        # kopf's root tasks wind down on cancellation: streams close, then its cleanup runs
        await _stop(root_tasks, shutdown_timeout, "kopf")
        await _stop(workers, shutdown_timeout, "status")
        await _stop(feeders, shutdown_timeout, "informer")
        logger.info("operators stopped")


def main(kubeconfig: str | None, context: str | None = None) -> int:
    """`koordpy operators`: run until SIGINT or SIGTERM."""

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_operators(kubeconfig, stop, context=context, signal_handler=stop.set)

    try:
        asyncio.run(serve())
    except CredentialsError as err:
        print(f"koordpy: cannot load the cluster configuration: {err}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as err:
        logger.error("%s", err)
        return 1
    return 0
