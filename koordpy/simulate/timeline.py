"""Timelines in `koordpy simulate`: objects that arrive, finish and leave at virtual times.

Three annotations drive it (Go durations, from virtual time zero):
`simulation.koordpy.io/arrive-after` on any object creates it at that time instead of at zero;
`simulation.koordpy.io/run-for` on a pod (or a workload's pod template) completes it that long
after it is bound; `simulation.koordpy.io/remove-after` deletes a node or a pod at that time.

The world keeps one heap of these events; each costs O(log n). What the report shows per step
(allocated and allocatable resources, pending pods and gangs, preemptions) are running totals that
each bind, completion, eviction and node change updates in place, so a step costs O(resources),
never a walk over the cluster.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.duration import parse_duration as parse_go_duration
from koordpy.api.errors import SpecError
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.api.resources import CPU, MEMORY, is_extended_resource

__all__ = [
    "ARRIVE_AFTER",
    "REMOVE_AFTER",
    "RUN_FOR",
    "TIMELINE_ANNOTATIONS",
    "DurationError",
    "Timeline",
    "Timing",
    "annotation_path",
    "nearest_rank",
    "parse_duration",
    "read_timing",
    "waiting_stats",
]

ARRIVE_AFTER = "simulation.koordpy.io/arrive-after"
RUN_FOR = "simulation.koordpy.io/run-for"
REMOVE_AFTER = "simulation.koordpy.io/remove-after"
TIMELINE_ANNOTATIONS = (ARRIVE_AFTER, RUN_FOR, REMOVE_AFTER)


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (`90s`, `10m`, `1h30m`, `1.5h`, `300ms`, `0`); DurationError for
    anything Go's time.ParseDuration refuses, and for negative durations."""
    try:
        seconds = parse_go_duration(text)
    except SpecError as err:
        raise DurationError(err.message) from None
    if seconds < 0:
        raise DurationError(f"must not be negative, got {text!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class Timing:
    """An object's timeline annotations, in virtual seconds from zero."""

    arrive: float = 0.0
    run_for: float | None = None
    remove: float | None = None


def annotation_path(name: str, under: str = "") -> str:
    return f"{under + '.' if under else ''}metadata.annotations[{name}]"


def read_timing(
    annotations: Mapping[str, Any] | None, allowed: Iterable[str], under: str = ""
) -> tuple[Timing | None, str, str]:
    """The Timing of an object's annotations (None when it has none of them), or the field and the
    message of the first annotation that is malformed or does not belong on this kind of object:
    (None, field, message)."""
    if not annotations:
        return None, "", ""
    found: dict[str, float] = {}
    allowed = set(allowed)
    for name in TIMELINE_ANNOTATIONS:
        raw = annotations.get(name)
        if raw is None:
            continue
        path = annotation_path(name, under)
        if name not in allowed:
            where = {RUN_FOR: "a pod or a workload's pod template", REMOVE_AFTER: "a node or a pod"}
            return None, path, f"{name} applies only to {where.get(name, 'pods')}"
        try:
            found[name] = parse_duration(str(raw))
        except DurationError as err:
            return None, path, f"{err}; expected a Go duration such as 90s, 10m or 1h30m"
    if not found:
        return None, "", ""
    timing = Timing(found.get(ARRIVE_AFTER, 0.0), found.get(RUN_FOR), found.get(REMOVE_AFTER))
    if timing.remove is not None and timing.remove <= timing.arrive:
        return (
            None,
            annotation_path(REMOVE_AFTER, under),
            f"removal at {timing.remove:g}s must come after the arrival at {timing.arrive:g}s",
        )
    return timing, "", ""


# --- statistics ------------------------------------------------------------------------------------


def nearest_rank(ordered: list[float], percent: float) -> float:
    """The nearest-rank percentile of ascending values: the value at rank ceil(p/100 * N), from 1."""
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def waiting_stats(waits: Iterable[float], pending: int) -> dict[str, Any]:
    ordered = sorted(waits)
    if not ordered:
        return {"count": 0, "p50": None, "p90": None, "max": None, "pending": pending}
    return {
        "count": len(ordered),
        "p50": round(nearest_rank(ordered, 50), 3),
        "p90": round(nearest_rank(ordered, 90), 3),
        "max": round(ordered[-1], 3),
        "pending": pending,
    }


# --- the running totals and the event heap ---------------------------------------------------------


def _tracked(name: str) -> bool:
    return name in (CPU, MEMORY) or is_extended_resource(name)


def _shown(amounts: Mapping[str, int], keys: Iterable[str]) -> dict[str, float | int]:
    # cpu in cores (the canonical unit is millicores), the others in their base unit
    return {k: (amounts.get(k, 0) / 1000 if k == CPU else amounts.get(k, 0)) for k in keys}


@dataclass(slots=True)
class _Step:
    at: float
    allocated: dict[str, int]
    allocatable: dict[str, int]
    pending_pods: int
    pending_gangs: int
    preemptions: int


@dataclass(slots=True)
class Timeline:
    """The events still to come and what happened to each pod and to the cluster's totals."""

    _heap: list[tuple[float, int, Callable[[], object]]] = field(default_factory=list)
    _seq: int = 0
    # per pod key: when it was created, bound and finished (completed, deleted or removed)
    created_at: dict[str, float] = field(default_factory=dict)
    scheduled_at: dict[str, float] = field(default_factory=dict)
    finished_at: dict[str, float] = field(default_factory=dict)
    # pods that were running when they were created: they never waited for the scheduler
    preplaced: set[str] = field(default_factory=set)
    # pods that hold a node's resources (bound, not finished), with their node and requests
    holding: dict[str, tuple[str, Pod]] = field(default_factory=dict)
    by_node: dict[str, set[str]] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    # pods created and not yet bound (nor gone), and per gang the pending members
    pending: dict[str, str | None] = field(default_factory=dict)
    gang_pending: dict[str, int] = field(default_factory=dict)
    steps: list[_Step] = field(default_factory=list)
    _now: float | None = None
    _preemptions: int = 0
    resource_names: dict[str, None] = field(default_factory=lambda: {CPU: None, MEMORY: None})

    # ------------------------------------------------------------------ events
    def at(self, when: float, action: Callable[[], object]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, action))

    def next_at(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def fire_due(self, now: float) -> None:
        """Carry out every event due by `now`, in the order they were planned."""
        while self._heap and self._heap[0][0] <= now:
            _, _, action = heapq.heappop(self._heap)
            action()

    # ------------------------------------------------------------------ steps
    def _touch(self, now: float) -> None:
        """Something happens at `now`: the totals as they stood at the end of the previous instant
        become that instant's step."""
        if self._now is not None and now != self._now:
            self._close()
        self._now = now

    def _close(self) -> None:
        if self._now is None:
            return
        self.steps.append(
            _Step(
                self._now,
                dict(self.allocated),
                dict(self.allocatable),
                len(self.pending),
                len(self.gang_pending),
                self._preemptions,
            )
        )
        self._preemptions = 0
        self._now = None

    def _add(self, totals: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
        for name, value in amounts.items():
            if _tracked(name):
                self.resource_names.setdefault(name, None)
                totals[name] = totals.get(name, 0) + sign * value

    # ------------------------------------------------------------------ what happens
    def happened(self, now: float) -> None:
        """An object arrived that changes none of the totals (a PodGroup, a quota...)."""
        self._touch(now)

    def node_added(self, node: Node, now: float) -> None:
        self._touch(now)
        self.nodes[node.name] = node
        self._add(self.allocatable, node.allocatable, 1)

    def node_removed(self, name: str, now: float) -> list[str]:
        """The pods that held the node: the world deletes them."""
        self._touch(now)
        node = self.nodes.pop(name, None)
        if node is not None:
            self._add(self.allocatable, node.allocatable, -1)
        return sorted(self.by_node.get(name, ()))

    def pod_created(self, pod: Pod, gang: str | None, now: float) -> None:
        self._touch(now)
        self.created_at[pod.key] = now
        self.scheduled_at.pop(pod.key, None)
        self.finished_at.pop(pod.key, None)
        if pod.node_name:
            self.preplaced.add(pod.key)
            self._hold(pod, now)
            return
        self.preplaced.discard(pod.key)
        self.pending[pod.key] = gang
        if gang is not None:
            self.gang_pending[gang] = self.gang_pending.get(gang, 0) + 1

    def _unpend(self, key: str) -> None:
        if key not in self.pending:
            return
        gang = self.pending.pop(key)
        if gang is not None:
            left = self.gang_pending[gang] - 1
            if left:
                self.gang_pending[gang] = left
            else:
                del self.gang_pending[gang]

    def _hold(self, pod: Pod, now: float) -> None:
        self.scheduled_at[pod.key] = now
        self.holding[pod.key] = (pod.node_name, pod)
        self.by_node.setdefault(pod.node_name, set()).add(pod.key)
        self._add(self.allocated, pod.requests, 1)

    def pod_bound(self, pod: Pod, now: float) -> None:
        self._touch(now)
        self._unpend(pod.key)
        self._hold(pod, now)

    def pod_evicted(self, now: float) -> None:
        self._touch(now)
        self._preemptions += 1

    def pod_ended(self, key: str, now: float) -> None:
        """The pod completed or was deleted: what it held goes back."""
        self._touch(now)
        self._unpend(key)
        held = self.holding.pop(key, None)
        if held is not None:
            node, pod = held
            on_node = self.by_node.get(node)
            if on_node is not None:
                on_node.discard(key)
                if not on_node:
                    del self.by_node[node]
            self._add(self.allocated, pod.requests, -1)
        if key in self.created_at:
            self.finished_at.setdefault(key, now)

    # ------------------------------------------------------------------ the report
    def timeline(self) -> list[dict[str, Any]]:
        self._close()
        keys = list(self.resource_names)
        return [
            {
                "at": round(s.at, 3),
                "allocated": _shown(s.allocated, keys),
                "allocatable": _shown(s.allocatable, keys),
                "pendingPods": s.pending_pods,
                "pendingGangs": s.pending_gangs,
                "preemptions": s.preemptions,
            }
            for s in self.steps
        ]

    def times_of(self, key: str) -> dict[str, float | None]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {
            "createdAt": rounded(self.created_at.get(key)),
            "scheduledAt": rounded(self.scheduled_at.get(key)),
            "finishedAt": rounded(self.finished_at.get(key)),
        }

    def waiting(
        self, keys: Iterable[str], group_of: Callable[[str], Iterable[tuple[str, str]]]
    ) -> dict[str, dict[str, dict[str, Any]]]:
        """Waiting times (scheduledAt - createdAt) of the pods the scheduler placed, and the count of
        created pods it never placed, per group; `group_of(key)` names the (table, group) pairs a
        pod counts in. Pre-placed pods never waited for the scheduler and are left out."""
        waits: dict[str, dict[str, list[float]]] = {}
        pending: dict[str, dict[str, int]] = {}
        for key in keys:
            created = self.created_at.get(key)
            if created is None or key in self.preplaced:
                continue
            scheduled = self.scheduled_at.get(key)
            for table, group in group_of(key):
                waits.setdefault(table, {}).setdefault(group, [])
                pending.setdefault(table, {}).setdefault(group, 0)
                if scheduled is None:
                    pending[table][group] += 1
                else:
                    waits[table][group].append(scheduled - created)
        return {
            table: {g: waiting_stats(waits[table][g], pending[table][g]) for g in sorted(groups)}
            for table, groups in waits.items()
        }
