"""The Job controller's count of pods, for timelines: how many pods a Job keeps running as its pods
complete, fail or are lost, after kube's pkg/controller/job (`manageJob`).

With `completions` set, the Job keeps `min(parallelism, completions - succeeded)` pods active, so a
Job of 10 completions and parallelism 2 runs its pods two at a time until ten have succeeded. With
only `parallelism` (a work queue), it keeps `parallelism` pods active until one succeeds, and from
then on creates none: the pods still running finish the work. An Indexed Job gives each new pod
the lowest completion index that has neither succeeded nor an active pod.

A pod that fails or is lost (its node removed, its preemption) is not active any more, and the Job
replaces it as this rule allows; backoffLimit is not modelled: a Job never fails. A pod deleted by
its own remove-after is given up (the spec's Timelines section): it is not replaced when it goes,
and the Job makes one completion fewer; as its other pods finish, it runs
`min(parallelism, completions - succeeded - given up)` again.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

__all__ = ["JobState"]


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

    def ended(self, key: str, outcome: str) -> bool:
        """The pod `key` left the active pods: `succeeded`, `failed` (to be replaced as the rule
        allows) or `given_up`. False when it was not active (told twice)."""
        if key not in self.active:
            return False
        self.active.discard(key)
        index = self.index_of.pop(key, None)
        if outcome == "succeeded":
            self.succeeded += 1
        elif outcome == "given_up":
            self.given_up += 1
        elif index is not None:
            heapq.heappush(self._free, index)
        return True

    def want_active(self) -> int:
        if self.completions is None:
            return len(self.active) if self.succeeded > 0 else self.parallelism
        return max(0, min(self.parallelism, self.completions - self.succeeded - self.given_up))

    def to_create(self) -> list[int | None]:
        """The pods to create now: for an Indexed Job their completion indexes, lowest missing
        first; None for each pod of the others."""
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
