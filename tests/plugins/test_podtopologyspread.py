"""PodTopologySpread: kube-scheduler v1.33 Filter and Score semantics, hand-computed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.api.pod import Pod
from koordpy.config.errors import ConfigError
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.interfaces import NODE_ADD, NODE_UPDATE, POD_ALL, ClusterEvent
from koordpy.framework.status import Code
from koordpy.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    NAME,
)
from tests.builders import Harness, node_dict, pod_dict

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}


def node(
    name: str, zone: str | None, labels_extra: Mapping[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    labels = {HOST: name, **(labels_extra or {})}
    if zone is not None:
        labels[ZONE] = zone
    return node_dict(name, labels=labels, **kw)


def placed(
    name: str, on: str, labels: Mapping[str, str] = WEB, namespace: str = "default", terminating: bool = False
) -> dict[str, Any]:
    d = pod_dict(name, labels=labels, node_name=on, namespace=namespace)
    if terminating:
        d["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return d


def spread(
    key: str = ZONE,
    max_skew: int = 1,
    when: str = "DoNotSchedule",
    selector: Mapping[str, str] | None = WEB,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        c["labelSelector"] = {"matchLabels": dict(selector)}
    return c


def incoming(
    constraints: Sequence[Mapping[str, Any]] = (),
    labels: Mapping[str, str] = WEB,
    spec: Mapping[str, Any] | None = None,
    owned: bool = False,
) -> Pod:
    body: dict[str, Any] = dict(spec or {})
    if constraints:
        body["topologySpreadConstraints"] = [dict(c) for c in constraints]
    d = pod_dict("incoming", labels=labels, spec=body)
    if owned:
        d["metadata"]["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": "web-7d4b9", "uid": "rs-1", "controller": True}
        ]
    return Pod.from_dict(d)


def harness(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    args: Mapping[str, Any] | None = None,
) -> Harness:
    return Harness(nodes, pods, plugins=[NAME], args={NAME: args} if args is not None else None)


FOUR = [node("a1", "zone-a"), node("a2", "zone-a"), node("b1", "zone-b"), node("b2", "zone-b")]
THREE_ZONES = [node("a1", "zone-a"), node("b1", "zone-b"), node("c1", "zone-c")]
IN_ZONES_A_B = {"key": ZONE, "operator": "In", "values": ["zone-a", "zone-b"]}
ZONES_A_B = {
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [IN_ZONES_A_B]}],
            }
        }
    }
}


# --------------------------------------------------------------------------------------------- Filter
FILTER_CASES = [
    pytest.param(
        # zone-a holds 3, zone-b 1: min 1; zone-a skew 3+1-1 = 3 > 1, zone-b 1+1-1 = 1
        FOUR,
        [placed("p1", "a1"), placed("p2", "a1"), placed("p3", "a2"), placed("p4", "b1")],
        incoming([spread()]),
        ["b1", "b2"],
        id="max-skew-1-over-two-zones-keeps-the-emptier-zone",
    ),
    pytest.param(
        # maxSkew 3 tolerates zone-a's skew of 3
        FOUR,
        [placed("p1", "a1"), placed("p2", "a1"), placed("p3", "a2"), placed("p4", "b1")],
        incoming([spread(max_skew=3)]),
        ["a1", "a2", "b1", "b2"],
        id="larger-max-skew-tolerates-the-imbalance",
    ),
    pytest.param(
        # no pods anywhere: min 0, every domain has skew 1
        FOUR,
        [],
        incoming([spread()]),
        ["a1", "a2", "b1", "b2"],
        id="empty-cluster-every-zone-fits",
    ),
    pytest.param(
        # zone-a 2, zone-b 1: min 1; zone-b skew 1 passes
        FOUR,
        [placed("p1", "a1"), placed("p2", "a2"), placed("p3", "b1")],
        incoming([spread()]),
        ["b1", "b2"],
        id="without-min-domains-min-is-the-smallest-zone",
    ),
    pytest.param(
        # same counts, minDomains 3 > 2 domains: min is taken as 0, zone-b skew 1+1-0 = 2 > 1
        FOUR,
        [placed("p1", "a1"), placed("p2", "a2"), placed("p3", "b1")],
        incoming([spread(minDomains=3)]),
        [],
        id="min-domains-above-domain-count-makes-min-zero",
    ),
    pytest.param(
        # minDomains 2 == 2 domains: the real minimum 1 is used
        FOUR,
        [placed("p1", "a1"), placed("p2", "a2"), placed("p3", "b1")],
        incoming([spread(minDomains=2)]),
        ["b1", "b2"],
        id="min-domains-met-uses-real-min",
    ),
    pytest.param(
        # the pod (app=web) does not match app=db: zone-a 1+0-0 = 1 passes
        FOUR,
        [placed("p1", "a1", labels={"app": "db"})],
        incoming([spread(selector={"app": "db"})]),
        ["a1", "a2", "b1", "b2"],
        id="pod-not-matching-its-own-selector-adds-no-self-count",
    ),
    pytest.param(
        # the same layout when the pod matches: zone-a 1+1-0 = 2 > 1
        FOUR,
        [placed("p1", "a1", labels={"app": "db"})],
        incoming([spread(selector={"app": "db"})], labels={"app": "db"}),
        ["b1", "b2"],
        id="pod-matching-its-own-selector-counts-itself",
    ),
    pytest.param(
        # two of zone-a's pods are terminating: zone-a counts 1, zone-b 1, min 1 -> both pass
        FOUR,
        [
            placed("p1", "a1"),
            placed("p2", "a1", terminating=True),
            placed("p3", "a2", terminating=True),
            placed("p4", "b1"),
        ],
        incoming([spread()]),
        ["a1", "a2", "b1", "b2"],
        id="terminating-pods-are-not-counted",
    ),
    pytest.param(
        # matching pods of another namespace are not counted: zone-a 0 -> skew 1 passes
        FOUR,
        [placed("p1", "a1", namespace="other"), placed("p2", "a2", namespace="other")],
        incoming([spread()]),
        ["a1", "a2", "b1", "b2"],
        id="pods-of-other-namespaces-are-not-counted",
    ),
    pytest.param(
        # pod-template-hash merged into the selector: only hash=v2 pods count: zone-a 0, zone-b 1,
        # min 0; zone-b skew 1+1-0 = 2 > 1
        FOUR,
        [
            placed("p1", "a1", labels={"app": "web", "pod-template-hash": "v1"}),
            placed("p2", "a2", labels={"app": "web", "pod-template-hash": "v1"}),
            placed("p3", "b1", labels={"app": "web", "pod-template-hash": "v2"}),
        ],
        incoming(
            [spread(matchLabelKeys=["pod-template-hash"])], labels={"app": "web", "pod-template-hash": "v2"}
        ),
        ["a1", "a2"],
        id="match-label-keys-counts-only-the-same-revision",
    ),
    pytest.param(
        # without matchLabelKeys all revisions count: zone-a 2, zone-b 1, min 1; zone-a skew 2
        FOUR,
        [
            placed("p1", "a1", labels={"app": "web", "pod-template-hash": "v1"}),
            placed("p2", "a2", labels={"app": "web", "pod-template-hash": "v1"}),
            placed("p3", "b1", labels={"app": "web", "pod-template-hash": "v2"}),
        ],
        incoming([spread()], labels={"app": "web", "pod-template-hash": "v2"}),
        ["b1", "b2"],
        id="without-match-label-keys-every-revision-counts",
    ),
    pytest.param(
        # required affinity zone In [a, b] with Honor (default): zone-c is not a domain; min 1,
        # every node's skew is <= 1 (zone-c holds 0)
        THREE_ZONES,
        [placed("p1", "a1"), placed("p2", "b1")],
        incoming([spread()], spec=ZONES_A_B),
        ["a1", "b1", "c1"],
        id="node-affinity-policy-honor-leaves-unselected-zones-out-of-min",
    ),
    pytest.param(
        # the same with Ignore: zone-c counts as a domain with 0: zone-a and zone-b skew 2
        THREE_ZONES,
        [placed("p1", "a1"), placed("p2", "b1")],
        incoming([spread(nodeAffinityPolicy="Ignore")], spec=ZONES_A_B),
        ["c1"],
        id="node-affinity-policy-ignore-counts-every-zone",
    ),
    pytest.param(
        # nodeSelector is honored like required affinity
        THREE_ZONES,
        [placed("p1", "a1"), placed("p2", "b1")],
        incoming([spread()], spec={"nodeSelector": {"pool": "main"}}),
        ["a1", "b1", "c1"],
        id="node-selector-matching-no-node-leaves-no-domain-min-zero-skew-ok",
    ),
    pytest.param(
        # c1 tainted and not tolerated, taints Honor: zone-c is not a domain, min 1, all pass
        [
            node("a1", "zone-a"),
            node("b1", "zone-b"),
            node("c1", "zone-c", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        ],
        [placed("p1", "a1"), placed("p2", "b1")],
        incoming([spread(nodeTaintsPolicy="Honor")]),
        ["a1", "b1", "c1"],
        id="node-taints-policy-honor-drops-untolerated-nodes",
    ),
    pytest.param(
        # taints Ignore (default): zone-c counts with 0, zones a and b have skew 2
        [
            node("a1", "zone-a"),
            node("b1", "zone-b"),
            node("c1", "zone-c", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        ],
        [placed("p1", "a1"), placed("p2", "b1")],
        incoming([spread()]),
        ["c1"],
        id="node-taints-policy-ignore-counts-tainted-nodes",
    ),
    pytest.param(
        # a tolerated taint keeps the node a domain even with Honor
        [
            node("a1", "zone-a"),
            node("b1", "zone-b"),
            node("c1", "zone-c", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        ],
        [placed("p1", "a1"), placed("p2", "b1")],
        incoming(
            [spread(nodeTaintsPolicy="Honor")],
            spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
        ),
        ["c1"],
        id="node-taints-policy-honor-keeps-tolerated-nodes",
    ),
    pytest.param(
        # hostname spreading: a1 holds 1, others 0, min 0: a1 skew 2 > 1
        FOUR,
        [placed("p1", "a1")],
        incoming([spread(key=HOST)]),
        ["a2", "b1", "b2"],
        id="hostname-each-node-is-a-domain",
    ),
    pytest.param(
        # two constraints must both hold: zone (a 1, b 1) passes everywhere, hostname fails on
        # a1 and b1
        FOUR,
        [placed("p1", "a1"), placed("p2", "b1")],
        incoming([spread(), spread(key=HOST)]),
        ["a2", "b2"],
        id="every-constraint-must-hold",
    ),
    pytest.param(
        # ScheduleAnyway constraints never filter
        FOUR,
        [placed("p1", "a1"), placed("p2", "a1"), placed("p3", "a2")],
        incoming([spread(when="ScheduleAnyway")]),
        ["a1", "a2", "b1", "b2"],
        id="schedule-anyway-does-not-filter",
    ),
]


@pytest.mark.parametrize(("nodes", "pods", "pod", "want"), FILTER_CASES)
def test_filter(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], pod: Pod, want: list[str]) -> None:
    feasible, _ = harness(nodes, pods).feasible(pod)
    assert sorted(feasible) == want


@pytest.mark.parametrize(
    ("args", "pod", "want"),
    [
        pytest.param(
            # List default: zone-a holds 1, zone-b 0 -> zone-a skew 2 > 1
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            incoming(owned=True),
            ["b1", "b2"],
            id="list-defaults-apply-to-a-controlled-pod",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            incoming(owned=False),
            ["a1", "a2", "b1", "b2"],
            id="list-defaults-skip-a-pod-without-controller",
        ),
        pytest.param(
            # the pod's own constraint (maxSkew 2) replaces the defaults
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            incoming([spread(max_skew=2)], owned=True),
            ["a1", "a2", "b1", "b2"],
            id="own-constraints-replace-the-defaults",
        ),
        pytest.param(
            # system defaults are ScheduleAnyway only: they never filter
            None,
            incoming(owned=True),
            ["a1", "a2", "b1", "b2"],
            id="system-defaults-never-filter",
        ),
    ],
)
def test_default_constraints_filter(args: dict[str, Any] | None, pod: Pod, want: list[str]) -> None:
    h = harness(FOUR, [placed("p1", "a1"), placed("p2", "b1", labels={"app": "other"})], args=args)
    feasible, _ = h.feasible(pod)
    assert sorted(feasible) == want


def test_missing_label_is_unresolvable_and_message() -> None:
    # 2 zones holding 1 pod each, minDomains 3: min is 0 and every zoned node has skew 2 > 1;
    # c1 lacks the zone label
    nodes = [node("a1", "zone-a"), node("a2", "zone-a"), node("b1", "zone-b"), node("c1", None)]
    h = harness(nodes, [placed("p1", "a1"), placed("p2", "b1")])
    feasible, diagnosis = h.feasible(incoming([spread(minDomains=3)]))
    assert feasible == []
    assert fit_error_message(4, diagnosis) == (
        "0/4 nodes are available: "
        "1 node(s) didn't match pod topology spread constraints (missing required label), "
        "3 node(s) didn't match pod topology spread constraints."
    )
    by_name = {h.snapshot.node_name(r): s for r, s in diagnosis.statuses_by_row().items()}
    assert by_name["c1"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert by_name["c1"].reasons == (ERR_REASON_NODE_LABEL_NOT_MATCH,)
    assert by_name["a1"].code == Code.UNSCHEDULABLE
    assert by_name["a1"].reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)


def test_first_failing_constraint_decides_the_reason() -> None:
    # only nodes with both labels count: zone-a 2 (a1), zone-b 0 (b1), min 0. a2 fails the zone
    # constraint (skew 3) before the rack constraint finds its label missing; b2 passes the zone
    # constraint and then lacks the rack label
    nodes = [
        node("a1", "zone-a", labels_extra={"rack": "r1"}),
        node("a2", "zone-a"),
        node("b1", "zone-b", labels_extra={"rack": "r2"}),
        node("b2", "zone-b"),
    ]
    h = harness(nodes, [placed("p1", "a1"), placed("p2", "a1")])
    feasible, diagnosis = h.feasible(incoming([spread(), spread(key="rack", max_skew=5)]))
    assert feasible == ["b1"]
    by_name = {h.snapshot.node_name(r): s for r, s in diagnosis.statuses_by_row().items()}
    assert by_name["a1"].code == Code.UNSCHEDULABLE
    assert by_name["a2"].code == Code.UNSCHEDULABLE
    assert by_name["b2"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_message_when_every_node_is_skewed() -> None:
    h = harness(FOUR, [placed("p1", "a1"), placed("p2", "b1")])
    _, diagnosis = h.feasible(incoming([spread(minDomains=3)]))
    assert fit_error_message(4, diagnosis) == (
        "0/4 nodes are available: 4 node(s) didn't match pod topology spread constraints."
    )


def test_no_constraints_skips_filter() -> None:
    h = harness(FOUR, [placed("p1", "a1")])
    state, _, status = h.pre_filter(incoming())
    assert status is None
    assert NAME in state.skip_filter


# ------------------------------------------------------------------------------------- PreFilterExtensions
@pytest.mark.parametrize(
    ("extra_on", "extra_labels", "a1_passes"),
    [
        # zone-a 1, zone-b 0: min 0, a1 skew 2 fails; a matching pod added on b1 makes min 1
        pytest.param("b1", WEB, True, id="added-pod-in-the-empty-zone-raises-min"),
        pytest.param("b1", {"app": "other"}, False, id="added-non-matching-pod-changes-nothing"),
        pytest.param("a2", WEB, False, id="added-pod-in-the-full-zone-keeps-failing"),
    ],
)
def test_pre_filter_add_pod(extra_on: str, extra_labels: Mapping[str, str], a1_passes: bool) -> None:
    h = harness(FOUR, [placed("p1", "a1")])
    pod = incoming([spread()])
    state, _, _ = h.pre_filter(pod)
    a1 = h.snapshot.row_of["a1"]
    assert h.profile.filter_one(state, pod, a1) is not None
    trial = state.clone()
    other = Pod.from_dict(placed("extra", extra_on, labels=extra_labels))
    h.profile.pre_filter_add_pod(trial, pod, other, h.snapshot.row_of[extra_on])
    assert (h.profile.filter_one(trial, pod, a1) is None) == a1_passes
    # the original state is untouched by the clone's update
    assert h.profile.filter_one(state, pod, a1) is not None


def test_pre_filter_remove_pod_frees_a_zone() -> None:
    # zone-a 2, zone-b 1: min 1, a1 skew 2 fails; removing one of zone-a's pods gives skew 1
    pods = [placed("p1", "a1"), placed("p2", "a2"), placed("p3", "b1")]
    h = harness(FOUR, pods)
    pod = incoming([spread()])
    state, _, _ = h.pre_filter(pod)
    a1 = h.snapshot.row_of["a1"]
    assert h.profile.filter_one(state, pod, a1) is not None
    h.profile.pre_filter_remove_pod(state, pod, Pod.from_dict(pods[1]), h.snapshot.row_of["a2"])
    assert h.profile.filter_one(state, pod, a1) is None


# --------------------------------------------------------------------------------------------- Score
SCORE_PODS = [placed("p1", "a1"), placed("p2", "a1"), placed("p3", "a2"), placed("p4", "b1")]


@pytest.mark.parametrize(
    ("nodes", "pods", "pod", "args", "want"),
    [
        pytest.param(
            # 2 zones: weight ln(4); zone-a 3 -> round(4.159) = 4, zone-b 1 -> round(1.386) = 1;
            # normalized 100*(4+1-s)/4
            FOUR,
            SCORE_PODS,
            incoming([spread(when="ScheduleAnyway")]),
            None,
            {"a1": 25, "a2": 25, "b1": 100, "b2": 100},
            id="zone-scores-favor-the-emptier-zone",
        ),
        pytest.param(
            # hostname, 4 nodes: weight ln(6) = 1.7918, maxSkew 2 adds 1:
            # a1 2 -> 5, a2 1 -> 3, b1 1 -> 3, b2 0 -> 1; normalized 100*(5+1-s)/5
            FOUR,
            SCORE_PODS,
            incoming([spread(key=HOST, max_skew=2, when="ScheduleAnyway")]),
            None,
            {"a1": 20, "a2": 60, "b1": 60, "b2": 100},
            id="hostname-scores-count-per-node",
        ),
        pytest.param(
            # both: a1 4.159+4.584 -> 9, a2 4.159+2.792 -> 7, b1 1.386+2.792 -> 4, b2 1.386+1 -> 2;
            # normalized 100*(9+2-s)/9
            FOUR,
            SCORE_PODS,
            incoming([spread(when="ScheduleAnyway"), spread(key=HOST, max_skew=2, when="ScheduleAnyway")]),
            None,
            {"a1": 22, "a2": 44, "b1": 77, "b2": 100},
            id="constraints-add-up",
        ),
        pytest.param(
            # c1 lacks the zone label: ignored (score 0) and not a domain; the rest as above
            [*FOUR, node("c1", None)],
            SCORE_PODS,
            incoming([spread(when="ScheduleAnyway")]),
            None,
            {"a1": 25, "a2": 25, "b1": 100, "b2": 100, "c1": 0},
            id="node-missing-the-key-scores-zero",
        ),
        pytest.param(
            # no matching pods anywhere: every raw score is 0, so every node gets 100
            FOUR,
            [],
            incoming([spread(when="ScheduleAnyway")]),
            None,
            {"a1": 100, "a2": 100, "b1": 100, "b2": 100},
            id="all-zero-raw-scores-give-max",
        ),
        pytest.param(
            # system defaults (hostname maxSkew 3, zone maxSkew 5) for a controlled pod; nodes
            # without a zone are kept. hostname weight ln(6) = 1.7918 (4 nodes); zone domains a,
            # b and c1's missing value: weight ln(5) = 1.6094; zone-a 1, zone-b 2.
            # a1 (1*1.7918+2)+(1*1.6094+4) = 9.40 -> 9; a2 2+5.609 -> 8;
            # b1 (2*1.7918+2)+(2*1.6094+4) = 12.80 -> 13; c1 1*1.7918+2 (no zone) -> 4;
            # normalized 100*(13+4-s)/13
            [node("a1", "zone-a"), node("a2", "zone-a"), node("b1", "zone-b"), node("c1", None)],
            [placed("p1", "a1"), placed("p2", "b1"), placed("p3", "b1"), placed("p4", "c1")],
            incoming(owned=True),
            None,
            {"a1": 61, "a2": 69, "b1": 30, "c1": 100},
            id="system-defaults-score-hostname-and-zone",
        ),
        pytest.param(
            # List defaults with a ScheduleAnyway zone constraint: like the first case
            FOUR,
            SCORE_PODS,
            incoming(owned=True),
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}
                ],
            },
            {"a1": 25, "a2": 25, "b1": 100, "b2": 100},
            id="list-defaults-score",
        ),
        pytest.param(
            # domains come from every scored node (a, b, c: weight ln(5) = 1.6094) but with
            # nodeAffinityPolicy Honor pods count only on nodes matching the nodeSelector: zone-a
            # 1 -> round(1.609) = 2, zone-b and zone-c 0 -> 0; normalized 100*(2+0-s)/2
            THREE_ZONES,
            [placed("p1", "a1"), placed("p2", "b1"), placed("p3", "c1")],
            incoming([spread(when="ScheduleAnyway")], spec={"nodeSelector": {ZONE: "zone-a"}}),
            None,
            {"a1": 0, "b1": 100, "c1": 100},
            id="affinity-honor-counts-only-matching-nodes",
        ),
    ],
)
def test_scores(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    pod: Pod,
    args: dict[str, Any] | None,
    want: dict[str, int],
) -> None:
    assert harness(nodes, pods, args=args).plugin_scores(NAME, pod) == want


def test_scores_of_a_subset_of_nodes() -> None:
    # only a1, b1, b2 are scored (the rest filtered out): hostname weight ln(3+2) = 1.6094, zone
    # domains a, b: ln(4) = 1.3863, zone counts over every node (a 3, b 1).
    # a1 (2*1.6094+1)+(3*1.3863) = 8.38 -> 8; b1 (1.6094+1)+1.3863 = 4.00 -> 4; b2 1+1.3863 -> 2;
    # normalized 100*(8+2-s)/8
    pod = incoming([spread(key=HOST, max_skew=2, when="ScheduleAnyway"), spread(when="ScheduleAnyway")])
    scores = harness(FOUR, SCORE_PODS).plugin_scores(NAME, pod, ["a1", "b1", "b2"])
    assert scores == {"a1": 25, "b1": 75, "b2": 100}


def test_only_hard_constraints_skip_score() -> None:
    h = harness(FOUR, SCORE_PODS)
    assert h.plugin_scores(NAME, incoming([spread()])) == {}


# --------------------------------------------------------------------------------------------- args
@pytest.mark.parametrize(
    ("args", "path"),
    [
        pytest.param(
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "defaultingType",
            id="system-with-constraints",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": WEB},
                    }
                ],
            },
            "defaultConstraints[0].labelSelector",
            id="selector-forbidden",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"}],
            },
            "defaultConstraints[0].whenUnsatisfiable",
            id="bad-when-unsatisfiable",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "defaultConstraints[0].maxSkew",
            id="max-skew-zero",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                ],
            },
            "defaultConstraints",
            id="repeated-key-and-action",
        ),
        pytest.param({"defaultingType": "Auto"}, "defaultingType", id="unknown-defaulting-type"),
    ],
)
def test_invalid_args(args: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        harness(FOUR, args=args)
    assert err.value.path == f"profiles[0].pluginConfig[{NAME}].args.{path}"


def test_valid_list_args() -> None:
    harness(
        FOUR,
        args={
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
            ],
        },
    )


def test_events() -> None:
    events = harness(FOUR).profile.events[NAME]
    for wanted in (POD_ALL, NODE_ADD, NODE_UPDATE, ClusterEvent("Node", "Delete")):
        assert any(e.covers(wanted) for e in events)


def test_counts_follow_cluster_changes() -> None:
    # the per-template node data is cached; a relabelled node must be seen on the next cycle
    h = harness(FOUR, [placed("p1", "a1")])
    pod = incoming([spread()])
    assert sorted(h.feasible(pod)[0]) == ["b1", "b2"]
    h.cache.update_node(Node.from_dict(node("b2", "zone-a")))
    # zone-a now a1, a2, b2 with 1 pod, zone-b b1 with 0: zone-a skew 2
    assert sorted(h.feasible(pod)[0]) == ["b1"]
    h.cache.add_pod(Pod.from_dict(placed("p2", "b1")))
    assert sorted(h.feasible(pod)[0]) == ["a1", "a2", "b1", "b2"]
