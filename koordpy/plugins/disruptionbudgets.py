"""PodDisruptionBudgets as preemption sees them: how many more pods each budget lets go, and which
victims would break one. Shared by pod-level (DefaultPreemption) and job-level (Coscheduling)
preemption under one shared key, so that both hear every PDB event once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.pdb import PodDisruptionBudget
from koordpy.api.pod import Pod
from koordpy.framework.handle import Handle, SharedKey

DISRUPTION_BUDGETS: SharedKey[DisruptionBudgets] = SharedKey("disruption_budgets")


@dataclass(slots=True)
class Budget:
    """A PDB during one preemption attempt: how many more of its pods may be disrupted."""

    pdb: PodDisruptionBudget
    allowed: int
    # pods the API server already counted as disrupted: evicting them again costs nothing
    disrupted: frozenset[str]


class DisruptionBudgets:
    def __init__(self) -> None:
        self._pdbs: dict[str, PodDisruptionBudget] = {}

    @staticmethod
    def shared(handle: Handle) -> DisruptionBudgets:
        """The scheduler's one instance, subscribed to PDB events on first use."""

        def create() -> DisruptionBudgets:
            budgets = DisruptionBudgets()
            handle.on_object_event("PodDisruptionBudget", budgets.on_pdb)
            return budgets

        return handle.share(DISRUPTION_BUDGETS, create)

    def on_pdb(self, action: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
        if action == "Delete":
            self._pdbs.pop(key, None)
            return
        try:
            self._pdbs[key] = PodDisruptionBudget.from_dict(obj)
        except SpecError:
            # a PDB the API server would not have admitted protects nothing
            self._pdbs.pop(key, None)

    def budgets(self, snapshot: Any) -> list[Budget]:
        pdbs = list(self._pdbs.values())
        if not pdbs:
            return []
        uncounted = [p for p in pdbs if p.disruptions_allowed is None]
        healthy = dict.fromkeys((p.key for p in uncounted), 0)
        expected = dict(healthy)
        if uncounted:
            # no disruption controller wrote a status: count the covered pods the scheduler sees
            for row in snapshot.live_rows().tolist():
                for pod in snapshot.info(row).pods.values():
                    for pdb in uncounted:
                        if pdb.covers(pod.namespace, pod.labels):
                            expected[pdb.key] += 1
                            if pod.phase == "Running" and pod.deletion_ts is None:
                                healthy[pdb.key] += 1
        out = []
        for pdb in pdbs:
            if pdb.disruptions_allowed is not None:
                allowed = pdb.disruptions_allowed
            else:
                allowed = pdb.allowed_disruptions(healthy[pdb.key], expected[pdb.key])
            status = pdb.raw.get("status")
            disrupted = status.get("disruptedPods") if isinstance(status, Mapping) else None
            out.append(Budget(pdb, allowed, frozenset(disrupted or ())))
        return out


def split_by_pdb(pods: Sequence[Pod], budgets: Sequence[Budget]) -> tuple[list[Pod], list[Pod]]:
    """(pods whose eviction would break a PDB, the others), each in the given order; every covered
    pod spends one disruption of each PDB covering it (kube-scheduler's filterPodsWithPDBViolation)."""
    allowed = [b.allowed for b in budgets]
    violating: list[Pod] = []
    rest: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if not budget.pdb.covers(pod.namespace, pod.labels) or pod.name in budget.disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else rest).append(pod)
    return violating, rest
