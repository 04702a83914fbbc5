"""The default plugin set, as data: which plugins a profile runs when the configuration names
none, with their score weights. kube-scheduler's defaults, then koordpy's own plugins."""

from __future__ import annotations

from koordpy.api import names

# (name, score weight); order is the order plugins run at each extension point
KUBE_DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    (names.SCHEDULING_GATES, 0),
    (names.PRIORITY_SORT, 0),
    (names.NODE_UNSCHEDULABLE, 0),
    (names.NODE_NAME, 0),
    (names.TAINT_TOLERATION, 3),
    (names.NODE_AFFINITY, 2),
    (names.NODE_PORTS, 0),
    (names.NODE_RESOURCES_FIT, 1),
    (names.VOLUME_RESTRICTIONS, 0),
    (names.NODE_VOLUME_LIMITS, 0),
    (names.VOLUME_BINDING, 0),
    (names.VOLUME_ZONE, 0),
    (names.POD_TOPOLOGY_SPREAD, 2),
    (names.INTER_POD_AFFINITY, 2),
    (names.DEFAULT_PREEMPTION, 0),
    (names.NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    (names.IMAGE_LOCALITY, 1),
    (names.DEFAULT_BINDER, 0),
)

# koordpy's plugins, enabled in its default profiles after kube-scheduler's; a name the plugin
# registry does not know (yet) is skipped when defaults are built, never an error.
KOORDPY_DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    (names.COSCHEDULING, 1),
    (names.NODE_RESOURCES_FIT_PLUS, 1),
    (names.SCARCE_RESOURCE_AVOIDANCE, 1),
    (names.UNSUPPORTED_FEATURES, 0),
    # both quota plugins do nothing until an ElasticQuota of their API group exists; their
    # PreFilter runs after every other, so a preemption's dry run has every plugin's state
    (names.ELASTIC_QUOTA, 0),
    (names.CAPACITY_SCHEDULING, 0),
)

DEFAULT_PROFILE_NAMES = ("koord-scheduler", "default-scheduler")
DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10
# kube-scheduler flushes pods out of the unschedulable pool after this long
DEFAULT_MAX_UNSCHEDULABLE_SECONDS = 300
