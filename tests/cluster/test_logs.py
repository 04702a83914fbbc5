"""Log lines as kube-scheduler writes them: klog's text format, component-base's JSON, klog's -v.

Expected lines come from the sources: klog's TestHeader (klog_test.go) and its output tests
(test/output.go), serialize/keyvalues.go for multi-line values, and component-base's
logs/json/json_test.go for the JSON entries."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy import logs
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import simulate
from tests.builders import node_dict, pod_dict

# klog's TestHeader: time.Date(2006, 1, 2, 15, 4, 5, .067890e9, time.Local) and pid 1234
KLOG_TEST_TIME = time.mktime((2006, 1, 2, 15, 4, 5, 0, 0, -1)) + 0.067890
KLOG_TEST_PID = 1234


def record(
    msg: str = "testing",
    level: int = logging.INFO,
    *,
    name: str = "koordpy.test",
    pathname: str = "/src/klog/file.go",
    lineno: int = 123,
    kv: dict[str, Any] | None = None,
    v: int | None = 0,
    err: object = None,
) -> logging.LogRecord:
    rec = logging.LogRecord(name, level, pathname, lineno, msg, None, None)
    rec.created = KLOG_TEST_TIME
    if v is not None:
        rec.klog_v = v
    if kv is not None:
        rec.klog_kv = kv
    if err is not None:
        rec.klog_err = err
    return rec


def text(rec: logging.LogRecord, verbosity: int = 0) -> str:
    return logs.KlogFormatter(verbosity, pid=KLOG_TEST_PID).format(rec)


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    """Logging configured into a buffer; whatever the test sets up is undone after it."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logs.verbosity())
    library_levels = {n: logging.getLogger(n).level for n in ("kopf", "aiohttp", "kubernetes_asyncio")}
    stream = io.StringIO()
    yield stream
    for handler in list(root.handlers):
        if handler not in saved[0]:
            root.removeHandler(handler)
    root.setLevel(saved[1])
    logs._state.verbosity = saved[2]
    for name, level in library_levels.items():
        logging.getLogger(name).setLevel(level)


# ---------------------------------------------------------------------------------------------- text
@pytest.mark.parametrize(
    ("level", "expected"),
    [
        pytest.param(logging.INFO, 'I0102 15:04:05.067890    1234 file.go:123] "testing"', id="info"),
        pytest.param(logging.WARNING, 'W0102 15:04:05.067890    1234 file.go:123] "testing"', id="warning"),
        pytest.param(logging.ERROR, 'E0102 15:04:05.067890    1234 file.go:123] "testing"', id="error"),
    ],
)
def test_the_text_header_is_klogs(level: int, expected: str) -> None:
    assert text(record(level=level)) == expected


@pytest.mark.parametrize(
    ("msg", "kv", "expected"),
    [
        pytest.param("test", {"akey": "avalue"}, '"test" akey="avalue"', id="string"),
        pytest.param("test", {"akey": "<&>"}, '"test" akey="<&>"', id="html-characters"),
        pytest.param(
            '"quoted"', {"key": '"quoted value"'}, '"\\"quoted\\"" key="\\"quoted value\\""', id="quotation"
        ),
        pytest.param("test", {"firstKey": 1}, '"test" firstKey=1', id="number"),
        pytest.param(
            "slices",
            {"s": ["hello", "world"], "i": [1, 2, 3]},
            '"slices" s=["hello","world"] i=[1,2,3]',
            id="slices",
        ),
        pytest.param(
            "maps",
            {"s": {"hello": "world"}, "i": {1: 2, 3: 4}},
            '"maps" s={"hello":"world"} i={"1":2,"3":4}',
            id="maps",
        ),
        pytest.param("test", {"err": "whoops"}, '"test" err="whoops"', id="error-as-value"),
        pytest.param("test", {"pod": "kube-system/pod-1"}, '"test" pod="kube-system/pod-1"', id="object-ref"),
        pytest.param("test", {"bytes": b"test case"}, '"test" bytes="test case"', id="bytes"),
        pytest.param("test", {"ok": True, "none": None}, '"test" ok=true none=null', id="bool-and-nil"),
        pytest.param("test", {"tab": "a\tb"}, '"test" tab="a\\tb"', id="control-character"),
        # serialize.writeStringValue: lines indented with a tab, the end with a space
        pytest.param(
            "hello world",
            {"key": "line 1\nline 2"},
            '"hello world" key=<\n\tline 1\n\tline 2\n >',
            id="lines",
        ),
        pytest.param(
            "hello world", {"key": "line 1\n"}, '"hello world" key=<\n\tline 1\n >', id="ends-with-break"
        ),
    ],
)
def test_key_values_are_written_as_klog_writes_them(msg: str, kv: dict[str, Any], expected: str) -> None:
    line = text(record(msg, kv=kv))
    assert line.split("] ", 1)[1] == expected


