"""The chart's grant on storage objects is kube-scheduler's, verb for verb: what the bootstrap
ClusterRole `system:volume-scheduler` grants (PersistentVolumes and their claims read and
updated, StorageClasses read) and what `system:kube-scheduler` grants on the CSI objects; the
informers and the volume binding of `koordpy run` need no more, and the dry-run role lists each
storage kind the snapshot reads."""

from __future__ import annotations

from typing import Any

from koordpy.cluster.snapshot import KINDS
from koordpy.kubeapi.informer import STORAGE, WATCHED
from tests.e2e.test_chart import (  # noqa: F401 - helm is a fixture
    RELEASE,
    _cluster_role,
    helm,
    render,
)

READ = {"get", "list", "watch"}
READ_UPDATE = READ | {"update", "patch"}
# kube's plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go
VOLUME_SCHEDULER = {
    ("", "persistentvolumes"): READ_UPDATE,
    ("", "persistentvolumeclaims"): READ_UPDATE,
    ("storage.k8s.io", "storageclasses"): READ,
}
KUBE_SCHEDULER_CSI = {
    ("storage.k8s.io", "csinodes"): READ,
    ("storage.k8s.io", "csidrivers"): READ,
    ("storage.k8s.io", "csistoragecapacities"): READ,
    # NodeVolumeLimits counts the volumes still attached to each node
    ("storage.k8s.io", "volumeattachments"): READ,
}


def _grants(role: dict[str, Any], resources: set[tuple[str, str]]) -> dict[tuple[str, str], set[str]]:
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                if (group, resource) in resources:
                    assert "resourceNames" not in rule, rule
                    granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


def test_the_storage_grant_is_kube_schedulers(helm: str) -> None:  # noqa: F811 - the fixture
    expected = {**VOLUME_SCHEDULER, **KUBE_SCHEDULER_CSI}
    granted = _grants(_cluster_role(render(helm)), set(expected))
    assert granted == expected


def test_the_grant_covers_every_storage_informer() -> None:
    """What the informers watch is what the grant names (list and watch of each)."""
    watched = {(r.api_version.rpartition("/")[0], r.plural) for r in WATCHED if r in STORAGE}
    assert watched == set(VOLUME_SCHEDULER) | set(KUBE_SCHEDULER_CSI)


def test_the_dry_run_role_lists_each_storage_kind_the_snapshot_reads(helm: str) -> None:  # noqa: F811
    storage = set(VOLUME_SCHEDULER) | set(KUBE_SCHEDULER_CSI)
    snapshot_reads = {(k.api_version.rpartition("/")[0], k.plural) for k in KINDS} & storage
    assert snapshot_reads == storage
    granted = _grants(_cluster_role(render(helm), "-dry-run"), storage)
    assert granted == {key: {"list"} for key in storage}, f"{RELEASE}-dry-run lists only"
