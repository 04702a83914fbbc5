"""The vectorised split against a quota-by-quota, resource-by-resource transliteration of
Koordinator's quotaTree.redistribution / iterationForRedistribution / computeHamiltonDeltas and of
the request and min-scaling rules (pkg/scheduler/plugins/elasticquota/core), over random trees."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pytest

from koordpy.api.elasticquota import ROOT_QUOTA, ElasticQuota
from koordpy.quota.runtime import runtime_state
from koordpy.quota.tree import build_quota_tree
from tests.quota.quotas import koord

RESOURCES = ("cpu", "memory")


@dataclass
class Spec:
    name: str
    parent: str
    min: dict[str, int]
    max: dict[str, int]
    weight: dict[str, int]
    lends: bool
    own: dict[str, int] = field(default_factory=dict)
    children: list[Spec] = field(default_factory=list)


def _hamilton(total: int, weight_sum: int, nodes: list[dict[str, int | str]]) -> list[int]:
    deltas = [0] * len(nodes)
    remainders: list[tuple[int, str, int]] = []
    given = 0
    for i, node in enumerate(nodes):
        w = int(node["weight"])
        if w <= 0:
            continue
        deltas[i], rem = divmod(w * total, weight_sum)
        given += deltas[i]
        remainders.append((rem, str(node["name"]), i))
    remainders.sort(key=lambda x: (-x[0], x[1]))
    for _, _, i in remainders[: total - given]:
        deltas[i] += 1
    return deltas


def _iterate(total: int, weight_sum: int, nodes: list[dict[str, int | str]]) -> None:
    if weight_sum <= 0 or total <= 0 or not nodes:
        return
    deltas = _hamilton(total, weight_sum, nodes)
    waiting: list[dict[str, int | str]] = []
    left, left_weight = 0, 0
    for node, delta in zip(nodes, deltas, strict=True):
        node["runtime"] = int(node["runtime"]) + delta
        if int(node["runtime"]) < int(node["request"]):
            waiting.append(node)
            left_weight += int(node["weight"])
        else:
            left += int(node["runtime"]) - int(node["request"])
            node["runtime"] = node["request"]
    if left > 0 and waiting:
        _iterate(left, left_weight, waiting)


def _redistribution(total: int, nodes: list[dict[str, int | str]]) -> None:
    to_split, weight_sum, waiting = total, 0, []
    for node in nodes:
        if int(node["request"]) > int(node["min"]):
            waiting.append(node)
            weight_sum += int(node["weight"])
            node["runtime"] = node["min"]
        else:
            node["runtime"] = node["request"] if node["lends"] else node["min"]
        to_split -= int(node["runtime"])
    if to_split > 0:
        _iterate(to_split, weight_sum, waiting)


def _oracle(root: Spec, total: dict[str, int], scale: bool) -> dict[str, dict[str, int]]:
    limited: dict[str, dict[str, int]] = {}

    def up(q: Spec) -> dict[str, int]:
        asked = {r: q.own.get(r, 0) for r in RESOURCES}
        for c in q.children:
            for r, v in up(c).items():
                asked[r] += v
        if q is root:
            return asked
        if not q.lends:
            asked = {r: max(asked[r], q.min.get(r, 0)) for r in RESOURCES}
        limited[q.name] = {r: min(asked[r], q.max[r]) for r in RESOURCES}
        return limited[q.name]

    up(root)
    result: dict[str, dict[str, int]] = {root.name: dict(total)}

    def down(p: Spec) -> None:
        for r in RESOURCES:
            t = result[p.name][r]
            mins = {c.name: c.min.get(r, 0) for c in p.children}
            s = sum(mins.values())
            if scale and t < s:
                mins = {n: int(float(t) * float(m) / float(s)) if t > 0 else 0 for n, m in mins.items()}
            nodes: list[dict[str, int | str]] = [
                {
                    "name": c.name,
                    "request": limited[c.name][r],
                    "min": mins[c.name],
                    "weight": c.weight[r],
                    "lends": c.lends,
                    "runtime": 0,
                }
                for c in p.children
            ]
            _redistribution(t, nodes)
            for node in nodes:
                result.setdefault(str(node["name"]), {})[r] = int(node["runtime"])
        for c in p.children:
            down(c)

    down(root)
    return result


def _random_tree(rng: random.Random) -> Spec:
    root = Spec(ROOT_QUOTA, "", {}, {}, {}, False)
    counter = 0

    def grow(p: Spec, depth: int) -> None:
        nonlocal counter
        budget = dict(p.min) if p is not root else {r: rng.randrange(0, 400) for r in RESOURCES}
        for _ in range(rng.randrange(1, 5)):
            counter += 1
            name = f"q{rng.randrange(1000):03d}-{counter}"
            mins = {r: rng.randrange(0, budget[r] // 2 + 1) for r in RESOURCES}
            for r in RESOURCES:
                budget[r] -= mins[r]
            maxes = {r: mins[r] + rng.randrange(0, 300) for r in RESOURCES}
            weight = {r: rng.choice([0, 1, 3, 7, maxes[r]]) for r in RESOURCES}
            if not any(weight.values()):
                weight = dict(maxes)  # Koordinator reads an all-zero weight as max
            child = Spec(name, p.name, mins, maxes, weight, rng.random() < 0.7)
            p.children.append(child)
            if depth < 2 and rng.random() < 0.4:
                grow(child, depth + 1)
            else:
                child.own = {r: rng.randrange(0, 400) for r in RESOURCES}

    grow(root, 0)
    return root


def _objects(root: Spec) -> list[ElasticQuota]:
    out = []
    stack = list(root.children)
    while stack:
        q = stack.pop()
        stack.extend(q.children)
        out.append(
            koord(
                q.name,
                parent=q.parent,
                max={r: f"{v}m" if r == "cpu" else str(v) for r, v in q.max.items()},
                min={r: f"{v}m" if r == "cpu" else str(v) for r, v in q.min.items()},
                weight={r: f"{v}m" if r == "cpu" else str(v) for r, v in q.weight.items()},
                lent=q.lends,
                is_parent=bool(q.children),
            )
        )
    return out


@pytest.mark.parametrize("seed", range(150))
def test_vectorised_split_equals_the_transliteration(seed: int) -> None:
    rng = random.Random(seed)
    root = _random_tree(rng)
    total = {r: rng.randrange(0, 1200) for r in RESOURCES}
    scale = seed % 2 == 0
    quotas = _objects(root)
    tree = build_quota_tree(quotas)
    assert not tree.problems, tree.problems
    requests = np.zeros((tree.size, len(tree.resources)), dtype=np.int64)
    stack = list(root.children)
    while stack:
        q = stack.pop()
        stack.extend(q.children)
        requests[tree.rows[q.name]] = tree.vector(q.own)
    state = runtime_state(tree, requests, tree.vector(total), scale_min=scale)
    expected = _oracle(root, total, scale)
    for name, amounts in expected.items():
        if name == ROOT_QUOTA:
            continue
        got = {r: int(state.runtime[tree.rows[name], tree.resource_index[r]]) for r in RESOURCES}
        assert got == amounts, name
