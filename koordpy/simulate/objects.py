"""The objects of a scenario's documents, List items flattened, each checked for what identifies it
(kind, apiVersion, name, namespace), for the JSON types of the fields an API server decodes, and
with its namespace defaulted.

The type check is the API server's decoding, not its validation: a field of the wrong JSON type (an
object where a string belongs, a number outside its integer type) makes the server refuse the whole
object, so it is an input error here too; a well-typed value the scheduler cannot make sense of is
left for the scheduler to report, as a cluster would.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from koordpy.api.errors import SpecError, join_path
from koordpy.api.podgroup import SIGS_GROUP, X_K8S_GROUP
from koordpy.simulate.documents import (
    CLUSTER_SCOPED,
    DEFAULT_NAMESPACE,
    ScenarioError,
    Source,
    display_name,
)

__all__ = [
    "API_VERSIONS",
    "CLUSTER_SCOPED",
    "DEFAULT_NAMESPACE",
    "Entry",
    "check_types",
    "entries_of",
    "shown",
    "type_name",
]

# The apiVersions each kind is accepted in: the ones a current API server serves.
API_VERSIONS: dict[str, frozenset[str]] = {
    "Node": frozenset({"v1"}),
    "Pod": frozenset({"v1"}),
    "Namespace": frozenset({"v1"}),
    "PriorityClass": frozenset({"scheduling.k8s.io/v1"}),
    "PodGroup": frozenset({f"{SIGS_GROUP}/v1alpha1", f"{X_K8S_GROUP}/v1alpha1"}),
    "ClusterNetworkTopology": frozenset({"scheduling.koordinator.sh/v1alpha1"}),
    # Koordinator's (a quota tree) and scheduler-plugins' CapacityScheduling (one per namespace)
    "ElasticQuota": frozenset({f"{SIGS_GROUP}/v1alpha1", f"{X_K8S_GROUP}/v1alpha1"}),
    "PodDisruptionBudget": frozenset({"policy/v1"}),
    "ReplicaSet": frozenset({"apps/v1"}),
    "Deployment": frozenset({"apps/v1"}),
    "StatefulSet": frozenset({"apps/v1"}),
    "Job": frozenset({"batch/v1"}),
    "List": frozenset({"v1"}),
}


@dataclass(slots=True)
class Entry:
    """One object of the input with what identifies it; `prefix` locates List items (`items[2]`)."""

    obj: dict[str, Any]
    source: Source
    prefix: str
    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def display(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def error(self, field: str, message: str) -> ScenarioError:
        return ScenarioError(
            self.source.file,
            self.source.document,
            _join(self.prefix, field),
            message,
            kind=self.kind,
            name=self.display,
        )

    def spec_error(self, err: SpecError, under: str = "") -> ScenarioError:
        return self.error(_join(under, err.path) if under else err.path, err.message)


def _join(prefix: str, field: str) -> str:
    return join_path(prefix, field) if field else prefix


def _located(
    source: Source, prefix: str, kind: str, field: str, message: str, name: str = ""
) -> ScenarioError:
    return ScenarioError(source.file, source.document, _join(prefix, field), message, kind=kind, name=name)


def entries_of(doc: Any, source: Source, prefix: str = "") -> Iterator[Entry]:
    """The objects in one document, List items flattened; checks what identifies an object and the
    JSON types of its fields."""
    if not isinstance(doc, Mapping):
        raise _located(source, prefix, "", "", f"expected an object, got {type_name(doc)}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        message = "missing" if kind is None else f"must be a string, got {shown(kind)}"
        raise _located(source, prefix, "", "kind", message)
    versions = API_VERSIONS.get(kind)
    if versions is None:
        known = ", ".join(sorted(API_VERSIONS))
        raise _located(
            source, prefix, kind, "kind", f"unknown kind {shown(kind)}; the simulator reads {known}"
        )
    api_version = doc.get("apiVersion")
    if not isinstance(api_version, str) or api_version not in versions:
        expected = " or ".join(sorted(versions))
        got = "missing" if api_version is None else f"got {shown(api_version)}"
        raise _located(source, prefix, kind, "apiVersion", f"{kind} must be {expected}, {got}")
    if kind == "List":
        items = doc.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise _located(source, prefix, kind, "items", f"expected a list, got {type_name(items)}")
        for i, item in enumerate(items):
            yield from entries_of(item, source, join_path(prefix, f"items[{i}]"))
        return
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        message = "missing" if meta is None else f"expected an object, got {type_name(meta)}"
        raise _located(source, prefix, kind, "metadata", message)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        message = (
            "every object needs a name" if name in (None, "") else f"must be a string, got {shown(name)}"
        )
        raise _located(source, prefix, kind, "metadata.name", message)
    namespace = ""
    if kind not in CLUSTER_SCOPED:
        raw_ns = meta.get("namespace")
        if raw_ns is not None and not isinstance(raw_ns, str):
            raise _located(
                source,
                prefix,
                kind,
                "metadata.namespace",
                f"must be a string, got {shown(raw_ns)}",
                name=name,
            )
        namespace = raw_ns or DEFAULT_NAMESPACE
    try:
        check_types(doc, KIND_SCHEMAS[kind])
    except SpecError as err:
        name_shown = display_name(kind, namespace, name)
        raise _located(source, prefix, kind, err.path, err.message, name=name_shown) from None
    # Written back so that every consumer of the dict sees the defaulted namespace.
    obj = {**doc, "metadata": {**meta, "namespace": namespace}} if namespace else dict(doc)
    yield Entry(obj, source, prefix, kind, namespace, name)


def type_name(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


# How much of a value a message quotes: input values can be megabytes long.
_SHOWN_CHARACTERS = 60


def shown(value: Any) -> str:
    """A value as a message quotes it: repr, cut short; numbers too long to print by their size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a number of {value.bit_length()} bits"
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value)
        return text if len(text) <= _SHOWN_CHARACTERS else text[: _SHOWN_CHARACTERS - 4] + "...'"
    return type_name(value)


