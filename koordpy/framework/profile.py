"""A profile: the plugins one `schedulerName` runs at each extension point, and the runner.

Building a profile merges the configuration with the defaults the way kube-scheduler does (a
plugin enabled at a specific extension point runs before the multiPoint ones there; `disabled`
removes, `"*"` removes every default), and validates each plugin's args with its own model so an
error names the full path (`profiles[0].pluginConfig[NodeResourcesFit].args.scoringStrategy.type`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from koordpy.api.pod import Pod
from koordpy.config.defaults import KOORDPY_DEFAULT_PLUGINS, KUBE_DEFAULT_PLUGINS
from koordpy.config.errors import ConfigError, from_validation_error
from koordpy.config.models import EXTENSION_POINT_FIELDS, PluginRef, Plugins, PluginSet
from koordpy.config.models import Profile as ProfileConfig
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    MAX_NODE_SCORE,
    ClusterEvent,
    FilterResult,
    Plugin,
    PostFilterResult,
)
from koordpy.framework.status import SUCCESS, Code, Status, error, unschedulable

Registry = Mapping[str, type[Plugin]]

# Records plugin execution time: (extension point, plugin name, status label, seconds).
DurationObserver = Callable[[str, str, str, float], None]


@dataclass(slots=True)
class ResolvedPlugins:
    """Plugin names per extension point, in run order, with score weights."""

    points: dict[str, list[str]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)


def default_plugin_refs(registry: Registry) -> list[PluginRef]:
    refs = []
    # koordpy's plugins go before DefaultPreemption: a gang's job-level preemption (Coscheduling's
    # PostFilter) must answer for gang members before pod-level preemption is tried
    at = next(i for i, (name, _) in enumerate(KUBE_DEFAULT_PLUGINS) if name == "DefaultPreemption")
    ordered = (*KUBE_DEFAULT_PLUGINS[:at], *KOORDPY_DEFAULT_PLUGINS, *KUBE_DEFAULT_PLUGINS[at:])
    for name, weight in ordered:
        if name in registry:
            refs.append(PluginRef(name=name, weight=weight or None))
    return refs


def _merge_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    disabled = {p.name for p in custom.disabled}
    enabled_custom = {p.name: p for p in custom.enabled}
    merged: list[PluginRef] = []
    if "*" not in disabled:
        for ref in default.enabled:
            if ref.name in disabled:
                continue
            # a default enabled again by the user keeps its place, with the user's weight
            merged.append(enabled_custom.pop(ref.name, ref))
    merged.extend(p for p in custom.enabled if p.name in enabled_custom)
    return PluginSet(enabled=merged, disabled=custom.disabled)


def resolve_plugins(config: Plugins | None, registry: Registry, path: str) -> ResolvedPlugins:
    defaults = Plugins(multiPoint=PluginSet(enabled=default_plugin_refs(registry)))
    custom = config or Plugins()
    merged = Plugins(
        **{
            f: _merge_set(getattr(defaults, f), getattr(custom, f))
            for f in ("multiPoint", *EXTENSION_POINT_FIELDS)
        }
    )
    for point in ("multiPoint", *EXTENSION_POINT_FIELDS):
        for i, ref in enumerate(getattr(merged, point).enabled):
            if ref.name not in registry:
                raise ConfigError(f"{path}.plugins.{point}.enabled[{i}].name", f"unknown plugin {ref.name!r}")
    out = ResolvedPlugins()
    for point in EXTENSION_POINT_FIELDS:
        specific: PluginSet = getattr(merged, point)
        disabled = {p.name for p in specific.disabled}
        names: list[str] = []
        for ref in specific.enabled:
            cls = registry[ref.name]
            if point not in cls.extension_points():
                raise ConfigError(
                    f"{path}.plugins.{point}.enabled", f"plugin {ref.name} does not implement {point}"
                )
            if ref.name not in names:
                names.append(ref.name)
                if point == "score":
                    out.weights[ref.name] = ref.weight or 1
        for ref in merged.multiPoint.enabled:
            cls = registry[ref.name]
            if point not in cls.extension_points() or "*" in disabled or ref.name in disabled:
                continue
            if ref.name in names:
                continue
            names.append(ref.name)
            if point == "score":
                out.weights[ref.name] = ref.weight or 1
        out.points[point] = names
    sorts = out.points.get("queueSort", [])
    if len(sorts) > 1 and not specific_queue_sort(merged) and "PrioritySort" in sorts:
        # koordpy's defaults carry two queue sorts; the gang-aware one orders plain pods by priority
        # and arrival just as PrioritySort does, so it wins unless the configuration names one
        sorts.remove("PrioritySort")
    if len(out.points.get("queueSort", [])) != 1:
        raise ConfigError(f"{path}.plugins.queueSort", "exactly one queueSort plugin must be enabled")
    if not out.points.get("bind"):
        raise ConfigError(f"{path}.plugins.bind", "at least one bind plugin must be enabled")
    return out


def specific_queue_sort(plugins: Plugins) -> bool:
    return bool(plugins.queueSort.enabled)


def validate_args(cls: type[Plugin], raw: Mapping[str, Any] | None, path: str) -> Any:
    if cls.Args is None:
        if raw:
            raise ConfigError(path, f"plugin {cls.NAME} takes no args")
        return None
    try:
        return cls.Args.model_validate(dict(raw or {}))
    except ValidationError as err:
        raise from_validation_error(err, path) from None


class Profile:
    def __init__(
        self,
        config: ProfileConfig,
        registry: Registry,
        handle: Handle,
        index: int = 0,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        path = f"profiles[{index}]"
        self.name = config.schedulerName
        self.handle = handle
        handle.profile = self
        self.percentage_of_nodes_to_score = (
            config.percentageOfNodesToScore
            if config.percentageOfNodesToScore is not None
            else percentage_of_nodes_to_score
        )
        resolved = resolve_plugins(config.plugins, registry, path)
        raw_args = {pc.name: pc.args for pc in config.pluginConfig}
        for pc in config.pluginConfig:
            if pc.name not in registry:
                raise ConfigError(f"{path}.pluginConfig[{pc.name}]", f"unknown plugin {pc.name!r}")
        needed = {n for names in resolved.points.values() for n in names}
        self.plugins: dict[str, Plugin] = {}
        for name in sorted(needed | set(raw_args)):
            cls = registry[name]
            args = validate_args(cls, raw_args.get(name), f"{path}.pluginConfig[{name}].args")
            self.plugins[name] = cls(handle, args)
        pts = resolved.points
        self.queue_sort = self.plugins[pts["queueSort"][0]]
        self.pre_enqueue = [self.plugins[n] for n in pts["preEnqueue"]]
        # PreEnqueue plugins that name the gated pods an event may let through
        self.gate_wakers = [p for p in self.pre_enqueue if hasattr(p, "gated_pods_to_recheck")]
        self.pre_filter = [self.plugins[n] for n in pts["preFilter"]]
        self.filter = [self.plugins[n] for n in pts["filter"]]
        self.post_filter = [self.plugins[n] for n in pts["postFilter"]]
        self.pre_score = [self.plugins[n] for n in pts["preScore"]]
        self.score = [(self.plugins[n], resolved.weights[n]) for n in pts["score"]]
        self.reserve = [self.plugins[n] for n in pts["reserve"]]
        self.permit = [self.plugins[n] for n in pts["permit"]]
        self.pre_bind = [self.plugins[n] for n in pts["preBind"]]
        self.bind = [self.plugins[n] for n in pts["bind"]]
        self.post_bind = [self.plugins[n] for n in pts["postBind"]]
        self.resolved = resolved
        # a plugin that places groups of pods as a unit (gang scheduling), when one is enabled
        self.batcher: Plugin | None = next((p for p in self.permit if hasattr(p, "batch_members")), None)
        self.observe: DurationObserver | None = None
        # the events that can make a pod rejected by each plugin schedulable again
        self.events: dict[str, tuple[ClusterEvent, ...]] = {
            name: tuple(p.events_to_register()) for name, p in self.plugins.items()
        }

    def plugin(self, name: str) -> Plugin | None:
        return self.plugins.get(name)

    # --------------------------------------------------------------------------- queue side
    def run_pre_enqueue(self, pod: Pod) -> Status | None:
        for p in self.pre_enqueue:
            st = p.pre_enqueue(pod)  # type: ignore[attr-defined]
            if st is not None and not st.is_success:
                return st.with_plugin(p.NAME)
        return None

    # --------------------------------------------------------------------------- scheduling cycle
    def run_pre_filter(self, state: CycleState, pod: Pod) -> tuple[frozenset[str] | None, Status | None]:
        allowed: frozenset[str] | None = None
        for p in self.pre_filter:
            t0 = time.perf_counter() if self.observe else 0.0
            result, st = p.pre_filter(state, pod)  # type: ignore[attr-defined]
            if self.observe:
                self.observe("PreFilter", p.NAME, (st or SUCCESS).code.label, time.perf_counter() - t0)
            if st is not None:
                if st.code == Code.SKIP:
                    state.skip_filter.add(p.NAME)
                    continue
                if not st.is_success:
                    return None, st.with_plugin(p.NAME)
            if result is not None and result.node_names is not None:
                allowed = result.node_names if allowed is None else allowed & result.node_names
                if not allowed:
                    return allowed, Status(
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                        ("node(s) didn't satisfy plugin(s) [" + p.NAME + "] simultaneously",),
                        p.NAME,
                    )
        return allowed, None

    def pre_filter_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        for p in self.pre_filter:
            hook = getattr(p, "pre_filter_add_pod", None)
            if hook is not None and p.NAME not in state.skip_filter:
                hook(state, pod, other, row)

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        for p in self.pre_filter:
            hook = getattr(p, "pre_filter_remove_pod", None)
            if hook is not None and p.NAME not in state.skip_filter:
                hook(state, pod, other, row)

    def run_filter(
        self, state: CycleState, pod: Pod, rows: np.ndarray, diagnosis: Diagnosis | None
    ) -> np.ndarray:
        """The rows that pass every filter; failures are recorded in `diagnosis`. Plugins run in
        order over the rows still alive, so a node's recorded status is its first failure."""
        alive = rows
        for p in self.filter:
            if alive.size == 0:
                break
            if p.NAME in state.skip_filter:
                continue
            t0 = time.perf_counter() if self.observe else 0.0
            result: FilterResult | None = p.filter(state, pod, alive)  # type: ignore[attr-defined]
            if self.observe:
                self.observe(
                    "Filter",
                    p.NAME,
                    "Success" if result is None else "Unschedulable",
                    time.perf_counter() - t0,
                )
            if result is None:
                continue
            if diagnosis is not None:
                diagnosis.record(alive, result, p.NAME)
            alive = alive[result.passed]
        return alive

    def run_filter_with_nominated(
        self,
        state: CycleState,
        pod: Pod,
        rows: np.ndarray,
        diagnosis: Diagnosis | None,
        ignore: Callable[[Pod], bool] | None = None,
    ) -> np.ndarray:
        """Filter, then re-check the surviving nodes that have nominated pods of equal or higher
        priority with those pods added: a node is feasible only if it passes both ways."""
        feasible = self.run_filter(state, pod, rows, diagnosis)
        nominator = self.handle.nominator
        if not nominator or feasible.size == 0:
            return feasible
        snap = self.handle.snapshot
        keep = np.ones(feasible.size, dtype=bool)
        row_pos = {int(r): i for i, r in enumerate(feasible.tolist())}
        for node_name in nominator.nodes():
            row = snap.row_of.get(node_name)
            if row is None or row not in row_pos:
                continue
            others = [
                o
                for o in nominator.pods_on(node_name)
                if o.key != pod.key and o.priority >= pod.priority and not (ignore and ignore(o))
            ]
            if not others:
                continue
            st = self.filter_one_with_pods(state, pod, row, others)
            if st is not None:
                keep[row_pos[row]] = False
                if diagnosis is not None:
                    diagnosis.record_node(row, st)
        return feasible[keep]

    def filter_one_with_pods(
        self, state: CycleState, pod: Pod, row: int, added: Sequence[Pod]
    ) -> Status | None:
        """Run every filter for one node as if `added` pods were on it; None when it passes."""
        snap = self.handle.snapshot
        trial = state.clone()
        placed = []
        try:
            for other in added:
                if snap.info(row).pods.get(other.key) is None:
                    snap.add_pod(other, row)
                    placed.append(other)
                    self.pre_filter_add_pod(trial, pod, other, row)
            return self.filter_one(trial, pod, row)
        finally:
            for other in placed:
                snap.remove_pod(other, row)

    def filter_one(self, state: CycleState, pod: Pod, row: int) -> Status | None:
        one = np.array([row], dtype=np.int64)
        for p in self.filter:
            if p.NAME in state.skip_filter:
                continue
            result = p.filter(state, pod, one)  # type: ignore[attr-defined]
            if result is not None and not result.passed[0]:
                return result.status_at(0).with_plugin(p.NAME)
        return None

    def run_post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult:
        last = PostFilterResult(None, unschedulable())
        for p in self.post_filter:
            t0 = time.perf_counter() if self.observe else 0.0
            res: PostFilterResult = p.post_filter(state, pod, diagnosis)  # type: ignore[attr-defined]
            if self.observe:
                self.observe("PostFilter", p.NAME, res.status.code.label, time.perf_counter() - t0)
            if res.status.is_success:
                return res
            if res.status.code == Code.ERROR:
                return res
            if res.status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return res
            last = res
        return last

    def run_pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status | None:
        for p in self.pre_score:
            st = p.pre_score(state, pod, rows)  # type: ignore[attr-defined]
            if st is None:
                continue
            if st.code == Code.SKIP:
                state.skip_score.add(p.NAME)
            elif not st.is_success:
                return st.with_plugin(p.NAME)
        return None

    def run_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        total = np.zeros(rows.size, dtype=np.int64)
        for p, weight in self.score:
            if p.NAME in state.skip_score:
                continue
            t0 = time.perf_counter() if self.observe else 0.0
            scores = p.score(state, pod, rows)  # type: ignore[attr-defined]
            normalize = getattr(p, "normalize_score", None)
            if normalize is not None:
                scores = normalize(state, pod, rows, scores)
            if self.observe:
                self.observe("Score", p.NAME, "Success", time.perf_counter() - t0)
            total += np.asarray(scores, dtype=np.int64) * weight
        return total

    def run_reserve(self, state: CycleState, pod: Pod, node: str) -> Status | None:
        for i, p in enumerate(self.reserve):
            st = p.reserve(state, pod, node)  # type: ignore[attr-defined]
            if st is not None and not st.is_success:
                for q in reversed(self.reserve[: i + 1]):
                    q.unreserve(state, pod, node)  # type: ignore[attr-defined]
                return st.with_plugin(p.NAME)
        return None

    def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in reversed(self.reserve):
            p.unreserve(state, pod, node)  # type: ignore[attr-defined]

    def run_permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status | None, dict[str, float]]:
        """(rejection or error | None, {plugin: timeout} of the plugins that asked to wait)."""
        waits: dict[str, float] = {}
        for p in self.permit:
            st, timeout = p.permit(state, pod, node)  # type: ignore[attr-defined]
            if st is None or st.is_success:
                continue
            if st.code == Code.WAIT:
                waits[p.NAME] = timeout
                continue
            return st.with_plugin(p.NAME), {}
        return None, waits

    def run_pre_bind(
        self, state: CycleState, pod: Pod, node: str
    ) -> tuple[Status | None, list[tuple[str, str]]]:
        annotations: list[tuple[str, str]] = []
        for p in self.pre_bind:
            st = p.pre_bind(state, pod, node)  # type: ignore[attr-defined]
            if isinstance(st, list):
                annotations.extend(st)
                continue
            if st is not None and not st.is_success and st.code != Code.SKIP:
                return st.with_plugin(p.NAME), annotations
        return None, annotations

    def run_post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in self.post_bind:
            p.post_bind(state, pod, node)  # type: ignore[attr-defined]


def clamp_scores(scores: np.ndarray) -> np.ndarray:
    return np.clip(scores, 0, MAX_NODE_SCORE)


def build_error(message: str) -> Status:
    return error(message)
