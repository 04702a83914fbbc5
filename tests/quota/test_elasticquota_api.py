"""Parsing both ElasticQuota APIs, and the quota a pod joins.

Cases follow Koordinator's apis/extension/elastic_quota.go (defaults of parent, is-parent,
allow-lent-resource, shared weight), its webhook's quota_topology_test.go
(TestQuotaTopology_basicItemCheck, TestQuotaTopology_fillQuotaDefaultInformation) and
plugin_helper_test.go (TestGetQuotaName); and scheduler-plugins' capacity_scheduling_test.go
(TestAddElasticQuota: without max, without min)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.elasticquota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    BY_DEFAULT,
    BY_LABEL,
    BY_NAMESPACE,
    BY_NAMESPACE_QUOTA,
    BY_NAMESPACES_ANNOTATION,
    DEFAULT_QUOTA,
    KOORDINATOR_GROUP,
    LABEL_QUOTA_NAME,
    ROOT_QUOTA,
    X_K8S_GROUP,
    ElasticQuota,
    PodQuota,
    QuotaIndex,
    quota_of_pod,
)
from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from tests.quota.quotas import GI, cores, koord, koord_dict, xk8s, xk8s_dict


def test_koordinator_quota_fields_in_canonical_units() -> None:
    q = koord(
        "team-a",
        parent="org",
        max=cores(10, "20Gi"),
        min=cores("2500m", "4Gi"),
        lent=False,
        tree_id="t1",
        namespaces=["ns-a", "ns-b"],
    )
    assert (q.api_group, q.key, q.name, q.parent) == (KOORDINATOR_GROUP, "quotas/team-a", "team-a", "org")
    assert q.min == {"cpu": 2500, "memory": 4 * GI}
    assert q.max == {"cpu": 10000, "memory": 20 * GI}
    assert (q.is_parent, q.allow_lent_resource, q.tree_id) == (False, False, "t1")
    assert q.namespaces == ("ns-a", "ns-b")
    assert q.spec_error is None


@pytest.mark.parametrize(
    ("labels", "parent", "is_parent", "lends"),
    [
        ({}, ROOT_QUOTA, False, True),
        ({"quota.scheduling.koordinator.sh/parent": ""}, ROOT_QUOTA, False, True),
        ({"quota.scheduling.koordinator.sh/is-parent": "true"}, ROOT_QUOTA, True, True),
        ({"quota.scheduling.koordinator.sh/is-parent": "True"}, ROOT_QUOTA, False, True),
        ({"quota.scheduling.koordinator.sh/allow-lent-resource": "false"}, ROOT_QUOTA, False, False),
        ({"quota.scheduling.koordinator.sh/allow-lent-resource": "no"}, ROOT_QUOTA, False, True),
    ],
)
def test_koordinator_labels_default_to_a_lending_leaf_under_the_root(
    labels: dict[str, str], parent: str, is_parent: bool, lends: bool
) -> None:
    q = koord("q", max=cores(1), labels=labels)
    assert (q.parent, q.is_parent, q.allow_lent_resource) == (parent, is_parent, lends)


@pytest.mark.parametrize(
    ("weight", "max_", "expected"),
    [
        # no annotation: the weight is max
        (None, cores(12, 2048), {"cpu": 12000, "memory": 2048}),
        (
            {"cpu": "3", "memory": "100"},
            cores(12, 2048),
            {"cpu": 3000, "memory": 100},
        ),
        # resources of max the annotation leaves out weigh their max; resources outside max go
        ({"cpu": "0"}, cores(12, 2048), {"cpu": 0, "memory": 2048}),
        ({"cpu": "5", "memory": "7"}, {"memory": "2048"}, {"memory": 7}),
        # all zero is read as no weight at all: max
        ({"cpu": "0", "memory": "0"}, cores(12, 2048), {"cpu": 12000, "memory": 2048}),
    ],
)
def test_koordinator_shared_weight_is_filled_from_max(
    weight: dict[str, str] | None, max_: dict[str, Any], expected: dict[str, int]
) -> None:
    assert koord("q", max=max_, weight=weight).shared_weight == expected


def test_xk8s_quota_claims_its_namespace_and_has_no_tree() -> None:
    q = xk8s("eq1", "ns1", max=cores(6), min=cores(4))
    assert (q.api_group, q.key, q.namespaces, q.parent, q.is_parent) == (
        X_K8S_GROUP,
        "ns1/eq1",
        ("ns1",),
        "",
        False,
    )
    assert (q.min, q.max) == ({"cpu": 4000}, {"cpu": 6000})


@pytest.mark.parametrize(
    ("max_", "min_", "expected_max", "expected_min"),
    [
        (cores(1, 1000), cores(1, 100), {"cpu": 1000, "memory": 1000}, {"cpu": 1000, "memory": 100}),
        (None, cores(1, 100), None, {"cpu": 1000, "memory": 100}),
        (cores(1, 1000), None, {"cpu": 1000, "memory": 1000}, {}),
        (None, None, None, {}),
    ],
)
def test_xk8s_quota_keeps_an_absent_max_apart_from_an_empty_one(
    max_: dict[str, Any] | None,
    min_: dict[str, Any] | None,
    expected_max: dict[str, int] | None,
    expected_min: dict[str, int],
) -> None:
    q = xk8s("eq", "ns", max=max_, min=min_)
    assert (q.max, q.min, q.spec_error) == (expected_max, expected_min, None)


def _with(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = dict(obj)
    for path, value in changes.items():
        node: dict[str, Any] = out
        *parents, leaf = path.split("__")
        for p in parents:
            node[p] = dict(node.get(p) or {})
            node = node[p]
        node[leaf] = value
    return out


@pytest.mark.parametrize(
    ("obj", "path", "words"),
    [
        (koord_dict("q", max={"cpu": "-1", "memory": "1Mi"}), "spec.max.cpu", "negative"),
        (koord_dict("q", max=cores(1, "1Mi"), min={"cpu": "-1"}), "spec.min.cpu", "negative"),
        (koord_dict("q", max=cores(10), min=cores(1, "1Mi")), "spec.min.memory", "not in spec.max"),
        (koord_dict("q", max=cores(10), min=cores(12)), "spec.min.cpu", "min 12 is above max 10"),
        (koord_dict("q", min=cores(1)), "spec.min.cpu", "not in spec.max"),
        (koord_dict("q", max={"cpu": "ten"}), "spec.max.cpu", "not valid"),
        (
            koord_dict("q", max=cores(0, "1Mi"), weight={"cpu": "-1", "memory": "1Mi"}),
            f"metadata.annotations[{ANNOTATION_SHARED_WEIGHT}].cpu",
            "negative",
        ),
        (
            koord_dict("q", max=cores(1), annotations={ANNOTATION_SHARED_WEIGHT: "{cpu: 1"}),
            f"metadata.annotations[{ANNOTATION_SHARED_WEIGHT}]",
            "JSON",
        ),
        (
            koord_dict("q", max=cores(1), annotations={ANNOTATION_NAMESPACES: "ns-a"}),
            f"metadata.annotations[{ANNOTATION_NAMESPACES}]",
            "JSON",
        ),
        (
            koord_dict("q", max=cores(1), annotations={ANNOTATION_NAMESPACES: '["ns-a", 3]'}),
            f"metadata.annotations[{ANNOTATION_NAMESPACES}]",
            "namespace names",
        ),
        (_with(koord_dict("q"), spec=["max"]), "spec", "expected an object"),
        (_with(koord_dict("q"), spec__max=["cpu"]), "spec.max", "map of resource name"),
        (_with(koord_dict("q"), metadata__labels={"a": 1}), "metadata.labels", "not a string"),
        (_with(koord_dict("q"), metadata__name=""), "metadata.name", "needs a name"),
        (xk8s_dict("eq", "ns", max=cores(6), min=cores(8)), "spec.min.cpu", "min 8 is above max 6"),
        # a stated max without memory limits memory to 0 in scheduler-plugins
        (
            xk8s_dict("eq", "ns", max=cores(6), min=cores(4, "1Gi")),
            "spec.min.memory",
            "spec.max lists no memory",
        ),
        (xk8s_dict("eq", "ns", max=cores(6), min={"cpu": "1", "pods": "2"}), "spec.min.pods", "above max 0"),
        (xk8s_dict("eq", "ns", min={"cpu": "1e1000"}), "spec.min.cpu", "magnitude"),
    ],
)
def test_malformed_quota_gets_a_view_with_the_field_in_error(
    obj: dict[str, Any], path: str, words: str
) -> None:
    q = ElasticQuota.from_dict(obj)
    assert q.spec_error is not None
    assert q.spec_error.path == path
    assert words in q.spec_error.message


def test_xk8s_min_of_an_extended_resource_is_fine_when_max_does_not_name_it() -> None:
    # an extended resource a stated max leaves out is unlimited there
    assert xk8s("eq", "ns", max=cores(6), min={"nvidia.com/gpu": "2"}).spec_error is None


def test_elastic_quota_of_another_group_is_refused() -> None:
    with pytest.raises(SpecError, match="unknown ElasticQuota API group"):
        ElasticQuota.from_dict({"apiVersion": "v1", "kind": "ElasticQuota"})


def _pod(namespace: str, labels: dict[str, str] | None = None) -> Pod:
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": namespace, "labels": labels or {}},
            "spec": {"containers": [{"name": "c"}]},
        }
    )


KOORD_QUOTAS = [
    koord("parent-quota", namespace="test-ns", is_parent=True, max=cores(1)),
    koord("test-ns", namespace="test-ns", parent="parent-quota", max=cores(1)),
    koord("shared", namespace="quotas", max=cores(1), namespaces=["claimed-ns"]),
    koord("elsewhere", namespace="other-ns", max=cores(1)),
]


@pytest.mark.parametrize(
    ("namespace", "labels", "expected"),
    [
        ("test-ns", {LABEL_QUOTA_NAME: "shared"}, PodQuota("shared", BY_LABEL)),
        ("test-ns", {}, PodQuota("test-ns", BY_NAMESPACE_QUOTA)),
        ("claimed-ns", {}, PodQuota("shared", BY_NAMESPACES_ANNOTATION)),
        # the quota named after a namespace counts only when it lives in that namespace
        ("elsewhere", {}, PodQuota(DEFAULT_QUOTA, BY_DEFAULT)),
        ("no-quota-ns", {}, PodQuota(DEFAULT_QUOTA, BY_DEFAULT)),
        ("test-ns", {LABEL_QUOTA_NAME: DEFAULT_QUOTA}, PodQuota(DEFAULT_QUOTA, BY_LABEL)),
        # Koordinator would count it in the default quota; koordpy says the quota is missing
        ("test-ns", {LABEL_QUOTA_NAME: "gone"}, PodQuota("gone", BY_LABEL, exists=False)),
    ],
)
def test_koordinator_pod_joins_by_label_then_namespace_then_default(
    namespace: str, labels: dict[str, str], expected: PodQuota
) -> None:
    index = QuotaIndex.build(KOORD_QUOTAS, KOORDINATOR_GROUP)
    assert quota_of_pod(_pod(namespace, labels), index) == expected


@pytest.mark.parametrize(
    ("namespace", "expected"),
    [
        ("ns1", PodQuota("eq1", BY_NAMESPACE)),
        ("ns2", None),
        # the oldest quota of a namespace is its quota
        ("ns3", PodQuota("older", BY_NAMESPACE)),
    ],
)
def test_xk8s_pod_joins_the_quota_of_its_namespace(namespace: str, expected: PodQuota | None) -> None:
    quotas = [
        xk8s("eq1", "ns1", max=cores(1)),
        xk8s("newer", "ns3", max=cores(1), created=5),
        xk8s("older", "ns3", max=cores(1), created=1),
        # a Koordinator quota does not govern scheduler-plugins' namespaces
        koord("ns2", namespace="ns2", max=cores(1)),
    ]
    index = QuotaIndex.build(quotas, X_K8S_GROUP)
    assert quota_of_pod(_pod(namespace, {LABEL_QUOTA_NAME: "eq1"}), index) == expected
