"""PodGroup status, for both API groups (`scheduling.sigs.k8s.io` and `scheduling.x-k8s.io`).

A PodGroup is reconciled when it changes and when one of its member pods changes. Each reconcile
reads the stored object and takes one step of `koordpy.status.podgroup.next_status` from the stored
status, as the reference controllers do; the write of one step is itself a change, so the phases are
walked one write at a time until the status stops moving. Finished and Failed groups are left alone.

Members are the pods of the group's namespace that name it the way the scheduler reads them: the
label of its API group, or, for `scheduling.sigs.k8s.io`, Koordinator's gang name (the lightweight
name label or the `gang.scheduling.koordinator.sh/name` annotation) when the pod carries no
PodGroup label. Gangs made of annotations alone have no object and get no status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import kopf
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.pod import Pod
from koordpy.api.podgroup import BY_ANNOTATION, SIGS_GROUP, X_K8S_GROUP, PodGroup, gang_reference
from koordpy.status.podgroup import FAILED, FINISHED, MemberCounts, next_status, occupied_by

logger = logging.getLogger("koordpy.operators.podgroup")

VERSION = "v1alpha1"
PLURAL = "podgroups"
API_GROUPS = (SIGS_GROUP, X_K8S_GROUP)
MERGE_PATCH = "application/merge-patch+json"

# where the handlers find the controller in kopf's memo
MEMO_KEY = "podgroups"
# the kopf index of member pods, by the PodGroup they name
MEMBERS_INDEX = "podgroup_members"


@dataclass(frozen=True, slots=True, order=True)
class GroupKey:
    api_group: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.api_group}:{self.namespace}/{self.name}"


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
    """The parts of a pod the status counts, in the pod's own shape (the index keeps this much
    per member, not the whole pod)."""
    owners = [
        {k: ref.get(k) for k in ("kind", "name", "uid", "controller") if k in ref}
        for ref in meta.get("ownerReferences") or []
        if isinstance(ref, Mapping)
    ]
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": uid, "ownerReferences": owners},
        "spec": {"nodeName": spec.get("nodeName") or ""},
        "status": {"phase": status.get("phase") or ""},
    }


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
    """Reconciles PodGroup status; fed by the kopf handlers of `register`."""

    def __init__(self, api: client.ApiClient, *, workers: int = 4, max_backoff: float = 60.0) -> None:
        self._objects = client.CustomObjectsApi(api)
        self._workers = workers
        self._max_backoff = max_backoff
        self.queue: KeyedQueue[GroupKey] = KeyedQueue()
        # the kopf index of members by group; attached at operator startup
        self.members: Mapping[GroupKey, Iterable[Mapping[str, Any]]] | None = None
        # the group each pod was last seen in, so that a pod leaving a group updates that group too
        self._pod_group: dict[str, GroupKey] = {}
        # groups in a final phase, skipped on pod changes without reading them
        self._final: set[GroupKey] = set()
        self._failures: dict[GroupKey, int] = {}
        self._reported_invalid: dict[GroupKey, str] = {}

    # ------------------------------------------------------------------ events
    def podgroup_changed(self, key: GroupKey, phase: str | None, deleted: bool) -> None:
        if deleted or phase not in (FINISHED, FAILED):
            self._final.discard(key)
        else:
            self._final.add(key)
        if deleted:
            self._failures.pop(key, None)
            self._reported_invalid.pop(key, None)
            return
        self.queue.add(key)

    def pod_changed(self, uid: str, key: GroupKey | None, deleted: bool) -> None:
        previous = self._pod_group.pop(uid, None)
        if key is not None and not deleted:
            self._pod_group[uid] = key
        for changed in {k for k in (previous, None if deleted else key) if k is not None}:
            if changed not in self._final:
                self.queue.add(changed)

    # ------------------------------------------------------------------ work
    async def run(self) -> None:
        workers = [
            asyncio.create_task(self._work(), name=f"podgroup-status-{i}") for i in range(self._workers)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

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
        if self.members is None:
            # counting before the pods are indexed would write counts that are too low
            raise RuntimeError("the member index is not attached yet")
        try:
            obj = await self._objects.get_namespaced_custom_object(
                key.api_group, VERSION, key.namespace, PLURAL, key.name
            )
        except ApiException as err:
            if err.status == 404:
                return
            raise
        group = PodGroup.from_dict(obj)
        if group.spec_error is not None:
            problem = str(group.spec_error)
            if self._reported_invalid.get(key) != problem:
                self._reported_invalid[key] = problem
                logger.warning("PodGroup %s is invalid, its status is not updated: %s", key, problem)
            return
        self._reported_invalid.pop(key, None)
        previous = dict(group.status)
        if previous.get("phase") in (FINISHED, FAILED):
            self._final.add(key)
            return
        pods = sorted((Pod.from_dict(m) for m in self.members.get(key, ())), key=lambda p: p.name)
        status = next_status(
            key.api_group, group.min_member, previous, MemberCounts.of(pods), occupied_by(pods), time.time()
        )
        if status == previous:
            return
        logger.debug("PodGroup %s: status %s -> %s", key, previous, status)
        try:
            await self._objects.patch_namespaced_custom_object_status(
                key.api_group,
                VERSION,
                key.namespace,
                PLURAL,
                key.name,
                {"status": status},
                _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # accepted, missing from the stubs
            )
        except ApiException as err:
            if err.status == 404:
                return
            raise
        if status.get("phase") != previous.get("phase"):
            logger.info("PodGroup %s: %s -> %s", key, previous.get("phase") or "(none)", status.get("phase"))


def _controller(memo: Any) -> PodGroupController:
    controller = memo.get(MEMO_KEY) if isinstance(memo, Mapping) else None
    if not isinstance(controller, PodGroupController):
        raise kopf.PermanentError("the PodGroup controller is missing from the operator's memo")
    return controller


def register(registry: kopf.OperatorRegistry) -> None:
    """The PodGroup handlers; the operator's memo must hold a PodGroupController under MEMO_KEY."""

    @kopf.index("pods", id=MEMBERS_INDEX, registry=registry)
    def podgroup_members(
        namespace: str | None,
        name: str,
        uid: str,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        meta: Mapping[str, Any],
        spec: Mapping[str, Any],
        status: Mapping[str, Any],
        **_: Any,
    ) -> dict[GroupKey, dict[str, Any]] | None:
        key = group_of(namespace or "", labels, annotations)
        if key is None:
            return None
        return {key: member_summary(key.namespace, name, uid, meta, spec, status)}

    @kopf.on.startup(id="podgroup-attach-index", registry=registry)
    def attach_member_index(memo: Any, **kwargs: Any) -> None:
        _controller(memo).members = kwargs[MEMBERS_INDEX]

    def podgroup_event(
        resource: kopf.Resource,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        type: str | None,
        memo: Any,
        **_: Any,
    ) -> None:
        phase = status.get("phase") if isinstance(status, Mapping) else None
        key = GroupKey(resource.group, namespace or "", name)
        _controller(memo).podgroup_changed(key, phase, deleted=type == "DELETED")

    for api_group in API_GROUPS:
        kopf.on.event(api_group, VERSION, PLURAL, id=f"podgroup-status-{api_group}", registry=registry)(
            podgroup_event
        )

    @kopf.on.event("pods", id="podgroup-member-pods", registry=registry)
    def member_pod_event(
        namespace: str | None,
        uid: str,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        type: str | None,
        memo: Any,
        **_: Any,
    ) -> None:
        key = group_of(namespace or "", labels, annotations)
        _controller(memo).pod_changed(uid, key, deleted=type == "DELETED")
