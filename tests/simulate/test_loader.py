"""Scenario loading: every kind, every input shape, workload expansion, priority admission, and the
exact location named by each input error."""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api.node import Node
from koordpy.simulate.loader import Scenario, ScenarioError, Source, load_scenario


def node(name: str, cpu: Any = "4", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": 110}},
        **extra,
    }


def pod(name: str, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


def priority_class(name: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def workload(
    kind: str, name: str, template_spec: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    api_version = "batch/v1" if kind == "Job" else "apps/v1"
    template = {
        "metadata": {"labels": {"app": name}, "annotations": {"note": "from-template"}},
        "spec": template_spec or {"containers": [{"name": "main", "image": "busybox"}]},
    }
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"template": template, **spec},
    }


def write(path: Path, *docs: Any) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def load(tmp_path: Path, *docs: Any) -> Scenario:
    return load_scenario([write(tmp_path / "input.yaml", *docs)])


def pod_names(scenario: Scenario) -> list[str]:
    return [p["metadata"]["name"] for p in scenario.pods]


# --- kinds -------------------------------------------------------------------------------------------

EVERY_KIND: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"tier": "gold"}}},
    priority_class("high", 1000),
    node("node-1"),
    {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "gang-a"},
        "spec": {"minMember": 2},
    },
    {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "gang-b", "namespace": "team"},
        "spec": {"minMember": 3},
    },
    {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    },
    {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": []},
    },
    pod("solo"),
    workload("ReplicaSet", "rs"),
    workload("Deployment", "deploy"),
    workload("StatefulSet", "sts"),
    workload("Job", "job"),
]


def test_every_kind_is_read_into_its_list(tmp_path: Path) -> None:
    scenario = load(tmp_path, *EVERY_KIND)
    assert [ns.name for ns in scenario.namespaces] == ["team"]
    assert scenario.namespaces[0].labels["tier"] == "gold"
    assert [pc.name for pc in scenario.priority_classes] == ["high"]
    assert [n.name for n in scenario.nodes] == ["node-1"]
    assert [(g.api_group, g.key, g.min_member) for g in scenario.pod_groups] == [
        ("scheduling.sigs.k8s.io", "default/gang-a", 2),
        ("scheduling.x-k8s.io", "team/gang-b", 3),
    ]
    assert [p.key for p in scenario.pdbs] == ["default/pdb"]
    assert [t["metadata"]["name"] for t in scenario.topologies] == ["default"]
    assert pod_names(scenario) == ["solo", "rs-0", "deploy-0", "sts-0", "job-0"]


def test_sources_name_file_and_document_for_every_object(tmp_path: Path) -> None:
    path = write(tmp_path / "input.yaml", *EVERY_KIND)
    scenario = load_scenario([path])
    assert scenario.sources[("Node", "", "node-1")] == Source(path, 3)
    assert scenario.sources[("Namespace", "", "team")] == Source(path, 1)
    assert scenario.sources[("PodGroup", "team", "gang-b")] == Source(path, 5)
    assert scenario.sources[("Pod", "default", "solo")] == Source(path, 8)
    # A stamped pod comes from its workload's document.
    assert scenario.sources[("Pod", "team", "sts-0")] == Source(path, 11)
    assert scenario.sources[("StatefulSet", "team", "sts")] == Source(path, 11)


def test_defaults_namespace_scheduler_name_and_uid(tmp_path: Path) -> None:
    scenario = load(tmp_path, pod("a"), pod("b", "team", schedulerName="koord-scheduler"))
    a, b = scenario.pods
    assert a["metadata"]["namespace"] == "default"
    assert a["metadata"]["uid"] == "uid-pod-default-a"
    assert a["spec"]["schedulerName"] == "default-scheduler"
    assert b["spec"]["schedulerName"] == "koord-scheduler"
    assert a["spec"]["priority"] == 0
    assert a["spec"]["preemptionPolicy"] == "PreemptLowerPriority"


def test_explicit_uid_is_kept(tmp_path: Path) -> None:
    p = pod("a")
    p["metadata"]["uid"] = "1234"
    assert load(tmp_path, p).pods[0]["metadata"]["uid"] == "1234"


