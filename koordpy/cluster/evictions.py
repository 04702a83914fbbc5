"""Evicting a preemption victim."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from koordpy.api import names
from koordpy.cluster.events import EventRecorder, pod_reference
from koordpy.cluster.writes import PodStatusWriter
from koordpy.framework.effects import Evict
from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi, pod_path, rfc3339
from koordpy.kubeapi.informer import meta_field

log = logging.getLogger(__name__)


async def evict(
    e: Evict,
    api: KubeApi,
    pods: Mapping[str, Mapping[str, Any]],
    status_writes: PodStatusWriter,
    events: EventRecorder,
    on_write: Callable[[str, bool], None],
) -> None:
    """Preemption's eviction of one victim, as kube-scheduler's: the DisruptionTarget condition,
    then a graceful delete with the victim's uid as a precondition, then the Preempted event.
    `pods` is the pod informer's store: a victim already gone or going is left alone."""
    victim = e.victim
    raw = pods.get(victim.key)
    if raw is None or meta_field(raw, "uid") != victim.uid or meta_field(raw, "deletionTimestamp"):
        return
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": e.message,
        "lastTransitionTime": rfc3339(),
    }
    marked = await status_writes.patch_status(victim, {"conditions": [condition]}, "disruption_condition")
    if not marked and victim.key not in pods:
        return
    ok = True
    try:
        await api.request(
            "DELETE",
            pod_path(victim.namespace, victim.name),
            body={
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": victim.termination_grace_seconds,
                "preconditions": {"uid": victim.uid},
            },
        )
    except ApiError as err:
        ok = err.status == 404
        if not ok:
            log.warning("deleting preemption victim %s failed: %s", victim.key, err)
    except TRANSPORT_ERRORS as err:
        ok = False
        log.warning("deleting preemption victim %s failed: %s", victim.key, err)
    on_write("preemption_delete", ok)
    if not ok:
        return
    trigger = pods.get(e.trigger_pod)
    events.record(
        pod_reference(victim),
        "Normal",
        names.EVENT_PREEMPTED,
        "Preempting",
        f"Preempted by {e.trigger_pod} on node {e.node_name}",
        related=pod_reference(trigger) if trigger is not None else None,
        controller=e.scheduler_name,
    )
