"""`koordpy run`'s secure port on the real control plane, held to what kube-scheduler does on its own
(cmd/kube-scheduler/app/server.go and apiserver's delegated authentication and authorization):

- HTTPS with a self-signed certificate (here generated into `--cert-dir`, so that the test can
  trust its CA and verify it for 127.0.0.1);
- `/healthz`, `/livez`, `/readyz` answer anyone, without a token;
- `/metrics` and `/configz` are for users the apiserver vouches for: no token is
  `system:anonymous`, who is forbidden (403); a token the apiserver does not accept is 401 (even
  on /healthz: authentication comes first); a service account bound to a ClusterRole with
  `nonResourceURLs` get on the path is let in, one without is 403;
- `/readyz?verbose` lists each check, `/configz` is the configuration in use under
  `componentconfig`;
- the plain-HTTP port, asked for with `--insecure-port`, answers everyone.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tests.support.controlplane import REPO_ROOT, ControlPlane, free_port

SCHEDULER_NAME = "koordpy-secure-serving"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@dataclass
class Served:
    secure: int
    insecure: int
    namespace: str
    lease: str
    # the CA of the self-signed certificate, written beside it in --cert-dir
    ca: ssl.SSLContext
    tokens: dict[str, str]
    log: Path


def _ok(response: tuple[int, bytes], what: str) -> dict[str, Any]:
    status, body = response
    assert status in (200, 201), f"{what}: HTTP {status}: {body[:300]!r}"
    return dict(json.loads(body))


def _cluster_role(name: str, paths: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"nonResourceURLs": paths, "verbs": ["get"]}],
    }


def _binding(name: str, role: str, namespace: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def fetch(url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, str, str]:
    """Status, content type and body of a GET; HTTP errors are answers too."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read().decode()


