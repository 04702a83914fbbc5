"""ElasticQuota status, kept as the reference controllers keep it (`koordpy.status.quota`).

Every ElasticQuota of both API groups comes from kopf's events; the pod request sums and the nodes'
allocatable from `operators.facts.ClusterFacts`. The quotas of one API group share their figures
(Koordinator's runtime quota splits the cluster among all of them), so a change of any of them, of
a pod counted in their sums or of the nodes marks the whole group stale, and the group is computed
again at most once per `min_interval` (Koordinator's controller syncs every second), never before
the facts have synced. One computation costs O(quotas x resources + namespace/label pairs); the
quota tree is rebuilt only when an object changes what the tree reads (not for the status and
annotations written here).

A quota is written only where it differs from what it says (compared as the references compare):
the status through the status subresource, or, where the CRD serves none (Koordinator's own
`scheduling.sigs.k8s.io` CRD), as a field of the object, with Koordinator's annotations (runtime,
request, child-request, non-preemptible request and used: `koordpy.status.quota`).
A quota with a problem (`koordpy.quota.tree`: a cycle, an unknown parent, a child's min above its
parent's, min above max, a name or namespace taken by an older quota, ...) gets the condition
`Valid=False` naming it and one Warning event each time the problem changes; the condition goes
when the problem does. A quota whose used is above its max (a max lowered below what its pods hold)
gets `WithinMax=False` (reason `UsedExceedsMax`, the resources and amounts in its message) and one
Warning event when that begins; the condition goes once used is within max.

Every write is idempotent (nothing is sent where the object says it already) and counted: the
`on_write` callback hears each one with its operation (`elasticquota_status`, `elasticquota`,
`elasticquota_event`) and whether the apiserver took it (`koordpy_api_writes_total`). Where a group's
CRD serves no status subresource, the status is patched onto the object, which raises its
`metadata.generation`; once that is learned (the `/status` path answers 404 and the object's own
patch takes the status), the operator writes there directly, and a condition's observedGeneration
lagging behind is no reason to write again (it always would: each write makes a new generation).
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import kopf

from koordpy.api.elasticquota import KOORDINATOR_GROUP, X_K8S_GROUP
from koordpy.kubeapi.client import JSON, MERGE_PATCH, ApiError, micro_time
from koordpy.quota.tree import QuotaProblem, QuotaTree, build_namespace_quotas, build_quota_tree
from koordpy.status.quota import (
    QuotaStatus,
    koordinator_statuses,
    namespace_statuses,
    parse_quotas,
    quota_patch,
    spec_fingerprint,
)
from operators.memo import controller_in_memo, register_object_events
from operators.podgroup import StatusApi

if TYPE_CHECKING:
    from operators.facts import ClusterFacts

logger = logging.getLogger("koordpy.operators.quota")

VERSION = "v1alpha1"
PLURAL = "elasticquotas"
API_GROUPS = (KOORDINATOR_GROUP, X_K8S_GROUP)
KIND = "ElasticQuota"

# where the handlers find the controller in kopf's memo
MEMO_KEY = "elasticquotas"
REPORTING_CONTROLLER = "koordpy"
EVENT_ACTION = "Validate"
# the operation label of each write in koordpy_api_writes_total
WRITE_STATUS = "elasticquota_status"
WRITE_OBJECT = "elasticquota"
WRITE_EVENT = "elasticquota_event"

# told of every write: its operation and whether the apiserver took it
WriteObserver = Callable[[str, bool], None]
# events.k8s.io/v1 validation limits
_NOTE_LIMIT = 1024
_INSTANCE_LIMIT = 128


@dataclass(frozen=True, slots=True, order=True)
class QuotaKey:
    api_group: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.api_group}:{self.namespace}/{self.name}"

    @property
    def object_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return f"/apis/{self.api_group}/{VERSION}/namespaces/{self.namespace}/{PLURAL}/{self.name}"

    @property
    def status_path(self) -> str:
        return f"{self.path}/status"


def _truncate(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[: limit - 3].decode(errors="ignore") + "..."


class QuotaController:
    """Recomputes the ElasticQuotas' status when the handlers of `register` report a change of an
    object or `facts` one of the figures; `run` computes nothing before `facts.synced` is set."""

    def __init__(
        self,
        api: StatusApi,
        facts: ClusterFacts,
        *,
        min_interval: float = 1.0,
        max_backoff: float = 30.0,
        instance: str | None = None,
        on_write: WriteObserver | None = None,
    ) -> None:
        self._api = api
        self._on_write = on_write
        # per API group, whether its CRD serves the status subresource (None: not known yet)
        self._status_served: dict[str, bool | None] = dict.fromkeys(API_GROUPS)
        self._facts = facts
        self._min_interval = min_interval
        self._max_backoff = max_backoff
        self._instance = _truncate(instance or f"koordpy-{socket.gethostname()}", _INSTANCE_LIMIT)
        # the latest object of each quota, from kopf's events or the answer to our own write
        self._bodies: dict[str, dict[QuotaKey, Mapping[str, Any]]] = {g: {} for g in API_GROUPS}
        self._stale = {g: asyncio.Event() for g in API_GROUPS}
        # what the group's tree was built from, so that only a change of it builds it again
        self._fingerprints: dict[str, dict[QuotaKey, bytes]] = {g: {} for g in API_GROUPS}
        self._tree: QuotaTree | None = None
        self._tree_from: dict[QuotaKey, bytes] | None = None
        self._reported: dict[QuotaKey, tuple[str, str]] = {}

    # ------------------------------------------------------------------ events
    def quota_changed(self, key: QuotaKey, body: Mapping[str, Any] | None) -> None:
        """An ElasticQuota was listed, added or modified (`body` is the object), or deleted (None)."""
        bodies = self._bodies.get(key.api_group)
        if bodies is None:
            return
        if body is None:
            bodies.pop(key, None)
            self._fingerprints[key.api_group].pop(key, None)
            self._reported.pop(key, None)
        else:
            bodies[key] = body
            self._fingerprints[key.api_group][key] = spec_fingerprint(body)
        self.mark_stale(key.api_group)

    def mark_stale(self, api_group: str) -> None:
        stale = self._stale.get(api_group)
        # a group with no quota has nothing to write: pod events cost nothing more there
        if stale is not None and self._bodies[api_group]:
            stale.set()

    # ------------------------------------------------------------------ work
    async def run(self) -> None:
        self._facts.add_quota_listener(self.mark_stale)
        try:
            # figures from a half-listed cluster would be too low
            await self._facts.synced.wait()
            async with asyncio.TaskGroup() as tasks:
                for api_group in API_GROUPS:
                    # the objects' events may all have come before the pods did
                    self.mark_stale(api_group)
                    tasks.create_task(self._recompute_when_stale(api_group), name=f"quota status {api_group}")
        finally:
            self._facts.remove_quota_listener(self.mark_stale)

    async def _recompute_when_stale(self, api_group: str) -> None:
        loop = asyncio.get_running_loop()
        stale = self._stale[api_group]
        last_run = -math.inf
        failures = 0
        while True:
            await stale.wait()
            pause = last_run + self._min_interval - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            stale.clear()
            last_run = loop.time()
            try:
                await self.reconcile(api_group)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failures += 1
                delay = min(0.5 * 2 ** (failures - 1), self._max_backoff)
                level = logging.WARNING if failures > 2 else logging.DEBUG
                logger.log(
                    level, "ElasticQuota status (%s) failed (%s); retrying in %.1fs", api_group, err, delay
                )
                loop.call_later(delay, stale.set)
            else:
                failures = 0

    def statuses(self, api_group: str) -> dict[str, QuotaStatus]:
        """What every quota of the group should say now, by namespace/name."""
        bodies = self._bodies[api_group]
        sums = self._facts.quota_sums
        if api_group == KOORDINATOR_GROUP:
            fingerprints = self._fingerprints[api_group]
            if self._tree is None or self._tree_from != fingerprints:
                self._tree = build_quota_tree(parse_quotas(bodies.values()))
                self._tree_from = dict(fingerprints)
            return koordinator_statuses(self._tree, sums, self._facts.allocatable_total())
        return namespace_statuses(build_namespace_quotas(parse_quotas(bodies.values())), sums)

    async def reconcile(self, api_group: str) -> None:
        """Compute the group's figures and write each quota that says otherwise."""
        if not self._facts.synced.is_set():
            raise RuntimeError("the pod facts are not synced yet")
        bodies = self._bodies[api_group]
        if not bodies:
            return
        statuses = self.statuses(api_group)
        failed: list[str] = []
        for key, body in list(bodies.items()):
            desired = statuses.get(key.object_key)
            if desired is None:
                continue
            try:
                await self._sync(key, body, desired)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failed.append(f"{key.object_key}: {err}")
        if failed:
            raise RuntimeError("; ".join(failed))

    async def _write(
        self, operation: str, method: str, path: str, body: Any, content_type: str
    ) -> dict[str, Any]:
        """One write, counted with its operation and result."""
        ok = False
        try:
            answer = await self._api.request(method, path, body=body, content_type=content_type)
            ok = True
            return answer
        finally:
            if self._on_write is not None:
                self._on_write(operation, ok)

    async def _sync(self, key: QuotaKey, body: Mapping[str, Any], desired: QuotaStatus) -> None:
        now = time.time()
        group = key.api_group
        in_object = self._status_served[group] is False
        patch = quota_patch(body, desired, now, status_bumps_generation=in_object)
        self._log_problem(key, desired.problem)
        if not patch:
            return
        written: dict[str, Any] | None = None
        main: dict[str, Any] = {}
        if patch.annotations is not None:
            main["metadata"] = {"annotations": patch.annotations}
        if patch.status is not None and in_object:
            main["status"] = patch.status
        elif patch.status is not None:
            try:
                written = await self._write(
                    WRITE_STATUS, "PATCH", key.status_path, {"status": patch.status}, MERGE_PATCH
                )
                self._status_served[group] = True
            except ApiError as err:
                if err.status != 404:
                    raise
                # Koordinator's CRD serves no status subresource: the status is a field of the
                # object, written with the annotations in one patch (a deleted object answers 404
                # there too)
                main["status"] = patch.status
        if main:
            try:
                written = await self._write(WRITE_OBJECT, "PATCH", key.path, main, MERGE_PATCH)
            except ApiError as err:
                if err.status == 404:
                    return
                raise
            if "status" in main:
                self._learn_status_in_object(group, written, desired, now)
        if written and self._bodies[group].get(key) is body and written.get("metadata"):
            # the next computation compares with what was written, even before kopf's event of it
            self._bodies[group][key] = written
        logger.debug(
            "ElasticQuota %s: wrote %s", key, {"annotations": patch.annotations, "status": patch.status}
        )
        for problem in patch.reported:
            await self._event(key, body, problem, now)

    def _learn_status_in_object(
        self, group: str, written: Mapping[str, Any] | None, desired: QuotaStatus, now: float
    ) -> None:
        """The object's own patch carried the status: it is where the group's status goes when the
        object took it. When it did not (a status subresource serves it now, and the apiserver drops
        a status written to the object), the next write tries `/status` again."""
        took = isinstance(written, Mapping) and (
            quota_patch(written, desired, now, status_bumps_generation=True).status is None
        )
        self._status_served[group] = False if took else None

    def _log_problem(self, key: QuotaKey, problem: QuotaProblem | None) -> None:
        said = (problem.reason, problem.message) if problem is not None else None
        if self._reported.get(key) == said:
            return
        if said is None:
            self._reported.pop(key, None)
            logger.info("ElasticQuota %s is valid again", key)
            return
        self._reported[key] = said
        logger.warning("ElasticQuota %s stays out of scheduling: %s", key, said[1])

    async def _event(self, key: QuotaKey, body: Mapping[str, Any], problem: QuotaProblem, now: float) -> None:
        """One Warning event on the quota naming its problem (or its used above max); an event the
        apiserver does not take is lost (the condition says the same), as a recorder's are once it
        gives up."""
        meta = body.get("metadata")
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # named as client-go names events: the object's name and the time in hex nanoseconds
            "metadata": {"name": f"{key.name}.{int(now * 1e9):x}", "namespace": key.namespace},
            "eventTime": micro_time(now),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": EVENT_ACTION,
            "reason": problem.reason,
            "type": "Warning",
            "note": _truncate(problem.message, _NOTE_LIMIT),
            "regarding": {
                "apiVersion": f"{key.api_group}/{VERSION}",
                "kind": KIND,
                "namespace": key.namespace,
                "name": key.name,
                **({"uid": uid} if isinstance(uid, str) and uid else {}),
            },
        }
        try:
            await self._write(
                WRITE_EVENT, "POST", f"/apis/events.k8s.io/v1/namespaces/{key.namespace}/events", event, JSON
            )
        except (ApiError, OSError, TimeoutError) as err:
            logger.warning("ElasticQuota %s: the %s event was not recorded: %s", key, problem.reason, err)


def _controller(memo: Any) -> QuotaController:
    return controller_in_memo(memo, MEMO_KEY, QuotaController, "ElasticQuota")


def register(registry: kopf.OperatorRegistry) -> None:
    """The ElasticQuota handlers; the operator's memo must hold a QuotaController under MEMO_KEY."""

    register_object_events(
        registry,
        API_GROUPS,
        VERSION,
        PLURAL,
        "elasticquota-status",
        lambda group, namespace, name, obj, memo: _controller(memo).quota_changed(
            QuotaKey(group, namespace, name), obj
        ),
    )
