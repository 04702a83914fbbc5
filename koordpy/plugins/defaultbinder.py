"""DefaultBinder: binds through the `pods/binding` subresource. The call itself is the world's
job (the core emits a Bind decision); the plugin marks that this profile binds the default way."""

from __future__ import annotations

from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.interfaces import BindPlugin, Plugin
from koordpy.framework.status import Status

NAME = names.DEFAULT_BINDER


class DefaultBinder(Plugin, BindPlugin):
    NAME = NAME

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None
