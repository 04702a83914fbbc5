"""Many resource names: each node and pod keeps exactly its own amounts however many columns the
cluster has, a new name rarely copies the matrices, and the consistency check and repair work on
the live columns."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from koordpy.cache import Cache
from koordpy.cache.snapshot import Snapshot
from tests.builders import make_node, make_pod


def own_resource(i: int) -> str:
    return f"foo.com/bar-{i}"


def cluster_of_own_resources(nodes: int) -> Cache:
    """Node i has 4 CPUs and 2 of a resource of its own; pod i asks for 1 of node i's resource."""
    cache = Cache()
    for i in range(nodes):
        cache.add_node(make_node(f"n{i}", extra={own_resource(i): "2"}))
    for i in range(nodes):
        cache.add_pod(make_pod(f"p{i}", cpu="100m", node_name=f"n{i}", extra_requests={own_resource(i): "1"}))
    return cache


def amount(snap: Snapshot, matrix: np.ndarray, node: str, resource: str) -> int:
    return int(matrix[snap.row_of[node], snap.resource_col[resource]])


@pytest.mark.parametrize("nodes", [pytest.param(5, id="5-nodes"), pytest.param(300, id="300-nodes")])
def test_every_node_and_pod_keeps_its_own_amounts(nodes: int) -> None:
    cache = cluster_of_own_resources(nodes)
    snap = cache.snapshot
    width = 3 + nodes  # cpu, memory, pods and one name per node
    assert len(snap.resource_names) == width
    assert snap.allocatable.shape == snap.requested.shape == (snap.capacity, width)
    for i in (0, nodes // 2, nodes - 1):
        node = f"n{i}"
        assert amount(snap, snap.allocatable, node, own_resource(i)) == 2
        assert amount(snap, snap.requested, node, own_resource(i)) == 1
        assert amount(snap, snap.requested, node, "cpu") == 100
        assert amount(snap, snap.requested, node, "pods") == 1
        # the node's row holds nothing of the others' resources
        row = snap.row_of[node]
        assert int(np.count_nonzero(snap.allocatable[row])) == 4  # cpu, memory, pods, its own
        assert int(np.count_nonzero(snap.requested[row])) == 3  # cpu, pods, its own
    assert cache.problems() == []


def test_removing_every_pod_leaves_every_requested_cell_zero() -> None:
    cache = cluster_of_own_resources(40)
    for i in range(40):
        cache.remove_pod(make_pod(f"p{i}", node_name=f"n{i}"))
    assert not cache.snapshot.requested.any()
    assert cache.problems() == []


def test_a_thousand_names_reallocate_the_matrices_a_few_times_only() -> None:
    snap = Snapshot()
    stores: list[np.ndarray] = [snap.dense_allocatable]
    for i in range(1000):
        snap.resource_index(f"hugepages-{i}Mi")  # not an extended resource: always a dense column
        if not np.shares_memory(snap.dense_allocatable, stores[-1]):
            stores.append(snap.dense_allocatable)
    # the room for columns doubles: 3 -> 6 -> ... -> 1536, nine reallocations for 1,000 names
    assert len(stores) - 1 <= 10
    assert snap.requested.shape == (snap.capacity, 1003)


def test_a_pod_asking_for_a_name_no_node_has_gets_a_zero_column_everywhere_else() -> None:
    cache = cluster_of_own_resources(3)
    cache.add_pod(make_pod("late", node_name="n1", extra_requests={"example.com/new": "5"}))
    snap = cache.snapshot
    col = snap.resource_col["example.com/new"]
    assert snap.requested[:, col].tolist().count(5) == 1
    assert amount(snap, snap.requested, "n1", "example.com/new") == 5
    assert not snap.allocatable[:, col].any()
    assert cache.problems() == []


Damage = Callable[[Cache], None]


def _skew_a_far_column(cache: Cache) -> None:
    snap = cache.snapshot
    snap.sparse_requested[snap.resource_col[own_resource(70)]][snap.row_of["n3"]] = 1


def _give_a_node_a_foreign_resource(cache: Cache) -> None:
    snap = cache.snapshot
    snap.sparse_allocatable[snap.resource_col[own_resource(6)]][snap.row_of["n5"]] = 1


def _lose_a_pod_amount(cache: Cache) -> None:
    snap = cache.snapshot
    del snap.sparse_requested[snap.resource_col[own_resource(9)]][snap.row_of["n9"]]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_skew_a_far_column, id="requested-in-a-column-no-pod-of-the-node-asks-for"),
        pytest.param(_give_a_node_a_foreign_resource, id="allocatable-in-a-column-the-node-lacks"),
        pytest.param(_lose_a_pod_amount, id="requested-missing-a-pod-amount"),
    ],
)
def test_the_check_finds_damage_in_any_column_and_repair_keeps_the_columns(damage: Damage) -> None:
    cache = cluster_of_own_resources(80)
    snap = cache.snapshot
    names = list(snap.resource_names)
    assert cache.problems() == []
    damage(cache)
    assert cache.problems() != []
    cache.repair()
    assert cache.problems() == []
    assert snap.resource_names == names
    assert amount(snap, snap.requested, "n9", own_resource(9)) == 1
    assert amount(snap, snap.allocatable, "n5", own_resource(6)) == 0


def test_a_trial_on_many_columns_gives_back_exactly_what_it_found() -> None:
    cache = cluster_of_own_resources(100)
    snap = cache.snapshot
    before = snap.requested.copy()
    with snap.trial() as trial:
        trial.remove_pod(make_pod("p7", node_name="n7"), snap.row_of["n7"])
        trial.add_pod(
            make_pod("x", node_name="n8", extra_requests={own_resource(99): "1"}), snap.row_of["n8"]
        )
        assert amount(snap, snap.requested, "n7", own_resource(7)) == 0
        assert amount(snap, snap.requested, "n8", own_resource(99)) == 1
    assert np.array_equal(snap.requested, before)
    assert cache.problems() == []


def test_updating_a_node_drops_the_resources_it_no_longer_has() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", extra={"example.com/a": "3"}))
    cache.update_node(make_node("n1", extra={"example.com/b": "4"}))
    snap = cache.snapshot
    assert amount(snap, snap.allocatable, "n1", "example.com/a") == 0
    assert amount(snap, snap.allocatable, "n1", "example.com/b") == 4
    assert cache.problems() == []
