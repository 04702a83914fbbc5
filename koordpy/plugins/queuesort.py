"""PrioritySort: higher priority first, then the pod that entered the queue earlier."""

from __future__ import annotations

from koordpy.framework.interfaces import Plugin
from koordpy.framework.queued import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort(Plugin):
    NAME = NAME

    def sort_key(self, info: QueuedPodInfo) -> tuple[int, float]:
        return (-info.pod.priority, info.timestamp)
