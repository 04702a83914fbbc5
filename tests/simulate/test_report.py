"""The report: the JSON shape the `koordpy simulate` contract fixes, YAML that reads back the same,
and a table a person can read."""

from __future__ import annotations

import json

import pytest
import yaml

from koordpy.simulate.report import (
    PodGroupResult,
    PodResult,
    PreemptionResult,
    Report,
    render_json,
    render_table,
    render_yaml,
    summary_line,
)

GANG_MESSAGE = 'Gang "default/gang-b" gets rejected: waiting for 2 more members'
UNSCHEDULABLE = "0/2 nodes are available: 2 Insufficient cpu."


def sample() -> Report:
    return Report(
        pods=[
            PodResult("default", "web-0", "node-1", "Bound", None, None, None),
            PodResult("default", "victim-1", "node-1", "Preempted", None, None, None),
            PodResult("team", "big", None, "Pending", "node-2", "Unschedulable", UNSCHEDULABLE),
            PodResult("default", "gang-b-0", None, "Pending", None, "GangNotReady", GANG_MESSAGE),
            PodResult("default", "gang-b-1", None, "Pending", None, "GangNotReady", GANG_MESSAGE),
        ],
        podGroups=[
            PodGroupResult("default", "gang-a", 2, "Scheduled", 2, None),
            PodGroupResult(
                "default", "gang-b", 4, "Pending", 0, "waiting", {"apiGroup": "scheduling.x-k8s.io"}
            ),
        ],
        preemptions=[
            PreemptionResult(
                "default/victim-1",
                "node-1",
                "default/hello-job",
                "default/preemptor-pod-2",
                "koord-scheduler: preempting to accommodate higher priority pods",
            ),
        ],
        clusterNetworkTopology={"status": {"detailStatus": []}},
        virtualSeconds=12.0,
        extras={"fragmentation": {"cpu": 0.25}},
    )


def test_json_has_the_contract_shape() -> None:
    report = Report(
        pods=[PodResult("default", "web-0", "node-1", "Bound", None, None, None)],
        podGroups=[PodGroupResult("default", "gang-example", 2, "Scheduled", 2, None)],
        preemptions=[
            PreemptionResult(
                "default/victim-1", "node-1", "default/hello-job", "default/preemptor-pod-2", "..."
            )
        ],
        clusterNetworkTopology={"status": {"detailStatus": []}},
        virtualSeconds=12.0,
    )
    # The example from spec/simulate.md, key for key and in the same order.
    expected = {
        "pods": [
            {
                "namespace": "default",
                "name": "web-0",
                "node": "node-1",
                "phase": "Bound",
                "nominatedNodeName": None,
                "reason": None,
                "message": None,
            }
        ],
        "podGroups": [
            {
                "namespace": "default",
                "name": "gang-example",
                "minMember": 2,
                "phase": "Scheduled",
                "scheduled": 2,
                "message": None,
            }
        ],
        "preemptions": [
            {
                "victim": "default/victim-1",
                "node": "node-1",
                "preemptor": "default/hello-job",
                "triggerPod": "default/preemptor-pod-2",
                "message": "...",
            }
        ],
        "clusterNetworkTopology": {"status": {"detailStatus": []}},
        "virtualSeconds": 12.0,
    }
    parsed = json.loads(render_json(report))
    assert parsed == expected
    assert list(parsed) == list(expected)
    assert list(parsed["pods"][0]) == list(expected["pods"][0])  # type: ignore[index]
    assert isinstance(parsed["virtualSeconds"], float)


def test_topology_is_omitted_when_the_input_has_none() -> None:
    report = Report(virtualSeconds=1)
    assert report.to_dict() == {"pods": [], "podGroups": [], "preemptions": [], "virtualSeconds": 1.0}


def test_extras_are_merged_after_the_contract_fields() -> None:
    out = sample().to_dict()
    assert list(out)[-1] == "fragmentation"
    assert out["fragmentation"] == {"cpu": 0.25}
    assert out["podGroups"][1] == {
        "namespace": "default",
        "name": "gang-b",
        "minMember": 4,
        "phase": "Pending",
        "scheduled": 0,
        "message": "waiting",
        "apiGroup": "scheduling.x-k8s.io",
    }


@pytest.mark.parametrize(
    "report",
    [
        pytest.param(Report(extras={"pods": []}), id="report"),
        pytest.param(
            Report(podGroups=[PodGroupResult("d", "g", 1, "Pending", 0, None, {"phase": "x"})]),
            id="pod-group",
        ),
    ],
)
def test_an_extra_may_not_replace_a_contract_field(report: Report) -> None:
    with pytest.raises(ValueError, match="would replace a field"):
        report.to_dict()


