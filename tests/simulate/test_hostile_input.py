"""`koordpy simulate` on hostile or mistyped input: every case ends in a report (exit 0) or in exit
status 2 with one line naming the file, the document, the object and the field; never in a
traceback, a hang or a crash of the interpreter."""

from __future__ import annotations

import io
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.cli import main
from koordpy.simulate import documents
from koordpy.simulate.documents import MAX_DEPTH
from koordpy.simulate.runner import DEFAULT_MAX_VIRTUAL_SECONDS
from koordpy.yamlinput import bounds as yaml_bounds
from koordpy.yamlinput import parsers as yaml_parsers

NODE = (
    "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    "status: {allocatable: {cpu: '4', memory: 8Gi, pods: 110}}\n"
)


def pod(spec: Any = "{containers: [{name: c, image: x}]}", meta: str = "{name: p}", extra: str = "") -> str:
    spec_line = "" if spec is None else f"spec: {spec}\n"
    return f"apiVersion: v1\nkind: Pod\nmetadata: {meta}\n{spec_line}{extra}"


def nested_json(depth: int) -> str:
    """`{"a": {"a": ... {}}}` with `depth` objects, written without recursion."""
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *options: str) -> tuple[int, str, str]:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    code = main(["simulate", str(path), "--output", "json", *options])
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_input_error(code: int, err: str, tmp_path: Path, expected: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith(f"koordpy: invalid input: {tmp_path / 'input.yaml'}: "), err
    assert expected in err, err


# The parsers a machine may read manifests with; the bounds and their messages must not depend on
# which. libyaml's own nesting limit is process-wide: lowered below koordpy's, it fires first on
# every deep text, which is what a PyYAML with a stricter libyaml does.
LIBYAML_LIMIT_BELOW_OURS = 50


@pytest.fixture(params=["libyaml", "pure-python", "libyaml-with-its-limit-below-koordpys"])
def yaml_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name: str = request.param
    if name == "pure-python":
        monkeypatch.setattr(yaml_parsers, "PARSERS", (yaml_parsers.PURE,))
        yield name
        return
    if yaml_parsers.LIBYAML is None:
        pytest.skip("PyYAML is built without libyaml here")
    if name == "libyaml":
        yield name
        return
    get_limit = getattr(yaml._yaml, "_get_max_nest_level", None)  # type: ignore[attr-defined]
    set_limit = getattr(yaml._yaml, "_set_max_nest_level", None)  # type: ignore[attr-defined]
    if get_limit is None or set_limit is None or get_limit() == -1:
        pytest.skip("this libyaml has no nesting limit to lower")
    default = get_limit()
    set_limit(LIBYAML_LIMIT_BELOW_OURS)
    try:
        yield name
    finally:
        set_limit(default)


# --- objects an API server would refuse to decode --------------------------------------------------

WORKLOAD = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
    "spec: {replicas: 1, template: {metadata: TEMPLATE_META, spec: {containers: [{name: c, image: x}]}}}\n"
)
POD_GROUP = (
    "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\nmetadata: META\nspec: {minMember: 1}\n"
)
PDB = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: META\nspec: {minAvailable: 1}\n"
NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: META\n"
PRIORITY_CLASS = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: META\nvalue: 10\n"
TOPOLOGY = (
    "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: ClusterNetworkTopology\nmetadata: META\n"
    "spec: {networkTopologySpec: []}\n"
)
JOB = (
    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"
    "spec: {parallelism: PARALLELISM, template: {spec: {containers: [{name: c, image: x}]}}}\n"
)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(pod(spec=None), "document 2 (Pod default/p): spec: missing", id="pod-without-spec"),
        pytest.param(pod(spec="null"), "document 2 (Pod default/p): spec: missing", id="pod-spec-null"),
        pytest.param(
            pod(spec="3"),
            "document 2 (Pod default/p): spec: expected an object, got a number",
            id="spec-number",
        ),
        pytest.param(
            pod(spec="[1]"),
            "document 2 (Pod default/p): spec: expected an object, got a list",
            id="spec-list",
        ),
        pytest.param(
            pod().replace("apiVersion: v1", "apiVersion: [v1]"),
            "document 2 (Pod): apiVersion: Pod must be v1, got a list",
            id="api-version-list",
        ),
        pytest.param(
            pod().replace("kind: Pod", "kind: {Pod: 1}"), "document 2: kind: must be a string", id="kind-map"
        ),
        pytest.param(
            pod(meta="{name: [p]}"), "document 2 (Pod): metadata.name: must be a string", id="name-list"
        ),
        pytest.param(
            pod(spec="{containers: [{name: c, ports: [{hostPort: 80, protocol: [TCP]}]}]}"),
            "document 2 (Pod default/p): spec.containers[0].ports[0].protocol: must be a string, got a list",
            id="port-protocol-list",
        ),
        pytest.param(
            pod(meta="{name: p, annotations: [a, b]}"),
            "document 2 (Pod default/p): metadata.annotations: expected an object, got a list",
            id="pod-annotations-list",
        ),
        pytest.param(
            pod(meta="{name: p, labels: {app: 1}}"),
            "document 2 (Pod default/p): metadata.labels.app: must be a string, got 1",
            id="pod-label-number",
        ),
        pytest.param(
            pod(meta="{name: p, labels: {app: null}}"),
            "document 2 (Pod default/p): metadata.labels.app: must be a string, got nothing",
            id="pod-label-null",
        ),
        pytest.param(
            pod(meta="{name: p, labels: {1: a}}"),
            "document 2 (Pod default/p): metadata.labels: key 1 is not a string",
            id="pod-label-key-number",
        ),
        pytest.param(
            NODE.replace("{name: n1}", "{name: n2, labels: [a]}"),
            "document 2 (Node n2): metadata.labels: expected an object, got a list",
            id="node-labels-list",
        ),
        pytest.param(
            POD_GROUP.replace("META", "{name: g, annotations: [a]}"),
            "document 2 (PodGroup default/g): metadata.annotations: expected an object, got a list",
            id="podgroup-annotations-list",
        ),
        pytest.param(
            PDB.replace("META", "{name: b, labels: {a: [x]}}"),
            "document 2 (PodDisruptionBudget default/b): metadata.labels.a: must be a string, got a list",
            id="pdb-label-list",
        ),
        pytest.param(
            NAMESPACE.replace("META", "{name: team, labels: 3}"),
            "document 2 (Namespace team): metadata.labels: expected an object, got a number",
            id="namespace-labels-number",
        ),
        pytest.param(
            PRIORITY_CLASS.replace("META", "{name: high, annotations: [a]}"),
            "document 2 (PriorityClass high): metadata.annotations: expected an object, got a list",
            id="priorityclass-annotations-list",
        ),
        pytest.param(
            TOPOLOGY.replace("META", "{name: default, labels: [a]}"),
            "document 2 (ClusterNetworkTopology default): metadata.labels: expected an object, got a list",
            id="topology-labels-list",
        ),
        pytest.param(
            TOPOLOGY.replace("META", "{name: default}").replace(
                "spec: {networkTopologySpec: []}", "spec: [1]"
            ),
            "document 2 (ClusterNetworkTopology default): spec: expected an object, got a list",
            id="topology-spec-list",
        ),
        pytest.param(
            WORKLOAD.replace("TEMPLATE_META", "{annotations: [a]}"),
            "document 2 (Deployment default/web): spec.template.metadata.annotations: expected an object",
            id="template-annotations-list",
        ),
        pytest.param(
            pod(spec="{priority: 3000000000, containers: []}"),
            "spec.priority: must be a 32-bit integer, got 3000000000",
            id="priority-beyond-int32",
        ),
        pytest.param(
            pod(spec="{priority: 1.5, containers: []}"),
            "spec.priority: must be an integer, got 1.5",
            id="priority-fraction",
        ),
        pytest.param(
            POD_GROUP.replace("META", "{name: g}").replace(
                "minMember: 1", "minMember: 100000000000000000000"
            ),
            "spec.minMember: must be a 32-bit integer, got 100000000000000000000",
            id="min-member-beyond-int32",
        ),
        pytest.param(
            pod(
                spec="{containers: [], affinity: {nodeAffinity: "
                "{preferredDuringSchedulingIgnoredDuringExecution:"
                " [{weight: 1000000000000000000000000000000, preference: {}}]}}}"
            ),
            "preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be a 32-bit integer",
            id="weight-beyond-int32",
        ),
        pytest.param(
            pod(
                spec="{containers: [], topologySpreadConstraints: [{maxSkew: 2147483648, topologyKey: z,"
                " whenUnsatisfiable: DoNotSchedule}]}"
            ),
            "spec.topologySpreadConstraints[0].maxSkew: must be a 32-bit integer, got 2147483648",
            id="max-skew-beyond-int32",
        ),
        pytest.param(
            pod(
                spec="{containers: [], tolerations: [{operator: Exists, effect: NoExecute,"
                " tolerationSeconds: 9223372036854775808}]}"
            ),
            "spec.tolerations[0].tolerationSeconds: must be a 64-bit integer",
            id="toleration-seconds-beyond-int64",
        ),
        pytest.param(
            pod(spec="{containers: [{name: c, resources: {requests: {cpu: true}}}]}"),
            "spec.containers[0].resources.requests.cpu: "
            "must be a quantity (a string or a number), got a boolean",
            id="quantity-boolean",
        ),
        pytest.param(
            pod(spec="{containers: [{name: c, resources: {requests: {cpu: .nan}}}]}"),
            "spec.containers[0].resources.requests.cpu: must be a finite quantity, got nan",
            id="quantity-nan",
        ),
        pytest.param(
            pod(meta="{name: 'p\\nq', labels: 3}"),
            "document 2 (Pod default/p\\nq): metadata.labels: expected an object, got a number",
            id="newline-in-name-stays-one-line",
        ),
        pytest.param(
            pod(meta="{name: p, creationTimestamp: !!timestamp 2024-13-45}"),
            "document 2: line 8, column 40: not a valid timestamp",
            id="impossible-timestamp-tag",
        ),
        pytest.param(
            pod(meta="{name: p, uid: " + "9" * 5000 + "}"),
            "document 2: line 8, column 26: integer of 5000 characters is too large",
            id="integer-too-long-to-convert",
        ),
    ],
)
def test_object_the_api_server_refuses_is_an_input_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: str, expected: str
) -> None:
    code, out, err = run(capsys, tmp_path, NODE + "---\n" + document)
    assert_input_error(code, err, tmp_path, expected)
    assert out == ""


