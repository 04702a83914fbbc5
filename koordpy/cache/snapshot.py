"""Node state as arrays: the data every filter and score works on.

Rows are node slots. A removed node's row is marked dead and reused by the next added node, so a
row index stays valid for a node's whole life. Every array is sized to `capacity` rows; only rows
where `live` is true hold a node. Scheduling cycles are synchronous, so a cycle reads these
arrays directly: nothing can change them underneath it.

Resources have stable numbers (`resource_col`). The common ones (cpu, memory, pods,
ephemeral-storage, hugepages, and an extended resource once enough nodes carry it) are dense
columns of a [rows x columns] matrix; an extended resource few nodes carry keeps its per-node
amounts in dicts, so memory grows with what the nodes carry rather than with nodes x names (a
cluster where each node has a device of its own has thousands of names). Readers ask for a
resource over rows (`allocatable_column`, `requested_column`, the `_table` forms), never for the
storage itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from koordpy.api.affinity import AffinityTerm
from koordpy.api.labels import IN, LabelSelector, Requirement
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import HostPort, Pod
from koordpy.api.resources import CPU, MAX_AMOUNT, MEMORY, PODS, is_extended_resource
from koordpy.cache.trial import Trial
from koordpy.cache.volume_index import VolumeIndex

_INITIAL_CAPACITY = 64
# node changes remembered for readers that follow them row by row (at least this many, and at
# least as many as rows); a reader further behind reads every row again
_NODE_LOG_KEPT = 4096
# request vectors remembered by their amounts
_MAPPINGS_REMEMBERED = 16384
# ... and by the identity of the pod's requests mapping (about one per pod, each kept alive while
# remembered: enough for the pods being placed and moved now, not a cluster's history)
_MAPPINGS_BY_IDENTITY = 4096
# dense request vectors (for readers) kept while their cells, summed, stay under this: with
# thousands of resource names each vector is that wide
_VECTOR_CELLS_REMEMBERED = 1 << 21
# An extended resource gets a dense column once this many nodes carry it, and at least a 32nd of
# the rows: a column costs two int64 per row, a sparse amount a dict entry (about 12 int64), so
# below that share the dict is the smaller, and a reader builds the same node-long array either way
_DENSE_CARRIERS = 16
_DENSE_SHARE = 32

# Per-node sums saturate here. A request is at most MAX_AMOUNT (2^53), so a sum below this bound
# plus one more request stays inside int64; only a node holding over 500 pods that each ask for
# more than any node has could reach it, and the consistency check recomputes sums from the pods.
_SUM_LIMIT = 1 << 62
# Below this no sum of pods a node can hold comes near _SUM_LIMIT: plain int64 arithmetic is safe,
# and only vectors at or above it take the saturating path.
_PLAIN_ARITHMETIC_BELOW = 1 << 40

# Koordinator's opt-outs from preemption: a pod carrying one is never a victim
LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"
LABEL_QUOTA_PREEMPTIBLE = "quota.scheduling.koordinator.sh/preemptible"


def preemptible(pod: Pod) -> bool:
    labels = pod.labels
    return labels.get(LABEL_DISABLE_PREEMPTIBLE) != "true" and labels.get(LABEL_QUOTA_PREEMPTIBLE) != "false"


# a test on one label value; None stands for "the node has no such label"
Predicate = Callable[[str | None], bool]


@dataclass(slots=True)
class NodeInfo:
    row: int
    node: Node
    pods: dict[str, Pod] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True, slots=True)
class PodMatcher:
    """Which pods a selector counts: a label selector within a namespace scope."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None = None

    def matches(self, pod: Pod, ns_labels: Mapping[str, str]) -> bool:
        if pod.namespace not in self.namespaces and (
            self.namespace_selector is None or not self.namespace_selector.matches(ns_labels)
        ):
            return False
        return self.selector.matches(pod.labels)

    @staticmethod
    def of_term(term: AffinityTerm) -> PodMatcher | None:
        if term.selector is None:
            return None
        return PodMatcher(term.selector, term.namespaces, term.namespace_selector)

    def anchors(self) -> tuple[tuple[str, str, str], ...]:
        """(namespace, label key, value) triples one of which every pod it matches carries: from
        its narrowest `In` requirement (matchLabels are such) in each of its namespaces. Empty when
        there is none (no `In` requirement, or a namespace selector): any pod may match."""
        if self.namespace_selector is not None or not self.namespaces:
            return ()
        narrowest: Requirement | None = None
        for requirement in self.selector.requirements:
            if requirement.operator == IN and (
                narrowest is None or len(requirement.values) < len(narrowest.values)
            ):
                narrowest = requirement
        if narrowest is None:
            return ()
        return tuple(
            (namespace, narrowest.key, value)
            for namespace in sorted(self.namespaces)
            for value in sorted(narrowest.values)
        )


class LabelColumn:
    """One node label key, dictionary-encoded: `codes[row]` is the value's code, -1 when absent."""

    __slots__ = ("_match_cache", "code_of", "codes", "values")

    def __init__(self, capacity: int) -> None:
        self.codes = np.full(capacity, -1, dtype=np.int32)
        self.values: list[str] = []
        self.code_of: dict[str, int] = {}
        self._match_cache: dict[object, tuple[int, np.ndarray, bool]] = {}

    def code(self, value: str) -> int:
        c = self.code_of.get(value)
        if c is None:
            c = len(self.values)
            self.values.append(value)
            self.code_of[value] = c
        return c

    def value_mask(self, predicate_key: object, predicate: Predicate) -> tuple[np.ndarray, bool]:
        """Evaluate `predicate(value | None)` once per distinct value, memoized by `predicate_key`.

        Returns (per-code booleans, result for a missing label)."""
        cached = self._match_cache.get(predicate_key)
        if cached is not None and cached[0] == len(self.values):
            return cached[1], cached[2]
        per_code = np.fromiter((predicate(v) for v in self.values), dtype=bool, count=len(self.values))
        missing = bool(predicate(None))
        if len(self._match_cache) > 4096:
            self._match_cache.clear()
        self._match_cache[predicate_key] = (len(self.values), per_code, missing)
        return per_code, missing

    def mask(self, rows: np.ndarray, predicate_key: object, predicate: Predicate) -> np.ndarray:
        per_code, missing = self.value_mask(predicate_key, predicate)
        codes = self.codes[rows]
        if per_code.size == 0:
            return np.full(rows.size, missing, dtype=bool)
        out: np.ndarray = per_code[np.maximum(codes, 0)]
        if missing:
            out |= codes < 0
        else:
            out &= codes >= 0
        return out


