"""The scheduling queue."""

from koordpy.queue.placement import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE
from koordpy.queue.scheduling_queue import QueueSettings, SchedulingQueue

__all__ = ["ACTIVE", "BACKOFF", "GATED", "UNSCHEDULABLE", "QueueSettings", "SchedulingQueue"]
