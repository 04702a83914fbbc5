"""What would make a gang group that failed its pass fit: the second sentence of its message.

Koordinator and scheduler-plugins say that a gang failed and why its first member did not fit
(`gang ... cannot be placed as a whole: ...; pod ... does not fit: 0/8 nodes are available: ...`).
That tells a person what happened, not what to change. These functions read the snapshot's arrays
once more, only for a group that failed, and say it in numbers:

- a plain gang, per shape of member (requests and constraints): how many members fit nowhere, and
  how many more nodes with how much free room would take them; the nodes counted are those that
  pass the member's other filters (node affinity, taints, ...: the first failure the profile's
  filters record on a node tells a node that is only full from one that does not match), so a
  gang its affinity shuts out is told that no node matches rather than that nodes are missing;
- a topology gang: the best domain of its MustGather layer, the slots it lacks there, how many
  nodes would make them up, and, when the group may preempt, the jobs job-level preemption would
  evict for it (a job as it counts them: the gang group, else the controller, else the pod) and the
  domain that frees. Those are asked of job-level preemption itself, whose choice PostFilter then
  carries out: a count of its own here would name other jobs whenever the two disagree (the
  domain with the most free slots is not the one the tightest eviction frees).

Room is counted as copies of a member's request in each node's free vector (a floor over the
resource columns the request names, the least of them), so the cost is one pass over the nodes
per shape, a bounded number of shapes and jobs, and never a pass per member.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.resources import PODS, format_amount
from koordpy.cache.trial import Trial
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import NARROWED_BY_KEY, Diagnosis, unsatisfied_plugins
from koordpy.plugins.coscheduling.gang import (
    FROM_X_K8S,
    NON_STRICT,
    WAITING_AND_RUNNING,
    Gang,
    member_order_key,
)
from koordpy.plugins.coscheduling.offers import Offers, shape_key
from koordpy.status.topology import CLUSTER_LAYER, TopologyTree

if TYPE_CHECKING:
    from koordpy.plugins.coscheduling.networktopology import NetworkTopologySpec
    from koordpy.plugins.coscheduling.plugin import Coscheduling

# the plugins whose filter failure means "no room": a node they reject passed the filters before
# them (kube-scheduler's order puts NodeResourcesFit after the affinity, taint and port checks)
RESOURCE_PLUGINS = frozenset({names.NODE_RESOURCES_FIT, names.NODE_RESOURCES_FIT_PLUS})
# shapes described: enough for a sentence a person reads, and a bound on the work done for a group
# that failed
MAX_SHAPES = 4


# ============================================================================ room as arrays
def copies(free: np.ndarray, request: np.ndarray) -> np.ndarray:
    """How many copies of `request` each row of `free` holds: the least, over the columns the
    request names, of the free amount divided by the amount asked."""
    cols = np.flatnonzero(request > 0)
    if cols.size == 0:
        return np.full(free.shape[0], np.iinfo(np.int64).max // 2, dtype=np.int64)
    per_col = np.maximum(free[:, cols], 0) // request[cols]
    out: np.ndarray = per_col.min(axis=1)
    return out


def _request(snap: Any, pod: Pod) -> np.ndarray:
    vec = snap.request_vector(pod.requests)
    width = len(snap.resource_names)
    if vec.size < width:
        vec = np.concatenate((vec, np.zeros(width - vec.size, dtype=np.int64)))
    return np.asarray(vec, dtype=np.int64)


def _free(snap: Any, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The free room of `rows` in the resource columns `cols` only: a cluster may have thousands
    of resource names, and a request names a few."""
    free: np.ndarray = snap.allocatable_table(rows, cols) - snap.requested_table(rows, cols)
    return free


