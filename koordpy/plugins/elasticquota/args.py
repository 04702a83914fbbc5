"""koord-scheduler's ElasticQuotaArgs, as the ElasticQuota plugin reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from koordpy.api.duration import parse_duration
from koordpy.api.errors import SpecError
from koordpy.api.resources import ResourceList, parse_resource_list
from koordpy.config.args import PluginArgs
from koordpy.plugins.elasticquota.koordinator_book import KoordinatorRules

_REVOKE = (
    "koordpy takes borrowed quota back by preemption, when a pod within its quota's min needs it, "
    "not by a loop that evicts from every quota above its runtime"
)


def resource_list(value: Mapping[str, Any] | None) -> ResourceList | None:
    if value is None:
        return None
    try:
        return parse_resource_list(value, "")
    except SpecError as err:
        raise ValueError(err.message) from None


def _duration(value: float | str) -> float:
    seconds = parse_duration(value) if isinstance(value, str) else float(value)
    if seconds < 0:
        raise ValueError("must not be negative")
    return seconds


class ElasticQuotaArgs(PluginArgs):
    """koord-scheduler's ElasticQuotaArgs, with its defaults (pkg/scheduler/apis/config/v1
    defaults.go SetDefaults_ElasticQuotaArgs)."""

    # quotaGroupNamespace (where koord-scheduler creates the system and default quota objects; koordpy
    # keeps them in memory) and quotaSnapshotUpdateInterval (koordpy reads its quotas as they are)
    # change nothing here; enableQueueHint turns on Koordinator's queueing hints (queueing_hints)
    UNHONOURED_FIELDS = {
        "delayEvictTime": _REVOKE,
        "revokePodInterval": _REVOKE,
        "monitorAllQuotas": _REVOKE,
        "hookPlugins": "koordpy runs no quota hook plugins",
    }

    delay_evict_time: float | str = Field(default=120.0)
    revoke_pod_interval: float | str = Field(default=1.0)
    default_quota_group_max: dict[str, Any] | None = None
    system_quota_group_max: dict[str, Any] | None = None
    quota_group_namespace: str = "koordinator-system"
    monitor_all_quotas: bool = False
    enable_check_parent_quota: bool = False
    enable_runtime_quota: bool = True
    enable_min_quota_scale: bool = True
    disable_default_quota_preemption: bool = True
    enable_queue_hint: bool = False
    quota_snapshot_update_interval: float | str = Field(default=120.0)
    hook_plugins: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("delay_evict_time", "revoke_pod_interval", "quota_snapshot_update_interval")
    @classmethod
    def _seconds(cls, value: float | str) -> float:
        return _duration(value)

    @field_validator("default_quota_group_max", "system_quota_group_max")
    @classmethod
    def _quantities(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        resource_list(value)
        return value

    def unhonoured_fields(self) -> list[str]:
        """The revoke loop's settings matter only with the loop on; hook plugins only if named."""
        keys = super().unhonoured_fields()
        if not self.monitor_all_quotas:
            keys = [k for k in keys if k not in ("delayEvictTime", "revokePodInterval", "monitorAllQuotas")]
        if not self.hook_plugins:
            keys = [k for k in keys if k != "hookPlugins"]
        return keys

    def rules(self) -> KoordinatorRules:
        return KoordinatorRules(
            enable_runtime_quota=self.enable_runtime_quota,
            check_parents=self.enable_check_parent_quota,
            disable_default_quota_preemption=self.disable_default_quota_preemption,
        )
