"""Reserve, Unreserve and PreBind: the bindings a pod's placement decides are assumed in the
StorageCatalog (kube's AssumePodVolumes), restored when the placement is given up
(RevertAssumedPodVolumes), and handed to the world to carry out (BindPodVolumes)."""

from __future__ import annotations

from koordpy.framework.effects import ClaimKey, VolumeBindings, VolumeToClaim
from koordpy.plugins.volumebinding import ERR_REASON_BIND_CONFLICT
from tests.plugins.volumebinding.storage import (
    HOSTNAME,
    VB,
    Storage,
    claim,
    claiming,
    host,
    storage_class,
    volume,
)

NODES = [host("node-a"), host("node-b")]
DRIVER = "csi.example.com"
SELECTED = "volume.kubernetes.io/selected-node"


def _local_world() -> Storage:
    return Storage(
        NODES,
        [
            storage_class("local"),
            claim("pvc-a", "local"),
            claim("pvc-b", "local"),
            claim("pvc-c", "local"),
            volume("pv-a0", "local", affinity={HOSTNAME: ["node-a"]}),
            volume("pv-a1", "local", affinity={HOSTNAME: ["node-a"]}),
        ],
    )


def test_all_bound_claims_leave_nothing_to_bind() -> None:
    s = Storage(
        NODES,
        [
            storage_class("local"),
            claim("pvc-a", "local", volume_name="pv-a", bound=True),
            volume("pv-a", "local", phase="Bound"),
        ],
    )
    generation = s.catalog.generation
    state = s.place(claiming("pod-a", "pvc-a"), "node-a")
    assert state.binding_volumes is None
    assert s.catalog.generation == generation


def test_a_pod_without_claims_leaves_nothing_to_bind() -> None:
    s = _local_world()
    assert s.place(claiming("pod-a"), "node-a").binding_volumes is None


def test_a_static_binding_is_assumed_and_handed_to_the_world() -> None:
    s = _local_world()
    state = s.place(claiming("pod-a", "pvc-a"), "node-a")
    pv = s.catalog.volume("pv-a0")
    assert pv is not None and pv.claim_ref is not None
    assert (pv.claim_ref.key, pv.claim_ref.uid) == ("default/pvc-a", "uid-pvc-a")
    assert pv.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    key = ClaimKey("default", "pvc-a")
    assert state.binding_volumes == VolumeBindings(
        static=(VolumeToClaim("pv-a0", key, "uid-pvc-a"),),
        provision=(),
        wait_for=(key,),
        node_name="node-a",
        timeout_seconds=600.0,
    )


def test_a_provisioned_claim_is_assumed_with_its_selected_node() -> None:
    s = Storage(NODES, [storage_class("dyn", provisioner=DRIVER), claim("pvc-a", "dyn")])
    state = s.place(claiming("pod-a", "pvc-a"), "node-b")
    assumed = s.catalog.claim("default", "pvc-a")
    assert assumed is not None and assumed.selected_node == "node-b"
    key = ClaimKey("default", "pvc-a")
    assert state.binding_volumes == VolumeBindings((), (key,), (key,), "node-b", 600.0)


def test_the_timeout_is_bind_timeout_seconds() -> None:
    s = Storage(
        NODES,
        [storage_class("dyn", provisioner=DRIVER), claim("pvc-a", "dyn")],
        args={"bindTimeoutSeconds": 30},
    )
    state = s.place(claiming("pod-a", "pvc-a"), "node-a")
    assert state.binding_volumes is not None and state.binding_volumes.timeout_seconds == 30.0


