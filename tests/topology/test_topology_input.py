"""Hostile topology input stops at the edge: a ClusterNetworkTopology object or a
network-topology-spec annotation of any shape becomes a typed value or a precise error (the object
and the field), never an exception out of the Coscheduling plugin.

- The annotation: read as koord-scheduler reads it. Text Go's JSON decoder refuses drops the whole
  spec (the gang is placed without topology), a spec that decodes is used as koord-scheduler uses
  it, and every part not taken as written is a Fallback naming the annotation and the field. A
  SpecError (pods pending with InvalidSpec) only for a spec no gang can meet.
- The object: `default` with a bad spec is present but unusable, with an error naming the field
  (gangs are placed without topology then); an object whose name cannot be read is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.api.errors import SpecError
from koordpy.cli import main
from koordpy.plugins.coscheduling.networktopology import ClusterTopologyView
from koordpy.status.gang_annotations import (
    MUST_GATHER,
    PREFER_GATHER,
    GatherRule,
    TopologySpecReading,
    read_network_topology_spec,
)
from koordpy.status.topology import (
    MAX_LAYERS,
    LayerChain,
    TopologySpecError,
    brief,
    parse_layer_chain,
    parse_topology_object,
)
from tests.topology.test_detail_status import SEED_NODE_LABELS, SEED_SPEC

WHERE = "annotation gang.scheduling.koordinator.sh/network-topology-spec"
DEEP = 100_000

# JSON values of every shape: the building blocks of hostile input
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def nested(depth: int) -> Any:
    """A list nested `depth` deep, built without recursion."""
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def topology(spec: Any, name: Any = "default") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": name},
        "spec": spec,
    }


def entries(*layers: Any) -> dict[str, Any]:
    return {"networkTopologySpec": list(layers)}


SPINE = {"topologyLayer": "SpineLayer", "labelKey": ["example.com/spine"]}
NODES = {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "SpineLayer"}


# --------------------------------------------------------------------------------------------- the object
@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        pytest.param([SPINE, NODES], ("spec: must be an object", "a list of 2 item(s)"), id="spec-is-a-list"),
        pytest.param(
            "SpineLayer", ("spec: must be an object", "the string 'SpineLayer'"), id="spec-is-a-string"
        ),
        pytest.param(
            {"networkTopologySpec": {"topologyLayer": "SpineLayer"}},
            ("spec.networkTopologySpec: must be a list", "an object with 1 field(s)"),
            id="layers-are-a-map",
        ),
        pytest.param(
            entries([SPINE], NODES), ("spec.networkTopologySpec[0]: must be an object",), id="layer-is-a-list"
        ),
        pytest.param(
            entries({"topologyLayer": 10**400, "labelKey": ["k"]}, NODES),
            ("spec.networkTopologySpec[0].topologyLayer must name the layer", "an integer of 1329 bits"),
            id="layer-name-is-a-huge-number",
        ),
        pytest.param(
            entries({"topologyLayer": "S" * 10_000, "labelKey": ["k"]}, NODES),
            ("spec.networkTopologySpec[0].topologyLayer", "(10000 characters) is longer than 253"),
            id="layer-name-is-huge",
        ),
        pytest.param(
            entries({**SPINE, "labelKey": {"key": "example.com/spine"}}, NODES),
            ("spec.networkTopologySpec[0].labelKey: of layer 'SpineLayer' must be a list",),
            id="label-keys-are-a-map",
        ),
        pytest.param(
            entries({**SPINE, "labelKey": "example.com/spine"}, NODES),
            ("spec.networkTopologySpec[0].labelKey", "must be a list", "the string"),
            id="label-keys-are-a-string",
        ),
        pytest.param(
            entries({**SPINE, "labelKey": ["example.com/spine", 7]}, NODES),
            ("spec.networkTopologySpec[0].labelKey[1]: of layer 'SpineLayer' must be a string", "number 7"),
            id="label-key-is-a-number",
        ),
        pytest.param(
            entries({**SPINE, "labelKey": [nested(DEEP)]}, NODES),
            ("spec.networkTopologySpec[0].labelKey[0]", "a list of 1 item(s)"),
            id="label-key-nested-deeply",
        ),
        pytest.param(
            entries(SPINE, {**NODES, "parentTopologyLayer": ["SpineLayer"]}),
            ("[1].parentTopologyLayer: of layer 'NodeTopologyLayer' must be a string",),
            id="parent-is-a-list",
        ),
        pytest.param(
            entries(SPINE, {**NODES, "parentTopologyLayer": 0}),
            ("spec.networkTopologySpec[1].parentTopologyLayer", "must be a string", "number 0"),
            id="parent-is-a-falsy-number",
        ),
        pytest.param(
            entries(SPINE, {**NODES, "parentTopologyLayer": "RackLayer"}),
            ("spec.networkTopologySpec[1].parentTopologyLayer: layer 'NodeTopologyLayer'", "unknown parent"),
            id="parent-is-unknown",
        ),
        pytest.param(
            entries(
                *(
                    {
                        "topologyLayer": f"L{i}",
                        "labelKey": [f"k{i}"],
                        "parentTopologyLayer": f"L{i - 1}" if i else None,
                    }
                    for i in range(2 * MAX_LAYERS)
                ),
                {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": f"L{2 * MAX_LAYERS - 1}"},
            ),
            ("spec.networkTopologySpec: lists 65 layers; at most 32",),
            id="too-many-layers",
        ),
        pytest.param(
            entries({**SPINE, "labelKey": [f"k{i}" for i in range(1000)]}, NODES),
            ("spec.networkTopologySpec[0].labelKey", "1000 label keys"),
            id="too-many-label-keys",
        ),
        pytest.param(None, ("spec.networkTopologySpec lists no layers",), id="spec-is-missing"),
    ],
)
def test_bad_object_is_kept_as_unusable_with_an_error_naming_the_field(
    spec: Any, fragments: tuple[str, ...]
) -> None:
    view = ClusterTopologyView()
    view.on_object("Add", topology(spec))
    assert view.present and view.chain is None
    why = view.unavailable()
    assert why is not None and why.startswith("ClusterNetworkTopology 'default' is invalid: "), why
    for fragment in fragments:
        assert fragment in why, why
    assert len(why) < 500, why


def test_fixing_the_object_makes_it_usable_again() -> None:
    view = ClusterTopologyView()
    view.on_object("Add", topology([SPINE, NODES]))
    assert view.unavailable() is not None
    view.on_object("Update", topology(entries(SPINE, NODES)))
    assert view.unavailable() is None
    assert view.chain is not None and view.chain.order[1:] == ("SpineLayer", "NodeTopologyLayer")


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({"metadata": ["default"], "spec": SEED_SPEC}, id="metadata-is-a-list"),
        pytest.param({"metadata": {"name": 7}, "spec": SEED_SPEC}, id="name-is-a-number"),
        pytest.param({"spec": SEED_SPEC}, id="no-metadata"),
        pytest.param(["default"], id="not-an-object"),
    ],
)
def test_object_whose_name_cannot_be_read_is_ignored(obj: Any) -> None:
    view = ClusterTopologyView()
    view.on_object("Add", obj)
    assert (view.present, view.chain, view.error) == (False, None, None)
    # and a good `default` that came before stays as it was
    view.on_object("Add", topology(SEED_SPEC))
    view.on_object("Update", obj)
    assert view.unavailable() is None


def test_other_objects_are_not_read() -> None:
    view = ClusterTopologyView()
    view.on_object("Add", topology([SPINE], name="other"))
    assert not view.present


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param(topology(SEED_SPEC, name=""), "metadata.name", id="empty-name"),
        pytest.param({"metadata": "default"}, "metadata", id="metadata-is-a-string"),
        pytest.param(topology([SPINE]), "spec", id="spec-is-a-list"),
        pytest.param(
            topology(entries(SPINE, {**NODES, "parentTopologyLayer": 3})),
            "spec.networkTopologySpec[1].parentTopologyLayer",
            id="parent",
        ),
    ],
)
def test_object_errors_carry_the_field_path(obj: Any, field: str) -> None:
    with pytest.raises(TopologySpecError) as caught:
        parse_topology_object(obj)
    assert caught.value.field == field
    assert str(caught.value).startswith(field)


@settings(max_examples=300, deadline=None)
@given(
    spec=json_values,
    layers=st.lists(
        st.dictionaries(st.sampled_from(["topologyLayer", "parentTopologyLayer", "labelKey"]), json_values),
        max_size=4,
    ),
)
def test_any_shape_of_object_never_raises_out_of_the_view(spec: Any, layers: list[dict[str, Any]]) -> None:
    view = ClusterTopologyView()
    for candidate in (spec, {"networkTopologySpec": layers}, {"networkTopologySpec": spec}):
        view.on_object("Add", topology(candidate))
        assert isinstance(view.chain, LayerChain) or view.error is not None
        why = view.unavailable()
        assert why is None or len(why) < 1000
    view.on_object("Delete", topology(spec))
    assert not view.present


@settings(max_examples=200, deadline=None)
@given(obj=json_values)
def test_any_object_at_all_is_parsed_or_refused_with_a_field(obj: Any) -> None:
    try:
        parse_topology_object(obj)
    except TopologySpecError as err:
        assert err.field is not None or err.layer is not None or "lists no layers" in str(err)


# ----------------------------------------------------------------------------------------- the annotation
# What koord-scheduler makes of the annotation: Go's json.Unmarshal into its NetworkTopologySpec
# (GetNetworkTopologySpec), then the rules as its solver reads them (GetMustGatherLayer,
# GetLayerPodCountMultiple). Text Go cannot decode drops the whole spec: the gang is placed
# without topology. A spec that decodes is used: unknown fields are ignored, field names match in
# any case, any strategy but MustGather gathers by preference, a rule without a layer matches no
# domain, a multiple below 2 asks nothing. Each of these is a Fallback naming the field.
DROPPED = None  # the expected rules of a spec Go cannot decode
MULTIPLE = '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": %s}]}'
B = "BlockLayer"


def rule(layer: str, strategy: str, multiple: int = 1) -> GatherRule:
    return GatherRule(layer, strategy, multiple)


@pytest.mark.parametrize(
    ("raw", "rules", "fragments"),
    [
        # Go's decoder fails: no topology constraint
        pytest.param("[" * DEEP + "]" * DEEP, DROPPED, ("nested too deeply",), id="nested-arrays"),
        pytest.param(
            '{"gatherStrategy": ' + "[" * DEEP + "]" * DEEP + "}",
            DROPPED,
            ("nested too deeply",),
            id="nested-rules",
        ),
        pytest.param(
            '{"gatherStrategy": [' + json.dumps({"layer": nested(500), "strategy": "MustGather"}) + "]}",
            DROPPED,
            ("nested too deeply",),
            id="layer-nested-deeply",
        ),
        pytest.param(
            '{"gatherStrategy": [' + json.dumps({"layer": nested(3), "strategy": "MustGather"}) + "]}",
            DROPPED,
            ("gatherStrategy[0].layer", "a list of 1 item(s)", "not a string"),
            id="layer-a-list",
        ),
        pytest.param("1" * 5000, DROPPED, ("is not usable JSON",), id="integer-too-long-to-convert"),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 1'
            + "0" * 100
            + "}]}",
            DROPPED,
            ("gatherStrategy[0].podCountMultiple", "an integer of 333 bits", "not an integer"),
            id="multiple-beyond-int64",
        ),
        pytest.param(
            json.dumps(
                {"gatherStrategy": [{"layer": "B", "strategy": "MustGather", "podCountMultiple": 1e999}]}
            ),
            DROPPED,
            ("not valid JSON", "Infinity"),
            id="infinite-multiple",
        ),
        pytest.param(
            '{"gatherStrategy": {}}',
            DROPPED,
            ("gatherStrategy", "an object with 0 field(s)", "not a list"),
            id="rules-are-an-empty-map",
        ),
        pytest.param(
            '{"gatherStrategy": 0}', DROPPED, ("gatherStrategy", "0", "not a list"), id="rules-are-zero"
        ),
        pytest.param(
            '{"gatherStrategy": [[]]}',
            DROPPED,
            ("gatherStrategy[0]", "a list of 0 item(s)", "not an object"),
            id="rule-is-a-list",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": {"MustGather": true}}]}',
            DROPPED,
            ("gatherStrategy[0].strategy", "an object with 1 field(s)", "not a string"),
            id="strategy-is-a-map",
        ),
        pytest.param('{"gatherStrategy": [', DROPPED, ("not valid JSON",), id="invalid-json"),
        pytest.param("", DROPPED, ("not valid JSON",), id="empty-text"),
        pytest.param("gatherStrategy: BlockLayer", DROPPED, ("not valid JSON",), id="yaml-not-json"),
        pytest.param('[{"layer": "BlockLayer"}]', DROPPED, ("JSON object",), id="not-an-object"),
        pytest.param('"BlockLayer"', DROPPED, ("JSON object",), id="a-bare-string"),
        pytest.param(
            '{"gatherStrategy": {"layer": "BlockLayer"}}',
            DROPPED,
            ("gatherStrategy", "not a list"),
            id="not-a-list",
        ),
        pytest.param(
            '{"gatherStrategy": ["BlockLayer"]}',
            DROPPED,
            ("gatherStrategy[0]", "not an object"),
            id="entry-not-an-object",
        ),
        pytest.param(
            MULTIPLE % '"2"',
            DROPPED,
            ("gatherStrategy[0].podCountMultiple", "'2'", "not an integer"),
            id="multiple-as-string",
        ),
        pytest.param(
            MULTIPLE % "2.5",
            DROPPED,
            ("gatherStrategy[0].podCountMultiple", "2.5", "not an integer"),
            id="multiple-as-fraction",
        ),
        pytest.param(
            MULTIPLE % "true",
            DROPPED,
            ("gatherStrategy[0].podCountMultiple", "True", "not an integer"),
            id="multiple-as-boolean",
        ),
        # decoded, and used as koord-scheduler uses it
        pytest.param(
            json.dumps({"gatherStrategy": [{"layer": "L" * 100_000, "strategy": "MustGather"}] * 2}),
            (rule("L" * 100_000, MUST_GATHER),),
            ("gatherStrategy[1].layer", "(100000 characters)", "listed twice"),
            id="huge-layer-name-listed-twice",
        ),
        pytest.param(
            json.dumps({f"k{i}": 1 for i in range(1000)}),
            (),
            ("is not a field koord-scheduler knows", "and 995 more"),
            id="many-unknown-fields",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MaybeGather"}]}',
            (rule(B, PREFER_GATHER),),
            ("gatherStrategy[0].strategy", "'MaybeGather'", "MustGather", "PreferGather"),
            id="unknown-strategy-gathers-by-preference",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "mustGather"}]}',
            (rule(B, PREFER_GATHER),),
            ("gatherStrategy[0].strategy", "'mustGather'", "compared exactly"),
            id="must-gather-in-another-case-is-not-must-gather",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer"}]}',
            (rule(B, PREFER_GATHER),),
            ("gatherStrategy[0].strategy", "not set"),
            id="missing-strategy",
        ),
        pytest.param(
            '{"gatherStrategy": [{"strategy": "MustGather"}]}',
            (),
            ("gatherStrategy[0].layer", "names no layer"),
            id="missing-layer",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "", "strategy": "MustGather"}]}',
            (),
            ("gatherStrategy[0].layer", "names no layer"),
            id="empty-layer",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": -2}]}',
            (rule(B, MUST_GATHER),),
            ("gatherStrategy[0].podCountMultiple", "-2", "negative"),
            id="negative-multiple",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"},'
            ' {"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 4}]}',
            (rule(B, MUST_GATHER, 4),),
            ("gatherStrategy[1].layer", "'BlockLayer'", "twice"),
            id="duplicate-layer-merged",
        ),
        pytest.param(
            '{"gatherStrategy": [], "parallelModel": "TP"}', (), ("parallelModel",), id="unknown-field"
        ),
    ],
)
def test_annotation_is_read_as_koord_scheduler_reads_it_and_every_fallback_is_named(
    raw: str, rules: tuple[GatherRule, ...] | None, fragments: tuple[str, ...]
) -> None:
    reading = read_network_topology_spec(raw, WHERE)
    assert (None if reading.spec is None else reading.spec.rules) == rules
    assert reading.fallbacks, "a part not taken as written is named"
    text = "; ".join(f.message() for f in reading.fallbacks)
    assert text.startswith(WHERE), text
    for fragment in fragments:
        assert fragment in text, text
    assert all(len(f.message()) < 500 for f in reading.fallbacks), text


@pytest.mark.parametrize(
    ("raw", "rules"),
    [
        pytest.param("null", (), id="null-is-an-empty-spec"),
        pytest.param("{}", (), id="empty-object"),
        pytest.param(
            '{"GatherStrategy": [{"Layer": "BlockLayer", "STRATEGY": "MustGather", "podcountmultiple": 2}]}',
            (rule(B, MUST_GATHER, 2),),
            id="field-names-in-any-case",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "preferGather"}]}',
            (rule(B, PREFER_GATHER),),
            id="prefer-gather-in-another-case-means-what-it-says",
        ),
        pytest.param(
            '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 0}]}',
            (rule(B, MUST_GATHER),),
            id="zero-multiple-is-unset",
        ),
    ],
)
def test_annotation_koord_scheduler_takes_as_meant_has_no_fallback(
    raw: str, rules: tuple[GatherRule, ...]
) -> None:
    reading = read_network_topology_spec(raw, WHERE)
    assert reading.spec is not None and reading.spec.rules == rules
    assert reading.fallbacks == ()


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        pytest.param(
            json.dumps(
                {"gatherStrategy": [{"layer": B, "strategy": "MustGather", "podCountMultiple": 2**40}]}
            ),
            ("gatherStrategy[0].podCountMultiple", "larger than any gang"),
            id="multiple-no-gang-can-meet",
        ),
        pytest.param(
            json.dumps(
                {"gatherStrategy": [{"layer": f"L{i}", "strategy": "PreferGather"} for i in range(1000)]}
            ),
            ("gatherStrategy", "1000 layers"),
            id="more-layers-than-a-topology-has",
        ),
    ],
)
def test_annotation_no_gang_can_meet_is_a_spec_error_naming_the_field(
    raw: str, fragments: tuple[str, ...]
) -> None:
    with pytest.raises(SpecError) as caught:
        read_network_topology_spec(raw, WHERE)
    text = str(caught.value)
    assert text.startswith(WHERE), text
    for fragment in fragments:
        assert fragment in text, text


def test_a_long_list_of_mistakes_is_summed_up() -> None:
    raw = json.dumps({"gatherStrategy": [{"layer": f"L{i}", "strategy": "Maybe"} for i in range(20)]})
    reading = read_network_topology_spec(raw, WHERE)
    assert reading.spec is not None and len(reading.spec.rules) == 20
    assert len(reading.fallbacks) < 20
    assert "more part(s)" in reading.fallbacks[-1].message()


def _assert_read_or_refused(raw: str) -> None:
    try:
        reading = read_network_topology_spec(raw, WHERE)
    except SpecError as err:
        assert str(err).startswith(WHERE)
        assert len(str(err)) < 1000
        return
    assert isinstance(reading, TopologySpecReading)
    # a spec that is dropped says why, once
    assert reading.spec is not None or len(reading.fallbacks) == 1
    for f in reading.fallbacks:
        assert f.key.startswith(WHERE) and len(f.message()) < 1000


@settings(max_examples=300, deadline=None)
@given(doc=json_values)
def test_any_json_annotation_is_read_or_refused(doc: Any) -> None:
    for raw in (json.dumps(doc), json.dumps({"gatherStrategy": doc}), json.dumps({"gatherStrategy": [doc]})):
        _assert_read_or_refused(raw)


@settings(max_examples=200, deadline=None)
@given(raw=st.text(max_size=200))
def test_any_text_annotation_is_read_or_refused(raw: str) -> None:
    _assert_read_or_refused(raw)


@pytest.mark.parametrize(
    "value",
    [None, True, 3, 10**400, 1.5, float("nan"), "x" * 1000, nested(DEEP), {"a": nested(DEEP)}, object()],
)
def test_brief_describes_any_value_shortly(value: Any) -> None:
    assert len(brief(value)) < 100


def test_chain_parsing_still_takes_the_bare_list() -> None:
    assert parse_layer_chain(SEED_SPEC["networkTopologySpec"]).order[1:] == (
        "SpineLayer",
        "BlockLayer",
        "NodeTopologyLayer",
    )


# ----------------------------------------------------------------------------------- through simulate
def simulate_gang(capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str) -> dict[str, Any]:
    docs: list[Any] = [
        topology(SEED_SPEC),
        *(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
            }
            for name, labels in SEED_NODE_LABELS.items()
        ),
        *(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"job-{i}",
                    "namespace": "default",
                    "annotations": {
                        "gang.scheduling.koordinator.sh/name": "job",
                        "gang.scheduling.koordinator.sh/min-available": "2",
                        "gang.scheduling.koordinator.sh/network-topology-spec": spec,
                    },
                },
                "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x"}]},
            }
            for i in range(2)
        ),
    ]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["simulate", str(path), "--output", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        pytest.param("[" * 5000 + "]" * 5000, "nested too deeply", id="nested"),
        pytest.param(
            '{"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather", "podCountMultiple": 1'
            + "0" * 40
            + "}]}",
            "not an integer",
            id="multiple-beyond-int64",
        ),
        pytest.param('{"gatherStrategy": {"layer": "SpineLayer"}}', "not a list", id="map-for-list"),
    ],
)
def test_gang_with_an_undecodable_annotation_is_placed_without_topology_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, fragment: str
) -> None:
    report = simulate_gang(capsys, tmp_path, spec)
    for p in report["pods"]:
        assert p["phase"] == "Bound", p
    (group,) = report["podGroups"]
    (condition,) = group["conditions"]
    assert condition["type"] == "AnnotationsDefaulted"
    for text in (WHERE, fragment, "no network-topology constraint"):
        assert text in condition["message"], condition["message"]


def test_gang_with_a_multiple_no_gang_can_meet_is_pending_with_invalid_spec(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = json.dumps(
        {"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather", "podCountMultiple": 2**40}]}
    )
    report = simulate_gang(capsys, tmp_path, spec)
    for p in report["pods"]:
        assert (p["phase"], p["reason"], p["node"]) == ("Pending", "InvalidSpec", None), p
        assert WHERE in p["message"] and "larger than any gang" in p["message"], p["message"]
