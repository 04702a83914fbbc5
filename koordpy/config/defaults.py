"""The default plugin set, as data: which plugins a profile runs when the configuration names
none, with their score weights. kube-scheduler's defaults, then koordpy's own plugins."""

from __future__ import annotations

# (name, score weight); order is the order plugins run at each extension point
KUBE_DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
)

# koordpy's plugins, enabled in its default profiles after kube-scheduler's; a name the plugin
# registry does not know (yet) is skipped when defaults are built, never an error.
KOORDPY_DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    ("Coscheduling", 1),
    ("NodeResourcesFitPlus", 1),
    ("ScarceResourceAvoidance", 1),
)

DEFAULT_PROFILE_NAMES = ("koord-scheduler", "default-scheduler")
DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10
# kube-scheduler flushes pods out of the unschedulable pool after this long
DEFAULT_MAX_UNSCHEDULABLE_SECONDS = 300
