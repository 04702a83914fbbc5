"""Where each operator's handlers find their controller: the operator's memo, under a key of the
controller's own."""

from __future__ import annotations

from collections.abc import Mapping
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
