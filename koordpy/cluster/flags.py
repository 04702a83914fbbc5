"""`koordpy run`'s flags: kube-scheduler's names, values and precedence, and koordpy's own.

kube-scheduler (cmd/kube-scheduler/app/options, options.go `ApplyTo`, deprecated.go) reads its
configuration from `--config`, or without it from v1's defaults; then:

- the leader-election flags (`--leader-elect`, `--leader-elect-lease-duration`, ...) override the
  configuration's `leaderElection`, with `--config` or without;
- the deprecated client flags (`--kube-api-qps`, `--kube-api-burst`, `--kube-api-content-type`)
  set `clientConnection` only when there is no `--config`; with one they are ignored (koordpy says
  so in a warning);
- `--kubeconfig` is one of those deprecated flags too, but koordpy honours it with `--config` as
  well (it takes the place of `clientConnection.kubeconfig`): running against a cluster from a
  workstation with a configuration file is what the flag is for here.

koordpy's earlier flag names keep working for one release, each with a deprecation warning naming
its replacement, printed as pflag prints kube's (`Flag --x has been deprecated, ...`).

Every other flag a kube-scheduler Deployment or kubeadm's static pod sets is accepted, so that its
command line runs unchanged: the delegated authentication and authorization flags are honoured
(`--authentication-kubeconfig`, `--authorization-kubeconfig`, the review caches' TTLs,
`--authorization-always-allow-paths`); `--pod-max-in-unschedulable-pods-duration` is honoured, with
`--config` or without, as kube applies it; what koordpy does not do (profiling, client-certificate
and front-proxy authentication, kube's feature gates) is said once, in a warning at start-up that
names the flags.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from koordpy.api.duration import parse_duration
from koordpy.cluster.auth import ALLOWED_CACHE_SECONDS, DENIED_CACHE_SECONDS, TOKEN_CACHE_SECONDS
from koordpy.cluster.flag_values import (
    FlagError,
    go_duration,
    parse_bool,
    parse_feature_gates,
    parse_flag_duration,
    parse_int32,
    parse_ip,
    parse_port,
    parse_positive_duration,
    parse_qps,
    parse_seconds,
    parse_verbosity,
)
from koordpy.config.errors import ConfigError, Problem
from koordpy.config.models import ClientConnection, LeaderElection, SchedulerConfiguration
from koordpy.kubeapi.informer import WATCH_IDLE_TIMEOUT

if TYPE_CHECKING:
    from koordpy.cluster.app import RunOptions

# the values' readers and FlagError live in flag_values; importers of this module find them here too
__all__ = [
    "FlagError",
    "add_run_flags",
    "go_duration",
    "parse_bool",
    "parse_feature_gates",
    "parse_flag_duration",
    "parse_int32",
    "parse_ip",
    "parse_port",
    "parse_positive_duration",
    "parse_qps",
    "parse_seconds",
    "parse_verbosity",
    "resolve",
    "run_options",
]

# the profile `koordpy run` serves without --config: default-scheduler is the cluster's own
RUN_PROFILE = "koord-scheduler"
DEFAULT_SECURE_PORT = 10259
DEFAULT_BIND_ADDRESS = "0.0.0.0"
LEASES = "leases"
JSON_CONTENT = "application/json"
# client-go's JitterFactor: a renew deadline must leave room for a jittered retry
JITTER_FACTOR = 1.2
# the deprecated --log-level's levels on klog's verbosity scale
LOG_LEVEL_VERBOSITY = {"debug": 4, "info": 0, "warning": 0, "error": 0}
LOG_LEVEL_FLOOR = {"warning": logging.WARNING, "error": logging.ERROR}


# apiserver's RequestHeaderAuthenticationOptions: front-proxy authentication
REQUEST_HEADER_FLAGS = (
    "--requestheader-client-ca-file",
    "--requestheader-allowed-names",
    "--requestheader-username-headers",
    "--requestheader-uid-headers",
    "--requestheader-group-headers",
    "--requestheader-extra-headers-prefix",
)


# ---------------------------------------------------------------------------------------------- flags
@dataclass(frozen=True, slots=True)
class Alias:
    """A flag of koordpy's earlier releases and the kube-scheduler flag that replaces it."""

    old: str
    new: str
    # how the old value is written with the new flag, when it is not the same
    note: str = ""


