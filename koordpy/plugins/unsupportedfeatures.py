"""UnsupportedFeatures: a pod that asks for a Koordinator feature koordpy does not implement is
never placed as if it had not asked.

Each feature is judged by what koord-scheduler would give the pod that koordpy cannot (sources:
koordinator-sh/koordinator apis/extension and pkg/scheduler/plugins):

- Needed: placing the pod without the feature gives it something other than what it asked for, so
  it stays pending, UnschedulableAndUnresolvable at PreFilter (no filter runs, preemption finds
  nothing to do), with a sentence naming the feature in its PodScheduled message:
  - Reservation: annotation `scheduling.koordinator.sh/reservation-affinity` (the pod may only use
    reserved resources: reservation/plugin.go PreFilter rejects it where no reservation matches);
    label `scheduling.koordinator.sh/operating-mode=Reservation` (the pod is itself a
    reservation that its owners allocate from).
  - DeviceShare: requests for the device resources only DeviceShare allocates (koordinator.sh/gpu,
    gpu.shared, gpu-core, gpu-memory, gpu-memory-ratio, rdma, fpga, and huawei.com/npu-core,
    npu-cpu, npu-dvpp; apis/extension/device_share.go, deviceshare/utils.go
    DeviceResourceNames): the node agent hands the pod the devices written in the
    `device-allocated` annotation, which only DeviceShare writes. A pod asking for any device
    (nvidia.com/gpu included) with `device-allocate-hint`, `device-joint-allocate` or a Restricted
    `gpu-partition-spec` needs DeviceShare to choose the devices.
  - NodeNUMAResource: an LSE or LSR pod of koord-prod priority with CPU requests gets exclusive
    CPUs bound by FullPCPUs or SpreadByPCPUs (nodenumaresource/plugin.go PreFilter,
    util.go AllowUseCPUSet; the default policy is FullPCPUs); a `numa-topology-spec` asking for
    Restricted or SingleNUMANode alignment needs NUMA-aware placement. Both are written into
    the pod's `resource-status` for the node agent.
  - SchedulingHint: a `scheduling-hint` annotation (`internal.scheduling.koordinator.sh/`, else
    the deprecated `scheduling.koordinator.sh/`) with nodeNames confines the pod to those nodes
    (schedulinghint/scheduling_hint.go PreFilter).
- Advisory: the pod is placed as kube-scheduler would, and told once:
  - ElasticQuota (label `quota.scheduling.koordinator.sh/name`): the quota limits when the pod may
    run, not what it gets.
  - Reservation preferences that only matter when a reservation is used
    (`exact-match-reservation`, `reservation-restricted-options`).
  - NUMA alignment BestEffort, a `gpu-partition-spec` with the BestEffort policy, and a scheduling
    hint with preferredNodeNames only.

Either way the pod gets one Warning event (per pod, and again only if what it asks for changes).
A feature is named after the koord-scheduler plugin that provides it: when the pod's profile runs
a plugin of that name, the feature is that plugin's business and nothing is said here.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.api.resources import CPU
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.effects import RecordEvent
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    POD_UPDATE,
    ClusterEvent,
    ClusterEventWithHint,
    Plugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    QueueingHints,
)
from koordpy.framework.status import SKIP, Code, Status

NAME = names.UNSUPPORTED_FEATURES
EVENT_REASON = names.EVENT_UNSUPPORTED_FEATURE

SCHEDULING = "scheduling.koordinator.sh"
ANNOTATION_RESERVATION_AFFINITY = f"{SCHEDULING}/reservation-affinity"
ANNOTATION_EXACT_MATCH_RESERVATION = f"{SCHEDULING}/exact-match-reservation"
ANNOTATION_RESERVATION_RESTRICTED = f"{SCHEDULING}/reservation-restricted-options"
LABEL_OPERATING_MODE = f"{SCHEDULING}/operating-mode"
RESERVATION_OPERATING_MODE = "Reservation"
ANNOTATION_DEVICE_HINT = f"{SCHEDULING}/device-allocate-hint"
ANNOTATION_DEVICE_JOINT_ALLOCATE = f"{SCHEDULING}/device-joint-allocate"
ANNOTATION_GPU_PARTITION_SPEC = f"{SCHEDULING}/gpu-partition-spec"
ANNOTATION_RESOURCE_SPEC = f"{SCHEDULING}/resource-spec"
ANNOTATION_NUMA_TOPOLOGY_SPEC = f"{SCHEDULING}/numa-topology-spec"
LABEL_QOS = "koordinator.sh/qosClass"
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_QUOTA_NAME = "quota.scheduling.koordinator.sh/name"
ANNOTATION_SCHEDULING_HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
ANNOTATION_SCHEDULING_HINT_DEPRECATED = f"{SCHEDULING}/scheduling-hint"

RESERVATION = "Reservation"
DEVICE_SHARE = "DeviceShare"
NODE_NUMA_RESOURCE = "NodeNUMAResource"
ELASTIC_QUOTA = "ElasticQuota"
SCHEDULING_HINT = "SchedulingHint"

# resources only DeviceShare allocates (a node's allocatable may list them, the devices behind
# them are handed out from the pod's device-allocated annotation)
DEVICE_SHARE_RESOURCES = (
    "koordinator.sh/gpu",
    "koordinator.sh/gpu.shared",
    "koordinator.sh/gpu-core",
    "koordinator.sh/gpu-memory",
    "koordinator.sh/gpu-memory-ratio",
    "koordinator.sh/rdma",
    "koordinator.sh/fpga",
    "huawei.com/npu-core",
    "huawei.com/npu-cpu",
    "huawei.com/npu-dvpp",
)
# device plugins' own resources, which DeviceShare also allocates when a pod asks how
DEVICE_PLUGIN_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "dcu.com/gpu")

LATENCY_SENSITIVE_QOS = frozenset({"LSE", "LSR"})
PROD = "koord-prod"
# Koordinator's priority classes by spec.priority (apis/extension/priority.go)
_PRIORITY_RANGES = (
    (9000, 9999, PROD),
    (7000, 7999, "koord-mid"),
    (5000, 5999, "koord-batch"),
    (3000, 3999, "koord-free"),
)
_PRIORITY_CLASSES = frozenset(c for _, _, c in _PRIORITY_RANGES)
# NodeNUMAResourceArgs.defaultCPUBindPolicy's default
DEFAULT_CPU_BIND_POLICY = "FullPCPUs"
BINDING_POLICIES = frozenset({"FullPCPUs", "SpreadByPCPUs"})
BEST_EFFORT = "BestEffort"

FEATURES = (RESERVATION, DEVICE_SHARE, NODE_NUMA_RESOURCE, ELASTIC_QUOTA, SCHEDULING_HINT)

# what a pod asks for the features with: every annotation above, these labels, these resources
_ANNOTATION_PREFIXES = (f"{SCHEDULING}/", "internal.scheduling.koordinator.sh/")
_LABELS = frozenset({LABEL_OPERATING_MODE, LABEL_QOS, LABEL_QUOTA_NAME})
_DEVICE_SHARE = frozenset(DEVICE_SHARE_RESOURCES)

# pods remembered as warned; beyond this the oldest are forgotten (and at worst warned again)
WARNED_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class Finding:
    """One feature the pod asks for: which, how it asks, and whether it cannot go without."""

    feature: str
    how: str
    needed: bool

    @property
    def sentence(self) -> str:
        if self.needed:
            return f"pod needs Koordinator's {self.feature} ({self.how}), which koordpy does not implement"
        return (
            f"pod asks for Koordinator's {self.feature} ({self.how}), which koordpy does not implement; "
            "it is scheduled without it"
        )


def _json_object(raw: str) -> Mapping[str, Any] | None:
    """The annotation's JSON object ({} for `null`, as Go's decoder leaves the struct empty); None
    when Go would fail to decode it into a struct."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if value is None:
        return {}
    return value if isinstance(value, Mapping) else None


