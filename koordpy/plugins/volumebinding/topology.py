"""Node selections of storage objects, answered for every row of the snapshot at once: a
PersistentVolume's node affinity, a StorageClass's allowedTopologies and a CSIStorageCapacity's
nodeTopology all look at node labels only.

kube-scheduler checks a PV's node affinity with CheckNodeAffinity, which builds a node from the
labels alone: a `matchFields` requirement on `metadata.name` sees the name "" there, so
`metadata.name In [...]` matches no node and `NotIn` every node. The masks here keep that, which is
why NodeAffinity's own helpers (which use the real names) are not used.

Label requirements are answered from the label columns' value codes with array operations, never
by calling a predicate per distinct value: a cluster of local volumes has one hostname selector per
node, and a predicate per (selector, hostname) would grow with the square of the nodes. Masks
depend on node objects only; `RowMasks` keeps them for one node generation of one snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from koordpy.api.labels import LabelSelector
from koordpy.api.nodeselector import DOES_NOT_EXIST, EXISTS, IN, NOT_IN, NodeSelector, NodeSelectorTerm

if TYPE_CHECKING:
    from collections.abc import Collection

    from koordpy.cache import Snapshot
    from koordpy.cache.snapshot import LabelColumn

Mask = npt.NDArray[np.bool_]
RowIndex = npt.NDArray[np.int64]

_PREDICATE_KEY = "VolumeBinding"
# distinct selectors kept per node generation; a cluster of hostname-pinned local volumes has one
# per node, so the bound is generous
_CACHE_LIMIT = 65536


class _Requirement(Protocol):
    """A node selector requirement or a label selector requirement: both name a key, an operator
    (In, NotIn, Exists, DoesNotExist; node selectors also Gt, Lt) and values."""

    @property
    def key(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def values(self) -> Collection[str]: ...

    def matches_value(self, value: str | None) -> bool: ...


def _value_codes(column: LabelColumn, values: Collection[str]) -> list[int]:
    return [code for v in values if (code := column.code_of.get(v)) is not None]


def _requirement_mask(snapshot: Snapshot, n: int, requirement: _Requirement) -> Mask:
    column = snapshot.labels.get(requirement.key)
    if column is None:
        # no node carries the key: every row sees the label as absent
        return np.full(n, requirement.matches_value(None), dtype=bool)
    codes = column.codes[:n]
    operator = requirement.operator
    if operator in (IN, NOT_IN):
        wanted = _value_codes(column, requirement.values)
        hit: Mask = np.isin(codes, wanted) if wanted else np.zeros(n, dtype=bool)
        return hit if operator == IN else ~hit
    if operator == EXISTS:
        return codes >= 0
    if operator == DOES_NOT_EXIST:
        return codes < 0
    # Gt, Lt: the value's number decides, once per distinct value
    out: Mask = column.mask(
        np.arange(n, dtype=np.int64), (_PREDICATE_KEY, requirement), requirement.matches_value
    )
    return out


def _term_mask(snapshot: Snapshot, n: int, term: NodeSelectorTerm) -> Mask:
    if not term.match_expressions and not term.match_fields:
        # an empty term matches no node
        return np.zeros(n, dtype=bool)
    for requirement in term.match_fields:
        # the node CheckNodeAffinity builds has no name
        if not requirement.matches_value(""):
            return np.zeros(n, dtype=bool)
    mask = np.ones(n, dtype=bool)
    for requirement in term.match_expressions:
        mask &= _requirement_mask(snapshot, n, requirement)
    return mask


def selector_mask(snapshot: Snapshot, n: int, selector: NodeSelector) -> Mask:
    """Rows [0, n) whose labels match one of the terms."""
    mask = np.zeros(n, dtype=bool)
    for term in selector.terms:
        mask |= _term_mask(snapshot, n, term)
    return mask


def label_selector_mask(snapshot: Snapshot, n: int, selector: LabelSelector) -> Mask:
    """Rows [0, n) whose labels match every requirement (no requirement: every row)."""
    mask = np.ones(n, dtype=bool)
    for requirement in selector.requirements:
        mask &= _requirement_mask(snapshot, n, requirement)
    return mask


class RowMasks:
    """Masks and row lists over the rows [0, high_water) of one snapshot, for one node generation:
    a storage object's selection is computed once and shared by every pod and cycle until a node
    changes."""

    __slots__ = ("_by_value", "_generation", "_masks", "_own", "_rows", "_snapshot_id", "size")

    def __init__(self) -> None:
        self._masks: dict[Hashable, Mask] = {}
        self._rows: dict[Hashable, RowIndex] = {}
        # label key -> (rows sorted by value code, the codes in that order)
        self._by_value: dict[str, tuple[RowIndex, npt.NDArray[np.int32]]] = {}
        # the callers' own masks (`cached`): key -> (version, mask)
        self._own: dict[Hashable, tuple[Hashable, Mask]] = {}
        self._generation = -1
        self._snapshot_id = -1
        self.size = 0

    def sync(self, snapshot: Snapshot) -> None:
        if snapshot.node_generation != self._generation or id(snapshot) != self._snapshot_id:
            self._masks.clear()
            self._rows.clear()
            self._by_value.clear()
            self._own.clear()
            self._generation = snapshot.node_generation
            self._snapshot_id = id(snapshot)
            self.size = snapshot.high_water

    @staticmethod
    def _room(store: dict[Hashable, Mask] | dict[Hashable, RowIndex]) -> None:
        if len(store) >= _CACHE_LIMIT:
            store.clear()

    def node_selector(self, snapshot: Snapshot, selector: NodeSelector | None) -> Mask:
        """None (no affinity, no topology): every row."""
        self.sync(snapshot)
        key = ("node", selector)
        mask = self._masks.get(key)
        if mask is None:
            if selector is None:
                mask = np.ones(self.size, dtype=bool)
            else:
                mask = selector_mask(snapshot, self.size, selector)
            self._room(self._masks)
            self._masks[key] = mask
        return mask

    def node_selector_rows(self, snapshot: Snapshot, selector: NodeSelector | None) -> RowIndex:
        """The rows node_selector() answers True for, in row order."""
        self.sync(snapshot)
        key = ("node", selector)
        rows = self._rows.get(key)
        if rows is None:
            rows = self._rows_of_values(snapshot, selector)
            if rows is None:
                rows = np.flatnonzero(self.node_selector(snapshot, selector)).astype(np.int64)
            self._room(self._rows)
            self._rows[key] = rows
        return rows

    def _rows_of_values(self, snapshot: Snapshot, selector: NodeSelector | None) -> RowIndex | None:
        """A selector of one `key In values` (a volume pinned to hosts, or to zones): its rows from
        the key's rows by value, without a pass over every row. None for any other selector."""
        if selector is None or len(selector.terms) != 1:
            return None
        term = selector.terms[0]
        if term.match_fields or len(term.match_expressions) != 1 or term.match_expressions[0].operator != IN:
            return None
        requirement = term.match_expressions[0]
        column = snapshot.labels.get(requirement.key)
        if column is None:
            return np.zeros(0, dtype=np.int64)
        by_value = self._by_value.get(requirement.key)
        if by_value is None:
            codes = column.codes[: self.size]
            order = np.argsort(codes, kind="stable").astype(np.int64)
            by_value = (order, codes[order])
            self._by_value[requirement.key] = by_value
        order, sorted_codes = by_value
        parts = []
        for code in _value_codes(column, requirement.values):
            lo, hi = np.searchsorted(sorted_codes, (code, code + 1))
            parts.append(order[lo:hi])
        if not parts:
            return np.zeros(0, dtype=np.int64)
        rows: RowIndex = np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0]
        return rows

    def cached(
        self, snapshot: Snapshot, key: Hashable, version: Hashable, compute: Callable[[], Mask]
    ) -> Mask:
        """A mask of the caller's own, computed once per node generation and `version` (what it
        depends on besides the nodes); only the latest version of each key is kept."""
        self.sync(snapshot)
        held = self._own.get(key)
        if held is not None and held[0] == version:
            return held[1]
        mask = compute()
        self._own[key] = (version, mask)
        return mask

    def label_selector(self, snapshot: Snapshot, selector: LabelSelector) -> Mask:
        self.sync(snapshot)
        key = ("labels", selector)
        mask = self._masks.get(key)
        if mask is None:
            mask = label_selector_mask(snapshot, self.size, selector)
            self._room(self._masks)
            self._masks[key] = mask
        return mask