# --- the JSON types of the fields the API server decodes --------------------------------------------
#
# A schema is a scalar type name, a dict of the fields of an object (fields it does not list are not
# checked: the simulator never reads them), a one-element list (a list of that), or MapOf (a map
# from strings). null is accepted everywhere, as Go's JSON decoding accepts it for any field, but as
# a label or annotation: a map of strings holds strings.


@dataclass(frozen=True, slots=True)
class MapOf:
    values: Any


STRING = "string"
BOOLEAN = "boolean"
INT32 = "int32"
INT64 = "int64"
QUANTITY = "quantity"  # resource.Quantity: a string, or a number
INT_OR_STRING = "int-or-string"  # intstr.IntOrString: an int32 or a string
TIME = "time"  # metav1.Time: an RFC 3339 string
OBJECT = "object"  # an object whose fields the simulator does not read

_INT_RANGES = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}


class _Path:
    """A field path built only when an error needs it."""

    __slots__ = ("name", "parent")

    def __init__(self, parent: _Path | None, name: str) -> None:
        self.parent = parent
        self.name = name

    def render(self) -> str:
        names: list[str] = []
        node: _Path | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        path = ""
        for name in reversed(names):
            path = join_path(path, name)
        return path


def _rendered(path: _Path | None) -> str:
    return path.render() if path is not None else ""


def _expected(path: _Path | None, expected: str, value: Any) -> SpecError:
    """A collection of the wrong type: "expected an object, got a list"."""
    return SpecError(_rendered(path), f"expected {expected}, got {type_name(value)}")


def _must_be(path: _Path | None, expected: str, value: Any) -> SpecError:
    """A scalar of the wrong type or range: "must be an integer, got 'x'"."""
    got = (
        shown(value)
        if isinstance(value, str | int | float) and not isinstance(value, bool)
        else type_name(value)
    )
    return SpecError(_rendered(path), f"must be {expected}, got {got}")


