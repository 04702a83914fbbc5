"""Prometheus collectors for `koordpy run`.

Metrics that mean what kube-scheduler's mean carry its names, labels and buckets, so existing
dashboards and alerts work unchanged; koordpy's own are prefixed `koordpy_`. Every `SchedulerMetrics`
owns its `CollectorRegistry`, so several schedulers (as in tests) never share or clash.

The scheduling cycle pays for one histogram observation per extension point and one dictionary
update per plugin, kept in plain numbers rather than prometheus_client's locked values; everything
that can be read off the scheduler's state (queue and cache sizes, pods by the plugin that rejected
them) is computed when Prometheus scrapes, not kept up to date.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from koordpy.api.elasticquota import KOORDINATOR_GROUP
from koordpy.plugins.elasticquota.book import QuotaBook
from koordpy.queue.placement import GATED

if TYPE_CHECKING:
    from koordpy.scheduler import Scheduler

# the queue labels of scheduler_pending_pods, always exported (zero when empty)
PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")
# kube-scheduler caps the `attempts` label of the SLI histogram here, to bound its series
ATTEMPTS_LABEL_CAP = 15
# client-go's buckets for rest_client_request_duration_seconds and its rate limiter's wait
REQUEST_DURATION_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

# kube-scheduler's metrics (v1.33) that koordpy exports with the same meaning, type, labels and
# buckets; docs/deploy.md lists them with the ones left out
KUBE_SCHEDULER_METRICS = frozenset(
    {
        "scheduler_schedule_attempts_total",
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_scheduling_algorithm_duration_seconds",
        "scheduler_event_handling_duration_seconds",
        "scheduler_pod_scheduling_sli_duration_seconds",
        "scheduler_pod_scheduling_attempts",
        "scheduler_framework_extension_point_duration_seconds",
        "scheduler_plugin_execution_duration_seconds",
        "scheduler_plugin_evaluation_total",
        "scheduler_permit_wait_duration_seconds",
        "scheduler_preemption_attempts_total",
        "scheduler_preemption_victims",
        "scheduler_pending_pods",
        "scheduler_queue_incoming_pods_total",
        "scheduler_unschedulable_pods",
        "scheduler_cache_size",
        "scheduler_scheduler_cache_size",
        "scheduler_goroutines",
        "rest_client_requests_total",
        "rest_client_request_duration_seconds",
        "rest_client_rate_limiter_duration_seconds",
        "leader_election_master_status",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_virtual_memory_bytes",
        "process_virtual_memory_max_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_network_receive_bytes_total",
        "process_network_transmit_bytes_total",
    }
)

# kube-scheduler's metrics (v1.33) that koordpy does not export, and why
KUBE_SCHEDULER_METRICS_LEFT_OUT: Mapping[str, str] = {
    "scheduler_inflight_events": "koordpy's queue keeps the cycle of the last event that moved pods, "
    "not the events that arrived while pods were in flight (it has no queueing hints to replay them to)",
    "scheduler_queueing_hint_execution_duration_seconds": "koordpy's plugins register the events that "
    "can help their pods, with no queueing hint functions to time",
    "scheduler_preemption_goroutines_duration_seconds": "preemption carries out each eviction as a "
    'write of its own (koordpy_api_writes_total{operation="preemption_delete"}), not one task per '
    "preemptor",
    "scheduler_preemption_goroutines_execution_total": "as scheduler_preemption_goroutines_duration_seconds",
    "scheduler_volume_binder_cache_requests_total": "VolumeBinding's assumed volumes and claims live in "
    "the scheduler's storage catalog, which counts no lookups",
    "scheduler_volume_scheduling_stage_error_total": "a failed volume binding is a failed binding "
    '(scheduler_schedule_attempts_total{result="error"}), its writes counted in koordpy_api_writes_total',
    "rest_client_request_size_bytes": "not measured: requests are small JSON writes",
    "rest_client_response_size_bytes": "not measured: responses are read whole or streamed by watches",
    "rest_client_request_retries_total": "koordpy's client does not retry a request itself; "
    "the callers decide (bindings are re-queued, watches restarted)",
    "rest_client_exec_plugin_ttl_seconds": "exec credential plugins are run by kubernetes-asyncio, "
    "which reports nothing of them",
    "rest_client_exec_plugin_certificate_rotation_age": "as rest_client_exec_plugin_ttl_seconds",
    "rest_client_exec_plugin_call_total": "as rest_client_exec_plugin_ttl_seconds",
    "rest_client_transport_cache_entries": "one connection pool serves every request; there is no "
    "transport cache",
    "rest_client_transport_create_calls_total": "as rest_client_transport_cache_entries",
    "leader_election_slowpath_total": "koordpy's elector reads the Lease before every renewal: "
    "there is no fast path to fall back from",
}


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ExponentialBuckets, multiplied step by step as Go does, so bucket
    boundaries (and the `le` labels dashboards select on) match kube-scheduler's to the last digit."""
    out: list[float] = []
    for _ in range(count):
        out.append(start)
        start *= factor
    return tuple(out)


