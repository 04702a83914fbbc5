"""PrioritySort: higher priority first, then the pod that entered the queue earlier (of equal
priority, pods of a quota that uses less of its share first, when elastic quota is enabled)."""

from __future__ import annotations

from koordpy.api import names
from koordpy.framework.interfaces import Plugin, QueueSortPlugin
from koordpy.framework.queued import QueuedPodInfo

NAME = names.PRIORITY_SORT


class PrioritySort(Plugin, QueueSortPlugin):
    NAME = NAME

    def sort_key(self, info: QueuedPodInfo) -> tuple[int, float, float]:
        return (-info.pod.priority, self.handle.queue_share(info.pod), info.timestamp)
