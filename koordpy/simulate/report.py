"""The report of a simulation run, in the shape the `koordpy simulate` contract fixes, and its three
renderings: JSON and YAML for scripts, a table for people.

Field names are the contract's JSON keys, camelCase included, so that a dataclass and the JSON it
becomes can be read side by side. Extras (a PodGroup's apiGroup, a run's fragmentation figures...)
are added at the level they belong to, never in place of a contract field.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from koordpy.api import names

__all__ = [
    "BOUND",
    "PENDING",
    "PREEMPTED",
    "PodGroupResult",
    "PodResult",
    "PreemptionResult",
    "Report",
    "quota_line",
    "render_json",
    "render_table",
    "render_yaml",
    "summary_line",
    "waiting_lines",
]

BOUND = "Bound"
PENDING = "Pending"
PREEMPTED = names.EVENT_PREEMPTED
NONE = "<none>"  # how kubectl shows an unset field, so that every column keeps a value


_POD_FIELDS = ("namespace", "name", "node", "phase", "nominatedNodeName", "reason", "message")


@dataclass(slots=True)
class PodResult:
    namespace: str
    name: str
    node: str | None
    phase: str
    nominatedNodeName: str | None = None
    reason: str | None = None
    message: str | None = None
    # Merged into the JSON object after the contract fields: e.g. a timeline's createdAt.
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.name,
            "node": self.node,
            "phase": self.phase,
            "nominatedNodeName": self.nominatedNodeName,
            "reason": self.reason,
            "message": self.message,
        }
        return _merge(out, self.extras, "PodResult") if self.extras else out

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> PodResult:
        return PodResult(
            namespace=obj["namespace"],
            name=obj["name"],
            node=obj.get("node"),
            phase=obj["phase"],
            nominatedNodeName=obj.get("nominatedNodeName"),
            reason=obj.get("reason"),
            message=obj.get("message"),
            extras={k: v for k, v in obj.items() if k not in _POD_FIELDS},
        )


_POD_GROUP_FIELDS = ("namespace", "name", "minMember", "phase", "scheduled", "message")


@dataclass(slots=True)
class PodGroupResult:
    namespace: str
    name: str
    minMember: int
    phase: str
    scheduled: int
    message: str | None = None
    # Merged into the JSON object after the contract fields: e.g. running, apiGroup.
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.name,
            "minMember": self.minMember,
            "phase": self.phase,
            "scheduled": self.scheduled,
            "message": self.message,
        }
        return _merge(out, self.extras, "PodGroupResult")

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> PodGroupResult:
        return PodGroupResult(
            namespace=obj["namespace"],
            name=obj["name"],
            minMember=obj["minMember"],
            phase=obj["phase"],
            scheduled=obj["scheduled"],
            message=obj.get("message"),
            extras={k: v for k, v in obj.items() if k not in _POD_GROUP_FIELDS},
        )


@dataclass(slots=True)
class PreemptionResult:
    victim: str  # namespace/name
    node: str
    preemptor: str  # the job (or pod) the victim made room for
    triggerPod: str  # the pod whose scheduling cycle decided the preemption
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "victim": self.victim,
            "node": self.node,
            "preemptor": self.preemptor,
            "triggerPod": self.triggerPod,
            "message": self.message,
        }

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> PreemptionResult:
        return PreemptionResult(
            obj["victim"], obj["node"], obj["preemptor"], obj["triggerPod"], obj["message"]
        )


_REPORT_FIELDS = ("pods", "podGroups", "preemptions", "clusterNetworkTopology", "virtualSeconds")


@dataclass(slots=True)
class Report:
    pods: list[PodResult] = field(default_factory=list)
    podGroups: list[PodGroupResult] = field(default_factory=list)
    preemptions: list[PreemptionResult] = field(default_factory=list)
    # The status the topology operator would write; None when the input has no topology.
    clusterNetworkTopology: dict[str, Any] | None = None
    virtualSeconds: float = 0.0
    # Merged at the top level after the contract fields, e.g. "fragmentation".
    extras: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pods": [p.to_dict() for p in self.pods],
            "podGroups": [g.to_dict() for g in self.podGroups],
            "preemptions": [p.to_dict() for p in self.preemptions],
        }
        # The contract: present when the input has one.
        if self.clusterNetworkTopology is not None:
            out["clusterNetworkTopology"] = self.clusterNetworkTopology
        out["virtualSeconds"] = float(self.virtualSeconds)
        return _merge(out, self.extras, "Report")

    @staticmethod
    def from_dict(obj: Mapping[str, Any]) -> Report:
        return Report(
            pods=[PodResult.from_dict(p) for p in obj.get("pods") or []],
            podGroups=[PodGroupResult.from_dict(g) for g in obj.get("podGroups") or []],
            preemptions=[PreemptionResult.from_dict(p) for p in obj.get("preemptions") or []],
            clusterNetworkTopology=obj.get("clusterNetworkTopology"),
            virtualSeconds=float(obj.get("virtualSeconds") or 0.0),
            extras={k: v for k, v in obj.items() if k not in _REPORT_FIELDS},
        )


def _merge(out: dict[str, Any], extras: Mapping[str, Any], owner: str) -> dict[str, Any]:
    for key, value in extras.items():
        # A clash would silently change a contract field that scripts depend on.
        if key in out:
            raise ValueError(f"{owner} extra {key!r} would replace a field of the report")
        out[key] = value
    return out


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def render_yaml(report: Report) -> str:
    return yaml.safe_dump(report.to_dict(), sort_keys=False, default_flow_style=False, allow_unicode=True)


# --- the table -------------------------------------------------------------------------------------


def _cell(value: object) -> str:
    if value is None or value == "":
        return NONE
    # One row per object: a multi-line message would break the columns.
    return " ".join(str(value).split())


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns fitted to their content; the last one (a message) is never padded or cut, since the
    terminal's width is unknown and a truncated reason is worse than a long line."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = []
    for row in (header, *rows):
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines


def claim_lines(claims: Sequence[object]) -> list[str]:
    """The claims table of a report (`persistentVolumeClaims`), one line per claim."""
    return _table(
        ("CLAIM", "PHASE", "VOLUME", "CLASS", "REQUEST"),
        [
            (
                f"{c.get('namespace')}/{c.get('name')}",
                _cell(c.get("phase")),
                _cell(c.get("volume")),
                _cell(c.get("storageClass")),
                _cell(c.get("request")),
            )
            for c in claims
            if isinstance(c, Mapping)
        ],
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _seconds(value: float) -> str:
    rounded = round(float(value), 3)
    return f"{rounded:.1f}s" if rounded == round(rounded, 1) else f"{rounded}s"


def summary_line(report: Report) -> str:
    phases = Counter(p.phase for p in report.pods)
    pending_reasons = Counter(p.reason or "Unknown" for p in report.pods if p.phase == PENDING)
    pending = f"{phases[PENDING]} pending"
    if pending_reasons:
        ordered = sorted(pending_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        pending += " (" + ", ".join(f"{n} {reason}" for reason, n in ordered) + ")"
    counts = [f"{phases[BOUND]} bound", pending, f"{phases[PREEMPTED]} preempted"]
    # A phase this module does not know yet is still counted rather than lost from the sum.
    known = (BOUND, PENDING, PREEMPTED)
    counts += [f"{n} {phase}" for phase, n in sorted(phases.items()) if phase not in known]
    return (
        f"{_plural(len(report.pods), 'pod')}: {', '.join(counts)}; "
        f"{_plural(len(report.podGroups), 'pod group')}; virtual time {_seconds(report.virtualSeconds)}"
    )


def _resources(amounts: Mapping[str, Any] | None) -> str:
    if not amounts:
        return "none"
    return " ".join(f"{name}={value}" for name, value in amounts.items())


def quota_line(quota: Mapping[str, Any]) -> str:
    """One ElasticQuota of the report's `quotas` in a line: what it uses of what it may use now."""
    head = f"quota {quota['namespace']}/{quota['name']} ({quota['apiGroup']})"
    if quota.get("problem"):
        return f"{head}: out of scheduling: {' '.join(str(quota['problem']).split())}"
    parts = [f"used {_resources(quota.get('used'))}"]
    if quota.get("runtime") is not None:
        parts.append(f"runtime {_resources(quota['runtime'])}")
    parts.append(f"min {_resources(quota.get('min'))}")
    parts.append(f"max {_resources(quota.get('max'))}")
    parts.append(_plural(int(quota.get("pendingPods") or 0), "pending pod"))
    return f"{head}: {'; '.join(parts)}"


