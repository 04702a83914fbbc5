"""Workload expansion: the pods a ReplicaSet, Deployment, StatefulSet or Job controller creates,
named `<workload>-<index>` from 0 and labelled as their controller labels them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.simulate.claims import with_claim_volumes
from koordpy.simulate.objects import Entry, shown, type_name

WORKLOAD_KINDS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "Job"})

STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

# The most pods one workload may stamp in a simulation: far beyond any real controller's
# replicas, and small enough that a typo such as `replicas: 1000000` stops at once with a message
# instead of filling the memory.
MAX_PODS_PER_WORKLOAD = 100_000
_INT32_MAX = 2**31 - 1


def _replicas(entry: Entry, spec: Mapping[str, Any], field: str) -> int:
    value = spec.get(field)
    if value is None:
        return 1
    if type(value) is not int or not 0 <= value <= _INT32_MAX:
        raise entry.error(f"spec.{field}", f"must be a non-negative integer, got {shown(value)}")
    return value


def pod_count(entry: Entry) -> tuple[int, str]:
    """How many pods the workload's controller creates, and the field that decides it; an input
    error when that is more than MAX_PODS_PER_WORKLOAD."""
    spec = _spec(entry)
    if entry.kind != "Job":
        count, field = _replicas(entry, spec, "replicas"), "spec.replicas"
    else:
        parallelism = _replicas(entry, spec, "parallelism")
        completions = spec.get("completions")
        if completions is not None and (type(completions) is not int or not 0 <= completions <= _INT32_MAX):
            raise entry.error("spec.completions", f"must be a non-negative integer, got {shown(completions)}")
        field = "spec.parallelism"
        if spec.get("suspend") is True:
            count = 0
        elif completions is not None and completions < parallelism:
            # The Job controller never runs more pods at once than there are completions left to make.
            count, field = completions, "spec.completions"
        else:
            count = parallelism
    if count > MAX_PODS_PER_WORKLOAD:
        raise entry.error(
            field,
            f"{count} pods are more than the {MAX_PODS_PER_WORKLOAD} a workload may create in a simulation",
        )
    return count, field


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the Job controller reads to count a Job's pods over time (see koordpy.simulate.jobs);
    `pods` are the keys of the pods it stamped at the start."""

    namespace: str
    name: str
    parallelism: int
    completions: int | None
    indexed: bool
    replace_terminating: bool
    pods: tuple[str, ...]
    backoff_limit: int = 6
    # the podFailurePolicy's rules on pod conditions: (action, the condition types that match)
    failure_rules: tuple[tuple[str, frozenset[str]], ...] = ()


def job_spec(entry: Entry, pods: list[str]) -> JobSpec:
    """The JobSpec of a Job whose stamped pods are `pods` (pod_count has checked the counts). A
    suspended Job creates no pods and none later."""
    spec = _spec(entry)
    parallelism = _replicas(entry, spec, "parallelism")
    completions = spec.get("completions")
    if spec.get("suspend") is True:
        parallelism = 0
    # kube: podReplacementPolicy defaults to TerminatingOrFailed, and must be Failed with a
    # podFailurePolicy
    policy = spec.get("podReplacementPolicy") or ("Failed" if spec.get("podFailurePolicy") else "")
    backoff_limit = spec.get("backoffLimit")
    return JobSpec(
        entry.namespace,
        entry.name,
        parallelism,
        completions if isinstance(completions, int) else None,
        spec.get("completionMode") == "Indexed",
        policy != "Failed",
        tuple(pods),
        backoff_limit if isinstance(backoff_limit, int) else 6,
        _failure_rules(spec.get("podFailurePolicy")),
    )


def _failure_rules(policy: Any) -> tuple[tuple[str, frozenset[str]], ...]:
    """The rules of a podFailurePolicy that can match in a simulation: those on pod conditions
    (status True, the only status a condition written here has). A rule on exit codes keeps its
    place as one that never matches, so that the indexes in messages are the input's."""
    rules = policy.get("rules") if isinstance(policy, Mapping) else None
    out: list[tuple[str, frozenset[str]]] = []
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, Mapping):
            continue
        on = rule.get("onPodConditions")
        types = frozenset(
            str(c.get("type"))
            for c in (on if isinstance(on, list) else [])
            if isinstance(c, Mapping) and c.get("status", "True") == "True"
        )
        out.append((str(rule.get("action") or ""), types))
    return tuple(out)


def _spec(entry: Entry) -> Mapping[str, Any]:
    spec = entry.obj.get("spec")
    if not isinstance(spec, Mapping):
        message = "missing" if spec is None else f"expected an object, got {type_name(spec)}"
        raise entry.error("spec", message)
    return spec


def _string_map(entry: Entry, value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise entry.error(field, f"expected an object, got {type_name(value)}")
    return dict(value)


def stamp_pods(
    entry: Entry, claim_templates: list[Mapping[str, Any]] | None = None
) -> Iterator[dict[str, Any]]:
    """The pods a workload's controller creates, as API dicts before defaulting; a StatefulSet's
    with a volume naming the claim of each of its `claim_templates` (see koordpy.simulate.claims)."""
    spec = _spec(entry)
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
    count, _ = pod_count(entry)
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
            "spec": (
                with_claim_volumes(shared_spec, claim_templates, entry.name, index)
                if claim_templates
                else shared_spec
            ),
        }


def replacement_pod(
    pod: Mapping[str, Any],
    taken: Callable[[str], bool],
    counters: dict[tuple[str, str, str], int],
    completion_index: int | None = None,
) -> dict[str, Any]:
    """The pod a workload's controller creates in place of `pod` (one it stamped), which it lost,
    or beside it (a Job's next pod): a StatefulSet under the same name (its identity), the others
    under the next name `<workload>-<index>` no pod holds; each with a new uid, and a pod of an
    Indexed Job with `completion_index`. `counters` carries, per workload, the first index not yet
    tried, so that names are found in time linear in the replacements."""
    meta = pod["metadata"]
    owner = meta["ownerReferences"][0]
    namespace = meta["namespace"]
    name = meta["name"]
    if owner["kind"] != "StatefulSet":
        slot = (namespace, owner["kind"], owner["name"])
        index = counters.get(slot, 0)
        while taken(f"{owner['name']}-{index}"):
            index += 1
        counters[slot] = index + 1
        name = f"{owner['name']}-{index}"
    generation = counters.get(("", "", name), 0) + 1
    counters[("", "", name)] = generation
    new_meta = {k: v for k, v in meta.items() if k != "creationTimestamp"}
    new_meta["name"] = name
    new_meta["uid"] = f"{meta.get('uid') or name}-{generation}"
    labels = dict(meta.get("labels") or {})
    if owner["kind"] == "StatefulSet":
        labels[STATEFULSET_POD_NAME_LABEL] = name
    if completion_index is not None:
        labels[JOB_COMPLETION_INDEX] = str(completion_index)
        new_meta["annotations"] = {
            **(meta.get("annotations") or {}),
            JOB_COMPLETION_INDEX: str(completion_index),
        }
    new_meta["labels"] = labels
    return {**pod, "metadata": new_meta, "status": {}}
