"""The PodGroup status a controller writes, for each API group.

`scheduling.sigs.k8s.io` (Koordinator's controller): Pending -> PreScheduling once enough pods
exist -> Scheduling (with scheduleStartTime) until `scheduled` reaches minMember -> Scheduled ->
Running once running+succeeded reach it; Failed and Finished override.
`scheduling.x-k8s.io` (scheduler-plugins' controller): Pending -> Scheduling once enough pods exist
-> Running once running+succeeded reach minMember; Failed and Finished override.

Each call is one reconcile step: it takes the previous status and returns the next one, so calling
it on every change walks the same phases a controller would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.pod import Pod
from koordpy.api.podgroup import SIGS_GROUP
from koordpy.api.time import format_timestamp

PENDING = "Pending"
PRE_SCHEDULING = "PreScheduling"
SCHEDULING = "Scheduling"
SCHEDULED = "Scheduled"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class MemberCounts:
    total: int
    scheduled: int
    running: int
    succeeded: int
    failed: int

    @staticmethod
    def of(pods: Iterable[Pod]) -> MemberCounts:
        total = scheduled = running = succeeded = failed = 0
        for p in pods:
            total += 1
            if p.node_name:
                scheduled += 1
            if p.phase == "Running":
                running += 1
            elif p.phase == "Succeeded":
                succeeded += 1
            elif p.phase == "Failed":
                failed += 1
        return MemberCounts(total, scheduled, running, succeeded, failed)


def occupied_by(pods: Iterable[Pod]) -> str | None:
    """`<namespace>/<owner name>` for the owners of one member pod, sorted and comma-joined."""
    for p in pods:
        owners = sorted(f"{p.namespace}/{o.name}" for o in p.owners)
        return ",".join(owners) if owners else None
    return None


def next_status(
    api_group: str,
    min_member: int,
    previous: Mapping[str, Any],
    counts: MemberCounts,
    occupied: str | None,
    now: float,
) -> dict[str, Any]:
    status = dict(previous)
    phase = status.get("phase") or ""
    if phase in (FINISHED, FAILED):
        return status
    if api_group == SIGS_GROUP:
        status["scheduled"] = counts.scheduled
    status["running"] = counts.running
    status["succeeded"] = counts.succeeded
    status["failed"] = counts.failed
    if phase == "":
        status["phase"] = PENDING
        return status
    if api_group == SIGS_GROUP:
        if phase == PENDING:
            if counts.total >= min_member and min_member > 0:
                status["phase"] = PRE_SCHEDULING
                if occupied:
                    status["occupiedBy"] = occupied
            return status
        if counts.total == 0:
            status["phase"] = PENDING
            return status
        if counts.scheduled < min_member:
            status["phase"] = SCHEDULING
            status.setdefault("scheduleStartTime", format_timestamp(now))
        else:
            status["phase"] = SCHEDULED
        if status["phase"] == SCHEDULED and counts.succeeded + counts.running >= min_member:
            status["phase"] = RUNNING
    else:
        if phase == PENDING:
            if counts.total >= min_member:
                status["phase"] = SCHEDULING
                if occupied:
                    status["occupiedBy"] = occupied
            return status
        if counts.total < min_member:
            status["phase"] = PENDING
            return status
        status["phase"] = RUNNING if counts.succeeded + counts.running >= min_member else SCHEDULING
    if counts.failed and counts.failed + counts.running + counts.succeeded >= min_member:
        status["phase"] = FAILED
    if counts.succeeded >= min_member:
        status["phase"] = FINISHED
    return status


def settle(
    api_group: str,
    min_member: int,
    previous: Mapping[str, Any],
    counts: MemberCounts,
    occupied: str | None,
    now: float,
) -> dict[str, Any]:
    """Reconcile until the status stops changing (a controller requeues on its own writes)."""
    status = dict(previous)
    for _ in range(6):
        nxt = next_status(api_group, min_member, status, counts, occupied, now)
        if nxt == status:
            break
        status = nxt
    return status
