"""Pod affinity terms and topology spread constraints, resolved for the pod that declares them.

Resolution happens once per pod: `matchLabelKeys` / `mismatchLabelKeys` are folded into the
selector with the declaring pod's own label values, and the namespace scope is made explicit, so
that matching an existing pod is a plain selector test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.labels import LabelSelector, Requirement

INT32_MAX = 2**31 - 1
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A PodAffinityTerm of some pod, with its namespace scope resolved.

    `selector` None means the term selects no pod (a nil labelSelector in the API).
    `namespace_selector` None with empty `namespaces` never happens after resolution: the
    owner's namespace is put into `namespaces` instead, as kube-scheduler does.
    """

    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str]) -> bool:
        if self.selector is None:
            return False
        if namespace not in self.namespaces and (
            self.namespace_selector is None or not self.namespace_selector.matches(ns_labels)
        ):
            return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    weight: int
    term: AffinityTerm


def _with_label_keys(
    selector: LabelSelector | None,
    match_keys: Sequence[str],
    mismatch_keys: Sequence[str],
    own_labels: Mapping[str, str],
) -> LabelSelector | None:
    if selector is None or (not match_keys and not mismatch_keys):
        return selector
    extra: list[Requirement] = []
    for key in match_keys:
        if key in own_labels:
            extra.append(Requirement(key, "In", frozenset((own_labels[key],))))
    for key in mismatch_keys:
        if key in own_labels:
            extra.append(Requirement(key, "NotIn", frozenset((own_labels[key],))))
    if not extra:
        return selector
    reqs = tuple(
        sorted((*selector.requirements, *extra), key=lambda r: (r.key, r.operator, sorted(r.values)))
    )
    return LabelSelector(reqs)


def _str_list(obj: Any, path: str) -> list[str]:
    if obj is None:
        return []
    if not isinstance(obj, list) or not all(isinstance(v, str) for v in obj):
        raise SpecError(path, "expected a list of strings")
    return obj


def parse_affinity_term(
    obj: Mapping[str, Any], path: str, owner_namespace: str, owner_labels: Mapping[str, str], required: bool
) -> AffinityTerm:
    if not isinstance(obj, Mapping):
        raise SpecError(path, "expected a PodAffinityTerm object")
    topology_key = obj.get("topologyKey") or ""
    if not isinstance(topology_key, str) or (required and not topology_key):
        raise SpecError(f"{path}.topologyKey", "must be a non-empty label key")
    selector = LabelSelector.from_dict(obj.get("labelSelector"), f"{path}.labelSelector")
    match_keys = _str_list(obj.get("matchLabelKeys"), f"{path}.matchLabelKeys")
    mismatch_keys = _str_list(obj.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys")
    namespaces = frozenset(_str_list(obj.get("namespaces"), f"{path}.namespaces"))
    ns_selector = LabelSelector.from_dict(obj.get("namespaceSelector"), f"{path}.namespaceSelector")
    if not namespaces and ns_selector is None:
        namespaces = frozenset((owner_namespace,))
    return AffinityTerm(
        selector=_with_label_keys(selector, match_keys, mismatch_keys, owner_labels),
        namespaces=namespaces,
        namespace_selector=ns_selector,
        topology_key=topology_key,
    )


def parse_weighted_terms(
    items: Any, path: str, owner_namespace: str, owner_labels: Mapping[str, str]
) -> tuple[WeightedAffinityTerm, ...]:
    if not items:
        return ()
    if not isinstance(items, list):
        raise SpecError(path, "expected a list")
    out = []
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise SpecError(p, "expected a WeightedPodAffinityTerm object")
        weight = item.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise SpecError(f"{p}.weight", f"must be an integer in 1..100, got {weight!r}")
        term = parse_affinity_term(
            item.get("podAffinityTerm") or {}, f"{p}.podAffinityTerm", owner_namespace, owner_labels, True
        )
        out.append(WeightedAffinityTerm(weight, term))
    return tuple(out)


def parse_required_terms(
    items: Any, path: str, owner_namespace: str, owner_labels: Mapping[str, str]
) -> tuple[AffinityTerm, ...]:
    if not items:
        return ()
    if not isinstance(items, list):
        raise SpecError(path, "expected a list")
    return tuple(
        parse_affinity_term(item, f"{path}[{i}]", owner_namespace, owner_labels, True)
        for i, item in enumerate(items)
    )


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None
    min_domains: int | None
    node_affinity_policy: str
    node_taints_policy: str

    def matches(self, namespace: str, owner_namespace: str, labels: Mapping[str, str]) -> bool:
        """Spread counts only pods of the owner's namespace."""
        return namespace == owner_namespace and self.selector is not None and self.selector.matches(labels)


def parse_spread_constraints(
    items: Any, path: str, owner_labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    if not items:
        return ()
    if not isinstance(items, list):
        raise SpecError(path, "expected a list")
    out = []
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise SpecError(p, "expected a TopologySpreadConstraint object")
        max_skew = item.get("maxSkew")
        if not isinstance(max_skew, int) or isinstance(max_skew, bool) or not 1 <= max_skew <= INT32_MAX:
            raise SpecError(f"{p}.maxSkew", f"must be a 32-bit integer >= 1, got {max_skew!r}")
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise SpecError(f"{p}.topologyKey", "must be a non-empty label key")
        when = item.get("whenUnsatisfiable")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise SpecError(
                f"{p}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway, got {when!r}"
            )
        min_domains = item.get("minDomains")
        if min_domains is not None:
            if (
                not isinstance(min_domains, int)
                or isinstance(min_domains, bool)
                or not 1 <= min_domains <= INT32_MAX
            ):
                raise SpecError(f"{p}.minDomains", f"must be a 32-bit integer >= 1, got {min_domains!r}")
            if when != DO_NOT_SCHEDULE:
                raise SpecError(f"{p}.minDomains", "may only be set with whenUnsatisfiable: DoNotSchedule")
        affinity_policy = item.get("nodeAffinityPolicy") or HONOR
        taints_policy = item.get("nodeTaintsPolicy") or IGNORE
        for field, value in (("nodeAffinityPolicy", affinity_policy), ("nodeTaintsPolicy", taints_policy)):
            if value not in (HONOR, IGNORE):
                raise SpecError(f"{p}.{field}", f"must be Honor or Ignore, got {value!r}")
        selector = LabelSelector.from_dict(item.get("labelSelector"), f"{p}.labelSelector")
        match_keys = _str_list(item.get("matchLabelKeys"), f"{p}.matchLabelKeys")
        out.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=key,
                when_unsatisfiable=when,
                selector=_with_label_keys(selector, match_keys, (), owner_labels),
                min_domains=min_domains,
                node_affinity_policy=affinity_policy,
                node_taints_policy=taints_policy,
            )
        )
    return tuple(out)
