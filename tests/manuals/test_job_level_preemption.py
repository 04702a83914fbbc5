"""Koordinator's job-level preemption manual, in `koordpy simulate`.

Source: https://github.com/koordinator-sh/website/blob/main/docs/user-manuals/job-level-preemption.md
(https://koordinator.sh/docs/user-manuals/job-level-preemption). Two 4-core nodes are filled with one
4-core low-priority pod each; then a high-priority gang of two 3-core pods is submitted. "After a few
seconds, Koordinator will evict one pod per node": both low-priority pods are terminating, each with
a DisruptionTarget condition naming the preemptor job and the trigger pod, and both workers are
Pending with a nominated node each. After the victims terminate, the workers run on those nodes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.manuals.simulation import MANUALS, Pod, Report, apply_in_steps, check_pods, pods, replay_timeline

DIR = MANUALS / "job_level_preemption"
NODES = {"cn-beijing.1", "cn-beijing.2"}
LOW = ("lp-pod-1", "lp-pod-2")
WORKERS = ("hp-worker-1", "hp-worker-2")
STEPS = [
    [DIR / "nodes.yaml", DIR / "priorityclasses.yaml"],
    [DIR / "low-priority-pods.yaml"],
    [DIR / "high-priority-job.yaml"],
]
# "After a few seconds": the preemption is done, the victims' 30 s grace period is not over
A_FEW_SECONDS = 5
# the manual prints the key as `triggerpod:`; Koordinator's scheduler writes `triggerPod:`
# (pkg/scheduler/plugins/coscheduling/core/preemption.go), so either spelling is the manual's shape
VICTIM_MESSAGE = re.compile(
    r"^koord-scheduler: preempting to accommodate higher priority pods, "
    r"preemptor: default/hp-training-job, trigger[pP]od: default/hp-worker-1$"
)


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, seconds: float | None = None) -> list[Report]:
    return apply_in_steps(capsys, tmp_path, STEPS, last_step_seconds=seconds)


def test_low_priority_pods_fill_one_node_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, filled, _ = run(capsys, tmp_path)
    check_pods(filled, {name: Pod("Bound", node=NODES) for name in LOW})
    assert {pods(filled)[name]["node"] for name in LOW} == NODES


def test_after_a_few_seconds_one_victim_per_node_and_every_worker_nominated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    *_, during = run(capsys, tmp_path, A_FEW_SECONDS)
    check_pods(during, {name: Pod("Pending", node=None) for name in WORKERS})
    nominated = {name: pods(during)[name]["nominatedNodeName"] for name in WORKERS}
    assert set(nominated.values()) == NODES, nominated

    victims = {p["victim"]: p for p in during["preemptions"]}
    assert set(victims) == {f"default/{name}" for name in LOW}
    assert {v["node"] for v in victims.values()} == NODES
    for name in LOW:
        victim = victims[f"default/{name}"]
        assert victim["node"] == pods(during)[name]["node"], victim
        assert victim["preemptor"] == "default/hp-training-job", victim
        assert VICTIM_MESSAGE.match(victim["message"]), victim["message"]


@pytest.mark.parametrize("worker", WORKERS)
def test_worker_runs_on_the_node_it_was_nominated_to_once_the_victims_are_gone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, worker: str
) -> None:
    *_, during = run(capsys, tmp_path / "during", A_FEW_SECONDS)
    *_, final = run(capsys, tmp_path / "final")
    nominated = pods(during)[worker]["nominatedNodeName"]
    assert nominated in NODES, pods(during)[worker]
    check_pods(final, {worker: Pod("Bound", node=nominated)})
    check_pods(final, {name: Pod("Preempted", node=NODES) for name in LOW})


# The manual's story as one timeline: the cluster and the low-priority pods at zero, the
# high-priority job submitted a minute later.
JOB_ARRIVES = 60.0
# a pod's default terminationGracePeriodSeconds: how long the victims take to go
GRACE = 30.0


def test_as_one_timeline_the_job_preempts_when_it_arrives_and_runs_once_the_victims_are_gone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = replay_timeline(capsys, tmp_path, STEPS, [0.0, 0.0, JOB_ARRIVES])
    found = pods(report)
    for name in LOW:
        # running from zero until the victims' grace period ends after the job's arrival
        assert (found[name]["phase"], found[name]["scheduledAt"]) == ("Preempted", 0.0), found[name]
        assert found[name]["finishedAt"] == JOB_ARRIVES + GRACE, found[name]
    victims = {p["victim"]: p for p in report["preemptions"]}
    assert set(victims) == {f"default/{name}" for name in LOW}
    for victim in victims.values():
        assert VICTIM_MESSAGE.match(victim["message"]), victim["message"]
    # the preemptions happened at the job's arrival, not before: the timeline shows them there
    steps = {s["at"]: s for s in report["timeline"]}
    assert [s["at"] for s in report["timeline"] if s["preemptions"]] == [JOB_ARRIVES]
    assert steps[JOB_ARRIVES]["preemptions"] == 2
    assert (steps[JOB_ARRIVES]["pendingPods"], steps[JOB_ARRIVES]["pendingGangs"]) == (2, 1)
    for name in WORKERS:
        assert found[name]["createdAt"] == JOB_ARRIVES, found[name]
        assert (found[name]["phase"], found[name]["scheduledAt"]) == ("Bound", JOB_ARRIVES + GRACE)
    assert {found[name]["node"] for name in WORKERS} == NODES
    assert report["waitingTime"]["byGang"]["default/hp-training-job"] == {
        "count": 2,
        "p50": GRACE,
        "p90": GRACE,
        "max": GRACE,
        "pending": 0,
    }
    assert steps[JOB_ARRIVES + GRACE]["allocated"]["cpu"] == 6.0