def _string_field(obj: Mapping[str, Any], name: str) -> str | None:
    """A string field ("" when absent); None when it holds another type (a decode error in Go)."""
    value = obj.get(name)
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def _reservation(pod: Pod) -> list[Finding]:
    out: list[Finding] = []
    # present counts, even empty: Koordinator then requires a reservation with no constraint
    if ANNOTATION_RESERVATION_AFFINITY in pod.annotations:
        out.append(Finding(RESERVATION, f"annotation {ANNOTATION_RESERVATION_AFFINITY}", True))
    if pod.labels.get(LABEL_OPERATING_MODE) == RESERVATION_OPERATING_MODE:
        out.append(Finding(RESERVATION, f"label {LABEL_OPERATING_MODE}={RESERVATION_OPERATING_MODE}", True))
    for key in (ANNOTATION_EXACT_MATCH_RESERVATION, ANNOTATION_RESERVATION_RESTRICTED):
        if pod.annotations.get(key):
            out.append(Finding(RESERVATION, f"annotation {key}", False))
    return out


def _device_share(pod: Pod) -> list[Finding]:
    asked = [r for r in DEVICE_SHARE_RESOURCES if pod.requests.get(r, 0) > 0]
    out: list[Finding] = []
    if asked:
        noun = "resource" if len(asked) == 1 else "resources"
        out.append(Finding(DEVICE_SHARE, f"{noun} {', '.join(asked)}", True))
    elif not any(pod.requests.get(r, 0) > 0 for r in DEVICE_PLUGIN_RESOURCES):
        # without a device request DeviceShare leaves the pod alone, and so its hints
        return out
    for key in (ANNOTATION_DEVICE_HINT, ANNOTATION_DEVICE_JOINT_ALLOCATE):
        if key in pod.annotations:
            out.append(Finding(DEVICE_SHARE, f"annotation {key}", True))
    raw = pod.annotations.get(ANNOTATION_GPU_PARTITION_SPEC)
    if raw is not None:
        spec = _json_object(raw)
        policy = None if spec is None else _string_field(spec, "allocatePolicy")
        # BestEffort (the default) prefers a partition; Restricted insists on one
        needed = policy is None or policy not in ("", BEST_EFFORT)
        how = f"annotation {ANNOTATION_GPU_PARTITION_SPEC}"
        if policy:
            how += f" with allocatePolicy {policy}"
        out.append(Finding(DEVICE_SHARE, how, needed))
    return out


