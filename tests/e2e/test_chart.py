"""The Helm chart, charts/koordpy.

It lints; it renders a Deployment, RBAC, the scheduler configuration, a metrics Service, an optional
ServiceMonitor, the CRDs and the FlowSchemas that give koordpy's requests kube-scheduler's priority
levels; the test apiserver accepts every rendered object in a server-side dry run. Installed for real
with `helm install`, its ServiceAccount's ClusterRole and Role are enough for `koordpy run` to do all
of its work (bind, mark unschedulable, preempt, place a gang, keep quotas' status, hold the Lease)
without one request being forbidden, and the apiserver classifies its requests with the chart's
FlowSchemas.

helm comes from hack/controlplane/build.sh (into the cache's bin/), or from PATH. Without it these
tests are skipped, loudly, or fail under CI=true.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.dynamic import DynamicClient

from koordpy.config.models import parse_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from tests.support.ci import in_ci, shout
from tests.support.controlplane import (
    BUILD_SCRIPT,
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_ANNOTATION_VALUE,
    REPO_ROOT,
    ControlPlane,
    ControlPlaneError,
    bin_dir,
    build_binaries,
    free_port,
)
from tests.support.polling import eventually as poll

CHART = REPO_ROOT / "charts" / "koordpy"
CHART_CRDS = CHART / "files" / "crds"
REPO_CRDS = REPO_ROOT / "crds"
NAMESPACE = "koordpy-system"
RELEASE = "koordpy"
FIELD_MANAGER = "koordpy-chart-test"

# what `helm template` must render by default, and nothing else
DEFAULT_KINDS = Counter(
    {
        "ServiceAccount": 1,
        "ConfigMap": 1,
        "CustomResourceDefinition": 5,
        # koordpy's own, <release>-metrics-reader for scrapers, <release>-dry-run for dry runs
        "ClusterRole": 3,
        "ClusterRoleBinding": 1,
        "Role": 1,
        "RoleBinding": 1,
        "Service": 1,
        "Deployment": 1,
        # API Priority and Fairness: koordpy's requests, and its Lease requests
        "FlowSchema": 2,
    }
)
CLUSTER_SCOPED = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "FlowSchema"}


# ---------------------------------------------------------------------------------------------- helm
def _find_helm() -> str | None:
    built = bin_dir() / "helm"
    if os.access(built, os.X_OK):
        return str(built)
    return shutil.which("helm")


@pytest.fixture(scope="session")
def helm(request: pytest.FixtureRequest) -> str:
    found = _find_helm()
    if found is None and shutil.which("go") is not None:
        shout(request.config, f"Building helm with {BUILD_SCRIPT} (a few minutes on a cold cache) ...")
        capture = request.config.pluginmanager.getplugin("capturemanager")
        try:
            if capture is not None:
                with capture.global_and_fixture_disabled():
                    build_binaries()
            else:
                build_binaries()
        except ControlPlaneError as exc:
            pytest.fail(f"building helm failed: {exc}", pytrace=False)
        found = _find_helm()
    if found is None:
        reason = (
            f"!!! HELM UNAVAILABLE: no helm in {bin_dir()} or on PATH, and no 'go' to build it with "
            f"{BUILD_SCRIPT}. The chart is not tested."
        )
        shout(request.config, reason)
        if in_ci():
            pytest.fail(reason + " (CI=true: failing instead of skipping)", pytrace=False)
        pytest.skip(reason)
    return found


def run_helm(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([helm, *args], capture_output=True, text=True, check=False, cwd=REPO_ROOT)
    if check and result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}{result.stdout}")
    return result


def template_args(*sets: str, namespace: str = NAMESPACE, release: str = RELEASE) -> list[str]:
    args = [release, str(CHART), "--namespace", namespace, "--include-crds"]
    for s in sets:
        args += ["--set-json", s] if s.startswith("{") or "=[" in s or "={" in s else ["--set", s]
    return args


def render(helm: str, *sets: str, namespace: str = NAMESPACE, kube_version: str | None = None) -> list[dict]:
    """The documents `helm template` renders, with `--set key=value` (or `--set-json` for JSON values)."""
    extra = ["--kube-version", kube_version] if kube_version else []
    out = run_helm(helm, "template", *template_args(*sets, namespace=namespace), *extra).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def only(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"want one {kind}, got {len(found)}"
    return found[0]


def scheduler_config(docs: list[dict]) -> dict:
    return yaml.safe_load(only(docs, "ConfigMap")["data"]["config.yaml"])


# ------------------------------------------------------------------------------------------ lint and render
def test_chart_lints(helm: str) -> None:
    run_helm(helm, "lint", "--strict", str(CHART))
    run_helm(helm, "lint", "--strict", str(CHART), "--set", "metrics.serviceMonitor.enabled=true")


def test_chart_metadata_follows_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert version is not None
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "koordpy"
    assert chart["appVersion"] == version.group(1), "appVersion is the koordpy release the image holds"


def test_default_render_holds_the_scheduler_and_nothing_more(helm: str) -> None:
    docs = render(helm)
    assert Counter(d["kind"] for d in docs) == DEFAULT_KINDS
    for doc in docs:
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in doc["metadata"], f"{doc['kind']} is cluster-scoped"
        else:
            assert doc["metadata"]["namespace"] == NAMESPACE, f"{doc['kind']} outside the release namespace"


def test_deployment_runs_two_leader_elected_replicas_locked_down(helm: str) -> None:
    docs = render(helm)
    deployment = only(docs, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert container["image"] == "koordpy:0.1.0"
    args = container["args"]
    assert args == [
        "--config=/etc/koordpy/config.yaml",
        "--leader-elect",
        "--leader-elect-resource-name=koordpy",
        f"--leader-elect-resource-namespace={NAMESPACE}",
        "--secure-port=10259",
        "--v=0",
        "--logging-format=text",
    ]
    # the flags parse as `koordpy run` reads them, kube-scheduler's names, none of them deprecated
    from koordpy.cli import build_parser
    from koordpy.cluster.flags import deprecation_warnings

    parsed = build_parser().parse_args(["run", *args])
    assert (
        parsed.config,
        parsed.leader_elect,
        parsed.leader_elect_resource_name,
        parsed.leader_elect_resource_namespace,
        parsed.secure_port,
        parsed.v,
        parsed.logging_format,
    ) == ("/etc/koordpy/config.yaml", True, "koordpy", NAMESPACE, 10259, 0, "text")
    assert deprecation_warnings(parsed) == []

    # kube-scheduler's secure port; the probes need no token there, and the kubelet does not
    # verify the certificate of an HTTPS probe
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("https-metrics", 10259)
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https-metrics", "scheme": "HTTPS"}

    pod_security = pod["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert pod_security["runAsUser"] == 65532
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == only(docs, "ServiceAccount")["metadata"]["name"]

    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["config"]["mountPath"] == "/etc/koordpy"
    assert volumes["config"]["configMap"]["name"] == only(docs, "ConfigMap")["metadata"]["name"]


def test_optional_pod_settings(helm: str) -> None:
    docs = render(
        helm,
        "priorityClassName=",
        'nodeSelector={"node-role.kubernetes.io/control-plane": ""}',
        'tolerations=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]',
        "replicas=3",
        "image.tag=dev",
        "verbosity=2",
        "loggingFormat=json",
    )
    deployment = only(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert "priorityClassName" not in pod
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"
    assert deployment["spec"]["replicas"] == 3
    assert pod["containers"][0]["image"] == "koordpy:dev"
    assert {"--v=2", "--logging-format=json"} <= set(pod["containers"][0]["args"])
    # a values file of the earlier chart still works: its logLevel becomes the deprecated flag
    earlier = only(render(helm, "logLevel=debug"), "Deployment")["spec"]["template"]["spec"]
    args = earlier["containers"][0]["args"]
    assert "--log-level=debug" in args and not any(a.startswith("--v=") for a in args)


def test_the_configmap_holds_a_configuration_koordpy_accepts(helm: str) -> None:
    docs = render(helm)
    raw = scheduler_config(docs)
    assert raw["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert raw["kind"] == "KubeSchedulerConfiguration"
    assert raw["leaderElection"]["resourceName"] == "koordpy"
    assert raw["leaderElection"]["resourceNamespace"] == NAMESPACE
    config = parse_configuration(raw, "chart ConfigMap")
    assert [p.schedulerName for p in config.profiles] == ["koord-scheduler"]
    assert config.leaderElection.leaderElect is True
    Scheduler(config, registry(), VirtualClock())


def test_plugin_config_passes_through_unchanged(helm: str) -> None:
    profile = {
        "schedulerName": "koord-scheduler",
        "plugins": {"score": {"enabled": [{"name": "ScarceResourceAvoidance", "weight": 3}]}},
        "pluginConfig": [
            {"name": "Coscheduling", "args": {"defaultTimeout": "600s"}},
            {
                "name": "ScarceResourceAvoidance",
                "args": {"resources": ["nvidia.com/gpu", "example.com/fpga"]},
            },
        ],
    }
    docs = render(
        helm, "schedulerConfig.profiles=" + json.dumps([profile]), "schedulerConfig.podMaxBackoffSeconds=20"
    )
    raw = scheduler_config(docs)
    assert raw["profiles"] == [profile]
    assert raw["podMaxBackoffSeconds"] == 20
    Scheduler(parse_configuration(raw, "chart ConfigMap"), registry(), VirtualClock())


def test_a_configuration_change_rolls_the_pods(helm: str) -> None:
    def checksum(*sets: str) -> str:
        annotations = only(render(helm, *sets), "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/config"])

    assert checksum() == checksum()
    assert checksum() != checksum("schedulerConfig.podMaxBackoffSeconds=20")


def test_more_than_one_replica_needs_leader_election(helm: str) -> None:
    refused = run_helm(helm, "template", *template_args("leaderElection.enabled=false"), check=False)
    assert refused.returncode != 0
    assert "leaderElection.enabled" in refused.stderr

    docs = render(helm, "leaderElection.enabled=false", "replicas=1")
    args = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-elect=false" in args
    assert not any(a.startswith(("--lease", "--leader-elect-")) for a in args)
    assert scheduler_config(docs)["leaderElection"]["leaderElect"] is False
    assert "Role" not in {d["kind"] for d in docs}, "no Lease, no Role for it"


def test_values_are_checked_against_the_schema(helm: str) -> None:
    typo = run_helm(helm, "template", *template_args("replica=3"), check=False)
    assert typo.returncode != 0
    assert "replica" in typo.stderr


def test_service_exposes_the_metrics_port_of_the_pods(helm: str) -> None:
    docs = render(helm)
    service = only(docs, "Service")
    pod_template = only(docs, "Deployment")["spec"]["template"]
    (port,) = service["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("https-metrics", 10259, "https-metrics")
    assert service["spec"]["selector"].items() <= pod_template["metadata"]["labels"].items()


def test_a_plain_http_port_only_when_asked_for(helm: str) -> None:
    docs = render(helm, "metrics.insecurePort=10251")
    (container,) = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--insecure-port=10251" in container["args"]
    assert {(p["name"], p["containerPort"]) for p in container["ports"]} == {
        ("https-metrics", 10259),
        ("http-metrics", 10251),
    }
    ports = {(p["name"], p["port"], p["targetPort"]) for p in only(docs, "Service")["spec"]["ports"]}
    assert ports == {("https-metrics", 10259, "https-metrics"), ("http-metrics", 10251, "http-metrics")}
    from koordpy.cli import build_parser

    assert build_parser().parse_args(["run", *container["args"]]).insecure_port == 10251
    assert not any(
        a.startswith("--insecure-port")
        for a in only(render(helm), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_service_monitor_only_when_enabled(helm: str) -> None:
    assert "ServiceMonitor" not in {d["kind"] for d in render(helm)}
    # the test apiserver has no monitoring.coreos.com CRD: the ServiceMonitor is checked here only
    docs = render(
        helm,
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.interval=15s",
        "metrics.serviceMonitor.labels.release=prometheus",
    )
    monitor = only(docs, "ServiceMonitor")
    service = only(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] == "https-metrics"
    assert (endpoint["path"], endpoint["interval"]) == ("/metrics", "15s")
    # as kube-prometheus scrapes kube-scheduler: HTTPS, Prometheus's own token, the self-signed
    # certificate not verified
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}


# ---------------------------------------------------------------------------------------------- CRDs
def test_chart_crds_are_the_repository_crds() -> None:
    """One source of truth: files/crds is a link to crds/ (or, where links are not kept, the same
    bytes)."""
    repo = sorted(p.name for p in REPO_CRDS.glob("*.yaml"))
    chart = sorted(p.name for p in CHART_CRDS.glob("*.yaml"))
    assert repo, "no CRDs in crds/"
    assert chart == repo
    if CHART_CRDS.is_symlink():
        assert CHART_CRDS.resolve() == REPO_CRDS.resolve()
    _, mismatch, errors = filecmp.cmpfiles(REPO_CRDS, CHART_CRDS, repo, shallow=False)
    assert not mismatch and not errors, f"charts/koordpy/files/crds differs from crds/: {mismatch + errors}"


def test_rendered_crds_are_the_repository_crds_kept_on_uninstall(helm: str) -> None:
    expected = {}
    for path in REPO_CRDS.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                expected[doc["metadata"]["name"]] = doc
    rendered = {d["metadata"]["name"]: d for d in render(helm) if d["kind"] == "CustomResourceDefinition"}
    assert rendered.keys() == expected.keys()
    for name, crd in rendered.items():
        assert crd["spec"] == expected[name]["spec"], name
        annotations = crd["metadata"]["annotations"]
        assert annotations.pop("helm.sh/resource-policy") == "keep"
        assert annotations == (expected[name]["metadata"].get("annotations") or {}), name

    unkept = render(helm, "crds.keep=false")
    for crd in (d for d in unkept if d["kind"] == "CustomResourceDefinition"):
        assert "helm.sh/resource-policy" not in (crd["metadata"].get("annotations") or {})
    assert "CustomResourceDefinition" not in {d["kind"] for d in render(helm, "crds.install=false")}


# each CRD's own switch under crds (values.yaml)
CRD_SWITCHES = {
    "crds.podGroupsSigs": "podgroups.scheduling.sigs.k8s.io",
    "crds.podGroupsXK8s": "podgroups.scheduling.x-k8s.io",
    "crds.clusterNetworkTopologies": "clusternetworktopologies.scheduling.koordinator.sh",
    "crds.elasticQuotasSigs": "elasticquotas.scheduling.sigs.k8s.io",
    "crds.elasticQuotasXK8s": "elasticquotas.scheduling.x-k8s.io",
}


def rendered_crds(helm: str, *sets: str) -> set[str]:
    return {d["metadata"]["name"] for d in render(helm, *sets) if d["kind"] == "CustomResourceDefinition"}


def test_every_crd_has_a_switch_of_its_own() -> None:
    repo = {
        doc["metadata"]["name"]
        for p in REPO_CRDS.glob("*.yaml")
        for doc in yaml.safe_load_all(p.read_text())
        if doc
    }
    assert set(CRD_SWITCHES.values()) == repo
    values = yaml.safe_load((CHART / "values.yaml").read_text())["crds"]
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["crds"]["properties"]
    for switch in CRD_SWITCHES:
        key = switch.removeprefix("crds.")
        assert values[key] is True, f"{switch} is on by default"
        assert schema[key] == {"type": "boolean"}, switch


@pytest.mark.parametrize(("switch", "crd"), CRD_SWITCHES.items(), ids=CRD_SWITCHES.keys())
def test_each_switch_leaves_out_its_own_crd_alone(helm: str, switch: str, crd: str) -> None:
    assert rendered_crds(helm, f"{switch}=false") == set(CRD_SWITCHES.values()) - {crd}
    only_this = [f"{other}=false" for other in CRD_SWITCHES if other != switch]
    assert rendered_crds(helm, *only_this) == {crd}
    # crds.install stays the switch of them all, as in values files written before the others
    assert rendered_crds(helm, "crds.install=false", f"{switch}=true") == set()


def test_a_crd_file_without_a_switch_stops_the_render(helm: str, tmp_path: Path) -> None:
    chart = tmp_path / "koordpy"
    shutil.copytree(CHART, chart)  # the link to crds/ becomes a copy that can be added to
    extra = yaml.safe_load((REPO_CRDS / "scheduling.x-k8s.io_podgroups.yaml").read_text())
    extra["metadata"]["name"] = "podgroups.example.com"
    (chart / "files" / "crds" / "example.com_podgroups.yaml").write_text(yaml.safe_dump(extra))
    result = run_helm(helm, "template", RELEASE, str(chart), check=False)
    assert result.returncode != 0
    assert "podgroups.example.com has no switch" in result.stderr


def test_packaged_chart_carries_the_crds_as_files(helm: str, tmp_path: Path) -> None:
    run_helm(helm, "package", str(CHART), "--destination", str(tmp_path))
    (archive,) = tmp_path.glob("koordpy-*.tgz")
    with tarfile.open(archive) as tar:
        for path in REPO_CRDS.glob("*.yaml"):
            member = tar.getmember(f"koordpy/files/crds/{path.name}")
            assert member.isfile(), f"{member.name} is packaged as a link"
            extracted = tar.extractfile(member)
            assert extracted is not None
            assert extracted.read() == path.read_bytes()


# ---------------------------------------------------------------------------------------------- RBAC
def _rules_with_reasons(template: Path) -> list[tuple[dict, str]]:
    """Each rule of an RBAC template with the comment lines right above it."""
    rules: list[tuple[dict, str]] = []
    comment: list[str] = []
    lines = template.read_text().splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
        elif stripped.startswith(("- apiGroups:", "- nonResourceURLs:")):
            block = [lines[i]]
            indent = len(lines[i]) - len(lines[i].lstrip())
            while i + 1 < len(lines) and (
                len(lines[i + 1]) - len(lines[i + 1].lstrip()) > indent
                and not lines[i + 1].strip().startswith("#")
            ):
                i += 1
                block.append(lines[i])
            text = "\n".join(block)
            text = re.sub(r"\{\{[^}]*\}\}", "name", text)
            rules.append((yaml.safe_load(text)[0], " ".join(comment)))
            comment = []
        elif stripped:
            comment = []
        i += 1
    return rules


@pytest.mark.parametrize("template", ["clusterrole.yaml", "role.yaml"])
def test_every_verb_is_justified(template: str) -> None:
    """Each verb of each rule is named, before a colon, in the comment right above the rule."""
    rules = _rules_with_reasons(CHART / "templates" / template)
    assert rules
    for rule, reason in rules:
        justified = set()
        for head in re.findall(r"(?:^|\s)((?:[a-z]+, )*[a-z]+):", reason):
            justified.update(head.split(", "))
        what = rule.get("resources", rule.get("nonResourceURLs"))
        missing = set(rule["verbs"]) - justified
        assert not missing, f"{template}: {what}: no reason given for {sorted(missing)}"
        assert "*" not in rule["verbs"] and "*" not in what and "*" not in rule.get("apiGroups", [])


def _cluster_role(docs: list[dict], suffix: str = "") -> dict:
    (role,) = [
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{RELEASE}{suffix}"
    ]
    return role


def test_rbac_grants_no_secrets_no_writes_to_nodes_and_no_escalation(helm: str) -> None:
    docs = render(helm)
    rules = _cluster_role(docs)["rules"] + only(docs, "Role")["rules"]
    for rule in rules:
        resources = set(rule["resources"])
        verbs = set(rule["verbs"])
        assert not resources & {"secrets", "configmaps", "serviceaccounts", "serviceaccounts/token"}, rule
        assert not (resources & {"nodes", "nodes/status"} and verbs - {"list", "watch", "get"}), rule
        assert not verbs & {"escalate", "bind", "impersonate", "*"}, rule
        assert rule["apiGroups"] != ["rbac.authorization.k8s.io"], rule
    (lease_named,) = [r for r in only(docs, "Role")["rules"] if "resourceNames" in r]
    assert lease_named["resourceNames"] == ["koordpy"]


SIGS, X_K8S = "scheduling.sigs.k8s.io", "scheduling.x-k8s.io"
# the status writes of the PodGroup and ElasticQuota operators, through the status subresource
STATUS_PATCHES = {(g, f"{r}/status", "patch") for g in (SIGS, X_K8S) for r in ("podgroups", "elasticquotas")}
# Koordinator's quota annotations (runtime, request, ...) live on the object whatever its CRD serves
QUOTA_OBJECT_PATCH = {(SIGS, "elasticquotas", "patch")}
# a gang's status through the object, where its CRD (Koordinator's) serves no status subresource
PODGROUP_OBJECT_PATCH = {(SIGS, "podgroups", "patch")}
READS = {"list", "watch", "get"}


def _writes_on_gangs_and_quotas(docs: list[dict]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every write the ClusterRole grants on PodGroups and ElasticQuotas."""
    return {
        (group, resource, verb)
        for rule in _cluster_role(docs)["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
        if group in (SIGS, X_K8S) and verb not in READS
    }


@pytest.mark.parametrize(
    ("sets", "writes"),
    [
        pytest.param((), STATUS_PATCHES | QUOTA_OBJECT_PATCH, id="default"),
        pytest.param(
            ("rbac.statusWithoutSubresource=false",),
            STATUS_PATCHES | QUOTA_OBJECT_PATCH,
            id="status-subresource",
        ),
        pytest.param(
            ("rbac.statusWithoutSubresource=true",),
            STATUS_PATCHES | QUOTA_OBJECT_PATCH | PODGROUP_OBJECT_PATCH,
            id="status-without-subresource",
        ),
    ],
)
def test_whole_podgroups_are_patched_only_where_their_crd_has_no_status_subresource(
    helm: str, sets: tuple[str, ...], writes: set[tuple[str, str, str]]
) -> None:
    """A patch of a whole PodGroup could rewrite a gang's minMember: it is granted only when
    rbac.statusWithoutSubresource says the cluster's CRD needs it; otherwise the status
    subresource alone is writable. Nothing ever updates them, and scheduling.x-k8s.io objects are
    never written beyond their status."""
    assert _writes_on_gangs_and_quotas(render(helm, *sets)) == writes


def _crds_by_resource() -> dict[tuple[str, str], dict]:
    found = {}
    for path in REPO_CRDS.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found[(doc["spec"]["group"], doc["spec"]["names"]["plural"])] = doc
    return found


def test_the_default_grant_fits_the_crds_the_chart_installs(helm: str) -> None:
    """With the chart's own CRDs, koordpy writes a PodGroup's or ElasticQuota's status through the
    status subresource where the CRD serves one, and through the object where it does not: the
    defaults grant exactly that (plus the object patch of Koordinator's quota annotations)."""
    needed = set(QUOTA_OBJECT_PATCH)
    for (group, plural), crd in _crds_by_resource().items():
        if plural not in ("podgroups", "elasticquotas"):
            continue
        (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
        has_status = "status" in (version.get("subresources") or {})
        needed.add((group, f"{plural}/status" if has_status else plural, "patch"))
    granted = _writes_on_gangs_and_quotas(render(helm))
    assert needed <= granted, f"missing by default: {sorted(needed - granted)}"
    # the chart's scheduling.sigs.k8s.io PodGroup CRD serves the status subresource, so no whole
    # PodGroup is writable by default; its ElasticQuota CRD (Koordinator's shape) serves none
    assert PODGROUP_OBJECT_PATCH.isdisjoint(granted)
    assert (SIGS, "elasticquotas", "patch") in needed


def test_rbac_for_the_secure_port(helm: str) -> None:
    """koordpy may ask the apiserver who a token is and what that user may get (as kube-scheduler's
    system:kube-scheduler role may); scrapers get a role that grants get on /metrics, bound to the
    subjects the values name."""
    docs = render(helm)
    rules = _cluster_role(docs)["rules"]
    assert {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["tokenreviews"],
        "verbs": ["create"],
    } in rules
    assert {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    } in rules
    reader = _cluster_role(docs, "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics", "/metrics/slis"], "verbs": ["get"]}]
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in bindings] == [RELEASE], "nobody is bound to the reader unasked"

    subjects = [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
        {"kind": "ServiceAccount", "name": "scraper"},
        {"kind": "Group", "name": "scrapers"},
    ]
    docs = render(helm, "metrics.reader.subjects=" + json.dumps(subjects))
    (binding,) = [
        d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("-reader")
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": f"{RELEASE}-metrics-reader",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
        {"kind": "ServiceAccount", "name": "scraper", "namespace": NAMESPACE},
        {"kind": "Group", "name": "scrapers", "apiGroup": "rbac.authorization.k8s.io"},
    ]
    kinds = {
        d["metadata"]["name"] for d in render(helm, "metrics.reader.create=false") if "Role" in d["kind"]
    }
    assert not {n for n in kinds if n.endswith("-reader")}


