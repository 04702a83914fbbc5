"""Pod status writes that cannot bury the bindings.

A scheduling verdict on a pending pod (PodScheduled=False with a reason, a nomination) only marks
the pod. A few workers then write what the scheduler says of the pod *now*: one pending write per pod
whatever the number of verdicts in between (the latest wins), nothing when the stored status already
says it, and nothing at all once the pod is bound, being bound, or gone.

A verdict that a gang is not complete yet settles for a moment first, since the missing members are
usually on their way and the gang is bound before the write would have been useful. Once written,
such a verdict is refreshed at most every few minutes: its message counts the members that exist, so
it changes with every member that arrives, and rewriting every waiting member on every arrival is
the square of the gang's size in writes.

The condition carries only kube-scheduler's reasons (`KUBE_REASONS`), so that autoscalers and
dashboards that key on them (cluster-autoscaler looks for reason Unschedulable) see koordpy's
pending pods; koordpy's finer diagnosis (GangNotReady, InvalidSpec, ...) leads the message instead.
A written verdict is also told as a FailedScheduling event, reported by the pod's profile, when the
pod was itself attempted; a member only told how its gang's attempt ended gets the condition alone.

Bindings do not go through here: they are sent as soon as they are decided, each on its own, and
only wait for a status write of the same pod that is already on the wire (so that a stale
PodScheduled=False can never land after the binding).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.cluster.events import EventRecorder, pod_reference, wait_set
from koordpy.kubeapi.client import (
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    KubeApi,
    pod_path,
    rfc3339,
)

log = logging.getLogger(__name__)

STATUS_WORKERS = 8
# how long a "gang not complete yet" verdict waits before it is written, and how long one that was
# written stands before a newer one replaces it
GATE_SETTLE_SECONDS = 2.0
GATE_REFRESH_SECONDS = 300.0
# the queue of later marks is rebuilt without the entries of forgotten pods once it holds more than
# twice the marks, plus this many
LATER_SLACK = 64

# koordpy's reason for a pending pod -> the PodScheduled reason written: kube-scheduler's own
# (core/v1 PodReasonUnschedulable, PodReasonSchedulingGated, PodReasonSchedulerError) are kept, and
# every finer one is a rejection, which kube-scheduler reports as Unschedulable
KUBE_REASONS: Mapping[str, str] = {
    names.UNSCHEDULABLE: names.UNSCHEDULABLE,
    names.SCHEDULING_GATED: names.SCHEDULING_GATED,
    names.SCHEDULER_ERROR: names.SCHEDULER_ERROR,
    names.GANG_NOT_READY: names.UNSCHEDULABLE,
    names.INVALID_SPEC: names.UNSCHEDULABLE,
    names.TOPOLOGY_UNAVAILABLE: names.UNSCHEDULABLE,
}


def pod_scheduled(reason: str, message: str) -> tuple[str, str]:
    """The (reason, message) of the PodScheduled=False condition that says koordpy's verdict
    (reason, message): a finer reason than kube's leads the message, `GangNotReady: gang ...`."""
    kube = KUBE_REASONS.get(reason, names.UNSCHEDULABLE)
    if kube == reason:
        return reason, message
    return kube, f"{reason}: {message}" if message else reason


class Verdicts(Protocol):
    """What the scheduler says of a pod now."""

    def pending(self, key: str) -> bool:
        """Whether the pod still waits for a node (not bound, being bound, waiting at Permit, gone)."""
        ...

    def condition_of(self, key: str) -> tuple[str, str] | None:
        """(reason, message) of the pod's PodScheduled=False condition, when there is one to write."""
        ...


@dataclass(slots=True)
class _Mark:
    pod: Pod
    # None: leave status.nominatedNodeName alone; "": clear it; a name: set it
    nominated: str | None
    due: float
    settling: bool
    # the verdict to write is on the pod's own attempt: its write is told as an event
    event: bool


