"""Scenario loading for `koordpy simulate`: manifests on disk or stdin, turned into the objects an API
server would hold after defaulting and admission, with workloads expanded into the pods their
controllers would create. Each document is read and parsed once, and each object kept in one form:
a typed view or, for pods and topologies, the API object itself.

Pods whose specs the scheduler cannot understand are not input errors: the simulation reports them
as InvalidSpec, exactly as a cluster would leave them pending. Objects an API server would refuse
are: a field of the wrong JSON type, a pod without a spec.

A scenario holds at most `max_objects` objects, stamped pods included (MAX_OBJECTS unless the
caller raises it), and a workload stamps at most MAX_PODS_PER_WORKLOAD pods: both stop a runaway
input with a message rather than by exhausting the memory.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from koordpy.api.elasticquota import ElasticQuota
from koordpy.api.errors import SpecError
from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pdb import PodDisruptionBudget
from koordpy.api.pod import DEFAULT_SCHEDULER_NAME
from koordpy.api.podgroup import PodGroup
from koordpy.api.priorityclass import PriorityClass
from koordpy.simulate.claims import (
    CLAIM,
    STORAGE_KINDS,
    StorageObject,
    check_ephemeral_volumes,
    claim_templates,
    read_storage,
    stateful_claim,
)
from koordpy.simulate.documents import STDIN, STDIN_LABEL, ScenarioError, Source, describe, read_documents
from koordpy.simulate.objects import Entry, entries_of
from koordpy.simulate.priorities import Priorities, read_priorities
from koordpy.simulate.timeline import ARRIVE_AFTER, REMOVE_AFTER, TIMELINE_ANNOTATIONS, Timing, read_timing
from koordpy.simulate.workloads import (
    MAX_PODS_PER_WORKLOAD,
    WORKLOAD_KINDS,
    JobSpec,
    job_spec,
    pod_count,
    stamp_pods,
)

__all__ = [
    "MAX_OBJECTS",
    "MAX_PODS_PER_WORKLOAD",
    "STDIN",
    "STDIN_LABEL",
    "Scenario",
    "ScenarioError",
    "Source",
    "load_scenario",
]

# Objects of a scenario, the pods that workloads stamp included: more than the largest cluster
# Kubernetes supports holds (5,000 nodes, 150,000 pods), with room for its other objects.
MAX_OBJECTS = 250_000


@dataclass(slots=True)
class Scenario:
    namespaces: list[Namespace] = field(default_factory=list)
    # Only the input's classes; the built-in ones take part in resolution but are not listed.
    priority_classes: list[PriorityClass] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    # Their `raw` is the object as read: the scheduler is handed that, as an informer hands it.
    pod_groups: list[PodGroup] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    topologies: list[dict[str, Any]] = field(default_factory=list)
    # Both API groups; a quota with a problem is kept: its pods are held, as on a cluster.
    elastic_quotas: list[ElasticQuota] = field(default_factory=list)
    # Explicit and workload-stamped pods in creation order, as API dicts after defaulting.
    pods: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[tuple[str, str, str], Source] = field(default_factory=dict)
    # The timeline annotations (simulation.koordpy.io/...) by (kind, namespace, name); a workload's
    # pods are listed under their own keys. Objects without them arrive at zero and stay.
    timing: dict[tuple[str, str, str], Timing] = field(default_factory=dict)
    # "namespace/name" of the pods a workload stamped: its controller creates them again when lost
    workload_pods: set[str] = field(default_factory=set)
    # the Jobs, for the pods their controller creates as others complete (only with a timeline)
    jobs: list[JobSpec] = field(default_factory=list)
    # StorageClasses, PersistentVolumes, claims (a StatefulSet's among them), CSINodes, CSIDrivers
    # CSIStorageCapacities and VolumeAttachments, in input order
    storage: list[StorageObject] = field(default_factory=list)

    @property
    def has_timeline(self) -> bool:
        """Whether any object carries a timeline annotation: only then does the report show times."""
        return bool(self.timing)

    def arrival(self, kind: str, namespace: str, name: str) -> float:
        timing = self.timing.get((kind, namespace, name))
        return timing.arrive if timing is not None else 0.0


def _default_pod(pod: dict[str, Any], priorities: Priorities, at: float = 0.0) -> None:
    """Defaulting and admission for a pod about to be created. A spec that is not an object is left
    alone: the scheduler reports that pod as InvalidSpec."""
    meta = pod["metadata"]
    meta.setdefault("uid", f"uid-pod-{meta['namespace']}-{meta['name']}")
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER_NAME
    priorities.admit(spec, at)


def _too_many(max_objects: int) -> str:
    return f"the scenario would hold more than {max_objects} objects (raise the limit with --max-objects)"


def load_scenario(
    paths: Sequence[str], stdin: TextIO | None = None, max_objects: int = MAX_OBJECTS
) -> Scenario:
    """Reads every object the paths hold (a file, a directory's *.yaml/*.yml in name order, or `-`
    for `stdin`) and returns them defaulted and admitted; raises ScenarioError for invalid input."""
    if not paths:
        raise ScenarioError("", None, "", "no input: name a file, a directory or - for standard input")
    entries: list[Entry] = []
    # A document holds an object or more (a List), or nothing: twice the objects is room enough for
    # every real input, and bounds the time a text of empty documents takes.
    for source, doc in read_documents(paths, stdin, max_documents=2 * max_objects):
        for entry in entries_of(doc, source):
            if len(entries) >= max_objects:
                raise entry.error("", _too_many(max_objects))
            entries.append(entry)
    if not entries:
        raise ScenarioError(paths[0] if len(paths) == 1 else "", None, "", "the input holds no objects")

    scenario = Scenario()
    owners: dict[tuple[str, str, str], Source] = {}
    for entry in entries:
        if entry.kind == "Pod":
            continue  # registered below, in creation order, together with the pods workloads stamp
        _register(owners, entry.key, entry.source, entry, "metadata.name")
    for entry in entries:
        _read_timing(scenario, entry)
    priorities, scenario.priority_classes = read_priorities(entries, scenario.timing)

    objects = len(entries)
    for entry in entries:
        kind = entry.kind
        if kind == "Pod":
            if not isinstance(entry.obj.get("spec"), dict):
                # the API server's validation: a pod needs containers, so a spec
                raise entry.error("spec", "missing")
            check_ephemeral_volumes(entry, entry.obj["spec"], "spec")
            pod = copy.deepcopy(entry.obj)
            _register(owners, entry.key, entry.source, entry, "metadata.name")
            try:
                _default_pod(pod, priorities, scenario.arrival(*entry.key))
            except SpecError as err:
                raise entry.spec_error(err) from err
            scenario.pods.append(pod)
        elif kind in WORKLOAD_KINDS:
            count, field = pod_count(entry)
            if objects + count > max_objects:
                raise entry.error(field, f"{count} pods: {_too_many(max_objects)}")
            objects += count
            template = _template_timing(entry)
            _check_template_volumes(entry)
            claims = claim_templates(entry) if kind == "StatefulSet" else []
            stamped: list[str] = []
            for index, pod in enumerate(stamp_pods(entry, claims)):
                for claim_template in claims:
                    objects += _stamp_claim(
                        scenario, owners, entry, claim_template, index, max_objects, objects
                    )
                key = ("Pod", entry.namespace, pod["metadata"]["name"])
                _register(owners, key, entry.source, entry, "metadata.name", stamped=True)
                if template is not None:
                    scenario.timing[key] = template
                scenario.workload_pods.add(f"{entry.namespace}/{key[2]}")
                stamped.append(f"{entry.namespace}/{key[2]}")
                try:
                    _default_pod(pod, priorities, scenario.arrival(*key))
                except SpecError as err:
                    raise entry.spec_error(err, "spec.template") from err
                scenario.pods.append(pod)
            if kind == "Job":
                scenario.jobs.append(job_spec(entry, stamped))
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
        elif kind == "ElasticQuota":
            scenario.elastic_quotas.append(ElasticQuota.from_dict(entry.obj))
        elif kind in STORAGE_KINDS:
            scenario.storage.append(read_storage(entry))
        # PriorityClass entries were handled first: every pod's admission needs all of them.
    scenario.sources = owners
    return scenario


def _check_template_volumes(entry: Entry) -> None:
    spec = entry.obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    check_ephemeral_volumes(entry, pod_spec, "spec.template.spec")


def _stamp_claim(
    scenario: Scenario,
    owners: dict[tuple[str, str, str], Source],
    entry: Entry,
    template: Any,
    ordinal: int,
    max_objects: int,
    objects: int,
) -> int:
    """The claim a StatefulSet's controller creates for the pod `ordinal` from `template`, unless
    one of that name exists (the controller uses it); it arrives with the StatefulSet. How many
    objects it adds."""
    claim = stateful_claim(entry, template, ordinal)
    key = (CLAIM, entry.namespace, claim["metadata"]["name"])
    if key in owners:
        return 0
    if objects + 1 > max_objects:
        raise entry.error("spec.volumeClaimTemplates", _too_many(max_objects))
    owners[key] = entry.source
    timing = scenario.timing.get(entry.key)
    if timing is not None and timing.arrive > 0:
        scenario.timing[key] = Timing(timing.arrive, None, None)
    scenario.storage.append(StorageObject(CLAIM, entry.namespace, key[2], claim))
    return 1


# which timeline annotations each kind takes on its own metadata; every other kind takes arrive-after
_TIMING_OF_KIND = {
    "Pod": TIMELINE_ANNOTATIONS,
    "Node": (ARRIVE_AFTER, REMOVE_AFTER),
}


def _read_timing(scenario: Scenario, entry: Entry) -> None:
    meta = entry.obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    timing, field, message = read_timing(annotations, _TIMING_OF_KIND.get(entry.kind, (ARRIVE_AFTER,)))
    if field:
        raise entry.error(field, message)
    if timing is not None:
        scenario.timing[entry.key] = timing


def _template_timing(entry: Entry) -> Timing | None:
    """The timing of each pod a workload stamps: its template's annotations, the pods arriving no
    earlier than the workload itself."""
    own = entry.obj["metadata"].get("annotations")
    spec = entry.obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    meta = template.get("metadata") if isinstance(template, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    timing, field, message = read_timing(annotations, TIMELINE_ANNOTATIONS, under="spec.template")
    if field:
        raise entry.error(field, message)
    workload, _, _ = read_timing(own, (ARRIVE_AFTER,))
    if workload is None:
        return timing
    if timing is None:
        return workload
    arrive = max(timing.arrive, workload.arrive)
    if timing.remove is not None and timing.remove <= arrive:
        message = f"removal at {timing.remove:g}s must come after the arrival at {arrive:g}s"
        raise entry.error(f"spec.template.metadata.annotations[{REMOVE_AFTER}]", message)
    return Timing(arrive, timing.run_for, timing.remove)


def _register(
    owners: dict[tuple[str, str, str], Source],
    key: tuple[str, str, str],
    source: Source,
    entry: Entry,
    field: str,
    stamped: bool = False,
) -> None:
    earlier = owners.get(key)
    if earlier is not None:
        kind, namespace, name = key
        what = f"{namespace}/{name}" if namespace else name
        if stamped:
            message = f"it would create {kind} {what}, which is already defined ({describe(earlier)})"
        else:
            message = f"{kind} {what} is already defined ({describe(earlier)})"
        raise entry.error(field, message)
    owners[key] = source
