"""The quotas of one system, validated and laid out as arrays (quota x resource).

Koordinator (`QuotaTree`): a tree under `koordinator-root-quota`, the cluster. A quota names its
parent by label; `koordinator-system-quota` and `koordinator-default-quota` sit beside the tree.
The tree admits what Koordinator's validating webhook admits (pkg/webhook/elasticquota:
quota_topology.go, quota_topology_check.go), in the order the objects were created:

- the object's own spec is valid (min and max not negative, every resource of min in max and no
  larger, a shared weight that parses and is not negative; see `koordpy.api.elasticquota`);
- its name is not taken by an older quota, and no namespace it claims is claimed by an older one;
- its parent exists and is a parent quota (`is-parent: "true"`), and following parents reaches the
  root (no cycle);
- below a non-root parent: the same tree id as the parent, the same resources in max, resources in
  min among the parent's, and the mins of the parent's children summed (older siblings first) no
  larger than the parent's min, unless the child carries `allow-force-update` or `is-root`.

A quota that fails stays out of scheduling with a problem naming what is wrong, and so does every
quota below it; every other quota is computed as if it were not there.

scheduler-plugins (`NamespaceQuotas`): one quota per namespace (the oldest, when there are more), no
tree; bounds as CapacityScheduling reads them (pkg/capacityscheduling/elasticquota.go).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.api.elasticquota import (
    CORE_RESOURCES,
    DEFAULT_QUOTA,
    KOORDINATOR_GROUP,
    RESERVED_QUOTAS,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    X_K8S_GROUP,
    ElasticQuota,
    PodQuota,
    QuotaIndex,
    claim_order,
)
from koordpy.api.resources import CPU, MEMORY, ResourceList, format_amount, sorted_names

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# A limit nothing reaches: above every amount (MAX_AMOUNT, 2^53) and every sum of them the core makes.
UNLIMITED = 1 << 62

ROOT_ROW, SYSTEM_ROW, DEFAULT_ROW = 0, 1, 2
NO_PARENT = -1

# The max Koordinator gives the system and default quotas unless configured (ElasticQuotaArgs'
# SystemQuotaGroupMax and DefaultQuotaGroupMax: MaxInt64/5 of cpu and memory, i.e. unlimited).
BUILTIN_QUOTA_MAX: ResourceList = {CPU: UNLIMITED, MEMORY: UNLIMITED}

# why a quota or a pod stays out of scheduling
INVALID_SPEC = "InvalidSpec"
UNKNOWN_PARENT = "UnknownParentQuota"
PARENT_NOT_PARENT = "ParentIsNotParentQuota"
QUOTA_CYCLE = "QuotaCycle"
TREE_ID_MISMATCH = "QuotaTreeIDMismatch"
RESOURCE_KEYS_MISMATCH = "QuotaResourcesMismatch"
MIN_EXCEEDS_PARENT = "MinExceedsParentMin"
ANCESTOR_INVALID = "AncestorQuotaInvalid"
QUOTA_NOT_FOUND = "QuotaNotFound"
POD_IN_PARENT_QUOTA = "PodInParentQuota"


@dataclass(frozen=True, slots=True)
class QuotaProblem:
    """Why a quota, or a pod of it, stays out of scheduling. `quota` is the ElasticQuota's
    namespace/name (what the condition and event go to); `message` names the problem."""

    quota: str
    reason: str
    message: str


def _frozen(a: npt.NDArray[np.generic]) -> None:
    a.setflags(write=False)


def _fill(
    lists: Iterable[Mapping[str, int] | None], index: Mapping[str, int], rows: int, default: int = 0
) -> tuple[Int64Array, BoolArray]:
    values = np.full((rows, len(index)), default, dtype=np.int64)
    present = np.zeros((rows, len(index)), dtype=np.bool_)
    for i, amounts in enumerate(lists):
        for name, amount in (amounts or {}).items():
            j = index.get(name)
            if j is not None:
                values[i, j] = amount
                present[i, j] = True
    return values, present


def _vector(amounts: Mapping[str, int], index: Mapping[str, int]) -> Int64Array:
    out = np.zeros(len(index), dtype=np.int64)
    for name, amount in amounts.items():
        j = index.get(name)
        if j is not None:
            out[j] = amount
    return out


@dataclass(frozen=True, slots=True, eq=False)
class QuotaTree:
    """Koordinator's quotas as rows: 0 the root, 1 the system quota, 2 the default quota, then every
    quota by name. Matrices are quota x resource in canonical units; `max` holds UNLIMITED where a
    quota's max does not name the resource (`max_mask` False: Koordinator does not manage it)."""

    names: tuple[str, ...]
    rows: Mapping[str, int]
    resources: tuple[str, ...]
    resource_index: Mapping[str, int]
    parent: Int64Array
    min: Int64Array
    min_mask: BoolArray
    max: Int64Array
    max_mask: BoolArray
    weight: Int64Array
    allow_lent: BoolArray
    is_parent: BoolArray
    # False for a quota with a problem, or below one; such a quota takes no part in the split
    active: BoolArray
    # the active quotas of the tree by depth: the root's children first
    levels: tuple[Int64Array, ...]
    # every ElasticQuota object with a problem, by namespace/name
    problems: Mapping[str, QuotaProblem]
    # the problem that keeps each row out of scheduling (its own or an ancestor's)
    row_problems: tuple[QuotaProblem | None, ...]
    quotas: tuple[ElasticQuota | None, ...]
    index: QuotaIndex

    @property
    def size(self) -> int:
        return len(self.names)

    def row(self, name: str) -> int | None:
        return self.rows.get(name)

    def vector(self, amounts: Mapping[str, int]) -> Int64Array:
        """A resource list on this tree's resource axis; resources no quota manages are dropped."""
        return _vector(amounts, self.resource_index)

    def ancestors(self, row: int) -> list[int]:
        """The rows above `row`, nearest first, without the root."""
        out: list[int] = []
        p = int(self.parent[row])
        while p > ROOT_ROW:
            out.append(p)
            p = int(self.parent[p])
        return out

    def pod_problem(self, pod_quota: PodQuota) -> QuotaProblem | None:
        """Why a pod of this quota cannot be scheduled, if it cannot: the quota does not exist, has
        a problem (or sits below one), or is a parent quota (Koordinator's webhook refuses pods
        there)."""
        row = self.rows.get(pod_quota.name)
        if row is None or not pod_quota.exists:
            return QuotaProblem(
                pod_quota.name,
                QUOTA_NOT_FOUND,
                f"quota {pod_quota.name} named by the pod's {pod_quota.source} does not exist",
            )
        problem = self.row_problems[row]
        if problem is not None:
            return problem
        if self.is_parent[row]:
            quota = self.quotas[row]
            return QuotaProblem(
                quota.key if quota else pod_quota.name,
                POD_IN_PARENT_QUOTA,
                f"quota {pod_quota.name} is a parent quota; pods join quotas without children",
            )
        return None


