from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordpy.api.errors import SpecError
from koordpy.api.labels import EVERYTHING, LabelSelector, Requirement, selector_from_match_labels


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    item: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        item["values"] = list(values)
    return item


def selector(obj: dict[str, Any]) -> LabelSelector:
    parsed = LabelSelector.from_dict(obj, "spec.selector")
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        (expr("app", "In", "web", "api"), {"app": "web"}, True),
        (expr("app", "In", "web", "api"), {"app": "db"}, False),
        (expr("app", "In", "web"), {}, False),
        (expr("app", "In", ""), {"app": ""}, True),
        (expr("app", "NotIn", "web"), {"app": "web"}, False),
        (expr("app", "NotIn", "web"), {"app": "db"}, True),
        (expr("app", "NotIn", "web"), {}, True),
        (expr("app", "Exists"), {"app": "web"}, True),
        (expr("app", "Exists"), {"app": ""}, True),
        (expr("app", "Exists"), {"tier": "web"}, False),
        (expr("app", "DoesNotExist"), {"app": "web"}, False),
        (expr("app", "DoesNotExist"), {"tier": "web"}, True),
        (expr("app", "DoesNotExist"), {}, True),
    ],
)
def test_each_operator_follows_label_selector_semantics(
    expression: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    assert selector({"matchExpressions": [expression]}).matches(labels) is matches


@pytest.mark.parametrize(
    ("labels", "matches"),
    [
        ({"app": "web", "tier": "front"}, True),
        ({"app": "web", "tier": "front", "extra": "x"}, True),
        ({"app": "web", "tier": "back"}, False),
        ({"app": "web"}, False),
        ({"app": "web", "tier": "front", "canary": "true"}, False),
        ({"tier": "front"}, False),
    ],
)
def test_match_labels_and_match_expressions_must_all_hold(labels: dict[str, str], matches: bool) -> None:
    sel = selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [expr("tier", "In", "front", "edge"), expr("canary", "DoesNotExist")],
        }
    )
    assert sel.matches(labels) is matches


@pytest.mark.parametrize("labels", [{}, {"a": "b"}, {"app": "web", "tier": "x"}])
def test_empty_selector_matches_everything(labels: dict[str, str]) -> None:
    assert selector({}).matches(labels)
    assert selector({"matchLabels": {}, "matchExpressions": []}).is_empty
    assert EVERYTHING.matches(labels)
    assert EVERYTHING.is_empty


def test_absent_selector_stays_absent() -> None:
    assert LabelSelector.from_dict(None, "spec.selector") is None


def test_non_empty_selector_is_not_empty() -> None:
    assert not selector({"matchLabels": {"a": "b"}}).is_empty


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        ({"matchExpressions": [expr("app", "Equals", "web")]}, "spec.selector.matchExpressions[0].operator"),
        (
            {"matchExpressions": [expr("a", "Exists"), {"key": "b"}]},
            "spec.selector.matchExpressions[1].operator",
        ),
        ({"matchExpressions": [expr("app", "In")]}, "spec.selector.matchExpressions[0].values"),
        ({"matchExpressions": [expr("app", "NotIn")]}, "spec.selector.matchExpressions[0].values"),
        ({"matchExpressions": [expr("app", "Exists", "web")]}, "spec.selector.matchExpressions[0].values"),
        (
            {"matchExpressions": [expr("app", "DoesNotExist", "x")]},
            "spec.selector.matchExpressions[0].values",
        ),
        ({"matchExpressions": [{"key": 5, "operator": "Exists"}]}, "spec.selector.matchExpressions[0].key"),
        ({"matchExpressions": [{"key": "", "operator": "Exists"}]}, "spec.selector.matchExpressions[0].key"),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", 3]}]},
            "spec.selector.matchExpressions[0].values[1]",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]},
            "spec.selector.matchExpressions[0].values",
        ),
        ({"matchExpressions": "app"}, "spec.selector.matchExpressions"),
        ({"matchExpressions": ["app"]}, "spec.selector.matchExpressions[0]"),
        ({"matchLabels": {"app": 3}}, "spec.selector.matchLabels[app]"),
        ({"matchLabels": ["app"]}, "spec.selector.matchLabels"),
    ],
)
def test_invalid_selector_error_names_the_field(obj: dict[str, Any], path: str) -> None:
    with pytest.raises(SpecError) as caught:
        LabelSelector.from_dict(obj, "spec.selector")
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")


def test_non_object_selector_is_rejected() -> None:
    with pytest.raises(SpecError) as caught:
        LabelSelector.from_dict("app=web", "spec.selector")  # type: ignore[arg-type]
    assert caught.value.path == "spec.selector"


