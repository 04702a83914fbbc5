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
from typing import Any, TypeVar

import numpy as np
from pydantic import ValidationError

from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.config.defaults import KOORDPY_DEFAULT_PLUGINS, KUBE_DEFAULT_PLUGINS
from koordpy.config.errors import ConfigError, from_validation_error
from koordpy.config.models import PluginRef, Plugins, PluginSet, SchedulerConfiguration
from koordpy.config.models import Profile as ProfileConfig
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import Diagnosis
from koordpy.framework.handle import Handle
from koordpy.framework.interfaces import (
    BIND,
    EXTENSION_POINTS,
    FILTER,
    PERMIT,
    POST_BIND,
    POST_FILTER,
    PRE_BIND,
    PRE_ENQUEUE,
    PRE_FILTER,
    PRE_SCORE,
    QUEUE_SORT,
    RESERVE,
    SCORE,
    ClusterEvent,
    ExtensionPoint,
    GroupPlugin,
    Plugin,
    PostFilterResult,
    PreEnqueueRecheck,
    PreFilterExtensions,
    Rows,
    ScoreExtensions,
    declares,
)
from koordpy.framework.status import SUCCESS, Code, Status, unschedulable

Registry = Mapping[str, type[Plugin]]

# Records plugin execution time: (extension point, plugin name, status label, seconds).
DurationObserver = Callable[[str, str, str, float], None]

POINT_FIELDS = tuple(p.field for p in EXTENSION_POINTS)

P = TypeVar("P")


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
        **{f: _merge_set(getattr(defaults, f), getattr(custom, f)) for f in ("multiPoint", *POINT_FIELDS)}
    )
    for point in ("multiPoint", *POINT_FIELDS):
        for i, ref in enumerate(getattr(merged, point).enabled):
            if ref.name not in registry:
                raise ConfigError(f"{path}.plugins.{point}.enabled[{i}].name", f"unknown plugin {ref.name!r}")
    out = ResolvedPlugins()
    for point in POINT_FIELDS:
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


def validate_args(cls: type[Plugin], raw: Mapping[str, Any] | None, path: str) -> PluginArgs | None:
    if cls.Args is None:
        if raw:
            raise ConfigError(path, f"plugin {cls.NAME} takes no args")
        return None
    try:
        return cls.Args.model_validate(dict(raw or {}))
    except ValidationError as err:
        raise from_validation_error(err, path) from None


@dataclass(slots=True)
class CheckedProfile:
    """A profile's configuration once checked: its plugins per extension point and their args."""

    resolved: ResolvedPlugins
    args: dict[str, PluginArgs | None]


def check_profile(config: ProfileConfig, registry: Registry, index: int = 0) -> CheckedProfile:
    """Everything that can be wrong with a profile, found without building a plugin."""
    path = f"profiles[{index}]"
    resolved = resolve_plugins(config.plugins, registry, path)
    raw_args = {pc.name: pc.args for pc in config.pluginConfig}
    for pc in config.pluginConfig:
        if pc.name not in registry:
            raise ConfigError(f"{path}.pluginConfig[{pc.name}]", f"unknown plugin {pc.name!r}")
    needed = {n for names in resolved.points.values() for n in names}
    args = {
        name: validate_args(registry[name], raw_args.get(name), f"{path}.pluginConfig[{name}].args")
        for name in sorted(needed | set(raw_args))
    }
    return CheckedProfile(resolved, args)


def validate_configuration(config: SchedulerConfiguration, registry: Registry) -> None:
    """Raises ConfigError for the first problem in any profile (what building a scheduler from
    the configuration would raise)."""
    for i, pc in enumerate(config.profiles):
        check_profile(pc, registry, i)


