from __future__ import annotations

import time
from typing import Any

import pytest

from koordpy.api.namespace import Namespace
from koordpy.api.pod import Pod
from koordpy.config.errors import ConfigError
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.interfaces import NODE_ADD, NODE_UPDATE, POD_ALL
from koordpy.framework.status import Code
from koordpy.plugins.interpodaffinity import (
    ERR_AFFINITY_RULES,
    ERR_ANTI_AFFINITY_RULES,
    ERR_EXISTING_ANTI_AFFINITY,
    NAME,
)
from tests.builders import Harness, make_pod, node_dict

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
REGION = "topology.kubernetes.io/region"


def node(name: str, zone: str | None) -> dict[str, Any]:
    labels = {HOST: name, REGION: "r1"}
    if zone is not None:
        labels[ZONE] = zone
    return node_dict(name, labels=labels)


# zone a: n1 n2, zone b: n3 n4; n5 has no zone label. Every node has a hostname and region r1.
NODES = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b"), node("n5", None)]
ALL = ["n1", "n2", "n3", "n4", "n5"]


def term(
    labels: dict[str, str] | None,
    key: str,
    namespaces: list[str] | None = None,
    ns_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": key}
    if labels is not None:
        out["labelSelector"] = {"matchLabels": labels}
    if namespaces is not None:
        out["namespaces"] = namespaces
    if ns_selector is not None:
        out["namespaceSelector"] = {"matchLabels": ns_selector}
    return out


def affinity_spec(
    required: list[dict[str, Any]] | None = None,
    required_anti: list[dict[str, Any]] | None = None,
    preferred: list[tuple[int, dict[str, Any]]] | None = None,
    preferred_anti: list[tuple[int, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    pod_affinity: dict[str, Any] = {}
    anti: dict[str, Any] = {}
    if required:
        pod_affinity[req] = required
    if preferred:
        pod_affinity[pref] = [{"weight": w, "podAffinityTerm": t} for w, t in preferred]
    if required_anti:
        anti[req] = required_anti
    if preferred_anti:
        anti[pref] = [{"weight": w, "podAffinityTerm": t} for w, t in preferred_anti]
    affinity: dict[str, Any] = {}
    if pod_affinity:
        affinity["podAffinity"] = pod_affinity
    if anti:
        affinity["podAntiAffinity"] = anti
    return {"affinity": affinity} if affinity else {}


def placed(name: str, on: str, app: str, namespace: str = "default", **affinity: Any) -> Pod:
    spec = affinity_spec(**affinity)
    return make_pod(name, labels={"app": app}, node_name=on, namespace=namespace, spec=spec)


def incoming(
    app: str = "web", namespace: str = "default", extra: dict[str, str] | None = None, **affinity: Any
) -> Pod:
    return make_pod(
        "incoming", labels={"app": app, **(extra or {})}, namespace=namespace, spec=affinity_spec(**affinity)
    )


def harness(
    pods: list[Pod], args: dict[str, Any] | None = None, namespaces: tuple[Namespace, ...] = ()
) -> Harness:
    h = Harness(NODES, pods, plugins=[NAME], args={NAME: args} if args is not None else None)
    for ns in namespaces:
        h.cache.set_namespace(ns)
    return h


DATA_NS = Namespace.from_dict({"metadata": {"name": "other", "labels": {"team": "data"}}})

FILTER_CASES = [
    # required affinity
    ([placed("db", "n1", "db")], incoming(required=[term({"app": "db"}, ZONE)]), ["n1", "n2"]),
    ([placed("db", "n3", "db")], incoming(required=[term({"app": "db"}, HOST)]), ["n3"]),
    ([], incoming(required=[term({"app": "db"}, ZONE)]), []),
    ([], incoming("db", required=[term({"app": "db"}, ZONE)]), ["n1", "n2", "n3", "n4"]),
    ([placed("db", "n3", "db")], incoming("db", required=[term({"app": "db"}, ZONE)]), ["n3", "n4"]),
    # pods matching a term on a node without the term's key do not count: still the first pod
    (
        [placed("db", "n5", "db")],
        incoming("db", required=[term({"app": "db"}, ZONE)]),
        ["n1", "n2", "n3", "n4"],
    ),
    # one pod must match all the terms: db on n3 in zone b, tier=backend label on it as well
    (
        [
            make_pod("both", labels={"app": "db", "tier": "backend"}, node_name="n3"),
            placed("dbonly", "n1", "db"),
        ],
        incoming(required=[term({"app": "db"}, ZONE), term({"tier": "backend"}, HOST)]),
        ["n3"],
    ),
    (
        [placed("db", "n3", "db"), make_pod("be", labels={"tier": "backend"}, node_name="n4")],
        incoming(required=[term({"app": "db"}, ZONE), term({"tier": "backend"}, HOST)]),
        [],
    ),
    # a nil labelSelector selects no pod, and the pod cannot match it either
    ([placed("db", "n1", "db")], incoming(required=[term(None, ZONE)]), []),
    # required anti-affinity of the incoming pod
    (
        [placed("w1", "n1", "web"), placed("w3", "n3", "web")],
        incoming(required_anti=[term({"app": "web"}, HOST)]),
        ["n2", "n4", "n5"],
    ),
    ([placed("w1", "n1", "web")], incoming(required_anti=[term({"app": "web"}, ZONE)]), ["n3", "n4", "n5"]),
    ([placed("d1", "n1", "db")], incoming(required_anti=[term({"app": "web"}, ZONE)]), ALL),
    # existing pods' required anti-affinity, seen from the incoming pod
    (
        [placed("guard", "n1", "db", required_anti=[term({"app": "web"}, ZONE)])],
        incoming(),
        ["n3", "n4", "n5"],
    ),
    (
        [placed("guard", "n1", "db", required_anti=[term({"app": "web"}, HOST)])],
        incoming(),
        ["n2", "n3", "n4", "n5"],
    ),
    ([placed("guard", "n1", "db", required_anti=[term({"app": "cache"}, ZONE)])], incoming(), ALL),
    # an existing pod's term on a node without the key binds nothing
    ([placed("guard", "n5", "db", required_anti=[term({"app": "web"}, ZONE)])], incoming(), ALL),
]
FILTER_IDS = [
    "affinity-zone-with-matching-pod",
    "affinity-hostname-with-matching-pod",
    "affinity-no-matching-pod-and-no-self-match",
    "first-pod-self-match-goes-anywhere-with-the-key",
    "self-match-ignored-once-a-matching-pod-exists",
    "matching-pod-on-node-without-key-keeps-first-pod-rule",
    "affinity-counts-pods-matching-all-terms",
    "terms-matched-by-different-pods-do-not-combine",
    "nil-selector-matches-nothing",
    "anti-affinity-hostname-one-per-node",
    "anti-affinity-zone-node-without-zone-passes",
    "anti-affinity-not-matching-other-pods",
    "existing-anti-affinity-zone-is-symmetric",
    "existing-anti-affinity-hostname",
    "existing-anti-affinity-not-matching",
    "existing-anti-affinity-node-without-key",
]


@pytest.mark.parametrize(("existing", "pod", "expected"), FILTER_CASES, ids=FILTER_IDS)
def test_filter(existing: list[Pod], pod: Pod, expected: list[str]) -> None:
    feasible, _ = harness(existing).feasible(pod)
    assert feasible == expected


NAMESPACE_CASES = [
    # the incoming pod's term reaches only its own namespace by default
    ([placed("db", "n1", "db", namespace="other")], incoming(required=[term({"app": "db"}, ZONE)]), []),
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(required=[term({"app": "db"}, ZONE, namespaces=["other"])]),
        ["n1", "n2"],
    ),
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(required=[term({"app": "db"}, ZONE, ns_selector={"team": "data"})]),
        ["n1", "n2"],
    ),
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(required=[term({"app": "db"}, ZONE, ns_selector={"team": "ml"})]),
        [],
    ),
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(required=[term({"app": "db"}, ZONE, ns_selector={})]),
        ["n1", "n2"],
    ),
    # two terms with different scopes: the pod must be in both
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(
            required=[
                term({"app": "db"}, ZONE, namespaces=["other"]),
                term({"app": "db"}, HOST, ns_selector={"team": "data"}),
            ]
        ),
        ["n1"],
    ),
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(
            required=[
                term({"app": "db"}, ZONE, namespaces=["other"]),
                term({"app": "db"}, HOST, namespaces=["default"]),
            ]
        ),
        [],
    ),
    (
        [placed("w", "n1", "web", namespace="other")],
        incoming(required_anti=[term({"app": "web"}, ZONE)]),
        ALL,
    ),
    (
        [placed("w", "n1", "web", namespace="other")],
        incoming(required_anti=[term({"app": "web"}, ZONE, ns_selector={"team": "data"})]),
        ["n3", "n4", "n5"],
    ),
    # an existing pod's term defaults to the existing pod's namespace
    (
        [placed("guard", "n1", "db", namespace="other", required_anti=[term({"app": "web"}, ZONE)])],
        incoming(),
        ALL,
    ),
    (
        [
            placed(
                "guard",
                "n1",
                "db",
                namespace="other",
                required_anti=[term({"app": "web"}, ZONE, namespaces=["default"])],
            )
        ],
        incoming(),
        ["n3", "n4", "n5"],
    ),
    # its namespaceSelector is matched against the incoming pod's namespace labels
    (
        [
            placed(
                "guard", "n1", "db", required_anti=[term({"app": "web"}, ZONE, ns_selector={"team": "data"})]
            )
        ],
        incoming(namespace="other"),
        ["n3", "n4", "n5"],
    ),
    (
        [
            placed(
                "guard", "n1", "db", required_anti=[term({"app": "web"}, ZONE, ns_selector={"team": "data"})]
            )
        ],
        incoming(),
        ALL,
    ),
]
NAMESPACE_IDS = [
    "own-namespace-only-by-default",
    "namespaces-list-reaches-other-namespace",
    "namespace-selector-matches-labels",
    "namespace-selector-not-matching",
    "empty-namespace-selector-means-all-namespaces",
    "all-terms-scope-intersection-matches",
    "all-terms-scope-intersection-empty",
    "anti-affinity-ignores-other-namespace",
    "anti-affinity-namespace-selector",
    "existing-term-scoped-to-its-own-namespace",
    "existing-term-namespaces-list",
    "existing-term-namespace-selector-matches-incoming-namespace",
    "existing-term-namespace-selector-not-matching",
]