def build_quota_tree(
    quotas: Iterable[ElasticQuota],
    *,
    system_max: ResourceList | None = None,
    default_max: ResourceList | None = None,
) -> QuotaTree:
    """Koordinator's quota tree from every ElasticQuota of `scheduling.sigs.k8s.io` (others are
    ignored). `system_max`/`default_max` are the plugin's SystemQuotaGroupMax/DefaultQuotaGroupMax,
    used unless an object of that name gives its own max."""
    index = QuotaIndex.build(quotas, KOORDINATOR_GROUP)
    problems: dict[str, QuotaProblem] = {
        s.key: QuotaProblem(s.key, s.reason, f"ElasticQuota {s.key}: {s.message}") for s in index.shadowed
    }
    user = sorted(name for name in index.by_name if name not in RESERVED_QUOTAS)
    names = (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA, *user)
    rows = {name: i for i, name in enumerate(names)}
    objects: list[ElasticQuota | None] = [index.by_name.get(name) for name in names]
    size = len(names)
    own: list[QuotaProblem | None] = [None] * size

    def quota_at(row: int) -> ElasticQuota:
        quota = objects[row]
        assert quota is not None, names[row]
        return quota

    def flag(row: int, reason: str, message: str) -> None:
        key = quota_at(row).key
        problem = QuotaProblem(key, reason, f"quota {names[row]}: {message}")
        own[row] = problem
        problems[key] = problem

    max_lists: list[ResourceList | None] = [None] * size
    min_lists: list[ResourceList] = [{} for _ in range(size)]
    weight_lists: list[ResourceList] = [{} for _ in range(size)]
    for row, builtin in ((SYSTEM_ROW, system_max), (DEFAULT_ROW, default_max)):
        max_lists[row] = dict(builtin if builtin is not None else BUILTIN_QUOTA_MAX)
    for row, quota in enumerate(objects):
        if quota is None:
            continue
        if row <= DEFAULT_ROW:
            # The root stands for the cluster whatever its object says; the system and default
            # quotas take only their max from theirs. A malformed one is reported but does not hold
            # every pod of no quota: the built-in max stays.
            if quota.spec_error is not None:
                problems[quota.key] = QuotaProblem(
                    quota.key, INVALID_SPEC, f"quota {quota.name}: {quota.spec_error}; its spec is not used"
                )
            elif row != ROOT_ROW:
                max_lists[row] = dict(quota.max or {})
            continue
        if quota.key in problems:
            # a quota refused one namespace it claims is refused as a whole, as the webhook does
            own[row] = problems[quota.key]
        elif quota.spec_error is not None:
            flag(row, INVALID_SPEC, str(quota.spec_error))
        else:
            max_lists[row] = quota.max
            min_lists[row] = quota.min
            weight_lists[row] = quota.shared_weight

    parent = np.full(size, NO_PARENT, dtype=np.int64)
    parent[SYSTEM_ROW] = parent[DEFAULT_ROW] = ROOT_ROW
    for row in range(DEFAULT_ROW + 1, size):
        quota = quota_at(row)
        p = rows.get(quota.parent)
        if p is None:
            if own[row] is None:
                flag(row, UNKNOWN_PARENT, f"parent quota {quota.parent} does not exist")
            continue
        parent[row] = p
        if own[row] is None and p != ROOT_ROW and (p <= DEFAULT_ROW or not quota_at(p).is_parent):
            flag(
                row, PARENT_NOT_PARENT, f"parent quota {quota.parent} is not a parent quota (is-parent label)"
            )

    _flag_cycles(parent, names, own, flag)

    children: dict[int, list[int]] = {}
    for row in range(DEFAULT_ROW + 1, size):
        if own[row] is None and parent[row] >= 0:
            children.setdefault(int(parent[row]), []).append(row)

    active = np.zeros(size, dtype=np.bool_)
    active[ROOT_ROW] = True
    levels: list[Int64Array] = []
    frontier = [ROOT_ROW]
    while frontier:
        level: list[int] = []
        for p in frontier:
            taken: ResourceList = {}
            for c in sorted(children.get(p, ()), key=lambda r: claim_order(quota_at(r))):
                failed = _parent_check(quota_at(c), quota_at(p), taken) if p != ROOT_ROW else None
                if failed is not None:
                    flag(c, *failed)
                    continue
                active[c] = True
                level.append(c)
        if level:
            levels.append(np.array(sorted(level), dtype=np.int64))
        frontier = level

    row_problems: list[QuotaProblem | None] = list(own)
    for row in range(DEFAULT_ROW + 1, size):
        if active[row] or row_problems[row] is not None:
            continue
        a = int(parent[row])
        while own[a] is None:
            a = int(parent[a])
        ancestor = own[a]
        assert ancestor is not None
        key = quota_at(row).key
        problem = QuotaProblem(
            key,
            ANCESTOR_INVALID,
            f"quota {names[row]}: quota {names[a]} above it is out of scheduling ({ancestor.message})",
        )
        row_problems[row] = problem
        problems[key] = problem
    active[SYSTEM_ROW] = active[DEFAULT_ROW] = True

    resources = tuple(sorted_names(name for lst in (*max_lists, *min_lists) for name in (lst or {})))
    resource_index = {name: j for j, name in enumerate(resources)}
    max_values, max_mask = _fill(max_lists, resource_index, size, UNLIMITED)
    min_values, min_mask = _fill(min_lists, resource_index, size)
    weight, _ = _fill(weight_lists, resource_index, size)
    allow_lent = np.array([q.allow_lent_resource if q else True for q in objects], dtype=np.bool_)
    allow_lent[ROOT_ROW] = False
    is_parent = np.array([q.is_parent if q else False for q in objects], dtype=np.bool_)
    is_parent[ROOT_ROW] = True
    for array in (parent, max_values, max_mask, min_values, min_mask, weight, allow_lent, is_parent, active):
        _frozen(array)
    for array in levels:
        _frozen(array)
    return QuotaTree(
        names=names,
        rows=rows,
        resources=resources,
        resource_index=resource_index,
        parent=parent,
        min=min_values,
        min_mask=min_mask,
        max=max_values,
        max_mask=max_mask,
        weight=weight,
        allow_lent=allow_lent,
        is_parent=is_parent,
        active=active,
        levels=tuple(levels),
        problems=problems,
        row_problems=tuple(row_problems),
        quotas=tuple(objects),
        index=index,
    )


