"""What parsing pods keeps once the pods are gone. A cluster's Jobs and gangs label their pods
each their own way, so parsed specs keep coming: what is kept to parse the next pod of a template
faster must stay small, whatever the number of pods parsed (a soak of an hour grew by 20 MiB an
hour while these caches filled)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from koordpy.api.pod import Pod
from tests.builders import pod_dict

# a Job's pod as an API server returns it: the defaults and the tolerations admission adds
TOLERATIONS = [
    {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for t in ("not-ready", "unreachable")
]


def job_pod(job: int, index: int, shared_spec: bool) -> dict[str, Any]:
    raw = pod_dict(
        f"job-{job}-{index}",
        cpu="500m",
        memory="1Gi",
        labels={"job-name": f"job-{job}", "controller-uid": f"uid-{job:08d}"},
        spec={
            "schedulerName": "koord-scheduler",
            "tolerations": TOLERATIONS,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["train"]}]}
                        ]
                    }
                }
            },
            "env": [{"name": f"VAR_{i}", "value": "x" * 40} for i in range(20)],
        },
    )
    if not shared_spec:
        # a pod decoded from the API server has a spec of its own
        raw["spec"] = dict(raw["spec"])
    return raw


@pytest.mark.parametrize("shared_spec", [False, True], ids=["decoded pods", "stamped pods"])
def test_parsing_many_jobs_pods_keeps_a_bounded_amount_once_they_are_gone(shared_spec: bool) -> None:
    def parse(jobs: range) -> None:
        for job in jobs:
            for index in range(2):
                Pod.from_dict(job_pod(job, index, shared_spec))

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        parse(range(8000))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 8,000 jobs, each with specs of its own: what is kept is a few MiB, not a share of each
    assert grown < 8 * 2**20, f"{grown / 2**20:.1f} MiB kept after the pods were gone"
