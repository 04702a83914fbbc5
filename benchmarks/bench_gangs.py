"""Big gangs through a whole `koordpy simulate` run: N nodes, G gangs of M pods each, declared by
PodGroups (scheduling.x-k8s.io, minMember M) or by Koordinator's gang annotations (name and
min-available M on every member). Each gang's pods come from one Job (parallelism M); every pod asks
for 100m CPU and 128Mi, so a node of 32 CPUs takes a few dozen of them.

Each case runs in a process of its own, so that its peak memory is its own. Printed per case:

- add: the scenario's objects handed to the scheduler (`build_world`: nodes, PodGroups, every pod
  added and queued, each gang's gate decided), YAML parsing left out. `koordpy simulate` hands
  the pods over in one bulk; with `--arrive` they come one event at a time, as a watch delivers
  them to `koordpy run`, and each gang's gate is decided again as its members arrive;
- schedule: the run on the virtual clock until nothing is left to do, and the report; then, in
  brackets, the CPU time of add and schedule together (added and placed);
- whole: the child process end to end, interpreter start, imports and YAML parsing included (what
  a user of `koordpy simulate` waits for), and the CPU time it used (user + system: on a machine
  shared with other work, closer to what the wall time would be on an idle one);
- pods/s over the whole process, and the process's peak RSS.

Prints figures; asserts nothing.

    python benchmarks/bench_gangs.py --quick       # 1,000 and 2,000 pods in one gang
    python benchmarks/bench_gangs.py --upstream    # 10 gangs x 5,000 pods on 5,000 nodes
    python benchmarks/bench_gangs.py --nodes 1000 --gangs 1 --pods 1000 --kind annotation
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scheduling import machine

KINDS = ("podgroup", "annotation")


@dataclass(frozen=True, slots=True)
class Case:
    nodes: int
    gangs: int
    pods: int  # per gang
    kind: str

    @property
    def total(self) -> int:
        return self.gangs * self.pods


QUICK = (
    Case(1000, 1, 1000, "podgroup"),
    Case(1000, 1, 1000, "annotation"),
    Case(1000, 1, 2000, "podgroup"),
    Case(1000, 10, 100, "podgroup"),
)
UPSTREAM = (
    Case(1000, 1, 1000, "podgroup"),
    Case(5000, 1, 10000, "podgroup"),
    Case(5000, 10, 5000, "podgroup"),
    Case(5000, 10, 5000, "annotation"),
)


def nodes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"node-{i}",
                "labels": {
                    "kubernetes.io/hostname": f"node-{i}",
                    "topology.kubernetes.io/zone": f"zone-{i % 8}",
                },
            },
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
        }
        for i in range(count)
    ]


def gang_jobs(case: Case) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for g in range(case.gangs):
        name = f"gang-{g}"
        meta: dict[str, Any] = {}
        if case.kind == "podgroup":
            out.append(
                {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": name},
                    "spec": {"minMember": case.pods},
                }
            )
            meta["labels"] = {"scheduling.x-k8s.io/pod-group": name}
        else:
            meta["annotations"] = {
                "gang.scheduling.koordinator.sh/name": name,
                "gang.scheduling.koordinator.sh/min-available": str(case.pods),
            }
        out.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "parallelism": case.pods,
                    "template": {
                        "metadata": meta,
                        "spec": {
                            "schedulerName": "koord-scheduler",
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "registry.example/worker:1.0",
                                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                                }
                            ],
                        },
                    },
                },
            }
        )
    return out


def child(path: str, arrive: bool) -> None:
    """One case, in this process: prints its figures as one JSON line."""
    from koordpy.config.models import default_configuration
    from koordpy.simulate.loader import load_scenario
    from koordpy.simulate.runner import build_report, build_world

    t0 = time.perf_counter()
    scenario = load_scenario([path])
    t1, c1 = time.perf_counter(), time.process_time()
    if arrive:
        # the pods come one event at a time, as a watch delivers them to a running scheduler
        pods, scenario.pods = scenario.pods, []
        world = build_world(scenario, default_configuration())
        scenario.pods = pods
        for pod in pods:
            world.add_pod(pod)
    else:
        world = build_world(scenario, default_configuration())
    t2 = time.perf_counter()
    world.run(3600.0)
    report = build_report(world, scenario)
    t3, c3 = time.perf_counter(), time.process_time()
    bound = sum(1 for p in report.pods if p.phase == "Bound")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = {
        "load": t1 - t0,
        "add": t2 - t1,
        "schedule": t3 - t2,
        "placed_cpu": c3 - c1,
        "bound": bound,
        "peak_mib": peak_mib,
    }
    print(json.dumps(figures))


def run_case(case: Case, timeout: float, arrive: bool) -> None:
    from benchmarks.workload import to_yaml

    label = f"{case.gangs} x {case.pods:,} ({case.kind}{', one by one' if arrive else ''})"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gangs.yaml"
        path.write_text(to_yaml(nodes(case.nodes) + gang_jobs(case)))
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(path), *(["--arrive"] if arrive else [])],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            print(f"{label:<28} nodes={case.nodes:<5} did not finish within {timeout:.0f}s", flush=True)
            return
        whole = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if done.returncode != 0:
        print(f"{label:<28} nodes={case.nodes:<5} failed:\n{done.stderr}", flush=True)
        return
    f = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"{label:<28} nodes={case.nodes:<5} bound={f['bound']:>6}/{case.total:<6} "
        f"load={f['load']:6.2f}s add={f['add']:6.2f}s schedule={f['schedule']:6.2f}s "
        f"(cpu {f['placed_cpu']:6.2f}s) "
        f"whole={whole:6.2f}s cpu={cpu:6.2f}s {case.total / whole:6.0f} pods/s  "
        f"peak {f['peak_mib']:4.0f} MiB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000-2,000-pod gangs on 1,000 nodes")
    parser.add_argument("--upstream", action="store_true", help="up to 10 gangs x 5,000 pods on 5,000 nodes")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=1)
    parser.add_argument("--pods", type=int, default=1000, help="pods per gang (its minimum too)")
    parser.add_argument("--kind", choices=KINDS, default="podgroup")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per case")
    parser.add_argument(
        "--arrive",
        action="store_true",
        help="pods added one at a time to a running scheduler (as a watch delivers them), not all at once",
    )
    parser.add_argument("--child", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.arrive)
        return
    if args.quick or args.upstream:
        cases = (QUICK if args.quick else ()) + (UPSTREAM if args.upstream else ())
    else:
        cases = (Case(args.nodes, args.gangs, args.pods, args.kind),)
    print(f"machine: {machine()}", flush=True)
    for case in cases:
        run_case(case, args.timeout, args.arrive)


if __name__ == "__main__":
    main()
