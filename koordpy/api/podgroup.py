"""PodGroup in both API groups: `scheduling.sigs.k8s.io/v1alpha1` (Koordinator's) and
`scheduling.x-k8s.io/v1alpha1` (current scheduler-plugins)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.resources import ResourceList, parse_resource_list
from koordpy.api.time import parse_timestamp

SIGS_GROUP = "scheduling.sigs.k8s.io"
X_K8S_GROUP = "scheduling.x-k8s.io"
SIGS_POD_LABEL = "pod-group.scheduling.sigs.k8s.io"
X_K8S_POD_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_KIND = "PodGroup"
# Koordinator's ways to name a gang without a PodGroup label: its annotation, or the deprecated
# lightweight label
GANG_NAME_ANNOTATION = "gang.scheduling.koordinator.sh/name"
LIGHTWEIGHT_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
BY_ANNOTATION = "annotation"
_INT32_MAX = 2**31 - 1


def gang_reference(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[str, str] | None:
    """Which gang a pod names, first match wins: (SIGS_GROUP or X_K8S_GROUP, PodGroup name) for a
    PodGroup label, (BY_ANNOTATION, gang name) for the annotation or lightweight label; None for a
    pod of no gang."""
    for label, source in ((SIGS_POD_LABEL, SIGS_GROUP), (X_K8S_POD_LABEL, X_K8S_GROUP)):
        name = labels.get(label)
        if name:
            return source, name
    name = labels.get(LIGHTWEIGHT_NAME_LABEL) or annotations.get(GANG_NAME_ANNOTATION)
    return (BY_ANNOTATION, name) if name else None


@dataclass(frozen=True, slots=True, eq=False)
class PodGroup:
    api_group: str
    namespace: str
    name: str
    uid: str
    min_member: int
    schedule_timeout_seconds: int | None
    # None when the spec does not set minResources (scheduler-plugins checks only a group that
    # does, an empty map included)
    min_resources: ResourceList | None
    annotations: Mapping[str, str]
    creation_ts: float
    status: Mapping[str, Any]
    spec_error: SpecError | None
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pod_label(self) -> str:
        return SIGS_POD_LABEL if self.api_group == SIGS_GROUP else X_K8S_POD_LABEL

    def __repr__(self) -> str:
        return f"PodGroup({self.api_group}, {self.key})"

    @staticmethod
    def from_dict(obj: Mapping[str, Any], *, creation_ts: float | None = None) -> PodGroup:
        api_version = str(obj.get("apiVersion") or "")
        group = api_version.split("/", 1)[0]
        if group not in (SIGS_GROUP, X_K8S_GROUP):
            raise SpecError("apiVersion", f"unknown PodGroup API group {group!r}")
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        assert isinstance(status, Mapping)
        error: SpecError | None = None
        min_member = spec.get("minMember", 0)
        timeout = spec.get("scheduleTimeoutSeconds")
        min_resources: ResourceList | None = None
        try:
            if not isinstance(min_member, int) or isinstance(min_member, bool):
                raise SpecError("spec.minMember", f"must be an integer, got {min_member!r}")
            if min_member > _INT32_MAX:
                raise SpecError("spec.minMember", f"must be a 32-bit integer, got {min_member}")
            if min_member < 0 or (group == X_K8S_GROUP and min_member < 1):
                floor = 1 if group == X_K8S_GROUP else 0
                raise SpecError("spec.minMember", f"must be at least {floor}, got {min_member}")
            if timeout is not None and (
                not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 <= timeout <= _INT32_MAX
            ):
                raise SpecError(
                    "spec.scheduleTimeoutSeconds", f"must be a non-negative 32-bit integer, got {timeout!r}"
                )
            if spec.get("minResources") is not None:
                min_resources = parse_resource_list(spec.get("minResources"), "spec.minResources")
        except SpecError as err:
            error = err
            valid = isinstance(min_member, int) and not isinstance(min_member, bool)
            min_member = min_member if valid and 0 <= min_member <= _INT32_MAX else 0
            timeout = None
        ts = creation_ts if creation_ts is not None else parse_timestamp(meta.get("creationTimestamp"))
        namespace = str(meta.get("namespace") or "default")
        name = str(meta.get("name") or "")
        annotations = meta.get("annotations")
        return PodGroup(
            api_group=group,
            namespace=namespace,
            name=name,
            uid=str(meta.get("uid") or f"{group}/{namespace}/{name}"),
            min_member=min_member,
            schedule_timeout_seconds=timeout,
            min_resources=min_resources,
            annotations=(
                {str(k): str(v) for k, v in annotations.items()} if isinstance(annotations, Mapping) else {}
            ),
            creation_ts=ts or 0.0,
            status=status,
            spec_error=error,
            raw=obj,
        )
