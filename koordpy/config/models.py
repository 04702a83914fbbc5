"""The scheduler configuration, in kube-scheduler's `KubeSchedulerConfiguration` shape
(`kubescheduler.config.k8s.io/v1`, and v1beta3, which has the same shape). Plugin args stay raw
dicts here; each plugin's own args model validates them when a profile is checked (see
framework.profile).

A document is read as far as it can be (`read_configuration`): every schema problem is found at
once, and the profiles whose own part is readable are kept, so that their plugins can be checked
in the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from koordpy.api.duration import MAX_SECONDS, parse_duration
from koordpy.api.errors import SpecError
from koordpy.config.defaults import (
    DEFAULT_MAX_UNSCHEDULABLE_SECONDS,
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_BACKOFF_SECONDS,
    DEFAULT_PROFILE_NAMES,
)
from koordpy.config.errors import ConfigError, Problem, problems_from_validation_error
from koordpy.config.numbers import Float32, GoNumbers, Int32

API_VERSION = "kubescheduler.config.k8s.io/v1"
# scheduler-plugins still ships sample configurations in v1beta3; its fields are v1's
API_VERSIONS = (API_VERSION, "kubescheduler.config.k8s.io/v1beta3")
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
# the name of a plugin reference or pluginConfig entry that could not be read: it keeps the
# entry's place in its list, so that what follows is still reported at the user's index
UNREADABLE = ""


class _Strict(GoNumbers):
    # GoNumbers: every number within what its Go field holds (int64 unless declared Int32)
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PluginRef(_Strict):
    name: str = Field(min_length=1)
    weight: Int32 | None = Field(default=None, ge=0)


class PluginSet(_Strict):
    enabled: list[PluginRef] = Field(default_factory=list)
    disabled: list[PluginRef] = Field(default_factory=list)


class Plugins(_Strict):
    multiPoint: PluginSet = Field(default_factory=PluginSet)
    queueSort: PluginSet = Field(default_factory=PluginSet)
    preEnqueue: PluginSet = Field(default_factory=PluginSet)
    preFilter: PluginSet = Field(default_factory=PluginSet)
    filter: PluginSet = Field(default_factory=PluginSet)
    postFilter: PluginSet = Field(default_factory=PluginSet)
    preScore: PluginSet = Field(default_factory=PluginSet)
    score: PluginSet = Field(default_factory=PluginSet)
    reserve: PluginSet = Field(default_factory=PluginSet)
    permit: PluginSet = Field(default_factory=PluginSet)
    preBind: PluginSet = Field(default_factory=PluginSet)
    bind: PluginSet = Field(default_factory=PluginSet)
    postBind: PluginSet = Field(default_factory=PluginSet)

    def keeping(self, keep: Callable[[str, int, PluginRef], bool]) -> Plugins:
        """These plugin sets with only the enabled plugins `keep(point, index, ref)` accepts."""
        sets: dict[str, Any] = {}
        for point in type(self).model_fields:
            current: PluginSet = getattr(self, point)
            sets[point] = PluginSet.model_construct(
                enabled=[ref for i, ref in enumerate(current.enabled) if keep(point, i, ref)],
                disabled=list(current.disabled),
            )
        return Plugins.model_construct(**sets)


POINTS = tuple(Plugins.model_fields)


class PluginConfig(_Strict):
    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("args", mode="before")
    @classmethod
    def _strip_type_meta(cls, value: Any) -> Any:
        # args may carry their own apiVersion/kind (e.g. kind: NodeResourcesFitArgs)
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k not in ("apiVersion", "kind")}
        if value is None:
            return {}
        return value


class Profile(_Strict):
    schedulerName: str = Field(default=DEFAULT_SCHEDULER_NAME, min_length=1)
    plugins: Plugins | None = None
    pluginConfig: list[PluginConfig] = Field(default_factory=list)
    percentageOfNodesToScore: Int32 | None = Field(default=None, ge=0, le=100)


class LeaderElection(_Strict):
    """kube-scheduler v1's defaults, but for the Lease's name: kube-scheduler holds
    `kube-system/kube-scheduler`, and a second scheduler that took the same Lease would stop the
    cluster's own from scheduling while it holds it."""

    leaderElect: bool = True
    leaseDuration: str = "15s"
    renewDeadline: str = "10s"
    retryPeriod: str = "2s"
    resourceLock: str = "leases"
    resourceName: str = "koordpy"
    resourceNamespace: str = "kube-system"

    @field_validator("leaseDuration", "renewDeadline", "retryPeriod")
    @classmethod
    def _duration(cls, value: str) -> str:
        # checked here, with the rest of the file, rather than when `koordpy run` reads it
        try:
            seconds = parse_duration(value)
        except SpecError as err:
            raise ValueError(f"{err.message} (write e.g. 15s, 1m30s, 500ms)") from None
        if seconds <= 0:
            raise ValueError(f"must be a positive duration, got {value!r}")
        return value


