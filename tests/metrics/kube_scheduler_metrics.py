"""The metrics a kube-scheduler v1.33 process registers by default, transcribed from Kubernetes
v1.33.13's sources (the feature gates at their 1.33 defaults: SchedulerQueueingHints and
SchedulerAsyncPreemption on).

Left out on purpose: the Go runtime (`go_*`), the serving stack's authentication, authorization
and certificate controllers (`apiserver_*`, `authentication_*`, `authorization_*`, `workqueue_*`),
and the metrics framework's own (`registered_metrics_total`, `kubernetes_build_info`,
`kubernetes_feature_enabled`, ...): none of them describes scheduling.

Buckets are written as kube writes them: `exp(start, factor, count)` for component-base's
ExponentialBuckets, a tuple for explicit ones.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULER_METRICS_GO = "pkg/scheduler/metrics/metrics.go"
VOLUME_METRICS_GO = "pkg/scheduler/framework/plugins/volumebinding/metrics/metrics.go"
REST_CLIENT_GO = "staging/src/k8s.io/component-base/metrics/prometheus/restclient/metrics.go"
LEADER_ELECTION_GO = "staging/src/k8s.io/component-base/metrics/prometheus/clientgo/leaderelection/metrics.go"
# component-base's legacyregistry registers client_golang's process collector (procfs)
PROCESS_GO = "staging/src/k8s.io/component-base/metrics/legacyregistry/registry.go"


@dataclass(frozen=True)
class Exp:
    """component-base's ExponentialBuckets(start, factor, count)."""

    start: float
    factor: float
    count: int

    def values(self) -> tuple[float, ...]:
        # client_golang multiplies step by step; so does this, for the same floats
        out: list[float] = []
        value = self.start
        for _ in range(self.count):
            out.append(value)
            value *= self.factor
        return tuple(out)


@dataclass(frozen=True)
class KubeMetric:
    name: str
    type: str  # counter, gauge or histogram
    labels: tuple[str, ...]
    source: str
    buckets: Exp | tuple[float, ...] | None = None

    def bucket_values(self) -> tuple[float, ...]:
        if isinstance(self.buckets, Exp):
            return self.buckets.values()
        return self.buckets or ()


