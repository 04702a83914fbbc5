"""Reading a scenario's input: files, directories of them and standard input, as YAML documents
the way the API server reads manifests; errors that locate a problem in them.

Input errors name the file, the document and the field, because the person reading them has only
the manifests to go back to.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

__all__ = ["STDIN", "STDIN_LABEL", "ScenarioError", "Source", "read_documents"]

STDIN = "-"
# How standard input is named in error messages; "-" alone reads badly in a sentence.
STDIN_LABEL = "<stdin>"
YAML_SUFFIXES = (".yaml", ".yml")


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
        return ": ".join(parts)

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


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


def _yaml_error(label: str, err: yaml.YAMLError) -> ScenarioError:
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        problem = err.problem or "invalid YAML"
        if err.context:
            context_line = f" at line {err.context_mark.line + 1}" if err.context_mark is not None else ""
            problem = f"{problem} ({err.context}{context_line})"
        return ScenarioError(label, None, "", problem, line=mark.line + 1, column=mark.column + 1)
    return ScenarioError(label, None, "", f"invalid YAML: {err}")


def _documents(label: str, text: str) -> Iterator[tuple[int, Any]]:
    index = 0
    stream = yaml.load_all(text, Loader=_ManifestLoader)
    while True:
        try:
            doc = next(stream)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            raise _yaml_error(label, err) from err
        index += 1
        yield index, doc


def _read_inputs(paths: Sequence[str], stdin: TextIO | None) -> Iterator[tuple[str, str]]:
    """(label for messages, text) for each file the paths name, in order."""
    for path in paths:
        if path == STDIN:
            yield STDIN_LABEL, (stdin if stdin is not None else sys.stdin).read()
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
                yield file, _read_text(file)
        else:
            yield path, _read_text(path)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError as err:
        raise ScenarioError(path, None, "", "no such file or directory") from err
    except UnicodeDecodeError as err:
        raise ScenarioError(path, None, "", f"not UTF-8 text: {err.reason} at byte {err.start}") from err
    except OSError as err:
        raise ScenarioError(path, None, "", err.strerror or str(err)) from err


def read_documents(paths: Sequence[str], stdin: TextIO | None) -> Iterator[tuple[Source, Any]]:
    """Every non-empty document the paths hold, in order, with where it came from."""
    for label, text in _read_inputs(paths, stdin):
        for document, doc in _documents(label, text):
            if doc is not None:
                yield Source(label, document), doc
