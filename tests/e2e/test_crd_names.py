"""The names the CRDs give their resources, as kubectl finds them on the test apiserver, and
koordpy's operators beside Koordinator's own PodGroup CRD.

Both PodGroup CRDs serve the plural `podgroups` (the reference projects fixed it). The short names
`pg` and `pgs` are scheduler-plugins' (`scheduling.x-k8s.io`); Koordinator's
`scheduling.sigs.k8s.io` CRD has none. Were both to claim them, kubectl would take the group that
sorts first, and `kubectl get pg` would list Koordinator's PodGroups and never scheduler-plugins'.

kubectl resolves a bare name from discovery the way client-go does: a short name goes to the first
resource, in discovery order, that claims it (its shortcut expander), and a plural or singular to the
first group, in discovery order, that serves it (its priority REST mapper). The tests read
discovery (aggregated, as kubectl 1.33 reads it, and the older per-group lists) and resolve names by
that rule; where a kubectl binary is at hand they ask it too.

A cluster that serves the Workload API (Kubernetes v1.37's `scheduling.k8s.io/v1beta1`, with the
GenericWorkload gate; the test control plane does) has a third `podgroups`, built in. kube-apiserver
lists its own groups before any custom resource's, so there a bare `podgroups` means the built-in
one; the custom resources' order among themselves is the same.

Koordinator's scheduling.sigs.k8s.io CRD serves no status subresource (its status is a field of the
object, and `/status` answers 404); on a control plane of its own with a CRD of that shape, the
PodGroup operator still writes the status.

Expected names: kubernetes-sigs/scheduler-plugins manifests/coscheduling/crd.yaml (from
apis/scheduling/v1alpha1/types.go, `+kubebuilder:resource:shortName={pg,pgs}`); Koordinator's
config/crd/bases/scheduling.sigs.k8s.io_podgroups.yaml and koordinator-sh/charts
versions/v1.8.0/templates/crd/scheduling.sigs.k8s.io_podgroups.yaml (no shortNames).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client, config

from operators import run_operators
from tests.support.controlplane import CRD_DIR, ControlPlane, ControlPlaneError, bin_dir
from tests.support.polling import eventually

SIGS = "scheduling.sigs.k8s.io"
X_K8S = "scheduling.x-k8s.io"
# the Workload API's PodGroup (built in), where it is served
BUILT_IN = "scheduling.k8s.io"
VERSION = "v1alpha1"

# CRD name -> the short names its reference project publishes
REFERENCE_SHORT_NAMES = {
    f"podgroups.{X_K8S}": ["pg", "pgs"],
    f"podgroups.{SIGS}": [],
}

# scheduler-plugins' printer columns of its PodGroup: (name, type, jsonPath)
X_K8S_PRINTER_COLUMNS = [
    ("Phase", "string", ".status.phase"),
    ("MinMember", "integer", ".spec.minMember"),
    ("Running", "integer", ".status.running"),
    ("Succeeded", "integer", ".status.succeeded"),
    ("Failed", "integer", ".status.failed"),
    ("Age", "date", ".metadata.creationTimestamp"),
]

# scheduler-plugins' PodGroupStatus: field -> (type, format)
X_K8S_STATUS_FIELDS = {
    "phase": ("string", None),
    "occupiedBy": ("string", None),
    "running": ("integer", "int32"),
    "succeeded": ("integer", "int32"),
    "failed": ("integer", "int32"),
    "scheduleStartTime": ("string", "date-time"),
}

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_COLUMNS = ["NAME", "PHASE", "MINMEMBER", "RUNNING", "SUCCEEDED", "FAILED", "AGE"]


def _crds() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found[doc["metadata"]["name"]] = doc
    return found


# ---------------------------------------------------------------------------------------------- the files
@pytest.mark.parametrize(
    ("crd", "short_names"), REFERENCE_SHORT_NAMES.items(), ids=REFERENCE_SHORT_NAMES.keys()
)
def test_each_podgroup_crd_has_the_short_names_of_its_reference(crd: str, short_names: list[str]) -> None:
    names = _crds()[crd]["spec"]["names"]
    assert (names["plural"], names["singular"], names["kind"]) == ("podgroups", "podgroup", "PodGroup")
    assert names.get("shortNames", []) == short_names


def test_no_short_name_is_claimed_twice() -> None:
    claimed = [short for crd in _crds().values() for short in crd["spec"]["names"].get("shortNames", [])]
    assert len(claimed) == len(set(claimed)), claimed


def test_x_k8s_podgroup_prints_and_stores_what_scheduler_plugins_does() -> None:
    (version,) = _crds()[f"podgroups.{X_K8S}"]["spec"]["versions"]
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == X_K8S_PRINTER_COLUMNS
    assert version["subresources"] == {"status": {}}
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    for field, (kind, fmt) in X_K8S_STATUS_FIELDS.items():
        assert (status[field]["type"], status[field].get("format")) == (kind, fmt), field


# ---------------------------------------------------------------------------------------------- discovery
@dataclass(frozen=True)
class Served:
    group: str
    version: str
    plural: str
    singular: str
    short_names: tuple[str, ...]


async def _get(kube_api: client.ApiClient, path: str, accept: str = "application/json") -> Any:
    response = await kube_api.call_api(
        path,
        "GET",
        header_params={"Accept": accept},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    try:
        assert response.status == 200, await response.text()
        return json.loads(await response.read())
    finally:
        response.release()


async def aggregated_discovery(kube_api: client.ApiClient) -> list[Served]:
    """Every resource of /apis in discovery order (groups as listed, each group's preferred version
    first), from the aggregated discovery document."""
    document = await _get(kube_api, "/apis", AGGREGATED)
    assert document["kind"] == "APIGroupDiscoveryList"
    served = []
    for group in document["items"]:
        for version in group["versions"]:
            for resource in version.get("resources") or []:
                served.append(
                    Served(
                        group["metadata"]["name"],
                        version["version"],
                        resource["resource"],
                        resource.get("singularResource", ""),
                        tuple(resource.get("shortNames") or ()),
                    )
                )
    return served


async def legacy_discovery(kube_api: client.ApiClient) -> list[Served]:
    """The same from /apis and each group's preferred version, as clients before aggregated
    discovery read it."""
    served = []
    for group in (await _get(kube_api, "/apis"))["groups"]:
        version = group["preferredVersion"]["version"]
        listing = await _get(kube_api, f"/apis/{group['name']}/{version}")
        for resource in listing["resources"]:
            if "/" in resource["name"]:
                continue  # a subresource
            served.append(
                Served(
                    group["name"],
                    version,
                    resource["name"],
                    resource.get("singularName", ""),
                    tuple(resource.get("shortNames") or ()),
                )
            )
    return served


def resolve(served: list[Served], name: str) -> Served:
    """The resource kubectl takes a bare name to mean (client-go's rule, see the module doc)."""
    for resource in served:
        if name in resource.short_names:
            return resource
    for resource in served:
        if name in (resource.plural, resource.singular):
            return resource
    raise LookupError(name)


@pytest.mark.parametrize("short_name", ["pg", "pgs"])
async def test_pg_and_pgs_belong_to_scheduler_plugins_podgroup_alone(
    kube_api: client.ApiClient, short_name: str
) -> None:
    for served in (await aggregated_discovery(kube_api), await legacy_discovery(kube_api)):
        claimants = [(r.group, r.plural) for r in served if short_name in r.short_names]
        assert claimants == [(X_K8S, "podgroups")]
        assert resolve(served, short_name).group == X_K8S


@pytest.mark.parametrize(
    ("crd", "short_names"), REFERENCE_SHORT_NAMES.items(), ids=REFERENCE_SHORT_NAMES.keys()
)
async def test_discovery_lists_the_reference_short_names(
    kube_api: client.ApiClient, crd: str, short_names: list[str]
) -> None:
    plural, group = crd.split(".", 1)
    (resource,) = [r for r in await aggregated_discovery(kube_api) if (r.group, r.plural) == (group, plural)]
    assert list(resource.short_names) == short_names


async def test_a_bare_podgroups_means_the_group_that_sorts_first(kube_api: client.ApiClient) -> None:
    """Custom resource groups of equal priority are listed by name, so `scheduling.sigs.k8s.io`
    comes before `scheduling.x-k8s.io`: `kubectl get podgroups` lists Koordinator's PodGroups, and
    scheduler-plugins' need their group named (`podgroups.scheduling.x-k8s.io`) or a short name.
    Where the Workload API is served, its built-in PodGroup comes before both, and is the one a bare
    name means."""
    aggregated, legacy = await aggregated_discovery(kube_api), await legacy_discovery(kube_api)
    for served in (aggregated, legacy):
        groups = [r.group for r in served if r.plural == "podgroups"]
        built_in = [BUILT_IN] if BUILT_IN in groups else []
        assert groups == [*built_in, SIGS, X_K8S]
        first = (built_in or [SIGS])[0]
        assert resolve(served, "podgroups").group == first
        assert resolve(served, "podgroup").group == first
    groups = list(dict.fromkeys(r.group for r in aggregated))
    assert groups == list(dict.fromkeys(r.group for r in legacy))


def _podgroup(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{X_K8S}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 1},
    }