def test_an_error_comes_first_as_err() -> None:
    # klog's "regular error types when using logr.Error" (ErrorS writes err before the pairs)
    line = text(record("test", logging.ERROR, kv={"akey": "avalue"}, err="whoops"))
    assert line == 'E0102 15:04:05.067890    1234 file.go:123] "test" err="whoops" akey="avalue"'


def test_an_exception_is_its_type_and_text() -> None:
    line = text(record("test", logging.ERROR, err=ValueError("invalid namespace:default")))
    assert line.endswith('"test" err="ValueError: invalid namespace:default"')


def test_a_plain_logging_call_is_a_quoted_message() -> None:
    rec = logging.LogRecord(
        "koordpy.x", logging.INFO, "/src/x/world.py", 7, "bound %s to %s", ("a/b", "n1"), None
    )
    rec.created = KLOG_TEST_TIME
    assert text(rec) == 'I0102 15:04:05.067890    1234 world.py:7] "bound a/b to n1"'


@pytest.mark.parametrize(("verbosity", "has_trace"), [(0, False), (3, False), (4, True)])
def test_a_traceback_is_written_only_from_v4(verbosity: int, has_trace: bool) -> None:
    try:
        raise KeyError("x")
    except KeyError:
        rec = logging.LogRecord("koordpy.x", logging.ERROR, "/src/x/intake.py", 1, "failed", None, None)
        rec.exc_info = sys.exc_info()
    line = text(rec, verbosity)
    assert line.splitlines()[0].endswith(
        '"failed" err="KeyError: \'x\'"' + (" stacktrace=<" if has_trace else "")
    )
    assert ("Traceback (most recent call last):" in line) is has_trace


# ---------------------------------------------------------------------------------------------- json
def test_a_json_info_entry_is_component_bases() -> None:
    # TestZapLoggerInfo:
    # {"ts":%f,"caller":"json/json_test.go:%d","msg":"test","v":0,"ns":"default","podnum":2}
    rec = record("test", pathname="/src/logs/json/json_test.go", lineno=42, kv={"ns": "default", "podnum": 2})
    rec.created = 0.000000123  # time.Date(1970, 1, 1, 0, 0, 0, 123, UTC): 0.000123 ms
    line = logs.JsonFormatter().format(rec)
    entry = json.loads(line)
    assert list(entry) == ["ts", "caller", "msg", "v", "ns", "podnum"]
    assert entry == {
        "ts": pytest.approx(0.000123),
        "caller": "json/json_test.go:42",
        "msg": "test",
        "v": 0,
        "ns": "default",
        "podnum": 2,
    }
    assert "\n" not in line


def test_a_json_error_entry_has_err_last_and_no_v() -> None:
    # TestZapLoggerError:
    # ..."msg":"wrong namespace","ns":"default","podnum":2,...,"err":"invalid namespace:default"}
    rec = record(
        "wrong namespace",
        logging.ERROR,
        pathname="/src/logs/json/json_test.go",
        kv={"ns": "default", "podnum": 2},
        err="invalid namespace:default",
    )
    entry = json.loads(logs.JsonFormatter().format(rec))
    assert list(entry) == ["ts", "caller", "msg", "ns", "podnum", "err"]
    assert entry["err"] == "invalid namespace:default"


@pytest.mark.parametrize("v", [0, 2, 10])
def test_a_json_entry_carries_its_verbosity(v: int) -> None:
    # TestZapLoggerV: V(i).Info(...) is written with "v":i
    entry = json.loads(logs.JsonFormatter(10).format(record("test", logs.level_of(v), v=v)))
    assert entry["v"] == v


# ---------------------------------------------------------------------------------------------- verbosity
@pytest.mark.parametrize(
    ("verbosity", "v", "written"),
    [(0, 0, True), (0, 1, False), (1, 2, False), (2, 2, True), (5, 2, True), (2, 3, False), (10, 10, True)],
)
def test_v_lines_are_written_up_to_the_verbosity(
    configured: io.StringIO, verbosity: int, v: int, written: bool
) -> None:
    logs.configure(verbosity, logs.TEXT, configured)
    log = logs.get("koordpy.test")
    assert bool(log.v(v)) is written
    log.v(v).info("line", n=v)
    assert (configured.getvalue().count('"line" n=') == 1) is written


