"""DefaultPreemption: when a pod fits nowhere, find a node where evicting lower-priority pods makes
room for it, evict them, and nominate the node for the pod (kube-scheduler's PostFilter).

The steps are kube-scheduler's:

1. Eligibility: a pod with `preemptionPolicy: Never` never preempts; a pod whose nominated node
   still has lower-priority pods terminating because of an earlier preemption waits for them.
2. Candidates: only nodes that failed with Unschedulable (UnschedulableAndUnresolvable means no
   eviction can help). On each, every lower-priority pod is removed, the pod must then fit, and
   the removed pods are added back one at a time, most important first, PDB-violating ones before
   the others; a pod that keeps the preemptor from fitting is a victim. Nodes are dry-run until
   `max(minCandidateNodesPercentage% of them, minCandidateNodesAbsolute)` candidates are found
   (and at least one violates no PDB).
3. The node: fewest PDB violations, then the lowest highest-victim priority, the smallest sum of
   priorities, the fewest victims, the latest start of the highest-priority victims, the first.
4. Victims are evicted (`Evict` effects); lower-priority pods nominated to that node lose their
   nomination; the pod is nominated to it.

Determinism: kube-scheduler starts the dry run at a random node offset, and breaks the last tie by
map order; koordpy starts where its last dry run stopped (so successive preemptions spread over
the nodes, as kube's offset makes them) and orders the candidates by node row (those violating no
PDB first), so a run is reproducible and a search over every node does not depend on where it
started.

Speed: nodes where the preemptor's request is above allocatable are never dry-run. When no node is
a candidate they are looked at to say why, and that is read off the node arrays for most of them:
a node with no pod the preemptor may evict says so, and on the others NodeResourcesFit fails with
every victim gone, so the first filter failing is known without choosing victims
(`preemption_arrays.hopeless_verdicts`). Where resources are all that moves with the victims the
dry run is arithmetic over the node arrays (`preemption_arrays`); the other nodes take the trial,
filter by filter.

Koordinator's opt-outs: a pod labelled `scheduling.koordinator.sh/disable-preemptible: "true"` or
`quota.scheduling.koordinator.sh/preemptible: "false"` is never a victim.

Plugins of the profile with rules of their own (`VictimFilter`, e.g. elastic quota) decide which
pods the preemptor may evict in place of "lower priority" (`Handle.victim_mask`); a victim may then
have any priority, so every node with a pod that may be evicted at all is dry-run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from koordpy.api.pod import PREEMPT_NEVER, Pod
from koordpy.api.time import parse_timestamp
from koordpy.cache.snapshot import LABEL_DISABLE_PREEMPTIBLE as LABEL_DISABLE_PREEMPTIBLE
from koordpy.cache.snapshot import LABEL_QUOTA_PREEMPTIBLE as LABEL_QUOTA_PREEMPTIBLE
from koordpy.cache.snapshot import preemptible as preemptible
from koordpy.config.args import PluginArgs
from koordpy.config.numbers import Int32
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import NO_NODE_AVAILABLE, Diagnosis
from koordpy.framework.effects import Evict, Nominate
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import Plugin, PostFilterPlugin, PostFilterResult
from koordpy.framework.status import Code, Status
from koordpy.plugins import preemption_arrays as arrays
from koordpy.plugins.disruptionbudgets import Budget, DisruptionBudgets, split_by_pdb

if TYPE_CHECKING:
    from koordpy.framework.profile import Profile

NAME = "DefaultPreemption"

MSG_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING_VICTIMS = "not eligible due to a terminating pod on the nominated node."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_PREFIX = "preemption: "

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

# kube-scheduler adds MaxInt32+1 to every victim priority before summing, so that a node with a
# few negative-priority victims does not beat a node with fewer victims of the same priority
_PRIORITY_OFFSET = 2**31
# nodes dry-run per batch over the arrays, at the least
_MIN_CHUNK = 32

_NO_VICTIMS = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (MSG_NO_VICTIMS,))
_NOT_HELPFUL = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (MSG_NOT_HELPFUL,))


class DefaultPreemptionArgs(PluginArgs):
    # int32 in Go, as every number of these args
    min_candidate_nodes_percentage: Int32 = Field(default=10, strict=True)
    min_candidate_nodes_absolute: Int32 = Field(default=100, strict=True, validate_default=True)

    @field_validator("min_candidate_nodes_percentage")
    @classmethod
    def _percentage_in_range(cls, value: int) -> int:
        if not 0 <= value <= 100:
            raise ValueError(f"not in valid range [0, 100], got {value}")
        return value

    @field_validator("min_candidate_nodes_absolute")
    @classmethod
    def _absolute_in_range(cls, value: int, info: ValidationInfo) -> int:
        if value < 0:
            raise ValueError(f"not in valid range [0, inf), got {value}")
        if value == 0 and info.data.get("min_candidate_nodes_percentage") == 0:
            raise ValueError("cannot be zero at the same time as minCandidateNodesPercentage")
        return value


@dataclass(slots=True)
class _Candidate:
    row: int
    node_name: str
    # most important first
    victims: list[Pod]
    pdb_violations: int


# start times by pod view: every dry run sorts the same victims, and a pod view never changes
# (a changed pod is a new view)
_START_TIMES: dict[int, tuple[Pod, float]] = {}
_START_TIMES_KEPT = 1 << 16


def start_time(pod: Pod) -> float:
    """status.startTime; a pod that has none yet (the simulator starts none) counts from its creation."""
    known = _START_TIMES.get(id(pod))
    if known is not None and known[0] is pod:
        return known[1]
    ts = pod.creation_ts
    status = pod.raw.get("status")
    if isinstance(status, Mapping):
        started = parse_timestamp(status.get("startTime"))
        if started is not None:
            ts = started
    if len(_START_TIMES) >= _START_TIMES_KEPT:
        _START_TIMES.clear()
    _START_TIMES[id(pod)] = (pod, ts)
    return ts


def importance_key(pod: Pod) -> tuple[int, float]:
    """Sorts the most important first: higher priority, then the one that started earlier."""
    return (-pod.priority, start_time(pod))


def terminating_by_preemption(pod: Pod) -> bool:
    if pod.deletion_ts is None:
        return False
    for cond in pod.conditions:
        if cond.get("type") == DISRUPTION_TARGET:
            return cond.get("status") == "True" and cond.get("reason") == REASON_PREEMPTION_BY_SCHEDULER
    return False


@dataclass(slots=True)
class _Verdicts:
    """Why the nodes the dry run looked at are not candidates: a reason histogram, as kube's
    FitError renders it, over `nodes` nodes."""

    reasons: Counter[str] = field(default_factory=Counter)
    nodes: int = 0
    error: Status | None = None

    def add(self, status: Status, count: int = 1) -> None:
        if count <= 0:
            return
        self.nodes += count
        for reason in status.reasons:
            self.reasons[reason] += count
        if status.code == Code.ERROR and self.error is None:
            self.error = status

    def fit_error(self, num_all_nodes: int, absent: Status) -> str:
        """kube-scheduler's FitError text; the nodes not looked at carry `absent`."""
        hist = Counter(self.reasons)
        missing = num_all_nodes - self.nodes
        if missing > 0:
            for reason in absent.reasons:
                hist[reason] += missing
        msg = NO_NODE_AVAILABLE.format(num_all_nodes) + ":"
        reasons = sorted(f"{count} {reason}" for reason, count in hist.items())
        if reasons:
            msg += f" {', '.join(reasons)}."
        return msg


