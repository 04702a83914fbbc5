"""The quota books: what one scheduler knows of the ElasticQuotas of one API group and of the pods
they hold, kept current from pod and quota events, and the checks the scheduling cycle asks of it.

One book per API group and scheduler, shared by every profile that runs the group's plugin (as the
gang registry is). The book keeps, per quota row, three sums of pod requests on the quotas'
resource axis (`koordpy.quota.tree`):

- request: every pod of the quota that exists and has not finished, pending or placed (Koordinator
  counts a pod in its quota's request from the moment it exists; the runtime quota follows it);
- used: the pods placed, or reserved by this scheduler and not yet seen bound;
- non-preemptible used (Koordinator): the placed pods labelled `preemptible: "false"`;

and a count of the pods that hold nothing yet (the pending-pods metric).

Pod events and Reserve/Unreserve change one row by one pod's vector; a quota object that changes
marks the tree for a rebuild, done once, before the next question, with every pod counted again.
Koordinator's runtime quota is computed from the sums when a question needs it and something it
depends on (requests, the quotas, the nodes, what the system and default quotas use) has changed.

A dry run of preemption takes victims off their nodes in a trial; what they held is given back in
a `Taken` (one per cycle state, or one shared by every member of a gang group while job-level
preemption plans it: see `releasing`), never by changing the sums.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from koordpy.api.elasticquota import (
    KOORDINATOR_GROUP,
    X_K8S_GROUP,
    ElasticQuota,
    PodQuota,
    is_non_preemptible,
    quota_of_pod,
)
from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.resources import MAX_AMOUNT, ResourceList, add_into, format_amount, sorted_names
from koordpy.cache import Snapshot
from koordpy.quota.admission import (
    capacity_admit,
    koordinator_admit,
    koordinator_admit_ancestors,
    leaf_ask,
)
from koordpy.quota.runtime import RuntimeQuota, runtime_state, subtree_sums
from koordpy.quota.tree import (
    DEFAULT_ROW,
    SYSTEM_ROW,
    UNLIMITED,
    BoolArray,
    Int64Array,
    NamespaceQuotas,
    QuotaProblem,
    QuotaTree,
    build_namespace_quotas,
    build_quota_tree,
)

NO_ROW = -1


@dataclass(slots=True)
class Entry:
    """One pod as the book counts it."""

    pod: Pod
    # Koordinator: the quota's name; scheduler-plugins: the namespace ("" when it has no quota)
    quota: str
    row: int
    # the pod's requests on the book's resource axis (None while the tree waits for a rebuild)
    vec: Int64Array | None
    bound: bool
    reserved: bool = False
    non_preemptible: bool = False

    @property
    def holds(self) -> bool:
        return self.bound or self.reserved


@dataclass(slots=True)
class Taken:
    """Pods a dry run has taken off their nodes, with what each held, and the sum per quota row."""

    pods: dict[str, tuple[int, Int64Array]] = field(default_factory=dict)
    by_row: dict[int, Int64Array] = field(default_factory=dict)

    def copy(self) -> Taken:
        return Taken(dict(self.pods), {r: v.copy() for r, v in self.by_row.items()})

    def take(self, entry: Entry) -> bool:
        key = entry.pod.key
        if key in self.pods or not entry.holds or entry.row < 0 or entry.vec is None:
            return False
        self.pods[key] = (entry.row, entry.vec)
        acc = self.by_row.get(entry.row)
        self.by_row[entry.row] = entry.vec.copy() if acc is None else acc + entry.vec
        return True

    def give_back(self, key: str) -> bool:
        held = self.pods.pop(key, None)
        if held is None:
            return False
        row, vec = held
        self.by_row[row] = self.by_row[row] - vec
        return True

    def __bool__(self) -> bool:
        return bool(self.pods)


@dataclass(slots=True)
class Part:
    """What the pods of an ask request of one quota."""

    # Koordinator: the quota as the pods name it; scheduler-plugins: None (the namespace is the key)
    pod_quota: PodQuota | None
    request: ResourceList = field(default_factory=dict)
    non_preemptible: ResourceList = field(default_factory=dict)


@dataclass(slots=True)
class Ask:
    """What a pod asks of its quotas, or its gang group's pending members together (a group is
    admitted as a whole: all of them or none)."""

    parts: dict[str, Part]
    pods: tuple[str, ...]
    # the gang group's id, "" for a pod on its own
    group: str = ""
    # scheduler-plugins: requests of pods nominated to nodes, in the pod's namespace at no lower
    # priority, and in namespaces whose quota is still within its min
    nominated_in_quota: ResourceList = field(default_factory=dict)
    nominated_elsewhere: ResourceList = field(default_factory=dict)

    def explain(self, message: str) -> str:
        if not self.group or len(self.pods) < 2:
            return message
        return (
            f"{message} (requested by the {len(self.pods)} pending pods of gang group [{self.group}], "
            "admitted all together or not at all)"
        )


def _amounts(amounts: Mapping[str, int]) -> dict[str, str]:
    return {name: format_amount(name, amounts[name]) for name in sorted_names(amounts)}


def _list(names: Sequence[str], values: Int64Array, mask: BoolArray | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    for j, name in enumerate(names):
        if mask is not None and not mask[j]:
            continue
        value = int(values[j])
        if value >= UNLIMITED:
            continue
        out[name] = format_amount(name, value)
    return out


@dataclass(frozen=True, slots=True)
class QuotaFigures:
    """One quota's figures as the metrics export them: amounts in canonical units (cpu in
    millicores, as Koordinator's metrics give it) by field, then resource."""

    namespace: str
    name: str
    # Koordinator's tree: the parent's name, the tree id, whether the quota is a parent
    parent: str
    tree_id: str
    is_parent: bool
    fields: Mapping[str, Mapping[str, int]]
    pending_pods: int


