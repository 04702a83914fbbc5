"""Prometheus collectors for `koordpy run`.

Metrics that mean what kube-scheduler's mean carry its names, labels and buckets, so existing
dashboards and alerts work unchanged; koordpy's own are prefixed `koordpy_`. Every `SchedulerMetrics`
owns its `CollectorRegistry`, so several schedulers (as in tests) never share or clash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# the queue labels of scheduler_pending_pods, always exported (zero when empty)
PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ExponentialBuckets, so bucket boundaries match kube-scheduler's exactly."""
    return tuple(start * factor**i for i in range(count))


class _WriteBacklog(Collector):
    def __init__(self, source: Callable[[], Mapping[str, int]]) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "koordpy_api_writes_queued",
            "API writes decided and not sent yet, by lane: 'status' (pod conditions and nominations, "
            "at most one per pod) and 'events'.",
            labels=["lane"],
        )
        for lane, n in self._source().items():
            family.add_metric([lane], float(n))
        yield family

    def describe(self) -> Iterable[Metric]:
        return []


class _PendingPods(Collector):
    """Reads the queue sizes when scraped rather than on every queue change: the scheduler's hot
    path stays free of gauge updates."""

    def __init__(self, source: Callable[[], Mapping[str, int]]) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
            "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods "
            "that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable "
            "pods that the scheduler never attempted to schedule because they are gated.",
            labels=["queue"],
        )
        counts = self._source()
        for queue in PENDING_QUEUES:
            family.add_metric([queue], float(counts.get(queue, 0)))
        for queue, n in counts.items():
            if queue not in PENDING_QUEUES:
                family.add_metric([queue], float(n))
        yield family

    def describe(self) -> Iterable[Metric]:
        # Without this the registry would call collect() at registration time, before the source exists.
        return ()


class _ScrapeGauges:
    """Plain gauges whose values are computed when Prometheus scrapes."""

    HELP = {
        "koordpy_gang_groups_waiting": "Gang groups with members reserved at Permit, waiting for the rest.",
        "koordpy_gpu_idle": "GPUs (nvidia.com/gpu) allocatable and not requested by any pod.",
        "koordpy_gpu_fragmented": "Idle GPUs on nodes that can no longer take a pod of the most common "
        "GPU request size.",
    }

    def __init__(self, source: Callable[[], Mapping[str, float]]) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        values = self._source()
        for name, help_text in self.HELP.items():
            family = GaugeMetricFamily(name, help_text)
            family.add_metric([], float(values.get(name, 0.0)))
            yield family

    def describe(self) -> Iterable[Metric]:
        return []