class Profile:
    def __init__(
        self,
        config: ProfileConfig,
        registry: Registry,
        handle: Handle,
        index: int = 0,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        self.name = config.schedulerName
        self.handle = handle
        handle.profile = self
        self.percentage_of_nodes_to_score = (
            config.percentageOfNodesToScore
            if config.percentageOfNodesToScore is not None
            else percentage_of_nodes_to_score
        )
        checked = check_profile(config, registry, index)
        resolved = self.resolved = checked.resolved
        self.plugins: dict[str, Plugin] = {
            name: registry[name](handle, args) for name, args in checked.args.items()
        }

        self.queue_sort = self._at(QUEUE_SORT)[0]
        self.pre_enqueue = self._at(PRE_ENQUEUE)
        # PreEnqueue plugins that name the gated pods an event may let through
        self.gate_wakers = [
            p
            for p in self.pre_enqueue
            if isinstance(p, PreEnqueueRecheck) and declares(type(p), PreEnqueueRecheck)
        ]
        self.pre_filter = self._at(PRE_FILTER)
        self.pre_filter_extensions = [
            p
            for p in self.pre_filter
            if isinstance(p, PreFilterExtensions) and declares(type(p), PreFilterExtensions)
        ]
        self.filter = self._at(FILTER)
        self.post_filter = self._at(POST_FILTER)
        self.pre_score = self._at(PRE_SCORE)
        self.score = [
            (
                p,
                resolved.weights[p.NAME],
                p if isinstance(p, ScoreExtensions) and declares(type(p), ScoreExtensions) else None,
            )
            for p in self._at(SCORE)
        ]
        self.reserve = self._at(RESERVE)
        self.permit = self._at(PERMIT)
        self.pre_bind = self._at(PRE_BIND)
        self.bind = self._at(BIND)
        self.post_bind = self._at(POST_BIND)
        # the plugin that places groups of pods as a unit (gang scheduling), when one is enabled
        self.group: GroupPlugin | None = next(
            (p for p in self.permit if isinstance(p, GroupPlugin) and declares(type(p), GroupPlugin)), None
        )
        self.observe: DurationObserver | None = None
        # the events that can make a pod rejected by each plugin schedulable again
        self.events: dict[str, tuple[ClusterEvent, ...]] = {
            name: tuple(p.events_to_register()) for name, p in self.plugins.items()
        }

    def _at(self, point: ExtensionPoint[P]) -> list[P]:
        """The plugins enabled at the point, in run order."""
        return point.select(self.plugins[n] for n in self.resolved.points[point.field])

    def plugin(self, name: str) -> Plugin | None:
        return self.plugins.get(name)

    # --------------------------------------------------------------------------- queue side
    def run_pre_enqueue(self, pod: Pod) -> Status | None:
        for p in self.pre_enqueue:
            st = p.pre_enqueue(pod)
            if st is not None and not st.is_success:
                return st.with_plugin(p.NAME)
        return None

    # --------------------------------------------------------------------------- scheduling cycle
    def run_pre_filter(self, state: CycleState, pod: Pod) -> tuple[frozenset[str] | None, Status | None]:
        allowed: frozenset[str] | None = None
        for p in self.pre_filter:
            t0 = time.perf_counter() if self.observe else 0.0
            result, st = p.pre_filter(state, pod)
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
        for p in self.pre_filter_extensions:
            if p.NAME not in state.skip_filter:
                p.pre_filter_add_pod(state, pod, other, row)

    def pre_filter_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> None:
        for p in self.pre_filter_extensions:
            if p.NAME not in state.skip_filter:
                p.pre_filter_remove_pod(state, pod, other, row)

    def run_filter(self, state: CycleState, pod: Pod, rows: Rows, diagnosis: Diagnosis | None) -> Rows:
        """The rows that pass every filter; failures are recorded in `diagnosis`. Plugins run in
        order over the rows still alive, so a node's recorded status is its first failure."""
        alive = rows
        for p in self.filter:
            if alive.size == 0:
                break
            if p.NAME in state.skip_filter:
                continue
            t0 = time.perf_counter() if self.observe else 0.0
            result = p.filter(state, pod, alive)
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
        trial_state = state.clone()
        with snap.trial() as trial:
            for other in added:
                if trial.add_pod(other, row):
                    self.pre_filter_add_pod(trial_state, pod, other, row)
            return self.filter_one(trial_state, pod, row)

    def filter_one(self, state: CycleState, pod: Pod, row: int) -> Status | None:
        one = np.array([row], dtype=np.int64)
        for p in self.filter:
            if p.NAME in state.skip_filter:
                continue
            result = p.filter(state, pod, one)
            if result is not None and not result.passed[0]:
                return result.status_at(0).with_plugin(p.NAME)
        return None

    def run_post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult:
        last = PostFilterResult(None, unschedulable())
        for p in self.post_filter:
            t0 = time.perf_counter() if self.observe else 0.0
            res = p.post_filter(state, pod, diagnosis)
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
            st = p.pre_score(state, pod, rows)
            if st is None:
                continue
            if st.code == Code.SKIP:
                state.skip_score.add(p.NAME)
            elif not st.is_success:
                return st.with_plugin(p.NAME)
        return None

    def run_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        total = np.zeros(rows.size, dtype=np.int64)
        for p, weight, normalizer in self.score:
            if p.NAME in state.skip_score:
                continue
            t0 = time.perf_counter() if self.observe else 0.0
            scores = p.score(state, pod, rows)
            if normalizer is not None:
                scores = normalizer.normalize_score(state, pod, rows, scores)
            if self.observe:
                self.observe("Score", p.NAME, "Success", time.perf_counter() - t0)
            total += np.asarray(scores, dtype=np.int64) * weight
        return total

    def run_reserve(self, state: CycleState, pod: Pod, node: str) -> Status | None:
        for i, p in enumerate(self.reserve):
            st = p.reserve(state, pod, node)
            if st is not None and not st.is_success:
                for q in reversed(self.reserve[: i + 1]):
                    q.unreserve(state, pod, node)
                return st.with_plugin(p.NAME)
        return None

    def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in reversed(self.reserve):
            p.unreserve(state, pod, node)

    def run_permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status | None, dict[str, float]]:
        """(rejection or error | None, {plugin: timeout} of the plugins that asked to wait)."""
        waits: dict[str, float] = {}
        for p in self.permit:
            st, timeout = p.permit(state, pod, node)
            if st is None or st.is_success:
                continue
            if st.code == Code.WAIT:
                waits[p.NAME] = timeout
                continue
            return st.with_plugin(p.NAME), {}
        return None, waits

    def run_pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status | None:
        """PreBind; the annotations the binding carries are left in `state.binding_annotations`."""
        for p in self.pre_bind:
            st = p.pre_bind(state, pod, node)
            if st is not None and not st.is_success and st.code != Code.SKIP:
                return st.with_plugin(p.NAME)
        return None

    def run_post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in self.post_bind:
            p.post_bind(state, pod, node)
