"""PodGroup status, for both API groups (`scheduling.sigs.k8s.io` and `scheduling.x-k8s.io`).

A PodGroup is reconciled when it changes and when one of its member pods changes. Each reconcile
takes one step of `koordpy.status.podgroup.next_status` from the status of the latest object seen
(kopf's events, or the answer to the controller's own write), as the reference controllers do; the
write of one step is itself a change, so the phases are walked one write at a time until the
status stops moving. A write carries the resourceVersion it was computed from, so a step taken from
an object that has moved on meanwhile is refused by the apiserver and taken again from the newer
one. Finished and Failed groups are left alone. The status goes to the status subresource, or,
where the group's CRD serves none (Koordinator's own `scheduling.sigs.k8s.io` CRD), to the object.

Members are the pods of the group's namespace that name it the way the scheduler reads them: the
label of its API group, or, for `scheduling.sigs.k8s.io`, Koordinator's gang name (the lightweight
name label or the `gang.scheduling.koordinator.sh/name` annotation) when the pod carries no
PodGroup label. Gangs made of annotations alone have no object and get no status. The members come
from `operators.facts.ClusterFacts`; nothing is counted before it has synced. The reference
controllers take the occupant (`occupiedBy`) from the first member their pod list returns; here it
is the member whose name sorts first, the one a list from the apiserver returns first, so the
answer does not depend on the order the pods arrived in.

A `scheduling.sigs.k8s.io` group whose gang annotations the scheduler reads otherwise than written
(a bad value koord-scheduler replaces by a default) has the condition `AnnotationsDefaulted` naming
each; the match policy's default is taken to be Koordinator's, the operator not reading the
scheduler's configuration.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import kopf

from koordpy.api.errors import SpecError
from koordpy.api.podgroup import BY_ANNOTATION, SIGS_GROUP, X_K8S_GROUP, PodGroup, gang_reference
from koordpy.kubeapi.client import MERGE_PATCH, ApiError
from koordpy.status.gang_annotations import podgroup_fallbacks
from koordpy.status.podgroup import (
    FAILED,
    FINISHED,
    MemberCounts,
    next_status,
    occupied_by,
    unschedulable_message,
    with_defaulted_condition,
    with_scheduled_condition,
)
from operators.memo import controller_in_memo, register_object_events

if TYPE_CHECKING:
    from operators.facts import ClusterFacts

logger = logging.getLogger("koordpy.operators.podgroup")

VERSION = "v1alpha1"
PLURAL = "podgroups"
API_GROUPS = (SIGS_GROUP, X_K8S_GROUP)

# where the handlers find the controller in kopf's memo
MEMO_KEY = "podgroups"
# how long the member changes of one group are gathered before its status is computed again
MEMBER_BATCH_SECONDS = 0.5


class StatusApi(Protocol):
    """The one call the status controllers make (`koordpy.kubeapi.KubeApi` in production): a JSON
    request that returns the answer's body and raises `ApiError` for a status outside 2xx."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = ...,
        timeout: float = ...,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True, order=True)
