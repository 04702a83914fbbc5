"""Koordinator's gang scheduling and job-level preemption manuals on the real control plane: the
YAML files of tests/manuals, unchanged, applied with `kubectl apply -f` in the manuals' order to
`koordpy run` (with its embedded operators) and two KWOK nodes, and the outcomes the manuals print.

Sources: https://github.com/koordinator-sh/website/blob/main/docs/user-manuals/gang-scheduling.md and
docs/user-manuals/job-level-preemption.md. The manifests name the `default` namespace and select no
node, so this module's nodes must be the only ones, and every test deletes what it applied.

The nodes are those of the job-level preemption manual, "2 worker nodes, each with CPU: 4 cores,
Memory: 16 GiB", named as its output names them; the gang manual's 40m pods fit there too."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from tests.e2e.cluster import find_kubectl, only_nodes
from tests.e2e.test_job_preemption import EventWatch
from tests.e2e.test_run import CONFIG_DOC, RunProcess
from tests.manuals.simulation import MANUALS
from tests.support.controlplane import ControlPlane, free_port
from tests.support.polling import eventually

GANG = MANUALS / "gang_scheduling"
PREEMPTION = MANUALS / "job_level_preemption"
NODES = ("cn-beijing.1", "cn-beijing.2")
NAMESPACE = "default"
SIGS_PODGROUPS = ("scheduling.sigs.k8s.io", "v1alpha1", "podgroups")
# how long a lone gang member is watched to stay Pending (the manual looks after 7 s)
LONE_MEMBER_SECONDS = 3.0
VICTIM_MESSAGE = re.compile(
    # the manual prints `triggerpod:`, Koordinator writes `triggerPod:`
    r"^koord-scheduler: preempting to accommodate higher priority pods, "
    r"preemptor: default/hp-training-job, trigger[pP]od: default/hp-worker-1$"
)


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def kubectl(request: pytest.FixtureRequest) -> str:
    return find_kubectl(request, "the manuals")


@pytest.fixture(scope="module")
async def manual_nodes(control_plane: ControlPlane) -> AsyncIterator[tuple[str, ...]]:
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    async with only_nodes(control_plane, NODES, resources, "the manuals'") as nodes:
        yield nodes


@pytest.fixture(scope="module")
def koordpy_run(
    control_plane: ControlPlane, manual_nodes: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunProcess]:
    """`koordpy run` serving the profile koord-scheduler, with the PodGroup operator in-process."""
    workdir = tmp_path_factory.mktemp("manuals")
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG_DOC))
    proc = RunProcess(
        ["--kubeconfig", str(control_plane.kubeconfig), "--config", str(config), "--no-leader-elect"],
        workdir / "run.log",
        free_port(),
        "e2e-manuals",
    )
    try:
        yield proc
    finally:
        proc.proc.send_signal(signal.SIGTERM)
        try:
            proc.proc.wait(30)
        finally:
            proc.close()


class Kubectl:
    """`kubectl` against the control plane; what it applied is deleted by `clean_up`."""

    def __init__(self, binary: str, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.applied: list[Path] = []

    async def __call__(self, *args: str, check: bool = True) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            "--kubeconfig",
            str(self.kubeconfig),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        code = proc.returncode or 0
        if check:
            assert code == 0, f"kubectl {' '.join(args)} failed ({code}): {err.decode()}"
        return code, out.decode(), err.decode()

    async def apply(self, path: Path) -> None:
        self.applied.append(path)
        await self("apply", "-f", str(path))

    async def clean_up(self, core: client.CoreV1Api) -> None:
        names = set()
        for path in reversed(self.applied):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and doc["kind"] == "Pod":
                    names.add(doc["metadata"]["name"])
            await self(
                "delete", "-f", str(path), "--ignore-not-found", "--grace-period=0", "--force", check=False
            )

        async def gone() -> bool:
            pods = (await core.list_namespaced_pod(NAMESPACE)).items
            return not names & {p.metadata.name for p in pods}

        await eventually(gone, timeout=30, what=f"the manual's pods {sorted(names)} deleted")


@pytest.fixture
async def kubectl_apply(
    kubectl: str, control_plane: ControlPlane, koordpy_run: RunProcess, core: client.CoreV1Api
) -> AsyncIterator[Kubectl]:
    assert control_plane.kubeconfig is not None

    async def ready() -> bool:
        return (await koordpy_run.get("/readyz"))[0] == 200

    await eventually(ready, timeout=60, what="koordpy run ready")
    run = Kubectl(kubectl, control_plane.kubeconfig)
    try:
        yield run
    finally:
        await run.clean_up(core)
    assert koordpy_run.proc.poll() is None, f"koordpy run exited: {koordpy_run.log()}"


# ---------------------------------------------------------------------------------------------- helpers
async def namespace_pods(core: client.CoreV1Api) -> dict[str, client.V1Pod]:
    return {p.metadata.name: p for p in (await core.list_namespaced_pod(NAMESPACE)).items}


async def running(core: client.CoreV1Api, names: tuple[str, ...]) -> dict[str, str] | None:
    """Each pod's node, once every one is bound and Running."""
    pods = await namespace_pods(core)
    if all(n in pods and pods[n].spec.node_name and pods[n].status.phase == "Running" for n in names):
        return {n: pods[n].spec.node_name for n in names}
    return None


async def sigs_podgroup_status(kube_api: client.ApiClient, name: str) -> dict[str, Any]:
    obj = await client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        *SIGS_PODGROUPS[:2], NAMESPACE, SIGS_PODGROUPS[2], name
    )
    return dict(obj.get("status") or {})


