"""Pods parked at Permit: reserved on a node, waiting to be allowed, rejected or timed out.

The registry knows which of its pods have been settled (allowed or rejected) and keeps their
deadlines in a heap, so resolving them costs what is resolved: a gang of a thousand members waits
at Permit member by member, and looking at every waiting pod after each of them would cost the
square of the gang."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
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
    # set by the registry: the order pods started to wait in, and whom to tell once settled
    seq: int = 0
    on_settled: Callable[[WaitingPod], None] | None = None

    def allow(self, plugin: str) -> None:
        if plugin not in self.pending_plugins:
            return
        self.pending_plugins.discard(plugin)
        if self.allowed and self.on_settled is not None:
            self.on_settled(self)

    def reject(self, plugin: str, message: str) -> None:
        if self.rejected is None:
            self.rejected = message
            self.rejected_by = plugin
            if self.on_settled is not None:
                self.on_settled(self)

    @property
    def allowed(self) -> bool:
        return not self.pending_plugins and self.rejected is None


class WaitingPods:
    """The registry; the scheduler resolves allowed, rejected and timed-out pods after each cycle."""

    __slots__ = ("_deadlines", "_due", "_pods", "_seq")

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}
        self._seq = itertools.count(1)
        # (seq, key) of pods settled or past their deadline; (deadline, seq, key) of every pod.
        # Entries of pods that left (or came back with another seq) are skipped when met.
        self._due: list[tuple[int, str]] = []
        self._deadlines: list[tuple[float, int, str]] = []

    def add(self, wp: WaitingPod) -> None:
        wp.seq = next(self._seq)
        wp.on_settled = self._settled
        self._pods[wp.pod.key] = wp
        heapq.heappush(self._deadlines, (wp.deadline, wp.seq, wp.pod.key))
        if wp.allowed or wp.rejected is not None:
            self._settled(wp)

    def _settled(self, wp: WaitingPod) -> None:
        heapq.heappush(self._due, (wp.seq, wp.pod.key))

    def get(self, key: str) -> WaitingPod | None:
        return self._pods.get(key)

    def pop(self, key: str) -> WaitingPod | None:
        return self._pods.pop(key, None)

    def all(self) -> list[WaitingPod]:
        return list(self._pods.values())

    def _live(self, seq: int, key: str) -> WaitingPod | None:
        wp = self._pods.get(key)
        return wp if wp is not None and wp.seq == seq else None

    def due(self, now: float) -> Iterator[WaitingPod]:
        """The pods allowed, rejected or past their deadline, in the order they started to wait,
        as one pass over all of them in that order would meet them: a pod settled while the pass
        is under way joins it if it started to wait after the pod at hand, else the next pass."""
        while self._deadlines and self._deadlines[0][0] <= now:
            _, seq, key = heapq.heappop(self._deadlines)
            if self._live(seq, key) is not None:
                heapq.heappush(self._due, (seq, key))
        cursor = 0
        later: list[tuple[int, str]] = []
        while self._due:
            seq, key = heapq.heappop(self._due)
            wp = self._live(seq, key)
            if wp is None or seq == cursor:
                continue
            if seq < cursor:
                later.append((seq, key))
                continue
            cursor = seq
            yield wp
        for entry in later:
            heapq.heappush(self._due, entry)

    def next_deadline(self) -> float | None:
        while self._deadlines and self._live(self._deadlines[0][1], self._deadlines[0][2]) is None:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def __len__(self) -> int:
        return len(self._pods)
