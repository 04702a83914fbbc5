"""Job-level preemption planned over the node arrays, for gang groups whose members compete with
the victims for resources only.

The dry run of `preemption.py` takes every legal victim off its node in a trial and runs the
profile's filters for each member over the nodes, then costs the nodes victim by victim. When the
filters that run for every member read the node object only, or read pods the preemption does not
move (`preemption_arrays.array_plan`), no member has host ports, inter-pod (anti-)affinity or
spread constraints, no victim or nominated pod has required anti-affinity, and no plugin's victim
rules apply (elastic quota counts the victims as gone), every step is arithmetic on the nodes' rows
instead: what a node's pods request, less what its legal victims hold ("free + freeable"), plus
the members planned there so far and the room nominated to other pods, against allocatable. The
steps are the trial's, one for one:

- a member's feasible nodes: the other filters once over the nodes (their verdict does not move
  with the victims or the members), NodeResourcesFit's verdict from the arithmetic;
- the victims a member alone needs on each feasible node: `preemption_arrays.give_back`, one
  victim position at a time across all of them;
- a node's cost (PDBs broken, new victim jobs, their priority ranks, victims): sums per node
  over the victims;
- how many members each node can hold (packing, the topology plan's offers): running sums of
  the members' requests, as `offers.offer_slots` counts pods that compete for resources only;
- the fewest victims of a plan: per planned node, each victim given back while the members
  planned there still fit one after the other.

Nodes where no member's request fits allocatable, or whose filters fail for every member, are
never costed. The caller confirms the plan it chooses in a trial with the real filters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.resources import PODS
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.plugins import preemption_arrays as arrays
from koordpy.plugins.disruptionbudgets import Budget, split_by_pdb
from koordpy.plugins.noderesourcesfit import FitRequest

# ways of choosing each member's node when members are planned one by one (see preemption.py)
BY_NEED = "need"
BY_ALL = "all"
PACKED = "packed"


@dataclass(slots=True)
class Victim:
    pod: Pod
    row: int
    job: str
    rank: int
    # evicting it (with the others on its node) would break a PodDisruptionBudget
    breaks_pdb: bool = False


@dataclass(slots=True)
class _Member:
    """One member as the arithmetic checks it."""

    pod: Pod
    fit: FitRequest
    cols: np.ndarray
    # allocatable less this is the most a node's pods may request of each checked column
    values: np.ndarray
    # its request over the planner's columns
    vec: np.ndarray
    # per row: PreFilter allows the node and every filter but NodeResourcesFit passes
    allowed: np.ndarray
    # per row: every filter but NodeResourcesFit passes (PreFilter's node set aside)
    passes: np.ndarray
    # per row, the requests of the pods nominated there that hold room against it
    held: np.ndarray | None


@dataclass(slots=True)
class Cost:
    """Per node: PDBs broken, new victim jobs, their priority ranks, victims (lower is better)."""

    pdbs: np.ndarray
    jobs: np.ndarray
    ranks: np.ndarray
    victims: np.ndarray


class FreeablePlanner:
    """The members planned against free + freeable capacity (see the module doc)."""

    def __init__(
        self,
        handle: Handle,
        members: Sequence[_Member],
        victims: Sequence[Victim],
        ignore: Callable[[Pod], bool],
        budgets: Sequence[Budget],
        cols: np.ndarray,
    ) -> None:
        snap = handle.snapshot
        self.handle = handle
        self.members = members
        self.victims = victims
        self.ignore = ignore
        self.budgets = budgets
        # the arrays hold only the resources the members ask for or are checked on (`cols`)
        self.cols = cols
        width = int(cols.size)
        every_row = np.arange(snap.capacity, dtype=np.int64)
        self.allocatable = snap.allocatable_table(every_row, cols.tolist())
        v = len(victims)
        job_ids: dict[str, int] = {}
        # request vectors over the planner's columns, one per requests mapping (pods of one
        # template share theirs), held with the mapping so that its id stays its own
        local_of: dict[int, tuple[Mapping[str, int], int]] = {}
        locals_: list[np.ndarray] = []

        def vector_of(requests: Mapping[str, int]) -> int:
            known = local_of.get(id(requests))
            if known is not None and known[0] is requests:
                return known[1]
            local_of[id(requests)] = (requests, len(locals_))
            locals_.append(_local(snap.request_vector(requests), cols))
            return len(locals_) - 1

        # one pass over the victims: row, rank, PDB, job, request, priority, name
        columns: list[tuple[int, int, bool, int, int, int, str]] = [
            (
                x.row,
                x.rank,
                x.breaks_pdb,
                job_ids.setdefault(x.job, len(job_ids)),
                vector_of(x.pod.requests),
                x.pod.priority,
                x.pod.name,
            )
            for x in victims
        ]
        rows_, ranks_, breaks_, jobs_, index_, priorities_, names_ = (
            zip(*columns, strict=True) if columns else ((),) * 7
        )
        self.row = np.array(rows_, dtype=np.int64)
        self.rank = np.array(ranks_, dtype=np.int64)
        self.breaks = np.array(breaks_, dtype=bool)
        self.job = np.array(jobs_, dtype=np.int64)
        self.jobs = max(len(job_ids), 1)
        index = np.array(index_, dtype=np.int64)
        self.vec = np.stack(locals_)[index] if v else np.zeros((0, width), dtype=np.int64)
        self.freed = np.zeros((snap.capacity, width), dtype=np.int64)
        np.add.at(self.freed, self.row, self.vec)
        self.has = np.zeros(snap.capacity, dtype=bool)
        self.has[self.row] = True
        self.pdb_row = np.zeros(snap.capacity, dtype=bool)
        self.pdb_row[self.row[self.breaks]] = True
        # every legal victim gone: what the nodes' pods still request
        self.base = snap.requested_table(every_row, cols.tolist()) - self.freed
        # the fewest-victims order, by node: PDB-protected first, then the most important
        # (priority, then job, then name); names and jobs compare as strings
        job_rank = np.zeros(self.jobs, dtype=np.int64)
        job_rank[[job_ids[j] for j in sorted(job_ids)]] = np.arange(len(job_ids), dtype=np.int64)
        name_codes: dict[str, int] = {}
        name_ids = np.array([name_codes.setdefault(n, len(name_codes)) for n in names_], dtype=np.int64)
        name_rank = np.zeros(max(len(name_codes), 1), dtype=np.int64)
        name_rank[[name_codes[n] for n in sorted(name_codes)]] = np.arange(len(name_codes), dtype=np.int64)
        self.order = np.lexsort(
            (
                name_rank[name_ids] if v else name_ids,
                job_rank[self.job] if v else self.job,
                -np.array(priorities_, dtype=np.int64),
                ~self.breaks,
                self.row,
            )
        )
        self.sorted_rows = self.row[self.order]
        live = snap.live_rows()
        self.name_rank = np.zeros(snap.capacity, dtype=np.int64)
        by_name = sorted(live.tolist(), key=snap.node_name)
        self.name_rank[np.array(by_name, dtype=np.int64)] = np.arange(len(by_name), dtype=np.int64)
        self.live = live
        self.pods_col = int(np.searchsorted(cols, snap.resource_col[PODS]))

    # ------------------------------------------------------------------------------ building
    @classmethod
    def build(
        cls,
        handle: Handle,
        members: Sequence[Pod],
        victims: Sequence[Victim],
        ignore: Callable[[Pod], bool],
        budgets: Sequence[Budget],
    ) -> FreeablePlanner | None:
        """The planner, or None when some member needs the trial (see the module doc)."""
        profile: Any = handle.profile
        if profile is None:
            return None
        snap = handle.snapshot
        for m in members:
            if (
                m.host_ports
                or m.required_affinity
                or m.required_anti_affinity
                or m.spread_constraints
                or handle.victim_rules_apply(m)
            ):
                return None
        prepared: list[tuple[Pod, CycleState, frozenset[str] | None, arrays.ArrayPlan]] = []
        watch_anti = False
        for m in members:
            state = CycleState()
            allowed, st = profile.run_pre_filter(state, m)
            if st is not None:
                return None
            plan = arrays.array_plan(handle, state, m)
            if plan is None:
                return None
            watch_anti |= plan.watch_anti_affinity
            prepared.append((m, state, None if allowed is None else frozenset(allowed), plan))
        if watch_anti and any(v.pod.required_anti_affinity for v in victims):
            return None
        nominated = _nominated(handle)
        for row, pods in nominated.items():
            info = snap.infos[row]
            assert info is not None
            for o in pods:
                if o.key in info.pods or (watch_anti and o.required_anti_affinity):
                    return None
        # every column a request names exists from here on
        for v in victims:
            snap.request_vector(v.pod.requests)
        wanted = {snap.resource_col[PODS]}
        for m, _, _, plan in prepared:
            wanted.update(plan.fit.cols)
            wanted.update(np.flatnonzero(snap.request_vector(m.requests) > 0).tolist())
        cols = np.array(sorted(wanted), dtype=np.int64)
        live = snap.live_rows()
        passes_of: dict[tuple[Any, ...], np.ndarray] = {}
        out: list[_Member] = []
        for m, state, allowed, plan in prepared:
            key = (_filter_key(m), tuple(p.NAME for p in plan.filters))
            passes = passes_of.get(key)
            if passes is None:
                passes = passes_of[key] = _passes(plan, state, m, live, snap.capacity)
            permitted = passes
            if allowed is not None:
                inside = np.zeros(snap.capacity, dtype=bool)
                inside[[snap.row_of[n] for n in allowed if n in snap.row_of]] = True
                permitted = passes & inside
            vec = _local(snap.request_vector(m.requests), cols)
            held = None
            for row, pods in nominated.items():
                for o in pods:
                    if o.key != m.key and o.priority >= m.priority and not ignore(o):
                        if held is None:
                            held = np.zeros((snap.capacity, cols.size), dtype=np.int64)
                        held[row] += _local(snap.request_vector(o.requests), cols)
            at = np.searchsorted(cols, plan.cols)
            out.append(_Member(m, plan.fit, at, plan.values, vec, permitted, passes, held))
        return cls(handle, out, victims, ignore, budgets, cols)

    # ------------------------------------------------------------------------------ members
    def _fits(self, m: _Member, used: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per row, whether the member's request fits beside `used` (and the room nominated to
        others), on every column NodeResourcesFit checks."""
        taken = used[np.ix_(rows, m.cols)]
        if m.held is not None:
            taken = taken + m.held[np.ix_(rows, m.cols)]
        fits: np.ndarray = (taken <= self.allocatable[np.ix_(rows, m.cols)] - m.values).all(axis=1)
        return fits

    def _feasible(self, m: _Member, used: np.ndarray) -> np.ndarray:
        rows = self.live[m.allowed[self.live]]
        feasible: np.ndarray = rows[self._fits(m, used, rows)]
        return feasible

    def place(self, way: str) -> tuple[dict[str, int] | None, str]:
        """Member by member, each with the earlier ones on their nodes: pod key -> row (None and
        why, when some member cannot be placed)."""
        used = self.base.copy()
        taken_victims = np.zeros(len(self.victims), dtype=bool)
        taken_jobs = np.zeros(self.jobs, dtype=bool)
        taken_rows = np.zeros(used.shape[0], dtype=bool)
        room = self.slots() if way == PACKED else None
        rows: dict[str, int] = {}
        for m in self.members:
            feasible = self._feasible(m, used)
            if feasible.size == 0:
                return None, f"pod {m.pod.key} does not fit even with every lower-priority pod evicted"
            best = self._cheapest_row(m, feasible, used, taken_victims, taken_jobs, taken_rows, way, room)
            rows[m.pod.key] = best
            used[best] += m.vec
        return rows, ""

    def _cheapest_row(
        self,
        m: _Member,
        feasible: np.ndarray,
        used: np.ndarray,
        taken_victims: np.ndarray,
        taken_jobs: np.ndarray,
        taken_rows: np.ndarray,
        way: str,
        room: np.ndarray | None,
    ) -> int:
        """preemption.py's `_cheapest_row` over the arrays; what the node costs joins the taken."""
        rows = feasible
        if room is not None:
            on_used = taken_rows[feasible]
            if on_used.any():
                rows = feasible[on_used]
            else:
                r = room[feasible]
                rows = feasible[r == r.max()]
        free = rows[~self.has[rows]]
        if free.size:
            best = int(free[np.lexsort((self.name_rank[free], ~taken_rows[free]))[0]])
        else:
            idx, node_k = self._victims_on(rows)
            if way == BY_NEED:
                needed, breaks = self._needed(m, rows, used, idx, node_k)
            else:
                needed, breaks = np.ones(idx.size, dtype=bool), self.breaks[idx]
            cost = self._cost(rows.size, idx, node_k, needed, breaks, taken_victims, taken_jobs)
            pick = np.lexsort(
                (self.name_rank[rows], ~taken_rows[rows], cost.victims, cost.ranks, cost.jobs, cost.pdbs)
            )[0]
            best = int(rows[pick])
            mine = idx[needed & (node_k == pick)]
            taken_jobs[self.job[mine]] = True
            taken_victims[mine] = True
        taken_rows[best] = True
        return best

    def _victims_on(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The victims on `rows` (ascending), in the fewest-victims order by node, and each one's
        position in `rows`."""
        k_of = np.full(self.base.shape[0], -1, dtype=np.int64)
        k_of[rows] = np.arange(rows.size, dtype=np.int64)
        k = k_of[self.sorted_rows]
        keep = k >= 0
        idx: np.ndarray = self.order[keep]
        return idx, k[keep]

    def _needed(
        self, m: _Member, rows: np.ndarray, used: np.ndarray, idx: np.ndarray, node_k: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per victim, whether the member alone needs it gone from its node, judged by resources
        on the columns the member asks for, and whether it then breaks a PDB with the others its
        node loses."""
        cols = np.flatnonzero(m.vec > 0)
        step, present, depth_of = arrays.by_depth(node_k, int(rows.size), self.vec[np.ix_(idx, cols)])
        limit = self.allocatable[np.ix_(rows, cols)] - m.vec[cols]
        evicted = arrays.give_back(used[np.ix_(rows, cols)], limit, step, present)
        needed: np.ndarray = evicted[node_k, depth_of]
        breaks = np.zeros(idx.size, dtype=bool)
        if self.budgets:
            for k in np.unique(node_k[needed & self.pdb_row[self.row[idx]]]).tolist():
                at = np.flatnonzero(needed & (node_k == k))
                pods = [self.victims[i].pod for i in idx[at].tolist()]
                bad = {id(p) for p in split_by_pdb(pods, self.budgets)[0]}
                breaks[at] = [id(p) in bad for p in pods]
        return needed, breaks

    def _cost(
        self,
        nodes: int,
        idx: np.ndarray,
        node_k: np.ndarray,
        needed: np.ndarray,
        breaks: np.ndarray,
        taken_victims: np.ndarray | None,
        taken_jobs: np.ndarray | None,
    ) -> Cost:
        """preemption.py's `_cost` for every node at once: of the needed victims not counted for
        an earlier member, the PDBs broken, the jobs not disrupted already with the highest rank
        of each, and how many."""
        counted = needed if taken_victims is None else needed & ~taken_victims[idx]
        k = node_k[counted]
        pdbs = np.bincount(k, weights=breaks[counted], minlength=nodes).astype(np.int64)
        victims = np.bincount(k, minlength=nodes)
        jobs = self.job[idx]
        new = counted if taken_jobs is None else counted & ~taken_jobs[jobs]
        pair = node_k[new] * self.jobs + jobs[new]
        rank = self.rank[idx[new]]
        o = np.lexsort((rank, pair))
        pair, rank = pair[o], rank[o]
        last = np.ones(pair.size, dtype=bool)
        last[:-1] = pair[1:] != pair[:-1]
        kk = pair[last] // self.jobs
        return Cost(
            pdbs,
            np.bincount(kk, minlength=nodes),
            np.bincount(kk, weights=rank[last], minlength=nodes).astype(np.int64),
            victims,
        )

    def scores(self, node_name: Callable[[int], str], ranks_only: bool = False) -> dict[str, float]:
        """Per node with victims, its cost by all of them as a score: cheaper scores higher,
        fewer jobs dominate, then ranks, then victims (preemption.py's topology plan); or, with
        `ranks_only`, the priority ranks of its victim jobs alone, Koordinator's cost, by which its
        solver orders the nodes for the members."""
        rows = np.flatnonzero(self.has)
        idx, node_k = self._victims_on(rows)
        cost = self._cost(rows.size, idx, node_k, np.ones(idx.size, dtype=bool), self.breaks[idx], None, None)
        value = cost.pdbs * 10**9 + cost.jobs * 10**6 + cost.ranks * 10**3 + cost.victims
        if ranks_only:
            value = cost.ranks
        return {node_name(r): -float(s) for r, s in zip(rows.tolist(), value.tolist(), strict=True)}

    def slots(self) -> np.ndarray:
        """Per row, how many of the members, in order, fit there one after the other with every
        victim gone: `offers.offer_slots` for pods that compete for resources only."""
        capacity = self.base.shape[0]
        slots = np.zeros(capacity, dtype=np.int64)
        if not self.members:
            return slots
        first = self._feasible(self.members[0], self.base)
        if first.size == 0:
            return slots
        demand = np.stack([m.vec for m in self.members])
        asked = [np.flatnonzero(d > 0) for d in demand]
        asked = [a if a.size else np.array([self.pods_col], dtype=np.int64) for a in asked]
        total = np.cumsum(demand, axis=0)
        free = self.allocatable[first] - self.base[first]
        nominator = self.handle.nominator
        if nominator:
            snap = self.handle.snapshot
            pos = np.full(capacity, -1, dtype=np.int64)
            pos[first] = np.arange(first.size, dtype=np.int64)
            floor = min(m.pod.priority for m in self.members)
            for node_name in nominator.nodes():
                row = snap.row_of.get(node_name)
                if row is None or pos[row] < 0:
                    continue
                for other in nominator.pods_on(node_name):
                    if other.priority >= floor and not self.ignore(other):
                        free[pos[row]] -= _local(snap.request_vector(other.requests), self.cols)
        alive: np.ndarray | None = None
        count = np.zeros(first.size, dtype=np.int64)
        for i, m in enumerate(self.members):
            ok = np.ones(first.size, dtype=bool) if alive is None else alive.copy()
            if i:
                feasible = np.zeros(capacity, dtype=bool)
                feasible[self._feasible(m, self.base)] = True
                ok &= feasible[first]
            ok &= (free[:, asked[i]] >= total[i, asked[i]]).all(axis=1)
            if not ok.any():
                break
            count += ok
            alive = ok
        slots[first] = count
        return slots

    # ------------------------------------------------------------------------------ fewest victims
    def fewest(self, plan: dict[str, int]) -> list[int]:
        """The victims the plan really needs (indices, by node then in the fewest-victims order):
        on each planned node each victim is given back while the members planned there still fit
        one after the other; the rest go."""
        by_key = {m.pod.key: m for m in self.members}
        members_on: dict[int, list[_Member]] = {}
        for key, row in plan.items():
            members_on.setdefault(row, []).append(by_key[key])
        chosen: list[int] = []
        lo_of = np.searchsorted(self.sorted_rows, sorted(members_on), side="left").tolist()
        hi_of = np.searchsorted(self.sorted_rows, sorted(members_on), side="right").tolist()
        for row, lo, hi in zip(sorted(members_on), lo_of, hi_of, strict=True):
            here = members_on[row]
            kept = self.base[row].copy()
            for i in self.order[lo:hi].tolist():
                if self._members_fit(here, row, kept + self.vec[i]):
                    kept += self.vec[i]
                else:
                    chosen.append(i)
        return chosen

    def _members_fit(self, members: Sequence[_Member], row: int, used: np.ndarray) -> bool:
        running = used
        for m in members:
            if not m.passes[row]:
                return False
            taken = running[m.cols] if m.held is None else running[m.cols] + m.held[row, m.cols]
            if (taken > self.allocatable[row, m.cols] - m.values).any():
                return False
            running = running + m.vec
        return True


def _local(vec: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """A request vector over the planner's columns (a resource past its end: none of it)."""
    if vec.size <= cols[-1]:
        vec = np.concatenate((vec, np.zeros(int(cols[-1]) + 1 - vec.size, dtype=np.int64)))
    local: np.ndarray = vec[cols]
    return local


def _filter_key(pod: Pod) -> tuple[Any, ...]:
    """Pods equal under this key get the same verdict from the filters that read the node only."""
    return (
        pod.namespace,
        pod.node_name,
        tuple(sorted(pod.node_selector.items())),
        pod.required_node_affinity,
        pod.tolerations,
        tuple(sorted(pod.labels.items())),
    )


def _passes(
    plan: arrays.ArrayPlan, state: CycleState, pod: Pod, live: np.ndarray, capacity: int
) -> np.ndarray:
    """Per row, whether every filter but NodeResourcesFit passes (their verdict reads the node
    object, or pods the preemption does not move)."""
    alive = live
    for p in plan.filters:
        if alive.size == 0:
            break
        if p.NAME == names.NODE_RESOURCES_FIT:
            continue
        result = p.filter(state, pod, alive)
        if result is not None:
            alive = alive[result.passed]
    out = np.zeros(capacity, dtype=bool)
    out[alive] = True
    return out


def _nominated(handle: Handle) -> dict[int, list[Pod]]:
    nominator = handle.nominator
    out: dict[int, list[Pod]] = {}
    if not nominator:
        return out
    row_of = handle.snapshot.row_of
    for node_name in nominator.nodes():
        row = row_of.get(node_name)
        if row is not None:
            pods = nominator.pods_on(node_name)
            if pods:
                out[row] = list(pods)
    return out
