"""The PodGroup status a controller writes, for each API group.

`scheduling.sigs.k8s.io` (Koordinator's controller): Pending -> PreScheduling once enough pods
exist -> Scheduling (with scheduleStartTime) until `scheduled` reaches minMember -> Scheduled ->
Running once running+succeeded reach it; Failed and Finished override.
`scheduling.x-k8s.io` (scheduler-plugins' controller): Pending -> Scheduling once enough pods exist
-> Running once running+succeeded reach minMember; Failed and Finished override. Reaching Scheduling
the first time records scheduleStartTime, as Koordinator's controller does: scheduler-plugins' CRD
carries the field and its controller reads it, but since its v0.26 releases nothing there writes it
(before, its Coscheduling plugin set it when the group was first left short of minMember), so
readers would otherwise never see when scheduling began.
In both groups occupiedBy is recorded with the step out of Pending: the owners of one member pod.

Each call is one reconcile step: it takes the previous status and returns the next one, so calling
it on every change walks the same phases a controller would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api import names
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
                status.setdefault("scheduleStartTime", format_timestamp(now))
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
    if api_group != SIGS_GROUP and status["phase"] == SCHEDULING:
        status.setdefault("scheduleStartTime", format_timestamp(now))
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


# ---------------------------------------------------------------- gang annotations read otherwise
# the condition of a PodGroup whose gang annotations the scheduler reads otherwise than written
ANNOTATIONS_DEFAULTED = "AnnotationsDefaulted"
# a condition's message is kept well under the 32768 characters the CRD allows
MAX_CONDITION_MESSAGE = 4096


def with_defaulted_condition(
    status: Mapping[str, Any], messages: Sequence[str], now: float
) -> dict[str, Any]:
    """`status` with the condition AnnotationsDefaulted=True naming every gang annotation of the
    PodGroup that the scheduler reads otherwise than written, and what it uses instead, while
    there is one; without it once there is none. Other conditions are kept as they are, and the
    transition time stays while the condition does."""
    message = "; ".join(messages) if messages else None
    return _with_condition(
        status, ANNOTATIONS_DEFAULTED, "True", names.GANG_ANNOTATION_DEFAULTED, message, now
    )


def _with_condition(
    status: Mapping[str, Any], kind: str, value: str, reason: str, message: str | None, now: float
) -> dict[str, Any]:
    """`status` with the condition `kind` set (`message` given) or dropped (None)."""
    out = dict(status)
    stored = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    conditions = [c for c in stored if c.get("type") != kind]
    if message is not None:
        old = next((c for c in stored if c.get("type") == kind), None)
        since = old.get("lastTransitionTime") if old is not None and old.get("status") == value else None
        if len(message) > MAX_CONDITION_MESSAGE:
            message = message[: MAX_CONDITION_MESSAGE - 3] + "..."
        conditions.append(
            {
                "type": kind,
                "status": value,
                "reason": reason,
                "message": message,
                "lastTransitionTime": since or format_timestamp(now),
            }
        )
    if conditions:
        out["conditions"] = conditions
    elif "conditions" in status:
        # null removes the field in a merge patch; an empty list would stay behind
        out["conditions"] = None
    return out


# ---------------------------------------------------------------- why the gang is not placed
# the condition of a PodGroup whose gang the scheduler tried and could not place: False with the
# scheduler's message (what is missing and what would make the gang fit) until it is placed
GANG_SCHEDULED = "GangScheduled"
_PLACED = (SCHEDULED, RUNNING, FINISHED, FAILED)


def unschedulable_message(pods: Iterable[Pod]) -> str | None:
    """Why the scheduler leaves the group's members pending: the message of the PodScheduled=False
    condition (reason Unschedulable) of the pending member whose name sorts first. The scheduler
    gives every pending member of a gang group the group's one message, so any member would do;
    the first by name gives the same answer whatever order the pods arrived in."""
    found: tuple[str, str] | None = None
    for p in pods:
        if p.node_name:
            continue
        for c in p.conditions:
            if (
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == names.UNSCHEDULABLE
                and isinstance(c.get("message"), str)
                and (found is None or p.name < found[0])
            ):
                found = (p.name, c["message"])
    return found[1] if found is not None else None


def with_scheduled_condition(status: Mapping[str, Any], message: str | None, now: float) -> dict[str, Any]:
    """`status` with GangScheduled=False (reason Unschedulable) carrying `message` while the group is
    not placed and the scheduler has said why; without it otherwise."""
    if status.get("phase") in _PLACED:
        message = None
    return _with_condition(status, GANG_SCHEDULED, "False", names.UNSCHEDULABLE, message, now)
