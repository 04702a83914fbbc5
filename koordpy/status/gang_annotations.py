"""Koordinator's gang annotations, read as koord-scheduler reads them (Gang.tryInitByPodConfig and
tryInitByPodGroup in its coscheduling core/gang.go, with the helpers of apis/extension). The
Coscheduling plugin takes a gang's parameters from them; the PodGroup operator names on the
PodGroup what was read otherwise than written.

Where koord-scheduler falls back to a default, so does koordpy, and the reading carries a Fallback
for each: the annotation, the value, what is wrong with it and what is used instead. A SpecError is
left only where koord-scheduler itself never schedules the gang.

| annotation             | koord-scheduler's reading of a bad value                              |
|------------------------|-----------------------------------------------------------------------|
| min-available          | strconv.ParseInt (int32) fails: this pod does not configure the gang  |
|                        | (the next member that parses does; none: the gang is never ready)     |
| total-number           | unparsable, or below min-available: min-available                     |
| mode                   | anything but Strict or NonStrict: Strict                              |
| match-policy           | anything but the three policies: the default match policy             |
| waiting-time           | not a Go duration, or negative: the default timeout                   |
| groups                 | not a JSON array: the gang alone                                      |
| network-topology-spec  | what Go's JSON decoder refuses: no topology constraint                |
| network-topology-index | not an integer: no index                                              |

A value spelled otherwise but meaning what the fallback gives anyway (`strict`, `OnceSatisfied`
under the default once-satisfied policy) is taken without a Fallback: nothing is read otherwise
than meant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from koordpy.api.duration import parse_duration
from koordpy.api.errors import SpecError
from koordpy.api.podgroup import SIGS_GROUP, PodGroup
from koordpy.status.topology import LayerChain, brief

PREFIX = "gang.scheduling.koordinator.sh"
ANNOTATION_MIN = f"{PREFIX}/min-available"
ANNOTATION_TOTAL = f"{PREFIX}/total-number"
ANNOTATION_MODE = f"{PREFIX}/mode"
ANNOTATION_MATCH_POLICY = f"{PREFIX}/match-policy"
ANNOTATION_MATCH_POLICY_ALIAS = "pod-group.scheduling.sigs.k8s.io/match-policy"
ANNOTATION_WAITING_TIME = f"{PREFIX}/waiting-time"
ANNOTATION_GROUPS = f"{PREFIX}/groups"
ANNOTATION_TOPOLOGY_SPEC = f"{PREFIX}/network-topology-spec"
ANNOTATION_TOPOLOGY_INDEX = f"{PREFIX}/network-topology-index"
LIGHTWEIGHT_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"

STRICT = "Strict"
NON_STRICT = "NonStrict"
ONCE_SATISFIED = "once-satisfied"
ONLY_WAITING = "only-waiting"
WAITING_AND_RUNNING = "waiting-and-running"
MATCH_POLICIES = (ONCE_SATISFIED, ONLY_WAITING, WAITING_AND_RUNNING)


# ------------------------------------------------------------------------------- fallbacks
@dataclass(frozen=True, slots=True)
class Fallback:
    """A gang annotation (or a part of one) that koord-scheduler does not take as written, and
    what it uses instead."""

    # what is read: `annotation <key>`, `label <key>`, or the annotation and a field in it
    key: str
    # the value as written, quoted and cut short
    value: str
    # what is wrong with it
    why: str
    # what is used instead
    used: str

    def message(self) -> str:
        return f"{self.key}: {self.value} {self.why}; using {self.used}, as koord-scheduler does"


def same_word(a: str, b: str) -> bool:
    """Whether two spellings name the same thing but for case, spaces, dashes and underscores."""
    return "".join(c for c in a.casefold() if c not in " -_") == "".join(
        c for c in b.casefold() if c not in " -_"
    )


# Go's strconv.ParseInt(s, 10, bits): an optional sign and ASCII digits, nothing else
_GO_INT = re.compile(r"[+-]?[0-9]+")


def go_int(text: str, bits: int = 32) -> int | None:
    """The integer Go's strconv.ParseInt(text, 10, bits) reads, or None where it fails (spaces,
    underscores, other digits, out of range)."""
    if _GO_INT.fullmatch(text) is None:
        return None
    n = int(text)
    limit = 2 ** (bits - 1)
    return n if -limit <= n < limit else None


# ------------------------------------------------------------------ network-topology-spec
PREFER_GATHER = "PreferGather"
MUST_GATHER = "MustGather"
STRATEGIES = (PREFER_GATHER, MUST_GATHER)
# a multiple larger than any gang can have (minMember is an int32) could never be met
MAX_POD_COUNT_MULTIPLE = 2**31 - 1
# more rules than a topology can have layers (see koordpy.status.topology.MAX_LAYERS) can only
# repeat or name unknown layers; the bound keeps messages and checks short
MAX_GATHER_RULES = 32


@dataclass(frozen=True, slots=True)
class GatherRule:
    layer: str
    strategy: str
    # every domain of the layer receives a multiple of this many pods (1: no constraint)
    pod_count_multiple: int = 1


@dataclass(frozen=True, slots=True)
class NetworkTopologySpec:
    rules: tuple[GatherRule, ...] = ()

    def unknown_layers(self, chain: LayerChain, strategy: str | None = None) -> list[str]:
        """Layers the rules name that the topology does not have (of one strategy, if given)."""
        known = set(chain.order)
        return [
            r.layer
            for r in self.rules
            if r.layer not in known and (strategy is None or r.strategy == strategy)
        ]

    def must_gather_layer(self, chain: LayerChain) -> str | None:
        """The layer closest to the nodes that has MustGather: the only one that matters, since
        a domain inside it is inside every MustGather domain above it too."""
        musts = [r.layer for r in self.rules if r.strategy == MUST_GATHER and r.layer in chain.order]
        return max(musts, key=chain.depth) if musts else None

    def multiples(self) -> dict[str, int]:
        return {r.layer: r.pod_count_multiple for r in self.rules if r.pod_count_multiple > 1}

    def without_multiples(self) -> NetworkTopologySpec:
        """The same gather rules with no podCountMultiple: for members placed after the group, the
        split the multiples ask for was made when the group was placed."""
        return NetworkTopologySpec(tuple(replace(r, pod_count_multiple=1) for r in self.rules))

    def same_rules(self, other: NetworkTopologySpec) -> bool:
        """Whether both ask for the same placement (the order the rules are listed in is no part
        of it: each names its own layer)."""
        return set(self.rules) == set(other.rules)

    def describe(self) -> str:
        if not self.rules:
            return "no gather rules"
        parts = []
        for r in self.rules:
            multiple = f" podCountMultiple {r.pod_count_multiple}" if r.pod_count_multiple > 1 else ""
            parts.append(f"{r.strategy} {r.layer}{multiple}")
        return ", ".join(parts)


# a spec is an object of a list of objects: anything deeper than this is not one
MAX_SPEC_NESTING = 32


def json_nesting_depth(raw: str) -> int:
    """The deepest bracket nesting of a JSON text, strings skipped; cheap when few brackets."""
    if raw.count("[") + raw.count("{") <= MAX_SPEC_NESTING:
        return 0  # not deeper than MAX_SPEC_NESTING, all that callers ask
    depth = deepest = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


@dataclass(frozen=True, slots=True)
class TopologySpecReading:
    """What koord-scheduler makes of a network-topology-spec: the gather rules (None: the gang
    asks for no topology-aware placement) and every part it did not take as written."""

    spec: NetworkTopologySpec | None
    fallbacks: tuple[Fallback, ...] = ()


_INT64 = 2**63
# the most Fallbacks one reading lists
MAX_FALLBACKS = 8
_SPEC_FIELDS = ("gatherStrategy",)
_RULE_FIELDS = ("layer", "strategy", "podCountMultiple")


class _Undecodable(Exception):
    """A part of the text Go's encoding/json refuses to decode into koord-scheduler's types:
    where it is (None: the text as a whole), and why."""

    def __init__(self, path: str | None, value: str, why: str) -> None:
        super().__init__(path, value, why)
        self.path, self.value, self.why = path, value, why


class _Pairs(tuple[tuple[str, Any], ...]):
    """A JSON object as its key/value pairs in order, duplicates kept: Go decodes every pair in
    turn, so the last of two keys naming the same field wins, whatever case each is in."""


def _shown(value: Any) -> str:
    # objects are kept as their pairs, which brief would call a list
    return f"an object with {len(value)} field(s)" if isinstance(value, _Pairs) else brief(value)


def _not_json(name: str) -> Any:
    # Python reads NaN and Infinity; Go's decoder refuses them as it does any other non-JSON
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


def _fields(obj: _Pairs, names: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """The object's values by the field of koord-scheduler's struct each key decodes into (Go
    matches a key to a field name exactly, else without regard to case), and the keys that match
    no field (Go ignores those)."""
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in obj:
        name = key if key in names else next((n for n in names if n.casefold() == key.casefold()), None)
        if name is None:
            unknown.append(key)
        else:
            values[name] = value
    return values, unknown


def _unknown_fields(path: str, unknown: list[str]) -> Fallback:
    shown = ", ".join(brief(k) for k in unknown[:5]) + (
        f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    )
    return Fallback(path, shown, "is not a field koord-scheduler knows", "the rest of the spec without it")


def _string_field(rule: dict[str, Any], name: str, path: str) -> str:
    value = rule.get(name)
    if value is None:  # absent or null: Go leaves the zero value
        return ""
    if not isinstance(value, str):
        raise _Undecodable(f"{path}.{name}", _shown(value), "is not a string")
    return value


def _int_field(rule: dict[str, Any], name: str, path: str) -> int:
    value = rule.get(name)
    if value is None:
        return 0
    # Go decodes only an integer literal that fits an int into an int: 2.0, 1e3, "2" and true
    # are errors, and so is a number beyond int64
    if isinstance(value, bool) or not isinstance(value, int) or not -_INT64 <= value < _INT64:
        raise _Undecodable(f"{path}.{name}", _shown(value), "is not an integer")
    return value


def _decode(raw: str) -> Any:
    if json_nesting_depth(raw) > MAX_SPEC_NESTING:
        # decided before parsing: whether the parser itself gives up depends on the stack in
        # use. Nothing a spec holds is this deep: in a field of the spec it is a type error for
        # Go too, and only in a field Go ignores would Go have read past it
        raise _Undecodable(None, "", "is nested too deeply to be a network-topology-spec")
    try:
        return json.loads(raw, object_pairs_hook=_Pairs, parse_constant=_not_json)
    except json.JSONDecodeError as err:
        raise _Undecodable(
            None, "", f"is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None
    except RecursionError:
        raise _Undecodable(None, "", "is nested too deeply to be a network-topology-spec") from None
    except ValueError as err:
        # an integer literal longer than Python converts (sys.get_int_max_str_digits); Go
        # refuses a number that long in any field it decodes
        raise _Undecodable(None, "", f"is not usable JSON: {str(err)[:120]}") from None


def _rules(doc: Any, where: str, notes: list[Fallback]) -> list[GatherRule]:
    """The gather rules, as Go decodes them into koord-scheduler's NetworkTopologySpec and its
    solver reads them; _Undecodable where Go's decoder fails."""
    if doc is None:  # `null` decodes into an empty spec
        return []
    if not isinstance(doc, _Pairs):
        raise _Undecodable(None, "", 'is not a JSON object such as {"gatherStrategy": [...]}')
    top, unknown = _fields(doc, _SPEC_FIELDS)
    if unknown:
        notes.append(_unknown_fields(where, unknown))
    entries = top.get("gatherStrategy")
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise _Undecodable(f"{where} gatherStrategy", _shown(entries), "is not a list")
    rules: dict[str, GatherRule] = {}
    for i, entry in enumerate(entries):
        path = f"{where} gatherStrategy[{i}]"
        if entry is None:
            entry = _Pairs()
        if not isinstance(entry, _Pairs):
            raise _Undecodable(path, _shown(entry), "is not an object")
        fields, unknown = _fields(entry, _RULE_FIELDS)
        if unknown:
            notes.append(_unknown_fields(path, unknown))
        layer = _string_field(fields, "layer", path)
        strategy = _string_field(fields, "strategy", path)
        multiple = _int_field(fields, "podCountMultiple", path)
        if layer == "":
            # the solver matches a rule to domains by layer: a rule for no layer constrains nothing
            notes.append(
                Fallback(f"{path}.layer", "''", "is empty, so the rule names no layer", "the other rules")
            )
            continue
        if strategy not in STRATEGIES:
            # the solver only asks whether a rule is MustGather; any other rule gathers by preference
            if not same_word(strategy, PREFER_GATHER):
                why = (
                    "is not set"
                    if strategy == ""
                    else f"is neither {MUST_GATHER} nor {PREFER_GATHER} (strategies are compared exactly)"
                )
                notes.append(Fallback(f"{path}.strategy", brief(strategy), why, PREFER_GATHER))
            strategy = PREFER_GATHER
        if multiple < 0:
            notes.append(
                Fallback(f"{path}.podCountMultiple", brief(multiple), "is negative", "no multiple (1)")
            )
        if multiple > MAX_POD_COUNT_MULTIPLE:
            # koord-scheduler keeps it, and no domain can ever hold that multiple of pods
            raise SpecError(
                f"{path}.podCountMultiple",
                f"{brief(multiple)} is larger than any gang can be (at most {MAX_POD_COUNT_MULTIPLE})",
            )
        rule = GatherRule(layer, strategy, max(multiple, 1))
        earlier = rules.get(layer)
        if earlier is not None:
            # the solver takes the deepest MustGather layer, and each layer's multiple from the
            # rules in turn: a layer listed twice gathers if either says so, by the later multiple
            rule = GatherRule(
                layer,
                MUST_GATHER if MUST_GATHER in (earlier.strategy, strategy) else PREFER_GATHER,
                rule.pod_count_multiple if multiple > 1 else earlier.pod_count_multiple,
            )
            notes.append(
                Fallback(
                    f"{path}.layer",
                    brief(layer),
                    "is listed twice",
                    f"one rule merging both ({rule.strategy}, podCountMultiple {rule.pod_count_multiple})",
                )
            )
        rules[layer] = rule
    if len(rules) > MAX_GATHER_RULES:
        # a topology has no more layers than this, so most of them are layers no domain has
        raise SpecError(
            f"{where} gatherStrategy", f"names {len(rules)} layers; at most {MAX_GATHER_RULES} are supported"
        )
    return list(rules.values())


