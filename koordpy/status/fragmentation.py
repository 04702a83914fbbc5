"""GPU fragmentation: idle GPUs stranded on nodes that can no longer take a whole pod.

Definition: let S be the most common GPU request among the pods that ask for GPUs (ties go to the
smaller size). A node's idle GPUs are its allocatable GPUs minus the GPUs its pods request. Idle
GPUs on a node with fewer than S idle are *fragmented*: they are free, yet no pod of the common
size fits there. The measure is the sum over nodes, beside the total idle, so the share stranded by
placement is visible (a strategy that packs GPU pods keeps it low)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Fragmentation:
    resource: str
    common_request: int  # S; 0 when no pod asks for the resource
    idle: int
    fragmented: int

    def to_dict(self) -> dict[str, object]:
        return {
            "resource": self.resource,
            "commonRequest": self.common_request,
            "idle": self.idle,
            "fragmented": self.fragmented,
        }


def most_common_request(requests: Iterable[int]) -> int:
    counts = Counter(r for r in requests if r > 0)
    if not counts:
        return 0
    return min(counts, key=lambda size: (-counts[size], size))


def fragmentation(
    nodes: Iterable[tuple[int, int]], pod_requests: Iterable[int], resource: str = GPU
) -> Fragmentation:
    """`nodes`: (allocatable, requested) of the resource per node; `pod_requests`: each pod's request."""
    size = most_common_request(pod_requests)
    idle = fragmented = 0
    for allocatable, requested in nodes:
        if allocatable <= 0:
            continue
        free = max(0, allocatable - requested)
        idle += free
        if size and free < size:
            fragmented += free
    return Fragmentation(resource, size, idle, fragmented)