def _wait(stats: Mapping[str, Any]) -> str:
    if not stats.get("count"):
        text = "none scheduled"
    else:
        text = (
            f"{_seconds(stats['p50'])}/{_seconds(stats['p90'])}/{_seconds(stats['max'])} "
            f"over {_plural(int(stats['count']), 'pod')}"
        )
    if stats.get("pending"):
        text += f", {stats['pending']} never scheduled"
    return text


def waiting_lines(waiting: Mapping[str, Any]) -> list[str]:
    """The report's waitingTime in a line per table: p50/p90/max of each group."""
    lines = []
    for table, title in (("byPriorityClass", "priority class"), ("byGang", "gang"), ("byQuota", "quota")):
        groups = waiting.get(table)
        if isinstance(groups, Mapping) and groups:
            parts = "; ".join(f"{name} {_wait(stats)}" for name, stats in groups.items())
            lines.append(f"waiting time by {title} (p50/p90/max): {parts}")
    return lines


def render_table(report: Report) -> str:
    lines = _table(
        ("NAMESPACE/NAME", "NODE", "PHASE", "REASON", "MESSAGE"),
        [(p.key, _cell(p.node), p.phase, _cell(p.reason), _cell(p.message)) for p in report.pods],
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
    if report.preemptions:
        lines.append("")
        lines += _table(
            ("VICTIM", "NODE", "PREEMPTOR", "TRIGGER POD", "MESSAGE"),
            [(v.victim, v.node, v.preemptor, v.triggerPod, _cell(v.message)) for v in report.preemptions],
        )
    claims = report.extras.get("persistentVolumeClaims")
    if isinstance(claims, list) and claims:
        lines.append("")
        lines += claim_lines(claims)
    lines.append("")
    lines.append(summary_line(report))
    quotas = report.extras.get("quotas")
    if isinstance(quotas, list):
        lines += [quota_line(q) for q in quotas if isinstance(q, Mapping)]
    waiting = report.extras.get("waitingTime")
    if isinstance(waiting, Mapping):
        lines += waiting_lines(waiting)
    frag = report.extras.get("fragmentation")
    if isinstance(frag, dict) and frag.get("commonRequest"):
        lines.append(
            f"{frag['resource']}: {frag['idle']} idle, {frag['fragmented']} fragmented "
            f"(idle on nodes that can no longer take a {frag['commonRequest']}-GPU pod, the most common size)"
        )
    return "\n".join(lines) + "\n"
