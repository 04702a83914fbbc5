"""Where the scheduler and its plugins report what they did (Prometheus in production; nothing
in tests), and what parts of it may contribute at scrape time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable


class SchedulerObserver(Protocol):
    # one pod's attempt, when it ended: "scheduled" once bound, "unschedulable" when rejected (up
    # to Permit and its wait), "error" otherwise; `seconds` from the cycle's start to that end
    def attempt(self, result: str, profile: str, seconds: float) -> None: ...
    # PreFilter to the chosen node (or, when none fits, to the end of PostFilter)
    def algorithm(self, seconds: float) -> None: ...
    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None: ...
    # one plugin at one extension point; only on the cycles chosen for plugin timing
    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None: ...
    # all the plugins of one extension point, on every cycle
    def point_done(self, point: str, status: str, profile: str, seconds: float) -> None: ...
    # a plugin looked at `nodes` nodes (PreFilter and PreScore: 1 per run)
    def evaluated(self, point: str, plugin: str, profile: str, nodes: int) -> None: ...
    # a pod that waited at Permit was allowed ("Success") or rejected ("Unschedulable")
    def permit_waited(self, result: str, seconds: float) -> None: ...
    # after PostFilter ran for a pod: how many victims it chose to evict (0 when preemption found none)
    def preemption(self, profile: str, victims: int) -> None: ...
    def gang_event(self, event: str, value: float) -> None: ...
    # a cache consistency check: "consistent", "repaired" or "failed" (a repair that did not hold)
    def cache_check(self, result: str) -> None: ...


class NullObserver:
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        pass

    def algorithm(self, seconds: float) -> None:
        pass

    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None:
        pass

    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None:
        pass

    def point_done(self, point: str, status: str, profile: str, seconds: float) -> None:
        pass

    def evaluated(self, point: str, plugin: str, profile: str, nodes: int) -> None:
        pass

    def permit_waited(self, result: str, seconds: float) -> None:
        pass

    def preemption(self, profile: str, victims: int) -> None:
        pass

    def gang_event(self, event: str, value: float) -> None:
        pass

    def cache_check(self, result: str) -> None:
        pass


@runtime_checkable
class GaugeSource(Protocol):
    """A shared object with gauges computed when metrics are scraped (name -> value)."""

    def gauges(self) -> Mapping[str, float]: ...


@runtime_checkable
class Timed(Protocol):
    """A shared object that needs the scheduler's `tick()` at a virtual or real time."""

    def next_deadline(self) -> float | None: ...
