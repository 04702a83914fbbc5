"""Which informer updates can matter to scheduling: most do not (node heartbeats, the status of a
running pod), and passing them on would cost more than the cycles they feed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def node_scheduling_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a node update can matter to scheduling. Most node updates are status heartbeats;
    passing them on would send every unschedulable pod back to the active queue each time, which
    kube-scheduler avoids the same way."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    return (
        old_meta.get("labels") != new_meta.get("labels")
        or old_meta.get("annotations") != new_meta.get("annotations")
        or old.get("spec") != new.get("spec")
        or any(old_status.get(f) != new_status.get(f) for f in ("allocatable", "capacity", "images"))
        or _condition_states(old_status) != _condition_states(new_status)
    )


def assigned_pod_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an update of a pod that stays on its node can matter to scheduling. After a pod is
    bound, the kubelet (or KWOK) keeps updating its status (phase, conditions, IPs, container states);
    none of it moves the pod or changes what it holds, and parsing each one again costs more than
    the scheduling cycle that placed it. A finished pod is handled before this is asked."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return (
        old.get("spec") != new.get("spec")
        or old_meta.get("labels") != new_meta.get("labels")
        or old_meta.get("annotations") != new_meta.get("annotations")
        or old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp")
        or old_meta.get("ownerReferences") != new_meta.get("ownerReferences")
    )


def _condition_states(status: Mapping[str, Any]) -> dict[str, str]:
    conditions = status.get("conditions") or ()
    return {str(c.get("type")): str(c.get("status")) for c in conditions if isinstance(c, dict)}