def _ints(names: Sequence[str], values: Int64Array, mask: BoolArray) -> dict[str, int]:
    return {name: int(values[j]) for j, name in enumerate(names) if mask[j] and int(values[j]) < UNLIMITED}


class QuotaBook:
    """The part both API groups share: objects, pods, the sums, and dry-run views."""

    api_group: ClassVar[str] = ""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        # namespace/name -> the quota object as last seen
        self.objects: dict[str, ElasticQuota] = {}
        self.entries: dict[str, Entry] = {}
        # changes with anything that can change a verdict (see `pass_members`)
        self.version = 0
        self._tree_dirty = True
        self.resources: tuple[str, ...] = ()
        self._request: Int64Array = np.zeros((0, 0), dtype=np.int64)
        self._used: Int64Array = np.zeros((0, 0), dtype=np.int64)
        self._np: Int64Array = np.zeros((0, 0), dtype=np.int64)
        # per row, the counted pods that hold nothing yet: kept with the sums, so a scrape of the
        # pending-pods metric reads it instead of walking every pod
        self._pending: Int64Array = np.zeros(0, dtype=np.int64)
        self._request_version = 0
        self._used_version = 0
        self._tree_version = 0
        # the pods taken off their nodes by the job-level dry run under way (see `releasing`)
        self.ledger: Taken | None = None
        # the pending members of the gang group whose admission was just judged as a whole: their
        # own reservations during the pass leave its verdict standing (used grows by what the
        # group's pending request shrinks)
        self.pass_members: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ what subclasses provide
    def _build(self) -> None:
        raise NotImplementedError

    def _size(self) -> int:
        raise NotImplementedError

    def _place(self, pod: Pod) -> tuple[str, int]:
        """(quota, row) of a pod under the current tree."""
        raise NotImplementedError

    def _vector(self, amounts: Mapping[str, int]) -> Int64Array:
        raise NotImplementedError

    def problem_of(self, pod: Pod) -> QuotaProblem | None:
        raise NotImplementedError

    def share(self, pod: Pod) -> float:
        """How much of its share the pod's quota uses (see QueueShare)."""
        raise NotImplementedError

    def summary(self) -> list[dict[str, Any]]:
        """One row per ElasticQuota object, for the simulate report."""
        raise NotImplementedError

    def figures(self) -> list[QuotaFigures]:
        """The figures of every quota in scheduling, for the metrics (read at scrape time)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ state
    @property
    def active(self) -> bool:
        """Quotas matter only once an ElasticQuota of the group exists."""
        return bool(self.objects)

    def ensure(self) -> None:
        if self._tree_dirty:
            self._rebuild()

    def _changed(self) -> None:
        self.version += 1

    def entry(self, pod: Pod) -> Entry:
        """The pod's entry, made (and counted) now when no event told of the pod yet."""
        self.ensure()
        found = self.entries.get(pod.key)
        if found is None:
            found = self._make(pod)
            self.entries[pod.key] = found
            self._count(found, 1)
        return found

    def _make(self, pod: Pod, reserved: bool = False) -> Entry:
        if self._tree_dirty or not self.active:
            # nothing is counted while no quota exists: the first one rebuilds every entry
            return Entry(pod, "", NO_ROW, None, bool(pod.node_name), reserved, is_non_preemptible(pod))
        quota, row = self._place(pod)
        vec = self._vector(pod.requests) if row >= 0 else None
        return Entry(pod, quota, row, vec, bool(pod.node_name), reserved, is_non_preemptible(pod))

    def _count(self, entry: Entry, sign: int) -> None:
        if entry.row < 0 or entry.vec is None or self._tree_dirty:
            return
        self._request[entry.row] += entry.vec if sign > 0 else -entry.vec
        self._request_version += 1
        self._count_used(entry, sign)

    def _count_used(self, entry: Entry, sign: int) -> None:
        """Count (or uncount) what the entry holds, or, holding nothing yet, that it is pending:
        every change of `holds` uncounts the entry as it was and counts it as it is."""
        if entry.row < 0 or entry.vec is None or self._tree_dirty:
            return
        if not entry.holds:
            self._pending[entry.row] += sign
            return
        delta = entry.vec if sign > 0 else -entry.vec
        self._used[entry.row] += delta
        self._used_version += 1
        if entry.non_preemptible:
            self._np[entry.row] += delta
        self._used_changed(entry.row)

    def _used_changed(self, row: int) -> None:
        """What one row's used changing means beyond the used sums (Koordinator: the runtime)."""

    # ------------------------------------------------------------------ events
    def on_object(self, action: str, obj: Mapping[str, Any]) -> None:
        api_version = str(obj.get("apiVersion") or "")
        if api_version.split("/", 1)[0] != self.api_group:
            return
        try:
            quota = ElasticQuota.from_dict(obj)
        except SpecError:
            return
        if action == "Delete":
            self.objects.pop(quota.key, None)
        else:
            self.objects[quota.key] = quota
        self._tree_dirty = True
        self._changed()

    def on_pod(self, action: str, pod: Pod) -> None:
        old = self.entries.pop(pod.key, None)
        self._changed()
        if action == "Delete" or pod.is_terminal:
            if old is not None:
                self._count(old, -1)
            return
        # a reservation stands until the pod is seen bound, or is given up (Unreserve)
        reserved = old is not None and old.reserved and not pod.node_name
        if (
            old is not None
            and old.vec is not None
            and not self._tree_dirty
            and old.pod.requests == pod.requests
            and old.pod.labels == pod.labels
            and old.pod.namespace == pod.namespace
        ):
            # the same quota and requests (a binding seen, a status written): what it asks of its
            # quota is unchanged, only whether it holds what it asks
            entry = Entry(
                pod, old.quota, old.row, old.vec, bool(pod.node_name), reserved, old.non_preemptible
            )
            self.entries[pod.key] = entry
            if entry.holds != old.holds:
                self._count_used(old, -1)
                self._count_used(entry, 1)
            return
        if old is not None:
            self._count(old, -1)
        entry = self._make(pod, reserved)
        self.entries[pod.key] = entry
        self._count(entry, 1)

    def reserve(self, pod: Pod) -> None:
        entry = self.entry(pod)
        if entry.reserved:
            return
        self._count_used(entry, -1)
        entry.reserved = True
        self._count_used(entry, 1)
        if pod.key not in self.pass_members:
            self._changed()

    def unreserve(self, pod: Pod) -> None:
        entry = self.entries.get(pod.key)
        if entry is None or not entry.reserved:
            return
        self._count_used(entry, -1)
        entry.reserved = False
        self._count_used(entry, 1)
        self._changed()

    def _rebuild(self) -> None:
        self._tree_dirty = False
        self._build()
        size, width = self._size(), len(self.resources)
        self._request = np.zeros((size, width), dtype=np.int64)
        self._used = np.zeros((size, width), dtype=np.int64)
        self._np = np.zeros((size, width), dtype=np.int64)
        self._pending = np.zeros(size, dtype=np.int64)
        for key, old in self.entries.items():
            entry = self._make(old.pod, old.reserved)
            self.entries[key] = entry
            self._count(entry, 1)
        self._tree_version += 1
        self._request_version += 1
        self._used_version += 1

    # ------------------------------------------------------------------ dry runs
    @contextlib.contextmanager
    def releasing(self, victims: Sequence[Pod]) -> Iterator[Taken]:
        """The victims count as gone until the block ends (nested blocks: the innermost wins)."""
        self.ensure()
        taken = Taken()
        for victim in victims:
            entry = self.entries.get(victim.key)
            if entry is not None:
                taken.take(entry)
        outer, self.ledger = self.ledger, taken
        self._changed()
        try:
            yield taken
        finally:
            self.ledger = outer
            self._changed()

    def take(self, taken: Taken, pod: Pod) -> None:
        entry = self.entries.get(pod.key)
        if entry is not None and taken.take(entry):
            self._changed()

    def give_back(self, taken: Taken, pod: Pod) -> None:
        if taken.give_back(pod.key):
            self._changed()

    def without(self, used: Int64Array, taken: Taken | None) -> Int64Array:
        """Per row used, less what the taken pods held."""
        if not taken:
            return used
        out = used.copy()
        for row, vec in taken.by_row.items():
            out[row] -= vec
        return out

    # ------------------------------------------------------------------ asks
    def ask(self, pods: Sequence[Pod], group: str = "") -> Ask:
        """What the pods (not placed yet) ask of their quotas together."""
        self.ensure()
        parts: dict[str, Part] = {}
        for pod in pods:
            entry = self.entry(pod)
            if entry.row < 0 or entry.holds:
                continue
            part = parts.get(entry.quota)
            if part is None:
                part = parts[entry.quota] = Part(self._pod_quota(pod, entry))
            add_into(part.request, pod.requests)
            if entry.non_preemptible:
                add_into(part.non_preemptible, pod.requests)
        return Ask(parts, tuple(p.key for p in pods), group)

    def _pod_quota(self, pod: Pod, entry: Entry) -> PodQuota | None:
        return None

    def demand(self, ask: Ask) -> dict[int, Int64Array]:
        """The ask per quota row on the book's axis."""
        out: dict[int, Int64Array] = {}
        for key, part in ask.parts.items():
            row = self._row_of_quota(key)
            if row >= 0:
                out[row] = self._vector(part.request)
        return out

    def _row_of_quota(self, key: str) -> int:
        raise NotImplementedError

    def pending_pods(self) -> Int64Array:
        """Per row, the pods that hold nothing yet (read only)."""
        self.ensure()
        view = self._pending.view()
        view.setflags(write=False)
        return view


