"""VolumeBinding's PreFilter and Filter: what keeps a pod from being placed at all, and per node
the reasons kube's FindPodVolumes gives (volume_binding_test.go, binder_test.go FindPodVolumes
tables, told again with values of our own)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.status import Code
from koordpy.plugins.volumebinding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from tests.plugins.volumebinding.storage import (
    HOSTNAME,
    IMMEDIATE,
    VB,
    Storage,
    capacity,
    claim,
    claiming,
    csi_driver,
    host,
    storage_class,
    volume,
)

ZONE = "topology.kubernetes.io/zone"
DRIVER = "csi.example.com"
NODES = [host("node-a", **{ZONE: "z1"}), host("node-b", **{ZONE: "z1"}), host("node-c", **{ZONE: "z2"})]
WAIT_SC = storage_class("wait-sc")
PROVISIONED_SC = storage_class("dyn-sc", provisioner=DRIVER)
IMMEDIATE_SC = storage_class("now-sc", mode=IMMEDIATE)
BOTH = f"{ERR_REASON_NODE_CONFLICT}, {ERR_REASON_BIND_CONFLICT}"


# ----------------------------------------------------------------------------- PreFilter
def test_a_pod_without_claims_skips_the_plugin() -> None:
    s = Storage(NODES)
    state, status = s.pre_filter(claiming("pod-a"))
    assert status is None and VB in state.skip_filter


def test_claims_bound_to_volumes_every_node_reaches_skip_filter() -> None:
    """Filter would pass every node: skipped (preemption then dry-runs over the arrays); a bound
    volume pinned to a node keeps it."""
    bound = claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True)
    s = Storage(NODES, objects=[WAIT_SC, bound, volume("pv-a", "wait-sc", phase="Bound")])
    state, status = s.pre_filter(claiming("pod-a", "pvc-a"))
    assert status is None and VB in state.skip_filter
    pinned = volume("pv-a", "wait-sc", affinity={HOSTNAME: ["node-a"]}, phase="Bound")
    s = Storage(NODES, objects=[WAIT_SC, bound, pinned])
    state, status = s.pre_filter(claiming("pod-a", "pvc-a"))
    assert status is None and VB not in state.skip_filter


@pytest.mark.parametrize(
    ("objects", "claims", "ephemeral", "message"),
    [
        pytest.param([], ["pvc-a"], [], 'persistentvolumeclaim "pvc-a" not found', id="claim-missing"),
        pytest.param(
            [WAIT_SC, claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True)],
            ["pvc-a", "pvc-b"],
            [],
            'persistentvolumeclaim "pvc-b" not found',
            id="second-claim-missing",
        ),
        pytest.param(
            [],
            [],
            ["scratch"],
            'waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-a-scratch"',
            id="ephemeral-claim-not-yet-created",
        ),
        pytest.param(
            [WAIT_SC, claim("pod-a-scratch", "wait-sc", owner_uid="someone-else")],
            [],
            ["scratch"],
            "PVC default/pod-a-scratch was not created for pod default/pod-a (pod is not owner)",
            id="ephemeral-claim-of-another-pod",
        ),
        pytest.param(
            [WAIT_SC, claim("pvc-a", "wait-sc", volume_name="pv-gone", phase="Lost")],
            ["pvc-a"],
            [],
            'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-gone"',
            id="claim-lost",
        ),
        pytest.param(
            [WAIT_SC, claim("pvc-a", "wait-sc", deleting=True)],
            ["pvc-a"],
            [],
            'persistentvolumeclaim "pvc-a" is being deleted',
            id="claim-being-deleted",
        ),
        pytest.param(
            [IMMEDIATE_SC, claim("pvc-a", "now-sc")],
            ["pvc-a"],
            [],
            "pod has unbound immediate PersistentVolumeClaims",
            id="immediate-claim-unbound",
        ),
        pytest.param(
            [WAIT_SC, claim("pvc-a", "wait-sc", volume_name="pv-a")],
            ["pvc-a"],
            [],
            "pod has unbound immediate PersistentVolumeClaims",
            id="prebound-claim-waits-for-the-pv-controller",
        ),
        pytest.param(
            [claim("pvc-a", "no-such-class")],
            ["pvc-a"],
            [],
            "pod has unbound immediate PersistentVolumeClaims",
            id="class-missing-means-immediate",
        ),
        pytest.param(
            [claim("pvc-a", None)],
            ["pvc-a"],
            [],
            "pod has unbound immediate PersistentVolumeClaims",
            id="no-class-means-immediate",
        ),
    ],
)
def test_prefilter_keeps_the_pod_waiting(
    objects: list[dict[str, Any]], claims: list[str], ephemeral: list[str], message: str
) -> None:
    s = Storage(NODES, objects)
    _, status = s.pre_filter(claiming("pod-a", *claims, ephemeral=ephemeral, uid="pod-uid"))
    assert status is not None
    assert (status.code, status.message) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


def test_an_ephemeral_claim_of_the_pod_is_used() -> None:
    s = Storage(
        NODES, [WAIT_SC, claim("pod-a-scratch", "wait-sc", owner_uid="pod-uid"), volume("pv-a", "wait-sc")]
    )
    pod = claiming("pod-a", ephemeral=["scratch"], uid="pod-uid")
    assert s.filter_messages(pod) == {"node-a": "", "node-b": "", "node-c": ""}


def test_a_malformed_claim_keeps_the_pod_waiting_with_its_error() -> None:
    broken = claim("pvc-a", "wait-sc")
    broken["spec"]["resources"]["requests"]["storage"] = "lots"
    s = Storage(NODES, [WAIT_SC, broken])
    _, status = s.pre_filter(claiming("pod-a", "pvc-a"))
    assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith("PersistentVolumeClaim default/pvc-a: spec.resources.requests.storage")


# ----------------------------------------------------------------------------- Filter
FILTER_CASES = [
    pytest.param(
        [
            WAIT_SC,
            claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True),
            volume("pv-a", "wait-sc", phase="Bound"),
        ],
        ["pvc-a"],
        {"node-a": "", "node-b": "", "node-c": ""},
        id="all-bound",
    ),
    pytest.param(
        [
            WAIT_SC,
            claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True),
            claim("pvc-b", "wait-sc", volume_name="pv-b", bound=True),
            volume("pv-a", "wait-sc", affinity={HOSTNAME: ["node-a"]}, phase="Bound"),
            volume("pv-b", "wait-sc", affinity={HOSTNAME: ["node-a"]}, phase="Bound"),
        ],
        ["pvc-a", "pvc-b"],
        {"node-a": "", "node-b": ERR_REASON_NODE_CONFLICT, "node-c": ERR_REASON_NODE_CONFLICT},
        id="bound-local-volumes",
    ),
    pytest.param(
        [WAIT_SC, claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True)],
        ["pvc-a"],
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_PV_NOT_EXIST),
        id="bound-volume-missing",
    ),
    pytest.param(
        [
            WAIT_SC,
            claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True),
            claim("pvc-b", "wait-sc", volume_name="pv-gone", bound=True),
            volume("pv-a", "wait-sc", affinity={HOSTNAME: ["node-a"]}, phase="Bound"),
        ],
        ["pvc-a", "pvc-b"],
        {
            "node-a": ERR_REASON_PV_NOT_EXIST,
            "node-b": ERR_REASON_NODE_CONFLICT,
            "node-c": ERR_REASON_NODE_CONFLICT,
        },
        id="first-failing-bound-claim-decides",
    ),
    pytest.param(
        [WAIT_SC, claim("pvc-a", "wait-sc")],
        ["pvc-a"],
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_BIND_CONFLICT),
        id="unbound-no-volume-no-provisioner",
    ),
    pytest.param(
        [
            WAIT_SC,
            claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True),
            claim("pvc-b", "wait-sc"),
            volume("pv-a", "wait-sc", affinity={ZONE: ["z9"]}, phase="Bound"),
        ],
        ["pvc-a", "pvc-b"],
        dict.fromkeys(("node-a", "node-b", "node-c"), BOTH),
        id="bound-and-unbound-unsatisfied",
    ),
    pytest.param(
        [WAIT_SC, claim("pvc-a", "wait-sc"), volume("pv-a", "wait-sc", affinity={HOSTNAME: ["node-b"]})],
        ["pvc-a"],
        {"node-a": ERR_REASON_BIND_CONFLICT, "node-b": "", "node-c": ERR_REASON_BIND_CONFLICT},
        id="unbound-local-volume",
    ),
    pytest.param(
        [WAIT_SC, claim("pvc-a", "wait-sc"), volume("pv-a", "wait-sc", affinity={ZONE: ["z1"]})],
        ["pvc-a"],
        {"node-a": "", "node-b": "", "node-c": ERR_REASON_BIND_CONFLICT},
        id="unbound-zonal-volume",
    ),
    pytest.param(
        [
            WAIT_SC,
            claim("pvc-a", "wait-sc"),
            claim("pvc-b", "wait-sc"),
            volume("pv-a1", "wait-sc", affinity={HOSTNAME: ["node-a"]}),
            volume("pv-a2", "wait-sc", affinity={HOSTNAME: ["node-a"]}),
            volume("pv-b1", "wait-sc", affinity={HOSTNAME: ["node-b"]}),
        ],
        ["pvc-a", "pvc-b"],
        {"node-a": "", "node-b": ERR_REASON_BIND_CONFLICT, "node-c": ERR_REASON_BIND_CONFLICT},
        id="two-claims-need-two-volumes-on-the-node",
    ),
    pytest.param(
        [
            WAIT_SC,
            claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True),
            claim("pvc-b", "wait-sc"),
            volume("pv-a", "wait-sc", phase="Bound"),
            volume("pv-b", "wait-sc", affinity={HOSTNAME: ["node-c"]}),
        ],
        ["pvc-a", "pvc-b"],
        {"node-a": ERR_REASON_BIND_CONFLICT, "node-b": ERR_REASON_BIND_CONFLICT, "node-c": ""},
        id="one-bound-one-unbound",
    ),
    pytest.param(
        [PROVISIONED_SC, claim("pvc-a", "dyn-sc")],
        ["pvc-a"],
        {"node-a": "", "node-b": "", "node-c": ""},
        id="provisioned-anywhere",
    ),
    pytest.param(
        [storage_class("dyn-sc", provisioner=DRIVER, topologies=[{ZONE: ["z2"]}]), claim("pvc-a", "dyn-sc")],
        ["pvc-a"],
        {"node-a": ERR_REASON_BIND_CONFLICT, "node-b": ERR_REASON_BIND_CONFLICT, "node-c": ""},
        id="provisioning-allowed-topologies",
    ),
    pytest.param(
        [
            PROVISIONED_SC,
            claim("pvc-a", "dyn-sc", annotations={"volume.kubernetes.io/selected-node": "node-b"}),
        ],
        ["pvc-a"],
        {"node-a": ERR_REASON_BIND_CONFLICT, "node-b": "", "node-c": ERR_REASON_BIND_CONFLICT},
        id="claim-already-given-to-a-node",
    ),
    pytest.param(
        [
            PROVISIONED_SC,
            claim("pvc-a", "dyn-sc", volume_name="pv-a", bound=True),
            volume("pv-a", "dyn-sc", affinity={HOSTNAME: ["node-a"]}, phase="Bound"),
            claim("pvc-b", "dyn-sc", annotations={"volume.kubernetes.io/selected-node": "node-b"}),
        ],
        ["pvc-a", "pvc-b"],
        {"node-a": ERR_REASON_BIND_CONFLICT, "node-b": ERR_REASON_NODE_CONFLICT, "node-c": BOTH},
        id="selected-node-and-bound-volume-disagree",
    ),
    pytest.param(
        [
            WAIT_SC,
            PROVISIONED_SC,
            claim("pvc-a", "wait-sc"),
            claim("pvc-b", "dyn-sc"),
            volume("pv-a", "wait-sc", affinity={HOSTNAME: ["node-a"]}),
        ],
        ["pvc-a", "pvc-b"],
        {"node-a": "", "node-b": ERR_REASON_BIND_CONFLICT, "node-c": ERR_REASON_BIND_CONFLICT},
        id="one-matched-one-provisioned",
    ),
]


@pytest.mark.parametrize(("objects", "claims", "expected"), FILTER_CASES)
def test_filter(objects: list[dict[str, Any]], claims: list[str], expected: dict[str, str]) -> None:
    s = Storage(NODES, objects)
    assert s.filter_messages(claiming("pod-a", *claims)) == expected


# ----------------------------------------------------------------------------- storage capacity
def _capacity_world(*objects: dict[str, Any], request: str = "10Gi") -> Storage:
    return Storage(NODES, [PROVISIONED_SC, claim("pvc-a", "dyn-sc", request=request), *objects])


CAPACITY_CASES = [
    pytest.param(
        [csi_driver(DRIVER, True), capacity("c1", "dyn-sc", "20Gi", {ZONE: "z1"})],
        "10Gi",
        {"node-a": "", "node-b": "", "node-c": ERR_REASON_NOT_ENOUGH_SPACE},
        id="capacity-reaches-one-zone",
    ),
    pytest.param(
        [csi_driver(DRIVER, True), capacity("c1", "dyn-sc", "20Gi", {ZONE: "z1"})],
        "30Gi",
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_NOT_ENOUGH_SPACE),
        id="capacity-too-small",
    ),
    pytest.param(
        [csi_driver(DRIVER, True), capacity("c1", "dyn-sc", "100Gi", {ZONE: "z1"}, maximum="5Gi")],
        "10Gi",
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_NOT_ENOUGH_SPACE),
        id="maximum-volume-size-wins-over-capacity",
    ),
    pytest.param(
        [csi_driver(DRIVER, True), capacity("c1", "dyn-sc", None, {ZONE: "z1"})],
        "10Gi",
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_NOT_ENOUGH_SPACE),
        id="capacity-unknown",
    ),
    pytest.param(
        [csi_driver(DRIVER, True), capacity("c1", "dyn-sc", "100Gi", None)],
        "10Gi",
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_NOT_ENOUGH_SPACE),
        id="capacity-without-topology-reaches-no-node",
    ),
    pytest.param(
        [csi_driver(DRIVER, True), capacity("c1", "other-sc", "100Gi", {ZONE: "z1"})],
        "10Gi",
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_NOT_ENOUGH_SPACE),
        id="capacity-of-another-class",
    ),
    pytest.param(
        [csi_driver(DRIVER, True)],
        "10Gi",
        dict.fromkeys(("node-a", "node-b", "node-c"), ERR_REASON_NOT_ENOUGH_SPACE),
        id="tracked-driver-without-capacities",
    ),
    pytest.param(
        [csi_driver(DRIVER, False)],
        "10Gi",
        {"node-a": "", "node-b": "", "node-c": ""},
        id="driver-not-tracking-capacity",
    ),
    pytest.param([], "10Gi", {"node-a": "", "node-b": "", "node-c": ""}, id="no-csi-driver-object"),
]


@pytest.mark.parametrize(("objects", "size", "expected"), CAPACITY_CASES)
def test_storage_capacity(objects: list[dict[str, Any]], size: str, expected: dict[str, str]) -> None:
    s = _capacity_world(*objects, request=size)
    assert s.filter_messages(claiming("pod-a", "pvc-a")) == expected


def test_the_first_claim_that_cannot_be_provisioned_gives_the_reason() -> None:
    # pvc-a (no space anywhere) comes before pvc-b (no provisioner): only pvc-a's reason counts
    s = Storage(
        NODES,
        [
            PROVISIONED_SC,
            storage_class("local-sc"),
            csi_driver(DRIVER, True),
            claim("pvc-a", "dyn-sc", request="1Gi"),
            claim("pvc-b", "local-sc", request="2Gi"),
        ],
    )
    messages = s.filter_messages(claiming("pod-a", "pvc-b", "pvc-a"))
    assert set(messages.values()) == {ERR_REASON_NOT_ENOUGH_SPACE}


# ----------------------------------------------------------------------------- through the profile
def test_rejections_are_unresolvable_and_counted_per_reason() -> None:
    s = Storage(
        NODES,
        [
            WAIT_SC,
            claim("pvc-a", "wait-sc", volume_name="pv-a", bound=True),
            volume("pv-a", "wait-sc", affinity={ZONE: ["z1"]}, phase="Bound"),
            claim("pvc-b", "wait-sc"),
            volume("pv-b", "wait-sc", affinity={HOSTNAME: ["node-a"]}),
        ],
    )
    names, diagnosis = s.harness.feasible(claiming("pod-a", "pvc-a", "pvc-b"))
    assert names == ["node-a"]
    assert {st.code for st in diagnosis.statuses_by_row().values()} == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    s.add(volume("pv-b", "wait-sc", affinity={HOSTNAME: ["node-z"]}), "Update")
    names, diagnosis = s.harness.feasible(claiming("pod-a", "pvc-a", "pvc-b"))
    assert names == []
    assert fit_error_message(3, diagnosis) == (
        "0/3 nodes are available: 1 node(s) had volume node affinity conflict, "
        "3 node(s) didn't find available persistent volumes to bind."
    )


def test_a_node_added_later_is_judged_too() -> None:
    s = Storage(
        NODES,
        [WAIT_SC, claim("pvc-a", "wait-sc"), volume("pv-a", "wait-sc", affinity={HOSTNAME: ["node-d"]})],
    )
    pod = claiming("pod-a", "pvc-a")
    assert "" not in s.filter_messages(pod).values()
    s.harness.cache.add_node(Node.from_dict(host("node-d")))
    assert s.filter_messages(pod)["node-d"] == ""
