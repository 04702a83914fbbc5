"""Job-level preemption for gangs, one rule at a time: eligibility, candidate nodes, placement of
every member, the job-aware cost model, the fewest victims per node, safety and the effects.

Each case builds a small cluster, runs the real scheduler on the virtual clock and looks at what
the first preemption did: victims are deleted after 30 virtual seconds unless a case says
otherwise, so a run of one second shows the decision before anyone takes the freed room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from koordpy.api.node import Node
from koordpy.api.pdb import PodDisruptionBudget
from koordpy.api.podgroup import PodGroup
from koordpy.config.models import default_configuration
from koordpy.plugins.coscheduling.preemption import JobPreemption
from koordpy.scheduler import Scheduler
from koordpy.simulate.loader import Scenario
from koordpy.simulate.memory import MemoryCluster
from koordpy.simulate.runner import build_world
from tests.builders import node_dict, pod_dict

HIGH = 1000
G = "gang.scheduling.koordinator.sh"
PG_LABEL = "pod-group.scheduling.sigs.k8s.io"
DISABLE_PREEMPTIBLE = {"scheduling.koordinator.sh/disable-preemptible": "true"}
QUOTA_NOT_PREEMPTIBLE = {"quota.scheduling.koordinator.sh/preemptible": "false"}
NOT_HELPFUL = "preemption not helpful"
POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to terminating pod on the nominated node."
MESSAGE = (
    "{scheduler}: preempting to accommodate higher priority pods, preemptor: {job}, triggerPod: {trigger}"
)


# --------------------------------------------------------------------------------------- builders
def node(name: str, cpu: str = "4", zone: str | None = None) -> dict[str, Any]:
    return node_dict(name, cpu=cpu, labels={"zone": zone} if zone else None)


def running(
    name: str,
    on: str,
    cpu: str,
    priority: int,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, bool] | None = None,
) -> dict[str, Any]:
    """A pod already running on node `on`; `owner` is a ReplicaSet name and whether it is the
    pod's controller."""
    obj = pod_dict(name, cpu=cpu, priority=priority, node_name=on, labels=labels, annotations=annotations)
    if owner is not None:
        rs, controller = owner
        obj["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs,
                "uid": f"uid-{rs}",
                "controller": controller,
            }
        ]
    obj["status"] = {"phase": "Running"}
    return obj


def terminating(name: str, on: str, cpu: str, priority: int, by_preemption: bool = True) -> dict[str, Any]:
    """A pod being deleted; `by_preemption`: it carries the scheduler's DisruptionTarget condition."""
    obj = running(name, on, cpu, priority)
    obj["metadata"]["deletionTimestamp"] = "1970-01-01T01:00:00Z"
    if by_preemption:
        obj["status"]["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    return obj


def group(name: str, min_member: int, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"minMember": min_member},
    }


def grouped(groups: Sequence[str], **annotations: str) -> dict[str, str]:
    """PodGroup annotations joining the named PodGroups into one gang group."""
    ids = ",".join(f'"default/{g}"' for g in groups)
    return {f"{G}/groups": f"[{ids}]", **annotations}


