"""The base every plugin's args model shares: camelCase keys as in YAML, unknown keys rejected,
field defaults are the defaults, every number held to what its Go field holds (config.numbers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from koordpy.config.numbers import GoNumbers


class PluginArgs(GoNumbers):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    # fields (by their YAML key) read so that the reference scheduler's files load, that koordpy
    # does not act on, with what it does instead: a file that sets one is told so in a warning
    UNHONOURED_FIELDS: ClassVar[Mapping[str, str]] = {}

    def unhonoured_fields(self) -> list[str]:
        """The YAML keys of the fields this configuration sets that koordpy does not act on."""
        keys = []
        for name in sorted(self.model_fields_set):
            key = type(self).model_fields[name].alias or name
            if key in self.UNHONOURED_FIELDS:
                keys.append(key)
        return keys
