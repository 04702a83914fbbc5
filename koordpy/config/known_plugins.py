"""The plugins of the schedulers koordpy replaces, as data: kube-scheduler's in-tree plugins,
koord-scheduler's (koordinator-sh/koordinator, cmd/koord-scheduler/main.go) and scheduler-plugins'
(kubernetes-sigs/scheduler-plugins, cmd/scheduler/main.go), each with what it does and what
koordpy makes of it.

- SUPPORTED: koordpy implements it under the same name, with the same args.
- INERT: accepted and left out, without a warning: in its own scheduler it serves that scheduler's
  internals and changes no placement (the reason is in `why`).
- UNSUPPORTED: a configuration naming it is refused, every such plugin listed with what it does;
  `--allow-unsupported-plugins` starts koordpy without them (and their pluginConfig), with one
  warning naming each.

A name in none of these rows, and not one of koordpy's plugins, is an unknown plugin: an error.
docs/migrating.md shows this table; a test keeps the two the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Support(StrEnum):
    SUPPORTED = "supported"
    INERT = "accepted without effect"
    UNSUPPORTED = "not supported"


KUBE_SCHEDULER = "kube-scheduler"
KOORD_SCHEDULER = "koord-scheduler"
SCHEDULER_PLUGINS = "scheduler-plugins"


@dataclass(frozen=True, slots=True)
class KnownPlugin:
    name: str
    projects: tuple[str, ...]
    does: str
    support: Support
    # what a user moving to koordpy does about the plugin
    advice: str
    # extension points the reference implementation has and koordpy's does not, with what
    # enabling the plugin there does in koordpy: "" when koordpy does that work at another point,
    # otherwise what it leaves undone (said in the warning about settings koordpy does not honour)
    other_points: tuple[tuple[str, str], ...] = ()

    @property
    def summary(self) -> str:
        return f"{self.name} ({', '.join(self.projects)}: {self.does})"


_SAME = "nothing: same name, same args"
_WITHOUT = (
    "start koordpy with --allow-unsupported-plugins to run without it, or keep the pods that need it "
    "on the scheduler that has it"
)
KNOWN_PLUGINS: tuple[KnownPlugin, ...] = (
    # ------------------------------------------------------------------ kube-scheduler, in tree
    KnownPlugin(
        "PrioritySort",
        (KUBE_SCHEDULER,),
        "queue order: priority, then arrival",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "SchedulingGates",
        (KUBE_SCHEDULER,),
        "holds pods with spec.schedulingGates out of the queue",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "NodeUnschedulable",
        (KUBE_SCHEDULER,),
        "filters out cordoned nodes unless the pod tolerates it",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin("NodeName", (KUBE_SCHEDULER,), "honours spec.nodeName", Support.SUPPORTED, _SAME),
    KnownPlugin(
        "TaintToleration",
        (KUBE_SCHEDULER,),
        "filters by NoSchedule taints, prefers nodes with fewer untolerated PreferNoSchedule taints",
        Support.SUPPORTED,
        _SAME,
        (("preScore", ""),),
    ),
    KnownPlugin(
        "NodeAffinity",
        (KUBE_SCHEDULER,),
        "nodeSelector and node affinity, required and preferred",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "NodePorts",
        (KUBE_SCHEDULER,),
        "filters out nodes where a requested host port is taken",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "NodeResourcesFit",
        (KUBE_SCHEDULER,),
        "filters by requested resources; scores LeastAllocated, MostAllocated or RequestedToCapacityRatio",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "NodeResourcesBalancedAllocation",
        (KUBE_SCHEDULER,),
        "prefers nodes whose resources stay balanced across dimensions",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "PodTopologySpread",
        (KUBE_SCHEDULER,),
        "topology spread constraints, with default constraints",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "InterPodAffinity",
        (KUBE_SCHEDULER,),
        "pod affinity and anti-affinity, required and preferred",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "ImageLocality",
        (KUBE_SCHEDULER,),
        "prefers nodes that already hold the pod's images",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "DefaultPreemption",
        (KUBE_SCHEDULER,),
        "evicts lower-priority pods to make room, PodDisruptionBudgets respected where possible",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin("DefaultBinder", (KUBE_SCHEDULER,), "binds the pod to its node", Support.SUPPORTED, _SAME),
    KnownPlugin(
        "VolumeBinding",
        (KUBE_SCHEDULER,),
        "binds PersistentVolumeClaims, provisioning as needed, and filters nodes by volume topology",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "VolumeRestrictions",
        (KUBE_SCHEDULER,),
        "filters nodes by volume access-mode conflicts (ReadWriteOncePod and disk conflicts)",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "VolumeZone",
        (KUBE_SCHEDULER,),
        "filters nodes by the zone labels of the pod's PersistentVolumes",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "NodeVolumeLimits",
        (KUBE_SCHEDULER,),
        "filters nodes that reached their CSI volume attach limit",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "DynamicResources",
        (KUBE_SCHEDULER,),
        "allocates ResourceClaims (dynamic resource allocation, DRA)",
        Support.UNSUPPORTED,
        _WITHOUT,
    ),
    KnownPlugin(
        "GangScheduling",
        (KUBE_SCHEDULER,),
        "all-or-nothing placement of the pods of a Workload (alpha)",
        Support.UNSUPPORTED,
        "koordpy's gangs are PodGroups and gang annotations, placed by Coscheduling; " + _WITHOUT,
    ),
    KnownPlugin(
        "NodeDeclaredFeatures",
        (KUBE_SCHEDULER,),
        "filters nodes by the features they declare (status.declaredFeatures) against those the "
        "pod's spec needs (v1.37)",
        Support.UNSUPPORTED,
        "koordpy does not read the features nodes declare; " + _WITHOUT,
    ),
    KnownPlugin(
        "DeferredPodScheduling",
        (KUBE_SCHEDULER,),
        "keeps a pod whose in-place resize the kubelet deferred from being placed by preemption where "
        "the node forbids it (v1.37, behind InPlacePodVerticalScalingSchedulerPreemption)",
        Support.UNSUPPORTED,
        _WITHOUT,
    ),
    KnownPlugin(
        "TopologyPlacementGenerator",
        (KUBE_SCHEDULER,),
        "proposes placements of a Workload's pod group by its topology constraints (v1.37, alpha)",
        Support.UNSUPPORTED,
        "koordpy places gangs by topology with Coscheduling and a ClusterNetworkTopology; " + _WITHOUT,
    ),
    KnownPlugin(
        "PodGroupPodsCount",
        (KUBE_SCHEDULER,),
        "scores a pod group's placements by how many of its pods they hold (v1.37, alpha)",
        Support.UNSUPPORTED,
        _WITHOUT,
    ),
    # ------------------------------------------------------------------ koord-scheduler
    KnownPlugin(
        "Coscheduling",
        (KOORD_SCHEDULER, SCHEDULER_PLUGINS),
        "gang scheduling: PodGroups and gang annotations placed all or nothing, gang groups, job-level "
        "preemption, network-topology-aware placement and scoring",
        Support.SUPPORTED,
        "nothing: both projects' args are read (fields koordpy does not use are named in a warning)",
    ),
    KnownPlugin(
        "NodeResourcesFitPlus",
        (KOORD_SCHEDULER,),
        "scores each resource with its own strategy (LeastAllocated or MostAllocated) and weight",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "ScarceResourceAvoidance",
        (KOORD_SCHEDULER,),
        "keeps pods that do not need a scarce resource (e.g. GPUs) off the nodes that have it",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "DefaultPreBind",
        (KOORD_SCHEDULER,),
        "applies, in one patch, the changes other koord-scheduler plugins made to a pod or Reservation "
        "before it is bound",
        Support.INERT,
        "nothing: none of koordpy's plugins leaves a change for it to apply (what they add travels with "
        "the binding), and it decides nothing about placement",
    ),
    KnownPlugin(
        "SchedulingHint",
        (KOORD_SCHEDULER,),
        "honours the scheduling-hint annotation: limits a pod to the nodes it names and tries its "
        "preferred nodes first",
        Support.UNSUPPORTED,
        "a pod's scheduling-hint annotation is ignored; " + _WITHOUT,
    ),
    KnownPlugin(
        "LoadAwareScheduling",
        (KOORD_SCHEDULER,),
        "filters out nodes whose measured utilisation (NodeMetric, from koordlet) is above a threshold "
        "and prefers the least loaded",
        Support.UNSUPPORTED,
        "koordpy places by requests, not measured load; " + _WITHOUT,
    ),
    KnownPlugin(
        "NodeNUMAResource",
        (KOORD_SCHEDULER,),
        "CPU binding (cpusets) and NUMA-aware allocation of CPU and memory",
        Support.UNSUPPORTED,
        "pods asking for bound CPUs or a NUMA policy get no binding; " + _WITHOUT,
    ),
    KnownPlugin(
        "DeviceShare",
        (KOORD_SCHEDULER,),
        "allocates GPUs, RDMA and FPGA devices one by one (Device objects), shared GPU fractions included",
        Support.UNSUPPORTED,
        "whole devices requested as extended resources (nvidia.com/gpu) are placed by NodeResourcesFit; "
        "device-level allocation and shared GPUs are not; " + _WITHOUT,
    ),
    KnownPlugin(
        "Reservation",
        (KOORD_SCHEDULER,),
        "Reservation objects hold resources on a node for the pods they name, which are placed into them",
        Support.UNSUPPORTED,
        "Reservations are neither placed nor used; " + _WITHOUT,
    ),
    KnownPlugin(
        "ElasticQuota",
        (KOORD_SCHEDULER,),
        "hierarchical ElasticQuota min/max per quota group, borrowing idle quota and preempting to "
        "reclaim it",
        Support.SUPPORTED,
        "nothing: same name, same args (the revoke loop's settings are read and named in a warning: "
        "koordpy reclaims by preemption)",
    ),
    # ------------------------------------------------------------------ scheduler-plugins
    KnownPlugin(
        "CapacityScheduling",
        (SCHEDULER_PLUGINS,),
        "ElasticQuota min/max per namespace, borrowing and preemption within quotas",
        Support.SUPPORTED,
        _SAME,
    ),
    KnownPlugin(
        "NodeResourcesAllocatable",
        (SCHEDULER_PLUGINS,),
        "prefers nodes with the least (or most) allocatable resources, weighted per resource",
        Support.UNSUPPORTED,
        "NodeResourcesFit's MostAllocated or NodeResourcesFitPlus rank nodes by use rather than size; "
        + _WITHOUT,
    ),
    KnownPlugin(
        "NodeResourceTopologyMatch",
        (SCHEDULER_PLUGINS,),
        "NUMA-aware filter and score from NodeResourceTopology objects",
        Support.UNSUPPORTED,
        _WITHOUT,
    ),
    KnownPlugin(
        "TargetLoadPacking",
        (SCHEDULER_PLUGINS,),
        "packs nodes up to a target CPU utilisation measured by load-watcher (Trimaran)",
        Support.UNSUPPORTED,
        "koordpy places by requests, not measured load; " + _WITHOUT,
    ),
    KnownPlugin(
        "LoadVariationRiskBalancing",
        (SCHEDULER_PLUGINS,),
        "prefers nodes whose measured utilisation has a low mean and variation (Trimaran)",
        Support.UNSUPPORTED,
        "koordpy places by requests, not measured load; " + _WITHOUT,
    ),
    KnownPlugin(
        "LowRiskOverCommitment",
        (SCHEDULER_PLUGINS,),
        "prefers nodes with the least risk from pods' limits above requests and measured load (Trimaran)",
        Support.UNSUPPORTED,
        "koordpy places by requests, not measured load; " + _WITHOUT,
    ),
    KnownPlugin(
        "Peaks",
        (SCHEDULER_PLUGINS,),
        "prefers nodes whose power draw grows least with the pod, from measured utilisation (Trimaran)",
        Support.UNSUPPORTED,
        "koordpy places by requests, not measured load; " + _WITHOUT,
    ),
    KnownPlugin(
        "NetworkOverhead",
        (SCHEDULER_PLUGINS,),
        "filters and scores nodes by network cost to the pod's dependencies (AppGroup and "
        "NetworkTopology objects)",
        Support.UNSUPPORTED,
        "for gangs, Coscheduling's network-topology-spec places members within a topology domain; "
        + _WITHOUT,
    ),
    KnownPlugin(
        "TopologicalSort",
        (SCHEDULER_PLUGINS,),
        "queue order of an AppGroup's pods by their dependencies",
        Support.UNSUPPORTED,
        "left out, koordpy's default queue order takes its place; " + _WITHOUT,
    ),
    KnownPlugin(
        "QOSSort",
        (SCHEDULER_PLUGINS,),
        "queue order by priority, then QoS class (Guaranteed, Burstable, BestEffort)",
        Support.UNSUPPORTED,
        "left out, koordpy's default queue order (priority, then arrival) takes its place; " + _WITHOUT,
    ),
    KnownPlugin(
        "NodeMetadata",
        (SCHEDULER_PLUGINS,),
        "prefers nodes by a number or timestamp in a node label or annotation",
        Support.UNSUPPORTED,
        "a preferred node affinity on the label is the nearest koordpy has; " + _WITHOUT,
    ),
    KnownPlugin(
        "PreemptionToleration",
        (SCHEDULER_PLUGINS,),
        "preemption that spares victims whose PriorityClass tolerates it (minimum preemptor priority, "
        "toleration seconds)",
        Support.UNSUPPORTED,
        "DefaultPreemption ignores the PriorityClass annotations; " + _WITHOUT,
    ),
    KnownPlugin(
        "CrossNodePreemption",
        (SCHEDULER_PLUGINS,),
        "preemption that may choose victims across several nodes (a sample, not in the released image)",
        Support.UNSUPPORTED,
        _WITHOUT,
    ),
    KnownPlugin(
        "SySched",
        (SCHEDULER_PLUGINS,),
        "prefers nodes whose pods use similar system calls (seccomp profiles of the Security Profiles "
        "Operator)",
        Support.UNSUPPORTED,
        _WITHOUT,
    ),
    KnownPlugin(
        "PodState",
        (SCHEDULER_PLUGINS,),
        "prefers nodes with terminating pods over nodes with nominated pods",
        Support.UNSUPPORTED,
        _WITHOUT,
    ),
)

KNOWN_PLUGINS_BY_NAME: dict[str, KnownPlugin] = {p.name: p for p in KNOWN_PLUGINS}

ALLOW_UNSUPPORTED_FLAG = "--allow-unsupported-plugins"
ALLOW_UNSUPPORTED_HINT = (
    f"koordpy starts without the plugins it does not support when run with {ALLOW_UNSUPPORTED_FLAG} "
    "(Helm chart: allowUnsupportedPlugins: true)"
)


def known(name: str) -> KnownPlugin | None:
    return KNOWN_PLUGINS_BY_NAME.get(name)


def other_point_note(name: str, point: str) -> str | None:
    """None when the reference implementation of `name` has no such point; otherwise what enabling
    it there leaves undone in koordpy ("" for nothing)."""
    plugin = KNOWN_PLUGINS_BY_NAME.get(name)
    if plugin is None:
        return None
    return dict(plugin.other_points).get(point)
