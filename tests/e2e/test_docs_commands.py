"""The `helm install` and `helm upgrade` commands of the README and docs/*.md (found by
tests/test_docs_commands.py), run against the test API server.

A command is written for a cluster: the comment above it says which ("beside Koordinator", "beside
scheduler-plugins", "beside both"), none for a cluster without any of the CRDs, and the CRD table of
docs/deploy.md says which CRDs each of those installed already. Helm refuses to install a CRD that
exists outside the release (`... exists and cannot be imported into the current release`), so:

- what the command renders (`helm template` with its own flags) holds none of the CRDs its cluster
  has already;
- the command itself goes through `helm install|upgrade --install --dry-run=server` on the test API
  server. That server has every CRD already (created outside Helm): the CRDs the command would
  create in its own cluster are switched off for the run, and nothing else is changed but the
  kubeconfig.
"""

from __future__ import annotations

import re
import shlex

import pytest
import yaml
from kubernetes_asyncio import client

from tests.e2e.test_chart import CRD_SWITCHES, NAMESPACE, _ensure_namespace, helm, run_helm
from tests.support.controlplane import REPO_ROOT, ControlPlane
from tests.test_docs_commands import COMMANDS, Command

__all__ = ["helm"]  # the fixture, shared with the chart's tests

DEPLOY = REPO_ROOT / "docs" / "deploy.md"
HELM_COMMANDS = [c for c in COMMANDS if c.kind == "helm"]
NO_SERVICE_MONITOR = 'no matches for kind "ServiceMonitor" in version "monitoring.coreos.com/v1"'
# the flags `helm template` does not take, with whether each takes a value
_INSTALL_ONLY = {"--create-namespace": False, "--reuse-values": False, "--wait": False, "--atomic": False}


def crd_installers() -> dict[str, str]:
    """switch -> who else installs its CRD, from the CRD table of docs/deploy.md."""
    rows = [
        row
        for row in re.findall(r"^\s*\| `(crds\.\w+)` \| `([\w.-]+)` \| ([^|]+) \|$", DEPLOY.read_text(), re.M)
        if row[0] in CRD_SWITCHES
    ]
    table = {switch: installer.strip() for switch, crd, installer in rows}
    assert set(table) == set(CRD_SWITCHES), "docs/deploy.md's CRD table names every switch"
    for switch, crd, _ in rows:
        assert CRD_SWITCHES[switch] == crd, f"docs/deploy.md: {switch} is {CRD_SWITCHES[switch]}"
    return table


def existing_crds(command: Command) -> set[str]:
    """The CRDs the cluster the command is written for has already, from its comment."""
    context = command.context.lower()
    installers = crd_installers()
    if "beside both" in context or "all of them exist" in context:
        return set(CRD_SWITCHES.values())
    found: set[str] = set()
    for switch, installer in installers.items():
        if ("koordinator" in context and "koordinator" in installer.lower()) or (
            "scheduler-plugins" in context and "scheduler-plugins" in installer.lower()
        ):
            found.add(CRD_SWITCHES[switch])
    assert found or "beside" not in context, f"{command.where}: which cluster is {command.context!r}?"
    return found


def parse(command: Command) -> tuple[str, str, str, list[str]]:
    """(install|upgrade, release, chart, the other arguments)."""
    words = shlex.split(command.text)
    assert words[0] == "helm", command.text
    action, rest = words[1], words[2:]
    positional = [w for i, w in enumerate(rest) if not w.startswith("-") and not _is_value(rest, i)]
    release, chart = positional[:2]
    others = list(rest)
    others.remove(release)
    others.remove(chart)
    assert (REPO_ROOT / chart).is_dir(), f"{command.where}: no chart at {chart}"
    return action, release, chart, others


def _is_value(words: list[str], i: int) -> bool:
    """Whether words[i] is the value of the flag before it (`--set x=y`, `-n ns`)."""
    if i == 0:
        return False
    flag = words[i - 1]
    return flag.startswith("-") and "=" not in flag and flag not in _INSTALL_ONLY


def template_flags(others: list[str]) -> list[str]:
    """The command's flags that `helm template` takes: values, namespace."""
    kept: list[str] = []
    for w in others:
        if w in _INSTALL_ONLY:
            continue
        kept.append(w)
    return kept


def rendered_crds(helm: str, release: str, chart: str, others: list[str]) -> set[str]:
    out = run_helm(helm, "template", release, chart, *template_flags(others)).stdout
    return {
        d["metadata"]["name"]
        for d in yaml.safe_load_all(out)
        if d and d["kind"] == "CustomResourceDefinition"
    }


def test_the_docs_show_helm_commands() -> None:
    assert len(HELM_COMMANDS) >= 5
    assert any("koordinator" in c.context.lower() for c in HELM_COMMANDS)


@pytest.mark.parametrize("command", HELM_COMMANDS, ids=lambda c: c.where)
def test_a_documented_helm_command_installs_nothing_its_cluster_has(helm: str, command: Command) -> None:
    _, release, chart, others = parse(command)
    taken = rendered_crds(helm, release, chart, others) & existing_crds(command)
    assert not taken, (
        f"{command.where}: `{command.text}` would install {sorted(taken)}, which its cluster "
        f"({command.context or 'without any of them'}) has already: helm refuses it"
    )


@pytest.mark.parametrize("command", HELM_COMMANDS, ids=lambda c: c.where)
async def test_a_documented_helm_command_goes_through(
    helm: str, control_plane: ControlPlane, kube_api: client.ApiClient, command: Command
) -> None:
    action, release, chart, others = parse(command)
    # the documented commands install into koordpy-system; a server-side dry run needs it to exist
    assert NAMESPACE in others, command.text
    await _ensure_namespace(kube_api, NAMESPACE)
    # CRDs the command creates in its own cluster exist here already, created outside Helm
    here_only = rendered_crds(helm, release, chart, others) - existing_crds(command)
    switches = [a for s, crd in CRD_SWITCHES.items() if crd in here_only for a in ("--set", f"{s}=false")]
    args = ["upgrade", "--install"] if action == "upgrade" else ["install"]
    target = ["--kubeconfig", str(control_plane.kubeconfig), "--dry-run=server"]
    done = run_helm(helm, *args, release, chart, *others, *switches, *target, check=False)
    if "metrics.serviceMonitor.enabled=true" in others:
        # written for a cluster with the Prometheus Operator, whose CRDs the test API server lacks
        # (the ServiceMonitor is checked on its own in tests/e2e/test_chart.py): refused for that
        # alone, and the rest goes through
        assert done.returncode != 0 and NO_SERVICE_MONITOR in done.stderr, done.stderr
        without = ["--set", "metrics.serviceMonitor.enabled=false"]
        done = run_helm(helm, *args, release, chart, *others, *switches, *without, *target, check=False)
    assert done.returncode == 0, f"{command.where}: {command.text}\n{done.stderr}"
