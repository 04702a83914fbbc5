"""The nominator's selection by priority floor and by namespace (`Nominator.holding` with `floor`
and `namespaces`), the same whether it walks a few nominated nodes or selects over its arrays."""

from __future__ import annotations

import pytest

from koordpy.api.pod import Pod
from koordpy.cache.cache import Cache
from koordpy.framework.nominator import Nominator
from tests.builders import make_node, make_pod

# more nominated nodes than the nominator walks one by one
MANY = 40


def _names(cache: Cache, held: dict[int, list[Pod]]) -> list[str]:
    return sorted(p.key for pods in held.values() for p in pods)


def _setup(spread: int) -> tuple[Cache, Nominator]:
    """Nominations on `spread` nodes: ns-a/x (priority 1), ns-a/y (5), ns-b/z (1), ns-b/w (9),
    ns-c/v (5), on nodes taken in turn."""
    cache = Cache()
    for i in range(spread):
        cache.add_node(make_node(f"n{i}"))
    nominator = Nominator()
    nominations = [("x", "ns-a", 1), ("y", "ns-a", 5), ("z", "ns-b", 1), ("w", "ns-b", 9), ("v", "ns-c", 5)]
    for i, (name, namespace, priority) in enumerate(nominations):
        nominator.add(make_pod(name, namespace=namespace, priority=priority), f"n{i % spread}")
    # filler nominations on the other nodes, of a namespace nobody asks for and a low priority
    for i in range(len(nominations), spread):
        nominator.add(make_pod(f"f{i}", namespace="filler", priority=-5), f"n{i}")
    return cache, nominator


CASES = [
    ("the pod's own priority", {}, ["ns-a/y", "ns-b/w", "ns-c/v"]),
    ("a lower floor", {"floor": 1}, ["ns-a/x", "ns-a/y", "ns-b/w", "ns-b/z", "ns-c/v"]),
    ("a higher floor", {"floor": 6}, ["ns-b/w"]),
    ("one namespace", {"namespaces": ("ns-a",)}, ["ns-a/y"]),
    (
        "namespaces and floor",
        {"namespaces": ["ns-a", "ns-b"], "floor": 0},
        ["ns-a/x", "ns-a/y", "ns-b/w", "ns-b/z"],
    ),
    ("a namespace without nominations", {"namespaces": ("ns-q",)}, []),
    ("no namespace", {"namespaces": ()}, []),
]


@pytest.mark.parametrize("spread", [3, MANY], ids=["walked", "arrays"])
@pytest.mark.parametrize(("kwargs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_holding_selects_by_floor_and_namespace(
    spread: int, kwargs: dict[str, object], expected: list[str]
) -> None:
    cache, nominator = _setup(spread)
    asking = make_pod("p", namespace="ns-a", priority=5)
    assert _names(cache, nominator.holding(asking, cache.snapshot, **kwargs)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("spread", [3, MANY], ids=["walked", "arrays"])
def test_the_pod_itself_never_holds_room_whatever_the_floor(spread: int) -> None:
    cache, nominator = _setup(spread)
    asking = make_pod("y", namespace="ns-a", priority=5)
    held = nominator.holding(asking, cache.snapshot, floor=-10, namespaces=("ns-a",))
    assert _names(cache, held) == ["ns-a/x"]


def test_namespaces_with_nominations_follow_adds_and_removes() -> None:
    nominator = Nominator()
    a1 = make_pod("a1", namespace="a")
    a2 = make_pod("a2", namespace="a")
    b1 = make_pod("b1", namespace="b")
    for pod in (a1, a2, b1):
        nominator.add(pod, "n1")
    assert sorted(nominator.namespaces()) == ["a", "b"]
    nominator.remove(a1)
    assert sorted(nominator.namespaces()) == ["a", "b"]
    nominator.add(a2, "n2")  # nominated again elsewhere: still one nomination
    nominator.remove(b1)
    assert nominator.namespaces() == ["a"]
    nominator.remove(a2)
    assert nominator.namespaces() == []