def _koord_priority_class(pod: Pod) -> str:
    """The pod's Koordinator priority class, "" when none (GetPodPriorityClassRaw)."""
    if LABEL_PRIORITY_CLASS in pod.labels:
        value = pod.labels[LABEL_PRIORITY_CLASS]
        return value if value in _PRIORITY_CLASSES else ""
    for low, high, name in _PRIORITY_RANGES:
        if low <= pod.priority <= high:
            return name
    return ""


def _numa(pod: Pod) -> list[Finding]:
    out: list[Finding] = []
    if not any(v > 0 for v in pod.requests.values()):
        # NodeNUMAResource skips a pod that requests nothing
        return out
    qos = pod.labels.get(LABEL_QOS, "")
    raw_resource_spec = pod.annotations.get(ANNOTATION_RESOURCE_SPEC)
    resource_spec = {} if raw_resource_spec is None else _json_object(raw_resource_spec)
    # koord-scheduler refuses a pod whose spec it cannot decode at PreFilter
    bad_resource_spec = Finding(
        NODE_NUMA_RESOURCE, f"annotation {ANNOTATION_RESOURCE_SPEC}, not a valid spec", True
    )
    if resource_spec is None:
        out.append(bad_resource_spec)
    elif qos in LATENCY_SENSITIVE_QOS and (_koord_priority_class(pod) or PROD) == PROD:
        # an LSE/LSR pod without a Koordinator priority class is koord-prod
        preferred = _string_field(resource_spec, "preferredCPUBindPolicy")
        required = _string_field(resource_spec, "requiredCPUBindPolicy")
        if preferred is None or required is None:
            out.append(bad_resource_spec)
        else:
            policy = DEFAULT_CPU_BIND_POLICY if preferred in ("", "Default") else preferred
            if required:
                policy = DEFAULT_CPU_BIND_POLICY if required == "Default" else required
            if policy in BINDING_POLICIES and pod.requests.get(CPU, 0) > 0:
                out.append(
                    Finding(NODE_NUMA_RESOURCE, f"label {LABEL_QOS}={qos}: CPUs bound by {policy}", True)
                )
    raw_numa = pod.annotations.get(ANNOTATION_NUMA_TOPOLOGY_SPEC)
    if raw_numa is not None:
        numa = _json_object(raw_numa)
        alignment = None if numa is None else _string_field(numa, "numaTopologyPolicy")
        if alignment is None:
            how = f"annotation {ANNOTATION_NUMA_TOPOLOGY_SPEC}, not a valid spec"
            out.append(Finding(NODE_NUMA_RESOURCE, how, True))
        elif alignment:
            how = f"annotation {ANNOTATION_NUMA_TOPOLOGY_SPEC}: numaTopologyPolicy {alignment}"
            out.append(Finding(NODE_NUMA_RESOURCE, how, alignment != BEST_EFFORT))
    return out