class ClientConnection(_Strict):
    """How `koordpy run` talks to the API server, with kube-scheduler v1's defaults. koordpy
    always speaks JSON: the content types are read (see config.unhonoured) but not acted on."""

    kubeconfig: str = ""
    acceptContentTypes: str = ""
    contentType: str = "application/vnd.kubernetes.protobuf"
    # client-go's token bucket: 0 means client-go's defaults (5 and 10), a negative QPS no limit
    qps: Float32 = 50.0
    burst: Int32 = Field(default=100, ge=0)


class SchedulerConfiguration(_Strict):
    apiVersion: str = API_VERSION
    kind: str = KIND
    profiles: list[Profile] = Field(default_factory=list)
    percentageOfNodesToScore: Int32 | None = Field(default=None, ge=0, le=100)
    podInitialBackoffSeconds: int = Field(default=DEFAULT_POD_INITIAL_BACKOFF_SECONDS, ge=0)
    podMaxBackoffSeconds: int = Field(default=DEFAULT_POD_MAX_BACKOFF_SECONDS, ge=0)
    # seconds; a Go duration holds about 292 years
    podMaxInUnschedulablePodsDuration: float = Field(
        default=DEFAULT_MAX_UNSCHEDULABLE_SECONDS, le=MAX_SECONDS
    )
    parallelism: Int32 = Field(default=16, ge=1)
    leaderElection: LeaderElection = Field(default_factory=LeaderElection)
    clientConnection: ClientConnection = Field(default_factory=ClientConnection)
    # read so that existing files load; koordpy does not act on them (see config.unhonoured)
    healthzBindAddress: str | None = None
    metricsBindAddress: str | None = None
    enableProfiling: bool | None = None
    enableContentionProfiling: bool | None = None
    delayCacheUntilActive: bool | None = None
    featureGates: dict[str, bool] | None = None
    extenders: list[Any] | None = None

    @field_validator("apiVersion")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if value not in API_VERSIONS:
            raise ValueError(f"must be {' or '.join(API_VERSIONS)}, got {value!r}")
        return value

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value != KIND:
            raise ValueError(f"must be {KIND}, got {value!r}")
        return value

    @field_validator("extenders")
    @classmethod
    def _no_extenders(cls, value: list[Any] | None) -> list[Any] | None:
        if value:
            raise ValueError("scheduler extenders are not supported; write a plugin instead")
        return value

    @model_validator(mode="after")
    def _default_profiles(self) -> SchedulerConfiguration:
        if not self.profiles:
            self.profiles = [Profile(schedulerName=name) for name in DEFAULT_PROFILE_NAMES]
        return self


def default_configuration() -> SchedulerConfiguration:
    return SchedulerConfiguration()