class _LoopHistogram(Collector):
    """A histogram kept in plain numbers: an observation is a bisect and two additions, where
    prometheus_client's takes a lock per bucket and per sum. The scheduler's event loop is its only
    writer and scrapes run on that loop too, so nothing needs one; a scrape works on a copy of each
    series, whose count it takes from the buckets, so a series is never inconsistent in itself."""

    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        documentation: str,
        labels: tuple[str, ...],
        buckets: tuple[float, ...],
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labels
        self.bounds = buckets
        # written as prometheus_client writes a Histogram's `le` (Go's shortest float)
        self._les = [*(str(floatToGoString(b)) for b in buckets), "+Inf"]  # type: ignore[no-untyped-call]
        # per label values: the count of each bucket (the last one +Inf), then the sum
        self.series: dict[tuple[str, ...], list[float]] = {}
        if not labels:
            # an unlabelled histogram is exported from the start, zeros included, as kube's are
            self.series[()] = [0.0] * (len(buckets) + 2)
        registry.register(self)

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = [0.0] * (len(self.bounds) + 2)
        series[bisect_left(self.bounds, value)] += 1
        series[-1] += value

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labelnames))
        for labels, series in list(self.series.items()):
            counts = list(series)
            cumulative: list[tuple[str, float]] = []
            total = 0.0
            for le, n in zip(self._les, counts[:-1], strict=True):
                total += n
                cumulative.append((le, total))
            family.add_metric(list(labels), cumulative, sum_value=counts[-1])
        yield family

    def describe(self) -> Iterable[Metric]:
        return ()


class _LoopCounter(Collector):
    """A counter kept in plain numbers, for the same reason as _LoopHistogram."""

    def __init__(
        self, registry: CollectorRegistry, name: str, documentation: str, labels: tuple[str, ...]
    ) -> None:
        self.name = name.removesuffix("_total")
        self.documentation = documentation
        self.labelnames = labels
        self.values: dict[tuple[str, ...], float] = {} if labels else {(): 0.0}
        registry.register(self)

    def inc(self, labels: tuple[str, ...], amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=list(self.labelnames))
        for labels, value in list(self.values.items()):
            family.add_metric(list(labels), value)
        yield family

    def describe(self) -> Iterable[Metric]:
        return ()


def attempts_label(attempts: int) -> str:
    return f"{ATTEMPTS_LABEL_CAP}+" if attempts >= ATTEMPTS_LABEL_CAP else str(attempts)


def event_label(kind: str, action: str, obj: Mapping[str, Any]) -> str:
    """kube-scheduler's label for an informer event: pods are told apart by whether they are
    assigned (AssignedPodAdd, UnschedulablePodUpdate), other kinds are kind and action (NodeAdd)."""
    if kind == "Pod":
        spec = obj.get("spec")
        assigned = isinstance(spec, Mapping) and bool(spec.get("nodeName"))
        return ("AssignedPod" if assigned else "UnschedulablePod") + action
    return kind + action


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


