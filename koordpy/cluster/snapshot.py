"""`koordpy snapshot`: a live cluster read once, read-only, as one scenario that `koordpy simulate`
loads unchanged.

What is read is what the scheduler's informers read (nodes, namespaces, pods on nodes and pods
waiting for koordpy's profiles, PodGroups, PodDisruptionBudgets, the storage objects, the network
topology, elastic quotas) and the PriorityClasses that admission resolves a new pod's priority
from. Each object is kept with only what scheduling reads (`cluster.stripping`).

Lists are paged (limit/continue) and every page is handed to the sink as it arrives, so memory
stays bounded by a page plus the pods still waiting for a node (those are few, and are written
last, oldest first, because that is the order in which the scheduling queue met them).

Nothing here writes to the cluster: every request is a list or a get (docs/dry-run.md names the
ClusterRole it needs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from koordpy.api.time import parse_timestamp
from koordpy.cluster.stripping import (
    REMOVE_AFTER_ANNOTATION,
    kept_annotation,
    simulation_annotations,
    strip_object,
)
from koordpy.kubeapi import informer
from koordpy.kubeapi.client import TRANSPORT_ERRORS, ApiError, KubeApi
from koordpy.kubeapi.informer import Resource
from koordpy.yamlinput import parsers as yaml_parsers
from koordpy.yamlinput.parsers import YamlParser

__all__ = [
    "CHART_NAME",
    "REMOVE_AFTER_ANNOTATION",
    "ConfigMapRef",
    "ConfigurationFound",
    "InvalidConfigMap",
    "SnapshotError",
    "SnapshotSummary",
    "chart_configmap",
    "config_beside",
    "dump_document",
    "kept_annotation",
    "read_configuration_in_use",
    "simulation_annotations",
    "strip_object",
    "take_snapshot",
]

try:
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # PyYAML built without libyaml
    _Dumper = yaml.SafeDumper

# the Helm chart's name: its objects carry the label helm.sh/chart=koordpy-<version>
CHART_NAME = "koordpy"
CHART_LABEL = "helm.sh/chart"
PAGE_SIZE = 500
# the scheduler's pod informer leaves out finished pods: they hold nothing
_NOT_FINISHED = "status.phase!=Succeeded,status.phase!=Failed"

# how many objects the warning names before it counts the rest
_NAMED_AT_MOST = 10


class SnapshotError(Exception):
    """The cluster could not be read: unreachable, a list refused, an object the snapshot needs
    missing. The message names the resource."""


class InvalidConfigMap(SnapshotError):
    """The configuration ConfigMap was read, and what it holds is not a configuration koordpy can
    read: an input error (exit status 2, as a bad --config file), not a failure to reach the cluster."""


# the kinds as the informers name them: one path and one label per resource for both
NAMESPACES = informer.NAMESPACES
PRIORITY_CLASSES = Resource("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", namespaced=False)
NODES = informer.NODES
# without the informer's selector: each listing below gives the field selector it needs
PODS = informer.ALL_PODS
PDBS = informer.PDBS
CONFIGMAPS = Resource("ConfigMap", "v1", "configmaps")
# storage, what the pods' claims refer to: classes, drivers, each node's CSI drivers, volumes,
# claims, the capacity CSI drivers publish per topology segment, and the volumes attached to each
# node (which take its CSI drivers' slots until detached). A kind the apiserver does not
# serve (an old release without storage.k8s.io/v1 CSIStorageCapacity) holds no object: it is left
# out of the snapshot, as an absent CRD is
STORAGE = tuple(
    dataclasses.replace(r, optional=True)
    for r in (
        informer.STORAGE_CLASSES,
        informer.CSI_DRIVERS,
        informer.CSI_NODES,
        informer.PERSISTENT_VOLUMES,
        informer.PERSISTENT_VOLUME_CLAIMS,
        informer.CSI_STORAGE_CAPACITIES,
        informer.VOLUME_ATTACHMENTS,
    )
)
# the order of the file: what the pods refer to first
KINDS: tuple[Resource, ...] = (
    NAMESPACES,
    PRIORITY_CLASSES,
    NODES,
    *STORAGE,
    informer.POD_GROUPS_SIGS,
    informer.POD_GROUPS_X_K8S,
    PDBS,
    informer.NETWORK_TOPOLOGIES,
    informer.ELASTIC_QUOTAS_SIGS,
    informer.ELASTIC_QUOTAS_X_K8S,
)


# ------------------------------------------------------------------------------------ the configuration
@dataclass(frozen=True, slots=True)
class ConfigMapRef:
    namespace: str
    name: str
    key: str = "config.yaml"
    # the chart's pods start koordpy with --allow-unsupported-plugins
    allow_unsupported_plugins: bool = False

    def __str__(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name} (key {self.key})"


@dataclass(slots=True)
class ConfigurationFound:
    """The scheduler configuration koordpy runs with in the cluster. `document` is None when none was
    found: `koordpy run`'s defaults then apply."""

    document: Any
    text: str | None
    source: str
    allow_unsupported_plugins: bool = False