def _saturated_sums(rows: np.ndarray, values: np.ndarray, capacity: int) -> np.ndarray:
    """Per-row sums of `values` held to _SUM_LIMIT as the snapshot holds them. Each value is at
    most MAX_AMOUNT, so an int64 sum can only have wrapped where the float64 sum, exact to far
    better than the margin, is near the limit: those rows saturate."""
    sums = np.zeros((capacity, values.shape[1]), dtype=np.int64)
    approx = np.zeros((capacity, values.shape[1]), dtype=np.float64)
    np.add.at(sums, rows, values)
    np.add.at(approx, rows, values.astype(np.float64))
    return np.where(approx >= _SUM_LIMIT, _SUM_LIMIT, sums)


def _grown_codes(codes: np.ndarray, capacity: int) -> np.ndarray:
    out = np.full(capacity, -1, dtype=codes.dtype)
    out[: codes.size] = codes
    return out


def _grown(counts: np.ndarray, capacity: int) -> np.ndarray:
    out = np.zeros(capacity, dtype=counts.dtype)
    out[: counts.size] = counts
    return out


def _keys(amounts: Mapping[int, int]) -> np.ndarray:
    return np.fromiter(amounts.keys(), dtype=np.int64, count=len(amounts))


def _values(amounts: Mapping[int, int]) -> np.ndarray:
    return np.fromiter(amounts.values(), dtype=np.int64, count=len(amounts))


@dataclass(slots=True, eq=False)
class _Request:
    """A pod's requests as the resources it asks for and the amounts (`pods` counted as 1):
    placing a pod touches those cells only, however many resource names the cluster has."""

    # every resource asked for: resource numbers and amounts
    ids: np.ndarray
    id_amounts: np.ndarray
    # the dense ones as positions in the dense store, and the sparse ones as (number, amount)
    cols: np.ndarray
    amounts: np.ndarray
    sparse: tuple[tuple[int, int], ...]
    # an amount at or above _PLAIN_ARITHMETIC_BELOW: sums take the saturating path
    huge: bool
    # positions of the columns in a column-major store of `capacity` rows (add the row)
    _capacity: int = -1
    _offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def cells(self, row: int, capacity: int) -> np.ndarray:
        """Positions of the pod's cells in row `row` of the flattened column-major store."""
        if self._capacity != capacity:
            self._offsets = self.cols * capacity
            self._capacity = capacity
        out: np.ndarray = self._offsets + row
        return out


