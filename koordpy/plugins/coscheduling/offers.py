"""Offer slots: how many of a gang group's pods, taken in order, each node can hold one after the
other (the real filters; each pod sees the earlier ones assumed on the node). The topology plan
(`koordpy.plugins.coscheduling.networktopology`) sums these offers up its tree.

Pods whose fit depends only on resources and pod count are counted with array arithmetic over all
nodes at once. Pods with host ports, inter-pod (anti-)affinity or spread constraints change what
their siblings may do: for them the arithmetic gives a bound, and the nodes a plan would use are
counted pod by pod, inside a trial, before the plan is trusted (`Offers.settle`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis


def _interacts(pod: Pod) -> bool:
    """Whether placing the pod changes which of its siblings still fit beyond resources."""
    return bool(
        pod.host_ports or pod.required_affinity or pod.required_anti_affinity or pod.spread_constraints
    )


def _one_per_node_by_ports(pods: Sequence[Pod]) -> bool:
    """Whether host ports are the pods' only interaction and some port is wanted by all of them
    (the usual gang of one template with a hostPort): then no two of them share a node."""
    if any(p.required_affinity or p.required_anti_affinity or p.spread_constraints for p in pods):
        return False
    shared = set(pods[0].host_ports)
    for p in pods[1:]:
        shared &= set(p.host_ports)
        if not shared:
            return False
    return bool(shared)


def shape_key(pod: Pod) -> tuple[Any, ...]:
    """Members of one gang equal under this key pass the same filters on the same nodes."""
    return (
        tuple(sorted(pod.requests.items())),
        tuple(sorted(pod.node_selector.items())),
        pod.required_node_affinity,
        pod.tolerations,
        pod.required_affinity,
        pod.required_anti_affinity,
        pod.spread_constraints,
        pod.host_ports,
    )


def _template_key(pod: Pod) -> tuple[Any, ...]:
    """Pods equal under this key pass the same filters on the same nodes: one shape (`shape_key`),
    namespace, priority and set of labels."""
    return (pod.namespace, shape_key(pod), pod.priority, tuple(sorted(pod.labels.items())))


@dataclass(slots=True)
class Offers:
    # per snapshot row, how many of the pods (in order) fit there one after the other
    slots: np.ndarray
    # why the first pod fits nowhere else, for the failure message
    diagnosis: Diagnosis
    # pods whose fit depends on their siblings beyond resources: `slots` is then the resource
    # bound, and a plan's nodes are checked with the real filters before it is trusted
    pods: Sequence[Pod] = ()
    kinds: Sequence[Any] = ()
    ignore: Callable[[Pod], bool] | None = None
    checked: set[int] = field(default_factory=set)

    def settle(self, profile: Any, rows: Sequence[int]) -> bool:
        """Count the given rows with the real filters, pod by pod; True when any offer dropped."""
        todo = [r for r in rows if r not in self.checked]
        if not todo or not self.kinds:
            return False
        before = self.slots[todo].copy()
        bound = self.slots.copy()
        _count_one_by_one(
            profile, self.pods, self.kinds, np.array(todo, dtype=np.int64), self.slots, self.ignore
        )
        np.minimum(self.slots, bound, out=self.slots)
        self.checked.update(todo)
        return bool(np.any(self.slots[todo] < before))


@dataclass(slots=True)
class _Template:
    pod: Pod
    state: CycleState
    feasible: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def offer_slots(
    profile: Any,
    pods: Sequence[Pod],
    rows: np.ndarray,
    ignore_nominated: Callable[[Pod], bool] | None = None,
) -> Offers:
    """How many of `pods`, taken in order, each node in `rows` can hold (see the module doc)."""
    snap = profile.handle.snapshot
    slots = np.zeros(snap.capacity, dtype=np.int64)
    diagnosis = Diagnosis()
    if not pods or rows.size == 0:
        return Offers(slots, diagnosis)
    templates: dict[tuple[Any, ...], _Template] = {}
    kinds: list[_Template] = []
    for i, pod in enumerate(pods):
        key = _template_key(pod)
        t = templates.get(key)
        if t is None:
            state = CycleState()
            allowed, st = profile.run_pre_filter(state, pod)
            t = templates[key] = _Template(pod, state)
            if st is not None:
                if i == 0:
                    diagnosis.pre_filter_msg = st.message
                    diagnosis.pre_filter_status = st
                    diagnosis.unschedulable_plugins.add(st.plugin)
            else:
                candidates = rows
                if allowed is not None:
                    candidates = rows[np.isin(rows, [snap.row_of[n] for n in allowed if n in snap.row_of])]
                t.feasible = profile.run_filter_with_nominated(
                    state, pod, candidates, diagnosis if i == 0 else None, ignore_nominated
                )
        kinds.append(t)
    first = kinds[0].feasible
    if first.size == 0:
        return Offers(slots, diagnosis)
    if not any(_interacts(p) for p in pods):
        _count_by_arithmetic(profile, pods, kinds, first, slots, ignore_nominated)
    elif _one_per_node_by_ports(pods):
        # every pod wants the same host port: a node takes one of them at most
        _count_by_arithmetic(profile, pods, kinds, first, slots, ignore_nominated)
        np.minimum(slots, 1, out=slots)
    else:
        # counting every node pod by pod with the real filters costs about a millisecond a node:
        # take the resource bound, and check only the nodes a plan would use (see plan_with_offers)
        _count_by_arithmetic(profile, pods, kinds, first, slots, ignore_nominated)
        return Offers(slots, diagnosis, pods, kinds, ignore_nominated)
    return Offers(slots, diagnosis)


def _nominated_against(
    profile: Any, pods: Sequence[Pod], rows: np.ndarray, ignore_nominated: Callable[[Pod], bool] | None
) -> dict[int, list[Pod]]:
    """The pods nominated on `rows` that hold room against some of `pods` (priority at least the
    lowest of theirs), by row. The group's own nominations are its own room: `ignore_nominated`
    names them, and the first pod's never counts (kube-scheduler never holds a pod's nomination
    against itself)."""
    nominator = profile.handle.nominator
    if not nominator or rows.size == 0:
        return {}
    snap = profile.handle.snapshot
    within = np.zeros(snap.capacity, dtype=bool)
    within[rows] = True
    floor = min(p.priority for p in pods)
    held: dict[int, list[Pod]] = nominator.holding(pods[0], snap, within, ignore_nominated, floor=floor)
    return held


def _count_by_arithmetic(
    profile: Any,
    pods: Sequence[Pod],
    kinds: Sequence[_Template],
    first: np.ndarray,
    slots: np.ndarray,
    ignore_nominated: Callable[[Pod], bool] | None,
) -> None:
    """Pods that only compete for resources: one vectorized step per pod over every node.

    A node still holding every earlier pod has exactly their requests taken from its free room,
    so pod i fits there when the free room covers the first i pods' requests together: the free
    room is read once, per resource the pods ask for, and compared with the running sums."""
    snap = profile.handle.snapshot
    rows = first
    # each pod's requests as the resources it asks for: a cluster with thousands of resource names
    # would make a row over every name thousands wide
    cells = [snap.request_cells(pod.requests) for pod in pods]
    needed = sorted({c for ids, _ in cells for c in ids.tolist()})
    at = {c: j for j, c in enumerate(needed)}
    demand = np.zeros((len(cells), len(needed)), dtype=np.int64)
    for i, (ids, amounts) in enumerate(cells):
        demand[i, [at[c] for c in ids.tolist()]] = amounts
    # every request counts the pod slot, so no pod asks for nothing
    asked = [[at[c] for c in ids.tolist()] for ids, _ in cells]
    total = np.cumsum(demand, axis=0)
    free = [snap.allocatable_column(c, rows) - snap.requested_column(c, rows) for c in needed]
    # rows with pods nominated against some member: each member counts only those of its priority
    # or higher (kube-scheduler's addGENominatedPods), so what they hold is kept per member level
    # and compared on those few rows apart
    held_at, against, level_of = _held_by_level(profile, pods, rows, ignore_nominated, at)
    static: dict[int, np.ndarray | None] = {}
    alive: np.ndarray | None = None
    count = np.zeros(rows.size, dtype=np.int64)
    for i, kind in enumerate(kinds):
        if id(kind) not in static:
            if kind.feasible is first:
                # the first pod's template: every row passed its filters
                static[id(kind)] = None
            else:
                passed = np.zeros(snap.capacity, dtype=bool)
                passed[kind.feasible] = True
                static[id(kind)] = passed[rows]
        mask = static[id(kind)]
        before: np.ndarray | None = alive if mask is None else (mask if alive is None else alive & mask)
        ok = before
        for c in asked[i]:
            fits = free[c] >= total[i, c]
            ok = fits if ok is None else ok & fits
        assert ok is not None
        if held_at.size:
            room = against[level_of[i]]
            near = np.ones(held_at.size, dtype=bool) if before is None else before[held_at]
            for c in asked[i]:
                near &= free[c][held_at] - room[c] >= total[i, c]
            ok[held_at] = near
        if not ok.any():
            break
        count += ok
        alive = ok
    slots[rows] = count


def _held_by_level(
    profile: Any,
    pods: Sequence[Pod],
    rows: np.ndarray,
    ignore_nominated: Callable[[Pod], bool] | None,
    at: dict[int, int],
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(the positions in `rows` of the rows holding nominated pods; per member priority level,
    resource column and such row, what the nominated pods of that priority or higher request
    there; each pod's level). A gang of one priority has one level."""
    held = _nominated_against(profile, pods, rows, ignore_nominated)
    levels = sorted({p.priority for p in pods})
    level_of = [bisect.bisect_left(levels, p.priority) for p in pods]
    if not held:
        return np.zeros(0, dtype=np.int64), np.zeros((len(levels), len(at), 0), dtype=np.int64), level_of
    snap = profile.handle.snapshot
    position = np.full(snap.capacity, -1, dtype=np.int64)
    position[rows] = np.arange(rows.size, dtype=np.int64)
    held_rows = list(held)
    # by[k]: the nominated pods whose priority is at least level k and below level k + 1
    by = np.zeros((len(levels), len(at), len(held_rows)), dtype=np.int64)
    for h, row in enumerate(held_rows):
        for other in held[row]:
            k = bisect.bisect_right(levels, other.priority) - 1
            ids, amounts = snap.request_cells(other.requests)
            for c, amount in zip(ids.tolist(), amounts.tolist(), strict=True):
                j = at.get(c)
                if j is not None:
                    by[k, j, h] += amount
    # a member of level m counts every nominated pod of level m or above
    against = np.cumsum(by[::-1], axis=0)[::-1]
    return position[held_rows], against, level_of


