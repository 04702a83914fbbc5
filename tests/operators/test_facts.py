"""ClusterFacts: member pods indexed by PodGroup and node labels by node, kept from informer
events, and who hears of which change."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.podgroup import GANG_NAME_ANNOTATION, SIGS_POD_LABEL, X_K8S_POD_LABEL
from koordpy.kubeapi.informer import ADD, DELETE, UPDATE
from operators.facts import ClusterFacts
from operators.podgroup import GroupKey
from tests.operators.fakes import NAMESPACE, node, pod

SIGS = "scheduling.sigs.k8s.io"
X_K8S = "scheduling.x-k8s.io"
A = GroupKey(SIGS, NAMESPACE, "a")
B = GroupKey(SIGS, NAMESPACE, "b")
X_A = GroupKey(X_K8S, NAMESPACE, "a")
IN_A = {SIGS_POD_LABEL: "a"}
IN_B = {SIGS_POD_LABEL: "b"}


def recorded(facts: ClusterFacts) -> list[Any]:
    heard: list[Any] = []
    facts.add_group_listener(heard.append)
    facts.add_nodes_listener(lambda: heard.append("nodes"))
    return heard


def members(facts: ClusterFacts, key: GroupKey) -> dict[str, tuple[str, str]]:
    return {p.name: (p.node_name, p.phase) for p in facts.members(key)}


# (events in order, members expected by group afterwards, groups told of a change, in order)
POD_CASES: dict[str, tuple[list[tuple[str, dict[str, Any]]], dict[GroupKey, dict[str, Any]], list[Any]]] = {
    "a pod naming a group joins it": (
        [(ADD, pod("p0", IN_A))],
        {A: {"p0": ("", "Pending")}},
        [A],
    ),
    "a pod of no group is nobody's member": (
        [(ADD, pod("lone", {"app": "web"}))],
        {A: {}},
        [],
    ),
    "binding and running change the member": (
        [
            (ADD, pod("p0", IN_A)),
            (UPDATE, pod("p0", IN_A, node="n1")),
            (UPDATE, pod("p0", IN_A, node="n1", phase="Running")),
        ],
        {A: {"p0": ("n1", "Running")}},
        [A, A, A],
    ),
    "an update of nothing the status counts tells nobody": (
        [
            (ADD, pod("p0", IN_A, node="n1", phase="Running")),
            (
                UPDATE,
                pod("p0", IN_A, node="n1", phase="Running", conditions=[{"type": "Ready", "status": "True"}]),
            ),
            (UPDATE, pod("p0", {**IN_A, "extra": "label"}, node="n1", phase="Running")),
        ],
        {A: {"p0": ("n1", "Running")}},
        [A],
    ),
    "a new owner changes the member": (
        [(ADD, pod("p0", IN_A)), (UPDATE, pod("p0", IN_A, owner="other"))],
        {A: {"p0": ("", "Pending")}},
        [A, A],
    ),
    "a pod that names another group moves there": (
        [(ADD, pod("p0", IN_A)), (ADD, pod("p1", IN_A)), (UPDATE, pod("p0", IN_B))],
        {A: {"p1": ("", "Pending")}, B: {"p0": ("", "Pending")}},
        [A, A, A, B],
    ),
    "the same name in the other API group is another group": (
        [(ADD, pod("p0", IN_A)), (UPDATE, pod("p0", {X_K8S_POD_LABEL: "a"}))],
        {A: {}, X_A: {"p0": ("", "Pending")}},
        [A, A, X_A],
    ),
    "a gang annotation counts toward the sigs PodGroup of that name": (
        [(ADD, pod("p0", annotations={GANG_NAME_ANNOTATION: "a"}))],
        {A: {"p0": ("", "Pending")}, X_A: {}},
        [A],
    ),
    "a pod that drops its label leaves": (
        [(ADD, pod("p0", IN_A)), (UPDATE, pod("p0", {}))],
        {A: {}},
        [A, A],
    ),
    "a deleted pod leaves": (
        [(ADD, pod("p0", IN_A)), (ADD, pod("p1", IN_A)), (DELETE, pod("p0", IN_A))],
        {A: {"p1": ("", "Pending")}},
        [A, A, A],
    ),
    "a deletion is taken from what was known, not from the labels of the last object": (
        [(ADD, pod("p0", IN_A)), (DELETE, pod("p0", IN_B))],
        {A: {}, B: {}},
        [A, A],
    ),
    "a finished pod stays a member with its phase": (
        [
            (ADD, pod("p0", IN_A, node="n1", phase="Running")),
            (UPDATE, pod("p0", IN_A, node="n1", phase="Succeeded")),
            (ADD, pod("p1", IN_A, node="n2", phase="Failed")),
        ],
        {A: {"p0": ("n1", "Succeeded"), "p1": ("n2", "Failed")}},
        [A, A, A],
    ),
    "a pod recreated under its name is a new member": (
        [(ADD, pod("p0", IN_A)), (DELETE, pod("p0", IN_A)), (ADD, pod("p0", IN_A, uid="uid-again"))],
        {A: {"p0": ("", "Pending")}},
        [A, A, A],
    ),
    "deleting a pod never seen tells nobody": (
        [(DELETE, pod("ghost", IN_A))],
        {A: {}},
        [],
    ),
}


@pytest.mark.parametrize(("events", "expected", "told"), POD_CASES.values(), ids=POD_CASES.keys())
def test_pod_events_keep_members_by_group(
    events: list[tuple[str, dict[str, Any]]], expected: dict[GroupKey, dict[str, Any]], told: list[Any]
) -> None:
    facts = ClusterFacts()
    heard = recorded(facts)
    last: dict[str, dict[str, Any]] = {}
    for action, obj in events:
        name = obj["metadata"]["name"]
        facts.on_pod(action, obj, last.get(name))
        if action == DELETE:
            last.pop(name, None)
        else:
            last[name] = obj
    assert {key: members(facts, key) for key in expected} == expected
    assert heard == told


def test_a_member_keeps_only_what_the_status_counts() -> None:
    facts = ClusterFacts()
    facts.on_pod(ADD, pod("p0", IN_A, node="n1", phase="Running", conditions=[{"type": "Ready"}]), None)
    (member,) = facts.members(A)
    assert member.raw == {
        "metadata": {
            "namespace": NAMESPACE,
            "name": "p0",
            "uid": "uid-p0",
            "ownerReferences": [{"kind": "PyTorchJob", "name": "train", "uid": "uid-train"}],
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    assert facts.group_of_pod("uid-p0") == A


SPINE = "net/spine"
BLOCK = "net/block"

# (events in order, node labels expected afterwards, how many times the node listeners heard)
NODE_CASES: dict[str, tuple[list[tuple[str, dict[str, Any]]], dict[str, dict[str, str]], int]] = {
    "a new node is known with its labels": (
        [(ADD, node("n1", {SPINE: "s1"}))],
        {"n1": {SPINE: "s1"}},
        1,
    ),
    "heartbeats that leave the labels alone mark nothing": (
        [
            (ADD, node("n1", {SPINE: "s1"})),
            (UPDATE, node("n1", {SPINE: "s1"}, heartbeat="2024-01-01T00:00:10Z")),
            (UPDATE, node("n1", {SPINE: "s1"}, heartbeat="2024-01-01T00:00:20Z")),
        ],
        {"n1": {SPINE: "s1"}},
        1,
    ),
    "a relabelled node is noticed": (
        [(ADD, node("n1", {SPINE: "s1"})), (UPDATE, node("n1", {SPINE: "s2", BLOCK: "b4"}))],
        {"n1": {SPINE: "s2", BLOCK: "b4"}},
        2,
    ),
    "a label taken off is noticed": (
        [(ADD, node("n1", {SPINE: "s1", BLOCK: "b1"})), (UPDATE, node("n1", {SPINE: "s1"}))],
        {"n1": {SPINE: "s1"}},
        2,
    ),
    "a deleted node is forgotten": (
        [(ADD, node("n1", {SPINE: "s1"})), (ADD, node("n2", {})), (DELETE, node("n1", {SPINE: "s1"}))],
        {"n2": {}},
        3,
    ),
    "deleting a node never seen marks nothing": (
        [(DELETE, node("ghost", {}))],
        {},
        0,
    ),
    "an update of a node not seen before adds it": (
        [(UPDATE, node("n1", {SPINE: "s1"}))],
        {"n1": {SPINE: "s1"}},
        1,
    ),
}


@pytest.mark.parametrize(("events", "expected", "marks"), NODE_CASES.values(), ids=NODE_CASES.keys())
def test_node_events_keep_labels_by_node(
    events: list[tuple[str, dict[str, Any]]], expected: dict[str, dict[str, str]], marks: int
) -> None:
    facts = ClusterFacts()
    heard = recorded(facts)
    for action, obj in events:
        facts.on_node(action, obj, None)
    assert {name: dict(labels) for name, labels in facts.node_labels().items()} == expected
    assert heard == ["nodes"] * marks


def test_removed_listeners_hear_nothing() -> None:
    facts = ClusterFacts()
    groups: list[GroupKey] = []
    marks: list[None] = []

    def mark() -> None:
        marks.append(None)

    facts.add_group_listener(groups.append)
    facts.add_nodes_listener(mark)
    facts.remove_group_listener(groups.append)
    facts.remove_nodes_listener(mark)
    facts.on_pod(ADD, pod("p0", IN_A), None)
    facts.on_node(ADD, node("n1", {}), None)
    assert groups == [] and marks == []
    assert not facts.synced.is_set()
