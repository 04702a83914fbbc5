"""Scheduler plugins, one module (or package) each. The registry finds them by their `NAME`."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from koordpy.framework.interfaces import Plugin


@cache
def registry() -> dict[str, type[Plugin]]:
    found: dict[str, type[Plugin]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, Plugin)
                and obj.NAME
                and (obj.__module__ == module.__name__ or obj.__module__.startswith(module.__name__ + "."))
            ):
                if obj.NAME in found and found[obj.NAME] is not obj:
                    raise RuntimeError(f"two plugins are named {obj.NAME}")
                found[obj.NAME] = obj
    return dict(sorted(found.items()))
