"""The plugin contract: one protocol per extension point, the table of extension points, the
plugin base class and the results extension points return.

A plugin declares the extension points it implements by naming their protocols among its bases:

    class NodePorts(Plugin, PreFilterPlugin, FilterPlugin): ...

The declaration is what counts (a method with the right name on an undeclared class is not
called), and mypy checks every declared method against its protocol, so a plugin with a wrong
`filter` or `score` signature fails `make lint`. Filters and scores are vectorized: they receive an
array of node rows and answer for all of them at once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import Status

if TYPE_CHECKING:
    from koordpy.framework.diagnosis import Diagnosis
    from koordpy.framework.handle import Handle

# node rows of the snapshot, and one int64 score per row
Rows = npt.NDArray[np.int64]
Scores = npt.NDArray[np.int64]
# one verdict per pod of a sequence
PodMask = npt.NDArray[np.bool_]

MAX_NODE_SCORE = 100


# ------------------------------------------------------------------------------ extension points
class Named(Protocol):
    NAME: ClassVar[str]


@runtime_checkable
class QueueSortPlugin(Named, Protocol):
    """Orders the active queue: smaller keys pop first."""

    def sort_key(self, info: QueuedPodInfo) -> tuple[Any, ...]: ...


@runtime_checkable
class PreEnqueuePlugin(Named, Protocol):
    """Whether a pod may enter the active queue at all (a non-success status gates it)."""

    def pre_enqueue(self, pod: Pod) -> Status | None: ...


@runtime_checkable
class PreEnqueueRecheck(Named, Protocol):
    """A PreEnqueue plugin that names the gated pods whose verdict may have changed since it was
    last asked; such a plugin is never asked about every gated pod on every cluster event."""

    def gated_pods_to_recheck(self) -> Iterable[str]: ...


@runtime_checkable
class PreFilterPlugin(Named, Protocol):
    """Once per cycle before Filter: may narrow the nodes to try, reject the pod outright, or
    answer SKIP (then its Filter is left out for this pod)."""

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]: ...


@runtime_checkable
class PreFilterExtensions(Named, Protocol):
    """Keeps a PreFilter's cycle state true when other pods are tentatively added to or removed
    from a node (preemption dry runs, nominated pods)."""

    def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None: ...

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None: ...


@runtime_checkable
class FilterPlugin(Named, Protocol):
    """Which rows can run the pod (None: every row passes)."""

    def filter(self, state: CycleState, pod: Pod, rows: Rows) -> FilterResult | None: ...


@runtime_checkable
class PostFilterPlugin(Named, Protocol):
    """Runs when no node fits (preemption)."""

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult: ...


@runtime_checkable
class PreScorePlugin(Named, Protocol):
    """Once per cycle before Score, over the feasible rows (SKIP leaves the plugin's Score out)."""

    def pre_score(self, state: CycleState, pod: Pod, rows: Rows) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Named, Protocol):
    """One score per feasible row."""

    def score(self, state: CycleState, pod: Pod, rows: Rows) -> Scores: ...


@runtime_checkable
class ScoreExtensions(Named, Protocol):
    """NormalizeScore: rescales a Score plugin's raw scores to [0, MAX_NODE_SCORE]."""

    def normalize_score(self, state: CycleState, pod: Pod, rows: Rows, scores: Scores) -> Scores: ...


@runtime_checkable
class ReservePlugin(Named, Protocol):
    """Claims what the pod will use on the chosen node; `unreserve` gives it back when a later
    step fails (it must be idempotent)."""

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Named, Protocol):
    """Allows, rejects, or holds the pod (WAIT, for at most the seconds returned)."""

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]: ...


@runtime_checkable
class PreBindPlugin(Named, Protocol):
    """Last step before binding; annotations the binding should carry go into
    `state.binding_annotations`."""

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...


@runtime_checkable
class BindPlugin(Named, Protocol):
    """Binds the pod (SKIP: leave it to the next binder)."""

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Named, Protocol):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@runtime_checkable
class GroupPlugin(Named, Protocol):
    """Places a group of pods as a unit (gang scheduling). Once one member is popped, the
    scheduler asks for every pending member, tries them back to back (each seeing the earlier ones
    assumed) and reports the pass; the plugin then releases, keeps or rolls back the group."""

    def batch_members(self, pod: Pod) -> list[Pod] | None:
        """Every pending member of the pod's group, the pod among them; None for a pod that is
        placed on its own."""
        ...

    def same_job(self, pod: Pod) -> Callable[[Pod], bool]:
        """Whether another pod belongs to the same group (room nominated to it is not held
        against this pod)."""
        ...

    def plan_batch(self, pod: Pod, members: list[Pod]) -> tuple[str, Diagnosis] | None:
        """Plans where the members go before they are tried; (why, diagnosis) when no placement
        can work, and then no member is tried."""
        ...

    def stops_on_failure(self, pod: Pod) -> bool:
        """Whether the pass ends at the first member that does not fit."""
        ...

    def batch_end(self, pod: Pod, result: BatchResult, num_nodes: int) -> str | None:
        """The pass is over: release, keep or roll back; the message every pending member carries
        when the group was not placed."""
        ...

    def group_failure(self, pod: Pod, why: str) -> str | None:
        """A member was rejected or timed out while waiting: what its whole group is told."""
        ...


