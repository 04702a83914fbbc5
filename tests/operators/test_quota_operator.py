"""The ElasticQuota operator: figures as the reference controllers write them (Koordinator's
status.used and runtime, request, child-request and non-preemptible request/used annotations,
scheduler-plugins' status.used of Running pods),
written only when they change, a condition and one event for a quota with a problem, and sums the
facts keep one pod event at a time."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import pytest_asyncio

from koordpy.api.elasticquota import (
    KOORDINATOR_GROUP,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    LABEL_PREEMPTIBLE,
    LABEL_QUOTA_NAME,
    X_K8S_GROUP,
)
from koordpy.kubeapi.client import JSON
from koordpy.kubeapi.informer import ADD, DELETE, UPDATE
from koordpy.quota.tree import (
    MIN_EXCEEDS_PARENT,
    QUOTA_CYCLE,
    UNKNOWN_PARENT,
    QuotaProblem,
    build_namespace_quotas,
    build_quota_tree,
)
from koordpy.status.quota import (
    ANNOTATION_CHILD_REQUEST,
    ANNOTATION_NON_PREEMPTIBLE_REQUEST,
    ANNOTATION_NON_PREEMPTIBLE_USED,
    ANNOTATION_REQUEST,
    ANNOTATION_RUNTIME,
    VALID,
    QuotaStatus,
    QuotaSums,
    koordinator_statuses,
    namespace_statuses,
    parse_quotas,
    quota_patch,
)
from operators.facts import ClusterFacts
from operators.quota import QuotaController, QuotaKey
from tests.operators.fakes import FakeApi, merge_patch, settle

SIGS, X_K8S = KOORDINATOR_GROUP, X_K8S_GROUP
NOW = 1_700_000_000.0


# ---------------------------------------------------------------------------------------------- objects
def quota(
    name: str,
    namespace: str = "default",
    *,
    group: str = SIGS,
    min: dict[str, Any] | None = None,
    max: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    created: str = "2024-01-01T00:00:00Z",
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": labels or {},
            "annotations": annotations or {},
            "creationTimestamp": created,
            "generation": 1,
        },
        "spec": {k: v for k, v in (("min", min), ("max", max)) if v is not None},
    }
    if status is not None:
        obj["status"] = status
    return obj


def pod(
    name: str,
    namespace: str = "default",
    *,
    quota: str | None = None,
    node: str = "",
    phase: str = "Pending",
    non_preemptible: bool = False,
    **requests: str,
) -> dict[str, Any]:
    resources = {k.replace("_", "/").replace("nvidia/", "nvidia.com/"): v for k, v in requests.items()}
    labels = {LABEL_QUOTA_NAME: quota} if quota else {}
    if non_preemptible:
        labels[LABEL_PREEMPTIBLE] = "false"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": labels,
        },
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": resources}}],
            **({"nodeName": node} if node else {}),
        },
        "status": {"phase": phase},
    }


def node(name: str, **allocatable: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {}},
        "status": {"allocatable": dict(allocatable)},
    }


class Feed:
    """Pod and node events into a ClusterFacts, each with the object it replaces."""

    def __init__(self, facts: ClusterFacts) -> None:
        self.facts = facts
        self.pods: dict[str, dict[str, Any]] = {}

    def pod(self, obj: dict[str, Any], action: str | None = None) -> None:
        uid = obj["metadata"]["uid"]
        old = self.pods.get(uid)
        action = action or (UPDATE if old is not None else ADD)
        self.facts.on_pod(action, obj, old)
        if action == DELETE:
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = obj

    def node(self, obj: dict[str, Any], action: str = ADD) -> None:
        self.facts.on_node(action, obj, None)


def facts_of(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> ClusterFacts:
    facts = ClusterFacts()
    feed = Feed(facts)
    for n in nodes:
        feed.node(n)
    for p in pods:
        feed.pod(p)
    return facts


def koordinator(quotas: list[dict[str, Any]], facts: ClusterFacts) -> dict[str, QuotaStatus]:
    tree = build_quota_tree(parse_quotas(quotas))
    return koordinator_statuses(tree, facts.quota_sums, facts.allocatable_total())


TEAMS = [
    quota("team-a", min={"cpu": 2}, max={"cpu": 8}),
    quota("team-b", min={"cpu": 6}, max={"cpu": 8}),
]
NODES = [node("n1", cpu="4", memory="16Gi"), node("n2", cpu="4", memory="16Gi")]
BORROWED = [pod(f"a-{i}", quota="team-a", node=f"n{1 + i // 2}", phase="Running", cpu="2") for i in range(4)]
B_ARRIVES = [pod(f"b-{i}", quota="team-b", cpu="2") for i in range(3)]


# ---------------------------------------------------------------------------------------------- Koordinator
# (quotas, pods, namespace/name -> (used, runtime, request) in cores)
# Worked through Koordinator's runtime split (runtime_quota_calculator.go): a quota asking no more
# than its min gets what it asks; what is left goes to those asking more, by shared weight.
KOORDINATOR_CASES: dict[
    str, tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, tuple[int, int, int]]]
] = {
    "team-a borrows what idle team-b leaves": (
        TEAMS,
        BORROWED,
        {"default/team-a": (8, 8, 8), "default/team-b": (0, 0, 0)},
    ),
    "team-b asks for its min: team-a's runtime falls back to its own": (
        TEAMS,
        BORROWED + B_ARRIVES,
        {"default/team-a": (8, 2, 8), "default/team-b": (0, 6, 6)},
    ),
    "a finished pod counts nowhere": (
        TEAMS,
        [pod("a-0", quota="team-a", node="n1", phase="Succeeded", cpu="2")],
        {"default/team-a": (0, 0, 0), "default/team-b": (0, 0, 0)},
    ),
}


@pytest.mark.parametrize(
    ("quotas", "pods", "expected"), KOORDINATOR_CASES.values(), ids=KOORDINATOR_CASES.keys()
)
def test_koordinator_figures_follow_the_runtime_split(
    quotas: list[dict[str, Any]], pods: list[dict[str, Any]], expected: dict[str, tuple[int, int, int]]
) -> None:
    got = koordinator(quotas, facts_of(pods, NODES))
    for key, (used, runtime, request) in expected.items():
        status = got[key]
        assert (status.used, status.runtime, status.request) == (
            {"cpu": used * 1000},
            {"cpu": runtime * 1000},
            {"cpu": request * 1000},
        ), key


def test_a_parent_quota_uses_what_its_children_use() -> None:
    quotas = [
        quota("research", min={"cpu": 8}, max={"cpu": 8}, labels={LABEL_IS_PARENT: "true"}),
        quota("vision", min={"cpu": 4}, max={"cpu": 8}, labels={LABEL_PARENT: "research"}),
        quota("speech", min={"cpu": 4}, max={"cpu": 8}, labels={LABEL_PARENT: "research"}),
    ]
    pods = [
        pod("v", quota="vision", node="n1", cpu="3"),
        pod("s", quota="speech", node="n2", cpu="1"),
        pod("s-pending", quota="speech", cpu="1"),
    ]
    got = koordinator(quotas, facts_of(pods, NODES))
    assert got["default/research"].used == {"cpu": 4000}
    assert got["default/research"].request == {"cpu": 5000}
    assert got["default/vision"].used == {"cpu": 3000}
    assert got["default/speech"].used == {"cpu": 1000}
    assert got["default/speech"].request == {"cpu": 2000}


def test_pods_join_by_label_then_by_the_quota_named_after_their_namespace() -> None:
    quotas = [quota("ml", namespace="ml", min={"cpu": 1}, max={"cpu": 8})]
    pods = [
        pod("unlabelled", namespace="ml", node="n1", cpu="1"),
        pod("labelled", namespace="web", quota="ml", node="n1", cpu="2"),
        pod("elsewhere", namespace="web", node="n1", cpu="4"),
        pod("ghost", namespace="ml", quota="ghost", node="n2", cpu="4"),
    ]
    got = koordinator(quotas, facts_of(pods, NODES))
    assert got["ml/ml"].used == {"cpu": 3000}


# Koordinator's other annotations (updateElasticQuotaStatusIfChanged): child-request is what the
# quota's own pods and its children's limited requests add up to (recursiveUpdateGroupTreeWith-
# DeltaRequest's ChildRequest), before a quota that lends nothing raises its request to its min;
# the non-preemptible request and used are the sums over the pods labelled preemptible "false",
# added to the pod's quota and every ancestor. (quotas, pods, namespace/name -> (request,
# child-request, non-preemptible request, non-preemptible used) in cores)
TREE = [
    quota("research", min={"cpu": 8}, max={"cpu": 8}, labels={LABEL_IS_PARENT: "true"}),
    quota("vision", min={"cpu": 4}, max={"cpu": 6}, labels={LABEL_PARENT: "research"}),
    quota(
        "speech",
        min={"cpu": 4},
        max={"cpu": 8},
        labels={LABEL_PARENT: "research", LABEL_ALLOW_LENT_RESOURCE: "false"},
    ),
]
MORE_ANNOTATIONS: dict[
    str, tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, tuple[int, int, int, int]]]
] = {
    "a quota that lends nothing asks for its min, its children's request stays what they ask": (
        TREE,
        [pod("s", quota="speech", node="n1", cpu="1")],
        {"default/speech": (4, 1, 0, 0), "default/research": (4, 4, 0, 0)},
    ),
    "a parent's child request is its children's requests capped by their max": (
        TREE,
        [pod(f"v-{i}", quota="vision", cpu="3") for i in range(3)],
        {"default/vision": (9, 9, 0, 0), "default/research": (10, 10, 0, 0)},
    ),
    "non-preemptible pods, pending and placed, up the tree": (
        TREE,
        [
            pod("v-held", quota="vision", node="n1", non_preemptible=True, cpu="2"),
            pod("v-waiting", quota="vision", non_preemptible=True, cpu="1"),
            pod("v-plain", quota="vision", node="n2", cpu="1"),
        ],
        {"default/vision": (4, 4, 3, 2), "default/research": (8, 8, 3, 2), "default/speech": (4, 0, 0, 0)},
    ),
}


@pytest.mark.parametrize(
    ("quotas", "pods", "expected"), MORE_ANNOTATIONS.values(), ids=MORE_ANNOTATIONS.keys()
)
def test_koordinator_child_request_and_non_preemptible_figures(
    quotas: list[dict[str, Any]], pods: list[dict[str, Any]], expected: dict[str, tuple[int, int, int, int]]
) -> None:
    got = koordinator(quotas, facts_of(pods, NODES))
    for key, cores in expected.items():
        status = got[key]
        figures = (
            status.request,
            status.child_request,
            status.non_preemptible_request,
            status.non_preemptible_used,
        )
        assert figures == tuple({"cpu": c * 1000} for c in cores), key


# (quotas, the quota with a problem, its reason, words its message has)
PROBLEMS: dict[str, tuple[list[dict[str, Any]], str, str, list[str]]] = {
    "unknown parent": (
        [quota("orphan", min={"cpu": 1}, max={"cpu": 2}, labels={LABEL_PARENT: "nobody"})],
        "default/orphan",
        UNKNOWN_PARENT,
        ["parent quota nobody does not exist"],
    ),
    "cycle": (
        [
            quota("x", max={"cpu": 2}, labels={LABEL_PARENT: "y", LABEL_IS_PARENT: "true"}),
            quota("y", max={"cpu": 2}, labels={LABEL_PARENT: "x", LABEL_IS_PARENT: "true"}),
        ],
        "default/x",
        QUOTA_CYCLE,
        ["never reaches"],
    ),
    "child's min above its parent's": (
        [
            quota("p", min={"cpu": 2}, max={"cpu": 8}, labels={LABEL_IS_PARENT: "true"}),
            quota("c", min={"cpu": 4}, max={"cpu": 8}, labels={LABEL_PARENT: "p"}),
        ],
        "default/c",
        MIN_EXCEEDS_PARENT,
        ["above parent p's min"],
    ),
    "min above max": (
        [quota("greedy", min={"cpu": 4}, max={"cpu": 2})],
        "default/greedy",
        "InvalidSpec",
        ["min 4 is above max 2"],
    ),
}


@pytest.mark.parametrize(("quotas", "key", "reason", "words"), PROBLEMS.values(), ids=PROBLEMS.keys())
def test_a_quota_with_a_problem_gets_it_and_no_figures(
    quotas: list[dict[str, Any]], key: str, reason: str, words: list[str]
) -> None:
    got = koordinator(quotas, facts_of([], NODES))[key]
    assert got.used is None and got.runtime is None and got.request is None
    assert got.problem is not None and got.problem.reason == reason
    for word in words:
        assert word in got.problem.message


# ------------------------------------------------------------------------------ scheduler-plugins
def test_scheduler_plugins_used_is_the_running_pods_of_the_namespace_with_zeros_for_named_resources() -> None:
    quotas = [
        quota("eq", namespace="team", group=X_K8S, min={"cpu": 2}, max={"cpu": 4, "memory": "8Gi"}),
        quota("idle", namespace="quiet", group=X_K8S, min={"cpu": 2}, max={"cpu": 4, "memory": "8Gi"}),
    ]
    pods = [
        pod("p1", namespace="team", node="n1", phase="Running", cpu="1", memory="1Gi"),
        pod("p2", namespace="team", node="n1", phase="Running", cpu="500m", nvidia_gpu="1"),
        pod("bound-not-running", namespace="team", node="n2", cpu="1"),
        pod("pending", namespace="team", cpu="1"),
        pod("done", namespace="team", node="n2", phase="Succeeded", cpu="1"),
    ]
    facts = facts_of(pods, NODES)
    got = namespace_statuses(build_namespace_quotas(parse_quotas(quotas)), facts.quota_sums)
    assert got["team/eq"] == QuotaStatus(used={"cpu": 1500, "memory": 1 << 30, "nvidia.com/gpu": 1})
    assert got["quiet/idle"] == QuotaStatus(used={"cpu": 0, "memory": 0})


def test_a_second_quota_in_a_namespace_is_reported_not_counted() -> None:
    quotas = [
        quota("first", namespace="team", group=X_K8S, max={"cpu": 4}, created="2024-01-01T00:00:00Z"),
        quota("second", namespace="team", group=X_K8S, max={"cpu": 4}, created="2024-02-01T00:00:00Z"),
    ]
    got = namespace_statuses(build_namespace_quotas(parse_quotas(quotas)), QuotaSums())
    assert got["team/first"].used == {"cpu": 0}
    second = got["team/second"]
    assert second.used is None and second.problem is not None
    assert "already has ElasticQuota first" in second.problem.message


# ---------------------------------------------------------------------------------------------- the patch
# (object, desired, expected annotations patch, expected status patch keys)
PATCHES: dict[str, tuple[dict[str, Any], QuotaStatus, dict[str, str] | None, set[str]]] = {
    "koordinator: written when absent": (
        quota("a"),
        QuotaStatus(used={"cpu": 8000, "memory": 0}, runtime={"cpu": 2000}, request={"cpu": 8000}),
        {ANNOTATION_RUNTIME: '{"cpu":"2"}', ANNOTATION_REQUEST: '{"cpu":"8"}'},
        {"used"},
    ),
    "koordinator: equal once zeros are removed, in other units": (
        quota(
            "a",
            annotations={ANNOTATION_RUNTIME: '{"cpu":"2000m","memory":"0"}', ANNOTATION_REQUEST: '{"cpu":8}'},
            status={"used": {"cpu": "8"}},
        ),
        QuotaStatus(used={"cpu": 8000, "memory": 0}, runtime={"cpu": 2000}, request={"cpu": 8000}),
        None,
        set(),
    ),
    "koordinator: a malformed annotation is written again": (
        quota(
            "a",
            annotations={ANNOTATION_RUNTIME: "not json", ANNOTATION_REQUEST: '{"cpu":"8"}'},
            status={"used": {"cpu": "8"}},
        ),
        QuotaStatus(used={"cpu": 8000}, runtime={"cpu": 2000}, request={"cpu": 8000}),
        {ANNOTATION_RUNTIME: '{"cpu":"2"}'},
        set(),
    ),
    "koordinator: child request and non-preemptible figures, each where it differs": (
        quota(
            "a",
            annotations={
                ANNOTATION_RUNTIME: '{"cpu":"2"}',
                ANNOTATION_REQUEST: '{"cpu":"8"}',
                ANNOTATION_CHILD_REQUEST: '{"cpu":"6"}',
                ANNOTATION_NON_PREEMPTIBLE_REQUEST: '{"cpu":"1"}',
            },
            status={"used": {"cpu": "8"}},
        ),
        QuotaStatus(
            used={"cpu": 8000},
            runtime={"cpu": 2000},
            request={"cpu": 8000},
            child_request={"cpu": 8000},
            non_preemptible_request={"cpu": 1000},
            non_preemptible_used={"cpu": 1000},
        ),
        {ANNOTATION_CHILD_REQUEST: '{"cpu":"8"}', ANNOTATION_NON_PREEMPTIBLE_USED: '{"cpu":"1"}'},
        set(),
    ),
    "koordinator: no non-preemptible pods, nothing written over nothing": (
        quota(
            "a",
            annotations={
                ANNOTATION_RUNTIME: '{"cpu":"2"}',
                ANNOTATION_REQUEST: '{"cpu":"8"}',
                ANNOTATION_CHILD_REQUEST: '{"cpu":"8"}',
            },
            status={"used": {"cpu": "8"}},
        ),
        QuotaStatus(
            used={"cpu": 8000},
            runtime={"cpu": 2000},
            request={"cpu": 8000},
            child_request={"cpu": 8000},
            non_preemptible_request={"cpu": 0},
            non_preemptible_used={"cpu": 0},
        ),
        None,
        set(),
    ),
    "scheduler-plugins: a zero the status lacks is written (semantic equality)": (
        quota("eq", group=X_K8S, status={"used": {"cpu": "1"}}),
        QuotaStatus(used={"cpu": 1000, "memory": 0}),
        None,
        {"used"},
    ),
    "scheduler-plugins: equal in other units": (
        quota("eq", group=X_K8S, status={"used": {"cpu": "1000m", "memory": "0"}}),
        QuotaStatus(used={"cpu": 1000, "memory": 0}),
        None,
        set(),
    ),
}


@pytest.mark.parametrize(("obj", "desired", "annotations", "status"), PATCHES.values(), ids=PATCHES.keys())
def test_only_what_differs_is_patched(
    obj: dict[str, Any], desired: QuotaStatus, annotations: dict[str, str] | None, status: set[str]
) -> None:
    patch = quota_patch(obj, desired, NOW)
    assert patch.annotations == annotations
    assert set(patch.status or {}) == status


def test_a_problem_becomes_a_condition_reported_once_and_goes_when_fixed() -> None:
    problem = QuotaProblem(
        "default/c", MIN_EXCEEDS_PARENT, "quota c: min of cpu 4 ... above parent p's min 2"
    )
    obj = quota("c")
    first = quota_patch(obj, QuotaStatus(problem=problem), NOW)
    assert first.reported == (problem,)
    assert first.status is not None
    (condition,) = first.status["conditions"]
    assert condition["type"] == VALID and condition["status"] == "False"
    assert (condition["reason"], condition["message"]) == (problem.reason, problem.message)
    assert condition["observedGeneration"] == 1
    written = merge_patch(obj, {"status": first.status})
    again = quota_patch(written, QuotaStatus(problem=problem), NOW + 60)
    assert not again and again.reported == ()
    other = QuotaProblem("default/c", UNKNOWN_PARENT, "quota c: parent quota p does not exist")
    changed = quota_patch(written, QuotaStatus(problem=other), NOW + 60)
    assert changed.reported == (other,)
    assert changed.status is not None
    # still False: the transition time stays that of the first problem
    assert changed.status["conditions"][0]["lastTransitionTime"] == condition["lastTransitionTime"]
    fixed = quota_patch(written, QuotaStatus(used={"cpu": 0}, runtime={}, request={}), NOW + 120)
    assert fixed.status is not None and fixed.status["conditions"] is None
    assert fixed.reported == ()


# ---------------------------------------------------------------------------------------------- the facts
def test_the_sums_follow_each_pod_event() -> None:
    facts = ClusterFacts()
    told: list[str] = []
    facts.add_quota_listener(told.append)
    feed = Feed(facts)
    pair = ("default", "team-a")
    feed.pod(pod("p", quota="team-a", cpu="2"))
    assert facts.quota_sums.request[pair] == {"cpu": 2000}
    assert pair not in facts.quota_sums.used
    feed.pod(pod("p", quota="team-a", node="n1", cpu="2"))
    assert facts.quota_sums.used[pair] == {"cpu": 2000}
    told.clear()
    # a status write that changes nothing counted tells nobody
    unchanged = pod("p", quota="team-a", node="n1", cpu="2")
    unchanged["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    feed.pod(unchanged)
    assert told == []
    feed.pod(pod("p", quota="team-a", node="n1", phase="Running", cpu="2"))
    assert facts.quota_sums.running["default"] == {"cpu": 2000}
    assert told == [X_K8S]
    feed.pod(pod("p", quota="team-b", node="n1", phase="Running", cpu="2"))
    assert pair not in facts.quota_sums.request
    assert facts.quota_sums.request[("default", "team-b")] == {"cpu": 2000}
    feed.pod(pod("p", quota="team-b", node="n1", phase="Succeeded", cpu="2"))
    assert facts.quota_sums.request == {} and facts.quota_sums.running == {}


def test_the_non_preemptible_sums_follow_the_label() -> None:
    facts = ClusterFacts()
    told: list[str] = []
    facts.add_quota_listener(told.append)
    feed = Feed(facts)
    pair = ("default", "team-a")
    feed.pod(pod("p", quota="team-a", node="n1", cpu="2"))
    assert pair not in facts.quota_sums.np_request
    told.clear()
    # the label put on later: the pod now counts as non-preemptible, and the figures change
    feed.pod(pod("p", quota="team-a", node="n1", non_preemptible=True, cpu="2"))
    assert facts.quota_sums.np_request[pair] == facts.quota_sums.np_used[pair] == {"cpu": 2000}
    assert told == [SIGS]
    feed.pod(pod("p", quota="team-a", node="n1", non_preemptible=True, cpu="2"), DELETE)
    assert facts.quota_sums.np_request == {} and facts.quota_sums.np_used == {}


def test_the_allocatable_total_follows_the_nodes_not_their_heartbeats() -> None:
    facts = ClusterFacts()
    told: list[str] = []
    facts.add_quota_listener(told.append)
    facts.on_node(ADD, node("n1", cpu="4"), None)
    facts.on_node(ADD, node("n2", cpu="4", memory="1Gi"), None)
    assert facts.allocatable_total() == {"cpu": 8000, "memory": 1 << 30}
    told.clear()
    beat = node("n1", cpu="4")
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    facts.on_node(UPDATE, beat, None)
    assert told == []
    facts.on_node(UPDATE, node("n1", cpu="2"), None)
    assert facts.allocatable_total()["cpu"] == 6000 and told == [SIGS]
    facts.on_node(DELETE, node("n2", cpu="4", memory="1Gi"), None)
    assert facts.allocatable_total() == {"cpu": 2000, "memory": 0}


# --------------------------------------------------------------------------------- the controller
class QuotaApi(FakeApi):
    """FakeApi, with the annotations of a patch of the object applied, and Events taken."""

    def __init__(self, *, groups_without_status: tuple[str, ...] = ()) -> None:
        super().__init__(groups_without_status=groups_without_status)
        self.events: list[dict[str, Any]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        if method == "POST":
            self.calls.append((method, path, copy.deepcopy(body)))
            self.events.append(copy.deepcopy(body))
            return dict(body)
        written = await super().request(method, path, query=query, body=body, content_type=content_type)
        annotations = (body.get("metadata") or {}).get("annotations")
        if annotations and not path.endswith("/status"):
            stored = self.objects[path]
            stored["metadata"]["annotations"] = merge_patch(
                stored["metadata"].get("annotations") or {}, annotations
            )
            written = copy.deepcopy(stored)
        return written


def path_of(key: QuotaKey) -> str:
    return key.path


@dataclass
class Operator:
    api: QuotaApi
    facts: ClusterFacts
    feed: Feed
    controller: QuotaController

    def create(self, obj: dict[str, Any]) -> QuotaKey:
        meta = obj["metadata"]
        key = QuotaKey(obj["apiVersion"].split("/")[0], meta["namespace"], meta["name"])
        self.controller.quota_changed(key, self.api.put(key.path, obj))
        return key

    def stored(self, key: QuotaKey) -> dict[str, Any]:
        return self.api.objects[key.path]


@contextlib.asynccontextmanager
async def operator(*, groups_without_status: tuple[str, ...] = (SIGS,)) -> AsyncIterator[Operator]:
    api, facts = QuotaApi(groups_without_status=groups_without_status), ClusterFacts()
    controller = QuotaController(api, facts, min_interval=0, instance="koordpy-test")
    task = asyncio.create_task(controller.run())
    try:
        yield Operator(api, facts, Feed(facts), controller)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest_asyncio.fixture(loop_scope="function")
async def op() -> AsyncIterator[Operator]:
    async with operator() as o:
        yield o


async def test_nothing_is_written_before_the_facts_have_synced(op: Operator) -> None:
    for n in NODES:
        op.feed.node(n)
    op.feed.pod(BORROWED[0])
    key = op.create(TEAMS[0])
    await settle()
    assert op.api.patches() == []
    op.facts.synced.set()
    await settle()
    assert op.stored(key)["status"]["used"] == {"cpu": "2"}


async def test_an_idle_koordinator_quota_needs_no_write(op: Operator) -> None:
    """Koordinator compares with zeros removed: all zeros equal nothing written."""
    for n in NODES:
        op.feed.node(n)
    op.create(TEAMS[0])
    op.facts.synced.set()
    await settle()
    assert op.api.patches() == []


async def test_koordinator_status_and_annotations_go_to_the_object_and_follow_reclaim(op: Operator) -> None:
    for n in NODES:
        op.feed.node(n)
    for p in BORROWED:
        op.feed.pod(p)
    a, b = (op.create(q) for q in TEAMS)
    op.facts.synced.set()
    await settle()
    stored = op.stored(a)
    assert stored["status"]["used"] == {"cpu": "8"}
    assert orjson.loads(stored["metadata"]["annotations"][ANNOTATION_RUNTIME]) == {"cpu": "8"}
    assert orjson.loads(stored["metadata"]["annotations"][ANNOTATION_REQUEST]) == {"cpu": "8"}
    assert orjson.loads(stored["metadata"]["annotations"][ANNOTATION_CHILD_REQUEST]) == {"cpu": "8"}
    # no non-preemptible pod: zeros, not written over nothing
    assert ANNOTATION_NON_PREEMPTIBLE_REQUEST not in stored["metadata"]["annotations"]
    # no status subresource: one patch of the object after the /status that is not there
    assert len(op.api.patches(a.path)) == 1
    for p in B_ARRIVES:
        op.feed.pod(p)
    await settle()
    assert orjson.loads(op.stored(a)["metadata"]["annotations"][ANNOTATION_RUNTIME]) == {"cpu": "2"}
    assert orjson.loads(op.stored(b)["metadata"]["annotations"][ANNOTATION_RUNTIME]) == {"cpu": "6"}
    assert orjson.loads(op.stored(b)["metadata"]["annotations"][ANNOTATION_REQUEST]) == {"cpu": "6"}
    # nothing placed yet: all zeros, which Koordinator does not write over nothing
    assert "status" not in op.stored(b)


async def test_nothing_is_written_again_when_nothing_changed(op: Operator) -> None:
    for n in NODES:
        op.feed.node(n)
    op.feed.pod(BORROWED[0])
    a = op.create(TEAMS[0])
    op.facts.synced.set()
    await settle()
    writes = len(op.api.patches())
    assert writes
    # kopf's event of the write, then one change of nothing counted
    op.controller.quota_changed(a, copy.deepcopy(op.stored(a)))
    op.feed.pod(pod("other", namespace="web", node="n1", cpu="1"))
    op.feed.pod(pod("other", namespace="web", node="n1", cpu="1"))
    await settle()
    await op.controller.reconcile(SIGS)
    assert len(op.api.patches()) == writes


async def test_scheduler_plugins_status_goes_to_the_status_subresource() -> None:
    async with operator() as op:
        key = op.create(quota("eq", namespace="team", group=X_K8S, min={"cpu": 1}, max={"cpu": 4}))
        op.feed.pod(pod("p", namespace="team", node="n1", phase="Running", cpu="1"))
        op.facts.synced.set()
        await settle()
        assert op.api.patches(key.status_path) == [{"status": {"used": {"cpu": "1"}}}]
        assert op.api.patches(key.path) == []
        assert op.api.events == []


async def test_a_bad_quota_gets_its_condition_and_one_event_until_fixed(op: Operator) -> None:
    parent = quota("p", min={"cpu": 2}, max={"cpu": 8}, labels={LABEL_IS_PARENT: "true"})
    child = quota("c", min={"cpu": 4}, max={"cpu": 8}, labels={LABEL_PARENT: "p"})
    op.create(parent)
    c = op.create(child)
    op.facts.synced.set()
    await settle()
    (condition,) = op.stored(c)["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        VALID,
        "False",
        MIN_EXCEEDS_PARENT,
    )
    assert "above parent p's min" in condition["message"]
    (event,) = op.api.events
    assert (event["type"], event["reason"], event["note"]) == (
        "Warning",
        MIN_EXCEEDS_PARENT,
        condition["message"],
    )
    assert event["regarding"] == {
        "apiVersion": f"{SIGS}/v1alpha1",
        "kind": "ElasticQuota",
        "namespace": "default",
        "name": "c",
        "uid": "uid-default-c",
    }
    assert event["reportingController"] == "koordpy" and event["reportingInstance"] == "koordpy-test"
    # a problem the condition already says is not reported again
    op.controller.quota_changed(c, copy.deepcopy(op.stored(c)))
    await settle()
    assert len(op.api.events) == 1
    # fixed: the condition goes, figures come
    fixed = copy.deepcopy(op.stored(c))
    fixed["spec"]["min"] = {"cpu": 2}
    op.controller.quota_changed(c, op.api.put(c.path, fixed))
    await settle()
    assert "conditions" not in op.stored(c)["status"]
    assert len(op.api.events) == 1


async def test_a_deleted_quota_is_forgotten(op: Operator) -> None:
    a = op.create(TEAMS[0])
    op.facts.synced.set()
    await settle()
    op.controller.quota_changed(a, None)
    del op.api.objects[a.path]
    writes = len(op.api.calls)
    op.feed.pod(pod("p", quota="team-a", node="n1", cpu="1"))
    await settle()
    assert len(op.api.calls) == writes
