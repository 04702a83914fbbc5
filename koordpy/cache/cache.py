"""The cluster cache: what the scheduler believes is placed where.

Informer events (or the simulator) add, update and remove nodes and pods. The scheduler *assumes*
a pod on a node as soon as it decides, so the next cycle sees the node as used while the binding
runs in the background; the informer's later add of the bound pod *confirms* it, and a failed
binding *forgets* it.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordpy.api.namespace import Namespace
from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.cache.snapshot import Snapshot


@dataclass(slots=True)
class PodState:
    pod: Pod
    node_name: str
    assumed: bool
    binding_finished: bool = False


class CacheError(RuntimeError):
    pass


class Cache:
    def __init__(self) -> None:
        self.snapshot = Snapshot()
        self.pods: dict[str, PodState] = {}
        # pods whose node the cache has not seen yet (informers deliver in any order)
        self._orphans: dict[str, dict[str, Pod]] = {}

    # ----------------------------------------------------------------------------- nodes
    def _check_no_trial(self) -> None:
        # what the cache records is real; a trial open meanwhile would undo it on exit, or put
        # back what the cache just removed
        if self.snapshot.in_trial:
            raise CacheError("the cache cannot change while a trial is open")

    def add_node(self, node: Node) -> None:
        self._check_no_trial()
        self.snapshot.add_node(node)
        row = self.snapshot.row_of[node.name]
        for pod in self._orphans.pop(node.name, {}).values():
            self.snapshot.add_pod(pod, row)

    def update_node(self, node: Node) -> None:
        self._check_no_trial()
        self.snapshot.update_node(node)

    def remove_node(self, name: str) -> None:
        self._check_no_trial()
        pods = self.snapshot.remove_node(name)
        if pods:
            # keep them accounted for in case the node comes back (a relabel via delete+create)
            self._orphans[name] = {p.key: p for p in pods}

    def node(self, name: str) -> Node | None:
        row = self.snapshot.row_of.get(name)
        return None if row is None else self.snapshot.info(row).node

    def set_namespace(self, ns: Namespace) -> None:
        self.snapshot.set_namespace(ns)

    # ----------------------------------------------------------------------------- pods
    def _place(self, pod: Pod, node_name: str) -> None:
        row = self.snapshot.row_of.get(node_name)
        if row is None:
            self._orphans.setdefault(node_name, {})[pod.key] = pod
        else:
            self.snapshot.add_pod(pod, row)

    def _unplace(self, pod: Pod, node_name: str) -> None:
        row = self.snapshot.row_of.get(node_name)
        if row is None:
            self._orphans.get(node_name, {}).pop(pod.key, None)
        else:
            self.snapshot.remove_pod(pod, row)

    def assume_pod(self, pod: Pod, node_name: str) -> None:
        self._check_no_trial()
        state = self.pods.get(pod.key)
        if state is not None:
            raise CacheError(f"pod {pod.key} is already in the cache on {state.node_name}")
        self.pods[pod.key] = PodState(pod, node_name, assumed=True)
        self._place(pod, node_name)

    def finish_binding(self, pod: Pod) -> None:
        state = self.pods.get(pod.key)
        if state is not None and state.assumed:
            state.binding_finished = True

    def forget_pod(self, pod: Pod) -> None:
        self._check_no_trial()
        state = self.pods.get(pod.key)
        if state is None or not state.assumed:
            return
        del self.pods[pod.key]
        self._unplace(state.pod, state.node_name)

    def is_assumed(self, key: str) -> bool:
        state = self.pods.get(key)
        return state is not None and state.assumed

    def add_pod(self, pod: Pod) -> None:
        """A pod with `spec.nodeName` observed: confirms an assumed pod, or adds a new one."""
        self._check_no_trial()
        if not pod.node_name:
            return
        state = self.pods.get(pod.key)
        if state is not None:
            # confirmation of an assumption (possibly on another node if someone else bound it)
            self._unplace(state.pod, state.node_name)
        self.pods[pod.key] = PodState(pod, pod.node_name, assumed=False, binding_finished=True)
        self._place(pod, pod.node_name)

    def update_pod(self, pod: Pod) -> None:
        self._check_no_trial()
        state = self.pods.get(pod.key)
        if state is None:
            self.add_pod(pod)
            return
        if not pod.node_name:
            return
        self._unplace(state.pod, state.node_name)
        self.pods[pod.key] = PodState(pod, pod.node_name, assumed=False, binding_finished=True)
        self._place(pod, pod.node_name)

    def remove_pod(self, pod: Pod) -> None:
        self._check_no_trial()
        state = self.pods.pop(pod.key, None)
        if state is not None:
            self._unplace(state.pod, state.node_name)

    def pod_state(self, key: str) -> PodState | None:
        return self.pods.get(key)

    # ----------------------------------------------------------------------------- consistency
    def problems(self) -> list[str]:
        """Where the arrays disagree with what the cache records (nodes, the pods on them, the
        pods waiting for their node); empty when consistent."""
        placed = {key: state.node_name for key, state in self.pods.items()}
        found = self.snapshot.problems(placed)
        for node_name, orphans in self._orphans.items():
            for key in orphans:
                if placed.get(key) != node_name:
                    found.append(f"pod {key} waits for node {node_name} in the cache only")
        return found

    def repair(self) -> None:
        """Rebuild the snapshot from the records: the nodes the snapshot's rows hold, and the pods
        the cache places (bound or assumed)."""
        self._check_no_trial()
        snapshot = self.snapshot
        # a node is kept in the row the name index gives it, else in the first row holding it
        row_of: dict[str, int] = {}
        for row, info in enumerate(snapshot.infos):
            if info is not None and (info.name not in row_of or snapshot.row_of.get(info.name) == row):
                row_of[info.name] = row
        nodes = {row: snapshot.info(row).node for row in row_of.values()}
        by_row: dict[int, list[Pod]] = {}
        self._orphans = {}
        for state in self.pods.values():
            placed = row_of.get(state.node_name)
            if placed is None:
                self._orphans.setdefault(state.node_name, {})[state.pod.key] = state.pod
            else:
                by_row.setdefault(placed, []).append(state.pod)
        snapshot.rebuild(nodes, by_row)
