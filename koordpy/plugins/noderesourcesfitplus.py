"""NodeResourcesFitPlus (Koordinator): a scoring strategy and a weight per resource, so that, for
example, GPU pods pack onto GPU nodes (MostAllocated) while cpu and memory spread out
(LeastAllocated).

For a pod and a node, every resource the pod requests (> 0) that the args configure is scored:

    requested = node's requests + the pod's (cpu and memory with the 100m / 200Mi "non-zero"
                defaults for containers that ask for none, on both sides)
    MostAllocated:  0 if allocatable is 0, else min(requested, allocatable) * 100 // allocatable
    LeastAllocated: 0 if allocatable is 0 or requested > allocatable,
                    else (allocatable - requested) * 100 // allocatable

and the node's score is sum(score * weight) // sum(weight), or 100 when no configured resource is
requested (or every weight applying is 0). A resource a node lacks scores 0 but its weight still
counts. Score only; no normalization.

Args: `resources: {<name>: {type: MostAllocated | LeastAllocated, weight: int >= 0}}` (a missing
weight is 1). koordpy's default, used when the plugin is configured without args, is
`{nvidia.com/gpu: {type: MostAllocated, weight: 2}, cpu: {type: LeastAllocated, weight: 1},
memory: {type: LeastAllocated, weight: 1}}`.
"""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
from pydantic import Field, field_validator

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.resources import CPU, MEMORY
from koordpy.config.args import PluginArgs
from koordpy.config.numbers import INT64_MAX
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin
from koordpy.framework.status import Status
from koordpy.plugins.noderesourcesfit import AllocatableColumns, RowView, requested_column

NAME = names.NODE_RESOURCES_FIT_PLUS

MOST_ALLOCATED: Final = "MostAllocated"
LEAST_ALLOCATED: Final = "LeastAllocated"

_PRE_SCORE_KEY = "PreScore" + NAME


class ResourceStrategy(PluginArgs):
    type: Literal["MostAllocated", "LeastAllocated"]
    weight: int = Field(default=1, ge=0)


def _default_resources() -> dict[str, ResourceStrategy]:
    return {
        "nvidia.com/gpu": ResourceStrategy(type=MOST_ALLOCATED, weight=2),
        CPU: ResourceStrategy(type=LEAST_ALLOCATED, weight=1),
        MEMORY: ResourceStrategy(type=LEAST_ALLOCATED, weight=1),
    }


class NodeResourcesFitPlusArgs(PluginArgs):
    resources: dict[str, ResourceStrategy] = Field(default_factory=_default_resources)

    @field_validator("resources")
    @classmethod
    def _names(cls, resources: dict[str, ResourceStrategy]) -> dict[str, ResourceStrategy]:
        for name in resources:
            if not name.strip():
                raise ValueError("resource names must not be empty")
        # a node's score sums score x weight (scores up to 100) in an int64, as kube-scheduler
        # refuses score weights whose total could overflow
        if sum(r.weight for r in resources.values()) * MAX_NODE_SCORE > INT64_MAX:
            raise ValueError(
                f"the total of the weights times {MAX_NODE_SCORE} could overflow an int64: "
                f"at most {INT64_MAX // MAX_NODE_SCORE} in all"
            )
        return resources


class _Plan:
    """The configured resources the pod requests: (name, pod request, most allocated?, weight)."""

    __slots__ = ("items", "weight_sum")

    def __init__(self, items: list[tuple[str, int, bool, int]]) -> None:
        self.items = items
        self.weight_sum = sum(w for *_, w in items)


class NodeResourcesFitPlus(Plugin, PreScorePlugin, ScorePlugin):
    NAME = NAME
    Args = NodeResourcesFitPlusArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        plus_args = args if isinstance(args, NodeResourcesFitPlusArgs) else NodeResourcesFitPlusArgs()
        self._resources = {
            name: (strategy.type == MOST_ALLOCATED, strategy.weight)
            for name, strategy in plus_args.resources.items()
        }
        self._columns = AllocatableColumns()

    def _plan(self, pod: Pod) -> _Plan:
        items = []
        for name, value in pod.requests.items():
            strategy = self._resources.get(name)
            if value <= 0 or strategy is None:
                continue
            if name == CPU:
                value = pod.nonzero_cpu
            elif name == MEMORY:
                value = pod.nonzero_memory
            items.append((name, value, strategy[0], strategy[1]))
        return _Plan(items)

    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        state.write(_PRE_SCORE_KEY, self._plan(pod))
        return None

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        plan = state.read(_PRE_SCORE_KEY)
        if plan is None:
            plan = self._plan(pod)
        if plan.weight_sum == 0:
            return np.full(rows.size, MAX_NODE_SCORE, dtype=np.int64)
        snapshot = self.handle.snapshot
        view = RowView(snapshot, rows)
        total: np.ndarray | None = None
        for name, pod_request, most, weight in plan.items:
            if weight == 0:
                continue
            col = snapshot.resource_col.get(name)
            if col is None:
                continue  # no node has it: scores 0 everywhere
            column = self._columns.column(snapshot, col)
            requested = requested_column(snapshot, view, name, col, use_requested=False) + pod_request
            alloc = view.cached(column.alloc)
            # allocatable 0 scores 0 either way: min(requested, 0) = 0, and 0 - requested <= 0
            resource_score = column.percent(view, np.minimum(requested, alloc) if most else alloc - requested)
            if not most:
                np.maximum(resource_score, 0, out=resource_score)
            if weight != 1:
                resource_score *= weight
            if total is None:
                total = resource_score
            else:
                total += resource_score
        if total is None:
            return np.zeros(rows.size, dtype=np.int64)
        # small non-negative integers: exact in float64
        return view.result((total / plan.weight_sum).astype(np.int64))
