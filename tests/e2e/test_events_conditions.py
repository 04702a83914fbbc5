"""Events and PodScheduled conditions on the real control plane, as kube-scheduler writes them.

- Each profile reports its own events: kube-scheduler gives every profile a recorder made by
  client-go's `NewRecorder(scheme, schedulerName)` (pkg/scheduler/profile/profile.go), so an
  events.k8s.io Event has `reportingController: <schedulerName>` and `reportingInstance:
  <schedulerName>-<hostname>` (koordpy's instance identity in place of the hostname). Created
  through events.k8s.io/v1, an event may not carry a source (pkg/apis/core/validation/events.go),
  so its core/v1 view has no source.component and `kubectl describe` shows the reportingController
  under From.
- A bound pod's event is `Normal Scheduled`, action Binding, `Successfully assigned <ns>/<pod> to
  <node>` (pkg/scheduler/schedule_one.go finishBinding).
- A pod that is not placed has PodScheduled=False with one of kube's reasons (handleSchedulingFailure:
  Unschedulable for a rejection, SchedulerError for an error), which cluster-autoscaler keys on;
  koordpy's finer reason leads the message, and its FailedScheduling event's note is that message.
- kube-scheduler records a FailedScheduling for the pod it attempted. A Strict gang is rolled back at
  its first failure and its members are tried in name order, so a gang whose first member fits
  nowhere has that member tried on every pass and the others never: after several passes every member
  has the gang's condition, the tried member has one FailedScheduling event (repeats of it count up
  one series, never more objects), and the members never tried have none.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from koordpy.cluster.world import KubeWorld
from koordpy.config.models import parse_configuration
from koordpy.framework.clock import RealClock
from koordpy.kubeapi import KubeApi
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from tests.e2e.kwok import labelled_nodes
from tests.support.controlplane import ControlPlane
from tests.support.polling import eventually

# profiles of this module's own, so that no other test's pods are theirs
PROFILE = "events-scheduler"
OTHER_PROFILE = "events-scheduler-2"
NODE_LABEL = "koordpy.e2e/events-nodes"
NODE_CPU = "4"
GANG_NAME = "gang.scheduling.koordinator.sh/name"
GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
KUBECTL = Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")

CONFIG_DOC: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": PROFILE}, {"schedulerName": OTHER_PROFILE}],
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 2,
    # an unschedulable gang is tried again every few seconds although nothing in the cluster changes
    "podMaxInUnschedulablePodsDuration": 2,
}


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
async def nodes(control_plane: ControlPlane) -> AsyncIterator[str]:
    """Two KWOK nodes of 4 cpus, with a label of this module's own; yields the label's value."""
    resources = {"cpu": NODE_CPU, "memory": "32Gi", "pods": "110"}
    async with labelled_nodes(str(control_plane.kubeconfig), "events-node", 2, NODE_LABEL, resources) as (
        label,
        _,
    ):
        yield label


@pytest.fixture
async def world(control_plane: ControlPlane, nodes: str) -> AsyncIterator[KubeWorld]:
    api = await KubeApi.connect(str(control_plane.kubeconfig))
    metrics = SchedulerMetrics()
    scheduler = Scheduler(parse_configuration(CONFIG_DOC), registry(), RealClock(), metrics)
    world = KubeWorld(api, scheduler, metrics, f"e2e-events-{uuid.uuid4().hex[:8]}")
    await world.start()
    try:
        await asyncio.wait_for(world.wait_synced(), 60)
        yield world
    finally:
        await world.shutdown(5.0)
        await api.close()


# ---------------------------------------------------------------------------------------------- helpers
def pod_manifest(
    name: str, label: str, profile: str = PROFILE, cpu: str = "100m", gang: tuple[str, int] | None = None
) -> client.V1Pod:
    annotations = {GANG_NAME: gang[0], GANG_MIN: str(gang[1])} if gang else None
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        spec=client.V1PodSpec(
            scheduler_name=profile,
            node_selector={NODE_LABEL: label},
            termination_grace_period_seconds=0,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests={"cpu": cpu, "memory": "64Mi"}),
                )
            ],
        ),
    )


async def pod_scheduled(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    pod = await core.read_namespaced_pod(name, namespace)
    return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)


async def unschedulable(core: client.CoreV1Api, namespace: str, names: list[str]) -> dict[str, Any]:
    """Each pod's PodScheduled=False condition once every one has it; empty until then."""
    found = {name: await pod_scheduled(core, namespace, name) for name in names}
    if all(c is not None and c.status == "False" for c in found.values()):
        return found
    return {}


async def events_about(kube_api: client.ApiClient, namespace: str, reason: str) -> dict[str, list[Any]]:
    """events.k8s.io Events of `reason` in the namespace, by the name of the pod they regard."""
    found: dict[str, list[Any]] = {}
    for e in (await client.EventsV1Api(kube_api).list_namespaced_event(namespace)).items:
        if e.reason == reason:
            found.setdefault(e.regarding.name, []).append(e)
    return found


def attempts(world: KubeWorld, profile: str) -> float:
    return (
        world.metrics.registry.get_sample_value(
            "scheduler_schedule_attempts_total", {"profile": profile, "result": "unschedulable"}
        )
        or 0.0
    )


def kubectl() -> str | None:
    return str(KUBECTL) if KUBECTL.exists() else shutil.which("kubectl")


