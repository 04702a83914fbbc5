"""A profile: the plugins one `schedulerName` runs at each extension point, and the runner.

Building a profile merges the configuration with the defaults the way kube-scheduler does (a
plugin enabled at a specific extension point runs before the multiPoint ones there; `disabled`
removes, `"*"` removes every default), and validates each plugin's args with its own model.
Checking finds every problem of a configuration at once, each at its path in the user's file
(`profiles[0].plugins.filter.enabled[2].name`,
`profiles[0].pluginConfig[NodeResourcesFit].args.scoringStrategy.type`); plugins of
kube-scheduler, koord-scheduler and scheduler-plugins that koordpy does not have are told apart
from unknown names (config.known_plugins).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

import numpy as np
from pydantic import ValidationError

from koordpy import logs
from koordpy.api import names
from koordpy.api.pod import Pod
from koordpy.config.args import PluginArgs
from koordpy.config.defaults import KOORDPY_DEFAULT_PLUGINS, KUBE_DEFAULT_PLUGINS
from koordpy.config.errors import ConfigError, Problem, problems_from_validation_error
from koordpy.config.known_plugins import ALLOW_UNSUPPORTED_HINT, Support, known, other_point_note
from koordpy.config.models import (
    POINTS,
    UNREADABLE,
    PluginConfig,
    PluginRef,
    Plugins,
    PluginSet,
    Reading,
    SchedulerConfiguration,
)
from koordpy.config.models import Profile as ProfileConfig
from koordpy.config.notices import Notices
from koordpy.config.unhonoured import unhonoured_settings
from koordpy.framework.cycle_state import CycleState
from koordpy.framework.diagnosis import NARROWED_BY_KEY, Diagnosis, no_node_left
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
    ClusterEventWithHint,
    ExtensionPoint,
    GroupPlugin,
    Plugin,
    PostFilterResult,
    PreEnqueueRecheck,
    PreFilterExtensions,
    QueueingHints,
    Rows,
    ScoreExtensions,
    declares,
)
from koordpy.framework.status import SUCCESS, Code, Status, unschedulable

log = logs.get(__name__)

Registry = Mapping[str, type[Plugin]]


def _hinted(p: Plugin) -> TypeGuard[QueueingHints]:
    """Whether the plugin declares queueing hints for its events."""
    return isinstance(p, QueueingHints) and declares(type(p), QueueingHints)


# filters whose verdict on a node reads that node alone (its object, its own pods)
_PER_NODE_FILTERS = frozenset(
    {
        names.NODE_UNSCHEDULABLE,
        names.NODE_NAME,
        names.TAINT_TOLERATION,
        names.NODE_AFFINITY,
        names.NODE_PORTS,
        names.NODE_RESOURCES_FIT,
        names.VOLUME_ZONE,
        names.NODE_VOLUME_LIMITS,
    }
)

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


def resolve_plugins(
    config: Plugins | None, registry: Registry, path: str
) -> tuple[ResolvedPlugins, list[Problem]]:
    """The plugins of each extension point, merged with the defaults as kube-scheduler merges
    them. Every enabled name must be a plugin of the registry that implements the point it is
    enabled at (review_profile leaves out the others before calling this)."""
    defaults = Plugins(multiPoint=PluginSet(enabled=default_plugin_refs(registry)))
    custom = config or Plugins()
    merged = Plugins(
        **{f: _merge_set(getattr(defaults, f), getattr(custom, f)) for f in ("multiPoint", *POINT_FIELDS)}
    )
    out = ResolvedPlugins()
    for point in POINT_FIELDS:
        specific: PluginSet = getattr(merged, point)
        disabled = {p.name for p in specific.disabled}
        names: list[str] = []
        for ref in specific.enabled:
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
    problems = []
    if len(out.points.get("queueSort", [])) != 1:
        enabled = ", ".join(out.points.get("queueSort", [])) or "none"
        problems.append(
            Problem(
                f"{path}.plugins.queueSort", f"exactly one queueSort plugin must be enabled, got {enabled}"
            )
        )
    if not out.points.get("bind"):
        problems.append(Problem(f"{path}.plugins.bind", "at least one bind plugin must be enabled"))
    return out, problems


def specific_queue_sort(plugins: Plugins) -> bool:
    return bool(plugins.queueSort.enabled)


def validate_args(
    cls: type[Plugin], raw: Mapping[str, Any] | None, path: str
) -> tuple[PluginArgs | None, list[Problem]]:
    if cls.Args is None:
        if raw:
            return None, [Problem(path, f"plugin {cls.NAME} takes no args")]
        return None, []
    data = dict(raw or {})
    try:
        return cls.Args.model_validate(data), []
    except ValidationError as err:
        return None, problems_from_validation_error(err, data, path)


# the points a profile cannot run without: where the only plugins named were left out as foreign
# (not koordpy's), koordpy's defaults take their place rather than leave the point empty
_REQUIRED_POINTS = ("queueSort", "bind")


@dataclass(slots=True)
class ProfileReview:
    """Everything checking one profile found, each problem at its path in the user's file."""

    # the plugin sets and pluginConfig koordpy runs: plugins that are not koordpy's left out
    plugins: Plugins | None
    plugin_config: list[PluginConfig]
    resolved: ResolvedPlugins
    args: dict[str, PluginArgs | None]
    problems: list[Problem] = field(default_factory=list)
    # plugins koordpy does not support, with every path naming them, in the order met
    unsupported: dict[str, list[str]] = field(default_factory=dict)
    inert: list[str] = field(default_factory=list)
    # `path: why` of what the profile sets that koordpy does not act on
    unhonoured: list[str] = field(default_factory=list)
    # the required points (queueSort, bind) whose only plugins were left out: defaults stand in
    stand_ins: list[str] = field(default_factory=list)


