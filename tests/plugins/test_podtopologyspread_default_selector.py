"""PodTopologySpread's default constraints apply only to pods kube-scheduler builds a default
selector for (helper.DefaultSelector, v1.33): pods controlled by a ReplicationController, a
ReplicaSet or a StatefulSet. A pod owned only by a Job (or a DaemonSet, or by nothing: koordpy
sees no Services) gets an empty selector, and the defaults are skipped (buildDefaultConstraints
returns none when the selector is empty). Cases after kube's filtering_test.go and scoring_test.go
default-constraint cases, with values of their own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.plugins.podtopologyspread import NAME
from tests.builders import Harness, node_dict, pod_dict

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
TRAIN = {"app": "train"}

# two zones of two nodes; one pod of the incoming pod's kind sits on a1
NODES = [
    node_dict(name, labels={HOST: name, ZONE: zone})
    for name, zone in (("a1", "zone-a"), ("a2", "zone-a"), ("b1", "zone-b"), ("b2", "zone-b"))
]
PLACED = [pod_dict("sibling", labels=TRAIN, node_name="a1")]

# kube's List defaulting with one hard constraint: zone-a holds 1, zone-b 0, so a pod the defaults
# apply to fits zone-b only
HARD_ZONE_DEFAULT = {
    "defaultingType": "List",
    "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
}


def owned_pod(
    kind: str | None,
    controller: bool = True,
    labels: Mapping[str, str] = TRAIN,
    constraints: Sequence[Mapping[str, Any]] = (),
) -> Pod:
    spec: dict[str, Any] = {}
    if constraints:
        spec["topologySpreadConstraints"] = [dict(c) for c in constraints]
    d = pod_dict("incoming", labels=labels, spec=spec)
    if kind is not None:
        d["metadata"]["ownerReferences"] = [
            {"kind": kind, "name": "train-x7", "uid": "owner-1", "controller": controller}
        ]
    return Pod.from_dict(d)


OWNERS = [
    pytest.param(owned_pod("ReplicaSet"), True, id="replicaset-defaults-apply"),
    pytest.param(owned_pod("StatefulSet"), True, id="statefulset-defaults-apply"),
    pytest.param(owned_pod("ReplicationController"), True, id="replicationcontroller-defaults-apply"),
    pytest.param(owned_pod("Job"), False, id="job-defaults-skipped"),
    pytest.param(owned_pod("DaemonSet"), False, id="daemonset-defaults-skipped"),
    pytest.param(owned_pod("TrainingJob"), False, id="custom-workload-defaults-skipped"),
    pytest.param(owned_pod(None), False, id="no-owner-defaults-skipped"),
    pytest.param(owned_pod("ReplicaSet", controller=False), False, id="replicaset-not-controller-skipped"),
    pytest.param(owned_pod("ReplicaSet", labels={}), False, id="unlabelled-pod-has-empty-selector-skipped"),
]


@pytest.mark.parametrize(("pod", "applies"), OWNERS)
def test_list_defaults_filter_only_pods_with_a_default_selector(pod: Pod, applies: bool) -> None:
    h = Harness(NODES, PLACED, plugins=[NAME], args={NAME: HARD_ZONE_DEFAULT})
    feasible, _ = h.feasible(pod)
    assert sorted(feasible) == (["b1", "b2"] if applies else ["a1", "a2", "b1", "b2"])


@pytest.mark.parametrize(("pod", "applies"), OWNERS)
def test_system_defaults_score_only_pods_with_a_default_selector(pod: Pod, applies: bool) -> None:
    # System defaulting: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway
    scores = Harness(NODES, PLACED, plugins=[NAME]).plugin_scores(NAME, pod)
    if not applies:
        assert scores == {}  # no constraints: Score is skipped
        return
    # a1 holds the sibling (its host and its zone count 1), a2 only shares its zone, zone-b none
    assert scores["b1"] == scores["b2"] == 100
    assert scores["a1"] < scores["a2"] < 100


def test_a_job_pod_keeps_its_own_constraints() -> None:
    # own constraints never depend on the owner; maxSkew 1 on zones as the list default above
    pod = owned_pod(
        "Job",
        constraints=[
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": dict(TRAIN)},
            }
        ],
    )
    feasible, _ = Harness(NODES, PLACED, plugins=[NAME]).feasible(pod)
    assert sorted(feasible) == ["b1", "b2"]


def test_the_default_selector_counts_the_pods_carrying_the_owned_pods_labels() -> None:
    # koordpy has no workload objects: the pod's labels stand for its controller's selector, so a
    # pod lacking one of them (other app) is not counted, and one with the same labels in another
    # namespace neither
    placed = [
        pod_dict("other-app", labels={"app": "serve"}, node_name="b1"),
        pod_dict("elsewhere", labels=TRAIN, node_name="b2", namespace="team-b"),
        *PLACED,
    ]
    h = Harness(NODES, placed, plugins=[NAME], args={NAME: HARD_ZONE_DEFAULT})
    feasible, _ = h.feasible(owned_pod("ReplicaSet"))
    assert sorted(feasible) == ["b1", "b2"]
