"""Gang and GPU metrics, read back from the Prometheus text a scrape would see."""

from __future__ import annotations

from koordpy.config.models import default_configuration
from koordpy.framework.clock import VirtualClock
from koordpy.metrics import SchedulerMetrics
from koordpy.plugins import registry
from koordpy.scheduler import Scheduler
from koordpy.simulate.memory import MemoryCluster
from tests.builders import make_node, pod_dict

G = "gang.scheduling.koordinator.sh"


def run_gang(members: int, node_cpu: str) -> str:
    metrics = SchedulerMetrics()
    clock = VirtualClock()
    sched = Scheduler(default_configuration(), registry(), clock, observer=metrics)
    metrics.track_gauges(sched.scrape_gauges)
    world = MemoryCluster(sched, clock)
    world.add_node(make_node("gpu", cpu=node_cpu, extra={"nvidia.com/gpu": 8}))
    for i in range(members):
        world.add_pod(
            pod_dict(
                f"g-{i}",
                cpu="1",
                extra_requests={"nvidia.com/gpu": 3},
                annotations={f"{G}/name": "g", f"{G}/min-available": str(members)},
            )
        )
    world.run(3600)
    return metrics.render().decode()


def test_a_released_gang_is_timed_and_gpu_fragmentation_is_exported() -> None:
    text = run_gang(2, "8")
    assert "koordpy_gang_time_to_bound_seconds_count 1.0" in text
    # two 3-GPU pods on an 8-GPU node leave 2 idle GPUs, too few for another 3-GPU pod
    assert "koordpy_gpu_idle 2.0" in text
    assert "koordpy_gpu_fragmented 2.0" in text


def test_a_rolled_back_gang_counts_one_rejection() -> None:
    text = run_gang(3, "8")  # the third member needs a ninth GPU
    assert 'koordpy_gang_rejections_total{reason="Unschedulable"} 1.0' in text
    assert "koordpy_gang_groups_waiting 0.0" in text


def test_job_preemption_is_counted_and_timed() -> None:
    metrics = SchedulerMetrics()
    clock = VirtualClock()
    sched = Scheduler(default_configuration(), registry(), clock, observer=metrics)
    world = MemoryCluster(sched, clock)
    world.add_node(make_node("n1", cpu="4"))
    world.add_pod(pod_dict("low", cpu="4", node_name="n1", priority=1))
    for i in range(2):
        world.add_pod(
            pod_dict(
                f"g-{i}",
                cpu="2",
                priority=100,
                annotations={f"{G}/name": "g", f"{G}/min-available": "2"},
            )
        )
    world.run(3600)
    text = metrics.render().decode()
    # one decision, which evicted the one low-priority pod for the whole gang
    assert 'koordpy_job_preemption_duration_seconds_count{result="success"} 1.0' in text
    assert "scheduler_preemption_victims_count 1.0" in text
    assert "scheduler_preemption_victims_sum 1.0" in text
