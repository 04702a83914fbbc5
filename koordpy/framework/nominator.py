"""Pods nominated to nodes by preemption: they hold room that lower-priority pods must leave.

Besides the pods by node, each nomination has a slot in arrays: its pod's priority, its
namespace's number, its node's snapshot row and when it was made. An attempt asks for the
nominations of its priority or higher (kube-scheduler's RunFilterPluginsWithNominatedPods counts
only those), of given namespaces (CapacityScheduling's PreFilter), on given rows, with one
comparison over the slots, and touches those pods alone instead of walking every nomination (a
few nominated nodes are simply walked).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from koordpy.api.pod import Pod

# a free slot, or a nomination to a node the snapshot does not have
_NO_ROW = -1
_INITIAL_SLOTS = 16
# up to this many nominated nodes, walking them costs less than the array operations
_WALK_AT_MOST = 16


class NodeRows(Protocol):
    """What the nominator reads of the snapshot: node rows, and when they last changed."""

    row_of: dict[str, int]
    node_generation: int


class Nominator:
    __slots__ = (
        "_added",
        "_by_node",
        "_free",
        "_namespace",
        "_namespace_code",
        "_namespace_count",
        "_node_of",
        "_priority",
        "_row",
        "_row_of",
        "_rows_at",
        "_seq",
        "_slot_node",
        "_slot_of",
        "_slot_pod",
    )

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}
        self._slot_of: dict[str, int] = {}
        # the node of each slot ("" when free)
        self._slot_node: list[str] = []
        # the pod of each slot (None when free)
        self._slot_pod: list[Pod | None] = []
        self._free: list[int] = []
        # when each slot's nomination was made (a count of nominations): a node's pods are in
        # nomination order
        self._seq: npt.NDArray[np.int64] = np.zeros(_INITIAL_SLOTS, dtype=np.int64)
        self._added = 0
        self._priority: npt.NDArray[np.int64] = np.zeros(_INITIAL_SLOTS, dtype=np.int64)
        # each slot's namespace as a number (namespaces are few and keep their numbers)
        self._namespace: npt.NDArray[np.int32] = np.zeros(_INITIAL_SLOTS, dtype=np.int32)
        self._namespace_code: dict[str, int] = {}
        # namespace -> how many of its pods are nominated
        self._namespace_count: dict[str, int] = {}
        self._row: npt.NDArray[np.int64] = np.full(_INITIAL_SLOTS, _NO_ROW, dtype=np.int64)
        # the snapshot's row map the rows were read from, and its node generation then
        self._row_of: dict[str, int] | None = None
        self._rows_at = -1

    def add(self, pod: Pod, node_name: str) -> None:
        self.remove(pod)
        if not node_name:
            return
        self._by_node.setdefault(node_name, {})[pod.key] = pod
        self._node_of[pod.key] = node_name
        if self._free:
            slot = self._free.pop()
            self._slot_node[slot] = node_name
            self._slot_pod[slot] = pod
        else:
            slot = len(self._slot_node)
            self._slot_node.append(node_name)
            self._slot_pod.append(pod)
            if slot == self._row.size:
                # doubled, so that nominations arriving one by one cost amortised O(1)
                self._priority = np.concatenate((self._priority, np.zeros_like(self._priority)))
                self._seq = np.concatenate((self._seq, np.zeros_like(self._seq)))
                self._namespace = np.concatenate((self._namespace, np.zeros_like(self._namespace)))
                self._row = np.concatenate((self._row, np.full_like(self._row, _NO_ROW)))
        self._slot_of[pod.key] = slot
        self._priority[slot] = pod.priority
        self._seq[slot] = self._added
        self._added += 1
        self._namespace[slot] = self._namespace_code.setdefault(pod.namespace, len(self._namespace_code))
        self._namespace_count[pod.namespace] = self._namespace_count.get(pod.namespace, 0) + 1
        row_of = self._row_of
        self._row[slot] = row_of.get(node_name, _NO_ROW) if row_of is not None else _NO_ROW

    def remove(self, pod: Pod) -> None:
        node = self._node_of.pop(pod.key, None)
        if node is not None:
            pods = self._by_node.get(node)
            if pods is not None:
                pods.pop(pod.key, None)
                if not pods:
                    del self._by_node[node]
            slot = self._slot_of.pop(pod.key)
            self._slot_node[slot] = ""
            self._slot_pod[slot] = None
            # the key names the namespace: this is the namespace the nomination was counted in
            namespace = pod.key.partition("/")[0]
            left = self._namespace_count[namespace] - 1
            if left:
                self._namespace_count[namespace] = left
            else:
                del self._namespace_count[namespace]
            self._row[slot] = _NO_ROW
            self._free.append(slot)

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)

    def pods_on(self, node_name: str) -> list[Pod]:
        return list(self._by_node.get(node_name, {}).values())

    def nodes(self) -> list[str]:
        return list(self._by_node)

    def namespaces(self) -> list[str]:
        """The namespaces with nominated pods."""
        return list(self._namespace_count)

    def __bool__(self) -> bool:
        return bool(self._node_of)

    def _resolve(self, snapshot: NodeRows) -> None:
        """Read every slot's row again once nodes have come, gone or changed since the last read
        (a node removed and added again may have another row)."""
        if self._row_of is snapshot.row_of and self._rows_at == snapshot.node_generation:
            return
        row_of = snapshot.row_of
        self._row_of = row_of
        self._rows_at = snapshot.node_generation
        for slot, node in enumerate(self._slot_node):
            self._row[slot] = row_of.get(node, _NO_ROW) if node else _NO_ROW

    def holding(
        self,
        pod: Pod,
        snapshot: NodeRows,
        within: npt.NDArray[np.bool_] | None = None,
        ignore: Callable[[Pod], bool] | None = None,
        *,
        floor: int | None = None,
        namespaces: Collection[str] | None = None,
    ) -> dict[int, list[Pod]]:
        """The pods nominated against `pod`, by snapshot row: of its priority or higher (of `floor`
        or higher when given), other than itself and than those `ignore` names (kube-scheduler's
        addGENominatedPods), of `namespaces` when given, on the rows `within` marks (all rows when
        None). Each row's pods are in the order they were nominated."""
        if not self._node_of:
            return {}
        if floor is None:
            floor = pod.priority
        if namespaces is not None:
            namespaces = frozenset(namespaces).intersection(self._namespace_count)
            if not namespaces:
                return {}
        if len(self._by_node) <= _WALK_AT_MOST:
            return self._walk(pod, snapshot, within, ignore, floor, namespaces)
        self._resolve(snapshot)
        n = len(self._slot_node)
        rows = self._row[:n]
        held = (rows != _NO_ROW) & (self._priority[:n] >= floor)
        if namespaces is not None:
            codes = np.fromiter((self._namespace_code[ns] for ns in namespaces), dtype=np.int32)
            held &= np.isin(self._namespace[:n], codes)
        if within is not None:
            held &= within[rows]
        own = self._slot_of.get(pod.key)
        if own is not None:
            held[own] = False
        slots = np.flatnonzero(held)
        if slots.size == 0:
            return {}
        # by row, and within a row in nomination order, as the walk gives them
        slot_rows = rows[slots]
        order = np.lexsort((self._seq[slots], slot_rows))
        out: dict[int, list[Pod]] = {}
        slot_pod = self._slot_pod
        for row, slot in zip(slot_rows[order].tolist(), slots[order].tolist(), strict=True):
            other = slot_pod[slot]
            assert other is not None
            if ignore is not None and ignore(other):
                continue
            found = out.get(row)
            if found is None:
                out[row] = [other]
            else:
                found.append(other)
        return out

    def _walk(
        self,
        pod: Pod,
        snapshot: NodeRows,
        within: npt.NDArray[np.bool_] | None,
        ignore: Callable[[Pod], bool] | None,
        floor: int,
        namespaces: frozenset[str] | None,
    ) -> dict[int, list[Pod]]:
        """`holding` for a few nominated nodes, one by one."""
        row_of = snapshot.row_of
        found = (
            (row, pods)
            for node, pods in self._by_node.items()
            if (row := row_of.get(node)) is not None and (within is None or within[row])
        )
        return self._pods_against(pod, found, ignore, floor, namespaces)

    @staticmethod
    def _pods_against(
        pod: Pod,
        found: Iterable[tuple[int, dict[str, Pod]]],
        ignore: Callable[[Pod], bool] | None,
        floor: int,
        namespaces: frozenset[str] | None,
    ) -> dict[int, list[Pod]]:
        out: dict[int, list[Pod]] = {}
        key = pod.key
        for row, pods in found:
            others = [o for o in pods.values() if o.priority >= floor and o.key != key]
            if namespaces is not None:
                others = [o for o in others if o.namespace in namespaces]
            if ignore is not None:
                others = [o for o in others if not ignore(o)]
            if others:
                out[row] = others
        return out
