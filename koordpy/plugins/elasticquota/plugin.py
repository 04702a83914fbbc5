"""ElasticQuota (Koordinator, `scheduling.sigs.k8s.io/v1alpha1`) and CapacityScheduling
(scheduler-plugins, `scheduling.x-k8s.io/v1alpha1`): pods are admitted only while their quota has
room for them, borrow what other quotas leave idle, and take it back by preemption.

Both plugins are one implementation over the quota core (`koordpy.quota`) and a book per API group
(`book.py`); each API keeps its own system's rules. They hold, admit and order nothing until an
ElasticQuota of their group exists: a cluster without quotas is scheduled exactly as without these
plugins (a pod naming a Koordinator quota included: Koordinator counts it in its default quota).
CapacityScheduling's PostFilter preempts even then, by kube-scheduler's priority rule, as
scheduler-plugins' does (with its own configuration it is the only PostFilter).

Extension points:

- PreEnqueue: a pod whose quota has a problem (the tree's validation, `koordpy.quota.tree`), or
  that names a quota that does not exist, is held with reason QuotaInvalid or QuotaNotFound and a
  message naming the quota and the problem; every other quota keeps working. It is let through once
  the quota is fixed (the queue asks again on every ElasticQuota event). The other members of a
  gang group that cannot reach minMember without such pods are held with them, their message
  naming the held member and its quota's problem (`gangs.py`).
- PreFilter: the quota check (`koordpy.quota.admission`), with the message
  `quota team-a: cpu used 30 + requested 8 > runtime 32`. A member of a gang group that is being
  placed as a unit is admitted with the group: the requests of all the group's pending members are
  checked together, once per pass, so either every member is admitted or none (members the group
  reserved during the pass count in used, by exactly what the pending requests lose, so the
  verdict stands for the whole pass).
- PreFilterExtensions and Filter: the check again in a preemption's dry run, with what the victims
  taken off their nodes held given back (Koordinator's AddPod/RemovePod on its PostFilterState,
  CapacityScheduling's on its snapshot of the quotas). In an ordinary cycle the Filter is skipped.
- PostFilter: the pod-level preemption of kube-scheduler (`DefaultPreemption`'s algorithm) with this
  plugin's victim rules, for every pod the rules apply to (CapacityScheduling: every pod its quota
  does not hold, quotas or not); when it finds nothing, no other PostFilter evicts for the pod.
  Gang groups keep Coscheduling's job-level preemption (it runs first), which consults the same
  rules through the handle (`VictimFilter`).
- Reserve/Unreserve: a placed pod counts in its quota's used from Reserve on.
- QueueShare: of pods of equal priority, those of a quota that uses less of its runtime (Koordinator)
  or of its min (scheduler-plugins) are served first.

Victim rules:

- Koordinator (plugin_test.go canPreempt): a lower-priority pod of the preemptor's own quota, never
  one labelled `quota.scheduling.koordinator.sh/preemptible: "false"`, and (disableDefaultQuota-
  Preemption, on by default) never one of the default quota. Reclaim: a preemptor whose quota stays
  within its min with the pod (the group) may also evict pods of any other quota that uses more than
  its runtime, lowest priority first; Koordinator leaves that to its revoke controller
  (monitorAllQuotas, off by default), which evicts from such a quota whether or not anyone waits.
  Where a configuration runs DefaultPreemption after ElasticQuota (Koordinator's manager
  configuration does, its chart does not), a pod that finds no victim in its quota may still evict
  lower-priority pods of other quotas; koordpy does not, since that evicts pods a quota is
  guaranteed.
- scheduler-plugins (capacity_scheduling.go SelectVictimsOnNode): a preemptor of no quota evicts
  lower-priority pods of no quota; one whose quota stays within its min with the pod evicts pods of
  other quotas that use more than their min, whatever their priority; any other evicts lower-priority
  pods of its own quota.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from koordpy.api import names
from koordpy.api.elasticquota import KOORDINATOR_GROUP, X_K8S_GROUP, quota_of_pod
from koordpy.api.elasticquota import ElasticQuota as QuotaObject
from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.handle import Handle, SharedKey
from koordpy.framework.interfaces import (
    NODE_ALL,
    POD_DELETE,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PodMask,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    QueueingHints,
    QueueShare,
    ReservePlugin,
    Rows,
    VictimFilter,
)
from koordpy.framework.status import SKIP, Code, Status
from koordpy.plugins.coscheduling.registry import GANG_REGISTRY
from koordpy.plugins.defaultpreemption import DefaultPreemption, DefaultPreemptionArgs
from koordpy.plugins.elasticquota.args import ElasticQuotaArgs, resource_list
from koordpy.plugins.elasticquota.book import Ask, QuotaBook, Taken
from koordpy.plugins.elasticquota.gangs import held_by_a_member
from koordpy.plugins.elasticquota.koordinator_book import KoordinatorBook
from koordpy.plugins.elasticquota.namespace_book import NamespaceBook, nominated_requests
from koordpy.quota.tree import QUOTA_NOT_FOUND, QuotaProblem

ELASTIC_QUOTA = names.ELASTIC_QUOTA
CAPACITY_SCHEDULING = names.CAPACITY_SCHEDULING

KOORDINATOR_BOOK: SharedKey[KoordinatorBook] = SharedKey("elasticquota.koordinator")
NAMESPACE_BOOK: SharedKey[NamespaceBook] = SharedKey("elasticquota.x-k8s")

ELASTIC_QUOTA_KIND = "ElasticQuota"

# below every pod priority (an int32): CapacityScheduling counts other namespaces' nominated pods
# whatever their priority
_ANY_PRIORITY = -(1 << 31)


@dataclass(slots=True)
class _Check:
    """A pod's quota check as PreFilter made it, for the Filter of a preemption's dry run."""

    ask: Ask
    # victims taken off their nodes in this state's dry run
    taken: Taken
    # the victims of the job-level dry run under way, shared by every member's state
    ledger: Taken | None

    def clone(self) -> _Check:
        return _Check(self.ask, self.taken.copy(), self.ledger)

    @property
    def removed(self) -> Taken:
        return self.ledger if self.ledger is not None else self.taken


def _reason(problem: QuotaProblem) -> str:
    return names.QUOTA_NOT_FOUND if problem.reason == QUOTA_NOT_FOUND else names.QUOTA_INVALID


class _QuotaPlugin(
    Plugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    VictimFilter,
    QueueShare,
):
    """What both quota plugins do; the book and its rules are each plugin's."""

    STATE_KEY: ClassVar[str] = ""

    book: QuotaBook

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        # pod key -> (book version, the ask of the pod's group, its verdict)
        self._memo: dict[str, tuple[int, Ask, str | None]] = {}
        self._preemption: DefaultPreemption | None = None

    # ------------------------------------------------------------------ what each system decides
    def _verdict(self, ask: Ask, taken: Taken | None) -> str | None:
        raise NotImplementedError

    def _victims(self, preemptor: Pod, ask: Ask, candidates: Sequence[Pod]) -> PodMask:
        raise NotImplementedError

    def _with_nominated(self, pod: Pod, ask: Ask) -> Ask:
        return ask

    # ------------------------------------------------------------------ asks
    def _members(self, pod: Pod) -> tuple[list[Pod], str]:
        """The pod's gang group's pending members when the group is placed as a unit (the pod
        among them), else the pod alone."""
        profile = self.handle.profile
        group = profile.group if profile is not None else None
        members = group.batch_members(pod) if group is not None else None
        if not members:
            return [pod], ""
        if all(m.key != pod.key for m in members):
            members = [pod, *members]
        registry = self.handle.shared.get(GANG_REGISTRY)
        gang = registry.gang(pod) if registry is not None else None
        return members, gang.group_id if gang is not None else pod.key

    def _ask(self, pod: Pod) -> Ask:
        members, group = self._members(pod)
        return self._with_nominated(pod, self.book.ask(members, group))

    def _judged(self, pod: Pod) -> tuple[Ask, str | None]:
        """The pod's ask and verdict, judged once for all the members of a group's pass."""
        book = self.book
        memo = self._memo.get(pod.key)
        if memo is not None and memo[0] == book.version:
            return memo[1], memo[2]
        ask = self._ask(pod)
        verdict = self._verdict(ask, book.ledger) if ask.parts else None
        version = book.version
        if len(ask.pods) > 1:
            book.pass_members = frozenset(ask.pods)
            self._memo = dict.fromkeys(ask.pods, (version, ask, verdict))
        else:
            self._memo = {pod.key: (version, ask, verdict)}
        return ask, verdict

    # ------------------------------------------------------------------ PreEnqueue
    def pre_enqueue(self, pod: Pod) -> Status | None:
        return self._held(pod)

    def _held(self, pod: Pod) -> Status | None:
        """Why the pod's quota, or a gang member's, holds the pod (None: it does not)."""
        problem = self.book.problem_of(pod)
        if problem is not None:
            reason = _reason(problem)
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (problem.message,), self.NAME, reason)
        # a gang member whose group a held member keeps short (see gangs.py)
        found = held_by_a_member(self.handle.shared.get(GANG_REGISTRY), self.book, pod)
        if found is None:
            return None
        problem, message = found
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,), self.NAME, _reason(problem))

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        book = self.book
        # again here: a quota may have gone wrong since the pod passed PreEnqueue
        held = self._held(pod)
        if held is not None:
            return None, held
        if not book.active:
            return None, SKIP
        ask, verdict = self._judged(pod)
        if not ask.parts:
            return None, SKIP
        if verdict is None and book.ledger is None:
            # nothing a dry run of an ordinary cycle does can make the quota fuller
            return None, SKIP
        state.write(self.STATE_KEY, _Check(ask, Taken(), book.ledger))
        if verdict is not None:
            return None, Status(Code.UNSCHEDULABLE, (verdict,), self.NAME)
        return None, None

    def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        check: _Check | None = state.read(self.STATE_KEY)
        if check is not None:
            self.book.give_back(check.removed, other)

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        check: _Check | None = state.read(self.STATE_KEY)
        if check is not None:
            self.book.take(check.removed, other)

    # ------------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: Pod, rows: Rows) -> FilterResult | None:
        """Only a preemption's dry run gets here (PreFilter skips the Filter otherwise): the quota
        check with what the victims taken off their nodes held given back; the same for every
        node, since a quota is the cluster's."""
        book = self.book
        if not book.active:
            return None
        check: _Check | None = state.read(self.STATE_KEY)
        if check is None:
            # PreFilter did not get to this plugin: judge the pod as it is
            ask = self._ask(pod)
            check = _Check(ask, Taken(), book.ledger)
        if not check.ask.parts:
            return None
        verdict = self._verdict(check.ask, check.removed)
        if verdict is None:
            return None
        return FilterResult.uniform(
            np.zeros(rows.size, dtype=np.bool_), Status(Code.UNSCHEDULABLE, (verdict,), self.NAME)
        )

    # ------------------------------------------------------------------ PostFilter
    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult:
        """kube-scheduler's preemption with this plugin's victim rules; the last word on the pod
        when the rules apply to it, a pass to the next PostFilter when they do not."""
        if not self._preempts_for(pod):
            return PostFilterResult(None, Status(Code.UNSCHEDULABLE))
        result = self._evaluator().post_filter(state, pod, diagnosis)
        if result.status.is_success or result.status.code == Code.ERROR or not self.book.active:
            # without quotas this was kube-scheduler's preemption, and answers as it does
            return result
        stop = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, result.status.reasons, self.NAME)
        return PostFilterResult(result.nominated_node, stop)

    def _preempts_for(self, pod: Pod) -> bool:
        """Whether this PostFilter preempts for the pod, or passes it to the next one."""
        return self.victim_rules_apply(pod)

    def _evaluator(self) -> DefaultPreemption:
        """The profile's DefaultPreemption (with its args) when it has one, else one of ours: the
        victim rules reach it through the handle either way."""
        if self._preemption is None:
            profile = self.handle.profile
            found = profile.plugin(names.DEFAULT_PREEMPTION) if profile is not None else None
            if isinstance(found, DefaultPreemption):
                self._preemption = found
            else:
                self._preemption = DefaultPreemption(self.handle, DefaultPreemptionArgs())
        return self._preemption

    # ------------------------------------------------------------------ Reserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.book.reserve(pod)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.book.unreserve(pod)

    # ------------------------------------------------------------------ preemption rules
    def victim_rules_apply(self, preemptor: Pod) -> bool:
        book = self.book
        book.ensure()
        return book.active and book.problem_of(preemptor) is None

    def victim_filter(self, preemptor: Pod, candidates: Sequence[Pod]) -> PodMask | None:
        if not self.victim_rules_apply(preemptor):
            return None
        if not candidates:
            return np.zeros(0, dtype=np.bool_)
        return self._victims(preemptor, self._ask(preemptor), candidates)

    @contextmanager
    def releasing(self, victims: Sequence[Pod]) -> Iterator[None]:
        with self.book.releasing(victims):
            yield

    def queue_share(self, pod: Pod) -> float:
        book = self.book
        if not book.active or book.problem_of(pod) is not None:
            return 0.0
        return book.share(pod)