def _elastic_quota(pod: Pod) -> list[Finding]:
    quota = pod.labels.get(LABEL_QUOTA_NAME)
    if not quota:
        return []
    return [Finding(ELASTIC_QUOTA, f"label {LABEL_QUOTA_NAME}={quota}", False)]


def _scheduling_hint(pod: Pod) -> list[Finding]:
    # an empty annotation is no hint; the current key wins over the deprecated one
    key = next(
        (
            k
            for k in (ANNOTATION_SCHEDULING_HINT, ANNOTATION_SCHEDULING_HINT_DEPRECATED)
            if pod.annotations.get(k)
        ),
        None,
    )
    if key is None:
        return []
    hint = _json_object(pod.annotations[key])
    if hint is None:
        return [Finding(SCHEDULING_HINT, f"annotation {key}, not a valid hint", True)]
    if hint.get("nodeNames"):
        return [Finding(SCHEDULING_HINT, f"annotation {key} with nodeNames", True)]
    if hint.get("preferredNodeNames"):
        return [Finding(SCHEDULING_HINT, f"annotation {key} with preferredNodeNames", False)]
    return []


def _may_ask(pod: Pod) -> bool:
    """Whether the pod carries anything the features are asked for with (every pod is looked at
    once per cycle: most carry nothing of the kind and stop here)."""
    if not _LABELS.isdisjoint(pod.labels) or not _DEVICE_SHARE.isdisjoint(pod.requests):
        return True
    return any(key.startswith(_ANNOTATION_PREFIXES) for key in pod.annotations)


def findings(pod: Pod) -> tuple[Finding, ...]:
    """Every Koordinator feature the pod asks for that koordpy does not implement."""
    if not _may_ask(pod):
        return ()
    return (
        *_reservation(pod),
        *_device_share(pod),
        *_numa(pod),
        *_elastic_quota(pod),
        *_scheduling_hint(pod),
    )


class UnsupportedFeatures(Plugin, PreFilterPlugin, QueueingHints):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        # pod uid -> the sentences it was warned with, oldest pod first
        self._warned: dict[str, tuple[str, ...]] = {}
        self._provided_by_profile: frozenset[str] | None = None
        handle.on_pod_event(self._on_pod)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # only the pod itself changing can drop what it asks for
        return (POD_UPDATE,)

    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(POD_UPDATE, self.after_pod_change),)

    def after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """The pod's own update may drop what it asks for; another pod's cannot."""
        return QueueingHint.QUEUE if new is not None and new.key == pod.key else QueueingHint.QUEUE_SKIP

    def hint_shape(self, pod: Pod) -> Hashable:
        # to every other pod's event the answer is the same (the pod's own is asked apart)
        return ()

    def _on_pod(self, action: str, pod: Pod) -> None:
        # a deleted pod is not asked about again; a bound one is not scheduled again
        if action == "Delete" or pod.node_name:
            self._warned.pop(pod.uid or pod.key, None)

    def _warn(self, pod: Pod, found: Sequence[Finding]) -> None:
        sentences = tuple(f.sentence for f in found)
        uid = pod.uid or pod.key
        if self._warned.get(uid) == sentences:
            return
        self._warned.pop(uid, None)
        while len(self._warned) >= WARNED_LIMIT:
            del self._warned[next(iter(self._warned))]
        self._warned[uid] = sentences
        self.handle.emit(RecordEvent(pod, "Warning", EVENT_REASON, "; ".join(sentences)))

    def _provided(self) -> frozenset[str]:
        """The features this profile runs a plugin for (ElasticQuota, in koordpy's default profiles)."""
        if self._provided_by_profile is None:
            profile = self.handle.profile
            self._provided_by_profile = frozenset(
                f for f in FEATURES if profile is not None and profile.plugin(f) is not None
            )
        return self._provided_by_profile

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        found = findings(pod)
        provided = self._provided()
        if found and provided:
            found = tuple(f for f in found if f.feature not in provided)
        if not found:
            return None, SKIP
        self._warn(pod, found)
        needed = tuple(f.sentence for f in found if f.needed)
        if needed:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, needed, NAME)
        return None, SKIP