def test_timestamps_stay_strings_as_in_the_api(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
        "  creationTimestamp: 2024-01-01T00:00:00Z\nspec: {containers: []}\n"
    )
    scenario = load_scenario([str(path)])
    assert scenario.pods[0]["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z"


def test_pod_with_bad_spec_is_kept_for_the_scheduler_to_report(tmp_path: Path) -> None:
    bad = pod("bad")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    bad_toleration = pod("odd", tolerations=[{"key": "", "operator": "Equal", "value": "x"}])
    assert pod_names(load(tmp_path, bad, bad_toleration)) == ["bad", "odd"]


def test_pod_group_with_invalid_spec_is_kept(tmp_path: Path) -> None:
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": -1},
    }
    (loaded,) = load(tmp_path, group).pod_groups
    assert loaded.spec_error is not None and loaded.spec_error.path == "spec.minMember"


def test_nodes_keep_input_order(tmp_path: Path) -> None:
    assert [n.name for n in load(tmp_path, node("b"), node("a"), node("c")).nodes] == ["b", "a", "c"]


# --- input shapes ------------------------------------------------------------------------------------


def test_directory_reads_yaml_files_in_name_order_not_recursively(tmp_path: Path) -> None:
    write(tmp_path / "b.yml", pod("from-b"))
    write(tmp_path / "a.yaml", pod("from-a"))
    write(tmp_path / "c.yaml", pod("from-c"))
    (tmp_path / "notes.txt").write_text("not yaml: [")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "0.yaml", pod("nested"))
    scenario = load_scenario([str(tmp_path)])
    assert pod_names(scenario) == ["from-a", "from-b", "from-c"]
    assert scenario.sources[("Pod", "default", "from-b")] == Source(str(tmp_path / "b.yml"), 1)


def test_paths_are_read_in_the_order_given(tmp_path: Path) -> None:
    first = write(tmp_path / "z.yaml", pod("z"))
    second = write(tmp_path / "a.yaml", pod("a"))
    assert pod_names(load_scenario([first, second])) == ["z", "a"]


def test_stdin(tmp_path: Path) -> None:
    text = yaml.safe_dump_all([node("n"), pod("p")])
    file = write(tmp_path / "more.yaml", pod("q"))
    scenario = load_scenario(["-", file], stdin=io.StringIO(text))
    assert pod_names(scenario) == ["p", "q"]
    assert scenario.sources[("Pod", "default", "p")] == Source("<stdin>", 2)


def test_empty_documents_are_skipped_but_counted(tmp_path: Path) -> None:
    path = tmp_path / "gaps.yaml"
    path.write_text("---\n" + yaml.safe_dump(pod("a")) + "---\n---\n" + yaml.safe_dump(pod("b")))
    scenario = load_scenario([str(path)])
    assert pod_names(scenario) == ["a", "b"]
    assert scenario.sources[("Pod", "default", "b")].document == 3


def test_list_is_flattened_in_place(tmp_path: Path) -> None:
    listing = {"apiVersion": "v1", "kind": "List", "items": [node("n1"), pod("in-list"), node("n2")]}
    scenario = load(tmp_path, pod("before"), listing, pod("after"))
    assert [n.name for n in scenario.nodes] == ["n1", "n2"]
    assert pod_names(scenario) == ["before", "in-list", "after"]
    assert scenario.sources[("Pod", "default", "in-list")].document == 2


# --- workloads -------------------------------------------------------------------------------------

OWNER = {"controller": True}