class PodStatusWriter:
    def __init__(
        self,
        api: KubeApi,
        verdicts: Verdicts,
        stored: Callable[[str], Mapping[str, Any] | None],
        events: EventRecorder,
        *,
        on_write: Callable[[str, bool], None] | None = None,
        workers: int = STATUS_WORKERS,
        settle: float = GATE_SETTLE_SECONDS,
        refresh: float = GATE_REFRESH_SECONDS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.verdicts = verdicts
        self.stored = stored
        self.events = events
        self._on_write = on_write
        self._workers = workers
        self._settle = settle
        self._refresh = refresh
        self._now = now
        # when a settling verdict was last written for each pod that still waits
        self._settled_at: dict[str, float] = {}
        # marks held back until the last verdict written of their kind has stood long enough
        self._parked: set[str] = set()
        self._marks: dict[str, _Mark] = {}
        # (due, key) of the marks due now, in the order they fell due, and of the later ones (settling
        # verdicts, parked refreshes) by due time; an entry is live while its due matches the mark's
        self._soon: deque[tuple[float, str]] = deque()
        self._later: list[tuple[float, str]] = []
        self._writing: dict[str, asyncio.Future[None]] = {}
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def queued(self) -> int:
        return len(self._marks) + len(self._writing)

    def queued_pods(self) -> list[str]:
        """The pods whose status is waiting to be written or being written."""
        return sorted({*self._marks, *self._writing})

    def _busy(self) -> bool:
        """Whether anything but parked refreshes waits or is being written."""
        return bool(self._writing) or len(self._marks) > len(self._parked)

    def mark(
        self, pod: Pod, *, nominated: str | None = None, settle: bool = False, event: bool | None = None
    ) -> None:
        """Something the scheduler says of the pod changed: write what it says by then.
        `event`: whether its new verdict is on the pod's own attempt, so that the write is told as
        a FailedScheduling event too; the latest verdict decides, as it is the one written (a
        verdict that settles is dropped when a newer one comes first); None for a nomination alone,
        which leaves it as it was."""
        key = pod.key
        old = self._marks.get(key)
        if nominated is None and old is not None:
            nominated = old.nominated
        due = self._now() + (self._settle if settle else 0.0)
        parked = False
        if settle and key in self._settled_at:
            parked = self._settled_at[key] + self._refresh > due
            due = max(due, self._settled_at[key] + self._refresh)
        elif not settle:
            self._settled_at.pop(key, None)
        if old is not None and old.due <= due:
            # already on its way, as early or earlier: only the latest view of the pod changes
            old.pod, old.nominated = pod, nominated
            old.settling = old.settling and settle
            if event is not None:
                old.event = event
            return
        if event is None:
            event = old is not None and old.event
        self._marks[key] = _Mark(pod, nominated, due, settle, event)
        if parked:
            self._parked.add(key)
        else:
            self._parked.discard(key)
        self._queue(key, due)
        self._idle.clear()
        self._wakeup.set()

    def forget(self, key: str) -> None:
        """The pod was bound or deleted: nothing more will be written for it. Its mark goes now,
        not when it falls due (a parked refresh is due minutes later); the entry it left in the
        queue of later marks is passed over, and that queue is rebuilt once such entries make up
        most of it."""
        self._settled_at.pop(key, None)
        if self._marks.pop(key, None) is not None:
            self._parked.discard(key)
            if len(self._later) > 2 * len(self._marks) + LATER_SLACK:
                self._later = [(due, k) for due, k in self._later if self._live(k, due)]
                heapq.heapify(self._later)
            if not self._busy():
                self._idle.set()

    def _live(self, key: str, due: float) -> bool:
        mark = self._marks.get(key)
        return mark is not None and mark.due == due

    async def wait_written(self, key: str) -> None:
        """Until a write of this pod that is on the wire now has ended."""
        future = self._writing.get(key)
        if future is not None:
            await asyncio.shield(future)

    async def wait_idle(self, timeout: float) -> bool:
        """Until every write due (all but the parked refreshes) was made (True), or `timeout`."""
        return await wait_set(self._idle, timeout)

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._work(), name=f"pod-status-{i}") for i in range(self._workers)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ taking work
    def _take(self) -> tuple[str | None, float | None]:
        """The next key due (or None) and, if none is, when the next one will be."""
        now = self._now()
        while self._later and self._later[0][0] <= now:
            due, key = heapq.heappop(self._later)
            self._soon.append((due, key))
        while self._soon:
            due, key = self._soon.popleft()
            if not self._live(key, due) or key in self._writing:
                # replaced, or written meanwhile; a pod being written goes again when that ends
                continue
            return key, None
        return None, self._later[0][0] if self._later else None

    def _queue(self, key: str, due: float) -> None:
        if due <= self._now():
            self._soon.append((due, key))
        else:
            heapq.heappush(self._later, (due, key))

    async def _work(self) -> None:
        while True:
            key, next_due = self._take()
            if key is None:
                self._wakeup.clear()
                if not self._busy():
                    self._idle.set()
                timeout = None if next_due is None else max(0.0, next_due - self._now())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                continue
            mark = self._marks.pop(key)
            self._parked.discard(key)
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._writing[key] = done
            try:
                await self._write(mark)
            except Exception:
                log.exception("writing the status of %s failed unexpectedly", key)
            finally:
                del self._writing[key]
                done.set_result(None)
                if key in self._marks:
                    # marked again while being written: it was passed over, so it is queued again
                    self._queue(key, self._marks[key].due)
                self._wakeup.set()

    # ------------------------------------------------------------------ writing
    async def _write(self, mark: _Mark) -> None:
        pod = mark.pod
        raw = self.stored(pod.key)
        moot = raw is None or str((raw.get("metadata") or {}).get("uid") or "") != pod.uid
        if moot or (raw or {}).get("spec", {}).get("nodeName") or not self.verdicts.pending(pod.key):
            self._settled_at.pop(pod.key, None)
            return
        assert raw is not None
        verdict = self.verdicts.condition_of(pod.key)
        reason, message = pod_scheduled(*verdict) if verdict is not None else ("", "")
        status = raw.get("status") or {}
        patch: dict[str, Any] = {}
        old = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
        if verdict is not None and (
            old is None
            or (old.get("status"), old.get("reason"), old.get("message")) != ("False", reason, message)
        ):
            transition = rfc3339()
            if old is not None and old.get("status") == "False" and old.get("lastTransitionTime"):
                transition = str(old["lastTransitionTime"])
            patch["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": transition,
                }
            ]
        operation = "pod_condition"
        if mark.nominated is not None and (status.get("nominatedNodeName") or "") != mark.nominated:
            patch["nominatedNodeName"] = mark.nominated or None
            if "conditions" not in patch:
                operation = "nominate"
        if patch:
            ok = await self.patch_status(pod, patch, operation)
            if not ok:
                return
        if "conditions" in patch and mark.settling:
            self._settled_at[pod.key] = self._now()
        # a gated pod was not attempted: kube-scheduler reports nothing of it (the apiserver wrote
        # its condition when it was created)
        if "conditions" in patch and mark.event and reason != names.SCHEDULING_GATED:
            self.events.record(
                pod_reference(pod),
                "Warning",
                names.EVENT_FAILED_SCHEDULING,
                "Scheduling",
                message,
                controller=pod.scheduler_name,
            )

    async def patch_status(self, pod: Pod, status: dict[str, Any], operation: str) -> bool:
        """One strategic-merge patch of the pod's status, counted under `operation`; False when it
        failed (a pod that is gone fails quietly)."""
        ok = True
        try:
            await self.api.request(
                "PATCH",
                pod_path(pod.namespace, pod.name, "status"),
                body={"status": status},
                content_type=STRATEGIC_MERGE_PATCH,
            )
        except ApiError as err:
            ok = False
            if err.status != 404:
                log.warning("%s of %s failed: %s", operation, pod.key, err)
        except TRANSPORT_ERRORS as err:
            ok = False
            log.warning("%s of %s failed: %s", operation, pod.key, err)
        if self._on_write is not None:
            self._on_write(operation, ok)
        return ok
