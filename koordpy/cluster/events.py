"""`events.k8s.io/v1` Events, recorded the way client-go's events broadcaster (the one
kube-scheduler uses) records them.

- Each profile reports its own events under its schedulerName, as kube-scheduler gives every profile
  a recorder of that name: `reportingController` is the schedulerName (what `kubectl describe`
  shows under From, and what tools that follow a scheduler's events filter on) and
  `reportingInstance` is `<reportingController>-<this instance>`. Events that concern no profile
  (a node or an object koordpy leaves out) are koordpy's own.
- Isomorphic events (same type, regarding object, reason, action, reporting controller and
  instance, and related object; the note does not count) form one series: the first is created, the
  second turns it into a series (`series.count: 2`), and later ones only count up in memory. Series
  are written back every 30 minutes and forgotten once not seen for 6 minutes, so a pod that fails a
  thousand times costs two writes, not a thousand.
- Recording never waits: events go into a bounded queue, and when it is full they are dropped (and
  counted), as the broadcaster drops them, rather than pile up in memory or hold up bindings.
- A bounded number of workers send them, so events never take more than a few of the client's
  connections.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.pod import Pod
from koordpy.kubeapi.client import MERGE_PATCH, TRANSPORT_ERRORS, ApiError, KubeApi, micro_time

log = logging.getLogger(__name__)

# the reporting controller of events that concern no profile
REPORTING_CONTROLLER = "koordpy"
# events.k8s.io/v1 validation limits
EVENT_NOTE_LIMIT = 1024
REPORTING_INSTANCE_LIMIT = 128
# the apiserver takes as reportingController only a qualified name (apimachinery IsQualifiedName)
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# client-go's events broadcaster: series are refreshed this often and finished when not seen for
# this long
SERIES_REFRESH_SECONDS = 30 * 60.0
SERIES_FINISH_SECONDS = 6 * 60.0
# at most this many events wait to be sent (about 10 MB): a binding burst's Scheduled events fit
MAX_QUEUED_EVENTS = 10_000
# the cache of recent events is cleaned when series finish; this bounds it in between
EVENT_CACHE_SIZE = 8192
# events in flight at once: enough to keep up with bindings, few of the client's connections
EVENT_WORKERS = 16
# an event the apiserver could not take (it is restarting, overloaded or out of reach) is sent
# again, as client-go's broadcaster does: up to this many tries, waiting longer each time
EVENT_TRIES = 6
EVENT_RETRY_SECONDS = 1.0
# what a write may fail with: the apiserver's refusal, or no answer at all
WRITE_ERRORS: tuple[type[BaseException], ...] = (ApiError, *TRANSPORT_ERRORS)


@functools.lru_cache(maxsize=64)
def reporting_controller(scheduler_name: str) -> str:
    """Who reports a profile's events: its schedulerName; a name the apiserver would refuse as a
    reportingController (every event of the profile would be lost) falls back to koordpy's own."""
    prefix, slash, name = scheduler_name.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return REPORTING_CONTROLLER
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return REPORTING_CONTROLLER
    return scheduler_name


def pod_reference(pod: Pod | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(pod, Pod):
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        }
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }


