"""What the test control plane turns on in Kubernetes v1.37: feature gates, API versions and the
kube-controller-manager controllers, with the command line of kube-controller-manager.

Stated once here, so that kube-apiserver and kube-controller-manager agree on the feature gates
(a gate the apiserver serves an API for but the controllers do not know would leave its objects
unreconciled), and so the DRA and Workload API tests can see in one place what the cluster offers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

# Off by default in v1.37 and needed by the Workload API (scheduling.k8s.io/v1beta1 Workload and
# PodGroup) and by DRA. The DRA gates that are beta and on by default are stated too, so the tests
# keep them whatever a later patch release defaults them to; DynamicResourceAllocation itself is GA
# and locked on, and an alpha DRA gate (each adds fields or a v1alpha3 API) is left off until a test
# needs it.
FEATURE_GATES: Mapping[str, bool] = {
    "GenericWorkload": True,
    "TopologyAwareWorkloadScheduling": True,
    "DRAWorkloadResourceClaims": True,
    "DRAConsumableCapacity": True,
    "DRAPartitionableDevices": True,
    "DRADeviceBindingConditions": True,
}

# Beta and alpha API versions are off by default: Workload and PodGroup are asked for in
# scheduling.k8s.io/v1beta1 (v1alpha3, which adds CompositePodGroup, stays off). resource.k8s.io/v1
# (DRA) is GA and served without asking.
RUNTIME_CONFIG: Mapping[str, bool] = {"scheduling.k8s.io/v1beta1": True}

# The controllers the tests rely on, by their canonical names (kube-controller-manager
# cmd/kube-controller-manager/names). The StatefulSet controller stamps a set's pods and the claims of
# its volumeClaimTemplates, as volume scheduling meets them. Left out on purpose: the ReplicaSet and
# Deployment controllers (tests create the pods those would, and check that nothing else does), the
# ServiceAccount controllers (the apiserver runs without the ServiceAccount admission plugin), the
# node lifecycle controller (it would taint and evict on KWOK nodes whose leases lag) and the
# PVC/PV protection controllers (the apiserver runs without the StorageObjectInUseProtection
# admission plugin: no claim or volume gets the finalizer they lift).
CONTROLLERS: Sequence[str] = (
    "persistentvolume-binder-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "pod-garbage-collector-controller",
    "job-controller",
    "resourceclaim-controller",
    "statefulset-controller",
)


def feature_gates_arg(gates: Mapping[str, bool] = FEATURE_GATES) -> str:
    return "--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))


def runtime_config_arg(config: Mapping[str, bool] = RUNTIME_CONFIG) -> str:
    return "--runtime-config=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(config.items()))


def controller_manager_args(
    binary: Path, *, kubeconfig: Path, cert_dir: Path, port: int, extra: Sequence[str] = ()
) -> list[str]:
    """kube-controller-manager with `kubeconfig`'s user (one certificate for every controller),
    without leader election, serving /healthz on 127.0.0.1:`port` (a certificate of its own in
    `cert_dir`)."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        # no delegated authentication or authorization (no --authentication-kubeconfig): only the
        # anonymous /healthz probe is asked of this server, and /healthz is always allowed
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
        # each controller would otherwise need a ServiceAccount and its token (token controller)
        "--use-service-account-credentials=false",
        "--controllers=" + ",".join(CONTROLLERS),
        feature_gates_arg(),
        # the defaults (20 qps, burst 30) slow namespace deletion down when a module leaves many
        # objects behind
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        # the PV controller syncs its claims every 15s by default; 1s lets a claim bind as soon as
        # its volume appears (the provisioner's PV is also seen by its watch)
        "--pvclaimbinder-sync-period=1s",
        "--profiling=false",
        *extra,
    ]
