"""Validating the quota tree: what Koordinator's webhook refuses stays out, with a problem naming it,
and so does everything below it; everything else is laid out for the split.

Cases follow Koordinator's pkg/webhook/elasticquota/quota_topology_test.go:
TestQuotaTopology_checkTreeID, TestQuotaTopology_checkMinQuotaSum,
TestQuotaTopology_checkSubAndParentGroupMaxQuotaKeySame, TestQuotaTopology_checkParentQuotaInfoExist,
TestQuotaTopology_AnnotationNamespaces, TestQuotaTopology_AddPod_UpdatePod (no pods in a parent
quota); and scheduler-plugins' capacity_scheduling_test.go TestAddElasticQuota (the bounds of a
quota without max or min)."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.api.elasticquota import (
    BY_LABEL,
    DEFAULT_QUOTA,
    DUPLICATE_QUOTA,
    NAMESPACE_CLAIMED,
    ElasticQuota,
    PodQuota,
)
from koordpy.quota.tree import (
    ANCESTOR_INVALID,
    DEFAULT_ROW,
    INVALID_SPEC,
    MIN_EXCEEDS_PARENT,
    PARENT_NOT_PARENT,
    POD_IN_PARENT_QUOTA,
    QUOTA_CYCLE,
    QUOTA_NOT_FOUND,
    RESOURCE_KEYS_MISMATCH,
    TREE_ID_MISMATCH,
    UNKNOWN_PARENT,
    UNLIMITED,
    build_namespace_quotas,
    build_quota_tree,
)
from tests.quota.quotas import cores, koord, xk8s

CPU_MEM = cores(10, 20)


def _reasons(quotas: list[ElasticQuota]) -> dict[str, str]:
    tree = build_quota_tree(quotas)
    return {key.split("/", 1)[1]: problem.reason for key, problem in tree.problems.items()}


@pytest.mark.parametrize(
    ("quotas", "expected"),
    [
        pytest.param(
            [
                koord("org", max=CPU_MEM, min=cores(10, 20), is_parent=True),
                koord("team", parent="org", max=CPU_MEM, min=cores(5, 10)),
            ],
            {},
            id="valid two-level tree",
        ),
        pytest.param(
            [
                koord("a", parent="b", max=CPU_MEM, is_parent=True),
                koord("b", parent="a", max=CPU_MEM, is_parent=True),
                koord("c", parent="a", max=CPU_MEM),
                koord("d", max=CPU_MEM),
            ],
            {"a": QUOTA_CYCLE, "b": QUOTA_CYCLE, "c": ANCESTOR_INVALID},
            id="cycle and what hangs below it",
        ),
        pytest.param(
            [koord("a", parent="a", max=CPU_MEM, is_parent=True)],
            {"a": QUOTA_CYCLE},
            id="own parent",
        ),
        pytest.param(
            [koord("a", parent="nobody", max=CPU_MEM), koord("b", max=CPU_MEM)],
            {"a": UNKNOWN_PARENT},
            id="unknown parent",
        ),
        pytest.param(
            [koord("leaf", max=CPU_MEM), koord("child", parent="leaf", max=CPU_MEM)],
            {"child": PARENT_NOT_PARENT},
            id="parent without is-parent",
        ),
        pytest.param(
            [koord("child", parent=DEFAULT_QUOTA, max=CPU_MEM)],
            {"child": PARENT_NOT_PARENT},
            id="default quota as parent",
        ),
        pytest.param(
            [
                koord("parent", max=CPU_MEM, min=CPU_MEM, is_parent=True),
                koord("temp", parent="parent", max=CPU_MEM, min=CPU_MEM, is_parent=True, tree_id="tree-1"),
                koord("child", parent="temp", max=CPU_MEM, min=CPU_MEM, tree_id="tree-1"),
            ],
            {"temp": TREE_ID_MISMATCH, "child": ANCESTOR_INVALID},
            id="tree id where the parent has none",
        ),
        pytest.param(
            [
                koord("parent", max=CPU_MEM, min=CPU_MEM, is_parent=True, tree_id="tree-1"),
                koord("temp", parent="parent", max=CPU_MEM, min=CPU_MEM, is_parent=True, tree_id="tree-1"),
                koord("child", parent="temp", max=CPU_MEM, min=CPU_MEM),
            ],
            {"child": TREE_ID_MISMATCH},
            id="no tree id where the parent has one",
        ),
        pytest.param(
            [
                koord("parent", max=CPU_MEM, min=CPU_MEM, is_parent=True, tree_id="tree-1"),
                koord("temp", parent="parent", max=CPU_MEM, min=CPU_MEM, is_parent=True, tree_id="tree-1"),
            ],
            {},
            id="same tree id",
        ),
        pytest.param(
            [
                koord("parent", max=CPU_MEM, is_parent=True),
                koord("child", parent="parent", max=cores(10)),
            ],
            {"child": RESOURCE_KEYS_MISMATCH},
            id="max names fewer resources than the parent's",
        ),
        pytest.param(
            [
                koord("parent", max=cores(10), min=cores(5), is_parent=True),
                koord("child", parent="parent", max=cores(10), min={}),
            ],
            {},
            id="min naming fewer resources than the parent's",
        ),
        pytest.param(
            [
                koord("parent", max=CPU_MEM, min=cores(5), is_parent=True),
                koord("child", parent="parent", max=CPU_MEM, min=cores(1, 1)),
            ],
            {"child": RESOURCE_KEYS_MISMATCH},
            id="min names a resource the parent's min does not",
        ),
        pytest.param(
            [
                koord("temp", max=cores(120, 1048576), min=cores(10, 51200), is_parent=True),
                koord("sub-1", parent="temp", max=cores(120, 1048576), min=cores(16, 12800)),
            ],
            {"sub-1": MIN_EXCEEDS_PARENT},
            id="child min above the parent's",
        ),
        pytest.param(
            [
                koord("temp", max=cores(120, 1048576), min=cores(19, 51200), is_parent=True),
                koord("sub-1", parent="temp", max=cores(120, 1048576), min=cores(16, 12800)),
            ],
            {},
            id="child min within the parent's",
        ),
        pytest.param(
            [
                koord("temp-no-min", max=cores(120, 1048576), is_parent=True),
                koord("sub-1", parent="temp-no-min", max=cores(120, 1048576), min=cores(19, 51200)),
            ],
            # the webhook checks resource names before amounts
            {"sub-1": RESOURCE_KEYS_MISMATCH},
            id="parent without min",
        ),
        pytest.param(
            [
                koord("p", max=cores(100), min=cores(15), is_parent=True),
                koord("younger", parent="p", max=cores(100), min=cores(10), created=2),
                koord("older", parent="p", max=cores(100), min=cores(10), created=1),
                koord("small", parent="p", max=cores(100), min=cores(5), created=3),
            ],
            {"younger": MIN_EXCEEDS_PARENT},
            id="siblings' mins summed oldest first",
        ),
        pytest.param(
            [
                koord("p", max=cores(100), min=cores(5), is_parent=True),
                koord(
                    "forced",
                    parent="p",
                    max=cores(100),
                    min=cores(10),
                    labels={"quota.scheduling.koordinator.sh/allow-force-update": "true"},
                ),
            ],
            {},
            id="allow-force-update skips the min check",
        ),
        pytest.param(
            [
                koord("p", max=cores(10), min=cores(20), is_parent=True),
                koord("c", parent="p", max=cores(10)),
            ],
            {"p": INVALID_SPEC, "c": ANCESTOR_INVALID},
            id="invalid spec holds its subtree",
        ),
        pytest.param(
            [
                koord("team", namespace="ns2", max=cores(1), created=2),
                koord("team", namespace="ns1", max=cores(1), created=1),
            ],
            {"team": DUPLICATE_QUOTA},
            id="name taken by an older quota",
        ),
        pytest.param(
            [
                koord("first", max=cores(1), namespaces=["ns-a"], created=1),
                koord("second", max=cores(1), namespaces=["ns-b", "ns-a"], created=2),
            ],
            {"second": NAMESPACE_CLAIMED},
            id="namespace claimed by an older quota",
        ),
    ],
)
def test_tree_admits_what_the_webhook_admits(quotas: list[ElasticQuota], expected: dict[str, str]) -> None:
    assert _reasons(quotas) == expected


def test_problem_messages_name_the_problem() -> None:
    tree = build_quota_tree(
        [
            koord("a", parent="b", max=CPU_MEM, is_parent=True),
            koord("b", parent="a", max=CPU_MEM, is_parent=True),
            koord("c", parent="a", max=CPU_MEM),
            koord("orphan", parent="nobody", max=CPU_MEM),
            koord("p", max=cores(100), min=cores(15), is_parent=True),
            koord("k", parent="p", max=cores(100), min=cores(20)),
        ]
    )
    messages = {key: p.message for key, p in tree.problems.items()}
    assert (
        messages["quotas/a"] == "quota a: its parent chain a -> b -> a never reaches koordinator-root-quota"
    )
    assert messages["quotas/c"].startswith(
        "quota c: quota a above it is out of scheduling (quota a: its parent"
    )
    assert messages["quotas/orphan"] == "quota orphan: parent quota nobody does not exist"
    assert messages["quotas/k"] == (
        "quota k: min of cpu 20 with its older siblings' 0 is 20, above parent p's min 15"
    )


def test_only_valid_quotas_take_part_in_the_split() -> None:
    tree = build_quota_tree(
        [
            koord("org", max=CPU_MEM, min=cores(10, 20), is_parent=True),
            koord("team", parent="org", max=CPU_MEM, min=cores(5, 10)),
            koord("lost", parent="nobody", max=CPU_MEM),
        ]
    )
    assert [tree.names[r] for level in tree.levels for r in level] == ["org", "team"]
    assert not tree.active[tree.rows["lost"]]
    assert tree.ancestors(tree.rows["team"]) == [tree.rows["org"]]
    assert tree.resources == ("cpu", "memory")
    assert tree.max[tree.rows["team"]].tolist() == [10000, 20]
    assert tree.weight[tree.rows["team"]].tolist() == [10000, 20]


@pytest.mark.parametrize(
    ("pod_quota", "reason"),
    [
        (PodQuota("team", BY_LABEL), None),
        (PodQuota("org", BY_LABEL), POD_IN_PARENT_QUOTA),
        (PodQuota("gone", BY_LABEL, exists=False), QUOTA_NOT_FOUND),
        (PodQuota("below-bad", BY_LABEL), ANCESTOR_INVALID),
        (PodQuota(DEFAULT_QUOTA, BY_LABEL), None),
    ],
)
def test_pod_problem_holds_pods_of_missing_invalid_or_parent_quotas(
    pod_quota: PodQuota, reason: str | None
) -> None:
    tree = build_quota_tree(
        [
            koord("org", max=CPU_MEM, is_parent=True),
            koord("team", parent="org", max=CPU_MEM),
            koord("bad", max=cores(1), min=cores(2), is_parent=True),
            koord("below-bad", parent="bad", max=cores(1)),
        ]
    )
    problem = tree.pod_problem(pod_quota)
    assert (problem.reason if problem else None) == reason


def test_malformed_default_quota_is_reported_but_keeps_its_builtin_max() -> None:
    tree = build_quota_tree([koord(DEFAULT_QUOTA, max={"cpu": "lots"})])
    assert tree.problems["quotas/koordinator-default-quota"].reason == INVALID_SPEC
    assert tree.row_problems[DEFAULT_ROW] is None
    assert tree.max[DEFAULT_ROW].tolist() == [UNLIMITED, UNLIMITED]


def test_default_quota_object_gives_its_max() -> None:
    tree = build_quota_tree([koord(DEFAULT_QUOTA, max=cores(100, 1000))])
    assert tree.max[DEFAULT_ROW].tolist() == [100000, 1000]


def test_xk8s_bounds_follow_capacity_scheduling() -> None:
    quotas = build_namespace_quotas(
        [
            xk8s("t1-eq1", "both", max=cores("100m", 1000), min=cores("10m", 100)),
            xk8s("no-max", "no-max", min=cores("10m", 100)),
            xk8s("no-min", "no-min", max=cores("100m", 1000)),
            xk8s("gpu", "gpu", max={"cpu": "1", "nvidia.com/gpu": "2"}, min={"nvidia.com/gpu": "1"}),
        ]
    )
    assert quotas.resources == ("cpu", "memory", "ephemeral-storage", "pods", "nvidia.com/gpu")
    bounds = {ns: (quotas.max[i].tolist(), quotas.min[i].tolist()) for i, ns in enumerate(quotas.namespaces)}
    unlimited = UNLIMITED
    assert bounds == {
        "both": ([100, 1000, 0, 0, unlimited], [10, 100, 0, 0, 0]),
        "gpu": ([1000, 0, 0, 0, 2], [0, 0, 0, 0, 1]),
        "no-max": ([unlimited, unlimited, unlimited, 0, unlimited], [10, 100, 0, 0, 0]),
        "no-min": ([100, 1000, 0, 0, unlimited], [0, 0, 0, 0, 0]),
    }
    assert quotas.core.tolist() == [True, True, True, True, False]


def test_xk8s_second_quota_of_a_namespace_and_invalid_quotas_are_reported() -> None:
    quotas = build_namespace_quotas(
        [
            xk8s("first", "ns1", max=cores(6), created=1),
            xk8s("second", "ns1", max=cores(6), created=2),
            xk8s("bad", "ns2", max=cores(4), min=cores(6)),
        ]
    )
    assert {k: p.reason for k, p in quotas.problems.items()} == {
        "ns1/second": DUPLICATE_QUOTA,
        "ns2/bad": INVALID_SPEC,
    }
    assert quotas.names == ("first", "bad")
    assert np.array_equal(quotas.valid, [True, False])
    problem = quotas.problem_of("ns2")
    assert problem is not None
    assert problem.message == "quota ns2/bad: spec.min.cpu: min 6 is above max 4"
    assert quotas.problem_of("ns1") is None