def _unsupported_problems(unsupported: Mapping[str, Sequence[str]]) -> list[Problem]:
    problems = []
    for name, paths in unsupported.items():
        plugin = known(name)
        what = plugin.summary if plugin is not None else name
        also = f"; also named at {', '.join(paths[1:])}" if len(paths) > 1 else ""
        problems.append(Problem(paths[0], f"{what} is not supported by koordpy{also}"))
    return problems


@dataclass(slots=True)
class _Findings:
    """What the review of one profile has found so far."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    unsupported: dict[str, list[str]] = field(default_factory=dict)
    inert: list[str] = field(default_factory=list)
    unhonoured: list[str] = field(default_factory=list)
    # the points whose own entries have a problem: that the point ends up empty is a consequence
    troubled: set[str] = field(default_factory=set)

    def foreign(self, name: str, where: str) -> bool:
        """True when `name` is a plugin of the reference schedulers that koordpy leaves out."""
        plugin = known(name)
        if plugin is None or plugin.support == Support.SUPPORTED:
            return False
        if plugin.support == Support.INERT:
            if name not in self.inert:
                self.inert.append(name)
        else:
            self.unsupported.setdefault(name, []).append(where)
        return True


def _review_plugin_sets(user: Plugins, registry: Registry, found: _Findings) -> tuple[Plugins, list[str]]:
    """The user's plugin sets with only what koordpy runs, and the required points where the
    defaults stand in for plugins left out."""
    left_out: set[tuple[str, int]] = set()
    only_foreign: list[str] = []
    for point in POINTS:
        enabled = getattr(user, point).enabled
        named_foreign = False
        for i, ref in enumerate(enabled):
            where = f"{found.path}.plugins.{point}.enabled[{i}]"
            if ref.name == UNREADABLE:
                left_out.add((point, i))
                found.troubled.add(point)
                continue
            cls = registry.get(ref.name)
            if cls is None:
                left_out.add((point, i))
                if found.foreign(ref.name, where):
                    named_foreign = True
                else:
                    found.problems.append(Problem(f"{where}.name", f"unknown plugin {ref.name!r}"))
                    found.troubled.add(point)
                continue
            if point == "multiPoint" or point in cls.extension_points():
                continue
            left_out.add((point, i))
            note = other_point_note(ref.name, point)
            if note is None:
                runs_at = ", ".join(cls.extension_points())
                found.problems.append(
                    Problem(
                        f"{where}.name",
                        f"plugin {ref.name} does not implement {point} (it runs at {runs_at})",
                    )
                )
                found.troubled.add(point)
            elif note:
                found.unhonoured.append(f"{where}: {ref.name} at {point}: {note}")
        if named_foreign and all((point, i) in left_out for i in range(len(enabled))):
            only_foreign.append(point)
    kept = user.keeping(lambda point, i, ref: (point, i) not in left_out)
    stand_ins = []
    for point in _REQUIRED_POINTS:
        if point in only_foreign:
            # the user's choice for this point was a plugin koordpy leaves out: the defaults stand in
            kept = kept.model_copy(update={point: PluginSet()})
            stand_ins.append(f"{found.path}.plugins.{point}")
    return kept, stand_ins


def _review_plugin_config(
    configs: Sequence[PluginConfig], registry: Registry, found: _Findings
) -> list[PluginConfig]:
    """The pluginConfig entries of koordpy's plugins."""
    kept: list[PluginConfig] = []
    seen: dict[str, int] = {}
    for j, pc in enumerate(configs):
        where = f"{found.path}.pluginConfig[{j}]"
        if pc.name == UNREADABLE:
            continue
        if pc.name in seen:
            found.problems.append(
                Problem(
                    f"{where}.name",
                    f"pluginConfig for {pc.name} is given twice (first at pluginConfig[{seen[pc.name]}])",
                )
            )
            continue
        seen[pc.name] = j
        if pc.name in registry:
            kept.append(pc)
        elif not found.foreign(pc.name, where):
            found.problems.append(Problem(f"{where}.name", f"unknown plugin {pc.name!r}"))
    return kept


