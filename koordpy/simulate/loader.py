"""Scenario loading for `koordpy simulate`: manifests on disk or stdin, turned into the objects an API
server would hold after defaulting and admission, with workloads expanded into the pods their
controllers would create.

Input errors name the file, the document and the field, because the person reading them has only
the manifests to go back to. Pods whose specs the scheduler cannot understand are not input errors:
the simulation reports them as InvalidSpec, exactly as a cluster would leave them pending.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import yaml

from koordpy.api.errors import SpecError, join_path
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pdb import PodDisruptionBudget
from koordpy.api.pod import DEFAULT_SCHEDULER_NAME, PREEMPT_LOWER_PRIORITY
from koordpy.api.podgroup import SIGS_GROUP, X_K8S_GROUP, PodGroup
from koordpy.api.priorityclass import BUILTIN_PRIORITY_CLASSES, PriorityClass

__all__ = ["STDIN", "STDIN_LABEL", "Scenario", "ScenarioError", "Source", "load_scenario"]

STDIN = "-"
# How standard input is named in error messages; "-" alone reads badly in a sentence.
STDIN_LABEL = "<stdin>"
DEFAULT_NAMESPACE = "default"
YAML_SUFFIXES = (".yaml", ".yml")

# The apiVersions each kind is accepted in: the ones a current API server serves.
API_VERSIONS: dict[str, frozenset[str]] = {
    "Node": frozenset({"v1"}),
    "Pod": frozenset({"v1"}),
    "Namespace": frozenset({"v1"}),
    "PriorityClass": frozenset({"scheduling.k8s.io/v1"}),
    "PodGroup": frozenset({f"{SIGS_GROUP}/v1alpha1", f"{X_K8S_GROUP}/v1alpha1"}),
    "ClusterNetworkTopology": frozenset({"scheduling.koordinator.sh/v1alpha1"}),
    "PodDisruptionBudget": frozenset({"policy/v1"}),
    "ReplicaSet": frozenset({"apps/v1"}),
    "Deployment": frozenset({"apps/v1"}),
    "StatefulSet": frozenset({"apps/v1"}),
    "Job": frozenset({"batch/v1"}),
    "List": frozenset({"v1"}),
}
CLUSTER_SCOPED = frozenset({"Node", "Namespace", "PriorityClass", "ClusterNetworkTopology"})
WORKLOAD_KINDS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "Job"})

STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
SYSTEM_PREFIX = "system-"


class ScenarioError(ValueError):
    """Invalid input, located as precisely as is known: file, document, object, field."""

    def __init__(
        self,
        file: str,
        document: int | None,
        field: str,
        message: str,
        *,
        kind: str = "",
        name: str = "",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.file = file
        self.document = document
        self.field = field
        self.message = message
        self.kind = kind
        self.name = name
        self.line = line
        self.column = column
        super().__init__(self._render())

    def _render(self) -> str:
        parts: list[str] = []
        if self.file:
            parts.append(self.file)
        if self.document is not None:
            what = " ".join(p for p in (self.kind, self.name) if p)
            parts.append(f"document {self.document} ({what})" if what else f"document {self.document}")
        if self.line is not None:
            column = f", column {self.column}" if self.column is not None else ""
            parts.append(f"line {self.line}{column}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments do not survive the default pickling of exceptions.
        return (
            _rebuild_error,
            (
                self.file,
                self.document,
                self.field,
                self.message,
                self.kind,
                self.name,
                self.line,
                self.column,
            ),
        )


def _rebuild_error(
    file: str,
    document: int | None,
    field: str,
    message: str,
    kind: str,
    name: str,
    line: int | None,
    column: int | None,
) -> ScenarioError:
    return ScenarioError(file, document, field, message, kind=kind, name=name, line=line, column=column)


@dataclass(frozen=True, slots=True)
class Source:
    """Where an object came from, for error messages."""

    file: str
    document: int  # 1-based, counting empty documents too, as a person counts `---` separators


@dataclass(slots=True)
class Scenario:
    namespaces: list[Namespace] = field(default_factory=list)
    # Only the input's classes; the built-in ones take part in resolution but are not listed.
    priority_classes: list[PriorityClass] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    pod_groups: list[PodGroup] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    topologies: list[dict[str, Any]] = field(default_factory=list)
    # Explicit and workload-stamped pods in creation order, as API dicts after defaulting.
    pods: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[tuple[str, str, str], Source] = field(default_factory=dict)


# --- YAML ------------------------------------------------------------------------------------------

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


class _ManifestLoader(_BaseLoader):
    """Safe YAML as the API server reads it: timestamps stay strings (they are strings in the API's
    JSON), and a key given twice in one mapping is an error rather than a silent overwrite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = key_node.value
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


