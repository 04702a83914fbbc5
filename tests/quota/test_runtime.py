"""Koordinator's runtime quota, case by case as Koordinator's own tests work it out.

Ported from pkg/scheduler/plugins/elasticquota/core:
runtime_quota_calculator_test.go - TestRuntimeQuotaCalculator_IterationAdjustQuota (case1-no-guarantee,
case2-node4.sharedWeight=0), _IterationAdjustQuota_IntegerDistribution, _UpdateOneGroupRequest,
_UpdateOneGroupRuntimeQuota, _UpdateOneGroupRuntimeQuota2;
group_quota_manager_test.go - TestGroupQuotaManager_UpdateQuotaRequest, _NotAllowLentResource (1 to 4),
_MultiUpdateQuotaRequest2, _MultiUpdateQuotaRequestAndNonPreemptibleRequest,
_ChildRequestAndRequest_All_not_allowLent, _MultiUpdateQuotaRequest_WithScaledMinQuota1/2/3,
_MultiChildMaxGreaterParentMax(_MaxGreaterThanTotalRes), _RefreshAndGetRuntimeQuota_UpdateQuota,
_RootQuotaRuntime, _UpdateDefaultQuotaGroup, _MultiUpdateQuotaUsedAndNonPreemptibleUsed,
_UpdateRootQuotaUsed.
Amounts are cpu in millicores and memory in bytes, as the core keeps them. (case3 of
IterationAdjustQuota is left out: it needs the ElasticQuotaGuaranteeUsage feature gate, off by
default and not implemented.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from koordpy.api.elasticquota import DEFAULT_QUOTA, ROOT_QUOTA, SYSTEM_QUOTA, ElasticQuota
from koordpy.quota.runtime import RuntimeQuota, runtime, runtime_state, subtree_sums
from koordpy.quota.tree import DEFAULT_ROW, ROOT_ROW, SYSTEM_ROW, QuotaTree, build_quota_tree
from tests.quota.quotas import GI, cores, koord

Amounts = Mapping[str, int]


def res(cpu_milli: int, memory: int | None = None) -> dict[str, int]:
    out = {"cpu": cpu_milli}
    if memory is not None:
        out["memory"] = memory
    return out


def c(cpu: int, memory: int) -> dict[str, int]:
    """Whole cores and bytes, like Koordinator's createResourceList."""
    return {"cpu": cpu * 1000, "memory": memory}


def q(
    name: str,
    max_: tuple[int, int],
    min_: tuple[int, int],
    *,
    parent: str | None = None,
    lent: bool = True,
    is_parent: bool = False,
    weight: Mapping[str, Any] | None = None,
) -> ElasticQuota:
    """Koordinator's CreateQuota: max and min of (cores, bytes of memory)."""
    return koord(
        name,
        parent=parent,
        max=cores(*max_),
        min=cores(*min_),
        lent=lent,
        is_parent=is_parent,
        weight=weight,
    )


def compute(
    quotas: list[ElasticQuota],
    requests: Mapping[str, Amounts],
    total: Amounts,
    *,
    scale_min: bool = False,
    used: Mapping[str, Amounts] | None = None,
) -> tuple[QuotaTree, RuntimeQuota]:
    tree = build_quota_tree(quotas)
    assert not tree.problems, tree.problems
    matrix = np.zeros((tree.size, len(tree.resources)), dtype=np.int64)
    for name, amounts in requests.items():
        matrix[tree.rows[name]] = tree.vector(amounts)
    used_matrix = None
    if used is not None:
        used_matrix = np.zeros_like(matrix)
        for name, amounts in used.items():
            used_matrix[tree.rows[name]] = tree.vector(amounts)
    state = runtime_state(tree, matrix, tree.vector(total), used=used_matrix, scale_min=scale_min)
    return tree, state


def row_of(tree: QuotaTree, matrix: np.ndarray, name: str, keys: Amounts) -> dict[str, int]:
    values = matrix[tree.rows[name]]
    return {k: int(values[tree.resource_index[k]]) for k in keys}


