"""The in-memory world: a cluster held as API dicts, driven on a virtual clock.

It feeds the scheduler the same events an informer would, carries out the scheduler's decisions in
place (a binding sets `spec.nodeName`; an eviction marks the victim and deletes it after its grace
period), and advances the virtual clock straight to the next deadline whenever nothing is runnable.
With a timeline (see koordpy.simulate.timeline), the next deadline may also be an object's arrival,
a pod's completion, or the removal of a node or a pod.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from koordpy.api import names
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.api.time import format_timestamp
from koordpy.framework.clock import VirtualClock
from koordpy.framework.effects import Bind, Effect, Evict, Nominate, PodUnschedulable, RecordEvent
from koordpy.plugins.coscheduling.gang import membership
from koordpy.scheduler import Scheduler
from koordpy.simulate.jobs import JobState
from koordpy.simulate.timeline import Timeline
from koordpy.simulate.volumes import VolumeWorld
from koordpy.simulate.workloads import replacement_pod

# what the pod garbage collector writes on the pods of a node that is gone, before deleting them
# (kube's pkg/controller/podgc: phase Failed and a DisruptionTarget condition)
DELETION_BY_POD_GC = "DeletionByPodGC"
NODE_GONE_MESSAGE = "PodGC: node no longer exists"
FAILED = "Failed"
SUCCEEDED = "Succeeded"
# the report's phase of a pod its own remove-after deleted
DELETED = "Deleted"


def _other_conditions(status: Mapping[str, Any], kind: str) -> list[Any]:
    """The pod's conditions but those of type `kind` (and the null entries an input may hold)."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return []
    return [c for c in conditions if isinstance(c, Mapping) and c.get("type") != kind]


@dataclass(slots=True)
class Eviction:
    victim: str
    node: str
    preemptor: str
    trigger_pod: str
    message: str


@dataclass(slots=True)
class Removal:
    """A pod the timeline took away: the phase, reason and message the report shows for it."""

    phase: str
    node: str | None
    reason: str | None = None
    message: str | None = None