def test_root_path_has_no_leading_dot() -> None:
    with pytest.raises(SpecError) as caught:
        LabelSelector.from_dict({"matchExpressions": [expr("a", "Bad")]}, "")
    assert caught.value.path == "matchExpressions[0].operator"


def test_equal_selectors_written_differently_are_equal_and_hash_equal() -> None:
    first = selector(
        {
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [expr("c", "In", "y", "x"), expr("d", "Exists")],
        }
    )
    second = selector(
        {
            "matchExpressions": [expr("d", "Exists"), expr("c", "In", "x", "y"), expr("a", "In", "1")],
            "matchLabels": {"b": "2"},
        }
    )
    assert first == second
    assert hash(first) == hash(second)
    assert {first: "cached"}[second] == "cached"


def test_repeated_requirements_collapse() -> None:
    sel = selector({"matchLabels": {"a": "1"}, "matchExpressions": [expr("a", "In", "1")]})
    assert sel.requirements == (Requirement("a", "In", frozenset({"1"})),)


def test_different_selectors_are_not_equal() -> None:
    assert selector({"matchLabels": {"a": "1"}}) != selector({"matchLabels": {"a": "2"}})
    assert selector({"matchExpressions": [expr("a", "In", "1")]}) != selector(
        {"matchExpressions": [expr("a", "NotIn", "1")]}
    )


def test_selector_from_match_labels_equals_the_parsed_match_labels() -> None:
    labels = {"zone": "a", "app": "web"}
    built = selector_from_match_labels(labels)
    assert built == selector({"matchLabels": labels})
    assert built.matches({"zone": "a", "app": "web", "x": "y"})
    assert not built.matches({"zone": "b", "app": "web"})
    assert selector_from_match_labels({}) == EVERYTHING


@pytest.mark.parametrize(
    ("requirement", "value", "matches"),
    [
        (Requirement("k", "In", frozenset({"a"})), "a", True),
        (Requirement("k", "In", frozenset({"a"})), None, False),
        (Requirement("k", "NotIn", frozenset({"a"})), None, True),
        (Requirement("k", "NotIn", frozenset({"a"})), "a", False),
        (Requirement("k", "Exists"), "", True),
        (Requirement("k", "Exists"), None, False),
        (Requirement("k", "DoesNotExist"), None, True),
        (Requirement("k", "DoesNotExist"), "a", False),
    ],
)
def test_matches_value_treats_none_as_an_absent_key(
    requirement: Requirement, value: str | None, matches: bool
) -> None:
    assert requirement.matches_value(value) is matches


def test_unknown_operator_cannot_be_constructed() -> None:
    with pytest.raises(SpecError):
        Requirement("k", "Gt", frozenset({"1"}))


KEYS = st.sampled_from(["a", "b", "c", "d"])
VALUES = st.sampled_from(["x", "y", "z", ""])
LABEL_MAPS = st.dictionaries(KEYS, VALUES, max_size=4)


@given(LABEL_MAPS, LABEL_MAPS)
def test_match_labels_selector_matches_exactly_the_supersets(
    wanted: dict[str, str], labels: dict[str, str]
) -> None:
    is_subset = all(key in labels and labels[key] == value for key, value in wanted.items())
    assert selector({"matchLabels": wanted}).matches(labels) is is_subset
    assert selector_from_match_labels(wanted).matches(labels) is is_subset


@given(KEYS, st.frozensets(VALUES, min_size=1), LABEL_MAPS)
def test_not_in_is_the_complement_of_in_on_present_keys_and_true_on_absent_keys(
    key: str, values: frozenset[str], labels: dict[str, str]
) -> None:
    in_ = Requirement(key, "In", values)
    not_in = Requirement(key, "NotIn", values)
    if key in labels:
        assert not_in.matches(labels) is not in_.matches(labels)
    else:
        assert not_in.matches(labels)
        assert not in_.matches(labels)


@given(KEYS, LABEL_MAPS)
def test_exists_and_does_not_exist_are_complements(key: str, labels: dict[str, str]) -> None:
    exists = Requirement(key, "Exists").matches(labels)
    assert exists is (key in labels)
    assert Requirement(key, "DoesNotExist").matches(labels) is not exists


@given(
    KEYS,
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.frozensets(VALUES, min_size=1),
    LABEL_MAPS,
)
def test_matches_value_agrees_with_matches(
    key: str, operator: str, values: frozenset[str], labels: dict[str, str]
) -> None:
    if operator in ("Exists", "DoesNotExist"):
        values = frozenset()
    requirement = Requirement(key, operator, values)
    assert requirement.matches(labels) is requirement.matches_value(labels.get(key))
