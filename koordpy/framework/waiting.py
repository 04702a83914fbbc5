"""Pods parked at Permit: reserved on a node, waiting to be allowed, rejected or timed out."""

from __future__ import annotations

from dataclasses import dataclass, field

from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState


@dataclass(slots=True)
class WaitingPod:
    pod: Pod
    node_name: str
    state: CycleState
    profile: str
    deadline: float
    # plugins that asked it to wait and have not allowed it yet
    pending_plugins: set[str] = field(default_factory=set)
    timeout: float = 0.0
    timed_out: bool = False
    rejected: str | None = None
    rejected_by: str = ""

    def allow(self, plugin: str) -> None:
        self.pending_plugins.discard(plugin)

    def reject(self, plugin: str, message: str) -> None:
        if self.rejected is None:
            self.rejected = message
            self.rejected_by = plugin

    @property
    def allowed(self) -> bool:
        return not self.pending_plugins and self.rejected is None


class WaitingPods:
    """The registry; the scheduler resolves allowed, rejected and timed-out pods after each cycle."""

    __slots__ = ("_pods",)

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, wp: WaitingPod) -> None:
        self._pods[wp.pod.key] = wp

    def get(self, key: str) -> WaitingPod | None:
        return self._pods.get(key)

    def pop(self, key: str) -> WaitingPod | None:
        return self._pods.pop(key, None)

    def all(self) -> list[WaitingPod]:
        return list(self._pods.values())

    def next_deadline(self) -> float | None:
        return min((wp.deadline for wp in self._pods.values()), default=None)

    def __len__(self) -> int:
        return len(self._pods)
