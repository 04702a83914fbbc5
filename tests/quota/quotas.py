"""ElasticQuota objects as the apiserver stores them, and views of them, for the quota tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from koordpy.api.elasticquota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    KOORDINATOR_GROUP,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    LABEL_TREE_ID,
    X_K8S_GROUP,
    ElasticQuota,
)

GI = 1 << 30


def koord_dict(
    name: str,
    *,
    parent: str | None = None,
    max: Mapping[str, Any] | None = None,
    min: Mapping[str, Any] | None = None,
    is_parent: bool = False,
    lent: bool | None = None,
    weight: Mapping[str, Any] | None = None,
    namespace: str = "quotas",
    tree_id: str | None = None,
    namespaces: list[str] | None = None,
    created: int = 0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    meta_labels: dict[str, str] = dict(labels or {})
    meta_annotations: dict[str, str] = dict(annotations or {})
    if parent is not None:
        meta_labels[LABEL_PARENT] = parent
    if is_parent:
        meta_labels[LABEL_IS_PARENT] = "true"
    if lent is not None:
        meta_labels[LABEL_ALLOW_LENT_RESOURCE] = "true" if lent else "false"
    if tree_id is not None:
        meta_labels[LABEL_TREE_ID] = tree_id
    if weight is not None:
        meta_annotations[ANNOTATION_SHARED_WEIGHT] = orjson.dumps(dict(weight)).decode()
    if namespaces is not None:
        meta_annotations[ANNOTATION_NAMESPACES] = orjson.dumps(namespaces).decode()
    spec: dict[str, Any] = {}
    if max is not None:
        spec["max"] = dict(max)
    if min is not None:
        spec["min"] = dict(min)
    return {
        "apiVersion": f"{KOORDINATOR_GROUP}/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": meta_annotations,
            "creationTimestamp": f"2024-01-01T00:{created // 60:02d}:{created % 60:02d}Z",
        },
        "spec": spec,
    }


def koord(name: str, **kwargs: Any) -> ElasticQuota:
    return ElasticQuota.from_dict(koord_dict(name, **kwargs))


def xk8s_dict(
    name: str,
    namespace: str,
    *,
    max: Mapping[str, Any] | None = None,
    min: Mapping[str, Any] | None = None,
    created: int = 0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if max is not None:
        spec["max"] = dict(max)
    if min is not None:
        spec["min"] = dict(min)
    return {
        "apiVersion": f"{X_K8S_GROUP}/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": f"2024-01-01T00:{created // 60:02d}:{created % 60:02d}Z",
        },
        "spec": spec,
    }


def xk8s(name: str, namespace: str, **kwargs: Any) -> ElasticQuota:
    return ElasticQuota.from_dict(xk8s_dict(name, namespace, **kwargs))


def cores(cpu: int | str, memory: int | str | None = None) -> dict[str, Any]:
    """A resource list of cpu (cores, or a quantity string) and memory (bytes, or a quantity)."""
    out: dict[str, Any] = {"cpu": str(cpu)}
    if memory is not None:
        out["memory"] = str(memory)
    return out