# ------------------------------------------------------------------------------ API Priority and Fairness
EVERY_REQUEST = {
    "resourceRules": [
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}
    ],
    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
}


def lease_requests(namespace: str) -> dict:
    return {
        "resourceRules": [
            {
                "verbs": ["get", "create", "update"],
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "namespaces": [namespace],
            }
        ]
    }


def flow_schemas(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "FlowSchema"}


# case: (--set values, release namespace, ServiceAccount, {FlowSchema: (priority level,
# matchingPrecedence, distinguisher, rules)})
FLOW_SCHEMA_CASES: dict[str, tuple[tuple[str, ...], str, str, dict[str, tuple[str, int, str, dict]]]] = {
    "kube-schedulers-levels-by-default": (
        (),
        NAMESPACE,
        RELEASE,
        {
            RELEASE: ("workload-high", 800, "ByNamespace", EVERY_REQUEST),
            f"{RELEASE}-leader-election": ("leader-election", 100, "ByUser", lease_requests(NAMESPACE)),
        },
    ),
    "levels-and-precedences-named-by-the-values": (
        (
            "flowControl.priorityLevel=scheduler-high",
            "flowControl.matchingPrecedence=750",
            "flowControl.leaderElection.priorityLevel=scheduler-leases",
            "flowControl.leaderElection.matchingPrecedence=150",
        ),
        NAMESPACE,
        RELEASE,
        {
            RELEASE: ("scheduler-high", 750, "ByNamespace", EVERY_REQUEST),
            f"{RELEASE}-leader-election": ("scheduler-leases", 150, "ByUser", lease_requests(NAMESPACE)),
        },
    ),
    "the-release-namespace-and-service-account": (
        ("serviceAccount.create=false", "serviceAccount.name=sched"),
        "scheduling",
        "sched",
        {
            RELEASE: ("workload-high", 800, "ByNamespace", EVERY_REQUEST),
            f"{RELEASE}-leader-election": ("leader-election", 100, "ByUser", lease_requests("scheduling")),
        },
    ),
    "no-lease-schema-without-leader-election": (
        ("leaderElection.enabled=false", "replicas=1"),
        NAMESPACE,
        RELEASE,
        {RELEASE: ("workload-high", 800, "ByNamespace", EVERY_REQUEST)},
    ),
    "none-when-disabled": (("flowControl.enabled=false",), NAMESPACE, RELEASE, {}),
}