_Flag = Callable[[int, str, str], None]


def _flag_cycles(
    parent: Int64Array, names: tuple[str, ...], own: list[QuotaProblem | None], flag: _Flag
) -> None:
    """Parent chains that come back on themselves never reach the root: every quota on such a loop
    gets the problem (Koordinator's scheduler would walk the loop forever)."""
    state = [0] * len(names)  # 0 unseen, 1 on the current walk, 2 settled
    for start in range(DEFAULT_ROW + 1, len(names)):
        path: list[int] = []
        row = start
        while row > DEFAULT_ROW and state[row] == 0 and own[row] is None:
            state[row] = 1
            path.append(row)
            row = int(parent[row])
        if row > DEFAULT_ROW and state[row] == 1:
            loop = path[path.index(row) :]
            chain = " -> ".join(names[r] for r in (*loop, row))
            for r in loop:
                flag(r, QUOTA_CYCLE, f"its parent chain {chain} never reaches {ROOT_QUOTA}")
        for r in path:
            state[r] = 2


def _keys(amounts: ResourceList | None) -> set[str]:
    return set(amounts or {})


def _parent_check(child: ElasticQuota, parent: ElasticQuota, taken: ResourceList) -> tuple[str, str] | None:
    """The webhook's checks of a quota against its (non-root) parent; `taken` sums the mins of the
    older siblings admitted so far and grows by this child's when it is admitted."""
    if child.tree_id != parent.tree_id:
        return (
            TREE_ID_MISMATCH,
            f"tree id {child.tree_id or '(none)'} differs from its parent {parent.name}'s "
            f"{parent.tree_id or '(none)'}",
        )
    if _keys(child.max) != _keys(parent.max):
        return (
            RESOURCE_KEYS_MISMATCH,
            f"spec.max names {', '.join(sorted_names(_keys(child.max))) or 'nothing'} but its parent "
            f"{parent.name}'s names {', '.join(sorted_names(_keys(parent.max))) or 'nothing'}",
        )
    outside = _keys(child.min) - _keys(parent.min)
    if outside:
        return (
            RESOURCE_KEYS_MISMATCH,
            f"spec.min names {', '.join(sorted_names(outside))}, "
            f"which its parent {parent.name}'s min does not",
        )
    total = dict(taken)
    for name, amount in child.min.items():
        total[name] = total.get(name, 0) + amount
    if not (child.allow_force_update or child.is_tree_root):
        over = [name for name in sorted_names(total) if total[name] > parent.min.get(name, 0)]
        if over:
            name = over[0]
            return (
                MIN_EXCEEDS_PARENT,
                f"min of {name} {format_amount(name, child.min.get(name, 0))} with its older siblings' "
                f"{format_amount(name, taken.get(name, 0))} is {format_amount(name, total[name])}, above "
                f"parent {parent.name}'s min {format_amount(name, parent.min.get(name, 0))}",
            )
    taken.update(total)
    return None