@dataclass
class Case:
    quotas: list[ElasticQuota]
    requests: dict[str, dict[str, int]]
    total: dict[str, int]
    expected: dict[str, dict[str, int]]
    scale_min: bool = False
    expected_min: dict[str, dict[str, int]] = field(default_factory=dict)
    expected_request: dict[str, dict[str, int]] = field(default_factory=dict)


def _node(name: str, weight_milli: int, min_milli: int, weight_memory: str = "1") -> ElasticQuota:
    return koord(
        name,
        max={"cpu": "1", "memory": "1"},
        min={"cpu": f"{min_milli}m"},
        weight={"cpu": f"{weight_milli}m", "memory": weight_memory},
    )


ITERATION_NODES = [_node("node1", 40, 10), _node("node2", 60, 15), _node("node3", 50, 20)]
ITERATION_REQUESTS = {"node1": res(5), "node2": res(20), "node3": res(40), "node4": res(70)}

BORROWERS = [f"borrower-{i:02d}" for i in range(10)]
GPU = "nvidia.com/gpu"


def _gpu(name: str, min_: int) -> ElasticQuota:
    return koord(name, max={GPU: "100"}, min={GPU: str(min_)}, weight={GPU: "1"})


def _lent_tree(root_lends: bool, c1_lends: bool, c2_lends: bool) -> list[ElasticQuota]:
    return [
        q("test-root", (96, 0), (60, 0), lent=root_lends, is_parent=True),
        q("test-child1", (96, 0), (20, 0), parent="test-root", lent=c1_lends),
        q("test-child2", (96, 0), (20, 0), parent="test-root", lent=c2_lends),
    ]


def _three_level() -> list[ElasticQuota]:
    return [
        q("test1", (96, 160 * GI), (80, 80 * GI), is_parent=True),
        q("test1-a", (60, 80 * GI), (50, 80 * GI), parent="test1", is_parent=True),
        q("a-123", (30, 60 * GI), (20, 40 * GI), parent="test1-a"),
    ]


def _p_abc() -> list[ElasticQuota]:
    return [
        q("p", (1000, 1000 * GI), (300, 300 * GI), is_parent=True),
        *(q(n, (1000, 1000 * GI), (100, 100 * GI), parent="p") for n in "abc"),
    ]


REQ_200 = c(200, 200 * GI)

