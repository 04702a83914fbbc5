"""`koordpy simulate` over a manual's files, applied the way the manual applies them: one
`kubectl apply -f` after another.

A manual's story is a sequence of steps (fill the nodes with low-priority pods, then submit the
job). Each step is one simulation of everything applied so far, where the objects of the earlier
steps are what the API server holds after them: a pod the previous step bound carries its
`spec.nodeName`, a pod it preempted is gone. The files of the step itself are passed as they are."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.cli import main

MANUALS = Path(__file__).resolve().parent
WORKLOADS = frozenset({"ReplicaSet", "Deployment", "Job", "StatefulSet"})

Report = dict[str, Any]


@dataclass(frozen=True)
class Pod:
    """What a manual says of one pod: its phase, where it runs (one node, or any of several),
    and why it waits."""

    phase: str
    node: str | Collection[str] | None = None
    reason: str | None = None
    message_contains: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Group:
    """What a manual says of a PodGroup's status."""

    phase: str
    scheduled: int | None = None
    running: int | None = None


def simulate(
    capsys: pytest.CaptureFixture[str],
    files: Sequence[Path],
    *,
    config: Path | None = None,
    max_seconds: float | None = None,
) -> tuple[int, Report | None, str]:
    """Run `koordpy simulate FILES --output json`; the exit status, the report (when it ran) and
    what it wrote to stderr."""
    argv = ["simulate", *(str(f) for f in files), "--output", "json"]
    if config is not None:
        argv += ["--config", str(config)]
    if max_seconds is not None:
        argv += ["--max-virtual-seconds", str(max_seconds)]
    code = main(argv)
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


def apply_in_steps(
    capsys: pytest.CaptureFixture[str],
    workdir: Path,
    steps: Sequence[Sequence[Path]],
    *,
    config: Path | None = None,
    last_step_seconds: float | None = None,
) -> list[Report]:
    """The report after each step; the last step may be cut at `last_step_seconds` of virtual
    time, to see the cluster while it is still on its way."""
    workdir.mkdir(parents=True, exist_ok=True)
    applied: list[dict[str, Any]] = []
    reports: list[Report] = []
    for i, files in enumerate(steps):
        inputs = list(files)
        if applied:
            state = workdir / f"after-step-{i}.yaml"
            state.write_text(yaml.safe_dump_all(applied, sort_keys=False), encoding="utf-8")
            inputs.insert(0, state)
        last = i == len(steps) - 1
        code, report, err = simulate(
            capsys, inputs, config=config, max_seconds=last_step_seconds if last else None
        )
        assert code == 0 and report is not None, f"step {i + 1} did not run: {err}"
        reports.append(report)
        if not last:
            applied = _as_held_after(applied + _documents(files), report)
    return reports


def _documents(files: Sequence[Path]) -> list[dict[str, Any]]:
    docs = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]
    stamped = [d["kind"] for d in docs if d.get("kind") in WORKLOADS]
    assert not stamped, f"a workload ({stamped}) can only be applied in the last step"
    return docs


def _as_held_after(docs: list[dict[str, Any]], report: Report) -> list[dict[str, Any]]:
    outcome = {(p["namespace"], p["name"]): p for p in report["pods"]}
    held = []
    for doc in docs:
        if doc.get("kind") == "Pod":
            meta = doc["metadata"]
            pod = outcome[(meta.get("namespace", "default"), meta["name"])]
            if pod["phase"] == "Preempted":
                continue
            if pod["phase"] == "Bound":
                doc = {**doc, "spec": {**doc["spec"], "nodeName": pod["node"]}}
        held.append(doc)
    return held


def pods(report: Report) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def check_pods(report: Report, expected: Mapping[str, Pod]) -> None:
    found = pods(report)
    for name, want in expected.items():
        assert name in found, f"{name} is not in the report: {sorted(found)}"
        got = found[name]
        assert got["phase"] == want.phase, (name, got)
        if isinstance(want.node, str):
            assert got["node"] == want.node, (name, got)
        elif want.node is not None:
            assert got["node"] in want.node, (name, got)
        if want.reason is not None:
            assert got["reason"] == want.reason, (name, got)
        for text in want.message_contains:
            assert text in (got["message"] or ""), (name, text, got)


def check_groups(report: Report, expected: Mapping[str, Group]) -> None:
    found = {g["name"]: g for g in report["podGroups"]}
    for name, want in expected.items():
        assert name in found, f"PodGroup {name} is not in the report: {sorted(found)}"
        got = found[name]
        assert got["phase"] == want.phase, (name, got)
        if want.scheduled is not None:
            assert got["scheduled"] == want.scheduled, (name, got)
        if want.running is not None:
            assert got.get("running") == want.running, (name, got)


ARRIVE_AFTER = "simulation.koordpy.io/arrive-after"


def replay_timeline(
    capsys: pytest.CaptureFixture[str],
    workdir: Path,
    steps: Sequence[Sequence[Path]],
    at: Sequence[float],
    *,
    config: Path | None = None,
    max_seconds: float | None = None,
) -> Report:
    """The manual's steps as ONE timeline scenario: each object of step i arrives at `at[i]`
    virtual seconds (the `simulation.koordpy.io/arrive-after` annotation), the manual's files
    otherwise unchanged."""
    assert len(steps) == len(at)
    workdir.mkdir(parents=True, exist_ok=True)
    docs: list[dict[str, Any]] = []
    for files, seconds in zip(steps, at, strict=True):
        for f in files:
            for doc in yaml.safe_load_all(f.read_text()):
                if not doc:
                    continue
                meta = doc.setdefault("metadata", {})
                meta["annotations"] = {**(meta.get("annotations") or {}), ARRIVE_AFTER: f"{seconds:g}s"}
                docs.append(doc)
    scenario = workdir / "timeline.yaml"
    scenario.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    code, report, err = simulate(capsys, [scenario], config=config, max_seconds=max_seconds)
    assert code == 0 and report is not None, err
    return report
