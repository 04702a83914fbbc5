"""metav1.LabelSelector: matchLabels and matchExpressions over a label map."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError, join_path

__all__ = [
    "DOES_NOT_EXIST",
    "EVERYTHING",
    "EXISTS",
    "IN",
    "NOT_IN",
    "LabelSelector",
    "Requirement",
    "selector_from_match_labels",
]

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key operator values` condition; a missing key satisfies only NotIn and DoesNotExist."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.operator not in _OPERATORS:
            raise SpecError("", f"unsupported label selector operator {self.operator!r}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.matches_value(labels.get(self.key))

    def matches_value(self, value: str | None) -> bool:
        """The requirement on one label value; None means the key is absent."""
        operator = self.operator
        if operator == IN:
            return value is not None and value in self.values
        if operator == NOT_IN:
            return value is None or value not in self.values
        if operator == EXISTS:
            return value is not None
        return value is None

    def sort_key(self) -> tuple[str, str, tuple[str, ...]]:
        return (self.key, self.operator, tuple(sorted(self.values)))


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements, kept sorted and without duplicates so that equal selectors
    compare and hash equal (they key caches). No requirements selects everything."""

    requirements: tuple[Requirement, ...]

    @property
    def is_empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        for requirement in self.requirements:
            if not requirement.matches_value(labels.get(requirement.key)):
                return False
        return True

    @staticmethod
    def from_requirements(requirements: Sequence[Requirement]) -> LabelSelector:
        """Canonical order: by key, operator, then values; repeated requirements collapse."""
        return LabelSelector(tuple(sorted(set(requirements), key=Requirement.sort_key)))

    @staticmethod
    def from_dict(obj: Mapping[str, Any] | None, path: str) -> LabelSelector | None:
        """Parse and validate a metav1.LabelSelector. None (no selector) stays None: callers decide
        what an absent selector means, which differs between APIs."""
        if obj is None:
            return None
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"expected a label selector object, got {type(obj).__name__}")
        requirements: list[Requirement] = []

        match_labels = obj.get("matchLabels")
        if match_labels is not None:
            labels_path = join_path(path, "matchLabels")
            if not isinstance(match_labels, Mapping):
                raise SpecError(labels_path, f"expected a map of strings, got {type(match_labels).__name__}")
            for key, value in match_labels.items():
                if not isinstance(key, str) or not key:
                    raise SpecError(labels_path, f"label key {key!r} must be a non-empty string")
                if not isinstance(value, str):
                    raise SpecError(f"{labels_path}[{key}]", f"label value {value!r} must be a string")
                requirements.append(Requirement(key, IN, frozenset((value,))))

        match_expressions = obj.get("matchExpressions")
        if match_expressions is not None:
            expressions_path = join_path(path, "matchExpressions")
            if isinstance(match_expressions, (str, bytes)) or not isinstance(match_expressions, Sequence):
                raise SpecError(expressions_path, f"expected a list, got {type(match_expressions).__name__}")
            for index, expression in enumerate(match_expressions):
                requirements.append(_requirement_from_dict(expression, f"{expressions_path}[{index}]"))

        return LabelSelector.from_requirements(requirements)


def _requirement_from_dict(obj: Any, path: str) -> Requirement:
    if not isinstance(obj, Mapping):
        raise SpecError(path, f"expected a label selector requirement object, got {type(obj).__name__}")
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        raise SpecError(f"{path}.key", f"must be a non-empty string, got {key!r}")
    operator = obj.get("operator")
    if operator not in _OPERATORS:
        raise SpecError(
            f"{path}.operator", f"unsupported operator {operator!r}; valid: {', '.join(_OPERATORS)}"
        )
    raw_values = obj.get("values")
    values_path = f"{path}.values"
    if raw_values is None:
        raw_values = ()
    elif isinstance(raw_values, (str, bytes)) or not isinstance(raw_values, Sequence):
        raise SpecError(values_path, f"expected a list of strings, got {type(raw_values).__name__}")
    for index, value in enumerate(raw_values):
        if not isinstance(value, str):
            raise SpecError(f"{values_path}[{index}]", f"value {value!r} must be a string")
    if operator in (IN, NOT_IN):
        if not raw_values:
            raise SpecError(values_path, f"must be specified when `operator` is '{operator}'")
    elif raw_values:
        raise SpecError(values_path, f"may not be specified when `operator` is '{operator}'")
    return Requirement(key, operator, frozenset(raw_values))


def selector_from_match_labels(labels: Mapping[str, str]) -> LabelSelector:
    """The selector `key=value` for every entry (a pod's nodeSelector, a Service selector)."""
    return LabelSelector(
        tuple(Requirement(key, IN, frozenset((value,))) for key, value in sorted(labels.items()))
    )


EVERYTHING = LabelSelector(())
