"""Gang annotations read as koord-scheduler reads them (Gang.tryInitByPodConfig and
tryInitByPodGroup in pkg/scheduler/plugins/coscheduling/core/gang.go, with GetGangMinNumFromPod,
GetGangWaitTime, GetGangMatchPolicy, StringToGangGroupSlice and GetNetworkTopologySpec): where it
falls back to a default, so does koordpy, and says so (a Fallback on the spec, a Warning event on
each member, a condition on the PodGroup). The expected values are koord-scheduler's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordpy.api import names
from koordpy.api.errors import SpecError
from koordpy.api.podgroup import SIGS_GROUP, PodGroup
from koordpy.cli import main
from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.plugins.coscheduling.gang import (
    NON_STRICT,
    ONCE_SATISFIED,
    ONLY_WAITING,
    STRICT,
    WAITING_AND_RUNNING,
    GangSpec,
    member_order_key,
    membership,
    spec_from_pod,
    spec_from_podgroup,
)
from koordpy.plugins.coscheduling.registry import GangRegistry
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import build_world
from koordpy.status.gang_annotations import GatherRule, podgroup_fallbacks
from koordpy.status.podgroup import ANNOTATIONS_DEFAULTED, with_defaulted_condition
from operators.podgroup import GroupKey
from tests.builders import make_pod
from tests.operators.fakes import NAMESPACE, settle
from tests.operators.test_controllers import podgroup, podgroup_path, running

G = "gang.scheduling.koordinator.sh"
MUST_BLOCK = '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}'


def spec_of(annotations: dict[str, str], policy: str = ONCE_SATISFIED, labels: Any = None) -> GangSpec:
    """The spec a pod of gang ns/g configures, min-available 3 unless the row says otherwise."""
    full = {f"{G}/name": "g", f"{G}/min-available": "3"}
    full.update({f"{G}/{k}" if "/" not in k else k: v for k, v in annotations.items()})
    pod = make_pod("p", namespace="ns", labels=labels or {}, annotations=full)
    m = membership(pod)
    assert m is not None
    return spec_from_pod(pod, m, policy)


def fallback_keys(spec: GangSpec) -> list[str]:
    return [f.key.rsplit("/", 1)[-1].split(" ")[0] for f in spec.fallbacks]


# (annotation values, spec field, koord-scheduler's value, the annotation warned about or None)
ROWS: dict[str, tuple[dict[str, str], str, Any, str | None]] = {
    # mode: "" is Strict; anything but Strict and NonStrict falls back to Strict
    "mode-strict": ({"mode": "Strict"}, "mode", STRICT, None),
    "mode-non-strict": ({"mode": "NonStrict"}, "mode", NON_STRICT, None),
    "mode-empty-is-strict": ({"mode": ""}, "mode", STRICT, None),
    "mode-lower-case-strict-is-strict-anyway": ({"mode": "strict"}, "mode", STRICT, None),
    "mode-upper-case-strict-is-strict-anyway": ({"mode": "STRICT"}, "mode", STRICT, None),
    "mode-lower-case-nonstrict-falls-back-to-strict": ({"mode": "nonstrict"}, "mode", STRICT, "mode"),
    "mode-dashed-non-strict-falls-back-to-strict": ({"mode": "Non-Strict"}, "mode", STRICT, "mode"),
    "mode-unknown-falls-back-to-strict": ({"mode": "loose"}, "mode", STRICT, "mode"),
    # match-policy: unknown values fall back to the default policy (once-satisfied here)
    "policy-only-waiting": ({"match-policy": "only-waiting"}, "match_policy", ONLY_WAITING, None),
    "policy-camel-case-of-the-default-is-the-default": (
        {"match-policy": "OnceSatisfied"},
        "match_policy",
        ONCE_SATISFIED,
        None,
    ),
    "policy-camel-case-of-another-falls-back-to-the-default": (
        {"match-policy": "OnlyWaiting"},
        "match_policy",
        ONCE_SATISFIED,
        "match-policy",
    ),
    "policy-unknown-falls-back-to-the-default": (
        {"match-policy": "sometimes"},
        "match_policy",
        ONCE_SATISFIED,
        "match-policy",
    ),
    "policy-alias-key-read-when-the-main-one-is-empty": (
        {"pod-group.scheduling.sigs.k8s.io/match-policy": "waiting-and-running"},
        "match_policy",
        WAITING_AND_RUNNING,
        None,
    ),
    "policy-main-key-wins-over-the-alias-even-when-bad": (
        {"match-policy": "bogus", "pod-group.scheduling.sigs.k8s.io/match-policy": "only-waiting"},
        "match_policy",
        ONCE_SATISFIED,
        "match-policy",
    ),
    # waiting-time: time.ParseDuration; zero, unparsable or negative is the default timeout
    "wait-go-duration": ({"waiting-time": "90s"}, "wait_seconds", 90.0, None),
    "wait-compound-duration": ({"waiting-time": "1h30m"}, "wait_seconds", 5400.0, None),
    "wait-zero-is-the-default": ({"waiting-time": "0s"}, "wait_seconds", None, None),
    "wait-in-words-is-the-default": ({"waiting-time": "10 minutes"}, "wait_seconds", None, "waiting-time"),
    "wait-without-unit-is-the-default": ({"waiting-time": "600"}, "wait_seconds", None, "waiting-time"),
    "wait-with-spaces-is-the-default": ({"waiting-time": " 90s"}, "wait_seconds", None, "waiting-time"),
    "wait-negative-is-the-default": ({"waiting-time": "-5m"}, "wait_seconds", None, "waiting-time"),
    # total-number: empty or 0 is min-available; unparsable or below it falls back to min-available
    "total": ({"total-number": "5"}, "total", 5, None),
    "total-zero-is-min-available": ({"total-number": "0"}, "total", 3, None),
    "total-below-min-available": ({"total-number": "2"}, "total", 3, "total-number"),
    "total-negative": ({"total-number": "-1"}, "total", 3, "total-number"),
    "total-in-words": ({"total-number": "five"}, "total", 3, "total-number"),
    "total-beyond-int32": ({"total-number": "99999999999"}, "total", 3, "total-number"),
    "total-with-spaces": ({"total-number": " 5"}, "total", 3, "total-number"),
    # groups: json.Unmarshal into []string; no array at all leaves the gang alone
    "groups": ({"groups": '["ns/g", "other/h"]'}, "group", ("ns/g", "other/h"), None),
    "groups-null-is-the-gang-alone": ({"groups": "null"}, "group", ("ns/g",), None),
    "groups-empty-array-is-the-gang-alone": ({"groups": "[]"}, "group", ("ns/g",), None),
    "groups-not-json-is-the-gang-alone": ({"groups": "[ns/a"}, "group", ("ns/g",), "groups"),
    "groups-bare-id-is-the-gang-alone": ({"groups": "ns/a"}, "group", ("ns/g",), "groups"),
    "groups-object-is-the-gang-alone": ({"groups": '{"a": "ns/a"}'}, "group", ("ns/g",), "groups"),
    "groups-string-is-the-gang-alone": ({"groups": '"ns/a"'}, "group", ("ns/g",), "groups"),
    "groups-nan-is-not-json": ({"groups": "[NaN]"}, "group", ("ns/g",), "groups"),
    # network-topology-spec: what Go cannot decode is no topology constraint
    "topology": (
        {"network-topology-spec": MUST_BLOCK},
        "topology_spec",
        (GatherRule("BlockLayer", "MustGather"),),
        None,
    ),
    "topology-not-json-is-no-constraint": (
        {"network-topology-spec": "gatherStrategy: BlockLayer"},
        "topology_spec",
        None,
        "network-topology-spec",
    ),
    "topology-wrong-type-is-no-constraint": (
        {"network-topology-spec": '{"gatherStrategy": {"layer": "BlockLayer"}}'},
        "topology_spec",
        None,
        "network-topology-spec",
    ),
    "topology-must-gather-in-another-case-gathers-by-preference": (
        {"network-topology-spec": '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "mustgather"}]}'},
        "topology_spec",
        (GatherRule("BlockLayer", "PreferGather"),),
        "network-topology-spec",
    ),
    # min-available: ParseInt accepts zero, a sign, and negative numbers
    "min-zero": ({"min-available": "0"}, "min_member", 0, None),
    "min-with-plus-sign": ({"min-available": "+2"}, "min_member", 2, None),
    "min-negative-needs-no-member": ({"min-available": "-2"}, "min_member", 0, "min-available"),
}


@pytest.mark.parametrize(("annotations", "field", "expected", "warned"), ROWS.values(), ids=ROWS.keys())
def test_annotation_value_is_read_as_koord_scheduler_reads_it(
    annotations: dict[str, str], field: str, expected: Any, warned: str | None
) -> None:
    spec = spec_of(annotations)
    value = getattr(spec, field)
    if field == "topology_spec" and value is not None:
        value = value.rules
    assert value == expected
    assert fallback_keys(spec) == ([warned] if warned else [])


def test_fallback_names_the_annotation_the_value_and_the_default() -> None:
    (fallback,) = spec_of({"waiting-time": "10 minutes"}).fallbacks
    message = fallback.message()
    for fragment in (f"annotation {G}/waiting-time", "'10 minutes'", "default timeout"):
        assert fragment in message, message


def test_camel_case_policy_falls_back_when_the_default_is_another() -> None:
    # koord-scheduler compares exactly: `OnceSatisfied` is the configured default, whatever it is
    spec = spec_of({"match-policy": "OnceSatisfied"}, policy=ONLY_WAITING)
    assert (spec.match_policy, fallback_keys(spec)) == (ONLY_WAITING, ["match-policy"])


@pytest.mark.parametrize(
    ("labels", "annotation", "expected"),
    [
        ({"pod-group.scheduling.sigs.k8s.io/min-available": "4"}, "2", 4),
        # an empty label is as good as none: the annotation is read
        ({"pod-group.scheduling.sigs.k8s.io/min-available": ""}, "2", 2),
    ],
    ids=["label-wins", "empty-label-falls-through"],
)
def test_lightweight_min_label(labels: dict[str, str], annotation: str, expected: int) -> None:
    assert spec_of({"min-available": annotation}, labels=labels).min_member == expected


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        # the label is read when it is set, and a bad label is not made good by the annotation
        ({"pod-group.scheduling.sigs.k8s.io/min-available": "four"}, {"min-available": "2"}),
        ({}, {"min-available": ""}),
        ({}, {"min-available": "3 "}),
        ({}, {"min-available": "2147483648"}),
    ],
    ids=["bad-label", "empty-annotation", "trailing-space", "beyond-int32"],
)
def test_unusable_min_available_keeps_the_pod_from_configuring_its_gang(
    labels: dict[str, str], annotations: dict[str, str]
) -> None:
    with pytest.raises(SpecError, match="min-available"):
        spec_of(annotations, labels=labels)


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        # a group naming a gang that cannot exist is never ready in koord-scheduler either
        ({"groups": '["ns/g", "no-namespace"]'}, "no-namespace"),
        ({"groups": '["ns/g", 5]'}, "5"),
        ({"groups": '["ns/g", null]'}, "None"),
    ],
    ids=["id-without-namespace", "number", "null"],
)
def test_group_entry_that_is_no_gang_id_is_still_a_spec_error(
    annotations: dict[str, str], fragment: str
) -> None:
    with pytest.raises(SpecError) as err:
        spec_of(annotations)
    assert f"annotation {G}/groups" in str(err.value) and fragment in str(err.value)


# ----------------------------------------------------------------------------------- the PodGroup form
def sigs_podgroup(annotations: dict[str, str], min_member: int = 2) -> PodGroup:
    return PodGroup.from_dict(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns", "annotations": annotations},
            "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 30},
        }
    )


def test_podgroup_annotations_fall_back_as_pod_annotations_do() -> None:
    pg = sigs_podgroup(
        {
            f"{G}/mode": "nonstrict",
            f"{G}/total-number": "1",
            f"{G}/groups": "ns/other",
            # not read on a PodGroup: scheduleTimeoutSeconds is
            f"{G}/waiting-time": "10 minutes",
        }
    )
    spec = spec_from_podgroup(pg, ONCE_SATISFIED)
    assert (spec.mode, spec.total, spec.group, spec.wait_seconds) == (STRICT, 2, ("ns/pg",), 30.0)
    assert fallback_keys(spec) == ["total-number", "mode", "groups"]
    # the members are told whose annotations these are
    assert all(f.key.startswith("PodGroup ns/pg annotation") for f in spec.fallbacks)
    # the operator reads the same
    assert [f.key for f in podgroup_fallbacks(pg)] == [
        f"annotation {G}/total-number",
        f"annotation {G}/mode",
        f"annotation {G}/groups",
    ]


# ----------------------------------------------------------------------------------- the gang's members
def member(name: str, **annotations: str) -> Any:
    return make_pod(
        name,
        namespace="ns",
        annotations={f"{G}/name": "g", **{f"{G}/{k}": v for k, v in annotations.items()}},
    )


@pytest.mark.parametrize("order", [("bad", "good"), ("good", "bad")], ids=["bad-first", "good-first"])
def test_bad_min_available_on_one_member_takes_the_next_members_value(order: tuple[str, str]) -> None:
    pods = {
        "bad": member("bad", **{"min-available": "three"}),
        "good": member("good", **{"min-available": "2"}),
    }
    registry = GangRegistry(VirtualClock(0.0), ONCE_SATISFIED)
    for name in order:
        registry.on_pod("Add", pods[name])
    gang = registry.gang(pods["bad"])
    assert gang is not None and gang.spec is not None and gang.spec.min_member == 2
    assert registry.readiness(pods["bad"]) is None, "the member is scheduled with its gang"
    (told,) = registry.fallbacks(pods["bad"])
    assert "'three'" in told.message() and "min-available 2 of member ns/good" in told.message()
    assert registry.fallbacks(pods["good"]) == []


def test_gang_no_member_of_which_has_a_usable_min_available_is_invalid() -> None:
    registry = GangRegistry(VirtualClock(0.0), ONCE_SATISFIED)
    pod = member("only", **{"min-available": "three"})
    registry.on_pod("Add", pod)
    verdict = registry.readiness(pod)
    assert verdict is not None and verdict.invalid and "'three'" in verdict.message


def test_first_member_with_a_usable_min_available_configures_the_gang_for_good() -> None:
    # HasGangInit: a later member's annotations are not read, bad or good
    registry = GangRegistry(VirtualClock(0.0), ONCE_SATISFIED)
    first = member("a", **{"min-available": "2", "groups": '["ns/g", "nowhere"]'})
    second = member("b", **{"min-available": "2"})
    registry.on_pod("Add", first)
    registry.on_pod("Add", second)
    verdict = registry.readiness(second)
    assert verdict is not None and verdict.invalid and "nowhere" in verdict.message


def test_each_fallback_is_told_to_each_member_once() -> None:
    registry = GangRegistry(VirtualClock(0.0), ONCE_SATISFIED)
    a = member("a", **{"min-available": "2", "mode": "loose", "waiting-time": "soon"})
    b = member("b", **{"min-available": "2"})
    registry.on_pod("Add", a)
    registry.on_pod("Add", b)
    assert len(registry.untold_fallbacks(a)) == 2
    assert registry.untold_fallbacks(a) == []
    assert len(registry.untold_fallbacks(b)) == 2, "the gang's fallbacks are every member's"


@pytest.mark.parametrize(
    ("index", "expected_order", "warned"),
    [
        ("0", ["indexed", "a", "z"], False),
        ("-1", ["a", "indexed", "z"], False),  # Koordinator's own "no index"
        ("first", ["a", "indexed", "z"], True),
        (" 0", ["a", "indexed", "z"], True),
    ],
    ids=["index", "negative-is-no-index", "words-are-no-index", "spaces-are-no-index"],
)
def test_network_topology_index_is_read_with_atoi(
    index: str, expected_order: list[str], warned: bool
) -> None:
    indexed = member("indexed", **{"min-available": "1", "network-topology-index": index})
    pods = [member("z", **{"min-available": "1"}), indexed, member("a", **{"min-available": "1"})]
    assert [p.name for p in sorted(pods, key=member_order_key)] == expected_order
    registry = GangRegistry(VirtualClock(0.0), ONCE_SATISFIED)
    registry.on_pod("Add", indexed)
    assert bool(registry.fallbacks(indexed)) == warned


# ----------------------------------------------------------------------------------- the PodGroup condition
def test_condition_names_the_fallbacks_and_keeps_its_transition_time() -> None:
    other = {"type": "Other", "status": "True", "reason": "X", "message": "", "lastTransitionTime": "t0"}
    status = with_defaulted_condition({"phase": "Pending", "conditions": [other]}, ["a", "b"], 0.0)
    assert status["conditions"][0] == other
    condition = status["conditions"][1]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        ANNOTATIONS_DEFAULTED,
        "True",
        names.GANG_ANNOTATION_DEFAULTED,
        "a; b",
    )
    later = with_defaulted_condition(status, ["a"], 3600.0)
    assert later["conditions"][1]["lastTransitionTime"] == condition["lastTransitionTime"]


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ({"phase": "Pending"}, {"phase": "Pending"}),
        # a merge patch removes a field only when it is null
        (
            {"phase": "Pending", "conditions": [{"type": ANNOTATIONS_DEFAULTED, "status": "True"}]},
            {"phase": "Pending", "conditions": None},
        ),
    ],
    ids=["never-set", "annotations-fixed"],
)
def test_no_fallback_no_condition(stored: dict[str, Any], expected: dict[str, Any]) -> None:
    assert with_defaulted_condition(stored, [], 0.0) == expected


# ----------------------------------------------------------------------------------- through simulate
REPORTED = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "3", memory: 32Gi, pods: "110"}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 4
  template:
    metadata:
      annotations:
        gang.scheduling.koordinator.sh/name: train
        gang.scheduling.koordinator.sh/min-available: "3"
        gang.scheduling.koordinator.sh/mode: strict
        gang.scheduling.koordinator.sh/match-policy: OnceSatisfied
        gang.scheduling.koordinator.sh/waiting-time: 10 minutes
        gang.scheduling.koordinator.sh/groups: default/train
        gang.scheduling.koordinator.sh/network-topology-spec: "gatherStrategy: BlockLayer"
    spec:
      schedulerName: koord-scheduler
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
# koord-scheduler: Strict, once-satisfied, the default timeout, the gang alone, no topology
DEFAULTED = (f"{G}/waiting-time", f"{G}/groups", f"{G}/network-topology-spec")


def test_reported_gang_is_scheduled_and_every_member_is_warned_once(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(REPORTED)
    world = build_world(load_scenario([str(path)]), default_configuration())
    world.run(3600.0)
    placed = sorted(p.name for p in world.views.values() if p.node_name)
    # the node holds three: the minimum is placed, the fourth member keeps being retried
    assert placed == ["train-0", "train-1", "train-2"]
    warned: dict[str, list[str]] = {}
    for event in world.events:
        if event.reason == names.GANG_ANNOTATION_DEFAULTED:
            assert event.event_type == "Warning"
            warned.setdefault(event.pod.name, []).append(event.message)
    assert sorted(warned) == ["train-0", "train-1", "train-2", "train-3"]
    for messages in warned.values():
        assert len(messages) == len(DEFAULTED), messages
        for key, message in zip(DEFAULTED, messages, strict=True):
            assert f"annotation {key}" in message, message


def test_reported_gang_carries_the_condition_in_the_simulate_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(REPORTED)
    assert main(["simulate", str(path), "--output", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [p["phase"] for p in report["pods"]] == ["Bound", "Bound", "Bound", "Pending"]
    assert "InvalidSpec" not in {p["reason"] for p in report["pods"]}
    (group,) = report["podGroups"]
    (condition,) = group["conditions"]
    assert (condition["type"], condition["status"]) == (ANNOTATIONS_DEFAULTED, "True")
    for key, value in zip(
        DEFAULTED, ("'10 minutes'", "'default/train'", "'gatherStrategy: BlockLayer'"), strict=True
    ):
        assert f"{key}: {value}" in condition["message"], condition["message"]
    assert "mode" not in condition["message"] and "match-policy" not in condition["message"]


# ----------------------------------------------------------------------------------- the operator
async def test_operator_writes_the_condition_while_a_podgroup_annotation_is_defaulted() -> None:
    key = GroupKey(SIGS_GROUP, NAMESPACE, "gang")
    path = podgroup_path(key)
    obj = podgroup(key, 2)
    obj["metadata"]["annotations"] = {f"{G}/mode": "nonstrict"}
    async with running(member_batch=0) as cluster:
        cluster.facts.synced.set()
        cluster.controller.podgroup_changed(key, cluster.api.put(path, obj))
        await settle()
        (condition,) = cluster.status(key)["conditions"]
        assert (condition["type"], condition["reason"]) == (
            ANNOTATIONS_DEFAULTED,
            names.GANG_ANNOTATION_DEFAULTED,
        )
        assert f"annotation {G}/mode: 'nonstrict'" in condition["message"]
        assert "using Strict" in condition["message"]
        # the annotation fixed: the condition goes
        fixed = {**cluster.api.objects[path]}
        fixed["metadata"] = {**fixed["metadata"], "annotations": {f"{G}/mode": "NonStrict"}}
        cluster.controller.podgroup_changed(key, cluster.api.put(path, fixed))
        await settle()
        assert "conditions" not in cluster.status(key)