def _config_arg(args: Sequence[Any]) -> str | None:
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            continue
        if arg.startswith("--config="):
            return arg.removeprefix("--config=")
        if arg == "--config" and i + 1 < len(args) and isinstance(args[i + 1], str):
            return str(args[i + 1])
    return None


def chart_configmap(pod: Mapping[str, Any]) -> ConfigMapRef | None:
    """The ConfigMap and key a pod of the chart's Deployment reads its configuration from: the
    container's --config path, under the mount of a configMap volume (None for any other pod)."""
    meta = pod.get("metadata") or {}
    if not str((meta.get("labels") or {}).get(CHART_LABEL, "")).startswith(f"{CHART_NAME}-"):
        return None
    spec = pod.get("spec") or {}
    volumes = {
        v.get("name"): v["configMap"]
        for v in spec.get("volumes") or ()
        if isinstance(v, Mapping) and isinstance(v.get("configMap"), Mapping)
    }
    for container in spec.get("containers") or ():
        args = [*(container.get("command") or ()), *(container.get("args") or ())]
        path = _config_arg(args)
        if not path:
            continue
        for mount in container.get("volumeMounts") or ():
            source = volumes.get(mount.get("name"))
            root = str(mount.get("mountPath") or "").rstrip("/") + "/"
            if source is None or not path.startswith(root) or not source.get("name"):
                continue
            file = path.removeprefix(root)
            key = next((str(i["key"]) for i in source.get("items") or () if i.get("path") == file), file)
            return ConfigMapRef(
                str(meta.get("namespace") or "default"),
                str(source["name"]),
                key,
                "--allow-unsupported-plugins" in args,
            )
    return None


def parse_configmap_ref(text: str) -> ConfigMapRef:
    """NS/NAME, or NS/NAME:KEY, as --configmap takes it."""
    ref, _, key = text.partition(":")
    namespace, slash, name = ref.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise SnapshotError(f"--configmap must be NAMESPACE/NAME (or NAMESPACE/NAME:KEY), got {text!r}")
    return ConfigMapRef(namespace, name, key or "config.yaml")


async def _get(api: KubeApi, path: str, what: str) -> dict[str, Any]:
    try:
        return await api.request("GET", path)
    except ApiError as err:
        raise _refused(err, f"get {what}") from err
    except TRANSPORT_ERRORS as err:
        raise SnapshotError(f"cannot reach the apiserver at {api.base}: {err}") from err


async def read_configmap(api: KubeApi, ref: ConfigMapRef) -> ConfigurationFound:
    path = f"/api/v1/namespaces/{ref.namespace}/configmaps/{ref.name}"
    configmap = await _get(api, path, f"configmaps {ref.namespace}/{ref.name}")
    text = (configmap.get("data") or {}).get(ref.key)
    if not isinstance(text, str):
        raise InvalidConfigMap(f"{ref} has no key {ref.key!r}")
    parser = yaml_parsers.preferred()
    try:
        try:
            _check_bounded(text, str(ref), parser)
        except yaml.YAMLError as err:
            if not yaml_parsers.hit_parser_limit(parser, err):
                raise
            # libyaml's own nesting limit fired first: koordpy's bound decides, read by PyYAML's parser
            parser = yaml_parsers.PURE
            _check_bounded(text, str(ref), parser)
        document = yaml.load(text, Loader=parser.events)
    except yaml.YAMLError as err:
        raise InvalidConfigMap(f"{ref}: not valid YAML: {' '.join(str(err).split())}") from err
    return ConfigurationFound(document, text, str(ref), ref.allow_unsupported_plugins)


# a configuration nests a dozen levels; the bound keeps the YAML constructor's recursion short
_MAX_CONFIG_DEPTH = 100