@pytest.mark.parametrize(
    ("document", "reason", "fragment"),
    [
        pytest.param(
            pod(
                meta="{name: p, annotations: {gang.scheduling.koordinator.sh/name: g, "
                "gang.scheduling.koordinator.sh/min-available: three}}"
            ),
            "InvalidSpec",
            "min-available",
            id="gang-annotation-value",
        ),
        pytest.param(
            pod(
                spec="{containers: [], affinity: {nodeAffinity: "
                "{requiredDuringSchedulingIgnoredDuringExecution:"
                " {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Near}]}]}}}}"
            ),
            "InvalidSpec",
            "operator",
            id="affinity-operator",
        ),
        pytest.param(
            pod(spec="{containers: [{name: c, resources: {requests: {memory: 10 gigs}}}]}"),
            "InvalidSpec",
            "10 gigs",
            id="unparsable-quantity",
        ),
        pytest.param(
            pod(
                spec="{containers: [], topologySpreadConstraints: [{maxSkew: 0, topologyKey: z,"
                " whenUnsatisfiable: DoNotSchedule}]}"
            ),
            "InvalidSpec",
            "maxSkew",
            id="max-skew-zero",
        ),
    ],
)
def test_spec_the_scheduler_cannot_understand_stays_invalid_spec(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: str, reason: str, fragment: str
) -> None:
    code, out, err = run(capsys, tmp_path, NODE + "---\n" + document)
    assert code == 0, err
    (result,) = json.loads(out)["pods"]
    assert (result["phase"], result["reason"]) == ("Pending", reason)
    assert fragment in result["message"]


