"""The volumes of a pod that scheduling looks at: claims (named or generic ephemeral) and the in-tree
disks attached by the node (GCE PD, AWS EBS, RBD, iSCSI, Azure Disk, Cinder, Portworx).

Everything else a pod mounts (emptyDir, configMap, secret, projected, the service account token,
an inline CSI volume) never decides where a pod goes, so it is not kept: most pods have an empty
`volumes` and every volume plugin skips them on one truthiness check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.fields import flag, required, strings
from koordpy.api.fields import mapping as _mapping
from koordpy.api.fields import string as _string

__all__ = [
    "AWS_EBS",
    "AZURE_DISK",
    "CINDER",
    "GCE_PD",
    "ISCSI",
    "PORTWORX",
    "RBD",
    "InlineVolume",
    "PodVolume",
    "ebs_volume_id",
    "name_ephemeral_claims",
    "parse_pod_volumes",
]

# the kinds of inline disks, named as the pod spec names their source
GCE_PD = "gcePersistentDisk"
AWS_EBS = "awsElasticBlockStore"
RBD = "rbd"
ISCSI = "iscsi"
AZURE_DISK = "azureDisk"
CINDER = "cinder"
PORTWORX = "portworxVolume"

# in-tree plugin -> CSI driver, for the plugins whose migration kube-scheduler 1.37 counts against
# the CSI driver's limit (csi-translation-lib names; isCSIMigrationOn in nodevolumelimits)
IN_TREE_PLUGIN = {
    GCE_PD: "kubernetes.io/gce-pd",
    AWS_EBS: "kubernetes.io/aws-ebs",
    AZURE_DISK: "kubernetes.io/azure-disk",
    CINDER: "kubernetes.io/cinder",
    PORTWORX: "kubernetes.io/portworx-volume",
}
MIGRATED_DRIVER = {
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
# csi-translation-lib's placeholder for the parts of a GCE PD handle an inline volume does not know
GCE_UNSPECIFIED = "UNSPECIFIED"


@dataclass(frozen=True, slots=True)
class InlineVolume:
    """An in-tree disk named in the pod spec. `id` is what VolumeRestrictions compares (pdName,
    volumeID, `pool/image` for RBD with `monitors`, the IQN for iSCSI, diskURI, ...);
    `csi_driver`/`csi_handle` are what the disk counts as once migrated to CSI ("" when it is not
    migratable or its id does not translate)."""

    kind: str
    id: str
    read_only: bool
    monitors: tuple[str, ...] = ()
    csi_driver: str = ""
    csi_handle: str = ""

    @property
    def in_tree_plugin(self) -> str:
        return IN_TREE_PLUGIN.get(self.kind, "")

    def conflicts(self, other: InlineVolume) -> bool:
        """kube-scheduler's isVolumeConflict for one pair: the same disk mounted twice where the
        disk allows it only read-only (EBS: not even then)."""
        if self.kind != other.kind or self.id != other.id:
            return False
        if self.kind == AWS_EBS:
            return True
        if self.kind == RBD:
            if not set(self.monitors).intersection(other.monitors):
                return False
            return not (self.read_only and other.read_only)
        if self.kind in (GCE_PD, ISCSI):
            return not (self.read_only and other.read_only)
        return False


@dataclass(frozen=True, slots=True)
class PodVolume:
    """A volume scheduling looks at. `claim_name` is the claim a persistentVolumeClaim volume names,
    or for a generic ephemeral volume (`ephemeral`) the claim created for it, `<pod>-<volume>`;
    "" for an inline disk, which `inline` describes."""

    name: str
    claim_name: str
    ephemeral: bool
    read_only: bool
    inline: InlineVolume | None


def ebs_volume_id(volume_id: str) -> str:
    """The EBS volume id behind a Kubernetes one (`aws://zone/vol-x` -> `vol-x`), as
    csi-translation-lib's KubernetesVolumeIDToEBSVolumeID; "" where that fails."""
    if not volume_id.startswith("aws://"):
        return volume_id
    rest = volume_id[len("aws://") :]
    # the URL's path: what follows the host, without surrounding slashes
    slash = rest.find("/")
    path = rest[slash:].strip("/") if slash >= 0 else ""
    if not path.startswith("vol-") or "/" in path:
        return ""
    return path


def _flag(obj: Mapping[str, Any], key: str, path: str) -> bool:
    return flag(obj.get(key), f"{path}.{key}")