def test_yaml_round_trip() -> None:
    report = sample()
    text = render_yaml(report)
    assert yaml.safe_load(text) == json.loads(render_json(report))
    assert Report.from_dict(yaml.safe_load(text)) == report
    # Keys keep the contract's order rather than being sorted.
    assert text.startswith("pods:\n")


def test_json_round_trip() -> None:
    report = sample()
    assert Report.from_dict(json.loads(render_json(report))) == report


def test_table_has_a_row_per_pod() -> None:
    table = render_table(sample())
    lines = table.splitlines()
    assert lines[0].split() == ["NAMESPACE/NAME", "NODE", "PHASE", "REASON", "MESSAGE"]
    rows = lines[1:6]
    assert [r.split()[0] for r in rows] == [
        "default/web-0",
        "default/victim-1",
        "team/big",
        "default/gang-b-0",
        "default/gang-b-1",
    ]
    assert rows[0].split() == ["default/web-0", "node-1", "Bound", "<none>", "<none>"]
    assert rows[2].split()[1:4] == ["<none>", "Pending", "Unschedulable"]
    # The message is printed whole, at the end of the row.
    assert rows[2].endswith(UNSCHEDULABLE)
    assert rows[3].endswith(GANG_MESSAGE)


def test_table_columns_line_up() -> None:
    lines = render_table(sample()).splitlines()[:6]
    column = lines[0].index("PHASE")
    assert all(line[column:].split()[0] in ("PHASE", "Bound", "Pending", "Preempted") for line in lines)


def test_table_sections_for_pod_groups_and_preemptions() -> None:
    table = render_table(sample())
    lines = table.splitlines()
    groups = lines.index(next(line for line in lines if line.startswith("POD GROUP")))
    assert lines[groups].split() == ["POD", "GROUP", "MIN", "SCHEDULED", "PHASE", "MESSAGE"]
    assert lines[groups + 1].split() == ["default/gang-a", "2", "2", "Scheduled", "<none>"]
    assert lines[groups + 2].split() == ["default/gang-b", "4", "0", "Pending", "waiting"]
    victims = lines.index(next(line for line in lines if line.startswith("VICTIM")))
    assert lines[victims + 1].split()[:4] == [
        "default/victim-1",
        "node-1",
        "default/hello-job",
        "default/preemptor-pod-2",
    ]


def test_table_without_groups_or_preemptions_has_only_pods_and_summary() -> None:
    report = Report(pods=[PodResult("default", "a", "n", "Bound")], virtualSeconds=0.5)
    assert render_table(report).splitlines() == [
        "NAMESPACE/NAME  NODE  PHASE  REASON  MESSAGE",
        "default/a       n     Bound  <none>  <none>",
        "",
        "1 pod: 1 bound, 0 pending, 0 preempted; 0 pod groups; virtual time 0.5s",
    ]


def test_multiline_message_stays_on_its_row() -> None:
    report = Report(pods=[PodResult("default", "a", None, "Pending", None, "InvalidSpec", "bad\n  spec")])
    assert render_table(report).splitlines()[1].endswith("InvalidSpec  bad spec")


@pytest.mark.parametrize(
    ("report", "line"),
    [
        pytest.param(
            sample(),
            "5 pods: 1 bound, 3 pending (2 GangNotReady, 1 Unschedulable), 1 preempted; "
            "2 pod groups; virtual time 12.0s",
            id="sample",
        ),
        pytest.param(
            Report(), "0 pods: 0 bound, 0 pending, 0 preempted; 0 pod groups; virtual time 0.0s", id="empty"
        ),
        pytest.param(
            Report(
                pods=[PodResult("d", "a", None, "Pending", None, "GangNotReady", "m")] * 3
                + [PodResult("d", "b", "n", "Bound")] * 3,
                podGroups=[PodGroupResult("d", "g", 3, "Pending", 0)] * 2,
                virtualSeconds=12,
            ),
            "6 pods: 3 bound, 3 pending (3 GangNotReady), 0 preempted; 2 pod groups; virtual time 12.0s",
            id="brief-example",
        ),
        pytest.param(
            Report(pods=[PodResult("d", "a", None, "Pending")], virtualSeconds=0.125),
            "1 pod: 0 bound, 1 pending (1 Unknown), 0 preempted; 0 pod groups; virtual time 0.125s",
            id="pending-without-reason",
        ),
    ],
)
def test_summary_line(report: Report, line: str) -> None:
    assert summary_line(report) == line
    assert render_table(report).splitlines()[-1] == line
