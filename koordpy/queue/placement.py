"""Where each pod of a scheduling queue waits, indexed so that an event looks only at the pods it
can move (the unschedulable pool, the gated pods), never at the whole queue."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

# pods of the pool that every event treats alike: (the plugins that rejected them, their shape for
# each of those plugins' hints, in the order of the sorted plugin names)
PoolGroup = tuple[frozenset[str], tuple[Hashable, ...]]


class Placement(dict[str, str]):
    """pod key -> where it waits, with an index per place so that an event looks only at the pods
    it can move (the pool and the gated ones), never at the whole queue."""

    def __init__(self) -> None:
        super().__init__()
        self.keys_in: dict[str, dict[str, None]] = {ACTIVE: {}, BACKOFF: {}, UNSCHEDULABLE: {}, GATED: {}}
        # gated pods by the plugin that gates them, and the reverse
        self.gated_by: dict[str, dict[str, None]] = {}
        self._gate_of: dict[str, str] = {}
        # pods of the unschedulable pool by group, each with its place in the order the pool
        # was entered (moves keep that order)
        self.pool_groups: dict[PoolGroup, dict[str, int]] = {}
        self._group_of: dict[str, PoolGroup] = {}
        self._pool_seq = itertools.count()

    def park(self, key: str, group: PoolGroup) -> None:
        self[key] = UNSCHEDULABLE
        self._group_of[key] = group
        self.pool_groups.setdefault(group, {})[key] = next(self._pool_seq)

    def regroup(self, key: str, group: PoolGroup) -> None:
        """A pod that stays in the pool changed its shape: it moves to its new group and keeps its
        place in the order the pool was entered."""
        old = self._group_of[key]
        if old == group:
            return
        members = self.pool_groups[old]
        seq = members.pop(key)
        if not members:
            del self.pool_groups[old]
        self._group_of[key] = group
        self.pool_groups.setdefault(group, {})[key] = seq

    def gate(self, key: str, plugin: str) -> None:
        self[key] = GATED
        self._gate_of[key] = plugin
        self.gated_by.setdefault(plugin, {})[key] = None

    def _leave(self, key: str, old: str) -> None:
        del self.keys_in[old][key]
        if old == UNSCHEDULABLE:
            group = self._group_of.pop(key, None)
            if group is not None:
                members = self.pool_groups[group]
                del members[key]
                if not members:
                    del self.pool_groups[group]
        elif old == GATED:
            plugin = self._gate_of.pop(key, None)
            if plugin is not None:
                keys = self.gated_by[plugin]
                del keys[key]
                if not keys:
                    del self.gated_by[plugin]

    def __setitem__(self, key: str, where: str) -> None:
        old = super().get(key)
        if old is not None:
            self._leave(key, old)
        super().__setitem__(key, where)
        self.keys_in[where][key] = None

    def __delitem__(self, key: str) -> None:
        self._leave(key, super().pop(key))

    def pop(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        if key in self:
            old = super().pop(key)
            self._leave(key, old)
            return old
        return default

    def keys_at(self, where: str) -> list[str]:
        return list(self.keys_in[where])