ALIASES = (
    Alias("--lease-duration", "--leader-elect-lease-duration", "a Go duration such as 15s"),
    Alias("--renew-deadline", "--leader-elect-renew-deadline", "a Go duration such as 10s"),
    Alias("--retry-period", "--leader-elect-retry-period", "a Go duration such as 2s"),
    Alias("--lease-name", "--leader-elect-resource-name"),
    Alias("--lease-namespace", "--leader-elect-resource-namespace"),
    Alias("--metrics-port", "--secure-port"),
    Alias("--log-level", "-v", "debug is -v=4"),
    Alias("--no-leader-elect", "--leader-elect=false"),
)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """Every flag of `koordpy run` (defaults are None: what was not given is told apart)."""
    misc = parser.add_argument_group("kube-scheduler flags")
    misc.add_argument("--config", help="the KubeSchedulerConfiguration file")
    misc.add_argument(
        "--write-config-to",
        metavar="PATH",
        help="write the effective configuration to PATH as YAML and exit",
    )
    misc.add_argument("--master", help="the API server's address (overrides the server of the kubeconfig)")
    misc.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: clientConnection.kubeconfig, else in a pod its service "
        "account, else $KUBECONFIG or ~/.kube/config)",
    )
    misc.add_argument(
        "--kube-api-qps",
        type=parse_qps,
        metavar="QPS",
        help="API requests per second, client-side (50; ignored with --config: clientConnection.qps)",
    )
    misc.add_argument(
        "--kube-api-burst",
        type=parse_int32,
        metavar="N",
        help="API requests allowed in a burst (100; ignored with --config: clientConnection.burst)",
    )
    misc.add_argument(
        "--kube-api-content-type",
        metavar="TYPE",
        help="accepted for kube-scheduler's command lines; koordpy always speaks JSON",
    )
    misc.add_argument(
        "--secure-port",
        type=parse_port,
        metavar="PORT",
        help=f"port of /metrics, /healthz, /livez and /readyz ({DEFAULT_SECURE_PORT})",
    )
    misc.add_argument(
        "--bind-address",
        type=parse_ip,
        metavar="IP",
        help=f"address the secure port listens on ({DEFAULT_BIND_ADDRESS})",
    )
    misc.add_argument(
        "--pod-max-in-unschedulable-pods-duration",
        type=parse_flag_duration,
        metavar="DURATION",
        help="the longest a pod stays among the unschedulable before it is tried again (5m; applies "
        "with --config too, over podMaxInUnschedulablePodsDuration)",
    )
    for flag in ("--profiling", "--contention-profiling"):
        misc.add_argument(
            flag,
            type=parse_bool,
            nargs="?",
            const=True,
            metavar="BOOL",
            help="accepted: koordpy serves no /debug/pprof (true is said in a warning)",
        )
    misc.add_argument(
        "--feature-gates",
        type=parse_feature_gates,
        metavar="GATES",
        help="kube's feature gates (A=true,B=false): accepted, not acted on (a warning names them)",
    )
    # kube-scheduler's secure serving and authorization flags (koordpy.cluster.serving, .auth)
    serving = parser.add_argument_group("secure serving")
    serving.add_argument(
        "--tls-cert-file", metavar="FILE", help="the secure port's certificate (PEM, may hold the chain)"
    )
    serving.add_argument("--tls-private-key-file", metavar="FILE", help="the key of --tls-cert-file (PEM)")
    serving.add_argument(
        "--cert-dir",
        metavar="DIR",
        help="without --tls-cert-file: koordpy.crt and koordpy.key here, generated self-signed when "
        "absent (default: a self-signed certificate in memory)",
    )
    serving.add_argument(
        "--authorization-always-allow-paths",
        type=lambda text: tuple(p.strip() for p in text.split(",") if p.strip()),
        metavar="PATHS",
        help="paths anyone may get without the API server being asked (/healthz,/readyz,/livez)",
    )
    serving.add_argument(
        "--insecure-port",
        type=parse_port,
        metavar="PORT",
        help="also serve every path over plain HTTP, without authentication, on --bind-address (0: not)",
    )
    # apiserver's DelegatingAuthenticationOptions and DelegatingAuthorizationOptions
    delegated = parser.add_argument_group("delegated authentication and authorization (koordpy.cluster.auth)")
    delegated.add_argument(
        "--authentication-kubeconfig",
        metavar="FILE",
        help="kubeconfig whose credentials create tokenreviews.authentication.k8s.io (default: the "
        "scheduler's own credentials)",
    )
    delegated.add_argument(
        "--authorization-kubeconfig",
        metavar="FILE",
        help="kubeconfig whose credentials create subjectaccessreviews.authorization.k8s.io (default: "
        "the scheduler's own credentials)",
    )
    for flag, what in (
        ("--authentication-token-webhook-cache-ttl", "token reviews"),
        ("--authorization-webhook-cache-authorized-ttl", "access reviews that allowed"),
        ("--authorization-webhook-cache-unauthorized-ttl", "access reviews that denied"),
    ):
        delegated.add_argument(
            flag, type=parse_flag_duration, metavar="DURATION", help=f"how long {what} are cached (10s)"
        )
    for flag in ("--authentication-skip-lookup", "--authentication-tolerate-lookup-failure"):
        delegated.add_argument(
            flag,
            type=parse_bool,
            nargs="?",
            const=True,
            metavar="BOOL",
            help="accepted: koordpy looks up no client CA in the cluster (it authenticates bearer "
            "tokens only), so there is no lookup to skip or to fail",
        )
    delegated.add_argument(
        "--client-ca-file",
        metavar="FILE",
        help="accepted, not acted on: client certificates are not authenticated (a warning says so)",
    )
    for flag in REQUEST_HEADER_FLAGS:
        delegated.add_argument(
            flag,
            metavar="VALUE",
            help="accepted, not acted on: front-proxy authentication is not implemented (a warning says so)",
        )
    election = parser.add_argument_group("leader election (override the configuration's leaderElection)")
    election.add_argument(
        "--leader-elect",
        type=parse_bool,
        nargs="?",
        const=True,
        metavar="BOOL",
        help="schedule only while holding the Lease (true)",
    )
    for flag, default in (
        ("--leader-elect-lease-duration", "15s"),
        ("--leader-elect-renew-deadline", "10s"),
        ("--leader-elect-retry-period", "2s"),
    ):
        election.add_argument(flag, type=parse_flag_duration, metavar="DURATION", help=f"({default})")
    election.add_argument("--leader-elect-resource-lock", metavar="KIND", help=f"({LEASES}, the only one)")
    election.add_argument("--leader-elect-resource-name", metavar="NAME", help="the Lease's name (koordpy)")
    election.add_argument(
        "--leader-elect-resource-namespace", metavar="NAMESPACE", help="the Lease's namespace (kube-system)"
    )
    logs = parser.add_argument_group("logs")
    logs.add_argument(
        "-v",
        "--v",
        dest="v",
        type=parse_verbosity,
        metavar="LEVEL",
        help="log verbosity: 0 start-up, leadership and warnings; 2 every binding, failed attempt, "
        "preemption and gang decision; 4 debugging; 5-8 operator, API and library internals",
    )
    logs.add_argument("--logging-format", choices=("text", "json"), help="text (klog's, default) or json")
    logs.add_argument("--version", nargs="?", const="true", metavar="raw", help="print the version and exit")
    own = parser.add_argument_group("koordpy's own flags")
    own.add_argument("--context", help="kubeconfig context to use")
    own.add_argument("--identity", help="leader-election holder identity (default <hostname>_<uuid>)")
    own.add_argument(
        "--shutdown-timeout",
        type=parse_seconds,
        default=1.5,
        metavar="SECONDS",
        help="seconds SIGTERM waits for bindings in flight and then the queued status writes and "
        "events, before the lease is released and the process exits (1.5)",
    )
    own.add_argument(
        "--watch-idle-timeout",
        type=parse_positive_duration,
        metavar="DURATION",
        help="a watch that delivers nothing for this long (no event, no bookmark: the API server "
        "sends one about every minute) is given up and resumed, and /readyz fails while an informer "
        f"has not been heard from for longer ({go_duration(WATCH_IDLE_TIMEOUT)})",
    )
    own.add_argument(
        "--operators",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the PodGroup and ClusterNetworkTopology status operators in this process",
    )
    deprecated = parser.add_argument_group("deprecated (use the flag named in each)")
    deprecated.add_argument("--lease-duration", type=parse_seconds, help=argparse.SUPPRESS)
    deprecated.add_argument("--renew-deadline", type=parse_seconds, help=argparse.SUPPRESS)
    deprecated.add_argument("--retry-period", type=parse_seconds, help=argparse.SUPPRESS)
    deprecated.add_argument("--lease-name", help=argparse.SUPPRESS)
    deprecated.add_argument("--lease-namespace", help=argparse.SUPPRESS)
    deprecated.add_argument("--metrics-port", type=parse_port, help=argparse.SUPPRESS)
    deprecated.add_argument("--log-level", choices=tuple(LOG_LEVEL_VERBOSITY), help=argparse.SUPPRESS)
    deprecated.add_argument("--no-leader-elect", action="store_true", default=None, help=argparse.SUPPRESS)


