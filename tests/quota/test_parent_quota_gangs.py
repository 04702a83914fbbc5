"""ElasticQuota's `enableCheckParentQuota` for a gang whose members belong to different quotas.

Koordinator (pkg/scheduler/plugins/elasticquota: plugin.go PreFilter, plugin_helper.go
checkQuotaRecursive, core/group_quota_manager.go ReservePod and updateGroupDeltaUsedNoLock) checks
one pod at a time: the pod's quota, then every ancestor below the root, each with used + the
pod's request (masked by the pod's quota's max) against the ancestor's runtime (max with
enableRuntimeQuota off), in the resources the pod asks for. The plugin knows nothing of gangs; a
member that passes is reserved, and Reserve adds its request to its quota's used and to every
ancestor's. The gang's later members are thus checked with the earlier ones counted: the member
that asks last for a resource is checked, at each ancestor it shares with the others, against the
whole gang's request beneath that ancestor. Either every member passes (the sums fit) or the gang
never completes and nothing stays held: koordpy judges those sums at once.

Quotas below: org (a parent, max 12) over c1 and c2 (max 8 each), and solo beside org. Expected
outcomes are worked by hand from those rules."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from koordpy.config.models import parse_configuration
from koordpy.quota.admission import koordinator_admit_ancestors, leaf_ask
from koordpy.quota.tree import build_quota_tree
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import simulate
from tests.quota.quotas import cores, koord, koord_dict
from tests.quota.worlds import gang_annotations, placed, quota_pod, run, summary, verdict, world

SCENARIO = Path(__file__).parent / "scenarios" / "gang_across_leaf_quotas.yaml"

TREE = build_quota_tree(
    [
        koord("org", is_parent=True, min=cores(8), max=cores(12), created=1),
        koord("c1", parent="org", min=cores(4), max=cores(8), created=2),
        koord("c2", parent="org", min=cores(4), max=cores(8), created=3),
        koord("solo", min=cores(4), max=cores(8), created=4),
    ]
)


def _matrix(rows: Mapping[str, int]) -> Any:
    """cpu cores per quota -> a quota x resource matrix in millicores."""
    out = np.zeros((TREE.size, len(TREE.resources)), dtype=np.int64)
    for name, cpu in rows.items():
        out[TREE.rows[name]] = TREE.vector({"cpu": cpu * 1000})
    return out


@pytest.mark.parametrize(
    ("asks", "used", "runtime", "expected"),
    [
        pytest.param(
            {"c1": 8, "c2": 8},
            {},
            {"org": 12},
            "quota org (above c1, c2): cpu used 0 + requested 16 > runtime 12",
            id="each leaf within, the parent not",
        ),
        pytest.param({"c1": 4, "c2": 8}, {}, {"org": 12}, None, id="the sum within the parent"),
        pytest.param(
            {"c1": 4, "c2": 4},
            {"org": 8, "c2": 8},
            {"org": 12},
            "quota org (above c1, c2): cpu used 8 + requested 8 > runtime 12",
            id="what the parent already uses counts",
        ),
        pytest.param({"c1": 8, "solo": 8}, {}, {"org": 12}, None, id="no ancestor in common"),
        pytest.param(
            {"c1": 8},
            {"org": 8, "c2": 8},
            {"org": 12},
            "quota org (above c1): cpu used 8 + requested 8 > runtime 12",
            id="one quota alone",
        ),
    ],
)
def test_ancestors_are_checked_with_the_sum_of_what_is_asked_beneath_them(
    asks: dict[str, int], used: dict[str, int], runtime: dict[str, int], expected: str | None
) -> None:
    vectors = {TREE.rows[q]: leaf_ask(TREE, TREE.rows[q], {"cpu": c * 1000}) for q, c in asks.items()}
    got = koordinator_admit_ancestors(TREE, _matrix(runtime), _matrix(used), vectors)
    assert got == expected


def test_without_runtime_quota_the_ancestors_max_is_the_limit() -> None:
    vectors = {TREE.rows[q]: leaf_ask(TREE, TREE.rows[q], {"cpu": 8000}) for q in ("c1", "c2")}
    got = koordinator_admit_ancestors(
        TREE, _matrix({"org": 100}), _matrix({}), vectors, enable_runtime_quota=False
    )
    assert got == "quota org (above c1, c2): cpu used 0 + requested 16 > max 12"


def test_an_ancestor_is_checked_only_in_the_resources_asked_beneath_it() -> None:
    # c1's pods ask memory only: the parent's cpu, over its runtime already, is not looked at
    vectors = {TREE.rows["c1"]: leaf_ask(TREE, TREE.rows["c1"], {"cpu": 0, "memory": 1 << 30})}
    got = koordinator_admit_ancestors(TREE, _matrix({"org": 4}), _matrix({"org": 8}), vectors)
    assert got is None


# ---------------------------------------------------------------------------------- in the cycle
QUOTAS = [
    koord_dict("org", is_parent=True, min=cores(8), max=cores(12), created=1),
    koord_dict("c1", parent="org", min=cores(4), max=cores(8), created=2),
    koord_dict("c2", parent="org", min=cores(4), max=cores(8), created=3),
]


def _config(check_parents: bool) -> Any:
    args = {"enableRuntimeQuota": False, "enableCheckParentQuota": check_parents}
    return parse_configuration(
        {
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "pluginConfig": [{"name": "ElasticQuota", "args": args}],
                }
            ]
        }
    )


def _gang(quotas: list[str], cpu: int = 4) -> list[dict[str, Any]]:
    ann = gang_annotations("job", len(quotas))
    return [quota_pod(f"job-{i}", cpu, q, annotations=ann) for i, q in enumerate(quotas)]


@pytest.mark.parametrize(
    ("quotas", "check_parents", "bound"),
    [
        # 8 + 8 beneath org, whose max is 12: the fourth member would pass org's max
        pytest.param(["c1", "c1", "c2", "c2"], True, False, id="over the parent: none placed"),
        pytest.param(["c1", "c1", "c2"], True, True, id="within the parent: all placed"),
        # without the flag only each member's own quota is checked, and each holds 8
        pytest.param(["c1", "c1", "c2", "c2"], False, True, id="parents unchecked: all placed"),
    ],
)
def test_a_gang_across_leaf_quotas_is_admitted_by_the_parent_as_a_unit(
    quotas: list[str], check_parents: bool, bound: bool
) -> None:
    cluster = run(world([("n1", 16), ("n2", 16)], QUOTAS, _gang(quotas), config=_config(check_parents)))
    names = sorted(f"job-{i}" for i in range(len(quotas)))
    assert sorted(placed(cluster)) == (names if bound else [])
    if not bound:
        # nothing of the parent is held by a gang that cannot complete
        assert summary(cluster)["org"]["used"] == {"cpu": "0"}
        for name in names:
            _, message = verdict(cluster, name)
            assert "quota org (above c1, c2): cpu used 0 + requested 16 > max 12" in message
            assert "the 4 pending pods of gang group" in message


def test_the_gang_goes_once_the_parent_holds_it() -> None:
    cluster = run(
        world([("n1", 16), ("n2", 16)], QUOTAS, _gang(["c1", "c1", "c2", "c2"]), config=_config(True))
    )
    assert placed(cluster) == {}
    cluster.scheduler.on_object(
        "ElasticQuota", "Update", koord_dict("org", is_parent=True, min=cores(8), max=cores(16), created=1)
    )
    run(cluster)
    assert sorted(placed(cluster)) == [f"job-{i}" for i in range(4)]
    assert summary(cluster)["org"]["used"] == {"cpu": "16"}


def test_scenario_a_gang_across_two_teams_waits_for_their_department() -> None:
    config = parse_configuration(
        {
            "profiles": [
                {
                    "schedulerName": "koord-scheduler",
                    "pluginConfig": [
                        {
                            "name": "ElasticQuota",
                            "args": {"enableRuntimeQuota": False, "enableCheckParentQuota": True},
                        }
                    ],
                }
            ]
        }
    )
    result = simulate(load_scenario([str(SCENARIO)]), config).to_dict()
    phases = {p["name"]: p["phase"] for p in result["pods"]}
    # the department (max 12) holds the 8 cpu its teams' pods run; the gang's 8 would pass it
    assert phases["web"] == phases["notebook"] == "Bound"
    assert {n: ph for n, ph in phases.items() if n.startswith("train-")} == {
        f"train-{i}": "Pending" for i in range(4)
    }
    (group,) = result["podGroups"]
    assert "quota dept (above team-a, team-b): cpu used 8 + requested 8 > max 12" in group["message"]
    used = {q["name"]: q["used"] for q in result["quotas"]}
    assert (used["dept"], used["team-a"], used["team-b"]) == ({"cpu": "8"}, {"cpu": "4"}, {"cpu": "4"})