class _SchedulerState(Collector):
    """What can be read off the scheduler's queues and cache when scraped: pods by the plugin that
    rejected or gates them, pods that entered each queue, the cache's size, pods in their binding
    cycle."""

    CACHE_HELP = "Number of nodes, pods, and assumed (bound) pods in the scheduler cache."

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def collect(self) -> Iterable[Metric]:
        sched = self._scheduler
        unschedulable = GaugeMetricFamily(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge "
            "for all plugins that caused it to not schedule and so this metric have meaning only when "
            "broken down by plugin.",
            labels=["plugin", "profile"],
        )
        incoming = CounterMetricFamily(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            labels=["queue", "event"],
        )
        totals: dict[tuple[str, str], int] = {}
        for profile, queue in sched.queues.items():
            by_plugin: dict[str, int] = {}
            for key, where in queue.where.items():
                info = queue.infos[key]
                if where == GATED:
                    if info.gated_by:
                        by_plugin[info.gated_by] = by_plugin.get(info.gated_by, 0) + 1
                    continue
                for plugin in info.unschedulable_plugins:
                    by_plugin[plugin] = by_plugin.get(plugin, 0) + 1
            for plugin, n in sorted(by_plugin.items()):
                unschedulable.add_metric([plugin, profile], float(n))
            for labels, n in queue.incoming.items():
                totals[labels] = totals.get(labels, 0) + n
        for (queue_name, event), n in sorted(totals.items()):
            incoming.add_metric([queue_name, event], float(n))
        yield unschedulable
        yield incoming

        cache = sched.cache
        sizes = (
            ("assumed_pods", float(sum(1 for state in cache.pods.values() if state.assumed))),
            ("pods", float(len(cache.pods))),
            ("nodes", float(cache.snapshot.node_count)),
        )
        current = GaugeMetricFamily("scheduler_cache_size", self.CACHE_HELP, labels=["type"])
        # kube-scheduler 1.33 exports both names (the longer one deprecated): dashboards use either
        deprecated = GaugeMetricFamily(
            "scheduler_scheduler_cache_size", "(Deprecated since 1.33.0) " + self.CACHE_HELP, labels=["type"]
        )
        for kind, size in sizes:
            current.add_metric([kind], size)
            deprecated.add_metric([kind], size)
        yield current
        yield deprecated

        goroutines = GaugeMetricFamily(
            "scheduler_goroutines",
            "Number of running goroutines split by the work they do such as binding.",
            labels=["operation"],
        )
        # kube-scheduler's binding goroutine covers the wait at Permit, PreBind and Bind
        goroutines.add_metric(["binding"], float(len(sched.waiting) + len(sched.bindings)))
        yield goroutines

    def describe(self) -> Iterable[Metric]:
        return ()


class _Quotas(Collector):
    """ElasticQuota figures read off the scheduler's quota books when scraped: Koordinator's own
    metric (scheduler_elastic_quota_status, with its labels; its fields min, max, runtime, request
    and used) for `scheduling.sigs.k8s.io` quotas, koordpy's for scheduler-plugins' (which exports
    none), and the pods of each quota that hold nothing yet."""

    def __init__(self, source: Callable[[], Iterable[QuotaBook]]) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        koordinator = GaugeMetricFamily(
            "scheduler_elastic_quota_status",
            "ElasticQuota current status",
            labels=["name", "resource", "tree", "is_parent", "parent", "field"],
        )
        capacity = GaugeMetricFamily(
            "koordpy_capacity_quota_status",
            "scheduler-plugins ElasticQuota (scheduling.x-k8s.io) min and max as stated and used as "
            "CapacityScheduling counts it (placed and reserved pods), by field and resource; cpu in "
            "millicores, other resources in their units.",
            labels=["namespace", "name", "resource", "field"],
        )
        pending = GaugeMetricFamily(
            "koordpy_elastic_quota_pending_pods",
            "Pods of each ElasticQuota that hold nothing yet (not placed, not reserved), by API group.",
            labels=["api_group", "namespace", "name"],
        )
        for book in self._source():
            group = book.api_group
            for quota in book.figures():
                pending.add_metric([group, quota.namespace, quota.name], float(quota.pending_pods))
                for field, amounts in quota.fields.items():
                    for resource, amount in amounts.items():
                        if group == KOORDINATOR_GROUP:
                            labels = [
                                quota.name,
                                resource,
                                quota.tree_id,
                                "true" if quota.is_parent else "false",
                                quota.parent,
                                field,
                            ]
                            koordinator.add_metric(labels, float(amount))
                        else:
                            capacity.add_metric([quota.namespace, quota.name, resource, field], float(amount))
        yield koordinator
        yield capacity
        yield pending

    def describe(self) -> Iterable[Metric]:
        return ()


