"""A real, throw-away Kubernetes control plane for end-to-end tests.

Runs etcd, kube-apiserver and KWOK as child processes bound to loopback only,
with binaries built by ``hack/controlplane/build.sh`` into the cache directory
``${KOORDPY_CACHE_DIR:-~/.cache/koordpy}/bin``.

Launching needs nothing but the standard library, ``openssl`` (for the PKI) and
PyYAML (only for :meth:`ControlPlane.apply_crds`)::

    cp = ControlPlane()
    cp.start()
    try:
        ...  # use cp.kubeconfig / cp.server
    finally:
        cp.stop()

Set ``KOORDPY_KEEP_CONTROLPLANE=1`` to keep the working directory (PKI,
kubeconfig, process logs) after :meth:`ControlPlane.stop` for debugging.

``ControlPlane(audit_policy=...)`` starts kube-apiserver with that audit policy
and a JSON audit log at ``cp.audit_log`` (``tests/support/audit.py`` has a
policy for a scheduler's writes and the reader); without it nothing is audited.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "controlplane" / "build.sh"
CRD_DIR = REPO_ROOT / "crds"

BINARIES = ("etcd", "kube-apiserver", "kwok")

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or used."""


# --------------------------------------------------------------------------
# Binaries
# --------------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("KOORDPY_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "koordpy"


def bin_dir() -> Path:
    return cache_dir() / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    """Names of the control-plane binaries that are not present (executable)."""
    directory = directory or bin_dir()
    return [name for name in BINARIES if not os.access(directory / name, os.X_OK)]


def binaries_up_to_date() -> bool:
    """True when build.sh --check reports every binary present and current."""
    if missing_binaries():
        return False
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    return result.returncode == 0


