"""PrioritySort: higher priority first, then the pod that entered the queue earlier."""

from __future__ import annotations

from koordpy.api import names
from koordpy.framework.interfaces import Plugin, QueueSortPlugin
from koordpy.framework.queued import QueuedPodInfo

NAME = names.PRIORITY_SORT


class PrioritySort(Plugin, QueueSortPlugin):
    NAME = NAME

    def sort_key(self, info: QueuedPodInfo) -> tuple[int, float]:
        return (-info.pod.priority, info.timestamp)