class SchedulerMetrics:
    """The scheduler's `SchedulerObserver`, plus what the cluster world reports (bindings, watches,
    leadership)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
            "might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=r,
        )
        self.bindings = Counter(
            "koordpy_bindings_total",
            "Binding API calls by result: 'success', or 'error' when the apiserver refused or the call "
            "failed.",
            ["result"],
            registry=r,
        )
        self.binding_duration = Histogram(
            "koordpy_binding_duration_seconds",
            "Duration of the binding cycle's API calls (PreBind annotations and the pods/binding request).",
            ["result"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.bindings_in_flight = Gauge(
            "koordpy_bindings_in_flight", "Bindings sent to the apiserver and not yet answered.", registry=r
        )
        self.api_writes = Counter(
            "koordpy_api_writes_total",
            "Writes other than bindings, by what was written and the result.",
            ["operation", "result"],
            registry=r,
        )
        self.events_dropped = Counter(
            "koordpy_events_dropped_total",
            "Events not recorded because too many were waiting to be sent (client-go's recorder drops "
            "them the same way).",
            registry=r,
        )
        self.watch_restarts = Counter(
            "koordpy_watch_restarts_total",
            "Watches that ended and were started again, by resource and reason "
            "('expired' re-lists after 410 Gone, 'error' backs off, 'closed' is the server's normal "
            "timeout).",
            ["resource", "reason"],
            registry=r,
        )
        self.informer_events = Counter(
            "koordpy_informer_events_total",
            "Objects delivered by the informers to the scheduler, by resource and event type.",
            ["resource", "type"],
            registry=r,
        )
        self.cache_checks = Counter(
            "koordpy_cache_checks_total",
            "Checks of the scheduler cache's arrays against its records (periodic, and after any "
            "internal error), by result: 'consistent'; 'repaired' (found inconsistent and rebuilt); "
            "'failed' (still inconsistent after rebuilding: /healthz fails).",
            ["result"],
            registry=r,
        )
        self.event_failures = Counter(
            "koordpy_informer_event_failures_total",
            "API events the scheduler failed to apply, by resource; each is followed by a cache check "
            "and one more try, and an object that fails again is left out with a Warning event.",
            ["resource"],
            registry=r,
        )
        # plugin durations of the running cycle, summed per extension point and flushed with the
        # cycle's profile when the attempt ends (the observer hears of plugins without their profile)
        self._cycle_points: dict[str, tuple[float, str]] = {}

    # ------------------------------------------------------------------ SchedulerObserver
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self.schedule_attempts.labels(result, profile).inc()
        self.attempt_duration.labels(result, profile).observe(seconds)
        if self._cycle_points:
            for point, (total, status) in self._cycle_points.items():
                self.extension_point_duration.labels(point, status, profile).observe(total)
            self._cycle_points.clear()

    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None:
        self.sli_duration.labels(str(attempts)).observe(max(0.0, seconds_since_first_attempt))
        self.scheduling_attempts.observe(attempts)

    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None:
        self.plugin_duration.labels(plugin, point, status).observe(seconds)
        total, worst = self._cycle_points.get(point, (0.0, "Success"))
        # an extension point's status is that of the first plugin that did not succeed
        self._cycle_points[point] = (total + seconds, worst if worst != "Success" else status)

    def preemption(self, profile: str, victims: int) -> None:
        self.preemption_attempts.inc()
        if victims:
            self.preemption_victims.observe(victims)

    def cache_check(self, result: str) -> None:
        self.cache_checks.labels(result).inc()

    # ------------------------------------------------------------------ the cluster world
    def track_write_backlog(self, source: Callable[[], Mapping[str, int]]) -> None:
        """`koordpy_api_writes_queued{lane}`: writes decided and not sent yet (bindings are not
        queued: each is sent as soon as it is decided)."""
        self.registry.register(_WriteBacklog(source))

    def track_pending(self, source: Callable[[], Mapping[str, int]]) -> None:
        self.registry.register(_PendingPods(source))

    def binding(self, result: str, seconds: float) -> None:
        self.bindings.labels(result).inc()
        self.binding_duration.labels(result).observe(seconds)

    def api_write(self, operation: str, ok: bool) -> None:
        self.api_writes.labels(operation, "success" if ok else "error").inc()

    def watch_restart(self, resource: str, reason: str) -> None:
        self.watch_restarts.labels(resource, reason).inc()

    def informer_event(self, resource: str, event_type: str) -> None:
        self.informer_events.labels(resource, event_type).inc()

    def set_leader(self, lease: str, is_leader: bool) -> None:
        self.leader.labels(lease).set(1.0 if is_leader else 0.0)

    # ------------------------------------------------------------------ gangs and GPUs
    def gang_event(self, event: str, value: float) -> None:
        """`bound` with the seconds from the group's first member seen to its release,
        `rejected:<reason>` once per rejected group, `job_preemption:<result>` with its duration."""
        if event == "bound":
            self._gang_bound_seconds().observe(value)
        elif event.startswith("rejected:"):
            self._gang_rejections().labels(event.split(":", 1)[1]).inc()
        elif event.startswith("job_preemption:"):
            self._job_preemption_seconds().labels(event.split(":", 1)[1]).observe(value)

    def _job_preemption_seconds(self) -> Histogram:
        metric = getattr(self, "_job_preemption", None)
        if metric is None:
            metric = Histogram(
                "scheduler_job_preemption_duration_seconds",
                "Seconds spent deciding a job-level preemption for a gang group, by result "
                "(success: victims chosen and members nominated; failure: nobody evicted).",
                ["result"],
                buckets=exponential_buckets(0.001, 2, 20),
                registry=self.registry,
            )
            self._job_preemption = metric
        return metric

    def _gang_bound_seconds(self) -> Histogram:
        metric = getattr(self, "_gang_bound", None)
        if metric is None:
            metric = Histogram(
                "koordpy_gang_time_to_bound_seconds",
                "Seconds from the first member of a gang group being seen to the group being released "
                "to bind as a whole.",
                buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
                registry=self.registry,
            )
            self._gang_bound = metric
        return metric

    def _gang_rejections(self) -> Counter:
        metric = getattr(self, "_gang_rejected", None)
        if metric is None:
            metric = Counter(
                "koordpy_gang_rejections_total",
                "Gang groups rolled back or timed out as a whole, by reason (Unschedulable, Timeout).",
                ["reason"],
                registry=self.registry,
            )
            self._gang_rejected = metric
        return metric

    def track_gauges(self, source: Callable[[], Mapping[str, float]]) -> None:
        """Gauges read at scrape time: koordpy_gang_groups_waiting, koordpy_gpu_idle,
        koordpy_gpu_fragmented (see the README for the fragmentation definition)."""
        self.registry.register(_ScrapeGauges(source))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    content_type = CONTENT_TYPE_LATEST
