from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import SpecError
from koordpy.api.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    count_intolerable_prefer_no_schedule,
    find_untolerated_taint,
    tolerations_tolerate_taint,
)

GITLAB = Taint("dedicated", "gitlab", NO_SCHEDULE)
FILTER_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration("dedicated", "Equal", "gitlab", NO_SCHEDULE), GITLAB, True),
        (Toleration("dedicated", "Equal", "gitlab"), GITLAB, True),
        (Toleration("dedicated", "Equal", "other", NO_SCHEDULE), GITLAB, False),
        (Toleration("dedicated", "Equal", "", NO_SCHEDULE), GITLAB, False),
        (Toleration("dedicated", "Equal", "gitlab", NO_EXECUTE), GITLAB, False),
        (Toleration("dedicated", "Equal", "gitlab", PREFER_NO_SCHEDULE), GITLAB, False),
        (Toleration("other", "Equal", "gitlab", NO_SCHEDULE), GITLAB, False),
        (Toleration("dedicated", "Exists"), GITLAB, True),
        (Toleration("dedicated", "Exists", effect=NO_SCHEDULE), GITLAB, True),
        (Toleration("dedicated", "Exists", effect=NO_EXECUTE), GITLAB, False),
        (Toleration("other", "Exists"), GITLAB, False),
        (Toleration("", "Exists"), GITLAB, True),
        (Toleration("", "Exists"), Taint("any", "", NO_EXECUTE), True),
        (Toleration("", "Exists", effect=NO_EXECUTE), GITLAB, False),
        (Toleration("dedicated", "", "gitlab"), GITLAB, True),
        (Toleration("dedicated", "", "x"), GITLAB, False),
        (Toleration("flag", "Equal", ""), Taint("flag", "", NO_SCHEDULE), True),
        (Toleration("dedicated", "Lt", "gitlab"), GITLAB, False),
    ],
)
def test_toleration_matches_taints_like_kubernetes(
    toleration: Toleration, taint: Taint, tolerated: bool
) -> None:
    assert toleration.tolerates(taint) is tolerated


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"key": "a", "value": "b"}, Toleration("a", "Equal", "b")),
        ({"key": "a", "operator": "", "value": "b"}, Toleration("a", "Equal", "b")),
        ({"operator": "Exists"}, Toleration("", "Exists")),
        (
            {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            Toleration("a", "Exists", "", NO_EXECUTE, 30),
        ),
        ({"key": "a", "effect": "PreferNoSchedule"}, Toleration("a", "Equal", "", PREFER_NO_SCHEDULE)),
    ],
)
def test_toleration_from_dict_defaults_operator_to_equal(obj: dict[str, Any], expected: Toleration) -> None:
    assert Toleration.from_dict(obj, "spec.tolerations[0]") == expected


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        ({"key": "a", "operator": "Exists", "value": "b"}, "spec.tolerations[0].operator"),
        ({"value": "b"}, "spec.tolerations[0].operator"),
        ({"key": "", "operator": "Equal"}, "spec.tolerations[0].operator"),
        ({"key": "a", "operator": "In"}, "spec.tolerations[0].operator"),
        ({"key": "a", "effect": "NoRun"}, "spec.tolerations[0].effect"),
        ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}, "spec.tolerations[0].effect"),
        ({"key": "a", "tolerationSeconds": 5}, "spec.tolerations[0].effect"),
        (
            {"key": "a", "effect": "NoExecute", "tolerationSeconds": "5"},
            "spec.tolerations[0].tolerationSeconds",
        ),
        (
            {"key": "a", "effect": "NoExecute", "tolerationSeconds": True},
            "spec.tolerations[0].tolerationSeconds",
        ),
        ({"key": 1}, "spec.tolerations[0].key"),
        ({"key": "a", "value": 1}, "spec.tolerations[0].value"),
        ("a", "spec.tolerations[0]"),
    ],
)
def test_invalid_toleration_raises_spec_error_naming_the_field(obj: Any, path: str) -> None:
    with pytest.raises(SpecError) as caught:
        Toleration.from_dict(obj, "spec.tolerations[0]")
    assert caught.value.path == path


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"key": "dedicated", "value": "gitlab", "effect": "NoSchedule"}, GITLAB),
        ({"key": "spot", "effect": "PreferNoSchedule"}, Taint("spot", "", PREFER_NO_SCHEDULE)),
        (
            {"key": "gone", "effect": "NoExecute", "timeAdded": "2024-01-01T00:00:00Z"},
            Taint("gone", "", NO_EXECUTE),
        ),
    ],
)
def test_taint_from_dict(obj: dict[str, Any], expected: Taint) -> None:
    assert Taint.from_dict(obj, "spec.taints[0]") == expected


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        ({"key": "a", "effect": "NoRun"}, "spec.taints[0].effect"),
        ({"key": "a"}, "spec.taints[0].effect"),
        ({"key": "a", "effect": ""}, "spec.taints[0].effect"),
        ({"key": "", "effect": "NoSchedule"}, "spec.taints[0].key"),
        ({"effect": "NoSchedule"}, "spec.taints[0].key"),
        ({"key": "a", "value": 3, "effect": "NoSchedule"}, "spec.taints[0].value"),
        (None, "spec.taints[0]"),
    ],
)
def test_invalid_taint_raises_spec_error_naming_the_field(obj: Any, path: str) -> None:
    with pytest.raises(SpecError) as caught:
        Taint.from_dict(obj, "spec.taints[0]")
    assert caught.value.path == path


