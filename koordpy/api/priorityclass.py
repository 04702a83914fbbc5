"""PriorityClass: resolves a pod's `priorityClassName` into `spec.priority`, as admission does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError

# Built into every cluster; the apiserver creates them at start-up.
SYSTEM_CLUSTER_CRITICAL = 2000000000
SYSTEM_NODE_CRITICAL = 2000001000


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool
    preemption_policy: str

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> PriorityClass:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            raise SpecError("metadata.name", "a PriorityClass needs a name")
        value = obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            raise SpecError("value", f"must be an integer, got {value!r}")
        if not -(2**31) <= value < 2**31:
            raise SpecError("value", f"must be a 32-bit integer, got {value}")
        if value > 1000000000 and not name.startswith("system-"):
            raise SpecError("value", f"must be at most 1000000000 for user classes, got {value}")
        policy = obj.get("preemptionPolicy") or "PreemptLowerPriority"
        if policy not in ("PreemptLowerPriority", "Never"):
            raise SpecError("preemptionPolicy", f"must be PreemptLowerPriority or Never, got {policy!r}")
        global_default = obj.get("globalDefault")
        if global_default is not None and not isinstance(global_default, bool):
            raise SpecError("globalDefault", f"must be true or false, got {global_default!r}")
        return PriorityClass(name, value, bool(global_default), policy)


BUILTIN_PRIORITY_CLASSES = (
    PriorityClass("system-cluster-critical", SYSTEM_CLUSTER_CRITICAL, False, "PreemptLowerPriority"),
    PriorityClass("system-node-critical", SYSTEM_NODE_CRITICAL, False, "PreemptLowerPriority"),
)