# ---------------------------------------------------------------------------------------------- tests
async def test_a_bound_pods_event_is_kubes_reported_by_its_profile(
    world: KubeWorld, core: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, nodes: str
) -> None:
    profiles = {"by-first": PROFILE, "by-second": OTHER_PROFILE}
    for name, profile in profiles.items():
        await core.create_namespaced_pod(namespace, pod_manifest(name, nodes, profile))

    async def scheduled() -> dict[str, list[Any]]:
        found = await events_about(kube_api, namespace, "Scheduled")
        return found if set(found) == set(profiles) else {}

    events = await eventually(scheduled, what="a Scheduled event per pod")
    core_view = {
        e.involved_object.name: e
        for e in (await core.list_namespaced_event(namespace)).items
        if e.reason == "Scheduled"
    }
    for name, profile in profiles.items():
        node = (await core.read_namespaced_pod(name, namespace)).spec.node_name
        (event,) = events[name]
        assert (event.type, event.action, event.note) == (
            "Normal",
            "Binding",
            f"Successfully assigned {namespace}/{name} to {node}",
        )
        assert (event.reporting_controller, event.reporting_instance) == (
            profile,
            f"{profile}-{world.identity}",
        )
        # kubectl describe's From: the source's component, else the reporting controller
        seen = core_view[name]
        assert not (seen.source and seen.source.component), seen.source
        assert seen.reporting_component == profile


async def test_kubectl_describe_shows_the_profile_as_from(
    world: KubeWorld,
    control_plane: ControlPlane,
    core: client.CoreV1Api,
    kube_api: client.ApiClient,
    namespace: str,
    nodes: str,
) -> None:
    binary = kubectl()
    if binary is None:
        pytest.skip("no kubectl to describe the pod with")
    await core.create_namespaced_pod(namespace, pod_manifest("described", nodes, OTHER_PROFILE))
    await eventually(lambda: events_about(kube_api, namespace, "Scheduled"), what="the Scheduled event")
    node = (await core.read_namespaced_pod("described", namespace)).spec.node_name
    described = await asyncio.to_thread(
        subprocess.run,
        [
            binary,
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "-n",
            namespace,
            "describe",
            "pod",
            "described",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    line = (
        rf"^\s+Normal\s+Scheduled\s+\S+\s+{re.escape(OTHER_PROFILE)}\s+"
        rf"Successfully assigned {re.escape(namespace)}/described to {re.escape(node)}\s*$"
    )
    assert re.search(line, described.stdout, re.M), described.stdout


async def test_a_gang_short_of_members_is_unschedulable_and_says_why_first(
    world: KubeWorld, core: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, nodes: str
) -> None:
    names = ["short-0", "short-1"]
    await asyncio.gather(
        *(
            core.create_namespaced_pod(namespace, pod_manifest(name, nodes, gang=("short", 3)))
            for name in names
        )
    )
    conditions = await eventually(
        lambda: unschedulable(core, namespace, names), what="PodScheduled=False on both members"
    )
    for name, condition in conditions.items():
        # cluster-autoscaler looks at reason Unschedulable; koordpy's diagnosis leads the message
        assert condition.reason == "Unschedulable", (name, condition)
        assert condition.message.startswith("GangNotReady: "), (name, condition.message)
        assert f"{namespace}/short has 2 of minMember 3 pods" in condition.message, condition.message

    async def told() -> dict[str, list[Any]]:
        found = await events_about(kube_api, namespace, "FailedScheduling")
        return found if set(found) == set(names) else {}

    for name, events in (await eventually(told, what="a FailedScheduling event per member")).items():
        (event,) = events
        assert (event.type, event.reporting_controller) == ("Warning", PROFILE)
        assert event.note == conditions[name].message


async def test_a_gang_failing_pass_after_pass_tells_each_member_and_records_only_the_tried(
    world: KubeWorld, core: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, nodes: str
) -> None:
    # more cpus than any node has for the first member in name order: each pass tries it, fails,
    # and rolls the Strict gang back before the others are tried
    cpus = {"wide-0": "8", "wide-1": "100m", "wide-2": "100m"}
    await asyncio.gather(
        *(
            core.create_namespaced_pod(namespace, pod_manifest(name, nodes, cpu=cpu, gang=("wide", 3)))
            for name, cpu in cpus.items()
        )
    )
    names = list(cpus)

    async def passes() -> bool:
        return attempts(world, PROFILE) >= 3

    await eventually(passes, timeout=60, what="three passes of the gang")
    conditions = await eventually(
        lambda: unschedulable(core, namespace, names), what="PodScheduled=False on every member"
    )
    messages = set()
    for name, condition in conditions.items():
        # kube's own reason: the message is koordpy's as it is
        assert condition.reason == "Unschedulable", (name, condition)
        assert condition.message.startswith(f"gang {namespace}/wide cannot be placed as a whole: "), (
            name,
            condition.message,
        )
        messages.add(condition.message)
    assert len(messages) == 1, messages

    async def recorded() -> dict[str, list[Any]]:
        return await events_about(kube_api, namespace, "FailedScheduling")

    await eventually(recorded, what="the tried member's FailedScheduling event")
    # whatever is still on its way lands before the events are counted
    await world.status_writes.wait_idle(5.0)
    await world.events.wait_idle(5.0)
    events = await recorded()
    assert set(events) == {"wide-0"}, {n: [e.note[:60] for e in found] for n, found in events.items()}
    (event,) = events["wide-0"]
    assert (event.type, event.reporting_controller, event.note) == (
        "Warning",
        PROFILE,
        conditions["wide-0"].message,
    )
