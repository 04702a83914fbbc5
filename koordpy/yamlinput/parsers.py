"""The two YAML parsers manifests can be read with: libyaml's, when PyYAML was built with it, and
PyYAML's own. Both read the same documents into the same objects; only speed and the parser's own
limits differ. libyaml (0.2.6 and later, as PyYAML 6.0.4's wheels bundle it) refuses collections
nested more than its maximum (1000 by default, a process-wide setting any embedding program may
lower), and it looks ahead far enough to fire before koordpy's own, lower, bound has seen the
level it stops at. PyYAML's parser has no such limit and keeps its state in explicit stacks, so a
text libyaml refuses for nesting is read again with it: koordpy's bounds, not the parser's, decide
what is too deep, whichever PyYAML is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

__all__ = ["PARSERS", "PURE", "YamlParser", "hit_parser_limit", "preferred"]

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"


class _ManifestConstructor(SafeConstructor):
    """Safe YAML as the API server reads it: timestamps stay strings (they are strings in the API's
    JSON), and a key given twice in one mapping is an error rather than a silent overwrite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            # a mapping's tag on another node (`!!set [a]`): the base class words the error
            return super().construct_mapping(node, deep=deep)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE:
                key = key_node.value
                if key in seen:
                    raise ConstructorError(
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
            raise ConstructorError(None, None, problem, node.start_mark) from None


def _without_timestamps(resolver: type[Resolver]) -> dict[Any, list[tuple[str, Any]]]:
    return {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
        for first, resolvers in resolver.yaml_implicit_resolvers.items()
    }


class _PureManifestLoader(Reader, Scanner, Parser, Composer, _ManifestConstructor, Resolver):
    def __init__(self, stream: str | TextIO) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _ManifestConstructor.__init__(self)
        Resolver.__init__(self)


_PureManifestLoader.yaml_implicit_resolvers = _without_timestamps(Resolver)


@dataclass(frozen=True, slots=True)
class YamlParser:
    """A parser and the manifest loader on top of it."""

    name: str
    # parses events only (yaml.parse's Loader): the bounds are checked on events
    events: type[Any]
    # composes and constructs documents the way manifests are read
    manifests: type[Any]


PURE = YamlParser("pure-python", yaml.SafeLoader, _PureManifestLoader)


def _libyaml() -> YamlParser | None:
    try:
        from yaml._yaml import CParser
        from yaml.cyaml import CSafeLoader
    except ImportError:  # PyYAML built without libyaml
        return None

    class _CManifestLoader(CParser, _ManifestConstructor, Resolver):
        def __init__(self, stream: str | TextIO) -> None:
            CParser.__init__(self, stream)
            _ManifestConstructor.__init__(self)
            Resolver.__init__(self)

    _CManifestLoader.yaml_implicit_resolvers = _without_timestamps(Resolver)
    return YamlParser("libyaml", CSafeLoader, _CManifestLoader)


LIBYAML = _libyaml()
# The fastest first: the parser manifests are read with unless its own limits refuse a text.
PARSERS: tuple[YamlParser, ...] = (LIBYAML, PURE) if LIBYAML is not None else (PURE,)


def preferred() -> YamlParser:
    return PARSERS[0]


def hit_parser_limit(parser: YamlParser, err: yaml.YAMLError) -> bool:
    """Whether `err` is a parser's own nesting limit rather than a fault of the text: libyaml says
    `exceeded maximum nesting depth` (scanning flow collections, parsing block ones)."""
    return (
        parser is not PURE
        and isinstance(err, yaml.MarkedYAMLError)
        and "maximum nesting depth" in (err.problem or "")
    )