# ================================================================================ Koordinator
@dataclass(frozen=True, slots=True)
class KoordinatorRules:
    """The ElasticQuotaArgs a check follows (per profile: the book is the scheduler's)."""

    enable_runtime_quota: bool = True
    check_parents: bool = False
    disable_default_quota_preemption: bool = True


class KoordinatorBook(QuotaBook):
    """Koordinator's quotas (`scheduling.sigs.k8s.io`): a tree, runtime quota, pods by label."""

    api_group = KOORDINATOR_GROUP

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        system_max: ResourceList | None = None,
        default_max: ResourceList | None = None,
        scale_min: bool = True,
    ) -> None:
        super().__init__(snapshot)
        self.system_max = system_max
        self.default_max = default_max
        self.scale_min = scale_min
        self.tree: QuotaTree = build_quota_tree((), system_max=system_max, default_max=default_max)
        self._runtime: RuntimeQuota | None = None
        self._runtime_key: tuple[int, int, int] = (-1, -1, -1)
        self._total_key = (-1, -1)
        self._total: Int64Array = np.zeros(0, dtype=np.int64)
        self._used_tree: Int64Array | None = None
        self._np_tree: Int64Array | None = None
        self._used_key = -1

    def _build(self) -> None:
        self.tree = build_quota_tree(
            self.objects.values(), system_max=self.system_max, default_max=self.default_max
        )
        self.resources = self.tree.resources
        self._runtime = None
        self._used_tree = self._np_tree = None

    def _size(self) -> int:
        return self.tree.size

    def _place(self, pod: Pod) -> tuple[str, int]:
        found = quota_of_pod(pod, self.tree.index)
        assert found is not None  # Koordinator gives every pod a quota
        # a pod its quota cannot take (see QuotaTree.pod_problem) is held, and counts nowhere
        if self.tree.pod_problem(found) is not None:
            return found.name, NO_ROW
        return found.name, self.tree.rows[found.name]

    def _vector(self, amounts: Mapping[str, int]) -> Int64Array:
        return self.tree.vector(amounts)

    def _row_of_quota(self, key: str) -> int:
        row = self.tree.rows.get(key)
        return NO_ROW if row is None else row

    def _pod_quota(self, pod: Pod, entry: Entry) -> PodQuota | None:
        return quota_of_pod(pod, self.tree.index)

    def _used_changed(self, row: int) -> None:
        # what the system and default quotas use comes off the total the tree shares out
        if row in (SYSTEM_ROW, DEFAULT_ROW):
            self._request_version += 1

    def problem_of(self, pod: Pod) -> QuotaProblem | None:
        self.ensure()
        found = quota_of_pod(pod, self.tree.index)
        return self.tree.pod_problem(found) if found is not None else None

    # ------------------------------------------------------------------ derived
    def total(self) -> Int64Array:
        """The cluster's allocatable on the tree's axis (what the root quota stands for)."""
        snap = self.snapshot
        key = (snap.node_generation, self._tree_version)
        if key != self._total_key:
            rows = snap.live_rows()
            total = np.zeros(len(self.resources), dtype=np.int64)
            for j, name in enumerate(self.resources):
                col = snap.resource_col.get(name)
                if col is not None:
                    total[j] = int(snap.allocatable_column(col, rows).sum(dtype=np.int64))
            self._total, self._total_key = total, key
        return self._total

    def runtime(self, *, fresh: bool = True) -> RuntimeQuota:
        """The runtime quota of every quota; `fresh` False takes the last one computed for this
        tree, if any (the queue's order needs no more)."""
        self.ensure()
        if not fresh and self._runtime is not None and self._runtime_key[0] == self._tree_version:
            return self._runtime
        total = self.total()
        key = (self._tree_version, self._request_version, self.snapshot.node_generation)
        if self._runtime is None or key != self._runtime_key:
            self._runtime = runtime_state(
                self.tree, self._request, total, used=self._used, scale_min=self.scale_min
            )
            self._runtime_key = key
        return self._runtime

    def used(self) -> tuple[Int64Array, Int64Array]:
        """(used, non-preemptible used) of each quota with everything below it, as Koordinator
        keeps them."""
        self.ensure()
        if self._used_tree is None or self._np_tree is None or self._used_key != self._used_version:
            self._used_tree = subtree_sums(self.tree, self._used)
            self._np_tree = subtree_sums(self.tree, self._np)
            self._used_key = self._used_version
        return self._used_tree, self._np_tree

    def without(self, used: Int64Array, taken: Taken | None) -> Int64Array:
        """Used of each quota and its ancestors, less what the taken pods held."""
        if not taken:
            return used
        tree = self.tree
        out = used.copy()
        for row, vec in taken.by_row.items():
            # as subtree_sums counts it: masked by the pod's own quota, on every row up to the root
            masked = np.where(tree.max_mask[row] & tree.active[row], vec, 0)
            r = row
            while r >= 0:
                out[r] -= masked
                r = int(tree.parent[r])
        return out

    # ------------------------------------------------------------------ checks
    def check(self, ask: Ask, rules: KoordinatorRules, taken: Taken | None = None) -> str | None:
        """Why the ask does not fit its quotas (None when it does)."""
        runtime = self.runtime().runtime
        used, held = self.used()
        used = self.without(used, taken)
        tree = self.tree
        asks: dict[int, Int64Array] = {}
        for part in ask.parts.values():
            assert part.pod_quota is not None
            message = koordinator_admit(
                tree,
                runtime,
                used,
                part.pod_quota,
                part.request,
                enable_runtime_quota=rules.enable_runtime_quota,
            )
            if message is None and part.non_preemptible:
                message = koordinator_admit(
                    self.tree,
                    runtime,
                    used,
                    part.pod_quota,
                    part.non_preemptible,
                    enable_runtime_quota=rules.enable_runtime_quota,
                    non_preemptible=True,
                    non_preemptible_used=held,
                )
            if message is not None:
                return ask.explain(message)
            row = tree.rows[part.pod_quota.name]
            asks[row] = leaf_ask(tree, row, part.request)
        if rules.check_parents:
            # the parts of a gang group beneath one ancestor are checked there together
            message = koordinator_admit_ancestors(
                tree, runtime, used, asks, enable_runtime_quota=rules.enable_runtime_quota
            )
            if message is not None:
                return ask.explain(message)
        return None

    def within_min(self, ask: Ask) -> bool:
        """Whether the ask keeps each of its quotas within its min (as scaled down when the mins
        add up to more than the cluster has) in every resource it requests."""
        state = self.runtime()
        used, _ = self.used()
        tree = self.tree
        for row, vec in self.demand(ask).items():
            asked = (vec > 0) & tree.max_mask[row]
            if np.any(used[row][asked] + vec[asked] > state.min[row][asked]):
                return False
        return True

    def over_runtime(self) -> BoolArray:
        """Per row, whether the quota uses more than its runtime in a resource it manages: what
        Koordinator's revoke controller would take back from it."""
        state = self.runtime()
        used, _ = self.used()
        tree = self.tree
        over: BoolArray = np.any((used > state.runtime) & tree.max_mask, axis=1) & tree.active
        over[: DEFAULT_ROW + 1] = False
        return over

    def victim_mask(
        self, preemptor: Pod, ask: Ask, candidates: Sequence[Pod], rules: KoordinatorRules
    ) -> BoolArray:
        """Koordinator's canPreempt (same quota, lower priority, not in the default quota while
        disableDefaultQuotaPreemption), and the reclaim of what others borrow: a preemptor within
        its min may also evict pods of any other quota that uses more than its runtime."""
        n = len(candidates)
        own = self.entry(preemptor).row
        if own < 0 or n == 0:
            return np.zeros(n, dtype=np.bool_)
        rows = np.fromiter((self.entry(c).row for c in candidates), dtype=np.int64, count=n)
        priority = np.fromiter((c.priority for c in candidates), dtype=np.int64, count=n)
        opted_out = np.fromiter((is_non_preemptible(c) for c in candidates), dtype=np.bool_, count=n)
        mask: BoolArray = (rows == own) & (priority < preemptor.priority)
        if rules.disable_default_quota_preemption:
            mask &= rows != DEFAULT_ROW
        if own > DEFAULT_ROW and self.within_min(ask):
            over = self.over_runtime()
            known = rows >= 0
            borrowed = np.zeros(n, dtype=np.bool_)
            borrowed[known] = over[rows[known]]
            mask |= borrowed & (rows != own)
        return mask & ~opted_out

    def share(self, pod: Pod) -> float:
        entry = self.entry(pod)
        if entry.row <= DEFAULT_ROW:
            return 0.0
        state = self.runtime(fresh=False)
        used, _ = self.used()
        limit = state.runtime[entry.row]
        managed = self.tree.max_mask[entry.row] & (limit > 0)
        if not managed.any():
            return 0.0
        return float(np.max(used[entry.row][managed] / limit[managed]))

    # ------------------------------------------------------------------ report
    def summary(self) -> list[dict[str, Any]]:
        self.ensure()
        tree = self.tree
        state = self.runtime()
        used, _ = self.used()
        pending = self.pending_pods()
        rows: list[dict[str, Any]] = []
        for quota in sorted(self.objects.values(), key=lambda q: (q.namespace, q.name)):
            row = tree.rows.get(quota.name)
            holder = tree.quotas[row] if row is not None else None
            problem = tree.problems.get(quota.key)
            names = tree.resources
            out: dict[str, Any] = {
                "namespace": quota.namespace,
                "name": quota.name,
                "apiGroup": KOORDINATOR_GROUP,
                "parent": quota.parent or None,
                "min": _amounts(quota.min),
                "max": _amounts(quota.max or {}),
                "runtime": None,
                "request": None,
                "used": {},
                "pendingPods": 0,
                "problem": problem.message if problem is not None else None,
            }
            if row is not None and holder is quota and problem is None:
                managed = tree.max_mask[row]
                out["runtime"] = _list(names, state.runtime[row], managed)
                out["request"] = _list(names, state.request[row], managed)
                out["used"] = _list(names, used[row], managed)
                out["pendingPods"] = int(pending[row])
            rows.append(out)
        return rows

    def figures(self) -> list[QuotaFigures]:
        """min, max, runtime, request and used of every quota of the tree but the root (the
        cluster), in the resources each manages, as Koordinator's scheduler_elastic_quota_status
        gives them; quotas with a problem are left out."""
        if not self.active:
            return []
        self.ensure()
        tree = self.tree
        state = self.runtime()
        used, _ = self.used()
        pending = self.pending_pods()
        names = tree.resources
        out: list[QuotaFigures] = []
        for row in range(1, tree.size):
            if not tree.active[row]:
                continue
            quota = tree.quotas[row]
            managed = tree.max_mask[row]
            parent = int(tree.parent[row])
            out.append(
                QuotaFigures(
                    namespace=quota.namespace if quota is not None else "",
                    name=tree.names[row],
                    parent=tree.names[parent] if parent >= 0 else "",
                    tree_id=quota.tree_id if quota is not None else "",
                    is_parent=bool(tree.is_parent[row]),
                    fields={
                        "min": _ints(names, tree.min[row], tree.min_mask[row]),
                        "max": _ints(names, tree.max[row], managed),
                        "runtime": _ints(names, state.runtime[row], managed),
                        "request": _ints(names, state.request[row], managed),
                        "used": _ints(names, used[row], managed),
                    },
                    pending_pods=int(pending[row]),
                )
            )
        return out


