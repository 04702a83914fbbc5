"""The cluster cache and its array snapshot."""

from koordpy.cache.cache import Cache, CacheError, PodState
from koordpy.cache.snapshot import LabelColumn, NodeInfo, PodMatcher, Snapshot

__all__ = ["Cache", "CacheError", "LabelColumn", "NodeInfo", "PodMatcher", "PodState", "Snapshot"]