# --- nesting and aliases ---------------------------------------------------------------------------

BOMB = "\n".join(
    [
        "a: &a [x, x, x, x, x, x, x, x, x]",
        *(
            f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            pod(spec='{"containers": [], "x": ' + nested_json(3000) + "}"),
            "document 2 (Pod default/p): line 9, column 1219: spec.x.a.a.a.a.a.a.<190 more>.a.a: "
            f"nested more than {MAX_DEPTH} levels deep",
            id="deep-json-under-spec",
        ),
        pytest.param(
            pod(meta='{"name": "p", "annotations": {"k": ' + nested_json(3000) + "}}"),
            "document 2 (Pod default/p): line 8, column 1228: "
            "metadata.annotations.k.a.a.a.a.a.<190 more>.a.a: "
            f"nested more than {MAX_DEPTH} levels deep",
            id="deep-map-as-annotation-value",
        ),
        pytest.param(
            "a: " + "[" * 50000 + "]" * 50000 + "\n",
            "document 2: line 6, column 203: a[0][0][0][0][0][0][0].<190 more>[0][0]: "
            f"nested more than {MAX_DEPTH}",
            id="brackets-that-overflow-the-c-composer",
        ),
        pytest.param(
            "".join("  " * i + "- \n" for i in range(400)),
            "document 2: line 206, column 401: [0][0][0][0][0][0][0][0].<190 more>[0][0]: "
            f"nested more than {MAX_DEPTH}",
            id="deep-block-sequences",
        ),
        pytest.param(
            pod(meta="{name: p}", spec="{containers: []}", extra=BOMB + "\n"),
            "document 2 (Pod default/p): line 13, column 28: d[5]: document contains excessive aliasing",
            id="billion-laughs",
        ),
        pytest.param(
            pod(extra="x: &loop [a, *loop]\n"),
            "document 2 (Pod default/p): line 10, column 14: x[1]: anchor 'loop' value contains itself",
            id="alias-of-its-own-ancestor",
        ),
        pytest.param(
            "a: &a " + "[" * 150 + "]" * 150 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n",
            "document 2: line 7, column 64: b[0][0][0][0][0][0][0].<51 more>[0][0]: "
            f"nested more than {MAX_DEPTH}",
            id="depth-through-an-alias",
        ),
    ],
)
def test_nesting_and_aliases_are_bounded_before_composing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str, yaml_parser: str
) -> None:
    code, _, err = run(capsys, tmp_path, NODE + "---\n" + text)
    assert_input_error(code, err, tmp_path, expected)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(pod(spec='{"containers": [], "x": ' + nested_json(MAX_DEPTH - 2) + "}"), id="json"),
        pytest.param(
            pod(spec="{containers: [], x: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "}"), id="flow"
        ),
        pytest.param(
            pod(
                spec=None,
                extra="spec:\n  containers: []\n  x:\n"
                + "".join("  " * i + "   - \n" for i in range(MAX_DEPTH - 2)),
            ),
            id="block",
        ),
    ],
)
def test_nesting_up_to_the_limit_is_simulated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, yaml_parser: str
) -> None:
    code, out, err = run(capsys, tmp_path, NODE + "---\n" + text)
    assert code == 0, err
    assert [p["phase"] for p in json.loads(out)["pods"]] == ["Bound"]


