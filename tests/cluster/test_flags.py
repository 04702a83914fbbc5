"""`koordpy run`'s flags are kube-scheduler's (cmd/kube-scheduler/app/options: options.go,
deprecated.go; component-base's leader-election and logs flags), with its precedence: the
leader-election flags override the configuration file, the deprecated client flags apply only
without one. koordpy's earlier names keep working with a deprecation warning. Start-up problems
are one line on standard error and an exit status."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from koordpy.cli import _load_run_config, build_parser, main
from koordpy.cluster import flags
from koordpy.cluster.app import RunOptions, StartupError, run
from koordpy.cluster.serving import generate_self_signed
from koordpy.config.models import read_configuration
from tests.support.controlplane import free_port
from tests.support.polling import eventually

V1 = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def resolve(argv: list[str], tmp_path: Path, config: dict[str, Any] | None = None) -> tuple[RunOptions, Any]:
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({**V1, **config}))
        argv = ["--config", str(path), *argv]
    args = build_parser().parse_args(["run", *argv])
    checked = _load_run_config(args.config, args.allow_unsupported_plugins)
    resolved = flags.resolve(args, checked.config, from_file=bool(args.config))
    return flags.run_options(args, resolved.config), resolved


def fields(options: RunOptions, names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(options, n) for n in names)


# ---------------------------------------------------------------------------------------------- defaults
def test_without_flags_kube_schedulers_v1_defaults_apply_with_koordpys_lease(tmp_path: Path) -> None:
    options, _ = resolve([], tmp_path)
    assert (
        options.leader_elect,
        options.lease_name,
        options.lease_namespace,
        options.lease_duration,
        options.renew_deadline,
        options.retry_period,
        options.secure_port,
        options.bind_address,
        options.qps,
        options.burst,
        options.kubeconfig,
        options.master,
    ) == (True, "koordpy", "kube-system", 15.0, 10.0, 2.0, 10259, "0.0.0.0", 50.0, 100, None, None)
    # default-scheduler is the cluster's own scheduler's
    assert [p.schedulerName for p in options.config.profiles] == ["koord-scheduler"]


# ---------------------------------------------------------------------------------------------- kube's flags
@pytest.mark.parametrize(
    ("argv", "names", "values"),
    [
        (["--kubeconfig=/etc/k.conf"], ("kubeconfig",), ("/etc/k.conf",)),
        (["--master", "https://10.0.0.1:6443"], ("master",), ("https://10.0.0.1:6443",)),
        (["--leader-elect=false"], ("leader_elect",), (False,)),
        (["--leader-elect"], ("leader_elect",), (True,)),
        (["--leader-elect-lease-duration=1m"], ("lease_duration",), (60.0,)),
        (["--leader-elect-renew-deadline=12s"], ("renew_deadline",), (12.0,)),
        (["--leader-elect-retry-period=500ms"], ("retry_period",), (0.5,)),
        (["--leader-elect-resource-name=mine"], ("lease_name",), ("mine",)),
        (["--leader-elect-resource-namespace", "sched"], ("lease_namespace",), ("sched",)),
        (["--leader-elect-resource-lock=leases"], ("leader_elect",), (True,)),
        (["--secure-port=10300"], ("secure_port",), (10300,)),
        (["--bind-address=127.0.0.1"], ("bind_address",), ("127.0.0.1",)),
        (["--kube-api-qps=100"], ("qps",), (100.0,)),
        (["--kube-api-burst=200"], ("burst",), (200,)),
    ],
)
def test_each_kube_scheduler_flag_sets_its_option(
    tmp_path: Path, argv: list[str], names: tuple[str, ...], values: tuple[Any, ...]
) -> None:
    options, _ = resolve(argv, tmp_path)
    assert fields(options, names) == values
    assert flags.deprecation_warnings(build_parser().parse_args(["run", *argv])) == []


@pytest.mark.parametrize(
    ("argv", "verbosity", "fmt"),
    [
        ([], 0, "text"),
        (["-v=2"], 2, "text"),
        (["-v", "4"], 4, "text"),
        (["--v=3"], 3, "text"),
        (["--logging-format=json"], 0, "json"),
    ],
)
def test_log_flags(argv: list[str], verbosity: int, fmt: str) -> None:
    settings = flags.log_settings(build_parser().parse_args(["run", *argv]))
    assert (settings.verbosity, settings.format) == (verbosity, fmt)


# ---------------------------------------------------------------------------------------------- aliases
@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        (["--lease-duration", "30"], ["--leader-elect-lease-duration=30s"], ("lease_duration",)),
        (["--renew-deadline", "7.5"], ["--leader-elect-renew-deadline=7.5s"], ("renew_deadline",)),
        (["--retry-period", "0.5"], ["--leader-elect-retry-period=500ms"], ("retry_period",)),
        (["--lease-name", "mine"], ["--leader-elect-resource-name=mine"], ("lease_name",)),
        (["--lease-namespace", "sched"], ["--leader-elect-resource-namespace=sched"], ("lease_namespace",)),
        (["--metrics-port", "10300"], ["--secure-port=10300"], ("secure_port",)),
        (["--no-leader-elect"], ["--leader-elect=false"], ("leader_elect",)),
    ],
)
def test_each_earlier_flag_still_works_and_names_its_replacement(
    tmp_path: Path, old: list[str], new: list[str], names: tuple[str, ...]
) -> None:
    assert fields(resolve(old, tmp_path)[0], names) == fields(resolve(new, tmp_path)[0], names)
    (warning,) = flags.deprecation_warnings(build_parser().parse_args(["run", *old]))
    replacement = new[0].split("=")[0]
    assert warning.startswith(f"Flag {old[0]} has been deprecated, use {replacement}")


@pytest.mark.parametrize(("level", "verbosity"), [("debug", 4), ("info", 0), ("warning", 0), ("error", 0)])
def test_the_earlier_log_level_is_a_verbosity(level: str, verbosity: int) -> None:
    args = build_parser().parse_args(["run", "--log-level", level])
    assert flags.log_settings(args).verbosity == verbosity
    (warning,) = flags.deprecation_warnings(args)
    assert warning.startswith("Flag --log-level has been deprecated, use -v")


def test_the_kube_flag_wins_over_its_earlier_name(tmp_path: Path) -> None:
    options, _ = resolve(["--lease-name", "old", "--leader-elect-resource-name=new"], tmp_path)
    assert options.lease_name == "new"


# ---------------------------------------------------------------------------------------------- precedence
@pytest.mark.parametrize(
    ("config", "argv", "names", "values"),
    [
        # leaderElect defaults to true in a v1 file too
        pytest.param({}, [], ("leader_elect",), (True,), id="file-defaults-elect"),
        pytest.param(
            {"leaderElection": {"leaderElect": False}},
            [],
            ("leader_elect",),
            (False,),
            id="file-turns-it-off",
        ),
        # the leader-election flags override the file (ApplyLeaderElectionTo, with --config too)
        pytest.param(
            {"leaderElection": {"leaderElect": False, "leaseDuration": "30s", "resourceName": "file"}},
            ["--leader-elect", "--leader-elect-lease-duration=20s", "--leader-elect-resource-name=flag"],
            ("leader_elect", "lease_duration", "lease_name"),
            (True, 20.0, "flag"),
            id="election-flags-override-the-file",
        ),
        # the deprecated client flags are ignored with --config (ApplyDeprecated only without it)
        pytest.param(
            {"clientConnection": {"qps": 10, "burst": 20}},
            ["--kube-api-qps=100", "--kube-api-burst=200"],
            ("qps", "burst"),
            (10.0, 20),
            id="client-flags-ignored-with-a-file",
        ),
        pytest.param(
            {"clientConnection": {"kubeconfig": "/etc/file.conf"}},
            [],
            ("kubeconfig",),
            ("/etc/file.conf",),
            id="file-kubeconfig",
        ),
        # koordpy's choice: --kubeconfig is honoured with --config as well
        pytest.param(
            {"clientConnection": {"kubeconfig": "/etc/file.conf"}},
            ["--kubeconfig=/home/me/.kube/config"],
            ("kubeconfig",),
            ("/home/me/.kube/config",),
            id="kubeconfig-flag-over-the-file",
        ),
    ],
)
def test_flags_and_the_configuration_file_take_precedence_as_in_kube(
    tmp_path: Path, config: dict[str, Any], argv: list[str], names: tuple[str, ...], values: tuple[Any, ...]
) -> None:
    options, _ = resolve(argv, tmp_path, config)
    assert fields(options, names) == values


def test_an_ignored_client_flag_is_named_in_a_warning(tmp_path: Path) -> None:
    _, resolved = resolve(["--kube-api-qps=100"], tmp_path, {})
    (warning,) = resolved.warnings
    assert warning.startswith("--kube-api-qps is ignored because --config is given")
    assert "clientConnection.qps" in warning


# ------------------------------------------------------------------------------------------ write-config-to
def test_write_config_to_writes_the_effective_configuration_and_exits(tmp_path: Path) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    argv = ["--leader-elect-lease-duration=30s", "--kube-api-qps=80", "--kubeconfig=/etc/k.conf"]
    assert main(["run", "--write-config-to", str(first), *argv]) == 0
    written = yaml.safe_load(first.read_text())
    assert written["leaderElection"]["leaseDuration"] == "30s"
    assert written["leaderElection"]["leaderElect"] is True
    assert (written["clientConnection"]["qps"], written["clientConnection"]["kubeconfig"]) == (
        80.0,
        "/etc/k.conf",
    )
    assert [p["schedulerName"] for p in written["profiles"]] == ["koord-scheduler"]
    # the file reads back as the same configuration, and writes itself out unchanged
    reading = read_configuration(written)
    assert not reading.problems
    assert main(["run", "--config", str(first), "--write-config-to", str(second)]) == 0
    assert second.read_text() == first.read_text()


# ---------------------------------------------------------------------------------------------- start-up
def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--version"]) == 0
    assert capsys.readouterr().out.startswith("koordpy ")


def test_an_unreadable_kubeconfig_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--kubeconfig", "/nonexistent/kubeconfig", "--leader-elect=false"]) == 1
    line = one_line(capsys)
    assert line.startswith("koordpy: cannot load the cluster credentials: no kubeconfig at /nonexistent")
    assert "--kubeconfig" in line


@pytest.mark.parametrize("certificate", ["self-signed in memory", "files"])
def test_a_port_in_use_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], certificate: str
) -> None:
    given: list[str] = []
    if certificate == "files":
        chain, key = generate_self_signed("localhost")
        (tmp_path / "tls.crt").write_bytes(chain)
        (tmp_path / "tls.key").write_bytes(key)
        given = [f"--tls-cert-file={tmp_path / 'tls.crt'}", f"--tls-private-key-file={tmp_path / 'tls.key'}"]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        code = main(
            [
                "run",
                "--master=http://127.0.0.1:9",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                *given,
            ]
        )
    assert code == 1
    line = one_line(capsys)
    assert line.startswith(f"koordpy: cannot serve on 127.0.0.1:{port}: ")
    assert "--secure-port" in line


def test_an_invalid_configuration_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump({**V1, "leaderElection": {"leaseDuration": "10s", "renewDeadline": "10s"}})
    )
    assert main(["run", "--config", str(path)]) == 2
    line = one_line(capsys)
    assert line.startswith(f"koordpy: invalid configuration: {path}: leaderElection.leaseDuration: ")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--leader-elect=maybe"], "--leader-elect"),
        (["--leader-elect-lease-duration=15"], "time: invalid duration"),
        (["--leader-elect-resource-lock=endpoints"], "invalid lock-type"),
        (["--logging-format=xml"], "--logging-format"),
        (["--lease", "3"], "unknown flag --lease"),
        (["--feature-gates=SchedulerQueueingHints"], "missing bool value for SchedulerQueueingHints"),
        (["--feature-gates=SchedulerQueueingHints=maybe"], "invalid value of SchedulerQueueingHints"),
        (["--profiling=yes"], "--profiling"),
        (["--pod-max-in-unschedulable-pods-duration=60"], "time: invalid duration"),
        # kube-scheduler's flags are Go types: what they cannot hold is refused as pflag refuses it
        (["--leader-elect-lease-duration=" + "9" * 5000 + "s"], "time: invalid duration"),
        (["--leader-elect-renew-deadline=" + "0." + "1" * 5000], "time: invalid duration"),
        (["--kube-api-qps=nan"], "finite"),
        (["--kube-api-qps=inf"], "finite"),
        (["--kube-api-qps=-inf"], "finite"),
        (["--kube-api-qps=1e39"], "float32"),
        (["--kube-api-qps=fast"], "not a number"),
        (["--kube-api-burst=2147483648"], "value out of range"),
        (["--kube-api-burst=" + "1" * 5000], "value out of range"),
        (["--bind-address=not-an-ip"], "failed to parse IP"),
        (["--bind-address=10.0.0.256"], "failed to parse IP"),
        (["--bind-address=fe80::1%eth0"], "failed to parse IP"),
        (["--bind-address="], "failed to parse IP"),
        (["-v=2147483648"], "value out of range"),
        (["-v", "9" * 5000], "value out of range"),
        (["-v=1_0"], "not a number"),
        (["-v=-1"], "must be 0 or more"),
    ],
)
def test_an_invalid_flag_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        code = main(["run", *argv])
        raise SystemExit(code)
    assert stopped.value.code == 2
    line = one_line(capsys)
    assert line.startswith("koordpy: invalid flag: ") and says in line


@pytest.mark.parametrize(
    ("argv", "names", "values"),
    [
        # client-go builds no token bucket for a negative QPS: no client-side limit, as in kube
        (["--kube-api-qps=-1"], ("qps",), (-1.0,)),
        (["--kube-api-qps=3.5"], ("qps",), (3.5,)),
        (["--kube-api-burst=2147483647"], ("burst",), (2147483647,)),
        (["--bind-address=::1"], ("bind_address",), ("::1",)),
        (["--bind-address= 10.0.0.1 "], ("bind_address",), ("10.0.0.1",)),
        (
            ["--leader-elect-lease-duration=2562047h47m16.854775807s"],
            ("lease_duration",),
            (9223372036.854776,),
        ),
    ],
)
def test_the_limits_of_kube_schedulers_flag_types_are_accepted(
    tmp_path: Path, argv: list[str], names: tuple[str, ...], values: tuple[Any, ...]
) -> None:
    options, _ = resolve(argv, tmp_path)
    assert fields(options, names) == values


def test_verbosity_up_to_klogs_int32_level_is_accepted() -> None:
    args = build_parser().parse_args(["run", "-v=2147483647"])
    assert flags.log_settings(args).verbosity == 2147483647


async def test_an_api_server_that_does_not_answer_is_waited_for_and_reported_not_ready() -> None:
    """kube-scheduler's clients keep trying an API server that is not there yet; so does start-up,
    saying so in /readyz, and SIGTERM still stops it."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = read_configuration({**V1, "profiles": [{"schedulerName": "koord-scheduler"}]}).config
    assert config is not None
    http_port = free_port()
    options = RunOptions(
        config,
        master=f"http://127.0.0.1:{port}",
        secure_port=0,
        insecure_port=http_port,
        bind_address="127.0.0.1",
        leader_elect=False,
        operators=False,
    )
    running = asyncio.ensure_future(run(options))

    async def readyz() -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{http_port}/readyz?verbose") as answer,
        ):
            return answer.status, await answer.text()

    async def reported() -> tuple[int, str] | None:
        try:
            status, body = await readyz()
        except aiohttp.ClientError:
            return None
        return (status, body) if "[-]api-server failed" in body else None

    status, _ = await eventually(reported, timeout=20, what="/readyz naming the API server")
    assert status == 500 and not running.done()
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(running, 10) == 0


