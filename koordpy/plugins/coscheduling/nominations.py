"""The room job-level preemption made for a gang group, kept for it: its members' nominations,
planned again before the group is planned afresh.

Kept apart from preemption.py and plugin.py, which carry out preemption and run the extension
points: this only reads the group's state and answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.handle import Handle
from koordpy.plugins.coscheduling.networktopology import NetworkTopologySpec, Placement, plan_with_offers
from koordpy.plugins.coscheduling.offers import Offers
from koordpy.status.topology import TopologyTree


def nominated_plan(
    handle: Handle,
    members: Sequence[Pod],
    tree: TopologyTree,
    spec: NetworkTopologySpec,
    ignore: Callable[[Pod], bool],
) -> dict[str, str] | None:
    """Where every member of a topology-aware group is nominated (pod key -> node), while those
    nodes still hold the group: with as many slots as members nominated to each, they make a
    placement the gather rules accept, and each member passes PreFilter and the filters on its
    node after the members before it there (room nominated to other pods of at least its
    priority is held). None otherwise: the group is then planned afresh.

    kube-scheduler tries a pod's nominated node before any other; for a group placed by a plan
    the nominations are the plan job-level preemption made (members in index order over the
    domain's nodes, in the order Koordinator's solver visits them), and planning again once the
    victims are gone could pick another domain that has become just as good meanwhile."""
    snap = handle.snapshot
    nodes: dict[str, str] = {}
    for m in members:
        name = handle.nominator.node_of(m.key) or m.nominated_node_name
        if not name or name not in snap.row_of:
            return None
        nodes[m.key] = name
    slots = np.zeros(snap.capacity, dtype=np.int64)
    for name, count in Counter(nodes.values()).items():
        slots[snap.row_of[name]] = count
    profile: Any = handle.profile
    # the planner, offered just those slots, must use every one of them
    plan = plan_with_offers(profile, tree, spec, members, Offers(slots, Diagnosis()))
    if not isinstance(plan, Placement):
        return None
    with snap.trial() as trial:
        for m in members:
            row = snap.row_of[nodes[m.key]]
            state = CycleState()
            allowed, st = profile.run_pre_filter(state, m)
            if st is not None or (allowed is not None and nodes[m.key] not in allowed):
                return None
            one = np.array([row], dtype=np.int64)
            if not profile.run_filter_with_nominated(state, m, one, None, ignore).size:
                return None
            trial.add_pod(m, row)
    return nodes