@pytest.mark.parametrize(
    ("obj", "names", "extra_labels", "extra_annotations"),
    [
        pytest.param(
            workload("ReplicaSet", "rs", replicas=3),
            ["rs-0", "rs-1", "rs-2"],
            [{}, {}, {}],
            [{}, {}, {}],
            id="replicaset",
        ),
        pytest.param(
            workload("Deployment", "web", replicas=2), ["web-0", "web-1"], [{}, {}], [{}, {}], id="deployment"
        ),
        pytest.param(workload("Deployment", "web"), ["web-0"], [{}], [{}], id="deployment-default-1"),
        pytest.param(workload("Deployment", "web", replicas=0), [], [], [], id="deployment-zero"),
        pytest.param(
            workload("StatefulSet", "db", replicas=2),
            ["db-0", "db-1"],
            [
                {"statefulset.kubernetes.io/pod-name": "db-0", "apps.kubernetes.io/pod-index": "0"},
                {"statefulset.kubernetes.io/pod-name": "db-1", "apps.kubernetes.io/pod-index": "1"},
            ],
            [{}, {}],
            id="statefulset",
        ),
        pytest.param(
            workload("Job", "train", parallelism=2),
            ["train-0", "train-1"],
            [{"batch.kubernetes.io/job-name": "train", "job-name": "train"}] * 2,
            [{}, {}],
            id="job",
        ),
        pytest.param(
            workload("Job", "idx", parallelism=2, completionMode="Indexed"),
            ["idx-0", "idx-1"],
            [
                {
                    "batch.kubernetes.io/job-name": "idx",
                    "job-name": "idx",
                    "batch.kubernetes.io/job-completion-index": str(i),
                }
                for i in range(2)
            ],
            [{"batch.kubernetes.io/job-completion-index": str(i)} for i in range(2)],
            id="job-indexed",
        ),
        pytest.param(
            workload("Job", "few", parallelism=4, completions=2),
            ["few-0", "few-1"],
            [{"batch.kubernetes.io/job-name": "few", "job-name": "few"}] * 2,
            [{}, {}],
            id="job-capped-by-completions",
        ),
        pytest.param(workload("Job", "held", parallelism=4, suspend=True), [], [], [], id="job-suspended"),
    ],
)
def test_workload_stamps_pods(
    tmp_path: Path,
    obj: dict[str, Any],
    names: list[str],
    extra_labels: list[dict[str, str]],
    extra_annotations: list[dict[str, str]],
) -> None:
    scenario = load(tmp_path, obj)
    assert pod_names(scenario) == names
    name = obj["metadata"]["name"]
    for stamped, labels, notes in zip(scenario.pods, extra_labels, extra_annotations, strict=True):
        meta = stamped["metadata"]
        assert meta["namespace"] == "team"
        assert meta["labels"] == {"app": name, **labels}
        assert meta["annotations"] == {"note": "from-template", **notes}
        assert meta["ownerReferences"] == [
            {
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "name": name,
                "uid": f"uid-{obj['kind'].lower()}-team-{name}",
                "controller": True,
            }
        ]
        assert meta["uid"] == f"uid-pod-team-{meta['name']}"
        assert stamped["spec"]["containers"] == [{"name": "main", "image": "busybox"}]
        assert stamped["spec"]["schedulerName"] == "default-scheduler"


def test_binding_one_stamped_pod_leaves_its_siblings_unbound(tmp_path: Path) -> None:
    from koordpy.config.models import default_configuration
    from koordpy.simulate.runner import simulate
    from tests.builders import node_dict

    scenario = load(tmp_path, workload("ReplicaSet", "rs", replicas=2))
    scenario.nodes.append(Node.from_dict(node_dict("only", cpu="1", pods=1)))
    report = simulate(scenario, default_configuration())
    assert sorted(p.phase for p in report.pods) == ["Bound", "Pending"]
    assert all("nodeName" not in p["spec"] for p in scenario.pods)


def test_workload_uid_is_used_when_given(tmp_path: Path) -> None:
    obj = workload("Deployment", "web")
    obj["metadata"]["uid"] = "d-1"
    assert load(tmp_path, obj).pods[0]["metadata"]["ownerReferences"][0]["uid"] == "d-1"


def test_pods_are_created_in_input_order_with_workloads_in_place(tmp_path: Path) -> None:
    scenario = load(tmp_path, pod("first"), workload("ReplicaSet", "rs", replicas=2), pod("last"))
    assert pod_names(scenario) == ["first", "rs-0", "rs-1", "last"]


# --- priority admission ----------------------------------------------------------------------------


