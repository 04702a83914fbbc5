"""Status codes and statuses returned by extension points (kube-scheduler's framework.Status)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    # no preemption on this node can help
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    # a machine-readable reason for the pod's condition when the default does not fit
    # (e.g. InvalidSpec, GangNotReady, SchedulingGated)
    reason: str = ""

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    @property
    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_rejection(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin, self.reason)

    def __str__(self) -> str:
        return self.message or self.code.label


SUCCESS = Status(Code.SUCCESS)
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, tuple(reasons), plugin)


def unresolvable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, tuple(reasons), plugin)


def error(message: str, plugin: str = "") -> Status:
    return Status(Code.ERROR, (message,), plugin)
