"""The ElasticQuota examples of Koordinator's user manual and of scheduler-plugins' capacity
scheduling README on the real control plane, replayed step by step as the documents do them: each
manifest applied with `kubectl apply`, then what the document shows observed, then the next.

Sources:
- Koordinator, docs/user-manuals/capacity-scheduling.md (koordinator-sh/website): "Quick Start by
  Label", "Quick Start by Namespace", the `preemptible: false` label of "used > runtime revoke",
  and "WebHook Verify" 1 to 4;
- scheduler-plugins, pkg/capacityscheduling/README.md: its configuration and "Demo".

The scheduler runs in-process with two profiles: koord-scheduler (koordpy's defaults, as
Koordinator's chart runs ElasticQuota) and default-scheduler exactly as the README configures it
(CapacityScheduling in multiPoint, the only PostFilter). The quota operator runs beside it and
writes the status and annotations the documents print.

What differs from the documents, and why:
- The manifests name no node and Koordinator's root quota shares out the whole cluster, so this
  module's two nodes must be the only ones (as in test_manuals). They are the README's "entire
  cluster has 8 CPUs available": 4 cpus and 16Gi each; the Koordinator manual names no cluster size
  and its 40m pod fits anywhere. No value of either document is scaled.
- Koordinator's manual lists its quotas with `kubectl get eqs`. Its chart's CRD has no short names
  (the manual predates that), and `eq`/`eqs` belong to scheduler-plugins' ElasticQuota, so the test
  uses `elasticquotas.scheduling.sigs.k8s.io` (docs/migrating.md).
- The manual's quota also shows the `shared-weight` annotation and the parent label `root`: those
  are filled in by koord-manager's mutating webhook, which koordpy does not replace; the test
  asserts what koord-scheduler writes (`request`, `runtime`, `status.used`).
- "WebHook Verify": without Koordinator's webhook the apiserver accepts every object; koordpy keeps
  what the webhook refuses out of scheduling, with the condition Valid=False and a Warning event
  naming the problem, and holds a pod of a parent quota with QuotaInvalid. Each refused object is
  deleted before the next example, so that each starts where the manual's does; example 4's parent
  is renamed, since quota names are unique across a Koordinator cluster and the manual reuses one.
  Example 5 (the `is-parent` label cannot change) has no counterpart: koordpy takes the change
  and checks the tree again (docs/migrating.md). The manual's sections that need koord-manager
  (multi quota tree) or koord-scheduler's debug API are not replayed.
- The README's Deployments: the control plane runs no controller manager, so the test creates
  the pods their ReplicaSet would (the Deployment's template, `replicas` of them) and, when one is
  preempted, its replacement, as the ReplicaSet would.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.cluster.world import KubeWorld
from koordpy.config.models import parse_configuration
from koordpy.framework.clock import RealClock
from koordpy.kubeapi import KubeApi
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.status.quota import ANNOTATION_REQUEST, ANNOTATION_RUNTIME
from operators import run_operators
from tests.e2e.cluster import find_kubectl, only_nodes
from tests.e2e.test_run import CONFIG_DOC, PodWatch, events_of
from tests.support.controlplane import ControlPlane
from tests.support.polling import eventually

SIGS, X_K8S = "scheduling.sigs.k8s.io", "scheduling.x-k8s.io"
SIGS_QUOTAS = f"elasticquotas.{SIGS}"
NODES = ("eq-manual-1", "eq-manual-2")
TOTAL_OVER_MIN = re.compile(r"quotas in total: cpu used \d+ \+ requested \d+ > min 8")

# scheduler-plugins' README, "Tutorial": its configuration's one profile, as it is
CAPACITY_PROFILE: dict[str, Any] = {
    "schedulerName": "default-scheduler",
    "plugins": {
        "multiPoint": {"enabled": [{"name": "CapacityScheduling"}]},
        "postFilter": {"enabled": [{"name": "CapacityScheduling"}], "disabled": [{"name": "*"}]},
    },
}


# ------------------------------------------------------------------------------- the documents' text
KOORD_QUOTA = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: quota-example
  namespace: {namespace}
  labels:
    quota.scheduling.koordinator.sh/parent: ""
    quota.scheduling.koordinator.sh/is-parent: "false"
spec:
  max:
    cpu: 40
    memory: 40Gi
  min:
    cpu: 10
    memory: 20Mi
"""

# the pod of "Quick Start by Label"; "by Namespace" drops the label
KOORD_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: pod-example
  namespace: {namespace}
  labels:
    quota.scheduling.koordinator.sh/name: "{quota}"
