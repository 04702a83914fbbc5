"""Job-level preemption: make room for a whole gang group at once, or evict nobody.

Run as Coscheduling's PostFilter once per failed pass of a gang group, for the first member that
failed (the trigger), after the pass has given back whatever it held:

1. Eligibility: the trigger's `preemptionPolicy: Never` forbids it; so does a pod still terminating
   because of an earlier preemption on the node a member is nominated to (the room is coming).
2. Dry run: every legal victim is taken off the nodes where preemption can help (the trigger's
   failure there was Unschedulable, not UnschedulableAndUnresolvable). A legal victim has a lower
   priority than the trigger, is not opted out (`scheduling.koordinator.sh/disable-preemptible`,
   `quota.scheduling.koordinator.sh/preemptible: "false"`), is not already terminating and does
   not belong to the group. Plugins of the profile with victim rules of their own (`VictimFilter`:
   elastic quota) take the place of the priority test, and count the victims as gone while the
   members are planned (`Handle.releasing`).
3. Placement of every pending member on that lighter cluster: with a network-topology-spec, the
   topology plan (whole group in one domain that satisfies MustGather, tightest fit, cost as the
   tie-break; the members take the chosen nodes in the order Koordinator's solver visits them, its
   victim-rank cost as the score, see `visit_order`); otherwise member by member, each with the
   earlier ones assumed, on the cheapest node that fits. A node's cost follows the job-aware model:
   PodDisruptionBudgets its victims would break (respected where there is a choice, as
   kube-scheduler does), then the victim jobs it would disrupt that are not disrupted already, then
   the priority ranks of those jobs, then its victims not already counted for an earlier member. A
   victim's job is its gang group, else its controller, else the pod itself. Of nodes of equal
   cost, one that earlier members already use wins, then the first by name: the gang stays together
   (Koordinator's placeToSchedulePods takes the first cheapest node in name order, which puts the
   members of its "preempt success" case both on the first node). Member by member, a node is
   costed once by the victims that member alone needs there and once by all it might need, and the
   members are also packed, each onto a node the earlier ones use while one fits, else onto one
   that can hold the most of them (the cheapest of those by all its victims); the cheapest of the
   three outcomes (after step 4) is carried out, and of equally cheap outcomes the one that evicts
   on the fewest nodes, then spreads the members over the fewest.
4. Fewest victims: on each chosen node the victims are put back, PDB-protected ones first, then
   the most important (priority, then job, then name); each one that leaves every member planned
   there still fitting stays.
5. Execution: victims get the DisruptionTarget condition and are deleted (a victim held at Permit
   is rejected instead); lower-priority pods nominated to the victims' nodes lose their
   nomination; every pending member is nominated to its planned node.

If any member cannot be placed even with every legal victim gone, nobody is evicted. Steps 1 to 4
are `select`, without effect: a topology group's explanation asks it first, so that the pending
members are told of the victims PostFilter then evicts (the same choice, while nothing changed).

Steps 2 to 4 run over the node arrays (`freeable.py`) when only resources stand between the
members and the nodes: every member's filters other than NodeResourcesFit read the node object
only, and no member, victim or nominated pod interacts beyond resources. The outcome chosen there
is confirmed in a trial with the real filters; everywhere else, and should the confirmation fail,
the trial does every step.

The members' next pass honours the nominations: a pod tries its nominated node first, as
kube-scheduler does (the scheduling cycle), and a topology-aware group keeps its nominated nodes
as its plan while they still hold the group (`nominations.nominated_plan`), so the members are bound where the
room was made for them and not in a domain that has become just as good meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from koordpy.api.pod import PREEMPT_NEVER, Pod
from koordpy.cache.trial import Trial
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.effects import Evict, Nominate
from koordpy.framework.interfaces import PostFilterResult
from koordpy.framework.status import Code, Status
from koordpy.plugins.coscheduling.freeable import BY_ALL, BY_NEED, PACKED, FreeablePlanner
from koordpy.plugins.coscheduling.freeable import Victim as _Victim
from koordpy.plugins.coscheduling.networktopology import Placement, plan_with_offers
from koordpy.plugins.coscheduling.offers import Offers, offer_slots
from koordpy.plugins.defaultpreemption import preemptible, terminating_by_preemption
from koordpy.plugins.disruptionbudgets import Budget, DisruptionBudgets, split_by_pdb

if TYPE_CHECKING:
    from koordpy.plugins.coscheduling.gang import Gang
    from koordpy.plugins.coscheduling.plugin import Coscheduling

MSG_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to terminating pod on the nominated node."
MSG_NO_PENDING = "no pending pods"
MSG_NO_VICTIMS = "no potential victims"
MSG_NOT_HELPFUL = "preemption not helpful"

# Ways of choosing each member's node when members are planned one by one (see _place_one_by_one):
# BY_NEED, the cheapest by the victims the member alone needs there; BY_ALL, the cheapest by all
# the node's victims; PACKED, the node that can hold the most members (the gang on few nodes)
WAYS = (BY_NEED, BY_ALL, PACKED)


@dataclass(slots=True)
class _Plan:
    # member key -> row, in placement order
    rows: dict[str, int] = field(default_factory=dict)
    # each member's cycle state as it was planned (kept current while victims are put back)
    states: dict[str, CycleState] = field(default_factory=dict)
    # False when another way of costing nodes could give a cheaper outcome
    exact: bool = True


@dataclass(slots=True)
class _Taken:
    """What the members planned so far cost, for costing the next one: the victim jobs they
    disrupt, the victims already counted, and the nodes they use."""

    jobs: set[str] = field(default_factory=set)
    victims: set[str] = field(default_factory=set)
    rows: set[int] = field(default_factory=set)


@dataclass(slots=True)
class Choice:
    """What preemption would do for one failure: the members, and the plan and victims it would
    carry out; or, with no plan, why it would evict nobody (`withdraw`: and the members' earlier
    nominations go)."""

    members: list[Pod]
    plan: _Plan | None = None
    victims: list[_Victim] = field(default_factory=list)
    why: str = ""
    withdraw: bool = False


class JobPreemption:
    # plan over the node arrays where only resources are involved (off: the trial does all)
    arrays = True

    def __init__(self, plugin: Coscheduling) -> None:
        self.plugin = plugin
        self.handle = plugin.handle
        self.budgets = DisruptionBudgets.shared(plugin.handle)
        # the last choice made: (trigger, diagnosis, snapshot generation, choice)
        self._chosen: tuple[str, Diagnosis, int, Choice] | None = None

    # ------------------------------------------------------------------------------ helpers
    def job_of(self, pod: Pod) -> str:
        gang = self.plugin.registry.gang(pod)
        if gang is not None:
            return gang.group_id
        owner = pod.controller
        if owner is not None:
            return f"{pod.namespace}/{owner.kind}/{owner.name}"
        return pod.key

    def may_be_victim(self, victim: Pod, group: frozenset[str]) -> bool:
        """Not opted out, not terminating, not of the group; whether the trigger may evict it is
        `Handle.victim_mask`'s to say."""
        if not preemptible(victim) or victim.deletion_ts is not None:
            return False
        gang = self.plugin.registry.gang(victim)
        return gang is None or gang.id not in group

    # ------------------------------------------------------------------------------ entry
    def preempt(self, trigger: Pod, gang: Gang, diagnosis: Diagnosis) -> PostFilterResult:
        start = time.perf_counter()
        result = self._preempt(trigger, gang, diagnosis)
        outcome = "success" if result.status.is_success else "failure"
        self.plugin.observe(f"job_preemption:{outcome}", time.perf_counter() - start)
        return result

    def _preempt(self, trigger: Pod, gang: Gang, diagnosis: Diagnosis) -> PostFilterResult:
        choice = self.select(trigger, gang, diagnosis)
        self._chosen = None  # one cycle's choice is carried out once
        if choice.plan is None:
            if choice.withdraw:
                return self._fail(choice.members, choice.why)
            return PostFilterResult(None, Status(Code.UNSCHEDULABLE, (choice.why,)))
        return self._execute(trigger, gang, choice.members, choice.plan, choice.victims)

    def select(self, trigger: Pod, gang: Gang, diagnosis: Diagnosis) -> Choice:
        """What preemption would do for the trigger's failure now (steps 1 to 4), with no effect.
        A pending group's explanation asks first, in the same cycle; PostFilter then carries out
        that very choice while the snapshot has not changed, so the message names what is done."""
        chosen = self._chosen
        now = (trigger.key, self.handle.snapshot.generation)
        if chosen is not None and (chosen[0], chosen[2]) == now and chosen[1] is diagnosis:
            return chosen[3]
        choice = self._select(trigger, gang, diagnosis)
        # the dry runs' trials move the generation on: it is read once they are over
        self._chosen = (trigger.key, diagnosis, self.handle.snapshot.generation, choice)
        return choice

    def _select(self, trigger: Pod, gang: Gang, diagnosis: Diagnosis) -> Choice:
        members = self.plugin.batch_members(trigger) or []
        if not members:
            return Choice(members, why=MSG_NO_PENDING, withdraw=True)
        if trigger.preemption_policy == PREEMPT_NEVER:
            return Choice(members, why=MSG_POLICY_NEVER)
        if self._room_on_its_way(trigger, members, diagnosis):
            # the room an earlier preemption made is on its way: do not evict more
            return Choice(members, why=MSG_TERMINATING)
        victims = self._victims(trigger, self._potential_rows(diagnosis), frozenset(gang.group))
        if not victims:
            why = f"{MSG_NOT_HELPFUL}: {MSG_NO_VICTIMS} where evicting could help"
            return Choice(members, why=why, withdraw=True)
        outcome, why = self._cheapest_outcome(trigger, members, victims)
        if outcome is None:
            return Choice(members, why=f"{MSG_NOT_HELPFUL}: {why}", withdraw=True)
        return Choice(members, outcome[0], outcome[1])

    def _room_on_its_way(self, trigger: Pod, members: Sequence[Pod], diagnosis: Diagnosis) -> bool:
        """Whether a member is nominated to a node where a pod evicted by an earlier preemption
        still terminates."""
        handle = self.handle
        snap = handle.snapshot
        codes = None if diagnosis.pre_filter_status is not None else diagnosis.code_by_row(snap.capacity)
        for member in members:
            nominated = handle.nominator.node_of(member.key) or member.nominated_node_name
            row = snap.row_of.get(nominated) if nominated else None
            if row is None:
                continue
            if (
                member.key == trigger.key
                and codes is not None
                and codes[row] == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            ):
                continue  # a node the trigger can never use holds nothing for it
            terminating = [o for o in snap.pods_on(row) if preemptible(o) and terminating_by_preemption(o)]
            if terminating and handle.victim_mask(member, terminating).any():
                return True
        return False

    def _cheapest_outcome(
        self, trigger: Pod, members: Sequence[Pod], victims: Sequence[_Victim]
    ) -> tuple[tuple[_Plan, list[_Victim]] | None, str]:
        """With every victim gone, the plan and the victims it really needs that cost least; or
        None and why some member cannot be placed even then."""
        if self.arrays:
            found = self._cheapest_by_arrays(trigger, members, victims)
            if found is not None:
                return found
        best: tuple[tuple[int, ...], _Plan, list[_Victim]] | None = None
        why = ""
        victim_pods = [v.pod for v in victims]
        with self.handle.snapshot.trial() as cleared:
            for v in victims:
                cleared.remove_pod(v.pod, v.row)
            # member by member, a node's cost can be judged by the victims the member alone needs
            # there, or by all it could need, and a greedy choice never sees that a later member
            # could join an earlier one: each way misses cases another gets, so all are tried and
            # the cheapest outcome, after the fewest-victims step, is taken (of equal ones, the
            # first that touches the fewest nodes)
            for way in WAYS:
                # each way starts from every victim gone, whatever the last one gave back
                with self.handle.releasing(victim_pods):
                    plan, why = self._place(trigger, members, victims, way)
                    if plan is None:
                        break
                    chosen = self._fewest_victims(plan, members, victims, trigger)
                cost = self._total_cost(chosen, plan)
                if best is None or cost < best[0]:
                    best = (cost, plan, chosen)
                if plan.exact:
                    break
        if best is None:
            return None, why
        return (best[1], best[2]), why

    def _cheapest_by_arrays(
        self, trigger: Pod, members: Sequence[Pod], victims: Sequence[_Victim]
    ) -> tuple[tuple[_Plan, list[_Victim]] | None, str] | None:
        """`_cheapest_outcome` over the node arrays; None when they cannot tell (some member needs
        the trial) or the real filters do not confirm the outcome."""
        snap = self.handle.snapshot
        ignore = self.plugin.same_job(trigger)
        planner = FreeablePlanner.build(self.handle, members, victims, ignore, self.budgets.budgets(snap))
        if planner is None:
            return None
        topology = self.plugin.topology_for(trigger)
        best: tuple[tuple[int, ...], _Plan, list[_Victim]] | None = None
        why = ""
        for way in (None,) if topology is not None else WAYS:
            if topology is None:
                rows, why = planner.place(way or BY_NEED)
            else:
                rows, why = self._plan_topology(planner, members, topology)
            if rows is None:
                break
            plan = _Plan(rows, exact=topology is not None)
            chosen = [victims[i] for i in planner.fewest(rows)]
            cost = self._total_cost(chosen, plan)
            if best is None or cost < best[0]:
                best = (cost, plan, chosen)
        if best is None:
            return None, why
        if not self._confirmed(trigger, members, best[1], best[2]):
            return None
        return (best[1], best[2]), why

    def _plan_topology(
        self, planner: FreeablePlanner, members: Sequence[Pod], topology: Any
    ) -> tuple[dict[str, int] | None, str]:
        """`_place_in_topology` with the offers and the nodes' costs from the arrays."""
        tree, spec = topology
        snap = self.handle.snapshot
        offers = Offers(planner.slots(), Diagnosis())
        scores = planner.scores(snap.node_name)
        visit = planner.scores(snap.node_name, ranks_only=True)
        placement = plan_with_offers(self.handle.profile, tree, spec, members, offers, scores, visit)
        if not isinstance(placement, Placement):
            return None, placement.message
        return {m.key: snap.row_of[placement.nodes[m.key]] for m in members}, ""

    def _confirmed(
        self, trigger: Pod, members: Sequence[Pod], plan: _Plan, victims: Sequence[_Victim]
    ) -> bool:
        """Whether, with the chosen victims gone, every member passes PreFilter and the filters on
        its planned node after the members planned before it (the real plugins, in a trial)."""
        snap = self.handle.snapshot
        profile: Any = self.handle.profile
        ignore = self.plugin.same_job(trigger)
        by_key = {m.key: m for m in members}
        with self.handle.releasing([v.pod for v in victims]), snap.trial() as trial:
            for v in victims:
                trial.remove_pod(v.pod, v.row)
            for key, row in plan.rows.items():
                member = by_key[key]
                state = CycleState()
                allowed, st = profile.run_pre_filter(state, member)
                if st is not None or (allowed is not None and snap.node_name(row) not in allowed):
                    return False
                one = np.array([row], dtype=np.int64)
                if not profile.run_filter_with_nominated(state, member, one, None, ignore).size:
                    return False
                plan.states[key] = state
                trial.add_pod(member, row)
        return True

    def _total_cost(self, victims: Sequence[_Victim], plan: _Plan) -> tuple[int, ...]:
        """The cost of an eviction as a whole: PDBs broken, jobs, their priority ranks, pods; then
        the nodes it evicts on and the nodes the members spread over, so that of equal evictions
        the one that disturbs fewer nodes and keeps the gang closer together wins."""
        budgets = self.budgets.budgets(self.handle.snapshot)
        breaking = split_by_pdb([v.pod for v in victims], budgets)[0] if budgets else []
        jobs: dict[str, int] = {}
        for v in victims:
            jobs[v.job] = max(jobs.get(v.job, 0), v.rank)
        nodes_hit = len({v.row for v in victims})
        spread = len(set(plan.rows.values()))
        return (len(breaking), len(jobs), sum(jobs.values()), len(victims), nodes_hit, spread)

    # ------------------------------------------------------------------------------ dry run
    def _potential_rows(self, diagnosis: Diagnosis) -> np.ndarray:
        snap = self.handle.snapshot
        rows = snap.live_rows()
        if diagnosis.pre_filter_status is not None:
            every_or_none: np.ndarray = (
                rows if diagnosis.pre_filter_status.code == Code.UNSCHEDULABLE else rows[:0]
            )
            return every_or_none
        codes = diagnosis.code_by_row(snap.capacity)
        # nodes where the trigger's failure was unresolvable stay as they are; those without a
        # recorded status were never filtered for it (a topology plan that fell short) and count
        helpful: np.ndarray = rows[codes[rows] != Code.UNSCHEDULABLE_AND_UNRESOLVABLE]
        return helpful

    def _victims(self, trigger: Pod, rows: np.ndarray, group: frozenset[str]) -> list[_Victim]:
        snap = self.handle.snapshot
        candidates: list[tuple[Pod, int]] = []
        # without a plugin's victim rules only lower priorities qualify: the mask would refuse
        # the others, so they are not looked at
        below = None if self.handle.victim_rules_apply(trigger) else trigger.priority
        may_be_victim = self.may_be_victim
        for row in rows.tolist():
            for pod in snap.info(row).pods.values():
                if (below is None or pod.priority < below) and may_be_victim(pod, group):
                    candidates.append((pod, row))
        allowed = self.handle.victim_mask(trigger, [pod for pod, _ in candidates]).tolist()
        found = [c for c, ok in zip(candidates, allowed, strict=True) if ok]
        ranks = {p: i for i, p in enumerate(sorted({pod.priority for pod, _ in found}))}
        victims = [_Victim(pod, row, self.job_of(pod), ranks[pod.priority]) for pod, row in found]
        budgets = self.budgets.budgets(snap)
        if budgets:
            by_row: dict[int, list[_Victim]] = {}
            for v in victims:
                by_row.setdefault(v.row, []).append(v)
            for on_node in by_row.values():
                breaking, _ = split_by_pdb([v.pod for v in on_node], budgets)
                keys = {p.key for p in breaking}
                for v in on_node:
                    v.breaks_pdb = v.pod.key in keys
        return victims

    def _place(
        self, trigger: Pod, members: Sequence[Pod], victims: Sequence[_Victim], way: str
    ) -> tuple[_Plan | None, str]:
        """Where each member goes once the victims are gone (None and why, when some cannot)."""
        by_row: dict[int, list[_Victim]] = {}
        for v in victims:
            by_row.setdefault(v.row, []).append(v)
        ignore = self.plugin.same_job(trigger)
        topology = self.plugin.topology_for(trigger)
        if topology is not None:
            return self._place_in_topology(members, by_row, topology, ignore)
        return self._place_one_by_one(members, by_row, ignore, way)

    def _needed(
        self, member: Pod, row: int, victims: Sequence[_Victim], budgets: Sequence[Budget]
    ) -> list[_Victim]:
        """The victims the member would actually cost on the node: those the fewest-victims step
        could not give back, judged by resources (the exact step runs once the plan is made). Each
        carries whether evicting it, with the others, breaks a PodDisruptionBudget."""
        snap = self.handle.snapshot
        vec = snap.request_vector(member.requests)
        width = len(snap.resource_names)
        need = vec[:width]
        cols = np.flatnonzero(need > 0)
        free = snap.free_on(row, cols) - need[cols]
        evicted: list[_Victim] = []
        for v in sorted(victims, key=lambda v: (not v.breaks_pdb, -v.pod.priority, v.job, v.pod.name)):
            use = snap.request_vector(v.pod.requests)[:width][cols]
            if np.all(free >= use):
                free = free - use
            else:
                evicted.append(v)
        if budgets:
            breaking, _ = split_by_pdb([v.pod for v in evicted], budgets)
            keys = {p.key for p in breaking}
            return [_Victim(v.pod, v.row, v.job, v.rank, v.pod.key in keys) for v in evicted]
        return evicted

    @staticmethod
    def _cost(victims: Sequence[_Victim], taken: _Taken | None = None) -> tuple[int, int, int, int]:
        """(PDB violations, new victim jobs, their priority ranks, victims) of the victims not
        counted for an earlier member: lower is better."""
        if taken is not None:
            victims = [v for v in victims if v.pod.key not in taken.victims]
        jobs: dict[str, int] = {}
        for v in victims:
            if taken is None or v.job not in taken.jobs:
                jobs[v.job] = max(jobs.get(v.job, 0), v.rank)
        return (sum(v.breaks_pdb for v in victims), len(jobs), sum(jobs.values()), len(victims))

    def _place_one_by_one(
        self,
        members: Sequence[Pod],
        by_row: dict[int, list[_Victim]],
        ignore: Callable[[Pod], bool],
        way: str,
    ) -> tuple[_Plan | None, str]:
        snap = self.handle.snapshot
        profile: Any = self.handle.profile
        plan = _Plan(exact=False)
        taken = _Taken()
        budgets = self.budgets.budgets(snap)
        room = None
        if way == PACKED:
            # how many of the members each node could hold, every victim gone
            room = offer_slots(profile, members, snap.live_rows(), ignore).slots
        # each member is planned with the earlier ones assumed on their nodes
        with snap.trial() as trial:
            for member in members:
                state = CycleState()
                allowed, st = profile.run_pre_filter(state, member)
                if st is not None:
                    return None, f"pod {member.key} cannot be placed: {st.message}"
                rows = snap.live_rows()
                if allowed is not None:
                    picked = sorted(snap.row_of[n] for n in allowed if n in snap.row_of)
                    rows = np.array(picked, dtype=np.int64)
                feasible = profile.run_filter_with_nominated(state, member, rows, None, ignore)
                if feasible.size == 0:
                    return None, f"pod {member.key} does not fit even with every lower-priority pod evicted"
                best = self._cheapest_row(member, feasible, by_row, taken, budgets, way, room)
                plan.rows[member.key] = best
                plan.states[member.key] = state
                trial.add_pod(member, best)
        return plan, ""

    def _cheapest_row(
        self,
        member: Pod,
        feasible: np.ndarray,
        by_row: dict[int, list[_Victim]],
        taken: _Taken,
        budgets: Sequence[Budget],
        way: str,
        room: np.ndarray | None,
    ) -> int:
        """A node without victims if there is one, else the cheapest; of equals, one the earlier
        members use (the gang kept together), then the first by name. Packing (`room` given), the
        choice is made among the nodes the earlier members use that still fit, else among those
        that can hold the most members, costed by all their victims (a node packed with members
        loses most of them). What the node costs joins `taken`."""
        snap = self.handle.snapshot
        rows: list[int] = feasible.tolist()
        if room is not None:
            # packing: only the nodes first by use and room are costed
            used = np.isin(feasible, np.fromiter(taken.rows, dtype=np.int64, count=len(taken.rows)))
            if used.any():
                rows = feasible[used].tolist()
            else:
                rows = feasible[room[feasible] == room[feasible].max()].tolist()
        free = [r for r in rows if r not in by_row]
        if free:
            best = min(free, key=lambda r: (r not in taken.rows, snap.node_name(r)))
        else:
            needed = {
                r: self._needed(member, r, by_row[r], budgets) if way == BY_NEED else by_row[r] for r in rows
            }
            best = min(
                needed, key=lambda r: (self._cost(needed[r], taken), r not in taken.rows, snap.node_name(r))
            )
            taken.jobs.update(v.job for v in needed[best])
            taken.victims.update(v.pod.key for v in needed[best])
        taken.rows.add(best)
        return best

    def _place_in_topology(
        self,
        members: Sequence[Pod],
        by_row: dict[int, list[_Victim]],
        topology: Any,
        ignore: Callable[[Pod], bool],
    ) -> tuple[_Plan | None, str]:
        tree, spec = topology
        snap = self.handle.snapshot
        profile: Any = self.handle.profile
        offers = offer_slots(profile, members, snap.live_rows(), ignore)
        # cheaper nodes score higher: fewer jobs dominate, then ranks, then victims; the members
        # are handed the chosen nodes as Koordinator's solver would, by the ranks alone
        scores = {}
        visit = {}
        for row, vs in by_row.items():
            pdbs, jobs, ranks, count = self._cost(vs)
            scores[snap.node_name(row)] = -float(pdbs * 10**9 + jobs * 10**6 + ranks * 10**3 + count)
            visit[snap.node_name(row)] = -float(ranks)
        placement = plan_with_offers(profile, tree, spec, members, offers, scores, visit)
        if not isinstance(placement, Placement):
            return None, placement.message
        plan = _Plan()
        for member in members:
            plan.rows[member.key] = snap.row_of[placement.nodes[member.key]]
            state = CycleState()
            profile.run_pre_filter(state, member)
            plan.states[member.key] = state
        return plan, ""

    # ------------------------------------------------------------------------------ fewest victims
    def _fewest_victims(
        self, plan: _Plan, members: Sequence[Pod], victims: Sequence[_Victim], trigger: Pod
    ) -> list[_Victim]:
        """The victims the plan really needs: with the members on their planned nodes, each victim
        is given back where the members there still fit; the rest go."""
        by_key = {m.key: m for m in members}
        with self.handle.snapshot.trial() as trial:
            for key, row in plan.rows.items():
                trial.add_pod(by_key[key], row)
            return self._minimise(trial, plan, by_key, victims, trigger)

    def _minimise(
        self, trial: Trial, plan: _Plan, by_key: dict[str, Pod], victims: Sequence[_Victim], trigger: Pod
    ) -> list[_Victim]:
        """Put victims back (in `trial`) where the members planned on their node still fit; the
        rest go."""
        profile: Any = self.handle.profile
        members_on: dict[int, list[Pod]] = {}
        for key, row in plan.rows.items():
            members_on.setdefault(row, []).append(by_key[key])
        chosen: list[_Victim] = []
        for row in sorted(members_on):
            here = [v for v in victims if v.row == row]
            # PDB-protected victims are given back first, then the most important
            here.sort(key=lambda v: (not v.breaks_pdb, -v.pod.priority, v.job, v.pod.name))
            for v in here:
                trial.add_pod(v.pod, row)
                for m in members_on[row]:
                    profile.pre_filter_add_pod(plan.states[m.key], m, v.pod, row)
                if self._members_fit(plan, members_on[row], row, trigger):
                    continue
                trial.remove_pod(v.pod, row)
                for m in members_on[row]:
                    profile.pre_filter_remove_pod(plan.states[m.key], m, v.pod, row)
                chosen.append(v)
        return chosen

    def _members_fit(self, plan: _Plan, members: Sequence[Pod], row: int, trigger: Pod) -> bool:
        """Whether the members planned on the node fit there one after the other."""
        snap = self.handle.snapshot
        profile: Any = self.handle.profile
        ignore = self.plugin.same_job(trigger)
        one = np.array([row], dtype=np.int64)
        with snap.trial() as trial:
            for m in members:
                trial.remove_pod(m, row)
            for m in members:
                # the profile's two-way check: with and without the room nominated to others
                if not profile.run_filter_with_nominated(plan.states[m.key], m, one, None, ignore).size:
                    return False
                trial.add_pod(m, row)
        return True

    # ------------------------------------------------------------------------------ execution
    def _execute(
        self, trigger: Pod, gang: Gang, members: Sequence[Pod], plan: _Plan, victims: Sequence[_Victim]
    ) -> PostFilterResult:
        handle = self.handle
        snap = handle.snapshot
        scheduler_name = handle.scheduler_name
        preemptor = gang.group_id
        message = (
            f"{scheduler_name}: preempting to accommodate higher priority pods, "
            f"preemptor: {preemptor}, triggerPod: {trigger.key}"
        )
        nodes_hit: dict[str, None] = {}
        for v in victims:
            node_name = snap.node_name(v.row)
            nodes_hit[node_name] = None
            waiting = handle.waiting_pods.get(v.pod.key)
            if waiting is not None:
                # held at Permit, never bound: rejecting it gives the room back at once
                waiting.reject(self.plugin.NAME, "preempted")
                continue
            handle.emit(Evict(v.pod, node_name, preemptor, trigger.key, message, scheduler_name))
        member_keys = {m.key for m in members}
        ignore = self.plugin.same_job(trigger)
        for node_name in nodes_hit:
            for other in handle.nominator.pods_on(node_name):
                if other.key not in member_keys and other.priority < trigger.priority and not ignore(other):
                    handle.nominator.remove(other)
                    handle.emit(Nominate(other, ""))
        for m in members:
            node_name = snap.node_name(plan.rows[m.key])
            before = handle.nominator.node_of(m.key) or m.nominated_node_name
            handle.nominator.add(m, node_name)
            if before != node_name:
                handle.emit(Nominate(m, node_name))
        jobs = len({v.job for v in victims})
        if victims:
            summary = (
                f"preempted {len(victims)} pod(s) of {jobs} job(s) on {len(nodes_hit)} node(s); "
                f"all {len(members)} pending member(s) nominated, waiting for the victims to terminate"
            )
        else:
            summary = f"room found without evicting anyone; all {len(members)} pending member(s) nominated"
        trigger_row = plan.rows.get(trigger.key)
        nominated = snap.node_name(trigger_row) if trigger_row is not None else None
        return PostFilterResult(nominated, Status(Code.SUCCESS, (summary,)))

    def _fail(self, members: Sequence[Pod], message: str) -> PostFilterResult:
        """Nothing is evicted; the members no longer count on room nominated to them."""
        handle = self.handle
        for m in members:
            if handle.nominator.node_of(m.key) or m.nominated_node_name:
                handle.nominator.remove(m)
                handle.emit(Nominate(m, ""))
        return PostFilterResult("", Status(Code.UNSCHEDULABLE, (message,)))
