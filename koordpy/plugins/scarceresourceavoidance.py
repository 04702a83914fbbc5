"""ScarceResourceAvoidance (Koordinator): keeps pods that do not need a scarce resource (a GPU, say)
off the nodes that have it, so those nodes stay free for the pods that do.

For a pod and a node: D is the set of resources the node has (allocatable > 0; cpu, memory,
ephemeral-storage and every scalar resource, not `pods`) that the pod does not request, and S the
scarce ones among D. The score is 100 when D or S is empty, else (|D| - |S|) * 100 // |D|. A pod
that requests the scarce resource is therefore never penalized for it. Score only; no
normalization.

Args: `resources: [<name>]`, the scarce resources. koordpy's default, used when the plugin is
configured without args, is `[nvidia.com/gpu]`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, field_validator

from koordpy.api.pod import Pod
from koordpy.api.resources import PODS
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import MAX_NODE_SCORE, Plugin

NAME = "ScarceResourceAvoidance"


class ScarceResourceAvoidanceArgs(PluginArgs):
    resources: list[str] = Field(default_factory=lambda: ["nvidia.com/gpu"])

    @field_validator("resources")
    @classmethod
    def _names(cls, resources: list[str]) -> list[str]:
        for name in resources:
            if not name.strip():
                raise ValueError("resource names must not be empty")
        return resources


class _NodeResources:
    """Which resources each node row has (allocatable > 0, `pods` excluded) and how many; valid
    for one node generation and resource column count."""

    __slots__ = ("count", "has", "key")

    def __init__(self, snapshot: Any, key: tuple[int, int, int]) -> None:
        has = snapshot.allocatable[: snapshot.high_water] > 0
        has[:, snapshot.resource_col[PODS]] = False
        self.has = has
        self.count = has.sum(axis=1, dtype=np.int64)
        self.key = key


class ScarceResourceAvoidance(Plugin):
    NAME = NAME
    Args = ScarceResourceAvoidanceArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        scarce_args = args if isinstance(args, ScarceResourceAvoidanceArgs) else ScarceResourceAvoidanceArgs()
        self._scarce = frozenset(scarce_args.resources)
        self._nodes: _NodeResources | None = None

    def _node_resources(self, snapshot: Any) -> _NodeResources:
        key = (id(snapshot), snapshot.node_generation, snapshot.allocatable.shape[1])
        nodes = self._nodes
        if nodes is None or nodes.key != key:
            nodes = self._nodes = _NodeResources(snapshot, key)
        return nodes

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        snapshot = self.handle.snapshot
        col_of = snapshot.resource_col
        requested = {n for n, v in pod.requests.items() if v > 0}
        scarce_cols = [col_of[n] for n in self._scarce - requested if n in col_of]
        if not scarce_cols:
            return np.full(rows.size, MAX_NODE_SCORE, dtype=np.int64)
        nodes = self._node_resources(snapshot)
        requested_cols = [col_of[n] for n in requested if n in col_of and n != PODS]
        spare = nodes.count[rows]
        if requested_cols:
            spare = spare - nodes.has[np.ix_(rows, requested_cols)].sum(axis=1, dtype=np.int64)
        scarce = nodes.has[np.ix_(rows, scarce_cols)].sum(axis=1, dtype=np.int64)
        penalized = (spare > 0) & (scarce > 0)
        kept = (spare - scarce) * MAX_NODE_SCORE // np.where(penalized, spare, 1)
        return np.where(penalized, kept, MAX_NODE_SCORE)
