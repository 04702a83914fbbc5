"""The scheduler, as kube-scheduler cuts it: construction and intake (`intake`), one pod's cycle
(`cycle`), a gang group's cycle (`group`), and binding (`binding`), over the state they share
(`core`)."""

from koordpy.framework.observer import NullObserver, SchedulerObserver
from koordpy.scheduler.core import Attempt, Binding, PodOutcome
from koordpy.scheduler.cycle import num_feasible_nodes_to_find
from koordpy.scheduler.intake import Scheduler

__all__ = [
    "Attempt",
    "Binding",
    "NullObserver",
    "PodOutcome",
    "Scheduler",
    "SchedulerObserver",
    "num_feasible_nodes_to_find",
]