async def test_a_slow_first_answer_is_waited_for_with_longer_tries() -> None:
    from koordpy.cluster.app import ApiServerReach, wait_for_api_server
    from koordpy.kubeapi.informer import Backoff
    from tests.support.fakeapi import FakeApiServer, Reply

    async def slow(_request: object) -> Reply:
        await asyncio.sleep(0.5)
        return Reply(200, {"major": "1", "minor": "33"})

    async with FakeApiServer() as fake:
        fake.on("GET", "/version", slow)
        reach = ApiServerReach()
        waiting = asyncio.ensure_future(
            wait_for_api_server(fake.client(), reach, Backoff(0.01, 0.01), first_timeout=0.15)
        )

        async def a_slow_try_said() -> bool:
            return "no answer within" in (reach.problem or "")

        await eventually(a_slow_try_said, what="a slow try reported")
        await asyncio.wait_for(waiting, 10)
        assert reach.problem is None
        # 0.15 s, then 0.3 s, then 0.6 s: the third try outlasts the answer's half second
        assert len(fake.matching("GET", "/version")) == 3


@pytest.mark.parametrize(
    ("kubeconfig", "host", "token"),
    [
        # client-go's BuildConfigFromFlags: the kubeconfig's credentials, the master's address
        pytest.param(True, "https://10.0.0.9:6443", "Bearer token-a", id="kubeconfig-and-master"),
        # alone, the master is the whole configuration: no credentials
        pytest.param(False, "https://10.0.0.9:6443", None, id="master-alone"),
    ],
)
async def test_master_replaces_the_server_of_the_kubeconfig(
    tmp_path: Path, kubeconfig: bool, host: str, token: str | None
) -> None:
    from koordpy.kubeapi.credentials import load_configuration

    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "a",
                "clusters": [{"name": "a", "cluster": {"server": "https://a.example:6443"}}],
                "users": [{"name": "a", "user": {"token": "token-a"}}],
                "contexts": [{"name": "a", "context": {"cluster": "a", "user": "a"}}],
            }
        )
    )
    configuration = await load_configuration(
        str(path) if kubeconfig else None, None, "https://10.0.0.9:6443/"
    )
    assert configuration.host == host
    assert (await configuration.get_api_key_with_prefix("BearerToken") or None) == token


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        # Go's time_test.go durationTests
        (0.0, "0s"),
        (1e-9, "1ns"),
        (1.1e-6, "1.1µs"),
        (2.2e-3, "2.2ms"),
        (3.3, "3.3s"),
        (4 * 60 + 5, "4m5s"),
        (4 * 60 + 5.001, "4m5.001s"),
        (5 * 3600 + 6 * 60 + 7.001, "5h6m7.001s"),
        (8 * 60 + 1e-9, "8m0.000000001s"),
    ],
)
def test_an_earlier_flag_in_seconds_is_recorded_as_a_go_duration(seconds: float, text: str) -> None:
    assert flags.go_duration(seconds) == text