def describe(snap: Any, request: np.ndarray, times: int = 1, cols: Sequence[int] | None = None) -> str:
    """`cpu 4, memory 16Gi, nvidia.com/gpu 8`: the named columns of `times` copies of a request
    (every column it asks for but the pod count, when none are named)."""
    named = cols
    if cols is None:
        cols = [int(c) for c in np.flatnonzero(request > 0)]
    pods_col = snap.resource_col[PODS]
    parts = [
        f"{snap.resource_names[c]} {format_amount(snap.resource_names[c], int(request[c]) * times)}"
        for c in cols
        if c != pods_col
    ]
    if not parts and named is not None:
        # only the pod count is short: name what each pod asks for
        return describe(snap, request, times)
    return ", ".join(parts) or "no resources"


@dataclass(slots=True)
class _Matching:
    """Which nodes a member could use apart from room: those its filters pass, and those whose
    first failure was a resource filter's."""

    feasible: np.ndarray
    matching: np.ndarray
    # the kube-style reasons of the nodes that do not match, most frequent first
    reasons: list[tuple[str, int]]
    refused: str


def _matching(profile: Any, pod: Pod, rows: np.ndarray, ignore: Callable[[Pod], bool] | None) -> _Matching:
    snap = profile.handle.snapshot
    state = CycleState()
    allowed, st = profile.run_pre_filter(state, pod)
    empty = rows[:0]
    if st is not None:
        return _Matching(empty, empty, [], st.message)
    candidates = rows
    if allowed is not None:
        candidates = rows[np.isin(rows, [snap.row_of[n] for n in allowed if n in snap.row_of])]
    diagnosis = Diagnosis()
    feasible = profile.run_filter_with_nominated(state, pod, candidates, diagnosis, ignore)
    full: list[int] = []
    reasons: Counter[str] = Counter()
    for row, status in diagnosis.statuses_by_row().items():
        if status.plugin in RESOURCE_PLUGINS:
            full.append(row)
        else:
            for reason in status.reasons:
                reasons[reason] += 1
    outside = rows.size - candidates.size
    if outside:
        # the nodes a PreFilter result left out, as kube-scheduler words them
        reasons[unsatisfied_plugins(state.read(NARROWED_BY_KEY) or ("PreFilter",))] += outside
    matching = np.union1d(feasible, np.asarray(full, dtype=np.int64))
    return _Matching(np.asarray(feasible, dtype=np.int64), matching, reasons.most_common(), "")


def _reasons(reasons: list[tuple[str, int]]) -> str:
    return ", ".join(f"{n} {r}" for r, n in sorted(reasons, key=lambda x: (-x[1], x[0])))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _nodes_needed(
    snap: Any, request: np.ndarray, missing: int, rows: np.ndarray, limiting: Sequence[int]
) -> tuple[int, str]:
    """How many more nodes like the largest of `rows` (empty) would hold `missing` more copies,
    and how much each must have free, named by the limiting columns."""
    per_node = 1
    cols = np.flatnonzero(request > 0)
    if rows.size and cols.size:
        per_node = max(1, int(copies(snap.allocatable_table(rows, cols), request[cols]).max()))
    per_node = min(per_node, missing)
    return math.ceil(missing / per_node), describe(snap, request, per_node, limiting or None)