@dataclass(frozen=True, slots=True, eq=False)
class NamespaceQuotas:
    """scheduler-plugins' quotas, one row per namespace that has one, by namespace. `min` and `max`
    are the bounds CapacityScheduling compares with: a quota without spec.max is unlimited in cpu,
    memory and ephemeral-storage (0 in pods); a stated max lacking one of those four limits it to
    0; an extended resource a max does not name is unlimited, one a min does not name is 0."""

    names: tuple[str, ...]
    namespaces: tuple[str, ...]
    rows: Mapping[str, int]
    resources: tuple[str, ...]
    resource_index: Mapping[str, int]
    min: Int64Array
    max: Int64Array
    core: BoolArray
    # False for a quota with a problem: its pods are held and its min is no part of the total
    valid: BoolArray
    problems: Mapping[str, QuotaProblem]
    row_problems: tuple[QuotaProblem | None, ...]
    quotas: tuple[ElasticQuota, ...]
    index: QuotaIndex

    @property
    def size(self) -> int:
        return len(self.names)

    def row(self, namespace: str) -> int | None:
        return self.rows.get(namespace)

    def vector(self, amounts: Mapping[str, int]) -> Int64Array:
        return _vector(amounts, self.resource_index)

    def off_axis(self, amounts: Mapping[str, int]) -> dict[str, int]:
        """The resources of `amounts` no quota names: unlimited by every max, 0 in every min."""
        return {name: v for name, v in amounts.items() if v and name not in self.resource_index}

    def problem_of(self, namespace: str) -> QuotaProblem | None:
        """Why pods of this namespace are held, if its quota has a problem."""
        row = self.rows.get(namespace)
        return self.row_problems[row] if row is not None else None


