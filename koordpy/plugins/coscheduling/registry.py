"""The gang registry: every gang the scheduler knows, kept up to date from pod and PodGroup events.

One registry serves every profile of a scheduler. It knows each gang's members and which of them
are pending, waiting at Permit, or bound, and whether a gang group has ever been satisfied.

It also notes which gangs an event touched (a member came or went, the PodGroup changed, a backoff
ended), so that only their members' gates are checked again: checking every gated pod on every
event would cost the square of the pending pods while a cluster's worth of gangs arrives.

Within a touched gang, only the members Coscheduling's PreEnqueue holds back are looked at again,
and while the gang stays short of members they are not told each new count: a member arriving is
judged on its own (it hears the count it makes), and the members held before it hear the count
again once it has doubled or halved since they last heard it, or at once when the verdict changes
in any other way (the gang becomes ready, invalid, its minMember changes). Telling every waiting
member of a 10,000-pod gang each arrival would cost the square of its size; this way a member's
message is at most a factor of two behind its gang's count, and what is added in one bulk (a
scenario, an informer's first list) is told exactly."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.podgroup import PodGroup
from koordpy.framework.clock import Clock
from koordpy.framework.handle import SharedKey
from koordpy.plugins.coscheduling.gang import (
    ANNOTATION_GROUPS,
    FROM_ANNOTATION,
    ONCE_SATISFIED,
    Gang,
    GangSpec,
    Membership,
    membership,
    spec_from_pod,
    spec_from_podgroup,
)
from koordpy.status.gang_annotations import Fallback, MinAvailableError, index_fallback

# the one registry of a scheduler, shared by its profiles' Coscheduling plugins and read by reports
GANG_REGISTRY: SharedKey[GangRegistry] = SharedKey("coscheduling.registry")


# told that a gang was forgotten: (its id, its group's id when no gang of that group is left, else None)
GangGone = Callable[[str, "str | None"], None]

# the gangs of a group short of members, as (gang id, minMember), with how many members they have
Shortfall = tuple[tuple[tuple[str, int], ...], int]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a gang pod may not be queued yet: `invalid` distinguishes bad input from waiting;
    `shortfall` is set when the group only lacks members."""

    message: str
    invalid: bool
    shortfall: Shortfall | None = None