@pytest.mark.parametrize(
    ("sets", "namespace", "account", "expected"), FLOW_SCHEMA_CASES.values(), ids=FLOW_SCHEMA_CASES.keys()
)
def test_flow_schemas_put_koordpys_requests_where_kube_schedulers_go(
    helm: str,
    sets: tuple[str, ...],
    namespace: str,
    account: str,
    expected: dict[str, tuple[str, int, str, dict]],
) -> None:
    schemas = flow_schemas(render(helm, *sets, namespace=namespace))
    assert schemas.keys() == expected.keys()
    for name, (level, precedence, distinguisher, rules) in expected.items():
        schema = schemas[name]
        assert schema["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1"
        assert "namespace" not in schema["metadata"], "FlowSchemas are cluster-scoped"
        spec = schema["spec"]
        assert spec["priorityLevelConfiguration"] == {"name": level}, name
        assert spec["matchingPrecedence"] == precedence, name
        assert spec["distinguisherMethod"] == {"type": distinguisher}, name
        # koordpy's ServiceAccount alone: nobody else's requests are reclassified
        assert spec["rules"] == [
            {
                "subjects": [
                    {"kind": "ServiceAccount", "serviceAccount": {"name": account, "namespace": namespace}}
                ],
                **rules,
            }
        ], name


@pytest.mark.parametrize(
    "bad",
    [
        "flowControl.priorityLevel=Workload_High",
        "flowControl.priorityLevel=",
        "flowControl.matchingPrecedence=0",
        "flowControl.leaderElection.matchingPrecedence=10001",
        "flowControl.priorityLevels=workload-high",
    ],
)
def test_flow_control_values_are_checked_against_the_schema(helm: str, bad: str) -> None:
    refused = run_helm(helm, "template", *template_args(bad), check=False)
    assert refused.returncode != 0
    assert "flowControl" in refused.stderr


async def test_the_flow_schemas_follow_kube_schedulers_own(
    helm: str, control_plane: ControlPlane, kube_api: client.ApiClient
) -> None:
    """The apiserver's own FlowSchemas for kube-scheduler (its bootstrap configuration,
    k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap): the chart's have their priority levels,
    precedences, distinguishers and rules, for koordpy's ServiceAccount and its namespace's Lease."""
    flowcontrol = client.FlowcontrolApiserverV1Api(kube_api)

    async def bootstrap(name: str) -> dict:
        return dict(kube_api.sanitize_for_serialization(await flowcontrol.read_flow_schema(name))["spec"])

    scheduler, leader_election = await bootstrap("kube-scheduler"), await bootstrap("system-leader-election")
    ours = flow_schemas(render(helm))
    for theirs, mine in (
        (scheduler, ours[RELEASE]["spec"]),
        (leader_election, ours[f"{RELEASE}-leader-election"]["spec"]),
    ):
        for field in ("priorityLevelConfiguration", "matchingPrecedence", "distinguisherMethod"):
            assert mine[field] == theirs[field], field
    (rule,) = scheduler["rules"]
    assert {k: v for k, v in rule.items() if k != "subjects"} == EVERY_REQUEST
    (rule,) = leader_election["rules"]
    (leases,) = [r for r in rule["resourceRules"] if r["resources"] == ["leases"]]
    (mine,) = ours[f"{RELEASE}-leader-election"]["spec"]["rules"][0]["resourceRules"]
    assert {k: v for k, v in leases.items() if k != "namespaces"} == {
        k: v for k, v in mine.items() if k != "namespaces"
    }
    assert leases["namespaces"] == ["*"] and mine["namespaces"] == [NAMESPACE], "narrowed to the release's"


# ---------------------------------------------------------------------------------------------- the apiserver
async def _server_version(kube_api: client.ApiClient) -> str:
    info = await client.VersionApi(kube_api).get_code()
    return str(info.git_version).lstrip("v").split("-")[0]


async def _ensure_namespace(kube_api: client.ApiClient, name: str) -> None:
    with contextlib.suppress(ApiException):
        await client.CoreV1Api(kube_api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
        )


APPLIED_CASES = {
    "default": (),
    "service-monitor": ("metrics.serviceMonitor.enabled=true",),
    # the whole-object patch of PodGroups, and FlowSchemas naming levels of the cluster's own
    # (dangling here, which the apiserver accepts and says in their status)
    "options": (
        "rbac.statusWithoutSubresource=true",
        "flowControl.priorityLevel=scheduler-high",
        "flowControl.leaderElection.priorityLevel=scheduler-leases",
    ),
}


@pytest.mark.parametrize("sets", APPLIED_CASES.values(), ids=APPLIED_CASES.keys())
async def test_the_apiserver_accepts_every_rendered_object(
    helm: str, control_plane: ControlPlane, kube_api: client.ApiClient, sets: tuple[str, ...], tmp_path: Path
) -> None:
    docs = render(helm, *sets, kube_version=await _server_version(kube_api))
    await _ensure_namespace(kube_api, NAMESPACE)
    dynamic = await DynamicClient(kube_api, cache_file=str(tmp_path / "discovery.json"))
    rejected: list[str] = []
    applied = 0
    for doc in docs:
        what = f"{doc['kind']} {doc['metadata']['name']}"
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            # no Prometheus Operator CRDs here; the rendered object was checked on its own above
            assert doc["kind"] == "ServiceMonitor"
            continue
        resource = await dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        # serialize=False hands back the HTTP response itself: the dynamic client does not raise on
        # an error status, so the status is read here
        response = await dynamic.server_side_apply(
            resource,
            body=doc,
            namespace=doc["metadata"].get("namespace"),
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
            dry_run="All",
            # an unknown field is an error, not a warning the apiserver drops it with
            query_params=[("fieldValidation", "Strict")],
            serialize=False,
        )
        async with response:
            if response.status not in (200, 201):  # 201: it would be created
                rejected.append(f"{what}: HTTP {response.status}: {await response.text()}")
            else:
                applied += 1
    assert not rejected, "the apiserver rejected:\n" + "\n".join(rejected)
    assert applied == sum(DEFAULT_KINDS.values())
    assert sum(d["kind"] == "FlowSchema" for d in docs) == DEFAULT_KINDS["FlowSchema"], "applied too"


@pytest.mark.parametrize(("switch", "crd"), CRD_SWITCHES.items(), ids=CRD_SWITCHES.keys())
async def test_install_beside_crds_someone_else_installed(
    helm: str, control_plane: ControlPlane, kube_api: client.ApiClient, switch: str, crd: str
) -> None:
    """The test apiserver has every CRD already, created outside Helm, as a cluster with Koordinator
    and scheduler-plugins has: Helm refuses a release that would take one over, and installs one
    that leaves each of them out by its own switch."""
    await _ensure_namespace(kube_api, NAMESPACE)
    release = f"crds-{uuid.uuid4().hex[:6]}"
    install = ["install", release, str(CHART), "--kubeconfig", str(control_plane.kubeconfig)]
    install += ["--namespace", NAMESPACE, "--dry-run=server"]
    others_off = [a for other in CRD_SWITCHES if other != switch for a in ("--set", f"{other}=false")]
    refused = run_helm(helm, *install, *others_off, check=False)
    assert refused.returncode != 0
    assert f'CustomResourceDefinition "{crd}"' in refused.stderr and "cannot be imported" in refused.stderr
    accepted = run_helm(helm, *install, *others_off, "--set", f"{switch}=false")
    assert "Not installed by this release" in accepted.stdout
    for name in CRD_SWITCHES.values():
        assert f"  - {name}" in accepted.stdout, "NOTES name every CRD left to others"


# ---------------------------------------------------------------------------------- the chart's RBAC at work
async def eventually(
    probe: Callable[[], Awaitable[Any]], *, timeout: float = 60.0, interval: float = 0.3, what: str = ""
) -> Any:
    return await poll(probe, timeout=timeout, interval=interval, what=what)


@contextlib.contextmanager
def koordpy_process(command: str, args: list[str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`koordpy <command> <args>` as a child process, its output in log_path."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "koordpy.cli", command, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


@pytest.fixture
async def installed(
    helm: str, control_plane: ControlPlane, kube_api: client.ApiClient
) -> AsyncIterator[dict]:
    """The chart installed with `helm install` in a namespace of its own, with a scheduler and
    Lease name of its own. Its CRDs are left out: the control plane has them already, created
    outside Helm (as a cluster with Koordinator has)."""
    suffix = uuid.uuid4().hex[:6]
    info = {
        "namespace": f"chart-rbac-{suffix}",
        "release": f"rbac-{suffix}",
        "scheduler": f"koordpy-chart-{suffix}",
        "lease": f"koordpy-chart-{suffix}",
    }
    kubeconfig = str(control_plane.kubeconfig)
    profiles = json.dumps([{"schedulerName": info["scheduler"]}])
    result = run_helm(
        helm,
        "install",
        info["release"],
        str(CHART),
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        info["namespace"],
        "--create-namespace",
        "--set",
        "crds.install=false",
        "--set",
        f"leaderElection.leaseName={info['lease']}",
        "--set-json",
        f"schedulerConfig.profiles={profiles}",
        "--set",
        "schedulerConfig.podInitialBackoffSeconds=1",
        "--set",
        "schedulerConfig.podMaxBackoffSeconds=2",
        # a scraper of the release's own, to read /metrics on the secure port with
        "--set-json",
        'metrics.reader.subjects=[{"kind": "ServiceAccount", "name": "scraper"}]',
    )
    info["notes"] = result.stdout
    try:
        yield info
    finally:
        run_helm(
            helm,
            "uninstall",
            info["release"],
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            info["namespace"],
            check=False,
        )
        # no kube-controller-manager: a deleted namespace would stay Terminating; remove its pods instead
        with contextlib.suppress(ApiException):
            await client.CoreV1Api(kube_api).delete_collection_namespaced_pod(
                info["namespace"], grace_period_seconds=0
            )


def _pod(
    name: str,
    scheduler: str,
    node_label: str,
    cpu: str,
    *,
    priority_class: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "nodeSelector": {"koordpy.e2e/chart-node": node_label},
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


async def test_the_charts_rbac_is_enough_for_koordpy(
    installed: dict, control_plane: ControlPlane, kube_api: client.ApiClient, tmp_path: Path
) -> None:
    ns, scheduler = installed["namespace"], installed["scheduler"]
    core = client.CoreV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    assert f"schedulerName: {scheduler}" in installed["notes"]

    # what the chart deployed: its configuration, its container's arguments, its ServiceAccount
    apps = client.AppsV1Api(kube_api)
    (deployment,) = (await apps.list_namespaced_deployment(ns)).items
    pod_spec = deployment.spec.template.spec
    (configmap_volume,) = [v for v in pod_spec.volumes if v.config_map is not None]
    configmap = await core.read_namespaced_config_map(configmap_volume.config_map.name, ns)
    config_path = tmp_path / "config.yaml"
    config_path.write_text(configmap.data["config.yaml"])
    token = await core.create_namespaced_service_account_token(
        pod_spec.service_account_name,
        ns,
        client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
        ),
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "chart",
                "clusters": [
                    {
                        "name": "e2e",
                        "cluster": {
                            "server": control_plane.server,
                            "certificate-authority": str(control_plane.ca_file),
                        },
                    }
                ],
                "users": [{"name": "koordpy", "user": {"token": token.status.token}}],
                "contexts": [{"name": "chart", "context": {"cluster": "e2e", "user": "koordpy"}}],
            }
        )
    )
    args = [a for a in pod_spec.containers[0].args if not a.startswith(("--config", "--secure-port"))]
    identity = f"chart-{uuid.uuid4().hex[:6]}"
    secure_port = free_port()
    args += [
        "--config",
        str(config_path),
        "--kubeconfig",
        str(kubeconfig),
        "--secure-port",
        str(secure_port),
        "--bind-address",
        "127.0.0.1",
        "--identity",
        identity,
    ]

    # one KWOK node with 2 CPUs, and two priority classes for the preemption
    suffix = uuid.uuid4().hex[:6]
    node = f"chart-node-{suffix}"
    low, high = f"chart-low-{suffix}", f"chart-high-{suffix}"
    capacity = {"cpu": "2", "memory": "8Gi", "pods": "110"}
    await core.create_node(
        client.V1Node(
            metadata=client.V1ObjectMeta(
                name=node,
                annotations={KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
                labels={"koordpy.e2e/chart-node": suffix, "kubernetes.io/hostname": node, "type": "kwok"},
            ),
            status=client.V1NodeStatus(capacity=capacity, allocatable=dict(capacity)),
        )
    )
    scheduling = client.SchedulingV1Api(kube_api)
    for name, value in ((low, 10), (high, 1000)):
        await scheduling.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value)
        )
    # `koordpy run` embeds the status operators: one process does everything the chart deploys
    logs = {"run": tmp_path / "run.log"}
    try:
        with koordpy_process("run", args, logs["run"]) as run:
            processes = {"run": run}
            await _exercise(core, custom, kube_api, ns, scheduler, suffix, low, high, processes, logs)
            await _scrape_as_the_chart_allows(core, ns, secure_port)

            lease = await client.CoordinationV1Api(kube_api).read_namespaced_lease(installed["lease"], ns)
            assert lease.spec.holder_identity == identity
        await _classified_by_the_charts_flow_schemas(kube_api, control_plane, installed, token.status.token)
        await _gangs_and_quotas_writable_as_the_crds_need(kube_api, ns, pod_spec.service_account_name)
        for command, path in logs.items():
            lines = path.read_text(errors="replace").splitlines()
            forbidden = [line for line in lines if re.search(r"\b403\b|forbidden", line, re.I)]
            assert not forbidden, f"koordpy {command} was forbidden requests:\n" + "\n".join(forbidden[:20])
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_node(node)
        for name in (low, high):
            with contextlib.suppress(ApiException):
                await scheduling.delete_priority_class(name)