class GroupKey:
    api_group: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.api_group}:{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return f"/apis/{self.api_group}/{VERSION}/namespaces/{self.namespace}/{PLURAL}/{self.name}"

    @property
    def status_path(self) -> str:
        return f"{self.path}/status"


def group_of(namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> GroupKey | None:
    """The PodGroup a pod belongs to, if any."""
    ref = gang_reference(labels, annotations)
    if ref is None:
        return None
    source, name = ref
    # Koordinator counts a gang's pods toward the PodGroup of the same name, however they name it.
    return GroupKey(SIGS_GROUP if source == BY_ANNOTATION else source, namespace, name)


def member_summary(
    namespace: str,
    name: str,
    uid: str,
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
) -> dict[str, Any]:
    """The parts of a pod the status counts, in the pod's own shape (the facts keep this much
    per member, not the whole pod)."""
    owners = [
        {k: ref.get(k) for k in ("kind", "name", "uid", "controller") if k in ref}
        for ref in meta.get("ownerReferences") or []
        if isinstance(ref, Mapping)
    ]
    summary_status: dict[str, Any] = {"phase": status.get("phase") or ""}
    scheduled = scheduled_condition(status.get("conditions"))
    if scheduled is not None:
        # the scheduler's word on a pending member: why its gang is not placed
        summary_status["conditions"] = [dict(zip(_SCHEDULED_FIELDS, scheduled, strict=True))]
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": uid, "ownerReferences": owners},
        "spec": {"nodeName": spec.get("nodeName") or ""},
        "status": summary_status,
    }


# the parts of a member's PodScheduled condition the group's GangScheduled condition is made of
_SCHEDULED_FIELDS = ("type", "status", "reason", "message")


def scheduled_condition(conditions: Any) -> tuple[str, ...] | None:
    """(type, status, reason, message) of a pod's PodScheduled condition, None without one."""
    for c in conditions if isinstance(conditions, list | tuple) else ():
        if isinstance(c, Mapping) and c.get("type") == "PodScheduled":
            return tuple(str(c.get(f) or "") for f in _SCHEDULED_FIELDS)
    return None


def _phase(body: Mapping[str, Any]) -> Any:
    status = body.get("status")
    return status.get("phase") if isinstance(status, Mapping) else None


K = TypeVar("K")


class KeyedQueue(Generic[K]):
    """Keys waiting to be reconciled: a key is queued at most once, and a key added while a worker
    holds it is queued again when the worker is done, so no change is lost and no key is
    reconciled by two workers at once."""

    def __init__(self) -> None:
        self._order: deque[K] = deque()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._again: set[K] = set()
        self._wakeup = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: K) -> None:
        if key in self._active:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._order.append(key)
            self._wakeup.set()

    def add_after(self, key: K, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    async def get(self) -> K:
        while not self._order:
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._order.popleft()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)