def read_network_topology_spec(raw: str, where: str) -> TopologySpecReading:
    """Read `gang.scheduling.koordinator.sh/network-topology-spec` as koord-scheduler does: Go's
    json.Unmarshal into its NetworkTopologySpec, then the rules as its solver uses them.

    - Text Go cannot decode into the spec (not JSON, a field of the wrong type, a number that is
      no int) drops the whole spec: the gang is placed without topology.
    - A spec that decodes is used as koord-scheduler uses it: fields it does not know are
      ignored (field names match in any case), a strategy other than MustGather gathers by
      preference, a rule without a layer constrains nothing, a podCountMultiple below 2 asks
      for nothing, and the rules of a layer listed twice are merged.

    Each of these is a Fallback of the reading. A SpecError only for a spec no gang can meet (a
    podCountMultiple beyond any gang's size, more layers than a topology can have)."""
    notes: list[Fallback] = []
    try:
        rules = _rules(_decode(raw), where, notes)
    except _Undecodable as err:
        # Go's decoder fails as a whole: koord-scheduler gets no spec at all
        why = err.why if err.path is None else f"{err.why}, so the spec cannot be decoded"
        dropped = Fallback(err.path or where, err.value or brief(raw), why, "no network-topology constraint")
        return TopologySpecReading(None, (dropped,))
    if len(notes) > MAX_FALLBACKS:
        # each is told to every member: a long list of mistakes is summed up, not repeated
        more = len(notes) - MAX_FALLBACKS + 1
        rest = Fallback(
            where, f"{more} more part(s)", "are not taken as written either", "its reading of each"
        )
        notes[MAX_FALLBACKS - 1 :] = [rest]
    return TopologySpecReading(NetworkTopologySpec(tuple(rules)), tuple(notes))


