"""Trials: whatever a tentative placement puts on or takes off the node table is undone when its
`with` block ends, by any path, innermost trial first; and the preemption dry runs leave the node
table as they found it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from koordpy.api.labels import LabelSelector
from koordpy.api.pod import Pod
from koordpy.cache import Cache, CacheError, PodMatcher, Snapshot
from koordpy.cache.trial import TrialError
from koordpy.plugins.coscheduling.preemption import JobPreemption
from tests.builders import Harness, make_node, make_pod, node_dict, pod_dict
from tests.plugins.test_defaultpreemption import harness, incoming, placed, preempt
from tests.preemption.test_job_preemption import group, member, node, running, world_of

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


# --------------------------------------------------------------------------------------- the cluster
def _selector(**labels: str) -> LabelSelector:
    selector = LabelSelector.from_dict({"matchLabels": labels}, "test")
    assert selector is not None
    return selector


# counters of pods by label, as spreading and inter-pod affinity keep them
MATCHERS = (
    PodMatcher(_selector(app="web"), frozenset({"default"})),
    PodMatcher(_selector(app="db"), frozenset({"default"})),
)


def _anti_affinity(app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}
    preferred = {"weight": 5, "podAffinityTerm": {**term, "topologyKey": ZONE}}
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term],
            "preferredDuringSchedulingIgnoredDuringExecution": [preferred],
        }
    }


def _with_port(obj: dict[str, Any], port: int, ip: str) -> dict[str, Any]:
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "hostIP": ip}]
    return obj


def _pod(name: str, app: str, cpu: str = "500m", **kw: Any) -> Pod:
    return Pod.from_dict(_raw(name, app, cpu, **kw))


def _raw(
    name: str, app: str, cpu: str = "500m", port: tuple[int, str] | None = None, anti: bool = False
) -> dict[str, Any]:
    obj = pod_dict(
        name,
        cpu=cpu,
        memory="256Mi",
        labels={"app": app},
        spec={"affinity": _anti_affinity(app)} if anti else None,
    )
    return _with_port(obj, *port) if port else obj


def cluster() -> tuple[Snapshot, dict[str, Pod], dict[str, int]]:
    """Three nodes in two zones; on them pods with host ports (two IPs on one port of one node),
    anti-affinity terms and the labels spreading counts."""
    h = Harness([node_dict(f"n{i}", cpu="8", labels={HOST: f"n{i}", ZONE: f"z{i % 2}"}) for i in range(3)])
    placed_pods = {
        "n0": [
            _pod("web-0", "web", port=(8080, "10.0.0.1"), anti=True),
            _pod("db-0", "db", cpu="1"),
            _pod("web-1", "web", port=(8080, "10.0.0.2")),
        ],
        "n1": [_pod("db-1", "db", anti=True), _pod("web-2", "web", port=(9090, "0.0.0.0"))],
        "n2": [],
    }
    for node_name, on_node in placed_pods.items():
        for p in on_node:
            h.cache.assume_pod(p, node_name)
    pods = {p.name: p for on_node in placed_pods.values() for p in on_node}
    # pending pods, carrying what the placed ones carry
    for p in (
        _pod("new-web", "web", port=(8080, "10.0.0.3"), anti=True),
        _pod("new-db", "db", cpu="2", anti=True),
        _pod("new-cache", "cache", port=(9090, "0.0.0.0")),
    ):
        pods[p.name] = p
    snap: Snapshot = h.cache.snapshot
    return snap, pods, dict(snap.row_of)


def _bits(a: np.ndarray) -> tuple[str, tuple[int, ...], bytes]:
    return (a.dtype.str, a.shape, a.tobytes())


def fingerprint(snap: Snapshot) -> dict[str, Any]:
    """Everything adding and removing pods touches, bit for bit (pod objects by identity, each
    node's pods in order)."""
    return {
        "requested": _bits(snap.requested),
        "nonzero_requested": _bits(snap.nonzero_requested),
        "allocatable": _bits(snap.allocatable),
        "live": _bits(snap.live),
        "labels": {key: _bits(col.codes) for key, col in snap.labels.items()},
        "pods": {
            row: [(k, id(p)) for k, p in snap.info(row).pods.items()] for row in snap.live_rows().tolist()
        },
        "counters": {m: _bits(snap.pod_count_by_row(m)) for m in MATCHERS},
        "term_counts": {key: _bits(counts) for key, counts in snap.term_counts.items()},
        # the IPs a node holds on a port are a multiset: conflicts are asked of each, never in order
        "host_ports": {
            key: {row: sorted(ips) for row, ips in by_row.items()}
            for key, by_row in snap.host_ports.items()
            if by_row
        },
    }


# --------------------------------------------------------------------------------------- undone, any path
Action = Callable[[Snapshot, dict[str, Pod], dict[str, int]], object]


class _Boom(Exception):
    pass


def _normal_exit(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with snap.trial() as trial:
        trial.add_pod(pods["new-web"], rows["n2"])
        trial.add_pod(pods["new-db"], rows["n0"])
        trial.remove_pod(pods["web-0"], rows["n0"])
        trial.remove_pod(pods["db-1"], rows["n1"])
    return None


def _raises(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with pytest.raises(_Boom), snap.trial() as trial:
        trial.remove_pod(pods["web-1"], rows["n0"])
        trial.add_pod(pods["new-cache"], rows["n0"])
        raise _Boom
    return None


def _early_return(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with snap.trial() as trial:
        for name in ("web-0", "db-0", "web-1"):
            trial.remove_pod(pods[name], rows["n0"])
            if name == "db-0":
                return name
    raise AssertionError("unreachable")


def _nested(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with snap.trial() as outer:
        outer.remove_pod(pods["web-0"], rows["n0"])
        with snap.trial() as inner:
            inner.add_pod(pods["web-0"], rows["n1"])
            inner.remove_pod(pods["db-1"], rows["n1"])
        with snap.trial() as inner:
            inner.add_pod(pods["new-web"], rows["n0"])
        outer.add_pod(pods["new-db"], rows["n2"])
    return None


def _removed_then_re_added(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with snap.trial() as trial:
        # the first pod of the node goes and comes back: the node's pods must keep their order
        trial.remove_pod(pods["web-0"], rows["n0"])
        trial.remove_pod(pods["db-0"], rows["n0"])
        trial.add_pod(pods["web-0"], rows["n0"])
    return None


def _re_added_as_another_object(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with snap.trial() as trial:
        trial.remove_pod(pods["db-0"], rows["n0"])
        # the same pod as the API would send it again: another object, bigger requests
        trial.add_pod(_pod("db-0", "db", cpu="3"), rows["n0"])
    return None


def _added_then_removed(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with snap.trial() as trial:
        trial.add_pod(pods["new-db"], rows["n1"])
        trial.remove_pod(pods["db-1"], rows["n1"])
        trial.remove_pod(pods["new-db"], rows["n1"])
    return None


def _everything_off_and_back(snap: Snapshot, pods: dict[str, Pod], rows: dict[str, int]) -> object:
    with snap.trial() as trial:
        for row in rows.values():
            for p in list(snap.pods_on(row)):
                trial.remove_pod(p, row)
        for name in ("web-2", "db-0", "web-1"):
            trial.add_pod(pods[name], rows["n2"])
    return None


UNDONE_CASES = [
    pytest.param(_normal_exit, id="add-and-remove-undone-on-normal-exit"),
    pytest.param(_raises, id="undone-when-the-body-raises"),
    pytest.param(_early_return, id="undone-on-early-return-from-a-function"),
    pytest.param(_nested, id="nested-trials-each-undo-their-own"),
    pytest.param(_removed_then_re_added, id="removed-then-re-added-pod-keeps-the-node-order"),
    pytest.param(_re_added_as_another_object, id="removed-then-re-added-as-another-object"),
    pytest.param(_added_then_removed, id="added-then-removed-pod"),
    pytest.param(_everything_off_and_back, id="every-pod-off-every-node-and-some-elsewhere"),
]


@pytest.mark.parametrize("action", UNDONE_CASES)
def test_the_node_table_is_bit_identical_after_a_trial(action: Action) -> None:
    snap, pods, rows = cluster()
    before = fingerprint(snap)
    action(snap, pods, rows)
    assert fingerprint(snap) == before


def test_changes_are_visible_inside_the_trial() -> None:
    snap, pods, rows = cluster()
    cpu = snap.resource_col["cpu"]
    n0 = rows["n0"]
    with snap.trial() as trial:
        trial.remove_pod(pods["db-0"], n0)
        assert snap.requested[n0, cpu] == 1000
        assert "default/db-0" not in snap.info(n0).pods
        assert snap.pod_count_by_row(MATCHERS[1])[n0] == 0
    assert snap.requested[n0, cpu] == 2000


def test_an_inner_trial_undoes_only_its_own_changes() -> None:
    snap, pods, rows = cluster()
    with snap.trial() as outer:
        outer.remove_pod(pods["web-0"], rows["n0"])
        outer.add_pod(pods["new-db"], rows["n2"])
        after_outer = fingerprint(snap)
        with snap.trial() as inner:
            inner.remove_pod(pods["new-db"], rows["n2"])
            inner.add_pod(pods["web-0"], rows["n1"])
            inner.add_pod(pods["new-web"], rows["n0"])
        assert fingerprint(snap) == after_outer


def test_a_resource_first_seen_in_a_trial_keeps_an_all_zero_column() -> None:
    snap, pods, rows = cluster()
    requested = snap.requested.copy()
    gpu_pod = make_pod("trainer", cpu="1", extra_requests={"nvidia.com/gpu": 2})
    with snap.trial() as trial:
        # a pod taken off before the column exists is put back with the wider vector
        trial.remove_pod(pods["db-0"], rows["n0"])
        trial.add_pod(gpu_pod, rows["n0"])
    assert snap.requested.shape == (requested.shape[0], requested.shape[1] + 1)
    assert np.array_equal(snap.requested[:, :-1], requested)
    assert not snap.requested[:, -1].any()


# --------------------------------------------------------------------------------------- what a trial refuses
NO_CHANGE_CASES = [
    # (operation, pod, node): nothing happens and the trial says so
    pytest.param("add", "web-0", "n0", id="adding-a-pod-already-on-the-node"),
    pytest.param("remove", "new-web", "n0", id="removing-a-pod-not-on-the-node"),
    pytest.param("remove", "web-0", "n1", id="removing-a-pod-from-another-node"),
]


@pytest.mark.parametrize(("operation", "pod", "node_name"), NO_CHANGE_CASES)
def test_a_change_that_would_change_nothing_is_refused(operation: str, pod: str, node_name: str) -> None:
    snap, pods, rows = cluster()
    before = fingerprint(snap)
    with snap.trial() as trial:
        change = trial.add_pod if operation == "add" else trial.remove_pod
        assert change(pods[pod], rows[node_name]) is False
        assert fingerprint(snap) == before


def _outer_while_inner_open(snap: Snapshot, pod: Pod, row: int) -> None:
    with snap.trial() as outer, snap.trial():
        outer.add_pod(pod, row)


def _after_the_block(snap: Snapshot, pod: Pod, row: int) -> None:
    with snap.trial() as trial:
        pass
    trial.add_pod(pod, row)


def _never_entered(snap: Snapshot, pod: Pod, row: int) -> None:
    snap.trial().add_pod(pod, row)


MISUSE_CASES = [
    pytest.param(_outer_while_inner_open, id="an-outer-trial-while-an-inner-one-is-open"),
    pytest.param(_after_the_block, id="a-trial-after-its-block-ended"),
    pytest.param(_never_entered, id="a-trial-never-entered"),
]


@pytest.mark.parametrize("misuse", MISUSE_CASES)
def test_only_the_innermost_open_trial_may_change_the_node_table(
    misuse: Callable[[Snapshot, Pod, int], None],
) -> None:
    snap, pods, rows = cluster()
    before = fingerprint(snap)
    with pytest.raises(TrialError):
        misuse(snap, pods["new-web"], rows["n2"])
    assert fingerprint(snap) == before


# --------------------------------------------------------------------------------------- preemption dry runs
DEFAULT_PREEMPTION_CASES = [
    # (placed pods, incoming (cpu, priority), evictions expected)
    pytest.param(
        [placed("a", "n1", "1", 1), placed("b", "n1", "1", 3), placed("c", "n1", "1", 2)],
        ("2", 10),
        True,
        id="victims-found",
    ),
    pytest.param(
        [placed("high", "n1", "1500m", 100), placed("low", "n1", "500m", 1), placed("c", "n1", "1", 200)],
        ("1", 10),
        False,
        id="evicting-every-lower-priority-pod-is-not-enough",
    ),
    pytest.param(
        [placed("a", "n1", "2", 10), placed("b", "n1", "1", 20)],
        ("1", 10),
        False,
        id="no-lower-priority-pods",
    ),
]


@pytest.mark.parametrize(("pods", "pod", "evicts"), DEFAULT_PREEMPTION_CASES)
def test_default_preemption_dry_run_leaves_the_node_table_unchanged(
    pods: list[dict[str, Any]], pod: tuple[str, int], evicts: bool
) -> None:
    h = harness([node_dict("n1", cpu="3"), node_dict("n2", cpu="1")], [*pods, placed("x", "n2", "1", 100)])
    # a nominated pod makes the filters place pods tentatively as well
    h.handle.nominator.add(make_pod("held", cpu="100m", priority=50), "n1")
    before = fingerprint(h.snapshot)
    result, _ = preempt(h, incoming("p", *pod))
    assert result.status.is_success is evicts
    assert fingerprint(h.snapshot) == before


def _job_world(victims: bool, enough: bool) -> list[dict[str, Any]]:
    priority = 1 if victims else 5000
    member_cpu = "2" if enough else "3"
    return [
        node("n1"),
        node("n2"),
        running("low-1", "n1", "3", priority),
        running("low-2", "n2", "2", priority, labels={"app": "web"}),
        running("keep", "n2", "1", 5000),
        group("g", 3),
        *(member(f"g-{i}", "g", member_cpu) for i in range(3)),
    ]


JOB_PREEMPTION_CASES = [
    # (objects, a plan that evicts)
    pytest.param(_job_world(victims=True, enough=True), True, id="victims-found"),
    pytest.param(_job_world(victims=True, enough=False), False, id="evicting-every-victim-is-not-enough"),
    pytest.param(_job_world(victims=False, enough=True), False, id="no-legal-victims"),
]


@pytest.mark.parametrize(("objs", "evicts"), JOB_PREEMPTION_CASES)
def test_job_preemption_dry_run_leaves_the_node_table_unchanged(
    objs: list[dict[str, Any]], evicts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[bool, bool]] = []
    original = JobPreemption.preempt

    def checked(self: JobPreemption, trigger: Any, gang: Any, diagnosis: Any) -> Any:
        before = fingerprint(self.handle.snapshot)
        result = original(self, trigger, gang, diagnosis)
        calls.append((fingerprint(self.handle.snapshot) == before, result.status.is_success))
        return result

    monkeypatch.setattr(JobPreemption, "preempt", checked)
    world = world_of(objs)
    world.run(1.0)
    assert calls, "job-level preemption never ran"
    assert all(unchanged for unchanged, _ in calls)
    assert calls[0][1] is evicts
    assert bool(world.evictions) is evicts


@pytest.mark.parametrize(
    "change",
    [
        lambda cache: cache.add_pod(make_pod("late", cpu="100m", node_name="n1")),
        lambda cache: cache.assume_pod(make_pod("assumed", cpu="100m"), "n1"),
        lambda cache: cache.add_node(make_node("n9")),
        lambda cache: cache.remove_node("n1"),
    ],
    ids=["add a bound pod", "assume a pod", "add a node", "remove a node"],
)
def test_the_cache_refuses_to_change_while_a_trial_is_open(change: Callable[[Cache], None]) -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    with cache.snapshot.trial(), pytest.raises(CacheError, match="while a trial is open"):
        change(cache)
    change(cache)  # and changes as usual once the trial is over
