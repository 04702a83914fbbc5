"""The pod and node facts the operators' status needs, fed by informer events.

`ClusterFacts` keeps, per PodGroup, a small view of each member pod (name, node, phase, owners:
what `koordpy.status.podgroup` counts, not the whole pod), and the labels of every node (what the
network topology is built from). Each event costs O(1) besides the pod's own labels and owners,
and an event that changes nothing the status reads (a pod's conditions, a node's heartbeat)
notifies nobody.

Whoever feeds it sets `synced` once the initial lists of pods and nodes have been delivered; the
controllers reconcile nothing before that, since counting a half-listed cluster writes wrong
status. Finished pods (Succeeded, Failed) must be fed too: a PodGroup counts its succeeded and
failed members, so a feed that drops them (as a field selector on the phase would) loses them.

For the ElasticQuota operator it keeps, besides, the sums of pod requests its status is computed
from (`koordpy.status.quota.QuotaSums`: by namespace and quota label, and the Running pods' by
namespace) and the nodes' allocatable, summed. A pod event changes the sums by that pod's requests
alone (its spec is parsed only when it is new or its containers changed), a node event the total
by that node's allocatable alone, so nothing here ever walks all pods or all nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from koordpy.api.elasticquota import KOORDINATOR_GROUP, LABEL_PREEMPTIBLE, LABEL_QUOTA_NAME, X_K8S_GROUP
from koordpy.api.errors import SpecError
from koordpy.api.pod import Pod
from koordpy.api.resources import ResourceList, parse_resource_list
from koordpy.kubeapi.informer import DELETE
from koordpy.status.quota import QuotaPod, QuotaSums
from operators.podgroup import GroupKey, group_of, member_summary, scheduled_condition

__all__ = ["ClusterFacts", "GroupListener", "NodesListener", "QuotaListener"]

# told the PodGroup whose members changed (one joined, left, or changed node, phase or owners)
GroupListener = Callable[[GroupKey], None]
# told that the set of nodes or the labels of one changed
NodesListener = Callable[[], None]
# told the ElasticQuota API group whose figures changed: a pod's requests counted in other sums, a
# pod Running or not (scheduler-plugins'), or the nodes' allocatable (Koordinator's)
QuotaListener = Callable[[str], None]

_FINISHED = ("Succeeded", "Failed")
# the parts of a pod's spec its requests come from
_REQUEST_FIELDS = ("containers", "initContainers", "overhead")


def _mapping(value: Any) -> Mapping[str, Any]:
    # decoded JSON is made of plain dicts: that check is much cheaper than the ABC's
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return {}


def _same_member(
    known: Pod, meta: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> bool:
    """Whether the pod still reads as the member view `known` (of the same uid, so of the same
    name): most pod updates (conditions, annotations, container states) change nothing counted,
    and are told apart here without building a view."""
    if known.node_name != (spec.get("nodeName") or "") or known.phase != (status.get("phase") or "Pending"):
        return False
    # the scheduler's word on a pending member is the group's GangScheduled condition
    if scheduled_condition(known.conditions) != scheduled_condition(status.get("conditions")):
        return False
    owners = tuple(
        (
            str(ref.get("kind", "")),
            str(ref.get("name", "")),
            str(ref.get("uid", "")),
            bool(ref.get("controller", False)),
        )
        for ref in meta.get("ownerReferences") or ()
        if isinstance(ref, Mapping)
    )
    return owners == tuple((o.kind, o.name, o.uid, o.controller) for o in known.owners)


def _same_requests(spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether the pod's spec asks for what the previous object's did: pod updates are almost
    all status writes, and most leave the containers alone."""
    if old is None:
        return False
    before = _mapping(old.get("spec"))
    return all(spec.get(f) == before.get(f) for f in _REQUEST_FIELDS)


