"""NodeAffinity: a pod runs only on nodes matching its nodeSelector, its required node affinity and
the scheduler-enforced `addedAffinity`; preferred node affinity terms add their weight to a node's
score.

Whether a node matches depends only on node objects, so a pod's verdict for every row is computed
once per node generation and shared by every pod with the same selector and required affinity
(pods stamped from one template).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import field_validator

from koordpy.api import names
from koordpy.api.errors import SpecError, join_path
from koordpy.api.nodeselector import (
    IN,
    NODE_NAME_FIELD,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)
from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    MAX_NODE_SCORE,
    NODE_ADD,
    NODE_UPDATE,
    ClusterEvent,
    ClusterEventWithHint,
    FilterPlugin,
    FilterResult,
    Plugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    QueueingHints,
    ScoreExtensions,
    ScorePlugin,
)
from koordpy.framework.status import SKIP, SUCCESS, Status, unresolvable

NAME = names.NODE_AFFINITY

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

# verdict codes per row; they index the statuses a FilterResult carries
_PASS = 0
_ENFORCED = 1
_POD = 2

_CACHE_LIMIT = 256
# the largest score normalized through a lookup table
_TABLE_LIMIT = 4096
# the enforced affinity's mask shares the verdict cache under a key no pod spec can produce
_ENFORCED_KEY = ("addedAffinity",)


def parse_node_affinity(
    obj: Mapping[str, Any] | None, path: str
) -> tuple[NodeSelector | None, tuple[PreferredSchedulingTerm, ...]]:
    """A core/v1 NodeAffinity object: (required selector | None, preferred terms)."""
    if obj is None:
        return None, ()
    if not isinstance(obj, Mapping):
        raise SpecError(path, f"expected a node affinity object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - {_REQUIRED, _PREFERRED})
    if unknown:
        raise SpecError(join_path(path, unknown[0]), "unknown field")
    raw_required = obj.get(_REQUIRED)
    required = None
    if raw_required is not None:
        required = NodeSelector.from_dict(raw_required, join_path(path, _REQUIRED))
    raw_preferred = obj.get(_PREFERRED) or []
    preferred_path = join_path(path, _PREFERRED)
    if not isinstance(raw_preferred, list):
        raise SpecError(preferred_path, f"expected a list, got {type(raw_preferred).__name__}")
    preferred = tuple(
        PreferredSchedulingTerm.from_dict(term, f"{preferred_path}[{i}]")
        for i, term in enumerate(raw_preferred)
    )
    return required, preferred


class NodeAffinityArgs(PluginArgs):
    # a core/v1 NodeAffinity applied to every pod of the profile
    added_affinity: dict[str, Any] | None = None

    @field_validator("added_affinity")
    @classmethod
    def _valid_node_affinity(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        try:
            parse_node_affinity(value, "")
        except SpecError as err:
            raise ValueError(str(err)) from None
        return value


class _GenerationCache:
    """Arrays over node rows that depend only on node objects: valid for one node generation of
    one snapshot, and bounded so that many distinct pod specs cannot grow it without limit."""

    __slots__ = ("_entries", "_generation", "_snapshot_id")

    def __init__(self) -> None:
        self._entries: dict[Hashable, Any] = {}
        self._snapshot_id = -1
        self._generation = -1

    def get(self, snapshot: Any, key: Hashable) -> Any:
        if snapshot.node_generation != self._generation or id(snapshot) != self._snapshot_id:
            self._entries.clear()
            self._generation = snapshot.node_generation
            self._snapshot_id = id(snapshot)
            return None
        return self._entries.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        if len(self._entries) >= _CACHE_LIMIT:
            self._entries.clear()
        self._entries[key] = value


class _Verdict:
    """Per row (up to the snapshot's high-water row): _PASS, _ENFORCED or _POD."""

    __slots__ = ("any_fail", "codes", "generation")

    def __init__(self, codes: np.ndarray, generation: int) -> None:
        self.codes = codes
        self.any_fail = bool(codes.any())
        self.generation = generation


# The mask builders below evaluate over `rows` = every row from 0 to the snapshot's high-water
# mark, so a row number is also its position in the mask.


def _requirement_mask(snapshot: Any, rows: np.ndarray, req: NodeSelectorRequirement) -> np.ndarray:
    column = snapshot.labels.get(req.key)
    if column is None:
        # no node carries the key: every row sees the label as absent
        return np.full(rows.size, req.matches_value(None), dtype=bool)
    return np.asarray(column.mask(rows, (NAME, req), req.matches_value))


def _field_mask(snapshot: Any, rows: np.ndarray, req: NodeSelectorRequirement) -> np.ndarray:
    """A matchFields requirement: on `metadata.name`, the only node field the API allows."""
    named = np.zeros(rows.size, dtype=bool)
    for value in req.values:
        row = snapshot.row_of.get(value)
        if row is not None:
            named[row] = True
    return named if req.operator == IN else ~named


def _term_mask(snapshot: Any, rows: np.ndarray, term: NodeSelectorTerm) -> np.ndarray:
    if not term.match_expressions and not term.match_fields:
        # an empty term matches no node
        return np.zeros(rows.size, dtype=bool)
    mask = np.ones(rows.size, dtype=bool)
    for req in term.match_expressions:
        mask &= _requirement_mask(snapshot, rows, req)
    for req in term.match_fields:
        mask &= _field_mask(snapshot, rows, req)
    return mask


def _selector_mask(snapshot: Any, rows: np.ndarray, selector: NodeSelector) -> np.ndarray:
    mask = np.zeros(rows.size, dtype=bool)
    for term in selector.terms:
        mask |= _term_mask(snapshot, rows, term)
    return mask


def _node_selector_mask(
    snapshot: Any, rows: np.ndarray, node_selector: Sequence[tuple[str, str]]
) -> np.ndarray:
    mask = np.ones(rows.size, dtype=bool)
    for key, value in node_selector:
        column = snapshot.labels.get(key)
        code = None if column is None else column.code_of.get(value)
        if code is None:
            return np.zeros(rows.size, dtype=bool)
        mask &= column.codes[: rows.size] == code
    return mask


def _weights(snapshot: Any, rows: np.ndarray, terms: Sequence[PreferredSchedulingTerm]) -> np.ndarray:
    total = np.zeros(rows.size, dtype=np.int64)
    for term in terms:
        total += _term_mask(snapshot, rows, term.preference) * np.int64(term.weight)
    return total


def default_normalize(scores: np.ndarray) -> np.ndarray:
    """kube-scheduler's DefaultNormalizeScore (not reversed): scaled so the best node gets 100;
    all zero stays zero."""
    if scores.size == 0:
        return scores
    top = int(scores.max())
    if top == 0:
        return scores
    if top <= _TABLE_LIMIT:
        # sums of a few weights take few values: one lookup per node instead of two passes
        return (np.arange(top + 1, dtype=np.int64) * MAX_NODE_SCORE // top).take(scores)
    return scores * MAX_NODE_SCORE // top


class NodeAffinity(
    Plugin, PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions, QueueingHints
):
    NAME = NAME
    Args = NodeAffinityArgs

    def __init__(self, handle: Handle, args: PluginArgs | None = None) -> None:
        super().__init__(handle, args)
        added = args.added_affinity if isinstance(args, NodeAffinityArgs) else None
        self._added_required, self._added_preferred = parse_node_affinity(added, "addedAffinity")
        self._statuses = [SUCCESS, unresolvable(ERR_REASON_ENFORCED), unresolvable(ERR_REASON_POD)]
        self._verdicts = _GenerationCache()
        self._score_weights = _GenerationCache()

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # a new node, or a label change on one, can make the selector match
        return (NODE_ADD, NODE_UPDATE)

    # ----------------------------------------------------------------------------- queueing hints
    def queueing_hints(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(NODE_ADD, self.after_node_change),
            ClusterEventWithHint(NODE_UPDATE, self.after_node_change),
        )

    def hint_shape(self, pod: Pod) -> Hashable:
        return tuple(sorted(pod.node_selector.items())), pod.required_node_affinity

    def _matches(self, pod: Pod, node: Any) -> bool:
        labels = node.labels
        if self._added_required is not None and not self._added_required.matches(labels, node.name):
            return False
        for key, value in pod.node_selector.items():
            if labels.get(key) != value:
                return False
        required = pod.required_node_affinity
        return required is None or required.matches(labels, node.name)

    def after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler's isSchedulableAfterNodeChange: a node that now matches the pod (and
        the enforced affinity), and did not before."""
        if new is None or not self._matches(pod, new):
            return QueueingHint.QUEUE_SKIP
        if old is not None and self._matches(pod, old):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE

    # ----------------------------------------------------------------------------- filter
    def _verdict(self, pod: Pod) -> _Verdict:
        snapshot = self.handle.snapshot
        selector_items = tuple(sorted(pod.node_selector.items()))
        key = (selector_items, pod.required_node_affinity)
        verdict: _Verdict | None = self._verdicts.get(snapshot, key)
        if verdict is not None:
            return verdict
        rows = np.arange(snapshot.high_water, dtype=np.int64)
        matched = _node_selector_mask(snapshot, rows, selector_items)
        if pod.required_node_affinity is not None:
            matched &= _selector_mask(snapshot, rows, pod.required_node_affinity)
        codes = np.where(matched, np.int8(_PASS), np.int8(_POD)).astype(np.int8)
        # the enforced affinity is checked first, so its reason wins on nodes failing both
        enforced = self._enforced_mask(snapshot, rows)
        if enforced is not None:
            codes[~enforced] = _ENFORCED
        verdict = _Verdict(codes, snapshot.node_generation)
        self._verdicts.put(key, verdict)
        return verdict

    def _enforced_mask(self, snapshot: Any, rows: np.ndarray) -> np.ndarray | None:
        if self._added_required is None:
            return None
        mask: np.ndarray | None = self._verdicts.get(snapshot, _ENFORCED_KEY)
        if mask is None:
            mask = _selector_mask(snapshot, rows, self._added_required)
            self._verdicts.put(_ENFORCED_KEY, mask)
        return mask

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status | None]:
        required = pod.required_node_affinity
        if required is None and self._added_required is None and not pod.node_selector:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, self._verdict(pod))
        if required is None:
            return None, None
        # When every term pins node names, only those nodes can match (kube-scheduler narrows the
        # node list the same way): names within a term intersect, across terms they unite.
        names: frozenset[str] | None = None
        for term in required.terms:
            term_names: frozenset[str] | None = None
            for req in term.match_fields:
                if req.key == NODE_NAME_FIELD and req.operator == IN:
                    values = frozenset(req.values)
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None, None
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return None, unresolvable(ERR_REASON_CONFLICT)
        return (PreFilterResult(names) if names else None), None

    def filter(self, state: CycleState, pod: Pod, rows: np.ndarray) -> FilterResult | None:
        verdict: _Verdict | None = state.read(_PRE_FILTER_KEY)
        if verdict is None or verdict.generation != self.handle.snapshot.node_generation:
            verdict = self._verdict(pod)
        if not verdict.any_fail:
            return None
        codes = verdict.codes[rows]
        passed = codes == _PASS
        if np.count_nonzero(passed) == passed.size:
            return None
        return FilterResult(passed, self._statuses, codes)

    # ----------------------------------------------------------------------------- score
    def _score_weights_of(self, pod: Pod) -> np.ndarray:
        snapshot = self.handle.snapshot
        key = pod.preferred_node_affinity
        weights: np.ndarray | None = self._score_weights.get(snapshot, key)
        if weights is None:
            rows = np.arange(snapshot.high_water, dtype=np.int64)
            weights = _weights(snapshot, rows, (*self._added_preferred, *pod.preferred_node_affinity))
            self._score_weights.put(key, weights)
        return weights

    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        if not pod.preferred_node_affinity and not self._added_preferred:
            return SKIP
        state.write(_PRE_SCORE_KEY, (self.handle.snapshot.node_generation, self._score_weights_of(pod)))
        return None

    def score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        cached: tuple[int, np.ndarray] | None = state.read(_PRE_SCORE_KEY)
        if cached is None or cached[0] != self.handle.snapshot.node_generation:
            weights = self._score_weights_of(pod)
        else:
            weights = cached[1]
        chosen: np.ndarray = weights[rows]
        return chosen

    def normalize_score(
        self, state: CycleState, pod: Pod, rows: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        return default_normalize(scores)
