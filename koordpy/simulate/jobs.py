"""The Job controller's count of pods, for timelines: how many pods a Job keeps running as its pods
complete, fail or are lost, after kube's pkg/controller/job (`manageJob`).

With `completions` set, the Job keeps `min(parallelism, completions - succeeded)` pods active, so a
Job of 10 completions and parallelism 2 runs its pods two at a time until ten have succeeded. With
only `parallelism` (a work queue), it keeps `parallelism` pods active until one succeeds, and from
then on creates none: the pods still running finish the work. An Indexed Job gives each new pod
the lowest completion index that has neither succeeded nor an active pod.

A pod that fails or is lost (its node removed, its preemption) is not active any more, and the Job
replaces it as this rule allows. Such a pod counts as failed, as the controller counts a pod that
is deleted before it succeeded: once more pods failed than `backoffLimit` (6 by default), the Job
is Failed (BackoffLimitExceeded), creates no more pods and deletes those still active. A
`podFailurePolicy` is honoured for its rules on pod conditions (`onPodConditions`): every pod that
fails in a simulation carries DisruptionTarget (preemption, the pod garbage collector), so a rule
on it may Ignore the failure (not counted, replaced), FailJob (the Job fails at once, reason
PodFailurePolicy) or Count it; rules on exit codes never match, as no container exits with a code
here, and FailIndex is read as Count. A pod deleted by
its own remove-after is given up (the spec's Timelines section): it is not replaced when it goes,
and the Job makes one completion fewer; as its other pods finish, it runs
`min(parallelism, completions - succeeded - given up)` again.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BACKOFF_LIMIT_EXCEEDED",
    "DEFAULT_BACKOFF_LIMIT",
    "POD_FAILURE_POLICY",
    "JobState",
    "job_statuses",
]

# kube's batch/v1 default, and the reasons of the Job's Failed condition (pkg/controller/job)
DEFAULT_BACKOFF_LIMIT = 6
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
POD_FAILURE_POLICY = "PodFailurePolicy"


@dataclass(slots=True)
class JobState:
    """One Job as its controller counts it; `template` names a pod it stamped, the model of the
    pods it creates later."""

    template: str
    parallelism: int
    completions: int | None
    indexed: bool
    # kube's podReplacementPolicy: TerminatingOrFailed (the default without a podFailurePolicy)
    # replaces a terminating pod at once, Failed only once it is gone
    replace_terminating: bool = True
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    # the podFailurePolicy's rules on pod conditions, in order: (action, condition types)
    failure_rules: tuple[tuple[str, frozenset[str]], ...] = ()
    failed: int = 0
    # namespace/name, for the report
    name: str = ""
    # once the Job failed: the reason and message of its Failed condition
    failed_reason: str | None = None
    failed_message: str | None = None
    active: set[str] = field(default_factory=set)
    succeeded: int = 0
    given_up: int = 0
    # an Indexed Job's index per active pod, the indexes to hand out again (lowest first), and
    # the lowest index never handed out
    index_of: dict[str, int] = field(default_factory=dict)
    _free: list[int] = field(default_factory=list)
    _next_index: int = 0

    def started(self, key: str, index: int | None) -> None:
        """A pod of the Job was created (stamped at the start, or by `to_create`)."""
        self.active.add(key)
        if index is not None:
            self.index_of[key] = index
            self._next_index = max(self._next_index, index + 1)

    def ended(self, key: str, outcome: str, conditions: frozenset[str] = frozenset()) -> bool:
        """The pod `key` left the active pods: `succeeded`, `failed` (with the types of its true
        conditions; to be replaced as the rule allows) or `given_up`. False when it was not active
        (told twice)."""
        if key not in self.active:
            return False
        self.active.discard(key)
        index = self.index_of.pop(key, None)
        if outcome == "succeeded":
            self.succeeded += 1
        elif outcome == "given_up":
            self.given_up += 1
        else:
            self._failed(key, conditions)
            if index is not None:
                heapq.heappush(self._free, index)
        return True

    def _failed(self, key: str, conditions: frozenset[str]) -> None:
        # the first podFailurePolicy rule whose condition the pod has decides, as in the controller
        action = next((a for a, types in self.failure_rules if types & conditions), "Count")
        if action == "Ignore":
            return
        self.failed += 1
        if self.failed_reason is not None:
            return
        if action == "FailJob":
            rule = next(i for i, (a, types) in enumerate(self.failure_rules) if types & conditions)
            self.failed_reason = POD_FAILURE_POLICY
            self.failed_message = f"Pod {key} has condition matching FailJob rule at index {rule}"
        elif self.failed > self.backoff_limit:
            self.failed_reason = BACKOFF_LIMIT_EXCEEDED
            self.failed_message = "Job has reached the specified backoff limit"

    def want_active(self) -> int:
        if self.completions is None:
            return len(self.active) if self.succeeded > 0 else self.parallelism
        return max(0, min(self.parallelism, self.completions - self.succeeded - self.given_up))

    def to_create(self) -> list[int | None]:
        """The pods to create now: for an Indexed Job their completion indexes, lowest missing
        first; None for each pod of the others. A failed Job creates none."""
        if self.failed_reason is not None:
            return []
        count = self.want_active() - len(self.active)
        if count <= 0:
            return []
        if not self.indexed:
            return [None] * count
        out: list[int | None] = []
        limit = self.completions if self.completions is not None else 0
        while len(out) < count:
            if self._free:
                out.append(heapq.heappop(self._free))
            elif self._next_index < limit:
                out.append(self._next_index)
                self._next_index += 1
            else:
                break
        return out


def job_statuses(jobs: Iterable[JobState]) -> list[dict[str, Any]]:
    """The report's `jobs`: each Job once, in input order, with the counts and the condition its
    controller would write: Failed (with its reason), Complete, or Running while it has work."""
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for job in jobs:
        if id(job) in seen:
            continue
        seen.add(id(job))
        if job.failed_reason is not None:
            phase = "Failed"
        elif job.completions is not None:
            phase = "Complete" if job.succeeded >= job.completions else "Running"
        else:
            phase = "Complete" if job.succeeded > 0 and not job.active else "Running"
        namespace, _, name = job.name.partition("/")
        out.append(
            {
                "namespace": namespace,
                "name": name,
                "phase": phase,
                "active": len(job.active),
                "succeeded": job.succeeded,
                "failed": job.failed,
                "reason": job.failed_reason,
                "message": job.failed_message,
            }
        )
    return out
