"""Bounds on what a YAML document may expand to, checked before it is composed.

The YAML composer recurses once per nesting level (in C with libyaml: a deep enough document
overflows the C stack), and every later walk of a document recurses too. Aliases are resolved by
reference, so a few lines of anchors can stand for billions of nodes (the "billion laughs"), which
any copy or serialisation then expands. Both are bounded before a document is composed, from the
parser's events: the parsers keep their state in explicit stacks. Most inputs are shown safe from
the text alone, which costs a small fraction of reading the events.

Which parser reads the events does not change the answer: where libyaml's own nesting limit stops
it first, the events are read again with PyYAML's parser (koordpy.yamlinput.parsers).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from koordpy.yamlinput.parsers import PURE, YamlParser, hit_parser_limit

__all__ = ["DOCUMENT_START", "MAX_DEPTH", "Overrun", "find_overrun", "surely_bounded"]

# Collections nested in one another, aliases expanded. Manifests nest a dozen levels; the bound keeps
# every recursive walk of a document (the YAML composer, copy.deepcopy, the JSON encoders) far from
# the C stack and from Python's recursion limit.
MAX_DEPTH = 200

# An alias token starts after a blank, a flow indicator or ':'; a `*` anywhere else is part of a
# scalar, a tag or a comment.
_ALIAS_TOKEN = re.compile(r"\*(?<=[\s\ufeff\[\]{},:?\-!&|>\"'#%@`]\*)")
# Line breaks libyaml knows besides \n: the text checks below find lines after \n only, and take
# blanks to be what libyaml takes them to be, space and tab.
_OTHER_LINE_BREAKS = ("\r", "\x85", "\u2028", "\u2029")
# A block collection starts at a column reached only by blanks and the indicators `- `, `? `, `: `,
# and each block collection inside another starts further right, but for a sequence that is the
# value of a mapping key. So while no line starts with N of these characters, block collections
# nest at most 2 * N deep. N is a quarter of the depth allowed, leaving half of it to flow ones.


@functools.cache
def _deep_lines(columns: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The first line, and any other, starting with `columns` such characters."""
    return re.compile(rf"[ \t?:\-]{{{columns}}}"), re.compile(rf"\n[ \t?:\-]{{{columns}}}")


# Flow collections nest within one document: at a `---` line libyaml ends the document or fails,
# whatever is open, so the brackets of one document bound how deep its flow collections go. A `[`
# counts twice: an entry `key: value` of a flow sequence is a mapping of its own, without a `{`.
DOCUMENT_START = re.compile(r"\n---(?=[ \t\n]|\Z)")
# A flow collection holding no other bracket, comment, tag or single-quoted scalar; double-quoted
# scalars only where a token starts (after `[`, `{`, `,` or a `:` indicator) and without escapes,
# so that the closing bracket can only be the collection's own.
# (Possessive: a match of these is a match of the backtracking forms, found in linear time.)
_BLANK = r"[ \t\n]"
_QUOTED = r'"[^"\\\n\[\]{}]*"'
_PLAIN = rf"[^\[\]{{}}\"'#!,:]*+(?::(?!{_BLANK}|[\"\[\]{{}},])[^\[\]{{}}\"'#!,:]*+)*+"
_NODE = rf"(?:{_BLANK}*+{_QUOTED}{_BLANK}*+|{_PLAIN})"
_ENTRY = rf"(?>{_BLANK}*+{_QUOTED}{_BLANK}*+(?::{_NODE})?|{_PLAIN}(?::{_BLANK}{_NODE})?)"
_LEAF_FLOW = re.compile(rf"\[{_ENTRY}(?:,{_ENTRY})*+\]|\{{{_ENTRY}(?:,{_ENTRY})*+\}}")
# How many times its length the stripping may read of a document before leaving it to the events.
_STRIP_WORK = 8
# What is left of a document that was one flow collection (JSON) once its collections are stripped.
_BLANK_DOCUMENT = re.compile(rf"{_BLANK}*(?:---(?={_BLANK}|\Z))?{_BLANK}*")


def _flow_levels(text: str, start: int = 0, end: int | None = None) -> int:
    """At most how deep the flow collections of `text[start:end]` can nest."""
    end = len(text) if end is None else end
    return 2 * text.count("[", start, end) + text.count("{", start, end)


def _document_is_shallow(segment: str, block_depth: int, max_depth: int) -> bool:
    """Whether one document's text nests at most `max_depth` deep, its block collections being at
    most `block_depth` deep. Each round strips the innermost flow collections, so a chain of nested
    collections loses at most one of them a round (two levels, with the mapping of a sequence
    entry): twice the rounds plus what the brackets left allow bound how deep flow collections
    nest. A document stripped to nothing was a single flow collection (JSON): it has no block
    collections at all."""
    rounds = 0
    # Each round reads what is left; JSON documents are done in less than four times their length,
    # and beyond the budget the events, read once, are cheaper.
    work_left = _STRIP_WORK * len(segment)
    while True:
        levels = 2 * rounds + _flow_levels(segment)
        if block_depth + levels <= max_depth:
            return True
        if levels == 2 * rounds:
            return levels <= max_depth and _BLANK_DOCUMENT.fullmatch(segment) is not None
        work_left -= len(segment)
        if rounds >= max_depth or work_left < 0:
            return False
        stripped = _LEAF_FLOW.sub("", segment)
        if len(stripped) == len(segment):
            return False
        segment, rounds = stripped, rounds + 1