@dataclass(slots=True)
class Reading:
    """A configuration document, as far as it could be read."""

    source: str
    # the whole document, when it matches the schema
    config: SchedulerConfiguration | None
    # every profile whose own part could be read, with its index in the file (all of them when
    # `config` is there); entries that could not be read are named UNREADABLE
    profiles: list[tuple[int, Profile]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _salvage_ref(raw: Any) -> PluginRef:
    try:
        return PluginRef.model_validate(raw)
    except ValidationError:
        return PluginRef.model_construct(name=UNREADABLE, weight=None)


def _salvage_plugins(raw: Any) -> Plugins | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return None
    sets: dict[str, Any] = {}
    for point in POINTS:
        raw_set = raw.get(point)
        if not isinstance(raw_set, Mapping):
            continue
        lists: dict[str, Any] = {}
        for key in ("enabled", "disabled"):
            items = raw_set.get(key)
            lists[key] = [_salvage_ref(item) for item in items] if isinstance(items, list) else []
        sets[point] = PluginSet.model_construct(**lists)
    return Plugins.model_construct(**{p: sets.get(p, PluginSet()) for p in POINTS})


def _salvage_plugin_config(raw: Any) -> PluginConfig:
    try:
        return PluginConfig.model_validate(raw)
    except ValidationError:
        return PluginConfig.model_construct(name=UNREADABLE, args={})


def _salvage_profile(raw: Any) -> Profile | None:
    """The parts of a profile that can be read, for checking its plugins; None if none can."""
    if not isinstance(raw, Mapping):
        return None
    try:
        return Profile.model_validate(raw)
    except ValidationError:
        pass
    name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    configs = raw.get("pluginConfig")
    return Profile.model_construct(
        schedulerName=name if isinstance(name, str) else UNREADABLE,
        plugins=_salvage_plugins(raw.get("plugins")),
        pluginConfig=[_salvage_plugin_config(c) for c in configs] if isinstance(configs, list) else [],
        percentageOfNodesToScore=None,
    )


def _duplicate_names(profiles: list[tuple[int, Profile]]) -> list[Problem]:
    problems = []
    first: dict[str, int] = {}
    for i, profile in profiles:
        name = profile.schedulerName
        if name == UNREADABLE:
            continue
        if name in first:
            problems.append(
                Problem(
                    f"profiles[{i}].schedulerName",
                    f"schedulerName {name!r} is used by profiles[{first[name]}] already",
                )
            )
        else:
            first[name] = i
    return problems


def _backoff_order(data: Mapping[str, Any]) -> list[Problem]:
    initial = data.get("podInitialBackoffSeconds", DEFAULT_POD_INITIAL_BACKOFF_SECONDS)
    most = data.get("podMaxBackoffSeconds", DEFAULT_POD_MAX_BACKOFF_SECONDS)
    if type(initial) is int and type(most) is int and most < initial:
        return [
            Problem("podMaxBackoffSeconds", f"must be >= podInitialBackoffSeconds ({initial}), got {most}")
        ]
    return []


def read_configuration(data: Any, source: str = "") -> Reading:
    """Every problem of the document's schema and of its profiles' names, at the user's paths."""
    if data is None:
        config = default_configuration()
        return Reading(source, config, list(enumerate(config.profiles)))
    if not isinstance(data, Mapping):
        return Reading(source, None, problems=[Problem("", "the configuration must be a YAML mapping")])
    reading = Reading(source, None)
    try:
        reading.config = SchedulerConfiguration.model_validate(data)
        reading.profiles = list(enumerate(reading.config.profiles))
    except ValidationError as err:
        reading.problems.extend(problems_from_validation_error(err, data))
        raw_profiles = data.get("profiles")
        if isinstance(raw_profiles, list):
            for i, raw in enumerate(raw_profiles):
                profile = _salvage_profile(raw)
                if profile is not None:
                    reading.profiles.append((i, profile))
    reading.problems.extend(_duplicate_names(reading.profiles))
    reading.problems.extend(_backoff_order(data))
    return reading


def parse_configuration(data: Any, source: str = "") -> SchedulerConfiguration:
    """The configuration, or a ConfigError with every problem of its schema (plugins are checked
    when the scheduler is built, or by framework.profile.check_configuration)."""
    reading = read_configuration(data, source)
    if reading.problems or reading.config is None:
        raise ConfigError.of(reading.problems, source)
    return reading.config


def load_document(path: str | Path) -> Any:
    """The YAML document of a configuration file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError("", f"cannot read the configuration: {err.strerror}", str(p)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError("", f"not valid YAML: {err}", str(p)) from None
    except ValueError as err:
        # the constructor refuses what Python will not convert: an integer of thousands of digits
        raise ConfigError("", f"cannot read the configuration: {err}", str(p)) from None


def load_configuration(path: str | Path) -> SchedulerConfiguration:
    return parse_configuration(load_document(path), str(path))
