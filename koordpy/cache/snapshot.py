"""Node state as arrays: the data every filter and score works on.

Rows are node slots. A removed node's row is marked dead and reused by the next added node, so a
row index stays valid for a node's whole life. Every array is sized to `capacity` rows; only rows
where `live` is true hold a node. Scheduling cycles are synchronous, so a cycle reads these
arrays directly: nothing can change them underneath it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from koordpy.api.affinity import AffinityTerm
from koordpy.api.labels import IN, LabelSelector, Requirement
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import HostPort, Pod
from koordpy.api.resources import CPU, MAX_AMOUNT, MEMORY, PODS
from koordpy.cache.trial import Trial

_INITIAL_CAPACITY = 64
# request vectors remembered by the identity of the pod's requests mapping (about one per pod)
_MAPPINGS_REMEMBERED = 16384
# dense request vectors (for readers) kept while their cells, summed, stay under this: with
# thousands of resource names each vector is that wide
_VECTOR_CELLS_REMEMBERED = 1 << 21

# Per-node sums saturate here. A request is at most MAX_AMOUNT (2^53), so a sum below this bound
# plus one more request stays inside int64; only a node holding over 500 pods that each ask for
# more than any node has could reach it, and the consistency check recomputes sums from the pods.
_SUM_LIMIT = 1 << 62
# Below this no sum of pods a node can hold comes near _SUM_LIMIT: plain int64 arithmetic is safe,
# and only vectors at or above it take the saturating path.
_PLAIN_ARITHMETIC_BELOW = 1 << 40

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


@dataclass(slots=True, eq=False)
class _Request:
    """A pod's requests as the resource columns it asks for and the amounts (`pods` counted as 1):
    placing a pod touches those cells only, however many resource names the cluster has."""

    cols: np.ndarray
    amounts: np.ndarray
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
        # the [rows x resources] matrices are column-major: filters and scores read one resource
        # across many nodes, and that must be a contiguous read. Each lives in a store with room
        # for more columns (doubled when full, so a new resource name rarely copies anything);
        # `allocatable` and `requested` are views of the live columns, the only ones readers see
        self.resource_names: list[str] = [CPU, MEMORY, PODS]
        self.resource_col: dict[str, int] = {n: i for i, n in enumerate(self.resource_names)}
        r = len(self.resource_names)
        self._allocatable_store = np.zeros((self.capacity, r), dtype=np.int64, order="F")
        self._requested_store = np.zeros((self.capacity, r), dtype=np.int64, order="F")
        self.allocatable = self._allocatable_store
        self.requested = self._requested_store
        self._requested_cells = self._requested_store.reshape(-1, order="F")
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
        self.images: dict[str, dict[int, int]] = {}
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

    def info(self, row: int) -> NodeInfo:
        info = self.infos[row]
        assert info is not None
        return info

    def node_name(self, row: int) -> str:
        return self.info(row).node.name

    def _install(self, allocatable_store: np.ndarray, requested_store: np.ndarray) -> None:
        """Make the stores current, with views over the live columns."""
        width = len(self.resource_names)
        self._allocatable_store = allocatable_store
        self._requested_store = requested_store
        self.allocatable = allocatable_store[:, :width]
        self.requested = requested_store[:, :width]
        self._requested_cells = requested_store.reshape(-1, order="F")

    def _grow_rows(self) -> None:
        new = self.capacity * 2
        width = len(self.resource_names)
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
        self.infos.extend([None] * (new - self.capacity))
        self.capacity = new
        self._install(stores[0], stores[1])
        self.nonzero_requested = nonzero
        self.live = live
        for key, col in self.labels.items():
            col.codes = label_codes[key]
        self._pod_counters.update(counters)
        self.term_counts.update(terms)

    def resource_index(self, name: str) -> int:
        """The column of a resource, adding one (zero everywhere) the first time it is seen."""
        col = self.resource_col.get(name)
        if col is not None:
            return col
        col = len(self.resource_names)
        if col == self._allocatable_store.shape[1]:
            # full: double the room, so n names cost O(n) copies of a column in all. Both stores
            # are built before either is installed, and the name is known only after: a failure
            # half way leaves the columns and the names as they were
            widened = []
            for old in (self._allocatable_store, self._requested_store):
                arr = np.zeros((self.capacity, 2 * col), dtype=np.int64, order="F")
                arr[:, :col] = old
                widened.append(arr)
            self._install(widened[0], widened[1])
        self.resource_names.append(name)
        self.resource_col[name] = col
        # the new column was never written: zero on every row
        self._install(self._allocatable_store, self._requested_store)
        self._clear_vectors()
        return col

    def _clear_vectors(self) -> None:
        self._vec_cache.clear()
        self._vec_of_mapping.clear()
        self._vec_cells = 0

    def _request(self, requests: Mapping[str, int]) -> _Request:
        """What placing a pod with these requests adds: its columns (added the first time a name
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
            cols = np.fromiter(amounts, dtype=np.int64, count=len(amounts))
            values = np.fromiter(amounts.values(), dtype=np.int64, count=len(amounts))
            found = _Request(cols, values, max(amounts.values()) >= _PLAIN_ARITHMETIC_BELOW)
            if len(self._requests) >= _MAPPINGS_REMEMBERED:
                self._requests.clear()
            self._requests[key] = found
        if len(self._request_of_mapping) >= _MAPPINGS_REMEMBERED:
            self._request_of_mapping.clear()
        self._request_of_mapping[id(requests)] = (requests, found)
        return found

    def request_vector(self, requests: Mapping[str, int]) -> np.ndarray:
        """A pod's requests as a row over the resource columns, `pods` counted as 1."""
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
            row = self._free_rows.pop()
            self.requested[row] = 0
            self.nonzero_requested[row] = 0
        else:
            # a row never used is zero everywhere; writing it would touch every column's memory
            row = self.high_water
            self.high_water += 1
        self.row_of[node.name] = row
        self.infos[row] = NodeInfo(row, node)
        self.live[row] = True
        self._write_node(row, node, None, alloc)
        self.node_generation += 1
        self.generation += 1
        return row

    def _allocatable_cells(self, node: Node) -> tuple[np.ndarray, np.ndarray]:
        """The node's non-zero allocatable: (columns, amounts), columns added first for new names.
        Every other column of its row is zero."""
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
        if old is not None:
            self.allocatable[row, self._allocatable_cells(old)[0]] = 0
        self.allocatable[row, alloc[0]] = alloc[1]
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
        self.node_generation += 1
        self.generation += 1

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node; returns the pods that were on it (the caller decides their fate)."""
        row = self.row_of.pop(name, None)
        if row is None:
            return []
        info = self.info(row)
        pods = list(info.pods.values())
        for pod in pods:
            self.remove_pod(pod, row)
        for key in info.node.labels:
            self.labels[key].codes[row] = -1
        for img in info.node.images:
            for n in img.names:
                self.images.get(n, {}).pop(row, None)
        self.live[row] = False
        self.infos[row] = None
        self.allocatable[row] = 0
        self.requested[row] = 0
        self.nonzero_requested[row] = 0
        self._free_rows.append(row)
        self.node_generation += 1
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
        self._index_pod(pod, row, 1)
        self.generation += 1

    def _saturating_add(self, row: int, req: _Request, pod: Pod, sign: int) -> None:
        """`requested[row] += sign * requests` held within [0, _SUM_LIMIT]: no int64 wrap-around
        for any request (see _SUM_LIMIT)."""
        cells = req.cells(row, self.capacity)
        self._requested_cells[cells] = np.clip(
            self._requested_cells[cells] + sign * req.amounts, 0, _SUM_LIMIT
        )
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
        for attr, cols in (("allocatable", width), ("requested", width), ("nonzero_requested", 2)):
            shape = getattr(self, attr).shape
            if shape != (self.capacity, cols):
                found.append(f"{attr} has shape {shape}, expected {(self.capacity, cols)}")
        if self.live.shape != (self.capacity,) or len(self.infos) != self.capacity:
            found.append(
                f"{len(self.infos)} node slots and {self.live.size} live flags for {self.capacity} rows"
            )
        for key, col in self.labels.items():
            if col.codes.shape != (self.capacity,):
                found.append(f"label column {key} has {col.codes.size} rows, expected {self.capacity}")
        for attr, store in (("allocatable", self._allocatable_store), ("requested", self._requested_store)):
            if store.shape[0] != self.capacity or store.shape[1] < width:
                found.append(
                    f"the {attr} store has shape {store.shape} for {self.capacity} rows, {width} columns"
                )
            elif not np.may_share_memory(getattr(self, attr), store):
                found.append(f"{attr} is not a view of its store")
        if not np.may_share_memory(self._requested_cells, self._requested_store):
            found.append("the requested cells are not a view of their store")
        if found:
            return found  # the rest reads the arrays by row
        for name, row in self.row_of.items():
            info = self.infos[row] if 0 <= row < self.capacity else None
            if info is None or info.node.name != name or not self.live[row]:
                found.append(f"node {name}: row {row} does not hold it")
        if int(self.live.sum()) != len(self.row_of):
            found.append(f"{int(self.live.sum())} live rows for {len(self.row_of)} nodes")
        rows = self.live_rows()
        hw = self.high_water
        # cells are compared where a node or pod puts an amount; everywhere else a row must be zero,
        # which counting its non-zero cells shows without a [rows x resources] copy
        alloc_nonzero = np.count_nonzero(self.allocatable[:hw], axis=1)
        cell_rows: list[np.ndarray] = []
        cell_cols: list[np.ndarray] = []
        cell_amounts: list[np.ndarray] = []
        pod_rows: list[int] = []
        nonzero: list[tuple[int, int]] = []
        for row in rows.tolist():
            info = self.infos[row]
            if info is None:
                continue
            alloc_cols, amounts = self._allocatable_cells(info.node)
            if alloc_nonzero[row] != alloc_cols.size or not np.array_equal(
                self.allocatable[row, alloc_cols], amounts
            ):
                found.append(f"node {info.name}: allocatable differs from its node object")
            for key, pod in info.pods.items():
                if placed.get(key) != info.name:
                    found.append(f"pod {key} is on node {info.name} in the snapshot only")
                req = self._request(pod.requests)
                cell_rows.append(np.full(req.cols.size, row, dtype=np.int64))
                cell_cols.append(req.cols)
                cell_amounts.append(req.amounts)
                pod_rows.append(row)
                nonzero.append((min(pod.nonzero_cpu, MAX_AMOUNT), min(pod.nonzero_memory, MAX_AMOUNT)))
        if len(pod_rows) != sum(1 for node in placed.values() if node in self.row_of):
            found.append("the cache places pods the snapshot does not hold")
        if self._pods_by_label is not None:
            indexed = {triple: set(postings) for triple, postings in self._pods_by_label.items()}
            if indexed != {triple: set(postings) for triple, postings in self._index_by_label().items()}:
                found.append("the pods by label differ from the pods on the nodes")
        differs = self._requested_differs(rows, cell_rows, cell_cols, cell_amounts)
        index = np.array(pod_rows, dtype=np.int64)
        expected = _saturated_sums(index, np.array(nonzero, dtype=np.int64).reshape(-1, 2), self.capacity)
        for label, bad in (
            ("requested", differs),
            ("non-zero requested", (self.nonzero_requested[rows] != expected[rows]).any(axis=1)),
        ):
            for at in np.flatnonzero(bad).tolist():
                info = self.info(int(rows[at]))
                found.append(f"node {info.name}: {label} differs from the sum of its {len(info.pods)} pods")
        return found

    def _requested_differs(
        self,
        rows: np.ndarray,
        cell_rows: list[np.ndarray],
        cell_cols: list[np.ndarray],
        cell_amounts: list[np.ndarray],
    ) -> np.ndarray:
        """For each of `rows`: whether its requested cells differ from the saturated sums of the
        given pod cells (row, column, amount)."""
        width = len(self.resource_names)
        differs = np.zeros(rows.size, dtype=bool)
        position = np.full(self.capacity, -1, dtype=np.int64)
        position[rows] = np.arange(rows.size)
        if cell_rows:
            at_rows = np.concatenate(cell_rows)
            flat = at_rows * width + np.concatenate(cell_cols)
            amounts = np.concatenate(cell_amounts)
            cells, inverse = np.unique(flat, return_inverse=True)
            sums = np.zeros(cells.size, dtype=np.int64)
            np.add.at(sums, inverse, amounts)
            approx = np.bincount(inverse, weights=amounts.astype(np.float64), minlength=cells.size)
            sums = np.where(approx >= _SUM_LIMIT, _SUM_LIMIT, sums)
            cell_row, cell_col = cells // width, cells % width
            wrong = self.requested[cell_row, cell_col] != sums
            differs[position[cell_row[wrong]]] = True
            expected_nonzero = np.bincount(cell_row[sums != 0], minlength=self.capacity)
        else:
            expected_nonzero = np.zeros(self.capacity, dtype=np.int64)
        actual_nonzero = np.count_nonzero(self.requested[: self.high_water], axis=1)
        differs |= actual_nonzero[rows] != expected_nonzero[rows]
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