def build_binaries(*, stream: Any = None) -> None:
    """Run hack/controlplane/build.sh (builds only what is missing or stale).

    The output is copied to ``stream`` (default: stderr) as it arrives, so a
    cold build (10-25 minutes) shows progress.
    """
    stream = stream or sys.stderr
    proc = subprocess.Popen(
        ["bash", str(BUILD_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        stream.write(line)
        stream.flush()
        tail = [*tail[-40:], line]
    if proc.wait() != 0:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{''.join(tail)}")


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{result.stderr}")


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _pdeathsig_preexec() -> Any:
    """A preexec_fn that makes Linux SIGTERM the child when this thread exits.

    Keeps etcd/apiserver/KWOK from outliving a killed test run. Only used when
    launching from the main thread: the signal fires when the *launching
    thread* exits, which for a worker thread can be much too early. libc is
    loaded here, in the parent, so the child only makes one system call.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:  # pragma: no cover - runs in the child
        prctl(pr_set_pdeathsig, sigterm)

    return preexec


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


# --------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------


@dataclass
class _Process:
    name: str
    args: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    _log_file: Any = field(default=None, repr=False)

    def start(self, env: dict[str, str] | None = None) -> None:
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log_file.write(f"\n=== starting: {' '.join(self.args)}\n".encode())
        self._log_file.flush()
        self.popen = subprocess.Popen(
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_pdeathsig_preexec(),
        )

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        proc = self.popen
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)
        self.popen = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def describe_failure(self) -> str:
        code = self.popen.poll() if self.popen else None
        state = "still running" if code is None else f"exited with code {code}"
        return f"{self.name} ({state}); last lines of {self.log_path}:\n{_tail(self.log_path)}"


# --------------------------------------------------------------------------
# The control plane
# --------------------------------------------------------------------------


class ControlPlane:
    """etcd + kube-apiserver (+ KWOK) on loopback, in a temporary directory.

    Attributes available after :meth:`start`:

    - ``server``: ``https://127.0.0.1:<port>``
    - ``kubeconfig``: path of an admin kubeconfig (client cert in ``system:masters``)
    - ``ca_file``, ``client_cert``, ``client_key``: the PEM files behind it
    - ``etcd_url``: ``http://127.0.0.1:<port>``
    - ``workdir``: the temporary directory holding PKI, configs and process logs
    - ``audit_log``: the kube-apiserver's JSON audit log (only with ``audit_policy``)
    """

    def __init__(
        self,
        binaries: Path | None = None,
        *,
        kwok: bool = True,
        apiserver_args: Sequence[str] = (),
        kwok_args: Sequence[str] = (),
        start_timeout: float = 90.0,
        keep_workdir: bool | None = None,
        audit_policy: Mapping[str, Any] | None = None,
    ) -> None:
        self.bin_dir = Path(binaries) if binaries else bin_dir()
        self.audit_policy = dict(audit_policy) if audit_policy is not None else None
        self.with_kwok = kwok
        self.extra_apiserver_args = list(apiserver_args)
        self.extra_kwok_args = list(kwok_args)
        self.start_timeout = start_timeout
        if keep_workdir is None:
            keep_workdir = os.environ.get("KOORDPY_KEEP_CONTROLPLANE", "") not in ("", "0", "false")
        self.keep_workdir = keep_workdir

        self.workdir: Path | None = None
        self.etcd_data_dir: Path | None = None
        self.pki: Pki | None = None
        self.etcd_port = 0
        self.etcd_peer_port = 0
        self.apiserver_port = 0
        self.kubeconfig: Path | None = None
        self.kwok_kubeconfig: Path | None = None
        # the JSON audit log, when started with an audit policy
        self.audit_log: Path | None = None
        self._etcd: _Process | None = None
        self._apiserver: _Process | None = None
        self._kwok: _Process | None = None
        self._ssl: ssl.SSLContext | None = None
        self._atexit_registered = False
        # CRD name -> list URLs of its served versions (filled by apply_crds).
        self._crd_list_paths: dict[str, list[str]] = {}

    # ---- derived attributes ------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def ca_file(self) -> Path:
        assert self.pki is not None, "control plane not started"
        return self.pki.ca_crt

    @property
    def client_cert(self) -> Path:
        assert self.pki is not None, "control plane not started"
        return self.pki.admin_crt

    @property
    def client_key(self) -> Path:
        assert self.pki is not None, "control plane not started"
        return self.pki.admin_key

    def log_paths(self) -> dict[str, Path]:
        procs = (self._etcd, self._apiserver, self._kwok)
        return {p.name: p.log_path for p in procs if p is not None}

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- lifecycle -----------------------------------------------------------

    def start(self) -> ControlPlane:
        missing = missing_binaries(self.bin_dir)
        if not self.with_kwok and missing == ["kwok"]:
            missing = []
        if missing:
            raise ControlPlaneError(
                f"missing control-plane binaries in {self.bin_dir}: {', '.join(missing)} (run {BUILD_SCRIPT})"
            )
        if self.workdir is not None:
            raise ControlPlaneError("control plane already started")
        self.workdir = Path(tempfile.mkdtemp(prefix="koordpy-cp-"))
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            self.pki = generate_pki(self.workdir / "pki")
            self._ssl = self._make_ssl_context()
            self._retry_on_port_clash(self._start_etcd)
            self._retry_on_port_clash(self._start_apiserver)
            if self.with_kwok:
                self._start_kwok()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop KWOK, kube-apiserver and etcd (in that order), remove temp dirs."""
        for proc in (self._kwok, self._apiserver, self._etcd):
            if proc is not None:
                proc.stop()
        self._kwok = self._apiserver = self._etcd = None
        if self.etcd_data_dir is not None:
            shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
            self.etcd_data_dir = None
        if self.workdir is not None:
            if self.keep_workdir:
                print(f"control plane working directory kept: {self.workdir}", file=sys.stderr)
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd."""
        if self._apiserver is None:
            raise ControlPlaneError("control plane not started")
        self._apiserver.stop()
        self._launch(self._apiserver)
        self._wait_apiserver_ready(self._apiserver)
        self._wait(self._apiserver, self._resources_served, "resources to be served again")

    # ---- etcd ----------------------------------------------------------------

    @staticmethod
    def _retry_on_port_clash(start: Any, attempts: int = 3) -> None:
        """Run ``start()``, again with new ports if another process took one.

        Free ports are picked by binding to port 0 and closing the socket, so
        a concurrent session can grab the same port before our process binds.
        """
        for attempt in range(attempts):
            try:
                start()
                return
            except ControlPlaneError as exc:
                if attempt + 1 < attempts and "address already in use" in str(exc):
                    continue
                raise

    def _start_etcd(self) -> None:
        assert self.workdir is not None
        if self._etcd is not None:  # an earlier attempt
            self._etcd.stop()
        if self.etcd_data_dir is not None:
            shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.workdir
        self.etcd_data_dir = Path(tempfile.mkdtemp(prefix="koordpy-etcd-", dir=base))
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        proc = _Process(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=koordpy-test",
                f"--data-dir={self.etcd_data_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=koordpy-test={peer}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
            self.workdir / "etcd.log",
        )
        self._etcd = proc
        self._launch(proc)

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client}/health", timeout=2) as resp:
                return bool(json.load(resp).get("health") == "true")

        self._wait(proc, healthy, "etcd /health")

    # ---- kube-apiserver -----------------------------------------------------

    def _start_apiserver(self) -> None:
        assert self.workdir is not None and self.pki is not None
        if self._apiserver is not None:  # an earlier attempt
            self._apiserver.stop()
        pki = self.pki
        self.apiserver_port = free_port()
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        write_kubeconfig(
            self.kubeconfig,
            server=self.server,
            ca=pki.ca_crt,
            cert=pki.admin_crt,
            key=pki.admin_key,
            user="koordpy-test-admin",
        )
        cert_dir = self.workdir / "apiserver-certs"
        cert_dir.mkdir(exist_ok=True)
        args = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={cert_dir}",
            f"--tls-cert-file={pki.apiserver_crt}",
            f"--tls-private-key-file={pki.apiserver_key}",
            f"--client-ca-file={pki.ca_crt}",
            f"--service-account-issuer=https://127.0.0.1:{self.apiserver_port}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,StorageObjectInUseProtection",
            "--allow-privileged=true",
            "--profiling=false",
            # On SIGTERM: drain ordinary requests, then give long-running ones
            # (watches) 2s instead of the default 60s before exiting.
            "--shutdown-send-retry-after=true",
            *self._audit_args(),
            *self.extra_apiserver_args,
        ]
        proc = _Process("kube-apiserver", args, self.workdir / "kube-apiserver.log")
        self._apiserver = proc
        self._launch(proc)
        self._wait_apiserver_ready(proc)

    def _audit_args(self) -> list[str]:
        if self.audit_policy is None:
            return []
        assert self.workdir is not None
        policy = self.workdir / "audit-policy.yaml"
        # JSON is valid YAML
        policy.write_text(json.dumps(self.audit_policy, indent=2) + "\n")
        self.audit_log = self.workdir / "audit.log"
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            # each event is written as its request completes, not batched for later
            "--audit-log-mode=blocking",
            # a rotated log would hide writes from a reader of this one file
            "--audit-log-maxsize=4096",
        ]

    def _wait_apiserver_ready(self, proc: _Process) -> None:
        def ready() -> bool:
            status, body = self.request("GET", "/readyz", timeout=3)
            return status == 200 and body.strip() == b"ok"

        self._wait(proc, ready, "kube-apiserver /readyz")

    # ---- KWOK ----------------------------------------------------------------

    def _start_kwok(self) -> None:
        assert self.workdir is not None and self.pki is not None
        self.kwok_kubeconfig = self.workdir / "kwok.kubeconfig"
        write_kubeconfig(
            self.kwok_kubeconfig,
            server=self.server,
            ca=self.pki.ca_crt,
            cert=self.pki.kwok_crt,
            key=self.pki.kwok_key,
            user="kwok-controller",
        )
        proc = _Process(
            "kwok",
            [
                str(self.bin_dir / "kwok"),
                f"--kubeconfig={self.kwok_kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
                "--cidr=10.0.0.1/16",
                "--node-ip=10.0.0.1",
                "--node-lease-duration-seconds=40",
                *self.extra_kwok_args,
            ],
            self.workdir / "kwok.log",
        )
        self._kwok = proc
        # KWOK reads ~/.kwok/kwok.yaml if it exists: give it an empty home so
        # the caller's configuration cannot change its behaviour. KUBECONFIG is
        # only a default for --kubeconfig; drop it anyway.
        home = self.workdir / "kwok-home"
        home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["HOME"] = str(home)
        self._launch(proc, env)
        self._wait(proc, self._kwok_probe(), "KWOK to mark a probe node Ready")

    def _kwok_probe(self) -> Any:
        """A check that creates a KWOK node, sees it Ready, then deletes it."""
        name = f"kwok-probe-{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
            },
            "status": {"capacity": {"cpu": "1", "memory": "1Gi", "pods": "1"}},
        }
        created = False

        def check() -> bool:
            nonlocal created
            if not created:
                status, body = self.request("POST", "/api/v1/nodes", node)
                if status not in (201, 409):
                    raise ControlPlaneError(f"creating probe node: HTTP {status}: {body!r}")
                created = True
            status, body = self.request("GET", f"/api/v1/nodes/{name}")
            if status != 200:
                return False
            conditions = json.loads(body).get("status", {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                return False
            status, body = self.request("DELETE", f"/api/v1/nodes/{name}")
            if status not in (200, 404):
                raise ControlPlaneError(f"deleting probe node: HTTP {status}: {body!r}")
            self.request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
            return True

        return check

    # ---- plumbing --------------------------------------------------------------

    def _launch(self, proc: _Process, env: dict[str, str] | None = None) -> None:
        proc.start(env)

    def _wait(self, proc: _Process, check: Any, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        last_error: object = None
        while True:
            if not proc.running():
                msg = f"{proc.name} died while waiting for {what}: {proc.describe_failure()}"
                print(msg, file=sys.stderr)
                raise ControlPlaneError(msg)
            try:
                if check():
                    return
            except (OSError, ValueError, urllib.error.URLError) as exc:
                last_error = exc
            if time.monotonic() > deadline:
                msg = (
                    f"timed out after {self.start_timeout:.0f}s waiting for {what} "
                    f"(last error: {last_error}): {proc.describe_failure()}"
                )
                print(msg, file=sys.stderr)
                raise ControlPlaneError(msg)
            time.sleep(0.2)

    def _make_ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_crt))
        ctx.load_cert_chain(str(self.pki.admin_crt), str(self.pki.admin_key))
        return ctx

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float = 10.0,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        """A raw HTTPS request to the apiserver as the admin user.

        Returns ``(status, body)``; HTTP errors are returned, not raised.
        """
        assert self._ssl is not None, "control plane not started"
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    # ---- CRDs ----------------------------------------------------------------

    def apply_crds(self, paths: Iterable[Path | str], *, timeout: float = 60.0) -> list[str]:
        """Create or replace the CRDs in ``paths`` and wait until they are served.

        Returns the CRD names. Waits for the ``Established`` condition and for
        the resource's list endpoint to answer.
        """
        import yaml

        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        crds: list[dict[str, Any]] = []
        for path in paths:
            for doc in yaml.safe_load_all(Path(path).read_text()):
                if not doc:
                    continue
                if doc.get("kind") != "CustomResourceDefinition":
                    raise ControlPlaneError(f"{path}: not a CustomResourceDefinition")
                crds.append(doc)
        for crd in crds:
            name = crd["metadata"]["name"]
            status, body = self.request("POST", base, crd)
            if status == 409:
                status, current = self.request("GET", f"{base}/{name}")
                if status != 200:
                    raise ControlPlaneError(f"GET CRD {name}: {status} {current!r}")
                version = json.loads(current)["metadata"]["resourceVersion"]
                crd = {**crd, "metadata": {**crd["metadata"], "resourceVersion": version}}
                status, body = self.request("PUT", f"{base}/{name}", crd)
            if status not in (200, 201):
                text = body.decode(errors="replace")
                raise ControlPlaneError(f"applying CRD {name} failed: HTTP {status}: {text}")

        deadline = time.monotonic() + timeout
        for crd in crds:
            name = crd["metadata"]["name"]
            group = crd["spec"]["group"]
            plural = crd["spec"]["names"]["plural"]
            versions = [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]
            self._crd_list_paths[name] = [f"/apis/{group}/{v}/{plural}?limit=1" for v in versions]
            while True:
                status, body = self.request("GET", f"{base}/{name}")
                established = False
                if status == 200:
                    # a CRD just created may say `conditions: null` until its controller looks at it
                    conds = (json.loads(body).get("status") or {}).get("conditions") or []
                    established = any(c["type"] == "Established" and c["status"] == "True" for c in conds)
                if established and self._crds_served([name]):
                    break
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"CRD {name} not established/served after {timeout:.0f}s")
                time.sleep(0.1)
        return [c["metadata"]["name"] for c in crds]

    def _resources_served(self) -> bool:
        builtin = ("/api/v1/pods?limit=1", "/api/v1/nodes?limit=1")
        return all(self.request("GET", p, timeout=3)[0] == 200 for p in builtin) and self._crds_served()

    def _crds_served(self, names: Iterable[str] | None = None) -> bool:
        """True when the list endpoints of the (given) applied CRDs answer 200.

        Right after an apiserver start, /readyz is ok before the storage of
        custom resources is initialised (requests get 429 until then).
        """
        names = list(self._crd_list_paths) if names is None else list(names)
        return all(
            self.request("GET", path, timeout=3)[0] == 200 for n in names for path in self._crd_list_paths[n]
        )