CASES = {
    "IterationAdjustQuota case1-no-guarantee": Case(
        [*ITERATION_NODES, _node("node4", 80, 15)],
        ITERATION_REQUESTS,
        res(100),
        {"node1": res(5), "node2": res(20), "node3": res(35), "node4": res(40)},
    ),
    "IterationAdjustQuota case2-node4.sharedWeight=0": Case(
        [*ITERATION_NODES, _node("node4", 0, 15)],
        ITERATION_REQUESTS,
        res(100),
        {"node1": res(5), "node2": res(20), "node3": res(40), "node4": res(15)},
    ),
    # 81 GPUs, all held by mins; the donor lends its 3 and ten equal borrowers split them: one each to
    # the three with the smallest names (equal remainders), no GPU lost to rounding
    "IterationAdjustQuota_IntegerDistribution": Case(
        [_gpu("donor", 3), *(_gpu(n, m) for n, m in zip(BORROWERS, [8] * 8 + [7, 7], strict=True))],
        {"donor": {GPU: 0}, **{n: {GPU: 100} for n in BORROWERS}},
        {GPU: 81},
        {
            "donor": {GPU: 0},
            **{n: {GPU: 9} for n in BORROWERS[:3]},
            **{n: {GPU: 8} for n in BORROWERS[3:8]},
            **{n: {GPU: 7} for n in BORROWERS[8:]},
        },
    ),
    # requests within min are granted whole, whatever the total, when mins are not scaled
    "UpdateOneGroupRequest": Case(
        [q(f"test-{i}", (i * 100, i * 10000), (i * 80, i * 8000)) for i in range(1, 6)],
        {f"test-{i}": c(i * 10, i * 1000) for i in range(1, 6)},
        c(50, 5000),
        {f"test-{i}": c(i * 10, i * 1000) for i in range(1, 6)},
    ),
    "UpdateOneGroupRuntimeQuota step1": Case(
        [
            q("test1", (80, 800), (60, 600), weight=cores(1, 1)),
            q("test2", (100, 1000), (50, 500), weight=cores(1, 1)),
        ],
        {"test2": c(90, 900)},
        c(100, 1000),
        {"test1": c(0, 0), "test2": c(90, 900)},
    ),
    "UpdateOneGroupRuntimeQuota step2": Case(
        [
            q("test1", (80, 800), (60, 600), weight=cores(1, 1)),
            q("test2", (100, 1000), (50, 500), weight=cores(1, 1)),
        ],
        {"test1": c(30, 300), "test2": c(90, 900)},
        c(100, 1000),
        {"test1": c(30, 300), "test2": c(70, 700)},
    ),
    "UpdateOneGroupRuntimeQuota step3": Case(
        [
            q("test1", (80, 800), (60, 600), weight=cores(1, 1)),
            q("test2", (100, 1000), (50, 500), weight=cores(1, 1)),
        ],
        {"test1": c(60, 600), "test2": c(90, 900)},
        c(100, 1000),
        {"test1": c(60, 600), "test2": c(50, 500)},
    ),
    "UpdateOneGroupRuntimeQuota2 alone": Case(
        [q("test1", (80, 800), (50, 500), weight=cores(1, 1))],
        {"test1": c(100, 1000)},
        c(120, 1200),
        {"test1": c(80, 800)},
    ),
    "UpdateOneGroupRuntimeQuota2 both": Case(
        [
            q("test1", (80, 800), (50, 500), weight=cores(1, 1)),
            q("test2", (100, 1000), (50, 500), weight=cores(1, 1)),
        ],
        {"test1": c(100, 1000), "test2": c(150, 1500)},
        c(120, 1200),
        {"test1": c(60, 600), "test2": c(60, 600)},
    ),
    "UpdateQuotaRequest within min": Case(
        [q("test1", (96, 160 * GI), (50, 80 * GI)), q("test2", (96, 160 * GI), (40, 80 * GI))],
        {"test1": c(60, 100 * GI)},
        c(96, 160 * GI),
        {"test1": c(60, 100 * GI)},
    ),
    "UpdateQuotaRequest alone above max": Case(
        [q("test1", (96, 160 * GI), (50, 80 * GI)), q("test2", (96, 160 * GI), (40, 80 * GI))],
        {"test1": c(120, 200 * GI)},
        c(96, 160 * GI),
        {"test1": c(96, 160 * GI)},
    ),
    "UpdateQuotaRequest both above max": Case(
        [q("test1", (96, 160 * GI), (50, 80 * GI)), q("test2", (96, 160 * GI), (40, 80 * GI))],
        {"test1": c(120, 200 * GI), "test2": c(150, 210 * GI)},
        c(96, 160 * GI),
        {"test1": c(53, 80 * GI), "test2": c(43, 80 * GI)},
    ),
    "NotAllowLentResource": Case(
        [q("test1", (96, 0), (60, 0)), q("test2", (96, 0), (40, 0), lent=False)],
        {"test1": c(120, 0)},
        c(100, 0),
        {"test1": c(60, 0), "test2": c(40, 0)},
    ),
    **{
        f"NotAllowLentResource_{n} child1 asks {asked}": Case(
            _lent_tree(*lends),
            {"test-child1": c(asked, 0)},
            c(100, 0),
            {"test-root": c(r, 0), "test-child1": c(c1, 0), "test-child2": c(c2, 0)},
        )
        for n, lends, steps in [
            (2, (False, False, False), [(0, 60, 20, 20), (40, 60, 40, 20), (60, 80, 60, 20)]),
            (3, (True, False, True), [(0, 20, 20, 0), (40, 40, 40, 0), (60, 60, 60, 0)]),
            (4, (True, False, False), [(0, 40, 20, 20), (40, 60, 40, 20), (60, 80, 60, 20)]),
        ]
        for asked, r, c1, c2 in steps
    },
    "MultiUpdateQuotaRequest2 request below min": Case(
        _three_level(),
        {"a-123": c(10, 30 * GI)},
        c(96, 160 * GI),
        {"a-123": c(10, 30 * GI), "test1-a": c(10, 30 * GI), "test1": c(10, 30 * GI)},
    ),
    "MultiUpdateQuotaRequest2 request above min": Case(
        _three_level(),
        {"a-123": c(25, 45 * GI)},
        c(96, 160 * GI),
        {"a-123": c(25, 45 * GI)},
        expected_request={"test1-a": c(25, 45 * GI), "test1": c(25, 45 * GI)},
    ),
    "MultiUpdateQuotaRequest2 request above max": Case(
        _three_level(),
        {"a-123": c(55, 75 * GI)},
        c(96, 160 * GI),
        {"a-123": c(30, 60 * GI)},
        expected_request={"a-123": c(55, 75 * GI), "test1-a": c(30, 60 * GI), "test1": c(30, 60 * GI)},
    ),
    "MultiUpdateQuotaRequestAndNonPreemptibleRequest": Case(
        [
            q("test1", (96, 160 * GI), (50, 80 * GI), is_parent=True),
            q("test1-sub1", (96, 160 * GI), (50, 80 * GI), parent="test1", is_parent=True),
            q("test1-sub1-1", (96, 160 * GI), (50, 80 * GI), parent="test1-sub1"),
        ],
        {"test1-sub1-1": c(120, 290 * GI)},
        c(0, 0),
        {},
        expected_request={
            "test1-sub1-1": c(120, 290 * GI),
            "test1-sub1": c(96, 160 * GI),
            "test1": c(96, 160 * GI),
        },
    ),
    **{
        f"ChildRequestAndRequest_All_not_allowLent pods of {pods}": Case(
            [
                q("1", (40, 40), (20, 20), lent=False, is_parent=True),
                q("2", (40, 40), (10, 10), parent="1", lent=False),
                q("3", (40, 40), (5, 5), parent="1", lent=False),
            ],
            {"2": c(pods, pods)},
            c(50, 50),
            {},
            expected_request={"3": c(5, 5), "2": c(r2, r2), "1": c(r1, r1)},
        )
        for pods, r2, r1 in [(0, 10, 20), (5, 10, 20), (15, 15, 20), (25, 25, 30)]
    },
    "MultiChildMaxGreaterParentMax_MaxGreaterThanTotalRes": Case(
        [
            q("test1", (600, 4096), (100, 100), is_parent=True),
            q("test1-sub1", (500, 2048), (100, 100), parent="test1"),
        ],
        {"test1-sub1": c(500, 4096)},
        c(300, 8000),
        {"test1-sub1": c(300, 2048), "test1": c(300, 2048)},
        expected_request={"test1": c(500, 2048)},
    ),
    "MultiChildMaxGreaterParentMax": Case(
        [
            q("test1", (300, 1024 * GI), (176, 756 * GI), is_parent=True),
            q("test1-sub1", (500, 2048 * GI), (100, 512 * GI), parent="test1"),
        ],
        {"test1-sub1": c(400, 1500 * GI)},
        c(350, 1800 * GI),
        {"test1-sub1": c(300, 1024 * GI)},
        expected_request={"test1": c(400, 1500 * GI), "test1-sub1": c(400, 1500 * GI)},
    ),
    "WithScaledMinQuota1 short of the mins": Case(
        _p_abc(),
        {"a": REQ_200, "b": REQ_200, "c": REQ_200},
        c(200, 200 * GI),
        {
            "p": c(200, 200 * GI),
            "a": res(66667, 200 * GI // 3 + 1),
            "b": res(66667, 200 * GI // 3 + 1),
            "c": res(66666, 200 * GI // 3),
        },
        scale_min=True,
        expected_min={"p": c(200, 200 * GI), **{n: res(66666, 200 * GI // 3) for n in "abc"}},
    ),
    "WithScaledMinQuota1 enough again": Case(
        _p_abc(),
        {"a": REQ_200, "b": REQ_200, "c": REQ_200},
        c(600, 600 * GI),
        {"p": c(600, 600 * GI), **{n: REQ_200 for n in "abc"}},
        scale_min=True,
        expected_min={"p": c(300, 300 * GI), **{n: c(100, 100 * GI) for n in "abc"}},
    ),
    "WithScaledMinQuota2": Case(
        _p_abc(),
        {"a": REQ_200, "b": c(0, 0), "c": REQ_200},
        c(200, 200 * GI),
        {"p": c(200, 200 * GI), "a": c(100, 100 * GI), "b": c(0, 0), "c": c(100, 100 * GI)},
        scale_min=True,
    ),
    "WithScaledMinQuota3 scaling off": Case(
        _p_abc(),
        {"a": REQ_200, "b": REQ_200, "c": REQ_200},
        c(200, 200 * GI),
        {"p": c(300, 300 * GI), **{n: c(100, 100 * GI) for n in "abc"}},
    ),
    "RefreshAndGetRuntimeQuota_UpdateQuota no request": Case(
        [q("1", (40, 40), (10, 10)), q("2", (40, 40), (0, 0))],
        {},
        c(50, 50),
        {"1": c(0, 0), "2": c(0, 0)},
        scale_min=True,
    ),
    "RefreshAndGetRuntimeQuota_UpdateQuota within min": Case(
        [q("1", (40, 40), (10, 10)), q("2", (40, 40), (0, 0))],
        {"1": c(5, 5), "2": c(5, 5)},
        c(50, 50),
        {"1": c(5, 5), "2": c(5, 5)},
        scale_min=True,
    ),
    "RefreshAndGetRuntimeQuota_UpdateQuota above min": Case(
        [q("1", (40, 40), (10, 10)), q("2", (40, 40), (0, 0))],
        {"1": c(30, 30), "2": c(30, 30)},
        c(50, 50),
        {"1": c(30, 30), "2": c(20, 20)},
        scale_min=True,
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_runtime_quota_matches_koordinator(case: Case) -> None:
    tree, state = compute(case.quotas, case.requests, case.total, scale_min=case.scale_min)
    got = {name: row_of(tree, state.runtime, name, want) for name, want in case.expected.items()}
    assert got == case.expected
    got_min = {name: row_of(tree, state.min, name, want) for name, want in case.expected_min.items()}
    assert got_min == case.expected_min
    got_request = {
        name: row_of(tree, state.request, name, want) for name, want in case.expected_request.items()
    }
    assert got_request == case.expected_request


def test_root_runtime_is_the_cluster_less_system_and_default_use() -> None:
    tree, state = compute(
        [q("team", (100, 100), (0, 0))],
        {},
        c(1000, 1000),
        used={SYSTEM_QUOTA: c(10, 30), DEFAULT_QUOTA: c(2, 5)},
    )
    assert state.runtime[ROOT_ROW].tolist() == [988000, 965]
    assert tree.names[ROOT_ROW] == ROOT_QUOTA


def test_default_and_system_quotas_get_their_max() -> None:
    tree, state = compute(
        [koord(DEFAULT_QUOTA, max=cores(100, 1000))], {DEFAULT_QUOTA: c(500, 5000)}, c(10, 10)
    )
    assert state.runtime[DEFAULT_ROW].tolist() == [100000, 1000]
    assert state.runtime[SYSTEM_ROW].tolist() == tree.max[SYSTEM_ROW].tolist()


def test_quota_with_a_problem_takes_no_part_in_the_split() -> None:
    quotas = [
        q("ok", (100, 100), (10, 10)),
        koord("broken", max=cores(100, 100), min=cores(200, 10)),
        koord("orphan", parent="nobody", max=cores(100, 100), min=cores(10, 10)),
    ]
    tree = build_quota_tree(quotas)
    requests = np.zeros((tree.size, len(tree.resources)), dtype=np.int64)
    for name in ("ok", "broken", "orphan"):
        requests[tree.rows[name]] = tree.vector(c(80, 80))
    got = runtime(tree, requests, tree.vector(c(100, 100)))
    assert got[tree.rows["ok"]].tolist() == [80000, 80]
    assert got[tree.rows["broken"]].tolist() == [0, 0]
    assert got[tree.rows["orphan"]].tolist() == [0, 0]


def test_requests_in_resources_a_quota_does_not_manage_are_ignored() -> None:
    tree, state = compute(
        [koord("team", max=cores(10))], {"team": {"cpu": 4000, "memory": 1 << 40}}, c(100, 0)
    )
    assert row_of(tree, state.request, "team", c(0, 0)) == {"cpu": 4000, "memory": 0}
    assert row_of(tree, state.runtime, "team", c(0, 0)) == {"cpu": 4000, "memory": 0}


def test_runtime_refuses_matrices_of_another_tree() -> None:
    tree = build_quota_tree([q("team", (10, 10), (1, 1))])
    with pytest.raises(ValueError, match="requests must be"):
        runtime(tree, np.zeros((1, 2), dtype=np.int64), np.zeros(2, dtype=np.int64))


def test_split_is_exact_for_amounts_beyond_int64_products() -> None:
    """Memory in bytes weighs like its max: products of weight and amount pass 2^63, and the shares
    must still add up to exactly what the parent has."""
    names = [f"q{i}" for i in range(7)]
    quotas = [koord(n, max={"memory": "900Ti"}, min={"memory": "1Gi"}) for n in names]
    requests = {n: {"memory": 800 << 40} for n in names}
    # 7 mins of 1Gi leave 1000Ti + 5 bytes to split, 3 more than a multiple of 7
    total = {"memory": (1000 << 40) + 7 * (1 << 30) + 5}
    tree, state = compute(quotas, requests, total)
    shares = [row_of(tree, state.runtime, n, total)["memory"] for n in names]
    assert sum(shares) == total["memory"]
    # equal weights: equal shares, the 3 units left over going to the three first names
    assert shares[0] - shares[-1] == 1
    assert shares[:3] == [shares[0]] * 3
    assert shares[3:] == [shares[-1]] * 4


def test_used_counts_in_the_quota_and_every_ancestor() -> None:
    tree = build_quota_tree(
        [
            q("test1", (96, 160 * GI), (50, 80 * GI), is_parent=True),
            q("test1-sub1", (96, 160 * GI), (50, 80 * GI), parent="test1", is_parent=True),
            q("test1-sub1-1", (96, 160 * GI), (50, 80 * GI), parent="test1-sub1"),
        ]
    )
    own = np.zeros((tree.size, len(tree.resources)), dtype=np.int64)
    own[tree.rows["test1-sub1"]] = tree.vector(c(120, 290 * GI))
    used = subtree_sums(tree, own)
    for name, expected in (
        ("test1-sub1-1", c(0, 0)),
        ("test1-sub1", c(120, 290 * GI)),
        ("test1", c(120, 290 * GI)),
    ):
        assert row_of(tree, used, name, expected) == expected


def test_root_used_is_everything_the_cluster_runs() -> None:
    tree = build_quota_tree(
        [
            q("1", (20, 20), (10, 10), is_parent=True),
            q("2", (30, 30), (8, 6)),
            q("3", (30, 20), (8, 5), parent="1"),
        ]
    )
    own = np.zeros((tree.size, len(tree.resources)), dtype=np.int64)
    own[SYSTEM_ROW] = tree.vector(c(10, 30))
    # the system quota's pods, then the default quota's (its own 2/5 and a pod of 10/10)
    own[DEFAULT_ROW] = tree.vector(c(12, 15))
    own[tree.rows["2"]] = tree.vector(c(5, 5))
    own[tree.rows["3"]] = tree.vector(c(7, 5))
    used = subtree_sums(tree, own)
    assert used[ROOT_ROW].tolist() == [34000, 55]
    assert row_of(tree, used, "1", c(0, 0)) == c(7, 5)