class Snapshot:
    def __init__(self) -> None:
        self.capacity = _INITIAL_CAPACITY
        self.high_water = 0
        # resource numbers, stable for the snapshot's life (plugins hold them)
        self.resource_names: list[str] = [CPU, MEMORY, PODS]
        self.resource_col: dict[str, int] = {n: i for i, n in enumerate(self.resource_names)}
        # the dense columns: a resource's position in the stores (-1: sparse), and back. The
        # [rows x positions] stores are column-major: filters and scores read one resource across
        # many nodes, and that must be a contiguous read. Each store has room for more columns
        # (doubled when full, so a new dense column rarely copies anything)
        self.dense_pos: list[int] = [0, 1, 2]
        self.dense_ids: list[int] = [0, 1, 2]
        r = len(self.dense_ids)
        self._allocatable_store = np.zeros((self.capacity, r), dtype=np.int64, order="F")
        self._requested_store = np.zeros((self.capacity, r), dtype=np.int64, order="F")
        self._requested_cells = self._requested_store.reshape(-1, order="F")
        # the sparse resources: number -> {row: amount}, non-zero amounts only
        self.sparse_allocatable: dict[int, dict[int, int]] = {}
        self.sparse_requested: dict[int, dict[int, int]] = {}
        self.nonzero_requested = np.zeros((self.capacity, 2), dtype=np.int64, order="F")
        self.live = np.zeros(self.capacity, dtype=bool)
        self.infos: list[NodeInfo | None] = [None] * self.capacity
        self.row_of: dict[str, int] = {}
        self._free_rows: list[int] = []
        self.labels: dict[str, LabelColumn] = {}
        self.namespaces: dict[str, Namespace] = {}
        # node_generation changes when any node object changes; generation on any change at all
        self.node_generation = 0
        self.generation = 0
        # the row of each node change since node_generation was _node_log_base, in order
        self._node_log: list[int] = []
        self._node_log_base = 0
        self._live_rows_cache: tuple[int, np.ndarray] = (-1, np.zeros(0, dtype=np.int64))
        self._pod_counters: dict[PodMatcher, np.ndarray] = {}
        self._counter_use: dict[PodMatcher, int] = {}
        # which counters a pod can change: those anchored on one of its (namespace, label, value)
        # triples, and those with no anchor; a pod is checked against those only
        self._anchored_counters: dict[tuple[str, str, str], dict[PodMatcher, None]] = {}
        self._unanchored_counters: dict[PodMatcher, None] = {}
        # the pods on the nodes by (namespace, label, value), kept once a counter first needs it: a
        # new counter then counts the pods carrying its anchor, not every pod
        self._pods_by_label: dict[tuple[str, str, str], dict[tuple[int, str], Pod]] | None = None
        # existing pods' affinity terms: (kind, term, weight) -> pods carrying it per row
        self.term_counts: dict[tuple[str, AffinityTerm, int], np.ndarray] = {}
        # bumps when term_counts gains or loses a key or namespace labels change: whatever can change
        # which existing pods' terms match a given pod (keys caches of those matches)
        self.term_match_generation = 0
        self.host_ports: dict[tuple[str, int], dict[int, list[str]]] = {}
        # preemptible pods per row, by priority: preemption tells the nodes with nothing it may
        # evict without walking their pods. Lists: every pod add and remove, trials' too, updates
        # one, and a list item is the cheapest to update; a reader builds an array once
        self.preemptible_counts: dict[int, list[int]] = {}
        self.images: dict[str, dict[int, int]] = {}
        # the claims and inline disks of the pods on each row (only pods with volumes are in it)
        self.volumes = VolumeIndex()
        self._vec_cache: dict[tuple[tuple[str, int], ...], np.ndarray] = {}
        self._vec_cache_width = len(self.resource_names)
        self._vec_of_mapping: dict[int, tuple[Mapping[str, int], np.ndarray]] = {}
        self._vec_cells = 0
        # what placing a pod adds, by the requests' content and by the mapping's identity; column
        # numbers never change, so these stay valid when resources are added
        self._requests: dict[tuple[tuple[str, int], ...], _Request] = {}
        self._request_of_mapping: dict[int, tuple[Mapping[str, int], _Request]] = {}
        self._open_trials: list[Trial] = []

    # ----------------------------------------------------------------------------- structure
    @property
    def node_count(self) -> int:
        return len(self.row_of)

    def live_rows(self) -> np.ndarray:
        """Rows holding a node, in row order (stable across cycles of one node generation)."""
        gen, rows = self._live_rows_cache
        if gen != self.node_generation:
            rows = np.flatnonzero(self.live[: self.high_water]).astype(np.int64)
            self._live_rows_cache = (self.node_generation, rows)
        return rows

    def _node_changed(self, row: int) -> None:
        self.node_generation += 1
        log = self._node_log
        log.append(row)
        if len(log) > 2 * max(_NODE_LOG_KEPT, self.high_water):
            dropped = len(log) // 2
            del log[:dropped]
            self._node_log_base += dropped

    def node_rows_changed_since(self, generation: int) -> list[int] | None:
        """The rows whose node came, went or was replaced since node_generation was `generation`, in
        order and possibly repeated; None when that is no longer known (too long ago, or the
        snapshot was rebuilt): the reader then reads every row again."""
        log = self._node_log
        start = generation - self._node_log_base
        end = self._node_log_base + len(log)
        if start < 0 or generation > end or end != self.node_generation:
            return None
        return log[start:]

    def info(self, row: int) -> NodeInfo:
        info = self.infos[row]
        assert info is not None
        return info

    def node_name(self, row: int) -> str:
        return self.info(row).node.name

    def _install(self, allocatable_store: np.ndarray, requested_store: np.ndarray) -> None:
        self._allocatable_store = allocatable_store
        self._requested_store = requested_store
        self._requested_cells = requested_store.reshape(-1, order="F")

    def _grow_rows(self) -> None:
        new = self.capacity * 2
        width = len(self.dense_ids)
        # every new array is built before any is installed: running out of memory half way leaves
        # the snapshot as it was, never with arrays of different lengths
        stores = []
        for old in (self._allocatable_store, self._requested_store):
            arr = np.zeros((new, old.shape[1]), dtype=np.int64, order="F")
            # columns past the live ones are zero: copying them would only touch memory
            arr[: self.capacity, :width] = old[:, :width]
            stores.append(arr)
        nonzero = np.zeros((new, 2), dtype=np.int64, order="F")
        nonzero[: self.capacity] = self.nonzero_requested
        live = np.zeros(new, dtype=bool)
        live[: self.capacity] = self.live
        label_codes = {key: _grown_codes(col.codes, new) for key, col in self.labels.items()}
        counters = {matcher: _grown(counts, new) for matcher, counts in self._pod_counters.items()}
        terms = {term_key: _grown(counts, new) for term_key, counts in self.term_counts.items()}
        by_priority = {
            prio: counts + [0] * (new - len(counts)) for prio, counts in self.preemptible_counts.items()
        }
        self.infos.extend([None] * (new - self.capacity))
        self.capacity = new
        self._install(stores[0], stores[1])
        self.nonzero_requested = nonzero
        self.live = live
        for key, col in self.labels.items():
            col.codes = label_codes[key]
        self._pod_counters.update(counters)
        self.term_counts.update(terms)
        self.preemptible_counts.update(by_priority)

    def resource_index(self, name: str) -> int:
        """The number of a resource, adding it (zero everywhere) the first time it is seen."""
        col = self.resource_col.get(name)
        if col is not None:
            return col
        col = len(self.resource_names)
        if is_extended_resource(name):
            self.sparse_allocatable[col] = {}
            self.sparse_requested[col] = {}
            self.dense_pos.append(-1)
        else:
            # built before the name is known: a failure leaves the names as they were
            self._add_dense_column(col)
        self.resource_names.append(name)
        self.resource_col[name] = col
        self._clear_vectors()
        return col

    def _add_dense_column(self, col: int) -> None:
        """Give resource `col` a dense column: a new one, or one taking over its sparse amounts."""
        pos = len(self.dense_ids)
        if pos == self._allocatable_store.shape[1]:
            # full: double the room, so n columns cost O(n) copies of a column in all. Both stores
            # are built before either is installed: a failure half way leaves them as they were
            widened = []
            for old in (self._allocatable_store, self._requested_store):
                arr = np.zeros((self.capacity, 2 * pos), dtype=np.int64, order="F")
                arr[:, :pos] = old
                widened.append(arr)
            self._install(widened[0], widened[1])
        for store, sparse in (
            (self._allocatable_store, self.sparse_allocatable),
            (self._requested_store, self.sparse_requested),
        ):
            amounts = sparse.pop(col, None)
            if amounts:
                store[_keys(amounts), pos] = _values(amounts)
        if col < len(self.dense_pos):
            self.dense_pos[col] = pos
            # the pods' requests split into dense and sparse parts differently now
            self._requests.clear()
            self._request_of_mapping.clear()
        else:
            self.dense_pos.append(pos)
        self.dense_ids.append(col)

    def _densify_if_common(self, col: int) -> None:
        carriers = len(self.sparse_allocatable[col])
        if carriers >= _DENSE_CARRIERS and carriers * _DENSE_SHARE >= self.capacity:
            # out of memory nothing has changed: the resource stays sparse, with the same amounts
            with contextlib.suppress(MemoryError):
                self._add_dense_column(col)

    def _clear_vectors(self) -> None:
        self._vec_cache.clear()
        self._vec_of_mapping.clear()
        self._vec_cells = 0

    def _request(self, requests: Mapping[str, int]) -> _Request:
        """What placing a pod with these requests adds: its resources (added the first time a name
        is seen) and amounts."""
        known = self._request_of_mapping.get(id(requests))
        if known is not None and known[0] is requests:
            return known[1]
        key = tuple(sorted(requests.items()))
        found = self._requests.get(key)
        if found is None:
            amounts: dict[int, int] = {}
            for name, value in requests.items():
                col = self.resource_index(name)
                # views saturate amounts at MAX_AMOUNT; a mapping built elsewhere is held to it too
                amount = min(max(int(value), 0), MAX_AMOUNT)
                if amount:
                    amounts[col] = amount
            amounts[self.resource_col[PODS]] = 1
            pos = self.dense_pos
            dense = {pos[col]: amount for col, amount in amounts.items() if pos[col] >= 0}
            found = _Request(
                _keys(amounts),
                _values(amounts),
                _keys(dense),
                _values(dense),
                tuple((col, amount) for col, amount in amounts.items() if pos[col] < 0),
                max(amounts.values()) >= _PLAIN_ARITHMETIC_BELOW,
            )
            if len(self._requests) >= _MAPPINGS_REMEMBERED:
                self._requests.clear()
            self._requests[key] = found
        if len(self._request_of_mapping) >= _MAPPINGS_BY_IDENTITY:
            self._request_of_mapping.clear()
        self._request_of_mapping[id(requests)] = (requests, found)
        return found

    def request_cells(self, requests: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """A pod's requests as (resource numbers, amounts), non-zero amounts only, `pods` counted
        as 1: as wide as what the pod asks for, however many names the cluster has."""
        req = self._request(requests)
        return req.ids, req.id_amounts

    def request_vector(self, requests: Mapping[str, int]) -> np.ndarray:
        """A pod's requests as a row over every resource number, `pods` counted as 1 (as wide as
        the cluster has names: `request_cells` is the narrow form)."""
        # every placement and every trial change asks this for a pod's own (immutable) requests:
        # known mappings are found by identity, the entry holding the mapping so its id stays its own
        known = self._vec_of_mapping.get(id(requests))
        if known is not None and known[0] is requests:
            return known[1]
        key = tuple(sorted(requests.items()))
        if self._vec_cache_width != len(self.resource_names):
            self._clear_vectors()
            self._vec_cache_width = len(self.resource_names)
        vec = self._vec_cache.get(key)
        if vec is None:
            for name in requests:
                self.resource_index(name)
            vec = np.zeros(len(self.resource_names), dtype=np.int64)
            for name, value in requests.items():
                # views saturate amounts at MAX_AMOUNT; a mapping built elsewhere is held to it too
                vec[self.resource_col[name]] = min(max(int(value), 0), MAX_AMOUNT)
            vec[self.resource_col[PODS]] = 1
            vec.setflags(write=False)
            self._vec_cache_width = len(self.resource_names)
            if self._vec_cells + vec.size > _VECTOR_CELLS_REMEMBERED:
                self._clear_vectors()
            self._vec_cache[key] = vec
            self._vec_cells += vec.size
        if len(self._vec_of_mapping) >= _MAPPINGS_REMEMBERED:
            self._vec_of_mapping.clear()
        self._vec_of_mapping[id(requests)] = (requests, vec)
        return vec

    # ----------------------------------------------------------------------------- resource reads
    def is_dense(self, col: int) -> bool:
        return self.dense_pos[col] >= 0

    def allocatable_column(self, col: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Resource `col`'s allocatable on `rows` (None: every row below high_water, possibly a
        view of the store: read it, never write it)."""
        return self._column(self._allocatable_store, self.sparse_allocatable, col, rows)

    def requested_column(self, col: int, rows: np.ndarray | None = None) -> np.ndarray:
        """What the pods on `rows` request of resource `col` (None: as in allocatable_column)."""
        return self._column(self._requested_store, self.sparse_requested, col, rows)

    def _column(
        self, store: np.ndarray, sparse: dict[int, dict[int, int]], col: int, rows: np.ndarray | None
    ) -> np.ndarray:
        pos = self.dense_pos[col]
        if pos >= 0:
            out: np.ndarray = store[: self.high_water, pos] if rows is None else store[rows, pos]
            return out
        amounts = sparse[col]
        if rows is not None and (rows.size * 4 < self.high_water or not amounts):
            get = amounts.get
            return np.fromiter((get(r, 0) for r in rows.tolist()), dtype=np.int64, count=rows.size)
        # rows may reach past high_water into the store's spare capacity: those hold nothing
        full = np.zeros(self.capacity, dtype=np.int64)
        if amounts:
            full[_keys(amounts)] = _values(amounts)
        return full[: self.high_water] if rows is None else full[rows]

    def allocatable_table(self, rows: np.ndarray, cols: Iterable[int]) -> np.ndarray:
        """[len(rows) x len(cols)]: the allocatable of each resource of `cols` on each row."""
        return self._table(self._allocatable_store, self.sparse_allocatable, rows, cols)

    def requested_table(self, rows: np.ndarray, cols: Iterable[int]) -> np.ndarray:
        """[len(rows) x len(cols)]: what the pods on each row request of each resource of `cols`."""
        return self._table(self._requested_store, self.sparse_requested, rows, cols)

    def _table(
        self, store: np.ndarray, sparse: dict[int, dict[int, int]], rows: np.ndarray, cols: Iterable[int]
    ) -> np.ndarray:
        cols = [int(c) for c in cols]
        positions = [self.dense_pos[c] for c in cols]
        if all(p >= 0 for p in positions):
            out: np.ndarray = store[np.ix_(rows, np.array(positions, dtype=np.int64))]
            return out
        table = np.zeros((rows.size, len(cols)), dtype=np.int64)
        for j, col in enumerate(cols):
            table[:, j] = self._column(store, sparse, col, rows)
        return table

    def free_on(self, row: int, cols: Iterable[int]) -> np.ndarray:
        """Allocatable minus requested of each resource of `cols` on one row."""
        at = np.array([row], dtype=np.int64)
        cols = list(cols)
        free: np.ndarray = (self.allocatable_table(at, cols) - self.requested_table(at, cols))[0]
        return free

    def carried_counts(self, excluded: Iterable[int] = ()) -> np.ndarray:
        """Per row below high_water, how many resources it has allocatable of (excluded aside)."""
        hw = self.high_water
        skip = {int(c) for c in excluded}
        kept = [pos for pos, col in enumerate(self.dense_ids) if col not in skip]
        counts: np.ndarray = np.count_nonzero(self._allocatable_store[:hw, kept] > 0, axis=1).astype(np.int64)
        for col, amounts in self.sparse_allocatable.items():
            if amounts and col not in skip:
                counts[_keys(amounts)] += _values(amounts) > 0
        return counts

    @property
    def dense_allocatable(self) -> np.ndarray:
        """The dense resources' allocatable store, [rows x positions] (`dense_pos` maps a resource
        to its position); writing it changes the snapshot."""
        return self._allocatable_store[:, : len(self.dense_ids)]

    @property
    def dense_requested(self) -> np.ndarray:
        """As `dense_allocatable`, for what the pods request."""
        return self._requested_store[:, : len(self.dense_ids)]

    @property
    def allocatable(self) -> np.ndarray:
        """Every row and every resource, dense and read-only: O(rows x names), for checks and tests
        (readers use allocatable_column and allocatable_table)."""
        return self._matrix(self._allocatable_store, self.sparse_allocatable)

    @property
    def requested(self) -> np.ndarray:
        """As `allocatable`, for what the pods request."""
        return self._matrix(self._requested_store, self.sparse_requested)

    def _matrix(self, store: np.ndarray, sparse: dict[int, dict[int, int]]) -> np.ndarray:
        out = np.zeros((self.capacity, len(self.resource_names)), dtype=np.int64, order="F")
        out[:, self.dense_ids] = store[:, : len(self.dense_ids)]
        for col, amounts in sparse.items():
            if amounts:
                out[_keys(amounts), col] = _values(amounts)
        out.setflags(write=False)
        return out

    def label_column(self, key: str) -> LabelColumn:
        col = self.labels.get(key)
        if col is None:
            col = LabelColumn(self.capacity)
            self.labels[key] = col
        return col

    # ----------------------------------------------------------------------------- nodes
    def add_node(self, node: Node) -> int:
        if node.name in self.row_of:
            self.update_node(node)
            return self.row_of[node.name]
        # what can fail (widening, growing, converting amounts) happens before the node is entered
        alloc = self._allocatable_cells(node)
        if not self._free_rows and self.high_water == self.capacity:
            self._grow_rows()
        if self._free_rows:
            # a freed row was cleared when its node went (remove_node)
            row = self._free_rows.pop()
        else:
            # a row never used is zero everywhere; writing it would touch every column's memory
            row = self.high_water
            self.high_water += 1
        self.row_of[node.name] = row
        self.infos[row] = NodeInfo(row, node)
        self.live[row] = True
        self._write_node(row, node, None, alloc)
        self._node_changed(row)
        self.generation += 1
        return row

    def _allocatable_cells(self, node: Node) -> tuple[np.ndarray, np.ndarray]:
        """The node's non-zero allocatable: (resource numbers, amounts), numbers added first for
        new names. Every other resource of its row is zero."""
        amounts: dict[int, int] = {}
        for name, amount in node.allocatable.items():
            col = self.resource_index(name)
            value = min(max(int(amount), 0), MAX_AMOUNT)
            if value:
                amounts[col] = value
        if PODS not in node.allocatable:
            # a node that states no pod capacity behaves as the kubelet default
            amounts[self.resource_col[PODS]] = 110
        cols = np.fromiter(amounts, dtype=np.int64, count=len(amounts))
        return cols, np.fromiter(amounts.values(), dtype=np.int64, count=len(amounts))

    def _write_node(
        self, row: int, node: Node, old: Node | None, alloc: tuple[np.ndarray, np.ndarray]
    ) -> None:
        pos = self.dense_pos
        store = self._allocatable_store
        sparse = self.sparse_allocatable
        if old is not None:
            for col in self._allocatable_cells(old)[0].tolist():
                if pos[col] >= 0:
                    store[row, pos[col]] = 0
                else:
                    sparse[col].pop(row, None)
        grown: list[int] = []
        for col, amount in zip(alloc[0].tolist(), alloc[1].tolist(), strict=True):
            if pos[col] >= 0:
                store[row, pos[col]] = amount
            else:
                sparse[col][row] = amount
                grown.append(col)
        for col in grown:
            self._densify_if_common(col)
        if old is not None:
            for key in old.labels:
                if key not in node.labels:
                    self.labels[key].codes[row] = -1
            for img in old.images:
                for name in img.names:
                    self.images.get(name, {}).pop(row, None)
        for label, value in node.labels.items():
            col = self.label_column(label)
            col.codes[row] = col.code(value)
        for img in node.images:
            for name in img.names:
                self.images.setdefault(name, {})[row] = img.size_bytes

    def update_node(self, node: Node) -> None:
        row = self.row_of.get(node.name)
        if row is None:
            self.add_node(node)
            return
        alloc = self._allocatable_cells(node)
        info = self.info(row)
        old = info.node
        info.node = node
        self._write_node(row, node, old, alloc)
        self._node_changed(row)
        self.generation += 1

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node; returns the pods that were on it (the caller decides their fate)."""
        row = self.row_of.pop(name, None)
        if row is None:
            return []
        info = self.info(row)
        pods = list(info.pods.values())
        touched = {col for pod in pods for col, _ in self._request(pod.requests).sparse}
        for pod in pods:
            self.remove_pod(pod, row)
        for col in touched:
            # saturated sums may leave a remainder; the row is for the next node, clean
            self.sparse_requested.get(col, {}).pop(row, None)
        for col in self._allocatable_cells(info.node)[0].tolist():
            self.sparse_allocatable.get(col, {}).pop(row, None)
        for key in info.node.labels:
            self.labels[key].codes[row] = -1
        for img in info.node.images:
            for n in img.names:
                self.images.get(n, {}).pop(row, None)
        self.live[row] = False
        self.infos[row] = None
        self._allocatable_store[row] = 0
        self._requested_store[row] = 0
        self.nonzero_requested[row] = 0
        self._free_rows.append(row)
        self._node_changed(row)
        self.generation += 1
        return pods

    # ----------------------------------------------------------------------------- pods
    def trial(self) -> Trial:
        """A tentative change to the pods on nodes, undone when its `with` block ends (see
        `koordpy.cache.trial`). Every what-if goes through one; `add_pod` and `remove_pod` are for
        the cache, which records what is really placed."""
        return Trial(self, self._open_trials)

    @property
    def in_trial(self) -> bool:
        return bool(self._open_trials)

    def add_pod(self, pod: Pod, row: int) -> None:
        info = self.info(row)
        # the requests first: a resource seen for the first time widens the arrays, and nothing is
        # changed yet if that fails
        req = self._request(pod.requests)
        info.pods[pod.key] = pod
        if req.huge or max(pod.nonzero_cpu, pod.nonzero_memory) >= _PLAIN_ARITHMETIC_BELOW:
            self._saturating_add(row, req, pod, 1)
        else:
            self._requested_cells[req.cells(row, self.capacity)] += req.amounts
            self.nonzero_requested[row, 0] += pod.nonzero_cpu
            self.nonzero_requested[row, 1] += pod.nonzero_memory
            for col, amount in req.sparse:
                amounts = self.sparse_requested[col]
                amounts[row] = amounts.get(row, 0) + amount
        self._index_pod(pod, row, 1)
        self.generation += 1

    def _saturating_add(self, row: int, req: _Request, pod: Pod, sign: int) -> None:
        """`requested[row] += sign * requests` held within [0, _SUM_LIMIT]: no int64 wrap-around
        for any request (see _SUM_LIMIT)."""
        cells = req.cells(row, self.capacity)
        self._requested_cells[cells] = np.clip(
            self._requested_cells[cells] + sign * req.amounts, 0, _SUM_LIMIT
        )
        for col, amount in req.sparse:
            amounts = self.sparse_requested[col]
            total = min(max(amounts.get(row, 0) + sign * amount, 0), _SUM_LIMIT)
            if total:
                amounts[row] = total
            else:
                amounts.pop(row, None)
        nonzero = np.array([min(pod.nonzero_cpu, MAX_AMOUNT), min(pod.nonzero_memory, MAX_AMOUNT)])
        self.nonzero_requested[row] = np.clip(self.nonzero_requested[row] + sign * nonzero, 0, _SUM_LIMIT)

    def remove_pod(self, pod: Pod, row: int) -> Pod | None:
        """Take the pod with `pod.key` off the node; returns the pod object that was there (whose
        requests are the ones given back), None when there was none."""
        info = self.info(row)
        stored = info.pods.pop(pod.key, None)
        if stored is None:
            return None
        req = self._request(stored.requests)
        if req.huge or max(stored.nonzero_cpu, stored.nonzero_memory) >= _PLAIN_ARITHMETIC_BELOW:
            self._saturating_add(row, req, stored, -1)
        else:
            self._requested_cells[req.cells(row, self.capacity)] -= req.amounts
            self.nonzero_requested[row, 0] -= stored.nonzero_cpu
            self.nonzero_requested[row, 1] -= stored.nonzero_memory
            for col, amount in req.sparse:
                amounts = self.sparse_requested[col]
                left = amounts.get(row, 0) - amount
                if left:
                    amounts[row] = left
                else:
                    del amounts[row]
        self._index_pod(stored, row, -1)
        self.generation += 1
        return stored

    def _index_pod(self, pod: Pod, row: int, delta: int) -> None:
        by_label = self._pods_by_label
        if by_label is not None:
            namespace, at = pod.namespace, (row, pod.key)
            for key, value in pod.labels.items():
                triple = (namespace, key, value)
                if delta > 0:
                    postings = by_label.get(triple)
                    if postings is None:
                        postings = by_label[triple] = {}
                    postings[at] = pod
                else:
                    postings = by_label.get(triple)
                    if postings is not None:
                        postings.pop(at, None)
                        if not postings:
                            del by_label[triple]
        if self._pod_counters:
            counters = self._pod_counters
            ns_labels = self.namespace_labels(pod.namespace)
            for matcher in self._unanchored_counters:
                if matcher.matches(pod, ns_labels):
                    counters[matcher][row] += delta
            if self._anchored_counters:
                anchored = self._anchored_counters
                namespace = pod.namespace
                # a pod has one value per key: at most one of a counter's anchors is the pod's
                for key, value in pod.labels.items():
                    matchers = anchored.get((namespace, key, value))
                    if matchers:
                        for matcher in matchers:
                            if matcher.matches(pod, ns_labels):
                                counters[matcher][row] += delta
        if pod.has_pod_affinity:
            for kind, terms in (
                ("affinity", ((t, 0) for t in pod.required_affinity)),
                ("anti", ((t, 0) for t in pod.required_anti_affinity)),
                ("pref-affinity", ((w.term, w.weight) for w in pod.preferred_affinity)),
                ("pref-anti", ((w.term, w.weight) for w in pod.preferred_anti_affinity)),
            ):
                for term, weight in terms:
                    term_key = (kind, term, weight)
                    carried = self.term_counts.get(term_key)
                    if carried is None:
                        carried = np.zeros(self.capacity, dtype=np.int32)
                        self.term_counts[term_key] = carried
                        self.term_match_generation += 1
                    carried[row] += delta
                    if delta < 0 and not carried.any():
                        del self.term_counts[term_key]
                        self.term_match_generation += 1
        labels = pod.labels
        if not labels or preemptible(pod):
            by_priority = self.preemptible_counts.get(pod.priority)
            if by_priority is None:
                by_priority = self.preemptible_counts[pod.priority] = [0] * self.capacity
            by_priority[row] += delta
        if pod.volumes:
            self.volumes.update(pod, row, delta)
        for port in pod.host_ports:
            by_row = self.host_ports.setdefault((port.protocol, port.port), {})
            ips = by_row.setdefault(row, [])
            if delta > 0:
                ips.append(port.ip)
            else:
                ips.remove(port.ip)
                if not ips:
                    del by_row[row]

    # ----------------------------------------------------------------------------- consistency
    def problems(self, placed: Mapping[str, str]) -> list[str]:
        """What does not agree in the snapshot, or with `placed` (pod key -> node name, the cache's
        record of the pods on known nodes); empty when consistent. Reads everything: for the
        periodic check, not for a cycle."""
        found: list[str] = []
        width = len(self.resource_names)
        dense = len(self.dense_ids)
        if self.nonzero_requested.shape != (self.capacity, 2):
            found.append(
                f"nonzero_requested has shape {self.nonzero_requested.shape}, expected {(self.capacity, 2)}"
            )
        if self.live.shape != (self.capacity,) or len(self.infos) != self.capacity:
            found.append(
                f"{len(self.infos)} node slots and {self.live.size} live flags for {self.capacity} rows"
            )
        for key, col in self.labels.items():
            if col.codes.shape != (self.capacity,):
                found.append(f"label column {key} has {col.codes.size} rows, expected {self.capacity}")
        for attr, store in (("allocatable", self._allocatable_store), ("requested", self._requested_store)):
            if store.shape[0] != self.capacity or store.shape[1] < dense:
                found.append(
                    f"the {attr} store has shape {store.shape} for {self.capacity} rows,"
                    f" {dense} dense columns"
                )
        if not np.may_share_memory(self._requested_cells, self._requested_store):
            found.append("the requested cells are not a view of their store")
        sparse_ids = [col for col in range(width) if col >= len(self.dense_pos) or self.dense_pos[col] < 0]
        if (
            len(self.dense_pos) != width
            or [self.dense_pos[col] for col in self.dense_ids] != list(range(dense))
            or dense + len(sparse_ids) != width
            or set(self.sparse_allocatable) != set(sparse_ids)
            or set(self.sparse_requested) != set(sparse_ids)
        ):
            found.append(f"the {width} resources are not each either a dense column or sparse")
        if found:
            return found  # the rest reads the arrays by row
        for name, row in self.row_of.items():
            info = self.infos[row] if 0 <= row < self.capacity else None
            if info is None or info.node.name != name or not self.live[row]:
                found.append(f"node {name}: row {row} does not hold it")
        if int(self.live.sum()) != len(self.row_of):
            found.append(f"{int(self.live.sum())} live rows for {len(self.row_of)} nodes")
        rows = self.live_rows()
        # cells are compared where a node or pod puts an amount, and every stored non-zero amount
        # must be one of those: no [rows x resources] copy is made
        alloc_rows: list[np.ndarray] = []
        alloc_cols: list[np.ndarray] = []
        alloc_amounts: list[np.ndarray] = []
        cell_rows: list[np.ndarray] = []
        cell_cols: list[np.ndarray] = []
        cell_amounts: list[np.ndarray] = []
        pod_rows: list[int] = []
        nonzero: list[tuple[int, int]] = []
        for row in rows.tolist():
            info = self.infos[row]
            if info is None:
                continue
            cols, amounts = self._allocatable_cells(info.node)
            alloc_rows.append(np.full(cols.size, row, dtype=np.int64))
            alloc_cols.append(cols)
            alloc_amounts.append(amounts)
            for key, pod in info.pods.items():
                if placed.get(key) != info.name:
                    found.append(f"pod {key} is on node {info.name} in the snapshot only")
                req = self._request(pod.requests)
                cell_rows.append(np.full(req.ids.size, row, dtype=np.int64))
                cell_cols.append(req.ids)
                cell_amounts.append(req.id_amounts)
                pod_rows.append(row)
                nonzero.append((min(pod.nonzero_cpu, MAX_AMOUNT), min(pod.nonzero_memory, MAX_AMOUNT)))
        if len(pod_rows) != sum(1 for node in placed.values() if node in self.row_of):
            found.append("the cache places pods the snapshot does not hold")
        if self._pods_by_label is not None:
            indexed = {triple: set(postings) for triple, postings in self._pods_by_label.items()}
            if indexed != {triple: set(postings) for triple, postings in self._index_by_label().items()}:
                found.append("the pods by label differ from the pods on the nodes")
        expected_volumes = VolumeIndex.of((row, self.info(row).pods.values()) for row in rows.tolist())
        if expected_volumes.state() != self.volumes.state():
            found.append("the volume index differs from the pods on the nodes")
        alloc_differs = self._cells_differ(
            self._allocatable_store, self.sparse_allocatable, rows, alloc_rows, alloc_cols, alloc_amounts
        )
        differs = self._cells_differ(
            self._requested_store, self.sparse_requested, rows, cell_rows, cell_cols, cell_amounts
        )
        index = np.array(pod_rows, dtype=np.int64)
        expected = _saturated_sums(index, np.array(nonzero, dtype=np.int64).reshape(-1, 2), self.capacity)
        for at in np.flatnonzero(alloc_differs).tolist():
            found.append(f"node {self.info(int(rows[at])).name}: allocatable differs from its node object")
        for label, bad in (
            ("requested", differs),
            ("non-zero requested", (self.nonzero_requested[rows] != expected[rows]).any(axis=1)),
        ):
            for at in np.flatnonzero(bad).tolist():
                info = self.info(int(rows[at]))
                found.append(f"node {info.name}: {label} differs from the sum of its {len(info.pods)} pods")
        dead = np.ones(self.capacity, dtype=bool)
        dead[rows] = False
        for attr, store, sparse in (
            ("allocatable", self._allocatable_store, self.sparse_allocatable),
            ("requested", self._requested_store, self.sparse_requested),
        ):
            held = np.flatnonzero(dead & store[:, :dense].any(axis=1)).tolist()
            held += [
                r for amounts in sparse.values() for r in amounts if r < 0 or r >= self.capacity or dead[r]
            ]
            if held:
                found.append(f"{len(held)} {attr} amount(s) on rows holding no node")
        return found

    def _stored_cells(
        self, store: np.ndarray, sparse: dict[int, dict[int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every non-zero amount held: (rows, resource numbers, amounts)."""
        dense_rows, positions = np.nonzero(store[:, : len(self.dense_ids)])
        rows = [dense_rows.astype(np.int64)]
        cols = [np.array(self.dense_ids, dtype=np.int64)[positions]]
        amounts = [store[dense_rows, positions]]
        for col, held in sparse.items():
            if held:
                rows.append(_keys(held))
                cols.append(np.full(len(held), col, dtype=np.int64))
                amounts.append(_values(held))
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(amounts)

    def _cells_differ(
        self,
        store: np.ndarray,
        sparse: dict[int, dict[int, int]],
        rows: np.ndarray,
        cell_rows: list[np.ndarray],
        cell_cols: list[np.ndarray],
        cell_amounts: list[np.ndarray],
    ) -> np.ndarray:
        """For each of `rows`: whether the amounts held on it differ from the saturated sums of the
        given cells (row, resource number, amount)."""
        width = max(len(self.resource_names), 1)
        differs = np.zeros(rows.size, dtype=bool)
        position = np.full(self.capacity, -1, dtype=np.int64)
        position[rows] = np.arange(rows.size)
        if cell_rows:
            flat = np.concatenate(cell_rows) * width + np.concatenate(cell_cols)
            amounts = np.concatenate(cell_amounts)
            cells, inverse = np.unique(flat, return_inverse=True)
            sums = np.zeros(cells.size, dtype=np.int64)
            np.add.at(sums, inverse, amounts)
            approx = np.bincount(inverse, weights=amounts.astype(np.float64), minlength=cells.size)
            sums = np.where(approx >= _SUM_LIMIT, _SUM_LIMIT, sums)
            keep = sums != 0
            expected_cells, expected_sums = cells[keep], sums[keep]
        else:
            expected_cells = expected_sums = np.zeros(0, dtype=np.int64)
        held_rows, held_cols, held_amounts = self._stored_cells(store, sparse)
        on_live = position[held_rows] >= 0
        held_flat = held_rows[on_live] * width + held_cols[on_live]
        order = np.argsort(held_flat, kind="stable")
        held_flat, held_amounts = held_flat[order], held_amounts[on_live][order]
        union = np.union1d(expected_cells, held_flat)
        want = np.zeros(union.size, dtype=np.int64)
        have = np.zeros(union.size, dtype=np.int64)
        want[np.searchsorted(union, expected_cells)] = expected_sums
        have[np.searchsorted(union, held_flat)] = held_amounts
        wrong = union[want != have] // width
        differs[position[wrong]] = True
        return differs

    def rebuild(self, nodes: Mapping[int, Node], pods: Mapping[int, Iterable[Pod]]) -> None:
        """Recompute every array and index from records: `nodes` by the row each keeps (rows stay
        valid for a node's life, and plugins hold them), `pods` by row. Resource columns keep their
        order, so column numbers held elsewhere stay right; generations only move forward."""
        if self.in_trial:
            raise RuntimeError("the snapshot cannot be rebuilt while a trial is open")
        top = max(nodes, default=-1) + 1
        capacity = max(_INITIAL_CAPACITY, self.capacity)
        while capacity < top:
            capacity *= 2
        generations = (self.node_generation, self.generation, self.term_match_generation)
        names, namespaces = list(self.resource_names), self.namespaces
        Snapshot.__init__(self)
        # a fresh snapshot starts with the first names; the others are added back in their order
        for name in names:
            self.resource_index(name)
        self.capacity = _INITIAL_CAPACITY
        while self.capacity < capacity:
            self._grow_rows()
        self.namespaces = namespaces
        self.high_water = max(top, 0)
        for row, node in sorted(nodes.items()):
            self.row_of[node.name] = row
            self.infos[row] = NodeInfo(row, node)
            self.live[row] = True
            self._write_node(row, node, None, self._allocatable_cells(node))
        self._free_rows = [row for row in range(self.high_water - 1, -1, -1) if not self.live[row]]
        for row, placed in pods.items():
            for pod in placed:
                self.add_pod(pod, row)
        node_generation, generation, term_match_generation = generations
        self.node_generation = node_generation + 1
        # the rows were laid out anew: what changed before is no guide to them
        self._node_log.clear()
        self._node_log_base = self.node_generation
        self.generation = max(generation, self.generation) + 1
        self.term_match_generation = term_match_generation + 1

    # ----------------------------------------------------------------------------- queries
    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self.namespaces.get(namespace)
        if ns is None:
            ns = Namespace.implicit(namespace)
            self.namespaces[namespace] = ns
        return ns.labels

    def set_namespace(self, ns: Namespace) -> None:
        self.namespaces[ns.name] = ns
        # namespace labels feed namespace selectors: counters must be rebuilt
        self._pod_counters.clear()
        self._counter_use.clear()
        self._anchored_counters.clear()
        self._unanchored_counters.clear()
        self.term_match_generation += 1
        self.generation += 1

    def pod_count_by_row(self, matcher: PodMatcher) -> np.ndarray:
        """Number of pods on each row matched by `matcher`; kept up to date incrementally."""
        counts = self._pod_counters.get(matcher)
        if counts is None:
            anchors = matcher.anchors()
            counts = self._count_pods(matcher, anchors)
            if len(self._pod_counters) >= 256:
                # drop the least used counters so per-pod upkeep stays small
                for stale, _ in sorted(self._counter_use.items(), key=lambda kv: kv[1])[:128]:
                    self._drop_counter(stale)
            self._pod_counters[matcher] = counts
            if anchors:
                for anchor in anchors:
                    self._anchored_counters.setdefault(anchor, {})[matcher] = None
            else:
                self._unanchored_counters[matcher] = None
        self._counter_use[matcher] = self._counter_use.get(matcher, 0) + 1
        return counts

    def _count_pods(self, matcher: PodMatcher, anchors: tuple[tuple[str, str, str], ...]) -> np.ndarray:
        """A new counter's counts: from the pods carrying one of its anchors when it has any (every
        pod it matches carries one, and at most one), else from every pod."""
        counts = np.zeros(self.capacity, dtype=np.int32)
        if anchors:
            if self._pods_by_label is None:
                self._pods_by_label = self._index_by_label()
            for anchor in anchors:
                for (row, _), pod in self._pods_by_label.get(anchor, {}).items():
                    if matcher.matches(pod, self.namespace_labels(pod.namespace)):
                        counts[row] += 1
            return counts
        for row in self.live_rows():
            info = self.infos[row]
            assert info is not None
            for pod in info.pods.values():
                if matcher.matches(pod, self.namespace_labels(pod.namespace)):
                    counts[row] += 1
        return counts

    def _index_by_label(self) -> dict[tuple[str, str, str], dict[tuple[int, str], Pod]]:
        by_label: dict[tuple[str, str, str], dict[tuple[int, str], Pod]] = {}
        for row in self.live_rows().tolist():
            info = self.infos[row]
            assert info is not None
            for key, pod in info.pods.items():
                for label, value in pod.labels.items():
                    by_label.setdefault((pod.namespace, label, value), {})[(row, key)] = pod
        return by_label

    def _drop_counter(self, matcher: PodMatcher) -> None:
        self._pod_counters.pop(matcher, None)
        self._counter_use.pop(matcher, None)
        self._unanchored_counters.pop(matcher, None)
        for anchor in matcher.anchors():
            anchored = self._anchored_counters.get(anchor)
            if anchored is not None:
                anchored.pop(matcher, None)
                if not anchored:
                    del self._anchored_counters[anchor]

    def pods_on(self, row: int) -> Iterable[Pod]:
        return self.info(row).pods.values()

    def host_port_conflicts(self, ports: Iterable[HostPort]) -> set[int]:
        rows: set[int] = set()
        for port in ports:
            for row, ips in self.host_ports.get((port.protocol, port.port), {}).items():
                if any(port.conflicts(HostPort(ip, port.protocol, port.port)) for ip in ips):
                    rows.add(row)
        return rows
