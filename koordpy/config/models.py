"""The scheduler configuration, in kube-scheduler's `KubeSchedulerConfiguration` shape
(`kubescheduler.config.k8s.io/v1`). Plugin args stay raw dicts here; each plugin's own args model
validates them when a profile is built (see framework.profile)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from koordpy.config.defaults import (
    DEFAULT_MAX_UNSCHEDULABLE_SECONDS,
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_BACKOFF_SECONDS,
    DEFAULT_PROFILE_NAMES,
)
from koordpy.config.errors import ConfigError, from_validation_error

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PluginRef(_Strict):
    name: str = Field(min_length=1)
    weight: int | None = Field(default=None, ge=0)


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
    schedulerName: str = Field(default="default-scheduler", min_length=1)
    plugins: Plugins | None = None
    pluginConfig: list[PluginConfig] = Field(default_factory=list)
    percentageOfNodesToScore: int | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _unique_plugin_config(self) -> Profile:
        seen: set[str] = set()
        for pc in self.pluginConfig:
            if pc.name in seen:
                raise ValueError(f"pluginConfig for {pc.name} is given twice")
            seen.add(pc.name)
        return self


class LeaderElection(BaseModel):
    model_config = ConfigDict(extra="allow")
    leaderElect: bool = False
    leaseDuration: str = "15s"
    renewDeadline: str = "10s"
    retryPeriod: str = "2s"
    resourceName: str = "koordpy"
    resourceNamespace: str = "kube-system"


class SchedulerConfiguration(_Strict):
    apiVersion: str = API_VERSION
    kind: str = KIND
    profiles: list[Profile] = Field(default_factory=list)
    percentageOfNodesToScore: int | None = Field(default=None, ge=0, le=100)
    podInitialBackoffSeconds: int = Field(default=DEFAULT_POD_INITIAL_BACKOFF_SECONDS, ge=0)
    podMaxBackoffSeconds: int = Field(default=DEFAULT_POD_MAX_BACKOFF_SECONDS, ge=0)
    podMaxInUnschedulablePodsDuration: float = DEFAULT_MAX_UNSCHEDULABLE_SECONDS
    parallelism: int = Field(default=16, ge=1)
    leaderElection: LeaderElection = Field(default_factory=LeaderElection)
    # accepted for compatibility with existing files; koordpy has its own flags for these
    clientConnection: dict[str, Any] | None = None
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
        if value != API_VERSION:
            raise ValueError(f"must be {API_VERSION}, got {value!r}")
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
    def _profiles(self) -> SchedulerConfiguration:
        if not self.profiles:
            self.profiles = [Profile(schedulerName=name) for name in DEFAULT_PROFILE_NAMES]
        names = [p.schedulerName for p in self.profiles]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"schedulerName {name!r} is used by more than one profile")
        if self.podMaxBackoffSeconds < self.podInitialBackoffSeconds:
            raise ValueError("podMaxBackoffSeconds must be >= podInitialBackoffSeconds")
        return self


def default_configuration() -> SchedulerConfiguration:
    return SchedulerConfiguration()


def parse_configuration(data: Any, source: str = "") -> SchedulerConfiguration:
    if data is None:
        return default_configuration()
    if not isinstance(data, dict):
        raise ConfigError("", "the configuration must be a YAML mapping", source)
    try:
        return SchedulerConfiguration.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err, "", source) from None


def load_configuration(path: str | Path) -> SchedulerConfiguration:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError("", f"cannot read the configuration: {err.strerror}", str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError("", f"not valid YAML: {err}", str(p)) from None
    return parse_configuration(data, str(p))
