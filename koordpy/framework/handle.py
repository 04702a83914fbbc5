"""What plugins can reach beyond their own arguments: the snapshot, the clock, nominations,
waiting pods, the outbox of decisions for the world, the objects the plugins of one scheduler
share (each under a typed key), and subscriptions to pod and object events."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from koordpy.api.pod import Pod
from koordpy.cache import Cache, Snapshot
from koordpy.framework.clock import Clock
from koordpy.framework.effects import Effect
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