REST_CLIENT_LATENCY = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
REST_CLIENT_SIZE = (64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
CERT_ROTATION_AGE = (
    600,
    1800,
    3600,
    14400,
    86400,
    604800,
    2592000,
    7776000,
    15552000,
    31104000,
    124416000,
)

S = SCHEDULER_METRICS_GO
KUBE_SCHEDULER_1_33: tuple[KubeMetric, ...] = (
    KubeMetric("scheduler_schedule_attempts_total", "counter", ("result", "profile"), S),
    KubeMetric("scheduler_event_handling_duration_seconds", "histogram", ("event",), S, Exp(0.0001, 2, 12)),
    KubeMetric(
        "scheduler_scheduling_attempt_duration_seconds",
        "histogram",
        ("result", "profile"),
        S,
        Exp(0.001, 2, 15),
    ),
    KubeMetric("scheduler_scheduling_algorithm_duration_seconds", "histogram", (), S, Exp(0.001, 2, 15)),
    KubeMetric("scheduler_preemption_victims", "histogram", (), S, Exp(1, 2, 7)),
    KubeMetric("scheduler_preemption_attempts_total", "counter", (), S),
    KubeMetric("scheduler_pending_pods", "gauge", ("queue",), S),
    KubeMetric("scheduler_inflight_events", "gauge", ("event",), S),
    KubeMetric("scheduler_goroutines", "gauge", ("operation",), S),
    KubeMetric(
        "scheduler_pod_scheduling_sli_duration_seconds", "histogram", ("attempts",), S, Exp(0.01, 2, 20)
    ),
    KubeMetric("scheduler_pod_scheduling_attempts", "histogram", (), S, Exp(1, 2, 5)),
    KubeMetric(
        "scheduler_framework_extension_point_duration_seconds",
        "histogram",
        ("extension_point", "status", "profile"),
        S,
        Exp(0.0001, 2, 12),
    ),
    KubeMetric(
        "scheduler_plugin_execution_duration_seconds",
        "histogram",
        ("plugin", "extension_point", "status"),
        S,
        Exp(0.00001, 1.5, 20),
    ),
    KubeMetric(
        "scheduler_queueing_hint_execution_duration_seconds",
        "histogram",
        ("plugin", "event", "hint"),
        S,
        Exp(0.00001, 1.5, 20),
    ),
    KubeMetric("scheduler_queue_incoming_pods_total", "counter", ("queue", "event"), S),
    KubeMetric("scheduler_permit_wait_duration_seconds", "histogram", ("result",), S, Exp(0.001, 2, 15)),
    KubeMetric("scheduler_scheduler_cache_size", "gauge", ("type",), S),
    KubeMetric("scheduler_cache_size", "gauge", ("type",), S),
    KubeMetric("scheduler_unschedulable_pods", "gauge", ("plugin", "profile"), S),
    KubeMetric("scheduler_plugin_evaluation_total", "counter", ("plugin", "extension_point", "profile"), S),
    KubeMetric(
        "scheduler_preemption_goroutines_duration_seconds", "histogram", ("result",), S, Exp(0.01, 2, 20)
    ),
    KubeMetric("scheduler_preemption_goroutines_execution_total", "counter", ("result",), S),
    KubeMetric("scheduler_volume_binder_cache_requests_total", "counter", ("operation",), VOLUME_METRICS_GO),
    KubeMetric("scheduler_volume_scheduling_stage_error_total", "counter", ("operation",), VOLUME_METRICS_GO),
    KubeMetric(
        "rest_client_request_duration_seconds",
        "histogram",
        ("verb", "host"),
        REST_CLIENT_GO,
        REST_CLIENT_LATENCY,
    ),
    KubeMetric(
        "rest_client_request_size_bytes", "histogram", ("verb", "host"), REST_CLIENT_GO, REST_CLIENT_SIZE
    ),
    KubeMetric(
        "rest_client_response_size_bytes", "histogram", ("verb", "host"), REST_CLIENT_GO, REST_CLIENT_SIZE
    ),
    KubeMetric(
        "rest_client_rate_limiter_duration_seconds",
        "histogram",
        ("verb", "host"),
        REST_CLIENT_GO,
        REST_CLIENT_LATENCY,
    ),
    KubeMetric("rest_client_requests_total", "counter", ("code", "method", "host"), REST_CLIENT_GO),
    KubeMetric("rest_client_request_retries_total", "counter", ("code", "verb", "host"), REST_CLIENT_GO),
    KubeMetric("rest_client_exec_plugin_ttl_seconds", "gauge", (), REST_CLIENT_GO),
    KubeMetric(
        "rest_client_exec_plugin_certificate_rotation_age", "histogram", (), REST_CLIENT_GO, CERT_ROTATION_AGE
    ),
    KubeMetric("rest_client_exec_plugin_call_total", "counter", ("code", "call_status"), REST_CLIENT_GO),
    KubeMetric("rest_client_transport_cache_entries", "gauge", (), REST_CLIENT_GO),
    KubeMetric("rest_client_transport_create_calls_total", "counter", ("result",), REST_CLIENT_GO),
    KubeMetric("leader_election_master_status", "gauge", ("name",), LEADER_ELECTION_GO),
    KubeMetric("leader_election_slowpath_total", "counter", ("name",), LEADER_ELECTION_GO),
    KubeMetric("process_cpu_seconds_total", "counter", (), PROCESS_GO),
    KubeMetric("process_open_fds", "gauge", (), PROCESS_GO),
    KubeMetric("process_max_fds", "gauge", (), PROCESS_GO),
    KubeMetric("process_virtual_memory_bytes", "gauge", (), PROCESS_GO),
    KubeMetric("process_virtual_memory_max_bytes", "gauge", (), PROCESS_GO),
    KubeMetric("process_resident_memory_bytes", "gauge", (), PROCESS_GO),
    KubeMetric("process_start_time_seconds", "gauge", (), PROCESS_GO),
    KubeMetric("process_network_receive_bytes_total", "counter", (), PROCESS_GO),
    KubeMetric("process_network_transmit_bytes_total", "counter", (), PROCESS_GO),
)

BY_NAME = {m.name: m for m in KUBE_SCHEDULER_1_33}