def deprecation_warnings(args: argparse.Namespace) -> list[str]:
    """One line per deprecated flag given, as pflag writes kube's."""
    out = []
    for alias in ALIASES:
        if getattr(args, _dest(alias.old), None) is not None:
            how = f" ({alias.note})" if alias.note else ""
            out.append(
                f"Flag {alias.old} has been deprecated, use {alias.new}{how} instead; "
                "it will be removed in a future release"
            )
    return out


# ---------------------------------------------------------------------------------------------- resolving
@dataclass(frozen=True, slots=True)
class LogSettings:
    verbosity: int = 0
    format: str = "text"
    # the deprecated --log-level warning|error: nothing below it is written
    min_level: int = logging.NOTSET


def log_settings(args: argparse.Namespace) -> LogSettings:
    level = getattr(args, "log_level", None)
    v = getattr(args, "v", None)
    if v is None:
        v = LOG_LEVEL_VERBOSITY.get(level or "info", 0)
        floor = LOG_LEVEL_FLOOR.get(level or "", logging.NOTSET)
    else:
        floor = logging.NOTSET
    return LogSettings(v, getattr(args, "logging_format", None) or "text", floor)


@dataclass(slots=True)
class Resolved:
    """The configuration `koordpy run` runs (flags applied), and what to warn about."""

    config: SchedulerConfiguration
    warnings: list[str] = field(default_factory=list)


