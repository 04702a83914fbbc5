"""Elastic quota through `koordpy simulate`: the scenarios of tests/quota/scenarios, the examples of
Koordinator's user manual (docs/user-manuals/capacity-scheduling.md) and of scheduler-plugins'
capacity scheduling README (pkg/capacityscheduling/README.md, "Demo"), each behaving as its
document says, and a cluster without quotas placed exactly as without the quota plugins.

Expected placements and quota figures are worked by hand from the runtime and admission rules
(see each scenario's header)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordpy.config.models import (
    SchedulerConfiguration,
    default_configuration,
    load_document,
    read_configuration,
)
from koordpy.framework.profile import check_configuration
from koordpy.plugins import registry
from koordpy.simulate.loader import ScenarioError, load_scenario
from koordpy.simulate.report import render_table
from koordpy.simulate.runner import simulate

HERE = Path(__file__).parent / "scenarios"
SCENARIOS = Path(__file__).parents[1] / "scenarios"
SEED_CLUSTER = SCENARIOS / "topology" / "seed_cluster.yaml"
SIGS_CAPACITY_CONFIG = Path(__file__).parents[1] / "config" / "files" / "sigs-capacityscheduling.yaml"


def report(
    *paths: Path,
    config: SchedulerConfiguration | None = None,
    replace: dict[str, str] | None = None,
    tmp: Path | None = None,
) -> dict[str, Any]:
    files = []
    for i, path in enumerate(paths):
        if replace and tmp is not None:
            text = path.read_text()
            for old, new in replace.items():
                text = text.replace(old, new)
            path = tmp / f"{i:02d}-{path.name}"
            path.write_text(text)
        files.append(str(path))
    out: dict[str, Any] = simulate(load_scenario(files), config or default_configuration()).to_dict()
    return out


def pods(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in result["pods"]}


def bound(result: dict[str, Any]) -> set[str]:
    return {p["name"] for p in result["pods"] if p["phase"] == "Bound"}


def quotas(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["name"]: q for q in result["quotas"]}


def victims(result: dict[str, Any]) -> list[str]:
    return sorted(p["victim"] for p in result["preemptions"])


# ------------------------------------------------------------------------------------- scenarios
def test_borrowing_takes_idle_capacity_up_to_max() -> None:
    result = report(HERE / "borrowing.yaml")
    assert bound(result) == {"train-0", "train-1", "train-2"}
    waiting = pods(result)["train-3"]
    assert waiting["reason"] == "Unschedulable"
    assert "quota team-a: cpu used 12 + requested 4 > runtime 12" in waiting["message"]
    team_a = quotas(result)["team-a"]
    assert (team_a["used"], team_a["runtime"], team_a["pendingPods"]) == ({"cpu": "12"}, {"cpu": "12"}, 1)
    assert quotas(result)["team-b"]["used"] == {"cpu": "0"}


def test_reclaim_evicts_what_the_idle_quota_lent_and_binds_its_pods() -> None:
    result = report(HERE / "reclaim.yaml")
    assert {"b-0", "b-1"} <= bound(result)
    evicted = victims(result)
    assert len(evicted) == 2 and all(v.startswith("default/a-") for v in evicted)
    # one of team-a's pods on each node made room for one of team-b's
    assert {p["node"] for p in result["preemptions"]} == {"node-1", "node-2"}
    team_a = quotas(result)["team-a"]
    assert (team_a["used"]["cpu"], team_a["runtime"]["cpu"]) == ("8", "8")


def test_hierarchy_lends_within_the_parent_first() -> None:
    result = report(HERE / "hierarchy.yaml")
    assert bound(result) == {"c1-0", "c1-1", "q-0", "q-1"}
    for name in ("c1-2", "c1-3"):
        assert "quota c1: cpu used 8 + requested 4 > runtime 8" in pods(result)[name]["message"]
    got = quotas(result)
    assert got["org"]["used"] == {"cpu": "8"} and got["org"]["runtime"] == {"cpu": "8"}
    assert got["c1"]["runtime"] == {"cpu": "8"} and got["c2"]["runtime"] == {"cpu": "0"}
    assert got["c1"]["parent"] == "org" and got["q"]["parent"] == "koordinator-root-quota"


def test_gang_within_quota_waits_as_a_unit_and_holds_nothing() -> None:
    result = report(HERE / "gang_within_quota.yaml")
    assert bound(result) == {"web"}
    (group,) = result["podGroups"]
    assert "quota team-a: cpu used 0 + requested 16 > runtime 12" in group["message"]
    team_a = quotas(result)["team-a"]
    assert (team_a["used"], team_a["pendingPods"]) == ({"cpu": "0"}, 4)


@pytest.mark.parametrize(
    ("max_cpu", "placed"),
    [("16", True), ("12", False)],
    ids=["quota holds the gang", "quota holds three of four"],
)
def test_quota_and_topology_together(tmp_path: Path, max_cpu: str, placed: bool) -> None:
    result = report(SEED_CLUSTER, HERE / "quota_topology.yaml", replace={"MAX": max_cpu}, tmp=tmp_path)
    members = {n: p for n, p in pods(result).items() if n.startswith("job-")}
    if placed:
        nodes = {p["node"] for p in members.values()}
        # MustGather BlockLayer: the seed cluster's blocks are node pairs (1, 2), (3, 4), ...
        assert len(nodes) <= 2 and all(p["phase"] == "Bound" for p in members.values())
        assert sorted(int(n.split("-")[1]) for n in nodes) in ([1, 2], [3, 4], [5, 6], [7, 8])
    else:
        assert all(p["phase"] == "Pending" for p in members.values())
        assert "quota team-t: cpu used 0 + requested 16 > runtime 12" in members["job-0"]["message"]


def test_a_gang_reclaims_in_one_block_through_job_level_preemption() -> None:
    result = report(SEED_CLUSTER, HERE / "reclaim_topology.yaml")
    members = {n: p for n, p in pods(result).items() if n.startswith("job-")}
    assert all(p["phase"] == "Bound" for p in members.values())
    evicted = victims(result)
    assert len(evicted) == 4 and all(v.startswith("default/fill-") for v in evicted)
    assert {p["node"] for p in result["preemptions"]} == {p["node"] for p in members.values()}


def test_scheduler_plugins_one_quota_per_namespace() -> None:
    result = report(HERE / "capacity_one_per_namespace.yaml")
    assert bound(result) == {"app-0", "app-1"}
    assert "quota team/first: cpu used 4 + requested 2 > max 4" in pods(result)["app-2"]["message"]
    got = quotas(result)
    assert (
        got["second"]["problem"] is not None and "already has ElasticQuota first" in got["second"]["problem"]
    )
    assert got["first"]["problem"] is None and got["first"]["runtime"] is None


@pytest.mark.parametrize(
    ("pod", "reason", "said"),
    [
        ("min-above-max", "QuotaInvalid", "min 2 is above max 1"),
        ("orphan", "QuotaInvalid", "parent quota nobody does not exist"),
        ("in-loop", "QuotaInvalid", "never reaches koordinator-root-quota"),
        ("greedy", "QuotaInvalid", "above parent org's min 4"),
        ("ghost", "QuotaNotFound", "quota ghost named by the pod's label does not exist"),
    ],
)
def test_bad_input_holds_only_its_own_pods(pod: str, reason: str, said: str) -> None:
    result = report(HERE / "bad_input.yaml")
    assert bound(result) == {"ok"}
    got = pods(result)[pod]
    assert (got["phase"], got["reason"]) == ("Pending", reason)
    assert said in got["message"]


def test_bad_input_names_each_quota_problem_in_the_report() -> None:
    got = quotas(report(HERE / "bad_input.yaml"))
    assert [n for n, q in got.items() if q["problem"]] == [
        "min-above-max",
        "orphan",
        "loop-a",
        "loop-b",
        "in-loop",
        "greedy",
    ]


# ----------------------------------------------------------------------------- reference documents
@pytest.mark.parametrize(
    ("file", "namespace"),
    [
        ("koordinator_manual_by_label.yaml", "default"),
        ("koordinator_manual_by_namespace.yaml", "quota-example"),
    ],
)
def test_koordinator_manual_quick_start(file: str, namespace: str) -> None:
    # the manual shows request, runtime and used of quota-example as 40m cpu and 40Mi memory
    result = report(HERE / file)
    assert bound(result) == {"pod-example"}
    (quota,) = result["quotas"]
    assert quota["namespace"] == namespace
    expected = {"cpu": "40m", "memory": "40Mi"}
    assert (quota["request"], quota["runtime"], quota["used"]) == (expected, expected, expected)


def test_koordinator_manual_webhook_examples_stay_out_of_scheduling() -> None:
    result = report(HERE / "koordinator_manual_webhook.yaml")
    got = quotas(result)
    # 1. checkMinQuotaSum; 2. checkSubAndParentGroupMaxQuotaKeySame; 4. the parent's IsParent is false
    assert "above parent quota-parent-example's min 10" in got["quota-example"]["problem"]
    assert "spec.max names cpu, memory, test" in got["quota-keys-example"]["problem"]
    assert "is not a parent quota" in got["quota-under-child-example"]["problem"]
    # 3. a parent quota cannot run pods
    waiting = pods(result)["pod-example"]
    assert (waiting["reason"], waiting["message"]) == (
        "QuotaInvalid",
        "quota quota-parent-example is a parent quota; pods join quotas without children",
    )
    assert bound(result) == {"pod-fine"}


@pytest.mark.parametrize(
    "config",
    [None, SIGS_CAPACITY_CONFIG],
    ids=["default configuration", "scheduler-plugins' configuration"],
)
def test_scheduler_plugins_capacity_scheduling_demo(config: Path | None) -> None:
    # quota1 (min 4, max 6) runs three of four 2-cpu pods on 8 cpus; quota2's second pod, within
    # its min, preempts one of them and is placed; the fourth of quota1 stays pending
    checked = None
    if config is not None:
        checked = check_configuration(
            read_configuration(load_document(config), str(config)), registry()
        ).config
    result = report(HERE / "capacity_scheduling_demo.yaml", config=checked)
    by_ns = {(p["namespace"], p["phase"]) for p in result["pods"]}
    counts = {key: sum(1 for p in result["pods"] if (p["namespace"], p["phase"]) == key) for key in by_ns}
    assert counts == {
        ("quota1", "Bound"): 2,
        ("quota1", "Preempted"): 1,
        ("quota1", "Pending"): 1,
        ("quota2", "Bound"): 2,
    }
    assert [p["preemptor"].split("/")[0] for p in result["preemptions"]] == ["quota2"]
    got = quotas(result)
    assert got["quota1"]["used"] == {"cpu": "4"} and got["quota2"]["used"] == {"cpu": "4"}


def test_the_table_ends_with_a_line_per_quota() -> None:
    scenario = load_scenario([str(HERE / "capacity_scheduling_demo.yaml")])
    lines = render_table(simulate(scenario, default_configuration())).splitlines()
    assert lines[-2:] == [
        "quota quota1/quota1 (scheduling.x-k8s.io): used cpu=4; min cpu=4; max cpu=6; 1 pending pod",
        "quota quota2/quota2 (scheduling.x-k8s.io): used cpu=4; min cpu=4; max cpu=6; 0 pending pods",
    ]


# ---------------------------------------------------------------------------- no quotas, no change
WITHOUT_QUOTA_PLUGINS = {
    "profiles": [
        {
            "schedulerName": name,
            "plugins": {
                "multiPoint": {"disabled": [{"name": "ElasticQuota"}, {"name": "CapacityScheduling"}]}
            },
        }
        for name in ("koord-scheduler", "default-scheduler")
    ]
}


def _standalone_scenarios() -> list[Path]:
    found = []
    for path in sorted(SCENARIOS.rglob("*.yaml")):
        if "configs" in path.parts or path.name == "seed_cluster.yaml":
            continue
        try:
            load_scenario([str(path)])
        except ScenarioError:
            continue  # a template with placeholders, or a part of a larger scenario
        found.append(path)
    return found


@pytest.mark.parametrize("path", _standalone_scenarios(), ids=lambda p: str(p.relative_to(SCENARIOS)))
def test_without_quotas_placement_is_exactly_as_without_the_plugins(path: Path) -> None:
    plain = read_configuration(WITHOUT_QUOTA_PLUGINS)
    assert plain.config is not None
    with_plugins = report(path)
    without = report(path, config=plain.config)
    assert with_plugins == without
    assert "quotas" not in with_plugins