def surely_bounded(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """True when the text alone proves that no document uses an alias and none nests deeper than
    `max_depth`; False only means that the parser's events must tell."""
    if text.startswith("*") or _ALIAS_TOKEN.search(text) is not None:
        return False
    if any(brk in text for brk in _OTHER_LINE_BREAKS):
        return False
    body = text[1:] if text.startswith("\ufeff") else text
    columns = max_depth // 4
    # without deep lines, block collections nest at most 2 * columns deep; with them, only documents
    # that are one flow collection are shown shallow here
    first_line, any_line = _deep_lines(columns)
    deep = first_line.match(body) is not None or any_line.search(body) is not None
    block_depth = max_depth + 1 if deep else 2 * columns
    if block_depth + _flow_levels(body) <= max_depth:
        return True
    bounds = [0, *(m.start() for m in DOCUMENT_START.finditer(body)), len(body)]
    for start, end in itertools.pairwise(bounds):
        if block_depth + _flow_levels(body, start, end) > max_depth and (
            not _document_is_shallow(body[start:end], block_depth, max_depth)
        ):
            return False
    return True


def _allowed_alias_ratio(nodes: int) -> float:
    """go-yaml's (and so kubectl's) share of a document's nodes that may come from aliases: 99% up
    to 400,000 nodes, falling to 10% at 4,000,000."""
    if nodes <= 400_000:
        return 0.99
    if nodes >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * (nodes - 400_000) / 3_600_000


_DEPTH_MESSAGE = f"nested more than {MAX_DEPTH} levels deep"
_ALIASING_MESSAGE = "document contains excessive aliasing"
_DOCUMENTS_MESSAGE = "too many documents"


@dataclass(frozen=True, slots=True)
class _Violation:
    document: int  # 1-based, as Source counts
    event: int  # ordinal of the offending event in the stream
    message: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Overrun:
    """A bound a text goes beyond, located: the document (1-based, empty ones counted), the line
    and column of the offending node, its field path, and the object it is in as far as known."""

    document: int
    message: str
    line: int
    column: int
    field: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    # the text starts more documents than it may: no field, the document is the first one too many
    too_many_documents: bool = False


class _ParserLimit(Exception):
    """The parser's own nesting limit stopped the events."""


def find_overrun(text: str, max_documents: int, parser: YamlParser) -> tuple[Overrun | None, YamlParser]:
    """The first bound `text` goes beyond, read with `parser`'s events (None when there is none
    before the end or before a syntax error, which reading the documents reports at the same place),
    and the parser to compose the text with: `parser`, unless its own nesting limit stopped it
    before koordpy's bounds could decide, in which case both answers come from PyYAML's parser."""
    try:
        violation = _find_violation(text, max_documents, parser)
    except _ParserLimit:
        parser = PURE
        violation = _find_violation(text, max_documents, parser)
    if violation is None:
        return None, parser
    if violation.message == _DOCUMENTS_MESSAGE:
        return Overrun(violation.document, violation.message, 0, 0, too_many_documents=True), parser
    return _locate(text, violation, parser), parser


def _find_violation(text: str, max_documents: int, parser: YamlParser) -> _Violation | None:
    """The first event that nests too deep, expands too many aliases, aliases its own ancestor or
    starts one document too many; None when there is none before the end or before a syntax error.
    Raises _ParserLimit where the parser's own nesting limit ends the events first."""
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    document = 0
    # per open collection: its anchor, the nodes it expands to, its height
    stack: list[list[Any]] = []
    anchors: dict[str, tuple[int, int]] = {}
    open_anchors: set[str] = set()
    nodes = aliased = 0
    message = ""
    ordinal = -1
    event: Any = None
    events: Iterator[Any] = yaml.parse(text, Loader=parser.events)
    try:
        for ordinal, event in enumerate(events):  # noqa: B007
            cls = event.__class__
            if cls is scalar_event:
                nodes += 1
                if stack:
                    stack[-1][1] += 1
                if event.anchor is not None:
                    anchors[event.anchor] = (1, 0)
            elif cls in starts:
                nodes += 1
                if len(stack) >= MAX_DEPTH:
                    message = _DEPTH_MESSAGE
                    break
                stack.append([event.anchor, 1, 1])
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
            elif cls in ends:
                anchor, size, height = stack.pop()
                if anchor is not None:
                    anchors[anchor] = (size, height)
                    open_anchors.discard(anchor)
                if stack:
                    parent = stack[-1]
                    parent[1] += size
                    if height + 1 > parent[2]:
                        parent[2] = height + 1
            elif cls is alias_event:
                nodes += 1
                if event.anchor in open_anchors:
                    message = f"anchor {event.anchor!r} value contains itself"
                    break
                target = anchors.get(event.anchor)
                if target is None:
                    continue  # undefined: composing the document reports it
                size, height = target
                if len(stack) + height > MAX_DEPTH:
                    message = _DEPTH_MESSAGE
                    break
                nodes += size
                aliased += size
                if stack:
                    parent = stack[-1]
                    parent[1] += size
                    if height + 1 > parent[2]:
                        parent[2] = height + 1
                if aliased > 100 and nodes > 1000 and aliased / nodes > _allowed_alias_ratio(nodes):
                    message = _ALIASING_MESSAGE
                    break
            elif cls is yaml.DocumentStartEvent:
                document += 1
                if document > max_documents:
                    message = _DOCUMENTS_MESSAGE
                    break
                anchors.clear()
                nodes = aliased = 0
    except yaml.YAMLError as err:
        if hit_parser_limit(parser, err):
            raise _ParserLimit from err
        return None
    if not message:
        return None
    mark = event.start_mark
    return _Violation(
        document, ordinal, message, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0
    )


# How many leading and trailing segments of a very deep field path a message shows.
_PATH_HEAD, _PATH_TAIL = 8, 2


def _render_path(segments: list[str]) -> str:
    if len(segments) > _PATH_HEAD + _PATH_TAIL + 1:
        hidden = len(segments) - _PATH_HEAD - _PATH_TAIL
        segments = [*segments[:_PATH_HEAD], f"<{hidden} more>", *segments[-_PATH_TAIL:]]
    path = ""
    for segment in segments:
        path = path + segment if segment.startswith("[") or not path else f"{path}.{segment}"
    return path


def _locate(text: str, violation: _Violation, parser: YamlParser) -> Overrun:
    """A violation with the object and the field path it is at: the events are read again up to
    it, keeping the path of the current node and the identity fields seen so far."""
    # per open collection: is a mapping, expects a key next, the last key, the next index, segment
    frames: list[list[Any]] = []
    # identity fields by the path of the object they belong to: () or ("items", "[i]")
    identity: dict[tuple[str, ...], dict[str, str]] = {}
    segments: list[str] = []
    try:
        for ordinal, event in enumerate(yaml.parse(text, Loader=parser.events)):
            if ordinal < violation.event and not isinstance(
                event, yaml.NodeEvent | yaml.CollectionEndEvent | yaml.DocumentStartEvent
            ):
                continue
            if isinstance(event, yaml.DocumentStartEvent):
                frames.clear()
                identity.clear()
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                frames.pop()
                continue
            assert isinstance(event, yaml.NodeEvent)
            segment: str | None = ""
            if frames:
                parent = frames[-1]
                if parent[0]:
                    if parent[1]:
                        parent[1] = False
                        value = event.value if isinstance(event, yaml.ScalarEvent) else None
                        parent[2] = value if isinstance(value, str) else "?"
                        segment = None
                    else:
                        parent[1] = True
                        segment = parent[2]
                        if isinstance(event, yaml.ScalarEvent):
                            _note_identity(identity, [f[4] for f in frames], parent[2], event.value)
                else:
                    segment = f"[{parent[3]}]"
                    parent[3] += 1
            if ordinal == violation.event:
                segments = [f[4] for f in frames[1:]]
                if frames:
                    segments.append(segment if segment is not None else frames[-1][2])
                break
            if isinstance(event, yaml.CollectionStartEvent):
                frames.append([isinstance(event, yaml.MappingStartEvent), True, "", 0, segment or ""])
    except yaml.YAMLError:
        pass
    prefix: tuple[str, ...] = ()
    is_list = identity.get((), {}).get("kind") == "List"
    if is_list and len(segments) >= 2 and segments[0] == "items" and ("items", segments[1]) in identity:
        prefix = ("items", segments[1])
    found = identity.get(prefix, {})
    return Overrun(
        violation.document,
        violation.message,
        violation.line,
        violation.column,
        field=_render_path(segments),
        kind=found.get("kind", ""),
        namespace=found.get("namespace", ""),
        name=found.get("name", ""),
    )


def _note_identity(
    identity: dict[tuple[str, ...], dict[str, str]], path: list[str], key: str, value: str
) -> None:
    """Keeps kind, metadata.name and metadata.namespace of the document and of a List's items."""
    # `path` holds the segments of the open collections, the root's first (always "")
    where = tuple(path[1:])
    if key == "kind" and (not where or (len(where) == 2 and where[0] == "items")):
        identity.setdefault(where, {})["kind"] = value
    elif key in ("name", "namespace") and where and where[-1] == "metadata":
        owner = where[:-1]
        if not owner or (len(owner) == 2 and owner[0] == "items"):
            identity.setdefault(owner, {})[key] = value

