"""The cache under hostile amounts and damage: quantities saturate instead of overflowing, a failed
change leaves the arrays as they were, and the consistency check finds damage that repair undoes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from koordpy.api.resources import MAX_AMOUNT
from koordpy.cache import Cache
from koordpy.cache.snapshot import Snapshot
from tests.builders import make_node, make_pod


def cpu_of(snap: Snapshot, matrix: np.ndarray, node: str) -> int:
    return int(matrix[snap.row_of[node], snap.resource_col["cpu"]])


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [
        pytest.param("1e18", MAX_AMOUNT, id="1e18-cores-saturates"),
        pytest.param("1e40", MAX_AMOUNT, id="1e40-cores-saturates"),
        pytest.param("9007199254740", 9007199254740000, id="just-below-the-bound-kept-exact"),
        pytest.param("4", 4000, id="ordinary-amount-unchanged"),
    ],
)
def test_a_huge_node_allocatable_saturates_in_the_matrix(quantity: str, expected: int) -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu=quantity, memory="1e19"))
    snap = cache.snapshot
    assert cpu_of(snap, snap.allocatable, "n1") == expected
    assert int(snap.allocatable[0, snap.resource_col["memory"]]) == MAX_AMOUNT


def test_huge_pods_on_one_node_never_wrap_the_requested_sum() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="1e30", pods="100000"))
    # the largest request a pod may make, 600 times: over 2^62 in all
    largest = str(MAX_AMOUNT - 1)
    pods = [make_pod(f"p{i}", cpu=f"{largest}m", memory=largest, node_name="n1") for i in range(600)]
    for pod in pods:
        cache.add_pod(pod)
    snap = cache.snapshot
    assert cpu_of(snap, snap.requested, "n1") == 1 << 62
    assert int(snap.requested.min()) >= 0
    assert int(snap.nonzero_requested.min()) >= 0
    for pod in pods:
        cache.remove_pod(pod)
    assert cpu_of(snap, snap.requested, "n1") == 0
    assert cache.problems() == []


def test_a_failed_widening_leaves_columns_and_names_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    snap = cache.snapshot
    names = list(snap.resource_names)
    real_zeros = np.zeros
    calls = {"n": 0}

    def failing_zeros(*args: object, **kwargs: object) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 2:  # the second matrix of the widening
            raise MemoryError
        return real_zeros(*args, **kwargs)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(np, "zeros", failing_zeros)
    with pytest.raises(MemoryError):
        cache.add_node(make_node("n2", extra={"hugepages-2Mi": "1"}))
    monkeypatch.setattr(np, "zeros", real_zeros)
    assert snap.resource_names == names
    assert "n2" not in snap.row_of
    assert cache.problems() == []
    cache.add_node(make_node("n2", extra={"hugepages-2Mi": "1"}))
    assert cache.problems() == []


Damage = Callable[[Cache], None]


def _drop_a_column(cache: Cache) -> None:
    cache.snapshot.nonzero_requested = cache.snapshot.nonzero_requested[:, :-1]


def _skew_requested(cache: Cache) -> None:
    cache.snapshot.dense_requested[cache.snapshot.row_of["n1"], 0] += 7


def _forget_a_row(cache: Cache) -> None:
    del cache.snapshot.row_of["n2"]


def _lose_a_pod_from_its_node(cache: Cache) -> None:
    snap = cache.snapshot
    snap.info(snap.row_of["n1"]).pods.pop("default/a")


def _change_allocatable(cache: Cache) -> None:
    cache.snapshot.dense_allocatable[cache.snapshot.row_of["n2"], 1] = 1


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_drop_a_column, id="matrix-shapes-disagree"),
        pytest.param(_skew_requested, id="requested-is-not-the-sum-of-the-pods"),
        pytest.param(_forget_a_row, id="a-live-row-missing-from-the-name-index"),
        pytest.param(_lose_a_pod_from_its_node, id="a-placed-pod-missing-from-its-node"),
        pytest.param(_change_allocatable, id="allocatable-differs-from-the-node-object"),
    ],
)
def test_the_check_finds_damage_and_repair_restores_what_the_cache_records(damage: Damage) -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="8"))
    cache.add_node(make_node("n2", cpu="8"))
    cache.add_pod(make_pod("a", cpu="1", node_name="n1"))
    cache.assume_pod(make_pod("b", cpu="2"), "n2")
    snap = cache.snapshot
    rows = dict(snap.row_of)
    assert cache.problems() == []

    damage(cache)
    assert cache.problems() != []
    cache.repair()

    assert cache.problems() == []
    assert snap.row_of == rows
    assert cpu_of(snap, snap.requested, "n1") == 1000
    assert cpu_of(snap, snap.requested, "n2") == 2000
    assert cache.is_assumed("default/b")