async def _classified_by_the_charts_flow_schemas(
    kube_api: client.ApiClient, control_plane: ControlPlane, installed: dict, token: str
) -> None:
    """The apiserver takes the release's FlowSchemas (their priority levels exist: not dangling)
    and classifies koordpy's requests with them, as its APF response headers say: a list into
    workload-high, a read of its Lease into leader-election."""
    ns = installed["namespace"]
    flowcontrol = client.FlowcontrolApiserverV1Api(kube_api)
    selector = f"app.kubernetes.io/instance={installed['release']}"
    schemas = {
        fs.spec.priority_level_configuration.name: fs
        for fs in (await flowcontrol.list_flow_schema(label_selector=selector)).items
    }
    assert schemas.keys() == {"workload-high", "leader-election"}
    levels = {
        name: (await flowcontrol.read_priority_level_configuration(name)).metadata.uid for name in schemas
    }

    async def none_dangling() -> bool:
        for fs in (await flowcontrol.list_flow_schema(label_selector=selector)).items:
            dangling = [
                c for c in (fs.status.conditions if fs.status else None) or [] if c.type == "Dangling"
            ]
            if [c.status for c in dangling] != ["False"]:
                return False
        return True

    await eventually(none_dangling, what="the release's FlowSchemas to be taken (Dangling=False)")
    requests = {
        "workload-high": f"/api/v1/namespaces/{ns}/pods?limit=1",
        "leader-election": f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{installed['lease']}",
    }
    tls = ssl.create_default_context(cafile=str(control_plane.ca_file))
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for level, path in requests.items():

            async def classified(level: str = level, path: str = path) -> bool:
                async with http.get(control_plane.server + path, ssl=tls) as response:
                    assert response.status == 200, await response.text()
                    return (
                        response.headers.get("X-Kubernetes-PF-FlowSchema-UID"),
                        response.headers.get("X-Kubernetes-PF-PriorityLevel-UID"),
                    ) == (schemas[level].metadata.uid, levels[level])

            await eventually(classified, what=f"koordpy's request {path} to be classified into {level}")


