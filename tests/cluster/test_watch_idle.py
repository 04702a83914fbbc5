"""Watches cannot go silent: a watch that delivers nothing (no event, no bookmark) for the idle bound
is given up and resumed from the last resourceVersion, each restart is counted by its cause, and
/readyz names an informer that has not listed or has not been heard from for longer than the bound
(and passes again once its watch is answered). The silence is made by the fake apiserver (a watch
nothing is pushed into) or by a loopback TCP proxy that holds every byte (tests.support.tcpproxy)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client as k8s_client

from koordpy.cli import build_parser
from koordpy.cluster import flags
from koordpy.kubeapi.client import KubeApi
from koordpy.kubeapi.informer import (
    CLOSED,
    ERROR,
    EXPIRED,
    IDLE,
    STORAGE,
    WATCH_IDLE_TIMEOUT,
    Informer,
    Resource,
)
from tests.cluster.world_support import ONE_NODE, Start, world_starter
from tests.support.fakeapi import FakeApiServer, Reply, WatchStream, until
from tests.support.tcpproxy import TcpProxy

PODS = Resource("Pod", "v1", "pods")
# short enough for a quick test, long enough that a busy test machine does not trip it by itself
BOUND = 0.5


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": rv}}


class Recorder:
    """An InformerObserver that keeps the restarts' reasons, and a handler that keeps the names."""

    def __init__(self) -> None:
        self.restarts: list[str] = []
        self.names: list[str] = []

    def informer_event(self, resource: str, event_type: str) -> None:
        pass

    def watch_restart(self, resource: str, reason: str) -> None:
        self.restarts.append(reason)

    def handle(self, action: str, o: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.names.append(o["metadata"]["name"])


@dataclass
class Running:
    informer: Informer
    seen: Recorder
    stream: WatchStream


@pytest_asyncio.fixture(loop_scope="function")
async def start(fake: FakeApiServer) -> AsyncIterator[Callable[..., Running]]:
    tasks: list[asyncio.Task[None]] = []

    def starter(api: KubeApi | None = None, **kw: Any) -> Running:
        seen = Recorder()
        informer = Informer(api or fake.client(), PODS, seen.handle, seen, **kw)
        tasks.append(asyncio.create_task(informer.run()))
        return Running(informer, seen, fake.watch(PODS.path))

    yield starter
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="function")
async def proxy(fake: FakeApiServer) -> AsyncIterator[TcpProxy]:
    port = int(fake.url.rsplit(":", 1)[1])
    async with TcpProxy("127.0.0.1", port) as tcp:
        yield tcp


@pytest_asyncio.fixture(loop_scope="function")
async def through(proxy: TcpProxy) -> AsyncIterator[KubeApi]:
    """A client of the fake apiserver whose every connection goes through the proxy."""
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{proxy.port}"
    api = KubeApi(configuration)
    yield api
    await api.close()


# ---------------------------------------------------------------------------------------------- causes
@dataclass(frozen=True)
class Ending:
    what: str
    act: Callable[[WatchStream], None]
    reason: str
    relisted: bool
    resumed_from: str


ENDINGS = [
    Ending("the server closes the watch", lambda s: s.end(), CLOSED, False, "5"),
    Ending("410 Gone in an ERROR event", lambda s: s.gone(), EXPIRED, True, "30"),
    Ending("another ERROR event", lambda s: s.error(500, "InternalError", "etcd"), ERROR, False, "5"),
    Ending("nothing arrives", lambda s: None, IDLE, False, "5"),
    # the bookmark moved the resourceVersion on, and the silence came after it
    Ending("a bookmark, then nothing", lambda s: s.bookmark("7"), IDLE, False, "7"),
    Ending("an event, then nothing", lambda s: s.added(obj("b", "8")), IDLE, False, "8"),
]