def test_anchors_and_merge_keys_within_bounds_are_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, yaml_parser: str
) -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: &labels {app: web}}\n"
        "spec: &spec {containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b, labels: {<<: {app: web}, tier: x}}\n"
        "spec: {containers: [{name: c, image: x}]}\n"
    )
    code, out, err = run(capsys, tmp_path, NODE + "---\n" + text)
    assert code == 0, err
    assert [p["phase"] for p in json.loads(out)["pods"]] == ["Bound", "Bound"]


# Texts where only reading the events can tell: the text check must not vouch for them.
@pytest.mark.parametrize(
    "text",
    [
        pytest.param('[ a"b, ' + "[" * 10 + "x" + "]" * 10 + ', "c" ]', id="quote-inside-a-plain-scalar"),
        pytest.param('{"a": "]", "b": ' + "[" * 20 + "1" + "]" * 20 + "}", id="bracket-inside-a-string"),
        pytest.param("x: [a, # ]\n" + "[" * 20 + "]" * 20 + "]", id="bracket-inside-a-comment"),
        pytest.param("a: *b", id="alias"),
        pytest.param("[x: " * 9 + "[]" + "]" * 9, id="mappings-inside-flow-sequences"),
        pytest.param("[" * 30 + "]" * 30, id="plain-brackets"),
        pytest.param("".join(" " * i + "- \n" for i in range(0, 40, 2)), id="indentation"),
        pytest.param(
            '[\n x: {\n "k": {\n "k": {"k": {"k": {"k": {"k": {"k": []}}}}}}},\n "#c"\n]',
            id="json-under-a-sequence-entry-mapping",
        ),
    ],
)
def test_text_check_leaves_unclear_texts_to_the_events(text: str) -> None:
    assert _true_depth(text) > 8 or "*" in text
    assert not yaml_bounds.surely_bounded(text, max_depth=8)