_INT32_MIN, _INT32_MAX = _INT_RANGES[INT32]
_INT64_MIN, _INT64_MAX = _INT_RANGES[INT64]
# Whether a value decodes into each scalar type: the one place that says so, for the fast pass and
# for the one that names the field.
_SCALAR_OK: dict[str, Callable[[Any], bool]] = {
    STRING: lambda v: isinstance(v, str),
    BOOLEAN: lambda v: isinstance(v, bool),
    INT32: lambda v: type(v) is int and _INT32_MIN <= v <= _INT32_MAX,
    INT64: lambda v: type(v) is int and _INT64_MIN <= v <= _INT64_MAX,
    INT_OR_STRING: lambda v: isinstance(v, str) or (type(v) is int and _INT32_MIN <= v <= _INT32_MAX),
    QUANTITY: lambda v: isinstance(v, str) or type(v) is int or (isinstance(v, float) and math.isfinite(v)),
    # a YAML timestamp tag gives a date; it reaches the API server as the same string
    TIME: lambda v: isinstance(v, str | date),
    OBJECT: lambda v: isinstance(v, dict),
}


def _scalar_error(value: Any, kind: str, path: _Path | None) -> SpecError:
    """Why `value` does not decode into `kind`."""
    if kind in (INT32, INT64, INT_OR_STRING):
        or_string = " or a string" if kind == INT_OR_STRING else ""
        if type(value) is not int:
            return _must_be(path, f"an integer{or_string}", value)
        return _must_be(path, f"a {64 if kind == INT64 else 32}-bit integer{or_string}", value)
    if kind == QUANTITY:
        finite = isinstance(value, float) and not math.isfinite(value)
        return _must_be(path, "a finite quantity" if finite else "a quantity (a string or a number)", value)
    if kind == OBJECT:
        return _expected(path, "an object", value)
    expected = {STRING: "a string", BOOLEAN: "true or false", TIME: "a timestamp string"}[kind]
    return _must_be(path, expected, value)


def _valid(value: Any, schema: Any) -> bool:
    """Whether the API server decodes `value` as `schema`: the pass every object takes, without
    the bookkeeping of a field path."""
    if value is None:
        return True
    if schema.__class__ is str:
        return _SCALAR_OK[schema](value)
    if schema.__class__ is dict:
        if not isinstance(value, dict):
            return False
        for key, item in value.items():
            sub = schema.get(key)
            if sub is not None and item is not None:
                if sub is STRING:
                    if not isinstance(item, str):
                        return False
                elif not _valid(item, sub):
                    return False
        return True
    if schema.__class__ is list:
        if not isinstance(value, list):
            return False
        sub = schema[0]
        for item in value:  # noqa: SIM110 - no generator per list: every object takes this pass
            if not _valid(item, sub):
                return False
        return True
    if not isinstance(value, dict):
        return False
    sub = schema.values
    for key, item in value.items():
        if not isinstance(key, str):
            return False
        if item is None:
            if sub is STRING:
                return False
        elif not _valid(item, sub):
            return False
    return True


def _check(value: Any, schema: Any, path: _Path | None) -> None:
    """As _valid, raising SpecError that names the first field that does not decode."""
    if value is None:
        return
    if isinstance(schema, str):
        if not _SCALAR_OK[schema](value):
            raise _scalar_error(value, schema, path)
    elif isinstance(schema, dict):
        if not isinstance(value, dict):
            raise _expected(path, "an object", value)
        for key, item in value.items():
            sub = schema.get(key)
            if sub is not None and item is not None:
                _check(item, sub, _Path(path, key))
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise _expected(path, "a list", value)
        (sub,) = schema
        for index, item in enumerate(value):
            _check(item, sub, _Path(path, f"[{index}]"))
    else:
        assert isinstance(schema, MapOf)
        if not isinstance(value, dict):
            raise _expected(path, "an object", value)
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError(_rendered(path), f"key {shown(key)} is not a string")
            if item is not None:
                _check(item, schema.values, _Path(path, key))
            elif schema.values is STRING:
                # a label or annotation without a value: there is no string to decode
                raise _must_be(_Path(path, key), "a string", item)