# ================================================================================ scheduler-plugins
class NamespaceBook(QuotaBook):
    """scheduler-plugins' quotas (`scheduling.x-k8s.io`): one per namespace, min and max."""

    api_group = X_K8S_GROUP

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__(snapshot)
        self.quotas: NamespaceQuotas = build_namespace_quotas(())

    def _build(self) -> None:
        self.quotas = build_namespace_quotas(self.objects.values())
        self.resources = self.quotas.resources

    def _size(self) -> int:
        return self.quotas.size

    def _place(self, pod: Pod) -> tuple[str, int]:
        row = self.quotas.rows.get(pod.namespace)
        return (pod.namespace, row) if row is not None else ("", NO_ROW)

    def _vector(self, amounts: Mapping[str, int]) -> Int64Array:
        return self.quotas.vector(amounts)

    def _row_of_quota(self, key: str) -> int:
        row = self.quotas.rows.get(key)
        return NO_ROW if row is None else row

    def problem_of(self, pod: Pod) -> QuotaProblem | None:
        self.ensure()
        return self.quotas.problem_of(pod.namespace)

    def used(self, taken: Taken | None = None) -> Int64Array:
        self.ensure()
        return self.without(self._used, taken)

    def check(self, ask: Ask, taken: Taken | None = None) -> str | None:
        used = self.used(taken)
        parts = list(ask.parts.items())
        for i, (namespace, part) in enumerate(parts):
            # the other namespaces' share of a group counts in the total, as pods nominated there do
            elsewhere = dict(ask.nominated_elsewhere)
            for j, (_, other) in enumerate(parts):
                if j != i:
                    add_into(elsewhere, other.request)
            message = capacity_admit(
                self.quotas,
                used,
                namespace,
                part.request,
                nominated_in_quota=ask.nominated_in_quota,
                nominated_elsewhere=elsewhere,
            )
            if message is not None:
                return ask.explain(message)
        return None

    def over_min(self, used: Int64Array | None = None) -> BoolArray:
        """Per row, whether the quota uses more than its min in some resource (usedOverMin)."""
        used = self.used() if used is None else used
        over: BoolArray = np.any(used > self.quotas.min, axis=1) & self.quotas.valid
        return over

    def within_min(self, ask: Ask) -> bool:
        """CapacityScheduling's `!usedOverMinWith(nominatedPodsReqInEQWithPodReq)` for the ask's
        namespace: cpu, memory, ephemeral-storage and pods always compared, other resources where
        the ask requests them (against a min of 0 where the min does not name them)."""
        quotas = self.quotas
        used = self.used()
        for namespace, part in ask.parts.items():
            row = quotas.rows.get(namespace)
            if row is None:
                continue
            request = dict(part.request)
            add_into(request, ask.nominated_in_quota)
            vec = quotas.vector(request)
            checked = quotas.core | (vec > 0)
            if np.any((used[row] + vec > quotas.min[row]) & checked) or quotas.off_axis(request):
                return False
        return True

    def victim_mask(self, preemptor: Pod, ask: Ask, candidates: Sequence[Pod]) -> BoolArray:
        """CapacityScheduling's SelectVictimsOnNode: a preemptor of no quota evicts lower-priority
        pods of no quota; one whose quota stays within its min evicts pods of other quotas that
        use more than their min, whatever their priority; any other evicts lower-priority pods of
        its own quota."""
        n = len(candidates)
        if n == 0:
            return np.zeros(0, dtype=np.bool_)
        rows = np.fromiter((self.quotas.rows.get(c.namespace, NO_ROW) for c in candidates), np.int64, n)
        priority = np.fromiter((c.priority for c in candidates), dtype=np.int64, count=n)
        lower: BoolArray = priority < preemptor.priority
        own = self.quotas.rows.get(preemptor.namespace)
        if own is None:
            mine: BoolArray = lower & (rows < 0)
            return mine
        if not self.within_min(ask):
            ours: BoolArray = lower & (rows == own)
            return ours
        over = self.over_min()
        known = rows >= 0
        borrowing: BoolArray = np.zeros(n, dtype=np.bool_)
        borrowing[known] = over[rows[known]]
        others: BoolArray = borrowing & (rows != own)
        return others

    def share(self, pod: Pod) -> float:
        row = self.quotas.rows.get(pod.namespace)
        if row is None:
            return 0.0
        used = self.used()[row]
        limit = np.where(self.quotas.min[row] > 0, self.quotas.min[row], self.quotas.max[row])
        managed = (limit > 0) & (limit < UNLIMITED)
        if not managed.any():
            return 0.0
        return float(np.max(used[managed] / limit[managed]))

    def summary(self) -> list[dict[str, Any]]:
        self.ensure()
        quotas = self.quotas
        used = self.used()
        pending = self.pending_pods()
        rows: list[dict[str, Any]] = []
        for quota in sorted(self.objects.values(), key=lambda q: (q.namespace, q.name)):
            row = quotas.rows.get(quota.namespace)
            holder = quotas.quotas[row] if row is not None else None
            problem = quotas.problems.get(quota.key)
            counted = row is not None and holder is quota
            named = set(quota.min) | set(quota.max or {})
            mask = np.array([n in named for n in quotas.resources], dtype=np.bool_)
            rows.append(
                {
                    "namespace": quota.namespace,
                    "name": quota.name,
                    "apiGroup": X_K8S_GROUP,
                    "parent": None,
                    "min": _amounts(quota.min),
                    "max": _amounts(quota.max or {}),
                    "runtime": None,
                    "request": None,
                    "used": _list(quotas.resources, used[row], mask) if counted and row is not None else {},
                    "pendingPods": int(pending[row]) if counted and row is not None else 0,
                    "problem": problem.message if problem is not None else None,
                }
            )
        return rows

    def figures(self) -> list[QuotaFigures]:
        """min and max as the spec states them, and used (what the quota's placed and reserved
        pods request, in the resources the spec names or the pods use), of every quota without
        a problem."""
        if not self.active:
            return []
        self.ensure()
        quotas = self.quotas
        used = self.used()
        pending = self.pending_pods()
        out: list[QuotaFigures] = []
        for row, quota in enumerate(quotas.quotas):
            if not quotas.valid[row]:
                continue
            named = np.array(
                [n in quota.min or n in (quota.max or {}) for n in quotas.resources], dtype=np.bool_
            )
            out.append(
                QuotaFigures(
                    namespace=quota.namespace,
                    name=quota.name,
                    parent="",
                    tree_id="",
                    is_parent=False,
                    fields={
                        "min": dict(quota.min),
                        "max": dict(quota.max or {}),
                        "used": _ints(quotas.resources, used[row], named | (used[row] > 0)),
                    },
                    pending_pods=int(pending[row]),
                )
            )
        return out


