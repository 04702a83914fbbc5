"""The ElasticQuota operator's writes, against the fake API server (tests/support/fakeapi.py) over
real HTTP with the real client: bounded when nothing changes, and each one counted.

The server keeps the objects as the apiserver keeps a custom resource: `metadata.generation` grows
with every change outside `metadata`, except, where the CRD serves a status subresource
(scheduler-plugins' `scheduling.x-k8s.io`), with a change of the status, which only `/status`
takes. Koordinator's `scheduling.sigs.k8s.io` CRD (koordpy's chart and Koordinator's own) serves
none: `/status` is not found, and a status written to the object raises its generation. Each write
comes back to the operator as kopf's watch would deliver it.

Also: a quota whose max is lowered below its used says so (WithinMax=False, reason UsedExceedsMax)
with one Warning event, until used is within max again."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from koordpy.api.elasticquota import LABEL_IS_PARENT, LABEL_PARENT
from koordpy.kubeapi.informer import DELETE
from koordpy.metrics import SchedulerMetrics
from koordpy.quota.tree import MIN_EXCEEDS_PARENT
from koordpy.status.quota import ANNOTATION_RUNTIME, USED_EXCEEDS_MAX, VALID, WITHIN_MAX
from operators.facts import ClusterFacts
from operators.quota import WRITE_EVENT, WRITE_OBJECT, WRITE_STATUS, QuotaController, QuotaKey
from tests.operators.fakes import merge_patch
from tests.operators.test_quota_operator import SIGS, X_K8S, Feed, node, pod, quota
from tests.support.fakeapi import NOT_FOUND, FakeApiServer, Reply, Request, until

# the operator's pace in these tests: the loop of the defect wrote once per pass
MIN_INTERVAL = 0.02
PERIOD = 0.6


@dataclass
class Store:
    """What the apiserver stores of the ElasticQuotas, and who hears of each write."""

    controller: QuotaController | None = None
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    version: int = 100

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[path] = stored
        return copy.deepcopy(stored)

    def patch(self, request: Request) -> Reply:
        status_path = request.path.endswith("/status")
        path = request.path.removesuffix("/status")
        served = f"/apis/{X_K8S}/" in path
        stored = self.objects.get(path)
        if stored is None or (status_path and not served):
            return NOT_FOUND
        body = request.body
        if status_path:
            changes = {"status": body.get("status")}
        else:
            changes = dict(body)
            if served:
                # the apiserver drops a status written to the object where /status serves it
                changes.pop("status", None)
        after = merge_patch(stored, changes)
        outside_meta = ("spec", "status") if not served else ("spec",)
        if any(after.get(k) != stored.get(k) for k in outside_meta):
            after["metadata"]["generation"] = int(stored["metadata"].get("generation", 1)) + 1
        written = self.put(path, after)
        if self.controller is not None:
            controller, key = self.controller, _key(written)
            # kopf's watch event of the write
            asyncio.get_running_loop().call_soon(controller.quota_changed, key, copy.deepcopy(written))
        return Reply(200, written)

    def post_event(self, request: Request) -> Reply:
        self.events.append(request.body)
        return Reply(201, request.body)


def _key(obj: dict[str, Any]) -> QuotaKey:
    meta = obj["metadata"]
    return QuotaKey(obj["apiVersion"].split("/")[0], meta["namespace"], meta["name"])


@dataclass
class Cluster:
    fake: FakeApiServer
    store: Store
    facts: ClusterFacts
    feed: Feed
    controller: QuotaController
    writes: list[tuple[str, bool]]
    metrics: SchedulerMetrics

    def counted(self, operation: str, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "koordpy_api_writes_total", {"operation": operation, "result": result}
        )
        return value or 0.0

    def create(self, obj: dict[str, Any]) -> QuotaKey:
        key = _key(obj)
        self.controller.quota_changed(key, self.store.put(key.path, obj))
        return key

    def replace(self, key: QuotaKey, obj: dict[str, Any]) -> None:
        """Another writer (kubectl) changes the object: the spec's change raises the generation."""
        obj = copy.deepcopy(obj)
        obj["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
        self.controller.quota_changed(key, self.store.put(key.path, obj))

    def stored(self, key: QuotaKey) -> dict[str, Any]:
        return self.store.objects[key.path]

    def sent(self) -> list[Request]:
        return [r for r in self.fake.requests if r.method in ("PATCH", "POST")]


@contextlib.asynccontextmanager
async def cluster() -> AsyncIterator[Cluster]:
    async with FakeApiServer() as fake:
        store = Store()
        fake.on("PATCH", "/apis/*/elasticquotas/*", store.patch)
        fake.on("POST", "/apis/events.k8s.io/v1/namespaces/*/events", store.post_event)
        facts = ClusterFacts()
        writes: list[tuple[str, bool]] = []
        metrics = SchedulerMetrics()

        def on_write(operation: str, ok: bool) -> None:
            writes.append((operation, ok))
            # as `koordpy run` counts them (run_operators' on_write)
            metrics.api_write(operation, ok)

        controller = QuotaController(
            fake.client(), facts, min_interval=MIN_INTERVAL, instance="koordpy-test", on_write=on_write
        )
        store.controller = controller
        feed = Feed(facts)
        for n in (node("n1", cpu="4", memory="16Gi"), node("n2", cpu="4", memory="16Gi")):
            feed.node(n)
        task = asyncio.create_task(controller.run())
        try:
            yield Cluster(fake, store, facts, feed, controller, writes, metrics)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


# ---------------------------------------------------------------------------------- bounded writes
def _bad_koordinator(c: Cluster) -> QuotaKey:
    c.create(quota("p", min={"cpu": 2}, max={"cpu": 8}, labels={LABEL_IS_PARENT: "true"}))
    return c.create(quota("c", min={"cpu": 4}, max={"cpu": 8}, labels={LABEL_PARENT: "p"}))


def _over_max_x_k8s(c: Cluster) -> QuotaKey:
    c.feed.pod(pod("r", namespace="team", node="n1", phase="Running", cpu="3"))
    return c.create(quota("eq", namespace="team", group=X_K8S, min={"cpu": 1}, max={"cpu": 2}))


@pytest.mark.parametrize(
    ("make", "condition", "reason", "expected"),
    [
        # the /status that is not there (refused, counted as an error), the object's patch (status
        # and condition), one event; the generation the write raises is no reason to write again
        pytest.param(
            _bad_koordinator,
            VALID,
            MIN_EXCEEDS_PARENT,
            [(WRITE_STATUS, False), (WRITE_OBJECT, True), (WRITE_EVENT, True)],
            id="koordinator quota with a problem, CRD without status subresource",
        ),
        pytest.param(
            _over_max_x_k8s,
            WITHIN_MAX,
            USED_EXCEEDS_MAX,
            [(WRITE_STATUS, True), (WRITE_EVENT, True)],
            id="scheduler-plugins quota over its max, status subresource",
        ),
    ],
)
async def test_a_quota_with_a_problem_gets_a_bounded_number_of_writes_each_counted(
    make: Any, condition: str, reason: str, expected: list[tuple[str, bool]]
) -> None:
    async with cluster() as c:
        key = make(c)
        c.facts.synced.set()
        await until(lambda: len(c.store.events) == 1, what="the event")
        generation = c.stored(key)["metadata"]["generation"]
        await asyncio.sleep(PERIOD)
        # every later pass finds nothing to change
        assert c.writes == expected
        assert len(c.sent()) == len(c.writes)
        for operation, ok in expected:
            assert c.counted(operation, "success" if ok else "error") == 1
        assert c.stored(key)["metadata"]["generation"] == generation
        assert _conditions(c.stored(key))[condition]["reason"] == reason


async def test_koordinator_status_goes_straight_to_the_object_once_learned() -> None:
    async with cluster() as c:
        key = _bad_koordinator(c)
        c.facts.synced.set()
        await until(lambda: len(c.store.events) == 1, what="the event")
        c.writes.clear()
        # a pod placed in the parent's good child: figures change, one write of the object each
        c.create(quota("ok", min={"cpu": 1}, max={"cpu": 8}, labels={LABEL_PARENT: "p"}))
        c.feed.pod(pod("x", quota="ok", node="n1", phase="Running", cpu="1"))
        await asyncio.sleep(PERIOD)
        assert c.writes and all(w == (WRITE_OBJECT, True) for w in c.writes)
        assert len(c.writes) <= 3  # c's status stays; ok's and p's figures, each once
        runtime = c.stored(_key(quota("ok")))["metadata"]["annotations"][ANNOTATION_RUNTIME]
        assert orjson.loads(runtime) == {"cpu": "1"}
        # a spec change of the bad quota that keeps its problem: nothing new to say
        writes = len(c.writes)
        changed = copy.deepcopy(c.stored(key))
        changed["spec"]["max"] = {"cpu": 7}
        c.replace(key, changed)
        await asyncio.sleep(PERIOD)
        assert len(c.writes) == writes


# ---------------------------------------------------------------------------------- used above max
@pytest.mark.parametrize("group", [SIGS, X_K8S])
async def test_a_max_lowered_below_used_says_so_with_a_condition_and_one_event(group: str) -> None:
    async with cluster() as c:
        namespace = "team"
        c.feed.pod(pod("a", namespace=namespace, node="n1", phase="Running", cpu="2"))
        c.feed.pod(pod("b", namespace=namespace, node="n2", phase="Running", cpu="2"))
        key = c.create(quota(namespace, namespace=namespace, group=group, min={"cpu": 1}, max={"cpu": 8}))
        c.facts.synced.set()
        await until(lambda: "used" in (c.stored(key).get("status") or {}), what="used")
        assert WITHIN_MAX not in _conditions(c.stored(key))
        lowered = copy.deepcopy(c.stored(key))
        lowered["spec"]["max"] = {"cpu": 3}
        c.replace(key, lowered)
        await until(lambda: WITHIN_MAX in _conditions(c.stored(key)), what="the condition")
        cond = _conditions(c.stored(key))[WITHIN_MAX]
        assert (cond["status"], cond["reason"]) == ("False", USED_EXCEEDS_MAX)
        assert "cpu used 4 > max 3" in cond["message"]
        await until(lambda: len(c.store.events) == 1, what="the event")
        (event,) = c.store.events
        said = (event["type"], event["reason"], event["note"])
        assert said == ("Warning", USED_EXCEEDS_MAX, cond["message"])
        assert event["regarding"]["name"] == namespace
        # more used, still above max: the message follows, no second event
        c.feed.pod(pod("c", namespace=namespace, node="n2", phase="Running", cpu="1"))
        await until(
            lambda: "cpu used 5 > max 3" in _conditions(c.stored(key))[WITHIN_MAX]["message"],
            what="the message",
        )
        await asyncio.sleep(PERIOD)
        assert len(c.store.events) == 1
        # back within max: the condition goes
        for name in ("b", "c"):
            c.feed.pod(pod(name, namespace=namespace, node="n2", phase="Running", cpu="2"), DELETE)
        await until(lambda: WITHIN_MAX not in _conditions(c.stored(key)), what="the condition to go")
        assert len(c.store.events) == 1
