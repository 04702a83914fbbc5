"""Per-cycle scratch space shared by a pod's plugins (kube-scheduler's CycleState)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koordpy.framework.effects import VolumeBindings


class CycleState:
    __slots__ = ("binding_annotations", "binding_volumes", "data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        # annotations PreBind plugins want the binding to carry (Koordinator writes them onto the
        # pod in its PreBind; here they travel with the Binding, in the same API call)
        self.binding_annotations: list[tuple[str, str]] = []
        # what VolumeBinding's PreBind leaves for the world to bind before the pod (kube's
        # BindPodVolumes runs inside PreBind; here the world carries it out with the Binding)
        self.binding_volumes: VolumeBindings | None = None

    def read(self, key: str) -> Any:
        return self.data.get(key)

    def write(self, key: str, value: Any) -> None:
        self.data[key] = value

    def clone(self) -> CycleState:
        """A copy whose values can be changed without touching this one (values that know how to
        copy themselves, through a `clone()` method, are copied; the rest are shared)."""
        out = CycleState()
        for k, v in self.data.items():
            clone = getattr(v, "clone", None)
            out.data[k] = clone() if callable(clone) else v
        out.skip_filter = set(self.skip_filter)
        out.skip_score = set(self.skip_score)
        out.binding_annotations = list(self.binding_annotations)
        out.binding_volumes = self.binding_volumes
        return out