@dataclass(slots=True)
class MemoryCluster:
    scheduler: Scheduler
    clock: VirtualClock
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    views: dict[str, Pod] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    evictions: list[Eviction] = field(default_factory=list)
    events: list[RecordEvent] = field(default_factory=list)
    _deletions: list[tuple[float, int, str]] = field(default_factory=list)
    _seq: int = 0
    # called after each batch of effects, e.g. to recompute PodGroup status
    after_effects: list[Callable[[], None]] = field(default_factory=list)
    # only when the scenario has a timeline: the events to come and the times of each pod
    timeline: Timeline | None = None
    # the run-for of pods, by key; the pods a workload stamped, to create again; and the pods the
    # timeline took away, with what the report shows of them
    run_for: dict[str, float] = field(default_factory=dict)
    stamped: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    removed: dict[str, Removal] = field(default_factory=dict)
    # pods created by a controller again, in creation order, whose names the input does not hold
    replacements: list[str] = field(default_factory=list)
    _names: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # the Job of each pod a Job created, and the victims whose controller replaces them only once
    # they are gone (a StatefulSet's, or a Job's with podReplacementPolicy Failed)
    jobs: dict[str, JobState] = field(default_factory=dict)
    _replace_when_gone: set[str] = field(default_factory=set)
    # told the key of each pod whose count in its gang may have changed (created, bound,
    # completed, deleted): only with a timeline
    pod_changes: list[Callable[[str], None]] = field(default_factory=list)
    # the status the PodGroup operator last wrote, by gang id, carried through a timeline's run
    group_statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    # when the run stopped at its virtual deadline with something still to happen: the virtual
    # time of the next thing it would have done (see run)
    cut_before: float | None = None
    # the node each pod was last nominated to, kept once it is bound (binding clears the status
    # field) so that the report shows where preemption meant it to go; gone when withdrawn
    nominated: dict[str, str] = field(default_factory=dict)
    # the storage and the controllers acting on it (claims, volumes, their binding)
    volumes: VolumeWorld | None = None

    # ----------------------------------------------------------------------------- objects in
    def add_namespace(self, ns: Namespace) -> None:
        self.scheduler.on_namespace(ns)

    def add_node(self, node: Node) -> None:
        if self.volumes is not None:
            self.volumes.node_added(node)
        self.scheduler.on_node_add(node)
        if self.timeline is not None:
            self.timeline.node_added(node, self.clock.now())

    def add_pod(self, obj: Mapping[str, Any]) -> Pod:
        # copy the levels this world writes to in place; the spec is only ever replaced, never
        # written into, so pods stamped from one template keep sharing it
        raw = dict(obj)
        raw["metadata"] = meta = dict(raw.get("metadata") or {})
        raw["status"] = dict(raw.get("status") or {})
        meta.setdefault("namespace", "default")
        meta.setdefault("creationTimestamp", format_timestamp(self.clock.now()))
        spec = raw.get("spec")
        if isinstance(spec, Mapping) and spec.get("nodeName"):
            raw["status"].setdefault("phase", "Running")
        else:
            raw["status"].setdefault("phase", "Pending")
        pod = Pod.from_dict(raw, creation_ts=self.clock.now())
        again = pod.key in self.views
        self.pods[pod.key] = raw
        self.views[pod.key] = pod
        if again:
            # created again under its old name (a StatefulSet's pod): one entry, the latest pod
            self.deleted.discard(pod.key)
            self.removed.pop(pod.key, None)
        else:
            self.order.append(pod.key)
        if self.volumes is not None:
            # the ephemeral volume controller's claims come with the pod
            self.volumes.pod_created(raw, pod.uid)
        self.scheduler.on_pod_add(pod)
        if self.timeline is not None:
            m = membership(pod)
            self.timeline.pod_created(pod, m.gang_id if m is not None else None, self.clock.now())
            if pod.node_name:
                self._finish_later(pod)
            self._changed(pod.key)
        return pod

    def _replace(self, key: str, raw: dict[str, Any]) -> Pod:
        self.pods[key] = raw
        pod = Pod.from_dict(raw, creation_ts=self.views[key].creation_ts, uid=self.views[key].uid)
        self.views[key] = pod
        return pod

    def delete_pod(self, key: str) -> None:
        pod = self.views.get(key)
        if pod is None or key in self.deleted:
            return
        self.deleted.add(key)
        self.scheduler.on_pod_delete(pod)
        if self.volumes is not None:
            self.volumes.pod_deleted(pod)
        if self.timeline is not None:
            self.timeline.pod_ended(key, self.clock.now())
            self._changed(key)

    def _changed(self, key: str) -> None:
        for hook in self.pod_changes:
            hook(key)

    # ----------------------------------------------------------------------------- decisions out
    def apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Bind):
                self._bind(effect)
            elif isinstance(effect, PodUnschedulable):
                self._unschedulable(effect)
            elif isinstance(effect, Nominate):
                self._set_nominated(effect.pod.key, effect.node_name)
            elif isinstance(effect, Evict):
                self._evict(effect)
            elif isinstance(effect, RecordEvent):
                self.events.append(effect)
        for hook in self.after_effects:
            hook()

    def _bind(self, b: Bind) -> None:
        key = b.pod.key
        if key in self.deleted or key not in self.pods:
            self.scheduler.binding_done(key, "pod not found")
            return
        if self.timeline is not None and b.node_name not in self.timeline.nodes:
            # the API server takes a binding to any name; the pod garbage collector would delete
            # the pod at once, so the world refuses it and the scheduler tries the pod again
            self.scheduler.binding_done(key, f"node {b.node_name} not found")
            return
        if b.volumes is not None and self.volumes is not None:
            # the claims first (kube's BindPodVolumes), the pod once they are bound
            self.volumes.bind(b, partial(self._bind_pod, b))
            return
        self._bind_pod(b)

    def _bind_pod(self, b: Bind) -> None:
        key = b.pod.key
        if key in self.deleted or key not in self.pods:
            self.scheduler.binding_done(key, "pod not found")
            return
        old = self.pods[key]
        spec = old.get("spec")
        raw = {
            **old,
            "spec": {**(spec if isinstance(spec, Mapping) else {}), "nodeName": b.node_name},
            "status": dict(old.get("status") or {}),
        }
        view = self.views[key]
        annotations = view.annotations
        if b.annotations:
            annotations = {**view.annotations, **dict(b.annotations)}
            raw["metadata"] = {**old["metadata"], "annotations": annotations}
        status = raw["status"]
        status["phase"] = "Running"
        status.pop("nominatedNodeName", None)
        conditions = _other_conditions(status, "PodScheduled")
        conditions.append({"type": "PodScheduled", "status": "True"})
        status["conditions"] = conditions
        self.pods[key] = raw
        # only these fields change: no need to parse the whole pod again
        pod = view.with_changes(
            node_name=b.node_name, phase="Running", nominated_node_name="", annotations=annotations, raw=raw
        )
        self.views[key] = pod
        self.scheduler.binding_done(key)
        self.scheduler.on_pod_update(pod)
        if self.timeline is not None:
            self.timeline.pod_bound(pod, self.clock.now())
            self._finish_later(pod)
            self._changed(key)

    def _unschedulable(self, e: PodUnschedulable) -> None:
        key = e.pod.key
        raw = self.pods.get(key)
        if raw is None or key in self.deleted:
            return
        status = raw.setdefault("status", {})
        conditions = _other_conditions(status, "PodScheduled")
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": e.reason, "message": e.message}
        )
        status["conditions"] = conditions
        if e.nominated_node is not None:
            self._set_nominated(key, e.nominated_node)

    def _set_nominated(self, key: str, node: str) -> None:
        raw = self.pods.get(key)
        if raw is None:
            return
        status = raw.setdefault("status", {})
        if node:
            status["nominatedNodeName"] = node
            self.nominated[key] = node
        else:
            status.pop("nominatedNodeName", None)
            self.nominated.pop(key, None)
        # the typed view shows the pod as a read from the API server would; the scheduler is not
        # told: its nominator has the nomination already, and the update would only requeue the
        # pod before its backoff is over
        view = self.views.get(key)
        if view is not None and view.nominated_node_name != node:
            self.views[key] = view.with_changes(nominated_node_name=node)

    def _evict(self, e: Evict) -> None:
        key = e.victim.key
        raw = self.pods.get(key)
        if raw is None or key in self.deleted or raw.get("metadata", {}).get("deletionTimestamp"):
            return
        raw = copy.deepcopy(raw)
        status = raw.setdefault("status", {})
        conditions = _other_conditions(status, "DisruptionTarget")
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": e.message,
            }
        )
        status["conditions"] = conditions
        grace = self.views[key].termination_grace_seconds
        raw["metadata"]["deletionTimestamp"] = format_timestamp(self.clock.now() + grace)
        pod = self._replace(key, raw)
        self.scheduler.on_pod_update(pod)
        self.evictions.append(Eviction(key, e.node_name, e.preemptor, e.trigger_pod, e.message))
        self.events.append(
            RecordEvent(
                e.victim,
                "Normal",
                names.EVENT_PREEMPTED,
                f"Preempted by {e.trigger_pod} on node {e.node_name}",
            )
        )
        self._seq += 1
        heapq.heappush(self._deletions, (self.clock.now() + grace, self._seq, key))
        if self.timeline is not None:
            self.timeline.pod_evicted(self.clock.now())
            self._victim_replaced(key)

    # ----------------------------------------------------------------------------- the timeline
    def _finish_later(self, pod: Pod) -> None:
        """A pod with a run-for completes that long after it is bound (this very pod: one created
        again under its name runs its own time)."""
        run_for = self.run_for.get(pod.key)
        if run_for is None or self.timeline is None:
            return
        self.timeline.at(self.clock.now() + run_for, partial(self.complete_pod, pod.key, pod.uid))

    def _current(self, key: str, uid: str) -> Pod | None:
        pod = self.views.get(key)
        if pod is None or pod.uid != uid or key in self.deleted:
            return None
        return pod

    def complete_pod(self, key: str, uid: str) -> None:
        """The pod's containers exited 0: phase Succeeded; it keeps its node name and gives its
        resources back, as the kubelet's status write does. The scheduler hears of it as a
        deletion: kube-scheduler's pod informer selects only pods that are not terminal, so a pod
        that completes leaves its watch as a delete (and the plugins' Pod/Delete events fire)."""
        pod = self._current(key, uid)
        if pod is None or not pod.node_name or pod.is_terminal:
            return
        raw = {**self.pods[key], "status": {**(self.pods[key].get("status") or {}), "phase": SUCCEEDED}}
        self.pods[key] = raw
        pod = pod.with_changes(phase=SUCCEEDED, raw=raw)
        self.views[key] = pod
        self.scheduler.on_pod_delete(pod)
        if self.timeline is not None:
            self.timeline.pod_ended(key, self.clock.now())
            self._changed(key)
        job = self.jobs.get(key)
        if job is not None and job.ended(key, "succeeded"):
            self._reconcile(job)

    def remove_pod(self, key: str, uid: str) -> None:
        """The pod's remove-after: deleted, as `kubectl delete pod` does. A finished pod stays
        reported as it finished; a pod of a workload is not created again (its owner took it)."""
        pod = self._current(key, uid)
        if pod is None or pod.is_terminal:
            return
        if (pod.raw.get("metadata") or {}).get("deletionTimestamp"):
            return  # a preemption victim on its way out: it is reported as such
        self.removed[key] = Removal(DELETED, pod.node_name or None, None, None)
        self.delete_pod(key)
        job = self.jobs.get(key)
        if job is not None:
            job.ended(key, "given_up")

    def remove_node(self, name: str) -> None:
        """The node's remove-after: its pods get what the pod garbage collector writes (phase
        Failed, DisruptionTarget DeletionByPodGC) and are deleted; the pods a workload stamped are
        created again by their controller, to be scheduled again."""
        if self.timeline is None:
            return
        for key in self.timeline.node_removed(name, self.clock.now()):
            pod = self.views[key]
            raw = self.pods[key]
            if not (raw.get("metadata") or {}).get("deletionTimestamp"):
                status = dict(raw.get("status") or {})
                conditions = _other_conditions(status, "DisruptionTarget")
                conditions.append(
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": DELETION_BY_POD_GC,
                        "message": NODE_GONE_MESSAGE,
                    }
                )
                status["conditions"] = conditions
                status["phase"] = FAILED
                self.pods[key] = {**raw, "status": status}
                self.views[key] = pod.with_changes(phase=FAILED, raw=self.pods[key])
                self.removed[key] = Removal(FAILED, name, DELETION_BY_POD_GC, NODE_GONE_MESSAGE)
            self.delete_pod(key)
            if key in self.removed:
                self._lost(key)
        self.scheduler.on_node_delete(name)

    def _lost(self, key: str) -> None:
        """A pod of a workload failed or went: its controller makes up for it, unless that failure
        fails its Job (see koordpy.simulate.jobs)."""
        job = self.jobs.get(key)
        if job is not None:
            if job.ended(key, "failed", self._true_conditions(key)):
                if job.failed_reason is None:
                    self._reconcile(job)
                elif job.active:
                    self._fail_job(job)
            return
        template = self.stamped.get(key)
        if template is not None:
            self._create_again(key, template)

    def _victim_replaced(self, key: str) -> None:
        """A preemption victim is terminating: a ReplicaSet's (a Deployment's) or a Job's is
        replaced at once, as their controllers count terminating pods as gone; a StatefulSet's
        (or a Job's with podReplacementPolicy Failed) once it is gone."""
        template = self.stamped.get(key)
        if template is None:
            return
        job = self.jobs.get(key)
        owner = str(template["metadata"]["ownerReferences"][0]["kind"])
        if owner == "StatefulSet" or (job is not None and not job.replace_terminating):
            self._replace_when_gone.add(key)
            return
        self._lost(key)

    def _grace_over(self, key: str) -> None:
        self.delete_pod(key)
        if key in self._replace_when_gone:
            self._replace_when_gone.discard(key)
            self._lost(key)

    def _true_conditions(self, key: str) -> frozenset[str]:
        status = self.pods[key].get("status") or {}
        conditions = status.get("conditions") if isinstance(status, Mapping) else None
        return frozenset(
            str(c.get("type"))
            for c in (conditions if isinstance(conditions, list) else [])
            if isinstance(c, Mapping) and c.get("status") == "True"
        )

    def _fail_job(self, job: JobState) -> None:
        """The Job failed: its controller deletes the pods still active, pending or running (kube's
        syncJob, deleteActivePods), and counts them failed, as it counts every pod deleted before it
        succeeded; the report shows them Deleted with the Job's reason."""
        message = f"Job {job.name} failed: {job.failed_message}"
        for key in sorted(job.active):
            pod = self.views[key]
            if key in self.deleted or pod.is_terminal:
                continue
            job.failed += 1
            self.removed[key] = Removal(DELETED, pod.node_name or None, job.failed_reason, message)
            self.delete_pod(key)
        job.active.clear()
        job.index_of.clear()

    def _reconcile(self, job: JobState) -> None:
        """The Job controller's sync after one of its pods left: the pods its rule asks for now."""
        template = self.stamped.get(job.template)
        if template is None:
            return
        for index in job.to_create():
            key = self._create_again(job.template, template, index)
            self.jobs[key] = job
            job.started(key, index)

    def _create_again(self, key: str, template: Mapping[str, Any], index: int | None = None) -> str:
        """The controller replaces a pod it lost (or a Job adds one like `key`): a StatefulSet
        under the same name, the others under the next free name of the workload. The new key."""
        namespace = key.split("/", 1)[0]
        raw = replacement_pod(template, lambda name: f"{namespace}/{name}" in self.views, self._names, index)
        new_key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
        self.stamped[new_key] = template
        if key in self.run_for:
            self.run_for[new_key] = self.run_for[key]
        if new_key != key:
            self.replacements.append(new_key)
        self.add_pod(raw)
        return new_key

    # ----------------------------------------------------------------------------- the loop
    def run(self, max_virtual_seconds: float) -> None:
        """Schedule until nothing more can happen, or the virtual deadline.

        Pods left in the unschedulable pool do not keep the run going: nothing in the cluster
        changes any more, so the pool's periodic flush would only repeat the same verdict."""
        end = self.clock.now() + max_virtual_seconds
        sched = self.scheduler
        self.apply(sched.drain())
        while True:
            if sched.schedule_one():
                self.apply(sched.drain())
                continue
            times = [
                t
                for t in (
                    sched.next_wakeup(include_flush=False),
                    self._deletions[0][0] if self._deletions else None,
                    self.timeline.next_at() if self.timeline is not None else None,
                    self.volumes.next_deadline() if self.volumes is not None else None,
                )
                if t is not None
            ]
            if not times:
                break
            t = max(min(times), self.clock.now())
            if t > end:
                # the run is cut, not over: the report says so (a silent cut reads as an outcome)
                self.cut_before = t
                self.clock.advance_to(end)
                break
            self.clock.advance_to(t)
            while self._deletions and self._deletions[0][0] <= self.clock.now():
                _, _, key = heapq.heappop(self._deletions)
                self._grace_over(key)
            if self.volumes is not None:
                self.volumes.fire_due(self.clock.now())
            due = self.timeline.next_at() if self.timeline is not None else None
            if self.timeline is not None and due is not None and due <= self.clock.now():
                # the objects of one instant arrive together: a gang's gate sees all its members
                with sched.bulk():
                    self.timeline.fire_due(self.clock.now())
            sched.tick()
            self.apply(sched.drain())
