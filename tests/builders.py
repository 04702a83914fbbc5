"""Small builders for tests: API-shaped dicts for nodes and pods, and a profile over a snapshot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.cache import Cache
from koordpy.config.models import PluginConfig, PluginRef, Plugins, PluginSet
from koordpy.config.models import Profile as ProfileConfig
from koordpy.framework.clock import VirtualClock
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.handle import Handle
from koordpy.framework.nominator import Nominator
from koordpy.framework.profile import Profile
from koordpy.framework.waiting import WaitingPods
from koordpy.plugins import registry
from koordpy.simulate.memory import MemoryCluster


def node_dict(
    name: str,
    cpu: str | int = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, Any] | None = None,
    images: Sequence[tuple[Sequence[str], int]] = (),
) -> dict[str, Any]:
    allocatable: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {
            "allocatable": allocatable,
            "images": [{"names": list(n), "sizeBytes": s} for n, s in images],
        },
    }


def pod_dict(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    node_name: str = "",
    extra_requests: Mapping[str, Any] | None = None,
    priority: int | None = None,
    spec: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    image: str = "busybox",
) -> dict[str, Any]:
    requests: dict[str, Any] = dict(extra_requests or {})
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    container: dict[str, Any] = {"name": "main", "image": image}
    if requests:
        container["resources"] = {"requests": requests}
    body: dict[str, Any] = {"containers": [container]}
    if node_name:
        body["nodeName"] = node_name
    if priority is not None:
        body["priority"] = priority
    body.update(spec or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": body,
    }


def network_topology(*layers: tuple[str, str]) -> dict[str, Any]:
    """The ClusterNetworkTopology `default` with `layers` (name, node label key), outermost first,
    each the parent of the next, and NodeTopologyLayer under the last, as Koordinator chains them."""
    spec: list[dict[str, Any]] = []
    parent: str | None = None
    for layer, label_key in layers:
        entry: dict[str, Any] = {"labelKey": [label_key], "topologyLayer": layer}
        if parent is not None:
            entry["parentTopologyLayer"] = parent
        spec.append(entry)
        parent = layer
    spec.append({"parentTopologyLayer": parent, "topologyLayer": "NodeTopologyLayer"})
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": spec},
    }


def x_k8s_podgroup(name: str, min_member: int, namespace: str = "default") -> dict[str, Any]:
    """A scheduling.x-k8s.io PodGroup with nothing but its minMember."""
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


def make_node(name: str, **kw: Any) -> Node:
    return Node.from_dict(node_dict(name, **kw))


def make_pod(name: str, **kw: Any) -> Pod:
    return Pod.from_dict(pod_dict(name, **kw))


def settle(world: MemoryCluster) -> None:
    """The scheduler works off everything it can now, without time passing."""
    sched = world.scheduler
    world.apply(sched.drain())
    while sched.schedule_one():
        world.apply(sched.drain())


class Harness:
    """A cache with nodes and placed pods, and a profile running only the named plugins."""

    def __init__(
        self,
        nodes: Sequence[Node | dict[str, Any]],
        pods: Sequence[Pod | dict[str, Any]] = (),
        plugins: Sequence[str] = (),
        args: Mapping[str, Mapping[str, Any]] | None = None,
        weights: Mapping[str, int] | None = None,
    ) -> None:
        self.clock = VirtualClock(1000.0)
        self.cache = Cache()
        for n in nodes:
            self.cache.add_node(n if isinstance(n, Node) else Node.from_dict(n))
        for p in pods:
            pod = p if isinstance(p, Pod) else Pod.from_dict(p)
            self.cache.add_pod(pod)
        self.handle = Handle(self.clock, self.cache, Nominator(), WaitingPods(), [])
        enabled = [PluginRef(name=n, weight=(weights or {}).get(n)) for n in plugins]
        config = ProfileConfig(
            schedulerName="test-scheduler",
            plugins=Plugins(
                multiPoint=PluginSet(enabled=enabled, disabled=[PluginRef(name="*")]),
                queueSort=PluginSet(
                    enabled=[PluginRef(name="PrioritySort")] if "PrioritySort" not in plugins else []
                ),
                bind=PluginSet(
                    enabled=[PluginRef(name="DefaultBinder")] if "DefaultBinder" not in plugins else []
                ),
            ),
            pluginConfig=[PluginConfig(name=k, args=dict(v)) for k, v in (args or {}).items()],
        )
        self.profile = Profile(config, registry(), self.handle)

    @property
    def snapshot(self):  # type: ignore[no-untyped-def]
        return self.cache.snapshot

    def rows(self, names: Sequence[str] | None = None) -> np.ndarray:
        snap = self.cache.snapshot
        if names is None:
            return snap.live_rows()
        return np.array([snap.row_of[n] for n in names], dtype=np.int64)

    def pre_filter(self, pod: Pod) -> tuple[CycleState, Any, Any]:
        state = CycleState()
        allowed, status = self.profile.run_pre_filter(state, pod)
        return state, allowed, status

    def feasible(self, pod: Pod) -> tuple[list[str], Diagnosis]:
        """Names of the nodes that pass PreFilter and Filter, and the diagnosis."""
        state, allowed, status = self.pre_filter(pod)
        diagnosis = Diagnosis()
        if status is not None:
            diagnosis.pre_filter_msg = status.message
            return [], diagnosis
        rows = self.rows()
        if allowed is not None:
            rows = np.array([r for r in rows if self.snapshot.node_name(int(r)) in allowed], dtype=np.int64)
        out = self.profile.run_filter_with_nominated(state, pod, rows, diagnosis)
        return [self.snapshot.node_name(int(r)) for r in out], diagnosis

    def scores(self, pod: Pod, names: Sequence[str] | None = None) -> dict[str, int]:
        """Weighted total score per node (PreFilter, PreScore and Score, each plugin normalized)."""
        state, _, status = self.pre_filter(pod)
        assert status is None, status
        rows = self.rows(names)
        st = self.profile.run_pre_score(state, pod, rows)
        assert st is None, st
        total = self.profile.run_score(state, pod, rows)
        return {self.snapshot.node_name(int(r)): int(s) for r, s in zip(rows, total, strict=True)}

    def plugin_scores(self, plugin: str, pod: Pod, names: Sequence[str] | None = None) -> dict[str, int]:
        """One plugin's normalized score per node (unweighted)."""
        state, _, status = self.pre_filter(pod)
        assert status is None, status
        rows = self.rows(names)
        st = self.profile.run_pre_score(state, pod, rows)
        assert st is None, st
        p = self.profile.plugins[plugin]
        if plugin in state.skip_score:
            return {}
        raw = p.score(state, pod, rows)  # type: ignore[attr-defined]
        norm = getattr(p, "normalize_score", None)
        if norm is not None:
            raw = norm(state, pod, rows, raw)
        return {self.snapshot.node_name(int(r)): int(s) for r, s in zip(rows, raw, strict=True)}
