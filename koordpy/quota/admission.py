"""Whether a pod's request fits its quota: the checks each system makes in PreFilter.

Each returns None when the pod fits, else a message naming the quota, the resource, what is used,
what is requested and the limit it would pass, e.g. `quota team-a: cpu used 30 + requested 8 >
runtime 32`. A quota (or pod) kept out of scheduling by a problem gets the problem's message.

Koordinator (pkg/scheduler/plugins/elasticquota/plugin.go PreFilter, plugin_helper.go
checkQuotaRecursive, getQuotaInfoUsedLimit): used + request <= runtime (max when runtime quota is
off) in every resource the quota's max names; a non-preemptible pod also needs non-preemptible
used + request <= min in every resource min names; with EnableCheckParentQuota every ancestor below
the root is checked the same way, in the resources the pod asks for (pods admitted together: with
the sum of what they ask beneath that ancestor, `koordinator_admit_ancestors`).

scheduler-plugins (pkg/capacityscheduling/capacity_scheduling.go PreFilter, elasticquota.go
usedOverMaxWith, aggregatedUsedOverMinWith): used + request (with the pods nominated in the same
quota at no lower priority) <= max of the pod's quota, in cpu, memory, ephemeral-storage, pods and
every extended resource the pod asks for; and the used of all quotas + request (with those
nominated pods and the nominated pods of quotas still within their min) <= the sum of all mins.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from koordpy.api.elasticquota import PodQuota
from koordpy.api.resources import format_amount
from koordpy.quota.tree import BoolArray, Int64Array, NamespaceQuotas, QuotaTree


def _over(
    names: tuple[str, ...],
    check: BoolArray,
    used: Int64Array,
    asked: Int64Array,
    limit: Int64Array,
    limit_kind: str,
    used_kind: str = "used",
) -> list[str]:
    """`cpu used 30 + requested 8 > runtime 32` for every checked resource the request would pass."""
    over = check & (used + asked > limit)
    return [
        f"{names[j]} {used_kind} {format_amount(names[j], int(used[j]))} + requested "
        f"{format_amount(names[j], int(asked[j]))} > {limit_kind} {format_amount(names[j], int(limit[j]))}"
        for j in np.flatnonzero(over)
    ]


def _message(subject: str, parts: list[str]) -> str | None:
    return f"{subject}: {', '.join(parts)}" if parts else None


def koordinator_admit(
    tree: QuotaTree,
    runtime: Int64Array,
    used: Int64Array,
    pod_quota: PodQuota,
    request: Mapping[str, int],
    *,
    enable_runtime_quota: bool = True,
    check_parents: bool = False,
    non_preemptible: bool = False,
    non_preemptible_used: Int64Array | None = None,
) -> str | None:
    """Koordinator's quota check of one pod. `runtime` from `koordpy.quota.runtime.runtime`;
    `used` (quota x resource): the summed requests of each quota's assigned pods, the quota's own
    and its descendants' alike (Koordinator adds a pod's use to its quota and every ancestor:
    `koordpy.quota.runtime.subtree_sums` of what each quota's own pods use);
    `non_preemptible_used` likewise for pods labelled `preemptible: "false"`. The defaults of
    `enable_runtime_quota` and `check_parents` are ElasticQuotaArgs' (EnableRuntimeQuota on,
    EnableCheckParentQuota off)."""
    problem = tree.pod_problem(pod_quota)
    if problem is not None:
        return problem.message
    row = tree.rows[pod_quota.name]
    names = tree.resources
    managed = tree.max_mask[row]
    asked = leaf_ask(tree, row, request)
    limits = runtime if enable_runtime_quota else tree.max
    kind = "runtime" if enable_runtime_quota else "max"
    message = _message(f"quota {pod_quota.name}", _over(names, managed, used[row], asked, limits[row], kind))
    if message:
        return message
    if non_preemptible:
        held = non_preemptible_used if non_preemptible_used is not None else np.zeros_like(used)
        parts = _over(
            names, tree.min_mask[row], held[row], asked, tree.min[row], "min", "non-preemptible used"
        )
        message = _message(f"quota {pod_quota.name}", parts)
        if message:
            return message
    if check_parents:
        return koordinator_admit_ancestors(
            tree, runtime, used, {row: asked}, enable_runtime_quota=enable_runtime_quota
        )
    return None


def leaf_ask(tree: QuotaTree, row: int, request: Mapping[str, int]) -> Int64Array:
    """A request as it counts in quota `row` and above: in the resources the quota's max names
    (Koordinator masks a pod's request with its quota's max before adding it to used)."""
    return np.where(tree.max_mask[row], tree.vector(request), 0)


def koordinator_admit_ancestors(
    tree: QuotaTree,
    runtime: Int64Array,
    used: Int64Array,
    asks: Mapping[int, Int64Array],
    *,
    enable_runtime_quota: bool = True,
) -> str | None:
    """EnableCheckParentQuota's checkQuotaRecursive for pods admitted together: `asks` maps each
    quota row to what the pods of that quota ask (`leaf_ask`). Every ancestor below the root is
    checked against the sum of the asks beneath it, in the resources those pods ask for.

    Koordinator checks one pod at a time, and a gang's members already reserved count in every
    ancestor's used; the last member to ask a resource is thus checked with the whole gang's
    request in it, in every ancestor it shares with the others: all members pass iff the sums do."""
    names = tree.resources
    limits = runtime if enable_runtime_quota else tree.max
    kind = "runtime" if enable_runtime_quota else "max"
    summed: dict[int, Int64Array] = {}
    below: dict[int, list[str]] = {}
    # nearest ancestors first, in the order of the asks: the message names the first one passed
    for row, asked in asks.items():
        for a in tree.ancestors(row):
            acc = summed.get(a)
            summed[a] = asked.copy() if acc is None else acc + asked
            below.setdefault(a, []).append(tree.names[row])
    for a, asked in summed.items():
        parts = _over(names, tree.max_mask[a] & (asked > 0), used[a], asked, limits[a], kind)
        message = _message(f"quota {tree.names[a]} (above {', '.join(sorted(below[a]))})", parts)
        if message:
            return message
    return None


def capacity_admit(
    quotas: NamespaceQuotas,
    used: Int64Array,
    namespace: str,
    request: Mapping[str, int],
    *,
    nominated_in_quota: Mapping[str, int] | None = None,
    nominated_elsewhere: Mapping[str, int] | None = None,
) -> str | None:
    """scheduler-plugins' quota check of one pod of `namespace`. `used` (quota x resource, the rows
    of `quotas`): the summed requests of each namespace's assigned pods. `nominated_in_quota`: the
    requests of pods nominated to nodes in the same namespace at no lower priority than this pod;
    `nominated_elsewhere`: those of pods nominated in other namespaces whose quota is within its
    min. A pod of a namespace without a quota is not checked."""
    row = quotas.row(namespace)
    if row is None:
        return None
    problem = quotas.row_problems[row]
    if problem is not None:
        return problem.message
    in_quota = dict(request)
    for name, amount in (nominated_in_quota or {}).items():
        in_quota[name] = in_quota.get(name, 0) + amount
    everywhere = dict(in_quota)
    for name, amount in (nominated_elsewhere or {}).items():
        everywhere[name] = everywhere.get(name, 0) + amount
    names = quotas.resources
    subject = f"quota {namespace}/{quotas.names[row]}"

    asked = quotas.vector(in_quota)
    message = _message(
        subject, _over(names, quotas.core | (asked > 0), used[row], asked, quotas.max[row], "max")
    )
    if message:
        return message

    asked_all = quotas.vector(everywhere)
    total_used = used.sum(axis=0)
    total_min = quotas.min[quotas.valid].sum(axis=0)
    parts = _over(names, np.ones(len(names), dtype=np.bool_), total_used, asked_all, total_min, "min")
    # a resource no quota names has a min of 0 everywhere
    parts += [
        f"{name} used 0 + requested {format_amount(name, amount)} > min 0"
        for name, amount in sorted(quotas.off_axis(everywhere).items())
    ]
    return _message("quotas in total", parts)
