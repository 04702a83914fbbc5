"""The `koordpy` command: simulate, run, operators, bench, version."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from koordpy import __version__
from koordpy.config.errors import ConfigError
from koordpy.config.models import SchedulerConfiguration, default_configuration, load_configuration

EXIT_FAILURE = 1
EXIT_INVALID_INPUT = 2


def _load_config(path: str | None) -> SchedulerConfiguration:
    return load_configuration(path) if path else default_configuration()


def _validate(config: SchedulerConfiguration) -> None:
    """Every profile and every plugin's args, checked before anything runs or connects."""
    from koordpy.framework.profile import validate_configuration
    from koordpy.plugins import registry

    validate_configuration(config, registry())


def _internal_error(err: BaseException) -> int:
    """A fault of koordpy's, not of the input: reported in one line, as every other outcome, with
    where it happened, and with the exit status a traceback would have had."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {os.path.relpath(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    detail = " ".join(str(err).split())[:300]
    print(
        f"koordpy: internal error{where}: {type(err).__name__}: {detail} (please report it)", file=sys.stderr
    )
    return EXIT_FAILURE


def cmd_simulate(args: argparse.Namespace) -> int:
    from koordpy.simulate.documents import check_yaml_file
    from koordpy.simulate.loader import MAX_OBJECTS, ScenarioError, load_scenario
    from koordpy.simulate.report import render_json, render_table, render_yaml
    from koordpy.simulate.runner import simulate

    max_objects = MAX_OBJECTS if args.max_objects is None else args.max_objects
    # a run that could never end (nan, inf) or makes no sense (negative) is refused up front
    if not 0 <= args.max_virtual_seconds < float("inf"):
        print(
            "koordpy: invalid option: --max-virtual-seconds must be a finite number of seconds >= 0, "
            f"got {args.max_virtual_seconds}",
            file=sys.stderr,
        )
        return EXIT_INVALID_INPUT
    if max_objects < 1:
        print(
            f"koordpy: invalid option: --max-objects must be at least 1, got {max_objects}", file=sys.stderr
        )
        return EXIT_INVALID_INPUT
    try:
        if args.config:
            # the configuration's reader composes and walks what it reads: bounded like the input
            check_yaml_file(args.config)
        config = _load_config(args.config)
        _validate(config)
    except ScenarioError as err:
        print(f"koordpy: invalid configuration: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except ConfigError as err:
        source = err.source or args.config or "configuration"
        print(
            f"koordpy: invalid configuration: {source}: {err.path + ': ' if err.path else ''}{err.message}",
            file=sys.stderr,
        )
        return EXIT_INVALID_INPUT
    except Exception as err:
        return _internal_error(err)
    try:
        scenario = load_scenario(args.paths, stdin=sys.stdin, max_objects=max_objects)
    except ScenarioError as err:
        print(f"koordpy: invalid input: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except MemoryError:
        print("koordpy: invalid input: the scenario does not fit in memory", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except Exception as err:
        return _internal_error(err)
    try:
        report = simulate(scenario, config, max_virtual_seconds=args.max_virtual_seconds)
        if args.output == "json":
            text = render_json(report)
        elif args.output == "yaml":
            text = render_yaml(report)
        else:
            text = render_table(report)
    except Exception as err:
        return _internal_error(err)
    # the YAML rendering ends its last line itself; the others are followed by an empty line
    print(text, end="" if args.output == "yaml" else "\n")
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    print(f"koordpy {__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="koordpy",
        description="A Kubernetes scheduler with gang scheduling, job-level preemption and "
        "network-topology-aware placement.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="run the scheduler over manifests on a virtual clock")
    sim.add_argument("paths", nargs="+", metavar="PATH", help="YAML file, directory, or - for stdin")
    sim.add_argument("--config", help="scheduler configuration (KubeSchedulerConfiguration)")
    sim.add_argument("--output", "-o", choices=("table", "json", "yaml"), default="table")
    sim.add_argument("--max-virtual-seconds", type=float, default=3600.0)
    sim.add_argument(
        "--max-objects",
        type=int,
        default=None,
        help="most objects a scenario may hold, the pods workloads create included (default 250000)",
    )
    sim.set_defaults(func=cmd_simulate)

    ver = sub.add_parser("version", help="print the version")
    ver.set_defaults(func=cmd_version)

    for extra in _EXTRA_COMMANDS:
        extra(sub)
    return parser


# further subcommands (`run`, `operators`, ...) register themselves here
_EXTRA_COMMANDS: list[Callable[[Any], None]] = []


_GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str, path: str) -> float:
    """Seconds in a Go duration string such as `15s`, `1m30s` or `500ms` (the configuration's
    leaderElection section is written in them)."""
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ConfigError(path, f"not a duration: {text!r} (write e.g. 15s, 1m30s, 500ms)")
    return sum(float(n) * _GO_DURATION_UNITS[u] for n, u in parts)


def cmd_run(args: argparse.Namespace) -> int:
    import logging

    try:
        config = _load_config(args.config)
        _validate(config)
        election = config.leaderElection
        lease_duration = args.lease_duration or parse_go_duration(
            election.leaseDuration, "leaderElection.leaseDuration"
        )
        renew_deadline = args.renew_deadline or parse_go_duration(
            election.renewDeadline, "leaderElection.renewDeadline"
        )
        retry_period = args.retry_period or parse_go_duration(
            election.retryPeriod, "leaderElection.retryPeriod"
        )
    except ConfigError as err:
        source = err.source or args.config or "configuration"
        print(
            f"koordpy: invalid configuration: {source}: {err.path + ': ' if err.path else ''}{err.message}",
            file=sys.stderr,
        )
        return EXIT_INVALID_INPUT
    leader_elect = election.leaderElect if args.leader_elect is None else args.leader_elect
    if leader_elect and not lease_duration > renew_deadline > 1.2 * retry_period > 0:
        print(
            "koordpy: invalid leader election timing: need lease duration > renew deadline > "
            f"1.2 x retry period > 0 (got {lease_duration}s, {renew_deadline}s, {retry_period}s)",
            file=sys.stderr,
        )
        return EXIT_INVALID_INPUT
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    from koordpy.cluster.app import RunOptions, default_identity, run

    options = RunOptions(
        config=config,
        kubeconfig=args.kubeconfig,
        context=args.context,
        leader_elect=leader_elect,
        lease_name=args.lease_name or election.resourceName,
        lease_namespace=args.lease_namespace or election.resourceNamespace,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        bind_address=args.bind_address,
        metrics_port=args.metrics_port,
        shutdown_timeout=args.shutdown_timeout,
        identity=args.identity or default_identity(),
        operators=args.operators,
    )
    import uvloop

    # the cluster world is bound by the event loop's cost per request: uvloop's is a fraction of
    # asyncio's own
    return uvloop.run(run(options))


def _add_run_command(sub: Any) -> None:
    run = sub.add_parser("run", help="schedule the pods of a Kubernetes cluster")
    run.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)"
    )
    run.add_argument("--context", help="kubeconfig context to use")
    run.add_argument("--config", help="scheduler configuration (KubeSchedulerConfiguration)")
    run.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run only while holding the Lease (default: the configuration's leaderElection)",
    )
    run.add_argument("--lease-name", help="name of the Lease (default koordpy)")
    run.add_argument("--lease-namespace", help="namespace of the Lease (default kube-system)")
    run.add_argument("--lease-duration", type=float, help="seconds a standby waits before taking over (15)")
    run.add_argument("--renew-deadline", type=float, help="seconds the leader keeps trying to renew (10)")
    run.add_argument("--retry-period", type=float, help="seconds between lease attempts (2)")
    run.add_argument("--identity", help="leader-election holder identity (default <hostname>_<uuid>)")
    run.add_argument("--bind-address", default="0.0.0.0", help="address of /metrics, /healthz, /readyz")
    run.add_argument("--metrics-port", type=int, default=10259, help="port of /metrics, /healthz, /readyz")
    run.add_argument(
        "--shutdown-timeout",
        type=float,
        default=15.0,
        help="seconds to wait for bindings in flight on SIGTERM",
    )
    run.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    run.add_argument(
        "--operators",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the PodGroup and ClusterNetworkTopology status operators in this process",
    )
    run.set_defaults(func=cmd_run)


_EXTRA_COMMANDS.append(_add_run_command)


def cmd_operators(args: argparse.Namespace) -> int:
    import logging

    from operators import main as run_operators

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return run_operators(args.kubeconfig, args.context)


def _add_operators_command(sub: Any) -> None:
    ops = sub.add_parser("operators", help="keep PodGroup and ClusterNetworkTopology status up to date")
    ops.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)"
    )
    ops.add_argument("--context", help="kubeconfig context to use")
    ops.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    ops.set_defaults(func=cmd_operators)


_EXTRA_COMMANDS.append(_add_operators_command)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # the reader went away (`koordpy simulate ... | head`): not an error of ours; keep the
        # interpreter from complaining again while it flushes stdout on exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