def _first(args: argparse.Namespace, new: str, old: str, convert: Callable[[Any], Any] = str) -> Any:
    value = getattr(args, new, None)
    if value is not None:
        return value
    legacy = getattr(args, old, None)
    return None if legacy is None else convert(legacy)


def _leader_election(args: argparse.Namespace, election: LeaderElection) -> LeaderElection:
    update: dict[str, Any] = {}
    elect = args.leader_elect
    if elect is None and args.no_leader_elect:
        elect = False
    if elect is not None:
        update["leaderElect"] = elect
    for new, old, key in (
        ("leader_elect_lease_duration", "lease_duration", "leaseDuration"),
        ("leader_elect_renew_deadline", "renew_deadline", "renewDeadline"),
        ("leader_elect_retry_period", "retry_period", "retryPeriod"),
    ):
        value = _first(args, new, old, go_duration)
        if value is not None:
            update[key] = value
    for new, old, key in (
        ("leader_elect_resource_name", "lease_name", "resourceName"),
        ("leader_elect_resource_namespace", "lease_namespace", "resourceNamespace"),
    ):
        value = _first(args, new, old)
        if value is not None:
            if not value:
                raise FlagError(f"--{new.replace('_', '-')} must not be empty")
            update[key] = value
    lock = args.leader_elect_resource_lock
    if lock is not None:
        if lock != LEASES:
            raise FlagError(
                f'--leader-elect-resource-lock: invalid lock-type "{lock}": koordpy holds a '
                f"coordination.k8s.io Lease ({LEASES})"
            )
        update["resourceLock"] = lock
    return election.model_copy(update=update) if update else election


