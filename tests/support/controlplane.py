"""A real, throw-away Kubernetes control plane for end-to-end tests.

Runs etcd, kube-apiserver, kube-controller-manager and KWOK as child processes bound to loopback
only, with binaries built by ``hack/controlplane/build.sh`` into the cache directory
``${KOORDPY_CACHE_DIR:-~/.cache/koordpy}/bin`` (``tests/support/binaries.py``). The feature gates,
API versions and controllers it turns on are in ``tests/support/controllers.py``; the PKI and
kubeconfigs in ``pki.py``, the child processes in ``processes.py``.

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
import json
import os
import shutil
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.binaries import (
    BINARIES,
    BUILD_SCRIPT,
    REPO_ROOT,
    bin_dir,
    binaries_up_to_date,
    build_binaries,
    cache_dir,
    missing_binaries,
)
from tests.support.controllers import controller_manager_args, feature_gates_arg, runtime_config_arg
from tests.support.kwokprobe import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE, kwok_probe
from tests.support.pki import Pki, _openssl, generate_pki, write_kubeconfig
from tests.support.processes import ControlPlaneError, _Process, _tail, free_port

# what the test modules import from here, wherever it is defined
__all__ = [
    "BINARIES",
    "BUILD_SCRIPT",
    "CRD_DIR",
    "KWOK_NODE_ANNOTATION",
    "KWOK_NODE_ANNOTATION_VALUE",
    "REPO_ROOT",
    "ControlPlane",
    "ControlPlaneError",
    "Pki",
    "_openssl",
    "_tail",
    "bin_dir",
    "binaries_up_to_date",
    "build_binaries",
    "cache_dir",
    "free_port",
    "generate_pki",
    "missing_binaries",
    "write_kubeconfig",
]

CRD_DIR = REPO_ROOT / "crds"


# --------------------------------------------------------------------------
# The control plane
# --------------------------------------------------------------------------


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager, + KWOK) on loopback, in a temporary
    directory. ``controllers=False`` leaves kube-controller-manager out (no controller acts on
    anything: a namespace deleted stays Terminating, a Job makes no pods, a claim stays Pending).

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
        controllers: bool = True,
        apiserver_args: Sequence[str] = (),
        controller_manager_args: Sequence[str] = (),
        kwok_args: Sequence[str] = (),
        start_timeout: float = 90.0,
        keep_workdir: bool | None = None,
        audit_policy: Mapping[str, Any] | None = None,
    ) -> None:
        self.bin_dir = Path(binaries) if binaries else bin_dir()
        self.audit_policy = dict(audit_policy) if audit_policy is not None else None
        self.with_kwok = kwok
        self.with_controllers = controllers
        self.extra_controller_manager_args = list(controller_manager_args)
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
        self.controller_manager_port = 0
        # the JSON audit log, when started with an audit policy
        self.audit_log: Path | None = None
        self._etcd: _Process | None = None
        self._apiserver: _Process | None = None
        self._kwok: _Process | None = None
        self._controller_manager: _Process | None = None
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
        procs = (self._etcd, self._apiserver, self._controller_manager, self._kwok)
        return {p.name: p.log_path for p in procs if p is not None}

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- lifecycle -----------------------------------------------------------

    def start(self) -> ControlPlane:
        unused = {"kwok"} if not self.with_kwok else set()
        if not self.with_controllers:
            unused.add("kube-controller-manager")
        missing = [name for name in missing_binaries(self.bin_dir) if name not in unused]
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
            # kube-controller-manager starts while KWOK does, and is waited for after: its start-up
            # (informers, discovery) overlaps KWOK's
            if self.with_controllers:
                self._launch_controller_manager()
            if self.with_kwok:
                self._start_kwok()
            if self._controller_manager is not None:
                self._retry_on_port_clash(self._wait_controller_manager)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop KWOK, kube-controller-manager, kube-apiserver and etcd (in that order), remove temp
        dirs."""
        for proc in (self._kwok, self._controller_manager, self._apiserver, self._etcd):
            if proc is not None:
                proc.stop()
        self._kwok = self._controller_manager = self._apiserver = self._etcd = None
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
            feature_gates_arg(),
            runtime_config_arg(),
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

    # ---- kube-controller-manager ----------------------------------------------

    def _launch_controller_manager(self) -> None:
        """Start kube-controller-manager; :meth:`_wait_controller_manager` waits for it."""
        assert self.workdir is not None and self.pki is not None
        if self._controller_manager is not None:  # an earlier attempt
            self._controller_manager.stop()
        kubeconfig = self.workdir / "controller-manager.kubeconfig"
        write_kubeconfig(
            kubeconfig,
            server=self.server,
            ca=self.pki.ca_crt,
            cert=self.pki.controller_manager_crt,
            key=self.pki.controller_manager_key,
            user="system:kube-controller-manager",
        )
        cert_dir = self.workdir / "controller-manager-certs"
        cert_dir.mkdir(exist_ok=True)
        self.controller_manager_port = free_port()
        args = controller_manager_args(
            self.bin_dir / "kube-controller-manager",
            kubeconfig=kubeconfig,
            cert_dir=cert_dir,
            port=self.controller_manager_port,
            extra=self.extra_controller_manager_args,
        )
        proc = _Process("kube-controller-manager", args, self.workdir / "kube-controller-manager.log")
        self._controller_manager = proc
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        self._launch(proc, env)

    def _wait_controller_manager(self) -> None:
        """Wait for its /healthz (each started controller adds its check to it); on a port taken
        meanwhile by another process, start it again on a new one."""
        proc = self._controller_manager
        assert proc is not None
        # its serving certificate is self-signed, in its cert dir: nothing to verify it against
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        url = f"https://127.0.0.1:{self.controller_manager_port}/healthz"

        def healthy() -> bool:
            with urllib.request.urlopen(url, context=insecure, timeout=3) as resp:
                return bool(resp.status == 200)

        try:
            self._wait(proc, healthy, "kube-controller-manager /healthz")
        except ControlPlaneError as exc:
            if "address already in use" in str(exc):
                self._launch_controller_manager()
            raise

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
        self._wait(proc, kwok_probe(self.request), "KWOK to mark a probe node Ready")

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
