"""Pods nominated to nodes by preemption: they hold room that lower-priority pods must leave."""

from __future__ import annotations

from koordpy.api.pod import Pod


class Nominator:
    __slots__ = ("_by_node", "_node_of")

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, pod: Pod, node_name: str) -> None:
        self.remove(pod)
        if not node_name:
            return
        self._by_node.setdefault(node_name, {})[pod.key] = pod
        self._node_of[pod.key] = node_name

    def remove(self, pod: Pod) -> None:
        node = self._node_of.pop(pod.key, None)
        if node is not None:
            pods = self._by_node.get(node)
            if pods is not None:
                pods.pop(pod.key, None)
                if not pods:
                    del self._by_node[node]

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)

    def pods_on(self, node_name: str) -> list[Pod]:
        return list(self._by_node.get(node_name, {}).values())

    def nodes(self) -> list[str]:
        return list(self._by_node)

    def __bool__(self) -> bool:
        return bool(self._node_of)
