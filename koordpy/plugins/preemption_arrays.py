"""Preemption's dry run over the node arrays, for nodes where only resources stand in the way.

kube-scheduler's SelectVictimsOnNode, per node: take every pod the preemptor may evict off the
node, check that the preemptor then passes every filter (with the pods nominated there that are at
least as important added, then without them), and give the victims back one at a time, most
important first (those whose eviction breaks a PodDisruptionBudget before the others), each one
that leaves the preemptor fitting staying on the node. Each check runs every filter in a trial.

Where the only filter whose verdict depends on the node's pods is NodeResourcesFit (the others
read the node object, or read pods the dry run does not move), each check is arithmetic on the
node's row: its requested amounts, less what the victims hold, plus what the nominated pods hold,
against allocatable. This module does that for a batch of nodes at once:

1. per node, the pods the preemptor may evict and the sum of their requests (one pass over the
   pods of the batch; request vectors are shared by pods of one template);
2. the filters in profile order over the batch, NodeResourcesFit replaced by the arithmetic with
   every victim gone, the others run as they are (their verdict does not move with the victims):
   the first failure is the node's status, exactly as the trial would give it;
3. for the nodes left, the give-back loop, one step per victim position across all of them: a
   victim stays when the running sum plus its request is within allocatable on every column the
   preemptor's request is checked on.

Nodes where a moved pod could change another filter's verdict (a victim or nominated pod with a
host port while NodePorts runs, with required anti-affinity while InterPodAffinity runs) are left
to the trial; so is everything, when the preemptor itself has pod (anti-)affinity or a filter runs
that this module does not know to be blind to the moved pods (PodTopologySpread with
DoNotSchedule constraints, an elastic quota's check, any out-of-tree filter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.cache.snapshot import Snapshot
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import FilterPlugin
from koordpy.framework.status import Status
from koordpy.plugins.disruptionbudgets import Budget, split_by_pdb
from koordpy.plugins.noderesourcesfit import FitRequest

# NodeResourcesFit's PreFilter state: the preemptor's request over the columns Filter checks
_FIT_STATE_KEY = "PreFilter" + names.NODE_RESOURCES_FIT

# filters whose verdict on a node reads the node object only (and storage objects no eviction
# changes: a volume bound to a claim stays bound when the pods using it go)
_BLIND_TO_PODS = frozenset(
    {
        names.NODE_UNSCHEDULABLE,
        names.NODE_NAME,
        names.TAINT_TOLERATION,
        names.NODE_AFFINITY,
        names.VOLUME_ZONE,
        names.VOLUME_BINDING,
    }
)


@dataclass(slots=True)
class ArrayPlan:
    """How the array path checks one preemptor: its request, and the filters to run in order."""

    fit: FitRequest
    cols: np.ndarray
    # allocatable less this is the most a node's pods may request of each checked column
    values: np.ndarray
    filters: list[FilterPlugin]
    # a moved pod with a host port (NodePorts runs) or with required anti-affinity
    # (InterPodAffinity runs) sends its node to the trial
    watch_ports: bool
    watch_anti_affinity: bool


def fit_request(state: CycleState) -> FitRequest | None:
    """The preemptor's request as NodeResourcesFit checks it; None when that filter does not run."""
    fit = state.read(_FIT_STATE_KEY)
    if isinstance(fit, FitRequest) and names.NODE_RESOURCES_FIT not in state.skip_filter:
        return fit
    return None


def array_plan(handle: Handle, state: CycleState, pod: Pod) -> ArrayPlan | None:
    """The plan for this preemptor, or None when every node must go through the trial."""
    profile = handle.profile
    if profile is None:
        return None
    fit = fit_request(state)
    if fit is None:
        return None
    filters: list[FilterPlugin] = []
    watch_ports = watch_anti = False
    for p in profile.filter:
        name = p.NAME
        if name in state.skip_filter:
            continue
        if name == names.NODE_PORTS:
            watch_ports = True
        elif name == names.INTER_POD_AFFINITY:
            if pod.has_pod_affinity:
                return None
            watch_anti = True
        elif name != names.NODE_RESOURCES_FIT and name not in _BLIND_TO_PODS:
            return None
        filters.append(p)
    if not any(p.NAME == names.NODE_RESOURCES_FIT for p in filters):
        return None
    return ArrayPlan(
        fit,
        np.array(fit.cols, dtype=np.int64),
        np.array(fit.values, dtype=np.int64),
        filters,
        watch_ports,
        watch_anti,
    )


