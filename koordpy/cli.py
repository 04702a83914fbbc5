"""The `koordpy` command: simulate, run, operators, bench, version."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from koordpy import __version__
from koordpy.config.errors import ConfigError
from koordpy.config.models import SchedulerConfiguration, default_configuration, load_configuration

EXIT_INVALID_INPUT = 2


def _load_config(path: str | None) -> SchedulerConfiguration:
    return load_configuration(path) if path else default_configuration()


def cmd_simulate(args: argparse.Namespace) -> int:
    from koordpy.simulate.loader import ScenarioError, load_scenario
    from koordpy.simulate.report import render_json, render_table, render_yaml
    from koordpy.simulate.runner import simulate

    try:
        config = _load_config(args.config)
        # building the scheduler validates every profile and plugin args before anything runs
        from koordpy.framework.clock import VirtualClock
        from koordpy.plugins import registry
        from koordpy.scheduler import Scheduler

        Scheduler(config, registry(), VirtualClock())
    except ConfigError as err:
        source = err.source or args.config or "configuration"
        print(
            f"koordpy: invalid configuration: {source}: {err.path + ': ' if err.path else ''}{err.message}",
            file=sys.stderr,
        )
        return EXIT_INVALID_INPUT
    try:
        scenario = load_scenario(args.paths, stdin=sys.stdin)
    except ScenarioError as err:
        print(f"koordpy: invalid input: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    report = simulate(scenario, config, max_virtual_seconds=args.max_virtual_seconds)
    if args.output == "json":
        print(render_json(report))
    elif args.output == "yaml":
        print(render_yaml(report), end="")
    else:
        print(render_table(report))
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
    sim.set_defaults(func=cmd_simulate)

    ver = sub.add_parser("version", help="print the version")
    ver.set_defaults(func=cmd_version)

    for extra in _EXTRA_COMMANDS:
        extra(sub)
    return parser


# further subcommands (`run`, `operators`, ...) register themselves here
_EXTRA_COMMANDS: list[Callable[[Any], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