# ------------------------------------------------------------------------- kube-scheduler manifests' flags
# kubeadm's static pod (cmd/kubeadm/app/phases/controlplane/manifests.go getSchedulerCommand, the
# arguments sorted as ArgumentsToCommand writes them)
KUBEADM = [
    "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
    "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
    "--bind-address=127.0.0.1",
    "--kubeconfig=/etc/kubernetes/scheduler.conf",
    "--leader-elect=true",
]


def test_kubeadms_command_line_is_taken_as_kube_scheduler_takes_it(tmp_path: Path) -> None:
    options, resolved = resolve(KUBEADM, tmp_path)
    assert fields(
        options,
        (
            "kubeconfig",
            "authentication_kubeconfig",
            "authorization_kubeconfig",
            "bind_address",
            "leader_elect",
        ),
    ) == ("/etc/kubernetes/scheduler.conf",) * 3 + ("127.0.0.1", True)
    assert options.secure_port == 10259
    assert resolved.warnings == []


@pytest.mark.parametrize(
    ("argv", "names", "values"),
    [
        (
            ["--authentication-kubeconfig=/a"],
            ("authentication_kubeconfig", "authorization_kubeconfig"),
            ("/a", None),
        ),
        (
            ["--authorization-kubeconfig=/b"],
            ("authentication_kubeconfig", "authorization_kubeconfig"),
            (None, "/b"),
        ),
        (["--authentication-token-webhook-cache-ttl=1m"], ("token_cache_ttl",), (60.0,)),
        (["--authorization-webhook-cache-authorized-ttl=5s"], ("allowed_cache_ttl",), (5.0,)),
        (["--authorization-webhook-cache-unauthorized-ttl=0s"], ("denied_cache_ttl",), (0.0,)),
        # apiserver's defaults: ten seconds each
        ([], ("token_cache_ttl", "allowed_cache_ttl", "denied_cache_ttl"), (10.0, 10.0, 10.0)),
    ],
)
def test_the_delegated_review_flags_set_their_options(
    tmp_path: Path, argv: list[str], names: tuple[str, ...], values: tuple[Any, ...]
) -> None:
    options, _ = resolve(argv, tmp_path)
    assert fields(options, names) == values