@dataclass(slots=True)
class RowOutcome:
    """One node's dry run: the victims (most important first) and how many break a PDB, or the
    status saying why the node cannot be a candidate."""

    victims: list[Pod]
    violations: int
    status: Status | None


@dataclass(slots=True)
class _Vectors:
    """Request vectors over the checked columns, one per distinct request mapping."""

    cols: np.ndarray
    index_of: dict[int, int]
    rows: list[np.ndarray]
    # by the identity of a pod's requests mapping (pods of one template share it)
    of_mapping: dict[int, tuple[object, int]]
    request_vector: Callable[[Mapping[str, int]], np.ndarray]

    def of(self, requests: Mapping[str, int]) -> int:
        known = self.of_mapping.get(id(requests))
        if known is not None and known[0] is requests:
            return known[1]
        i = self.index(self.request_vector(requests))
        self.of_mapping[id(requests)] = (requests, i)
        return i

    def index(self, vec: np.ndarray) -> int:
        i = self.index_of.get(id(vec))
        if i is None:
            i = self.index_of[id(vec)] = len(self.rows)
            self.rows.append(vec[self.cols])
        return i

    def matrix(self) -> np.ndarray:
        width = self.cols.size
        if not self.rows:
            return np.zeros((0, width), dtype=np.int64)
        return np.stack(self.rows).astype(np.int64, copy=False).reshape(-1, width)


def fit_limits(snapshot: Snapshot, fit: FitRequest, rows: np.ndarray) -> np.ndarray:
    """Per row, whether the preemptor's request is within allocatable on every checked column:
    elsewhere no eviction can make it fit."""
    cols = np.array(fit.cols, dtype=np.int64)
    values = np.array(fit.values, dtype=np.int64)
    within: np.ndarray = np.all(snapshot.allocatable_table(rows, cols) >= values, axis=1)
    return within


def dry_run_rows(
    handle: Handle,
    plan: ArrayPlan,
    state: CycleState,
    pod: Pod,
    rows: np.ndarray,
    budgets: Sequence[Budget],
    potential_of: Callable[[int], list[Pod]],
    started: Callable[[Pod], float],
    no_victims: Status,
) -> list[RowOutcome | None]:
    """Per row, its outcome; None for the rows the trial must take. `potential_of(row)`: the pods
    on the node the preemptor may evict; `started(pod)`: the start time that orders pods of one
    priority (the earlier the more important)."""
    snap = handle.snapshot
    infos = snap.infos
    m = int(rows.size)
    out: list[RowOutcome | None] = [None] * m
    vectors = _Vectors(plan.cols, {}, [], {}, snap.request_vector)
    vector_of = vectors.of
    nominated = _nominated_by_row(handle, pod, rows)

    # the pods each node would see moved: its potential victims, and the nominated pods added
    fast: list[int] = []
    victims: list[Pod] = []
    victim_pos: list[int] = []
    nominated_pos: list[int] = []
    nominated_vec: list[int] = []
    watch_ports = plan.watch_ports
    watch_anti = plan.watch_anti_affinity
    for i, row in enumerate(rows.tolist()):
        potential = potential_of(row)
        if not potential:
            out[i] = RowOutcome([], 0, no_victims)
            continue
        others = nominated.get(row, ())
        if watch_ports or watch_anti or others:
            moved = [*potential, *others]
            if watch_ports and any(p.host_ports for p in moved):
                continue
            if watch_anti and any(p.required_anti_affinity for p in moved):
                continue
            info = infos[row]
            assert info is not None
            if any(o.key in info.pods for o in others):
                continue
            for o in others:
                nominated_pos.append(i)
                nominated_vec.append(vector_of(o.requests))
        fast.append(i)
        victims.extend(potential)
        victim_pos.extend([i] * len(potential))
    if not fast:
        return out
    victim_vec = np.array([vector_of(v.requests) for v in victims], dtype=np.int64)
    pos_of_victim = np.array(victim_pos, dtype=np.int64)
    table = vectors.matrix()
    change = np.zeros((m, plan.cols.size), dtype=np.int64)
    np.subtract.at(change, pos_of_victim, table[victim_vec])
    if nominated_pos:
        np.add.at(
            change, np.array(nominated_pos, dtype=np.int64), table[np.array(nominated_vec, dtype=np.int64)]
        )
    requested = snap.requested_table(rows, plan.cols)
    # a node's pods may request at most this of each column for the preemptor to fit
    limit = snap.allocatable_table(rows, plan.cols) - plan.values
    short = (requested + change) > limit
    codes = np.zeros(m, dtype=np.int64)
    for bit in range(plan.cols.size):
        codes |= short[:, bit].astype(np.int64) << bit

    alive = _first_failures(plan, state, pod, rows, np.array(fast, dtype=np.int64), codes, out)
    if alive.size == 0:
        return out

    # the victims of the nodes left, most important first (higher priority, then earlier start),
    # by node; PDB-breaking ones go first, each group in that order
    a = int(alive.size)
    k_of = np.full(m, -1, dtype=np.int64)
    k_of[alive] = np.arange(a, dtype=np.int64)
    keep = np.flatnonzero(k_of[pos_of_victim] >= 0)
    kept = [victims[j] for j in keep.tolist()]
    priority = np.fromiter((v.priority for v in kept), dtype=np.int64, count=len(kept))
    start = np.fromiter((started(v) for v in kept), dtype=np.float64, count=len(kept))
    node_k = k_of[pos_of_victim[keep]]
    order = np.lexsort((start, -priority, node_k))
    ordered = [kept[j] for j in order.tolist()]
    node_k = node_k[order]
    vec = victim_vec[keep][order]
    breaks = np.zeros(len(ordered), dtype=bool)
    if budgets:
        # a node's PDB-breaking victims first (split_by_pdb keeps each group's order)
        bounds = np.flatnonzero(np.diff(node_k)) + 1
        regroup: list[int] = []
        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(ordered)], strict=True):
            group = ordered[lo:hi]
            violating, _ = split_by_pdb(group, budgets)
            bad = {id(v) for v in violating}
            first = [j for j in range(lo, hi) if id(ordered[j]) in bad]
            regroup.extend(first)
            regroup.extend(j for j in range(lo, hi) if id(ordered[j]) not in bad)
            breaks[first] = True
        idx = np.array(regroup, dtype=np.int64)
        ordered = [ordered[j] for j in regroup]
        vec, breaks = vec[idx], breaks[idx]
    # give them back in that order: one stays when the node still fits the preemptor with it
    step, present, depth_of = by_depth(node_k, a, table[vec])
    evicted = give_back(requested[alive] + change[alive], limit[alive], step, present)
    gone = evicted[node_k, depth_of]
    chosen: list[list[Pod]] = [[] for _ in range(a)]
    violations = [0] * a
    for j, k, broke in zip(
        np.flatnonzero(gone).tolist(), node_k[gone].tolist(), breaks[gone].tolist(), strict=True
    ):
        chosen[k].append(ordered[j])
        violations[k] += broke
    for k, pos in enumerate(alive.tolist()):
        picked = chosen[k]
        if 0 < violations[k] < len(picked):
            # most important first, whichever group each came from
            picked.sort(key=lambda v: (-v.priority, started(v)))
        out[pos] = RowOutcome(picked, violations[k], None)
    return out