@pytest.mark.parametrize("ending", ENDINGS, ids=[e.what for e in ENDINGS])
async def test_each_way_a_watch_ends_is_counted_by_its_cause_and_resumed(
    fake: FakeApiServer, start: Callable[..., Running], ending: Ending
) -> None:
    fake.on_list(PODS.path, [obj("a", "3")], "5", Reply.items([obj("a", "3")], "30"))
    run = start(watch_idle_timeout=BOUND)
    await run.stream.watching(1)
    ending.act(run.stream)
    second = await run.stream.watching(2)
    # one restart per watch ended; a quiet second watch may have gone idle too by now
    assert run.seen.restarts[0] == ending.reason
    assert len(fake.matching("GET", PODS.path)) == (2 if ending.relisted else 1)
    assert second.query["resourceVersion"] == ending.resumed_from
    assert second.query["allowWatchBookmarks"] == "true"


async def test_a_watch_given_up_as_silent_resumes_and_hears_what_follows(
    fake: FakeApiServer, start: Callable[..., Running]
) -> None:
    fake.on_list(PODS.path, [], "5")
    run = start(watch_idle_timeout=BOUND)
    first = await run.stream.watching(1)
    await run.stream.watching(2, timeout=BOUND * 10)
    # the silent watch's connection was closed, not left open beside the new one
    await until(lambda: first.answered is not None, what="the first watch to be closed")
    run.stream.added(obj("a", "6"))
    await until(lambda: run.seen.names == ["a"], what="the event of the resumed watch")
    assert run.seen.restarts[0] == IDLE


async def test_events_and_bookmarks_keep_a_watch_from_going_idle(
    fake: FakeApiServer, start: Callable[..., Running]
) -> None:
    fake.on_list(PODS.path, [], "5")
    run = start(watch_idle_timeout=BOUND)
    await run.stream.watching(1)
    # four bounds' worth of traffic, never a bound apart
    for i in range(20):
        if i % 2:
            run.stream.bookmark(str(10 + i))
        else:
            run.stream.added(obj(f"p{i}", str(10 + i)))
        await asyncio.sleep(BOUND / 5)
    assert run.seen.restarts == []
    assert len(run.stream.requests) == 1


async def test_the_idle_bound_is_the_watch_connections_read_timeout_and_must_be_positive(
    fake: FakeApiServer,
) -> None:
    informer = Informer(fake.client(), PODS, Recorder().handle)
    assert informer.watch_idle_timeout == WATCH_IDLE_TIMEOUT <= 90.0
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="greater than zero"):
            Informer(fake.client(), PODS, Recorder().handle, watch_idle_timeout=bad)


# ---------------------------------------------------------------------------------------------- silence
async def test_silence_is_measured_from_the_last_thing_heard(
    fake: FakeApiServer, start: Callable[..., Running]
) -> None:
    now = [1000.0]
    fake.on_list(PODS.path, [], "5")
    # a bound far beyond the test: only the clock given to the informer moves
    run = start(watch_idle_timeout=60.0, clock=lambda: now[0])
    assert run.informer.silent_for() is None
    await run.stream.watching(1)
    await until(lambda: run.informer.silent_for() == 0.0, what="the list heard")
    now[0] += 95.0
    assert run.informer.silent_for() == 95.0
    pushes: list[Callable[[], None]] = [
        lambda: run.stream.bookmark("9"),
        lambda: run.stream.added(obj("a", "10")),
    ]
    for push in pushes:
        now[0] += 30.0
        push()
        await until(lambda: run.informer.silent_for() == 0.0, what="a bookmark or an event heard")