@pytest.mark.parametrize(
    "config", [None, {"podMaxInUnschedulablePodsDuration": 120}], ids=["flags", "--config"]
)
def test_the_unschedulable_pods_duration_flag_applies_with_or_without_a_configuration(
    tmp_path: Path, config: dict[str, Any] | None
) -> None:
    """options.go sets PodMaxInUnschedulablePodsDuration from the flag apart from the component
    configuration, so a file does not keep it out."""
    options, resolved = resolve(["--pod-max-in-unschedulable-pods-duration=90s"], tmp_path, config)
    assert options.config.podMaxInUnschedulablePodsDuration == 90.0
    assert resolved.warnings == []


@pytest.mark.parametrize(
    ("argv", "warned"),
    [
        (["--profiling"], ["--profiling=true not acted on: koordpy serves no /debug/pprof"]),
        (
            ["--profiling=true", "--contention-profiling=true"],
            ["--profiling=true and --contention-profiling=true not acted on"],
        ),
        (
            ["--client-ca-file=/etc/kubernetes/pki/ca.crt"],
            ["--client-ca-file not acted on: client-certificate"],
        ),
        (
            [
                "--requestheader-client-ca-file=/p/front-proxy-ca.crt",
                "--requestheader-allowed-names=front-proxy",
            ],
            ["--requestheader-client-ca-file, --requestheader-allowed-names not acted on"],
        ),
        (
            ["--feature-gates=SchedulerQueueingHints=true, SchedulerAsyncPreemption=false"],
            ["--feature-gates not acted on", "(SchedulerQueueingHints=true,SchedulerAsyncPreemption=false)"],
        ),
        # what koordpy does as asked, or what has nothing to act on, is not warned about
        (["--profiling=false", "--contention-profiling=false"], []),
        (["--authentication-tolerate-lookup-failure=true", "--authentication-skip-lookup"], []),
        (["--feature-gates="], []),
    ],
)
def test_a_flag_koordpy_does_not_act_on_is_named_in_one_warning(
    tmp_path: Path, argv: list[str], warned: list[str]
) -> None:
    _, resolved = resolve(argv, tmp_path)
    assert len(resolved.warnings) == (1 if warned else 0), resolved.warnings
    for words in warned:
        assert words in resolved.warnings[0]