def member(
    name: str,
    gang: str,
    cpu: str,
    priority: int = HIGH,
    nominated: str | None = None,
    zone: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pending member of PodGroup `gang`."""
    if zone is not None:
        spec["nodeSelector"] = {"zone": zone}
    obj = pod_dict(name, cpu=cpu, priority=priority, labels={PG_LABEL: gang}, spec=spec)
    if nominated is not None:
        obj["status"] = {"nominatedNodeName": nominated}
    return obj


def plain(name: str, cpu: str, priority: int) -> dict[str, Any]:
    return pod_dict(name, cpu=cpu, priority=priority)


def pdb(name: str, app: str) -> dict[str, Any]:
    """A budget that allows no disruption of the single pod labelled app=<app>."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }


def world_of(objs: Sequence[dict[str, Any]]) -> MemoryCluster:
    sc = Scenario()
    for obj in objs:
        kind = obj["kind"]
        if kind == "Node":
            sc.nodes.append(Node.from_dict(obj))
        elif kind == "PodGroup":
            sc.pod_groups.append(PodGroup.from_dict(obj))
        elif kind == "PodDisruptionBudget":
            sc.pdbs.append(PodDisruptionBudget.from_dict(obj))
        else:
            sc.pods.append(obj)
    return build_world(sc, default_configuration())


def run(objs: Sequence[dict[str, Any]], seconds: float = 1.0) -> MemoryCluster:
    world = world_of(objs)
    world.run(seconds)
    return world


def victims(world: MemoryCluster) -> set[str]:
    return {e.victim.split("/", 1)[1] for e in world.evictions}


def nominated(world: MemoryCluster) -> dict[str, str]:
    out = {}
    for key, raw in world.pods.items():
        node_name = (raw.get("status") or {}).get("nominatedNodeName")
        if node_name:
            out[key.split("/", 1)[1]] = node_name
    return out


def bound(world: MemoryCluster, names: Sequence[str]) -> dict[str, str]:
    return {n: world.views[f"default/{n}"].node_name for n in names}


def message(world: MemoryCluster, pod: str) -> str:
    outcome = world.scheduler.outcomes.get(f"default/{pod}")
    return outcome.message if outcome is not None else ""


def one_member_gang(cpu: str = "4", **spec: Any) -> list[dict[str, Any]]:
    return [group("g", 1), member("g-0", "g", cpu, **spec)]


def two_member_gang(cpu: str = "2", **spec: Any) -> list[dict[str, Any]]:
    return [group("g", 2), member("g-0", "g", cpu, **spec), member("g-1", "g", cpu, **spec)]


# --------------------------------------------------------------------------------------- eligibility
ELIGIBILITY = [
    # (objects, expected victims, fragment of the trigger's message when nobody is evicted)
    pytest.param(
        [node("n1"), running("low", "n1", "4", 1), *two_member_gang()],
        {"low"},
        None,
        id="control-a-lower-priority-pod-is-evicted",
    ),
    pytest.param(
        [node("n1"), running("low", "n1", "4", 1), *two_member_gang(preemptionPolicy="Never")],
        set(),
        POLICY_NEVER,
        id="preemption-policy-never-evicts-nobody",
    ),
    pytest.param(
        [
            node("n1", cpu="6"),
            terminating("leaving", "n1", "2", 1),
            running("other", "n1", "4", 1),
            group("g", 2),
            member("g-0", "g", "2", nominated="n1"),
            member("g-1", "g", "2"),
        ],
        set(),
        TERMINATING,
        id="member-nominated-where-a-preempted-pod-still-terminates-evicts-nobody",
    ),
    pytest.param(
        [
            node("n1", cpu="6"),
            terminating("leaving", "n1", "2", 1),
            running("other", "n1", "4", 1),
            group("g", 2),
            member("g-0", "g", "2"),
            member("g-1", "g", "2", nominated="n1"),
        ],
        set(),
        TERMINATING,
        id="any-member-nominated-where-a-preempted-pod-still-terminates-evicts-nobody",
    ),
    pytest.param(
        [
            node("n1", cpu="6"),
            terminating("leaving", "n1", "2", 1, by_preemption=False),
            running("other", "n1", "4", 1),
            group("g", 2),
            member("g-0", "g", "2", nominated="n1"),
            member("g-1", "g", "2"),
        ],
        {"other"},
        None,
        id="pod-terminating-for-another-reason-does-not-block",
    ),
    pytest.param(
        [
            node("n1", cpu="6"),
            terminating("leaving", "n1", "2", HIGH + 1),
            running("other", "n1", "4", 1),
            group("g", 2),
            member("g-0", "g", "2", nominated="n1"),
            member("g-1", "g", "2"),
        ],
        {"other"},
        None,
        id="terminating-pod-of-higher-priority-does-not-block",
    ),
    pytest.param(
        [
            node("n1", zone="a"),
            node("n2", zone="b"),
            terminating("leaving", "n1", "4", 1),
            running("low", "n2", "4", 1),
            group("g", 2),
            member("g-0", "g", "2", zone="b", nominated="n1"),
            member("g-1", "g", "2", zone="b"),
        ],
        {"low"},
        None,
        # reference 3.2: the trigger's nominated node that it can never use is ignored
        id="trigger-nominated-where-it-can-never-fit-does-not-block",
    ),
]


@pytest.mark.parametrize(("objs", "expected", "why"), ELIGIBILITY)
def test_eligibility(objs: list[dict[str, Any]], expected: set[str], why: str | None) -> None:
    world = run(objs)
    assert victims(world) == expected
    if why is not None:
        assert why in message(world, "g-0")


# --------------------------------------------------------------------------------------- candidate nodes
CANDIDATES = [
    # (objects, expected victims, fragment of the trigger's message when nobody is evicted)
    pytest.param(
        [
            node("n1", zone="a"),
            node("n2", zone="b"),
            running("cheap", "n1", "4", 1),
            running("dearer", "n2", "4", 50),
            *one_member_gang(zone="b"),
        ],
        {"dearer"},
        None,
        id="node-failing-the-node-selector-is-never-a-candidate",
    ),
    pytest.param(
        [
            node("n1", zone="a"),
            node("n2", zone="b"),
            running("cheap", "n1", "4", 1),
            running("boss", "n2", "4", HIGH + 1),
            *one_member_gang(zone="b"),
        ],
        set(),
        # n1 is not looked at: no node where evicting could help has a victim
        f"{NOT_HELPFUL}: no potential victims",
        id="victims-only-where-the-node-selector-fails-evicts-nobody",
    ),
]


@pytest.mark.parametrize(("objs", "expected", "why"), CANDIDATES)
def test_candidate_nodes(objs: list[dict[str, Any]], expected: set[str], why: str | None) -> None:
    world = run(objs)
    assert victims(world) == expected
    if why is not None:
        assert why in message(world, "g-0")


# --------------------------------------------------------------------------------------- placement
def test_later_members_see_the_earlier_ones_planned() -> None:
    """Three 16-CPU members and two 32-CPU nodes, each full of one low-priority pod: one node takes
    two members, the other the third; both pods have to go."""
    objs = [
        node("n1", cpu="32"),
        node("n2", cpu="32"),
        running("v1", "n1", "32", 1),
        running("v2", "n2", "32", 1),
        group("g", 3),
        *(member(f"g-{i}", "g", "16") for i in range(3)),
    ]
    world = run(objs)
    assert victims(world) == {"v1", "v2"}
    plan = nominated(world)
    assert set(plan) == {"g-0", "g-1", "g-2"}
    assert sorted(Counter(plan.values()).values()) == [1, 2]


def test_every_member_is_placed_or_nobody_is_evicted() -> None:
    objs = [
        node("n1", zone="a"),
        running("low", "n1", "4", 1),
        group("g", 2),
        member("g-0", "g", "4"),
        # no node is in zone c: evicting "low" would make room for g-0 only
        member("g-1", "g", "1", zone="c"),
    ]
    world = run(objs)
    assert victims(world) == set()
    assert NOT_HELPFUL in message(world, "g-0")
    assert nominated(world) == {}


# --------------------------------------------------------------------------------------- cost model
WEB = ("web", True)


def rs_pods(prefix: str, on: str, cpus: Sequence[str], priority: int, rs: str) -> list[dict[str, Any]]:
    return [running(f"{prefix}-{i}", on, cpu, priority, owner=(rs, True)) for i, cpu in enumerate(cpus)]


COST = [
    # (objects, expected victims); n1 comes first by name, so a tie would pick it
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("x1", "n1", "2", 10),
            running("x2", "n1", "2", 10),
            *rs_pods("web", "n2", ["2", "2"], 10, "web"),
            *one_member_gang(),
        ],
        {"web-0", "web-1"},
        id="fewest-jobs-before-fewest-pods",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("x1", "n1", "2", 10),
            running("x2", "n1", "2", 10),
            running("solo", "n2", "4", 50),
            *one_member_gang(),
        ],
        {"solo"},
        id="fewest-jobs-before-lowest-priority",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("solo", "n1", "4", 50),
            *rs_pods("web", "n2", ["2", "2"], 10, "web"),
            *one_member_gang(),
        ],
        {"web-0", "web-1"},
        id="lowest-priority-before-fewest-pods",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            *rs_pods("web", "n1", ["2", "2"], 10, "web"),
            running("solo", "n2", "4", 10),
            *one_member_gang(),
        ],
        {"solo"},
        id="fewest-pods-when-jobs-and-priorities-tie",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("x1", "n1", "2", 10),
            running("x2", "n1", "2", 10),
            group("batch", 2),
            running("batch-0", "n2", "2", 10, labels={PG_LABEL: "batch"}),
            running("batch-1", "n2", "2", 10, labels={PG_LABEL: "batch"}),
            *one_member_gang(),
        ],
        {"batch-0", "batch-1"},
        id="podgroup-members-are-one-job",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("x1", "n1", "2", 10),
            running("x2", "n1", "2", 10),
            *(
                running(
                    f"ann-{i}", "n2", "2", 10, annotations={f"{G}/name": "ann", f"{G}/min-available": "2"}
                )
                for i in range(2)
            ),
            *one_member_gang(),
        ],
        {"ann-0", "ann-1"},
        id="annotation-gang-members-are-one-job",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("x1", "n1", "2", 10),
            running("x2", "n1", "2", 10),
            group("gx", 1, **grouped(["gx", "gy"])),
            group("gy", 1, **grouped(["gx", "gy"])),
            running("gx-0", "n2", "2", 10, labels={PG_LABEL: "gx"}),
            running("gy-0", "n2", "2", 10, labels={PG_LABEL: "gy"}),
            *one_member_gang(),
        ],
        {"gx-0", "gy-0"},
        id="gang-group-is-one-job",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("solo", "n1", "4", 50),
            running("owned-0", "n2", "2", 10, owner=("shared", False)),
            running("owned-1", "n2", "2", 10, owner=("shared", False)),
            *one_member_gang(),
        ],
        # an owner that is not the controller does not make one job: n2 would disrupt two
        {"solo"},
        id="non-controller-owner-is-not-a-job",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            node("n3"),
            running("web-0", "n1", "4", 10, owner=WEB),
            running("x", "n2", "4", 10),
            running("web-1", "n3", "4", 10, owner=WEB),
            *two_member_gang(cpu="4"),
        ],
        # g-0 disrupts job web on n1; for g-1, n3 disrupts no new job while n2 would disrupt x
        {"web-0", "web-1"},
        id="a-job-already-disrupted-costs-nothing-more",
    ),
    pytest.param(
        [
            node("n1", cpu="8"),
            node("n2"),
            *(running(f"a-{i}", "n1", "2", 10) for i in range(4)),
            running("b-0", "n2", "1", 10),
            running("b-1", "n2", "1", 10),
            running("b-2", "n2", "2", 10),
            *one_member_gang(),
        ],
        # n1 needs two of its four pods gone (two jobs), n2 all three of its pods (three jobs)
        {"a-2", "a-3"},
        id="jobs-counted-among-the-victims-actually-needed",
    ),
    pytest.param(
        [
            node("n1", cpu="8"),
            node("n2"),
            *rs_pods("wide", "n1", ["2", "2", "2", "2"], 10, "wide"),
            *rs_pods("narrow", "n2", ["1", "1", "2"], 10, "narrow"),
            *one_member_gang(),
        ],
        # one job either way: n1 needs two victims, n2 three
        {"wide-2", "wide-3"},
        id="pods-counted-among-the-victims-actually-needed",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("guarded", "n1", "2", 10, labels={"app": "db"}),
            running("spare", "n1", "2", 10),
            running("dearer", "n2", "4", 50),
            pdb("db", "db"),
            *one_member_gang(cpu="2"),
        ],
        # on n1 evicting "spare" alone is enough and breaks no budget; n2 would cost a higher priority
        {"spare"},
        id="budgets-counted-among-the-victims-actually-needed",
    ),
]


