"""Scheduling throughput of a whole `koordpy simulate` run, parsing included, with every default
plugin on. Prints figures; asserts nothing.

    python benchmarks/bench_scheduling.py [--nodes 1000 5000] [--pods 10000]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import deployments, explicit_pods, nodes, to_yaml
from koordpy.config.models import default_configuration
from koordpy.simulate.loader import load_scenario
from koordpy.simulate.runner import simulate


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def run_case(name: str, node_count: int, pods: int, explicit: bool) -> None:
    objects = nodes(node_count) + (explicit_pods(pods) if explicit else deployments(pods))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.yaml"
        path.write_text(to_yaml(objects))
        t0 = time.perf_counter()
        scenario = load_scenario([str(path)])
        t1 = time.perf_counter()
        report = simulate(scenario, default_configuration())
        t2 = time.perf_counter()
    bound = sum(1 for p in report.pods if p.phase == "Bound")
    total = t2 - t0
    print(
        f"{name:<34} nodes={node_count:<5} pods={pods:<6} bound={bound:<6} "
        f"load={t1 - t0:6.2f}s schedule={t2 - t1:6.2f}s total={total:6.2f}s  "
        f"{pods / total:7.0f} pods/s (whole run)  {pods / (t2 - t1):7.0f} pods/s (scheduling)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--explicit", action="store_true", help="also time one manifest per pod")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    for n in args.nodes:
        run_case("deployments (4 templates)", n, args.pods, explicit=False)
        if args.explicit:
            run_case("explicit pod manifests", n, args.pods, explicit=True)


if __name__ == "__main__":
    main()
