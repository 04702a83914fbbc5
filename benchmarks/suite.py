"""Every kube-scheduler scheduler_perf workload recreated in `benchmarks/`, run one after the other
at its upstream size (or `--quick`), and printed as one table beside kube-scheduler's CI floor.
Prints figures; asserts nothing.

Each workload runs its own benchmark script in a process of its own (so one workload's memory and
caches never help or hurt the next), and the table shows:

- kube floor: the `threshold` (pods/s) of the workload in kubernetes v1.33's
  test/integration/scheduler_perf/*/performance-config.yaml; a second figure in brackets is the
  threshold of a later upstream release where the workload (or its size) only exists there, as
  the benchmark script cites it;
- whole process: the measured pods over the whole process's wall time: interpreter start, imports,
  building the cluster and placing the init pods included (kube's figure counts the measured phase
  only, so this is the harder reading), with the process's wall and CPU seconds: other work on
  the machine stretches the wall time first (the CPU seconds grow too, as the cores are shared);
- scheduling only: the benchmark's own figure for the measured phase, as kube's metric counts it.

    .venv/bin/python benchmarks/suite.py                 # upstream sizes (5 minutes on a quiet machine)
    .venv/bin/python benchmarks/suite.py --quick         # small sizes (about 2 minutes)
    .venv/bin/python benchmarks/suite.py --only PreemptionAsync Unschedulable
    .venv/bin/python benchmarks/suite.py --markdown      # the table as RESULTS.md shows it
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine
from benchmarks.bench_volumes import WORKLOADS as VOLUMES

HERE = Path(__file__).resolve().parent

# the benchmark's own figure for the measured phase, in pods/s, read from what it prints (and
# the size run)
Reader = Callable[[str, "Size"], float | None]


def pods_per_s(pattern: str) -> Reader:
    """The first number of pods/s the pattern (one group) finds in the output."""

    def read(out: str, size: Size) -> float | None:
        found = re.search(pattern, out)
        return float(found.group(1)) if found else None

    return read


def per_schedule(out: str, size: Size) -> float | None:
    """The measured pods over the `schedule=` seconds a benchmark prints."""
    found = re.search(r"schedule=\s*([\d.]+)\s*s", out)
    return size.measured / float(found.group(1)) if found and float(found.group(1)) > 0 else None


@dataclass(frozen=True, slots=True)
class Size:
    label: str
    # the pods the figure counts (upstream's measurePods)
    measured: int
    argv: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    # the scheduler_perf file it comes from
    source: str
    floor: int | None
    # a later upstream release's threshold, when v1.33 has none for this size (or a different one)
    later_floor: int | None
    script: str
    upstream: Size
    quick: Size
    read: Reader
    # what differs from upstream, in a few words
    note: str = ""


SCHEDULING = pods_per_s(r"([\d.]+) pods/s \(scheduling")


def volume_workloads() -> tuple[Workload, ...]:
    """scheduler_perf's volumes/ workloads, from bench_volumes.py's table (sizes and floors)."""
    out = []
    for name, w in VOLUMES.items():
        label = w.measured_size
        quick = "500Nodes"
        note = (
            # the floors are not v1.33's: see bench_volumes.py
            "floors of kubernetes commit 95f0849, in brackets 240d43d's"
            if name == "SchedulingSecrets"
            else "claims and volumes created bound, as scheduler_perf creates them"
        )
        out.append(
            Workload(
                name,
                "volumes",
                w.floor,
                w.later_floor,
                "bench_volumes.py",
                Size(label, w.sizes[label][2], ("--workload", name)),
                Size(quick, w.sizes[quick][2], ("--workload", name, "--quick")),
                SCHEDULING,
                note,
            )
        )
    return tuple(out)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "SchedulingBasic",
        "misc",
        270,
        None,
        "bench_scheduling.py",
        Size("5000Nodes_10000Pods", 10_000, ("--nodes", "5000", "--pods", "10000")),
        Size("500Nodes_1000Pods", 1_000, ("--nodes", "500", "--pods", "1000")),
        SCHEDULING,
        "koordpy's 4-template mix (plain, zone spread, node affinity, GPU with toleration), no init pods",
    ),
    Workload(
        "PreemptionBasic",
        "misc",
        18,
        None,
        "bench_preemption.py",
        Size("1000Nodes", 1_000, ("--workload", "basic")),
        Size("500Nodes", 500, ("--workload", "basic", "--quick")),
        pods_per_s(r"PreemptionBasic.*?([\d.]+) pods/s"),
    ),
    Workload(
        "PreemptionAsync",
        "misc",
        160,
        570,
        "bench_preemption.py",
        Size("5000Nodes", 5_000, ("--workload", "async")),
        Size("500Nodes", 500, ("--workload", "async", "--quick")),
        pods_per_s(r"PreemptionAsync.*?([\d.]+) pods/s"),
        "later floor: default_preemption/",
    ),
    Workload(
        "Unschedulable",
        "misc",
        None,
        600,
        "bench_churn.py",
        Size("5kNodes/20kInit/10kPods", 10_000, ()),
        Size("500Nodes/10Init/1kPods", 1_000, ("--quick",)),
        pods_per_s(r"([\d.]+) pods/s \(kube floor"),
        "v1.33 has a floor only for 100 init pods (170 with queueing hints)",
    ),
    Workload(
        "SchedulingWithExtendedResource",
        "misc (later)",
        None,
        180,
        "bench_resources.py",
        Size("5000Nodes", 5_000, ()),
        Size("500Nodes", 500, ("--quick",)),
        SCHEDULING,
        "a resource name per node",
    ),
    Workload(
        "podgroup basicscheduling, own ReplicaSets",
        "podgroup (later)",
        None,
        None,
        "bench_spread.py",
        Size("5000Nodes_3000Gangs_9000Pods", 9_000, ()),
        Size("500Nodes_300Gangs_900Pods", 900, ("--quick",)),
        SCHEDULING,
        "each gang's pods from a ReplicaSet of its own (default spreading per owner)",
    ),
    Workload(
        "gangscheduling, big gangs",
        "gangscheduling (later)",
        None,
        None,
        "bench_gangs.py",
        Size("5000Nodes_10Gangs_50000Pods", 50_000, ("--nodes", "5000", "--gangs", "10", "--pods", "5000")),
        Size("1000Nodes_1Gang_1000Pods", 1_000, ("--nodes", "1000", "--gangs", "1", "--pods", "1000")),
        per_schedule,
        "scheduling.x-k8s.io PodGroups, pods from Jobs",
    ),
    Workload(
        "TopologyAwareScheduling (podgroup/tas)",
        "podgroup (later)",
        None,
        None,
        "bench_topology.py",
        Size("5000Nodes_750Gangs_3000Pods", 3_000, ("--only-tas",)),
        Size("500Nodes_75Gangs_300Pods", 300, ("--only-tas", "--tas-nodes", "500", "--tas-gangs", "75")),
        pods_per_s(r"([\d.]+) pods/s"),
        "Koordinator gang annotations, MustGather on the rack",
    ),
    *volume_workloads(),
)


@dataclass(frozen=True, slots=True)
class Result:
    workload: Workload
    size: Size
    wall: float
    # user + system seconds of the benchmark's process
    cpu: float
    scheduling: float | None
    load: tuple[float, float]
    output: str
    failed: bool


def run(workload: Workload, size: Size, timeout: float) -> Result:
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    # the suite runs one child at a time, so the children's usage grows by this one's alone
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / workload.script), *size.argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        wall = time.perf_counter() - t0
        output = done.stdout + done.stderr
        failed = done.returncode != 0
    except subprocess.TimeoutExpired as err:
        wall = time.perf_counter() - t0
        partial = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        output = f"did not finish within {timeout:.0f} s\n{partial}"
        failed = True
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    load1 = os.getloadavg()[0]
    scheduling = None if failed else workload.read(output, size)
    return Result(workload, size, wall, cpu, scheduling, (load0, load1), output, failed)


def floor_text(w: Workload) -> str:
    if w.floor is None and w.later_floor is None:
        return "—"
    if w.floor is None:
        return f"— ({w.later_floor})"
    return f"{w.floor}" + (f" ({w.later_floor})" if w.later_floor else "")


def verdict(w: Workload, scheduling: float | None) -> str:
    floors = [f for f in (w.floor, w.later_floor) if f is not None]
    if scheduling is None or not floors:
        return ""
    return "above" if scheduling >= max(floors) else ("above v1.33" if scheduling >= floors[0] else "below")


def table(results: list[Result], markdown: bool, quick: bool) -> str:
    head = (
        "workload",
        "size",
        "kube floor",
        "koordpy whole process",
        "koordpy scheduling only",
        "vs floor",
        "load",
    )
    rows = []
    for r in results:
        w = r.workload
        whole = (
            "failed"
            if r.failed
            else f"{r.size.measured / r.wall:,.0f} pods/s ({r.wall:,.0f} s, CPU {r.cpu:,.0f} s)"
        )
        sched = f"{r.scheduling:,.0f} pods/s" if r.scheduling is not None else ("failed" if r.failed else "?")
        rows.append(
            (
                w.name,
                r.size.label,
                floor_text(w),
                whole,
                sched,
                # the floors are for the upstream sizes
                "" if quick else verdict(w, r.scheduling),
                f"{r.load[0]:.1f}-{r.load[1]:.1f}",
            )
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "| --- | --- | ---: | ---: | ---: | --- | ---: |"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    return "\n".join(
        "  ".join(str(x).ljust(n) for x, n in zip(row, widths, strict=True)) for row in (head, *rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the small sizes")
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="workloads whose name starts with one of these"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per workload")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--verbose", action="store_true", help="print each benchmark's own output")
    args = parser.parse_args()
    chosen = [w for w in WORKLOADS if not args.only or any(w.name.startswith(p) for p in args.only)]
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.1f}", flush=True)
    results = []
    for w in chosen:
        size = w.quick if args.quick else w.upstream
        print(f"running {w.name} {size.label} ...", flush=True)
        result = run(w, size, args.timeout)
        results.append(result)
        if args.verbose or result.failed or result.scheduling is None:
            print(result.output, flush=True)
    print()
    print(table(results, args.markdown, args.quick))
    notes = [f"- {w.name}: {w.note}" for w in chosen if w.note]
    if notes:
        print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
