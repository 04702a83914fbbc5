"""Priority admission for the pods a scenario creates: the PriorityClasses of the input beside the
built-in ones, and each new pod's priority resolved from its class as the API server does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.pod import PREEMPT_LOWER_PRIORITY
from koordpy.api.priorityclass import BUILTIN_PRIORITY_CLASSES, PriorityClass
from koordpy.simulate.documents import describe
from koordpy.simulate.objects import Entry
from koordpy.simulate.timeline import Timing

SYSTEM_PREFIX = "system-"


@dataclass(slots=True)
class Priorities:
    """The Priority admission plugin: resolves a new pod's priority from its class."""

    classes: dict[str, PriorityClass]
    global_default: PriorityClass | None
    # the virtual time each class of the input arrives at, when a timeline annotation says so
    arrivals: Mapping[str, float] = field(default_factory=dict)

    def admit(self, spec: dict[str, Any], at: float = 0.0) -> None:
        """Sets spec.priority, spec.priorityClassName and spec.preemptionPolicy as admission does
        for a pod created at virtual time `at`; raises SpecError for what the API server would
        reject (a class that does not exist yet included)."""
        class_name = spec.get("priorityClassName")
        if class_name is not None and not isinstance(class_name, str):
            raise SpecError("spec.priorityClassName", f"must be a string, got {class_name!r}")
        if class_name:
            pc = self.classes.get(class_name)
            if pc is None:
                message = f"no PriorityClass with name {class_name} was found"
                raise SpecError("spec.priorityClassName", message)
            arrives = self.arrivals.get(class_name, 0.0)
            if arrives > at:
                message = (
                    f"no PriorityClass with name {class_name} was found: it arrives at {arrives:g}s, "
                    f"the pod at {at:g}s"
                )
                raise SpecError("spec.priorityClassName", message)
            value, policy = pc.value, pc.preemption_policy
        elif self.global_default is not None and self.arrivals.get(self.global_default.name, 0.0) <= at:
            spec["priorityClassName"] = self.global_default.name
            value, policy = self.global_default.value, self.global_default.preemption_policy
        else:
            value, policy = 0, PREEMPT_LOWER_PRIORITY
        given = spec.get("priority")
        if given is not None and (given != value or isinstance(given, bool)):
            raise SpecError(
                "spec.priority",
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name",
            )
        spec["priority"] = value
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise SpecError(
                "spec.preemptionPolicy",
                f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
                f"priority admission controller computed {policy} from the given PriorityClass name",
            )
        spec["preemptionPolicy"] = policy


def read_priorities(
    entries: Sequence[Entry], timing: Mapping[tuple[str, str, str], Timing] | None = None
) -> tuple[Priorities, list[PriorityClass]]:
    builtins = {pc.name: pc for pc in BUILTIN_PRIORITY_CLASSES}
    classes = dict(builtins)
    listed: list[PriorityClass] = []
    default_entry: Entry | None = None
    global_default: PriorityClass | None = None
    for entry in entries:
        if entry.kind != "PriorityClass":
            continue
        try:
            pc = PriorityClass.from_dict(entry.obj)
        except SpecError as err:
            raise entry.spec_error(err) from err
        builtin = builtins.get(pc.name)
        if builtin is not None:
            # Manifests dumped from a cluster carry the built-in classes; they are harmless when unchanged.
            if (pc.value, pc.preemption_policy, pc.global_default) != (
                builtin.value,
                builtin.preemption_policy,
                builtin.global_default,
            ):
                message = f"{pc.name} is built in with value {builtin.value} and cannot be changed"
                raise entry.error("value", message)
        elif pc.name.startswith(SYSTEM_PREFIX):
            message = f"priority class names with {SYSTEM_PREFIX!r} prefix are reserved for system use only"
            raise entry.error("metadata.name", message)
        if pc.global_default:
            if global_default is not None and default_entry is not None:
                raise entry.error(
                    "globalDefault",
                    f"PriorityClass {global_default.name} ({describe(default_entry.source)}) is already "
                    "marked as default; only one default can exist",
                )
            global_default, default_entry = pc, entry
        classes[pc.name] = pc
        listed.append(pc)
    arrivals = {name: t.arrive for (kind, _, name), t in (timing or {}).items() if kind == "PriorityClass"}
    return Priorities(classes, global_default, arrivals), listed
