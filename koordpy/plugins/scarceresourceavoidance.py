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

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.resources import PODS
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import MAX_NODE_SCORE, Plugin, ScorePlugin

NAME = names.SCARCE_RESOURCE_AVOIDANCE

_CACHE_LIMIT = 256


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
    """How many resources each node row has (allocatable > 0, `pods` excluded), and which rows
    have a given resource, read per resource when asked; with the scores already computed per set
    of requested resources. Valid for one node generation: none of it depends on placed pods."""

    __slots__ = ("_has", "_snapshot", "count", "key", "scores")

    def __init__(self, snapshot: Any, key: tuple[int, int]) -> None:
        self._snapshot = snapshot
        # a count per row, not a [rows x resources] table: thousands of names would make it huge
        self.count = snapshot.carried_counts(excluded=(snapshot.resource_col[PODS],))
        self._has: dict[int, np.ndarray] = {}
        self.key = key
        self.scores: dict[frozenset[str], np.ndarray] = {}

    def column(self, col: int) -> np.ndarray:
        has = self._has.get(col)
        if has is None:
            if len(self._has) >= _CACHE_LIMIT:
                self._has.clear()
            if col == self._snapshot.resource_col[PODS]:
                has = np.zeros(self.count.size, dtype=np.int64)
            else:
                has = (self._snapshot.allocatable_column(col) > 0).astype(np.int64)
            self._has[col] = has
        return has


class ScarceResourceAvoidance(Plugin, ScorePlugin):
    NAME = NAME
    Args = ScarceResourceAvoidanceArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        scarce_args = args if isinstance(args, ScarceResourceAvoidanceArgs) else ScarceResourceAvoidanceArgs()
        self._scarce = frozenset(scarce_args.resources)
        self._nodes: _NodeResources | None = None

    def _node_resources(self, snapshot: Any) -> _NodeResources:
        key = (id(snapshot), snapshot.node_generation)
        nodes = self._nodes
        if nodes is None or nodes.key != key:
            nodes = self._nodes = _NodeResources(snapshot, key)
        return nodes

    def _scores(self, snapshot: Any, nodes: _NodeResources, requested: frozenset[str]) -> np.ndarray:
        col_of = snapshot.resource_col
        spare = nodes.count.copy()
        for name in requested:
            col = col_of.get(name)
            if col is not None and name != PODS:
                spare -= nodes.column(col)
        scarce = np.zeros(spare.size, dtype=np.int64)
        for name in self._scarce - requested:
            col = col_of.get(name)
            if col is not None:
                scarce += nodes.column(col)
        penalized = (spare > 0) & (scarce > 0)
        kept = (spare - scarce) * MAX_NODE_SCORE // np.where(penalized, spare, 1)
        return np.where(penalized, kept, MAX_NODE_SCORE)

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        requested = frozenset(n for n, v in pod.requests.items() if v > 0)
        if self._scarce <= requested:
            return np.full(rows.size, MAX_NODE_SCORE, dtype=np.int64)
        snapshot = self.handle.snapshot
        nodes = self._node_resources(snapshot)
        scores = nodes.scores.get(requested)
        if scores is None:
            if len(nodes.scores) >= _CACHE_LIMIT:
                nodes.scores.clear()
            scores = nodes.scores[requested] = self._scores(snapshot, nodes, requested)
        chosen: np.ndarray = scores[rows]
        return chosen