def _limiting(free: np.ndarray, request: np.ndarray, cols: np.ndarray, wanted: int) -> list[int]:
    """The resource columns that alone could not hold `wanted` copies over the given rows (empty
    when each could, and only their combination on one node falls short). `free` and `request`
    hold the columns `cols` only."""
    asked = np.flatnonzero(request > 0)
    if asked.size == 0 or free.shape[0] == 0:
        return [int(cols[i]) for i in asked]
    per_col = (np.maximum(free[:, asked], 0) // request[asked]).sum(axis=0)
    return [int(cols[i]) for i, n in zip(asked.tolist(), per_col.tolist(), strict=True) if n < wanted]


# ============================================================================ a plain gang
@dataclass(slots=True)
class _Shape:
    pods: list[Pod]
    request: np.ndarray
    found: _Matching
    fit: int
    # the free room of the nodes that match, before this shape took its places, in the columns
    # `cols` (those some shape of the group asks for)
    free_before: np.ndarray
    cols: np.ndarray


def explain_plain(
    profile: Any,
    pods: Sequence[Pod],
    needed: int,
    placed: Mapping[str, int],
    ignore: Callable[[Pod], bool] | None = None,
) -> str | None:
    """For a group that needs `needed` of `pods` (its members still to place, in placement order):
    how many of each shape fit nowhere and what would take them. `placed` maps the members the
    snapshot holds for the failed pass (assumed, about to be given back) to their rows; they are
    counted as gone. None when room is not what is missing."""
    if not pods or needed <= 0:
        return None
    snap = profile.handle.snapshot
    by_shape: dict[tuple[Any, ...], list[Pod]] = {}
    for pod in pods:
        by_shape.setdefault(shape_key(pod), []).append(pod)
    groups = list(by_shape.values())
    shapes: list[_Shape] = []
    with snap.trial() as trial:
        _give_back(trial, snap, placed)
        rows = snap.live_rows()
        requests = [_request(snap, group[0]) for group in groups[:MAX_SHAPES]]
        width = max(r.size for r in requests)
        requests = [np.concatenate((r, np.zeros(width - r.size, dtype=np.int64))) for r in requests]
        # the room is counted in the columns some shape asks for, never over every resource name
        cols = np.flatnonzero(np.any(np.stack(requests) > 0, axis=0))
        free = _free(snap, rows, cols)
        for group, request in zip(groups, requests, strict=False):
            asked = request[cols]
            found = _matching(profile, group[0], rows, ignore)
            if found.refused:
                # PreFilter refuses the shape whatever the room; the first sentence says why
                return None
            feasible = np.isin(rows, found.feasible)
            matching = np.isin(rows, found.matching)
            room = np.where(feasible, copies(free, asked), 0)
            n = len(group)
            before = free[matching].copy()
            # the shape takes its places node by node, and the next shape sees what is left
            take = np.minimum(room, np.maximum(n - (np.cumsum(room) - room), 0))
            free -= take[:, None] * asked[None, :]
            fit = min(n, int(take.sum()))
            shapes.append(_Shape(group, request, found, fit, before, cols))
    short = needed - sum(s.fit for s in shapes) - sum(len(g) for g in groups[MAX_SHAPES:])
    if short <= 0:
        return None
    lines: list[str] = []
    for shape in shapes:
        n = len(shape.pods)
        missing = n - shape.fit
        if missing <= 0:
            continue
        head = f"{missing} of {n} pods ({describe(snap, shape.request)}) fit nowhere"
        wanted = min(missing, short)
        short -= wanted
        match_rows = shape.found.matching
        if wanted <= 0:
            lines.append(head)
        elif match_rows.size == 0:
            count, amount = _nodes_needed(snap, shape.request, wanted, match_rows, ())
            lines.append(
                f"{head}: no node passes their other filters ({_reasons(shape.found.reasons)}); "
                f"{_plural(wanted, 'such pod')} would need {_plural(count, 'node')} that do, "
                f"with {amount} free"
            )
        else:
            limiting = _limiting(shape.free_before, shape.request[shape.cols], shape.cols, n)
            count, amount = _nodes_needed(snap, shape.request, wanted, match_rows, limiting)
            verbs = ("passes", "has") if match_rows.size == 1 else ("pass", "have")
            lines.append(
                f"{head}: the {_plural(int(match_rows.size), 'node')} that {verbs[0]} their other "
                f"filters {verbs[1]} room for {shape.fit}; {_plural(wanted, 'more such pod')} would need "
                f"{_plural(count, 'more node')} with {amount} free"
            )
    if len(groups) > MAX_SHAPES:
        lines.append(f"{len(groups) - MAX_SHAPES} more pod shapes not counted")
    return "; ".join(lines) or None


def _give_back(trial: Trial, snap: Any, placed: Mapping[str, int]) -> None:
    for key, row in placed.items():
        info = snap.infos[row] if 0 <= row < len(snap.infos) else None
        pod = info.pods.get(key) if info is not None else None
        if pod is not None:
            trial.remove_pod(pod, row)


# ============================================================================ a topology gang
@dataclass(frozen=True, slots=True)
class DomainRoom:
    """Each domain of one layer and the slots the group's offers sum to there."""

    layer: str
    names: tuple[str, ...]
    slots: np.ndarray
    # for each domain, the snapshot rows of its nodes
    rows: tuple[np.ndarray, ...]


def domain_room(snap: Any, tree: TopologyTree, layer: str, node_slots: np.ndarray) -> DomainRoom:
    """`node_slots` (per snapshot row) summed over the domains of `layer`."""
    levels = tree.levels()
    depth = tree.chain.depth(layer)
    node_rows = levels.rows(snap.row_of, (id(snap), snap.node_generation))
    vertex = np.arange(len(levels.nodes), dtype=np.int64)
    for d in range(levels.depth, depth, -1):
        vertex = levels.parents[d][vertex]
    inside = node_rows >= 0
    count = len(levels.paths[depth])
    per_node = np.where(inside, node_slots[np.where(inside, node_rows, 0)], 0)
    sums = np.bincount(vertex, weights=per_node, minlength=count).astype(np.int64)
    order = np.argsort(vertex, kind="stable")
    bounds = np.searchsorted(vertex[order], np.arange(count + 1))
    rows = tuple(
        node_rows[order[bounds[i] : bounds[i + 1]]][inside[order[bounds[i] : bounds[i + 1]]]]
        for i in range(count)
    )
    labels = tuple(
        CLUSTER_LAYER if not path else "/".join(path) if _ambiguous(levels.paths[depth], path) else path[-1]
        for path in levels.paths[depth]
    )
    return DomainRoom(layer, labels, sums, rows)


def _ambiguous(paths: Sequence[tuple[str, ...]], path: tuple[str, ...]) -> bool:
    return sum(1 for p in paths if p and p[-1] == path[-1]) > 1


@dataclass(frozen=True, slots=True)
class Victim:
    """A pod job-level preemption would evict: its job (the gang group, else the controller, else
    the pod), its priority, and its snapshot row."""

    job: str
    priority: int
    row: int


def explain_topology(
    profile: Any,
    tree: TopologyTree,
    layer: str | None,
    members: Sequence[Pod],
    offers: Offers,
    victims: Sequence[Victim] = (),
) -> str | None:
    """The best domain of the MustGather `layer` (the cluster when there is none) for a group whose
    plan found no domain, what it lacks, and what would make it up: more nodes there, or the
    `victims` job-level preemption would evict for it (named by job, with the domain they free
    when it is not the best one). None when the domains hold enough slots (a podCountMultiple
    split failed, not room) or PreFilter refused the members."""
    if not members or offers.diagnosis.pre_filter_status is not None:
        return None
    snap = profile.handle.snapshot
    layer = layer or CLUSTER_LAYER
    desired = len(members)
    room = domain_room(snap, tree, layer, offers.slots)
    if room.slots.size == 0:
        return None
    best = int(np.argmax(room.slots))  # the first of the largest: path order breaks ties
    have = int(room.slots[best])
    if have >= desired:
        return None
    short = desired - have
    rows = room.rows[best]
    name = room.names[best]
    where = "the cluster" if layer == CLUSTER_LAYER else name
    request = _request(snap, members[0])
    cols = np.flatnonzero(request > 0)
    free = _free(snap, rows, cols)
    count, amount = _nodes_needed(snap, request, short, rows, _limiting(free, request[cols], cols, short))
    if layer == CLUSTER_LAYER:
        head = f"The group needs {desired} pods; the cluster has {_plural(have, 'free slot')}"
    else:
        head = (
            f"The group needs {desired} pods in one {layer} domain; best is {name} with "
            f"{_plural(have, 'free slot')}"
        )
    change = f"{_plural(count, 'more node')} with {amount} free in {where}"
    if victims:
        priorities: dict[str, int] = {}
        for v in victims:
            priorities[v.job] = max(priorities.get(v.job, v.priority), v.priority)
        jobs = sorted(priorities.items(), key=lambda jp: (jp[1], jp[0]))
        change += f", or preempting {_jobs_phrase(jobs)}"
        # the domain preemption frees, named when it is not the one counted above
        freed = [i for i, domain in enumerate(room.rows) if np.isin(victims[0].row, domain)]
        if layer != CLUSTER_LAYER and freed and freed[0] != best:
            change += f" in {room.names[freed[0]]}"
    return f"{head}; {change} would place it"


def _jobs_phrase(jobs: Sequence[tuple[str, int]]) -> str:
    priorities = sorted({p for _, p in jobs})
    word = "job" if len(jobs) == 1 else "jobs"
    if len(priorities) == 1:
        return f"{word} {', '.join(j for j, _ in jobs)} (priority {priorities[0]})"
    return f"{word} {', '.join(f'{j} (priority {p})' for j, p in jobs)}"


# ============================================================================ for Coscheduling
def explain_failed_pass(plugin: Coscheduling, pod: Pod, gang: Gang, kept: bool) -> str | None:
    """The explanation of a plain gang group's failed pass, from the plugin's registry: the
    members still to place (with those the pass placed, unless the group keeps them waiting), and
    how many of them it needs: every one for a Strict gang, which is rolled back at any member's
    failure, else what its minimum still lacks."""
    registry = plugin.registry
    cache = plugin.handle.cache
    snap = plugin.handle.snapshot
    to_place = plugin.batch_members(pod) or []
    placed: dict[str, int] = {}
    if not kept:
        waiting = [k for g in registry.group(gang) if g is not None for k in sorted(g.waiting)]
        for key in waiting:
            state = cache.pod_state(key)
            member = registry.pods.get(key)
            row = snap.row_of.get(state.node_name) if state is not None else None
            if member is not None and row is not None:
                placed[key] = row
                to_place.append(member)
    needed = 0
    for g in registry.group(gang):
        if g is None or g.spec is None:
            continue
        mine = sum(1 for p in to_place if p.key in g.children)
        if g.source != FROM_X_K8S and g.spec.mode != NON_STRICT:
            needed += mine
            continue
        have = len(g.waiting) if kept else 0
        if g.spec.match_policy == WAITING_AND_RUNNING:
            have += len(g.bound)
        needed += min(mine, max(0, g.spec.min_member - have))
    to_place.sort(key=member_order_key)
    return explain_plain(plugin.handle.profile, to_place, needed, placed, plugin.same_job(pod))


def explain_no_domain(
    plugin: Coscheduling,
    pod: Pod,
    members: Sequence[Pod],
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    offers: Offers,
) -> str | None:
    """The explanation of a topology gang group no domain holds, naming the jobs job-level
    preemption would evict for it when the group may preempt (Coscheduling's PostFilter runs and
    preemption is enabled): the very choice PostFilter carries out after the pass (the first
    member is its trigger, and the plan's diagnosis its diagnosis), so the message never names a
    job that is not evicted."""
    profile: Any = plugin.handle.profile
    may_preempt = plugin.cargs.enable_preemption and any(
        getattr(p, "NAME", None) == names.COSCHEDULING for p in profile.post_filter
    )
    victims: list[Victim] = []
    gang = plugin.registry.gang(members[0]) if members else None
    if may_preempt and gang is not None:
        choice = plugin.preemption.select(members[0], gang, offers.diagnosis)
        if choice.plan is not None:
            victims = [Victim(v.job, v.pod.priority, v.row) for v in choice.victims]
    layer = spec.must_gather_layer(tree.chain)
    return explain_topology(profile, tree, layer, members, offers, victims)