@pytest.mark.parametrize(("objs", "expected"), COST)
def test_cost_model(objs: list[dict[str, Any]], expected: set[str]) -> None:
    assert victims(run(objs)) == expected


# --------------------------------------------------------------------------------------- fewest victims
FEWEST = [
    # one node; (its pods, gang, PDBs, expected victims)
    pytest.param(
        "8",
        [running(f"p{p}", "n1", "2", p) for p in (10, 20, 30, 40)],
        one_member_gang(),
        [],
        {"p10", "p20"},
        id="only-as-much-room-as-needed-lowest-priorities-first",
    ),
    pytest.param(
        "4",
        [running("small-a", "n1", "1", 20), running("small-b", "n1", "1", 20), running("big", "n1", "2", 10)],
        one_member_gang(cpu="2"),
        [],
        {"big"},
        id="more-important-pods-are-given-back-first",
    ),
    pytest.param(
        "4",
        [running("big", "n1", "2", 30), running("small-a", "n1", "1", 10), running("small-b", "n1", "1", 10)],
        one_member_gang(cpu="2"),
        [],
        {"small-a", "small-b"},
        id="two-less-important-pods-go-before-one-more-important",
    ),
    pytest.param(
        "4",
        [running("b", "n1", "2", 10), running("a", "n1", "2", 10)],
        one_member_gang(cpu="2"),
        [],
        # equal priority: given back in job order, then name
        {"b"},
        id="equal-priority-given-back-in-job-order",
    ),
    pytest.param(
        "8",
        [running(f"p{p}", "n1", "2", p) for p in (10, 20, 30, 40)],
        two_member_gang(),
        [],
        {"p10", "p20"},
        id="two-members-on-one-node-evict-two-of-four",
    ),
    pytest.param(
        "4",
        [running("guarded", "n1", "2", 10, labels={"app": "db"}), running("free", "n1", "2", 20)],
        one_member_gang(cpu="2"),
        [pdb("db", "db")],
        {"free"},
        id="pdb-protected-pod-is-given-back-first",
    ),
]


