"""What Filter and Score share: constraints resolved for a pod, the pods a constraint counts,
node masks by label, and the node-side data kept between cycles.

Everything that depends only on node objects and the pod's node-side spec (which rows are eligible
for a constraint, each row's domain) is computed once per template and node generation and kept in
a plan; a cycle then only aggregates the incrementally maintained per-row pod counts per domain.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from koordpy.api import names
from koordpy.api.affinity import HONOR, TopologySpreadConstraint
from koordpy.api.labels import LabelSelector, selector_from_match_labels
from koordpy.api.nodeselector import IN as NODE_SELECTOR_IN
from koordpy.api.nodeselector import NodeSelector, NodeSelectorRequirement
from koordpy.api.pod import Pod
from koordpy.api.taints import NO_EXECUTE, NO_SCHEDULE, Toleration, find_untolerated_taint
from koordpy.cache.snapshot import PodMatcher

NAME = names.POD_TOPOLOGY_SPREAD

# taint effects a DoNotSchedule-style check honors (kube's DoNotScheduleTaintsFilterFunc)
_DO_NOT_SCHEDULE_EFFECTS = frozenset((NO_SCHEDULE, NO_EXECUTE))


# --------------------------------------------------------------------------------------------- counting
@dataclass(frozen=True, slots=True)
class SpreadPodMatcher(PodMatcher):
    """Pods a spread constraint counts: like PodMatcher, but terminating pods are left out, as
    kube-scheduler leaves them out of every spread count. A distinct class, so its per-row counter
    is never shared with a plain PodMatcher's."""

    # matchers key per-cycle lookups: hash once, not on every lookup
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.selector, self.namespaces, self.namespace_selector)))

    def __hash__(self) -> int:
        return self._hash

    def matches(self, pod: Pod, ns_labels: Mapping[str, str]) -> bool:
        if pod.deletion_ts is not None:
            return False
        return PodMatcher.matches(self, pod, ns_labels)


@dataclass(frozen=True, slots=True)
class Constraint:
    """A constraint resolved for one pod."""

    max_skew: int
    topology_key: str
    # at least 1: an absent minDomains behaves as 1
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    # None: the constraint selects no pod (a nil labelSelector)
    matcher: SpreadPodMatcher | None

    def selects(self, pod: Pod) -> bool:
        return self.matcher is not None and self.matcher.selector.matches(pod.labels)

    @property
    def node_side(self) -> tuple[str, str, str]:
        return (self.topology_key, self.node_affinity_policy, self.node_taints_policy)


def _resolve(c: TopologySpreadConstraint, selector: LabelSelector | None, namespace: str) -> Constraint:
    return Constraint(
        max_skew=c.max_skew,
        topology_key=c.topology_key,
        min_domains=c.min_domains or 1,
        node_affinity_policy=c.node_affinity_policy,
        node_taints_policy=c.node_taints_policy,
        matcher=None if selector is None else SpreadPodMatcher(selector, frozenset((namespace,))),
    )


# --------------------------------------------------------------------------------------------- node masks
def _label_mask(
    snap: Any, hw: int, key: str, predicate_key: object, predicate: Callable[[str | None], bool]
) -> np.ndarray:
    """predicate(value of label `key`) for rows [0, hw); None is passed for an absent label."""
    col = snap.labels.get(key)
    if col is None:
        return np.full(hw, bool(predicate(None)), dtype=bool)
    per_code, missing = col.value_mask(predicate_key, predicate)
    codes = col.codes[:hw]
    if per_code.size == 0:
        return np.full(hw, missing, dtype=bool)
    out: np.ndarray = per_code[np.maximum(codes, 0)]
    out[codes < 0] = missing
    return out


def _name_mask(snap: Any, hw: int, req: NodeSelectorRequirement) -> np.ndarray:
    named = np.zeros(hw, dtype=bool)
    for name in req.values:
        row = snap.row_of.get(name)
        if row is not None and row < hw:
            named[row] = True
    return named if req.operator == NODE_SELECTOR_IN else ~named


