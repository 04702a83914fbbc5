"""What plugins can reach beyond their own arguments: the snapshot, the clock, nominations,
waiting pods, and the outbox of decisions for the world."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koordpy.framework.clock import Clock
from koordpy.framework.effects import Effect
from koordpy.framework.nominator import Nominator
from koordpy.framework.waiting import WaitingPods

if TYPE_CHECKING:
    from koordpy.framework.profile import Profile


class Handle:
    def __init__(
        self,
        clock: Clock,
        snapshot: Any,
        cache: Any,
        nominator: Nominator,
        waiting_pods: WaitingPods,
        outbox: list[Effect],
    ) -> None:
        self.clock = clock
        # the cache's Snapshot; typed loosely because the framework sits below the cache layer
        self.snapshot = snapshot
        self.cache = cache
        self.nominator = nominator
        self.waiting_pods = waiting_pods
        self.outbox = outbox
        self.profile: Profile | None = None
        # services the scheduler layer plugs in (e.g. gang registry, pod lookup), by name
        self.services: dict[str, Any] = {}

    @property
    def scheduler_name(self) -> str:
        return self.profile.name if self.profile is not None else ""

    def emit(self, effect: Effect) -> None:
        self.outbox.append(effect)