def nominated_requests(
    book: NamespaceBook, pod: Pod, nominated: Iterable[Pod], members: frozenset[str]
) -> tuple[ResourceList, ResourceList]:
    """CapacityScheduling's PreFilter view of the pods nominated to nodes: those of the pod's
    namespace at no lower priority, and those of namespaces whose quota is within its min.

    One pass with the amounts added as plain integers and capped once at the end: requests never
    go below 0, so the capped sum equals add_into's running cap, without its call and cap per pod.
    (Gathering each pod's vector to sum them as arrays costs more than adding its few amounts.)"""
    book.ensure()
    rows = book.quotas.rows
    namespace, priority, own_key = pod.namespace, pod.priority, pod.key
    in_quota: dict[str, int] = {}
    elsewhere: dict[str, int] = {}
    over: list[bool] | None = None
    for other in nominated:
        key = other.key
        if key == own_key or key in members:
            continue
        row = rows.get(other.namespace)
        if row is None:
            continue
        if other.namespace == namespace:
            if other.priority < priority:
                continue
            acc = in_quota
        else:
            if over is None:
                over = book.over_min().tolist()
            if over[row]:
                continue
            acc = elsewhere
        get = acc.get
        for name, amount in other.requests.items():
            acc[name] = get(name, 0) + amount
    return _capped(in_quota), _capped(elsewhere)


def _capped(amounts: dict[str, int]) -> ResourceList:
    for name, amount in amounts.items():
        if amount > MAX_AMOUNT:
            amounts[name] = MAX_AMOUNT
    return amounts