def _check_bounded(text: str, what: str, parser: YamlParser) -> None:
    """A ConfigMap is the cluster's, not the user's file: before it is composed, no alias (a few
    anchors can stand for billions of nodes) and a bounded nesting, as every YAML input is held."""
    depth = 0
    for event in yaml.parse(text, Loader=parser.events):
        if isinstance(event, yaml.AliasEvent):
            raise InvalidConfigMap(f"{what}: YAML aliases are not read in a configuration from the cluster")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > _MAX_CONFIG_DEPTH:
                raise InvalidConfigMap(f"{what}: nested deeper than {_MAX_CONFIG_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


async def find_chart_configmap(api: KubeApi) -> ConfigMapRef | None:
    """The ConfigMap of the chart's running scheduler, found from its pods (in whatever namespace
    it was installed): their --config argument names the file, their volume the ConfigMap."""
    query = [("labelSelector", "app.kubernetes.io/component=scheduler,app.kubernetes.io/managed-by")]
    async for page in _pages(api, PODS, query):
        for pod in page:
            ref = chart_configmap(pod)
            if ref is not None:
                return ref
    return None


async def read_configuration_in_use(api: KubeApi, configmap: str | None) -> ConfigurationFound:
    """The configuration of `--configmap`, else that of the chart's scheduler when one runs; else
    none (document None)."""
    ref = parse_configmap_ref(configmap) if configmap else await find_chart_configmap(api)
    if ref is None:
        return ConfigurationFound(None, None, "")
    return await read_configmap(api, ref)


# ---------------------------------------------------------------------------------------------- listing
def _refused(err: ApiError, what: str) -> SnapshotError:
    if err.status == 403:
        return SnapshotError(
            f"forbidden to {what}: {err.message or err.reason} (reading a cluster needs what "
            "docs/dry-run.md lists, which the chart's ClusterRole <release>-dry-run grants)"
        )
    if err.status == 401:
        return SnapshotError(f"not authenticated to {what}: {err.message or err.reason}")
    return SnapshotError(f"cannot {what}: {err}")


async def _pages(
    api: KubeApi, kind: Resource, query: Sequence[tuple[str, str]] = ()
) -> AsyncIterator[list[dict[str, Any]]]:
    token = ""
    while True:
        params = [*query, ("limit", str(PAGE_SIZE))]
        if token:
            params.append(("continue", token))
        try:
            listing = await api.request("GET", kind.path, query=params, timeout=120.0)
        except ApiError as err:
            if err.status == 404 and kind.optional and not token:
                return  # the CRD is not installed: nothing of this kind exists
            if err.status == 410 and token:
                raise SnapshotError(
                    f"the listing of {kind.label} expired before it was read to the end (410 Gone): "
                    "run the snapshot again"
                ) from err
            raise _refused(err, f"list {kind.label}") from err
        except TRANSPORT_ERRORS as err:
            raise SnapshotError(f"cannot reach the apiserver at {api.base}: {err}") from err
        yield [item for item in listing.get("items") or () if isinstance(item, dict)]
        token = str((listing.get("metadata") or {}).get("continue") or "")
        if not token:
            return


@dataclass(slots=True)
class SnapshotSummary:
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        return ", ".join(f"{n} {kind}" for kind, n in self.counts.items() if n)


@dataclass(slots=True)
class _Priorities:
    """PriorityClasses as listed, to keep every pod loadable: the loader admits pods as the
    apiserver would today, so a pod whose class was deleted, or changed by a delete and re-create,
    since the pod was created would be refused."""

    classes: dict[str, tuple[int, str]] = field(default_factory=dict)
    global_default: str = ""
    missing: dict[str, dict[str, Any]] = field(default_factory=dict)
    adjusted: int = 0

    def note(self, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        self.classes[name] = (int(obj.get("value") or 0), str(obj.get("preemptionPolicy") or ""))
        if obj.get("globalDefault"):
            self.global_default = name

    def admit(self, pod: dict[str, Any]) -> None:
        spec = pod["spec"]
        name = spec.get("priorityClassName") or self.global_default
        priority = spec.get("priority")
        if name and name not in self.classes:
            # recreated with the value the pods carry: their priorities are kept
            value = int(priority or 0)
            policy = str(spec.get("preemptionPolicy") or "PreemptLowerPriority")
            self.classes[name] = (value, policy)
            self.missing[name] = {
                "apiVersion": PRIORITY_CLASSES.api_version,
                "kind": "PriorityClass",
                "metadata": {"name": name, "annotations": {"snapshot.koordpy.io/recreated": "true"}},
                "value": value,
                "preemptionPolicy": policy,
            }
        value, policy = self.classes[name] if name else (0, "")
        if priority is not None and priority != value:
            spec["priority"] = value
            if policy:
                spec["preemptionPolicy"] = policy
            self.adjusted += 1


@dataclass(slots=True)
class _LeftOut:
    """The live objects whose simulation annotations the snapshot left out, for one warning."""

    named: list[str] = field(default_factory=list)
    objects: int = 0

    def note(self, kind: str, obj: Mapping[str, Any]) -> None:
        keys = simulation_annotations(obj)
        if not keys:
            return
        self.objects += 1
        if len(self.named) < _NAMED_AT_MOST:
            meta = obj.get("metadata") or {}
            name = str(meta.get("name"))
            if meta.get("namespace"):
                name = f"{meta['namespace']}/{name}"
            self.named.append(f"{kind} {name} ({', '.join(sorted(keys))})")

    def warning(self) -> str | None:
        if not self.objects:
            return None
        more = self.objects - len(self.named)
        return (
            "the simulator's timeline annotations on live objects are left out of the snapshot (it is "
            "the cluster as it is now, with no timeline): "
            + "; ".join(self.named)
            + (f"; and {more} more object(s)" if more else "")
        )


def _sort_key(pod: Mapping[str, Any]) -> tuple[float, str, str]:
    meta = pod["metadata"]
    ts = parse_timestamp(meta.get("creationTimestamp"))
    return (ts if ts is not None else 0.0, str(meta.get("namespace")), str(meta.get("name")))


async def take_snapshot(
    api: KubeApi,
    emit: Callable[[dict[str, Any]], object],
    scheduler_names: Sequence[str],
    now: float,
) -> SnapshotSummary:
    """Every object the scheduler reads, stripped, handed to `emit` in the order of KINDS, then the
    pods on nodes as they are listed, then the pods waiting for one of `scheduler_names`, oldest
    first."""
    summary = SnapshotSummary()
    priorities = _Priorities()
    left_out = _LeftOut()
    for kind in KINDS:
        async for page in _pages(api, kind):
            for obj in page:
                if kind is PRIORITY_CLASSES:
                    priorities.note(obj)
                left_out.note(kind.kind, obj)
                emit(strip_object(kind.kind, kind.api_version, obj, now))
                summary.counts[kind.plural] = summary.counts.get(kind.plural, 0) + 1
    bound = 0
    query = [("fieldSelector", f"spec.nodeName!=,{_NOT_FINISHED}")]
    async for page in _pages(api, PODS, query):
        for obj in page:
            left_out.note("Pod", obj)
            pod = strip_object("Pod", "v1", obj, now)
            priorities.admit(pod)
            emit(pod)
            bound += 1
    waiting: list[dict[str, Any]] = []
    for name in dict.fromkeys(scheduler_names):
        selector = f"spec.nodeName=,spec.schedulerName={name},{_NOT_FINISHED}"
        async for page in _pages(api, PODS, [("fieldSelector", selector)]):
            for obj in page:
                left_out.note("Pod", obj)
                waiting.append(strip_object("Pod", "v1", obj, now))
    waiting.sort(key=_sort_key)
    for pod in waiting:
        priorities.admit(pod)
        emit(pod)
    for pc in priorities.missing.values():
        emit(pc)
    summary.counts["pods on nodes"] = bound
    summary.counts["pending pods"] = len(waiting)
    if priorities.missing:
        summary.warnings.append(
            "pods name PriorityClasses the cluster no longer has; the snapshot recreates them with "
            f"the pods' priorities: {', '.join(sorted(priorities.missing))}"
        )
    if (dropped := left_out.warning()) is not None:
        summary.warnings.append(dropped)
    if priorities.adjusted:
        summary.warnings.append(
            f"{priorities.adjusted} pod(s) carry a priority their PriorityClass no longer has (deleted "
            "and created again since); the snapshot gives them the class's current value"
        )
    return summary


# ---------------------------------------------------------------------------------------------- writing


def dump_document(obj: Any) -> str:
    """One document of the scenario, `---` first."""
    return str(yaml.dump(obj, Dumper=_Dumper, sort_keys=False, explicit_start=True, allow_unicode=True))


def config_beside(path: str) -> str:
    """Where the configuration goes beside a scenario file: cluster.yaml -> cluster.config.yaml."""
    for suffix in (".yaml", ".yml"):
        if path.endswith(suffix):
            return path.removesuffix(suffix) + ".config" + suffix
    return path + ".config.yaml"
