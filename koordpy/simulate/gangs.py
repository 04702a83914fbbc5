"""The simulate report's `podGroups`: every PodGroup and annotation gang, with the status its
controller would write and why it is not placed when it is not."""

from __future__ import annotations

from koordpy.api.pod import Pod
from koordpy.api.podgroup import SIGS_GROUP
from koordpy.plugins.coscheduling.gang import FROM_ANNOTATION, membership
from koordpy.plugins.coscheduling.registry import GANG_REGISTRY
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.report import PodGroupResult, Report
from koordpy.status.podgroup import (
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
        min_member = (
            gang.spec.min_member
            if gang.spec is not None
            else (gang.pod_group.min_member if gang.pod_group is not None else 0)
        )
        api_group = SIGS_GROUP if gang.source == FROM_ANNOTATION else gang.source
        previous = dict(gang.pod_group.status) if gang.pod_group is not None else {}
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
