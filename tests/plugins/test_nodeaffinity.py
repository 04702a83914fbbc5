from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.pod import Pod
from koordpy.config.errors import ConfigError
from koordpy.framework.diagnosis import fit_error_message
from koordpy.framework.status import Code
from koordpy.plugins.nodeaffinity import NAME
from tests.builders import Harness, make_node, make_pod, node_dict

NODES = [
    node_dict("n1", labels={"zone": "a", "disk": "ssd", "cores": "8"}),
    node_dict("n2", labels={"zone": "b", "disk": "hdd", "cores": "4"}),
    node_dict("n3", labels={"zone": "c", "cores": "16", "rack": "r7"}),
]


# a node affinity (or args) object in API shape; None when absent
Spec = dict[str, Any] | None


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def name_field(operator: str, name: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": operator, "values": [name]}


def term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": w, "preference": t} for w, t in weighted
        ]
    }


def pod_with(node_selector: dict[str, str] | None = None, node_affinity: Spec = None) -> Pod:
    spec: dict[str, Any] = {}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if node_affinity is not None:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    return make_pod("p", spec=spec)


def harness(args: dict[str, Any] | None = None) -> Harness:
    return Harness(NODES, plugins=[NAME], args={NAME: args} if args is not None else None)


@pytest.mark.parametrize(
    ("node_selector", "affinity", "expected"),
    [
        (None, None, ["n1", "n2", "n3"]),
        ({"zone": "a"}, None, ["n1"]),
        ({"zone": "a", "disk": "hdd"}, None, []),
        ({"gpu": "true"}, None, []),
        (None, required(term(expr("zone", "In", "a", "b"))), ["n1", "n2"]),
        (None, required(term(expr("zone", "NotIn", "a"))), ["n2", "n3"]),
        (None, required(term(expr("disk", "NotIn", "ssd"))), ["n2", "n3"]),
        (None, required(term(expr("disk", "Exists"))), ["n1", "n2"]),
        (None, required(term(expr("disk", "DoesNotExist"))), ["n3"]),
        (None, required(term(expr("cores", "Gt", "4"))), ["n1", "n3"]),
        (None, required(term(expr("cores", "Lt", "8"))), ["n2"]),
        (None, required(term(expr("rack", "Gt", "1"))), []),
        (None, required(term(expr("zone", "In", "a", "b"), expr("disk", "In", "hdd"))), ["n2"]),
        (None, required(term(expr("zone", "In", "a")), term(expr("disk", "In", "hdd"))), ["n1", "n2"]),
        (None, required(term()), []),
        (None, required(term(), term(expr("zone", "In", "c"))), ["n3"]),
        ({"zone": "a"}, required(term(expr("disk", "In", "hdd"))), []),
        ({"zone": "b"}, required(term(expr("disk", "In", "hdd"))), ["n2"]),
        (None, required(term(fields=(name_field("In", "n2"),))), ["n2"]),
        (None, required(term(fields=(name_field("NotIn", "n2"),))), ["n1", "n3"]),
        (None, required(term(expr("zone", "In", "a"), fields=(name_field("In", "n2"),))), []),
    ],
    ids=[
        "no-selector-no-affinity-all-nodes",
        "node-selector-single-label",
        "node-selector-all-labels-must-match",
        "node-selector-label-on-no-node",
        "in-any-listed-value",
        "notin-excludes-value",
        "notin-matches-missing-label",
        "exists",
        "does-not-exist",
        "gt-integer-compare",
        "lt-integer-compare",
        "gt-non-integer-label-never-matches",
        "requirements-in-term-are-anded",
        "terms-are-ored",
        "empty-term-matches-nothing",
        "empty-term-ignored-beside-matching-term",
        "node-selector-and-affinity-both-required-conflict",
        "node-selector-and-affinity-both-required-match",
        "match-fields-name-in",
        "match-fields-name-notin",
        "match-fields-anded-with-expressions",
    ],
)
def test_filter(node_selector: dict[str, str] | None, affinity: Spec, expected: list[str]) -> None:
    h = harness()
    feasible, diagnosis = h.feasible(pod_with(node_selector, affinity))
    assert feasible == expected
    for status in diagnosis.statuses_by_row().values():
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ("node(s) didn't match Pod's node affinity/selector",)


def test_failure_message_counts_every_node() -> None:
    h = harness()
    feasible, diagnosis = h.feasible(pod_with({"zone": "z"}))
    assert feasible == []
    assert fit_error_message(3, diagnosis) == (
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    )


def test_pre_filter_skips_pod_without_constraints() -> None:
    h = harness()
    state, allowed, status = h.pre_filter(pod_with())
    assert (allowed, status) == (None, None)
    assert NAME in state.skip_filter


@pytest.mark.parametrize(
    ("affinity", "allowed", "feasible"),
    [
        (required(term(fields=(name_field("In", "n2"),))), {"n2"}, ["n2"]),
        (
            required(term(fields=(name_field("In", "n1"),)), term(fields=(name_field("In", "n3"),))),
            {"n1", "n3"},
            ["n1", "n3"],
        ),
        (required(term(fields=(name_field("In", "n1"),)), term(expr("zone", "In", "b"))), None, ["n1", "n2"]),
        (required(term(fields=(name_field("NotIn", "n1"),))), None, ["n2", "n3"]),
        (required(term(fields=(name_field("In", "n9"),))), {"n9"}, []),
    ],
    ids=[
        "one-term-one-name",
        "names-of-terms-are-united",
        "a-term-without-names-allows-all-nodes",
        "notin-gives-no-subset",
        "unknown-name-leaves-no-candidate",
    ],
)
def test_pre_filter_node_subset(affinity: Spec, allowed: set[str] | None, feasible: list[str]) -> None:
    h = harness()
    pod = pod_with(None, affinity)
    _, got, status = h.pre_filter(pod)
    assert status is None
    assert (set(got) if got is not None else None) == allowed
    assert h.feasible(pod)[0] == feasible


