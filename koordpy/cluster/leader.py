"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's rules.

One instance holds the Lease and renews it every retry period; the others watch it and take it
once its holder has not renewed for the lease duration, as measured on their own clock from the
moment they saw the record change (so no two clocks are ever compared). Every write carries the
resourceVersion that was read, so of two instances racing for an expired lease exactly one wins.
A leader that cannot renew within the renew deadline, which is shorter than the lease duration,
gives up before anyone else may take over: a pod is never bound by two leaders at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi, micro_time
from koordpy.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

# client-go's JitterFactor for the acquire loop: standbys do not all knock at once
JITTER = 1.2


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("the lease duration must be greater than the renew deadline")
        if not self.renew_deadline > JITTER * self.retry_period:
            raise ValueError(f"the renew deadline must be greater than {JITTER} x the retry period")
        if self.retry_period <= 0:
            raise ValueError("the retry period must be positive")


@dataclass(slots=True)
class _Observed:
    spec: dict[str, Any] = field(default_factory=dict)
    resource_version: str = ""
    # monotonic time at which this record was first seen
    at: float = 0.0


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        settings: LeaseSettings,
        metrics: SchedulerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.acquired = asyncio.Event()
        self.lost = asyncio.Event()
        self.on_started: list[Callable[[], None]] = []
        # told the seconds since the previous renewal each time the lease is renewed
        self.on_renewed: Callable[[float], None] | None = None
        self._observed: _Observed | None = None
        self._leading = False
        # monotonic time of the last successful renewal
        self._renewed_at = 0.0
        if metrics is not None:
            metrics.set_leader(settings.name, False)

    @property
    def path(self) -> str:
        s = self.settings
        return f"/apis/coordination.k8s.io/v1/namespaces/{s.namespace}/leases/{s.name}"

    def is_leader(self) -> bool:
        """True only while the last renewal is younger than the renew deadline: if the event
        loop stalls so long that renewing could not happen, acting would no longer be safe."""
        return self._leading and self.clock() - self._renewed_at < self.settings.renew_deadline

    async def run(self) -> None:
        """Acquire the lease, then renew it; return when it is lost (`lost` is set then)."""
        s = self.settings
        log.info("waiting to acquire lease %s/%s as %s", s.namespace, s.name, s.identity)
        while not await self._try_acquire_or_renew():
            await asyncio.sleep(s.retry_period * random.uniform(1.0, JITTER))
        self._became_leader()
        try:
            await self._renew_loop()
            self.lost.set()
        finally:
            # cancelled on shutdown, the lease is still ours until release() hands it back
            self._leading = False
            if self.metrics is not None:
                self.metrics.set_leader(s.name, False)

    def _became_leader(self) -> None:
        s = self.settings
        self._leading = True
        log.info("acquired lease %s/%s as %s", s.namespace, s.name, s.identity)
        if self.metrics is not None:
            self.metrics.set_leader(s.name, True)
        self.acquired.set()
        for callback in self.on_started:
            callback()

    async def _renew_loop(self) -> None:
        s = self.settings
        while True:
            await asyncio.sleep(s.retry_period)
            deadline = self.clock() + s.renew_deadline
            while True:
                remaining = deadline - self.clock()
                if remaining <= 0:
                    log.error(
                        "failed to renew lease %s/%s within %.1fs", s.namespace, s.name, s.renew_deadline
                    )
                    return
                try:
                    renewed = await asyncio.wait_for(self._try_acquire_or_renew(), remaining)
                except TimeoutError:
                    renewed = False
                if renewed:
                    break
                if self._held_by_other():
                    log.error(
                        "lease %s/%s was taken by %s",
                        s.namespace,
                        s.name,
                        (self._observed.spec if self._observed else {}).get("holderIdentity"),
                    )
                    return
                await asyncio.sleep(min(s.retry_period, max(0.0, deadline - self.clock())))

    def _held_by_other(self) -> bool:
        if self._observed is None:
            return False
        holder = self._observed.spec.get("holderIdentity") or ""
        return bool(holder) and holder != self.settings.identity

    def _lease_spec(self, now_wall: float, previous: dict[str, Any] | None) -> dict[str, Any]:
        s = self.settings
        ours = previous is not None and previous.get("holderIdentity") == s.identity
        transitions = int((previous or {}).get("leaseTransitions") or 0)
        spec = {
            "holderIdentity": s.identity,
            "leaseDurationSeconds": max(1, math.ceil(s.lease_duration)),
            "renewTime": micro_time(now_wall),
            "acquireTime": (previous or {}).get("acquireTime") if ours else micro_time(now_wall),
            "leaseTransitions": transitions if ours or previous is None else transitions + 1,
        }
        return spec

    async def _try_acquire_or_renew(self) -> bool:
        s = self.settings
        try:
            lease = await self.api.request("GET", self.path, timeout=s.renew_deadline)
        except ApiError as err:
            if err.status != 404:
                log.warning("reading lease %s/%s failed: %s", s.namespace, s.name, err)
                return False
            return await self._create()
        except TRANSPORT_ERRORS as err:
            log.warning("reading lease %s/%s failed: %s", s.namespace, s.name, err)
            return False
        spec = dict(lease.get("spec") or {})
        rv = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        now = self.clock()
        if self._observed is None or self._observed.spec != spec:
            self._observed = _Observed(spec, rv, now)
        else:
            self._observed.resource_version = rv
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
        if holder and holder != s.identity and self._observed.at + duration > now:
            return False
        lease["spec"] = self._lease_spec(time.time(), spec)
        try:
            updated = await self.api.request("PUT", self.path, body=lease, timeout=s.renew_deadline)
        except ApiError as err:
            if err.status != 409:
                log.warning("updating lease %s/%s failed: %s", s.namespace, s.name, err)
            return False
        except TRANSPORT_ERRORS as err:
            log.warning("updating lease %s/%s failed: %s", s.namespace, s.name, err)
            return False
        self._record(updated, now)
        return True

    async def _create(self) -> bool:
        s = self.settings
        now = self.clock()
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": s.name, "namespace": s.namespace},
            "spec": self._lease_spec(time.time(), None),
        }
        try:
            created = await self.api.request(
                "POST",
                f"/apis/coordination.k8s.io/v1/namespaces/{s.namespace}/leases",
                body=lease,
                timeout=s.renew_deadline,
            )
        except ApiError as err:
            if err.status != 409:
                log.warning("creating lease %s/%s failed: %s", s.namespace, s.name, err)
            return False
        except TRANSPORT_ERRORS as err:
            log.warning("creating lease %s/%s failed: %s", s.namespace, s.name, err)
            return False
        self._record(created, now)
        return True

    def _record(self, lease: dict[str, Any], started: float) -> None:
        spec = dict(lease.get("spec") or {})
        rv = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        self._observed = _Observed(spec, rv, started)
        if self._leading and self.on_renewed is not None:
            self.on_renewed(started - self._renewed_at)
        # measured from before the request: the lease may have been valid for others' clocks
        # since the moment it was sent
        self._renewed_at = started

    async def release(self) -> None:
        """Give the lease up on a clean shutdown, so a standby need not wait for it to expire."""
        s = self.settings
        self._leading = False
        if not self.acquired.is_set() or self.lost.is_set():
            return
        try:
            lease = await self.api.request("GET", self.path, timeout=5.0)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != s.identity:
                return
            now = micro_time()
            lease["spec"] = {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            await self.api.request("PUT", self.path, body=lease, timeout=5.0)
            log.info("released lease %s/%s", s.namespace, s.name)
        except ApiError as err:
            log.warning("releasing lease %s/%s failed: %s", s.namespace, s.name, err)
        except TRANSPORT_ERRORS as err:
            log.warning("releasing lease %s/%s failed: %s", s.namespace, s.name, err)
        finally:
            if self.metrics is not None:
                self.metrics.set_leader(s.name, False)


class ElectionThread:
    """A LeaderElector on a thread and an event loop of its own, with an API client of its own.

    The scheduling loop's CPU work and the write backlog share the main event loop and the main
    client's token bucket; a renewal queued behind them lost the lease under load. Here the Lease
    requests wait for nothing but their own rate limit (kube-scheduler gives its lock a client of
    its own for the same reason), and the GIL hands this thread the interpreter every switch
    interval however busy the main loop is. `is_leader` may be read from any thread; `acquired`,
    `lost` and `on_started` belong to the main loop, told from here thread-safely."""

    def __init__(
        self,
        make_api: Callable[[], KubeApi],
        settings: LeaseSettings,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self._make_api = make_api
        self.settings = settings
        self._metrics = metrics
        self.acquired = asyncio.Event()
        self.lost = asyncio.Event()
        self.on_started: list[Callable[[], None]] = []
        self._elector: LeaderElector | None = None
        self._main: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._done: asyncio.Future[None] | None = None
        self._release_requested = threading.Event()
        if metrics is not None:
            metrics.set_leader(settings.name, False)

    def is_leader(self) -> bool:
        elector = self._elector
        return elector is not None and elector.is_leader()

    async def run(self) -> None:
        """Start the election's thread; return when the lease is lost (`lost` is set then)."""
        self._main = asyncio.get_running_loop()
        self._done = self._main.create_future()
        self._thread = threading.Thread(target=self._thread_main, name="leader-election", daemon=True)
        self._thread.start()
        await asyncio.shield(self._done)

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._elect())
        finally:
            loop.close()

    async def _elect(self) -> None:
        api = self._make_api()
        elector = LeaderElector(api, self.settings, self._metrics)
        elector.on_renewed = self._renewed
        elector.on_started.append(lambda: self._to_main(self._started))
        self._elector = elector
        outcome: BaseException | None = None
        try:
            await elector.run()
        except asyncio.CancelledError:
            pass  # release(): the lease is handed back below
        except Exception as err:  # a fault of the election is the loss of it
            outcome = err
            log.exception("leader election failed")
        try:
            if self._release_requested.is_set():
                await elector.release()
        finally:
            await api.close()
            self._to_main(lambda: self._finish(outcome))

    def _renewed(self, gap: float) -> None:
        if self._metrics is not None:
            self._metrics.lease_renewed(self.settings.name, gap)

    def _to_main(self, call: Callable[[], None]) -> None:
        main = self._main
        if main is not None and not main.is_closed():
            main.call_soon_threadsafe(call)

    def _started(self) -> None:
        self.acquired.set()
        for callback in self.on_started:
            callback()

    def _finish(self, outcome: BaseException | None) -> None:
        if not self._release_requested.is_set():
            self.lost.set()
        if self._done is not None and not self._done.done():
            if outcome is not None:
                self._done.set_exception(outcome)
            else:
                self._done.set_result(None)

    async def release(self, timeout: float = 5.0) -> None:
        """Stop electing and hand the lease back when it is held (a clean shutdown)."""
        self._release_requested.set()
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # its loop already ended
            loop.call_soon_threadsafe(_cancel_all, loop)
        if self._done is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._done), timeout)
        await asyncio.to_thread(thread.join, 1.0)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
