"""Declaring a gang: membership, parameters from every source, and bad input named precisely."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.duration import parse_duration
from koordpy.api.errors import SpecError
from koordpy.api.podgroup import PodGroup
from koordpy.plugins.coscheduling.gang import (
    FROM_ANNOTATION,
    FROM_SIGS,
    FROM_X_K8S,
    NON_STRICT,
    ONCE_SATISFIED,
    ONLY_WAITING,
    STRICT,
    WAITING_AND_RUNNING,
    member_order_key,
    membership,
    spec_from_pod,
    spec_from_podgroup,
)
from tests.builders import make_pod

G = "gang.scheduling.koordinator.sh"


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        ({"pod-group.scheduling.sigs.k8s.io": "pg"}, {}, ("ns/pg", FROM_SIGS)),
        ({"scheduling.x-k8s.io/pod-group": "pg"}, {}, ("ns/pg", FROM_X_K8S)),
        ({}, {f"{G}/name": "g"}, ("ns/g", FROM_ANNOTATION)),
        ({"pod-group.scheduling.sigs.k8s.io/name": "light"}, {}, ("ns/light", FROM_ANNOTATION)),
        ({"pod-group.scheduling.sigs.k8s.io": "crd"}, {f"{G}/name": "ann"}, ("ns/crd", FROM_SIGS)),
        ({}, {}, None),
    ],
    ids=["sigs-label", "x-k8s-label", "annotation", "lightweight-label", "crd-label-wins", "plain-pod"],
)
def test_membership(
    labels: dict[str, str], annotations: dict[str, str], expected: tuple[str, str] | None
) -> None:
    m = membership(make_pod("p", namespace="ns", labels=labels, annotations=annotations))
    assert (None if m is None else (m.gang_id, m.source)) == expected


def annotated(**annotations: str) -> Any:
    pod = make_pod("p", namespace="ns", annotations={f"{G}/name": "g", **annotations})
    m = membership(pod)
    assert m is not None
    return spec_from_pod(pod, m, ONCE_SATISFIED)


def test_annotation_gang_defaults() -> None:
    spec = annotated(**{f"{G}/min-available": "3"})
    assert (spec.min_member, spec.total, spec.mode, spec.match_policy, spec.wait_seconds, spec.group) == (
        3,
        3,
        STRICT,
        ONCE_SATISFIED,
        None,
        ("ns/g",),
    )


@pytest.mark.parametrize(
    ("annotations", "field", "expected"),
    [
        ({"total-number": "5"}, "total", 5),
        ({"total-number": "1"}, "total", 3),  # never below min-available
        ({"mode": "NonStrict"}, "mode", NON_STRICT),
        ({"match-policy": "only-waiting"}, "match_policy", ONLY_WAITING),
        ({"waiting-time": "1m30s"}, "wait_seconds", 90.0),
        ({"groups": '["ns/g", "other/h"]'}, "group", ("ns/g", "other/h")),
        ({"groups": '["other/h"]'}, "group", ("ns/g", "other/h")),  # a gang is always in its own group
    ],
    ids=[
        "total",
        "total-floored-at-min",
        "mode",
        "match-policy",
        "waiting-time",
        "groups",
        "groups-add-self",
    ],
)
def test_annotation_gang_parameters(annotations: dict[str, str], field: str, expected: Any) -> None:
    spec = annotated(**{f"{G}/min-available": "3"}, **{f"{G}/{k}": v for k, v in annotations.items()})
    assert getattr(spec, field) == expected


def test_alias_match_policy_key_is_read() -> None:
    pod = make_pod(
        "p",
        namespace="ns",
        annotations={
            f"{G}/name": "g",
            f"{G}/min-available": "2",
            "pod-group.scheduling.sigs.k8s.io/match-policy": "waiting-and-running",
        },
    )
    m = membership(pod)
    assert m is not None
    assert spec_from_pod(pod, m, ONCE_SATISFIED).match_policy == WAITING_AND_RUNNING


def test_lightweight_min_label_takes_precedence() -> None:
    pod = make_pod(
        "p",
        namespace="ns",
        labels={
            "pod-group.scheduling.sigs.k8s.io/name": "g",
            "pod-group.scheduling.sigs.k8s.io/min-available": "4",
        },
        annotations={f"{G}/min-available": "2"},
    )
    m = membership(pod)
    assert m is not None
    assert spec_from_pod(pod, m, ONCE_SATISFIED).min_member == 4


# Values koord-scheduler replaces by a default (a zero min-available, a duration in words, groups
# that are not JSON, a mode in another case, an unknown match policy) are in
# test_gang_annotation_fallbacks.py; what is left here it never schedules.
@pytest.mark.parametrize(
    ("annotations", "fragments"),
    [
        ({"min-available": "three"}, (f"annotation {G}/min-available", "'three'")),
        ({"min-available": "2", "groups": '["no-namespace"]'}, (f"annotation {G}/groups", "no-namespace")),
        ({}, (f"annotation {G}/min-available", "required")),
        ({"min-available": "2", "groups": "[" * 5000 + "]" * 5000}, (f"annotation {G}/groups", "too deeply")),
        (
            {"min-available": "2", "groups": "[" + "1" * 5000 + "]"},
            (f"annotation {G}/groups", "not usable JSON"),
        ),
    ],
    ids=[
        "non-numeric-min",
        "gang-id-without-namespace",
        "missing-min",
        "groups-nested-thousands-deep",
        "groups-with-an-integer-too-long-to-convert",
    ],
)
def test_bad_annotation_is_named_with_its_value(
    annotations: dict[str, str], fragments: tuple[str, ...]
) -> None:
    with pytest.raises(SpecError) as err:
        annotated(**{f"{G}/{k}": v for k, v in annotations.items()})
    for fragment in fragments:
        assert fragment in str(err.value)


def podgroup(api: str, min_member: Any, **extra: Any) -> PodGroup:
    return PodGroup.from_dict(
        {
            "apiVersion": f"{api}/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns", **extra.pop("meta", {})},
            "spec": {"minMember": min_member, **extra},
        }
    )


def test_x_k8s_podgroup_counts_waiting_and_running() -> None:
    spec = spec_from_podgroup(podgroup("scheduling.x-k8s.io", 3, scheduleTimeoutSeconds=10), ONCE_SATISFIED)
    assert (spec.min_member, spec.match_policy, spec.wait_seconds) == (3, WAITING_AND_RUNNING, 10.0)


def test_sigs_podgroup_reads_gang_annotations_on_the_podgroup() -> None:
    pg = podgroup(
        "scheduling.sigs.k8s.io",
        1,
        meta={"annotations": {f"{G}/groups": '["ns/pg", "ns/other"]', f"{G}/mode": "NonStrict"}},
    )
    spec = spec_from_podgroup(pg, ONCE_SATISFIED)
    assert (spec.group, spec.mode) == (("ns/other", "ns/pg"), NON_STRICT)


@pytest.mark.parametrize(
    ("api", "value"),
    [("scheduling.sigs.k8s.io", -1), ("scheduling.x-k8s.io", 0)],
    ids=["negative-sigs", "zero-x-k8s"],
)
def test_invalid_min_member_is_an_error_naming_the_field(api: str, value: int) -> None:
    with pytest.raises(SpecError) as err:
        spec_from_podgroup(podgroup(api, value), ONCE_SATISFIED)
    assert "spec.minMember" in str(err.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("100s", 100),
        ("1h", 3600),
        ("1m30s", 90),
        ("1.5h", 5400),
        ("300ms", 0.3),
        ("0", 0),
        ("2h45m10s", 9910),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10 minutes", "10", "", "h", "1x", "1.2.3s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(SpecError):
        parse_duration(text, "here")


def test_members_are_ordered_by_topology_index_then_name() -> None:
    pods = [
        make_pod(n, annotations=a)
        for n, a in [
            ("b", {}),
            ("a", {}),
            ("z", {f"{G}/network-topology-index": "1"}),
            ("y", {f"{G}/network-topology-index": "0"}),
        ]
    ]
    assert [p.name for p in sorted(pods, key=member_order_key)] == ["y", "z", "a", "b"]
