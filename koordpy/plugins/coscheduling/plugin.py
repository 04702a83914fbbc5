"""Coscheduling: all-or-nothing scheduling of gangs and gang groups.

Extension points: QueueSort (priority, then the group's creation time, or its last failure, then
name), PreEnqueue (a gang waits, without using scheduling cycles, until every gang of its group has
enough members), PreFilter (a member placed after its group stays in the group's domain; a
scheduler-plugins PodGroup waits while the cluster cannot hold its minResources, minresources.py),
PreScore/Score (pods with a network-topology selector are drawn to their peers' domains,
selector_score.py), Permit (members wait until every gang of the group reaches its minimum, then
are released together), Reserve/Unreserve (Strict gangs roll back together), PreBind (gang batch
annotations) and PostBind (the group counts as satisfied once a member is bound).

The scheduler places a gang group as a unit: once one member is popped, `batch_members` names every
pending member of the group and the scheduler tries them back to back, each seeing the earlier
ones assumed; `batch_end` then releases the group or rolls it back (Strict), keeps the placed
members waiting (NonStrict, or a scheduler-plugins PodGroup close enough to its minimum), and
writes one message that every pending member carries.

Network topology, for a gang group (decided from Koordinator's code, koordinator-sh/koordinator
pkg/scheduler/plugins/coscheduling/core):

- The network-topology-spec confines the whole gang group, placed as one unit in one domain, not
  only the gang that carries it. `PodGroupManager.BeforePreFilter` (core.go) opens the round's
  GangSchedulingContext with the whole group (`gangGroup`) and the spec of the gang of the round's
  first pod; `PodGroupManager.FindOneNode` (network_topology_workflow.go) then plans
  `getPendingPods(gangGroup)`, every pending pod of every gang of the group, with
  `DesiredOfferSlot = len(allPendingPods)`, into one domain. So when only one gang of a group
  carries a spec, Koordinator uses it for the whole group in the rounds that gang's pod opens and
  places the group without topology in the others; koordpy applies it to the whole group always,
  whichever member is popped first.
- Two gangs of one group with different specs: Koordinator uses whichever gang's pod opens the
  round, so the placement depends on queue order; koordpy refuses instead, with InvalidSpec on
  every member naming both gangs and their rules.
- Members placed after the group (beyond minMember, or that did not fit in the group's pass) stay
  in the MustGather domain of the group's placed members:
  `PodGroupManager.preFilterLateMemberOfSatisfiedGang` and `getMustGatherDomainOfBoundMembers`
  (network_topology_workflow.go) confine a late member of a once-satisfied gang to the leaf nodes
  of the MustGather-layer ancestor of its group's bound members, and reject it
  (UnschedulableAndUnresolvable) when no member is bound, when a member is on a node outside the
  topology, or when the members span several domains. koordpy does the same in PreFilter, also
  for groups whose match policy never makes them once-satisfied (their later members go through
  a group pass, whose plan is confined the same way), counts members assumed or waiting at Permit
  as placed (the cache knows their node before the binding is seen), and reads the group's spec
  (Koordinator reads the late pod's own gang's, which misses a group whose spec another gang
  carries). podCountMultiple does not apply to later members: the split it asks for was made when
  the group was placed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from koordpy import logs
from koordpy.api import names
from koordpy.api.duration import MAX_SECONDS, parse_duration
from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis, fit_error_message
from koordpy.framework.effects import RecordEvent
from koordpy.framework.handle import Handle, SharedKey
from koordpy.framework.interfaces import (
    NODE_ADD,
    NODE_UPDATE,
    POD_ADD,
    POD_DELETE,
    POD_UPDATE,
    BatchResult,
    ClusterEvent,
    ClusterEventWithHint,
    GroupPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreEnqueueRecheck,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    QueueingHints,
    QueueSortPlugin,
    ReservePlugin,
    Rows,
    ScoreExtensions,
    ScorePlugin,
    Scores,
    pod_departs,
)
from koordpy.framework.queued import QueuedPodInfo
from koordpy.framework.status import SKIP, Code, Status
from koordpy.plugins.coscheduling.explain import explain_failed_pass, explain_no_domain
from koordpy.plugins.coscheduling.gang import (
    ANNOTATION_TOPOLOGY_SPEC,
    FROM_X_K8S,
    MATCH_POLICIES,
    NON_STRICT,
    ONCE_SATISFIED,
    ONLY_WAITING,
    WAITING_AND_RUNNING,
    Gang,
    member_order_key,
    membership,
)
from koordpy.plugins.coscheduling.minresources import MinResourcesCheck
from koordpy.plugins.coscheduling.networktopology import (
    ClusterTopologyView,
    GatherDomain,
    NetworkTopologySpec,
    Placement,
    placed_domain,
    plan_with_offers,
    unknown_layer_message,
)
from koordpy.plugins.coscheduling.nominations import nominated_plan
from koordpy.plugins.coscheduling.offers import offer_slots
from koordpy.plugins.coscheduling.preemption import JobPreemption
from koordpy.plugins.coscheduling.registry import GANG_REGISTRY, GangRegistry
from koordpy.plugins.coscheduling.selector_score import (
    TreeColumns,
    normalize_positions,
    peer_rows,
    preference_positions,
    shared_selector_index,
    topology_selector,
    tree_columns,
)
from koordpy.status.gang_annotations import MUST_GATHER, PREFER_GATHER, Fallback
from koordpy.status.topology import TopologyTree

log = logs.get(__name__)

NAME = names.COSCHEDULING
TOPOLOGY_VIEW: SharedKey[ClusterTopologyView] = SharedKey("coscheduling.topology")
REASON_TOPOLOGY_UNAVAILABLE = names.TOPOLOGY_UNAVAILABLE
REASON_GANG_NOT_READY = names.GANG_NOT_READY
REASON_INVALID_SPEC = names.INVALID_SPEC
BIND_GANG_GROUP_ID = "internal.scheduling.koordinator.sh/bind-gang-group-id"
BIND_GANG_MEMBER_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"
BIND_GANG_GROUP_ID_DEPRECATED = "scheduling.koordinator.sh/bind-gang-group-id"
BIND_GANG_MEMBER_COUNT_DEPRECATED = "scheduling.koordinator.sh/bind-gang-member-count"
# each feasible node's place in the network-topology-selector order, for the rows PreScore saw
PRE_SCORE_STATE = f"{NAME}/pre-score-state"


class CoschedulingArgs(PluginArgs):
    """Both reference systems' CoschedulingArgs in one model: koord-scheduler's (defaultTimeout,
    defaultMatchPolicy, enablePreemption, awareNetworkTopology, controllerWorkers,
    skipCheckScheduleCycle) and scheduler-plugins' (permitWaitingTimeSeconds,
    podGroupBackoffSeconds, podGroupRejectPercentage), so that either project's files load."""

    UNHONOURED_FIELDS = {
        "controllerWorkers": "koordpy keeps PodGroup status with its operator, not scheduler workers",
        "skipCheckScheduleCycle": "koord-scheduler v1.8 does not act on it either",
    }

    default_timeout: float | str = Field(default=600.0)
    default_match_policy: str = ONCE_SATISFIED
    enable_preemption: bool = True
    aware_network_topology: bool = True
    # seconds Go turns into a time.Duration: no longer than one holds (about 292 years)
    permit_waiting_time_seconds: int = Field(default=60, ge=0, le=int(MAX_SECONDS))
    pod_group_backoff_seconds: int = Field(default=0, ge=0, le=int(MAX_SECONDS))
    pod_group_reject_percentage: int = Field(default=10, ge=0, le=100)
    controller_workers: int = Field(default=1, ge=1)
    skip_check_schedule_cycle: bool = False

    @field_validator("default_timeout")
    @classmethod
    def _timeout(cls, value: float | str) -> float:
        seconds = parse_duration(value) if isinstance(value, str) else float(value)
        if seconds < 0:
            raise ValueError("must not be negative")
        if seconds > MAX_SECONDS:
            raise ValueError(f"{value} seconds is longer than a Go duration can be (about 292 years)")
        return seconds

    @field_validator("default_match_policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        if value not in MATCH_POLICIES:
            raise ValueError(f"must be one of {', '.join(MATCH_POLICIES)}")
        return value

    @property
    def timeout_seconds(self) -> float:
        return float(self.default_timeout)


def _refusal(message: str) -> Diagnosis:
    """The diagnosis of a group no node can take whatever is evicted: PreFilter said so."""
    diagnosis = Diagnosis()
    diagnosis.pre_filter_msg = message
    diagnosis.pre_filter_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,), NAME)
    diagnosis.unschedulable_plugins.add(NAME)
    return diagnosis