async def test_a_frozen_watch_is_resumed_on_a_new_connection(
    fake: FakeApiServer, start: Callable[..., Running], proxy: TcpProxy, through: KubeApi
) -> None:
    fake.on_list(PODS.path, [], "5")
    run = start(through, watch_idle_timeout=BOUND)
    first = await run.stream.watching(1)
    await until(lambda: run.informer.silent_for() is not None, what="the list heard")
    # the watch's connection stops carrying anything, as behind a NAT that forgot it; new
    # connections still pass
    assert proxy.freeze() >= 1
    second = await run.stream.watching(2, timeout=BOUND * 10)
    assert second.query["resourceVersion"] == "5"
    assert run.seen.restarts[0] == IDLE
    # the fake serves one queue of events to whichever watch is connected: the given-up watch must
    # be gone first, and its close is held by the frozen link as a dead link would hold it
    proxy.thaw()
    await until(lambda: first.answered is not None, what="the given-up watch closed")
    run.stream.added(obj("a", "6"))
    await until(lambda: run.seen.names == ["a"], what="the event of the resumed watch")


# ---------------------------------------------------------------------------------------------- readiness
async def test_readiness_names_an_informer_not_listed_yet(start_world: Start, fake: FakeApiServer) -> None:
    held = asyncio.Event()
    cluster = await start_world(nodes=Reply(200, ONE_NODE.body, held), wait_synced=False)
    await until(lambda: cluster.world.blind_informers() == ["nodes: not synced"], what="nodes not synced")
    held.set()
    await asyncio.wait_for(cluster.world.wait_synced(), 5.0)
    assert cluster.world.blind_informers() == []


async def test_readiness_fails_while_watches_are_cut_off_and_passes_once_they_are_answered(
    start_world: Start, proxy: TcpProxy, through: KubeApi
) -> None:
    cluster = await start_world(api=through, watch_idle_timeout=BOUND)
    world = cluster.world
    assert world.blind_informers() == []
    # nothing passes, not even new connections: every watch given up stays unanswered
    proxy.freeze(new_connections=True)

    def pods_blind() -> bool:
        return any(p.startswith("pods: watch silent for ") for p in world.blind_informers())

    await until(pods_blind, timeout=BOUND * 10, what="pods reported silent")
    # the custom resources are not served: nothing to hear from, so never silent
    served = {"namespaces", "nodes", "poddisruptionbudgets.policy", "pods", *(r.label for r in STORAGE)}
    assert {p.split(":")[0] for p in world.blind_informers()} <= served, world.blind_informers()
    # liveness is not readiness: the scheduler itself is sound
    assert world.health_problems() == []
    proxy.thaw()
    await until(lambda: world.blind_informers() == [], timeout=BOUND * 10, what="every watch heard again")
    idle = world.metrics.registry.get_sample_value(
        "koordpy_watch_restarts_total", {"resource": "pods", "reason": IDLE}
    )
    assert idle is not None and idle >= 1


@pytest_asyncio.fixture(loop_scope="function")
async def start_world(fake: FakeApiServer) -> AsyncIterator[Start]:
    """A KubeWorld over the scripted cluster (`start` is the informer's own here)."""
    async for starter in world_starter(fake):
        yield starter


# ---------------------------------------------------------------------------------------------- the flag
@pytest.mark.parametrize(
    ("argv", "seconds"),
    [
        ([], WATCH_IDLE_TIMEOUT),
        (["--watch-idle-timeout", "45s"], 45.0),
        (["--watch-idle-timeout=1m30s"], 90.0),
    ],
)
def test_the_flag_sets_the_bound(argv: list[str], seconds: float) -> None:
    args = build_parser().parse_args(["run", "--leader-elect=false", *argv])
    config = flags.resolve(args, _default_config(), from_file=False).config
    assert flags.run_options(args, config).watch_idle_timeout == seconds


@pytest.mark.parametrize("value", ["0s", "-5s", "soon"])
def test_the_flag_refuses_a_bound_that_is_not_a_positive_duration(
    value: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["run", f"--watch-idle-timeout={value}"])
    assert exit_.value.code == 2
    assert "--watch-idle-timeout" in capsys.readouterr().err


def _default_config() -> Any:
    from koordpy.cli import _load_run_config

    return _load_run_config(None, False).config
