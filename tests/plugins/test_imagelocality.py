"""ImageLocality: image sizes scaled by spread, clamped and mapped onto 0..100; scores by hand
(sizes in MiB so the thresholds 23 MiB and 1000 MiB per container stay readable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.plugins.imagelocality import normalized_image_name
from tests.builders import Harness, make_pod, node_dict

IL = "ImageLocality"
MB = 1024 * 1024


def _containers(*images: str) -> list[dict[str, Any]]:
    return [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]


CASES = [
    # (nodes, pod spec overrides or image, expected)
    (
        # 600 MiB on 2 of 4 nodes -> 300 MiB: 100 * (300 - 23) // (1000 - 23) = 28
        [
            node_dict("n1", images=[(["app:1"], 600 * MB)]),
            node_dict("n2", images=[(["app:1"], 600 * MB)]),
            node_dict("n3"),
            node_dict("n4"),
        ],
        "app:1",
        {"n1": 28, "n2": 28, "n3": 0, "n4": 0},
    ),
    (
        # 523 MiB on the only node: 100 * 500 // 977 = 51
        [node_dict("n1", images=[(["app:latest"], 523 * MB)])],
        "app",
        {"n1": 51},
    ),
    (
        # only ':latest' is added, never a registry prefix
        [node_dict("n1", images=[(["docker.io/library/app:latest"], 523 * MB)])],
        "app",
        {"n1": 0},
    ),
    (
        [node_dict("n1", images=[(["app@sha256:abc"], 523 * MB)])],
        "app@sha256:abc",
        {"n1": 51},
    ),
    (
        # the ':' of a registry port is not a tag
        [node_dict("n1", images=[(["localhost:5000/app:latest"], 523 * MB)])],
        "localhost:5000/app",
        {"n1": 51},
    ),
    (
        [node_dict("n1", images=[(["app:1"], 2000 * MB)])],
        "app:1",
        {"n1": 100},
    ),
    (
        [node_dict("n1", images=[(["app:1"], 20 * MB)])],
        "app:1",
        {"n1": 0},
    ),
    (
        # two containers: 2000 MiB against a 2000 MiB ceiling
        [node_dict("n1", images=[(["a:1"], 1000 * MB), (["b:1"], 1000 * MB)])],
        {"containers": _containers("a:1", "b:1")},
        {"n1": 100},
    ),
    (
        # two containers, one image present: 100 * (1000 - 23) // (2000 - 23) = 49
        [node_dict("n1", images=[(["a:1"], 1000 * MB), (["b:1"], 1000 * MB)])],
        {"containers": _containers("a:1", "c:1")},
        {"n1": 49},
    ),
    (
        # init containers count, as images and as containers
        [node_dict("n1", images=[(["a:1"], 1000 * MB)])],
        {"initContainers": _containers("a:1"), "containers": _containers("c:1")},
        {"n1": 49},
    ),
    (
        # an image listed under several names is found by any of them
        [node_dict("n1", images=[(["app:1", "registry.local/app:1"], 523 * MB)])],
        "registry.local/app:1",
        {"n1": 51},
    ),
]
IDS = [
    "spread-over-half-the-nodes",
    "untagged-gets-latest",
    "no-registry-prefix-added",
    "digest-kept",
    "registry-port-not-a-tag",
    "clamped-at-max",
    "below-min-threshold",
    "two-containers-both-present",
    "two-containers-one-present",
    "init-containers-count",
    "any-image-alias",
]


@pytest.mark.parametrize(("nodes", "pod_spec", "expected"), CASES, ids=IDS)
def test_score(
    nodes: Sequence[dict[str, Any]], pod_spec: str | dict[str, Any], expected: dict[str, int]
) -> None:
    h = Harness(list(nodes), plugins=[IL])
    pod = (
        make_pod("incoming", image=pod_spec)
        if isinstance(pod_spec, str)
        else make_pod("incoming", spec=pod_spec)
    )
    assert h.plugin_scores(IL, pod) == expected


def test_node_change_refreshes_the_spread() -> None:
    h = Harness([node_dict("n1", images=[(["app:1"], 600 * MB)]), node_dict("n2")], plugins=[IL])
    pod = make_pod("incoming", image="app:1")
    # 600 * 1/2 = 300 MiB -> 28
    assert h.plugin_scores(IL, pod) == {"n1": 28, "n2": 0}
    h.cache.remove_node("n2")
    # 600 MiB on the only node -> 100 * 577 // 977 = 59
    assert h.plugin_scores(IL, pod) == {"n1": 59}


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("repo/nginx", "repo/nginx:latest"),
        ("host:5000/nginx", "host:5000/nginx:latest"),
        ("nginx@sha256:ab", "nginx@sha256:ab"),
    ],
    ids=["bare", "tagged", "path", "registry-port", "digest"],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    assert normalized_image_name(name) == normalized