def check_types(obj: Any, schema: Any, path: str = "") -> None:
    """Raises SpecError naming the first field whose JSON type the API server would not decode."""
    if _valid(obj, schema):
        return
    _check(obj, schema, _Path(None, path) if path else None)
    raise AssertionError(f"{path or 'object'}: the two type checks disagree")  # pragma: no cover


STRING_MAP = MapOf(STRING)
METADATA: dict[str, Any] = {
    "name": STRING,
    "namespace": STRING,
    "generateName": STRING,
    "uid": STRING,
    "resourceVersion": STRING,
    "generation": INT64,
    "labels": STRING_MAP,
    "annotations": STRING_MAP,
    "creationTimestamp": TIME,
    "deletionTimestamp": TIME,
    "deletionGracePeriodSeconds": INT64,
    "finalizers": [STRING],
    "ownerReferences": [
        {
            "apiVersion": STRING,
            "kind": STRING,
            "name": STRING,
            "uid": STRING,
            "controller": BOOLEAN,
            "blockOwnerDeletion": BOOLEAN,
        }
    ],
    "managedFields": [OBJECT],
}
LABEL_SELECTOR: dict[str, Any] = {
    "matchLabels": STRING_MAP,
    "matchExpressions": [{"key": STRING, "operator": STRING, "values": [STRING]}],
}
_NODE_SELECTOR_TERM: dict[str, Any] = {
    "matchExpressions": [{"key": STRING, "operator": STRING, "values": [STRING]}],
    "matchFields": [{"key": STRING, "operator": STRING, "values": [STRING]}],
}
_POD_AFFINITY_TERM: dict[str, Any] = {
    "labelSelector": LABEL_SELECTOR,
    "namespaceSelector": LABEL_SELECTOR,
    "namespaces": [STRING],
    "topologyKey": STRING,
    "matchLabelKeys": [STRING],
    "mismatchLabelKeys": [STRING],
}
_POD_AFFINITY: dict[str, Any] = {
    "requiredDuringSchedulingIgnoredDuringExecution": [_POD_AFFINITY_TERM],
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": INT32, "podAffinityTerm": _POD_AFFINITY_TERM}
    ],
}
_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_NODE_SELECTOR_TERM]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": INT32, "preference": _NODE_SELECTOR_TERM}
        ],
    },
    "podAffinity": _POD_AFFINITY,
    "podAntiAffinity": _POD_AFFINITY,
}
_CONTAINER: dict[str, Any] = {
    "name": STRING,
    "image": STRING,
    "imagePullPolicy": STRING,
    "command": [STRING],
    "args": [STRING],
    "workingDir": STRING,
    "ports": [
        {"name": STRING, "hostPort": INT32, "containerPort": INT32, "protocol": STRING, "hostIP": STRING}
    ],
    "env": [{"name": STRING, "value": STRING, "valueFrom": OBJECT}],
    "envFrom": [OBJECT],
    "resources": {"requests": MapOf(QUANTITY), "limits": MapOf(QUANTITY), "claims": [{"name": STRING}]},
    "resizePolicy": [{"resourceName": STRING, "restartPolicy": STRING}],
    "restartPolicy": STRING,
    "volumeMounts": [{"name": STRING, "mountPath": STRING, "readOnly": BOOLEAN, "subPath": STRING}],
    "livenessProbe": OBJECT,
    "readinessProbe": OBJECT,
    "startupProbe": OBJECT,
    "lifecycle": OBJECT,
    "securityContext": OBJECT,
    "terminationMessagePath": STRING,
    "terminationMessagePolicy": STRING,
    "stdin": BOOLEAN,
    "stdinOnce": BOOLEAN,
    "tty": BOOLEAN,
}
POD_SPEC: dict[str, Any] = {
    "containers": [_CONTAINER],
    "initContainers": [_CONTAINER],
    "ephemeralContainers": [OBJECT],
    "volumes": [{"name": STRING}],
    "restartPolicy": STRING,
    "terminationGracePeriodSeconds": INT64,
    "activeDeadlineSeconds": INT64,
    "dnsPolicy": STRING,
    "nodeSelector": STRING_MAP,
    "serviceAccountName": STRING,
    "serviceAccount": STRING,
    "automountServiceAccountToken": BOOLEAN,
    "nodeName": STRING,
    "hostNetwork": BOOLEAN,
    "hostPID": BOOLEAN,
    "hostIPC": BOOLEAN,
    "shareProcessNamespace": BOOLEAN,
    "securityContext": OBJECT,
    "imagePullSecrets": [{"name": STRING}],
    "hostname": STRING,
    "subdomain": STRING,
    "affinity": _AFFINITY,
    "schedulerName": STRING,
    "tolerations": [
        {"key": STRING, "operator": STRING, "value": STRING, "effect": STRING, "tolerationSeconds": INT64}
    ],
    "hostAliases": [{"ip": STRING, "hostnames": [STRING]}],
    "priorityClassName": STRING,
    "priority": INT32,
    "dnsConfig": OBJECT,
    "readinessGates": [{"conditionType": STRING}],
    "runtimeClassName": STRING,
    "enableServiceLinks": BOOLEAN,
    "preemptionPolicy": STRING,
    "overhead": MapOf(QUANTITY),
    "topologySpreadConstraints": [
        {
            "maxSkew": INT32,
            "topologyKey": STRING,
            "whenUnsatisfiable": STRING,
            "labelSelector": LABEL_SELECTOR,
            "minDomains": INT32,
            "nodeAffinityPolicy": STRING,
            "nodeTaintsPolicy": STRING,
            "matchLabelKeys": [STRING],
        }
    ],
    "setHostnameAsFQDN": BOOLEAN,
    "os": {"name": STRING},
    "hostUsers": BOOLEAN,
    "schedulingGates": [{"name": STRING}],
    "resourceClaims": [OBJECT],
    "resources": {"requests": MapOf(QUANTITY), "limits": MapOf(QUANTITY)},
}
_CONDITION: dict[str, Any] = {
    "type": STRING,
    "status": STRING,
    "reason": STRING,
    "message": STRING,
    "lastTransitionTime": TIME,
    "lastProbeTime": TIME,
    "lastHeartbeatTime": TIME,
    "observedGeneration": INT64,
}
POD: dict[str, Any] = {
    "metadata": METADATA,
    "spec": POD_SPEC,
    "status": {
        "phase": STRING,
        "conditions": [_CONDITION],
        "message": STRING,
        "reason": STRING,
        "nominatedNodeName": STRING,
        "hostIP": STRING,
        "podIP": STRING,
        "startTime": TIME,
        "qosClass": STRING,
    },
}
_POD_TEMPLATE: dict[str, Any] = {"metadata": METADATA, "spec": POD_SPEC}
_REPLICATED: dict[str, Any] = {
    "replicas": INT32,
    "selector": LABEL_SELECTOR,
    "template": _POD_TEMPLATE,
    "minReadySeconds": INT32,
    "revisionHistoryLimit": INT32,
    "progressDeadlineSeconds": INT32,
    "paused": BOOLEAN,
    "strategy": OBJECT,
    "updateStrategy": OBJECT,
    "serviceName": STRING,
    "podManagementPolicy": STRING,
    "volumeClaimTemplates": [OBJECT],
    "persistentVolumeClaimRetentionPolicy": OBJECT,
    "ordinals": {"start": INT32},
}
_JOB: dict[str, Any] = {
    "parallelism": INT32,
    "completions": INT32,
    "activeDeadlineSeconds": INT64,
    "backoffLimit": INT32,
    "backoffLimitPerIndex": INT32,
    "maxFailedIndexes": INT32,
    "selector": LABEL_SELECTOR,
    "manualSelector": BOOLEAN,
    "template": _POD_TEMPLATE,
    "ttlSecondsAfterFinished": INT32,
    "completionMode": STRING,
    "suspend": BOOLEAN,
    "podFailurePolicy": OBJECT,
    "successPolicy": OBJECT,
    "podReplacementPolicy": STRING,
    "managedBy": STRING,
}
_WORKLOAD_STATUS: dict[str, Any] = {"conditions": [_CONDITION]}
KIND_SCHEMAS: dict[str, dict[str, Any]] = {
    "Pod": POD,
    "Node": {
        "metadata": METADATA,
        "spec": {
            "unschedulable": BOOLEAN,
            "taints": [{"key": STRING, "value": STRING, "effect": STRING, "timeAdded": TIME}],
            "podCIDR": STRING,
            "podCIDRs": [STRING],
            "providerID": STRING,
        },
        "status": {
            "allocatable": MapOf(QUANTITY),
            "capacity": MapOf(QUANTITY),
            "images": [{"names": [STRING], "sizeBytes": INT64}],
            "conditions": [_CONDITION],
            "addresses": [{"type": STRING, "address": STRING}],
            "phase": STRING,
        },
    },
    "Namespace": {"metadata": METADATA, "spec": {"finalizers": [STRING]}, "status": {"phase": STRING}},
    "PriorityClass": {
        "metadata": METADATA,
        "value": INT32,
        "globalDefault": BOOLEAN,
        "description": STRING,
        "preemptionPolicy": STRING,
    },
    "PodGroup": {
        "metadata": METADATA,
        "spec": {
            "minMember": INT32,
            "scheduleTimeoutSeconds": INT32,
            "minResources": MapOf(QUANTITY),
            "queue": STRING,
            "priorityClassName": STRING,
        },
        "status": {
            "phase": STRING,
            "occupiedBy": STRING,
            "scheduled": INT32,
            "running": INT32,
            "succeeded": INT32,
            "failed": INT32,
            "scheduleStartTime": TIME,
        },
    },
    # the layers' own shape is the topology's to judge: a bad one makes the object unusable
    "ClusterNetworkTopology": {"metadata": METADATA, "spec": OBJECT},
    "ElasticQuota": {
        "metadata": METADATA,
        "spec": {"min": MapOf(QUANTITY), "max": MapOf(QUANTITY)},
        "status": {"used": MapOf(QUANTITY)},
    },
    "PodDisruptionBudget": {
        "metadata": METADATA,
        "spec": {
            "minAvailable": INT_OR_STRING,
            "maxUnavailable": INT_OR_STRING,
            "selector": LABEL_SELECTOR,
            "unhealthyPodEvictionPolicy": STRING,
        },
        "status": {
            "observedGeneration": INT64,
            "disruptedPods": MapOf(TIME),
            "disruptionsAllowed": INT32,
            "currentHealthy": INT32,
            "desiredHealthy": INT32,
            "expectedPods": INT32,
            "conditions": [_CONDITION],
        },
    },
    "ReplicaSet": {"metadata": METADATA, "spec": _REPLICATED, "status": _WORKLOAD_STATUS},
    "Deployment": {"metadata": METADATA, "spec": _REPLICATED, "status": _WORKLOAD_STATUS},
    "StatefulSet": {"metadata": METADATA, "spec": _REPLICATED, "status": _WORKLOAD_STATUS},
    "Job": {"metadata": METADATA, "spec": _JOB, "status": _WORKLOAD_STATUS},
}