class GangRegistry:
    def __init__(self, clock: Clock, default_match_policy: str) -> None:
        self.clock = clock
        self.default_match_policy = default_match_policy
        self.gangs: dict[str, Gang] = {}
        self.pods: dict[str, Pod] = {}
        self.gang_of_pod: dict[str, str] = {}
        # members whose own min-available is unusable: they join the gang, another member
        # configures it
        self.unusable_min: dict[str, MinAvailableError] = {}
        # Fallbacks of a member's own annotations (not the gang's), and those told to it already
        self._pod_fallbacks: dict[str, tuple[Fallback, ...]] = {}
        self._told: dict[str, set[Fallback]] = {}
        # gang group ids that have ever had a member bound (once-satisfied)
        self.satisfied: set[str] = set()
        self.pod_groups: dict[tuple[str, str], PodGroup] = {}
        # why each gang group's last pass failed, by group id
        self.messages: dict[str, str] = {}
        # gangs whose readiness may have changed since the gates were last checked
        self._touched: set[str] = set()
        # gang id -> the gangs whose group names it (their readiness depends on its members)
        self._named_by: dict[str, set[str]] = {}
        # gangs backing off after a failure, until they are told their backoff ended
        self._backing_off: set[str] = set()
        # changes with every event that changes a gang: what is computed from the gangs can be
        # kept for as long as it stays the same
        self.version = 0
        # members whose scheduling gates hold them (each gang counts its own, see Gang.gated)
        self._scheduling_gated: set[str] = set()
        # each gang's verdict, computed once for all its members while (version, time) holds
        self._verdicts: dict[str, Verdict | None] = {}
        self._verdicts_at: tuple[int, float] = (-1, 0.0)
        # what keeps state by gang or gang group (the plugins of each profile) lets go of it here
        self._gone_listeners: list[GangGone] = []

    def on_gang_gone(self, listener: GangGone) -> None:
        """`listener(gang_id, group_id or None)` once a gang is forgotten: the group's id when it was
        the last gang of its group, so that state kept by gang or group goes with them."""
        self._gone_listeners.append(listener)

    # ----------------------------------------------------------------------------- touched gangs
    def touch(self, gang_id: str) -> None:
        self.version += 1
        self._touched.add(gang_id)

    def touch_all(self) -> None:
        self._touched.update(self.gangs)

    def back_off(self, gang: Gang, until: float) -> None:
        self.version += 1
        gang.backoff_until = until
        self._backing_off.add(gang.id)

    def hold(self, pod: Pod, held: bool) -> None:
        """Coscheduling's PreEnqueue holds the pod back (True) or lets it through (False)."""
        gang = self.gang(pod)
        if gang is None:
            return
        if held:
            gang.held.add(pod.key)
        else:
            gang.held.discard(pod.key)

    def take_touched(self) -> set[str]:
        """The keys of the held pods of every gang group whose readiness may have changed since
        the last call (gangs touched by events, and gangs whose backoff has ended), but for the
        held members of a gang still short of members that have heard a count close enough
        (see the module's doc)."""
        now = self.clock.now()
        for gid in [
            g for g in self._backing_off if (gang := self.gangs.get(g)) is None or gang.backoff_until <= now
        ]:
            self._backing_off.discard(gid)
            self._touched.add(gid)
        if not self._touched:
            return set()
        touched, self._touched = self._touched, set()
        affected: set[str] = set()
        for gid in touched:
            affected.add(gid)
            affected.update(self._named_by.get(gid, ()))
            gang = self.gangs.get(gid)
            if gang is not None:
                affected.update(gang.group)
        keys: set[str] = set()
        for gid in affected:
            gang = self.gangs.get(gid)
            if gang is None or not gang.held:
                continue
            if self._told_enough(gang):
                continue
            keys.update(gang.held)
        return keys

    def _told_enough(self, gang: Gang) -> bool:
        """Whether the gang's held members may keep the shortfall they were last told: the group
        is still short of members in the same gangs and minMembers, and has neither doubled nor
        halved its members since. Otherwise they are told again, and what they are told noted."""
        verdict = self._verdict(gang)
        short = verdict.shortfall if verdict is not None else None
        told = gang.told_short
        gang.told_short = short
        if short is None or told is None or short[0] != told[0]:
            return False
        now, then = short[1], told[1]
        if (now == then == 0) or (then < 2 * now and now < 2 * then):
            gang.told_short = told
            return True
        return False

    def _set_spec(self, gang: Gang, spec: GangSpec | None) -> None:
        for gid in gang.group:
            named = self._named_by.get(gid)
            if named is not None:
                named.discard(gang.id)
                if not named:
                    del self._named_by[gid]
        gang.spec = spec
        for gid in gang.group:
            if gid != gang.id:
                self._named_by.setdefault(gid, set()).add(gang.id)
        self._touched.add(gang.id)

    # ----------------------------------------------------------------------------- events
    def on_pod(self, action: str, pod: Pod) -> None:
        self.version += 1
        key = pod.key
        if action == "Delete":
            self._forget_pod(key)
            return
        m = membership(pod)
        old_gang = self.gang_of_pod.get(key)
        if old_gang is not None:
            self._touched.add(old_gang)
        if m is not None:
            self._touched.add(m.gang_id)
        if m is None:
            if old_gang is not None:
                self._forget_pod(key)
            return
        if old_gang is not None and old_gang != m.gang_id:
            self._forget_pod(key)
            old_gang = None
        gang = self.gangs.get(m.gang_id)
        if gang is None:
            gang = Gang(m.gang_id, pod.namespace, m.name, m.source)
            self.gangs[m.gang_id] = gang
            pg = self.pod_groups.get((m.source, m.gang_id))
            if pg is not None:
                self._configure_from_podgroup(gang, pg)
        if gang.first_seen is None:
            gang.first_seen = self.clock.now()
        self.pods[key] = pod
        self.gang_of_pod[key] = gang.id
        gang.children.add(key)
        if bool(pod.scheduling_gates) != (key in self._scheduling_gated):
            if pod.scheduling_gates:
                self._scheduling_gated.add(key)
                gang.gated += 1
            else:
                self._scheduling_gated.discard(key)
                gang.gated -= 1
        own = index_fallback(pod.annotations)
        self._pod_fallbacks[key] = (own,) if own is not None else ()
        if m.source == FROM_ANNOTATION:
            self._configure_from_pod(gang, pod, m)
        if pod.node_name and not pod.is_terminal:
            gang.bound.add(key)
            gang.waiting.discard(key)
            gang.held.discard(key)
            self.satisfied.add(gang.group_id)
        elif pod.is_terminal:
            gang.bound.discard(key)

    def _configure_from_pod(self, gang: Gang, pod: Pod, m: Membership) -> None:
        """koord-scheduler's tryInitByPodConfig: the first member whose min-available is usable
        configures the gang, bad values falling back to defaults, for good; a member whose
        min-available is not usable joins without configuring it."""
        try:
            spec = spec_from_pod(pod, m, self.default_match_policy)
        except MinAvailableError as err:
            self.unusable_min[pod.key] = err
            if gang.configured_by is None:
                gang.error = f"no member has a usable min-available yet: {err}"
            return
        except SpecError as err:
            self.unusable_min.pop(pod.key, None)
            if gang.configured_by is None:
                # configured as koord-scheduler configures it, with a group it never schedules
                gang.configured_by = pod.key
                gang.error = str(err)
                gang.create_time = pod.creation_ts
            return
        self.unusable_min.pop(pod.key, None)
        if gang.configured_by is None:
            gang.configured_by = pod.key
            self._set_spec(gang, spec)
            gang.error = None
            gang.create_time = pod.creation_ts

    def _forget_pod(self, key: str) -> None:
        gid = self.gang_of_pod.pop(key, None)
        self.pods.pop(key, None)
        self.unusable_min.pop(key, None)
        self._pod_fallbacks.pop(key, None)
        self._told.pop(key, None)
        if gid is None:
            return
        self._touched.add(gid)
        gang = self.gangs.get(gid)
        if gang is None:
            return
        gang.children.discard(key)
        gang.waiting.discard(key)
        gang.bound.discard(key)
        gang.held.discard(key)
        if key in self._scheduling_gated:
            self._scheduling_gated.discard(key)
            gang.gated -= 1
        # a gang goes with its last member, unless its PodGroup is still there (a PodGroup deleted
        # before its members leaves the gang to them)
        if not gang.children and (gang.source == FROM_ANNOTATION or gang.pod_group is None):
            self._drop(gang)

    def _drop(self, gang: Gang) -> None:
        """Forget a gang; with the last gang of its group goes the group's once-satisfied mark, as
        a gang group's shared state goes with its last gang: a job created again under the same
        names starts as a new group."""
        group_id, group = gang.group_id, gang.group
        self._set_spec(gang, None)
        del self.gangs[gang.id]
        gone: str | None = None
        if not any(gid in self.gangs for gid in group):
            self.satisfied.discard(group_id)
            self.messages.pop(group_id, None)
            gone = group_id
        for listener in self._gone_listeners:
            listener(gang.id, gone)

    def on_podgroup(self, action: str, obj: Mapping[str, Any]) -> None:
        self.version += 1
        pg = PodGroup.from_dict(obj)
        slot = (pg.api_group, pg.key)
        self._touched.add(pg.key)
        if action == "Delete":
            self.pod_groups.pop(slot, None)
            gang = self.gangs.get(pg.key)
            if gang is not None and gang.source == pg.api_group:
                gang.error = None
                gang.pod_group = None
                if gang.children:
                    self._set_spec(gang, None)
                else:
                    self._drop(gang)
            return
        self.pod_groups[slot] = pg
        gang = self.gangs.get(pg.key)
        if gang is None:
            gang = Gang(pg.key, pg.namespace, pg.name, pg.api_group)
            self.gangs[pg.key] = gang
        if gang.source == pg.api_group:
            self._configure_from_podgroup(gang, pg)

    def _configure_from_podgroup(self, gang: Gang, pg: PodGroup) -> None:
        gang.pod_group = pg
        gang.create_time = pg.creation_ts
        try:
            self._set_spec(gang, spec_from_podgroup(pg, self.default_match_policy))
            gang.error = None
        except SpecError as err:
            self._set_spec(gang, None)
            gang.error = str(err)

    # ----------------------------------------------------------------------------- queries
    def gang(self, pod: Pod) -> Gang | None:
        gid = self.gang_of_pod.get(pod.key)
        return self.gangs.get(gid) if gid is not None else None

    def group(self, gang: Gang) -> list[Gang | None]:
        return [self.gangs.get(gid) for gid in gang.group]

    def once_satisfied(self, gang: Gang) -> bool:
        return (
            gang.spec is not None
            and gang.spec.match_policy == ONCE_SATISFIED
            and gang.group_id in self.satisfied
        )

    def readiness(self, pod: Pod) -> Verdict | None:
        """None when the pod may be scheduled now; otherwise why not (bad input, or waiting)."""
        gang = self.gang(pod)
        if gang is None:
            return None
        return self._verdict(gang)

    def _verdict(self, gang: Gang) -> Verdict | None:
        """The gang's verdict, the same for all its members: computed once for as long as neither
        the gangs nor the time change."""
        at = (self.version, self.clock.now())
        if self._verdicts_at != at:
            self._verdicts_at = at
            self._verdicts = {}
        if gang.id in self._verdicts:
            return self._verdicts[gang.id]
        verdict = self._verdicts[gang.id] = self._judge(gang)
        return verdict

    def _judge(self, gang: Gang) -> Verdict | None:
        if gang.error is not None:
            return Verdict(f"gang {gang.id}: {gang.error}", True)
        if gang.spec is None:
            return Verdict(f"gang {gang.id}: PodGroup {gang.id} ({gang.source}) not found", False)
        if self.once_satisfied(gang):
            return None
        members = list(zip(gang.group, self.group(gang), strict=True))
        for gid, other in members:
            if other is not None and other.error is not None:
                return Verdict(f"gang {gang.id}: member gang {gid} is invalid: {other.error}", True)
        # koord-scheduler's PreEnqueue turns the group away while a member gang it names does not
        # exist (`memberGangs [...] doesn't exists`) and schedules it once it does: the group waits
        missing = [
            gid
            for gid, other in members
            if other is None or (other.spec is None and other.error is None and not other.children)
        ]
        if missing:
            named = (
                f"member gang {missing[0]} does not exist yet"
                if len(missing) == 1
                else f"member gangs {', '.join(missing)} do not exist yet"
            )
            return Verdict(
                f"gang group [{gang.group_id}] is not ready: {named} (annotation {ANNOTATION_GROUPS} of "
                f"gang {gang.id}); the group waits for {'it' if len(missing) == 1 else 'them'}",
                False,
            )
        short: list[str] = []
        shortfall: list[tuple[str, int]] = []
        have = 0
        for gid, other in members:
            assert other is not None  # every missing one was said above
            if other.spec is None:
                return Verdict(f"gang {gang.id}: member gang {gid}: PodGroup not found", False)
            if len(other.children) < other.spec.min_member:
                short.append(f"{gid} has {len(other.children)} of minMember {other.spec.min_member} pods")
                shortfall.append((gid, other.spec.min_member))
                have += len(other.children)
        if short:
            return Verdict(
                f"gang group [{gang.group_id}] is not ready: {'; '.join(short)}",
                False,
                (tuple(shortfall), have),
            )
        now = self.clock.now()
        for other in self.group(gang):
            if other is not None and other.backoff_until > now:
                return Verdict(
                    f"gang {other.id} failed recently and backs off for {other.backoff_until - now:.0f}s",
                    False,
                )
        return None

    def fallbacks(self, pod: Pod) -> list[Fallback]:
        """Every annotation koord-scheduler reads otherwise than written for this member: its
        gang's (once configured) and its own."""
        gang = self.gang(pod)
        if gang is None:
            return []
        found = list(self._pod_fallbacks.get(pod.key, ()))
        if gang.spec is not None:
            found.extend(gang.spec.fallbacks)
            unusable = self.unusable_min.get(pod.key)
            if unusable is not None:
                source = f" of member {gang.configured_by}" if gang.configured_by else ""
                found.append(unusable.fallback(f"the gang's min-available {gang.spec.min_member}{source}"))
        return found

    def untold_fallbacks(self, pod: Pod) -> list[Fallback]:
        """The pod's fallbacks it has not been told of; from now on they count as told."""
        if pod.key not in self.gang_of_pod:
            return []
        found = self.fallbacks(pod)
        if not found:
            return found
        told = self._told.setdefault(pod.key, set())
        new = [f for f in found if f not in told]
        told.update(new)
        return new

    def tell_once(self, pod: Pod, fallback: Fallback) -> bool:
        """Whether the pod has yet to be told of the fallback; from now on it counts as told."""
        if pod.key not in self.gang_of_pod:
            return False
        told = self._told.setdefault(pod.key, set())
        if fallback in told:
            return False
        told.add(fallback)
        return True

    def waiting_groups(self) -> int:
        return len({g.group_id for g in self.gangs.values() if g.waiting})

    def gauges(self) -> dict[str, float]:
        return {"koordpy_gang_groups_waiting": float(self.waiting_groups())}

    def next_deadline(self) -> float | None:
        now = self.clock.now()
        times = [
            gang.backoff_until
            for gid in self._backing_off
            if (gang := self.gangs.get(gid)) is not None and gang.backoff_until > now
        ]
        return min(times) if times else None