async def _gangs_and_quotas_writable_as_the_crds_need(
    kube_api: client.ApiClient, ns: str, account: str
) -> None:
    """What the installed ClusterRole lets koordpy write, asked of the apiserver's authorizer: the
    status of gangs and quotas, and Koordinator's quotas as objects (their annotations), but no whole
    PodGroup (rbac.statusWithoutSubresource is false) and no update of anything."""
    expected = {
        (SIGS, "podgroups", "status", "patch"): True,
        (X_K8S, "podgroups", "status", "patch"): True,
        (SIGS, "podgroups", "", "patch"): False,
        (X_K8S, "podgroups", "", "patch"): False,
        (SIGS, "podgroups", "", "update"): False,
        (SIGS, "podgroups", "status", "update"): False,
        (SIGS, "elasticquotas", "status", "patch"): True,
        (X_K8S, "elasticquotas", "status", "patch"): True,
        (SIGS, "elasticquotas", "", "patch"): True,
        (X_K8S, "elasticquotas", "", "patch"): False,
        (SIGS, "elasticquotas", "", "update"): False,
    }
    authorization = client.AuthorizationV1Api(kube_api)
    allowed = {}
    for group, resource, subresource, verb in expected:
        review = await authorization.create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=f"system:serviceaccount:{ns}:{account}",
                    groups=["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
                    resource_attributes=client.V1ResourceAttributes(
                        group=group,
                        resource=resource,
                        subresource=subresource,
                        verb=verb,
                        namespace=ns,
                        name="any",
                    ),
                )
            )
        )
        allowed[(group, resource, subresource, verb)] = bool(review.status.allowed)
    assert allowed == expected