spec:
  schedulerName: koord-scheduler
  containers:
  - command:
    - sleep
    - 365d
    image: busybox
    imagePullPolicy: IfNotPresent
    name: curlimage
    resources:
      limits:
        cpu: 40m
        memory: 40Mi
      requests:
        cpu: 40m
        memory: 40Mi
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  restartPolicy: Always
"""

# "WebHook Verify": the parent of examples 1 to 3 (the manual's `true` and `false` label values are
# quoted: a label value is a string, and kubectl refuses a bare boolean)
WEBHOOK_PARENT = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: quota-parent-example
  namespace: default
  labels:
    quota.scheduling.koordinator.sh/is-parent: "true"
spec:
  max:
    cpu: 40
    memory: 40Gi
  min:
    cpu: 10
    memory: 20Mi
"""

WEBHOOK_CHILD_MIN_SUM = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: quota-example
  namespace: default
  labels:
    quota.scheduling.koordinator.sh/is-parent: "false"
    quota.scheduling.koordinator.sh/parent: "quota-parent-example"
spec:
  max:
    cpu: 40
    memory: 40Gi
  min:
    cpu: 20
    memory: 20Mi
"""

WEBHOOK_CHILD_KEYS = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: quota-example
  namespace: default
  labels:
    quota.scheduling.koordinator.sh/is-parent: "false"
    quota.scheduling.koordinator.sh/parent: "quota-parent-example"
spec:
  max:
    cpu: 40
    memory: 40Gi
    test: 200
  min:
    cpu: 10
    memory: 20Mi
"""

# example 3's pod is the quick start's, labelled with the parent quota
WEBHOOK_POD = KOORD_POD.format(namespace="default", quota="quota-parent-example")

# example 4, its "parent" renamed (see the module's docstring)
WEBHOOK_NOT_PARENT = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: quota-not-parent-example
  namespace: default
  labels:
    quota.scheduling.koordinator.sh/is-parent: "false"
spec:
  max:
    cpu: 40
    memory: 40Gi
  min:
    cpu: 10
    memory: 20Mi
"""

# example 4's child is example 2's, under the renamed parent
WEBHOOK_UNDER_CHILD = WEBHOOK_CHILD_KEYS.replace(
    'parent: "quota-parent-example"', 'parent: "quota-not-parent-example"'
)

DEMO_QUOTA = """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: {name}
  namespace: {name}
spec:
  max:
    cpu: 6
  min:
    cpu: 4
"""

DEMO_APP = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  namespace: {namespace}
  labels:
    app: nginx
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      name: nginx
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx
        resources:
          limits:
            cpu: 2
          requests:
            cpu: 2
"""


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def kubectl_binary(request: pytest.FixtureRequest) -> str:
    return find_kubectl(request, "the quota manuals")


@pytest.fixture(scope="module")
async def doc_nodes(control_plane: ControlPlane) -> AsyncIterator[tuple[str, ...]]:
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    async with only_nodes(control_plane, NODES, resources, "the documents'") as nodes:
        yield nodes


