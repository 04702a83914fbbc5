"""ElasticQuota in both API groups, and the quota a pod joins.

- `scheduling.sigs.k8s.io/v1alpha1` (Koordinator's): quotas form a tree through labels under
  `quota.scheduling.koordinator.sh/`; a quota's name is unique in the whole cluster; pods join by
  label, else by namespace, else the default quota.
- `scheduling.x-k8s.io/v1alpha1` (scheduler-plugins' CapacityScheduling): one quota per namespace,
  `spec.min` and `spec.max` only; a pod joins the quota of its namespace, if there is one.

A malformed object still gets a view, with `spec_error` naming the field, so that it can be
reported while every other quota keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    ResourceList,
    canonical_amount,
    format_amount,
    parse_resource_list,
    sorted_names,
)
from koordpy.api.time import parse_timestamp

KOORDINATOR_GROUP = "scheduling.sigs.k8s.io"
X_K8S_GROUP = "scheduling.x-k8s.io"
ELASTIC_QUOTA_KIND = "ElasticQuota"

# Koordinator's built-in quotas: the root stands for the whole cluster, the system and default quotas
# sit beside the tree (their runtime is their max) and take system pods and pods of no quota.
ROOT_QUOTA = "koordinator-root-quota"
SYSTEM_QUOTA = "koordinator-system-quota"
DEFAULT_QUOTA = "koordinator-default-quota"
RESERVED_QUOTAS = frozenset({ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA})

_PREFIX = "quota.scheduling.koordinator.sh"
LABEL_PARENT = f"{_PREFIX}/parent"
LABEL_IS_PARENT = f"{_PREFIX}/is-parent"
LABEL_ALLOW_LENT_RESOURCE = f"{_PREFIX}/allow-lent-resource"
LABEL_QUOTA_NAME = f"{_PREFIX}/name"
LABEL_TREE_ID = f"{_PREFIX}/tree-id"
LABEL_IS_ROOT = f"{_PREFIX}/is-root"
LABEL_ALLOW_FORCE_UPDATE = f"{_PREFIX}/allow-force-update"
LABEL_PREEMPTIBLE = f"{_PREFIX}/preemptible"
ANNOTATION_SHARED_WEIGHT = f"{_PREFIX}/shared-weight"
ANNOTATION_NAMESPACES = f"{_PREFIX}/namespaces"

# scheduler-plugins reads cpu, memory, ephemeral-storage and pods as fields that are always there:
# one missing from a stated spec.max is a limit of 0, while a missing extended resource is unlimited.
CORE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)

# how a pod came to its quota
BY_LABEL = "label"
BY_NAMESPACE_QUOTA = "namespace-quota"  # Koordinator: the quota named after the pod's namespace
BY_NAMESPACES_ANNOTATION = "namespaces-annotation"
BY_DEFAULT = "default"
BY_NAMESPACE = "namespace"  # scheduler-plugins: the quota of the pod's namespace


def annotation_path(key: str) -> str:
    return f"metadata.annotations[{key}]"


def label_path(key: str) -> str:
    return f"metadata.labels[{key}]"


@dataclass(frozen=True, slots=True, eq=False)
class ElasticQuota:
    api_group: str
    namespace: str
    name: str
    uid: str
    # resource lists in canonical units (cpu in millicores); `max` is None when spec.max is absent,
    # which scheduler-plugins reads as unlimited (Koordinator: no resource is managed)
    min: ResourceList
    max: ResourceList | None
    # Koordinator's tree: the parent's name (ROOT_QUOTA when the label is empty or absent, "" for the
    # root itself and for every scheduler-plugins quota)
    parent: str
    is_parent: bool
    # weight in the split of what is lent, per resource of max: the annotation, with resources it
    # omits taken from max, or max itself when the annotation is absent or all zero
    shared_weight: ResourceList
    # False keeps the quota's unused min from being lent to others
    allow_lent_resource: bool
    tree_id: str
    is_tree_root: bool
    allow_force_update: bool
    # namespaces whose pods join this quota: Koordinator's namespaces annotation, or the quota's own
    # namespace for scheduler-plugins
    namespaces: tuple[str, ...]
    creation_ts: float
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    spec_error: SpecError | None
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_koordinator(self) -> bool:
        return self.api_group == KOORDINATOR_GROUP

    def __repr__(self) -> str:
        return f"ElasticQuota({self.api_group}, {self.key})"

    @staticmethod
    def from_dict(obj: Mapping[str, Any], *, creation_ts: float | None = None) -> ElasticQuota:
        return parse_elastic_quota(obj, creation_ts=creation_ts)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _string_map(value: Any, path: str) -> tuple[dict[str, str], SpecError | None]:
    if value is None:
        return {}, None
    if not isinstance(value, Mapping):
        return {}, SpecError(path, f"expected a map of strings, got {type(value).__name__}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            return {}, SpecError(path, f"entry {k!r}: {v!r} is not a string")
        out[k] = v
    return out, None


def parse_elastic_quota(obj: Mapping[str, Any], *, creation_ts: float | None = None) -> ElasticQuota:
    """The typed view of an ElasticQuota of either API group; raises SpecError only for an object of
    another API group (a caller's mistake), never for a malformed quota."""
    api_version = str(obj.get("apiVersion") or "")
    group = api_version.split("/", 1)[0]
    if group not in (KOORDINATOR_GROUP, X_K8S_GROUP):
        raise SpecError("apiVersion", f"unknown ElasticQuota API group {group!r}")
    meta = _mapping(obj.get("metadata"))
    spec = obj.get("spec")
    namespace = meta.get("namespace")
    namespace = namespace if isinstance(namespace, str) and namespace else "default"
    name = meta.get("name")
    name = name if isinstance(name, str) else ""
    errors: list[SpecError] = []
    labels, err = _string_map(meta.get("labels"), "metadata.labels")
    if err:
        errors.append(err)
    annotations, err = _string_map(meta.get("annotations"), "metadata.annotations")
    if err:
        errors.append(err)
    if not name:
        errors.append(SpecError("metadata.name", "an ElasticQuota needs a name"))

    min_list: ResourceList = {}
    max_list: ResourceList | None = None
    if spec is not None and not isinstance(spec, Mapping):
        errors.append(SpecError("spec", f"expected an object, got {type(spec).__name__}"))
        spec = {}
    spec = _mapping(spec)
    for key in ("min", "max"):
        value = spec.get(key)
        try:
            parsed = parse_resource_list(value, f"spec.{key}") if value is not None else None
        except SpecError as e:
            errors.append(e)
            parsed = {}
        if key == "min":
            min_list = parsed or {}
        else:
            max_list = parsed

    koordinator = group == KOORDINATOR_GROUP
    if not errors:
        bound = _min_above_max(min_list, max_list, koordinator)
        if bound:
            errors.append(bound)

    shared_weight: ResourceList = {}
    namespaces: tuple[str, ...] = (namespace,)
    if koordinator:
        try:
            shared_weight = _shared_weight(annotations.get(ANNOTATION_SHARED_WEIGHT, ""), max_list or {})
        except SpecError as e:
            errors.append(e)
        try:
            namespaces = _namespaces(annotations.get(ANNOTATION_NAMESPACES, ""))
        except SpecError as e:
            errors.append(e)
            namespaces = ()
        parent = labels.get(LABEL_PARENT, "")
        if name == ROOT_QUOTA:
            parent = ""
        elif not parent:
            parent = ROOT_QUOTA
        is_parent = labels.get(LABEL_IS_PARENT) == "true" or name == ROOT_QUOTA
        allow_lent = labels.get(LABEL_ALLOW_LENT_RESOURCE) != "false"
        tree_id = labels.get(LABEL_TREE_ID, "")
        is_tree_root = labels.get(LABEL_IS_ROOT) == "true"
        allow_force_update = labels.get(LABEL_ALLOW_FORCE_UPDATE) == "true"
    else:
        parent, is_parent, allow_lent, tree_id = "", False, True, ""
        is_tree_root = allow_force_update = False

    ts = creation_ts if creation_ts is not None else parse_timestamp(meta.get("creationTimestamp"))
    uid = meta.get("uid")
    return ElasticQuota(
        api_group=group,
        namespace=namespace,
        name=name,
        uid=uid if isinstance(uid, str) and uid else f"{group}/{namespace}/{name}",
        min=min_list,
        max=max_list,
        parent=parent,
        is_parent=is_parent,
        shared_weight=shared_weight,
        allow_lent_resource=allow_lent,
        tree_id=tree_id,
        is_tree_root=is_tree_root,
        allow_force_update=allow_force_update,
        namespaces=namespaces,
        creation_ts=ts or 0.0,
        labels=labels,
        annotations=annotations,
        spec_error=errors[0] if errors else None,
        raw=obj,
    )


def _min_above_max(
    min_list: ResourceList, max_list: ResourceList | None, koordinator: bool
) -> SpecError | None:
    """Koordinator's webhook: every resource of min is in max and no larger. scheduler-plugins
    states min <= max; a stated max without cpu, memory, ephemeral-storage or pods limits it to 0
    there, so a min on it is above max too."""
    for name in sorted_names(min_list):
        low = min_list[name]
        path = f"spec.min.{name}"
        if koordinator and (max_list is None or name not in max_list):
            return SpecError(path, f"{name} is in spec.min but not in spec.max")
        if max_list is None:
            continue
        if name not in max_list:
            if name in CORE_RESOURCES and low > 0:
                return SpecError(
                    path,
                    f"min {format_amount(name, low)} is above max 0: spec.max lists no {name}, "
                    "which limits it to 0",
                )
            continue
        high = max_list[name]
        if low > high:
            return SpecError(path, f"min {format_amount(name, low)} is above max {format_amount(name, high)}")
    return None


def _shared_weight(text: str, max_list: ResourceList) -> ResourceList:
    """Koordinator's shared weight as the scheduler sees it after the webhook has filled it in: a JSON
    resource list; resources of max it omits weigh as much as their max, resources outside max are
    dropped, and an absent or all-zero weight is max."""
    path = annotation_path(ANNOTATION_SHARED_WEIGHT)
    if not text:
        return dict(max_list)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise SpecError(path, f"not a JSON map of resource name to quantity: {e}") from None
    if not isinstance(value, Mapping):
        raise SpecError(path, f"expected a JSON map of resource name to quantity, got {type(value).__name__}")
    given: ResourceList = {}
    for res, amount in value.items():
        given[res] = canonical_amount(res, amount, f"{path}.{res}")
    weight = {res: given.get(res, high) for res, high in max_list.items()}
    return weight if any(weight.values()) else dict(max_list)


def _namespaces(text: str) -> tuple[str, ...]:
    path = annotation_path(ANNOTATION_NAMESPACES)
    if not text:
        return ()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise SpecError(path, f"not a JSON list of namespaces: {e}") from None
    if not isinstance(value, list) or not all(isinstance(ns, str) and ns for ns in value):
        raise SpecError(path, "expected a JSON list of namespace names")
    return tuple(dict.fromkeys(value))


def claim_order(quota: ElasticQuota) -> tuple[float, str, str]:
    """Who came first when two quotas want the same name or namespace: the webhook admits the
    first and refuses the later, so the older object wins; ties by namespace, then name."""
    return (quota.creation_ts, quota.namespace, quota.name)


@dataclass(frozen=True, slots=True)
class ShadowedQuota:
    """A quota that lost its name (Koordinator) or its namespace (scheduler-plugins, or a claim in
    Koordinator's namespaces annotation) to an older quota."""

    key: str
    reason: str
    message: str


DUPLICATE_QUOTA = "DuplicateQuota"
NAMESPACE_CLAIMED = "NamespaceClaimed"


@dataclass(frozen=True, slots=True)
class QuotaIndex:
    """What `quota_of_pod` needs to know of the quotas of one API group, built once per change."""

    api_group: str
    # Koordinator: the quota holding each name (the oldest of any that share it)
    by_name: Mapping[str, ElasticQuota]
    # Koordinator: namespace -> name of the quota whose namespaces annotation claims it first
    namespace_claims: Mapping[str, str]
    # scheduler-plugins: namespace -> its quota (the oldest, when there are several)
    by_namespace: Mapping[str, ElasticQuota]
    shadowed: tuple[ShadowedQuota, ...]

    @staticmethod
    def build(quotas: Iterable[ElasticQuota], api_group: str) -> QuotaIndex:
        ordered = sorted((q for q in quotas if q.api_group == api_group), key=claim_order)
        shadowed: list[ShadowedQuota] = []
        by_name: dict[str, ElasticQuota] = {}
        claims: dict[str, str] = {}
        by_namespace: dict[str, ElasticQuota] = {}
        if api_group == KOORDINATOR_GROUP:
            for q in ordered:
                holder = by_name.get(q.name)
                if holder is not None:
                    shadowed.append(
                        ShadowedQuota(
                            q.key,
                            DUPLICATE_QUOTA,
                            f"quota name {q.name} is already taken by ElasticQuota {holder.key}; "
                            "Koordinator's quota names are unique in the cluster",
                        )
                    )
                    continue
                by_name[q.name] = q
            for q in ordered:
                if by_name.get(q.name) is not q or q.name in RESERVED_QUOTAS:
                    continue
                taken = [(ns, claims[ns]) for ns in q.namespaces if ns in claims]
                if taken:
                    ns, other = taken[0]
                    shadowed.append(
                        ShadowedQuota(
                            q.key, NAMESPACE_CLAIMED, f"namespace {ns} is already claimed by quota {other}"
                        )
                    )
                    continue
                for ns in q.namespaces:
                    claims[ns] = q.name
        else:
            for q in ordered:
                holder = by_namespace.get(q.namespace)
                if holder is not None:
                    shadowed.append(
                        ShadowedQuota(
                            q.key,
                            DUPLICATE_QUOTA,
                            f"namespace {q.namespace} already has ElasticQuota {holder.name}; "
                            "scheduler-plugins takes one quota per namespace",
                        )
                    )
                    continue
                by_namespace[q.namespace] = q
        return QuotaIndex(api_group, by_name, claims, by_namespace, tuple(shadowed))


@dataclass(frozen=True, slots=True)
class PodQuota:
    """The quota a pod joins: its name, how the pod came to it, and whether a quota of that name
    exists (False only for a label naming a quota that is not there)."""

    name: str
    source: str
    exists: bool = True


def quota_of_pod(pod: Pod, index: QuotaIndex) -> PodQuota | None:
    """The quota a pod joins under the rules of the index's API group.

    Koordinator (GetQuotaName): the `quota.scheduling.koordinator.sh/name` label; else a quota named
    after the pod's namespace, in that namespace; else the quota whose namespaces annotation lists
    the namespace; else `koordinator-default-quota`. A label naming a quota that does not exist comes
    back with `exists=False`: Koordinator would quietly count the pod in the default quota, koordpy
    holds it and says why.

    scheduler-plugins (CapacityScheduling): the quota of the pod's namespace; None when it has none,
    and the pod is then not subject to any quota.
    """
    namespace = pod.namespace
    if index.api_group != KOORDINATOR_GROUP:
        quota = index.by_namespace.get(namespace)
        return PodQuota(quota.name, BY_NAMESPACE) if quota is not None else None
    label = pod.labels.get(LABEL_QUOTA_NAME, "")
    if label:
        return PodQuota(label, BY_LABEL, label in index.by_name or label in RESERVED_QUOTAS)
    own = index.by_name.get(namespace)
    if own is not None and own.namespace == namespace:
        return PodQuota(namespace, BY_NAMESPACE_QUOTA)
    claimant = index.namespace_claims.get(namespace)
    if claimant:
        return PodQuota(claimant, BY_NAMESPACES_ANNOTATION)
    return PodQuota(DEFAULT_QUOTA, BY_DEFAULT)


def is_non_preemptible(pod: Pod) -> bool:
    """Koordinator: a pod labelled `quota.scheduling.koordinator.sh/preemptible: "false"` must fit
    within its quota's min, and is never a victim."""
    return pod.labels.get(LABEL_PREEMPTIBLE) == "false"