def write_kubeconfig(path: Path, server: str, token: str) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )


@pytest.mark.parametrize(
    ("authentication", "authorization", "tokens"),
    [
        (None, None, ("Bearer own", "Bearer own")),
        ("reviewer", None, ("Bearer reviewer", "Bearer own")),
        (None, "reviewer", ("Bearer own", "Bearer reviewer")),
        ("reviewer", "reviewer", ("Bearer reviewer", "Bearer reviewer")),
    ],
)
async def test_the_reviews_are_made_with_the_credentials_their_flags_name(
    tmp_path: Path, authentication: str | None, authorization: str | None, tokens: tuple[str, str]
) -> None:
    """apiserver's delegated clients read their kubeconfig flags; without them koordpy makes the
    reviews with the scheduler's own credentials."""
    from koordpy.cluster.app import review_credentials
    from koordpy.kubeapi import KubeApi

    for name in ("own", "reviewer"):
        write_kubeconfig(tmp_path / name, f"https://{name}.example:6443", name)
    own = await KubeApi.connect(str(tmp_path / "own"))
    config = read_configuration({**V1, "profiles": [{"schedulerName": "koord-scheduler"}]}).config
    assert config is not None
    options = RunOptions(
        config,
        authentication_kubeconfig=str(tmp_path / authentication) if authentication else None,
        authorization_kubeconfig=str(tmp_path / authorization) if authorization else None,
    )
    try:
        chosen = await review_credentials(options, own)
        got = tuple([await c.get_api_key_with_prefix("BearerToken") for c in chosen])
        assert got == tokens
    finally:
        await own.close()


async def test_an_unreadable_review_kubeconfig_stops_start_up_naming_its_flag(tmp_path: Path) -> None:
    from koordpy.cluster.app import review_credentials
    from koordpy.kubeapi import KubeApi

    write_kubeconfig(tmp_path / "own", "https://own.example:6443", "own")
    own = await KubeApi.connect(str(tmp_path / "own"))
    config = read_configuration({**V1, "profiles": [{"schedulerName": "koord-scheduler"}]}).config
    assert config is not None
    options = RunOptions(config, authorization_kubeconfig="/nonexistent/scheduler.conf")
    try:
        with pytest.raises(StartupError) as failed:
            await review_credentials(options, own)
    finally:
        await own.close()
    assert str(failed.value).startswith("--authorization-kubeconfig: cannot load the credentials")
    assert "/nonexistent/scheduler.conf" in str(failed.value)
