"""Sparse resources: an extended resource few nodes carry keeps per-node amounts instead of a
node-long column, becomes a dense column once enough nodes carry it, and every read (columns,
tables, fit, scores, trials, the consistency check) gives the same amounts either way."""

from __future__ import annotations

import numpy as np
import pytest

from koordpy.cache import Cache
from koordpy.plugins.noderesourcesfit import NAME as FIT
from koordpy.plugins.scarceresourceavoidance import NAME as SCARCE
from tests.builders import Harness, make_node, make_pod

GPU = "nvidia.com/gpu"


def gpu_cluster(nodes: int, carriers: int, gpus: str = "4") -> Cache:
    """`nodes` nodes of 8 CPUs; the first `carriers` have `gpus` GPUs."""
    cache = Cache()
    for i in range(nodes):
        cache.add_node(make_node(f"n{i}", cpu="8", extra={GPU: gpus} if i < carriers else None))
    return cache


def gpu_amounts(cache: Cache, which: str) -> list[int]:
    snap = cache.snapshot
    col = snap.resource_col[GPU]
    rows = np.array([snap.row_of[f"n{i}"] for i in range(len(snap.row_of))], dtype=np.int64)
    column = (
        snap.allocatable_column(col, rows) if which == "allocatable" else snap.requested_column(col, rows)
    )
    return [int(v) for v in column]


@pytest.mark.parametrize(
    ("nodes", "carriers", "dense"),
    [
        pytest.param(40, 3, False, id="three-of-forty-stay-sparse"),
        pytest.param(40, 15, False, id="fifteen-of-forty-stay-sparse"),
        pytest.param(40, 16, True, id="sixteen-carriers-make-a-column"),
        pytest.param(40, 40, True, id="every-node-carrying-it-makes-a-column"),
    ],
)
def test_a_resource_is_dense_once_enough_nodes_carry_it(nodes: int, carriers: int, dense: bool) -> None:
    cache = gpu_cluster(nodes, carriers)
    snap = cache.snapshot
    assert snap.is_dense(snap.resource_col[GPU]) is dense
    assert gpu_amounts(cache, "allocatable") == [4] * carriers + [0] * (nodes - carriers)
    assert cache.problems() == []


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("ephemeral-storage", id="ephemeral-storage"),
        pytest.param("hugepages-2Mi", id="hugepages"),
    ],
)
def test_a_resource_outside_any_domain_is_always_dense(name: str) -> None:
    cache = Cache()
    cache.add_node(make_node("n0", extra={name: "1Gi"}))
    snap = cache.snapshot
    assert snap.is_dense(snap.resource_col[name])


def test_pods_placed_while_sparse_are_given_back_exactly_once_dense() -> None:
    cache = gpu_cluster(40, 2)
    cache.add_pod(make_pod("early", node_name="n1", extra_requests={GPU: "3"}))
    assert not cache.snapshot.is_dense(cache.snapshot.resource_col[GPU])
    for i in range(2, 40):
        cache.update_node(make_node(f"n{i}", cpu="8", extra={GPU: "4"}))
    assert cache.snapshot.is_dense(cache.snapshot.resource_col[GPU])
    assert gpu_amounts(cache, "requested") == [0, 3] + [0] * 38
    cache.remove_pod(make_pod("early", node_name="n1"))
    assert gpu_amounts(cache, "requested") == [0] * 40
    assert cache.problems() == []


def test_thousands_of_own_resources_hold_one_amount_per_node() -> None:
    # scheduler_perf's SchedulingWithExtendedResource shape: node i alone has foo.com/bar-<i>
    cache = Cache()
    for i in range(2000):
        cache.add_node(make_node(f"n{i}", extra={f"foo.com/bar-{i}": "1"}))
        cache.add_pod(
            make_pod(f"p{i}", cpu="100m", node_name=f"n{i}", extra_requests={f"foo.com/bar-{i}": "1"})
        )
    snap = cache.snapshot
    assert len(snap.resource_names) == 2003
    assert snap.dense_allocatable.shape[1] == 3  # cpu, memory, pods
    assert sum(len(a) for a in snap.sparse_allocatable.values()) == 2000
    assert sum(len(a) for a in snap.sparse_requested.values()) == 2000
    col = snap.resource_col["foo.com/bar-1234"]
    row = snap.row_of["n1234"]
    assert snap.allocatable_column(col).tolist().count(1) == 1
    assert int(snap.allocatable_column(col)[row]) == 1
    assert int(snap.requested_column(col)[row]) == 1
    assert cache.problems() == []


@pytest.mark.parametrize(
    ("carriers", "want"),
    [
        # n0 holds 3 of its 4 GPUs already: a 2-GPU pod fits only the other carriers
        pytest.param(3, ["n1", "n2"], id="sparse"),
        pytest.param(40, [f"n{i}" for i in range(1, 40)], id="dense"),
    ],
)
def test_fit_reads_sparse_and_dense_columns_alike(carriers: int, want: list[str]) -> None:
    nodes = [make_node(f"n{i}", cpu="8", extra={GPU: "4"} if i < carriers else None) for i in range(40)]
    h = Harness(nodes, [make_pod("held", node_name="n0", extra_requests={GPU: "3"})], plugins=[FIT])
    assert h.snapshot.is_dense(h.snapshot.resource_col[GPU]) is (carriers == 40)
    feasible, diagnosis = h.feasible(make_pod("asks", extra_requests={GPU: "2"}))
    assert sorted(feasible, key=lambda n: int(n[1:])) == want
    reasons = {tuple(s.reasons) for s in diagnosis.statuses_by_row().values()}
    assert reasons == {("Insufficient nvidia.com/gpu",)}
    # a few nodes checked alone (a re-check, a preemption candidate) read the same amounts
    pod = make_pod("asks", extra_requests={GPU: "2"})
    state, _, _ = h.pre_filter(pod)
    for name in ("n0", "n2", "n7"):
        result = h.profile.plugins[FIT].filter(state, pod, h.rows([name]))  # type: ignore[attr-defined]
        assert (result is None) is (name in want)


