"""The informers' first lists asked for early (koordpy.kubeapi.prefetch): an informer that is given
its first page does not ask again and watches from that page's resourceVersion; one whose early
list failed, or was asked another way, lists itself; the early requests are counted as the main
client's are."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from koordpy.kubeapi.client import USER_AGENT
from koordpy.kubeapi.informer import PAGE_SIZE, Informer, Resource
from koordpy.kubeapi.prefetch import FirstLists
from tests.support.fakeapi import FakeApiServer, Reply

PODS = Resource("Pod", "v1", "pods", field_selector="status.phase!=Succeeded")
NODES = Resource("Node", "v1", "nodes", namespaced=False)


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "3"}}


def kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return str(path)


def early(
    tmp_path: Path, fake: FakeApiServer, *resources: Resource, page_size: int = PAGE_SIZE
) -> FirstLists:
    return FirstLists(
        resources,
        kubeconfig=kubeconfig(tmp_path, fake.url),
        context=None,
        master=None,
        user_agent=USER_AGENT + " early",
        page_size=page_size,
    ).start()


def lists_of(fake: FakeApiServer, path: str) -> list[tuple[str, dict[str, str]]]:
    return [(r.user_agent, r.query) for r in fake.requests if r.path == path and not r.watch]


async def run_until_synced(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 10)
    return task


async def test_an_informer_given_its_first_page_lists_nothing_itself_and_watches_from_that_page(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    fake.on_list(PODS.path, [pod("a"), pod("b")], "7")
    lists = early(tmp_path, fake, PODS)
    seen: list[str] = []
    informer = Informer(fake.client(), PODS, lambda action, obj, old: seen.append(obj["metadata"]["name"]))
    informer.prefetched = lists.take(PODS, informer.page_size)
    task = await run_until_synced(informer)
    await fake.watch(PODS.path).watching(1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    assert sorted(seen) == ["a", "b"]
    # one list, the early one, asked as the informer would have asked it (watch cache, the
    # pod informer's field selector, client-go's page size)
    assert lists_of(fake, PODS.path) == [
        (
            USER_AGENT + " early",
            {"limit": str(PAGE_SIZE), "resourceVersion": "0", "fieldSelector": PODS.field_selector},
        )
    ]
    (watch,) = [r for r in fake.requests if r.path == PODS.path and r.watch]
    assert watch.query["resourceVersion"] == "7"


@pytest.mark.parametrize(
    ("case", "replies"),
    [
        ("the early list was refused", (Reply.error(500, "InternalError"), Reply.items([pod("a")], "9"))),
        (
            "the early list was answered 410 Gone",
            (Reply.error(410, "Expired"), Reply.items([pod("a")], "9")),
        ),
    ],
)
async def test_an_informer_whose_early_list_failed_lists_itself(
    fake: FakeApiServer, tmp_path: Path, case: str, replies: tuple[Reply, ...]
) -> None:
    fake.on("GET", PODS.path, *replies)
    lists = early(tmp_path, fake, PODS)
    informer = Informer(fake.client(), PODS, lambda action, obj, old: None)
    informer.prefetched = lists.take(PODS, informer.page_size)
    task = await run_until_synced(informer)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    assert [agent for agent, _ in lists_of(fake, PODS.path)] == [USER_AGENT + " early", USER_AGENT], case
    assert informer.resource_version == "9"


async def test_a_page_is_taken_once_and_only_as_the_informer_would_ask_for_it(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    fake.on_list(NODES.path, [], "1")
    lists = early(tmp_path, fake, NODES)
    assert lists.take(NODES, PAGE_SIZE * 2) is None  # another page size: another first page
    assert lists.take(PODS, PAGE_SIZE) is None  # never asked for
    first = lists.take(NODES, PAGE_SIZE)
    assert first is not None
    assert lists.take(NODES, PAGE_SIZE) is None
    assert (await asyncio.wrap_future(first))["metadata"]["resourceVersion"] == "1"


async def test_the_early_requests_are_counted_like_the_main_clients(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    fake.on_list(NODES.path, [], "1")
    observed: list[tuple[str, str]] = []
    lists = early(tmp_path, fake, NODES)
    page = lists.take(NODES, PAGE_SIZE)
    assert page is not None
    await asyncio.wrap_future(page)
    lists.report_requests(lambda method, code, host, seconds, throttled: observed.append((method, code)))
    assert observed == [("GET", "200")]
