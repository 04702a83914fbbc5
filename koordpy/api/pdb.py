"""PodDisruptionBudget, as preemption reads it: which pods it covers and how many may go."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.labels import LabelSelector

_INT32_MAX = 2**31 - 1
# ASCII digits only (str.isdigit also takes superscripts, which int() refuses), and no more of them
# than an int32 has, leading zeros aside
_INT_OR_PERCENT = re.compile(r"0*([0-9]{1,10})(%?)")


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:56] + "...'"


@dataclass(frozen=True, slots=True)
class IntOrPercent:
    value: int
    percent: bool

    def resolve(self, total: int, round_up: bool) -> int:
        if not self.percent:
            return self.value
        scaled = self.value * total
        return -(-scaled // 100) if round_up else scaled // 100

    @staticmethod
    def parse(value: Any, path: str) -> IntOrPercent | None:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _INT32_MAX:
            return IntOrPercent(value, False)
        if isinstance(value, str):
            match = _INT_OR_PERCENT.fullmatch(value.strip())
            if match is not None:
                number, percent = int(match.group(1)), bool(match.group(2))
                if percent and number > 100:
                    raise SpecError(path, f"must not be greater than 100%, got {value!r}")
                if number <= _INT32_MAX:
                    return IntOrPercent(number, percent)
        raise SpecError(path, f"must be a non-negative integer or a percentage, got {_brief(value)}")


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None
    min_available: IntOrPercent | None
    max_unavailable: IntOrPercent | None
    # status.disruptionsAllowed when the disruption controller has written it; None otherwise, and
    # then the budget is computed from the pods the scheduler sees.
    disruptions_allowed: int | None
    # the API object as read, for what the fields above leave out (e.g. status.disruptedPods)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        # A nil or empty selector in a PDB selects no pods (policy/v1 semantics for the scheduler).
        if namespace != self.namespace or self.selector is None or self.selector.is_empty:
            return False
        return self.selector.matches(labels)

    def allowed_disruptions(self, healthy: int, expected: int) -> int:
        """Disruptions allowed, given the covered pods that are healthy and the number expected."""
        if self.disruptions_allowed is not None:
            return self.disruptions_allowed
        if self.max_unavailable is not None:
            desired_healthy = expected - self.max_unavailable.resolve(expected, True)
        elif self.min_available is not None:
            desired_healthy = self.min_available.resolve(expected, True)
        else:
            desired_healthy = 0
        return max(0, healthy - desired_healthy)

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> PodDisruptionBudget:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        if not isinstance(spec, Mapping) or not isinstance(meta, Mapping):
            raise SpecError("spec", "expected an object")
        min_av = IntOrPercent.parse(spec.get("minAvailable"), "spec.minAvailable")
        max_un = IntOrPercent.parse(spec.get("maxUnavailable"), "spec.maxUnavailable")
        if min_av is not None and max_un is not None:
            raise SpecError("spec", "minAvailable and maxUnavailable are mutually exclusive")
        allowed = status.get("disruptionsAllowed") if isinstance(status, Mapping) else None
        if isinstance(allowed, int) and not 0 <= allowed <= _INT32_MAX:
            allowed = None
        return PodDisruptionBudget(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            selector=LabelSelector.from_dict(spec.get("selector"), "spec.selector"),
            min_available=min_av,
            max_unavailable=max_un,
            disruptions_allowed=allowed
            if isinstance(allowed, int) and not isinstance(allowed, bool)
            else None,
            raw=obj,
        )
