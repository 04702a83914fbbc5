from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import SpecError
from koordpy.api.nodeselector import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    item: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        item["values"] = list(values)
    return item


def term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if expressions:
        obj["matchExpressions"] = list(expressions)
    if fields:
        obj["matchFields"] = list(fields)
    return obj


def node_selector(*terms: dict[str, Any]) -> NodeSelector:
    return NodeSelector.from_dict({"nodeSelectorTerms": list(terms)}, "nodeAffinity.required")


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        (expr("gen", "Gt", "3"), {"gen": "5"}, True),
        (expr("gen", "Gt", "3"), {"gen": "3"}, False),
        (expr("gen", "Gt", "3"), {"gen": "2"}, False),
        (expr("gen", "Gt", "-1"), {"gen": "0"}, True),
        (expr("gen", "Lt", "0"), {"gen": "-1"}, True),
        (expr("gen", "Lt", "3"), {"gen": "3"}, False),
        (expr("gen", "Lt", "3"), {"gen": "10"}, False),
        # strconv.ParseInt accepts a leading sign and nothing but decimal digits.
        (expr("gen", "Gt", "6"), {"gen": "+7"}, True),
        (expr("gen", "Gt", "1"), {"gen": "abc"}, False),
        (expr("gen", "Gt", "1"), {"gen": "1.5"}, False),
        (expr("gen", "Gt", "1"), {"gen": " 5"}, False),
        (expr("gen", "Gt", "1"), {"gen": "1_000"}, False),
        (expr("gen", "Gt", "1"), {"gen": ""}, False),
        (expr("gen", "Gt", "1"), {"gen": "9223372036854775808"}, False),
        (expr("gen", "Gt", "1"), {"gen": "9223372036854775807"}, True),
        (expr("gen", "Lt", "1"), {"gen": "-9223372036854775808"}, True),
        (expr("gen", "Gt", "1"), {}, False),
        (expr("gen", "Lt", "1"), {}, False),
    ],
)
def test_gt_and_lt_compare_label_values_as_int64(
    expression: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    assert node_selector(term(expression)).matches(labels, "node-1") is matches


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        (expr("zone", "In", "a", "b"), {"zone": "b"}, True),
        (expr("zone", "In", "a", "b"), {"zone": "c"}, False),
        (expr("zone", "In", "a"), {}, False),
        (expr("zone", "NotIn", "a"), {"zone": "a"}, False),
        (expr("zone", "NotIn", "a"), {"zone": "b"}, True),
        (expr("zone", "NotIn", "a"), {}, True),
        (expr("zone", "Exists"), {"zone": ""}, True),
        (expr("zone", "Exists"), {}, False),
        (expr("zone", "DoesNotExist"), {}, True),
        (expr("zone", "DoesNotExist"), {"zone": "a"}, False),
    ],
)
def test_set_operators_follow_kubernetes_semantics_for_absent_keys(
    expression: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    assert node_selector(term(expression)).matches(labels, "node-1") is matches


@pytest.mark.parametrize(
    ("expression", "path"),
    [
        (expr("gen", "Gt", "1", "2"), "t.matchExpressions[0].values"),
        (expr("gen", "Lt"), "t.matchExpressions[0].values"),
        (expr("gen", "Gt", "one"), "t.matchExpressions[0].values[0]"),
        (expr("gen", "Lt", "1.5"), "t.matchExpressions[0].values[0]"),
        (expr("gen", "Gt", "9223372036854775808"), "t.matchExpressions[0].values[0]"),
        (expr("zone", "In"), "t.matchExpressions[0].values"),
        (expr("zone", "NotIn"), "t.matchExpressions[0].values"),
        (expr("zone", "Exists", "a"), "t.matchExpressions[0].values"),
        (expr("zone", "DoesNotExist", "a"), "t.matchExpressions[0].values"),
        (expr("zone", "Equals", "a"), "t.matchExpressions[0].operator"),
        (expr("", "Exists"), "t.matchExpressions[0].key"),
    ],
)
def test_invalid_expressions_raise_spec_error_naming_the_field(expression: dict[str, Any], path: str) -> None:
    with pytest.raises(SpecError) as caught:
        NodeSelectorTerm.from_dict(term(expression), "t")
    assert caught.value.path == path


def test_gt_with_two_values_built_directly_matches_nothing() -> None:
    requirement = NodeSelectorRequirement("gen", "Gt", ("1", "2"))
    assert not requirement.matches_value("5")
    assert not NodeSelectorRequirement("gen", "Lt", ("x",)).matches_value("0")


@pytest.mark.parametrize(
    ("field", "node_name", "matches"),
    [
        (expr("metadata.name", "In", "node-1"), "node-1", True),
        (expr("metadata.name", "In", "node-1"), "node-2", False),
        (expr("metadata.name", "NotIn", "node-1"), "node-1", False),
        (expr("metadata.name", "NotIn", "node-1"), "node-2", True),
    ],
)
def test_match_fields_select_by_node_name(field: dict[str, Any], node_name: str, matches: bool) -> None:
    assert node_selector(term(fields=(field,))).matches({}, node_name) is matches


@pytest.mark.parametrize(
    ("field", "path"),
    [
        (expr("metadata.labels", "In", "x"), "t.matchFields[0].key"),
        (expr("spec.unschedulable", "In", "true"), "t.matchFields[0].key"),
        (expr("metadata.name", "Exists"), "t.matchFields[0].operator"),
        (expr("metadata.name", "Gt", "1"), "t.matchFields[0].operator"),
        (expr("metadata.name", "In", "a", "b"), "t.matchFields[0].values"),
        (expr("metadata.name", "In"), "t.matchFields[0].values"),
    ],
)
def test_only_metadata_name_in_or_not_in_with_one_value_is_a_valid_field(
    field: dict[str, Any], path: str
) -> None:
    with pytest.raises(SpecError) as caught:
        NodeSelectorTerm.from_dict(term(fields=(field,)), "t")
    assert caught.value.path == path


@pytest.mark.parametrize(
    ("labels", "node_name", "matches"),
    [
        ({"zone": "a"}, "node-1", True),
        ({"zone": "a"}, "node-2", False),
        ({"zone": "b"}, "node-1", False),
    ],
)
def test_expressions_and_fields_of_one_term_must_all_hold(
    labels: dict[str, str], node_name: str, matches: bool
) -> None:
    sel = node_selector(term(expr("zone", "In", "a"), fields=(expr("metadata.name", "In", "node-1"),)))
    assert sel.matches(labels, node_name) is matches


@pytest.mark.parametrize("labels", [{}, {"zone": "a"}, {"anything": "x"}])
def test_empty_term_matches_no_node(labels: dict[str, str]) -> None:
    assert not NodeSelectorTerm().matches(labels, "node-1")
    assert not node_selector({}).matches(labels, "node-1")
    assert not node_selector({"matchExpressions": [], "matchFields": []}).matches(labels, "node-1")


@pytest.mark.parametrize(
    ("labels", "matches"),
    [
        ({"zone": "a"}, True),
        ({"gpu": "true"}, True),
        ({"zone": "a", "gpu": "true"}, True),
        ({"zone": "b"}, False),
        ({}, False),
    ],
)
def test_terms_are_ored(labels: dict[str, str], matches: bool) -> None:
    sel = node_selector({}, term(expr("zone", "In", "a")), term(expr("gpu", "Exists")))
    assert sel.matches(labels, "node-1") is matches


@pytest.mark.parametrize(
    "obj",
    [{"nodeSelectorTerms": []}, {}, {"nodeSelectorTerms": None}],
)
def test_required_node_affinity_needs_at_least_one_term(obj: dict[str, Any]) -> None:
    with pytest.raises(SpecError) as caught:
        NodeSelector.from_dict(
            obj, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        )
    assert caught.value.path == (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    )


def test_non_object_node_selector_is_rejected() -> None:
    with pytest.raises(SpecError):
        NodeSelector.from_dict(["zone"], "n")


def test_parsed_selectors_compare_by_value() -> None:
    assert node_selector(term(expr("zone", "In", "a"))) == node_selector(term(expr("zone", "In", "a")))
    assert node_selector(term(expr("zone", "In", "a"))) != node_selector(term(expr("zone", "In", "b")))


@pytest.mark.parametrize("weight", [1, 50, 100])
def test_preferred_term_accepts_weights_from_1_to_100(weight: int) -> None:
    parsed = PreferredSchedulingTerm.from_dict(
        {"weight": weight, "preference": term(expr("zone", "In", "a"))}, "p"
    )
    assert parsed.weight == weight
    assert parsed.preference.matches({"zone": "a"}, "n")


@pytest.mark.parametrize("weight", [0, 101, -1, "5", True, None, 1.5])
def test_preferred_term_rejects_weights_outside_1_to_100(weight: object) -> None:
    with pytest.raises(SpecError) as caught:
        PreferredSchedulingTerm.from_dict(
            {"weight": weight, "preference": term(expr("zone", "In", "a"))}, "p"
        )
    assert caught.value.path == "p.weight"


def test_preferred_term_without_preference_matches_no_node() -> None:
    parsed = PreferredSchedulingTerm.from_dict({"weight": 10}, "p")
    assert not parsed.preference.matches({"zone": "a"}, "n")


def test_preferred_term_validates_its_preference() -> None:
    with pytest.raises(SpecError) as caught:
        PreferredSchedulingTerm.from_dict({"weight": 10, "preference": term(expr("g", "Gt", "x"))}, "p")
    assert caught.value.path == "p.preference.matchExpressions[0].values[0]"