def by_depth(node_k: np.ndarray, nodes: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Victims grouped by node (`node_k`, nondecreasing, each victim's node among `nodes`), laid
    out one position per victim on its node: (the victims' `values` by node and position,
    whether a position holds a victim, each victim's position)."""
    first_of = np.searchsorted(node_k, np.arange(nodes, dtype=np.int64))
    depth_of = np.arange(node_k.size, dtype=np.int64) - first_of[node_k]
    depth = int(depth_of.max()) + 1 if node_k.size else 0
    step = np.zeros((nodes, depth, values.shape[1]), dtype=np.int64)
    present = np.zeros((nodes, depth), dtype=bool)
    step[node_k, depth_of] = values
    present[node_k, depth_of] = True
    return step, present, depth_of


def give_back(running: np.ndarray, limit: np.ndarray, step: np.ndarray, present: np.ndarray) -> np.ndarray:
    """The give-back loop, one victim position at a time across all nodes (laid out by
    `by_depth`): a victim stays when its node's running sum with it is within `limit` on every
    column. Returns, per node and position, whether the victim there is evicted."""
    evicted = np.zeros(present.shape, dtype=bool)
    for d in range(present.shape[1]):
        trial = running + step[:, d]
        stays = present[:, d] & (trial <= limit).all(axis=1)
        running = np.where(stays[:, None], trial, running)
        evicted[:, d] = present[:, d] & ~stays
    return evicted


def _nominated_by_row(handle: Handle, pod: Pod, rows: np.ndarray) -> dict[int, list[Pod]]:
    """The nominated pods that hold room against the preemptor (its priority or higher), on the
    rows of the dry run."""
    within = np.zeros(handle.snapshot.capacity, dtype=bool)
    within[rows] = True
    return handle.nominator.holding(pod, handle.snapshot, within)


def _first_failures(
    plan: ArrayPlan,
    state: CycleState,
    pod: Pod,
    rows: np.ndarray,
    alive: np.ndarray,
    codes: np.ndarray,
    out: list[RowOutcome | None],
) -> np.ndarray:
    """The filters in profile order over the positions `alive`, NodeResourcesFit's verdict from
    `codes` (every victim gone), the others as they stand (the victims do not move them): each
    failing node's outcome is its first failure. Returns the positions that pass every filter."""
    for p in plan.filters:
        if alive.size == 0:
            break
        if p.NAME == names.NODE_RESOURCES_FIT:
            failed = codes[alive] != 0
            statuses: dict[int, Status] = {}
            for pos, code in zip(alive[failed].tolist(), codes[alive[failed]].tolist(), strict=True):
                st = statuses.get(code)
                if st is None:
                    st = statuses[code] = plan.fit.status(code).with_plugin(p.NAME)
                out[pos] = RowOutcome([], 0, st)
            alive = alive[~failed]
            continue
        result = p.filter(state, pod, rows[alive])
        if result is None:
            continue
        for j in np.flatnonzero(~result.passed).tolist():
            out[int(alive[j])] = RowOutcome([], 0, result.status_at(j).with_plugin(p.NAME))
        alive = alive[result.passed]
    return alive


def hopeless_verdicts(
    handle: Handle,
    plan: ArrayPlan | None,
    state: CycleState,
    pod: Pod,
    rows: np.ndarray,
    no_victims: Status,
) -> tuple[list[tuple[Status, int]], np.ndarray]:
    """Why the nodes `rows`, where the preemptor's request is above allocatable, are not
    candidates, for those the node arrays can tell: (status, number of nodes) pairs, and the rows
    left for the dry run.

    No choice of victims matters on such a node. With no pod the preemptor may evict, it has no
    victims (kube-scheduler says so before running any filter). Otherwise its verdict is the first
    filter failing with every victim gone, and NodeResourcesFit fails then, at least on the columns
    above allocatable: the columns it reports are known unless one of them is short only while
    some of the node's pods stay, which the node's total request cannot tell. Such a node, one with
    nominated pods holding room, and one where a moved pod could change another filter's verdict
    are left to the dry run."""
    snap = handle.snapshot
    told: list[tuple[Status, int]] = []
    if rows.size == 0:
        return told, rows
    has_victims = np.zeros(rows.size, dtype=bool)
    priority = pod.priority
    for other, on_row in snap.preemptible_counts.items():
        if other < priority:
            has_victims |= np.asarray(on_row, dtype=np.int64)[rows] > 0
    without = int(rows.size) - int(np.count_nonzero(has_victims))
    if without:
        told.append((no_victims, without))
    rows = rows[has_victims]
    if plan is None or rows.size == 0:
        return told, rows

    undecided = np.zeros(rows.size, dtype=bool)
    nominated = _nominated_by_row(handle, pod, rows)
    if nominated:
        undecided |= np.isin(rows, np.fromiter(nominated, dtype=np.int64, count=len(nominated)))
    if plan.watch_ports and snap.host_ports:
        ported = {row for by_row in snap.host_ports.values() for row in by_row}
        undecided |= np.isin(rows, np.fromiter(ported, dtype=np.int64, count=len(ported)))
    if plan.watch_anti_affinity:
        for (kind, _, _), carried in snap.term_counts.items():
            if kind == "anti":
                undecided |= carried[rows] > 0
    requested = snap.requested_table(rows, plan.cols)
    limit = snap.allocatable_table(rows, plan.cols) - plan.values
    # what the pods left on a node request is between nothing and all they request now
    short = limit < 0
    undecided |= ((requested > limit) & ~short).any(axis=1)
    codes = np.zeros(rows.size, dtype=np.int64)
    for bit in range(plan.cols.size):
        codes |= short[:, bit].astype(np.int64) << bit

    alive = np.flatnonzero(~undecided)
    for p in plan.filters:
        if alive.size == 0:
            break
        if p.NAME == names.NODE_RESOURCES_FIT:
            found, counts = np.unique(codes[alive], return_counts=True)
            for code, count in zip(found.tolist(), counts.tolist(), strict=True):
                told.append((plan.fit.status(code).with_plugin(p.NAME), count))
            break
        result = p.filter(state, pod, rows[alive])
        if result is None:
            continue
        for j in np.flatnonzero(~result.passed).tolist():
            told.append((result.status_at(j).with_plugin(p.NAME), 1))
        alive = alive[result.passed]
    return told, rows[undecided]
