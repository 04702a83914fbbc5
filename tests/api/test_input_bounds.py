"""API values at the edge of their types: out of range, too long to convert, beyond what a clock or a
calendar can hold. Each is refused with the field named, or read as the API server reads it; none
raises anything but SpecError."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.duration import parse_duration
from koordpy.api.errors import SpecError
from koordpy.api.namespace import Namespace
from koordpy.api.node import MAX_IMAGE_BYTES, Node
from koordpy.api.nodeselector import parse_int64
from koordpy.api.pdb import IntOrPercent
from koordpy.api.pod import Pod
from koordpy.api.podgroup import PodGroup
from koordpy.api.priorityclass import PriorityClass
from koordpy.api.taints import Toleration
from koordpy.api.time import format_timestamp, parse_timestamp


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        pytest.param({"priority": 2**31}, "spec.priority", "32-bit", id="priority-beyond-int32"),
        pytest.param({"priority": -(2**31) - 1}, "spec.priority", "32-bit", id="priority-below-int32"),
        pytest.param(
            {"terminationGracePeriodSeconds": 2**63},
            "spec.terminationGracePeriodSeconds",
            "64-bit",
            id="grace-beyond-int64",
        ),
        pytest.param(
            {"containers": [{"name": "c", "ports": [{"hostPort": 80, "protocol": ["TCP"]}]}]},
            "spec.containers[0].ports[0].protocol",
            "expected a string",
            id="port-protocol-list",
        ),
        pytest.param(
            {"containers": [{"name": "c", "ports": [{"hostPort": 80, "hostIP": {"a": 1}}]}]},
            "spec.containers[0].ports[0].hostIP",
            "expected a string",
            id="port-host-ip-map",
        ),
        pytest.param(
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 2**31, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "spec.topologySpreadConstraints[0].maxSkew",
            "32-bit",
            id="max-skew-beyond-int32",
        ),
        pytest.param(
            {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "z",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "minDomains": 2**40,
                    }
                ]
            },
            "spec.topologySpreadConstraints[0].minDomains",
            "32-bit",
            id="min-domains-beyond-int32",
        ),
        pytest.param(
            {"tolerations": [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2**63}]},
            "spec.tolerations[0].tolerationSeconds",
            "64-bit",
            id="toleration-seconds-beyond-int64",
        ),
    ],
)
def test_pod_values_beyond_their_types_are_invalid_spec(
    spec: dict[str, Any], field: str, fragment: str
) -> None:
    parsed = Pod.from_dict(pod(**spec))
    assert parsed.spec_error is not None
    assert parsed.spec_error.path == field
    assert fragment in parsed.spec_error.message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param({"ownerReferences": 5}, (), id="owner-references-number"),
        pytest.param({"ownerReferences": "abc"}, (), id="owner-references-string"),
    ],
)
def test_pod_metadata_of_the_wrong_shape_is_ignored(raw: dict[str, Any], expected: tuple[Any, ...]) -> None:
    obj = pod()
    obj["metadata"].update(raw)
    obj["status"] = {"conditions": 7}
    parsed = Pod.from_dict(obj)
    assert parsed.owners == expected
    assert parsed.conditions == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("9223372036854775807", 2**63 - 1, id="int64-max"),
        pytest.param("-9223372036854775808", -(2**63), id="int64-min"),
        pytest.param("9223372036854775808", None, id="beyond-int64"),
        pytest.param("0" * 30 + "7", 7, id="leading-zeros"),
        pytest.param("9" * 5000, None, id="too-many-digits-to-convert"),
    ],
)
def test_parse_int64(text: str, expected: int | None) -> None:
    assert parse_int64(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("50%", IntOrPercent(50, True), id="percent"),
        pytest.param("0007", IntOrPercent(7, False), id="leading-zeros"),
        pytest.param(2**31 - 1, IntOrPercent(2**31 - 1, False), id="int32-max"),
    ],
)
def test_int_or_percent_reads(value: Any, expected: IntOrPercent) -> None:
    assert IntOrPercent.parse(value, "spec.minAvailable") == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        pytest.param("101%", "must not be greater than 100%", id="percent-above-100"),
        pytest.param("²%", "non-negative integer or a percentage", id="superscript-digit"),
        pytest.param("9" * 5000, "non-negative integer or a percentage, got '99999", id="too-many-digits"),
        pytest.param(2**31, "non-negative integer or a percentage", id="beyond-int32"),
        pytest.param(-1, "non-negative integer or a percentage", id="negative"),
    ],
)
def test_int_or_percent_refuses(value: Any, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        IntOrPercent.parse(value, "spec.minAvailable")
    assert info.value.path == "spec.minAvailable"
    assert fragment in info.value.message
    assert len(info.value.message) < 200


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param(
            {"metadata": {"name": "big"}, "value": 2**31}, "value", id="priority-class-value-beyond-int32"
        ),
        pytest.param(
            {"metadata": {"name": "x"}, "value": 1, "globalDefault": "yes"},
            "globalDefault",
            id="global-default-string",
        ),
    ],
)
def test_priority_class_refuses(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        PriorityClass.from_dict(obj)
    assert info.value.path == field


@pytest.mark.parametrize(
    ("spec", "field", "min_member"),
    [
        pytest.param({"minMember": 2**31}, "spec.minMember", 0, id="min-member-beyond-int32"),
        pytest.param(
            {"minMember": 1, "scheduleTimeoutSeconds": 2**31},
            "spec.scheduleTimeoutSeconds",
            1,
            id="timeout-beyond-int32",
        ),
    ],
)
def test_pod_group_values_beyond_int32_are_invalid_spec(
    spec: dict[str, Any], field: str, min_member: int
) -> None:
    group = PodGroup.from_dict(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "annotations": ["not", "a", "map"]},
            "spec": spec,
        }
    )
    assert group.spec_error is not None and group.spec_error.path == field
    assert group.min_member == min_member
    assert group.annotations == {}


def test_node_images_beyond_int64_are_left_out() -> None:
    node = Node.from_dict(
        {
            "metadata": {"name": "n"},
            "status": {
                "allocatable": {"cpu": "1"},
                "images": [{"names": ["a"], "sizeBytes": 2**64}, {"names": ["b"], "sizeBytes": 10}],
            },
        }
    )
    assert node.spec_error is None
    assert [image.names for image in node.images] == [("b",)]


def test_node_image_sizes_are_capped_below_what_int64_sums_can_hold() -> None:
    node = Node.from_dict(
        {"metadata": {"name": "n"}, "status": {"images": [{"names": ["a"], "sizeBytes": 2**63 - 1}]}}
    )
    assert [image.size_bytes for image in node.images] == [MAX_IMAGE_BYTES]


def test_node_images_not_a_list_is_a_spec_error() -> None:
    node = Node.from_dict({"metadata": {"name": "n"}, "status": {"images": 5}})
    assert node.spec_error is not None and node.spec_error.path == "status.images"


def test_namespace_of_the_wrong_shape_keeps_its_name_label() -> None:
    assert Namespace.from_dict({"metadata": {"name": "team", "labels": ["a"]}}).labels == {
        "kubernetes.io/metadata.name": "team"
    }
    assert Namespace.from_dict({"metadata": "x"}).name == ""


def test_toleration_seconds_at_int64_max_is_read() -> None:
    toleration = Toleration.from_dict(
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2**63 - 1}, "t"
    )
    assert toleration.toleration_seconds == 2**63 - 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("9" * 400 + "h", "longer than a Go duration can be", id="beyond-int64-nanoseconds"),
        pytest.param("3000000h", "longer than a Go duration can be", id="beyond-292-years"),
    ],
)
def test_duration_beyond_go_range(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_duration(text, "annotations.x")
    assert info.value.path == "annotations.x" and fragment in info.value.message


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00Z", id="epoch"),
        pytest.param(9.3e18, "9999-12-31T23:59:59Z", id="beyond-year-9999"),
        pytest.param(-1e30, "0001-01-01T00:00:00Z", id="before-year-1"),
        pytest.param(float("inf"), "9999-12-31T23:59:59Z", id="infinite"),
    ],
)
def test_format_timestamp_clamps_to_what_it_can_write(seconds: float, expected: str) -> None:
    assert format_timestamp(seconds) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(10**400, id="integer-beyond-float"),
        pytest.param(float("nan"), id="nan"),
        pytest.param("10000-01-01T00:00:00Z", id="year-10000"),
        pytest.param(["2024-01-01T00:00:00Z"], id="list"),
    ],
)
def test_parse_timestamp_of_no_time_is_none(value: Any) -> None:
    assert parse_timestamp(value) is None