def _koordinator_book(handle: Handle, args: ElasticQuotaArgs) -> KoordinatorBook:
    # one book per scheduler: the first profile's args shape it, as they do Coscheduling's registry
    book = KoordinatorBook(
        handle.snapshot,
        system_max=resource_list(args.system_quota_group_max),
        default_max=resource_list(args.default_quota_group_max),
        scale_min=args.enable_min_quota_scale,
    )
    handle.on_pod_event(book.on_pod)
    handle.on_object_event(ELASTIC_QUOTA_KIND, book.on_object)
    return book


def _namespace_book(handle: Handle) -> NamespaceBook:
    book = NamespaceBook(handle.snapshot)
    handle.on_pod_event(book.on_pod)
    handle.on_object_event(ELASTIC_QUOTA_KIND, book.on_object)
    return book


class ElasticQuota(_QuotaPlugin, QueueingHints):
    """Koordinator's ElasticQuota: a quota tree, runtime quota, pods joined by label."""

    NAME = ELASTIC_QUOTA
    Args = ElasticQuotaArgs
    STATE_KEY = f"{ELASTIC_QUOTA}/check"

    def __init__(self, handle: Handle, args: ElasticQuotaArgs | None = None) -> None:
        super().__init__(handle, args)
        self.eargs: ElasticQuotaArgs = args or ElasticQuotaArgs()
        self.rules = self.eargs.rules()
        eargs = self.eargs
        self.kbook: KoordinatorBook = handle.share(KOORDINATOR_BOOK, lambda: _koordinator_book(handle, eargs))
        self.book = self.kbook

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # a quota changing, a pod leaving (its quota's used), nodes (the total the runtime splits)
        return (ClusterEvent(ELASTIC_QUOTA_KIND), ClusterEvent("Pod", "Delete"), ClusterEvent("Node"))

    # ------------------------------------------------------------------ queueing hints
    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        """Koordinator's EventsToRegister: with enableQueueHint, a pod deleted and a quota updated
        are judged by isSchedulableAfterPodDeletion and isSchedulableAfterQuotaChanged; without,
        every such event queues. Quotas added or deleted (they re-shape the tree, and open
        QuotaNotFound gates) and nodes (the total the runtime splits) always queue here."""
        if not self.eargs.enable_queue_hint:
            return tuple(ClusterEventWithHint(e) for e in self.events_to_register())
        return (
            ClusterEventWithHint(POD_DELETE, self.after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTA_KIND, "Update"), self.after_quota_changed),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTA_KIND, "Add")),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTA_KIND, "Delete")),
            ClusterEventWithHint(NODE_ALL),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        return self._quota_and_tree(pod)

    def _quota_and_tree(self, pod: Pod) -> tuple[str, str]:
        """The pod's quota and that quota's tree id, under the current tree."""
        book = self.kbook
        book.ensure()
        tree = book.tree
        found = quota_of_pod(pod, tree.index)
        if found is None:
            return "", ""
        row = tree.rows.get(found.name)
        quota = tree.quotas[row] if row is not None else None
        return found.name, quota.tree_id if quota is not None else ""

    def _on_path_to_root(self, quota: str, other: str) -> bool:
        """Whether `other` is `quota` or one of its ancestors (Koordinator's GetQuotaPathToRoot)."""
        tree = self.kbook.tree
        row = tree.rows.get(quota)
        if row is None:
            return False
        return any(tree.names[r] == other for r in (row, *tree.ancestors(row)))

    def after_pod_deleted(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Koordinator's isSchedulableAfterPodDeletion: a placed pod of the same tree whose quota
        is the pod's own (or, checking parents, one on its path to the root) leaving."""
        deleted = old if old is not None else new
        if deleted is None:
            return QueueingHint.QUEUE
        deleted_quota, deleted_tree = self._quota_and_tree(deleted)
        quota, tree = self._quota_and_tree(pod)
        if not deleted_quota or not quota or deleted_tree != tree:
            return QueueingHint.QUEUE_SKIP
        if not deleted.node_name:
            return QueueingHint.QUEUE_SKIP  # it held nothing of its quota
        if deleted_quota == quota:
            return QueueingHint.QUEUE
        if self.rules.check_parents and self._on_path_to_root(quota, deleted_quota):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def after_quota_changed(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Koordinator's isSchedulableAfterQuotaChanged: the pod's own quota (or, checking
        parents, one on its path to the root) changed in its min, max, shared weight, parent, or
        whether it is a parent or lends."""
        before, after = _quota_view(old), _quota_view(new)
        if before is None or after is None:
            return QueueingHint.QUEUE
        if after.api_group != KOORDINATOR_GROUP:
            return QueueingHint.QUEUE_SKIP
        quota, tree = self._quota_and_tree(pod)
        if not quota or after.tree_id != tree or not _quota_changed(before, after):
            return QueueingHint.QUEUE_SKIP
        if after.name == quota:
            return QueueingHint.QUEUE
        if self.rules.check_parents and self._on_path_to_root(quota, after.name):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def _verdict(self, ask: Ask, taken: Taken | None) -> str | None:
        return self.kbook.check(ask, self.rules, taken)

    def _victims(self, preemptor: Pod, ask: Ask, candidates: Sequence[Pod]) -> PodMask:
        return self.kbook.victim_mask(preemptor, ask, candidates, self.rules)


class CapacityScheduling(_QuotaPlugin, QueueingHints):
    """scheduler-plugins' CapacityScheduling: one ElasticQuota per namespace, min and max."""

    NAME = CAPACITY_SCHEDULING
    STATE_KEY = f"{CAPACITY_SCHEDULING}/check"

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self.nbook: NamespaceBook = handle.share(NAMESPACE_BOOK, lambda: _namespace_book(handle))
        self.book = self.nbook

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (ClusterEvent(ELASTIC_QUOTA_KIND), ClusterEvent("Pod", "Delete"))

    def _preempts_for(self, pod: Pod) -> bool:
        """scheduler-plugins' PostFilter is the preemption evaluator whether or not a quota exists:
        a preemptor of no quota evicts lower-priority pods of no quota (SelectVictimsOnNode), which
        before any quota exists is kube-scheduler's rule (the handle's, as victim_filter gives
        none then). Where the profile has no other PostFilter, nothing else would preempt; where
        it runs DefaultPreemption too, that one's preemption is the same, and is left to it."""
        book = self.nbook
        book.ensure()
        if book.problem_of(pod) is not None:
            return False
        if book.active:
            return True
        profile = self.handle.profile
        return profile is None or all(p.NAME != names.DEFAULT_PREEMPTION for p in profile.post_filter)

    # ------------------------------------------------------------------ queueing hints
    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        """scheduler-plugins registers pod deletes and every ElasticQuota event, without hints. A
        pod deleted can help only if a quota counted it (placed, in a namespace with a quota: the
        check reads its own quota and the sum over all of them); a quota updated only if its min or
        max changed (the status the operator writes changes neither)."""
        return (
            ClusterEventWithHint(POD_DELETE, self.after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTA_KIND, "Update"), self.after_quota_changed),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTA_KIND, "Add")),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTA_KIND, "Delete")),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        # the hints read nothing of the waiting pod
        return ()

    def after_pod_deleted(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        deleted = old if old is not None else new
        if deleted is None:
            return QueueingHint.QUEUE
        book = self.nbook
        book.ensure()
        counted = bool(deleted.node_name) and deleted.namespace in book.quotas.rows
        return QueueingHint.QUEUE if counted else QueueingHint.QUEUE_SKIP

    def after_quota_changed(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        before, after = _quota_view(old), _quota_view(new)
        if before is None or after is None:
            return QueueingHint.QUEUE
        if after.api_group != X_K8S_GROUP:
            return QueueingHint.QUEUE_SKIP
        same = before.min == after.min and before.max == after.max
        return QueueingHint.QUEUE_SKIP if same else QueueingHint.QUEUE

    def _with_nominated(self, pod: Pod, ask: Ask) -> Ask:
        """CapacityScheduling's PreFilter reads the pods nominated to the snapshot's nodes: of the
        pod's namespace at its priority or higher, and of any priority in the other namespaces
        whose quota is within its min. Only those are looked at (the nominator selects them by
        namespace and priority); the pod's gang group's own members never count."""
        nominator = self.handle.nominator
        if not nominator or not ask.parts:
            return ask
        book = self.nbook
        rows = book.quotas.rows
        members = frozenset(ask.pods)
        ignore = (lambda other: other.key in members) if len(members) > 1 else None
        snap = self.handle.snapshot
        held: list[dict[int, list[Pod]]] = []
        if pod.namespace in rows:
            held.append(nominator.holding(pod, snap, ignore=ignore, namespaces=(pod.namespace,)))
        others = [ns for ns in nominator.namespaces() if ns != pod.namespace and ns in rows]
        if others:
            over = book.over_min()
            within_min = [ns for ns in others if not over[rows[ns]]]
            if within_min:
                held.append(
                    nominator.holding(pod, snap, ignore=ignore, floor=_ANY_PRIORITY, namespaces=within_min)
                )
        nominated = [other for by_row in held for pods in by_row.values() for other in pods]
        ask.nominated_in_quota, ask.nominated_elsewhere = nominated_requests(book, pod, nominated, members)
        return ask

    def _verdict(self, ask: Ask, taken: Taken | None) -> str | None:
        return self.nbook.check(ask, taken)

    def _victims(self, preemptor: Pod, ask: Ask, candidates: Sequence[Pod]) -> PodMask:
        return self.nbook.victim_mask(preemptor, ask, candidates)


def _quota_view(obj: Any) -> QuotaObject | None:
    """An ElasticQuota event's object as read (None: absent or unreadable; hints then queue)."""
    if not isinstance(obj, Mapping):
        return None
    try:
        return QuotaObject.from_dict(obj)
    except SpecError:
        return None


def _quota_changed(before: QuotaObject, after: QuotaObject) -> bool:
    """Koordinator's QuotaInfo.IsQuotaChange."""
    return (
        before.allow_lent_resource != after.allow_lent_resource
        or before.is_parent != after.is_parent
        or before.parent != after.parent
        or before.max != after.max
        or before.min != after.min
        or before.shared_weight != after.shared_weight
    )