def _yaml_error(label: str, err: yaml.YAMLError) -> ScenarioError:
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        problem = err.problem or "invalid YAML"
        if err.context:
            context_line = f" at line {err.context_mark.line + 1}" if err.context_mark is not None else ""
            problem = f"{problem} ({err.context}{context_line})"
        return ScenarioError(label, None, "", problem, line=mark.line + 1, column=mark.column + 1)
    return ScenarioError(label, None, "", f"invalid YAML: {err}")


def _documents(label: str, text: str) -> Iterator[tuple[int, Any]]:
    index = 0
    stream = yaml.load_all(text, Loader=_ManifestLoader)
    while True:
        try:
            doc = next(stream)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            raise _yaml_error(label, err) from err
        index += 1
        yield index, doc


def _read_inputs(paths: Sequence[str], stdin: TextIO | None) -> Iterator[tuple[str, str]]:
    """(label for messages, text) for each file the paths name, in order."""
    for path in paths:
        if path == STDIN:
            yield STDIN_LABEL, (stdin if stdin is not None else sys.stdin).read()
        elif os.path.isdir(path):
            names = sorted(
                n
                for n in os.listdir(path)
                if n.endswith(YAML_SUFFIXES) and os.path.isfile(os.path.join(path, n))
            )
            if not names:
                raise ScenarioError(path, None, "", "the directory holds no *.yaml or *.yml files")
            for name in names:
                file = os.path.join(path, name)
                yield file, _read_text(file)
        else:
            yield path, _read_text(path)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError as err:
        raise ScenarioError(path, None, "", "no such file or directory") from err
    except UnicodeDecodeError as err:
        raise ScenarioError(path, None, "", f"not UTF-8 text: {err.reason} at byte {err.start}") from err
    except OSError as err:
        raise ScenarioError(path, None, "", err.strerror or str(err)) from err


# --- objects ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Entry:
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


