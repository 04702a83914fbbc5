"""The plugin contract: the base class and the results extension points return.

A plugin implements only the extension points it needs, as methods with the names below; the
profile looks the methods up when it is built. Filters and scores are vectorized: they receive an
array of node rows and answer for all of them at once.

    sort_key(pod_info) -> tuple                                  QueueSort
    pre_enqueue(pod) -> Status | None                            PreEnqueue
    gated_pods_to_recheck() -> Iterable[str]                     PreEnqueue, optional: the keys of
        the pods it gates whose verdict may have changed since it was last asked; a plugin with it
        is never asked about every gated pod on every cluster event
    pre_filter(state, pod) -> (PreFilterResult | None, Status | None)
    pre_filter_add_pod(state, pod, other, row) / pre_filter_remove_pod(...)   PreFilterExtensions
    filter(state, pod, rows) -> FilterResult | None              Filter (None: every row passes)
    post_filter(state, pod, diagnosis) -> PostFilterResult        PostFilter
    pre_score(state, pod, rows) -> Status | None                 PreScore (SKIP: leave Score out)
    score(state, pod, rows) -> ndarray[int64]                    Score
    normalize_score(state, pod, rows, scores) -> ndarray          NormalizeScore
    reserve(state, pod, node) -> Status | None / unreserve(state, pod, node)
    permit(state, pod, node) -> (Status | None, timeout_seconds)  Permit
    pre_bind(state, pod, node) -> Status | None                  PreBind
    bind(state, pod, node) -> Status | None                      Bind (SKIP: next binder)
    post_bind(state, pod, node)                                  PostBind
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from koordpy.config.args import PluginArgs
from koordpy.framework.status import Status

if TYPE_CHECKING:
    from koordpy.framework.handle import Handle

EXTENSION_POINTS: dict[str, tuple[str, ...]] = {
    "queueSort": ("sort_key",),
    "preEnqueue": ("pre_enqueue",),
    "preFilter": ("pre_filter",),
    "filter": ("filter",),
    "postFilter": ("post_filter",),
    "preScore": ("pre_score",),
    "score": ("score",),
    "reserve": ("reserve",),
    "permit": ("permit",),
    "preBind": ("pre_bind",),
    "bind": ("bind",),
    "postBind": ("post_bind",),
}

MAX_NODE_SCORE = 100


class Plugin:
    NAME: ClassVar[str] = ""
    Args: ClassVar[type[PluginArgs] | None] = None

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        self.handle = handle
        self.args = args

    @classmethod
    def extension_points(cls) -> list[str]:
        return [point for point, methods in EXTENSION_POINTS.items() if all(hasattr(cls, m) for m in methods)]

    def events_to_register(self) -> Sequence[ClusterEvent]:
        """Cluster events that can make a pod this plugin rejected schedulable again."""
        return ()


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """`resource` is Node, Pod, PodGroup, ...; `action` Add, Update, Delete or All."""

    resource: str
    action: str = "All"

    def covers(self, other: ClusterEvent) -> bool:
        return (self.resource == other.resource or self.resource == "*") and (
            self.action == "All" or other.action == "All" or self.action == other.action
        )


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
        self, passed: np.ndarray, statuses: list[Status], reason_of: np.ndarray | None = None
    ) -> None:
        self.passed = passed
        self.statuses = statuses
        self.reason_of = reason_of

    @staticmethod
    def uniform(passed: np.ndarray, status: Status) -> FilterResult | None:
        if passed.all():
            return None
        return FilterResult(passed, [status])

    def status_at(self, i: int) -> Status:
        return self.statuses[0 if self.reason_of is None else int(self.reason_of[i])]


@dataclass(slots=True)
class BatchResult:
    """What the scheduler tells a batching plugin at the end of a pass over a group's members."""

    attempted: list[str]
    failed: dict[str, str]  # pod key -> why it did not fit


@dataclass(slots=True)
class PostFilterResult:
    nominated_node: str | None
    status: Status


def plugin_label(obj: Any) -> str:
    return getattr(obj, "NAME", type(obj).__name__)