def test_a_disabled_line_builds_nothing(configured: io.StringIO) -> None:
    logs.configure(0, logs.TEXT, configured)
    built = []

    def value() -> str:
        built.append(1)
        return "x"

    if v2 := logs.get("koordpy.test").v(2):
        v2.info("never", value=value())
    assert built == [] and configured.getvalue() == ""


@pytest.mark.parametrize(
    ("name", "level", "msg", "verbosity", "expected"),
    [
        pytest.param("koordpy.cluster.world", logging.INFO, "started", 0, "I", id="koordpy-info-v0"),
        pytest.param("koordpy.cluster.world", logging.DEBUG, "detail", 3, None, id="koordpy-debug-hidden-v3"),
        pytest.param("koordpy.cluster.world", logging.DEBUG, "detail", 4, "I", id="koordpy-debug-v4"),
        pytest.param("koordpy.cluster.world", logging.WARNING, "odd", 0, "W", id="warning-v0"),
        pytest.param("kopf.objects", logging.INFO, "housekeeping", 4, None, id="kopf-info-hidden-v4"),
        pytest.param("kopf.objects", logging.INFO, "housekeeping", 5, "I", id="kopf-info-v5"),
        pytest.param("kopf._cogs.clients.api", logging.DEBUG, "request", 5, None, id="kopf-debug-hidden-v5"),
        pytest.param("kopf._cogs.clients.api", logging.DEBUG, "request", 6, "I", id="kopf-debug-v6"),
        pytest.param(
            "kopf._cogs.clients.api",
            logging.ERROR,
            "Request attempt #1/9 failed; will retry: GET https://x -> ClientConnectorError()",
            1,
            None,
            id="kopf-retry-hidden-v1",
        ),
        pytest.param(
            "kopf._cogs.clients.api",
            logging.ERROR,
            "Request attempt #1/9 failed; will retry: GET https://x -> ClientConnectorError()",
            2,
            "I",
            id="kopf-retry-info-v2",
        ),
        pytest.param(
            "kopf._cogs.clients.api",
            logging.ERROR,
            "Request attempt #9/9 failed; escalating: GET https://x -> ClientConnectorError()",
            0,
            "E",
            id="kopf-escalation-error-v0",
        ),
        pytest.param(
            "kubernetes_asyncio.client.rest", logging.DEBUG, "response body: {}", 7, None, id="body-hidden-v7"
        ),
        pytest.param(
            "kubernetes_asyncio.client.rest", logging.DEBUG, "response body: {}", 8, "I", id="body-v8"
        ),
        pytest.param("aiohttp.client", logging.INFO, "request", 5, None, id="aiohttp-info-hidden-v5"),
        pytest.param("aiohttp.client", logging.INFO, "request", 6, "I", id="aiohttp-info-v6"),
    ],
)
def test_library_lines_are_placed_on_klogs_scale(
    configured: io.StringIO, name: str, level: int, msg: str, verbosity: int, expected: str | None
) -> None:
    logs.configure(verbosity, logs.TEXT, configured)
    logging.getLogger(name).log(level, msg)
    lines = configured.getvalue().splitlines()
    assert [line[0] for line in lines] == ([expected] if expected else [])


def test_the_deprecated_log_level_floor_keeps_only_what_is_as_severe(configured: io.StringIO) -> None:
    logs.configure(0, logs.TEXT, configured, min_level=logging.WARNING)
    log = logs.get("koordpy.test")
    log.info("info")
    log.warning("warning")
    assert [line[0] for line in configured.getvalue().splitlines()] == ["W"]


def test_configuring_again_replaces_the_handler(configured: io.StringIO) -> None:
    logs.configure(0, logs.TEXT, io.StringIO())
    logs.configure(0, logs.JSON, configured)
    logs.get("koordpy.test").info("once")
    (line,) = configured.getvalue().splitlines()
    assert json.loads(line)["msg"] == "once"