def parse_network_topology_spec(raw: str, where: str) -> NetworkTopologySpec:
    """A spec known to be well formed (benchmarks, tests of placement): any part koord-scheduler
    would read otherwise than as written is a SpecError here."""
    reading = read_network_topology_spec(raw, where)
    if reading.fallbacks:
        first = reading.fallbacks[0]
        raise SpecError(first.key, f"{first.value} {first.why}")
    assert reading.spec is not None
    return reading.spec


# ----------------------------------------------------------------------- the other annotations
class MinAvailableError(SpecError):
    """The pod's min-available cannot be read: koord-scheduler lets such a pod join its gang but
    not configure it, so the gang takes its parameters from another member."""

    def __init__(self, path: str, value: str, why: str) -> None:
        super().__init__(path, f"{value} {why}" if value else why)
        self.value, self.why = value, why

    def __reduce__(self) -> tuple[type[MinAvailableError], tuple[str, str, str]]:
        return (MinAvailableError, (self.path, self.value, self.why))

    def fallback(self, used: str) -> Fallback:
        return Fallback(self.path, self.value or "(absent)", self.why, used)


def min_available(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[int, str]:
    """A pod's min-available as koord-scheduler's GetGangMinNumFromPod reads it: the lightweight
    label when it is not empty, else the annotation when present (even empty), else nothing;
    MinAvailableError when unusable. The value, and where it was read."""
    label = labels.get(LIGHTWEIGHT_MIN_LABEL, "")
    if label != "":
        where, raw = f"label {LIGHTWEIGHT_MIN_LABEL}", label
    elif ANNOTATION_MIN in annotations:
        where, raw = f"annotation {ANNOTATION_MIN}", annotations[ANNOTATION_MIN]
    else:
        raise MinAvailableError(
            f"annotation {ANNOTATION_MIN}", "", "is required for a gang declared by annotations"
        )
    n = go_int(raw)
    if n is None:
        raise MinAvailableError(where, brief(raw), "is not a 32-bit integer")
    return n, where


def _total(annotations: Mapping[str, str], min_member: int, out: list[Fallback]) -> int:
    raw = annotations.get(ANNOTATION_TOTAL, "")
    if raw == "":
        return min_member
    n = go_int(raw)
    key, used = f"annotation {ANNOTATION_TOTAL}", f"min-available ({min_member})"
    if n is None:
        out.append(Fallback(key, brief(raw), "is not a 32-bit integer", used))
        return min_member
    if n == 0:  # koord-scheduler's "not set"
        return min_member
    if n < min_member:
        out.append(Fallback(key, brief(raw), f"is below min-available {min_member}", used))
        return min_member
    return n


def _mode(annotations: Mapping[str, str], out: list[Fallback]) -> str:
    raw = annotations.get(ANNOTATION_MODE, "")
    if raw in ("", STRICT, NON_STRICT):
        return raw or STRICT
    if not same_word(raw, STRICT):
        why = f"is neither {STRICT} nor {NON_STRICT} (the mode is compared exactly)"
        out.append(Fallback(f"annotation {ANNOTATION_MODE}", brief(raw), why, STRICT))
    return STRICT


def _match_policy(annotations: Mapping[str, str], default: str, out: list[Fallback]) -> str:
    # the alias is read only when the main key is empty or absent, as GetGangMatchPolicy does
    key, raw = ANNOTATION_MATCH_POLICY, annotations.get(ANNOTATION_MATCH_POLICY, "")
    if raw == "":
        key, raw = ANNOTATION_MATCH_POLICY_ALIAS, annotations.get(ANNOTATION_MATCH_POLICY_ALIAS, "")
    if raw == "":
        return default
    if raw in MATCH_POLICIES:
        return raw
    if not same_word(raw, default):
        why = f"is not one of {', '.join(MATCH_POLICIES)} (policies are compared exactly)"
        out.append(Fallback(f"annotation {key}", brief(raw), why, f"the default match policy {default}"))
    return default


def waiting_time(annotations: Mapping[str, str], out: list[Fallback]) -> float | None:
    """A pod's waiting time in seconds, None for the default, as GetGangWaitTime reads it
    (time.ParseDuration): empty or zero means the default, and so, with an error logged, does an
    unparsable or negative duration."""
    raw = annotations.get(ANNOTATION_WAITING_TIME, "")
    if raw == "":
        return None
    key, used = f"annotation {ANNOTATION_WAITING_TIME}", "the default timeout (defaultTimeout)"
    try:
        # parse_duration forgives surrounding spaces and reads digits of any script, which Go's
        # ParseDuration does not
        if raw != raw.strip() or any(c.isdigit() and not c.isascii() for c in raw):
            raise SpecError(key, "is not a Go duration")
        seconds = parse_duration(raw, key)
    except SpecError:
        out.append(Fallback(key, brief(raw), "is not a Go duration such as 90s, 10m or 1h30m", used))
        return None
    if seconds < 0:
        out.append(Fallback(key, brief(raw), "is negative", used))
        return None
    return seconds if seconds > 0 else None


def _group_ids(raw: str, own_id: str, out: list[Fallback]) -> tuple[str, ...]:
    """StringToGangGroupSlice: json.Unmarshal into a []string. Text that is not a JSON array at
    all leaves the slice empty, and the gang is a group of its own; an array with an entry that is
    not a gang id gives a group naming a gang that never exists, which koord-scheduler never
    schedules: that one is a SpecError."""
    key = f"annotation {ANNOTATION_GROUPS}"
    alone = "the gang alone (no gang group)"
    if raw == "":
        return (own_id,)
    is_array = raw.lstrip(" \t\r\n").startswith("[")
    problem: str | None = None
    parsed: object = None
    if json_nesting_depth(raw) > MAX_SPEC_NESTING:
        problem = "is nested too deeply to be a JSON array of gang ids"
    else:
        try:
            parsed = json.loads(raw, parse_constant=_not_json)
        except json.JSONDecodeError as err:
            out.append(Fallback(key, brief(raw), f"is not valid JSON: {err.msg}", alone))
            return (own_id,)
        except ValueError as err:  # an integer literal longer than Python converts
            problem = f"is not usable JSON: {str(err)[:120]}"
    if problem is not None:
        # Go decodes nested arrays or huge numbers in an array into empty gang ids, and drops
        # them anywhere else
        if is_array:
            raise SpecError(key, f"{brief(raw)} {problem}")
        out.append(Fallback(key, brief(raw), problem, alone))
        return (own_id,)
    if parsed is None:  # `null`
        return (own_id,)
    if not isinstance(parsed, list):
        out.append(Fallback(key, brief(raw), "is not a JSON array of gang ids", alone))
        return (own_id,)
    for gid in parsed:
        if not isinstance(gid, str) or gid.count("/") != 1 or gid.startswith("/") or gid.endswith("/"):
            raise SpecError(
                key, f"entry {brief(gid)} of {brief(raw)} is not a gang id of the form namespace/name"
            )
    ids = set(parsed)
    ids.add(own_id)
    return tuple(sorted(ids))


@dataclass(frozen=True, slots=True)
class GangAnnotations:
    """The parameters a pod (or a PodGroup of scheduling.sigs.k8s.io) gives its gang beyond
    min-available and the wait, and the Fallbacks of their reading."""

    total: int
    mode: str
    match_policy: str
    # every gang id of the gang group, sorted, this gang's own included
    group: tuple[str, ...]
    topology_spec: NetworkTopologySpec | None
    fallbacks: tuple[Fallback, ...]


def read_gang_annotations(
    annotations: Mapping[str, str], own_id: str, default_match_policy: str, min_member: int
) -> GangAnnotations:
    """The annotations koord-scheduler reads on a pod and on a PodGroup alike; SpecError only for
    what it never schedules."""
    out: list[Fallback] = []
    total = _total(annotations, min_member, out)
    mode = _mode(annotations, out)
    policy = _match_policy(annotations, default_match_policy, out)
    group = _group_ids(annotations.get(ANNOTATION_GROUPS, ""), own_id, out)
    raw_topology = annotations.get(ANNOTATION_TOPOLOGY_SPEC, "")
    topology = None
    if raw_topology != "":
        reading = read_network_topology_spec(raw_topology, f"annotation {ANNOTATION_TOPOLOGY_SPEC}")
        topology = reading.spec
        out.extend(reading.fallbacks)
    return GangAnnotations(total, mode, policy, group, topology, tuple(out))


def podgroup_fallbacks(pg: PodGroup, default_match_policy: str = ONCE_SATISFIED) -> tuple[Fallback, ...]:
    """The gang annotations of a scheduling.sigs.k8s.io PodGroup read otherwise than written
    (scheduler-plugins' PodGroups have none; nor has a PodGroup that cannot be used at all, which
    is said elsewhere). The waiting-time annotation is not read on a PodGroup:
    scheduleTimeoutSeconds is."""
    if pg.api_group != SIGS_GROUP or pg.spec_error is not None:
        return ()
    try:
        return read_gang_annotations(pg.annotations, pg.key, default_match_policy, pg.min_member).fallbacks
    except SpecError:
        return ()


def topology_index(annotations: Mapping[str, str]) -> int | None:
    """A pod's network-topology-index as GetPodNetworkTopologyIndex reads it (strconv.Atoi): a pod
    whose index is absent, unparsable or negative has none, and is ordered after the indexed
    members."""
    raw = annotations.get(ANNOTATION_TOPOLOGY_INDEX)
    n = go_int(raw, 64) if raw is not None else None
    return n if n is not None and n >= 0 else None


def index_fallback(annotations: Mapping[str, str]) -> Fallback | None:
    """The Fallback of a network-topology-index that is set but not an integer (a negative one is
    how Koordinator itself says "no index")."""
    raw = annotations.get(ANNOTATION_TOPOLOGY_INDEX)
    if raw is None or go_int(raw, 64) is not None:
        return None
    return Fallback(
        f"annotation {ANNOTATION_TOPOLOGY_INDEX}",
        brief(raw),
        "is not an integer",
        "no index (the pod comes after the indexed members, by name)",
    )