def review_profile(
    config: ProfileConfig, registry: Registry, index: int = 0, allow_unsupported_plugins: bool = False
) -> ProfileReview:
    """Every problem of a profile, found without building a plugin: names that are no plugin, a
    plugin enabled at a point it does not implement, plugins koordpy does not support (unless
    allowed), args their plugin's model refuses, and what cannot be placed (no queue sort, no
    binder). Paths index the user's own lists, whatever the defaults merged into them."""
    found = _Findings(f"profiles[{index}]")
    kept, stand_ins = _review_plugin_sets(config.plugins or Plugins(), registry, found)
    plugins = kept if config.plugins is not None else None
    kept_config = _review_plugin_config(config.pluginConfig, registry, found)
    if found.unsupported and not allow_unsupported_plugins:
        found.problems.extend(_unsupported_problems(found.unsupported))

    resolved, unplaceable = resolve_plugins(plugins, registry, found.path)
    consequences = {f"{found.path}.plugins.{point}" for point in found.troubled}
    found.problems.extend(p for p in unplaceable if p.path not in consequences)

    raw_args = {pc.name: pc.args for pc in kept_config}
    needed = {n for names in resolved.points.values() for n in names}
    args: dict[str, PluginArgs | None] = {}
    for name in sorted(needed | set(raw_args)):
        args_path = f"{found.path}.pluginConfig[{name}].args"
        args[name], arg_problems = validate_args(registry[name], raw_args.get(name), args_path)
        found.problems.extend(arg_problems)
        plugin_args = args[name]
        if plugin_args is not None and name in raw_args:
            found.unhonoured.extend(
                f"{args_path}.{key}: {plugin_args.UNHONOURED_FIELDS[key]}"
                for key in plugin_args.unhonoured_fields()
            )
    return ProfileReview(
        plugins,
        kept_config,
        resolved,
        args,
        found.problems,
        found.unsupported,
        found.inert,
        found.unhonoured,
        stand_ins,
    )