def _inline(kind: str, source: Mapping[str, Any], path: str) -> InlineVolume:
    read_only = _flag(source, "readOnly", path)
    if kind == GCE_PD:
        pd = required(source, "pdName", path)
        handle = f"projects/{GCE_UNSPECIFIED}/zones/{GCE_UNSPECIFIED}/disks/{pd}"
        return InlineVolume(
            kind, pd, read_only, csi_driver=MIGRATED_DRIVER[IN_TREE_PLUGIN[kind]], csi_handle=handle
        )
    if kind == AWS_EBS:
        volume_id = required(source, "volumeID", path)
        handle = ebs_volume_id(volume_id)
        return InlineVolume(
            kind, volume_id, read_only, csi_driver=MIGRATED_DRIVER[IN_TREE_PLUGIN[kind]], csi_handle=handle
        )
    if kind == RBD:
        monitors = strings(source.get("monitors"), f"{path}.monitors")
        if not monitors:
            raise SpecError(f"{path}.monitors", "is required")
        image = required(source, "image", path)
        # the API server defaults the pool to "rbd"; the simulator reads manifests as written
        pool = _string(source.get("pool"), f"{path}.pool") or "rbd"
        return InlineVolume(kind, f"{pool}/{image}", read_only, monitors=monitors)
    if kind == ISCSI:
        required(source, "targetPortal", path)
        lun = source.get("lun", 0)
        if isinstance(lun, bool) or not isinstance(lun, int) or not 0 <= lun <= 255:
            raise SpecError(f"{path}.lun", f"must be an integer between 0 and 255, got {lun!r}")
        # two iSCSI volumes are the same disk when their IQNs are (kube compares nothing else)
        return InlineVolume(kind, required(source, "iqn", path), read_only)
    if kind == AZURE_DISK:
        required(source, "diskName", path)
        uri = required(source, "diskURI", path)
        return InlineVolume(
            kind, uri, read_only, csi_driver=MIGRATED_DRIVER[IN_TREE_PLUGIN[kind]], csi_handle=uri
        )
    # cinder and portworx: the volume id is the CSI handle as it is
    volume_id = required(source, "volumeID", path)
    return InlineVolume(
        kind, volume_id, read_only, csi_driver=MIGRATED_DRIVER[IN_TREE_PLUGIN[kind]], csi_handle=volume_id
    )


_INLINE_KINDS = (GCE_PD, AWS_EBS, RBD, ISCSI, AZURE_DISK, CINDER, PORTWORX)


def parse_pod_volumes(raw: Any, path: str = "spec.volumes") -> tuple[PodVolume, ...]:
    """The volumes scheduling looks at, from spec.volumes. A generic ephemeral volume's claim name
    depends on the pod's name, which the cached spec parse does not see: it is left "" here and
    filled in by `name_ephemeral_claims`."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(path, f"expected a list, got {type(raw).__name__}")
    out: list[PodVolume] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        at = f"{path}[{i}]"
        volume = _mapping(entry, at)
        name = required(volume, "name", at)
        if name in seen:
            raise SpecError(f"{at}.name", f"duplicate volume name {name!r}")
        seen.add(name)
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            source = _mapping(claim, f"{at}.persistentVolumeClaim")
            claim_name = required(source, "claimName", f"{at}.persistentVolumeClaim")
            read_only = _flag(source, "readOnly", f"{at}.persistentVolumeClaim")
            out.append(PodVolume(name, claim_name, False, read_only, None))
            continue
        ephemeral = volume.get("ephemeral")
        if ephemeral is not None:
            source = _mapping(ephemeral, f"{at}.ephemeral")
            _mapping(source.get("volumeClaimTemplate"), f"{at}.ephemeral.volumeClaimTemplate")
            out.append(PodVolume(name, "", True, False, None))
            continue
        for kind in _INLINE_KINDS:
            source_raw = volume.get(kind)
            if source_raw is not None:
                inline = _inline(kind, _mapping(source_raw, f"{at}.{kind}"), f"{at}.{kind}")
                out.append(PodVolume(name, "", False, inline.read_only, inline))
                break
    return tuple(out)


def name_ephemeral_claims(volumes: tuple[PodVolume, ...], pod_name: str) -> tuple[PodVolume, ...]:
    """`volumes` with each generic ephemeral volume's claim named `<pod>-<volume>` (kube's
    ephemeral.VolumeClaimName); the same tuple when there is none."""
    if not any(v.ephemeral for v in volumes):
        return volumes
    return tuple(
        PodVolume(v.name, f"{pod_name}-{v.name}", True, v.read_only, None) if v.ephemeral else v
        for v in volumes
    )