@pytest.mark.parametrize(("existing", "pod", "expected"), NAMESPACE_CASES, ids=NAMESPACE_IDS)
def test_filter_namespace_scope(existing: list[Pod], pod: Pod, expected: list[str]) -> None:
    feasible, _ = harness(existing, namespaces=(DATA_NS,)).feasible(pod)
    assert feasible == expected


MESSAGE_CASES = [
    (
        [],
        incoming(required=[term({"app": "db"}, ZONE)]),
        "0/5 nodes are available: 5 node(s) didn't match pod affinity rules.",
        {ERR_AFFINITY_RULES: Code.UNSCHEDULABLE_AND_UNRESOLVABLE},
    ),
    # the rest of the nodes pass: only the failures are told
    (
        [],
        incoming("db", required=[term({"app": "db"}, ZONE)]),
        "0/5 nodes are available: 1 node(s) didn't match pod affinity rules.",
        {ERR_AFFINITY_RULES: Code.UNSCHEDULABLE_AND_UNRESOLVABLE},
    ),
    # affinity is checked before anti-affinity: n3..n5 fail affinity, n1 and n2 anti-affinity
    (
        [placed("db", "n1", "db"), placed("w1", "n1", "web"), placed("w2", "n2", "web")],
        incoming(required=[term({"app": "db"}, ZONE)], required_anti=[term({"app": "web"}, HOST)]),
        "0/5 nodes are available: 2 node(s) didn't match pod anti-affinity rules, "
        "3 node(s) didn't match pod affinity rules.",
        {
            ERR_AFFINITY_RULES: Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            ERR_ANTI_AFFINITY_RULES: Code.UNSCHEDULABLE,
        },
    ),
    (
        [placed("guard", "n1", "db", required_anti=[term({"app": "web"}, REGION)])],
        incoming(),
        "0/5 nodes are available: 5 node(s) didn't satisfy existing pods anti-affinity rules.",
        {ERR_EXISTING_ANTI_AFFINITY: Code.UNSCHEDULABLE},
    ),
    # the pod's own anti-affinity is checked before existing pods'
    (
        [placed("guard", "n1", "web", required_anti=[term({"app": "web"}, REGION)])],
        incoming(required_anti=[term({"app": "web"}, ZONE)]),
        "0/5 nodes are available: 2 node(s) didn't match pod anti-affinity rules, "
        "3 node(s) didn't satisfy existing pods anti-affinity rules.",
        {ERR_ANTI_AFFINITY_RULES: Code.UNSCHEDULABLE, ERR_EXISTING_ANTI_AFFINITY: Code.UNSCHEDULABLE},
    ),
]