@dataclass(slots=True)
class CheckedProfile:
    """A profile's configuration once checked: its plugins per extension point and their args."""

    resolved: ResolvedPlugins
    args: dict[str, PluginArgs | None]


def _hint(unsupported: bool) -> str:
    return ALLOW_UNSUPPORTED_HINT if unsupported else ""


def check_profile(config: ProfileConfig, registry: Registry, index: int = 0) -> CheckedProfile:
    """Everything that can be wrong with a profile, found without building a plugin; raises a
    ConfigError naming every problem."""
    review = review_profile(config, registry, index)
    if review.problems:
        raise ConfigError.of(review.problems, hint=_hint(bool(review.unsupported)))
    return CheckedProfile(review.resolved, review.args)


@dataclass(frozen=True, slots=True)
class CheckedConfiguration:
    # what koordpy runs: the file's configuration without the plugins that are not koordpy's
    config: SchedulerConfiguration
    notices: Notices


def check_configuration(
    reading: Reading, registry: Registry, allow_unsupported_plugins: bool = False
) -> CheckedConfiguration:
    """Every problem of a configuration document at once (schema, names, extension points, args),
    or the configuration koordpy runs with what it has to tell about it."""
    problems = list(reading.problems)
    reviews = []
    unsupported: dict[str, None] = {}
    inert: dict[str, None] = {}
    unhonoured: list[str] = []
    stand_ins: list[str] = []
    for i, profile in reading.profiles:
        review = review_profile(profile, registry, i, allow_unsupported_plugins)
        reviews.append(review)
        problems.extend(review.problems)
        unsupported.update(dict.fromkeys(review.unsupported))
        inert.update(dict.fromkeys(review.inert))
        unhonoured.extend(review.unhonoured)
        stand_ins.extend(review.stand_ins)
    if problems or reading.config is None:
        hint = _hint(bool(unsupported) and not allow_unsupported_plugins)
        raise ConfigError.of(problems, reading.source, hint)
    config = reading.config
    profiles = [
        p.model_copy(update={"plugins": r.plugins, "pluginConfig": r.plugin_config})
        for p, r in zip(config.profiles, reviews, strict=True)
    ]
    notices = Notices(
        skipped=tuple(unsupported),
        inert=tuple(inert),
        unhonoured=(*unhonoured_settings(config), *unhonoured),
        stand_ins=tuple(stand_ins),
    )
    return CheckedConfiguration(config.model_copy(update={"profiles": profiles}), notices)