def spec_of(scenario: Scenario, name: str) -> dict[str, Any]:
    return next(p["spec"] for p in scenario.pods if p["metadata"]["name"] == name)


@pytest.mark.parametrize(
    ("docs", "expected"),
    [
        pytest.param([pod("p")], (0, None, "PreemptLowerPriority"), id="no-class"),
        pytest.param(
            [pod("p", priorityClassName="high"), priority_class("high", 1000)],
            (1000, "high", "PreemptLowerPriority"),
            id="class-defined-after-pod",
        ),
        pytest.param(
            [priority_class("low", 10, preemptionPolicy="Never"), pod("p", priorityClassName="low")],
            (10, "low", "Never"),
            id="class-preemption-policy",
        ),
        pytest.param(
            [priority_class("dflt", 50, globalDefault=True), pod("p")],
            (50, "dflt", "PreemptLowerPriority"),
            id="global-default",
        ),
        pytest.param(
            [
                priority_class("dflt", 50, globalDefault=True),
                pod("p", priorityClassName="other"),
                priority_class("other", 7),
            ],
            (7, "other", "PreemptLowerPriority"),
            id="explicit-beats-global-default",
        ),
        pytest.param(
            [pod("p", priorityClassName="system-node-critical")],
            (2000001000, "system-node-critical", "PreemptLowerPriority"),
            id="builtin-node-critical",
        ),
        pytest.param(
            [pod("p", priorityClassName="system-cluster-critical")],
            (2000000000, "system-cluster-critical", "PreemptLowerPriority"),
            id="builtin-cluster-critical",
        ),
        pytest.param(
            [priority_class("high", 1000), pod("p", priorityClassName="high", priority=1000)],
            (1000, "high", "PreemptLowerPriority"),
            id="explicit-priority-agreeing",
        ),
        pytest.param(
            [
                priority_class("system-node-critical", 2000001000),
                pod("p", priorityClassName="system-node-critical"),
            ],
            (2000001000, "system-node-critical", "PreemptLowerPriority"),
            id="builtin-repeated-unchanged",
        ),
    ],
)
def test_priority_resolution(tmp_path: Path, docs: list[dict[str, Any]], expected: tuple[Any, ...]) -> None:
    spec = spec_of(load(tmp_path, *docs), "p")
    assert (spec["priority"], spec.get("priorityClassName"), spec["preemptionPolicy"]) == expected


def test_builtin_classes_are_not_listed(tmp_path: Path) -> None:
    scenario = load(tmp_path, priority_class("high", 1), pod("p", priorityClassName="system-node-critical"))
    assert [pc.name for pc in scenario.priority_classes] == ["high"]


def test_stamped_pods_are_admitted_too(tmp_path: Path) -> None:
    obj = workload("Job", "j", {"priorityClassName": "high", "containers": []})
    spec = load(tmp_path, obj, priority_class("high", 300)).pods[0]["spec"]
    assert spec["priority"] == 300


# --- errors ----------------------------------------------------------------------------------------


BROKEN_YAML = """\
apiVersion: v1
kind: Node
metadata: {name: ok}
---
apiVersion: v1
kind: Pod
metadata:
  name: x
   bad: indent
"""