@pytest.fixture(scope="module")
async def scheduler(control_plane: ControlPlane, doc_nodes: tuple[str, ...]) -> AsyncIterator[KubeWorld]:
    """The scheduler (koord-scheduler and the README's default-scheduler) and the operators."""
    doc = {**CONFIG_DOC, "profiles": [*CONFIG_DOC["profiles"], CAPACITY_PROFILE]}
    api = await KubeApi.connect(str(control_plane.kubeconfig))
    metrics = SchedulerMetrics()
    world = KubeWorld(
        api,
        Scheduler(parse_configuration(doc), registry(), RealClock(), metrics),
        metrics,
        f"e2e-quota-manuals-{uuid.uuid4().hex[:6]}",
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    operators = asyncio.create_task(run_operators(str(control_plane.kubeconfig), stop, ready))
    await world.start()
    try:
        await asyncio.wait_for(world.wait_synced(), 60)
        await asyncio.wait_for(ready.wait(), 30)
        yield world
    finally:
        stop.set()
        await asyncio.wait_for(operators, 30)
        await world.shutdown(5.0)
        await api.close()


class Kubectl:
    """`kubectl` against the control plane, manifests given on stdin as the README does
    (`cat <<EOF | kubectl apply -f -`); what it applied is deleted afterwards."""

    def __init__(self, binary: str, kubeconfig: str) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.applied: list[str] = []

    async def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            "--kubeconfig",
            self.kubeconfig,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
        return out.decode()

    async def apply(self, manifest: str) -> str:
        self.applied.append(manifest)
        return await self("apply", "-f", "-", stdin=manifest)

    async def delete(self, manifest: str) -> None:
        await self(
            "delete",
            "-f",
            "-",
            "--ignore-not-found",
            "--grace-period=0",
            "--force",
            stdin=manifest,
            check=False,
        )

    async def get_yaml(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = yaml.safe_load(
            await self("get", resource, "-n", namespace, name, "-o", "yaml")
        )
        return found


@pytest.fixture
async def kubectl(
    kubectl_binary: str, control_plane: ControlPlane, scheduler: KubeWorld
) -> AsyncIterator[Kubectl]:
    run = Kubectl(kubectl_binary, str(control_plane.kubeconfig))
    try:
        yield run
    finally:
        for manifest in reversed(run.applied):
            await run.delete(manifest)


# ---------------------------------------------------------------------------------------------- helpers
async def pods_of(core: client.CoreV1Api, namespace: str) -> dict[str, client.V1Pod]:
    return {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}


def waiting_message(pod: client.V1Pod | None) -> str | None:
    """The PodScheduled=False message of an unbound pod."""
    if pod is None or pod.spec.node_name:
        return None
    for c in pod.status.conditions or ():
        if c.type == "PodScheduled" and c.status == "False":
            return str(c.message)
    return None


async def quota_condition(kubectl: Kubectl, name: str) -> dict[str, Any] | None:
    status = (await kubectl.get_yaml(SIGS_QUOTAS, "default", name)).get("status") or {}
    return next((c for c in status.get("conditions") or () if c["type"] == "Valid"), None)


async def quota_event(kube_api: client.ApiClient, name: str, reason: str) -> list[Any]:
    found = await events_of(kube_api, "default", reason)
    return [e for e in found if e.regarding.kind == "ElasticQuota" and e.regarding.name == name]


async def refused(kubectl: Kubectl, kube_api: client.ApiClient, name: str, reason: str) -> str:
    """What koordpy says of a quota Koordinator's webhook would refuse: its Valid=False condition
    (checked against the Warning event) and its message."""

    async def invalid() -> dict[str, Any] | None:
        found = await quota_condition(kubectl, name)
        return found if found is not None and found["status"] == "False" else None

    condition = await eventually(invalid, timeout=15, what=f"{name}'s Valid=False condition")
    assert condition["reason"] == reason, condition
    (event,) = await eventually(
        lambda: quota_event(kube_api, name, reason), timeout=15, what=f"{name}'s {reason} event"
    )
    assert event.type == "Warning" and event.note == condition["message"], event
    return str(condition["message"])


async def replicaset_pods(core: client.CoreV1Api, deployment: dict[str, Any], count: int) -> list[str]:
    """Create `count` pods from the Deployment's template, named as its ReplicaSet names them."""
    template = deployment["spec"]["template"]
    namespace = deployment["metadata"]["namespace"]
    names = []
    for _ in range(count):
        name = f"{deployment['metadata']['name']}-{uuid.uuid4().hex[:5]}"
        # the client sends a dict as it is: the template goes out exactly as the Deployment has it
        body: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**template["metadata"], "name": name, "namespace": namespace},
            "spec": template["spec"],
        }
        await core.create_namespaced_pod(namespace, body)
        names.append(name)
    return names


