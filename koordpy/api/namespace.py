"""Namespace labels, for affinity terms that select namespaces by label."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str]

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> Namespace:
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            meta = {}
        name = str(meta.get("name") or "")
        raw_labels = meta.get("labels")
        labels = {str(k): str(v) for k, v in raw_labels.items()} if isinstance(raw_labels, Mapping) else {}
        labels[NAME_LABEL] = name
        return Namespace(name, labels)

    @staticmethod
    def implicit(name: str) -> Namespace:
        return Namespace(name, {NAME_LABEL: name})
