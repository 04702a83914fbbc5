"""Reading a Prometheus scrape and comparing its families with kube-scheduler's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from tests.metrics.kube_scheduler_metrics import KubeMetric

# the labels the exposition format adds to a histogram's samples
_SAMPLE_LABELS = {"le"}


@dataclass
class Family:
    type: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def family_name(metric_name: str, metric_type: str) -> str:
    """The exposition format names a counter's family without its `_total`."""
    return metric_name.removesuffix("_total") if metric_type == "counter" else metric_name


def families(text: str) -> dict[str, Family]:
    out: dict[str, Family] = {}
    for parsed in text_string_to_metric_families(text):
        family = out.setdefault(parsed.name, Family(parsed.type))
        family.samples += [(s.name, dict(s.labels), s.value) for s in parsed.samples]
    return out


def sample_names(text: str) -> set[str]:
    return {name for family in families(text).values() for name, _, _ in family.samples}


def mismatches(text: str, expected: Iterable[KubeMetric]) -> list[str]:
    """How the scrape differs from kube-scheduler's metrics: a family missing or of another type,
    with no sample to show its labels, other label names, other histogram buckets."""
    found = families(text)
    problems: list[str] = []
    for metric in expected:
        family = found.get(family_name(metric.name, metric.type))
        if family is None:
            problems.append(f"{metric.name}: not exported")
            continue
        if family.type != metric.type:
            problems.append(f"{metric.name}: a {family.type}, kube's is a {metric.type}")
            continue
        if not family.samples:
            problems.append(f"{metric.name}: no sample to compare")
            continue
        label_sets = {frozenset(labels.keys() - _SAMPLE_LABELS) for _, labels, _ in family.samples}
        if label_sets != {frozenset(metric.labels)}:
            problems.append(
                f"{metric.name}: labels {sorted(map(sorted, label_sets))}, kube's are {sorted(metric.labels)}"
            )
        if metric.type == "histogram":
            series: dict[frozenset[tuple[str, str]], list[float]] = {}
            for name, labels, _ in family.samples:
                if name == metric.name + "_bucket":
                    key = frozenset((k, v) for k, v in labels.items() if k != "le")
                    series.setdefault(key, []).append(float(labels["le"]))
            want = [*metric.bucket_values(), float("inf")]
            for bounds in series.values():
                if bounds != want:
                    problems.append(f"{metric.name}: buckets {bounds}, kube's are {want}")
                    break
    return problems