@pytest.mark.parametrize(("cpu", "pods", "gang", "pdbs", "expected"), FEWEST)
def test_fewest_victims_on_a_node(
    cpu: str,
    pods: list[dict[str, Any]],
    gang: list[dict[str, Any]],
    pdbs: list[dict[str, Any]],
    expected: set[str],
) -> None:
    world = run([node("n1", cpu=cpu), *pods, *pdbs, *gang])
    assert victims(world) == expected
    assert set(nominated(world).values()) == {"n1"}


# --------------------------------------------------------------------------------------- safety
SAFETY = [
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("pinned", "n1", "4", 1, labels=DISABLE_PREEMPTIBLE),
            running("other", "n2", "4", 50),
            *one_member_gang(),
        ],
        {"other"},
        id="disable-preemptible-pod-is-never-a-victim",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("quota", "n1", "4", 1, labels=QUOTA_NOT_PREEMPTIBLE),
            running("other", "n2", "4", 50),
            *one_member_gang(),
        ],
        {"other"},
        id="quota-preemptible-false-pod-is-never-a-victim",
    ),
    pytest.param(
        [
            node("n1"),
            running("pinned", "n1", "2", 1, labels=DISABLE_PREEMPTIBLE),
            running("quota", "n1", "2", 1, labels=QUOTA_NOT_PREEMPTIBLE),
            *one_member_gang(),
        ],
        set(),
        id="only-opted-out-pods-evicts-nobody",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("peer", "n1", "4", HIGH),
            running("lesser", "n2", "4", HIGH - 1),
            *one_member_gang(),
        ],
        {"lesser"},
        id="equal-priority-pod-is-never-a-victim",
    ),
    pytest.param(
        [
            node("n1"),
            running("peer", "n1", "2", HIGH),
            running("boss", "n1", "2", HIGH + 1),
            *one_member_gang(),
        ],
        set(),
        id="only-equal-or-higher-priority-pods-evicts-nobody",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("low-1", "n1", "4", 1),
            running("low-2", "n2", "4", 1),
            group("g", 2),
            member("g-0", "g", "4"),
            member("g-1", "g", "8"),
        ],
        set(),
        id="member-bigger-than-any-node-evicts-nobody",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("low-1", "n1", "4", 1),
            running("low-2", "n2", "4", 1),
            group("g", 3),
            *(member(f"g-{i}", "g", "4") for i in range(3)),
        ],
        set(),
        id="gang-bigger-than-the-cluster-evicts-nobody",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2"),
            running("low", "n2", "4", 20),
            group("a", 1, **grouped(["a", "b"], **{f"{G}/mode": "NonStrict"})),
            group("b", 1, **grouped(["a", "b"], **{f"{G}/mode": "NonStrict"})),
            # a-0 fits on n1 and waits there for its group; b-0 fits nowhere: a-0 is the cheaper
            # pod to evict, but it belongs to the preempting group
            member("a-0", "a", "2", priority=10),
            member("b-0", "b", "4"),
        ],
        {"low"},
        id="member-of-the-preempting-gang-group-is-never-a-victim",
    ),
]


