"""Workload expansion: the pods a ReplicaSet, Deployment, StatefulSet or Job controller creates,
named `<workload>-<index>` from 0 and labelled as their controller labels them."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from koordpy.simulate.objects import Entry, type_name

WORKLOAD_KINDS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "Job"})

STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _replicas(entry: Entry, spec: Mapping[str, Any], field: str) -> int:
    value = spec.get(field)
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise entry.error(f"spec.{field}", f"must be a non-negative integer, got {value!r}")
    return value


def _pod_count(entry: Entry, spec: Mapping[str, Any]) -> int:
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


def _string_map(entry: Entry, value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise entry.error(field, f"expected an object, got {type_name(value)}")
    return dict(value)


def stamp_pods(entry: Entry) -> Iterator[dict[str, Any]]:
    """The pods a workload's controller creates, as API dicts before defaulting."""
    spec = entry.obj.get("spec")
    if not isinstance(spec, Mapping):
        message = "missing" if spec is None else f"expected an object, got {type_name(spec)}"
        raise entry.error("spec", message)
    template = spec.get("template")
    if not isinstance(template, Mapping):
        message = "missing" if template is None else f"expected an object, got {type_name(template)}"
        raise entry.error("spec.template", message)
    template_meta = _string_map(entry, template.get("metadata"), "spec.template.metadata")
    labels = _string_map(entry, template_meta.get("labels"), "spec.template.metadata.labels")
    annotations = _string_map(entry, template_meta.get("annotations"), "spec.template.metadata.annotations")
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, Mapping):
        message = "missing" if pod_spec is None else f"expected an object, got {type_name(pod_spec)}"
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