def test_unreserve_restores_what_reserve_assumed() -> None:
    s = Storage(
        NODES,
        [
            storage_class("local"),
            storage_class("dyn", provisioner=DRIVER),
            claim("pvc-a", "local"),
            claim("pvc-b", "dyn"),
            volume("pv-a0", "local", affinity={HOSTNAME: ["node-a"]}),
        ],
    )
    pod = claiming("pod-a", "pvc-a", "pvc-b")
    state = s.place(pod, "node-a")
    assert s.catalog.is_assumed_volume("pv-a0") and s.catalog.is_assumed_claim("default/pvc-b")
    s.harness.profile.run_unreserve(state, pod, "node-a")
    pv, pvc = s.catalog.volume("pv-a0"), s.catalog.claim("default", "pvc-b")
    assert pv is not None and pv.claim_ref is None
    assert pvc is not None and SELECTED not in pvc.annotations
    # Unreserve is idempotent
    s.harness.profile.run_unreserve(state, pod, "node-a")
    assert not s.catalog.is_assumed_volume("pv-a0")


def test_gang_members_reserved_in_turn_never_share_a_volume() -> None:
    s = _local_world()
    first, second, third = (claiming(f"pod-{c}", f"pvc-{c}") for c in "abc")
    s.place(first, "node-a")
    state = s.place(second, "node-a")
    assert state.binding_volumes is not None
    assert [b.pv_name for b in state.binding_volumes.static] == ["pv-a1"]
    # both volumes of node-a are taken: the third member fits nowhere
    assert s.filter_messages(third) == dict.fromkeys(("node-a", "node-b"), ERR_REASON_BIND_CONFLICT)


def test_a_member_rolled_back_frees_its_volume_for_the_next() -> None:
    s = _local_world()
    first, second, third = (claiming(f"pod-{c}", f"pvc-{c}") for c in "abc")
    s.place(first, "node-a")
    state = s.place(second, "node-a")
    s.harness.profile.run_unreserve(state, second, "node-a")
    assert s.filter_messages(third)["node-a"] == ""


def test_the_pod_tried_again_finds_the_volume_assumed_for_it() -> None:
    # kube's TestFindAssumeVolumes: after Reserve the claim's own volume is pre-bound to it
    s = _local_world()
    pod = claiming("pod-a", "pvc-a")
    s.place(pod, "node-a")
    state = s.place(pod, "node-a")
    assert state.binding_volumes is not None
    assert [b.pv_name for b in state.binding_volumes.static] == ["pv-a0"]
    # the volume's claimRef is already the claim's: nothing new to assume
    assert state.read("PreFilter" + VB).assumed_volumes == []


def test_smallest_claims_get_the_smallest_volumes() -> None:
    s = Storage(
        NODES,
        [
            storage_class("local"),
            claim("big", "local", request="5Gi"),
            claim("small", "local", request="1Gi"),
            volume("pv-5", "local", "5Gi", affinity={HOSTNAME: ["node-a"]}),
            volume("pv-1", "local", "1Gi", affinity={HOSTNAME: ["node-a"]}),
        ],
    )
    state = s.place(claiming("pod-a", "big", "small"), "node-a")
    assert state.binding_volumes is not None
    assert {b.claim.name: b.pv_name for b in state.binding_volumes.static} == {"small": "pv-1", "big": "pv-5"}


def test_a_cloned_cycle_state_keeps_its_own_assumptions() -> None:
    s = _local_world()
    pod = claiming("pod-a", "pvc-a")
    state = s.place(pod, "node-a")
    clone = state.clone()
    s.harness.profile.run_unreserve(clone, pod, "node-a")
    assert state.read("PreFilter" + VB).assumed_volumes == ["pv-a0"]
    assert clone.read("PreFilter" + VB).assumed_volumes == []


def test_decisions_follow_the_catalog_between_cycles() -> None:
    s = _local_world()
    pod = claiming("pod-c", "pvc-c")
    s.place(claiming("pod-a", "pvc-a"), "node-a")
    s.place(claiming("pod-b", "pvc-b"), "node-a")
    assert s.filter_messages(pod)["node-b"] == ERR_REASON_BIND_CONFLICT
    s.add(volume("pv-b0", "local", affinity={HOSTNAME: ["node-b"]}))
    assert s.filter_messages(pod) == {"node-a": ERR_REASON_BIND_CONFLICT, "node-b": ""}
