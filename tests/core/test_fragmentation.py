"""GPU fragmentation: idle GPUs on nodes that can no longer take a pod of the most common size."""

from __future__ import annotations

import pytest

from koordpy.status.fragmentation import fragmentation, most_common_request


@pytest.mark.parametrize(
    ("requests", "expected"),
    [([2, 2, 4], 2), ([4, 2, 4], 4), ([1, 8], 1), ([0, 0], 0), ([], 0), ([3, 1, 1, 3], 1)],
    ids=["mode", "mode-larger", "tie-goes-to-smaller", "no-gpu-pods", "no-pods", "tie-of-two"],
)
def test_most_common_request(requests: list[int], expected: int) -> None:
    assert most_common_request(requests) == expected


@pytest.mark.parametrize(
    ("nodes", "requests", "idle", "fragmented"),
    [
        ([(8, 8), (8, 0)], [2, 2, 2, 2], 8, 0),  # packed: the free node takes four more
        ([(8, 6), (8, 6)], [2, 2, 2], 4, 0),  # 2 free on each node, exactly one pod each
        ([(8, 7), (8, 5)], [2, 2], 4, 1),  # one stranded GPU on the first node
        ([(8, 5), (8, 5)], [4, 4], 6, 6),  # 3 free on each: no 4-GPU pod fits anywhere
        ([(0, 0), (8, 0)], [], 8, 0),  # no GPU pod at all: nothing is fragmented
        ([(4, 6)], [2], 0, 0),  # over-committed node has nothing idle
    ],
    ids=["packed", "exact-fit", "one-stranded", "all-stranded", "no-gpu-pods", "overcommitted"],
)
def test_fragmentation(nodes: list[tuple[int, int]], requests: list[int], idle: int, fragmented: int) -> None:
    f = fragmentation(nodes, requests)
    assert (f.idle, f.fragmented) == (idle, fragmented)