async def _scrape_as_the_chart_allows(core: client.CoreV1Api, ns: str, port: int) -> None:
    """The secure port with the chart's RBAC: koordpy's ClusterRole lets it review the scraper's
    token and access (TokenReview, SubjectAccessReview), the metrics-reader binding lets the
    scraper in; without a token the caller is system:anonymous, who is not let in."""
    await core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="scraper"))
    )
    token = await core.create_namespaced_service_account_token(
        "scraper", ns, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    )
    url = f"https://127.0.0.1:{port}/metrics"
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {token.status.token}"}
        async with http.get(url, headers=headers, ssl=False) as response:
            assert response.status == 200, await response.text()
            assert "scheduler_schedule_attempts_total" in await response.text()
        async with http.get(url, ssl=False) as response:
            assert response.status == 403, await response.text()


async def _exercise(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    kube_api: client.ApiClient,
    ns: str,
    scheduler: str,
    node_label: str,
    low: str,
    high: str,
    processes: dict[str, subprocess.Popen[bytes]],
    logs: dict[str, Path],
) -> None:
    def alive() -> None:
        for command, proc in processes.items():
            if proc.poll() is not None:
                pytest.fail(
                    f"koordpy {command} exited with {proc.returncode}:\n"
                    + logs[command].read_text(errors="replace")[-4000:]
                )

    async def bound(name: str) -> str:
        alive()
        pod = await core.read_namespaced_pod(name, ns)
        return str(pod.spec.node_name or "")

    async def event(reason: str, name: str) -> bool:
        events = await client.EventsV1Api(kube_api).list_namespaced_event(ns)
        return any(e.reason == reason and e.regarding.name == name for e in events.items)

    # bind (pods/binding), and say so (events.k8s.io)
    await core.create_namespaced_pod(ns, _pod("victim", scheduler, node_label, "1500m", priority_class=low))
    await eventually(lambda: bound("victim"), what="the first pod to be bound")
    await eventually(lambda: event("Scheduled", "victim"), what="a Scheduled event")

    # unschedulable: PodScheduled=False (pods/status) and FailedScheduling
    await core.create_namespaced_pod(ns, _pod("too-big", scheduler, node_label, "4"))

    async def unschedulable() -> bool:
        alive()
        pod = await core.read_namespaced_pod("too-big", ns)
        return any(c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions or [])

    await eventually(unschedulable, what="PodScheduled=False on the pod that does not fit")
    await eventually(lambda: event("FailedScheduling", "too-big"), what="a FailedScheduling event")
    await core.delete_namespaced_pod("too-big", ns, grace_period_seconds=0)

    # preemption: the victim is marked (pods/status) and deleted (pods delete), the preemptor bound
    await core.create_namespaced_pod(
        ns, _pod("preemptor", scheduler, node_label, "1500m", priority_class=high)
    )

    async def victim_gone() -> bool:
        alive()
        try:
            await core.read_namespaced_pod("victim", ns)
        except ApiException as err:
            return err.status == 404
        return False

    await eventually(victim_gone, what="the low-priority pod to be preempted")
    await eventually(lambda: bound("preemptor"), what="the preemptor to be bound")
    await eventually(lambda: event("Preempted", "victim"), what="a Preempted event")

    # a gang: a PodGroup (list/watch of podgroups) whose two members are placed together, and
    # whose status the operator writes (get podgroups, patch podgroups/status)
    await custom.create_namespaced_custom_object(
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        ns,
        "podgroups",
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "gang"},
            "spec": {"minMember": 2},
        },
    )
    members = ["gang-0", "gang-1"]
    for name in members:
        await core.create_namespaced_pod(
            ns, _pod(name, scheduler, node_label, "100m", labels={"pod-group.scheduling.sigs.k8s.io": "gang"})
        )
    for name in members:
        await eventually(lambda n=name: bound(n), what=f"gang member {name} to be bound")

    async def gang_phase() -> str:
        alive()
        group = await custom.get_namespaced_custom_object(
            "scheduling.sigs.k8s.io", "v1alpha1", ns, "podgroups", "gang"
        )
        return str((group.get("status") or {}).get("phase") or "")

    await eventually(gang_phase, what="the PodGroup operator to write the gang's phase")

    # the topology operator: reads the one topology, default, and writes its status
    topology = ("scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies", "default")
    created = False
    try:
        await custom.get_cluster_custom_object(*topology)
    except ApiException as err:
        if err.status != 404:
            raise
        await custom.create_cluster_custom_object(
            *topology[:3],
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "ClusterNetworkTopology",
                "metadata": {"name": "default"},
                "spec": {
                    "networkTopologySpec": [
                        {"labelKey": ["koordpy.e2e/chart-node"], "topologyLayer": "BlockLayer"},
                        {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
                    ]
                },
            },
        )
        created = True
    try:

        async def topology_status() -> dict:
            alive()
            return dict((await custom.get_cluster_custom_object(*topology)).get("status") or {})

        await eventually(topology_status, what="the topology operator to write the topology's status")
    finally:
        if created:
            with contextlib.suppress(ApiException):
                await custom.delete_cluster_custom_object(*topology)

    # the ElasticQuota operator, with the chart's CRDs: a quota whose min is above its max gets
    # Valid=False, through the object where the CRD serves no status subresource (Koordinator's
    # scheduling.sigs.k8s.io, patch elasticquotas) and through the subresource where it serves one
    # (scheduler-plugins' scheduling.x-k8s.io, patch elasticquotas/status); a Warning event each
    quota = f"chart-bad-{node_label}"
    groups = (SIGS, X_K8S)
    try:
        for group in groups:
            await custom.create_namespaced_custom_object(
                group,
                "v1alpha1",
                ns,
                "elasticquotas",
                {
                    "apiVersion": f"{group}/v1alpha1",
                    "kind": "ElasticQuota",
                    "metadata": {"name": quota},
                    "spec": {"min": {"cpu": "4"}, "max": {"cpu": "2"}},
                },
            )
        for group in groups:

            async def invalid(group: str = group) -> bool:
                alive()
                obj = await custom.get_namespaced_custom_object(group, "v1alpha1", ns, "elasticquotas", quota)
                conditions = (obj.get("status") or {}).get("conditions") or []
                return any(c["type"] == "Valid" and c["status"] == "False" for c in conditions)

            await eventually(invalid, what=f"the ElasticQuota operator to write Valid=False on {group}")
    finally:
        for group in groups:
            with contextlib.suppress(ApiException):
                await custom.delete_namespaced_custom_object(group, "v1alpha1", ns, "elasticquotas", quota)
