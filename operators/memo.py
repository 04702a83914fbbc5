"""What the operators' handlers share: where each finds its controller (the operator's memo, under a
key of the controller's own), and how a custom resource's events of every API group reach it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import kopf

C = TypeVar("C")


def controller_in_memo(memo: Any, key: str, kind: type[C], what: str) -> C:
    """The controller of type `kind` under `key`; a handler without it can never succeed, so its
    absence is a permanent error rather than one kopf retries."""
    controller = memo.get(key) if isinstance(memo, Mapping) else None
    if not isinstance(controller, kind):
        raise kopf.PermanentError(f"the {what} controller is missing from the operator's memo")
    return controller


# (API group, namespace, name, the object or None once deleted, the operator's memo)
ObjectChanged = Callable[[str, str, str, "dict[str, Any] | None", Any], None]


def register_object_events(
    registry: kopf.OperatorRegistry,
    api_groups: Sequence[str],
    version: str,
    plural: str,
    id_prefix: str,
    changed: ObjectChanged,
) -> None:
    """One kopf event handler per API group of a custom resource, each telling `changed` of every
    add, update and delete."""

    async def on_event(
        resource: kopf.Resource,
        namespace: str | None,
        name: str,
        body: kopf.Body,
        type: str | None,
        memo: Any,
        **_: Any,
    ) -> None:
        # a plain copy: kopf's Body is a view, and the controller keeps the object
        changed(resource.group, namespace or "", name, None if type == "DELETED" else dict(body), memo)

    for api_group in api_groups:
        kopf.on.event(api_group, version, plural, id=f"{id_prefix}-{api_group}", registry=registry)(on_event)