def _entries(doc: Any, source: Source, prefix: str = "") -> Iterator[_Entry]:
    """The objects in one document, List items flattened; checks only what identifies an object."""
    if not isinstance(doc, Mapping):
        raise _located(source, prefix, "", "", f"expected an object, got {_type_name(doc)}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        message = "missing" if kind is None else f"must be a string, got {kind!r}"
        raise _located(source, prefix, "", "kind", message)
    versions = API_VERSIONS.get(kind)
    if versions is None:
        known = ", ".join(sorted(API_VERSIONS))
        raise _located(source, prefix, kind, "kind", f"unknown kind {kind!r}; the simulator reads {known}")
    api_version = doc.get("apiVersion")
    if api_version not in versions:
        expected = " or ".join(sorted(versions))
        got = "missing" if api_version is None else f"got {api_version!r}"
        raise _located(source, prefix, kind, "apiVersion", f"{kind} must be {expected}, {got}")
    if kind == "List":
        items = doc.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise _located(source, prefix, kind, "items", f"expected a list, got {_type_name(items)}")
        for i, item in enumerate(items):
            yield from _entries(item, source, join_path(prefix, f"items[{i}]"))
        return
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        message = "missing" if meta is None else f"expected an object, got {_type_name(meta)}"
        raise _located(source, prefix, kind, "metadata", message)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        message = "every object needs a name" if name in (None, "") else f"must be a string, got {name!r}"
        raise _located(source, prefix, kind, "metadata.name", message)
    namespace = ""
    if kind not in CLUSTER_SCOPED:
        raw_ns = meta.get("namespace")
        if raw_ns is not None and not isinstance(raw_ns, str):
            raise _located(
                source, prefix, kind, "metadata.namespace", f"must be a string, got {raw_ns!r}", name=name
            )
        namespace = raw_ns or DEFAULT_NAMESPACE
    # Written back so that every consumer of the dict sees the defaulted namespace.
    obj = {**doc, "metadata": {**meta, "namespace": namespace}} if namespace else dict(doc)
    yield _Entry(obj, source, prefix, kind, namespace, name)


def _type_name(value: Any) -> str:
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


def _describe(source: Source) -> str:
    return f"{source.file} document {source.document}"


# --- priority admission ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Priorities:
    """The Priority admission plugin: resolves a new pod's priority from its class."""

    classes: dict[str, PriorityClass]
    global_default: PriorityClass | None

    def admit(self, spec: dict[str, Any]) -> None:
        """Sets spec.priority, spec.priorityClassName and spec.preemptionPolicy as admission does;
        raises SpecError for what the API server would reject."""
        class_name = spec.get("priorityClassName")
        if class_name is not None and not isinstance(class_name, str):
            raise SpecError("spec.priorityClassName", f"must be a string, got {class_name!r}")
        if class_name:
            pc = self.classes.get(class_name)
            if pc is None:
                message = f"no PriorityClass with name {class_name} was found"
                raise SpecError("spec.priorityClassName", message)
            value, policy = pc.value, pc.preemption_policy
        elif self.global_default is not None:
            spec["priorityClassName"] = self.global_default.name
            value, policy = self.global_default.value, self.global_default.preemption_policy
        else:
            value, policy = 0, PREEMPT_LOWER_PRIORITY
        given = spec.get("priority")
        if given is not None and (given != value or isinstance(given, bool)):
            raise SpecError(
                "spec.priority",
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name",
            )
        spec["priority"] = value
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise SpecError(
                "spec.preemptionPolicy",
                f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
                f"priority admission controller computed {policy} from the given PriorityClass name",
            )
        spec["preemptionPolicy"] = policy


def _priorities(entries: Sequence[_Entry]) -> tuple[_Priorities, list[PriorityClass]]:
    builtins = {pc.name: pc for pc in BUILTIN_PRIORITY_CLASSES}
    classes = dict(builtins)
    listed: list[PriorityClass] = []
    default_entry: _Entry | None = None
    global_default: PriorityClass | None = None
    for entry in entries:
        if entry.kind != "PriorityClass":
            continue
        try:
            pc = PriorityClass.from_dict(entry.obj)
        except SpecError as err:
            raise entry.spec_error(err) from err
        builtin = builtins.get(pc.name)
        if builtin is not None:
            # Manifests dumped from a cluster carry the built-in classes; they are harmless when unchanged.
            if (pc.value, pc.preemption_policy, pc.global_default) != (
                builtin.value,
                builtin.preemption_policy,
                builtin.global_default,
            ):
                message = f"{pc.name} is built in with value {builtin.value} and cannot be changed"
                raise entry.error("value", message)
        elif pc.name.startswith(SYSTEM_PREFIX):
            message = f"priority class names with {SYSTEM_PREFIX!r} prefix are reserved for system use only"
            raise entry.error("metadata.name", message)
        if pc.global_default:
            if global_default is not None and default_entry is not None:
                raise entry.error(
                    "globalDefault",
                    f"PriorityClass {global_default.name} ({_describe(default_entry.source)}) is already "
                    "marked as default; only one default can exist",
                )
            global_default, default_entry = pc, entry
        classes[pc.name] = pc
        listed.append(pc)
    return _Priorities(classes, global_default), listed


# --- pods ------------------------------------------------------------------------------------------


def _default_pod(pod: dict[str, Any], priorities: _Priorities) -> None:
    """Defaulting and admission for a pod about to be created. A spec that is not an object is left
    alone: the scheduler reports that pod as InvalidSpec."""
    meta = pod["metadata"]
    meta.setdefault("uid", f"uid-pod-{meta['namespace']}-{meta['name']}")
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER_NAME
    priorities.admit(spec)


def _replicas(entry: _Entry, spec: Mapping[str, Any], field: str) -> int:
    value = spec.get(field)
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise entry.error(f"spec.{field}", f"must be a non-negative integer, got {value!r}")
    return value


def _pod_count(entry: _Entry, spec: Mapping[str, Any]) -> int:
    if entry.kind != "Job":
        return _replicas(entry, spec, "replicas")
    parallelism = _replicas(entry, spec, "parallelism")
    completions = spec.get("completions")
    if completions is not None and (
        not isinstance(completions, int) or isinstance(completions, bool) or completions < 0
    ):
        raise entry.error("spec.completions", f"must be a non-negative integer, got {completions!r}")
    if spec.get("suspend") is True:
        return 0
    # The Job controller never runs more pods at once than there are completions left to make.
    return parallelism if completions is None else min(parallelism, completions)


def _string_map(entry: _Entry, value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise entry.error(field, f"expected an object, got {_type_name(value)}")
    return dict(value)


def _stamp_pods(entry: _Entry) -> Iterator[dict[str, Any]]:
    """The pods a workload's controller creates, as API dicts before defaulting."""
    spec = entry.obj.get("spec")
    if not isinstance(spec, Mapping):
        message = "missing" if spec is None else f"expected an object, got {_type_name(spec)}"
        raise entry.error("spec", message)
    template = spec.get("template")
    if not isinstance(template, Mapping):
        message = "missing" if template is None else f"expected an object, got {_type_name(template)}"
        raise entry.error("spec.template", message)
    template_meta = _string_map(entry, template.get("metadata"), "spec.template.metadata")
    labels = _string_map(entry, template_meta.get("labels"), "spec.template.metadata.labels")
    annotations = _string_map(entry, template_meta.get("annotations"), "spec.template.metadata.annotations")
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, Mapping):
        message = "missing" if pod_spec is None else f"expected an object, got {_type_name(pod_spec)}"
        raise entry.error("spec.template.spec", message)
    count = _pod_count(entry, spec)
    meta = entry.obj["metadata"]
    owner = {
        "apiVersion": entry.obj["apiVersion"],
        "kind": entry.kind,
        "name": entry.name,
        "uid": str(meta.get("uid") or f"uid-{entry.kind.lower()}-{entry.namespace}-{entry.name}"),
        "controller": True,
    }
    indexed = entry.kind == "Job" and spec.get("completionMode") == "Indexed"
    # one spec object for every pod of the workload, as the pods of one template are identical
    # there; nothing downstream writes into a pod's spec in place
    shared_spec = copy.deepcopy(dict(pod_spec))
    for index in range(count):
        name = f"{entry.name}-{index}"
        pod_labels = dict(labels)
        pod_annotations = dict(annotations)
        if entry.kind == "StatefulSet":
            pod_labels[STATEFULSET_POD_NAME_LABEL] = name
            pod_labels[POD_INDEX_LABEL] = str(index)
        elif entry.kind == "Job":
            pod_labels[JOB_NAME_LABEL] = entry.name
            pod_labels[LEGACY_JOB_NAME_LABEL] = entry.name
            if indexed:
                # Current Job controllers write the index both ways; selectors may use the label.
                pod_annotations[JOB_COMPLETION_INDEX] = str(index)
                pod_labels[JOB_COMPLETION_INDEX] = str(index)
        yield {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": entry.namespace,
                "labels": pod_labels,
                "annotations": pod_annotations,
                "ownerReferences": [dict(owner)],
            },
            "spec": shared_spec,
        }


