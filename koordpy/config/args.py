"""The base every plugin's args model shares: camelCase keys as in YAML, unknown keys rejected,
field defaults are the defaults."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class PluginArgs(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )
