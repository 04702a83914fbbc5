"""NodePorts: host port conflicts by protocol, port and host IP."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.status import Code
from tests.builders import Harness, make_pod, node_dict, pod_dict

NP = "NodePorts"


def _ported(name: str, *ports: dict[str, Any], node_name: str = "") -> dict[str, Any]:
    return pod_dict(
        name, node_name=node_name, spec={"containers": [{"name": "c", "image": "x", "ports": list(ports)}]}
    )


def _port(port: int, protocol: str | None = None, ip: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"containerPort": 80, "hostPort": port}
    if protocol:
        out["protocol"] = protocol
    if ip:
        out["hostIP"] = ip
    return out


CASES = [
    # (placed port on n1, wanted port, feasible)
    (_port(8080), _port(8080), ["n2"]),
    (_port(8080), _port(8081), ["n1", "n2"]),
    (_port(8080), _port(8080, "UDP"), ["n1", "n2"]),
    (_port(8080, ip="10.0.0.1"), _port(8080, ip="10.0.0.2"), ["n1", "n2"]),
    (_port(8080, ip="10.0.0.1"), _port(8080, ip="10.0.0.1"), ["n2"]),
    (_port(8080, ip="10.0.0.1"), _port(8080), ["n2"]),
    (_port(8080), _port(8080, ip="10.0.0.1"), ["n2"]),
]
IDS = [
    "same-port",
    "other-port",
    "other-protocol",
    "different-host-ips",
    "same-host-ip",
    "wildcard-wanted",
    "wildcard-placed",
]


@pytest.mark.parametrize(("placed", "wanted", "feasible"), CASES, ids=IDS)
def test_filter(placed: dict[str, Any], wanted: dict[str, Any], feasible: list[str]) -> None:
    h = Harness([node_dict("n1"), node_dict("n2")], [_ported("p1", placed, node_name="n1")], plugins=[NP])
    names, _ = h.feasible(make_pod("x", spec=_ported("x", wanted)["spec"]))
    assert names == feasible


def test_failure_message_and_code() -> None:
    h = Harness(
        [node_dict("n1"), node_dict("n2")],
        [_ported("p1", _port(80), node_name="n1"), _ported("p2", _port(80), node_name="n2")],
        plugins=[NP],
    )
    names, diagnosis = h.feasible(make_pod("x", spec=_ported("x", _port(80))["spec"]))
    assert names == []
    assert fit_error_message(2, diagnosis) == (
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    )
    assert {s.code for s in diagnosis.statuses_by_row().values()} == {Code.UNSCHEDULABLE}


def test_pod_without_host_ports_skips_filter() -> None:
    h = Harness([node_dict("n1")], [_ported("p1", _port(80), node_name="n1")], plugins=[NP])
    pod = make_pod("x")
    state, _, status = h.pre_filter(pod)
    assert status is None and NP in state.skip_filter
    assert h.feasible(pod)[0] == ["n1"]


def test_port_freed_when_pod_removed() -> None:
    placed = make_pod("p1", spec=_ported("p1", _port(80))["spec"], node_name="n1")
    h = Harness([node_dict("n1")], [placed], plugins=[NP])
    pod = make_pod("x", spec=_ported("x", _port(80))["spec"])
    assert h.feasible(pod)[0] == []
    h.snapshot.remove_pod(placed, h.snapshot.row_of["n1"])
    assert h.feasible(pod)[0] == ["n1"]
