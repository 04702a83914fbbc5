"""The report's volumes: each claim with its phase and the volume it is bound to, and each volume,
as the run left them. Present only when the scenario has any, so that a report without storage
stays as it was."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordpy.simulate.claims import CLAIM, VOLUME
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.report import Report
from koordpy.simulate.volumes import PROVISIONED_BY
from koordpy.simulate.volumestore import meta_of, section

__all__ = ["add_volumes", "claim_results", "volume_results"]


def _storage(capacity: Mapping[str, Any]) -> str | None:
    value = capacity.get("storage")
    return None if value is None else str(value)


def claim_results(claims: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`persistentVolumeClaims`: each claim in creation order."""
    out: list[dict[str, Any]] = []
    for raw in claims.values():
        meta, spec, status = meta_of(raw), section(raw, "spec"), section(raw, "status")
        annotations = meta.get("annotations") or {}
        out.append(
            {
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "phase": status.get("phase") or "Pending",
                "volume": spec.get("volumeName") or None,
                "storageClass": spec.get("storageClassName"),
                "request": _storage(section(section(spec, "resources"), "requests")),
                "capacity": _storage(section(status, "capacity")),
                # the node the scheduler chose for a WaitForFirstConsumer claim
                "selectedNode": annotations.get("volume.kubernetes.io/selected-node"),
            }
        )
    return out


def volume_results(volumes: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`persistentVolumes`: each volume in creation order (a provisioned one when it was provisioned)."""
    out: list[dict[str, Any]] = []
    for raw in volumes.values():
        meta, spec = meta_of(raw), section(raw, "spec")
        ref = section(spec, "claimRef")
        affinity = section(section(spec, "nodeAffinity"), "required")
        out.append(
            {
                "name": meta.get("name"),
                "phase": section(raw, "status").get("phase"),
                "claim": f"{ref.get('namespace')}/{ref.get('name')}" if ref else None,
                "storageClass": spec.get("storageClassName"),
                "capacity": _storage(section(spec, "capacity")),
                "provisioned": PROVISIONED_BY in (meta.get("annotations") or {}),
                "nodeAffinity": affinity or None,
            }
        )
    return out


def add_volumes(world: MemoryCluster, report: Report) -> None:
    volumes = world.volumes
    if volumes is None or not any(volumes.raw.values()):
        return
    report.extras["persistentVolumeClaims"] = claim_results(volumes.raw[CLAIM])
    report.extras["persistentVolumes"] = volume_results(volumes.raw[VOLUME])