def build_namespace_quotas(quotas: Iterable[ElasticQuota]) -> NamespaceQuotas:
    """scheduler-plugins' quotas from every ElasticQuota of `scheduling.x-k8s.io`."""
    index = QuotaIndex.build(quotas, X_K8S_GROUP)
    problems: dict[str, QuotaProblem] = {
        s.key: QuotaProblem(s.key, s.reason, f"ElasticQuota {s.key}: {s.message}") for s in index.shadowed
    }
    namespaces = tuple(sorted(index.by_namespace))
    chosen = tuple(index.by_namespace[ns] for ns in namespaces)
    row_problems: list[QuotaProblem | None] = []
    for quota in chosen:
        problem = None
        if quota.spec_error is not None:
            problem = QuotaProblem(quota.key, INVALID_SPEC, f"quota {quota.key}: {quota.spec_error}")
            problems[quota.key] = problem
        row_problems.append(problem)
    names_in_use = {name for q in chosen for lst in (q.min, q.max) for name in (lst or {})}
    resources = tuple(sorted_names({*CORE_RESOURCES, *names_in_use}))
    resource_index = {name: j for j, name in enumerate(resources)}
    size = len(chosen)
    core = np.array([name in CORE_RESOURCES for name in resources], dtype=np.bool_)
    min_values, _ = _fill((q.min for q in chosen), resource_index, size)
    max_values = np.empty((size, len(resources)), dtype=np.int64)
    for i, quota in enumerate(chosen):
        if quota.max is None:
            row = [0 if name == "pods" else UNLIMITED for name in resources]
        else:
            row = [quota.max.get(name, 0 if name in CORE_RESOURCES else UNLIMITED) for name in resources]
        max_values[i] = row
    valid = np.array([p is None for p in row_problems], dtype=np.bool_)
    for array in (min_values, max_values, core, valid):
        _frozen(array)
    return NamespaceQuotas(
        names=tuple(q.name for q in chosen),
        namespaces=namespaces,
        rows={ns: i for i, ns in enumerate(namespaces)},
        resources=resources,
        resource_index=resource_index,
        min=min_values,
        max=max_values,
        core=core,
        valid=valid,
        problems=problems,
        row_problems=tuple(row_problems),
        quotas=chosen,
        index=index,
    )