def truncate(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode(errors="ignore") + "..."


def _reference_key(ref: Mapping[str, Any] | None) -> tuple[str, ...]:
    if not ref:
        return ()
    return tuple(str(ref.get(k) or "") for k in ("kind", "namespace", "name", "uid"))


async def wait_set(event: asyncio.Event, timeout: float) -> bool:
    """Until the event is set (True) or `timeout` passed (False): how a writer's `wait_idle` ends."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        return False
    return True


def _worth_retrying(err: BaseException) -> bool:
    """No answer, or an answer that says "later" (429, 5xx); a refusal of the event itself is final."""
    return not isinstance(err, ApiError) or err.status == 429 or err.status >= 500


@dataclass(slots=True)
class _Recorded:
    """An event the apiserver holds (or is about to), and its series as counted here."""

    namespace: str
    name: str
    body: dict[str, Any]
    count: int
    last: float
    # the count the apiserver was last told
    written: int


@dataclass(frozen=True, slots=True)
class _Pending:
    regarding: dict[str, Any]
    event_type: str
    reason: str
    action: str
    note: str
    related: dict[str, Any] | None
    at: float
    controller: str


def _subject(pending: _Pending) -> str:
    namespace, name = pending.regarding.get("namespace"), pending.regarding.get("name")
    return f"{pending.reason} {namespace}/{name}" if namespace else f"{pending.reason} {name}"


class EventRecorder:
    def __init__(
        self,
        api: KubeApi,
        instance: str,
        *,
        on_write: Callable[[bool], None] | None = None,
        on_drop: Callable[[], None] | None = None,
        max_queued: int = MAX_QUEUED_EVENTS,
        workers: int = EVENT_WORKERS,
        now: Callable[[], float] = time.time,
        tries: int = EVENT_TRIES,
        retry_seconds: float = EVENT_RETRY_SECONDS,
    ) -> None:
        self.api = api
        self.instance = instance
        self._on_write = on_write
        self._on_drop = on_drop
        self._max_queued = max_queued
        self._workers = workers
        self._now = now
        self._tries = max(1, tries)
        self._retry_seconds = retry_seconds
        self._queue: deque[_Pending] = deque()
        self._ready = asyncio.Event()
        self._cache: OrderedDict[tuple[Any, ...], _Recorded] = OrderedDict()
        # the cache's keys by the uid of the object they regard, so that an object's series go with it
        self._keys_of: dict[str, set[tuple[Any, ...]]] = {}
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def queued(self) -> int:
        return len(self._queue) + self._active

    def queued_events(self) -> list[str]:
        """The events waiting to be written, as `reason namespace/name`."""
        return [_subject(p) for p in self._queue]

    def record(
        self,
        regarding: Mapping[str, Any],
        event_type: str,
        reason: str,
        action: str,
        note: str,
        related: Mapping[str, Any] | None = None,
        *,
        controller: str = REPORTING_CONTROLLER,
    ) -> None:
        """Queue an event; `controller` is the schedulerName of the profile it is about (see the
        module's docstring), koordpy's own name when it concerns no profile."""
        if len(self._queue) >= self._max_queued:
            if self._on_drop is not None:
                self._on_drop()
            return
        self._queue.append(
            _Pending(
                dict(regarding),
                event_type,
                reason,
                action,
                note,
                dict(related) if related else None,
                self._now(),
                reporting_controller(controller),
            )
        )
        self._idle.clear()
        self._ready.set()

    async def run(self) -> None:
        """The workers, and the series housekeeping; until cancelled."""
        tasks = [asyncio.create_task(self._work(), name=f"events-{i}") for i in range(self._workers)]
        tasks.append(asyncio.create_task(self._housekeeping(), name="events-series"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_idle(self, timeout: float) -> bool:
        """Until every queued event was sent (True) or `timeout` passed (False)."""
        return await wait_set(self._idle, timeout)

    # ------------------------------------------------------------------ sending
    async def _work(self) -> None:
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            pending = self._queue.popleft()
            self._active += 1
            try:
                await self._send(pending)
            except Exception:
                log.exception("recording event %s failed unexpectedly", pending.reason)
            finally:
                self._active -= 1
                if not self._queue and not self._active:
                    self._idle.set()

    def reporting_instance(self, controller: str) -> str:
        """client-go's `<reportingController>-<hostname>`, this instance's identity for the host."""
        full = f"{controller}-{self.instance}".encode()
        return full[:REPORTING_INSTANCE_LIMIT].decode(errors="ignore")

    def _key(self, p: _Pending) -> tuple[Any, ...]:
        # client-go's eventKey; the instance follows from the controller here
        return (
            p.event_type,
            p.action,
            p.reason,
            p.controller,
            _reference_key(p.regarding),
            _reference_key(p.related),
        )

    async def _send(self, p: _Pending) -> None:
        key = self._key(p)
        known = self._cache.get(key)
        if known is not None:
            known.count += 1
            known.last = p.at
            self._cache.move_to_end(key)
            if known.written >= 2:
                return  # counted; the series is written back with the next refresh
            await self._write_series(known)
            return
        namespace = str(p.regarding.get("namespace") or "default")
        name = f"{p.regarding.get('name')}.{time.time_ns():x}"
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(p.at),
            "reportingController": p.controller,
            "reportingInstance": self.reporting_instance(p.controller),
            "action": p.action,
            "reason": p.reason,
            "type": p.event_type,
            "note": truncate(p.note, EVENT_NOTE_LIMIT),
            "regarding": p.regarding,
        }
        if p.related:
            body["related"] = p.related
        recorded = _Recorded(namespace, name, body, 1, p.at, 1)
        self._cache[key] = recorded
        uid = str(p.regarding.get("uid") or "")
        if uid:
            self._keys_of.setdefault(uid, set()).add(key)
        if len(self._cache) > EVENT_CACHE_SIZE:
            self._uncache(next(iter(self._cache)))
        await self._create(recorded)

    async def _create(self, recorded: _Recorded) -> bool:
        for attempt in range(self._tries):
            body = dict(recorded.body)
            if recorded.count > 1:
                body["series"] = {"count": recorded.count, "lastObservedTime": micro_time(recorded.last)}
            try:
                await self.api.request(
                    "POST",
                    f"/apis/events.k8s.io/v1/namespaces/{recorded.namespace}/events",
                    body=body,
                    timeout=15.0,
                )
            except WRITE_ERRORS as err:
                self._wrote(False)
                last = attempt + 1 == self._tries or not _worth_retrying(err)
                log.warning(
                    "recording event %s for %s failed: %s%s",
                    body["reason"],
                    recorded.name,
                    err,
                    "" if last else "; trying again",
                )
                if last:
                    return False
                await asyncio.sleep(self._retry_seconds * 2**attempt)
                continue
            recorded.written = max(recorded.count, 1)
            self._wrote(True)
            return True
        return False

    async def _write_series(self, recorded: _Recorded) -> None:
        patch = {"series": {"count": recorded.count, "lastObservedTime": micro_time(recorded.last)}}
        try:
            await self.api.request(
                "PATCH",
                f"/apis/events.k8s.io/v1/namespaces/{recorded.namespace}/events/{recorded.name}",
                body=patch,
                content_type=MERGE_PATCH,
                timeout=15.0,
            )
        except ApiError as err:
            if err.status == 404:
                # the event expired on the server: the series starts again as a new object
                await self._create(recorded)
                return
            self._wrote(False)
            log.warning("updating event series %s failed: %s", recorded.name, err)
            return
        except TRANSPORT_ERRORS as err:
            self._wrote(False)
            log.warning("updating event series %s failed: %s", recorded.name, err)
            return
        recorded.written = recorded.count
        self._wrote(True)

    def _wrote(self, ok: bool) -> None:
        if self._on_write is not None:
            self._on_write(ok)

    # ------------------------------------------------------------------ series housekeeping
    async def _housekeeping(self) -> None:
        last_refresh = self._now()
        while True:
            await asyncio.sleep(SERIES_FINISH_SECONDS)
            now = self._now()
            self.finish_series(now)
            if now - last_refresh >= SERIES_REFRESH_SECONDS:
                last_refresh = now
                for recorded in [r for r in self._cache.values() if r.count > r.written]:
                    await self._write_series(recorded)

    def finish_series(self, now: float) -> None:
        """Forget events not seen for SERIES_FINISH_SECONDS (their series is over); a series with
        repeats the apiserver has not been told of yet is told first, in the background."""
        for key in [k for k, r in self._cache.items() if now - r.last >= SERIES_FINISH_SECONDS]:
            recorded = self._uncache(key)
            if recorded.count > recorded.written:
                self._queue_series_write(recorded)

    def forget_object(self, uid: str) -> None:
        """The object with this uid was deleted: its series are over now (a new object of the same
        name has another uid, so none of them can repeat). A series with repeats the apiserver has
        not been told of is told first, in the background, as when it finishes."""
        for key in self._keys_of.pop(uid, ()):
            recorded = self._cache.pop(key, None)
            if recorded is not None and recorded.count > recorded.written:
                self._queue_series_write(recorded)

    def cached(self) -> int:
        """The events whose series are followed now."""
        return len(self._cache)

    def _uncache(self, key: tuple[Any, ...]) -> _Recorded:
        recorded = self._cache.pop(key)
        uid = str(recorded.body["regarding"].get("uid") or "")
        keys = self._keys_of.get(uid)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._keys_of[uid]
        return recorded

    def _queue_series_write(self, recorded: _Recorded) -> None:
        task = asyncio.get_running_loop().create_task(self._write_series(recorded))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
