"""The simulator's timeline annotations (simulation.koordpy.io/arrive-after, run-for, remove-after) on
live objects: `koordpy snapshot` leaves them out and says so once. A snapshot is the cluster as it is
now: carried over, a valid one would replay a past that already happened (a running pod running its
whole time again, then freeing its node in the dry run's virtual time), and a malformed one made the
snapshot unloadable, and with it every `simulate --from-cluster`."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from koordpy.cli import main
from koordpy.cluster.snapshot import (
    REMOVE_AFTER_ANNOTATION,
    SnapshotSummary,
    dump_document,
    kept_annotation,
    simulation_annotations,
    strip_object,
    take_snapshot,
)
from koordpy.kubeapi.client import KubeApi
from koordpy.simulate.documents import STDIN, STDIN_LABEL
from koordpy.simulate.dryrun import dry_run, new_pod_keys
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.timeline import ARRIVE_AFTER, REMOVE_AFTER, RUN_FOR
from tests.simulate.test_dryrun import CONFIG, SCHEDULER, FakeApi, api_pod, cluster, node, pod

GANG = "gang.scheduling.koordinator.sh/min-available"


@pytest.mark.parametrize("key", [ARRIVE_AFTER, RUN_FOR, REMOVE_AFTER, "simulation.koordpy.io/anything"])
def test_the_simulators_annotations_are_not_kept(key: str) -> None:
    assert kept_annotation(key) is False
    # koordpy's other annotations are
    assert kept_annotation("snapshot.koordpy.io/recreated") is True


@pytest.mark.parametrize(
    "annotations",
    [
        {RUN_FOR: "for a while"},  # malformed: the loader refuses it
        {RUN_FOR: "-5m"},  # negative
        {ARRIVE_AFTER: "10m"},  # valid: the pod exists now, it does not arrive in 10 minutes
        {REMOVE_AFTER: "0s", ARRIVE_AFTER: "1h"},  # removal before arrival
    ],
    ids=["malformed", "negative", "valid", "inconsistent"],
)
def test_a_pod_is_stripped_of_the_simulators_annotations(annotations: dict[str, str]) -> None:
    live = api_pod()
    live["metadata"]["annotations"].update(annotations)
    stripped = strip_object("Pod", "v1", live)
    assert stripped["metadata"]["annotations"] == {GANG: "2"}
    assert sorted(simulation_annotations(live)) == sorted(annotations)


def test_a_pod_being_deleted_gets_the_snapshots_own_remove_after_not_its_own() -> None:
    live = api_pod()
    live["metadata"]["deletionTimestamp"] = "2025-01-01T00:01:00Z"
    live["metadata"]["annotations"][REMOVE_AFTER] = "soon"
    stripped = strip_object("Pod", "v1", live, 1735689600.0)
    assert stripped["metadata"]["annotations"][REMOVE_AFTER_ANNOTATION] == "60s"


def test_every_kind_is_stripped_of_them() -> None:
    live_node = node("n1", "4")
    live_node["metadata"]["annotations"] = {ARRIVE_AFTER: "1h", REMOVE_AFTER: "2h"}
    assert "annotations" not in strip_object("Node", "v1", live_node)["metadata"]
    group = {"metadata": {"name": "g", "namespace": "team", "annotations": {ARRIVE_AFTER: "x"}}}
    stripped = strip_object("PodGroup", "scheduling.sigs.k8s.io/v1alpha1", group)
    assert "annotations" not in stripped["metadata"]


def annotated(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    obj["metadata"]["annotations"] = annotations
    return obj


def live_cluster(extra_pods: int = 0) -> FakeApi:
    """n1 full with a pod whose run-for is malformed, n2 arriving later by its (valid) annotation, a
    waiting pod with one of each; `extra_pods` more running pods with a valid run-for."""
    pods = [
        annotated(pod("broken", "4", node_name="n1"), **{RUN_FOR: "for a while"}),
        annotated(pod("waiting", "1"), **{ARRIVE_AFTER: "5m", RUN_FOR: "1h"}),
        *(annotated(pod(f"more-{i}", "1m", node_name="n2"), **{RUN_FOR: "1h"}) for i in range(extra_pods)),
    ]
    nodes = [node("n1", "4"), annotated(node("n2", "4"), **{ARRIVE_AFTER: "1h"})]
    return FakeApi(cluster(pods, nodes=nodes))


async def snapshot(api: FakeApi) -> tuple[str, SnapshotSummary]:
    out = io.StringIO()
    summary = await take_snapshot(
        cast(KubeApi, api), lambda obj: out.write(dump_document(obj)), [SCHEDULER], 0.0
    )
    return out.getvalue(), summary


async def test_the_snapshot_loads_without_them_and_says_what_it_left_out() -> None:
    text, summary = await snapshot(live_cluster())
    assert "simulation.koordpy.io" not in text
    scenario = load_scenario([STDIN], stdin=io.StringIO(text))
    # the cluster as it is now: everything there at time zero, nothing on a timeline
    assert not scenario.has_timeline
    (warning,) = [w for w in summary.warnings if "simulation" in w or "timeline" in w]
    assert f"Pod team/broken ({RUN_FOR})" in warning
    assert f"Node n2 ({ARRIVE_AFTER})" in warning
    assert f"Pod team/waiting ({ARRIVE_AFTER}, {RUN_FOR})" in warning


async def test_the_warning_names_a_few_objects_and_counts_the_rest() -> None:
    _, summary = await snapshot(live_cluster(extra_pods=30))
    (warning,) = [w for w in summary.warnings if "timeline" in w]
    assert warning.count("Pod team/") + warning.count("Node ") == 10
    # 33 objects carry them: n2, broken, 30 more on n2, waiting
    assert warning.endswith("and 23 more object(s)")


async def test_a_dry_run_is_the_cluster_now_not_a_replay_of_its_timeline(tmp_path: Path) -> None:
    """A running pod with a valid run-for would complete in the dry run's virtual time and make room
    for the new pod, which would then be reported bound: submitted now, it would wait."""
    pods = [annotated(pod("running", "4", node_name="n1"), **{RUN_FOR: "30s"})]
    text, _ = await snapshot(FakeApi(cluster(pods, nodes=[node("n1", "4")])))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(pod("new", "2") | {"apiVersion": "v1", "kind": "Pod"}))
    scenario = load_scenario([STDIN, str(job)], stdin=io.StringIO(text))
    report = dry_run(scenario, CONFIG, new_pod_keys(scenario, STDIN_LABEL), configuration="test")
    assert [(p.key, p.phase, p.reason) for p in report.pods] == [("team/new", "Pending", "Unschedulable")]


class ClosableFakeApi(FakeApi):
    async def close(self) -> None:
        return None


@pytest.fixture
def live_api(monkeypatch: pytest.MonkeyPatch) -> None:
    api = live_cluster()

    async def connect(*_: Any, **__: Any) -> ClosableFakeApi:
        closable = ClosableFakeApi(api.objects)
        return closable

    monkeypatch.setattr(KubeApi, "connect", staticmethod(connect))


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"profiles: [{{schedulerName: {SCHEDULER}}}]\n"
    )
    return config


def test_simulate_from_cluster_runs_and_warns_once(
    live_api: None, config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(pod("new", "1") | {"apiVersion": "v1", "kind": "Pod"}))
    code = main(["simulate", "--from-cluster", "--config", str(config_file), "-o", "json", str(job)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("timeline annotations") == 1, err
    assert f"Pod team/broken ({RUN_FOR})" in err


def test_snapshot_writes_a_file_simulate_loads(
    live_api: None, config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cluster.yaml"
    assert main(["snapshot", "--config", str(config_file), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("timeline annotations") == 1, err
    assert main(["simulate", str(out), "--config", str(config_file), "-o", "json"]) == 0, (
        capsys.readouterr().err
    )