@pytest.fixture(scope="module")
def served(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`koordpy run` with its secure port (a self-signed certificate in a cert dir) and a plain
    one, and three service accounts: `scraper` may get /metrics, `operator` may get /configz,
    `stranger` may get nothing."""
    suffix = uuid.uuid4().hex[:6]
    namespace, lease = f"e2e-secure-serving-{suffix}", f"koordpy-secure-{suffix}"
    _ok(
        control_plane.request(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        ),
        "namespace",
    )
    roles = {"scraper": ["/metrics"], "operator": ["/configz"]}
    created: list[str] = []
    tokens: dict[str, str] = {}
    for account in ("scraper", "operator", "stranger"):
        _ok(
            control_plane.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
            ),
            f"service account {account}",
        )
        if account in roles:
            name = f"e2e-{account}-{suffix}"
            _ok(
                control_plane.request("POST", f"{RBAC}/clusterroles", _cluster_role(name, roles[account])),
                name,
            )
            created.append(f"{RBAC}/clusterroles/{name}")
            binding = _binding(name, name, namespace, account)
            _ok(control_plane.request("POST", f"{RBAC}/clusterrolebindings", binding), name)
            created.append(f"{RBAC}/clusterrolebindings/{name}")
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        }
        answer = _ok(
            control_plane.request(
                "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", request
            ),
            f"token of {account}",
        )
        tokens[account] = answer["status"]["token"]

    workdir = tmp_path_factory.mktemp("secure-serving")
    config = workdir / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": SCHEDULER_NAME}],
                "parallelism": 4,
            }
        )
    )
    cert_dir = workdir / "certs"
    secure, insecure = free_port(), free_port()
    log = workdir / "koordpy.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "koordpy.cli",
                "run",
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "--config",
                str(config),
                "--leader-elect",
                "--lease-name",
                lease,
                "--lease-namespace",
                namespace,
                "--no-operators",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(secure),
                "--cert-dir",
                str(cert_dir),
                "--insecure-port",
                str(insecure),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        deadline = time.monotonic() + 60
        status = 0
        while status != 200:
            assert proc.poll() is None, f"koordpy exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"koordpy never became ready:\n{log.read_text()[-4000:]}"
            time.sleep(0.3)
            try:
                status = fetch(f"http://127.0.0.1:{insecure}/readyz")[0]
            except OSError:
                status = 0
        chain = x509.load_pem_x509_certificates((cert_dir / "koordpy.crt").read_bytes())
        ca = ssl.create_default_context(cadata=chain[-1].public_bytes(Encoding.PEM).decode())
        yield Served(secure, insecure, namespace, lease, ca, tokens, log)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        for path in created:
            control_plane.request("DELETE", path)


def _token(served: Served, who: str | None) -> str | None:
    if who is None:
        return None
    return served.tokens.get(who, "not-a-token-the-apiserver-issued")


@pytest.mark.parametrize(
    ("path", "who", "status"),
    [
        ("/healthz", None, 200),
        ("/livez", None, 200),
        ("/readyz", None, 200),
        ("/healthz", "stranger", 200),
        ("/healthz", "forged", 401),
        ("/metrics", None, 403),
        ("/metrics", "forged", 401),
        ("/metrics", "stranger", 403),
        ("/metrics", "operator", 403),
        ("/metrics", "scraper", 200),
        ("/configz", None, 403),
        ("/configz", "scraper", 403),
        ("/configz", "operator", 200),
    ],
)
def test_who_gets_what_on_the_secure_port(served: Served, path: str, who: str | None, status: int) -> None:
    # the certificate is verified: it names 127.0.0.1 and chains to the CA written beside it
    got, content_type, body = fetch(
        f"https://127.0.0.1:{served.secure}{path}", _token(served, who), served.ca
    )
    assert got == status, body
    if status in (401, 403):
        assert content_type.startswith("application/json")
        assert json.loads(body)["code"] == status


@pytest.mark.parametrize(
    ("who", "user"),
    [(None, "system:anonymous"), ("stranger", "system:serviceaccount:{namespace}:stranger")],
)
def test_forbidden_names_the_user_and_the_path(served: Served, who: str | None, user: str) -> None:
    status, _, body = fetch(f"https://127.0.0.1:{served.secure}/metrics", _token(served, who), served.ca)
    assert status == 403
    answer = json.loads(body)
    assert answer["reason"] == "Forbidden"
    expected = f'forbidden: User "{user.format(namespace=served.namespace)}" cannot get path "/metrics"'
    assert answer["message"] == expected


def test_metrics_for_the_scraper(served: Served) -> None:
    status, content_type, body = fetch(
        f"https://127.0.0.1:{served.secure}/metrics", served.tokens["scraper"], served.ca
    )
    assert status == 200
    assert content_type.startswith("text/plain")
    assert "leader_election_master_status" in body


def test_readyz_verbose_lists_each_check(served: Served) -> None:
    status, content_type, body = fetch(f"https://127.0.0.1:{served.secure}/readyz?verbose", context=served.ca)
    assert status == 200
    assert content_type == "text/plain; charset=utf-8"
    assert body == (
        "[+]leaderElection ok\n"
        "[+]shutdown ok\n"
        "[+]api-server ok\n"
        "[+]sched-handler-sync ok\n"
        "[+]informer-watch ok\n"
        "[+]scheduler ok\n"
        "readyz check passed\n"
    )


def test_healthz_verbose_and_exclude(served: Served) -> None:
    base = f"https://127.0.0.1:{served.secure}"
    assert fetch(f"{base}/healthz", context=served.ca)[1:] == ("text/plain; charset=utf-8", "ok")
    _, _, body = fetch(f"{base}/healthz?verbose&exclude=scheduler", context=served.ca)
    assert body == "[+]ping ok\n[+]leaderElection ok\n[+]scheduler excluded: ok\nhealthz check passed\n"


def test_configz_is_the_configuration_in_use(served: Served) -> None:
    status, content_type, body = fetch(
        f"https://127.0.0.1:{served.secure}/configz", served.tokens["operator"], served.ca
    )
    assert status == 200
    assert content_type.startswith("application/json")
    config = json.loads(body)["componentconfig"]
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in config["profiles"]] == [SCHEDULER_NAME]
    assert config["parallelism"] == 4
    # the command line's leader election, as it is run
    election = config["leaderElection"]
    assert (election["leaderElect"], election["resourceName"], election["resourceNamespace"]) == (
        True,
        served.lease,
        served.namespace,
    )


def test_the_plain_port_answers_everyone(served: Served) -> None:
    for path in ("/metrics", "/configz", "/healthz", "/readyz"):
        status, _, body = fetch(f"http://127.0.0.1:{served.insecure}{path}")
        assert status == 200, f"{path}: {body}"


def test_the_secure_port_speaks_only_tls(served: Served) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        fetch(f"http://127.0.0.1:{served.secure}/healthz")


def test_the_generated_certificate_is_for_localhost(served: Served, tmp_path: Path) -> None:
    status, _, _ = fetch(f"https://localhost:{served.secure}/healthz", context=served.ca)
    assert status == 200
