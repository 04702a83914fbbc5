"""NodeResourcesFit: a pod fits a node when the node's allocatable minus what its pods already
request covers every resource the pod requests (and one more pod slot); nodes are scored by how
much of each resource would be requested, with the LeastAllocated, MostAllocated or
RequestedToCapacityRatio strategy.

Filter: only resources the pod requests (> 0) are checked, plus the pod count; an extended
resource the node does not have counts as insufficient; `ignoredResources` and
`ignoredResourceGroups` (the part of the name before `/`) exempt extended resources only. A node
short of several resources reports each (`Insufficient cpu`, `Insufficient memory`, ...). The
status is Unschedulable: removing pods (preemption) may free room.

Score: per configured resource, the node's requested amount after adding the pod against its
allocatable, then the weighted mean. cpu and memory use the "non-zero" requests (containers that
ask for nothing count 100m / 200Mi), as kube-scheduler does for this plugin; a scalar resource the
pod does not request, and any resource the node has none of, are left out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Final, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, is_extended_resource
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    MAX_NODE_SCORE,
    NODE_ADD,
    NODE_UPDATE,
    POD_DELETE,
    POD_UPDATE,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    QueueingHints,
    ScorePlugin,
)
from koordpy.framework.status import Status, unschedulable
from koordpy.plugins.utilization_shape import MAX_CUSTOM_PRIORITY_SCORE, MAX_UTILIZATION, broken_linear_table

NAME = names.NODE_RESOURCES_FIT

StrategyType = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"

# RequestedToCapacityRatio shape scores are 0..10 in the configuration, 0..100 when scoring

TOO_MANY_PODS = "Too many pods"

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_CACHE_LIMIT = 256

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_PART_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _qualified_name_error(value: str) -> str | None:
    """Why `value` is not a Kubernetes qualified name (`[prefix/]name`), or None."""
    prefix, sep, name = value.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return f"{value!r}: the prefix must be a DNS subdomain"
    if not name or len(name) > 63 or not _NAME_PART_RE.fullmatch(name):
        return (
            f"{value!r}: the name part must be 63 characters or less, consist of alphanumerics, "
            "'-', '_' or '.', and start and end with an alphanumeric"
        )
    return None


class ResourceSpec(PluginArgs):
    name: str = Field(min_length=1)
    # kube-scheduler turns an unset (or zero) weight into 1
    weight: int = 1

    @field_validator("weight")
    @classmethod
    def _weight_range(cls, value: int) -> int:
        if value == 0:
            return 1
        if not 0 < value <= 100:
            raise ValueError(f"resource weight {value} not in valid range (0, 100]")
        return value


DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = (
    ResourceSpec(name=CPU, weight=1),
    ResourceSpec(name=MEMORY, weight=1),
)


class UtilizationShapePoint(PluginArgs):
    utilization: int = Field(ge=0, le=MAX_UTILIZATION)
    score: int = Field(ge=0, le=MAX_CUSTOM_PRIORITY_SCORE)


class RequestedToCapacityRatioParam(PluginArgs):
    shape: list[UtilizationShapePoint] = Field(min_length=1)

    @field_validator("shape")
    @classmethod
    def _increasing(cls, shape: list[UtilizationShapePoint]) -> list[UtilizationShapePoint]:
        for prev, point in itertools.pairwise(shape):
            if prev.utilization >= point.utilization:
                raise ValueError("utilization values must be sorted in increasing order")
        return shape


class ScoringStrategy(PluginArgs):
    type: StrategyType
    resources: list[ResourceSpec] = Field(default_factory=lambda: list(DEFAULT_RESOURCES))
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @field_validator("resources")
    @classmethod
    def _default_resources(cls, resources: list[ResourceSpec]) -> list[ResourceSpec]:
        # an empty list means the default set, as in kube-scheduler
        return resources or list(DEFAULT_RESOURCES)

    @model_validator(mode="after")
    def _shape_matches_type(self) -> ScoringStrategy:
        if self.type == REQUESTED_TO_CAPACITY_RATIO and self.requested_to_capacity_ratio is None:
            raise ValueError(
                "requestedToCapacityRatio must be specified when type is RequestedToCapacityRatio"
            )
        if self.type != REQUESTED_TO_CAPACITY_RATIO and self.requested_to_capacity_ratio is not None:
            raise ValueError(
                "requestedToCapacityRatio must be unset when type is not RequestedToCapacityRatio"
            )
        return self


class NodeResourcesFitArgs(PluginArgs):
    ignored_resources: list[str] = Field(default_factory=list)
    ignored_resource_groups: list[str] = Field(default_factory=list)
    scoring_strategy: ScoringStrategy = Field(default_factory=lambda: ScoringStrategy(type=LEAST_ALLOCATED))

    @field_validator("ignored_resources")
    @classmethod
    def _resource_names(cls, names: list[str]) -> list[str]:
        for name in names:
            problem = _qualified_name_error(name)
            if problem:
                raise ValueError(problem)
        return names

    @field_validator("ignored_resource_groups")
    @classmethod
    def _group_names(cls, groups: list[str]) -> list[str]:
        for group in groups:
            if "/" in group:
                raise ValueError(f"resource group name {group!r} can't contain '/'")
            problem = _qualified_name_error(group)
            if problem:
                raise ValueError(problem)
        return groups


# ------------------------------------------------------------------------------- shared node data
class AllocColumn:
    """One resource's allocatable over rows [0, high_water), contiguous, with what follows from it
    alone: `safe` (zeros replaced by 1, to divide by), `present` (allocatable > 0) and whether
    some live node lacks the resource."""

    __slots__ = ("alloc", "float_exact", "missing_somewhere", "present", "safe", "safe_f")

    def __init__(self, alloc: np.ndarray, live: np.ndarray) -> None:
        self.alloc = alloc
        self.present = alloc != 0
        self.safe = np.where(self.present, alloc, 1)
        self.safe_f = self.safe.astype(np.float64)
        self.missing_somewhere = bool((live & ~self.present).any())
        # below 2^46 a percentage floor(n * 100 / alloc), n <= alloc, computed in float64 is exact:
        # n * 100 converts exactly and a non-integer quotient stays more than an ulp from the
        # next integer
        self.float_exact = alloc.size == 0 or int(alloc.max()) < 1 << 46

    def percent(self, view: RowView, numerator: np.ndarray) -> np.ndarray:
        """numerator * 100 // allocatable for numerators within [0, allocatable]; a negative
        numerator gives a value <= 0 (callers clamp it)."""
        if self.float_exact:
            out = numerator * 100.0
            out /= view.cached(self.safe_f)
            return out.astype(np.int64)
        scaled = numerator * MAX_NODE_SCORE
        scaled //= view.cached(self.safe)
        return scaled


class AllocatableColumns:
    """Per-resource allocatable columns, read out of the snapshot once per node generation
    (allocatable changes only with node objects): per-pod work never rebuilds a sparse column."""

    __slots__ = ("_columns", "_key", "_thresholds")

    def __init__(self) -> None:
        self._key: tuple[int, int] = (-1, -1)
        self._columns: dict[int, AllocColumn] = {}
        self._thresholds: dict[tuple[int, int], np.ndarray] = {}

    def _refresh(self, snapshot: Any) -> None:
        key = (id(snapshot), snapshot.node_generation)
        if key != self._key:
            self._columns.clear()
            self._thresholds.clear()
            self._key = key

    def column(self, snapshot: Any, col: int) -> AllocColumn:
        self._refresh(snapshot)
        column = self._columns.get(col)
        if column is None:
            hw = snapshot.high_water
            column = AllocColumn(np.ascontiguousarray(snapshot.allocatable_column(col)), snapshot.live[:hw])
            if len(self._columns) >= _CACHE_LIMIT:
                # thousands of resource names would keep thousands of node-long columns
                self._columns.clear()
            self._columns[col] = column
        return column

    def threshold(self, snapshot: Any, col: int, value: int) -> np.ndarray:
        """allocatable - value: a node whose requested amount exceeds it cannot take `value` more."""
        self._refresh(snapshot)
        key = (col, value)
        thr = self._thresholds.get(key)
        if thr is None:
            if len(self._thresholds) >= _CACHE_LIMIT:
                self._thresholds.clear()
            thr = self._thresholds[key] = self.column(snapshot, col).alloc - value
        return thr


class RowView:
    """How a pass reads node rows: when `rows` covers most of the snapshot, whole columns up to
    high_water are read as slices and the result is indexed by `rows` once at the end; for a few
    rows (a single node re-checked) only those are gathered."""

    __slots__ = ("full", "hw", "identity", "rows")

    def __init__(self, snapshot: Any, rows: np.ndarray) -> None:
        self.hw = snapshot.high_water
        self.rows = rows
        self.full = rows.size * 4 >= self.hw
        # every row, in order: the result needs no indexing
        self.identity = rows.size == self.hw and rows is snapshot.live_rows()

    def cached(self, values: np.ndarray) -> np.ndarray:
        """A per-row array over [0, high_water) restricted to this view."""
        return values if self.full else values[self.rows]

    def column(self, matrix: np.ndarray, col: int) -> np.ndarray:
        return matrix[: self.hw, col] if self.full else matrix[self.rows, col]

    def requested(self, snapshot: Any, col: int) -> np.ndarray:
        """What the pods request of resource `col`, over the rows as `column` reads them."""
        out: np.ndarray = (
            snapshot.requested_column(col) if self.full else snapshot.requested_column(col, self.rows)
        )
        return out

    def result(self, values: np.ndarray) -> np.ndarray:
        if self.identity:
            return values
        return values[self.rows] if self.full else values


# ------------------------------------------------------------------------------------- filter side
class FitRequest:
    """A pod's request over the columns Filter checks, in the order kube-scheduler reports
    shortages: pods, cpu, memory, ephemeral-storage, then the scalar resources by name. A row's
    shortages form a bit code (bit i: column i short); statuses are built once per code."""

    __slots__ = ("_statuses", "cols", "names", "values")

    def __init__(self, names: list[str], cols: list[int], values: list[int]) -> None:
        self.names = names
        self.cols = cols
        self.values = values
        self._statuses: dict[int, Status] = {}

    def status(self, code: int) -> Status:
        st = self._statuses.get(code)
        if st is None:
            reasons = tuple(
                TOO_MANY_PODS if name == PODS else f"Insufficient {name}"
                for i, name in enumerate(self.names)
                if code >> i & 1
            )
            st = self._statuses[code] = unschedulable(*reasons)
        return st


def _report_order(name: str) -> tuple[int, str]:
    return ({PODS: 0, CPU: 1, MEMORY: 2, EPHEMERAL_STORAGE: 3}.get(name, 4), name)


def build_fit_request(
    snapshot: Any, requests: Mapping[str, int], ignored: frozenset[str], ignored_groups: frozenset[str]
) -> FitRequest:
    # adds resources no node has yet; amounts as the snapshot holds them (saturated, pods as 1)
    ids, amounts = snapshot.request_cells(requests)
    amount_of = dict(zip(ids.tolist(), amounts.tolist(), strict=True))
    checked = [PODS]
    for name, value in requests.items():
        if value <= 0 or name == PODS:
            continue
        if is_extended_resource(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups):
            continue
        checked.append(name)
    checked.sort(key=_report_order)
    cols = [snapshot.resource_col[n] for n in checked]
    return FitRequest(checked, cols, [amount_of.get(c, 0) for c in cols])


def fit_filter(
    snapshot: Any, columns: AllocatableColumns, request: FitRequest, rows: np.ndarray
) -> FilterResult | None:
    view = RowView(snapshot, rows)
    narrow = len(request.cols) <= 8
    codes: np.ndarray | None = None
    for bit, (col, value) in enumerate(zip(request.cols, request.values)):
        short = view.requested(snapshot, col) > view.cached(columns.threshold(snapshot, col, value))
        code = short.view(np.uint8) if narrow else short.astype(np.int64)
        if bit:
            code = code << bit
        codes = code if codes is None else codes | code
    assert codes is not None
    codes = view.result(codes)
    passed = codes == 0
    if passed.all():
        return None
    if len(request.cols) == 1:
        return FilterResult(passed, [request.status(1)])
    if narrow:
        failed_codes = codes[~passed]
        present = np.flatnonzero(np.bincount(failed_codes, minlength=256))
        table = np.zeros(256, dtype=np.int64)
        statuses: list[Status] = []
        for present_code in present.tolist():
            if present_code:
                table[present_code] = len(statuses)
                statuses.append(request.status(present_code))
        return FilterResult(passed, statuses, table[codes])
    uniq, inverse = np.unique(codes, return_inverse=True)
    return FilterResult(passed, [request.status(int(c)) for c in uniq.tolist()], inverse)


# -------------------------------------------------------------------------------------- score side
def pod_score_request(pod: Pod, name: str, use_requested: bool) -> int:
    """The pod's request for one scored resource: cpu and memory with kube-scheduler's defaults for
    containers that ask for none unless `use_requested`."""
    if not use_requested:
        if name == CPU:
            return pod.nonzero_cpu
        if name == MEMORY:
            return pod.nonzero_memory
    return pod.requests.get(name, 0)


def scored_column(snapshot: Any, name: str, pod_request: int) -> int | None:
    """The snapshot column of a resource taking part in scoring; None when it is left out
    everywhere (`pods`, a scalar resource the pod does not request, a resource no node has)."""
    if name == PODS:
        return None
    if pod_request == 0 and name not in (CPU, MEMORY, EPHEMERAL_STORAGE):
        return None
    col: int | None = snapshot.resource_col.get(name)
    return col


def requested_column(snapshot: Any, view: RowView, name: str, col: int, use_requested: bool) -> np.ndarray:
    """What the node's pods request of a resource: cpu and memory with the non-zero defaults unless
    `use_requested`."""
    if name in (CPU, MEMORY) and not use_requested:
        return view.column(snapshot.nonzero_requested, 0 if name == CPU else 1)
    return view.requested(snapshot, col)


class _ScorePlan:
    """The pod's request per configured resource, fixed at PreScore."""

    __slots__ = ("requests",)

    def __init__(self, requests: list[int]) -> None:
        self.requests = requests