@pytest.mark.parametrize(
    ("existing", "pod", "message", "codes"),
    MESSAGE_CASES,
    ids=[
        "no-affinity-match",
        "first-pod-but-node-lacks-key",
        "affinity-before-anti-affinity",
        "existing-anti-affinity-region",
        "own-anti-affinity-before-existing",
    ],
)
def test_failure_message_and_codes(
    existing: list[Pod], pod: Pod, message: str, codes: dict[str, Code]
) -> None:
    _, diagnosis = harness(existing).feasible(pod)
    assert fit_error_message(5, diagnosis) == message
    seen = {s.message: s.code for s in diagnosis.statuses_by_row().values()}
    assert seen == codes
    assert all(s.plugin == NAME for s in diagnosis.statuses_by_row().values())


def test_pre_filter_skips_pods_without_required_terms_when_nothing_binds_them() -> None:
    h = harness(
        [
            placed("guard", "n1", "db", required_anti=[term({"app": "cache"}, ZONE)]),
            placed("pref", "n2", "db", preferred=[(5, term({"app": "web"}, ZONE))]),
        ]
    )
    state, _, status = h.pre_filter(incoming())
    assert status is None
    assert NAME in state.skip_filter
    state, _, _ = h.pre_filter(incoming("cache"))
    assert NAME not in state.skip_filter


