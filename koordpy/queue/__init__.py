"""The scheduling queue."""

from koordpy.queue.scheduling_queue import (
    ACTIVE,
    BACKOFF,
    GATED,
    UNSCHEDULABLE,
    QueueSettings,
    SchedulingQueue,
)

__all__ = ["ACTIVE", "BACKOFF", "GATED", "UNSCHEDULABLE", "QueueSettings", "SchedulingQueue"]
