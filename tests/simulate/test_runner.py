"""Building the simulated world: the scheduler hears of each loaded object once, as it was loaded."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from koordpy.config.models import default_configuration
from koordpy.simulate import runner
from tests.simulate.test_loader import EVERY_KIND, load


def test_objects_reach_the_scheduler_as_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = load(tmp_path, *EVERY_KIND)
    heard: list[tuple[str, str, Mapping[str, Any]]] = []
    original = runner.Scheduler.on_object

    def on_object(self: Any, kind: str, action: str, obj: Mapping[str, Any]) -> None:
        heard.append((kind, action, obj))
        original(self, kind, action, obj)

    monkeypatch.setattr(runner.Scheduler, "on_object", on_object)
    runner.build_world(scenario, default_configuration())

    loaded = [
        *(("PodGroup", pg.raw) for pg in scenario.pod_groups),
        *(("PodDisruptionBudget", pdb.raw) for pdb in scenario.pdbs),
        *(("ClusterNetworkTopology", t) for t in scenario.topologies),
    ]
    assert [(kind, action) for kind, action, _ in heard] == [(kind, "Add") for kind, _ in loaded]
    # the very objects the loader read, not copies rebuilt from the parsed views
    assert all(obj is raw for (_, _, obj), (_, raw) in zip(heard, loaded, strict=True))