ERROR_CASES = [
    pytest.param(
        [node("gpu-1"), pod("p"), node("gpu-2", cpu="lots")],
        'document 3 (Node gpu-2): status.allocatable.cpu: quantity "lots" is not valid',
        id="node-spec",
    ),
    pytest.param(
        [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}],
        "document 1 (Secret): kind: unknown kind 'Secret'",
        id="unknown-kind",
    ),
    pytest.param(
        [{"apiVersion": "v1", "metadata": {"name": "s"}}], "document 1: kind: missing", id="no-kind"
    ),
    pytest.param(
        [{"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}}],
        "document 1 (PodDisruptionBudget): apiVersion: PodDisruptionBudget must be policy/v1, "
        "got 'policy/v1beta1'",
        id="old-api-version",
    ),
    pytest.param(
        [{"apiVersion": "scheduling.example.com/v1", "kind": "PodGroup", "metadata": {"name": "g"}}],
        "document 1 (PodGroup): apiVersion: PodGroup must be scheduling.sigs.k8s.io/v1alpha1 or "
        "scheduling.x-k8s.io/v1alpha1",
        id="podgroup-unknown-group",
    ),
    pytest.param(
        [{"kind": "Node", "metadata": {"name": "n"}}],
        "document 1 (Node): apiVersion: Node must be v1, missing",
        id="no-api-version",
    ),
    pytest.param(
        [node("n"), {"apiVersion": "v1", "kind": "Pod", "metadata": {}}],
        "document 2 (Pod): metadata.name: every object needs a name",
        id="no-name",
    ),
    pytest.param(
        [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 7}}],
        "document 1 (Pod): metadata.name: must be a string, got 7",
        id="name-not-string",
    ),
    pytest.param(
        [{"apiVersion": "v1", "kind": "Pod", "metadata": ["x"]}],
        "document 1 (Pod): metadata: expected an object, got a list",
        id="metadata-not-mapping",
    ),
    pytest.param(
        [{"apiVersion": "v1", "kind": "Pod"}], "document 1 (Pod): metadata: missing", id="no-metadata"
    ),
    pytest.param([["not", "an", "object"]], "document 1: expected an object, got a list", id="not-an-object"),
    pytest.param(
        [pod("p", namespace="team"), pod("p", namespace="team")],
        "document 2 (Pod team/p): metadata.name: Pod team/p is already defined (",
        id="duplicate-pod",
    ),
    pytest.param(
        [node("n"), node("n")],
        "document 2 (Node n): metadata.name: Node n is already defined (",
        id="duplicate-node",
    ),
    pytest.param(
        [pod("web-0", namespace="team"), workload("Deployment", "web")],
        "document 2 (Deployment team/web): metadata.name: it would create Pod team/web-0, which is "
        "already defined (",
        id="stamped-pod-collides",
    ),
    pytest.param(
        [pod("p", priorityClassName="missing")],
        "document 1 (Pod default/p): spec.priorityClassName: no PriorityClass with name missing was found",
        id="unknown-priority-class",
    ),
    pytest.param(
        [node("n"), workload("ReplicaSet", "rs", {"priorityClassName": "missing"})],
        "document 2 (ReplicaSet team/rs): spec.template.spec.priorityClassName: "
        "no PriorityClass with name missing was found",
        id="unknown-priority-class-in-template",
    ),
    pytest.param(
        [priority_class("high", 100), pod("p", priorityClassName="high", priority=5)],
        "document 2 (Pod default/p): spec.priority: the integer value of priority (5) must not be "
        "provided in pod spec; priority admission controller computed 100 from the given "
        "PriorityClass name",
        id="priority-disagrees-with-class",
    ),
    pytest.param(
        [pod("p", priority=5)],
        "document 1 (Pod default/p): spec.priority: the integer value of priority (5) must not be "
        "provided in pod spec; priority admission controller computed 0",
        id="priority-without-class",
    ),
    pytest.param(
        [priority_class("high", 100), pod("p", priorityClassName="high", preemptionPolicy="Never")],
        "document 2 (Pod default/p): spec.preemptionPolicy: the string value of "
        "PreemptionPolicy (Never) must not be provided in pod spec",
        id="preemption-policy-disagrees",
    ),
    pytest.param(
        [priority_class("a", 1, globalDefault=True), priority_class("b", 2, globalDefault=True)],
        "document 2 (PriorityClass b): globalDefault: PriorityClass a (",
        id="two-global-defaults",
    ),
    pytest.param(
        [priority_class("high", "x")],
        "document 1 (PriorityClass high): value: must be an integer",
        id="priority-class-value",
    ),
    pytest.param(
        [priority_class("system-mine", 5)],
        "document 1 (PriorityClass system-mine): metadata.name: priority class names with 'system-' "
        "prefix are reserved",
        id="system-prefix",
    ),
    pytest.param(
        [priority_class("system-node-critical", 5)],
        "document 1 (PriorityClass system-node-critical): value: system-node-critical is built in",
        id="builtin-changed",
    ),
    pytest.param(
        [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}],
        "document 1 (Deployment default/d): spec.template: missing",
        id="workload-without-template",
    ),
    pytest.param(
        [{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}}],
        "document 1 (StatefulSet default/s): spec: missing",
        id="workload-without-spec",
    ),
    pytest.param(
        [workload("ReplicaSet", "rs", replicas=-1)],
        "document 1 (ReplicaSet team/rs): spec.replicas: must be a non-negative integer, got -1",
        id="negative-replicas",
    ),
    pytest.param(
        [workload("Job", "j", parallelism="two")],
        "document 1 (Job team/j): spec.parallelism: must be an integer, got 'two'",
        id="parallelism-not-int",
    ),
    pytest.param(
        [
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "b"},
                "spec": {"minAvailable": "lots"},
            }
        ],
        "document 1 (PodDisruptionBudget default/b): spec.minAvailable: must be a non-negative integer",
        id="pdb-spec",
    ),
    pytest.param(
        [{"apiVersion": "v1", "kind": "List", "items": [node("a"), node("b", cpu="x")]}],
        'document 1 (Node b): items[1].status.allocatable.cpu: quantity "x"',
        id="list-item",
    ),
    pytest.param(
        [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": 3}}],
        "document 1 (Pod p): metadata.namespace: must be a string, got 3",
        id="namespace-not-string",
    ),
]


