"""PodTopologySpread: spread matching pods evenly over topology domains (kube-scheduler v1.33).

Filter enforces the pod's `DoNotSchedule` constraints (filtering.py); Score prefers the domains
holding the fewest matching pods under the `ScheduleAnyway` constraints (scoring.py). A pod without
constraints of its own gets the configured default constraints when a ReplicationController,
ReplicaSet or StatefulSet controls it, with a selector for the pods of that controller (common.py);
a pod owned by a Job, or by nothing, gets none, as in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from koordpy.api.affinity import DO_NOT_SCHEDULE, HONOR, IGNORE, SCHEDULE_ANYWAY, TopologySpreadConstraint
from koordpy.api.node import HOSTNAME_LABEL, ZONE_LABEL
from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.config.numbers import Int32
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import (
    NODE_ADD,
    NODE_UPDATE,
    POD_ALL,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    QueueingHints,
    ScoreExtensions,
    ScorePlugin,
    pod_departs,
)
from koordpy.framework.status import Status
from koordpy.plugins.podtopologyspread import filtering, scoring
from koordpy.plugins.podtopologyspread.common import NAME, Constraint, SpreadCache, has_default_selector

SYSTEM_DEFAULTING: Literal["System"] = "System"
LIST_DEFAULTING: Literal["List"] = "List"

NODE_DELETE = ClusterEvent("Node", "Delete")


# --------------------------------------------------------------------------------------------- args
class DefaultConstraint(PluginArgs):
    """A v1.TopologySpreadConstraint without a selector: the selector is deduced for each pod."""

    # int32 in Go (v1.TopologySpreadConstraint), as minDomains
    max_skew: Int32
    topology_key: str
    when_unsatisfiable: str
    label_selector: dict[str, Any] | None = None
    min_domains: Int32 | None = None
    # accepted as in the API type, but without effect: the deduced selector replaces the whole
    # selector, as kube-scheduler does
    match_label_keys: list[str] | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None

    @field_validator("max_skew")
    @classmethod
    def _max_skew_positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError(f"{v}: not in valid range (0, inf)")
        return v

    @field_validator("topology_key")
    @classmethod
    def _topology_key_set(cls, v: str) -> str:
        if not v:
            raise ValueError("can not be empty")
        return v

    @field_validator("when_unsatisfiable")
    @classmethod
    def _known_action(cls, v: str) -> str:
        if not v:
            raise ValueError("can not be empty")
        if v not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError(
                f'Unsupported value: "{v}": supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
            )
        return v

    @field_validator("label_selector")
    @classmethod
    def _no_selector(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            raise ValueError("constraint must not define a selector, as they deduced for each pod")
        return v

    @field_validator("min_domains")
    @classmethod
    def _min_domains_valid(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is None:
            return v
        if v < 1:
            raise ValueError(f"{v}: must be greater than 0")
        if info.data.get("when_unsatisfiable") != DO_NOT_SCHEDULE:
            raise ValueError(f"{v}: can only use minDomains if whenUnsatisfiable={DO_NOT_SCHEDULE}")
        return v

    @field_validator("node_affinity_policy", "node_taints_policy")
    @classmethod
    def _known_policy(cls, v: str | None) -> str | None:
        if v is not None and v not in (HONOR, IGNORE):
            raise ValueError(f'Unsupported value: "{v}": supported values: "{HONOR}", "{IGNORE}"')
        return v

    def to_constraint(self) -> TopologySpreadConstraint:
        return TopologySpreadConstraint(
            max_skew=self.max_skew,
            topology_key=self.topology_key,
            when_unsatisfiable=self.when_unsatisfiable,
            selector=None,
            min_domains=self.min_domains,
            node_affinity_policy=self.node_affinity_policy or HONOR,
            node_taints_policy=self.node_taints_policy or IGNORE,
        )


class PodTopologySpreadArgs(PluginArgs):
    default_constraints: list[DefaultConstraint] = Field(default_factory=list)
    # declared after default_constraints so its validator sees them
    defaulting_type: Literal["System", "List"] = SYSTEM_DEFAULTING

    @model_validator(mode="before")
    @classmethod
    def _default_to_system(cls, data: Any) -> Any:
        # kube-scheduler's v1 defaulting fills in System before validation, so that System
        # with a list of constraints is rejected even when the type was left out
        if isinstance(data, Mapping) and "defaultingType" not in data and "defaulting_type" not in data:
            return {**data, "defaultingType": SYSTEM_DEFAULTING}
        return data

    @field_validator("default_constraints")
    @classmethod
    def _no_repeats(cls, v: list[DefaultConstraint]) -> list[DefaultConstraint]:
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(v):
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise ValueError(f'[{i}]: Duplicate value: "{{{c.topology_key}, {c.when_unsatisfiable}}}"')
            seen.add(pair)
        return v

    @field_validator("defaulting_type")
    @classmethod
    def _system_without_list(cls, v: str, info: ValidationInfo) -> str:
        if v == SYSTEM_DEFAULTING and info.data.get("default_constraints"):
            raise ValueError(f'Invalid value: "{v}": when .defaultConstraints are not empty')
        return v


SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(3, HOSTNAME_LABEL, SCHEDULE_ANYWAY, None, None, HONOR, IGNORE),
    TopologySpreadConstraint(5, ZONE_LABEL, SCHEDULE_ANYWAY, None, None, HONOR, IGNORE),
)


# --------------------------------------------------------------------------------------------- plugin


class PodTopologySpread(
    Plugin,
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    QueueingHints,
):
    NAME = NAME
    Args = PodTopologySpreadArgs

    def __init__(self, handle: Any, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        a = args if isinstance(args, PodTopologySpreadArgs) else PodTopologySpreadArgs()
        self.system_defaulted = a.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints: tuple[TopologySpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS
            if self.system_defaulted
            else tuple(c.to_constraint() for c in a.default_constraints)
        )
        self._cache = SpreadCache(handle, self.default_constraints)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # pods: an added, relabelled or deleted pod changes the counts; nodes: a new, removed or
        # relabelled/retainted node changes the domains and which nodes count
        return (POD_ALL, NODE_ADD, NODE_UPDATE, NODE_DELETE)

    # ----------------------------------------------------------------------------- queueing hints
    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(POD_ALL, self.after_pod_change),
            ClusterEventWithHint(NODE_ADD, self.after_node_change),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_change),
            ClusterEventWithHint(NODE_DELETE, self.after_node_change),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        # what the pod's resolved constraints are made of (see SpreadCache.constraints)
        own = pod.spread_constraints
        labels = () if own else tuple(sorted(pod.labels.items()))
        return pod.namespace, own, has_default_selector(pod), labels

    def after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterPodChange: a placed pod of the pod's namespace
        that its constraints select arrives or leaves, or is relabelled in or out of a selector."""
        if old is not None and new is not None:
            # a binding is the pod's arrival in the counts; finishing or terminating (the counts
            # leave terminating pods out), its departure
            if not old.node_name:
                old = None
            elif pod_departs(old, new):
                new = None
        for other in (old, new):
            if other is not None and (not other.node_name or other.namespace != pod.namespace):
                return QueueingHint.QUEUE_SKIP
        constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        if old is not None and new is not None:
            if old.labels == new.labels:
                return QueueingHint.QUEUE_SKIP
            moved = any(c.selects(old) != c.selects(new) for c in constraints)
            return QueueingHint.QUEUE if moved else QueueingHint.QUEUE_SKIP
        changed = new if new is not None else old
        if changed is not None and any(c.selects(changed) for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterNodeChange: a node that has every topology key of
        the pod's constraints appears, goes, or changes those labels or its taints."""
        keys = [c.topology_key for c in self.constraints(pod, DO_NOT_SCHEDULE)]
        old_in = old is not None and all(k in old.labels for k in keys)
        new_in = new is not None and all(k in new.labels for k in keys)
        if old is not None and new is not None:
            if old_in != new_in:
                return QueueingHint.QUEUE
            if new_in and (
                any(old.labels.get(k) != new.labels.get(k) for k in keys) or old.taints != new.taints
            ):
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE if old_in or new_in else QueueingHint.QUEUE_SKIP

    def constraints(self, pod: Pod, action: str) -> tuple[Constraint, ...]:
        """The pod's constraints with `whenUnsatisfiable == action`, or the default ones."""
        return self._cache.constraints(pod, action)

    # ----------------------------------------------------------------------------- PreFilter / Filter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        return filtering.pre_filter(self._cache, state, pod)

    def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        filtering.update_with_pod(state, pod, other, row, 1)

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        filtering.update_with_pod(state, pod, other, row, -1)

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        return filtering.filter_rows(self._cache, state, pod, rows)

    # ----------------------------------------------------------------------------- PreScore / Score
    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        return scoring.pre_score(self._cache, state, pod, rows, self.system_defaulted)

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        return scoring.score(self._cache, state, rows)

    def normalize_score(
        self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        return scoring.normalize_score(self._cache, state, rows, scores)