def _required_affinity_mask(
    snap: Any, hw: int, node_selector: Mapping[str, str], required: NodeSelector | None
) -> np.ndarray:
    """Rows matching the pod's nodeSelector and required node affinity (GetRequiredNodeAffinity)."""
    mask = np.ones(hw, dtype=bool)
    for key, value in node_selector.items():
        mask &= _label_mask(snap, hw, key, (NAME, "nodeSelector", value), partial(operator.eq, value))
    if required is not None:
        any_term = np.zeros(hw, dtype=bool)
        for term in required.terms:
            if not term.match_expressions and not term.match_fields:
                continue  # an empty term matches no node
            term_mask = np.ones(hw, dtype=bool)
            for req in term.match_expressions:
                term_mask &= _label_mask(snap, hw, req.key, (NAME, "nodeAffinity", req), req.matches_value)
            for req in term.match_fields:
                term_mask &= _name_mask(snap, hw, req)
            any_term |= term_mask
        mask &= any_term
    return mask


def label_codes(snap: Any, key: str, hw: int) -> np.ndarray:
    """Each row's code for the value of label `key`, -1 where the label is absent."""
    col = snap.labels.get(key)
    if col is None:
        return np.full(hw, -1, dtype=np.int32)
    codes: np.ndarray = col.codes[:hw]
    return codes


class NodeView(NamedTuple):
    """What a filtering or scoring plan starts from: the rows up to the high-water mark, which of
    them are live, the pod's node-affinity and taint masks, and each constraint's label codes."""

    hw: int
    live: np.ndarray
    affinity: np.ndarray | None
    taints: np.ndarray | None
    codes: list[np.ndarray]
    # live rows that carry every constraint's topology key
    all_keys: np.ndarray


def node_view(cache: SpreadCache, snap: Any, pod: Pod, cs: tuple[Constraint, ...]) -> NodeView:
    hw = snap.high_water
    live = snap.live[:hw]
    affinity, taints = cache.policy_masks(snap, hw, pod, cs)
    codes = [label_codes(snap, c.topology_key, hw) for c in cs]
    all_keys = live.copy()
    for code in codes:
        all_keys &= code >= 0
    return NodeView(hw, live, affinity, taints, codes, all_keys)


def n_label_values(snap: Any, key: str) -> int:
    col = snap.labels.get(key)
    return 0 if col is None else len(col.values)