@pytest.mark.parametrize(("docs", "message"), ERROR_CASES)
def test_input_errors_name_file_document_and_field(tmp_path: Path, docs: list[Any], message: str) -> None:
    path = write(tmp_path / "bad.yaml", *docs)
    with pytest.raises(ScenarioError) as info:
        load_scenario([path])
    assert str(info.value).startswith(f"{path}: {message}")
    assert info.value.file == path


def test_error_fields_are_structured(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", node("ok"), node("gpu-1", cpu="lots"))
    with pytest.raises(ScenarioError) as info:
        load_scenario([path])
    err = info.value
    assert (err.file, err.document, err.field, err.kind, err.name) == (
        path,
        2,
        "status.allocatable.cpu",
        "Node",
        "gpu-1",
    )
    assert isinstance(err, ValueError)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN_YAML)
    with pytest.raises(ScenarioError) as info:
        load_scenario([str(path)])
    assert (
        str(info.value)
        == f"{path}: document 2: line 9, column 7: mapping values are not allowed in this context"
    )
    assert (info.value.line, info.value.column) == (9, 7)


def test_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n")
    with pytest.raises(
        ScenarioError, match=r"dup\.yaml: document 1: line 5, column 3: found duplicate key 'name'"
    ):
        load_scenario([str(path)])


def test_error_in_stdin_is_named_stdin() -> None:
    with pytest.raises(ScenarioError, match=r"^<stdin>: document 1 \(Node n\): status.allocatable.cpu"):
        load_scenario(["-"], stdin=io.StringIO(yaml.safe_dump(node("n", cpu="many"))))


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(
            lambda d: [str(d / "missing.yaml")], "missing.yaml: no such file or directory", id="missing"
        ),
        pytest.param(lambda d: [], "no input", id="no-paths"),
        pytest.param(
            lambda d: [write(d / "empty.yaml", None)],
            "empty.yaml: the input holds no objects",
            id="only-empty-documents",
        ),
        pytest.param(
            lambda d: [str(d)], "the directory holds no *.yaml or *.yml files", id="empty-directory"
        ),
        pytest.param(
            lambda d: [write(d / "l.yaml", {"apiVersion": "v1", "kind": "List", "items": []})],
            "the input holds no objects",
            id="empty-list",
        ),
    ],
)
def test_missing_or_empty_input(tmp_path: Path, setup: Any, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(setup(tmp_path))
    assert message in str(info.value)


def test_empty_stdin_is_an_error() -> None:
    with pytest.raises(ScenarioError, match="no objects"):
        load_scenario(["-"], stdin=io.StringIO(""))
