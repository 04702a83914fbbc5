"""The strings other parts match on, each defined once: plugin names (configuration files, the
`plugin` of a status, metrics labels) and the reasons of the PodScheduled condition and of events
(what `kubectl describe`, alerts and the report show)."""

from __future__ import annotations

# ---------------------------------------------------------------------------- plugins
SCHEDULING_GATES = "SchedulingGates"
PRIORITY_SORT = "PrioritySort"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
DEFAULT_PREEMPTION = "DefaultPreemption"
NODE_RESOURCES_BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
DEFAULT_BINDER = "DefaultBinder"
COSCHEDULING = "Coscheduling"
NODE_RESOURCES_FIT_PLUS = "NodeResourcesFitPlus"
SCARCE_RESOURCE_AVOIDANCE = "ScarceResourceAvoidance"
UNSUPPORTED_FEATURES = "UnsupportedFeatures"
ELASTIC_QUOTA = "ElasticQuota"
CAPACITY_SCHEDULING = "CapacityScheduling"
VOLUME_RESTRICTIONS = "VolumeRestrictions"
VOLUME_ZONE = "VolumeZone"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
VOLUME_BINDING = "VolumeBinding"

# ---------------------------------------------------------------------------- PodScheduled=False
UNSCHEDULABLE = "Unschedulable"
SCHEDULING_GATED = "SchedulingGated"
SCHEDULER_ERROR = "SchedulerError"
INVALID_SPEC = "InvalidSpec"
GANG_NOT_READY = "GangNotReady"
TOPOLOGY_UNAVAILABLE = "NetworkTopologyUnavailable"
# the pod's ElasticQuota has a problem (or sits below one), or the quota it names does not exist
QUOTA_INVALID = "QuotaInvalid"
QUOTA_NOT_FOUND = "QuotaNotFound"
# the simulator's: no profile of the scheduler serves the pod's schedulerName
SCHEDULER_NOT_FOUND = "SchedulerNotFound"

# ---------------------------------------------------------------------------- events
EVENT_SCHEDULED = "Scheduled"
EVENT_FAILED_SCHEDULING = "FailedScheduling"
EVENT_PREEMPTED = "Preempted"
# a pod asks for a Koordinator feature koordpy does not implement
EVENT_UNSUPPORTED_FEATURE = "UnsupportedFeature"
# the DisruptionTarget condition of a pod evicted by preemption
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
# a gang annotation read otherwise than written: the value koord-scheduler falls back to instead
GANG_ANNOTATION_DEFAULTED = "GangAnnotationDefaulted"