# ---------------------------------------------------------------------------------------------- decisions
GANG = "gang.scheduling.koordinator.sh"


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def gang_member(name: str, cpu: str, gang: str) -> dict[str, Any]:
    return pod_dict(name, cpu=cpu, annotations={f"{GANG}/name": gang, f"{GANG}/min-available": "2"})


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [
                node_dict("n1", cpu="1"),
                node_dict("n2", cpu="4"),
                node_dict("n3", cpu="4"),
                pod_dict("web", cpu="2"),
            ],
            [
                r'"Successfully bound pod to node" pod="default/web" node="n[23]" evaluatedNodes=3 '
                r'feasibleNodes=2 profile="default-scheduler"'
            ],
            id="binding",
        ),
        pytest.param(
            [node_dict("n1", cpu="1"), pod_dict("big", cpu="8")],
            [
                r'"Unable to schedule pod; no fit; waiting" pod="default/big" '
                r'err="0/1 nodes are available: 1 Insufficient cpu\.'
            ],
            id="no-fit",
        ),
        pytest.param(
            [
                priority_class("low", 1),
                priority_class("high", 1000),
                node_dict("n1", cpu="2"),
                pod_dict("low", cpu="2", node_name="n1", spec={"priorityClassName": "low"}),
                pod_dict("high", cpu="2", spec={"priorityClassName": "high"}),
            ],
            [r'"Preemptor Pod preempted victim Pod" preemptor="default/high" victim="default/low" node="n1"'],
            id="preemption",
        ),
        pytest.param(
            [node_dict("n1", cpu="4"), gang_member("g-0", "1", "g"), gang_member("g-1", "1", "g")],
            [r'"Gang placed; members released to bind" gang="default/g" gangGroup="default/g" members=2'],
            id="gang-placed",
        ),
        pytest.param(
            [node_dict("n1", cpu="4"), gang_member("h-0", "3", "h"), gang_member("h-1", "3", "h")],
            [
                r'"Gang rejected" gang="default/h" gangGroup="default/h" '
                r'err="gang default/h cannot be placed as a whole'
            ],
            id="gang-rejected",
        ),
    ],
)
def test_scheduling_decisions_are_logged_at_v2(
    configured: io.StringIO, tmp_path: Path, objects: list[dict[str, Any]], expected: list[str]
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump_all(objects))
    logs.configure(2, logs.TEXT, configured)
    simulate(load_scenario([str(scenario)]), default_configuration(), max_virtual_seconds=60)
    lines = configured.getvalue().splitlines()
    for pattern in expected:
        assert any(re.search(r"\] " + pattern, line) for line in lines), "\n".join(lines)


def test_nothing_is_logged_for_decisions_at_v0(configured: io.StringIO, tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        yaml.safe_dump_all([node_dict("n1", cpu="1"), pod_dict("web"), pod_dict("big", cpu="8")])
    )
    logs.configure(0, logs.TEXT, configured)
    simulate(load_scenario([str(scenario)]), default_configuration(), max_virtual_seconds=60)
    assert configured.getvalue() == ""


# kube-scheduler's lines above V(2) (schedule_one.go, framework/runtime/framework.go,
# backend/queue/scheduling_queue.go), with their levels
DETAIL_MESSAGES = (
    "About to try and schedule pod",
    "Attempting to schedule pod",
    "Pod moved to an internal scheduling queue",
    "Status after running PreFilter plugins for pod",
    "Status after running PostFilter plugins for pod",
    "One or more plugins asked to wait and no plugin rejected pod",
    "Pod waiting on permit",
    "Pod rejected while waiting on permit",
    "Plugin scored node for pod",
    "Calculated node's final score for pod",
)
# two node names required at once: NodeAffinity's PreFilter rejects the pod
CONFLICTED_POD = pod_dict(
    "pinned",
    spec={
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                                {"key": "metadata.name", "operator": "In", "values": ["n2"]},
                            ]
                        }
                    ]
                }
            }
        }
    },
)
THREE_NODES = [node_dict("n1", cpu="1"), node_dict("n2", cpu="4"), node_dict("n3", cpu="4")]