@pytest.mark.parametrize("carriers", [pytest.param(2, id="sparse"), pytest.param(20, id="dense")])
def test_scarce_resource_avoidance_counts_sparse_resources(carriers: int) -> None:
    # a GPU node has cpu, memory and the GPU (pods aside); a pod asking for cpu and memory leaves
    # D = {gpu}, all of it scarce: (1 - 1) * 100 // 1 = 0. Other nodes leave D empty: 100
    nodes = [make_node(f"n{i}", cpu="8", extra={GPU: "4"} if i < carriers else None) for i in range(20)]
    h = Harness(nodes, plugins=[SCARCE])
    pod = make_pod("cpu-only", cpu="1", memory="1Gi")
    scores = h.plugin_scores(SCARCE, pod)
    assert scores == {f"n{i}": 0 if i < carriers else 100 for i in range(20)}
    # a pod asking for the GPU is never penalized for it
    assert set(
        h.plugin_scores(SCARCE, make_pod("gpu", cpu="1", memory="1Gi", extra_requests={GPU: "1"})).values()
    ) == {100}


def test_a_trial_on_sparse_amounts_gives_back_exactly_what_it_found() -> None:
    cache = gpu_cluster(40, 3)
    cache.add_pod(make_pod("a", node_name="n0", extra_requests={GPU: "1"}))
    snap = cache.snapshot
    before = snap.requested.copy()
    with snap.trial() as trial:
        trial.remove_pod(make_pod("a", node_name="n0"), snap.row_of["n0"])
        trial.add_pod(make_pod("b", node_name="n2", extra_requests={GPU: "4"}), snap.row_of["n2"])
        assert gpu_amounts(cache, "requested")[:3] == [0, 0, 4]
    assert np.array_equal(snap.requested, before)
    assert cache.problems() == []


def test_a_removed_node_leaves_nothing_for_the_node_that_reuses_its_row() -> None:
    cache = gpu_cluster(5, 2)
    cache.add_pod(make_pod("a", node_name="n1", extra_requests={GPU: "2"}))
    row = cache.snapshot.row_of["n1"]
    cache.remove_node("n1")
    cache.add_node(make_node("fresh", cpu="8"))
    snap = cache.snapshot
    assert snap.row_of["fresh"] == row
    col = snap.resource_col[GPU]
    assert int(snap.allocatable_column(col)[row]) == 0
    assert int(snap.requested_column(col)[row]) == 0
    assert cache.problems() == []


def test_tables_read_dense_and_sparse_columns_together() -> None:
    cache = gpu_cluster(40, 3)
    cache.add_pod(make_pod("a", cpu="2", node_name="n2", extra_requests={GPU: "1"}))
    snap = cache.snapshot
    rows = np.array([snap.row_of[n] for n in ("n2", "n5")], dtype=np.int64)
    cols = [snap.resource_col["cpu"], snap.resource_col[GPU]]
    assert snap.allocatable_table(rows, cols).tolist() == [[8000, 4], [8000, 0]]
    assert snap.requested_table(rows, cols).tolist() == [[2000, 1], [0, 0]]
    assert snap.free_on(int(rows[0]), cols).tolist() == [6000, 3]


def test_the_check_finds_a_sparse_amount_on_a_row_without_a_node() -> None:
    cache = gpu_cluster(5, 2)
    snap = cache.snapshot
    snap.sparse_requested[snap.resource_col[GPU]][snap.capacity - 1] = 1
    assert any("rows holding no node" in p for p in cache.problems())
    cache.repair()
    assert cache.problems() == []


@pytest.mark.parametrize(
    ("nodes", "carriers"),
    [
        pytest.param(2, 1, id="sparse-column"),
        pytest.param(40, 40, id="dense-column"),
    ],
)
def test_rows_past_the_last_node_hold_nothing(nodes: int, carriers: int) -> None:
    """Planners read the whole store (every row up to its capacity, spare rows included): a
    spare row reads as zero in a sparse column as in a dense one."""
    snap = gpu_cluster(nodes, carriers).snapshot
    col = snap.resource_col[GPU]
    every_row = np.arange(snap.capacity, dtype=np.int64)
    assert snap.capacity > nodes
    table = snap.allocatable_table(every_row, [col])
    assert table[:carriers, 0].tolist() == [4] * carriers
    assert not table[nodes:, 0].any()


def test_node_changes_are_followed_row_by_row_across_a_rebuild() -> None:
    """Readers that follow node changes row by row (TaintToleration, NodeUnschedulable) learn
    each changed row; a rebuild lays the rows out anew, after which the log starts afresh."""
    cache = gpu_cluster(4, 0)
    snap = cache.snapshot
    before = snap.node_generation
    cache.update_node(make_node("n2", cpu="16"))
    assert snap.node_rows_changed_since(before) == [snap.row_of["n2"]]
    cache.repair()
    rebuilt = snap.node_generation
    assert snap.node_rows_changed_since(before) is None  # from before the rebuild: unknown
    assert snap.node_rows_changed_since(rebuilt) == []
    cache.update_node(make_node("n1", cpu="16"))
    assert snap.node_rows_changed_since(rebuilt) == [snap.row_of["n1"]]