def validate_configuration(config: SchedulerConfiguration, registry: Registry) -> None:
    """Raises ConfigError naming every problem of every profile (what building a scheduler from
    the configuration would raise)."""
    check_configuration(Reading("", config, list(enumerate(config.profiles))), registry)


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
        # per-plugin timings, set on the cycles chosen for them (timing every plugin call costs)
        self.observe: DurationObserver | None = None
        # extension points are timed on every run, as kube-scheduler does
        self._observer = handle.observer
        # what-ifs run inside PostFilter (preemption) are part of its duration, not runs of their own
        self._in_post_filter = False
        # the events that can make a pod rejected by each plugin schedulable again
        self.events: dict[str, tuple[ClusterEvent, ...]] = {
            name: tuple(p.events_to_register()) for name, p in self.plugins.items()
        }
        # the same events with the plugins' queueing hints (none: every such event helps), and
        # what each plugin's hints read of a pod (pods alike are judged once per event)
        self.hints: dict[str, tuple[ClusterEventWithHint, ...]] = {
            name: tuple(p.queueing_hints())
            if _hinted(p)
            else tuple(ClusterEventWithHint(e) for e in self.events[name])
            for name, p in self.plugins.items()
        }
        self.hint_shapes = {name: p.hint_shape for name, p in self.plugins.items() if _hinted(p)}

    def _at(self, point: ExtensionPoint[P]) -> list[P]:
        """The plugins enabled at the point, in run order."""
        return point.select(self.plugins[n] for n in self.resolved.points[point.field])

    def plugin(self, name: str) -> Plugin | None:
        return self.plugins.get(name)

    def _point_done(self, point: str, st: Status | None, start: float) -> None:
        if not self._in_post_filter:
            label = "Success" if st is None else st.code.label
            self._observer.point_done(point, label, self.name, time.perf_counter() - start)

    # --------------------------------------------------------------------------- queue side
    def run_pre_enqueue(self, pod: Pod) -> Status | None:
        start = time.perf_counter()
        for p in self.pre_enqueue:
            t0 = time.perf_counter() if self.observe else 0.0
            st = p.pre_enqueue(pod)
            if self.observe:
                self.observe("PreEnqueue", p.NAME, (st or SUCCESS).code.label, time.perf_counter() - t0)
            if st is not None and not st.is_success:
                st = st.with_plugin(p.NAME)
                self._point_done("PreEnqueue", st, start)
                return st
        self._point_done("PreEnqueue", None, start)
        return None

    # --------------------------------------------------------------------------- scheduling cycle
    def run_pre_filter(self, state: CycleState, pod: Pod) -> tuple[frozenset[str] | None, Status | None]:
        start = time.perf_counter()
        allowed, st = self._pre_filter(state, pod)
        self._point_done("PreFilter", st, start)
        return allowed, st

    def _pre_filter(self, state: CycleState, pod: Pod) -> tuple[frozenset[str] | None, Status | None]:
        allowed: frozenset[str] | None = None
        # the plugins whose result narrowed the nodes: the message for the nodes left out names them
        narrowed: list[str] = []
        for p in self.pre_filter:
            t0 = time.perf_counter() if self.observe else 0.0
            result, st = p.pre_filter(state, pod)
            if self.observe:
                self.observe("PreFilter", p.NAME, (st or SUCCESS).code.label, time.perf_counter() - t0)
            if st is not None and st.code == Code.SKIP:
                state.skip_filter.add(p.NAME)
                continue
            self._observer.evaluated("PreFilter", p.NAME, self.name, 1)
            if st is not None and not st.is_success:
                return None, st.with_plugin(p.NAME)
            if result is not None and result.node_names is not None:
                narrowed.append(p.NAME)
                allowed = result.node_names if allowed is None else allowed & result.node_names
                if not allowed:
                    reason = no_node_left(narrowed)
                    return allowed, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,), p.NAME)
        state.write(NARROWED_BY_KEY, tuple(narrowed))
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
            self._observer.evaluated("Filter", p.NAME, self.name, int(alive.size))
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
        start = time.perf_counter()
        feasible = self._filter_with_nominated(state, pod, rows, diagnosis, ignore)
        self._point_done("Filter", None, start)
        return feasible

    def _filter_with_nominated(
        self,
        state: CycleState,
        pod: Pod,
        rows: np.ndarray,
        diagnosis: Diagnosis | None,
        ignore: Callable[[Pod], bool] | None,
    ) -> np.ndarray:
        feasible = self.run_filter(state, pod, rows, diagnosis)
        nominator = self.handle.nominator
        if not nominator or feasible.size == 0:
            return feasible
        snap = self.handle.snapshot
        alive = np.zeros(snap.capacity, dtype=bool)
        alive[feasible] = True
        # only the feasible nodes holding nominations of this priority or higher are looked at
        checks = list(nominator.holding(pod, snap, alive, ignore).items())
        if not checks:
            return feasible
        if len(checks) > 1 and self._filters_per_node(state):
            failed = self._filter_rows_with_pods(state, pod, checks)
        else:
            failed = {}
            for row, others in checks:
                st = self.filter_one_with_pods(state, pod, row, others)
                if st is not None:
                    failed[row] = st
        if not failed:
            return feasible
        for row, st in failed.items():
            alive[row] = False
            if diagnosis is not None:
                diagnosis.record_node(row, st)
        kept: np.ndarray = feasible[alive[feasible]]
        return kept

    def _filters_per_node(self, state: CycleState) -> bool:
        """Whether every filter that runs judges a node by that node alone (its object and its
        own pods): pods added on several nodes at once then give each node the verdict it would
        get with only its own added."""
        return all(p.NAME in _PER_NODE_FILTERS or p.NAME in state.skip_filter for p in self.filter)

    def _filter_rows_with_pods(
        self, state: CycleState, pod: Pod, checks: Sequence[tuple[int, Sequence[Pod]]]
    ) -> dict[int, Status]:
        """filter_one_with_pods for several nodes in one trial and one pass of each filter (only
        when `_filters_per_node`): the failing rows with their first failure."""
        snap = self.handle.snapshot
        trial_state = state.clone()
        failed: dict[int, Status] = {}
        with snap.trial() as trial:
            for row, added in checks:
                for other in added:
                    if trial.add_pod(other, row):
                        self.pre_filter_add_pod(trial_state, pod, other, row)
            alive = np.array(sorted(row for row, _ in checks), dtype=np.int64)
            for p in self.filter:
                if p.NAME in trial_state.skip_filter:
                    continue
                self._observer.evaluated("Filter", p.NAME, self.name, int(alive.size))
                result = p.filter(trial_state, pod, alive)
                if result is None:
                    continue
                for j in np.flatnonzero(~result.passed).tolist():
                    failed[int(alive[j])] = result.status_at(j).with_plugin(p.NAME)
                alive = alive[result.passed]
                if alive.size == 0:
                    break
        return failed

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
            self._observer.evaluated("Filter", p.NAME, self.name, 1)
            result = p.filter(state, pod, one)
            if result is not None and not result.passed[0]:
                return result.status_at(0).with_plugin(p.NAME)
        return None

    def run_post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult:
        start = time.perf_counter()
        nested, self._in_post_filter = self._in_post_filter, True
        try:
            result = self._post_filter(state, pod, diagnosis)
        finally:
            self._in_post_filter = nested
        self._point_done("PostFilter", result.status, start)
        return result

    def _post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> PostFilterResult:
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
        start = time.perf_counter()
        for p in self.pre_score:
            t0 = time.perf_counter() if self.observe else 0.0
            st = p.pre_score(state, pod, rows)
            if self.observe:
                self.observe("PreScore", p.NAME, (st or SUCCESS).code.label, time.perf_counter() - t0)
            if st is not None and st.code == Code.SKIP:
                state.skip_score.add(p.NAME)
                continue
            self._observer.evaluated("PreScore", p.NAME, self.name, 1)
            if st is not None and not st.is_success:
                st = st.with_plugin(p.NAME)
                self._point_done("PreScore", st, start)
                return st
        self._point_done("PreScore", None, start)
        return None

    def run_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        total = np.zeros(rows.size, dtype=np.int64)
        for p, weight, normalizer in self.score:
            if p.NAME in state.skip_score:
                continue
            self._observer.evaluated("Score", p.NAME, self.name, int(rows.size))
            t0 = time.perf_counter() if self.observe else 0.0
            scores = p.score(state, pod, rows)
            if self.observe:
                t1 = time.perf_counter()
                self.observe("Score", p.NAME, "Success", t1 - t0)
            if normalizer is not None:
                scores = normalizer.normalize_score(state, pod, rows, scores)
                if self.observe:
                    self.observe("ScoreExtensionNormalize", p.NAME, "Success", time.perf_counter() - t1)
            weighted = np.asarray(scores, dtype=np.int64) * weight
            total += weighted
            if v10 := log.v(10):
                name_of = self.handle.snapshot.node_name
                for row, score in zip(rows.tolist(), weighted.tolist(), strict=True):
                    v10.info(
                        "Plugin scored node for pod",
                        pod=pod.key,
                        plugin=p.NAME,
                        node=name_of(row),
                        score=score,
                    )
        if v10 := log.v(10):
            name_of = self.handle.snapshot.node_name
            for row, score in zip(rows.tolist(), total.tolist(), strict=True):
                v10.info("Calculated node's final score for pod", pod=pod.key, node=name_of(row), score=score)
        self._point_done("Score", None, start)
        return total

    def run_reserve(self, state: CycleState, pod: Pod, node: str) -> Status | None:
        start = time.perf_counter()
        for i, p in enumerate(self.reserve):
            t0 = time.perf_counter() if self.observe else 0.0
            st = p.reserve(state, pod, node)
            if self.observe:
                self.observe("Reserve", p.NAME, (st or SUCCESS).code.label, time.perf_counter() - t0)
            if st is not None and not st.is_success:
                for q in reversed(self.reserve[: i + 1]):
                    q.unreserve(state, pod, node)
                st = st.with_plugin(p.NAME)
                if st.is_rejection and (v4 := log.v(4)):
                    v4.info(
                        "Pod rejected by plugin", pod=pod.key, node=node, plugin=p.NAME, status=st.message
                    )
                self._point_done("Reserve", st, start)
                return st
        self._point_done("Reserve", None, start)
        return None

    def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        start = time.perf_counter()
        for p in reversed(self.reserve):
            t0 = time.perf_counter() if self.observe else 0.0
            p.unreserve(state, pod, node)
            if self.observe:
                self.observe("Unreserve", p.NAME, "Success", time.perf_counter() - t0)
        self._point_done("Unreserve", None, start)

    def run_permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status | None, dict[str, float]]:
        """(rejection or error | None, {plugin: timeout} of the plugins that asked to wait)."""
        start = time.perf_counter()
        waits: dict[str, float] = {}
        for p in self.permit:
            t0 = time.perf_counter() if self.observe else 0.0
            st, timeout = p.permit(state, pod, node)
            if self.observe:
                self.observe("Permit", p.NAME, (st or SUCCESS).code.label, time.perf_counter() - t0)
            if st is None or st.is_success:
                continue
            if st.code == Code.WAIT:
                waits[p.NAME] = timeout
                continue
            st = st.with_plugin(p.NAME)
            if st.is_rejection and (v4 := log.v(4)):
                v4.info("Pod rejected by plugin", pod=pod.key, node=node, plugin=p.NAME, status=st.message)
            self._point_done("Permit", st, start)
            return st, {}
        self._point_done("Permit", Status(Code.WAIT) if waits else None, start)
        if waits and (v4 := log.v(4)):
            v4.info("One or more plugins asked to wait and no plugin rejected pod", pod=pod.key, node=node)
        return None, waits

    def run_pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status | None:
        """PreBind; the annotations the binding carries are left in `state.binding_annotations`."""
        start = time.perf_counter()
        for p in self.pre_bind:
            t0 = time.perf_counter() if self.observe else 0.0
            st = p.pre_bind(state, pod, node)
            if self.observe:
                self.observe("PreBind", p.NAME, (st or SUCCESS).code.label, time.perf_counter() - t0)
            if st is not None and not st.is_success and st.code != Code.SKIP:
                st = st.with_plugin(p.NAME)
                if st.is_rejection and (v4 := log.v(4)):
                    v4.info(
                        "Pod rejected by PreBind plugin",
                        pod=pod.key,
                        node=node,
                        plugin=p.NAME,
                        status=st.message,
                    )
                self._point_done("PreBind", st, start)
                return st
        self._point_done("PreBind", None, start)
        return None

    def run_post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        start = time.perf_counter()
        for p in self.post_bind:
            t0 = time.perf_counter() if self.observe else 0.0
            p.post_bind(state, pod, node)
            if self.observe:
                self.observe("PostBind", p.NAME, "Success", time.perf_counter() - t0)
        self._point_done("PostBind", None, start)