def _unschedulable(message: str) -> Status:
    # the scheduler appends the period itself when it renders `<fit error>. <post filter message>.`
    text = MSG_PREFIX + message
    return Status(Code.UNSCHEDULABLE, (text[:-1] if text.endswith(".") else text,))


class DefaultPreemption(Plugin, PostFilterPlugin):
    NAME = NAME
    Args = DefaultPreemptionArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self._args = args if isinstance(args, DefaultPreemptionArgs) else DefaultPreemptionArgs()
        self._budgets = DisruptionBudgets.shared(handle)
        # where the next search for candidates starts, among the nodes preemption might help
        self._offset = 0

    # ------------------------------------------------------------------------------ PostFilter
    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult:
        snap = self.handle.snapshot
        num_nodes = snap.node_count
        if num_nodes == 0:
            return PostFilterResult(None, Status(Code.UNSCHEDULABLE))
        if diagnosis.pre_filter_status is not None:
            codes = None
            uniform_code = int(diagnosis.pre_filter_status.code)
        else:
            codes = diagnosis.code_by_row(snap.capacity)
            uniform_code = 0

        reason = self._ineligible(pod, codes, uniform_code)
        if reason:
            return PostFilterResult(None, _unschedulable(reason))

        all_rows = snap.live_rows()
        if codes is None:
            potential = all_rows if uniform_code == Code.UNSCHEDULABLE else all_rows[:0]
        else:
            potential = all_rows[codes[all_rows] == Code.UNSCHEDULABLE]
        candidates, verdicts = self._dry_run(state, pod, potential)
        if not candidates:
            if verdicts.error is not None:
                return PostFilterResult(None, Status(Code.ERROR, (MSG_PREFIX + verdicts.error.message,)))
            # the pod can no longer count on a node it was nominated to earlier
            return PostFilterResult("", _unschedulable(verdicts.fit_error(num_nodes, _NOT_HELPFUL)))
        best = pick_one(candidates)
        self._prepare(pod, best)
        return PostFilterResult(best.node_name, Status(Code.SUCCESS))

    def _ineligible(self, pod: Pod, codes: np.ndarray | None, uniform_code: int) -> str:
        """Why the pod may not preempt now ("" when it may)."""
        if pod.preemption_policy == PREEMPT_NEVER:
            return MSG_POLICY_NEVER
        snap = self.handle.snapshot
        nominated = self.handle.nominator.node_of(pod.key) or pod.nominated_node_name
        if not nominated:
            return ""
        row = snap.row_of.get(nominated)
        if row is None:
            return ""
        code = uniform_code if codes is None else int(codes[row])
        # a node with no recorded status was never a possibility (kube's default for absent nodes)
        if code in (0, Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
            return ""
        terminating = [other for other in snap.info(row).pods.values() if terminating_by_preemption(other)]
        if terminating and self.handle.victim_mask(pod, terminating).any():
            return MSG_TERMINATING_VICTIMS
        return ""

    def _num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self._args.min_candidate_nodes_percentage // 100
        n = max(n, self._args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def _dry_run(self, state: CycleState, pod: Pod, rows: np.ndarray) -> tuple[list[_Candidate], _Verdicts]:
        """Candidates (those violating no PDB first, each in node order) and why the other nodes
        looked at are not. The search starts where the last one stopped (kube's candidate
        offset), so successive preemptions spread over the nodes."""
        verdicts = _Verdicts()
        if rows.size == 0:
            return [], verdicts
        snap = self.handle.snapshot
        budgets = self._budgets.budgets(snap)
        fit = arrays.fit_request(state)
        # nodes where the request is above allocatable are never candidates: they are looked at
        # only to say why, when no node is
        hopeless = rows[:0]
        if fit is not None:
            within = arrays.fit_limits(snap, fit, rows)
            if not within.all():
                rows, hopeless = rows[within], rows[~within]
        plan = arrays.array_plan(self.handle, state, pod)
        wanted = self._num_candidates(int(rows.size + hopeless.size))
        start = self._offset % rows.size if rows.size else 0
        order = np.concatenate((rows[start:], rows[:start])) if start else rows
        clean: list[_Candidate] = []
        violating: list[_Candidate] = []
        examined = 0
        done = False
        chunk = max(wanted, _MIN_CHUNK)
        for at in range(0, int(order.size), chunk):
            part = order[at : at + chunk]
            for row, outcome in self._outcomes(state, pod, part, plan, budgets):
                examined += 1
                victims, violations, status = outcome
                if status is None and victims:
                    c = _Candidate(row, snap.node_name(row), victims, violations)
                    (violating if violations else clean).append(c)
                    if clean and len(clean) + len(violating) >= wanted:
                        done = True
                        break
                    continue
                self._reject(verdicts, snap.node_name(row), status)
            if done:
                break
        if not clean and not violating and hopeless.size:
            # most of these nodes' verdicts are read off the arrays; the rest are dry-run
            if not self.handle.victim_rules_apply(pod):
                told, hopeless = arrays.hopeless_verdicts(
                    self.handle, plan, state, pod, hopeless, _NO_VICTIMS
                )
                for status, count in told:
                    verdicts.add(status, count)
            for row, (_, _, status) in self._outcomes(state, pod, hopeless, plan, budgets):
                self._reject(verdicts, snap.node_name(row), status)
        if rows.size:
            self._offset = (start + examined) % int(rows.size)
        chosen = clean[:wanted] + violating[:wanted]
        # of equal candidates the first by node order wins, wherever the search started
        chosen.sort(key=lambda c: (c.pdb_violations > 0, c.row))
        return chosen, verdicts

    @staticmethod
    def _reject(verdicts: _Verdicts, node_name: str, status: Status | None) -> None:
        if status is None:
            status = Status(Code.ERROR, (f'expected at least one victim pod on node "{node_name}"',))
        verdicts.add(status)

    def _outcomes(
        self,
        state: CycleState,
        pod: Pod,
        rows: np.ndarray,
        plan: arrays.ArrayPlan | None,
        budgets: Sequence[Budget],
    ) -> Iterator[tuple[int, tuple[list[Pod], int, Status | None]]]:
        """Each row's dry run, in order: over the arrays where they can tell, else in a trial."""
        batch: list[arrays.RowOutcome | None] = [None] * int(rows.size)
        rules = self.handle.victim_rules_apply(pod)
        if plan is not None:
            batch = arrays.dry_run_rows(
                self.handle,
                plan,
                state,
                pod,
                rows,
                budgets,
                lambda row: self._potential(pod, row, rules),
                start_time,
                _NO_VICTIMS,
            )
        for row, outcome in zip(rows.tolist(), batch, strict=True):
            if outcome is None:
                yield row, self._select_victims(state, pod, row, budgets, rules)
            else:
                yield row, (outcome.victims, outcome.violations, outcome.status)

    def _potential(self, pod: Pod, row: int, rules: bool) -> list[Pod]:
        """The pods on the node the preemptor may evict (`rules`: a plugin's victim rules apply
        to the preemptor in place of the priority rule)."""
        pods = self.handle.snapshot.pods_on(row)
        if not rules:
            # kube-scheduler's rule, without building a mask
            priority = pod.priority
            return [p for p in pods if p.priority < priority and preemptible(p)]
        candidates = [p for p in pods if preemptible(p)]
        if not candidates:
            return candidates
        allowed = self.handle.victim_mask(pod, candidates)
        return [p for p, ok in zip(candidates, allowed.tolist(), strict=True) if ok]

    def _profile(self) -> Profile:
        profile = self.handle.profile
        assert profile is not None
        return profile

    def _fits(self, state: CycleState, pod: Pod, row: int) -> Status | None:
        """Every filter on one node, with the pods nominated there that are at least as important
        added, then without them (kube's RunFilterPluginsWithNominatedPods); None when it fits."""
        profile = self._profile()
        node_name = self.handle.snapshot.node_name(row)
        others = [
            o
            for o in self.handle.nominator.pods_on(node_name)
            if o.key != pod.key and o.priority >= pod.priority
        ]
        if others:
            st = profile.filter_one_with_pods(state, pod, row, others)
            if st is not None:
                return st
        return profile.filter_one(state, pod, row)

    def _select_victims(
        self, state: CycleState, pod: Pod, row: int, budgets: Sequence[Budget], rules: bool
    ) -> tuple[list[Pod], int, Status | None]:
        """The fewest lower-priority pods to evict from one node so the pod fits there, and how
        many of them break a PDB; or the status saying why the node cannot be a candidate.
        The node is left exactly as it was."""
        snap = self.handle.snapshot
        profile = self._profile()
        potential = self._potential(pod, row, rules)
        if not potential:
            return [], 0, _NO_VICTIMS
        trial_state = state.clone()
        with snap.trial() as trial:

            def remove(victim: Pod) -> None:
                trial.remove_pod(victim, row)
                profile.pre_filter_remove_pod(trial_state, pod, victim, row)

            for victim in potential:
                remove(victim)
            status = self._fits(trial_state, pod, row)
            if status is not None:
                return [], 0, status
            potential.sort(key=importance_key)
            violating, rest = split_by_pdb(potential, budgets)
            victims: list[Pod] = []
            violations = 0
            for group, breaks_pdb in ((violating, True), (rest, False)):
                for victim in group:
                    trial.add_pod(victim, row)
                    profile.pre_filter_add_pod(trial_state, pod, victim, row)
                    if self._fits(trial_state, pod, row) is not None:
                        remove(victim)
                        victims.append(victim)
                        violations += breaks_pdb
        if violating and rest:
            victims.sort(key=importance_key)
        return victims, violations, None

    def _prepare(self, pod: Pod, best: _Candidate) -> None:
        """Evict the victims and take the node from lower-priority pods nominated to it."""
        handle = self.handle
        scheduler_name = handle.scheduler_name
        message = (
            f"{scheduler_name}: preempting to accommodate higher priority pods, "
            f"preemptor: {pod.key}, triggerPod: {pod.key}"
        )
        for victim in best.victims:
            waiting = handle.waiting_pods.get(victim.key)
            if waiting is not None:
                # a pod held at Permit has not reached the API server as bound: reject it instead
                waiting.reject(NAME, "preempted")
                continue
            handle.emit(Evict(victim, best.node_name, pod.key, pod.key, message, scheduler_name))
        for other in handle.nominator.pods_on(best.node_name):
            if other.priority < pod.priority:
                handle.nominator.remove(other)
                handle.emit(Nominate(other, ""))


def pick_one(candidates: Sequence[_Candidate]) -> _Candidate:
    """kube-scheduler's pickOneNodeForPreemption: each criterion in turn keeps the best-scoring
    candidates; the first left wins."""
    if len(candidates) == 1:
        return candidates[0]

    def latest_start(c: _Candidate) -> float:
        top = max(v.priority for v in c.victims)
        return min(start_time(v) for v in c.victims if v.priority == top)

    criteria = (
        lambda c: -c.pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + _PRIORITY_OFFSET for v in c.victims),
        lambda c: -len(c.victims),
        latest_start,
    )
    left = list(candidates)
    for score in criteria:
        scores = [score(c) for c in left]
        top = max(scores)
        left = [c for c, s in zip(left, scores, strict=True) if s == top]
        if len(left) == 1:
            break
    return left[0]