def _count_one_by_one(
    profile: Any,
    pods: Sequence[Pod],
    kinds: Sequence[_Template],
    first: np.ndarray,
    slots: np.ndarray,
    ignore_nominated: Callable[[Pod], bool] | None,
) -> None:
    """Pods whose placement changes what their siblings may do (ports, affinity, spreading): on each
    node, the real filters with the earlier pods assumed there."""
    snap = profile.handle.snapshot
    distinct = list({id(k): k for k in kinds}.values())
    nominated = _nominated_against(profile, pods, first, ignore_nominated)
    for row in first.tolist():
        trial_states = {id(k): k.state.clone() for k in distinct}
        placed = 0
        with snap.trial() as trial:
            for pod, kind in zip(pods, kinds, strict=True):
                held = [o for o in nominated.get(row, ()) if o.priority >= pod.priority and o.key != pod.key]
                trial_state = trial_states[id(kind)]
                st = (
                    profile.filter_one_with_pods(trial_state, pod, row, held)
                    if held
                    else profile.filter_one(trial_state, pod, row)
                )
                if st is not None:
                    break
                trial.add_pod(pod, row)
                placed += 1
                for k in distinct:
                    profile.pre_filter_add_pod(trial_states[id(k)], k.pod, pod, row)
        slots[row] = placed