class PodGroupController:
    """Reconciles PodGroup status from the objects kopf's handlers (`register`) hand it and the
    members `facts` knows. `run` reconciles nothing before `facts.synced` is set."""

    def __init__(
        self,
        api: StatusApi,
        facts: ClusterFacts,
        *,
        workers: int = 4,
        max_backoff: float = 60.0,
        member_batch: float = MEMBER_BATCH_SECONDS,
    ) -> None:
        self._api = api
        self._member_batch = member_batch
        # groups whose member changes are being gathered before one reconcile
        self._gathering: set[GroupKey] = set()
        self._facts = facts
        self._workers = workers
        self._max_backoff = max_backoff
        self.queue: KeyedQueue[GroupKey] = KeyedQueue()
        # the latest object of each PodGroup, from kopf's events or the answer to our own write
        self._bodies: dict[GroupKey, Mapping[str, Any]] = {}
        self._failures: dict[GroupKey, int] = {}
        self._reported_invalid: dict[GroupKey, str] = {}

    # ------------------------------------------------------------------ events
    def podgroup_changed(self, key: GroupKey, body: Mapping[str, Any] | None) -> None:
        """A PodGroup was listed, added or modified (`body` is the object), or deleted (None)."""
        if body is None:
            self._bodies.pop(key, None)
            self._failures.pop(key, None)
            self._reported_invalid.pop(key, None)
            return
        self._bodies[key] = body
        self.queue.add(key)

    def members_changed(self, key: GroupKey) -> None:
        """A member of the group joined, left, or changed node, phase or owners."""
        body = self._bodies.get(key)
        # no object yet: its first event queues it; a final group never moves again
        if body is None or _phase(body) in (FINISHED, FAILED):
            return
        if self._member_batch <= 0:
            self.queue.add(key)
        elif key not in self._gathering:
            # a gang's members bind within moments of each other: their changes make one status
            # write, not one per member
            self._gathering.add(key)
            asyncio.get_running_loop().call_later(self._member_batch, self._gathered, key)

    def _gathered(self, key: GroupKey) -> None:
        self._gathering.discard(key)
        self.queue.add(key)

    # ------------------------------------------------------------------ work
    async def run(self) -> None:
        self._facts.add_group_listener(self.members_changed)
        try:
            # counting the members of a half-listed cluster would write counts that are too low
            await self._facts.synced.wait()
            workers = [
                asyncio.create_task(self._work(), name=f"podgroup-status-{i}") for i in range(self._workers)
            ]
            try:
                await asyncio.gather(*workers)
            finally:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
        finally:
            self._facts.remove_group_listener(self.members_changed)

    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                delay = min(0.5 * 2 ** (failures - 1), self._max_backoff)
                level = logging.WARNING if failures > 2 else logging.DEBUG
                logger.log(
                    level, "PodGroup %s: status update failed (%s); retrying in %.1fs", key, err, delay
                )
                self.queue.add_after(key, delay)
            else:
                self._failures.pop(key, None)
            finally:
                self.queue.done(key)

    async def reconcile(self, key: GroupKey) -> None:
        """One step of the group's status, written when it differs from the stored one."""
        if not self._facts.synced.is_set():
            raise RuntimeError("the pod facts are not synced yet")
        body = self._bodies.get(key)
        if body is None:
            return
        try:
            group = PodGroup.from_dict(body)
        except SpecError as err:
            self._report_invalid(key, str(err))
            return
        if group.spec_error is not None:
            self._report_invalid(key, str(group.spec_error))
            return
        self._reported_invalid.pop(key, None)
        previous = dict(group.status)
        if previous.get("phase") in (FINISHED, FAILED):
            return
        pods = self._facts.members(key)
        # the owners of the member whose name sorts first: the same answer whatever the order
        # the pods arrived in
        first = [min(pods, key=lambda p: p.name)] if pods else []
        status = next_status(
            key.api_group, group.min_member, previous, MemberCounts.of(pods), occupied_by(first), time.time()
        )
        if key.api_group == SIGS_GROUP:
            # the gang annotations on the PodGroup the scheduler reads otherwise than written
            defaulted = [f.message() for f in podgroup_fallbacks(group)]
            status = with_defaulted_condition(status, defaulted, time.time())
            # why the scheduler leaves the gang pending, as its members' conditions say (the
            # scheduling.x-k8s.io CRD has no conditions to write it to)
            status = with_scheduled_condition(status, unschedulable_message(pods), time.time())
        if status == previous:
            return
        logger.debug("PodGroup %s: status %s -> %s", key, previous, status)
        patch: dict[str, Any] = {"status": status}
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            # computed from this version: the apiserver refuses it (409) if the object moved on
            patch["metadata"] = {"resourceVersion": version}
        try:
            written = await self._write(key, patch)
        except ApiError as err:
            if err.status == 404:
                return
            raise
        if self._bodies.get(key) is body and written.get("metadata"):
            # the next step starts from what was written, even before kopf's event of it arrives
            self._bodies[key] = written
        if status.get("phase") != previous.get("phase"):
            logger.info("PodGroup %s: %s -> %s", key, previous.get("phase") or "(none)", status.get("phase"))

    async def _write(self, key: GroupKey, patch: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._api.request("PATCH", key.status_path, body=patch, content_type=MERGE_PATCH)
        except ApiError as err:
            if err.status != 404:
                raise
        # Koordinator's CRD of scheduling.sigs.k8s.io serves no status subresource: the status is
        # a field of the object itself, and /status answers 404 just as it does for a deleted
        # object. The object's own path tells the two apart; the resourceVersion in the patch
        # keeps a group deleted and created again meanwhile from taking this step.
        return await self._api.request("PATCH", key.path, body=patch, content_type=MERGE_PATCH)

    def _report_invalid(self, key: GroupKey, problem: str) -> None:
        if self._reported_invalid.get(key) != problem:
            self._reported_invalid[key] = problem
            logger.warning("PodGroup %s is invalid, its status is not updated: %s", key, problem)


def _controller(memo: Any) -> PodGroupController:
    return controller_in_memo(memo, MEMO_KEY, PodGroupController, "PodGroup")


def register(registry: kopf.OperatorRegistry) -> None:
    """The PodGroup handlers; the operator's memo must hold a PodGroupController under MEMO_KEY."""

    register_object_events(
        registry,
        API_GROUPS,
        VERSION,
        PLURAL,
        "podgroup-status",
        lambda group, namespace, name, obj, memo: _controller(memo).podgroup_changed(
            GroupKey(group, namespace, name), obj
        ),
    )