def _true_depth(text: str) -> int:
    depth = deepest = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                deepest = max(deepest, depth)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        pass  # composing stops there too
    return deepest


_PIECES = [
    "[", "]", "{", "}", ",", ":", " ", "\n", "- ", "? ", '"', "'", "#", "!", "a", "\n---\n", "\n  ",
    '"a[b"', 'a"b', "\\", '"k": "v"', "{a: 1}", "[b]", "x: ", "\n- ", "|", ">",
]  # fmt: skip


def test_text_check_never_vouches_for_a_deeper_text() -> None:
    """Random texts of the characters that decide nesting: whenever the text check says a text is
    at most `max_depth` deep, the parser's events agree."""
    rng = random.Random(20240601)
    vouched = 0
    for _ in range(3000):
        max_depth = rng.choice((4, 8, 12))
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 80)))
        if yaml_bounds.surely_bounded(text, max_depth=max_depth):
            vouched += 1
            assert _true_depth(text) <= max_depth, text
    assert vouched > 100  # the check does vouch for some


# --- sizes and counts --------------------------------------------------------------------------------


REPLICA_SET = (
    "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\n"
    "spec: {replicas: REPLICAS, template: {spec: {containers: [{name: c, image: x}]}}}\n"
)


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        pytest.param(
            REPLICA_SET.replace("REPLICAS", "1000000"),
            (),
            "document 2 (ReplicaSet default/rs): spec.replicas: 1000000 pods are more than the 100000 a "
            "workload may create in a simulation",
            id="replicas-beyond-the-workload-limit",
        ),
        pytest.param(
            JOB.replace("PARALLELISM", "200000"),
            (),
            "document 2 (Job default/j): spec.parallelism: 200000 pods are more than the 100000",
            id="parallelism-beyond-the-workload-limit",
        ),
        pytest.param(
            REPLICA_SET.replace("REPLICAS", "5000000000"),
            (),
            "document 2 (ReplicaSet default/rs): spec.replicas: must be a 32-bit integer, got 5000000000",
            id="replicas-beyond-int32",
        ),
        pytest.param(
            REPLICA_SET.replace("REPLICAS", "3"),
            ("--max-objects", "3"),
            "document 2 (ReplicaSet default/rs): spec.replicas: 3 pods: the scenario would hold more than 3 "
            "objects (raise the limit with --max-objects)",
            id="stamped-pods-beyond-max-objects",
        ),
        pytest.param(
            "---\n".join([pod(meta=f"{{name: p{i}}}") for i in range(3)]),
            ("--max-objects", "3"),
            "document 4 (Pod default/p2): the scenario would hold more than 3 objects",
            id="objects-beyond-max-objects",
        ),
        pytest.param(
            "---\n" * 10,
            ("--max-objects", "2"),
            "the input holds more than 4 documents, twice the objects a scenario may hold",
            id="empty-documents-beyond-twice-max-objects",
        ),
    ],
)
def test_runaway_sizes_stop_with_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, options: tuple[str, ...], expected: str
) -> None:
    code, _, err = run(capsys, tmp_path, NODE + "---\n" + text, *options)
    assert_input_error(code, err, tmp_path, expected)


def test_raising_max_objects_lets_a_large_workload_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(
        capsys, tmp_path, NODE + "---\n" + REPLICA_SET.replace("REPLICAS", "3"), "--max-objects", "5"
    )
    assert code == 0, err
    assert len(json.loads(out)["pods"]) == 3


def test_input_larger_than_the_limit_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(documents, "MAX_INPUT_BYTES", 100)
    code, _, err = run(capsys, tmp_path, NODE + "---\n" + pod())
    assert_input_error(code, err, tmp_path, "the input is larger than 0 MiB, the most a scenario may hold")