@pytest.mark.parametrize(("objs", "expected"), SAFETY)
def test_safety(objs: list[dict[str, Any]], expected: set[str]) -> None:
    world = run(objs)
    assert victims(world) == expected
    if not expected:
        assert NOT_HELPFUL in message(world, "g-0")
        assert nominated(world) == {}


# --------------------------------------------------------------------------------------- effects
def test_victims_get_the_disruption_target_condition_naming_job_and_trigger() -> None:
    objs = [
        node("n1"),
        running("v1", "n1", "2", 1),
        running("v2", "n1", "2", 1),
        *two_member_gang(schedulerName="koord-scheduler"),
    ]
    world = run(objs)
    text = MESSAGE.format(scheduler="koord-scheduler", job="default/g", trigger="default/g-0")
    for name in ("v1", "v2"):
        raw = world.pods[f"default/{name}"]
        assert raw["metadata"].get("deletionTimestamp")
        conditions = [c for c in raw["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert conditions == [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": text}
        ]
    assert [(e.victim, e.preemptor, e.trigger_pod, e.message) for e in world.evictions] == [
        ("default/v1", "default/g", "default/g-0", text),
        ("default/v2", "default/g", "default/g-0", text),
    ]


def test_gang_group_preempts_as_one_job() -> None:
    objs = [
        node("n1"),
        node("n2"),
        running("low-1", "n1", "4", 1),
        running("low-2", "n2", "4", 1),
        group("a", 1, **grouped(["a", "b"])),
        group("b", 1, **grouped(["a", "b"])),
        member("a-0", "a", "4"),
        member("b-0", "b", "4"),
    ]
    world = run(objs)
    assert {(e.victim, e.preemptor, e.trigger_pod) for e in world.evictions} == {
        ("default/low-1", "default/a,default/b", "default/a-0"),
        ("default/low-2", "default/a,default/b", "default/a-0"),
    }
    assert sorted(nominated(world).values()) == ["n1", "n2"]


