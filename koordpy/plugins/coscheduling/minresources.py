"""`minResources` of a scheduler-plugins PodGroup (`scheduling.x-k8s.io`): the gang waits while the
cluster's free capacity cannot hold it.

The rules are those of scheduler-plugins' Coscheduling PreFilter (kubernetes-sigs/scheduler-plugins
pkg/coscheduling/core/core.go: `PodGroupManager.PreFilter`, `CheckClusterResource`,
`getNodeResource`):

- Only a PodGroup whose spec sets minResources is checked (an empty map counts as set). What is
  asked for is minResources with `pods` replaced by minMember.
- Free capacity is summed over every node of the snapshot, whatever its taints, selectors or
  schedulability: the check only catches groups that cannot fit anywhere, Filter does the rest.
  A node's free amount is its allocatable minus the requests of its pods (for `pods`, the pods it
  may hold minus those it holds), the group's own pods (assumed or bound) given back, so that a
  group partly placed is judged as a whole. A resource the node does not have adds nothing.
- A resource is covered once the running total over the nodes reaches the request; an
  overcommitted node (its pods ask for more than it has) lowers the total until then, as the
  reference subtracts its negative free amount. The nodes are taken in snapshot row order.
- A group that passed is not checked again for permitWaitingTimeSeconds (the reference keeps it
  in a cache with that expiry; 0 falls back to the cache's own default of 3 s), unless a member is
  unreserved or the group is rejected as a whole in the meantime (the reference forgets it in
  Unreserve and PostFilter). Nothing reads the PodGroup's status phase.

Koordinator's PodGroup (`scheduling.sigs.k8s.io`) has the field too, but Koordinator's
Coscheduling never reads it, and neither does koordpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from koordpy.api.pod import Pod
from koordpy.api.resources import MAX_AMOUNT, PODS, format_amount, sorted_names
from koordpy.cache import Cache, Snapshot
from koordpy.framework.clock import Clock
from koordpy.plugins.coscheduling.gang import FROM_X_K8S, Gang

# go-cache's default expiry of scheduler-plugins' permitted-PodGroup cache, used when an entry is
# added with a zero duration
DEFAULT_PERMIT_SECONDS = 3.0
# running totals stay exact in int64 while the number of nodes times the largest amount stays below
_INT64_SAFE = 1 << 62


@dataclass(frozen=True, slots=True)
class Shortfall:
    resource: str
    wanted: int
    free: int

    def describe(self) -> str:
        name = "pods (minMember)" if self.resource == PODS else self.resource
        return (
            f"{name} {format_amount(self.resource, self.wanted)} exceeds free "
            f"{format_amount(self.resource, self.free)} "
            f"(short by {format_amount(self.resource, self.wanted - self.free)})"
        )


def group_request(min_resources: Mapping[str, int], min_member: int) -> dict[str, int]:
    """What the group asks the cluster for: minResources, with `pods` as minMember."""
    return {**min_resources, PODS: min_member}


def cluster_shortfall(
    snap: Snapshot, request: Mapping[str, int], own: Iterable[tuple[int, Pod]]
) -> list[Shortfall]:
    """The resources of `request` the snapshot's nodes cannot cover (empty when all are), with
    the pods of `own` ((row, pod) as the snapshot holds them) given back."""
    names = sorted_names(name for name, amount in request.items() if amount > 0)
    if not names:
        return []
    rows = snap.live_rows()
    free = np.zeros((rows.size, len(names)), dtype=np.int64)
    for j, name in enumerate(names):
        col = snap.resource_col.get(name)
        if col is not None:
            free[:, j] = snap.allocatable_column(col, rows) - snap.requested_column(col, rows)
    given_back = list(own)
    known = [(j, col) for j, name in enumerate(names) if (col := snap.resource_col.get(name)) is not None]
    if given_back and known and rows.size:
        positions = np.searchsorted(rows, np.fromiter((r for r, _ in given_back), dtype=np.int64))
        # the pods are on the nodes, so their request vectors span every column
        vecs = np.stack([snap.request_vector(pod.requests) for _, pod in given_back])
        into = np.array([j for j, _ in known], dtype=np.int64)
        cols = [col for _, col in known]
        np.add.at(free, (positions[:, None], into[None, :]), vecs[:, cols])
    # a node over by more than any amount can be is over by everything: the bound keeps sums exact
    np.clip(free, -MAX_AMOUNT, None, out=free)
    if rows.size == 0:
        reached = np.zeros(len(names), dtype=np.int64)
        totals = reached
    elif rows.size * max(int(np.abs(free).max()), 1) < _INT64_SAFE:
        running = np.cumsum(free, axis=0)
        reached, totals = running.max(axis=0), running[-1]
    else:
        running_exact = np.cumsum(free.astype(object), axis=0)
        reached, totals = running_exact.max(axis=0), running_exact[-1]
    return [
        Shortfall(name, int(request[name]), int(totals[j]))
        for j, name in enumerate(names)
        if int(reached[j]) < int(request[name])
    ]


def own_pods(gang: Gang, cache: Cache) -> list[tuple[int, Pod]]:
    """(row, pod) of every member of the gang the snapshot holds on a node (assumed or bound)."""
    snap = cache.snapshot
    found: list[tuple[int, Pod]] = []
    for key in gang.children:
        state = cache.pod_state(key)
        if state is None:
            continue
        row = snap.row_of.get(state.node_name)
        if row is None:
            continue
        stored = snap.info(row).pods.get(key)
        if stored is not None:
            found.append((row, stored))
    return found


class MinResourcesCheck:
    """The check of one scheduler, with the groups that passed it and until when they stay passed."""

    def __init__(self, clock: Clock, permit_seconds: float) -> None:
        self.clock = clock
        self.permit_seconds = permit_seconds or DEFAULT_PERMIT_SECONDS
        # gang id -> (when it passed, until when the pass holds)
        self._permitted: dict[str, tuple[float, float]] = {}

    def forget(self, gang_id: str) -> None:
        self._permitted.pop(gang_id, None)

    def _still_permitted(self, gang: Gang, now: float) -> bool:
        entry = self._permitted.get(gang.id)
        if entry is None:
            return False
        since, until = entry
        # a group rejected as a whole since it passed is checked again, as PostFilter forgets it
        if now >= until or (gang.last_failure is not None and gang.last_failure >= since):
            self._permitted.pop(gang.id, None)
            return False
        return True

    def refusal(self, gang: Gang, cache: Cache) -> str | None:
        """Why the gang must wait for room (None when it may be tried)."""
        pg = gang.pod_group
        if gang.source != FROM_X_K8S or pg is None or pg.min_resources is None or gang.spec is None:
            return None
        now = self.clock.now()
        if self._still_permitted(gang, now):
            return None
        request = group_request(pg.min_resources, gang.spec.min_member)
        short = cluster_shortfall(cache.snapshot, request, own_pods(gang, cache))
        if short:
            return f"PodGroup {gang.id}: resource gap: minResources {', '.join(s.describe() for s in short)}"
        self._permitted[gang.id] = (now, now + self.permit_seconds)
        return None