class ClusterFacts:
    """Member pods by PodGroup and node labels by node name, kept from informer events.

    `on_pod` and `on_node` take an informer's (action, object, previous object) with action
    "Add", "Update" or "Delete" (for "Delete", the last known object). Listeners are called
    synchronously from those calls, so they must only take note (queue a key, set a flag)."""

    def __init__(self) -> None:
        # set by the feeder once the initial pod and node lists are in
        self.synced = asyncio.Event()
        # member views by group, each keyed by pod uid
        self._groups: dict[GroupKey, dict[str, Pod]] = {}
        # the group each member pod is in, so that a pod that moves or goes leaves the old one
        self._group_of_pod: dict[str, GroupKey] = {}
        self._node_labels: dict[str, dict[str, str]] = {}
        self._group_listeners: list[GroupListener] = []
        self._nodes_listeners: list[NodesListener] = []
        # ElasticQuota figures: each unfinished pod as counted, the sums, and the allocatable of
        # each node (as written, to tell a heartbeat from a change, and parsed) with their total
        self.quota_sums = QuotaSums()
        self._quota_pods: dict[str, QuotaPod] = {}
        self._allocatable: dict[str, tuple[dict[str, Any], ResourceList]] = {}
        self._allocatable_total: ResourceList = {}
        self._quota_listeners: list[QuotaListener] = []

    # ------------------------------------------------------------------ listeners
    def add_group_listener(self, listener: GroupListener) -> None:
        self._group_listeners.append(listener)

    def remove_group_listener(self, listener: GroupListener) -> None:
        if listener in self._group_listeners:
            self._group_listeners.remove(listener)

    def add_nodes_listener(self, listener: NodesListener) -> None:
        self._nodes_listeners.append(listener)

    def remove_nodes_listener(self, listener: NodesListener) -> None:
        if listener in self._nodes_listeners:
            self._nodes_listeners.remove(listener)

    def add_quota_listener(self, listener: QuotaListener) -> None:
        self._quota_listeners.append(listener)

    def remove_quota_listener(self, listener: QuotaListener) -> None:
        if listener in self._quota_listeners:
            self._quota_listeners.remove(listener)

    def _quota_changed(self, api_group: str) -> None:
        for listener in list(self._quota_listeners):
            listener(api_group)

    def _group_changed(self, key: GroupKey) -> None:
        for listener in list(self._group_listeners):
            listener(key)

    def _nodes_changed(self) -> None:
        for listener in list(self._nodes_listeners):
            listener()

    # ------------------------------------------------------------------ pods
    def on_pod(self, action: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        """Take note of a pod event. A pod joins the group it names, leaves the one it named
        before (when it names another or none, or is deleted), and its group hears of it only
        when its membership, node, phase or owners changed."""
        meta = _mapping(obj.get("metadata"))
        uid = str(meta.get("uid") or "")
        if not uid:
            return
        self._count_quota_pod(action, uid, meta, obj, old)
        previous = self._group_of_pod.get(uid)
        key: GroupKey | None = None
        if action != DELETE:
            key = group_of(
                str(meta.get("namespace") or ""),
                _mapping(meta.get("labels")),
                _mapping(meta.get("annotations")),
            )
        if key is None:
            if previous is not None:
                self._leave(uid, previous)
                self._group_changed(previous)
            return
        spec, status = _mapping(obj.get("spec")), _mapping(obj.get("status"))
        if previous == key:
            if _same_member(self._groups[key][uid], meta, spec, status):
                return
        elif previous is not None:
            self._leave(uid, previous)
            self._group_changed(previous)
        summary = member_summary(key.namespace, str(meta.get("name") or ""), uid, meta, spec, status)
        self._group_of_pod[uid] = key
        self._groups.setdefault(key, {})[uid] = Pod.from_dict(summary)
        self._group_changed(key)

    def _count_quota_pod(
        self,
        action: str,
        uid: str,
        meta: Mapping[str, Any],
        obj: Mapping[str, Any],
        old: Mapping[str, Any] | None,
    ) -> None:
        """Keep the quota sums: a pod counts from the moment it exists until it finishes or goes,
        in the sums of its namespace and quota label, placed or not, Running or not."""
        known = self._quota_pods.get(uid)
        spec, status = _mapping(obj.get("spec")), _mapping(obj.get("status"))
        phase = status.get("phase") or "Pending"
        if action == DELETE or phase in _FINISHED:
            if known is not None:
                del self._quota_pods[uid]
                self.quota_sums.count(known, -1)
                self._quota_changed(KOORDINATOR_GROUP)
                if known.running:
                    self._quota_changed(X_K8S_GROUP)
            return
        labels = _mapping(meta.get("labels"))
        label = labels.get(LABEL_QUOTA_NAME)
        pair = (str(meta.get("namespace") or "default"), label if isinstance(label, str) else "")
        assigned, running = bool(spec.get("nodeName")), phase == "Running"
        non_preemptible = labels.get(LABEL_PREEMPTIBLE) == "false"
        same_requests = known is not None and _same_requests(spec, old)
        if same_requests and known is not None:
            if (known.pair, known.assigned, known.running, known.non_preemptible) == (
                pair,
                assigned,
                running,
                non_preemptible,
            ):
                return
            requests = known.requests
        else:
            # the scheduler's own reading of the requests (init containers, sidecars, overhead), so
            # that the status counts a pod as the quota admitted it
            requests = dict(Pod.from_dict(obj).requests)
        counted = QuotaPod(pair, requests, assigned, running, non_preemptible)
        if known is not None:
            self.quota_sums.count(known, -1)
        self.quota_sums.count(counted, 1)
        self._quota_pods[uid] = counted
        if known is None or (known.pair, known.assigned, known.requests, known.non_preemptible) != (
            pair,
            assigned,
            requests,
            non_preemptible,
        ):
            self._quota_changed(KOORDINATOR_GROUP)
        if running or (known is not None and known.running):
            self._quota_changed(X_K8S_GROUP)

    def _leave(self, uid: str, key: GroupKey) -> None:
        del self._group_of_pod[uid]
        members = self._groups.get(key)
        if members is not None:
            members.pop(uid, None)
            if not members:
                del self._groups[key]

    def members(self, key: GroupKey) -> tuple[Pod, ...]:
        """The views of the group's member pods (metadata, spec.nodeName, status.phase and owner
        references only), in no particular order."""
        members = self._groups.get(key)
        return tuple(members.values()) if members else ()

    def group_of_pod(self, uid: str) -> GroupKey | None:
        """The group the pod with this uid is a member of, if any."""
        return self._group_of_pod.get(uid)

    # ------------------------------------------------------------------ nodes
    def on_node(self, action: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        """Take note of a node event. Nodes are updated all the time (heartbeats, conditions);
        only their existence and their labels matter here, so any other update costs one
        comparison of the labels and notifies nobody."""
        meta = _mapping(obj.get("metadata"))
        name = str(meta.get("name") or "")
        if not name:
            return
        if action == DELETE:
            self._count_allocatable(name, None)
            if self._node_labels.pop(name, None) is not None:
                self._nodes_changed()
            return
        self._count_allocatable(name, _mapping(_mapping(obj.get("status")).get("allocatable")))
        labels = _mapping(meta.get("labels"))
        known = self._node_labels.get(name)
        # a dict compares with a dict entry by entry; anything else is copied first
        if known is not None and known == (labels if isinstance(labels, dict) else dict(labels)):
            return
        self._node_labels[name] = {str(k): str(v) for k, v in labels.items()}
        self._nodes_changed()

    def node_labels(self) -> Mapping[str, Mapping[str, str]]:
        """The labels of every known node, by node name (a live view: read it, do not keep it)."""
        return self._node_labels

    def _count_allocatable(self, name: str, written: Mapping[str, Any] | None) -> None:
        """Keep the total of the nodes' allocatable: `written` is the node's status.allocatable
        (None: the node is gone). A heartbeat leaves it equal and costs one comparison."""
        known = self._allocatable.get(name)
        if known is not None and written is not None and known[0] == written:
            return
        try:
            parsed = parse_resource_list(written, "status.allocatable") if written is not None else {}
        except SpecError:
            # a node whose allocatable does not parse offers nothing, as the scheduler counts it
            parsed = {}
        total = self._allocatable_total
        if known is not None:
            for resource, amount in known[1].items():
                total[resource] = total.get(resource, 0) - amount
        if written is None:
            self._allocatable.pop(name, None)
        else:
            for resource, amount in parsed.items():
                total[resource] = total.get(resource, 0) + amount
            self._allocatable[name] = (dict(written), parsed)
        if known is None and not parsed:
            return
        self._quota_changed(KOORDINATOR_GROUP)

    def allocatable_total(self) -> Mapping[str, int]:
        """The allocatable of every known node, summed (a live view: read it, do not keep it)."""
        return self._allocatable_total