class NodeResourcesFit(Plugin, PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, QueueingHints):
    NAME = NAME
    Args = NodeResourcesFitArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        fit_args = args if isinstance(args, NodeResourcesFitArgs) else NodeResourcesFitArgs()
        self.fit_args = fit_args
        self._ignored = frozenset(fit_args.ignored_resources)
        self._ignored_groups = frozenset(fit_args.ignored_resource_groups)
        strategy = fit_args.scoring_strategy
        self._strategy = strategy.type
        self._resources = [(r.name, r.weight) for r in strategy.resources]
        self._shape_table = (
            broken_linear_table(strategy.requested_to_capacity_ratio.shape)
            if strategy.requested_to_capacity_ratio is not None
            else None
        )
        # pods stamped from one template share their request: one FitRequest per distinct request
        self._requests: dict[tuple[tuple[str, int], ...], FitRequest] = {}
        self._requests_snapshot = -1
        self._columns = AllocatableColumns()

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # a pod removed or shrunk frees room; a node added or given more allocatable
        return (POD_DELETE, POD_UPDATE, NODE_ADD, NODE_UPDATE)

    # ---------------------------------------------------------------------------- queueing hints
    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(POD_DELETE, self.after_pod_change),
            ClusterEventWithHint(POD_UPDATE, self.after_pod_change),
            ClusterEventWithHint(NODE_ADD, self.after_node_change),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_change),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        # the hints read only what the pod requests
        return tuple(sorted(pod.requests.items()))

    def _checked(self, pod: Pod) -> list[tuple[str, int]]:
        """The requests Filter compares (as build_fit_request picks them), the pod slot aside."""
        ignored, groups = self._ignored, self._ignored_groups
        return [
            (name, value)
            for name, value in pod.requests.items()
            if value > 0
            and name != PODS
            and not (is_extended_resource(name) and (name in ignored or name.split("/", 1)[0] in groups))
        ]

    def after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterPodEvent: room is freed by a pod that held it
        leaving (deleted, or finished: the cache lets a terminal pod's requests go as a delete),
        or by a placed pod shrinking a resource this pod asks for. A binding takes room."""
        if new is None:
            if not old.node_name and not old.nominated_node_name:
                return QueueingHint.QUEUE_SKIP  # it never held room, nor had room held for it
            return QueueingHint.QUEUE
        if old is not None and new.key == pod.key:
            # the pod's own update (kube's UpdatePodScaleDown of the target pod itself): a request
            # it lowered or dropped may let it fit
            shrunk = any(new.requests.get(name, 0) < value for name, value in old.requests.items())
            return QueueingHint.QUEUE if shrunk else QueueingHint.QUEUE_SKIP
        if old is None or not old.node_name or not new.node_name:
            return QueueingHint.QUEUE_SKIP  # bound just now (or not placed): takes room, frees none
        if new.is_terminal and not old.is_terminal:
            return QueueingHint.QUEUE
        for name, _ in self._checked(pod):
            if new.requests.get(name, 0) < old.requests.get(name, 0):
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterNodeChange: only a node that could hold the pod
        were it empty helps, and an updated one only when a resource the pod asks for (or its pod
        count) grew."""
        if new is None:
            return QueueingHint.QUEUE_SKIP
        alloc = new.allocatable
        checked = self._checked(pod)
        if alloc.get(PODS, 0) < 1 or any(alloc.get(name, 0) < value for name, value in checked):
            return QueueingHint.QUEUE_SKIP
        if old is None:
            return QueueingHint.QUEUE
        before = old.allocatable
        if alloc.get(PODS, 0) > before.get(PODS, 0):
            return QueueingHint.QUEUE
        if any(alloc.get(name, 0) > before.get(name, 0) for name, _ in checked):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    # ---------------------------------------------------------------------------- filter
    def _fit_request(self, pod: Pod) -> FitRequest:
        snapshot = self.handle.snapshot
        if id(snapshot) != self._requests_snapshot:
            self._requests.clear()
            self._requests_snapshot = id(snapshot)
        key = tuple(sorted(pod.requests.items()))
        request = self._requests.get(key)
        if request is None:
            if len(self._requests) >= _CACHE_LIMIT:
                self._requests.clear()
            request = build_fit_request(snapshot, pod.requests, self._ignored, self._ignored_groups)
            self._requests[key] = request
        return request

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        state.write(_PRE_FILTER_KEY, self._fit_request(pod))
        return None, None

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        request = state.read(_PRE_FILTER_KEY)
        if request is None:
            request = self._fit_request(pod)
        return fit_filter(self.handle.snapshot, self._columns, request, rows)

    # ---------------------------------------------------------------------------- score
    def _score_plan(self, pod: Pod) -> _ScorePlan:
        return _ScorePlan([pod_score_request(pod, name, use_requested=False) for name, _ in self._resources])

    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        state.write(_PRE_SCORE_KEY, self._score_plan(pod))
        return None

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        plan = state.read(_PRE_SCORE_KEY)
        if plan is None:
            plan = self._score_plan(pod)
        snapshot = self.handle.snapshot
        view = RowView(snapshot, rows)
        rtcr = self._shape_table
        most = self._strategy == MOST_ALLOCATED
        total: np.ndarray | None = None
        weight_sum: np.ndarray | int = 0
        for (name, weight), pod_request in zip(self._resources, plan.requests):
            col = scored_column(snapshot, name, pod_request)
            if col is None:
                continue
            column = self._columns.column(snapshot, col)
            requested = requested_column(snapshot, view, name, col, use_requested=False) + pod_request
            # nodes without the resource (allocatable 0) score 0 here and are kept out of the
            # weight sum below
            if rtcr is not None:
                utilization = column.percent(view, requested)
                np.minimum(utilization, MAX_UTILIZATION, out=utilization)
                resource_score = rtcr[utilization]
                # a resource scoring 0 on the shape is left out of the mean
                counted = resource_score > 0
                if column.missing_somewhere:
                    counted &= view.cached(column.present)
                resource_score *= counted
                weight_sum = weight_sum + counted * weight
            else:
                if most:
                    resource_score = column.percent(view, np.minimum(requested, view.cached(column.alloc)))
                else:
                    resource_score = column.percent(view, view.cached(column.alloc) - requested)
                    np.maximum(resource_score, 0, out=resource_score)
                if column.missing_somewhere:
                    weight_sum = weight_sum + view.cached(column.present) * weight
                else:
                    weight_sum = weight_sum + weight
            if weight != 1:
                resource_score *= weight
            if total is None:
                total = resource_score
            else:
                total += resource_score
        if total is None:
            return np.zeros(rows.size, dtype=np.int64)
        # where no resource counted the numerator is 0 as well, so dividing by 1 gives 0; the
        # operands are small non-negative integers, exact in float64
        divisor = np.maximum(weight_sum, 1)
        if rtcr is not None:
            # the weighted mean rounded half away from zero
            total *= 2
            total += divisor
            return view.result((total / (2 * divisor)).astype(np.int64))
        return view.result((total / divisor).astype(np.int64))