def _new_registry(handle: Handle, default_match_policy: str) -> GangRegistry:
    # one registry per scheduler hears every pod and PodGroup event
    registry = GangRegistry(handle.clock, default_match_policy)
    handle.on_pod_event(registry.on_pod)
    handle.on_object_event("PodGroup", registry.on_podgroup)
    return registry


def _new_topology_view(handle: Handle, registry: GangRegistry) -> ClusterTopologyView:
    topology = ClusterTopologyView()
    handle.on_object_event("ClusterNetworkTopology", topology.on_object)
    # the layers a topology has decide whether a gang's gather rules are valid
    handle.on_object_event("ClusterNetworkTopology", lambda action, obj: registry.touch_all())
    return topology


class Coscheduling(
    Plugin,
    QueueSortPlugin,
    PreEnqueuePlugin,
    PreEnqueueRecheck,
    PreFilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    PostBindPlugin,
    GroupPlugin,
    QueueingHints,
):
    NAME = NAME
    Args = CoschedulingArgs

    def __init__(self, handle: Handle, args: CoschedulingArgs | None = None) -> None:
        super().__init__(handle, args)
        self.cargs: CoschedulingArgs = args or CoschedulingArgs()
        policy = self.cargs.default_match_policy
        registry = handle.share(GANG_REGISTRY, lambda: _new_registry(handle, policy))
        self.registry: GangRegistry = registry
        self.topology: ClusterTopologyView = handle.share(
            TOPOLOGY_VIEW, lambda: _new_topology_view(handle, registry)
        )
        # the node each member of the group being placed goes to, when its placement was planned
        self._planned: dict[str, str] = {}
        # gang groups told that their topology request could not be honoured, and why
        self._fallback_told: dict[str, str] = {}
        self.preemption = JobPreemption(self)
        # pod keys released together by the last successful Permit of each group
        self._binding_members: dict[str, frozenset[str]] = {}
        # the last group's MustGather domain, with what it was computed from (see _gather_domain)
        self._domain_memo: tuple[tuple[object, ...], GatherDomain | str | None] | None = None
        self.min_resources = MinResourcesCheck(handle.clock, float(self.cargs.permit_waiting_time_seconds))
        registry.on_gang_gone(self._gang_gone)
        self.selectors = shared_selector_index(handle)
        # the topology tree as columns over the snapshot rows, with the tree they were taken from
        self._tree_columns: tuple[TopologyTree, int, TreeColumns] | None = None
        # what would place the group whose plan found no domain this pass ("" when nothing can be
        # said; None when no plan failed, and the pass's failures are explained in batch_end)
        self._explanation: str | None = None

    def _gang_gone(self, gang_id: str, group_id: str | None) -> None:
        """What this plugin keeps by gang or gang group goes with them."""
        self.min_resources.forget(gang_id)
        if group_id is not None:
            self._binding_members.pop(group_id, None)
            self._fallback_told.pop(group_id, None)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        return (
            ClusterEvent("Pod"),
            ClusterEvent("Node"),
            ClusterEvent("PodGroup"),
            ClusterEvent("ClusterNetworkTopology"),
        )

    # ----------------------------------------------------------------------------- queueing hints
    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        """scheduler-plugins registers pod adds and PodGroup adds and updates (Koordinator none:
        its gangs wait in PreEnqueue, as koordpy's do). A pod this plugin rejected waits for its
        own group: a member placed, gone or changed, or one of its PodGroups changed. koordpy also
        rejects a group that no topology domain or minResources can hold now, so room freed and
        nodes added or changed count as well, and so does any topology change."""
        return (
            ClusterEventWithHint(POD_ADD, self.after_pod_change),
            ClusterEventWithHint(POD_UPDATE, self.after_pod_change),
            ClusterEventWithHint(POD_DELETE, self.after_pod_change),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_update),
            ClusterEventWithHint(ClusterEvent("PodGroup"), self.after_podgroup_change),
            ClusterEventWithHint(ClusterEvent("ClusterNetworkTopology")),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        # the hints read only which gangs the pod's group has
        gang = self.registry.gang(pod)
        return gang.group if gang is not None else pod.key

    def _in_group(self, pod: Pod, gang_id: str) -> bool:
        gang = self.registry.gang(pod)
        return gang is not None and gang_id in gang.group

    def after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A member of the pod's own group added, bound, changed or gone; or any pod that held room
        leaving (deleted, finished or terminating)."""
        other: Pod = new if new is not None else old
        m = membership(other)
        if m is not None and self._in_group(pod, m.gang_id):
            return QueueingHint.QUEUE
        if new is None or (old is not None and pod_departs(old, new)):
            held = other.node_name if new is None else old.node_name
            return QueueingHint.QUEUE if held else QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE_SKIP

    def after_node_update(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A node changed in what placement reads (its room, labels, taints, cordon); a status
        heartbeat does not help."""
        if old is None or new is None:
            return QueueingHint.QUEUE
        same = (
            old.allocatable == new.allocatable
            and old.labels == new.labels
            and old.taints == new.taints
            and old.unschedulable == new.unschedulable
        )
        return QueueingHint.QUEUE_SKIP if same else QueueingHint.QUEUE

    def after_podgroup_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """One of the PodGroups of the pod's own group (or any, once the pod belongs to no gang:
        its PodGroup went)."""
        if self.registry.gang(pod) is None:
            return QueueingHint.QUEUE
        for obj in (new, old):
            if isinstance(obj, Mapping):
                meta = obj.get("metadata") or {}
                gang_id = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
                if self._in_group(pod, gang_id):
                    return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    # ----------------------------------------------------------------------------- QueueSort
    def sort_key(self, info: QueuedPodInfo) -> tuple[int, float, float, int, str, str]:
        pod = info.pod
        # of equal priority, the pods of the tenant that uses least of its quota go first
        share = self.handle.queue_share(pod)
        gang = self.registry.gang(pod)
        if gang is None or self.registry.once_satisfied(gang):
            # pods that entered at one (virtual) instant go in arrival order, as a cluster's clock
            # would order them; the name decides nothing
            return (-pod.priority, share, info.initial_attempt_timestamp, info.arrival, "", pod.key)
        group_time = gang.create_time
        failures = [g.last_failure for g in self.registry.group(gang) if g is not None and g.last_failure]
        if failures:
            # a group that has just failed goes behind its peers of the same priority
            group_time = max(group_time, *failures)
        # a group's time is its creationTimestamp (whole seconds, before any pod of that second
        # entered the queue): at a tie it goes first, and groups of one time go by id
        return (-pod.priority, share, group_time, -1, gang.group_id, pod.key)

    # ----------------------------------------------------------------------------- PreEnqueue
    def gated_pods_to_recheck(self) -> set[str]:
        return self.registry.take_touched()

    def _tell_fallbacks(self, pod: Pod) -> None:
        """Each gang annotation read otherwise than written (koordpy.status.gang_annotations), told
        once to each member as a Warning event, where koord-scheduler only logs it."""
        for fallback in self.registry.untold_fallbacks(pod):
            self.handle.emit(RecordEvent(pod, "Warning", names.GANG_ANNOTATION_DEFAULTED, fallback.message()))

    def pre_enqueue(self, pod: Pod) -> Status | None:
        st = self._pre_enqueue(pod)
        # the registry looks again only at the members held back when their gang changes
        self.registry.hold(pod, st is not None)
        return st

    def _pre_enqueue(self, pod: Pod) -> Status | None:
        self._tell_fallbacks(pod)
        verdict = self.registry.readiness(pod)
        if verdict is None:
            message = self._spec_conflict(pod) or self._unknown_layers(pod)
            if message is None:
                return self._waiting_for_gated(pod)
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,), NAME, REASON_INVALID_SPEC)
        reason = REASON_INVALID_SPEC if verdict.invalid else REASON_GANG_NOT_READY
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (verdict.message,), NAME, reason)

    def _waiting_for_gated(self, pod: Pod) -> Status | None:
        """A gang that reaches its minimum only with members its scheduling gates still hold waits
        for them here: its other members placed now would hold their nodes until the permit
        timeout for nothing. The gated members themselves stay SchedulingGated."""
        gang = self.registry.gang(pod)
        if gang is None or self.registry.once_satisfied(gang):
            return None
        short: list[str] = []
        for other in self.registry.group(gang):
            if other is None or other.spec is None:
                continue
            gated = other.gated
            if gated and len(other.children) - gated < other.spec.min_member:
                short.append(f"gang {other.id} waits for {gated} gated member(s)")
        if not short:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("; ".join(short),), NAME, REASON_GANG_NOT_READY)

    # ----------------------------------------------------------------------------- topology
    def _group_topology(self, gang: Gang) -> tuple[Gang, NetworkTopologySpec] | str | None:
        """The gather rules the gang's whole group is placed by (see the module doc): the gang's
        own, else those of the first gang of the group that has some; a message when two gangs of
        the group ask for different placements; None when no gang asks."""
        if not self.cargs.aware_network_topology:
            return None
        carriers = [
            g
            for g in (gang, *self.registry.group(gang))
            if g is not None and g.spec is not None and g.spec.topology_spec is not None
        ]
        if not carriers:
            return None
        first = carriers[0]
        assert first.spec is not None and first.spec.topology_spec is not None
        spec = first.spec.topology_spec
        for other in carriers[1:]:
            assert other.spec is not None and other.spec.topology_spec is not None
            if not other.spec.topology_spec.same_rules(spec):
                return (
                    f"gang group [{gang.group_id}] is placed as one unit, but its gangs ask for "
                    f"different placements in annotation {ANNOTATION_TOPOLOGY_SPEC}: {first.id} "
                    f"({spec.describe()}) and {other.id} ({other.spec.topology_spec.describe()}); give "
                    "every gang of the group the same spec, or put it on one gang only"
                )
        return first, spec

    def _topology_spec(self, pod: Pod) -> tuple[Gang, NetworkTopologySpec] | None:
        """The gather rules of the pod's gang group (None when it has none, or conflicting ones:
        PreEnqueue refuses those)."""
        gang = self.registry.gang(pod)
        if gang is None:
            return None
        found = self._group_topology(gang)
        return found if isinstance(found, tuple) else None

    def _spec_conflict(self, pod: Pod) -> str | None:
        gang = self.registry.gang(pod)
        if gang is None:
            return None
        found = self._group_topology(gang)
        if not isinstance(found, str):
            return None
        # the group carries it too (PodGroup status, the report), as for any other bad input
        self.registry.messages[gang.group_id] = found
        return found

    def _unknown_layers(self, pod: Pod) -> str | None:
        found = self._topology_spec(pod)
        chain = self.topology.chain
        if found is None or chain is None:
            return None
        gang, spec = found
        where = f"annotation {ANNOTATION_TOPOLOGY_SPEC}"
        # koord-scheduler's solver matches rules to domains by layer: a PreferGather rule for a
        # layer the topology lacks matches nothing and is ignored, while a MustGather one leaves no
        # domain the group may use, so the group is never placed (searchMustGatherSatisfiedNodes)
        for layer in spec.unknown_layers(chain, PREFER_GATHER):
            told = Fallback(
                f"{where} gatherStrategy layer",
                repr(layer)[:80],
                f"is no layer of ClusterNetworkTopology default ({', '.join(chain.order[1:])})",
                "no preference for that layer",
            )
            if self.registry.tell_once(pod, told):
                self.handle.emit(RecordEvent(pod, "Warning", names.GANG_ANNOTATION_DEFAULTED, told.message()))
        message = unknown_layer_message(spec, chain, where, MUST_GATHER)
        if message is None:
            return None
        message = f"gang {gang.id}: {message}"
        # the group carries it too (PodGroup status, the report), as for any other bad input
        own = self.registry.gang(pod)
        if own is not None:
            self.registry.messages[own.group_id] = message
        return message

    def topology_for(self, pod: Pod) -> tuple[TopologyTree, NetworkTopologySpec] | None:
        """The tree and gather rules to place the pod's group by, when it asks and they exist."""
        found = self._topology_spec(pod)
        if found is None or self.topology.unavailable() is not None:
            return None
        tree = self.topology.tree(self.handle.snapshot)
        if tree is None:
            return None
        spec = found[1]
        if isinstance(self._gather_domain(pod), GatherDomain):
            spec = spec.without_multiples()
        return tree, spec

    def _placed_members(self, gang: Gang) -> dict[str, str]:
        """pod key -> node of every member of the gang's group that holds a node: bound, binding,
        or assumed and waiting at Permit (the cache knows these before the binding is seen), and
        bound members that have finished (they ran in the domain the rest must share)."""
        cache = self.handle.cache
        placed: dict[str, str] = {}
        for g in self.registry.group(gang):
            if g is None:
                continue
            for key in g.children:
                state = cache.pod_state(key)
                if state is not None:
                    placed[key] = state.node_name
                    continue
                member = self.registry.pods.get(key)
                if member is not None and member.node_name:
                    placed[key] = member.node_name
        return placed

    def _gather_domain(self, pod: Pod) -> GatherDomain | str | None:
        """Where the pod must go because members of its group are placed already: the MustGather
        domain holding them; a message when that domain cannot be told (or, for a once-satisfied
        group, when no member is placed to tell it); None when nothing confines the pod (no
        MustGather rule, no placed member yet, or no usable topology, where the group itself is
        placed without one)."""
        gang = self.registry.gang(pod)
        if gang is None or not gang.initialized:
            return None
        found = self._topology_spec(pod)
        if found is None or self.topology.unavailable() is not None:
            return None
        snap = self.handle.snapshot
        tree = self.topology.tree(snap)
        if tree is None:
            return None
        layer = found[1].must_gather_layer(tree.chain)
        if layer is None:
            return None
        satisfied = self.registry.once_satisfied(gang)
        # PreFilter asks once per member of a pass: a group's placed members are looked up once
        # for as long as neither the cache nor the gangs change
        key = (gang.group_id, layer, id(tree), snap.generation, self.registry.version, satisfied)
        if self._domain_memo is not None and self._domain_memo[0] == key:
            return self._domain_memo[1]
        domain = placed_domain(tree, layer, self._placed_members(gang))
        if domain is None and satisfied:
            domain = (
                f"no member is placed to tell which {layer} domain the rest of the once-satisfied group "
                "must join"
            )
        if isinstance(domain, str):
            domain = (
                f"gang group [{gang.group_id}] must gather in one {layer} domain (MustGather), but {domain}"
            )
        self._domain_memo = (key, domain)
        return domain

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        gang = self.registry.gang(pod)
        # a scheduler-plugins PodGroup the cluster cannot hold waits (minresources.py);
        # unresolvable, as there, so that nothing is evicted for it
        short = self.min_resources.refusal(gang, self.handle.cache) if gang is not None else None
        if short is not None:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (short,), NAME)
        node = self._planned.get(pod.key)
        if node is not None:
            return PreFilterResult(frozenset((node,))), None
        # not part of a planned pass: a member placed after its group stays in the group's domain
        domain = self._gather_domain(pod)
        if domain is None:
            return None, SKIP
        if isinstance(domain, str):
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"pod {pod.key}: {domain}",), NAME)
        return PreFilterResult(domain.nodes), None

    def plan_batch(self, pod: Pod, members: list[Pod]) -> tuple[str, Diagnosis] | None:
        """Plan where every member goes when the group asks for topology-aware placement: the
        members' PreFilter then allows only their planned node. Returns why the group fits no
        domain (and the first member's diagnosis), or None (planned, or nothing to plan)."""
        self._planned.clear()
        self._explanation = None
        if not members:
            return None
        gang = self.registry.gang(pod)
        conflict = self._group_topology(gang) if gang is not None else None
        if isinstance(conflict, str):
            return conflict, _refusal(conflict)
        found = self._topology_spec(pod)
        if found is None:
            return None
        gang, spec = found
        why = self.topology.unavailable()
        if why is not None:
            self._tell_fallback(gang, members, why)
            return None
        self._fallback_told.pop(gang.group_id, None)
        snap = self.handle.snapshot
        tree = self.topology.tree(snap)
        assert tree is not None
        domain = self._gather_domain(pod)
        if isinstance(domain, str):
            return domain, _refusal(domain)
        if domain is not None:
            spec = spec.without_multiples()
        # members nominated by job-level preemption go where it made room for them while that still
        # holds, as a pod tries its nominated node first
        kept = nominated_plan(self.handle, members, tree, spec, self.same_job(pod))
        if kept is not None:
            self._planned.update(kept)
            return None
        profile = self.handle.profile
        # with members placed already, the members' PreFilter confines the offers to their domain
        offers = offer_slots(profile, members, snap.live_rows(), self.same_job(pod))
        plan = plan_with_offers(profile, tree, spec, members, offers)
        if isinstance(plan, Placement):
            self._planned.update(plan.nodes)
            return None
        message = plan.message
        if domain is not None:
            message = (
                f"members of the group already placed are in {domain.label}, where MustGather {domain.layer} "
                f"keeps the rest of the group: {message}"
            )
        if offers.diagnosis.pre_filter_msg or offers.diagnosis.reason_histogram():
            # some nodes cannot take even the first member: say why, as kube-scheduler would
            message += f"; {fit_error_message(snap.node_count, offers.diagnosis)}"
        self._explanation = explain_no_domain(self, pod, members, tree, spec, offers) or ""
        return message, offers.diagnosis

    def _tell_fallback(self, gang: Gang, members: list[Pod], why: str) -> None:
        """The group asked for topology-aware placement that cannot be done: it is placed without,
        and says so once (an event on each member) until the topology is back."""
        if self._fallback_told.get(gang.group_id) == why:
            return
        self._fallback_told[gang.group_id] = why
        message = (
            f"gang {gang.id} asks for network-topology-aware placement, but {why}; placed without topology"
        )
        for member in members:
            self.handle.emit(RecordEvent(member, "Warning", REASON_TOPOLOGY_UNAVAILABLE, message))

    def same_job(self, pod: Pod) -> Callable[[Pod], bool]:
        """Whether another pod belongs to the pod's gang group: its nominations are the group's own
        room, not room held against it."""
        gang = self.registry.gang(pod)
        group = frozenset(gang.group) if gang is not None else frozenset()

        def ignore(other: Pod) -> bool:
            other_gang = self.registry.gang(other)
            return other_gang is not None and other_gang.id in group

        return ignore

    # ----------------------------------------------------------------------------- PostFilter
    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult:
        """Job-level preemption for a gang group (see preemption.py); plain pods are left to
        DefaultPreemption. A gang member never preempts on its own: evicting for one member of
        a group that cannot be placed as a whole frees room nobody can use."""
        gang = self.registry.gang(pod)
        if gang is None or not gang.initialized or self.registry.once_satisfied(gang):
            return PostFilterResult(None, Status(Code.UNSCHEDULABLE))
        if not self.cargs.enable_preemption:
            return PostFilterResult(None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        result = self.preemption.preempt(pod, gang, diagnosis)
        if result.status.is_success:
            return result
        # stop the chain: pod-level preemption for one member would break all-or-nothing
        stop = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, result.status.reasons, NAME)
        return PostFilterResult(result.nominated_node, stop)

    # ----------------------------------------------------------------------------- the pass
    def batch_members(self, pod: Pod) -> list[Pod] | None:
        """Every pending member of the pod's gang group, in placement order (the pod included);
        None when the pod is to be scheduled on its own."""
        gang = self.registry.gang(pod)
        if gang is None or not gang.initialized or self.registry.once_satisfied(gang):
            return None
        members: list[Pod] = []
        for other in self.registry.group(gang):
            if other is None:
                continue
            # a member its scheduling gates hold is not placed, nor told the group's verdict
            pending = [
                self.registry.pods[k]
                for k in other.children
                if k not in other.bound
                and k not in other.waiting
                and k in self.registry.pods
                and not self.registry.pods[k].scheduling_gates
            ]
            members.extend(pending)
        # one order for the whole group: the ranks of a job often span its gangs (launcher, workers)
        members.sort(key=member_order_key)
        return members

    def stops_on_failure(self, pod: Pod) -> bool:
        """A Strict gang is rolled back at its first failure, so the rest of the pass is moot."""
        gang = self.registry.gang(pod)
        return (
            gang is not None
            and gang.spec is not None
            and gang.source != FROM_X_K8S
            and gang.spec.mode != NON_STRICT
        )

    def valid_for_permit(self, gang: Gang) -> bool:
        if not gang.initialized or gang.spec is None:
            return False
        policy = gang.spec.match_policy
        if policy == ONLY_WAITING:
            return len(gang.waiting) >= gang.spec.min_member
        if policy == WAITING_AND_RUNNING:
            return len(gang.waiting) + len(gang.bound) >= gang.spec.min_member
        return len(gang.waiting) >= gang.spec.min_member or gang.group_id in self.registry.satisfied

    def _group_valid(self, gang: Gang) -> bool:
        return all(g is not None and self.valid_for_permit(g) for g in self.registry.group(gang))

    def wait_seconds(self, gang: Gang) -> float:
        if gang.spec is not None and gang.spec.wait_seconds:
            return gang.spec.wait_seconds
        if gang.source == FROM_X_K8S:
            return float(self.cargs.permit_waiting_time_seconds or 60)
        return self.cargs.timeout_seconds

    def _waiting_keys(self, gang: Gang) -> list[str]:
        keys: list[str] = []
        for g in self.registry.group(gang):
            if g is not None:
                keys.extend(sorted(g.waiting))
        return keys

    def batch_end(self, pod: Pod, result: BatchResult, num_nodes: int) -> str | None:
        """Release, keep or roll back the group after a pass; returns the message every pending
        member carries, or None when nothing is pending any more."""
        self._planned.clear()
        gang = self.registry.gang(pod)
        if gang is None:
            return None
        group = self.registry.group(gang)
        if self._group_valid(gang) or self.registry.once_satisfied(gang):
            # placed as a whole; members beyond the minimum that did not fit keep their own reason
            self._allow_group(gang)
            self.registry.messages.pop(gang.group_id, None)
            return None
        message = self._failure_message(gang, result)
        now = self.handle.clock.now()
        keep_waiting = False
        if gang.source == FROM_X_K8S and gang.spec is not None:
            assigned = len(gang.waiting) + len(gang.bound)
            gap = (gang.spec.min_member - assigned) / max(gang.spec.min_member, 1)
            keep_waiting = (
                assigned >= gang.spec.min_member or gap <= self.cargs.pod_group_reject_percentage / 100
            )
        elif gang.spec is not None and (gang.spec.mode == NON_STRICT or not result.failed):
            # NonStrict keeps what it placed; so does a Strict gang when nothing failed and it is
            # only short of members that are not here yet: they join through Permit until timeout
            keep_waiting = True
        if result.failed:
            # the reference systems' words first, then what would make the group fit
            explanation = self._explanation
            if explanation is None:
                explanation = explain_failed_pass(self, pod, gang, keep_waiting)
            if explanation:
                message = f"{message.rstrip('.')}. {explanation}"
        self._explanation = None
        if keep_waiting and (v3 := log.v(3)):
            v3.info("Gang waiting for more members", gang=gang.id, gangGroup=gang.group_id, err=message)
        if not self._group_valid(gang) and not keep_waiting:
            if v2 := log.v(2):
                v2.info("Gang rejected", gang=gang.id, gangGroup=gang.group_id, err=message)
            self.observe("rejected:Unschedulable", 1.0)
            self.reject_group(gang, message)
            for g in group:
                if g is None:
                    continue
                g.last_failure = now
                if (
                    self.cargs.pod_group_backoff_seconds > 0
                    and g.spec
                    and len(g.children) >= g.spec.min_member
                ):
                    self.registry.back_off(g, now + self.cargs.pod_group_backoff_seconds)
        self.registry.messages[gang.group_id] = message
        return message

    def group_failure(self, pod: Pod, why: str) -> str | None:
        """The group's message when one of its waiting members was rejected (a permit timeout)."""
        gang = self.registry.gang(pod)
        if gang is None or self.registry.once_satisfied(gang):
            return None
        head = f"gang {gang.id}" if len(gang.group) == 1 else f"gang group [{gang.group_id}]"
        message = f"{head} cannot be placed as a whole: member {pod.key} {why}"
        if "timeout" in why:
            if v2 := log.v(2):
                v2.info(
                    "Gang timed out at Permit", gang=gang.id, gangGroup=gang.group_id, pod=pod.key, err=why
                )
            self.observe("rejected:Timeout", 1.0)
        self.registry.messages[gang.group_id] = message
        return message

    def _failure_message(self, gang: Gang, result: BatchResult) -> str:
        parts = []
        for g in self.registry.group(gang):
            if g is None or g.spec is None:
                continue
            placed = len(g.waiting) + (len(g.bound) if g.spec.match_policy != ONLY_WAITING else 0)
            parts.append(f"{g.id} {placed} of minMember {g.spec.min_member}")
        head = f"gang {gang.id}" if len(gang.group) == 1 else f"gang group [{gang.group_id}]"
        first_failure = next(iter(result.failed.items()), None)
        why = f"; pod {first_failure[0]} does not fit: {first_failure[1]}" if first_failure else ""
        return f"{head} cannot be placed as a whole: {', '.join(parts)} members could be placed{why}"

    def observe(self, event: str, value: float) -> None:
        self.handle.observer.gang_event(event, value)

    def _allow_group(self, gang: Gang) -> None:
        waiting = self.handle.waiting_pods
        keys = self._waiting_keys(gang)
        released_before = self._binding_members.get(gang.group_id) == frozenset(keys)
        if keys and not released_before and gang.group_id not in self.registry.satisfied:
            seen = [
                g.first_seen for g in self.registry.group(gang) if g is not None and g.first_seen is not None
            ]
            first = min(seen, default=None)
            if first is not None:
                self.observe("bound", self.handle.clock.now() - first)
        if keys and not released_before and (v2 := log.v(2)):
            v2.info(
                "Gang placed; members released to bind",
                gang=gang.id,
                gangGroup=gang.group_id,
                members=len(keys),
            )
        self._binding_members[gang.group_id] = frozenset(keys)
        for key in keys:
            wp = waiting.get(key)
            if wp is not None:
                wp.allow(NAME)

    def reject_group(self, gang: Gang, message: str) -> None:
        waiting = self.handle.waiting_pods
        for key in self._waiting_keys(gang):
            wp = waiting.get(key)
            if wp is not None:
                wp.reject(NAME, message)

    # ----------------------------------------------------------------------------- PreScore/Score
    def pre_score(self, state: CycleState, pod: Pod, rows: Rows) -> Status | None:
        """Pods with a network-topology selector are drawn to the domains of their peers
        (selector_score.py); every other pod is left to the other plugins."""
        positions = self._selector_positions(pod, rows)
        if positions is None:
            return SKIP
        state.write(PRE_SCORE_STATE, (rows, positions))
        return None

    def score(self, state: CycleState, pod: Pod, rows: Rows) -> Scores:
        stored = state.read(PRE_SCORE_STATE)
        if stored is not None and (stored[0] is rows or np.array_equal(stored[0], rows)):
            positions: Scores = stored[1]
            return positions
        # a configuration that enables Score without PreScore
        found = self._selector_positions(pod, rows)
        return found if found is not None else np.zeros(rows.size, dtype=np.int64)

    def normalize_score(self, state: CycleState, pod: Pod, rows: Rows, scores: Scores) -> Scores:
        if not topology_selector(pod):
            return scores
        return normalize_positions(scores)

    def _selector_positions(self, pod: Pod, rows: Rows) -> Scores | None:
        selector = topology_selector(pod)
        if not selector or self.topology.unavailable() is not None:
            return None
        snap = self.handle.snapshot
        tree = self.topology.tree(snap)
        if tree is None:
            return None
        memo = self._tree_columns
        if memo is None or memo[0] is not tree or memo[1] != snap.capacity:
            memo = (tree, snap.capacity, tree_columns(tree, snap))
            self._tree_columns = memo
        peers = peer_rows(self.selectors, selector, self.handle.cache)
        return preference_positions(memo[2], rows, peers)

    # ----------------------------------------------------------------------------- Reserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        gang = self.registry.gang(pod)
        if gang is None:
            return
        gang.waiting.discard(pod.key)
        # as scheduler-plugins' Unreserve: the group's minResources are checked again
        self.min_resources.forget(gang.id)
        if self.registry.once_satisfied(gang) or gang.spec is None:
            return
        if gang.source == FROM_X_K8S or gang.spec.mode != NON_STRICT:
            message = (
                self.registry.messages.get(gang.group_id)
                or f"gang {gang.id} gets rejected because {pod.key} was unreserved"
            )
            self.reject_group(gang, message)

    # ----------------------------------------------------------------------------- Permit
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        gang = self.registry.gang(pod)
        if gang is None:
            return None, 0.0
        if self.registry.once_satisfied(gang):
            return None, 0.0
        gang.waiting.add(pod.key)
        if self._group_valid(gang):
            self._allow_group(gang)
            return None, 0.0
        return Status(
            Code.WAIT, (f"waiting for gang {gang.id} to reach its minimum",), NAME
        ), self.wait_seconds(gang)

    # ----------------------------------------------------------------------------- binding
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """The members released together carry their group's id and size in the binding."""
        gang = self.registry.gang(pod)
        if gang is None:
            return None
        members = self._binding_members.get(gang.group_id, frozenset())
        if len(members) > 1 and pod.key in members:
            count = str(len(members))
            state.binding_annotations.extend(
                (
                    (BIND_GANG_GROUP_ID, gang.group_id),
                    (BIND_GANG_MEMBER_COUNT, count),
                    (BIND_GANG_GROUP_ID_DEPRECATED, gang.group_id),
                    (BIND_GANG_MEMBER_COUNT_DEPRECATED, count),
                )
            )
        return None

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        gang = self.registry.gang(pod)
        if gang is None:
            return
        gang.waiting.discard(pod.key)
        gang.bound.add(pod.key)
        self.registry.satisfied.add(gang.group_id)
        # once satisfied, the members still gated may go
        self.registry.touch(gang.id)
