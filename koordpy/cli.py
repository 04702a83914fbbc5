"""The `koordpy` command: simulate, run, operators, bench, version."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from koordpy import __version__
from koordpy.config.errors import ConfigError
from koordpy.config.known_plugins import ALLOW_UNSUPPORTED_FLAG

if TYPE_CHECKING:
    from koordpy.cluster.flags import ClusterTarget
    from koordpy.cluster.snapshot import ConfigurationFound
    from koordpy.config.models import SchedulerConfiguration
    from koordpy.framework.profile import CheckedConfiguration
    from koordpy.kubeapi.prefetch import FirstLists

EXIT_FAILURE = 1
EXIT_INVALID_INPUT = 2


def _load_config(path: str | None, allow_unsupported_plugins: bool) -> CheckedConfiguration:
    """The configuration koordpy runs, every problem of the file raised at once in one
    ConfigError before anything runs or connects."""
    from koordpy.config.models import load_document, read_configuration
    from koordpy.framework.profile import check_configuration
    from koordpy.plugins import registry

    reading = read_configuration(load_document(path) if path else None, path or "")
    return check_configuration(reading, registry(), allow_unsupported_plugins)


def _config_error(err: ConfigError, path: str | None) -> int:
    # each problem on a line of its own, so that one run shows everything there is to fix
    print(
        f"koordpy: invalid configuration: {err.render(err.source or path or 'configuration')}",
        file=sys.stderr,
    )
    return EXIT_INVALID_INPUT


def _add_allow_unsupported(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        ALLOW_UNSUPPORTED_FLAG,
        action="store_true",
        help="start without the plugins of koord-scheduler, scheduler-plugins or kube-scheduler that "
        "koordpy does not support (and their pluginConfig), with one warning naming them",
    )


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
    from koordpy.simulate.runner import DEFAULT_MAX_VIRTUAL_SECONDS, ProgressLine, simulate

    if args.max_virtual_seconds is None:
        args.max_virtual_seconds = DEFAULT_MAX_VIRTUAL_SECONDS
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
    if args.from_cluster:
        return cmd_dry_run(args, max_objects)
    if code := _dry_run_flags_alone(args):
        return code
    try:
        if args.config:
            # the configuration's reader composes and walks what it reads: bounded like the input
            check_yaml_file(args.config)
        checked = _load_config(args.config, args.allow_unsupported_plugins)
    except ScenarioError as err:
        print(f"koordpy: invalid configuration: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except ConfigError as err:
        return _config_error(err, args.config)
    except Exception as err:
        return _internal_error(err)
    config = checked.config
    for warning in checked.notices.warnings():
        print(f"koordpy: warning: {warning}", file=sys.stderr)
    # a terminal that waits more than a couple of seconds is told how far the run is
    with ProgressLine(sys.stderr) as progress:
        progress.stage("reading the input")
        try:
            scenario = load_scenario(args.paths, stdin=sys.stdin, max_objects=max_objects)
        except ScenarioError as err:
            progress.close()
            print(f"koordpy: invalid input: {err}", file=sys.stderr)
            return EXIT_INVALID_INPUT
        except MemoryError:
            progress.close()
            print("koordpy: invalid input: the scenario does not fit in memory", file=sys.stderr)
            return EXIT_INVALID_INPUT
        except Exception as err:
            progress.close()
            return _internal_error(err)
        try:
            report = simulate(
                scenario, config, max_virtual_seconds=args.max_virtual_seconds, progress=progress
            )
        except Exception as err:
            progress.close()
            return _internal_error(err)
    try:
        if args.output == "json":
            text = render_json(report)
        elif args.output == "yaml":
            text = render_yaml(report)
        else:
            text = render_table(report)
    except Exception as err:
        return _internal_error(err)
    if args.html:
        from koordpy.simulate.html import write_html

        try:
            write_html(report.to_dict(), args.html)
        except OSError as err:
            print(f"koordpy: cannot write --html {args.html}: {err.strerror or err}", file=sys.stderr)
            return EXIT_FAILURE
    # the YAML rendering ends its last line itself; the others are followed by an empty line
    print(text, end="" if args.output == "yaml" else "\n")
    cut = report.extras.get("cutOff")
    if isinstance(cut, dict):
        print(f"koordpy: warning: {cut['message']}", file=sys.stderr)
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
    _add_allow_unsupported(sim)
    _add_dry_run_flags(sim)
    sim.add_argument("--output", "-o", choices=("table", "json", "yaml"), default="table")
    sim.add_argument(
        "--max-virtual-seconds",
        type=float,
        default=None,
        metavar="N",
        help="stop the virtual clock at N seconds (default 604800, a week); a run cut there says so "
        "on stderr and in the report's cutOff",
    )
    sim.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report as a self-contained page: the timeline as charts, the per-pod table",
    )
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


def _load_run_config(path: str | None, allow_unsupported_plugins: bool) -> CheckedConfiguration:
    """The file's configuration; without one, kube-scheduler's v1 defaults serving koordpy's own
    profile alone (`default-scheduler` is the cluster's kube-scheduler's)."""
    from koordpy.cluster.flags import RUN_PROFILE
    from koordpy.config.models import read_configuration
    from koordpy.framework.profile import check_configuration
    from koordpy.plugins import registry
    from koordpy.simulate.documents import check_yaml_file

    if path:
        # the reader composes and walks the file: held to the bounds every YAML input is
        check_yaml_file(path)
        return _load_config(path, allow_unsupported_plugins)
    reading = read_configuration({"profiles": [{"schedulerName": RUN_PROFILE}]})
    return check_configuration(reading, registry(), allow_unsupported_plugins)


def cmd_run(args: argparse.Namespace) -> int:
    from koordpy import logs
    from koordpy.cluster import flags
    from koordpy.simulate.loader import ScenarioError

    if args.version is not None:
        print(f"koordpy {__version__}")
        return 0
    # as pflag does, before anything else is read
    for line in flags.deprecation_warnings(args):
        print(line, file=sys.stderr)
    try:
        checked = _load_run_config(args.config, args.allow_unsupported_plugins)
        resolved = flags.resolve(args, checked.config, from_file=bool(args.config))
    except ScenarioError as err:
        print(f"koordpy: invalid configuration: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except ConfigError as err:
        return _config_error(err, args.config)
    except flags.FlagError as err:
        print(f"koordpy: invalid flag: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except Exception as err:
        return _internal_error(err)
    settings = flags.log_settings(args)
    logs.configure(settings.verbosity, settings.format, min_level=settings.min_level)
    log = logs.get("koordpy.config")
    for warning in [*checked.notices.warnings(), *resolved.warnings]:
        log.warning(warning)
    for info in checked.notices.info():
        log.info(info)
    if args.write_config_to or logs.enabled(2):
        text = _config_yaml(flags.effective_document(resolved.config))
        if v2 := log.v(2):
            v2.info("Using component config", config=text)
        if args.write_config_to:
            try:
                with open(args.write_config_to, "w") as out:
                    out.write(text)
            except OSError as err:
                print(
                    f"koordpy: cannot write the configuration to {args.write_config_to}: {err.strerror}",
                    file=sys.stderr,
                )
                return EXIT_FAILURE
            log.info("Wrote configuration", file=args.write_config_to)
            return 0
    return _serve(args, resolved.config)


def _config_yaml(document: Any) -> str:
    import yaml

    return str(yaml.safe_dump(document, sort_keys=False))


def _serve(args: argparse.Namespace, config: SchedulerConfiguration) -> int:
    from koordpy.cluster.flags import cluster_target, run_options

    try:
        # nothing is scheduled before every informer has listed: the lists are asked for now,
        # from a thread of their own, while the rest of the scheduler is imported and built
        early = _first_lists(cluster_target(args, config), all_pods=args.operators)
        import uvloop

        from koordpy.cluster.app import StartupError, run

        options = run_options(args, config)
    except Exception as err:
        return _internal_error(err)
    try:
        # the cluster world is bound by the event loop's cost per request: uvloop's is a fraction
        # of asyncio's own
        return int(uvloop.run(run(options, early)))
    except StartupError as err:
        print(f"koordpy: {err}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        return 0
    except Exception as err:
        return _internal_error(err)


def _first_lists(target: ClusterTarget, *, all_pods: bool) -> FirstLists:
    from koordpy.kubeapi.client import USER_AGENT
    from koordpy.kubeapi.informer import PAGE_SIZE, watched
    from koordpy.kubeapi.prefetch import FirstLists

    return FirstLists(
        watched(all_pods=all_pods),
        kubeconfig=target.kubeconfig,
        context=target.context,
        master=target.master,
        user_agent=USER_AGENT,
        page_size=PAGE_SIZE,
    ).start()


def _one_line_errors(parser: argparse.ArgumentParser) -> None:
    """A flag kube-scheduler would refuse stops start-up with one line and exit status 2."""

    def error(message: str) -> NoReturn:
        parser.exit(EXIT_INVALID_INPUT, f"koordpy: invalid flag: {message} (see koordpy run --help)\n")

    setattr(parser, "error", error)  # noqa: B010 - an instance's own error(), not the class's


def _add_run_command(sub: Any) -> None:
    from koordpy.cluster.flags import add_run_flags

    run = sub.add_parser(
        "run",
        help="schedule the pods of a Kubernetes cluster",
        description="Flags are kube-scheduler's (--config, --kubeconfig, --leader-elect*, --secure-port, "
        "-v, ...); the older koordpy names still work, with a deprecation warning.",
        # pflag takes no abbreviations: --lease would not mean --leader-elect-lease-duration
        allow_abbrev=False,
    )
    add_run_flags(run)
    _add_allow_unsupported(run)
    _one_line_errors(run)
    run.set_defaults(func=cmd_run)


_EXTRA_COMMANDS.append(_add_run_command)


def cmd_operators(args: argparse.Namespace) -> int:
    from koordpy import logs
    from koordpy.cluster import flags
    from operators import main as run_operators

    for line in flags.deprecation_warnings(args):
        print(line, file=sys.stderr)
    settings = flags.log_settings(args)
    logs.configure(settings.verbosity, settings.format, min_level=settings.min_level)
    return run_operators(args.kubeconfig, args.context)


def _add_operators_command(sub: Any) -> None:
    ops = sub.add_parser("operators", help="keep PodGroup and ClusterNetworkTopology status up to date")
    ops.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)"
    )
    ops.add_argument("--context", help="kubeconfig context to use")
    ops.add_argument("-v", "--v", dest="v", type=int, metavar="LEVEL", help="log verbosity (0)")
    ops.add_argument("--logging-format", choices=("text", "json"), help="text (klog's, default) or json")
    ops.add_argument("--log-level", choices=("debug", "info", "warning", "error"), help=argparse.SUPPRESS)
    ops.set_defaults(func=cmd_operators)


_EXTRA_COMMANDS.append(_add_operators_command)


# ------------------------------------------------------------------------------------- the live cluster
def _add_cluster_flags(container: Any, *, configmap_help: str) -> None:
    container.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)"
    )
    container.add_argument("--context", help="kubeconfig context to use")
    container.add_argument("--configmap", metavar="NS/NAME[:KEY]", help=configmap_help)


_DRY_RUN_ONLY = ("kubeconfig", "context", "configmap", "all")


def _add_dry_run_flags(sim: argparse.ArgumentParser) -> None:
    group = sim.add_argument_group(
        "dry run against a live cluster",
        "with --from-cluster, the PATHs are manifests to submit: the cluster is read (read-only) and "
        "the report tells where their pods would go and what they would preempt (docs/dry-run.md)",
    )
    group.add_argument(
        "--from-cluster",
        action="store_true",
        help="schedule the manifests on a snapshot of the live cluster, taken in memory",
    )
    _add_cluster_flags(
        group,
        configmap_help="the ConfigMap holding koordpy's configuration (default: the one the chart's "
        "scheduler pods mount; --config takes precedence)",
    )
    group.add_argument(
        "--all", action="store_true", help="report every pod of the cluster, not only the new ones"
    )


def _configmap_flag(configmap: str | None) -> int:
    """A --configmap that names no ConfigMap is refused before the cluster is asked, as a --config
    that names no file is: exit status 2."""
    from koordpy.cluster.snapshot import SnapshotError, parse_configmap_ref

    if configmap is None:
        return 0
    try:
        parse_configmap_ref(configmap)
    except SnapshotError as err:
        print(f"koordpy: invalid option: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    return 0


def _dry_run_flags_alone(args: argparse.Namespace) -> int:
    """A cluster flag without --from-cluster would be silently ignored: refused instead."""
    given = [f"--{name}" for name in _DRY_RUN_ONLY if getattr(args, name, None)]
    if not given:
        return 0
    print(
        f"koordpy: invalid option: {', '.join(given)} can only be used with --from-cluster", file=sys.stderr
    )
    return EXIT_INVALID_INPUT


@dataclass(slots=True)
class _ClusterRead:
    checked: CheckedConfiguration
    source: str
    text: str | None
    warnings: list[str]
    summary: str
    allow_unsupported_plugins: bool


def _checked_cluster_config(
    found: ConfigurationFound, allow_unsupported_plugins: bool
) -> CheckedConfiguration:
    from koordpy.config.models import read_configuration
    from koordpy.framework.profile import check_configuration
    from koordpy.plugins import registry

    if found.document is None:
        return _load_run_config(None, allow_unsupported_plugins)
    reading = read_configuration(found.document, found.source)
    allow = allow_unsupported_plugins or found.allow_unsupported_plugins
    return check_configuration(reading, registry(), allow)


async def _read_cluster(args: argparse.Namespace, emit: Callable[[dict[str, Any]], object]) -> _ClusterRead:
    """The configuration koordpy runs with in the cluster (or --config's), then every object the
    scheduler reads, handed to `emit`."""
    import time
    from pathlib import Path

    from koordpy.cluster.snapshot import ConfigurationFound, read_configuration_in_use, take_snapshot
    from koordpy.config.models import load_document
    from koordpy.kubeapi import KubeApi

    api = await KubeApi.connect(args.kubeconfig, args.context)
    try:
        if args.config:
            found = ConfigurationFound(
                load_document(args.config), Path(args.config).read_text(), f"--config {args.config}"
            )
        else:
            try:
                found = await read_configuration_in_use(api, args.configmap)
            except ValueError as err:
                # what YAML's constructor refuses in the ConfigMap (an integer of thousands of
                # digits): the configuration's fault, as in a --config file
                raise ConfigError("", f"cannot read the configuration: {err}", args.configmap or "") from None
        checked = _checked_cluster_config(found, args.allow_unsupported_plugins)
        names = [profile.schedulerName for profile in checked.config.profiles]
        summary = await take_snapshot(api, emit, names, time.time())
    finally:
        await api.close()
    return _ClusterRead(
        checked,
        found.source or "koordpy run's defaults: no configuration found in the cluster",
        found.text,
        summary.warnings,
        summary.line(),
        args.allow_unsupported_plugins or found.allow_unsupported_plugins,
    )


def _cluster_errors(run: Callable[[], int], config: str | None) -> int:
    """What reading a cluster may fail with, each in one line."""
    from koordpy.cluster.snapshot import InvalidConfigMap, SnapshotError
    from koordpy.kubeapi import CredentialsError
    from koordpy.simulate.documents import ScenarioError

    try:
        return run()
    except ConfigError as err:
        return _config_error(err, config)
    except (ScenarioError, InvalidConfigMap) as err:
        print(f"koordpy: invalid configuration: {err}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except (SnapshotError, CredentialsError) as err:
        print(f"koordpy: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as err:
        return _internal_error(err)


def cmd_dry_run(args: argparse.Namespace, max_objects: int) -> int:
    import asyncio
    import io

    from koordpy.cluster.snapshot import dump_document
    from koordpy.simulate.documents import STDIN, STDIN_LABEL, ScenarioError, check_yaml_file
    from koordpy.simulate.dryrun import (
        dry_run,
        new_pod_keys,
        render_dry_run_json,
        render_dry_run_table,
        render_dry_run_yaml,
    )
    from koordpy.simulate.loader import load_scenario

    if STDIN in args.paths:
        print("koordpy: invalid input: with --from-cluster, name the manifests as files", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if args.config and args.configmap:
        print("koordpy: invalid option: --config and --configmap exclude each other", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if code := _configmap_flag(args.configmap):
        return code
    if getattr(args, "html", None):
        print("koordpy: invalid option: --html does not go with --from-cluster", file=sys.stderr)
        return EXIT_INVALID_INPUT
    documents: list[str] = []

    def read() -> int:
        if args.config:
            check_yaml_file(args.config)
        found = asyncio.run(_read_cluster(args, lambda obj: documents.append(dump_document(obj))))
        for warning in [*found.checked.notices.warnings(), *found.warnings]:
            print(f"koordpy: warning: {warning}", file=sys.stderr)
        reads.append(found)
        return 0

    reads: list[_ClusterRead] = []
    if code := _cluster_errors(read, args.config):
        return code
    cluster = reads[0]
    snapshot = io.StringIO("".join(documents))
    documents.clear()
    try:
        scenario = load_scenario([STDIN, *args.paths], stdin=snapshot, max_objects=max_objects)
    except ScenarioError as err:
        where = "the cluster snapshot" if err.file == STDIN_LABEL else "invalid input"
        print(f"koordpy: {where}: {str(err).replace(STDIN_LABEL, '<cluster>')}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except Exception as err:
        return _internal_error(err)
    try:
        report = dry_run(
            scenario,
            cluster.checked.config,
            new_pod_keys(scenario, STDIN_LABEL),
            everything=args.all,
            max_virtual_seconds=args.max_virtual_seconds,
            configuration=cluster.source,
        )
        if args.output == "json":
            text = render_dry_run_json(report)
        elif args.output == "yaml":
            text = render_dry_run_yaml(report)
        else:
            text = render_dry_run_table(report)
    except Exception as err:
        return _internal_error(err)
    print(text, end="")
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    import asyncio

    from koordpy.cluster.snapshot import config_beside, dump_document
    from koordpy.simulate.documents import check_yaml_file

    if args.config and args.configmap:
        print("koordpy: invalid option: --config and --configmap exclude each other", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if code := _configmap_flag(args.configmap):
        return code
    target = args.output if args.output and args.output != "-" else None
    # written beside and renamed at the end: a snapshot that fails half-way leaves no half file
    partial = f"{target}.partial" if target else None
    try:
        out = open(partial, "w") if partial else sys.stdout  # noqa: SIM115 - closed below
    except OSError as err:
        print(f"koordpy: cannot write {target}: {err.strerror}", file=sys.stderr)
        return EXIT_FAILURE
    reads: list[_ClusterRead] = []

    def read() -> int:
        if args.config:
            check_yaml_file(args.config)
        out.write("# koordpy snapshot: load it with `koordpy simulate`; the header below says how\n")
        reads.append(asyncio.run(_read_cluster(args, lambda obj: out.write(dump_document(obj)))))
        return 0

    try:
        code = _cluster_errors(read, args.config)
    finally:
        if out is not sys.stdout:
            out.close()
    if code:
        if partial:
            with contextlib.suppress(OSError):
                os.remove(partial)
        return code
    cluster = reads[0]
    for warning in [*cluster.checked.notices.warnings(), *cluster.warnings]:
        print(f"koordpy: warning: {warning}", file=sys.stderr)
    command = f"koordpy simulate {target or 'FILE'}"
    if target and partial:
        os.replace(partial, target)
        if cluster.text is not None:
            beside = config_beside(target)
            with open(beside, "w") as config_out:
                config_out.write(cluster.text)
            command += f" --config {beside}"
    elif cluster.text is not None:
        print(
            f"koordpy: the configuration ({cluster.source}) is not written with a snapshot on standard "
            "output: give -o FILE to have it written beside as FILE.config.yaml",
            file=sys.stderr,
        )
    if cluster.allow_unsupported_plugins:
        command += f" {ALLOW_UNSUPPORTED_FLAG}"
    print(f"koordpy: snapshot of {cluster.summary or 'an empty cluster'}", file=sys.stderr)
    print(f"koordpy: configuration: {cluster.source}", file=sys.stderr)
    print(f"koordpy: simulate it with: {command}", file=sys.stderr)
    return 0


def _add_snapshot_command(sub: Any) -> None:
    snap = sub.add_parser(
        "snapshot",
        help="write a live cluster (read-only) as a scenario that `koordpy simulate` loads",
        description="Reads nodes, pods (on nodes, and pending for koordpy's profiles), PriorityClasses, "
        "PodGroups, PodDisruptionBudgets, the storage objects (StorageClasses, CSIDrivers, CSINodes, "
        "PersistentVolumes and their claims, CSIStorageCapacities), the ClusterNetworkTopology, "
        "ElasticQuotas and koordpy's "
        "configuration, keeping only what scheduling reads. The configuration goes beside the "
        "scenario, as FILE.config.yaml.",
    )
    _add_cluster_flags(
        snap,
        configmap_help="the ConfigMap holding koordpy's configuration (default: the one the chart's "
        "scheduler pods mount)",
    )
    snap.add_argument(
        "--config", help="the scheduler configuration to write beside, instead of the cluster's"
    )
    _add_allow_unsupported(snap)
    snap.add_argument("-o", "--output", metavar="FILE", help="the scenario file (default: standard output)")
    snap.set_defaults(func=cmd_snapshot)


_EXTRA_COMMANDS.append(_add_snapshot_command)


def main(argv: Sequence[str] | None = None) -> int:
    if (sys.argv[1:2] if argv is None else list(argv[:1])) == ["run"]:
        # `koordpy run` builds a great many long-lived objects as it starts (its modules, then the
        # cluster's objects, thousands of pods): the cyclic collector would walk them over and
        # over, a fifth of the start-up's CPU. It waits until the scheduler has synced, which
        # then takes what start-up built out of its walks (koordpy.cluster.app)
        gc.disable()
    try:
        return _main(argv)
    finally:
        gc.enable()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        if args.command == "run":
            print(
                f"koordpy: invalid flag: unknown flag {extras[0]} (see koordpy run --help)",
                file=sys.stderr,
            )
            return EXIT_INVALID_INPUT
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # the reader went away (`koordpy simulate ... | head`): not an error of ours; keep the
        # interpreter from complaining again while it flushes stdout on exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
