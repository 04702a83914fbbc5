"""The dry run: `koordpy simulate --from-cluster JOB.yaml...` answers "if I submit this now, where
does it go and what does it evict?" from a snapshot of the cluster (read by the cluster side, handed
over as the scenario's first input) with the job's manifests added as new objects, scheduled by the
same scheduler `koordpy run` runs, with the cluster's own configuration.

The report speaks of the new pods only (every pod with `everything`): where each goes or why it
waits, the node it was nominated to by preemption, the pods it would evict (with their job and
priority), and the GPU fragmentation before and after. Nothing here knows of a cluster: the caller
writes nothing anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from koordpy.api.pod import Pod
from koordpy.api.podgroup import gang_reference
from koordpy.config.models import SchedulerConfiguration
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.report import BOUND, PENDING, PodGroupResult, PodResult, Report, claim_lines
from koordpy.simulate.runner import (
    DEFAULT_MAX_VIRTUAL_SECONDS,
    add_fragmentation,
    build_report,
    build_world,
)

__all__ = [
    "DryRunPod",
    "DryRunReport",
    "Victim",
    "dry_run",
    "new_pod_keys",
    "render_dry_run_json",
    "render_dry_run_table",
    "render_dry_run_yaml",
]

NONE = "<none>"


def _gang(pod: Pod) -> str | None:
    ref = gang_reference(pod.labels, pod.annotations)
    return f"{pod.namespace}/{ref[1]}" if ref is not None else None


def _owner(pod: Pod) -> str | None:
    owner = pod.controller
    return f"{owner.kind}/{owner.name}" if owner is not None else None


@dataclass(slots=True)
class DryRunPod:
    namespace: str
    name: str
    node: str | None
    phase: str
    # the node preemption last nominated the pod to during the run, also when it was then bound there
    nominatedNodeName: str | None
    reason: str | None
    message: str | None
    priority: int
    gang: str | None
    owner: str | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        # the fields are the report's keys, in its order
        return asdict(self)


@dataclass(slots=True)
class Victim:
    namespace: str
    name: str
    node: str
    priority: int
    priorityClassName: str | None
    gang: str | None
    owner: str | None
    # the job (gang or pod) it makes room for, and the pod whose cycle decided it
    preemptor: str
    triggerPod: str
    message: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def job(self) -> str:
        """What a person knows the victim by: its gang, else its owner, else the pod itself."""
        if self.gang:
            return f"gang {self.gang}"
        if self.owner:
            return self.owner
        return f"pod {self.key}"

    def to_dict(self) -> dict[str, Any]:
        return {"victim": self.key, **asdict(self)}


@dataclass(slots=True)
class DryRunReport:
    pods: list[DryRunPod] = field(default_factory=list)
    victims: list[Victim] = field(default_factory=list)
    podGroups: list[PodGroupResult] = field(default_factory=list)
    # koordpy.status.fragmentation's figures of the cluster's GPUs; None without GPUs
    fragmentationBefore: dict[str, Any] | None = None
    fragmentationAfter: dict[str, Any] | None = None
    # where the scheduler configuration came from, for the reader to check
    configuration: str = ""
    # "new" (the pods the manifests add) or "all"
    scope: str = "new"
    newPods: int = 0
    virtualSeconds: float = 0.0
    # the claims of the reported pods, as the report's persistentVolumeClaims shows them
    claims: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "pods": [p.to_dict() for p in self.pods],
            "victims": [v.to_dict() for v in self.victims],
            "podGroups": [g.to_dict() for g in self.podGroups],
            "fragmentation": {"before": self.fragmentationBefore, "after": self.fragmentationAfter},
            "configuration": self.configuration,
            "scope": self.scope,
            "newPods": self.newPods,
            "virtualSeconds": float(self.virtualSeconds),
        }
        if self.claims:
            # additive: only when the reported pods use claims
            out["persistentVolumeClaims"] = self.claims
        return out


def new_pod_keys(scenario: Scenario, snapshot_label: str) -> set[str]:
    """The pods the manifests add: every pod that does not come from the input labelled
    `snapshot_label` (stamped pods belong to their workload's input)."""
    return {
        f"{namespace}/{name}"
        for (kind, namespace, name), source in scenario.sources.items()
        if kind == "Pod" and source.file != snapshot_label
    }


def _gpu_fragmentation(world: MemoryCluster) -> dict[str, Any] | None:
    scratch = Report()
    add_fragmentation(world, scratch)
    found = scratch.extras.get("fragmentation")
    return dict(found) if isinstance(found, Mapping) else None


def dry_run(
    scenario: Scenario,
    config: SchedulerConfiguration,
    new: set[str],
    *,
    everything: bool = False,
    max_virtual_seconds: float = DEFAULT_MAX_VIRTUAL_SECONDS,
    configuration: str = "",
) -> DryRunReport:
    """Schedules the scenario (the cluster's objects and the `new` pods) until nothing more can
    happen, and reports on the new pods, or on every pod with `everything`."""
    world = build_world(scenario, config)
    before = _gpu_fragmentation(world)
    tracked = None if everything else new
    nominated: dict[str, str] = {}
    nominator = world.scheduler.nominator

    # the nominator holds only the pods nominated now (a bound pod leaves it): looked at after each
    # batch of decisions, it costs what the nominations are, whatever the size of the cluster
    def remember_nominations() -> None:
        for node in nominator.nodes():
            for pod in nominator.pods_on(node):
                if tracked is None or pod.key in tracked:
                    nominated[pod.key] = node

    world.after_effects.append(remember_nominations)
    world.run(max_virtual_seconds)
    remember_nominations()
    report = build_report(world, scenario)
    return _compose(world, report, tracked, nominated, before, configuration, len(new))


def _compose(
    world: MemoryCluster,
    report: Report,
    tracked: set[str] | None,
    nominated: Mapping[str, str],
    before: dict[str, Any] | None,
    configuration: str,
    new_count: int,
) -> DryRunReport:
    out = DryRunReport(
        fragmentationBefore=before,
        configuration=configuration,
        scope="new" if tracked is not None else "all",
        newPods=new_count,
        virtualSeconds=round(report.virtualSeconds, 3),
    )
    after = report.extras.get("fragmentation")
    out.fragmentationAfter = dict(after) if isinstance(after, Mapping) else None
    gangs: set[str] = set()
    for result in report.pods:
        if tracked is not None and result.key not in tracked:
            continue
        view = world.views[result.key]
        gang = _gang(view)
        if gang is not None:
            gangs.add(gang)
        out.pods.append(_pod_line(result, view, nominated.get(result.key), gang))
    for preemption in report.preemptions:
        if tracked is not None and preemption.triggerPod not in tracked:
            continue
        victim = world.views[preemption.victim]
        out.victims.append(
            Victim(
                namespace=victim.namespace,
                name=victim.name,
                node=preemption.node,
                priority=victim.priority,
                priorityClassName=victim.priority_class_name or None,
                gang=_gang(victim),
                owner=_owner(victim),
                preemptor=preemption.preemptor,
                triggerPod=preemption.triggerPod,
                message=preemption.message,
            )
        )
    out.podGroups = [g for g in report.podGroups if tracked is None or g.key in gangs]
    out.claims = _claims_of_pods(report, [world.views[p.key] for p in out.pods])
    return out


def _claims_of_pods(report: Report, pods: Sequence[Pod]) -> list[dict[str, Any]]:
    """The claims the pods use, each once, in the report's order."""
    used = {f"{pod.namespace}/{name}" for pod in pods for name in pod.claim_names}
    claims = report.extras.get("persistentVolumeClaims")
    return [
        c
        for c in (claims if isinstance(claims, list) else [])
        if f"{c.get('namespace')}/{c.get('name')}" in used
    ]


def _pod_line(result: PodResult, view: Pod, nominated: str | None, gang: str | None) -> DryRunPod:
    return DryRunPod(
        namespace=result.namespace,
        name=result.name,
        node=result.node,
        phase=result.phase,
        nominatedNodeName=nominated or result.nominatedNodeName,
        reason=result.reason,
        message=result.message,
        priority=view.priority,
        gang=gang,
        owner=_owner(view),
    )


# ---------------------------------------------------------------------------------------------- rendering
def render_dry_run_json(report: DryRunReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def render_dry_run_yaml(report: DryRunReport) -> str:
    return str(yaml.safe_dump(report.to_dict(), sort_keys=False, allow_unicode=True))


def _cell(value: object) -> str:
    if value is None or value == "":
        return NONE
    return " ".join(str(value).split())


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns fitted to their content; the last (a message) never padded or cut."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    return [
        "  ".join([*(c.ljust(widths[i]) for i, c in enumerate(row[:-1])), row[-1]]).rstrip()
        for row in (header, *rows)
    ]


def _fragmentation_line(when: str, figures: Mapping[str, Any] | None) -> str:
    if not figures:
        return f"{when}: no GPUs"
    size = figures.get("commonRequest") or 0
    text = f"{when}: {figures.get('idle', 0)} {figures.get('resource')} idle"
    if size:
        text += f", {figures.get('fragmented', 0)} fragmented (on nodes with fewer than {size} idle)"
    return text


def render_dry_run_table(report: DryRunReport) -> str:
    which = "every pod" if report.scope == "all" else "the new pods"
    lines = [f"Dry run ({report.configuration or 'koordpy run defaults'}): {which}", ""]
    lines += _table(
        ("NAMESPACE/NAME", "NODE", "PHASE", "NOMINATED", "PRIORITY", "GANG", "REASON", "MESSAGE"),
        [
            (
                p.key,
                _cell(p.node),
                p.phase,
                _cell(p.nominatedNodeName),
                str(p.priority),
                _cell(p.gang),
                _cell(p.reason),
                _cell(p.message),
            )
            for p in report.pods
        ],
    )
    if report.victims:
        lines.append("")
        lines += _table(
            ("WOULD PREEMPT", "NODE", "PRIORITY", "JOB", "PREEMPTOR", "TRIGGER POD"),
            [(v.key, v.node, str(v.priority), v.job, v.preemptor, v.triggerPod) for v in report.victims],
        )
    if report.podGroups:
        lines.append("")
        lines += _table(
            ("POD GROUP", "MIN", "SCHEDULED", "PHASE", "MESSAGE"),
            [
                (g.key, str(g.minMember), str(g.scheduled), g.phase, _cell(g.message))
                for g in report.podGroups
            ],
        )
    if report.claims:
        lines.append("")
        lines += claim_lines(report.claims)
    bound = sum(1 for p in report.pods if p.phase == BOUND)
    pending = sum(1 for p in report.pods if p.phase == PENDING)
    lines += [
        "",
        f"{len(report.pods)} pod(s): {bound} would be bound, {pending} would wait; "
        f"{len(report.victims)} pod(s) would be preempted",
        "GPU fragmentation " + _fragmentation_line("before", report.fragmentationBefore),
        "GPU fragmentation " + _fragmentation_line("after", report.fragmentationAfter),
    ]
    return "\n".join(lines) + "\n"
