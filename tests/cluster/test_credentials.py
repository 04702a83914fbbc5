"""Where `koordpy run`, `koordpy operators` and the embedded operators take their credentials from:
one choice, in client-go's order (a kubeconfig named; the service account in a pod; $KUBECONFIG or
~/.kube/config), and one error that says what was tried."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio.config import incluster_config

from koordpy.kubeapi.credentials import CredentialsError, load_configuration
from operators import connection_info


def write_kubeconfig(path: Path, current: str = "a") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": current,
                "clusters": [
                    {"name": c, "cluster": {"server": f"https://{c}.example:6443"}} for c in ("a", "b")
                ],
                "users": [{"name": c, "user": {"token": f"token-{c}"}} for c in ("a", "b")],
                "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in ("a", "b")],
            }
        )
    )
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with $KUBECONFIG set (contexts a and b, current a), outside any cluster; the
    service account files, when a case makes a pod of it, are under `tmp_path`."""
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "env-kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    return tmp_path


def in_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, token: bool = True) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    if token:
        (tmp_path / "token").write_text("sa-token")


@pytest.mark.parametrize(
    ("case", "kubeconfig", "context", "pod", "server", "token"),
    [
        ("a kubeconfig named, its current context", "named", None, None, "https://b.example:6443", "token-b"),
        ("a kubeconfig named, a context named", "named", "a", None, "https://a.example:6443", "token-a"),
        ("$KUBECONFIG outside a cluster", None, None, None, "https://a.example:6443", "token-a"),
        ("a context named in a pod: a kubeconfig", None, "b", "token", "https://b.example:6443", "token-b"),
        ("in a pod: the service account", None, None, "token", "https://10.96.0.1:443", "sa-token"),
        ("a pod without a token: $KUBECONFIG", None, None, "no token", "https://a.example:6443", "token-a"),
        ("a kubeconfig named wins over the pod", "named", None, "token", "https://b.example:6443", "token-b"),
    ],
)
async def test_credentials_are_chosen_in_client_gos_order(
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    kubeconfig: str | None,
    context: str | None,
    pod: str | None,
    server: str,
    token: str,
) -> None:
    named = str(write_kubeconfig(env / "named", current="b")) if kubeconfig else None
    if pod is not None:
        in_a_pod(env, monkeypatch, token=pod == "token")
    configuration = await load_configuration(named, context)
    assert configuration.host == server, case
    assert await configuration.get_api_key_with_prefix("BearerToken") == f"Bearer {token}", case


async def test_kubeconfig_is_read_when_connecting_and_its_files_are_merged(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = write_kubeconfig(env / "second", current="b")
    monkeypatch.setenv("KUBECONFIG", f"{env / 'missing'}:{second}")
    configuration = await load_configuration()
    assert configuration.host == "https://b.example:6443"


@pytest.mark.parametrize(
    ("case", "kubeconfig", "kubeconfig_env", "pod", "says"),
    [
        ("the kubeconfig named does not exist", "/nonexistent/kubeconfig", None, False, "no kubeconfig at"),
        ("nothing to load", None, "/nonexistent/kubeconfig", False, "no kubeconfig at /nonexistent"),
        ("a pod without a token, no kubeconfig", None, "/nonexistent/kubeconfig", True, "in-cluster"),
        ("a kubeconfig that is not one", "garbage", None, False, "kubeconfig"),
    ],
)
async def test_missing_credentials_are_one_error_saying_what_was_tried(
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    kubeconfig: str | None,
    kubeconfig_env: str | None,
    pod: bool,
    says: str,
) -> None:
    if kubeconfig == "garbage":
        kubeconfig = str(env / "garbage")
        Path(kubeconfig).write_text("just a string\n")
    if kubeconfig_env is not None:
        monkeypatch.setenv("KUBECONFIG", kubeconfig_env)
    if pod:
        in_a_pod(env, monkeypatch, token=False)
    with pytest.raises(CredentialsError, match=says):
        await load_configuration(kubeconfig)


async def test_kopf_logs_in_with_the_credentials_the_client_uses(env: Path) -> None:
    configuration = await load_configuration(None, "b")
    info = await connection_info(configuration)
    assert (info.server, info.scheme, info.token) == ("https://b.example:6443", "Bearer", "token-b")
