"""Reading a scenario's input: files, directories of them and standard input, as YAML documents
the way the API server reads manifests; errors that locate a problem in them.

Input errors name the file, the document and the field, because the person reading them has only
the manifests to go back to.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from koordpy.yamlinput import parsers as yaml_parsers
from koordpy.yamlinput.bounds import DOCUMENT_START, MAX_DEPTH, Overrun, find_overrun, surely_bounded
from koordpy.yamlinput.parsers import YamlParser

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
CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "Namespace",
        "PriorityClass",
        "ClusterNetworkTopology",
        "StorageClass",
        "PersistentVolume",
        "CSINode",
        "CSIDriver",
        "VolumeAttachment",
    }
)

MIB = 1024 * 1024
# All files of a scenario together. A scenario of a quarter of a million objects is well under it;
# beyond it, the parsed objects alone would take several gigabytes.
MAX_INPUT_BYTES = 256 * MIB

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


def _yaml_error(label: str, document: int, err: yaml.YAMLError) -> ScenarioError:
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        problem = err.problem or "invalid YAML"
        if err.context:
            context_line = f" at line {err.context_mark.line + 1}" if err.context_mark is not None else ""
            problem = f"{problem} ({err.context}{context_line})"
        return ScenarioError(label, document, "", problem, line=mark.line + 1, column=mark.column + 1)
    return ScenarioError(label, document, "", "invalid YAML: " + " ".join(str(err).split()))


def _too_many_documents(label: str, document: int | None, budget: _Budget) -> ScenarioError:
    return ScenarioError(
        label,
        document,
        "",
        f"the input holds more than {budget.max_documents} documents, twice the objects a scenario "
        "may hold (raise the limit with --max-objects)",
    )


def _overrun_error(label: str, overrun: Overrun, budget: _Budget) -> ScenarioError:
    if overrun.too_many_documents:
        return _too_many_documents(label, overrun.document, budget)
    return ScenarioError(
        label,
        overrun.document,
        overrun.field,
        overrun.message,
        kind=overrun.kind,
        name=display_name(overrun.kind, overrun.namespace, overrun.name),
        line=overrun.line,
        column=overrun.column,
    )


def _check_bounds(label: str, text: str, budget: _Budget) -> YamlParser:
    """Raises ScenarioError where `text` goes beyond a bound; returns the parser to compose it with."""
    # Empty documents cost as much to read as others: a text of nothing but `---` lines must stop
    # at the limit too, and before the checks below that go through the documents one by one.
    if text.count("\n---") >= budget.documents_left:
        starts = itertools.islice(DOCUMENT_START.finditer(text), budget.documents_left)
        if sum(1 for _ in starts) >= budget.documents_left:
            raise _too_many_documents(label, None, budget)
    parser = yaml_parsers.preferred()
    if surely_bounded(text):
        return parser
    overrun, parser = find_overrun(text, budget.documents_left, parser)
    if overrun is not None:
        raise _overrun_error(label, overrun, budget)
    return parser


def _documents(label: str, text: str, budget: _Budget) -> Iterator[tuple[int, Any]]:
    parser = _check_bounds(label, text, budget)
    index = 0
    stream = yaml.load_all(text, Loader=parser.manifests)
    while True:
        try:
            doc = next(stream)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            if not yaml_parsers.hit_parser_limit(parser, err):
                raise _yaml_error(label, index + 1, err) from err
            # libyaml's limit set below koordpy's by the embedding program: the bounds above held,
            # so PyYAML's parser reads the rest, from where libyaml stopped
            parser = yaml_parsers.PURE
            stream = yaml.load_all(text, Loader=parser.manifests)
            for _ in range(index):
                next(stream)
            continue
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