def test_every_member_is_nominated_then_bound_where_nominated_after_the_grace_period() -> None:
    objs = [node(f"n{i}") for i in (1, 2, 3)] + [running(f"low-{i}", f"n{i}", "4", 1) for i in (1, 2, 3)]
    objs += [group("g", 3), *(member(f"g-{i}", "g", "4") for i in range(3))]
    world = world_of(objs)
    world.run(29.5)
    plan = nominated(world)
    assert sorted(plan) == ["g-0", "g-1", "g-2"]
    assert sorted(plan.values()) == ["n1", "n2", "n3"]
    # the victims are still terminating: nobody is bound yet
    assert world.deleted == set()
    assert set(bound(world, list(plan)).values()) == {""}
    world.run(600)
    assert world.deleted == {"default/low-1", "default/low-2", "default/low-3"}
    assert bound(world, list(plan)) == plan


@pytest.mark.parametrize(
    ("grace", "arrives_at"),
    [
        # the victims are gone at t=2 while the job still backs off from its last pass
        pytest.param(2, 0.5, id="arrives-early-room-freed-while-the-job-backs-off"),
        pytest.param(2, 1.5, id="arrives-late-room-freed-while-the-job-backs-off"),
        pytest.param(30, 5.0, id="arrives-during-a-long-grace-period"),
    ],
)
def test_pod_arriving_while_the_victims_terminate_does_not_take_the_room(
    grace: int, arrives_at: float
) -> None:
    pods = [running("v1", "n1", "2", 1), running("v2", "n1", "2", 1)]
    for obj in pods:
        obj["spec"]["terminationGracePeriodSeconds"] = grace
    world = world_of([node("n1"), *pods, *two_member_gang()])
    world.run(arrives_at)
    assert victims(world) == {"v1", "v2"}
    world.add_pod(plain("medium", "2", HIGH // 2))
    world.run(600)
    assert bound(world, ["g-0", "g-1", "medium"]) == {"g-0": "n1", "g-1": "n1", "medium": ""}
    assert victims(world) == {"v1", "v2"}


def test_at_most_one_attempt_per_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A NonStrict gang tries every member in a pass; all three fail, yet the pass preempts once."""
    calls: list[str] = []
    original_pass = Scheduler._cycle_group
    original_preempt = JobPreemption.preempt

    def counting_pass(self: Scheduler, *args: Any) -> None:
        calls.append("|")
        original_pass(self, *args)

    def counting_preempt(self: JobPreemption, trigger: Any, gang: Any, diagnosis: Any) -> Any:
        calls.append(trigger.name)
        return original_preempt(self, trigger, gang, diagnosis)

    monkeypatch.setattr(Scheduler, "_cycle_group", counting_pass)
    monkeypatch.setattr(JobPreemption, "preempt", counting_preempt)
    objs = [node(f"n{i}") for i in (1, 2, 3)] + [running(f"low-{i}", f"n{i}", "4", 1) for i in (1, 2, 3)]
    objs += [group("g", 3, **{f"{G}/mode": "NonStrict"}), *(member(f"g-{i}", "g", "4") for i in range(3))]
    world = run(objs, 600)
    passes = "".join(c if c == "|" else "p" for c in calls).split("|")[1:]
    assert passes and all(len(p) <= 1 for p in passes), calls
    assert {e.trigger_pod for e in world.evictions} == {"default/g-0"}
    assert victims(world) == {"low-1", "low-2", "low-3"}
    assert set(bound(world, ["g-0", "g-1", "g-2"]).values()) == {"n1", "n2", "n3"}
