"""Reading a scenario's input: files, directories of them and standard input, as YAML documents
the way the API server reads manifests; errors that locate a problem in them.

Input errors name the file, the document and the field, because the person reading them has only
the manifests to go back to.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

__all__ = [
    "CLUSTER_SCOPED",
    "DEFAULT_NAMESPACE",
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "STDIN",
    "STDIN_LABEL",
    "ScenarioError",
    "Source",
    "check_yaml_file",
    "display_name",
    "read_documents",
]

STDIN = "-"
# How standard input is named in error messages; "-" alone reads badly in a sentence.
STDIN_LABEL = "<stdin>"
YAML_SUFFIXES = (".yaml", ".yml")
DEFAULT_NAMESPACE = "default"
CLUSTER_SCOPED = frozenset({"Node", "Namespace", "PriorityClass", "ClusterNetworkTopology"})

MIB = 1024 * 1024
# All files of a scenario together. A scenario of a quarter of a million objects is well under it;
# beyond it, the parsed objects alone would take several gigabytes.
MAX_INPUT_BYTES = 256 * MIB
# Collections nested in one another, aliases expanded. Manifests nest a dozen levels; the bound keeps
# every recursive walk of a document (the YAML composer, copy.deepcopy, the JSON encoders) far from
# the C stack and from Python's recursion limit.
MAX_DEPTH = 200

# Characters that stand for a line break in a message; escaped so that an error stays one line.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def display_name(kind: str, namespace: str, name: str) -> str:
    """An object's name in messages: `namespace/name` for namespaced kinds, defaulting the namespace."""
    if not name or kind in CLUSTER_SCOPED:
        return name
    return f"{namespace or DEFAULT_NAMESPACE}/{name}"