# --------------------------------------------------------------------------------------- gang scheduling
@pytest.mark.parametrize(
    ("files", "podgroup"),
    [
        pytest.param(
            (GANG / "podgroup.yaml", GANG / "crd-pod1.yaml", GANG / "crd-pod2.yaml"),
            "gang-example",
            id="through-gang-crd",
        ),
        pytest.param(
            (GANG / "annotation-pod1.yaml", GANG / "annotation-pod2.yaml"), None, id="through-annotation"
        ),
    ],
)
async def test_gang_quick_start_first_pod_waits_until_the_second_then_both_run(
    kubectl_apply: Kubectl,
    core: client.CoreV1Api,
    kube_api: client.ApiClient,
    files: tuple[Path, ...],
    podgroup: str | None,
) -> None:
    *before, first, second = files
    for path in before:
        await kubectl_apply.apply(path)
    await kubectl_apply.apply(first)
    await asyncio.sleep(LONE_MEMBER_SECONDS)
    alone = (await namespace_pods(core))["pod-example1"]
    assert alone.spec.node_name is None and alone.status.phase == "Pending", alone.status

    await kubectl_apply.apply(second)
    placed = await eventually(
        lambda: running(core, ("pod-example1", "pod-example2")), timeout=30, what="both members Running"
    )
    assert set(placed.values()) <= set(NODES)

    if podgroup is not None:

        async def status_running() -> dict[str, Any] | None:
            status = await sigs_podgroup_status(kube_api, podgroup)
            return status if status.get("phase") == "Running" else None

        status = await eventually(status_running, timeout=30, what="the PodGroup's status Running")
        assert (status.get("running"), status.get("scheduled")) == (2, 2), status


async def test_gang_manual_podgroup_is_listed_by_its_qualified_name(kubectl_apply: Kubectl) -> None:
    """The manual lists its PodGroup with `kubectl get pgs` and `kubectl get pg gang-example`. Those
    short names belong to scheduler-plugins' `scheduling.x-k8s.io` PodGroup (Koordinator's own CRD
    no longer declares any), so a Koordinator PodGroup is found by the qualified plural, which also
    works beside scheduler-plugins' CRD (docs/migrating.md)."""
    await kubectl_apply.apply(GANG / "podgroup.yaml")
    qualified = "podgroups.scheduling.sigs.k8s.io"
    _, listed, said = await kubectl_apply("get", qualified, "-n", NAMESPACE)
    assert "gang-example" in listed, f"kubectl get {qualified} printed {listed!r}, {said!r}"
    code, shown, err = await kubectl_apply(
        "get", qualified, "gang-example", "-n", NAMESPACE, "-o", "yaml", check=False
    )
    assert code == 0, err
    obj = yaml.safe_load(shown)
    assert (obj["apiVersion"], obj["kind"]) == ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"), obj
    assert obj["spec"]["scheduleTimeoutSeconds"] == 100, obj


# ---------------------------------------------------------------------------------- job-level preemption
async def test_job_level_preemption_evicts_one_pod_per_node_and_binds_the_workers_where_nominated(
    kubectl_apply: Kubectl, core: client.CoreV1Api, kube_api: client.ApiClient
) -> None:
    low, workers = ("lp-pod-1", "lp-pod-2"), ("hp-worker-1", "hp-worker-2")
    await kubectl_apply.apply(PREEMPTION / "priorityclasses.yaml")
    await kubectl_apply.apply(PREEMPTION / "low-priority-pods.yaml")
    filled = await eventually(lambda: running(core, low), timeout=30, what="the low-priority pods Running")
    assert sorted(filled.values()) == sorted(NODES), filled  # "1 per node"

    async with EventWatch(kube_api, NAMESPACE) as watch:
        await kubectl_apply.apply(PREEMPTION / "high-priority-job.yaml")
        placed = await eventually(lambda: running(core, workers), timeout=60, what="the workers Running")

        async def victims_gone() -> bool:
            return not set(low) & set(await namespace_pods(core))

        await eventually(victims_gone, timeout=30, what="the victims deleted")

    # "Koordinator will evict one pod per node": both low-priority pods, each marked first
    marked = {n for n, seen in watch.all().items() if any(s.conditions("DisruptionTarget") for s in seen)}
    assert marked == set(low)
    for name in low:
        mark = watch.first(name, "DisruptionTarget", lambda s: s.conditions("DisruptionTarget"))
        condition = mark.conditions("DisruptionTarget")[-1]
        assert (condition["status"], condition["reason"]) == ("True", "PreemptionByScheduler"), condition
        assert VICTIM_MESSAGE.match(condition["message"]), condition["message"]
        deleting = watch.first(name, "a deletionTimestamp", lambda s: s.deleting)
        assert mark.seq <= deleting.seq, f"{name} deleted before it was marked"

    # "high-priority pods are nominated", then run on those nodes once the victims terminated
    victims_deleted = max(watch.first(v, "DELETED", lambda s: s.type == "DELETED").seq for v in low)
    nominated: dict[str, str | None] = {}
    for name in workers:
        seen = watch.first(
            name, "a nominated node before binding", lambda s: bool(s.nominated and not s.node_name)
        )
        nominated[name] = seen.nominated
        bound = watch.first(name, "bound", lambda s: bool(s.node_name))
        assert bound.node_name == nominated[name], (name, nominated[name], bound.node_name)
        assert bound.seq > victims_deleted, f"{name} bound before the victims were gone"
    assert set(nominated.values()) == set(NODES), nominated
    assert placed == nominated
