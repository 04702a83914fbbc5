"""What plugins can reach beyond their own arguments: the snapshot, the clock, nominations,
waiting pods, the outbox of decisions for the world, the objects the plugins of one scheduler
share (each under a typed key), subscriptions to pod and object events, and what other plugins of
the profile add to preemption and to the queue's order (VictimFilter, QueueShare)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import numpy as np

from koordpy.api.pod import Pod
from koordpy.cache import Cache, Snapshot
from koordpy.framework.clock import Clock
from koordpy.framework.effects import Effect
from koordpy.framework.interfaces import PodMask, QueueShare, VictimFilter, declares
from koordpy.framework.nominator import Nominator
from koordpy.framework.observer import NullObserver, SchedulerObserver
from koordpy.framework.waiting import WaitingPods

if TYPE_CHECKING:
    from koordpy.framework.profile import Profile

T = TypeVar("T")

# (action, pod) with action Add, Update or Delete
PodListener = Callable[[str, Pod], None]
# (action, obj): obj is the API object as a mapping
ObjectHandler = Callable[[str, Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class SharedKey(Generic[T]):
    """The typed name of an object the plugins of one scheduler share (the gang registry, the
    topology view, the PodDisruptionBudgets); declared by the module that owns the object."""

    name: str


class Shared:
    """One scheduler's shared objects and event subscriptions; every profile's handle holds it."""

    __slots__ = ("_objects", "object_handlers", "pod_listeners")

    def __init__(self) -> None:
        self._objects: dict[SharedKey[Any], object] = {}
        self.pod_listeners: list[PodListener] = []
        # kind -> handlers, in subscription order
        self.object_handlers: dict[str, list[ObjectHandler]] = {}

    def get(self, key: SharedKey[T]) -> T | None:
        # the only writer is get_or_create with a factory returning T for this key
        return cast("T | None", self._objects.get(key))

    def get_or_create(self, key: SharedKey[T], create: Callable[[], T]) -> T:
        found = self.get(key)
        if found is None:
            found = create()
            self._objects[key] = found
        return found

    def objects(self) -> Iterator[object]:
        return iter(self._objects.values())


class Handle:
    def __init__(
        self,
        clock: Clock,
        cache: Cache,
        nominator: Nominator,
        waiting_pods: WaitingPods,
        outbox: list[Effect],
        shared: Shared | None = None,
        observer: SchedulerObserver | None = None,
    ) -> None:
        self.clock = clock
        self.cache = cache
        # the cache keeps one Snapshot for its lifetime; plugins read it on every call
        self.snapshot: Snapshot = cache.snapshot
        self.nominator = nominator
        self.waiting_pods = waiting_pods
        self.outbox = outbox
        self.shared = shared if shared is not None else Shared()
        self.observer: SchedulerObserver = observer if observer is not None else NullObserver()
        self.profile: Profile | None = None
        # the profile's plugins that declare VictimFilter and QueueShare, found on first use
        self._victim_filters: tuple[VictimFilter, ...] | None = None
        self._queue_shares: tuple[QueueShare, ...] | None = None

    @property
    def scheduler_name(self) -> str:
        return self.profile.name if self.profile is not None else ""

    def emit(self, effect: Effect) -> None:
        self.outbox.append(effect)

    def share(self, key: SharedKey[T], create: Callable[[], T]) -> T:
        """The scheduler's one object under `key`, created on first use (the creator subscribes it
        to the events it follows)."""
        return self.shared.get_or_create(key, create)

    def on_pod_event(self, listener: PodListener) -> None:
        """Hear every pod the scheduler hears of, pending or bound, before the queues do."""
        self.shared.pod_listeners.append(listener)

    def on_object_event(self, kind: str, handler: ObjectHandler) -> None:
        """Hear every Add, Update and Delete of another kind (PodGroup, PodDisruptionBudget, ...)."""
        self.shared.object_handlers.setdefault(kind, []).append(handler)

    # ------------------------------------------------------------------ preemption rules, queue order
    def victim_filters(self) -> tuple[VictimFilter, ...]:
        """The profile's plugins with preemption rules beyond priority."""
        if self._victim_filters is None:
            if self.profile is None:
                return ()
            plugins = self.profile.plugins.values()
            self._victim_filters = tuple(
                cast(VictimFilter, p) for p in plugins if declares(type(p), VictimFilter)
            )
        return self._victim_filters

    def victim_mask(self, preemptor: Pod, candidates: Sequence[Pod]) -> PodMask:
        """Per candidate, whether the preemptor may evict it: a lower priority (kube-scheduler's
        rule), unless a plugin's rules apply to the preemptor; where several do, each must allow
        it. The opt-out labels and the preemptor's own job are the caller's to leave out."""
        masks = [
            m for f in self.victim_filters() if (m := f.victim_filter(preemptor, candidates)) is not None
        ]
        if not masks:
            priority = preemptor.priority
            return np.fromiter(
                (c.priority < priority for c in candidates), dtype=np.bool_, count=len(candidates)
            )
        out = masks[0]
        for m in masks[1:]:
            out = out & m
        return out

    def victim_rules_apply(self, preemptor: Pod) -> bool:
        """Whether a plugin's rules take the place of the priority rule for this preemptor (a
        victim may then have any priority)."""
        return any(f.victim_filter(preemptor, ()) is not None for f in self.victim_filters())

    @contextlib.contextmanager
    def releasing(self, victims: Sequence[Pod]) -> Iterator[None]:
        """A dry run has taken these pods off their nodes: the plugins that count what pods hold
        count them as gone until the block ends."""
        with contextlib.ExitStack() as stack:
            for f in self.victim_filters():
                stack.enter_context(f.releasing(victims))
            yield

    def queue_share(self, pod: Pod) -> float:
        """How much of its share the pod's tenant uses (0 when no plugin of the profile says)."""
        if self._queue_shares is None:
            if self.profile is None:
                return 0.0
            plugins = self.profile.plugins.values()
            self._queue_shares = tuple(cast(QueueShare, p) for p in plugins if declares(type(p), QueueShare))
        if not self._queue_shares:
            return 0.0
        return max(s.queue_share(pod) for s in self._queue_shares)
