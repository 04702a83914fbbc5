"""A pod's request against its quota, as each system's PreFilter checks it.

Koordinator cases from pkg/scheduler/plugins/elasticquota/plugin_test.go: TestPlugin_PreFilter
(default, value not enough, used dimension larger than runtime but value is enough, runtime not
enough but disable runtime), TestPlugin_PreFilter_CheckParent (parent reject),
TestPlugin_Prefilter_QuotaNonPreempt (default, non-preemptible pod used larger than min,
non-preemptible pod will not be evicted).
scheduler-plugins cases from pkg/capacityscheduling: capacity_scheduling_test.go TestPreFilter (pod
subjects to ElasticQuota, the sum of used is bigger than the sum of min, without elasticQuotaInfo),
elasticquota_test.go TestUsedOverMaxWith and TestUsedOverMinWith, and the KEP's story 1
(kep/9-capacity-scheduling)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from koordpy.api.elasticquota import BY_LABEL, DEFAULT_QUOTA, ElasticQuota, PodQuota
from koordpy.quota.admission import capacity_admit, koordinator_admit
from koordpy.quota.runtime import runtime
from koordpy.quota.tree import NamespaceQuotas, QuotaTree, build_namespace_quotas, build_quota_tree
from tests.quota.quotas import cores, koord, xk8s

GPU = "nvidia.com/gpu"


def _matrix(tree: QuotaTree | NamespaceQuotas, rows: Mapping[str, Mapping[str, int]]) -> np.ndarray:
    out = np.zeros((tree.size, len(tree.resources)), dtype=np.int64)
    for key, amounts in rows.items():
        row = tree.row(key)
        assert row is not None, key
        out[row] = tree.vector(amounts)
    return out


def _cpu_mem(cpu: int, memory: int, gpu: int | None = None) -> dict[str, int]:
    out = {"cpu": cpu * 1000, "memory": memory}
    if gpu is not None:
        out[GPU] = gpu
    return out


DEFAULT = PodQuota(DEFAULT_QUOTA, BY_LABEL)


@pytest.mark.parametrize(
    ("runtime_row", "asked", "enable_runtime", "expected"),
    [
        pytest.param(
            _cpu_mem(0, 20),
            _cpu_mem(1, 2, gpu=1),
            True,
            "quota koordinator-default-quota: cpu used 0 + requested 1 > runtime 0",
            id="default",
        ),
        pytest.param(_cpu_mem(10, 20), _cpu_mem(1, 2, gpu=1), True, None, id="value is enough"),
        pytest.param(
            _cpu_mem(1, 2),
            _cpu_mem(1, 3, gpu=1),
            True,
            "quota koordinator-default-quota: memory used 0 + requested 3 > runtime 2",
            id="value not enough",
        ),
        pytest.param(
            _cpu_mem(1, 2), _cpu_mem(1, 3, gpu=1), False, None, id="runtime not enough, but disabled"
        ),
    ],
)
def test_koordinator_checks_used_and_request_against_runtime_in_managed_resources(
    runtime_row: dict[str, int], asked: dict[str, int], enable_runtime: bool, expected: str | None
) -> None:
    # the default quota manages cpu and memory only: the GPU asked for is not checked
    tree = build_quota_tree([])
    runtime_matrix = _matrix(tree, {DEFAULT_QUOTA: runtime_row})
    used = _matrix(tree, {})
    got = koordinator_admit(tree, runtime_matrix, used, DEFAULT, asked, enable_runtime_quota=enable_runtime)
    assert got == expected


PARENT_AND_CHILD = [
    koord(
        "test",
        max={"cpu": "10", "memory": "30", GPU: "10"},
        min={"cpu": "0", "memory": "0", GPU: "0"},
        is_parent=True,
    ),
    koord(
        "test-child",
        parent="test",
        max={"cpu": "10", "memory": "30", GPU: "10"},
        min={"cpu": "0", "memory": "0", GPU: "0"},
    ),
]


@pytest.mark.parametrize(
    ("check_parents", "expected"),
    [
        (True, "quota test (above test-child): memory used 0 + requested 3 > runtime 2"),
        (False, None),
    ],
)
def test_koordinator_checks_ancestors_only_when_asked(check_parents: bool, expected: str | None) -> None:
    tree = build_quota_tree(PARENT_AND_CHILD)
    runtime_matrix = _matrix(tree, {"test-child": _cpu_mem(1, 3, gpu=1), "test": _cpu_mem(1, 2, gpu=1)})
    got = koordinator_admit(
        tree,
        runtime_matrix,
        _matrix(tree, {}),
        PodQuota("test-child", BY_LABEL),
        _cpu_mem(1, 3, gpu=1),
        check_parents=check_parents,
    )
    assert got == expected


def _pods(*pods: tuple[int, int, bool]) -> tuple[dict[str, int], dict[str, int]]:
    """(cpu cores, memory bytes, non-preemptible) of assigned pods -> used, non-preemptible used."""
    used = {"cpu": 0, "memory": 0}
    held = {"cpu": 0, "memory": 0}
    for cpu, mem, non_preemptible in pods:
        for target in (used, held) if non_preemptible else (used,):
            target["cpu"] += cpu * 1000
            target["memory"] += mem
    return used, held


@pytest.mark.parametrize(
    ("pod", "placed", "max_", "total", "expected"),
    [
        pytest.param(
            (2, 2, True),
            [(2, 1, False), (1, 1, False), (1, 1, False)],
            (10, 10),
            (10, 10),
            None,
            id="default",
        ),
        pytest.param(
            (2, 2, True),
            [(2, 1, False), (2, 1, True), (2, 1, True)],
            (10, 8),
            (8, 5),
            "quota test1: cpu non-preemptible used 4 + requested 2 > min 5",
            id="non-preemptible used larger than min",
        ),
        pytest.param(
            (2, 1, True),
            [(2, 1, False), (2, 1, False), (2, 2, True)],
            (10, 8),
            (7, 5),
            "quota test1: cpu used 6 + requested 2 > runtime 7",
            id="runtime exceeded before min is looked at",
        ),
    ],
)
def test_koordinator_non_preemptible_pod_must_fit_within_min(
    pod: tuple[int, int, bool],
    placed: list[tuple[int, int, bool]],
    max_: tuple[int, int],
    total: tuple[int, int],
    expected: str | None,
) -> None:
    tree = build_quota_tree([koord("test1", max=cores(*max_), min=cores(5, 5))])
    used, held = _pods(*placed)
    everything, _ = _pods(*placed, pod)
    # the pending pod counts in its quota's request from the moment it exists
    quota_runtime = runtime(tree, _matrix(tree, {"test1": everything}), tree.vector(_cpu_mem(*total)))
    got = koordinator_admit(
        tree,
        quota_runtime,
        _matrix(tree, {"test1": used}),
        PodQuota("test1", BY_LABEL),
        _cpu_mem(pod[0], pod[1]),
        non_preemptible=pod[2],
        non_preemptible_used=_matrix(tree, {"test1": held}),
    )
    assert got == expected


@pytest.mark.parametrize(
    ("pod_quota", "expected"),
    [
        (PodQuota("gone", BY_LABEL, exists=False), "quota gone named by the pod's label does not exist"),
        (PodQuota("org", BY_LABEL), "quota org is a parent quota; pods join quotas without children"),
        (PodQuota("bad", BY_LABEL), "quota bad: spec.min.cpu: min 2 is above max 1"),
    ],
)
def test_koordinator_pod_of_a_quota_with_a_problem_gets_the_problem(
    pod_quota: PodQuota, expected: str
) -> None:
    tree = build_quota_tree(
        [
            koord("org", max=cores(1), is_parent=True),
            koord("bad", max=cores(1), min=cores(2)),
        ]
    )
    zeros = _matrix(tree, {})
    assert koordinator_admit(tree, zeros, zeros, pod_quota, {"cpu": 1}) == expected


def _capacity(
    quotas: list[ElasticQuota], used: Mapping[str, Mapping[str, int]]
) -> tuple[NamespaceQuotas, np.ndarray]:
    namespaced = build_namespace_quotas(quotas)
    return namespaced, _matrix(namespaced, used)


@pytest.mark.parametrize(
    ("namespace", "asked", "expected"),
    [
        pytest.param("ns1", {"memory": 500}, None, id="within max and total min"),
        pytest.param(
            "ns1",
            {"memory": 1800},
            "quota ns1/eq1: memory used 300 + requested 1800 > max 2000",
            id="above max",
        ),
        pytest.param("ns3", {"memory": 5000}, None, id="without elasticQuotaInfo"),
    ],
)
def test_capacity_pod_subject_to_its_namespace_quota(
    namespace: str, asked: dict[str, int], expected: str | None
) -> None:
    quotas, used = _capacity(
        [xk8s("eq1", "ns1", min={"memory": "1000"}, max={"memory": "2000"})], {"ns1": {"memory": 300}}
    )
    assert capacity_admit(quotas, used, namespace, asked) == expected


def test_capacity_sum_of_used_above_sum_of_min_is_refused() -> None:
    quotas, used = _capacity(
        [
            xk8s("eq1", "ns1", min={"memory": "1000"}, max={"memory": "2000"}),
            xk8s("eq2", "ns2", min={"memory": "1000"}, max={"memory": "2000"}),
        ],
        {"ns1": {"memory": 1800}, "ns2": {"memory": 200}},
    )
    got = capacity_admit(quotas, used, "ns2", {"memory": 500})
    assert got == "quotas in total: memory used 2000 + requested 500 > min 2000"


@pytest.mark.parametrize(
    ("max_", "used", "asked", "over"),
    [
        pytest.param(
            {"cpu": "4", "memory": "200", GPU: "5"},
            {"cpu": 4000, "memory": 200, GPU: 5},
            {"cpu": 100, "memory": 100},
            "cpu used 4 + requested 100m > max 4, memory used 200 + requested 100 > max 200",
            id="sum of request and used bigger than max",
        ),
        pytest.param(
            {"cpu": "4", "memory": "200", GPU: "5"},
            {"cpu": 3900, "memory": 100, GPU: 5},
            {"cpu": 100, "memory": 100},
            None,
            id="sum of request and used not bigger than max",
        ),
        pytest.param(
            None, {"cpu": 3900, "memory": 100, GPU: 5}, {"cpu": 100, "memory": 100}, None, id="no max"
        ),
        pytest.param(
            {"cpu": "3", "memory": "100"},
            {"cpu": 10, "memory": 10},
            {"cpu": 10, "memory": 10, GPU: 5},
            None,
            id="max without the gpu asked for",
        ),
        pytest.param(
            {"cpu": "3", "memory": "100", "ephemeral-storage": "100"},
            {"cpu": 10, "memory": 10, "ephemeral-storage": 10},
            {"cpu": 10, "memory": 10, "ephemeral-storage": 100},
            "ephemeral-storage used 10 + requested 100 > max 100",
            id="ephemeral storage",
        ),
        pytest.param(
            {"cpu": "3", GPU: "2"},
            {"cpu": 10, GPU: 5},
            {"cpu": 10},
            None,
            id="extended resources the pod does not ask for are not checked",
        ),
        pytest.param(
            {"cpu": "3"},
            {"cpu": 10},
            {"cpu": 10, "memory": 1},
            "memory used 0 + requested 1 > max 0",
            id="stated max without memory",
        ),
    ],
)
def test_capacity_used_over_max_with(
    max_: dict[str, str] | None, used: dict[str, int], asked: dict[str, int], over: str | None
) -> None:
    # another namespace's min large enough that only max can refuse
    room = {"cpu": "1000", "memory": "1Ti", "ephemeral-storage": "1Ti", GPU: "1000"}
    quotas, used_matrix = _capacity(
        [xk8s("eq", "ns1", max=max_), xk8s("room", "spare", min=room)], {"ns1": used}
    )
    got = capacity_admit(quotas, used_matrix, "ns1", asked)
    assert got == (f"quota ns1/eq: {over}" if over else None)


@pytest.mark.parametrize(
    ("min_", "used", "asked", "over"),
    [
        pytest.param(
            {"cpu": "3", "memory": "100", GPU: "5"},
            {"cpu": 4000, "memory": 200, GPU: 5},
            {"cpu": 1500, "memory": 100},
            "cpu used 4 + requested 1500m > min 3, memory used 200 + requested 100 > min 100",
            id="sum of request and used bigger than min",
        ),
        pytest.param(
            {"cpu": "4", "memory": "200", GPU: "5"},
            {"cpu": 300, "memory": 100, GPU: 5},
            {"cpu": 100, "memory": 50},
            None,
            id="sum of request and used not bigger than min",
        ),
        pytest.param(
            None,
            {"cpu": 3900, "memory": 100, GPU: 5},
            {"cpu": 100, "memory": 100},
            "cpu used 3900m + requested 100m > min 0, memory used 100 + requested 100 > min 0",
            id="no min",
        ),
        pytest.param(
            {"cpu": "3", "memory": "100"},
            {"cpu": 10, "memory": 10},
            {"cpu": 10, "memory": 10, GPU: 5},
            "nvidia.com/gpu used 0 + requested 5 > min 0",
            id="min without the gpu asked for",
        ),
        pytest.param(
            {"cpu": "3", "memory": "100", "ephemeral-storage": "100"},
            {"cpu": 10, "memory": 10, "ephemeral-storage": 10},
            {"cpu": 10, "memory": 10, "ephemeral-storage": 10},
            None,
            id="ephemeral storage",
        ),
    ],
)
def test_capacity_one_quota_used_over_min_with(
    min_: dict[str, str] | None, used: dict[str, int], asked: dict[str, int], over: str | None
) -> None:
    quotas, used_matrix = _capacity([xk8s("eq", "ns1", min=min_)], {"ns1": used})
    got = capacity_admit(quotas, used_matrix, "ns1", asked)
    assert got == (f"quotas in total: {over}" if over else None)


@pytest.mark.parametrize(
    ("namespace", "used_a", "used_b", "asked", "expected"),
    [
        pytest.param("a", 4, 3, 1, None, id="A borrows B's unused min"),
        pytest.param("a", 5, 3, 1, None, id="A reaches its max"),
        pytest.param(
            "a",
            6,
            3,
            1,
            "quota a/qa: nvidia.com/gpu used 6 + requested 1 > max 6",
            id="A is stopped by its max",
        ),
        pytest.param(
            "b",
            6,
            3,
            2,
            "quotas in total: nvidia.com/gpu used 9 + requested 2 > min 10",
            id="B must wait for what A borrowed",
        ),
    ],
)
def test_capacity_kep_story_one(
    namespace: str, used_a: int, used_b: int, asked: int, expected: str | None
) -> None:
    quotas, used = _capacity(
        [
            xk8s("qa", "a", min={GPU: "4"}, max={GPU: "6"}),
            xk8s("qb", "b", min={GPU: "6"}, max={GPU: "8"}),
        ],
        {"a": {GPU: used_a}, "b": {GPU: used_b}},
    )
    assert capacity_admit(quotas, used, namespace, {GPU: asked}) == expected


def test_capacity_nominated_pods_count_where_scheduler_plugins_counts_them() -> None:
    quotas, used = _capacity(
        [
            xk8s("qa", "a", min={GPU: "4"}, max={GPU: "6"}),
            xk8s("qb", "b", min={GPU: "6"}, max={GPU: "8"}),
        ],
        {"a": {GPU: 2}, "b": {GPU: 3}},
    )
    assert capacity_admit(quotas, used, "a", {GPU: 1}, nominated_in_quota={GPU: 3}) is None
    assert (
        capacity_admit(quotas, used, "a", {GPU: 1}, nominated_in_quota={GPU: 4})
        == "quota a/qa: nvidia.com/gpu used 2 + requested 5 > max 6"
    )
    # pods nominated elsewhere weigh on the total only
    assert (
        capacity_admit(quotas, used, "a", {GPU: 1}, nominated_elsewhere={GPU: 5})
        == "quotas in total: nvidia.com/gpu used 5 + requested 6 > min 10"
    )


def test_capacity_pods_of_an_invalid_quota_get_its_problem_and_its_min_counts_for_nothing() -> None:
    quotas, used = _capacity(
        [
            xk8s("bad", "ns1", min={GPU: "6"}, max={GPU: "4"}),
            xk8s("ok", "ns2", min={GPU: "4"}, max={GPU: "8"}),
        ],
        {"ns1": {GPU: 1}},
    )
    assert (
        capacity_admit(quotas, used, "ns1", {GPU: 1})
        == "quota ns1/bad: spec.min.nvidia.com/gpu: min 6 is above max 4"
    )
    assert capacity_admit(quotas, used, "ns2", {GPU: 3}) is None
    assert (
        capacity_admit(quotas, used, "ns2", {GPU: 4})
        == "quotas in total: nvidia.com/gpu used 1 + requested 4 > min 4"
    )