# ----------------------------------------------------------------------- Koordinator: the quick starts
@pytest.mark.parametrize(
    ("namespace", "label"),
    [("default", True), ("quota-example", False)],
    ids=["quick-start-by-label", "quick-start-by-namespace"],
)
async def test_koordinator_quick_start_pod_runs_and_the_quota_shows_its_request_runtime_and_used(
    kubectl: Kubectl, core: client.CoreV1Api, namespace: str, label: bool
) -> None:
    if namespace != "default":
        # "kubectl create ns quota-example"; a namespace is never removed here (no controller
        # manager), so a second run finds it
        await kubectl("create", "ns", namespace, check=False)
    await kubectl.apply(KOORD_QUOTA.format(namespace=namespace))
    listed = await kubectl("get", SIGS_QUOTAS, "-n", namespace)
    assert "quota-example" in listed, listed

    pod = KOORD_POD.format(namespace=namespace, quota="quota-example")
    if not label:
        doc = yaml.safe_load(pod)
        del doc["metadata"]["labels"]
        pod = yaml.safe_dump(doc)
    await kubectl.apply(pod)

    async def running() -> client.V1Pod | None:
        found = (await pods_of(core, namespace)).get("pod-example")
        return found if found is not None and found.status.phase == "Running" else None

    placed = await eventually(running, timeout=30, what="pod-example Running")
    assert placed.spec.node_name in NODES

    # "Verify quota-example has changed": the manual's request, runtime and used
    expected = {"cpu": "40m", "memory": "40Mi"}

    async def changed() -> dict[str, Any] | None:
        obj = await kubectl.get_yaml(SIGS_QUOTAS, namespace, "quota-example")
        annotations = obj["metadata"].get("annotations") or {}
        if (obj.get("status") or {}).get("used") == expected and ANNOTATION_RUNTIME in annotations:
            return obj
        return None

    obj = await eventually(changed, timeout=20, what="quota-example's used, request and runtime")
    annotations = obj["metadata"]["annotations"]
    assert annotations[ANNOTATION_REQUEST] == '{"cpu":"40m","memory":"40Mi"}', annotations
    assert annotations[ANNOTATION_RUNTIME] == '{"cpu":"40m","memory":"40Mi"}', annotations
    assert orjson.loads(annotations[ANNOTATION_RUNTIME]) == expected
    assert "conditions" not in obj["status"], obj["status"]


async def test_koordinator_non_preemptible_pod_may_not_use_more_than_the_min(
    kubectl: Kubectl, core: client.CoreV1Api
) -> None:
    """The manual's "used > runtime revoke": a pod labelled `preemptible: false` "is not allowed to
    use resources exceeding the Min". The manual's pod asks for 40Mi of memory against
    quota-example's min of 20Mi, so it waits, where the same pod without the label runs (the quick
    start)."""
    await kubectl.apply(KOORD_QUOTA.format(namespace="default"))
    doc = yaml.safe_load(KOORD_POD.format(namespace="default", quota="quota-example"))
    doc["metadata"]["labels"]["quota.scheduling.koordinator.sh/preemptible"] = "false"
    await kubectl.apply(yaml.safe_dump(doc))

    async def held() -> str | None:
        return waiting_message((await pods_of(core, "default")).get("pod-example"))

    message = await eventually(held, timeout=15, what="the non-preemptible pod held")
    assert "quota quota-example: memory non-preemptible used 0 + requested 40Mi > min 20Mi" in message


# ------------------------------------------------------------------------ Koordinator: "WebHook Verify"
async def test_koordinator_webhook_examples_stay_out_of_scheduling_with_the_problem_named(
    kubectl: Kubectl, core: client.CoreV1Api, kube_api: client.ApiClient
) -> None:
    await kubectl.apply(WEBHOOK_PARENT)

    # 1. "checkMinQuotaSum allChildren SumMinQuota > parentMinQuota, parent: quota-parent-example"
    await kubectl.apply(WEBHOOK_CHILD_MIN_SUM)
    message = await refused(kubectl, kube_api, "quota-example", "MinExceedsParentMin")
    assert "above parent quota-parent-example's min 10" in message, message
    await kubectl.delete(WEBHOOK_CHILD_MIN_SUM)

    # 2. "checkSubAndParentGroupMaxQuotaKeySame failed: quota-parent-example's key is not the same
    # with quota-example"
    await kubectl.apply(WEBHOOK_CHILD_KEYS)
    message = await refused(kubectl, kube_api, "quota-example", "QuotaResourcesMismatch")
    assert "spec.max names cpu, memory, test" in message and "quota-parent-example" in message, message
    await kubectl.delete(WEBHOOK_CHILD_KEYS)

    # 3. "pod can not be linked to a parentQuotaGroup,quota:quota-parent-example, pod:pod-example"
    await kubectl.apply(WEBHOOK_POD)

    async def held() -> str | None:
        return waiting_message((await pods_of(core, "default")).get("pod-example"))

    message = await eventually(held, timeout=15, what="pod-example held")
    assert "QuotaInvalid" in message, message
    assert "quota quota-parent-example is a parent quota; pods join quotas without children" in message
    await kubectl.delete(WEBHOOK_POD)

    # 4. "quota-example has parentName quota-parent-example but the parentQuotaInfo's IsParent is false"
    await kubectl.apply(WEBHOOK_NOT_PARENT)
    await kubectl.apply(WEBHOOK_UNDER_CHILD)
    message = await refused(kubectl, kube_api, "quota-example", "ParentIsNotParentQuota")
    assert "parent quota quota-not-parent-example is not a parent quota" in message, message
    # the quotas the webhook accepted are not touched by the refused ones
    for name in ("quota-parent-example", "quota-not-parent-example"):
        assert await quota_condition(kubectl, name) is None, name


