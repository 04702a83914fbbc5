"""The quota books: what one scheduler knows of the ElasticQuotas of one API group and of the pods
they hold, kept current from pod and quota events, and the checks the scheduling cycle asks of it.

One book per API group and scheduler, shared by every profile that runs the group's plugin (as the
gang registry is): `KoordinatorBook` (koordinator_book.py) and `NamespaceBook` (namespace_book.py)
over the `QuotaBook` here. The book keeps, per quota row, three sums of pod requests on the quotas'
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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from koordpy.api.elasticquota import (
    ElasticQuota,
    PodQuota,
    is_non_preemptible,
)
from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.resources import ResourceList, add_into, format_amount, sorted_names
from koordpy.cache import Snapshot
from koordpy.quota.tree import (
    UNLIMITED,
    BoolArray,
    Int64Array,
    QuotaProblem,
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
    # its quota has a problem, or does not exist (PreEnqueue holds the pod)
    held: bool = False

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


def format_amounts(amounts: Mapping[str, int]) -> dict[str, str]:
    return {name: format_amount(name, amounts[name]) for name in sorted_names(amounts)}


def figures_text(names: Sequence[str], values: Int64Array, mask: BoolArray | None = None) -> dict[str, str]:
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


def figures_amounts(names: Sequence[str], values: Int64Array, mask: BoolArray) -> dict[str, int]:
    return {name: int(values[j]) for j, name in enumerate(names) if mask[j] and int(values[j]) < UNLIMITED}


class QuotaBook:
    """The part both API groups share: objects, pods, the sums, and dry-run views."""

    api_group: ClassVar[str] = ""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        # namespace/name -> the quota object as last seen
        self.objects: dict[str, ElasticQuota] = {}
        self.entries: dict[str, Entry] = {}
        # the keys of the entries whose quota holds them (Entry.held): few, so a gang's members can
        # be checked against them without walking the gang
        self.held: set[str] = set()
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

    def _holds_back(self, pod: Pod, row: int) -> bool:
        """Whether the pod's quota (at `row`, as `_place` found it) holds the pod."""
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
            self._keep(found)
            self._count(found, 1)
        return found

    def _keep(self, entry: Entry) -> None:
        key = entry.pod.key
        self.entries[key] = entry
        if entry.held:
            self.held.add(key)
        else:
            self.held.discard(key)

    def _make(self, pod: Pod, reserved: bool = False) -> Entry:
        if self._tree_dirty or not self.active:
            # nothing is counted while no quota exists: the first one rebuilds every entry
            return Entry(pod, "", NO_ROW, None, bool(pod.node_name), reserved, is_non_preemptible(pod))
        quota, row = self._place(pod)
        vec = self._vector(pod.requests) if row >= 0 else None
        held = self._holds_back(pod, row)
        return Entry(pod, quota, row, vec, bool(pod.node_name), reserved, is_non_preemptible(pod), held)

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
        self.held.discard(pod.key)
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
                pod, old.quota, old.row, old.vec, bool(pod.node_name), reserved, old.non_preemptible, old.held
            )
            self._keep(entry)
            if entry.holds != old.holds:
                self._count_used(old, -1)
                self._count_used(entry, 1)
            return
        if old is not None:
            self._count(old, -1)
        entry = self._make(pod, reserved)
        self._keep(entry)
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
        self.held.clear()
        for old in list(self.entries.values()):
            entry = self._make(old.pod, old.reserved)
            self._keep(entry)
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