# --- assembly --------------------------------------------------------------------------------------


def load_scenario(paths: Sequence[str], stdin: TextIO | None = None) -> Scenario:
    """Reads every object the paths hold (a file, a directory's *.yaml/*.yml in name order, or `-`
    for `stdin`) and returns them defaulted and admitted; raises ScenarioError for invalid input."""
    if not paths:
        raise ScenarioError("", None, "", "no input: name a file, a directory or - for standard input")
    entries: list[_Entry] = []
    for label, text in _read_inputs(paths, stdin):
        for document, doc in _documents(label, text):
            if doc is not None:
                entries.extend(_entries(doc, Source(label, document)))
    if not entries:
        raise ScenarioError(paths[0] if len(paths) == 1 else "", None, "", "the input holds no objects")

    scenario = Scenario()
    owners: dict[tuple[str, str, str], Source] = {}
    for entry in entries:
        if entry.kind == "Pod":
            continue  # registered below, in creation order, together with the pods workloads stamp
        _register(owners, entry.key, entry.source, entry, "metadata.name")
    priorities, scenario.priority_classes = _priorities(entries)

    for entry in entries:
        kind = entry.kind
        if kind == "Pod":
            pod = copy.deepcopy(entry.obj)
            _register(owners, entry.key, entry.source, entry, "metadata.name")
            try:
                _default_pod(pod, priorities)
            except SpecError as err:
                raise entry.spec_error(err) from err
            scenario.pods.append(pod)
        elif kind in WORKLOAD_KINDS:
            for pod in _stamp_pods(entry):
                key = ("Pod", entry.namespace, pod["metadata"]["name"])
                _register(owners, key, entry.source, entry, "metadata.name", stamped=True)
                try:
                    _default_pod(pod, priorities)
                except SpecError as err:
                    raise entry.spec_error(err, "spec.template") from err
                scenario.pods.append(pod)
        elif kind == "Node":
            node = Node.from_dict(entry.obj)
            if node.spec_error is not None:
                raise entry.spec_error(node.spec_error)
            scenario.nodes.append(node)
        elif kind == "PodGroup":
            # A PodGroup with an invalid spec is kept: its pods are reported InvalidSpec, as on a cluster.
            scenario.pod_groups.append(PodGroup.from_dict(entry.obj))
        elif kind == "PodDisruptionBudget":
            try:
                scenario.pdbs.append(PodDisruptionBudget.from_dict(entry.obj))
            except SpecError as err:
                raise entry.spec_error(err) from err
        elif kind == "Namespace":
            scenario.namespaces.append(Namespace.from_dict(entry.obj))
        elif kind == "ClusterNetworkTopology":
            scenario.topologies.append(entry.obj)
        # PriorityClass entries were handled first: every pod's admission needs all of them.
    scenario.sources = owners
    return scenario


def _register(
    owners: dict[tuple[str, str, str], Source],
    key: tuple[str, str, str],
    source: Source,
    entry: _Entry,
    field: str,
    stamped: bool = False,
) -> None:
    earlier = owners.get(key)
    if earlier is not None:
        kind, namespace, name = key
        what = f"{namespace}/{name}" if namespace else name
        if stamped:
            message = f"it would create {kind} {what}, which is already defined ({_describe(earlier)})"
        else:
            message = f"{kind} {what} is already defined ({_describe(earlier)})"
        raise entry.error(field, message)
    owners[key] = source
