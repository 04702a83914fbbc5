"""The cluster cache, its array snapshot, and trials over the snapshot."""

from koordpy.cache.cache import Cache, CacheError, PodState
from koordpy.cache.snapshot import LabelColumn, NodeInfo, PodMatcher, Snapshot
from koordpy.cache.trial import Trial, TrialError

__all__ = [
    "Cache",
    "CacheError",
    "LabelColumn",
    "NodeInfo",
    "PodMatcher",
    "PodState",
    "Snapshot",
    "Trial",
    "TrialError",
]