def row_classes(components: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group rows by their tuple of component values: (class of each row, component values of
    each class as an [n_classes, n_components] array). Per-pod work then runs over classes, and
    rows are touched once, by a single gather."""
    stacked = np.stack([np.asarray(c, dtype=np.int64) for c in components], axis=1)
    values, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), values


# the controllers whose selector kube-scheduler's default selector takes (helper.DefaultSelector):
# a pod owned by anything else (a Job, a DaemonSet, a custom workload) gets no default spreading.
# `koordpy simulate` stamps a Deployment's pods itself, owned by the Deployment, where a cluster
# has its ReplicaSet own them (and that selector is the Deployment's plus the template hash)
DEFAULT_SELECTOR_OWNERS = frozenset({"ReplicationController", "ReplicaSet", "StatefulSet", "Deployment"})


def has_default_selector(pod: Pod) -> bool:
    """Whether kube-scheduler would build a non-empty default selector for the pod, so that the
    default constraints apply to it. kube merges the selectors of the Services selecting the pod
    and of its ReplicationController, ReplicaSet or StatefulSet; koordpy sees no Services or
    workload objects, so a pod counts when one of those kinds controls it, and its labels stand
    for the controller's selector (a workload's selector must match its pods' template labels)."""
    controller = pod.controller
    return controller is not None and controller.kind in DEFAULT_SELECTOR_OWNERS and bool(pod.labels)


# --------------------------------------------------------------------------------------------- kept state
class SpreadCache:
    """What the plugin keeps between cycles: each template's resolved constraints, node-side plans
    (valid for one node generation), and the rows holding each selector's pods (valid for one
    snapshot generation)."""

    def __init__(self, handle: Any, default_constraints: tuple[TopologySpreadConstraint, ...]) -> None:
        self.handle = handle
        self.default_constraints = default_constraints
        self._resolved: dict[object, tuple[Constraint, ...]] = {}
        self._plans: dict[object, object] = {}
        self._tainted: list[int] = []
        self._generation = -1
        self._nz: dict[SpreadPodMatcher, tuple[np.ndarray, np.ndarray]] = {}
        self._nz_generation = -1

    # ----------------------------------------------------------------------------- constraints
    def constraints(self, pod: Pod, action: str) -> tuple[Constraint, ...]:
        """The pod's constraints with `whenUnsatisfiable == action`, or the default ones."""
        own = pod.spread_constraints
        if own:
            key: object = (action, own, pod.namespace)
        else:
            if not self.default_constraints or not has_default_selector(pod):
                return ()
            key = (action, pod.namespace, tuple(sorted(pod.labels.items())))
        found = self._resolved.get(key)
        if found is not None:
            return found
        if own:
            found = tuple(
                _resolve(c, c.selector, pod.namespace) for c in own if c.when_unsatisfiable == action
            )
        else:
            # the pods of the same controller are the ones carrying this pod's labels in its
            # namespace (see has_default_selector)
            selector = selector_from_match_labels(pod.labels)
            found = tuple(
                _resolve(c, selector, pod.namespace)
                for c in self.default_constraints
                if c.when_unsatisfiable == action
            )
        if len(self._resolved) > 4096:
            self._resolved.clear()
        self._resolved[key] = found
        return found

    # ----------------------------------------------------------------------------- node-side plans
    def sync_generation(self) -> Any:
        """The snapshot, with the plans dropped if a node changed since they were made."""
        snap = self.handle.snapshot
        if self._generation != snap.node_generation:
            self._plans.clear()
            self._tainted = [int(r) for r in snap.live_rows() if snap.infos[r].node.taints]
            self._generation = snap.node_generation
        return snap

    def policy_masks(
        self, snap: Any, hw: int, pod: Pod, cs: Sequence[Constraint]
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Rows the pod's node affinity admits and rows whose taints it tolerates, each computed
        only when some constraint honors it."""
        affinity = taints = None
        if any(c.node_affinity_policy == HONOR for c in cs):
            affinity = _required_affinity_mask(snap, hw, pod.node_selector, pod.required_node_affinity)
        if any(c.node_taints_policy == HONOR for c in cs):
            taints = np.ones(hw, dtype=bool)
            tolerations: tuple[Toleration, ...] = pod.tolerations
            for row in self._tainted:
                node = snap.infos[row].node
                if find_untolerated_taint(node.taints, tolerations, _DO_NOT_SCHEDULE_EFFECTS) is not None:
                    taints[row] = False
        return affinity, taints

    @staticmethod
    def plan_key(kind: str, pod: Pod, cs: Sequence[Constraint]) -> object:
        """What a plan depends on: the constraints' node side and the pod's node-side spec where
        a constraint honors it."""
        honor_affinity = any(c.node_affinity_policy == HONOR for c in cs)
        honor_taints = any(c.node_taints_policy == HONOR for c in cs)
        return (
            kind,
            tuple(c.node_side for c in cs),
            tuple(sorted(pod.node_selector.items())) if honor_affinity else None,
            pod.required_node_affinity if honor_affinity else None,
            pod.tolerations if honor_taints else None,
        )

    def plan(self, key: object) -> object:
        """The plan kept under `key` for the current node generation (call sync_generation first),
        or None."""
        return self._plans.get(key)

    def remember(self, key: object, plan: object) -> None:
        if len(self._plans) > 1024:
            self._plans.clear()
        self._plans[key] = plan

    # ----------------------------------------------------------------------------- row access
    def nonzero(self, matcher: SpreadPodMatcher) -> tuple[np.ndarray, np.ndarray]:
        """Rows holding pods `matcher` selects, and how many (as floats); one scan per cycle."""
        snap = self.handle.snapshot
        if self._nz_generation != snap.generation:
            self._nz.clear()
            self._nz_generation = snap.generation
        hit = self._nz.get(matcher)
        if hit is None:
            per_row = snap.pod_count_by_row(matcher)[: snap.high_water]
            rows = (per_row != 0).nonzero()[0]
            hit = (rows, per_row.take(rows).astype(np.float64))
            self._nz[matcher] = hit
        return hit

    def row_classes_of(self, classes: np.ndarray, hw: int, rows: np.ndarray) -> tuple[np.ndarray, bool]:
        """Classes of `rows`, and whether `rows` is every row in order (a view, no gather)."""
        snap = self.handle.snapshot
        if rows.size == hw and rows is snap.live_rows():
            return classes[:hw], True
        return classes.take(rows), False