def test_taint_needs_a_valid_effect_when_built_directly() -> None:
    with pytest.raises(SpecError):
        Taint("a", "b")


@pytest.mark.parametrize(
    ("taint", "text"),
    [
        (GITLAB, "{dedicated: gitlab}"),
        (Taint("node.kubernetes.io/unreachable", "", NO_EXECUTE), "{node.kubernetes.io/unreachable: }"),
    ],
)
def test_taint_str_is_the_kube_scheduler_reason_format(taint: Taint, text: str) -> None:
    assert str(taint) == text
    assert f"node(s) had untolerated taint {taint}" == f"node(s) had untolerated taint {text}"


SPOT = Taint("spot", "true", PREFER_NO_SCHEDULE)
GONE = Taint("gone", "", NO_EXECUTE)


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        ((), (), None),
        ((GITLAB,), (), GITLAB),
        ((GITLAB,), (Toleration("dedicated", "Equal", "gitlab"),), None),
        ((SPOT,), (), None),
        ((SPOT, GONE, GITLAB), (), GONE),
        ((SPOT, GONE, GITLAB), (Toleration("gone", "Exists"),), GITLAB),
        ((GITLAB, GONE), (Toleration("dedicated", "Exists"), Toleration("gone", "Exists")), None),
        ((GITLAB, GONE), (Toleration("", "Exists"),), None),
        ((GITLAB,), (Toleration("dedicated", "Equal", "gitlab", NO_EXECUTE),), GITLAB),
    ],
)
def test_find_untolerated_taint_returns_the_first_untolerated_filter_taint(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], expected: Taint | None
) -> None:
    assert find_untolerated_taint(taints, tolerations, FILTER_EFFECTS) == expected


def test_find_untolerated_taint_considers_only_the_given_effects() -> None:
    assert find_untolerated_taint((GITLAB, GONE), (), frozenset({NO_EXECUTE})) == GONE
    assert find_untolerated_taint((GITLAB, SPOT), (), frozenset({PREFER_NO_SCHEDULE})) == SPOT


@pytest.mark.parametrize(
    ("taints", "tolerations", "count"),
    [
        ((), (), 0),
        ((SPOT,), (), 1),
        ((SPOT, Taint("cheap", "", PREFER_NO_SCHEDULE)), (), 2),
        ((SPOT, GITLAB, GONE), (), 1),
        ((SPOT,), (Toleration("spot", "Equal", "true"),), 0),
        ((SPOT,), (Toleration("spot", "Equal", "true", PREFER_NO_SCHEDULE),), 0),
        ((SPOT,), (Toleration("spot", "Equal", "true", NO_SCHEDULE),), 1),
        ((SPOT,), (Toleration("spot", "Equal", "false"),), 1),
        ((SPOT, Taint("cheap", "", PREFER_NO_SCHEDULE)), (Toleration("", "Exists"),), 0),
        ((SPOT, Taint("cheap", "", PREFER_NO_SCHEDULE)), (Toleration("cheap", "Exists"),), 1),
    ],
)
def test_count_intolerable_prefer_no_schedule(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], count: int
) -> None:
    assert count_intolerable_prefer_no_schedule(taints, tolerations) == count


def test_tolerations_tolerate_taint_is_any_toleration() -> None:
    assert tolerations_tolerate_taint((Toleration("x", "Exists"), Toleration("dedicated", "Exists")), GITLAB)
    assert not tolerations_tolerate_taint((Toleration("x", "Exists"),), GITLAB)
    assert not tolerations_tolerate_taint((), GITLAB)
