"""A gang one of whose members its quota holds (a quota with a problem, or one that does not exist)
names that problem in its members' and its group's messages, instead of placing the others to
time out at Permit ("rejected due to timeout after waiting 600s", which says nothing of the quota).

Expected outcomes from the reference rules: a pod of an invalid quota is never admitted
(Koordinator's webhook refuses the quota; koordpy holds its pods: QuotaInvalid), and a gang is
placed only when at least minMember of its members are (Coscheduling's Permit); so a gang that
cannot reach minMember without the held members is never placed until the quota is put right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordpy.api import names
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import simulate
from tests.quota.quotas import cores, koord_dict, xk8s_dict
from tests.quota.worlds import gang_annotations, placed, quota_pod, run, verdict, world

GOOD = koord_dict("ok", max=cores(8), created=1)
BAD = koord_dict("bad", min=cores(4), max=cores(2), created=2)
BAD_SAYS = "quota bad: spec.min.cpu: min 4 is above max 2"


@pytest.mark.parametrize(
    ("held_label", "reason", "said"),
    [
        pytest.param("bad", names.QUOTA_INVALID, BAD_SAYS, id="a member's quota is invalid"),
        pytest.param(
            "ghost",
            names.QUOTA_NOT_FOUND,
            "quota ghost named by the pod's label does not exist",
            id="a member's quota does not exist",
        ),
    ],
)
def test_a_member_held_by_its_quota_holds_its_gang_by_name(held_label: str, reason: str, said: str) -> None:
    pods = [
        quota_pod("m0", 1, "ok", annotations=gang_annotations("g", 3)),
        quota_pod("m1", 1, "ok", annotations=gang_annotations("g", 3)),
        quota_pod("m2", 1, held_label, annotations=gang_annotations("g", 3)),
    ]
    cluster = run(world([("n1", 8)], [GOOD, BAD], pods))
    assert placed(cluster) == {}
    assert verdict(cluster, "m2") == (reason, said)
    for name in ("m0", "m1"):
        got_reason, message = verdict(cluster, name)
        assert got_reason == reason
        assert "gang default/g cannot be placed as a whole" in message
        assert "member default/m2" in message and said in message
        assert "timeout" not in message
    # nothing waited at Permit holding a node
    assert not cluster.scheduler.waiting


def test_a_gang_that_reaches_min_member_without_the_held_member_is_placed() -> None:
    pods = [
        quota_pod("m0", 1, "ok", annotations=gang_annotations("g", 2)),
        quota_pod("m1", 1, "ok", annotations=gang_annotations("g", 2)),
        quota_pod("m2", 1, "bad", annotations=gang_annotations("g", 2)),
    ]
    cluster = run(world([("n1", 8)], [GOOD, BAD], pods))
    assert placed(cluster) == {"m0": "n1", "m1": "n1"}
    assert verdict(cluster, "m2") == (names.QUOTA_INVALID, BAD_SAYS)


def test_the_gang_goes_once_the_quota_is_put_right() -> None:
    pods = [
        quota_pod("m0", 1, "ok", annotations=gang_annotations("g", 2)),
        quota_pod("m1", 1, "bad", annotations=gang_annotations("g", 2)),
    ]
    cluster = run(world([("n1", 8)], [GOOD, BAD], pods))
    assert placed(cluster) == {}
    fixed = koord_dict("bad", min=cores(1), max=cores(2), created=2)
    cluster.scheduler.on_object("ElasticQuota", "Update", fixed)
    run(cluster)
    assert placed(cluster) == {"m0": "n1", "m1": "n1"}


def test_capacity_scheduling_gang_group_across_namespaces() -> None:
    # a gang group of two gangs in two namespaces; ns-bad's quota is invalid (min above max): the
    # gang of ns-ok is held naming it
    group = '["ns-ok/a", "ns-bad/b"]'
    annotations = {**gang_annotations("a", 1), "gang.scheduling.koordinator.sh/groups": group}
    other = {**gang_annotations("b", 1), "gang.scheduling.koordinator.sh/groups": group}
    quotas = [
        xk8s_dict("q", "ns-ok", min={"cpu": "4"}, max={"cpu": "8"}),
        xk8s_dict("q", "ns-bad", min={"cpu": "4"}, max={"cpu": "2"}),
    ]
    pods = [
        quota_pod("a0", 1, namespace="ns-ok", annotations=annotations),
        quota_pod("b0", 1, namespace="ns-bad", annotations=other),
    ]
    cluster = run(world([("n1", 8)], quotas, pods))
    assert placed(cluster) == {}
    reason, message = verdict(cluster, "a0", "ns-ok")
    assert reason == names.QUOTA_INVALID
    assert "member ns-bad/b0 of gang ns-bad/b is held by its quota" in message
    assert "quota ns-bad/q" in message


# ---------------------------------------------------------------------------------- koordpy simulate
SCENARIO = """
apiVersion: v1
kind: Node
metadata: {name: node-1}
status: {allocatable: {cpu: "16", memory: 32Gi, pods: "110"}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: ok, namespace: default}
spec: {max: {cpu: 8}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: bad, namespace: default}
spec: {min: {cpu: 4}, max: {cpu: 2}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: job}
spec: {minMember: 2}
"""

MEMBER = """
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{pod-group.scheduling.sigs.k8s.io: job, quota.scheduling.koordinator.sh/name: {quota}}}
spec:
  schedulerName: koord-scheduler
  containers: [{{name: c, image: trainer, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def test_simulate_names_the_quota_in_the_gangs_and_members_messages(tmp_path: Path) -> None:
    path = tmp_path / "gang.yaml"
    path.write_text(SCENARIO + MEMBER.format(name="w0", quota="ok") + MEMBER.format(name="w1", quota="bad"))
    result: dict[str, Any] = simulate(load_scenario([str(path)]), default_configuration()).to_dict()
    (group,) = result["podGroups"]
    assert BAD_SAYS in group["message"] and "timeout" not in group["message"]
    by_name = {p["name"]: p for p in result["pods"]}
    assert by_name["w0"]["phase"] == "Pending" and BAD_SAYS in by_name["w0"]["message"]
    assert by_name["w1"]["phase"] == "Pending" and by_name["w1"]["message"] == BAD_SAYS