async def _names_at(kube_api: client.ApiClient, resource: Served, namespace: str) -> list[str]:
    listed = await client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        resource.group, resource.version, namespace, resource.plural
    )
    return [item["metadata"]["name"] for item in listed["items"]]


async def test_a_scheduler_plugins_podgroup_is_found_by_pg_and_pgs(
    kube_api: client.ApiClient, namespace: str
) -> None:
    name = f"pg-{uuid.uuid4().hex[:8]}"
    await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        X_K8S, VERSION, namespace, "podgroups", _podgroup(name)
    )
    served = await aggregated_discovery(kube_api)
    for short_name in ("pg", "pgs"):
        assert await _names_at(kube_api, resolve(served, short_name), namespace) == [name], short_name
    assert await _names_at(kube_api, resolve(served, "podgroups"), namespace) == []


# ---------------------------------------------------------------------------------------------- kubectl
def _find_kubectl() -> str | None:
    for candidate in (bin_dir() / "kubectl", Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("kubectl")


@pytest.fixture
def kubectl(control_plane: ControlPlane, tmp_path: Path) -> Any:
    found = _find_kubectl()
    if found is None:
        pytest.skip("no kubectl on this machine; discovery alone is checked")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        # a discovery cache of its own: one left from other CRDs would answer for these
        command = [found, "--kubeconfig", str(control_plane.kubeconfig), "--cache-dir", str(tmp_path), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, f"{' '.join(args)}: {result.stderr}"
        return result

    return run


async def test_kubectl_finds_scheduler_plugins_podgroups(
    kube_api: client.ApiClient, namespace: str, kubectl: Any
) -> None:
    name = f"pg-{uuid.uuid4().hex[:8]}"
    await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        X_K8S, VERSION, namespace, "podgroups", _podgroup(name)
    )
    wanted = f"podgroup.{X_K8S}/{name}"
    for resource in ("pg", "pgs", f"podgroups.{X_K8S}", f"podgroups.{SIGS},podgroups.{X_K8S}"):
        result = kubectl("get", resource, "-n", namespace, "-o", "name")
        assert result.stdout.split() == [wanted], resource
        # two groups claiming a short name makes kubectl warn of the one it passed over
        assert "could also match" not in result.stderr, resource
    assert kubectl("get", "podgroups", "-n", namespace, "-o", "name").stdout.split() == []
    table = kubectl("get", "pg", "-n", namespace).stdout.splitlines()
    assert table[0].split() == KUBECTL_COLUMNS
    assert table[1].split()[0] == name


# --------------------------------------------------------------------------------------- beside Koordinator
@pytest.fixture(scope="module")
def koordinator_crd_control_plane(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A control plane of its own (the shared one's binaries, no KWOK) whose scheduling.sigs.k8s.io
    PodGroup CRD has the shape of Koordinator's: no status subresource, no printer columns."""
    crds = tmp_path_factory.mktemp("koordinator-crds")
    for path in CRD_DIR.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] == f"podgroups.{SIGS}":
            for version in crd["spec"]["versions"]:
                version.pop("subresources", None)
                version.pop("additionalPrinterColumns", None)
        (crds / path.name).write_text(yaml.safe_dump(crd))
    plane = ControlPlane(kwok=False, controllers=False)
    try:
        plane.start()
        plane.apply_crds(sorted(crds.glob("*.yaml")))
    except ControlPlaneError as exc:
        plane.stop()
        pytest.fail(f"starting the control plane failed: {exc}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


async def test_podgroup_status_is_written_beside_koordinators_crd(
    koordinator_crd_control_plane: ControlPlane,
) -> None:
    plane = koordinator_crd_control_plane
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_operators(str(plane.kubeconfig), stop, ready), name="operators")
    try:
        await asyncio.wait_for(ready.wait(), 30)
        async with client.ApiClient(configuration=configuration) as api:
            core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
            namespace, name = "beside-koordinator", "gang"
            await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
            body = {
                "apiVersion": f"{SIGS}/{VERSION}",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": 1},
            }
            await custom.create_namespaced_custom_object(SIGS, VERSION, namespace, "podgroups", body)

            async def status(*phases: str) -> dict[str, Any] | None:
                obj = await custom.get_namespaced_custom_object(SIGS, VERSION, namespace, "podgroups", name)
                current = dict(obj.get("status") or {})
                return current if current.get("phase") in phases else None

            await eventually(lambda: status("Pending"), what="the PodGroup to be Pending")
            member = client.V1Pod(
                metadata=client.V1ObjectMeta(
                    name=f"{name}-0",
                    labels={"pod-group.scheduling.sigs.k8s.io": name},
                    owner_references=[
                        client.V1OwnerReference(
                            api_version="kubeflow.org/v1",
                            kind="PyTorchJob",
                            name="train",
                            uid=str(uuid.uuid4()),
                        )
                    ],
                ),
                spec=client.V1PodSpec(
                    scheduler_name="e2e-nobody",
                    containers=[client.V1Container(name="main", image="registry.k8s.io/pause:3.10")],
                ),
            )
            await core.create_namespaced_pod(namespace, member)
            waiting = await eventually(
                lambda: status("Scheduling"), what="the PodGroup to wait for placement"
            )
            assert waiting["occupiedBy"] == f"{namespace}/train"
            assert waiting["scheduleStartTime"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