@pytest.mark.parametrize(
    ("objects", "verbosity", "expected", "absent"),
    [
        pytest.param(
            [*THREE_NODES, pod_dict("web", cpu="2")],
            3,
            [r'"Attempting to schedule pod" pod="default/web"$'],
            ["About to try and schedule pod", "Pod moved to an internal scheduling queue"],
            id="v3-attempt",
        ),
        pytest.param(
            [*THREE_NODES, pod_dict("web", cpu="2")],
            4,
            [
                r'"About to try and schedule pod" pod="default/web"$',
                r'"Attempting to schedule pod" pod="default/web"$',
            ],
            ["Pod moved to an internal scheduling queue", "Plugin scored node for pod"],
            id="v4-attempt",
        ),
        pytest.param(
            [*THREE_NODES, pod_dict("web", cpu="2")],
            5,
            [
                r'"Pod moved to an internal scheduling queue" pod="default/web" '
                r'event="UnschedulablePodAdd" queue="Active"$'
            ],
            ["Plugin scored node for pod"],
            id="v5-queued",
        ),
        pytest.param(
            [*THREE_NODES, pod_dict("web", cpu="2")],
            10,
            [
                r'"Plugin scored node for pod" pod="default/web" plugin="NodeResourcesFit" '
                r'node="n2" score=\d+$',
                r'"Calculated node\'s final score for pod" pod="default/web" node="n3" score=\d+$',
            ],
            [],
            id="v10-scores",
        ),
        pytest.param(
            [node_dict("n1", cpu="1"), pod_dict("big", cpu="8")],
            3,
            [
                r'"Pod moved to an internal scheduling queue" pod="default/big" '
                r'event="ScheduleAttemptFailure" queue="Unschedulable" schedulingCycle=1 hint=0 '
                r'unschedulable plugins=\["NodeResourcesFit"\]$'
            ],
            ["Status after running PostFilter plugins for pod"],
            id="v3-requeued-after-failure",
        ),
        pytest.param(
            [node_dict("n1", cpu="1"), pod_dict("big", cpu="8")],
            5,
            [
                r'"Status after running PostFilter plugins for pod" pod="default/big" '
                r'status="preemption: 0/1 nodes are available: 1 No preemption victims found',
            ],
            [],
            id="v5-post-filter",
        ),
        pytest.param(
            [node_dict("n1", cpu="1"), CONFLICTED_POD],
            5,
            [r'"Status after running PreFilter plugins for pod" pod="default/pinned" status="'],
            [],
            id="v5-pre-filter",
        ),
        pytest.param(
            [node_dict("n1", cpu="4"), gang_member("g-0", "1", "g"), gang_member("g-1", "1", "g")],
            4,
            [
                r'"One or more plugins asked to wait and no plugin rejected pod" '
                r'pod="default/g-0" node="n1"$',
                r'"Pod waiting on permit" pod="default/g-0"$',
            ],
            [],
            id="v4-permit-wait",
        ),
        pytest.param(
            [node_dict("n1", cpu="4"), gang_member("h-0", "3", "h"), gang_member("h-1", "3", "h")],
            4,
            [r'"Pod rejected while waiting on permit" pod="default/h-0" status="'],
            [],
            id="v4-permit-rejected",
        ),
        pytest.param(
            [node_dict("n1", cpu="4"), gang_member("lone-0", "1", "lone")],
            5,
            [
                r'"Pod moved to an internal scheduling queue, because the pod is gated" '
                r'pod="default/lone-0" event="UnschedulablePodAdd" queue="Unschedulable"$'
            ],
            [],
            id="v5-gated",
        ),
    ],
)
def test_the_cycle_is_logged_above_v2_as_kube_scheduler_logs_it(
    configured: io.StringIO,
    tmp_path: Path,
    objects: list[dict[str, Any]],
    verbosity: int,
    expected: list[str],
    absent: list[str],
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump_all(objects))
    logs.configure(verbosity, logs.TEXT, configured)
    simulate(load_scenario([str(scenario)]), default_configuration(), max_virtual_seconds=60)
    lines = configured.getvalue().splitlines()
    for pattern in expected:
        assert any(re.search(r"\] " + pattern, line) for line in lines), "\n".join(lines)
    for message in absent:
        assert not any(f'] "{message}"' in line for line in lines), message


def test_nothing_above_v2_is_logged_at_v2(configured: io.StringIO, tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        yaml.safe_dump_all(
            [
                *THREE_NODES,
                pod_dict("web", cpu="2"),
                pod_dict("big", cpu="8"),
                CONFLICTED_POD,
                gang_member("g-0", "1", "g"),
                gang_member("g-1", "1", "g"),
                gang_member("h-0", "3", "h"),
                gang_member("h-1", "3", "h"),
                gang_member("lone-0", "1", "lone"),
            ]
        )
    )
    logs.configure(2, logs.TEXT, configured)
    simulate(load_scenario([str(scenario)]), default_configuration(), max_virtual_seconds=60)
    lines = configured.getvalue().splitlines()
    assert any('"Successfully bound pod to node"' in line for line in lines)
    for message in DETAIL_MESSAGES:
        assert not any(message in line for line in lines), message
