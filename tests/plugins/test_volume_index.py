"""The snapshot's volume index: kept for pods with volumes as they are placed and removed, undone
by trials whatever they did, rebuilt with the snapshot, and checked by its consistency check."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.api.node import Node
from koordpy.cache import Cache
from tests.builders import make_pod, node_dict
from tests.plugins.storage_objects import claim_volume, ephemeral_volume, pod_with

GCE = {"name": "disk", "gcePersistentDisk": {"pdName": "pd1"}}


def cache_with_pods() -> Cache:
    cache = Cache()
    for name in ("n1", "n2"):
        cache.add_node(Node.from_dict(node_dict(name)))
    cache.add_pod(pod_with("a", claim_volume("d", "data"), GCE, node_name="n1"))
    cache.add_pod(pod_with("b", claim_volume("d", "data"), ephemeral_volume("tmp"), node_name="n2"))
    cache.add_pod(make_pod("plain", node_name="n1"))
    return cache


def test_index_follows_placed_pods() -> None:
    cache = cache_with_pods()
    snap = cache.snapshot
    index = snap.volumes
    n1, n2 = snap.row_of["n1"], snap.row_of["n2"]
    assert index.claim_users("default/data") == 2
    assert dict(index.rows_using_claim("default/data")) == {n1: 1, n2: 1}
    # the ephemeral claim is on its node, but not among the claims pods name
    assert sorted(index.claims_on(n2)) == ["default/b-tmp", "default/data"]
    assert index.claim_users("default/b-tmp") == 0
    assert [d.id for d in index.inline_on(n1)] == ["pd1"]
    assert list(index.rows_with_disk("gcePersistentDisk", "pd1")) == [n1]
    assert cache.snapshot.problems(cache_placed(cache)) == []


def test_volume_bounds_per_row() -> None:
    """Per row, the claims plus the inline disks of its pods (rows past any pod with volumes: 0)."""
    cache = cache_with_pods()
    snap = cache.snapshot
    n1, n2 = snap.row_of["n1"], snap.row_of["n2"]
    rows = np.array([n1, n2, 1000], dtype=np.int64)
    assert snap.volumes.volume_bounds(rows).tolist() == [2, 2, 0]
    with snap.trial() as trial:
        trial.remove_pod(snap.info(n1).pods["default/a"], n1)
        assert snap.volumes.volume_bounds(rows).tolist() == [0, 2, 0]
    assert snap.volumes.volume_bounds(rows).tolist() == [2, 2, 0]


def cache_placed(cache: Cache) -> dict[str, str]:
    snap = cache.snapshot
    return {key: snap.node_name(row) for row in snap.live_rows().tolist() for key in snap.info(row).pods}


def test_removing_pods_empties_the_index() -> None:
    cache = cache_with_pods()
    snap = cache.snapshot
    for row in snap.live_rows().tolist():
        for pod in list(snap.info(row).pods.values()):
            cache.remove_pod(pod)
    assert not snap.volumes
    assert snap.volumes.state() == ({}, {}, {}, {})


@pytest.mark.parametrize("exit_by_error", [False, True])
def test_trial_leaves_the_index_as_it_was(exit_by_error: bool) -> None:
    cache = cache_with_pods()
    snap = cache.snapshot
    before = snap.volumes.state()
    n1, n2 = snap.row_of["n1"], snap.row_of["n2"]
    victim = snap.info(n1).pods["default/a"]
    newcomer = pod_with("c", claim_volume("d", "data"), GCE, ephemeral_volume("x"), node_name="n2")
    try:
        with snap.trial() as trial:
            trial.remove_pod(victim, n1)
            trial.add_pod(newcomer, n2)
            assert snap.volumes.claim_users("default/data") == 2
            assert list(snap.volumes.rows_with_disk("gcePersistentDisk", "pd1")) == [n2]
            assert "default/c-x" in snap.volumes.claims_on(n2)
            if exit_by_error:
                raise RuntimeError("the dry run failed")
    except RuntimeError:
        pass
    assert snap.volumes.state() == before


def test_removing_a_node_drops_its_pods_volumes() -> None:
    cache = cache_with_pods()
    cache.remove_node("n1")
    snap = cache.snapshot
    assert snap.volumes.claim_users("default/data") == 1
    assert dict(snap.volumes.rows_with_disk("gcePersistentDisk", "pd1")) == {}


def test_rebuild_and_consistency_check() -> None:
    cache = cache_with_pods()
    snap = cache.snapshot
    before = snap.volumes.state()
    placed = cache_placed(cache)
    nodes = {row: snap.info(row).node for row in snap.live_rows().tolist()}
    pods = {row: list(snap.info(row).pods.values()) for row in nodes}
    snap.rebuild(nodes, pods)
    assert snap.volumes.state() == before
    assert snap.problems(placed) == []
    # an index that went wrong is found
    snap.volumes.update(pod_with("ghost", claim_volume("d", "data")), snap.row_of["n1"], 1)
    assert "the volume index differs from the pods on the nodes" in snap.problems(placed)


def test_volume_free_pods_are_not_indexed() -> None:
    cache = Cache()
    cache.add_node(Node.from_dict(node_dict("n1")))
    cache.add_pod(make_pod("plain", node_name="n1"))
    assert not cache.snapshot.volumes