def check_leader_election(election: LeaderElection, source: str = "") -> None:
    """kube's ValidateLeaderElectionConfiguration and client-go's NewLeaderElector checks, for an
    election that is on."""
    if not election.leaderElect:
        return
    lease, renew, retry = (
        parse_duration(election.leaseDuration),
        parse_duration(election.renewDeadline),
        parse_duration(election.retryPeriod),
    )
    problems = []
    for key, seconds in (("leaseDuration", lease), ("renewDeadline", renew), ("retryPeriod", retry)):
        if seconds <= 0:
            problems.append(Problem(f"leaderElection.{key}", "must be greater than zero"))
    if not problems and not lease > renew:
        problems.append(
            Problem(
                "leaderElection.leaseDuration",
                f"must be greater than renewDeadline ({election.leaseDuration} <= {election.renewDeadline})",
            )
        )
    if not problems and not renew > JITTER_FACTOR * retry:
        problems.append(
            Problem(
                "leaderElection.renewDeadline",
                f"must be greater than retryPeriod x {JITTER_FACTOR} ({election.renewDeadline} and "
                f"{election.retryPeriod})",
            )
        )
    if problems:
        raise ConfigError.of(problems, source)


def resolve(args: argparse.Namespace, config: SchedulerConfiguration, from_file: bool) -> Resolved:
    """kube-scheduler's precedence (the module's text) applied to the configuration read."""
    warnings: list[str] = []
    client = config.clientConnection
    client_update: dict[str, Any] = {}
    given = {
        flag: getattr(args, _dest(flag))
        for flag in ("--kube-api-qps", "--kube-api-burst", "--kube-api-content-type")
        if getattr(args, _dest(flag), None) is not None
    }
    if from_file:
        for flag in given:
            key = {"--kube-api-qps": "qps", "--kube-api-burst": "burst"}.get(flag, "contentType")
            warnings.append(
                f"{flag} is ignored because --config is given (as kube-scheduler ignores it): set "
                f"clientConnection.{key} in {args.config}"
            )
    else:
        if "--kube-api-qps" in given:
            client_update["qps"] = float(given["--kube-api-qps"])
        if "--kube-api-burst" in given:
            burst = int(given["--kube-api-burst"])
            if burst < 0:
                raise FlagError(f"--kube-api-burst must not be negative, got {burst}")
            client_update["burst"] = burst
        if "--kube-api-content-type" in given:
            client_update["contentType"] = given["--kube-api-content-type"]
            if given["--kube-api-content-type"] != JSON_CONTENT:
                warnings.append(
                    "--kube-api-content-type is not acted on: koordpy speaks JSON to the API server"
                )
    if args.kubeconfig:
        client_update["kubeconfig"] = args.kubeconfig
    if client_update:
        client = ClientConnection.model_validate({**client.model_dump(), **client_update})
    election = _leader_election(args, config.leaderElection)
    check_leader_election(election, args.config or "the leader-election flags")
    update: dict[str, Any] = {"clientConnection": client, "leaderElection": election}
    # options.go applies it apart from the configuration, so with --config as well
    unschedulable_for = getattr(args, "pod_max_in_unschedulable_pods_duration", None)
    if unschedulable_for is not None:
        update["podMaxInUnschedulablePodsDuration"] = parse_duration(unschedulable_for)
    effective = config.model_copy(update=update)
    return Resolved(effective, warnings + unsupported_flag_warnings(args))


