"""The simulate report's `podGroups`: every PodGroup and annotation gang, with the status its
controller would write and why it is not placed when it is not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from koordpy.api.pod import Pod
from koordpy.api.podgroup import SIGS_GROUP
from koordpy.plugins.coscheduling.gang import FROM_ANNOTATION, Gang, membership
from koordpy.plugins.coscheduling.registry import GANG_REGISTRY
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.report import PodGroupResult, Report
from koordpy.status.podgroup import (
    PENDING,
    MemberCounts,
    occupied_by,
    settle,
    with_defaulted_condition,
    with_scheduled_condition,
)


def _completed_members(world: MemoryCluster) -> dict[str, list[Pod]]:
    """Members that completed, by gang id: the scheduler no longer watches them (see
    MemoryCluster.complete_pod), the PodGroup operator still counts them as succeeded."""
    out: dict[str, list[Pod]] = {}
    if world.timeline is None:
        return out
    for key in world.timeline.finished_at:
        pod = world.views.get(key)
        if pod is None or key in world.deleted or not pod.is_terminal:
            continue
        m = membership(pod)
        if m is not None:
            out.setdefault(m.gang_id, []).append(pod)
    return out


def _min_member(gang: Gang) -> int:
    if gang.spec is not None:
        return gang.spec.min_member
    return gang.pod_group.min_member if gang.pod_group is not None else 0


def _api_group(gang: Gang) -> str:
    return SIGS_GROUP if gang.source == FROM_ANNOTATION else gang.source


def _input_status(gang: Gang) -> dict[str, Any]:
    return dict(gang.pod_group.status) if gang.pod_group is not None else {}


# a member's share of its gang's counts: total, scheduled, running, succeeded, failed
_Share = tuple[int, int, int, int, int]


@dataclass(slots=True)
class PodGroupHistory:
    """The PodGroup operator through a timeline's run: it reconciles a group whenever one of its
    members changes, and its status machine is stateful (a group Running that loses a member goes
    back to Scheduling, not to Pending), so the status it writes is carried along, in
    `world.group_statuses`. Each member change updates its gang's counts in place and marks the
    gang; after each batch of changes the marked gangs are settled once, so a gang costs O(1) per
    member change, never a walk over its members."""

    world: MemoryCluster
    counts: dict[str, list[int]] = field(default_factory=dict)
    shares: dict[str, tuple[str, _Share]] = field(default_factory=dict)
    dirty: dict[str, None] = field(default_factory=dict)

    def install(self) -> None:
        self.world.pod_changes.append(self.pod_changed)
        self.world.after_effects.append(self.settle)

    def pod_changed(self, key: str) -> None:
        world = self.world
        old = self.shares.pop(key, None)
        if old is not None:
            gang_id, share = old
            counts = self.counts[gang_id]
            for i, v in enumerate(share):
                counts[i] -= v
            self.dirty[gang_id] = None
        pod = world.views.get(key)
        if pod is None or key in world.deleted:
            return
        if old is not None:
            gang_id = old[0]
        else:
            m = membership(pod)
            if m is None:
                return
            gang_id = m.gang_id
        phase = pod.phase
        share = (
            1,
            1 if pod.node_name else 0,
            1 if phase == "Running" else 0,
            1 if phase == "Succeeded" else 0,
            1 if phase == "Failed" else 0,
        )
        counts = self.counts.setdefault(gang_id, [0, 0, 0, 0, 0])
        for i, v in enumerate(share):
            counts[i] += v
        self.shares[key] = (gang_id, share)
        self.dirty[gang_id] = None

    def settle(self) -> None:
        if not self.dirty:
            return
        world = self.world
        registry = world.scheduler.shared.get(GANG_REGISTRY)
        dirty, self.dirty = self.dirty, {}
        if registry is None:
            return
        now = world.clock.now()
        for gang_id in dirty:
            gang = registry.gangs.get(gang_id)
            if gang is None:
                continue
            previous = world.group_statuses.get(gang_id)
            if previous is None:
                previous = _input_status(gang)
            counts = MemberCounts(*self.counts.get(gang_id, (0, 0, 0, 0, 0)))
            min_member, api_group = _min_member(gang), _api_group(gang)
            leaves_pending = counts.total >= min_member and (min_member > 0 or api_group != SIGS_GROUP)
            occupied = None
            if previous.get("phase") in (None, "", PENDING) and leaves_pending:
                # the owners of one member (the first by key, as at the end of a run without a
                # timeline) are written only with the step out of Pending: looked up then, once
                live = [k for k in gang.children if k in world.views and k not in world.deleted]
                occupied = occupied_by([world.views[min(live)]] if live else [])
            world.group_statuses[gang_id] = settle(api_group, min_member, previous, counts, occupied, now)


def add_pod_groups(world: MemoryCluster, scenario: Scenario, report: Report) -> None:
    registry = world.scheduler.shared.get(GANG_REGISTRY)
    if registry is None:
        return
    now = world.clock.now()
    completed = _completed_members(world)
    for gang in sorted(registry.gangs.values(), key=lambda g: (g.namespace, g.name)):
        members = [
            world.views[k] for k in sorted(gang.children) if k in world.views and k not in world.deleted
        ]
        if gang.id in completed:
            members = sorted([*members, *completed[gang.id]], key=lambda p: p.key)
        min_member = _min_member(gang)
        api_group = _api_group(gang)
        # with a timeline, from what the operator wrote as the run went; else from the input
        previous = world.group_statuses.get(gang.id) or _input_status(gang)
        status = settle(api_group, min_member, previous, MemberCounts.of(members), occupied_by(members), now)
        message = gang.error or registry.messages.get(gang.group_id)
        extras: dict[str, object] = {
            "apiGroup": api_group if gang.source != FROM_ANNOTATION else "annotation",
            "running": status.get("running", 0),
        }
        if world.timeline is not None:
            # with a timeline, members complete: the count the operator writes beside running
            extras["succeeded"] = status.get("succeeded", 0)
        if "scheduleStartTime" in status:
            extras["scheduleStartTime"] = status["scheduleStartTime"]
        if len(gang.group) > 1:
            extras["gangGroup"] = list(gang.group)
        # the condition the operator writes on a PodGroup (a gang of annotations alone has none on
        # a cluster, its members' Warning events say the same)
        defaulted = [f.message() for f in gang.spec.fallbacks] if gang.spec is not None else []
        with_conditions = with_defaulted_condition(status, defaulted, now)
        if api_group == SIGS_GROUP:
            # the operator writes why the group waits on the groups whose CRD keeps conditions
            with_conditions = with_scheduled_condition(with_conditions, message, now)
        conditions = with_conditions.get("conditions")
        if conditions:
            extras["conditions"] = conditions
        report.podGroups.append(
            PodGroupResult(
                namespace=gang.namespace,
                name=gang.name,
                minMember=min_member,
                phase=str(status.get("phase", "Pending")),
                scheduled=sum(1 for m in members if m.node_name),
                message=message,
                extras=extras,
            )
        )