class _ProcessExtras(Collector):
    """The process metrics of Go's collector that prometheus_client's does not read: the address
    space limit and the network namespace's traffic (from /proc/self/net/netstat, as procfs does)."""

    def collect(self) -> Iterable[Metric]:
        limit = _address_space_limit()
        if limit is not None:
            yield GaugeMetricFamily(
                "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes.",
                value=limit,
            )
        octets = _netstat_octets()
        if octets is not None:
            yield CounterMetricFamily(
                "process_network_receive_bytes",
                "Number of bytes received by the process over the network.",
                value=octets[0],
            )
            yield CounterMetricFamily(
                "process_network_transmit_bytes",
                "Number of bytes sent by the process over the network.",
                value=octets[1],
            )

    def describe(self) -> Iterable[Metric]:
        return ()


def _address_space_limit() -> float | None:
    try:
        with open("/proc/self/limits") as f:
            for line in f:
                if line.startswith("Max address space"):
                    soft = line.split()[3]
                    # procfs reads "unlimited" as the largest uint64
                    return float(2**64 - 1) if soft == "unlimited" else float(soft)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _netstat_octets() -> tuple[float, float] | None:
    try:
        with open(f"/proc/{os.getpid()}/net/netstat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("IpExt:") and values.startswith("IpExt:"):
            row = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            try:
                return float(row["InOctets"]), float(row["OutOctets"])
            except (KeyError, ValueError):
                return None
    return None


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
    leadership, API requests). `process=True` adds the process_* metrics (for `koordpy run`, where
    the registry is the process's)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = False) -> None:
        # kube's metrics have no `_created` series; prometheus_client would add one per counter
        # and histogram series
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        if process:
            ProcessCollector(registry=r)
            r.register(_ProcessExtras())
        # the metrics of the scheduling cycle: see _LoopHistogram
        self.schedule_attempts = _LoopCounter(
            r,
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ("result", "profile"),
        )
        self.attempt_duration = _LoopHistogram(
            r,
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ("result", "profile"),
            exponential_buckets(0.001, 2, 15),
        )
        self.algorithm_duration = _LoopHistogram(
            r,
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            (),
            exponential_buckets(0.001, 2, 15),
        )
        self.event_handling = _LoopHistogram(
            r,
            "scheduler_event_handling_duration_seconds",
            "Event handling latency in seconds.",
            ("event",),
            exponential_buckets(0.0001, 2, 12),
        )
        self.sli_duration = _LoopHistogram(
            r,
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
            "might involve multiple scheduling attempts.",
            ("attempts",),
            exponential_buckets(0.01, 2, 20),
        )
        self.scheduling_attempts = _LoopHistogram(
            r,
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            (),
            exponential_buckets(1, 2, 5),
        )
        self.extension_point_duration = _LoopHistogram(
            r,
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ("extension_point", "status", "profile"),
            exponential_buckets(0.0001, 2, 12),
        )
        self.plugin_duration = _LoopHistogram(
            r,
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ("plugin", "extension_point", "status"),
            exponential_buckets(0.00001, 1.5, 20),
        )
        self.plugin_evaluations = _LoopCounter(
            r,
            "scheduler_plugin_evaluation_total",
            "Number of attempts to schedule pods by each plugin and the extension point (available only "
            "in PreFilter, Filter, PreScore, and Score).",
            ("plugin", "extension_point", "profile"),
        )
        self.permit_wait = _LoopHistogram(
            r,
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit.",
            ("result",),
            exponential_buckets(0.001, 2, 15),
        )
        self.preemption_attempts = _LoopCounter(
            r, "scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now", ()
        )
        self.preemption_victims = _LoopHistogram(
            r,
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            (),
            exponential_buckets(1, 2, 7),
        )
        self.requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self.request_duration = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REQUEST_DURATION_BUCKETS,
            registry=r,
        )
        self.rate_limiter_duration = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REQUEST_DURATION_BUCKETS,
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease. Please make sure to "
            "group by name.",
            ["name"],
            registry=r,
        )
        self.lease_renewal_interval = Histogram(
            "koordpy_leader_election_renewal_interval_seconds",
            "Seconds between successive renewals of the held Lease (every retry period when healthy; "
            "the renew deadline is the most before leadership is given up).",
            ["name"],
            buckets=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0),
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
            "timeout, 'idle' resumes a watch that delivered nothing for --watch-idle-timeout).",
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
        self.gang_bound_seconds = Histogram(
            "koordpy_gang_time_to_bound_seconds",
            "Seconds from the first member of a gang group being seen to the group being released "
            "to bind as a whole.",
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
            registry=r,
        )
        self.gang_rejections = Counter(
            "koordpy_gang_rejections_total",
            "Gang groups rolled back or timed out as a whole, by reason (Unschedulable, Timeout).",
            ["reason"],
            registry=r,
        )
        self.job_preemption_seconds = Histogram(
            "koordpy_job_preemption_duration_seconds",
            "Seconds spent deciding a job-level preemption for a gang group, by result "
            "(success: victims chosen and members nominated; failure: nobody evicted).",
            ["result"],
            buckets=exponential_buckets(0.001, 2, 20),
            registry=r,
        )
        # label children looked up once: the lookup costs more than the observation
        self._request_children: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}

    # ------------------------------------------------------------------ SchedulerObserver
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        labels = (result, profile)
        self.schedule_attempts.inc(labels)
        self.attempt_duration.observe(labels, seconds)

    def algorithm(self, seconds: float) -> None:
        self.algorithm_duration.observe((), seconds)

    def scheduled(self, profile: str, attempts: int, seconds_since_first_attempt: float) -> None:
        self.sli_duration.observe((attempts_label(attempts),), max(0.0, seconds_since_first_attempt))
        self.scheduling_attempts.observe((), attempts)

    def extension_point(self, point: str, plugin: str, status: str, seconds: float) -> None:
        self.plugin_duration.observe((plugin, point, status), seconds)

    def point_done(self, point: str, status: str, profile: str, seconds: float) -> None:
        self.extension_point_duration.observe((point, status, profile), seconds)

    def evaluated(self, point: str, plugin: str, profile: str, nodes: int) -> None:
        self.plugin_evaluations.inc((plugin, point, profile), nodes)

    def permit_waited(self, result: str, seconds: float) -> None:
        self.permit_wait.observe((result,), max(0.0, seconds))

    def preemption(self, profile: str, victims: int) -> None:
        self.preemption_attempts.inc(())
        if victims:
            self.preemption_victims.observe((), victims)

    def cache_check(self, result: str) -> None:
        self.cache_checks.labels(result).inc()

    # ------------------------------------------------------------------ scrape-time sources
    def track_scheduler(self, scheduler: Scheduler) -> None:
        """Everything read off the scheduler when scraped: pending pods, pods by rejecting plugin,
        queue arrivals, the cache's size, pods in their binding cycle, gangs, GPUs and quotas."""
        self.track_pending(scheduler.pending_counts)
        self.track_gauges(scheduler.scrape_gauges)
        self.registry.register(_SchedulerState(scheduler))
        shared = scheduler.shared
        self.registry.register(_Quotas(lambda: [o for o in shared.objects() if isinstance(o, QuotaBook)]))

    def track_write_backlog(self, source: Callable[[], Mapping[str, int]]) -> None:
        """`koordpy_api_writes_queued{lane}`: writes decided and not sent yet (bindings are not
        queued: each is sent as soon as it is decided)."""
        self.registry.register(_WriteBacklog(source))

    def track_pending(self, source: Callable[[], Mapping[str, int]]) -> None:
        self.registry.register(_PendingPods(source))

    def track_gauges(self, source: Callable[[], Mapping[str, float]]) -> None:
        """Gauges read at scrape time: koordpy_gang_groups_waiting, koordpy_gpu_idle,
        koordpy_gpu_fragmented (see the README for the fragmentation definition)."""
        self.registry.register(_ScrapeGauges(source))

    # ------------------------------------------------------------------ the cluster world
    def binding(self, result: str, seconds: float, profile: str | None = None) -> None:
        self.bindings.labels(result).inc()
        self.binding_duration.labels(result).observe(seconds)
        if profile is not None:
            # the Bind extension point is the binding's API call, as DefaultBinder's is
            self.point_done("Bind", "Error" if result == "error" else "Success", profile, seconds)

    def api_write(self, operation: str, ok: bool) -> None:
        self.api_writes.labels(operation, "success" if ok else "error").inc()

    def api_request(
        self, method: str, code: str, host: str, seconds: float | None, throttled: float | None = None
    ) -> None:
        """One request to the apiserver: client-go's request metrics. `code` is the HTTP status, or
        `<error>` when no response came; `seconds` is None for watches, whose duration is their
        length, not a latency; `throttled` the wait for the client-side rate limiter (None: no
        limiter)."""
        key = (method, code, host)
        children = self._request_children.get(key)
        if children is None:
            children = self._request_children[key] = (
                self.requests.labels(code, method, host),
                self.request_duration.labels(method, host),
                self.rate_limiter_duration.labels(method, host),
            )
        children[0].inc()
        if seconds is not None:
            children[1].observe(seconds)
        if throttled is not None:
            children[2].observe(throttled)

    def timed_handler(
        self, kind: str, handler: Callable[[str, dict[str, Any], dict[str, Any] | None], None]
    ) -> Callable[[str, dict[str, Any], dict[str, Any] | None], None]:
        """`handler` (an informer's), timed into scheduler_event_handling_duration_seconds."""
        histogram = self.event_handling

        def timed(action: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            start = time.perf_counter()
            try:
                handler(action, obj, old)
            finally:
                histogram.observe((event_label(kind, action, obj),), time.perf_counter() - start)

        return timed

    def watch_restart(self, resource: str, reason: str) -> None:
        self.watch_restarts.labels(resource, reason).inc()

    def informer_event(self, resource: str, event_type: str) -> None:
        self.informer_events.labels(resource, event_type).inc()

    def set_leader(self, lease: str, is_leader: bool) -> None:
        self.leader.labels(lease).set(1.0 if is_leader else 0.0)

    def lease_renewed(self, lease: str, interval: float) -> None:
        self.lease_renewal_interval.labels(lease).observe(interval)

    # ------------------------------------------------------------------ gangs and GPUs
    def gang_event(self, event: str, value: float) -> None:
        """`bound` with the seconds from the group's first member seen to its release,
        `rejected:<reason>` once per rejected group, `job_preemption:<result>` with its duration."""
        if event == "bound":
            self.gang_bound_seconds.observe(value)
        elif event.startswith("rejected:"):
            self.gang_rejections.labels(event.split(":", 1)[1]).inc()
        elif event.startswith("job_preemption:"):
            self.job_preemption_seconds.labels(event.split(":", 1)[1]).observe(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    content_type = CONTENT_TYPE_LATEST
