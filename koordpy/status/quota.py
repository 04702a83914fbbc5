"""ElasticQuota status as the reference controllers write it, from sums the operator keeps.

Koordinator (`scheduling.sigs.k8s.io`, its scheduler's ElasticQuotaController in
pkg/scheduler/plugins/elasticquota/controller.go updateElasticQuotaStatusIfChanged): `status.used`
and the annotations `quota.scheduling.koordinator.sh/runtime`, `.../request`, `.../child-request`,
`.../non-preemptible-request` and `.../non-preemptible-used`, each a JSON resource list, patched
onto the object (its CRD serves no status subresource) when one of them changes, compared with
zeros removed. `used` is what the quota's placed pods and those of every quota below it request;
`request` what the quota asks of its parent (raised to its min where it lends nothing);
`child-request` what its own pods and its children ask before that raise; the non-preemptible
pair the same sums over the pods labelled `preemptible: "false"`; `runtime` what it may use now:
all from the runtime quota core (`koordpy.quota.runtime`) over the same tree the scheduler builds.
Koordinator's `guaranteed` and `allocated` are kept only under its ElasticQuotaGuaranteeUsage
feature gate (off by default, and then never written); koordpy has no such mode and writes
neither.

scheduler-plugins (`scheduling.x-k8s.io`, pkg/controllers/elasticquota_controller.go):
`status.used` (status subresource) is the sum of the requests of the Running pods of the quota's
namespace, with a zero for every resource spec.min or spec.max names, compared as it is.

Neither reference reports a quota its webhook would refuse; koordpy admits any object and keeps a
quota with a problem out of scheduling (`koordpy.quota.tree`), so such a quota gets the condition
`Valid=False` with the problem's reason and message, and keeps the figures it had until it is
back. The condition goes once the problem does.

The operator's facts keep, per pod event, the sums this module reads (`QuotaSums`): for each
(namespace, quota label) pair, the requests of its pods that exist and of those placed; for each
namespace, the requests of its Running pods. A pair stands for every pod that joins the same quota
whatever the quotas are, so a change of the quotas needs no pod counted again, and one computation
costs O(pairs + quotas x resources), never O(pods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from koordpy.api.elasticquota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    KOORDINATOR_GROUP,
    LABEL_QUOTA_NAME,
    ElasticQuota,
    quota_of_pod,
)
from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.resources import ResourceList, format_amount, parse_resource_list
from koordpy.api.time import format_timestamp
from koordpy.quota.runtime import runtime_state, subtree_sums
from koordpy.quota.tree import UNLIMITED, NamespaceQuotas, QuotaProblem, QuotaTree

_PREFIX = "quota.scheduling.koordinator.sh"
ANNOTATION_RUNTIME = f"{_PREFIX}/runtime"
ANNOTATION_REQUEST = f"{_PREFIX}/request"
ANNOTATION_CHILD_REQUEST = f"{_PREFIX}/child-request"
ANNOTATION_NON_PREEMPTIBLE_REQUEST = f"{_PREFIX}/non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED = f"{_PREFIX}/non-preemptible-used"

VALID = "Valid"
# a quota whose used is above its max (the max was lowered below what its pods hold): the pods keep
# running, none of the quota is admitted until used is within max again; named as Valid is, and
# kept beside it
WITHIN_MAX = "WithinMax"
USED_EXCEEDS_MAX = "UsedExceedsMax"

# the quota a pod joins: its namespace and the quota label it carries ("" for none)
Pair = tuple[str, str]


# ================================================================================ the sums
@dataclass(slots=True)
class QuotaPod:
    """One pod as the sums count it (pods that have finished are not counted at all)."""

    pair: Pair
    requests: ResourceList
    # placed on a node (Koordinator's used)
    assigned: bool
    # in phase Running (scheduler-plugins' used)
    running: bool
    # labelled `quota.scheduling.koordinator.sh/preemptible: "false"` (Koordinator's
    # non-preemptible request and used)
    non_preemptible: bool = False


def _add(acc: dict[Any, ResourceList], key: Any, amounts: Mapping[str, int], sign: int) -> None:
    into = acc.get(key)
    if into is None:
        into = acc[key] = {}
    for name, value in amounts.items():
        into[name] = into.get(name, 0) + sign * value


@dataclass(slots=True)
class QuotaSums:
    """Request sums by (namespace, quota label) and by namespace, changed one pod at a time."""

    # every counted pod: the requests of those that exist, and of those placed
    request: dict[Pair, ResourceList] = field(default_factory=dict)
    used: dict[Pair, ResourceList] = field(default_factory=dict)
    # the same over the non-preemptible pods only
    np_request: dict[Pair, ResourceList] = field(default_factory=dict)
    np_used: dict[Pair, ResourceList] = field(default_factory=dict)
    pods: dict[Pair, int] = field(default_factory=dict)
    # the Running pods of each namespace
    running: dict[str, ResourceList] = field(default_factory=dict)
    running_pods: dict[str, int] = field(default_factory=dict)

    def count(self, pod: QuotaPod, sign: int) -> None:
        """Add (sign 1) or take away (sign -1) one pod."""
        pair = pod.pair
        _add(self.request, pair, pod.requests, sign)
        if pod.assigned:
            _add(self.used, pair, pod.requests, sign)
        if pod.non_preemptible:
            _add(self.np_request, pair, pod.requests, sign)
            if pod.assigned:
                _add(self.np_used, pair, pod.requests, sign)
        left = self.pods.get(pair, 0) + sign
        if left > 0:
            self.pods[pair] = left
        else:
            # nothing left of the pair: its sums are all zeros, and would pile up otherwise
            self.pods.pop(pair, None)
            for sums in (self.request, self.used, self.np_request, self.np_used):
                sums.pop(pair, None)
        if pod.running:
            namespace = pair[0]
            _add(self.running, namespace, pod.requests, sign)
            running = self.running_pods.get(namespace, 0) + sign
            if running > 0:
                self.running_pods[namespace] = running
            else:
                self.running_pods.pop(namespace, None)
                self.running.pop(namespace, None)


# ================================================================================ what to write
@dataclass(frozen=True, slots=True)
class QuotaStatus:
    """What one ElasticQuota's status and annotations should say. The resource lists are None for
    a quota with a problem (its figures are left as they are) and for those the group does not
    write (all but used in scheduler-plugins' group)."""

    used: ResourceList | None = None
    runtime: ResourceList | None = None
    request: ResourceList | None = None
    child_request: ResourceList | None = None
    non_preemptible_request: ResourceList | None = None
    non_preemptible_used: ResourceList | None = None
    problem: QuotaProblem | None = None
    # used above max in some resource the max names (see WITHIN_MAX)
    over_max: QuotaProblem | None = None

    def annotations(self) -> tuple[tuple[str, ResourceList | None], ...]:
        """Each annotation this status writes, with its list."""
        return (
            (ANNOTATION_RUNTIME, self.runtime),
            (ANNOTATION_REQUEST, self.request),
            (ANNOTATION_CHILD_REQUEST, self.child_request),
            (ANNOTATION_NON_PREEMPTIBLE_REQUEST, self.non_preemptible_request),
            (ANNOTATION_NON_PREEMPTIBLE_USED, self.non_preemptible_used),
        )


def _pair_pod(pair: Pair) -> Pod:
    namespace, label = pair
    labels = {LABEL_QUOTA_NAME: label} if label else {}
    return Pod.from_dict({"metadata": {"namespace": namespace, "name": "", "labels": labels}})


def _row_list(names: tuple[str, ...], values: np.ndarray, mask: np.ndarray) -> ResourceList:
    return {name: int(values[j]) for j, name in enumerate(names) if mask[j] and int(values[j]) < UNLIMITED}


def over_max(key: str, name: str, used: Mapping[str, int], limits: Mapping[str, int]) -> QuotaProblem | None:
    """The WithinMax=False problem of a quota using more than its max in a resource the max names."""
    over = [r for r in sorted(limits) if used.get(r, 0) > limits[r]]
    if not over:
        return None
    amounts = "; ".join(
        f"{r} used {format_amount(r, used.get(r, 0))} > max {format_amount(r, limits[r])}" for r in over
    )
    return QuotaProblem(
        key,
        USED_EXCEEDS_MAX,
        f"quota {name}: used is above max ({amounts}): its pods keep running, and no pod of the "
        "quota is admitted until used is within max",
    )


def koordinator_statuses(
    tree: QuotaTree, sums: QuotaSums, total: Mapping[str, int], *, scale_min: bool = True
) -> dict[str, QuotaStatus]:
    """The status of every Koordinator ElasticQuota object of `tree`, by namespace/name. `total` is
    the cluster's allocatable (what the root quota stands for); `scale_min` ElasticQuotaArgs'
    EnableMinQuotaScale (Koordinator's default, on)."""
    size, width = tree.size, len(tree.resources)
    requests = np.zeros((size, width), dtype=np.int64)
    used = np.zeros((size, width), dtype=np.int64)
    np_requests = np.zeros((size, width), dtype=np.int64)
    np_used = np.zeros((size, width), dtype=np.int64)
    for pair, amounts in sums.request.items():
        found = quota_of_pod(_pair_pod(pair), tree.index)
        # a pod its quota cannot take is held by the scheduler and counts nowhere, as in the book
        if found is None or tree.pod_problem(found) is not None:
            continue
        own = tree.rows[found.name]
        requests[own] += tree.vector(amounts)
        for by_pair, into in ((sums.used, used), (sums.np_request, np_requests), (sums.np_used, np_used)):
            found_amounts = by_pair.get(pair)
            if found_amounts:
                into[own] += tree.vector(found_amounts)
    state = runtime_state(tree, requests, tree.vector(total), used=used, scale_min=scale_min)
    used_tree = subtree_sums(tree, used)
    # Koordinator adds a non-preemptible pod's request and use to its quota and every ancestor
    np_request_tree = subtree_sums(tree, np_requests)
    np_used_tree = subtree_sums(tree, np_used)
    out: dict[str, QuotaStatus] = {}
    for quota in tree.index.by_name.values():
        problem = tree.problems.get(quota.key)
        row = tree.rows.get(quota.name)
        if problem is not None or row is None or tree.quotas[row] is not quota:
            out[quota.key] = QuotaStatus(problem=problem)
            continue
        managed = tree.max_mask[row]
        names = tree.resources
        used_list = _row_list(names, used_tree[row], managed)
        out[quota.key] = QuotaStatus(
            used=used_list,
            runtime=_row_list(names, state.runtime[row], managed),
            request=_row_list(names, state.request[row], managed),
            child_request=_row_list(names, state.child_request[row], managed),
            non_preemptible_request=_row_list(names, np_request_tree[row], managed),
            non_preemptible_used=_row_list(names, np_used_tree[row], managed),
            over_max=over_max(quota.key, quota.name, used_list, _row_list(names, tree.max[row], managed)),
        )
    for shadowed in tree.index.shadowed:
        out[shadowed.key] = QuotaStatus(problem=tree.problems.get(shadowed.key))
    return out


def namespace_statuses(quotas: NamespaceQuotas, sums: QuotaSums) -> dict[str, QuotaStatus]:
    """The status of every scheduler-plugins ElasticQuota object, by namespace/name: used is the
    Running pods' requests in every resource they ask for, with a zero for each resource the
    quota's min or max names (newZeroUsed)."""
    out: dict[str, QuotaStatus] = {}
    for quota in quotas.quotas:
        problem = quotas.problems.get(quota.key)
        if problem is not None:
            out[quota.key] = QuotaStatus(problem=problem)
            continue
        used: ResourceList = dict.fromkeys((*quota.min, *(quota.max or {})), 0)
        for name, amount in sums.running.get(quota.namespace, {}).items():
            if amount:
                used[name] = used.get(name, 0) + amount
        # compared in the resources spec.max names (CapacityScheduling's bound where it has one)
        above = over_max(quota.key, quota.key, used, quota.max or {})
        out[quota.key] = QuotaStatus(used=used, over_max=above)
    for shadowed in quotas.index.shadowed:
        out[shadowed.key] = QuotaStatus(problem=quotas.problems.get(shadowed.key))
    return out


# ================================================================================ the patch
@dataclass(frozen=True, slots=True)
class QuotaPatch:
    """The merge patches that make an object say a QuotaStatus: of `metadata.annotations` and of
    `status` (None: nothing to change), and the problems whose condition is new or changed (each is
    reported once, with the write, as a Warning event)."""

    annotations: dict[str, str] | None
    status: dict[str, Any] | None
    reported: tuple[QuotaProblem, ...] = ()

    def __bool__(self) -> bool:
        return self.annotations is not None or self.status is not None


def render(amounts: Mapping[str, int]) -> dict[str, str]:
    """A resource list as the API writes it: quantities as strings, by name (json.Marshal of a Go
    map orders its keys)."""
    return {name: format_amount(name, amounts[name]) for name in sorted(amounts)}


def _parsed(value: Any) -> ResourceList | None:
    """A stored resource list in canonical units; None when it is not one (it is then rewritten)."""
    if value is None:
        return {}
    try:
        return parse_resource_list(value, "")
    except SpecError:
        return None


def _annotation_list(text: str | None) -> ResourceList | None:
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return _parsed(value) if isinstance(value, Mapping) else None


def _nonzero(amounts: Mapping[str, int]) -> dict[str, int]:
    return {name: v for name, v in amounts.items() if v}


def _same(stored: ResourceList | None, desired: ResourceList, *, ignore_zeros: bool) -> bool:
    if stored is None:
        return False
    if ignore_zeros:
        return _nonzero(stored) == _nonzero(desired)
    return stored == desired


def _condition(
    old: Mapping[str, Any] | None,
    problem: QuotaProblem,
    generation: int | None,
    now: float,
    *,
    check_generation: bool,
) -> dict[str, Any] | None:
    """The condition (status False) that says `problem`, or None when `old` says it already."""
    if (
        old is not None
        and old.get("status") == "False"
        and old.get("reason") == problem.reason
        and old.get("message") == problem.message
        and (not check_generation or generation is None or old.get("observedGeneration") == generation)
    ):
        return None
    was_false = old is not None and old.get("status") == "False" and old.get("lastTransitionTime")
    condition: dict[str, Any] = {
        "type": old.get("type") if old is not None else None,
        "status": "False",
        "reason": problem.reason,
        "message": problem.message,
        "lastTransitionTime": old["lastTransitionTime"] if was_false and old else format_timestamp(now),
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def _conditions(
    status: Mapping[str, Any],
    wanted: Mapping[str, QuotaProblem | None],
    generation: int | None,
    now: float,
    *,
    check_generation: bool = True,
) -> tuple[list[dict[str, Any]] | None, tuple[QuotaProblem, ...]]:
    """(the conditions to write, or None when they stay as they are; the problems newly said).
    `wanted` holds, per condition type the operator owns, the problem it says (status False), or
    None where it goes; conditions of other types are kept, in their place.

    Valid=False is reported again whenever its reason or message changes; WithinMax=False when it
    comes or its reason changes (its message follows the used figures, which move with every pod).
    `check_generation` False: a condition that says the same is not rewritten for a newer
    generation, as where the CRD serves no status subresource each status write makes one."""
    raw = status.get("conditions")
    stored = [dict(c) for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []
    out: list[dict[str, Any]] = []
    changed = False
    reported: list[QuotaProblem] = []
    seen: set[str] = set()
    for cond in stored:
        kind = cond.get("type")
        if not isinstance(kind, str) or kind not in wanted:
            out.append(cond)
            continue
        if kind in seen:
            changed = True  # a second condition of a type the operator owns goes
            continue
        seen.add(kind)
        problem = wanted[kind]
        if problem is None:
            changed = True
            continue
        new = _condition(cond, problem, generation, now, check_generation=check_generation)
        if new is None:
            out.append(cond)
            continue
        changed = True
        out.append(new)
        if _newly_said(kind, cond, problem):
            reported.append(problem)
    for kind, problem in wanted.items():
        if kind in seen or problem is None:
            continue
        new = _condition(None, problem, generation, now, check_generation=check_generation)
        assert new is not None
        new["type"] = kind
        out.append(new)
        changed = True
        reported.append(problem)
    return (out if changed else None), tuple(reported)


def _newly_said(kind: str, old: Mapping[str, Any], problem: QuotaProblem) -> bool:
    if old.get("status") != "False" or not old.get("lastTransitionTime"):
        return True
    if old.get("reason") != problem.reason:
        return True
    return kind == VALID and old.get("message") != problem.message


def quota_patch(
    obj: Mapping[str, Any], desired: QuotaStatus, now: float, *, status_bumps_generation: bool = False
) -> QuotaPatch:
    """What to write so that `obj` (an ElasticQuota as last seen) says `desired`; nothing when it
    says it already. Koordinator's group compares its lists with zeros removed (quotav1.Equals of
    RemoveZeros), scheduler-plugins' as they are (apiequality.Semantic.DeepEqual).

    `status_bumps_generation`: the CRD serves no status subresource, so the apiserver raises
    `metadata.generation` with every status write; a condition's observedGeneration then never
    catches up with it, and is not a reason to write (that would write forever)."""
    api_group = str(obj.get("apiVersion") or "").split("/", 1)[0]
    koordinator = api_group == KOORDINATOR_GROUP
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    raw_status = obj.get("status")
    current = raw_status if isinstance(raw_status, Mapping) else {}
    generation = meta.get("generation")
    generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else None

    status: dict[str, Any] = {}
    if desired.used is not None and not _same(
        _parsed(current.get("used")), desired.used, ignore_zeros=koordinator
    ):
        status["used"] = render(desired.used)
    wanted = {VALID: desired.problem, WITHIN_MAX: desired.over_max}
    conditions, reported = _conditions(
        current, wanted, generation, now, check_generation=not status_bumps_generation
    )
    if conditions is not None:
        status["conditions"] = conditions or None

    annotations: dict[str, str] = {}
    stored = meta.get("annotations")
    stored = stored if isinstance(stored, Mapping) else {}
    for key, amounts in desired.annotations():
        if amounts is None:
            continue
        text = stored.get(key)
        if not _same(_annotation_list(text if isinstance(text, str) else None), amounts, ignore_zeros=True):
            annotations[key] = orjson.dumps(render(amounts)).decode()
    return QuotaPatch(annotations or None, status or None, reported)


def spec_fingerprint(obj: Mapping[str, Any]) -> bytes:
    """What of an ElasticQuota object the quota tree reads: a change elsewhere (the status and
    annotations the operator writes) leaves the tree as it is."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    read = {
        "apiVersion": obj.get("apiVersion"),
        "spec": obj.get("spec"),
        "labels": meta.get("labels"),
        "uid": meta.get("uid"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "annotations": {k: annotations.get(k) for k in (ANNOTATION_SHARED_WEIGHT, ANNOTATION_NAMESPACES)},
    }
    try:
        return orjson.dumps(read, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return repr(read).encode()


def parse_quotas(bodies: Iterable[Mapping[str, Any]]) -> list[ElasticQuota]:
    """Typed views of the objects; one of another API group (a caller's mistake) is skipped."""
    out: list[ElasticQuota] = []
    for body in bodies:
        try:
            out.append(ElasticQuota.from_dict(body))
        except SpecError:
            continue
    return out


__all__ = [
    "ANNOTATION_CHILD_REQUEST",
    "ANNOTATION_NON_PREEMPTIBLE_REQUEST",
    "ANNOTATION_NON_PREEMPTIBLE_USED",
    "ANNOTATION_REQUEST",
    "ANNOTATION_RUNTIME",
    "USED_EXCEEDS_MAX",
    "VALID",
    "WITHIN_MAX",
    "Pair",
    "QuotaPatch",
    "QuotaPod",
    "QuotaStatus",
    "QuotaSums",
    "koordinator_statuses",
    "namespace_statuses",
    "over_max",
    "parse_quotas",
    "quota_patch",
    "render",
    "spec_fingerprint",
]
