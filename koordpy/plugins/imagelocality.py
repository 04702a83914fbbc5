"""ImageLocality: favours nodes that already hold the pod's container images, weighted by how
widely each image is spread (an image on every node says little about any one of them).

For each container and init container whose image a node reports, the node gains
`size * nodes having the image / all nodes`; the sum is clamped to [23 MiB, 1000 MiB * number of
containers] and mapped linearly onto 0..100. An image name without a tag or digest gets
`:latest` appended before the lookup; nothing else is rewritten (a pod asking for `nginx` does not
match a node that lists only `docker.io/library/nginx:latest`), as in kube-scheduler. An image's
size is the one its first reporting node gave, shared by every node, like kube-scheduler's
image-state summary.

The per-node sum depends only on node objects, so it is computed once per node generation for
each distinct list of images.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import MAX_NODE_SCORE, Plugin, ScorePlugin

NAME = names.IMAGE_LOCALITY

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
DEFAULT_IMAGE_TAG = "latest"

_CACHE_LIMIT = 256


def normalized_image_name(name: str) -> str:
    """`name:latest` when the name carries neither a tag nor a digest (no ':' after the last '/')."""
    if name.rfind(":") <= name.rfind("/"):
        return f"{name}:{DEFAULT_IMAGE_TAG}"
    return name


def pod_images(pod: Pod) -> tuple[tuple[str, ...], int]:
    """(normalized image names of init containers then containers, number of containers)."""
    spec = pod.raw.get("spec")
    if not isinstance(spec, Mapping):
        return tuple(normalized_image_name(i) for i in pod.images), len(pod.images)
    names: list[str] = []
    count = 0
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        for c in containers:
            count += 1
            image = c.get("image") if isinstance(c, Mapping) else None
            names.append(normalized_image_name(str(image or "")))
    return tuple(names), count


def calculate_priority(sum_scores: np.ndarray, containers: int) -> np.ndarray:
    max_threshold = MAX_CONTAINER_THRESHOLD * containers
    clamped = np.clip(sum_scores, MIN_THRESHOLD, max_threshold)
    priority: np.ndarray = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
    return priority


class ImageLocality(Plugin, ScorePlugin):
    NAME = NAME

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        self._key: tuple[int, int] = (-1, -1)
        # (image names, container count) -> score per row, valid for one node generation
        self._scores: dict[tuple[tuple[str, ...], int], np.ndarray] = {}

    def _image_scores(self, snapshot: Any, images: tuple[str, ...], containers: int) -> np.ndarray:
        key = (id(snapshot), snapshot.node_generation)
        if key != self._key:
            self._scores.clear()
            self._key = key
        cache_key = (images, containers)
        scores = self._scores.get(cache_key)
        if scores is None:
            total_nodes = snapshot.node_count
            sums = np.zeros(snapshot.high_water, dtype=np.int64)
            for name in images:
                by_row = snapshot.images.get(name)
                if not by_row or total_nodes == 0:
                    continue
                size = next(iter(by_row.values()))
                spread = len(by_row) / total_nodes
                sums[np.fromiter(by_row, dtype=np.int64, count=len(by_row))] += int(size * spread)
            scores = calculate_priority(sums, containers) if containers else np.zeros_like(sums)
            if len(self._scores) >= _CACHE_LIMIT:
                self._scores.clear()
            self._scores[cache_key] = scores
        return scores

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        images, containers = pod_images(pod)
        chosen: np.ndarray = self._image_scores(self.handle.snapshot, images, containers)[rows]
        return chosen