def test_stdin_that_is_not_utf8_is_an_input_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(NODE.encode() + b"\xff\xfe")))
    code = main(["simulate", "-"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"koordpy: invalid input: <stdin>: not UTF-8 text: invalid start byte at byte {len(NODE)}\n"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            ("--max-virtual-seconds", "nan"), "--max-virtual-seconds must be a finite", id="nan-seconds"
        ),
        pytest.param(
            ("--max-virtual-seconds", "inf"), "--max-virtual-seconds must be a finite", id="inf-seconds"
        ),
        pytest.param(
            ("--max-virtual-seconds", "-1"), "--max-virtual-seconds must be a finite", id="negative-seconds"
        ),
        pytest.param(("--max-objects", "0"), "--max-objects must be at least 1, got 0", id="no-objects"),
    ],
)
def test_options_that_could_never_work_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, options: tuple[str, ...], expected: str
) -> None:
    code, _, err = run(capsys, tmp_path, NODE, *options)
    assert code == 2
    assert err.count("\n") == 1 and expected in err, err


# --- values at the edge of their types --------------------------------------------------------------


def test_grace_period_of_centuries_on_the_virtual_clock(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A victim whose termination would end past year 9999: preemption still happens, and the run
    still ends."""
    text = (
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n"
        + pod(
            meta="{name: victim}",
            spec="{nodeName: n1, terminationGracePeriodSeconds: 9223372036854775807,"
            " containers: [{name: c, resources: {requests: {cpu: '4'}}}]}",
        )
        + "---\n"
        + pod(
            meta="{name: preemptor}",
            spec="{priorityClassName: high, containers: [{name: c, resources: {requests: {cpu: '4'}}}]}",
        )
    )
    code, out, err = run(capsys, tmp_path, NODE + "---\n" + text)
    assert code == 0, err
    report = json.loads(out)
    assert [p["victim"] for p in report["preemptions"]] == ["default/victim"]
    # the run ends at the default limit, and says it was cut there
    assert report["virtualSeconds"] == DEFAULT_MAX_VIRTUAL_SECONDS
    assert report["cutOff"]["maxVirtualSeconds"] == DEFAULT_MAX_VIRTUAL_SECONDS


def test_an_internal_fault_is_one_line_with_exit_status_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from koordpy.simulate import runner

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("boom")

    monkeypatch.setattr(runner, "simulate", broken)
    code, out, err = run(capsys, tmp_path, NODE)
    assert code == 1 and out == ""
    assert err.startswith("koordpy: internal error at ") and err.count("\n") == 1, err
    assert "KeyError: 'boom' (please report it)" in err


def test_fast_type_check_and_the_one_naming_the_field_agree() -> None:
    """Every field of a pod replaced, one at a time, by values of every JSON type: the pass that
    only says yes or no and the one that names the field always come to the same verdict."""
    from koordpy.api.errors import SpecError
    from koordpy.simulate.objects import POD, _check, _valid

    base = yaml.safe_load(
        pod(
            meta="{name: p, labels: {a: b}, ownerReferences: [{kind: K, name: n, controller: true}]}",
            spec="{priority: 1, containers: [{name: c, ports: [{hostPort: 1}],"
            " resources: {requests: {cpu: 1}}}], tolerations: [{key: k, tolerationSeconds: 5}],"
            " affinity: {podAffinity: {preferredDuringSchedulingIgnoredDuringExecution:"
            " [{weight: 1, podAffinityTerm: {topologyKey: z}}]}}}",
        )
    )
    replacements: list[Any] = [None, True, 1, 2**40, 2**70, 1.5, float("nan"), "x", [], ["x"], {}, {"x": 1}]

    def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        found = [prefix]
        children = (
            value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        )
        for key, child in children:
            found += paths(child, (*prefix, key))
        return found

    for path in paths(base)[1:]:
        for replacement in replacements:
            obj = json.loads(json.dumps(base))
            parent = obj
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = replacement
            try:
                _check(obj, POD, None)
                named = True
            except SpecError:
                named = False
            assert _valid(obj, POD) == named, (path, replacement)


def test_configuration_nested_too_deep_is_refused_before_it_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, yaml_parser: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("profiles: " + "[" * 5000 + "]" * 5000 + "\n")
    code, out, err = run(capsys, tmp_path, NODE, "--config", str(config))
    assert code == 2 and out == ""
    assert err == (
        f"koordpy: invalid configuration: {config}: document 1: line 1, column 210: "
        f"profiles[0][0][0][0][0][0][0].<190 more>[0][0]: nested more than {MAX_DEPTH} levels deep\n"
    )
