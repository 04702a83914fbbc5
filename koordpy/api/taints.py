"""Node taints and pod tolerations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError, join_path

__all__ = [
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "TAINT_EFFECTS",
    "TOLERATION_OP_EQUAL",
    "TOLERATION_OP_EXISTS",
    "Taint",
    "Toleration",
    "count_intolerable_prefer_no_schedule",
    "find_untolerated_taint",
    "tolerations_tolerate_taint",
]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = frozenset((NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE))
_EFFECTS_HINT = f"{NO_SCHEDULE}, {PREFER_NO_SCHEDULE}, {NO_EXECUTE}"

TOLERATION_OP_EQUAL = "Equal"
TOLERATION_OP_EXISTS = "Exists"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""

    def __post_init__(self) -> None:
        if self.effect not in TAINT_EFFECTS:
            raise SpecError("", f"taint effect must be one of {_EFFECTS_HINT}, got {self.effect!r}")

    def __str__(self) -> str:
        # kube-scheduler's TaintToleration reason: "node(s) had untolerated taint {key: value}".
        return f"{{{self.key}: {self.value}}}"

    @staticmethod
    def from_dict(obj: Any, path: str) -> Taint:
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"expected a taint object, got {type(obj).__name__}")
        key = obj.get("key")
        if not isinstance(key, str) or not key:
            raise SpecError(join_path(path, "key"), f"must be a non-empty string, got {key!r}")
        value = _optional_string(obj, "value", path)
        effect = obj.get("effect")
        if effect not in TAINT_EFFECTS:
            raise SpecError(join_path(path, "effect"), f"must be one of {_EFFECTS_HINT}, got {effect!r}")
        return Taint(key, value, effect)


@dataclass(frozen=True, slots=True)
class Toleration:
    """Tolerates taints with a matching key (any key when empty), effect (any effect when empty)
    and, for operator Equal, the same value."""

    key: str = ""
    operator: str = TOLERATION_OP_EQUAL
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        operator = self.operator
        if operator == TOLERATION_OP_EXISTS:
            return True
        # An empty operator means Equal, as in the API.
        if operator == TOLERATION_OP_EQUAL or not operator:
            return self.value == taint.value
        return False

    @staticmethod
    def from_dict(obj: Any, path: str) -> Toleration:
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"expected a toleration object, got {type(obj).__name__}")
        key = _optional_string(obj, "key", path)
        operator = _optional_string(obj, "operator", path) or TOLERATION_OP_EQUAL
        value = _optional_string(obj, "value", path)
        effect = _optional_string(obj, "effect", path)
        operator_path = join_path(path, "operator")
        effect_path = join_path(path, "effect")

        if operator not in (TOLERATION_OP_EQUAL, TOLERATION_OP_EXISTS):
            raise SpecError(operator_path, f"unsupported operator {operator!r}; valid: Equal, Exists")
        if not key and operator != TOLERATION_OP_EXISTS:
            raise SpecError(
                operator_path,
                'operator must be Exists when `key` is empty, which means "match all values and all keys"',
            )
        if operator == TOLERATION_OP_EXISTS and value:
            raise SpecError(operator_path, "value must be empty when `operator` is 'Exists'")
        if effect and effect not in TAINT_EFFECTS:
            raise SpecError(effect_path, f"must be empty or one of {_EFFECTS_HINT}, got {effect!r}")

        seconds = obj.get("tolerationSeconds")
        if seconds is not None:
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int)
                or not _INT64_MIN <= seconds <= _INT64_MAX
            ):
                raise SpecError(
                    join_path(path, "tolerationSeconds"), f"must be a 64-bit integer, got {seconds!r}"
                )
            if effect != NO_EXECUTE:
                raise SpecError(effect_path, "effect must be 'NoExecute' when `tolerationSeconds` is set")
        return Toleration(key, operator, value, effect, seconds)


def _optional_string(obj: Mapping[str, Any], name: str, path: str) -> str:
    raw = obj.get(name)
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise SpecError(join_path(path, name), f"must be a string, got {raw!r}")
    return raw


def tolerations_tolerate_taint(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    for toleration in tolerations:  # noqa: SIM110 - no generator object per call on the filter path
        if toleration.tolerates(taint):
            return True
    return False


def find_untolerated_taint(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], effects: frozenset[str]
) -> Taint | None:
    """The first taint with one of `effects` that no toleration tolerates (TaintToleration Filter
    passes {NoSchedule, NoExecute})."""
    for taint in taints:
        if taint.effect not in effects:
            continue
        for toleration in tolerations:
            if toleration.tolerates(taint):
                break
        else:
            return taint
    return None


def count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """PreferNoSchedule taints that no toleration tolerates (TaintToleration Score). kube-scheduler
    first keeps only tolerations whose effect is empty or PreferNoSchedule; the others cannot
    tolerate a PreferNoSchedule taint anyway, so that filter is implied by `tolerates`."""
    count = 0
    for taint in taints:
        if taint.effect != PREFER_NO_SCHEDULE:
            continue
        for toleration in tolerations:
            if toleration.tolerates(taint):
                break
        else:
            count += 1
    return count
