"""API-shaped storage objects for the simulator's volume tests, and a run of `koordpy simulate`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.cli import main
from tests.builders import node_dict, pod_dict

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WFFC = "WaitForFirstConsumer"


def storage_class(
    name: str,
    provisioner: str = NO_PROVISIONER,
    mode: str | None = None,
    allowed: Mapping[str, Sequence[str]] | None = None,
    default: bool = False,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
    }
    if mode is not None:
        obj["volumeBindingMode"] = mode
    if allowed:
        obj["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in allowed.items()]}
        ]
    if default:
        obj["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return obj


def volume(
    name: str,
    size: str,
    storage_class: str,
    node: str | None = None,
    modes: Sequence[str] = ("ReadWriteOnce",),
    claim: tuple[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": storage_class,
        "local": {"path": f"/mnt/{name}"},
    }
    if node is not None:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        }
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def claim_spec(
    size: str, storage_class: str | None, modes: Sequence[str] = ("ReadWriteOnce",)
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return spec


def claim(name: str, size: str, storage_class: str | None, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": claim_spec(size, storage_class),
    }


def csi_node(name: str, driver: str, keys: Sequence[str]) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": driver, "nodeID": name, "topologyKeys": list(keys)}]},
    }


def csi_driver(name: str, storage_capacity: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"storageCapacity": storage_capacity},
    }


def capacity(name: str, storage_class: str, size: str, topology: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": storage_class,
        "nodeTopology": {"matchLabels": dict(topology)},
        "capacity": size,
    }


def attachment(name: str, node: str, pv: str | None, attacher: str) -> dict[str, Any]:
    """A VolumeAttachment of the PV `pv` to `node` (None: of an inline volume)."""
    source: dict[str, Any] = {"persistentVolumeName": pv} if pv is not None else {"inlineVolumeSpec": {}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": attacher, "nodeName": node, "source": source},
    }


def node(name: str, **labels: str) -> dict[str, Any]:
    return node_dict(name, labels={HOSTNAME: name, **labels})


def pod_with_claims(name: str, *claims: str, cpu: str = "1") -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod_dict(name, cpu=cpu, spec={"volumes": volumes})


def pod_with_ephemeral(name: str, volume_name: str, size: str, storage_class: str) -> dict[str, Any]:
    template = {"spec": claim_spec(size, storage_class)}
    return pod_dict(
        name,
        cpu="1",
        spec={"volumes": [{"name": volume_name, "ephemeral": {"volumeClaimTemplate": template}}]},
    )


def stateful_set(name: str, replicas: int, template: str, size: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]
                },
            },
            "volumeClaimTemplates": [
                {"metadata": {"name": template}, "spec": claim_spec(size, storage_class)}
            ],
        },
    }


def write(path: Path, docs: Sequence[Any]) -> Path:
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return path


def run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Sequence[Any], *options: str
) -> tuple[int, dict[str, Any] | None, str]:
    """`koordpy simulate` over `docs` with a JSON report: exit status, report (when it ran), stderr."""
    path = write(tmp_path / "input.yaml", docs)
    code = main(["simulate", str(path), "--output", "json", *options])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


def by_name(items: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(item["name"]): item for item in items}