# ----------------------------------------------------------------------------- PreFilter extensions


def row(h: Harness, name: str) -> int:
    return int(h.snapshot.row_of[name])


ADD_CASES: list[tuple[Any, ...]] = [
    # a web pod added on n1 breaks the incoming pod's hostname anti-affinity there
    (
        [],
        incoming(required_anti=[term({"app": "web"}, HOST)]),
        make_pod("w", labels={"app": "web"}),
        "n1",
        None,
        ERR_ANTI_AFFINITY_RULES,
    ),
    # a db pod added in zone b satisfies an affinity nothing satisfied before
    (
        [],
        incoming(required=[term({"app": "db"}, ZONE)]),
        make_pod("d", labels={"app": "db"}),
        "n4",
        ERR_AFFINITY_RULES,
        None,
    ),
    # an added pod whose anti-affinity matches the incoming pod closes its zone
    (
        [],
        incoming(required_anti=[term({"app": "none"}, HOST)]),
        make_pod("g", labels={"app": "db"}, spec=affinity_spec(required_anti=[term({"app": "web"}, ZONE)])),
        "n2",
        None,
        ERR_EXISTING_ANTI_AFFINITY,
    ),
    # a matching pod added in the node's own domain keeps a first pod of its group passing there
    (
        [],
        incoming("db", required=[term({"app": "db"}, ZONE)]),
        make_pod("d", labels={"app": "db"}),
        "n3",
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("existing", "pod", "added", "on", "before", "after"),
    ADD_CASES,
    ids=[
        "add-breaks-anti-affinity",
        "add-satisfies-affinity",
        "add-brings-existing-anti-affinity",
        "add-in-own-domain-keeps-first-pod-passing",
    ],
)
def test_pre_filter_add_pod_flips_verdict(
    existing: list[Pod], pod: Pod, added: Pod, on: str, before: str | None, after: str | None
) -> None:
    h = harness(existing)
    state, _, status = h.pre_filter(pod)
    assert status is None
    r = row(h, on)
    st = h.profile.filter_one(state, pod, r)
    assert (st.message if st else None) == before
    st = h.profile.filter_one_with_pods(state, pod, r, [added])
    assert (st.message if st else None) == after
    # the trial worked on a copy: the original state and the snapshot are unchanged
    st = h.profile.filter_one(state, pod, r)
    assert (st.message if st else None) == before
    assert added.key not in h.snapshot.info(r).pods


def test_pre_filter_add_pod_moves_affinity_away_from_first_pod_rule() -> None:
    # With a db pod added in zone b, zone a no longer passes the first-pod rule.
    h = harness([])
    pod = incoming("db", required=[term({"app": "db"}, ZONE)])
    state, _, _ = h.pre_filter(pod)
    trial = state.clone()
    other = make_pod("d", labels={"app": "db"})
    h.snapshot.add_pod(other, row(h, "n3"))
    h.profile.pre_filter_add_pod(trial, pod, other, row(h, "n3"))
    st = h.profile.filter_one(trial, pod, row(h, "n1"))
    assert st is not None and st.message == ERR_AFFINITY_RULES
    assert h.profile.filter_one(trial, pod, row(h, "n4")) is None


def test_pre_filter_remove_pod_frees_node() -> None:
    guard = placed("guard", "n1", "db", required_anti=[term({"app": "web"}, HOST)])
    h = harness([guard])
    pod = incoming()
    state, _, _ = h.pre_filter(pod)
    r = row(h, "n1")
    st = h.profile.filter_one(state, pod, r)
    assert st is not None and st.message == ERR_EXISTING_ANTI_AFFINITY
    trial = state.clone()
    h.snapshot.remove_pod(guard, r)
    h.profile.pre_filter_remove_pod(trial, pod, guard, r)
    assert h.profile.filter_one(trial, pod, r) is None


def test_nominated_pod_counts_for_anti_affinity() -> None:
    h = harness([])
    h.handle.nominator.add(make_pod("w", labels={"app": "web"}, priority=10), "n2")
    feasible, diagnosis = h.feasible(incoming(required_anti=[term({"app": "web"}, HOST)]))
    assert feasible == ["n1", "n3", "n4", "n5"]
    assert fit_error_message(5, diagnosis) == (
        "0/5 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    )


# ----------------------------------------------------------------------------- Score

DB_IN_A_AND_B = [placed("db1", "n1", "db"), placed("db3", "n3", "db"), placed("db4", "n4", "db")]

SCORE_CASES = [
    # raw: zone a 10 (one db), zone b 20 (two db), n5 0 (no zone); scaled by 100/20
    (
        DB_IN_A_AND_B,
        incoming(preferred=[(10, term({"app": "db"}, ZONE))]),
        None,
        None,
        {"n1": 50, "n2": 50, "n3": 100, "n4": 100, "n5": 0},
    ),
    # only the scored nodes set min and max: n1 10 -> 0, n3 20 -> 100
    (
        DB_IN_A_AND_B,
        incoming(preferred=[(10, term({"app": "db"}, ZONE))]),
        None,
        ["n1", "n3"],
        {"n1": 0, "n3": 100},
    ),
    (
        [placed("w1", "n1", "web")],
        incoming(preferred_anti=[(5, term({"app": "web"}, HOST))]),
        None,
        None,
        {"n1": 0, "n2": 100, "n3": 100, "n4": 100, "n5": 100},
    ),
    # raw n1 10, n2 10-3, n3 -3, n4 0, n5 0: (s+3)*100/13 truncated
    (
        [placed("db1", "n1", "db"), placed("w2", "n2", "web"), placed("w3", "n3", "web")],
        incoming(
            preferred=[(10, term({"app": "db"}, ZONE))], preferred_anti=[(3, term({"app": "web"}, HOST))]
        ),
        None,
        None,
        {"n1": 100, "n2": 76, "n3": 0, "n4": 23, "n5": 23},
    ),
    # an existing pod's preferred terms that match the incoming pod count for its domain
    (
        [placed("fan", "n3", "db", preferred=[(7, term({"app": "web"}, ZONE))])],
        incoming(),
        None,
        None,
        {"n1": 0, "n2": 0, "n3": 100, "n4": 100, "n5": 0},
    ),
    (
        [placed("shy", "n1", "db", preferred_anti=[(4, term({"app": "web"}, HOST))])],
        incoming(),
        None,
        None,
        {"n1": 0, "n2": 100, "n3": 100, "n4": 100, "n5": 100},
    ),
    # an existing pod's required affinity counts with hardPodAffinityWeight (default 1)
    (
        [placed("fan", "n3", "db", required=[term({"app": "web"}, ZONE)])],
        incoming(),
        None,
        None,
        {"n1": 0, "n2": 0, "n3": 100, "n4": 100, "n5": 0},
    ),
    # zone a 5 (preferred), zone b 1 x hard weight
    (
        [
            placed("pref", "n1", "db", preferred=[(5, term({"app": "web"}, ZONE))]),
            placed("hard", "n3", "db", required=[term({"app": "web"}, ZONE)]),
        ],
        incoming(),
        None,
        None,
        {"n1": 100, "n2": 100, "n3": 20, "n4": 20, "n5": 0},
    ),
    (
        [
            placed("pref", "n1", "db", preferred=[(5, term({"app": "web"}, ZONE))]),
            placed("hard", "n3", "db", required=[term({"app": "web"}, ZONE)]),
        ],
        incoming(),
        {"hardPodAffinityWeight": 10},
        None,
        {"n1": 50, "n2": 50, "n3": 100, "n4": 100, "n5": 0},
    ),
    (
        [
            placed("pref", "n1", "db", preferred=[(5, term({"app": "web"}, ZONE))]),
            placed("hard", "n3", "db", required=[term({"app": "web"}, ZONE)]),
        ],
        incoming(),
        {"hardPodAffinityWeight": 0},
        None,
        {"n1": 100, "n2": 100, "n3": 0, "n4": 0, "n5": 0},
    ),
    # ignoring existing pods' terms applies only to incoming pods without preferred terms
    (
        [placed("pref", "n1", "db", preferred=[(5, term({"app": "web"}, ZONE))])],
        incoming(),
        {"ignorePreferredTermsOfExistingPods": True},
        None,
        {},
    ),
    # raw n1 5, n2 5, n4 2 (the incoming pod's term), n3 0, n5 0
    (
        [placed("pref", "n1", "cache", preferred=[(5, term({"app": "web"}, ZONE))]), placed("d", "n4", "db")],
        incoming(preferred=[(2, term({"app": "db"}, HOST))]),
        {"ignorePreferredTermsOfExistingPods": True},
        None,
        {"n1": 100, "n2": 100, "n3": 0, "n4": 40, "n5": 0},
    ),
    # a preferred term counts only pods in its namespace scope
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(preferred=[(10, term({"app": "db"}, ZONE))]),
        None,
        None,
        {},
    ),
    (
        [placed("db", "n1", "db", namespace="other")],
        incoming(preferred=[(10, term({"app": "db"}, ZONE, ns_selector={"team": "data"}))]),
        None,
        None,
        {"n1": 100, "n2": 100, "n3": 0, "n4": 0, "n5": 0},
    ),
    # equal raw scores everywhere normalize to 0
    (
        [placed("r", "n1", "db")],
        incoming(preferred=[(10, term({"app": "db"}, REGION))]),
        None,
        None,
        {"n1": 0, "n2": 0, "n3": 0, "n4": 0, "n5": 0},
    ),
    ([placed("db", "n1", "db")], incoming(), None, None, {}),
]
SCORE_IDS = [
    "preferred-affinity-zone",
    "normalization-over-scored-nodes",
    "preferred-anti-affinity-hostname",
    "preferred-affinity-and-anti-affinity-truncated",
    "existing-preferred-affinity-symmetric",
    "existing-preferred-anti-affinity-symmetric",
    "existing-required-affinity-hard-weight-default",
    "hard-weight-1-against-preferred-5",
    "hard-weight-10-against-preferred-5",
    "hard-weight-0-ignores-required-terms",
    "ignore-existing-preferred-skips-plain-pod",
    "ignore-existing-preferred-keeps-them-for-pods-with-terms",
    "preferred-term-other-namespace-skipped",
    "preferred-term-namespace-selector",
    "same-raw-score-everywhere",
    "no-terms-skips-score",
]


@pytest.mark.parametrize(("existing", "pod", "args", "names", "expected"), SCORE_CASES, ids=SCORE_IDS)
def test_score(
    existing: list[Pod],
    pod: Pod,
    args: dict[str, Any] | None,
    names: list[str] | None,
    expected: dict[str, int],
) -> None:
    h = harness(existing, args=args, namespaces=(DATA_NS,))
    assert h.plugin_scores(NAME, pod, names) == expected


# ----------------------------------------------------------------------------- args, events, speed


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": "5"}, "hardPodAffinityWeight"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
        ({"hardWeight": 1}, "hardWeight"),
    ],
    ids=["weight-above-100", "weight-negative", "weight-not-an-integer", "ignore-not-a-bool", "unknown-key"],
)
def test_bad_args_name_the_field(args: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        harness([], args=args)
    assert err.value.path == f"profiles[0].pluginConfig[{NAME}].args.{path}"


def test_events_to_register() -> None:
    plugin = harness([]).profile.plugins[NAME]
    assert set(plugin.events_to_register()) == {POD_ALL, NODE_ADD, NODE_UPDATE}


def test_plain_pod_is_cheap_among_affinity_pods() -> None:
    nodes = [node(f"n{i}", f"z{i % 10}") for i in range(500)]
    existing = [
        placed(
            f"g{i}",
            f"n{i}",
            f"svc{i % 20}",
            required_anti=[term({"app": f"svc{i % 20}"}, HOST)],
            preferred=[(3, term({"app": f"svc{(i + 1) % 20}"}, ZONE))],
        )
        for i in range(0, 500, 5)
    ]
    h = Harness(nodes, existing, plugins=[NAME])
    pod = make_pod("plain", labels={"app": "plain"})
    plugin: Any = h.profile.plugins[NAME]
    rows = h.rows()
    h.scores(pod)  # warm the memo
    state, _, status = h.pre_filter(pod)
    assert status is None and NAME in state.skip_filter
    assert plugin.pre_score(state, pod, rows).code == Code.SKIP
    n = 1000
    best = float("inf")
    for _ in range(3):  # the best batch, so a busy machine does not fail the test
        t0 = time.perf_counter()
        for _ in range(n):
            state, _, _ = h.pre_filter(pod)
            plugin.pre_score(state, pod, rows)
        best = min(best, (time.perf_counter() - t0) / n)
    assert best < 50e-6, best