# ---------------------------------------------------------------- scheduler-plugins: the README's demo
async def test_capacity_scheduling_demo_quota2_reclaims_its_min_from_quota1(
    kubectl: Kubectl, core: client.CoreV1Api, kube_api: client.ApiClient, scheduler: KubeWorld
) -> None:
    # "create namespace and ElasticQuota"
    for name in ("quota1", "quota2"):
        await kubectl("create", "ns", name, check=False)
    for name in ("quota1", "quota2"):
        await kubectl.apply(DEMO_QUOTA.format(name=name))
    app1, app2 = (
        yaml.safe_load(DEMO_APP.format(namespace=ns, replicas=n)) for ns, n in (("quota1", 4), ("quota2", 2))
    )
    try:
        async with PodWatch(kube_api, "quota1") as watch:
            # "create app1": usage reaches min 4, then max 6; "Finally, there is one pending pod."
            await kubectl.apply(yaml.safe_dump(app1))
            first = await replicaset_pods(core, app1, 4)

            async def three_running() -> dict[str, client.V1Pod] | None:
                pods = await pods_of(core, "quota1")
                up = [n for n in first if pods[n].status.phase == "Running"]
                pending = [n for n in first if waiting_message(pods[n])]
                return pods if (len(up), len(pending)) == (3, 1) else None

            pods = await eventually(
                three_running, timeout=30, what="three of app1's pods Running, one Pending"
            )
            (pending,) = [n for n in first if not pods[n].spec.node_name]
            message = waiting_message(pods[pending])
            assert message is not None and "quota quota1/quota1: cpu used 6 + requested 2 > max 6" in message

            async def used(namespace: str, cpu: str) -> bool:
                obj = await kubectl.get_yaml(f"elasticquotas.{X_K8S}", namespace, namespace)
                return bool((obj.get("status") or {}).get("used") == {"cpu": cpu})

            await eventually(lambda: used("quota1", "6"), timeout=15, what="quota1's status.used cpu 6")

            # "create app2": one pod fits the 2 cpus left; the second, within quota2's min, preempts
            # one of quota1's pods (quota1 is above its min)
            await kubectl.apply(yaml.safe_dump(app2))
            second = await replicaset_pods(core, app2, 2)

            async def app2_running() -> bool:
                pods = await pods_of(core, "quota2")
                return all(pods[n].status.phase == "Running" for n in second)

            await eventually(app2_running, timeout=45, what="both of app2's pods Running")

            async def one_gone() -> list[str] | None:
                left = await pods_of(core, "quota1")
                gone = [n for n in first if n not in left]
                return gone if len(gone) == 1 else None

            (victim,) = await eventually(
                one_gone, timeout=30, what="one of app1's pods preempted and deleted"
            )
            assert victim != pending
            (mark, *_) = watch.conditions(victim, "DisruptionTarget")
            assert (mark["status"], mark["reason"]) == ("True", "PreemptionByScheduler"), mark
            assert "quota2/" in mark["message"], mark

            # the ReplicaSet replaces its pod. Both of quota1's waiting pods are held by
            # scheduler-plugins' second rule: above its min, a quota may borrow only while all quotas
            # together stay within the sum of their mins (8), which quota2's pods now fill; and
            # neither preempts, since quota1 is not within its min
            (replacement,) = await replicaset_pods(core, app1, 1)

            async def two_waiting() -> dict[str, str | None] | None:
                pods = await pods_of(core, "quota1")
                said = {n: waiting_message(pods[n]) for n in (pending, replacement)}
                return said if all(m and TOTAL_OVER_MIN.search(m) for m in said.values()) else None

            await eventually(two_waiting, timeout=20, what="both of quota1's waiting pods held by the total")
            await eventually(lambda: used("quota1", "4"), timeout=15, what="quota1's status.used cpu 4")
            await eventually(lambda: used("quota2", "4"), timeout=15, what="quota2's status.used cpu 4")
            await asyncio.sleep(2)
            final = await pods_of(core, "quota1")
            assert sorted(p.status.phase for p in final.values()) == [
                "Pending",
                "Pending",
                "Running",
                "Running",
            ]
    finally:
        for namespace in ("quota1", "quota2"):
            with contextlib.suppress(ApiException):
                await core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