def unsupported_flag_warnings(args: argparse.Namespace) -> list[str]:
    """One line per kind of thing asked for that koordpy does not do, naming the flags."""
    out = []
    profiling = [
        flag for flag in ("--profiling", "--contention-profiling") if getattr(args, _dest(flag), None)
    ]
    if profiling:
        out.append(
            f"{' and '.join(f'{flag}=true' for flag in profiling)} not acted on: koordpy serves no "
            "/debug/pprof profiling endpoints"
        )
    client_auth = [
        flag for flag in ("--client-ca-file", *REQUEST_HEADER_FLAGS) if getattr(args, _dest(flag), None)
    ]
    if client_auth:
        out.append(
            f"{', '.join(client_auth)} not acted on: client-certificate and front-proxy (request "
            "header) authentication are not implemented; the secure port authenticates bearer tokens "
            "only (TokenReview), and a request with a client certificate alone is anonymous"
        )
    gates = getattr(args, "feature_gates", None)
    if gates:
        named = ",".join(f"{name}={str(on).lower()}" for name, on in gates)
        out.append(
            f"--feature-gates not acted on: koordpy has none of kube-scheduler's feature gates ({named})"
        )
    return out


def effective_document(config: SchedulerConfiguration) -> dict[str, Any]:
    """The configuration as --write-config-to writes it: every field, defaults included."""
    document: dict[str, Any] = config.model_dump(mode="json", exclude_none=True)
    return document


def _seconds(flag_value: str | None, default: float) -> float:
    return default if flag_value is None else parse_duration(flag_value)


@dataclass(frozen=True, slots=True)
class ClusterTarget:
    """Which API server, with which credentials: all the informers' first lists need, known before
    the rest of `koordpy run` is imported."""

    kubeconfig: str | None
    context: str | None
    master: str | None


def cluster_target(args: argparse.Namespace, config: SchedulerConfiguration) -> ClusterTarget:
    return ClusterTarget(config.clientConnection.kubeconfig or None, args.context, args.master or None)


def run_options(args: argparse.Namespace, config: SchedulerConfiguration) -> RunOptions:
    from koordpy.cluster.app import RunOptions, default_identity

    election = config.leaderElection
    client = config.clientConnection
    target = cluster_target(args, config)
    secure_port = _first(args, "secure_port", "metrics_port", int)
    return RunOptions(
        config=config,
        kubeconfig=target.kubeconfig,
        master=target.master,
        context=target.context,
        qps=client.qps,
        burst=client.burst,
        leader_elect=election.leaderElect,
        lease_name=election.resourceName,
        lease_namespace=election.resourceNamespace,
        lease_duration=parse_duration(election.leaseDuration),
        renew_deadline=parse_duration(election.renewDeadline),
        retry_period=parse_duration(election.retryPeriod),
        bind_address=args.bind_address or DEFAULT_BIND_ADDRESS,
        secure_port=DEFAULT_SECURE_PORT if secure_port is None else secure_port,
        tls_cert_file=args.tls_cert_file or None,
        tls_private_key_file=args.tls_private_key_file or None,
        cert_dir=args.cert_dir or None,
        **(
            {}
            if args.authorization_always_allow_paths is None
            else {"always_allow_paths": args.authorization_always_allow_paths}
        ),
        insecure_port=args.insecure_port or 0,
        authentication_kubeconfig=args.authentication_kubeconfig or None,
        authorization_kubeconfig=args.authorization_kubeconfig or None,
        token_cache_ttl=_seconds(args.authentication_token_webhook_cache_ttl, TOKEN_CACHE_SECONDS),
        allowed_cache_ttl=_seconds(args.authorization_webhook_cache_authorized_ttl, ALLOWED_CACHE_SECONDS),
        denied_cache_ttl=_seconds(args.authorization_webhook_cache_unauthorized_ttl, DENIED_CACHE_SECONDS),
        shutdown_timeout=args.shutdown_timeout,
        watch_idle_timeout=_seconds(args.watch_idle_timeout, WATCH_IDLE_TIMEOUT),
        identity=args.identity or default_identity(),
        operators=args.operators,
    )