class ScenarioError(ValueError):
    """Invalid input, located as precisely as is known: file, document, object, field."""

    def __init__(
        self,
        file: str,
        document: int | None,
        field: str,
        message: str,
        *,
        kind: str = "",
        name: str = "",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.file = file
        self.document = document
        self.field = field
        self.message = message
        self.kind = kind
        self.name = name
        self.line = line
        self.column = column
        super().__init__(self._render())

    def _render(self) -> str:
        parts: list[str] = []
        if self.file:
            parts.append(self.file)
        if self.document is not None:
            what = " ".join(p for p in (self.kind, self.name) if p)
            parts.append(f"document {self.document} ({what})" if what else f"document {self.document}")
        if self.line is not None:
            column = f", column {self.column}" if self.column is not None else ""
            parts.append(f"line {self.line}{column}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        # names and values come from the input and may hold line breaks; a message is one line
        return ": ".join(parts).translate(_LINE_BREAKS)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments do not survive the default pickling of exceptions.
        return (
            _rebuild_error,
            (
                self.file,
                self.document,
                self.field,
                self.message,
                self.kind,
                self.name,
                self.line,
                self.column,
            ),
        )


def _rebuild_error(
    file: str,
    document: int | None,
    field: str,
    message: str,
    kind: str,
    name: str,
    line: int | None,
    column: int | None,
) -> ScenarioError:
    return ScenarioError(file, document, field, message, kind=kind, name=name, line=line, column=column)


@dataclass(frozen=True, slots=True)
class Source:
    """Where an object came from, for error messages."""

    file: str
    document: int  # 1-based, counting empty documents too, as a person counts `---` separators


def describe(source: Source) -> str:
    return f"{source.file} document {source.document}"


try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


class _ManifestLoader(_BaseLoader):
    """Safe YAML as the API server reads it: timestamps stay strings (they are strings in the API's
    JSON), and a key given twice in one mapping is an error rather than a silent overwrite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            # a mapping's tag on another node (`!!set [a]`): the base class words the error
            return super().construct_mapping(node, deep=deep)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = key_node.value
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # A value its tag cannot hold (an integer of thousands of digits, `!!timestamp tomorrow`)
        # fails in Python's own conversions, outside PyYAML's errors: located like a YAML error.
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, AttributeError, OverflowError, KeyError, IndexError) as err:
            tag = str(node.tag).rsplit(":", 1)[-1]
            # Python refuses to convert integers of more than 4300 digits
            too_long = tag == "int" and "digits" in str(err)
            problem = (
                f"integer of {len(str(node.value))} characters is too large"
                if too_long
                else f"not a valid {tag}"
            )
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


def _yaml_error(label: str, document: int, err: yaml.YAMLError) -> ScenarioError:
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        problem = err.problem or "invalid YAML"
        if err.context:
            context_line = f" at line {err.context_mark.line + 1}" if err.context_mark is not None else ""
            problem = f"{problem} ({err.context}{context_line})"
        return ScenarioError(label, document, "", problem, line=mark.line + 1, column=mark.column + 1)
    return ScenarioError(label, document, "", "invalid YAML: " + " ".join(str(err).split()))


# --- bounds on what a document may expand to ------------------------------------------------------
#
# The YAML composer recurses once per nesting level (in C with libyaml: a deep enough document
# overflows the C stack), and every later walk of a document recurses too. Aliases are resolved by
# reference, so a few lines of anchors can stand for billions of nodes (the "billion laughs"), which
# any copy or serialisation then expands. Both are bounded before a document is composed, from the
# parser's events: the parser itself keeps its state in explicit stacks. Most inputs are shown safe
# from the text alone, which costs a small fraction of reading the events.

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
_DOCUMENT_START = re.compile(r"\n---(?=[ \t\n]|\Z)")
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


def _surely_bounded(text: str, max_depth: int = MAX_DEPTH) -> bool:
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
    bounds = [0, *(m.start() for m in _DOCUMENT_START.finditer(body)), len(body)]
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


def _find_violation(text: str, max_documents: int) -> _Violation | None:
    """The first event that nests too deep, expands too many aliases, aliases its own ancestor or
    starts one document too many; None when there is none before the end or before a syntax error
    (reading the documents reports that one, at the same place)."""
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
    events: Iterator[Any] = yaml.parse(text, Loader=_BaseLoader)
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
    except yaml.YAMLError:
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


def _locate(label: str, text: str, violation: _Violation) -> ScenarioError:
    """The error for a violation, naming the object and the field path it is at: the events are
    read again up to it, keeping the path of the current node and the identity fields seen so far."""
    # per open collection: is a mapping, expects a key next, the last key, the next index, segment
    frames: list[list[Any]] = []
    # identity fields by the path of the object they belong to: () or ("items", "[i]")
    identity: dict[tuple[str, ...], dict[str, str]] = {}
    segments: list[str] = []
    try:
        for ordinal, event in enumerate(yaml.parse(text, Loader=_BaseLoader)):
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
    kind = found.get("kind", "")
    return ScenarioError(
        label,
        violation.document,
        _render_path(segments),
        violation.message,
        kind=kind,
        name=display_name(kind, found.get("namespace", ""), found.get("name", "")),
        line=violation.line,
        column=violation.column,
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


def _too_many_documents(label: str, document: int | None, budget: _Budget) -> ScenarioError:
    return ScenarioError(
        label,
        document,
        "",
        f"the input holds more than {budget.max_documents} documents, twice the objects a scenario "
        "may hold (raise the limit with --max-objects)",
    )


def _check_bounds(label: str, text: str, budget: _Budget) -> None:
    # Empty documents cost as much to read as others: a text of nothing but `---` lines must stop
    # at the limit too, and before the checks below that go through the documents one by one.
    if text.count("\n---") >= budget.documents_left:
        starts = itertools.islice(_DOCUMENT_START.finditer(text), budget.documents_left)
        if sum(1 for _ in starts) >= budget.documents_left:
            raise _too_many_documents(label, None, budget)
    if _surely_bounded(text):
        return
    violation = _find_violation(text, budget.documents_left)
    if violation is None:
        return
    if violation.message == _DOCUMENTS_MESSAGE:
        raise _too_many_documents(label, violation.document, budget)
    raise _locate(label, text, violation)


def _documents(label: str, text: str, budget: _Budget) -> Iterator[tuple[int, Any]]:
    _check_bounds(label, text, budget)
    index = 0
    stream = yaml.load_all(text, Loader=_ManifestLoader)
    while True:
        try:
            doc = next(stream)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            raise _yaml_error(label, index + 1, err) from err
        except (ValueError, TypeError, AttributeError, OverflowError, KeyError, IndexError) as err:
            # what a tag makes of a node that does not suit it, beyond construct_object's reach
            problem = " ".join(str(err).split())[:200]
            raise ScenarioError(label, index + 1, "", f"invalid YAML: {problem}") from err
        index += 1
        budget.count_document(label, index)
        yield index, doc


# --- reading files ----------------------------------------------------------------------------------


class _Budget:
    """What is left of MAX_INPUT_BYTES and of the documents for the files not read yet."""

    def __init__(self, max_documents: int) -> None:
        self.left = MAX_INPUT_BYTES
        self.max_documents = max_documents
        self.documents_left = max_documents

    def count_document(self, label: str, document: int) -> None:
        if self.documents_left <= 0:
            raise _too_many_documents(label, document, self)
        self.documents_left -= 1

    def take(self, label: str, size: int) -> None:
        if size > self.left:
            total = "" if self.left == MAX_INPUT_BYTES else " with the files before it"
            raise ScenarioError(
                label,
                None,
                "",
                f"the input is larger than {MAX_INPUT_BYTES // MIB} MiB{total}, the most a scenario may hold",
            )
        self.left -= size


def _read_inputs(paths: Sequence[str], stdin: TextIO | None, budget: _Budget) -> Iterator[tuple[str, str]]:
    """(label for messages, text) for each file the paths name, in order."""
    for path in paths:
        if path == STDIN:
            yield STDIN_LABEL, _read_stream(stdin if stdin is not None else sys.stdin, budget)
        elif os.path.isdir(path):
            names = sorted(
                n
                for n in os.listdir(path)
                if n.endswith(YAML_SUFFIXES) and os.path.isfile(os.path.join(path, n))
            )
            if not names:
                raise ScenarioError(path, None, "", "the directory holds no *.yaml or *.yml files")
            for name in names:
                file = os.path.join(path, name)
                yield file, _read_text(file, budget)
        else:
            yield path, _read_text(path, budget)


def _decode(label: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(label, None, "", f"not UTF-8 text: {err.reason} at byte {err.start}") from err
    # as text-mode reading would: universal newlines
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _read_stream(stream: TextIO, budget: _Budget) -> str:
    buffer = getattr(stream, "buffer", None)
    try:
        if buffer is not None:
            data = buffer.read(budget.left + 1)
            budget.take(STDIN_LABEL, len(data))
            return _decode(STDIN_LABEL, data)
        text = stream.read(budget.left + 1)
    except OSError as err:
        raise ScenarioError(STDIN_LABEL, None, "", err.strerror or str(err)) from err
    except UnicodeDecodeError as err:
        raise ScenarioError(STDIN_LABEL, None, "", f"not UTF-8 text: {err.reason}") from err
    budget.take(STDIN_LABEL, len(text))
    return text


def _read_text(path: str, budget: _Budget) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(budget.left + 1)
    except FileNotFoundError as err:
        raise ScenarioError(path, None, "", "no such file or directory") from err
    except OSError as err:
        raise ScenarioError(path, None, "", err.strerror or str(err)) from err
    budget.take(path, len(data))
    return _decode(path, data)


def check_yaml_file(path: str) -> None:
    """Raises ScenarioError when the YAML file at `path` nests deeper than MAX_DEPTH or expands too
    many aliases, for readers of other files (the scheduler configuration) that compose and walk
    what they read; a file that cannot be read is left for its reader to report."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_INPUT_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return
    _check_bounds(path, text, _Budget(max_documents=MAX_INPUT_BYTES))


def read_documents(
    paths: Sequence[str], stdin: TextIO | None, max_documents: int = 500_000
) -> Iterator[tuple[Source, Any]]:
    """Every non-empty document the paths hold, in order, with where it came from; at most
    `max_documents` documents in all, empty ones included."""
    budget = _Budget(max_documents)
    for label, text in _read_inputs(paths, stdin, budget):
        for document, doc in _documents(label, text, budget):
            if doc is not None:
                yield Source(label, document), doc
