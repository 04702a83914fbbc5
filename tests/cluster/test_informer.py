"""The informer against a scripted apiserver: lists, watches, re-lists when the resourceVersion
expires, and reconciles what it missed while away as client-go's reflector does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from koordpy.kubeapi.informer import ADD, DELETE, UPDATE, Informer, Resource
from tests.support.fakeapi import FakeApiServer, WatchStream, until

PODS = Resource("Pod", "v1", "pods")
CUSTOM = Resource("Widget", "example.com/v1", "widgets", optional=True)


def obj(name: str, rv: str, uid: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "resourceVersion": rv}
    }


class Seen:
    """What the handler was told: (action, name, uid)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def __call__(self, action: str, o: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = o["metadata"]
        self.events.append((action, meta["name"], meta["uid"]))


class Running:
    def __init__(self, informer: Informer, seen: Seen, stream: WatchStream) -> None:
        self.informer = informer
        self.seen = seen
        self.stream = stream


@pytest_asyncio.fixture(loop_scope="function")
async def start(fake: FakeApiServer) -> AsyncIterator[Callable[..., Running]]:
    tasks: list[asyncio.Task[None]] = []

    def starter(resource: Resource = PODS, **kw: Any) -> Running:
        seen = Seen()
        informer = Informer(fake.client(), resource, seen, **kw)
        tasks.append(asyncio.create_task(informer.run()))
        return Running(informer, seen, fake.watch(resource.path))

    yield starter
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def expire_by_error_event(stream: WatchStream) -> None:
    stream.gone()


def expire_by_refused_watch(stream: WatchStream) -> None:
    # the server ends the watch; the informer watches again from where it was, and that
    # resourceVersion is too old by now
    stream.refuse(410, "Expired", "too old resource version: 5 (20)")
    stream.end()


@pytest.mark.parametrize("expire", [expire_by_error_event, expire_by_refused_watch])
async def test_an_expired_watch_lists_again_and_reconciles_what_changed_meanwhile(
    fake: FakeApiServer, start: Callable[..., Running], expire: Callable[[WatchStream], None]
) -> None:
    fake.on_list(PODS.path, [obj("a", "3"), obj("b", "4")], "5")
    run = start()
    await run.stream.watching(1)
    # while away: a was modified, b deleted, c created
    fake.on_list(PODS.path, [obj("a", "21"), obj("c", "22")], "30")
    expire(run.stream)
    second_watch = await run.stream.watching(2 if expire is expire_by_error_event else 3)

    assert run.seen.events == [
        (ADD, "a", "uid-a"),
        (ADD, "b", "uid-b"),
        (DELETE, "b", "uid-b"),
        (UPDATE, "a", "uid-a"),
        (ADD, "c", "uid-c"),
    ]
    first_list, relist = fake.matching("GET", PODS.path)
    # the first list may come from the watch cache; the one after an expiry must not
    assert first_list.query.get("resourceVersion") == "0"
    assert "resourceVersion" not in relist.query
    assert second_watch.query["resourceVersion"] == "30"


@pytest.mark.parametrize("where", ["between two lists", "in a watch event"])
async def test_an_object_created_again_under_the_same_name_is_a_deletion_then_an_addition(
    fake: FakeApiServer, start: Callable[..., Running], where: str
) -> None:
    fake.on_list(PODS.path, [obj("a", "3", uid="first")], "5")
    run = start()
    await run.stream.watching(1)
    if where == "between two lists":
        fake.on_list(PODS.path, [obj("a", "9", uid="second")], "10")
        run.stream.gone()
    else:
        # the DELETED of the first went unseen (a watch restarted from a later resourceVersion)
        run.stream.added(obj("a", "9", uid="second"))
    await until(lambda: len(run.seen.events) == 3, what="three events")
    assert run.seen.events == [(ADD, "a", "first"), (DELETE, "a", "first"), (ADD, "a", "second")]
    assert run.informer.store["default/a"]["metadata"]["uid"] == "second"


async def test_watch_events_become_additions_updates_and_deletions(
    fake: FakeApiServer, start: Callable[..., Running]
) -> None:
    fake.on_list(PODS.path, [], "5")
    run = start()
    await run.stream.watching(1)
    run.stream.added(obj("a", "6"))
    run.stream.modified(obj("a", "7"))
    # the same resourceVersion again (a re-sent event) changes nothing
    run.stream.modified(obj("a", "7"))
    run.stream.deleted(obj("a", "8"))
    run.stream.deleted(obj("never-seen", "9"))
    run.stream.added(obj("b", "10"))
    await until(lambda: len(run.seen.events) == 4, what="four events")
    await asyncio.sleep(0.05)
    assert run.seen.events == [
        (ADD, "a", "uid-a"),
        (UPDATE, "a", "uid-a"),
        (DELETE, "a", "uid-a"),
        (ADD, "b", "uid-b"),
    ]


async def test_a_bookmark_moves_the_resource_version_on_without_an_event(
    fake: FakeApiServer, start: Callable[..., Running]
) -> None:
    fake.on_list(PODS.path, [obj("a", "3")], "5")
    run = start()
    first = await run.stream.watching(1)
    run.stream.bookmark("40")
    run.stream.end()
    second = await run.stream.watching(2)
    assert (first.query["resourceVersion"], second.query["resourceVersion"]) == ("5", "40")
    assert first.query["allowWatchBookmarks"] == "true"
    assert run.seen.events == [(ADD, "a", "uid-a")]
    # a closed watch resumes; it does not list again
    assert len(fake.matching("GET", PODS.path)) == 1


async def test_a_held_informer_tells_nothing_until_released(
    fake: FakeApiServer, start: Callable[..., Running]
) -> None:
    fake.on_list(PODS.path, [obj("a", "3")], "5")
    run = start(hold=True)
    await run.stream.watching(1)
    run.stream.added(obj("b", "6"))
    await until(lambda: "default/b" in run.informer.store, what="b stored")
    assert run.informer.synced.is_set() and run.seen.events == []
    run.informer.release()
    assert run.seen.events == [(ADD, "a", "uid-a"), (ADD, "b", "uid-b")]


async def test_a_custom_resource_not_served_counts_as_synced_and_empty(
    fake: FakeApiServer, start: Callable[..., Running]
) -> None:
    run = start(CUSTOM, missing_retry=60.0)
    await asyncio.wait_for(run.informer.synced.wait(), 5.0)
    assert run.informer.missing and run.informer.store == {}
    assert run.stream.requests == []
