"""The error raised for invalid API input."""

from __future__ import annotations


class SpecError(ValueError):
    """An invalid field in an API object; `path` names the field the way kubectl would
    (`spec.affinity.nodeAffinity...`), `message` says what is wrong with it."""

    path: str
    message: str

    def __init__(self, path: str, message: str) -> None:
        # Both go into args so that the error survives pickling (process pools, multiprocessing).
        super().__init__(path, message)
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def join_path(path: str, child: str) -> str:
    """`path.child`, or just `child` at the root; `child` may start with an index like `[0]`."""
    if not path:
        return child
    if child.startswith("["):
        return path + child
    return f"{path}.{child}"
