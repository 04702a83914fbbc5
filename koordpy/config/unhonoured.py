"""Settings of KubeSchedulerConfiguration that koordpy reads but does not act on, as data.

A file written for kube-scheduler or koord-scheduler loads unchanged; each of these settings it
sets (to a value koordpy's own behaviour does not already match) is named in one warning, with
what koordpy does instead, rather than dropped silently. A setting koordpy comes to honour leaves
this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True, slots=True)
class UnhonouredSetting:
    path: tuple[str, ...]
    instead: str
    # values that are koordpy's behaviour anyway: a file setting one of them loses nothing
    honoured: tuple[object, ...] = ()


UNHONOURED_SETTINGS: tuple[UnhonouredSetting, ...] = (
    UnhonouredSetting(
        ("clientConnection", "acceptContentTypes"),
        "koordpy asks the API server for JSON",
        ("", "application/json"),
    ),
    UnhonouredSetting(
        ("clientConnection", "contentType"), "koordpy sends JSON to the API server", ("application/json",)
    ),
    UnhonouredSetting(("healthzBindAddress",), "/healthz is served at --bind-address:--secure-port"),
    UnhonouredSetting(("metricsBindAddress",), "/metrics is served at --bind-address:--secure-port"),
    UnhonouredSetting(("enableProfiling",), "koordpy serves no profiling endpoints", (False,)),
    UnhonouredSetting(("enableContentionProfiling",), "koordpy serves no profiling endpoints", (False,)),
    UnhonouredSetting(
        ("delayCacheUntilActive",),
        "a standby keeps its cache filled, so that it schedules as soon as it takes over",
        (False,),
    ),
    UnhonouredSetting(("featureGates",), "koordpy has no feature gates", ({},)),
    UnhonouredSetting(
        ("parallelism",),
        "filters and scores run over every node at once on arrays, not in a pool of workers",
    ),
    UnhonouredSetting(
        ("leaderElection", "resourceLock"), "koordpy always holds a coordination.k8s.io Lease", ("leases",)
    ),
)


def _set_value(model: BaseModel, path: tuple[str, ...]) -> tuple[bool, object]:
    """(whether the file sets the setting, its value)."""
    node: object = model
    for part in path:
        if not isinstance(node, BaseModel) or part not in node.model_fields_set:
            return False, None
        node = getattr(node, part)
    return True, node


def unhonoured_settings(config: BaseModel) -> list[str]:
    """`path: what koordpy does instead` for each setting of the table the configuration sets."""
    out = []
    for setting in UNHONOURED_SETTINGS:
        is_set, value = _set_value(config, setting.path)
        if is_set and value is not None and value not in setting.honoured:
            out.append(f"{'.'.join(setting.path)}: {setting.instead}")
    return out
