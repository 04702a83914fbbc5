"""core/v1 NodeSelector: the node affinity terms of a pod."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.errors import SpecError, join_path

__all__ = [
    "DOES_NOT_EXIST",
    "EXISTS",
    "GT",
    "IN",
    "LT",
    "NODE_NAME_FIELD",
    "NOT_IN",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PreferredSchedulingTerm",
    "parse_int64",
]

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
_FIELD_OPERATORS = (IN, NOT_IN)
NODE_NAME_FIELD = "metadata.name"

# strconv.ParseInt(s, 10, 64): an optional sign and decimal digits, nothing else (no spaces, no `_`).
_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: str) -> int | None:
    """The integer Go's strconv.ParseInt(text, 10, 64) would return, or None where it fails."""
    # more digits than any int64 has (sign and leading zeros aside) would also make int() refuse
    if _INT64_RE.fullmatch(text) is None or len(text.lstrip("+-").lstrip("0")) > 19:
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """`key operator values` on a node label (or, inside matchFields, on the node's name)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    _value_set: frozenset[str] = field(init=False, repr=False, compare=False)
    # Gt/Lt bound; None when the values are not exactly one int64, in which case nothing matches.
    _bound: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.operator not in _OPERATORS:
            raise SpecError("", f"unsupported node selector operator {self.operator!r}")
        object.__setattr__(self, "_value_set", frozenset(self.values))
        bound = parse_int64(self.values[0]) if len(self.values) == 1 else None
        object.__setattr__(self, "_bound", bound)

    def matches_value(self, value: str | None) -> bool:
        """labels.Requirement.Matches on one label value; None means the key is absent."""
        operator = self.operator
        if operator == IN:
            return value is not None and value in self._value_set
        if operator == NOT_IN:
            return value is None or value not in self._value_set
        if operator == EXISTS:
            return value is not None
        if operator == DOES_NOT_EXIST:
            return value is None
        bound = self._bound
        if value is None or bound is None:
            return False
        number = parse_int64(value)
        if number is None:
            return False
        return number > bound if operator == GT else number < bound

    @staticmethod
    def from_dict(obj: Any, path: str) -> NodeSelectorRequirement:
        """A matchExpressions entry, validated as the API server does."""
        key, operator, values = _requirement_parts(obj, path, _OPERATORS)
        values_path = f"{path}.values"
        if operator in (IN, NOT_IN):
            if not values:
                raise SpecError(values_path, f"must be specified when `operator` is '{operator}'")
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if values:
                raise SpecError(values_path, f"may not be specified when `operator` is '{operator}'")
        else:
            if len(values) != 1:
                raise SpecError(
                    values_path, f"must be specified single value when `operator` is '{operator}'"
                )
            if parse_int64(values[0]) is None:
                raise SpecError(f"{values_path}[0]", f"{values[0]!r} must be an integer for '{operator}'")
        return NodeSelectorRequirement(key, operator, values)

    @staticmethod
    def field_from_dict(obj: Any, path: str) -> NodeSelectorRequirement:
        """A matchFields entry: only `metadata.name` In/NotIn with exactly one value exists."""
        key, operator, values = _requirement_parts(obj, path, _FIELD_OPERATORS)
        if key != NODE_NAME_FIELD:
            raise SpecError(
                f"{path}.key", f"{key!r} is not a valid field selector key; only '{NODE_NAME_FIELD}'"
            )
        if len(values) != 1:
            raise SpecError(
                f"{path}.values",
                f"must be only one value when `operator` is '{operator}' for node field selector",
            )
        return NodeSelectorRequirement(key, operator, values)


def _requirement_parts(obj: Any, path: str, operators: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    if not isinstance(obj, Mapping):
        raise SpecError(path, f"expected a node selector requirement object, got {type(obj).__name__}")
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        raise SpecError(f"{path}.key", f"must be a non-empty string, got {key!r}")
    operator = obj.get("operator")
    if operator not in operators:
        raise SpecError(
            f"{path}.operator", f"unsupported operator {operator!r}; valid: {', '.join(operators)}"
        )
    values = _string_list(obj.get("values"), f"{path}.values")
    return key, operator, values


def _string_list(raw: Any, path: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise SpecError(path, f"expected a list of strings, got {type(raw).__name__}")
    for index, value in enumerate(raw):
        if not isinstance(value, str):
            raise SpecError(f"{path}[{index}]", f"value {value!r} must be a string")
    return tuple(raw)


def _list(raw: Any, path: str) -> Sequence[Any]:
    if raw is None:
        return ()
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise SpecError(path, f"expected a list, got {type(raw).__name__}")
    return raw


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A conjunction of label expressions and node-name field expressions. A term with neither
    matches no node, as in Kubernetes (it must not silently select every node)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        for requirement in self.match_expressions:
            if not requirement.matches_value(labels.get(requirement.key)):
                return False
        # metadata.name is the only field, and the API server guarantees it for field terms.
        # Plain loops rather than all()/any(): no generator object per call on the filter path.
        for requirement in self.match_fields:  # noqa: SIM110
            if not requirement.matches_value(node_name):
                return False
        return True

    @staticmethod
    def from_dict(obj: Any, path: str) -> NodeSelectorTerm:
        if obj is None:
            return NodeSelectorTerm()
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"expected a node selector term object, got {type(obj).__name__}")
        expressions_path = join_path(path, "matchExpressions")
        fields_path = join_path(path, "matchFields")
        return NodeSelectorTerm(
            tuple(
                NodeSelectorRequirement.from_dict(item, f"{expressions_path}[{index}]")
                for index, item in enumerate(_list(obj.get("matchExpressions"), expressions_path))
            ),
            tuple(
                NodeSelectorRequirement.field_from_dict(item, f"{fields_path}[{index}]")
                for index, item in enumerate(_list(obj.get("matchFields"), fields_path))
            ),
        )


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """Terms ORed together: a node matches when any term matches."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        for term in self.terms:  # noqa: SIM110 - no generator object per call on the filter path
            if term.matches(labels, node_name):
                return True
        return False

    @staticmethod
    def from_dict(obj: Any, path: str) -> NodeSelector:
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"expected a node selector object, got {type(obj).__name__}")
        terms_path = join_path(path, "nodeSelectorTerms")
        raw_terms = _list(obj.get("nodeSelectorTerms"), terms_path)
        if not raw_terms:
            raise SpecError(terms_path, "must have at least one node selector term")
        return NodeSelector(
            tuple(
                NodeSelectorTerm.from_dict(term, f"{terms_path}[{index}]")
                for index, term in enumerate(raw_terms)
            )
        )


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    """A preferred node affinity term; `weight` (1-100) is added to a node's score when it matches."""

    weight: int
    preference: NodeSelectorTerm

    @staticmethod
    def from_dict(obj: Any, path: str) -> PreferredSchedulingTerm:
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"expected a preferred scheduling term object, got {type(obj).__name__}")
        weight = obj.get("weight")
        weight_path = join_path(path, "weight")
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise SpecError(weight_path, f"must be an integer in the range 1-100, got {weight!r}")
        if not 1 <= weight <= 100:
            raise SpecError(weight_path, f"must be in the range 1-100, got {weight}")
        # A missing preference is the zero-value term, which the API server accepts and which matches
        # no node.
        return PreferredSchedulingTerm(
            weight, NodeSelectorTerm.from_dict(obj.get("preference"), join_path(path, "preference"))
        )