@runtime_checkable
class VictimFilter(Named, Protocol):
    """Preemption rules beyond priority, which every preemption consults (DefaultPreemption and
    Coscheduling's job-level preemption): which pods a preemptor may evict, and what a dry run that
    took victims off their nodes gives back (elastic quota: a victim's removal frees its quota)."""

    def victim_filter(self, preemptor: Pod, candidates: Sequence[Pod]) -> PodMask | None:
        """Per candidate, whether the preemptor may evict it; this takes the place of the priority
        rule. None: no rule of this plugin's applies to the preemptor (the priority rule does)."""
        ...

    def releasing(self, victims: Sequence[Pod]) -> AbstractContextManager[None]:
        """While open, what the plugin counts of the pods it follows treats these as gone: a dry
        run took them off their nodes in a trial, and the PreFilter it runs meanwhile must see
        what they held given back."""
        ...


@runtime_checkable
class QueueingHints(Named, Protocol):
    """Tells, per cluster event, whether it could make a pod this plugin rejected schedulable
    (kube-scheduler's QueueingHintFn per ClusterEventWithHint), so that the queue moves only the
    pods an event can help.

    `hint_shape` says which pods the hints cannot tell apart: two pods of one shape get the same
    answer from every hint of the plugin for every event, so the queue asks once per shape."""

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]: ...

    def hint_shape(self, pod: Pod) -> Hashable: ...


@runtime_checkable
class QueueShare(Named, Protocol):
    """How much of its share the pod's tenant uses now (0: none of it, 1: all of it, more when it
    borrows): of pods of equal priority the queue serves the lower share first."""

    def queue_share(self, pod: Pod) -> float: ...


P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class ExtensionPoint(Generic[P]):
    """One extension point: its field in a profile's `plugins`, its label in metrics, and the
    protocol a plugin declares to implement it."""

    field: str
    label: str
    # the protocol class (typed as `type` because mypy accepts only concrete classes as type[P])
    protocol: type

    def declared_by(self, cls: type) -> bool:
        return declares(cls, self.protocol)

    def select(self, plugins: Iterable[Plugin]) -> list[P]:
        return [cast(P, p) for p in plugins if self.declared_by(type(p))]


QUEUE_SORT: ExtensionPoint[QueueSortPlugin] = ExtensionPoint("queueSort", "QueueSort", QueueSortPlugin)
PRE_ENQUEUE: ExtensionPoint[PreEnqueuePlugin] = ExtensionPoint("preEnqueue", "PreEnqueue", PreEnqueuePlugin)
PRE_FILTER: ExtensionPoint[PreFilterPlugin] = ExtensionPoint("preFilter", "PreFilter", PreFilterPlugin)
FILTER: ExtensionPoint[FilterPlugin] = ExtensionPoint("filter", "Filter", FilterPlugin)
POST_FILTER: ExtensionPoint[PostFilterPlugin] = ExtensionPoint("postFilter", "PostFilter", PostFilterPlugin)
PRE_SCORE: ExtensionPoint[PreScorePlugin] = ExtensionPoint("preScore", "PreScore", PreScorePlugin)
SCORE: ExtensionPoint[ScorePlugin] = ExtensionPoint("score", "Score", ScorePlugin)
RESERVE: ExtensionPoint[ReservePlugin] = ExtensionPoint("reserve", "Reserve", ReservePlugin)
PERMIT: ExtensionPoint[PermitPlugin] = ExtensionPoint("permit", "Permit", PermitPlugin)
PRE_BIND: ExtensionPoint[PreBindPlugin] = ExtensionPoint("preBind", "PreBind", PreBindPlugin)
BIND: ExtensionPoint[BindPlugin] = ExtensionPoint("bind", "Bind", BindPlugin)
POST_BIND: ExtensionPoint[PostBindPlugin] = ExtensionPoint("postBind", "PostBind", PostBindPlugin)

# in the order kube-scheduler's configuration lists them
EXTENSION_POINTS: tuple[ExtensionPoint[Any], ...] = (
    QUEUE_SORT,
    PRE_ENQUEUE,
    PRE_FILTER,
    FILTER,
    POST_FILTER,
    PRE_SCORE,
    SCORE,
    RESERVE,
    PERMIT,
    PRE_BIND,
    BIND,
    POST_BIND,
)
EXTENSION_POINTS_BY_FIELD: dict[str, ExtensionPoint[Any]] = {p.field: p for p in EXTENSION_POINTS}

