"""The objects of a scenario's documents, List items flattened, each checked for what identifies it
(kind, apiVersion, name, namespace), for the JSON types of the fields an API server decodes, and
with its namespace defaulted.

The type check is the API server's decoding, not its validation: a field of the wrong JSON type (an
object where a string belongs, a number outside its integer type) makes the server refuse the whole
object, so it is an input error here too; a well-typed value the scheduler cannot make sense of is
left for the scheduler to report, as a cluster would.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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
from koordpy.simulate.schemas import KIND_SCHEMAS
from koordpy.simulate.schemas import POD as POD

# the type check lives in its own module; its names stay importable from here
from koordpy.simulate.typecheck import _check as _check
from koordpy.simulate.typecheck import _valid as _valid
from koordpy.simulate.typecheck import check_types, shown, type_name

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
    # volumes (see koordpy.simulate.volumes)
    "StorageClass": frozenset({"storage.k8s.io/v1"}),
    "PersistentVolume": frozenset({"v1"}),
    "PersistentVolumeClaim": frozenset({"v1"}),
    "CSINode": frozenset({"storage.k8s.io/v1"}),
    "CSIDriver": frozenset({"storage.k8s.io/v1"}),
    "CSIStorageCapacity": frozenset({"storage.k8s.io/v1"}),
    "VolumeAttachment": frozenset({"storage.k8s.io/v1"}),
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
