"""Storage objects with any JSON value in any field: the input is refused with a located error, or
it runs; never an internal error."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordpy.config.models import default_configuration
from koordpy.simulate.loader import ScenarioError, load_scenario
from koordpy.simulate.runner import simulate
from tests.simulate.storage_builders import (
    WFFC,
    capacity,
    claim,
    csi_driver,
    csi_node,
    node,
    pod_with_claims,
    pod_with_ephemeral,
    stateful_set,
    storage_class,
    volume,
    write,
)

VALUES: list[Any] = [None, True, 7, 2**70, 1.5, "x", "", [], ["x"], {}, {"x": 1}]


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _leaves(value, (*path, i))
    if path and path[0] not in ("apiVersion", "kind"):
        yield path


def _replaced(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    target: Any = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


BASES = {
    "StorageClass": storage_class("fast", "csi.example.com", WFFC, allowed={"zone": ["a"]}, default=True),
    "PersistentVolume": volume("pv-1", "10Gi", "fast", node="node-1", claim=("default", "data")),
    "PersistentVolumeClaim": claim("data", "5Gi", "fast"),
    "CSINode": csi_node("node-1", "csi.example.com", ["zone"]),
    "CSIDriver": csi_driver("csi.example.com", storage_capacity=True),
    "CSIStorageCapacity": capacity("cap", "fast", "100Gi", {"zone": "a"}),
    "StatefulSet": stateful_set("db", 1, "data", "5Gi", "fast"),
    "Pod": pod_with_ephemeral("web", "scratch", "1Gi", "fast"),
}
OTHERS = [node("node-1", zone="a"), pod_with_claims("app", "data")]


@pytest.mark.parametrize("kind", list(BASES))
def test_any_value_in_any_field_is_refused_or_runs(tmp_path: Path, kind: str) -> None:
    base = BASES[kind]
    context = [BASES[k] for k in BASES if k not in (kind, "StatefulSet", "Pod")]
    seen = 0
    for path in _leaves(base):
        for value in VALUES:
            obj = _replaced(base, path, value)
            file = write(tmp_path / "input.yaml", [*OTHERS, *context, obj])
            try:
                scenario = load_scenario([str(file)])
            except ScenarioError:
                continue
            simulate(scenario, default_configuration(), max_virtual_seconds=60)
            seen += 1
    assert seen > 0
