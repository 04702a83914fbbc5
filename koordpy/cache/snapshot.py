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
from koordpy.api.labels import LabelSelector
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import HostPort, Pod
from koordpy.api.resources import CPU, MAX_AMOUNT, MEMORY, PODS
from koordpy.cache.trial import Trial

_INITIAL_CAPACITY = 64
# request vectors remembered by the identity of the pod's requests mapping (about one per pod)
_MAPPINGS_REMEMBERED = 16384

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


class Snapshot:
    def __init__(self) -> None:
        self.capacity = _INITIAL_CAPACITY
        self.high_water = 0
        # the [rows x resources] matrices are column-major: filters and scores read one resource
        # across many nodes, and that must be a contiguous read
        self.resource_names: list[str] = [CPU, MEMORY, PODS]
        self.resource_col: dict[str, int] = {n: i for i, n in enumerate(self.resource_names)}
        r = len(self.resource_names)
        self.allocatable = np.zeros((self.capacity, r), dtype=np.int64, order="F")
        self.requested = np.zeros((self.capacity, r), dtype=np.int64, order="F")
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
        # ids of cached request vectors with an amount at or above _PLAIN_ARITHMETIC_BELOW
        self._huge_vecs: set[int] = set()
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

    def _grow_rows(self) -> None:
        new = self.capacity * 2
        # every new array is built before any is installed: running out of memory half way leaves
        # the snapshot as it was, never with arrays of different lengths
        matrices = {}
        for attr in ("allocatable", "requested", "nonzero_requested"):
            old = getattr(self, attr)
            arr = np.zeros((new, old.shape[1]), dtype=old.dtype, order="F")
            arr[: self.capacity] = old
            matrices[attr] = arr
        live = np.zeros(new, dtype=bool)
        live[: self.capacity] = self.live
        label_codes = {key: _grown_codes(col.codes, new) for key, col in self.labels.items()}
        counters = {matcher: _grown(counts, new) for matcher, counts in self._pod_counters.items()}
        terms = {term_key: _grown(counts, new) for term_key, counts in self.term_counts.items()}
        for attr, arr in matrices.items():
            setattr(self, attr, arr)
        self.live = live
        self.infos.extend([None] * (new - self.capacity))
        for key, col in self.labels.items():
            col.codes = label_codes[key]
        self._pod_counters.update(counters)
        self.term_counts.update(terms)
        self.capacity = new

    def resource_index(self, name: str) -> int:
        """The column of a resource, adding one (zero everywhere) the first time it is seen."""
        col = self.resource_col.get(name)
        if col is not None:
            return col
        col = len(self.resource_names)
        # both matrices are widened before either is installed, and the name is known only then:
        # a failure half way leaves the columns and the names as they were
        widened = []
        for attr in ("allocatable", "requested"):
            old = getattr(self, attr)
            arr = np.zeros((self.capacity, col + 1), dtype=np.int64, order="F")
            arr[:, :col] = old
            widened.append(arr)
        self.allocatable, self.requested = widened
        self.resource_names.append(name)
        self.resource_col[name] = col
        self._clear_vectors()
        return col

    def _clear_vectors(self) -> None:
        self._vec_cache.clear()
        self._vec_of_mapping.clear()
        self._huge_vecs.clear()

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
            self._vec_cache[key] = vec
            if int(vec.max()) >= _PLAIN_ARITHMETIC_BELOW:
                self._huge_vecs.add(id(vec))
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
        alloc = self._allocatable_row(node)
        if not self._free_rows and self.high_water == self.capacity:
            self._grow_rows()
        if self._free_rows:
            row = self._free_rows.pop()
        else:
            row = self.high_water
            self.high_water += 1
        self.row_of[node.name] = row
        self.infos[row] = NodeInfo(row, node)
        self.live[row] = True
        self.requested[row] = 0
        self.nonzero_requested[row] = 0
        self._write_node(row, node, None, alloc)
        self.node_generation += 1
        self.generation += 1
        return row

    def _allocatable_row(self, node: Node) -> np.ndarray:
        """The node's allocatable over the resource columns (widened first for new names)."""
        for name in node.allocatable:
            self.resource_index(name)
        alloc = np.zeros(len(self.resource_names), dtype=np.int64)
        for name, amount in node.allocatable.items():
            alloc[self.resource_col[name]] = min(max(int(amount), 0), MAX_AMOUNT)
        if PODS not in node.allocatable:
            # a node that states no pod capacity behaves as the kubelet default
            alloc[self.resource_col[PODS]] = 110
        return alloc

    def _write_node(self, row: int, node: Node, old: Node | None, alloc: np.ndarray) -> None:
        self.allocatable[row] = alloc
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
        alloc = self._allocatable_row(node)
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
        # the vector first: a resource seen for the first time widens the arrays, and nothing is
        # changed yet if that fails
        vec = self.request_vector(pod.requests)
        info.pods[pod.key] = pod
        if id(vec) in self._huge_vecs or max(pod.nonzero_cpu, pod.nonzero_memory) >= _PLAIN_ARITHMETIC_BELOW:
            self._saturating_add(row, vec, pod, 1)
        else:
            self.requested[row] += vec
            self.nonzero_requested[row, 0] += pod.nonzero_cpu
            self.nonzero_requested[row, 1] += pod.nonzero_memory
        self._index_pod(pod, row, 1)
        self.generation += 1

    def _saturating_add(self, row: int, vec: np.ndarray, pod: Pod, sign: int) -> None:
        """`requested[row] += sign * vec` held within [0, _SUM_LIMIT]: no int64 wrap-around for
        any request (see _SUM_LIMIT)."""
        nonzero = np.array([min(pod.nonzero_cpu, MAX_AMOUNT), min(pod.nonzero_memory, MAX_AMOUNT)])
        for matrix, delta in ((self.requested, vec), (self.nonzero_requested, nonzero)):
            matrix[row] = np.clip(matrix[row] + sign * delta, 0, _SUM_LIMIT)

    def remove_pod(self, pod: Pod, row: int) -> Pod | None:
        """Take the pod with `pod.key` off the node; returns the pod object that was there (whose
        requests are the ones given back), None when there was none."""
        info = self.info(row)
        stored = info.pods.pop(pod.key, None)
        if stored is None:
            return None
        vec = self.request_vector(stored.requests)
        if (
            id(vec) in self._huge_vecs
            or max(stored.nonzero_cpu, stored.nonzero_memory) >= _PLAIN_ARITHMETIC_BELOW
        ):
            self._saturating_add(row, vec, stored, -1)
        else:
            self.requested[row] -= vec
            self.nonzero_requested[row, 0] -= stored.nonzero_cpu
            self.nonzero_requested[row, 1] -= stored.nonzero_memory
        self._index_pod(stored, row, -1)
        self.generation += 1
        return stored

    def _index_pod(self, pod: Pod, row: int, delta: int) -> None:
        if self._pod_counters:
            ns_labels = self.namespace_labels(pod.namespace)
            for matcher, counts in self._pod_counters.items():
                if matcher.matches(pod, ns_labels):
                    counts[row] += delta
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
        if found:
            return found  # the rest reads the arrays by row
        for name, row in self.row_of.items():
            info = self.infos[row] if 0 <= row < self.capacity else None
            if info is None or info.node.name != name or not self.live[row]:
                found.append(f"node {name}: row {row} does not hold it")
        if int(self.live.sum()) != len(self.row_of):
            found.append(f"{int(self.live.sum())} live rows for {len(self.row_of)} nodes")
        rows = self.live_rows()
        pod_rows: list[int] = []
        vectors: list[np.ndarray] = []
        nonzero: list[tuple[int, int]] = []
        for row in rows.tolist():
            info = self.infos[row]
            if info is None:
                continue
            if not np.array_equal(self.allocatable[row], self._allocatable_row(info.node)):
                found.append(f"node {info.name}: allocatable differs from its node object")
            for key, pod in info.pods.items():
                if placed.get(key) != info.name:
                    found.append(f"pod {key} is on node {info.name} in the snapshot only")
                pod_rows.append(row)
                vectors.append(self.request_vector(pod.requests))
                nonzero.append((min(pod.nonzero_cpu, MAX_AMOUNT), min(pod.nonzero_memory, MAX_AMOUNT)))
        if len(pod_rows) != sum(1 for node in placed.values() if node in self.row_of):
            found.append("the cache places pods the snapshot does not hold")
        width = len(self.resource_names)
        index = np.array(pod_rows, dtype=np.int64)
        for matrix, values, label in (
            (self.requested, np.array(vectors, dtype=np.int64).reshape(-1, width), "requested"),
            (self.nonzero_requested, np.array(nonzero, dtype=np.int64).reshape(-1, 2), "non-zero requested"),
        ):
            expected = _saturated_sums(index, values, self.capacity)
            for row in np.flatnonzero((matrix[rows] != expected[rows]).any(axis=1)).tolist():
                info = self.info(int(rows[row]))
                found.append(f"node {info.name}: {label} differs from the sum of its {len(info.pods)} pods")
        return found

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
            self._write_node(row, node, None, self._allocatable_row(node))
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
        self.term_match_generation += 1
        self.generation += 1

    def pod_count_by_row(self, matcher: PodMatcher) -> np.ndarray:
        """Number of pods on each row matched by `matcher`; kept up to date incrementally."""
        counts = self._pod_counters.get(matcher)
        if counts is None:
            counts = np.zeros(self.capacity, dtype=np.int32)
            for row in self.live_rows():
                info = self.infos[row]
                assert info is not None
                for pod in info.pods.values():
                    if matcher.matches(pod, self.namespace_labels(pod.namespace)):
                        counts[row] += 1
            if len(self._pod_counters) >= 256:
                # drop the least used counters so per-pod upkeep stays small
                for stale, _ in sorted(self._counter_use.items(), key=lambda kv: kv[1])[:128]:
                    self._pod_counters.pop(stale, None)
                    self._counter_use.pop(stale, None)
            self._pod_counters[matcher] = counts
        self._counter_use[matcher] = self._counter_use.get(matcher, 0) + 1
        return counts

    def pods_on(self, row: int) -> Iterable[Pod]:
        return self.info(row).pods.values()

    def host_port_conflicts(self, ports: Iterable[HostPort]) -> set[int]:
        rows: set[int] = set()
        for port in ports:
            for row, ips in self.host_ports.get((port.protocol, port.port), {}).items():
                if any(port.conflicts(HostPort(ip, port.protocol, port.port)) for ip in ips):
                    rows.add(row)
        return rows