# protocols a plugin may declare beside the extension points': optional parts of one
PLUGIN_PROTOCOLS: tuple[type, ...] = (
    *(p.protocol for p in EXTENSION_POINTS),
    PreEnqueueRecheck,
    PreFilterExtensions,
    ScoreExtensions,
    GroupPlugin,
    VictimFilter,
    QueueingHints,
    QueueShare,
)


def declares(cls: type, protocol: type) -> bool:
    """Whether the class names the protocol among its bases (directly or through a base)."""
    return protocol in cls.__mro__


def _protocol_methods(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")]


class Plugin:
    NAME: ClassVar[str] = ""
    Args: ClassVar[type[PluginArgs] | None] = None

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        self.handle = handle
        self.args = args

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a declared protocol whose method the class leaves out would run the protocol's empty
        # body (a filter that passes everything): refuse such a plugin when it is defined
        for protocol in PLUGIN_PROTOCOLS:
            if not declares(cls, protocol):
                continue
            for name in _protocol_methods(protocol):
                if getattr(cls, name) is getattr(protocol, name):
                    raise TypeError(f"plugin {cls.__name__} declares {protocol.__name__} but has no {name}()")

    @classmethod
    def extension_points(cls) -> list[str]:
        return [p.field for p in EXTENSION_POINTS if p.declared_by(cls)]

    def events_to_register(self) -> Sequence[ClusterEvent]:
        """Cluster events that can make a pod this plugin rejected schedulable again."""
        return ()


# ------------------------------------------------------------------------------ events and results
@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """`resource` is Node, Pod, PodGroup, ...; `action` Add, Update, Delete or All."""

    resource: str
    action: str = "All"

    def covers(self, other: ClusterEvent) -> bool:
        return (self.resource == other.resource or self.resource == "*") and (
            self.action == "All" or other.action == "All" or self.action == other.action
        )


class QueueingHint(enum.Enum):
    """A hint's answer: QUEUE (the event may make the pod schedulable: retry it after its
    backoff) or QUEUE_SKIP (it cannot: the pod stays where it waits)."""

    QUEUE_SKIP = 0
    QUEUE = 1


# (the pod waiting, the event's object before, after): None before for an add, after for a delete
QueueingHintFn = Callable[[Pod, Any, Any], QueueingHint]


def pod_departs(old: Pod, new: Pod) -> bool:
    """Whether a pod update takes the pod out of what filters count: it finished, or began
    terminating (hints treat that as the pod's delete, as the cache does)."""
    return (new.is_terminal and not old.is_terminal) or (
        new.deletion_ts is not None and old.deletion_ts is None
    )


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    """A registered event and the hint that judges it per pod (None: every such event queues)."""

    event: ClusterEvent
    hint: QueueingHintFn | None = None


NODE_ADD = ClusterEvent("Node", "Add")
NODE_UPDATE = ClusterEvent("Node", "Update")
NODE_ALL = ClusterEvent("Node")
POD_ADD = ClusterEvent("Pod", "Add")
POD_UPDATE = ClusterEvent("Pod", "Update")
POD_DELETE = ClusterEvent("Pod", "Delete")
POD_ALL = ClusterEvent("Pod")


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """A PreFilter's answer that only these nodes can possibly fit (None: all nodes)."""

    node_names: frozenset[str] | None


class FilterResult:
    """A filter's answer for an array of rows.

    `passed[i]` says whether rows[i] passed; failed rows carry `statuses[reason_of[i]]`
    (`reason_of` None: every failed row carries `statuses[0]`)."""

    __slots__ = ("passed", "reason_of", "statuses")

    def __init__(
        self, passed: npt.NDArray[np.bool_], statuses: list[Status], reason_of: np.ndarray | None = None
    ) -> None:
        self.passed = passed
        self.statuses = statuses
        self.reason_of = reason_of

    @staticmethod
    def uniform(passed: npt.NDArray[np.bool_], status: Status) -> FilterResult | None:
        if passed.all():
            return None
        return FilterResult(passed, [status])

    def status_at(self, i: int) -> Status:
        return self.statuses[0 if self.reason_of is None else int(self.reason_of[i])]


@dataclass(slots=True)
class BatchResult:
    """What the scheduler tells a group plugin at the end of a pass over a group's members."""

    attempted: list[str]
    failed: dict[str, str]  # pod key -> why it did not fit


@dataclass(slots=True)
class PostFilterResult:
    nominated_node: str | None
    status: Status


def plugin_label(obj: object) -> str:
    return getattr(obj, "NAME", type(obj).__name__)
