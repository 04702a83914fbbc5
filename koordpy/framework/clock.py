"""The clock the world gives the core. The core only ever asks `now()`; waiting is the world's job
(the real event loop, or the simulator jumping to the next deadline)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class RealClock:
    """Wall-clock seconds since the epoch, for `koordpy run`."""

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """Time that only moves when told to; the simulator and tests drive it."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        if t > self._now:
            self._now = t

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)
