"""The test control plane's PKI (a CA, the apiserver's serving certificate, a client certificate
per user, the service-account keys, made with openssl) and kubeconfigs for its users."""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import ControlPlaneError


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{result.stderr}")


@dataclass
class Pki:
    """Paths of the generated certificates and keys."""

    directory: Path
    ca_crt: Path
    ca_key: Path
    apiserver_crt: Path
    apiserver_key: Path
    admin_crt: Path
    admin_key: Path
    kwok_crt: Path
    kwok_key: Path
    controller_manager_crt: Path
    controller_manager_key: Path
    sa_key: Path
    sa_pub: Path


def generate_pki(directory: Path) -> Pki:
    """A CA, a serving cert for 127.0.0.1/localhost, client certs, SA keys."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    days = "3650"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        days,
        "-subj",
        "/CN=koordpy-test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=d,
    )

    def leaf(name: str, subject: str, extensions: str) -> None:
        (d / f"{name}.ext").write_text(extensions)
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            days,
            "-extfile",
            f"{name}.ext",
            cwd=d,
        )

    leaf(
        "apiserver",
        "/CN=kube-apiserver",
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,IP:10.0.0.1\n",
    )
    client_ext = (
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n"
    )
    leaf("admin", "/O=system:masters/CN=koordpy-test-admin", client_ext)
    leaf("kwok", "/O=system:masters/CN=kwok-controller", client_ext)
    # a user of its own, so its writes are told apart in an audit log; system:masters because with
    # --use-service-account-credentials=false every controller acts with this one user
    leaf("controller-manager", "/O=system:masters/CN=system:kube-controller-manager", client_ext)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    for key in d.glob("*.key"):
        key.chmod(0o600)
    return Pki(
        directory=d,
        ca_crt=d / "ca.crt",
        ca_key=d / "ca.key",
        apiserver_crt=d / "apiserver.crt",
        apiserver_key=d / "apiserver.key",
        admin_crt=d / "admin.crt",
        admin_key=d / "admin.key",
        kwok_crt=d / "kwok.crt",
        kwok_key=d / "kwok.key",
        controller_manager_crt=d / "controller-manager.crt",
        controller_manager_key=d / "controller-manager.key",
        sa_key=d / "sa.key",
        sa_pub=d / "sa.pub",
    )


def write_kubeconfig(path: Path, *, server: str, ca: Path, cert: Path, key: Path, user: str) -> None:
    """A single-context kubeconfig with embedded CA and client certificate."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "koordpy-test", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}
        ],
        "contexts": [{"name": "koordpy-test", "context": {"cluster": "koordpy-test", "user": user}}],
        "current-context": "koordpy-test",
        "preferences": {},
    }
    # JSON is valid YAML; every kubeconfig loader accepts it.
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