def test_pre_filter_conflicting_names_in_one_term() -> None:
    h = harness()
    pod = pod_with(None, required(term(fields=(name_field("In", "n1"), name_field("In", "n2")))))
    _, _, status = h.pre_filter(pod)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("pod affinity terms conflict",)


ENFORCED_ZONE_AB = required(term(expr("zone", "In", "a", "b")))


@pytest.mark.parametrize(
    ("affinity", "expected", "message"),
    [
        (None, ["n1", "n2"], None),
        (required(term(expr("zone", "In", "b", "c"))), ["n2"], None),
        (
            required(term(expr("zone", "In", "c"))),
            [],
            "0/3 nodes are available: 1 node(s) didn't match scheduler-enforced node affinity, "
            "2 node(s) didn't match Pod's node affinity/selector.",
        ),
    ],
    ids=["applies-to-pod-without-affinity", "anded-with-pod-affinity", "enforced-reason-checked-first"],
)
def test_added_affinity_required(affinity: Spec, expected: list[str], message: str | None) -> None:
    h = harness({"addedAffinity": ENFORCED_ZONE_AB})
    feasible, diagnosis = h.feasible(pod_with(None, affinity))
    assert feasible == expected
    if message is not None:
        assert fit_error_message(3, diagnosis) == message


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (
            {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "profiles[0].pluginConfig[NodeAffinity].args.addedAffinity",
        ),
        (
            {"addedAffinity": preferred((0, term(expr("zone", "In", "a"))))},
            "profiles[0].pluginConfig[NodeAffinity].args.addedAffinity",
        ),
        (
            {"addedAffinity": {"requiredDuringSchedulingRequiredDuringExecution": {}}},
            "profiles[0].pluginConfig[NodeAffinity].args.addedAffinity",
        ),
        ({"addedNodeAffinity": {}}, "profiles[0].pluginConfig[NodeAffinity].args.addedNodeAffinity"),
    ],
    ids=["required-without-terms", "preferred-weight-zero", "unknown-affinity-field", "unknown-arg"],
)
def test_invalid_args_fail_at_start(args: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        harness(args)
    assert err.value.path == path


@pytest.mark.parametrize(
    ("affinity", "args", "expected"),
    [
        # n1: 10 + 30 = 40, n2: 30, n3: 5; scaled by 100/40 and floored
        (
            preferred(
                (10, term(expr("zone", "In", "a"))),
                (30, term(expr("disk", "Exists"))),
                (5, term(expr("cores", "Gt", "10"))),
            ),
            None,
            {"n1": 100, "n2": 75, "n3": 12},
        ),
        (preferred((10, term(expr("zone", "In", "x")))), None, {"n1": 0, "n2": 0, "n3": 0}),
        (preferred((7, term(fields=(name_field("In", "n2"),)))), None, {"n1": 0, "n2": 100, "n3": 0}),
        (preferred((50, term()), (10, term(expr("disk", "In", "ssd")))), None, {"n1": 100, "n2": 0, "n3": 0}),
        # pod: n1 10; added: n3 20 -> 10/20 = 50, 0, 100
        (
            preferred((10, term(expr("zone", "In", "a")))),
            {"addedAffinity": preferred((20, term(expr("zone", "In", "c"))))},
            {"n1": 50, "n2": 0, "n3": 100},
        ),
        (
            None,
            {"addedAffinity": preferred((20, term(expr("zone", "In", "c"))))},
            {"n1": 0, "n2": 0, "n3": 100},
        ),
    ],
    ids=[
        "weights-summed-and-normalized",
        "nothing-matches-all-zero",
        "match-fields-in-preference",
        "empty-preference-matches-nothing",
        "added-preferred-terms-scored-with-pod-terms",
        "added-preferred-terms-alone",
    ],
)
def test_score(affinity: Spec, args: Spec, expected: dict[str, int]) -> None:
    h = harness(args)
    assert h.plugin_scores(NAME, pod_with(None, affinity)) == expected


def test_pre_score_skips_without_preferred_terms() -> None:
    h = harness()
    assert h.plugin_scores(NAME, pod_with({"zone": "a"})) == {}


def test_score_weight_applies_after_normalization() -> None:
    h = Harness(NODES, plugins=[NAME], weights={NAME: 2})
    pod = pod_with(None, preferred((10, term(expr("zone", "In", "a"))), (30, term(expr("disk", "Exists")))))
    # n1 40 -> 100, n2 30 -> 75, n3 0; each doubled
    assert h.scores(pod) == {"n1": 200, "n2": 150, "n3": 0}


def test_node_label_change_is_seen_by_the_next_pod() -> None:
    h = harness()
    assert h.feasible(pod_with({"zone": "a"}))[0] == ["n1"]
    h.cache.update_node(make_node("n3", labels={"zone": "a"}))
    assert h.feasible(pod_with({"zone": "a"}))[0] == ["n1", "n3"]
    h.cache.add_node(make_node("n4", labels={"zone": "a"}))
    assert h.feasible(pod_with({"zone": "a"}))[0] == ["n1", "n3", "n4"]


def test_filter_one_node_with_nominated_pods_path() -> None:
    h = harness()
    pod = pod_with({"zone": "b"})
    state, _, _ = h.pre_filter(pod)
    for name, fails in (("n1", True), ("n2", False)):
        status = h.profile.filter_one(state, pod, h.snapshot.row_of[name])
        assert (status is not None) == fails
