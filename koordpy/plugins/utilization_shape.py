"""Utilization shapes: a score as a broken-line function of how full a node is, as kube-scheduler
builds it (BuildBrokenLinearFunction) for NodeResourcesFit's RequestedToCapacityRatio and
VolumeBinding's storage capacity scoring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from koordpy.framework.interfaces import MAX_NODE_SCORE

# a shape's scores are 0..MAX_CUSTOM_PRIORITY_SCORE, scaled to 0..MAX_NODE_SCORE
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


class ShapePoint(Protocol):
    """A point of a utilization shape (NodeResourcesFit's RequestedToCapacityRatio, VolumeBinding's
    shape): the same function over both."""

    @property
    def utilization(self) -> int: ...

    @property
    def score(self) -> int: ...


def broken_linear_table(shape: Sequence[ShapePoint]) -> np.ndarray:
    """The shape function at every utilization 0..100, scores scaled to 0..100; between points the
    line is evaluated in integers truncated toward zero, as kube-scheduler does."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    points = [(p.utilization, p.score * scale) for p in shape]
    table = np.empty(MAX_UTILIZATION + 1, dtype=np.int64)
    for p in range(MAX_UTILIZATION + 1):
        value = points[-1][1]
        for i, (u, s) in enumerate(points):
            if p <= u:
                if i == 0:
                    value = s
                else:
                    u0, s0 = points[i - 1]
                    num = (s - s0) * (p - u0)
                    den = u - u0
                    step = abs(num) // den
                    value = s0 + (step if num >= 0 else -step)
                break
        table[p] = value
    return table
