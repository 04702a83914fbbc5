"""Koordinator's runtime quota: how much of each resource each quota may use now.

Every quota is guaranteed its min; what its parent has beyond the mins its children hold is lent to
the children that ask for more than their min, in proportion to their shared weight, capped by what
they ask for, level by level from the root (the cluster) down. Each resource is split on its own.
This follows pkg/scheduler/plugins/elasticquota/core (group_quota_manager.go, quota_info.go,
runtime_quota_calculator.go, scale_minquota_when_over_root_res.go):

Requests, bottom-up (recursiveUpdateGroupTreeWithDeltaRequest, getLimitRequestNoLock):
    request(q)  = the requests of q's own pods, counted only in resources q's max names,
                  + the limited requests of q's children;
                  raised to q's min where q does not lend (`allow-lent-resource: "false"`)
    limited(q)  = min(request(q), max(q)) in every resource max names

Runtime, top-down (refreshRuntimeNoLock, quotaTree.redistribution):
    the root's runtime is the cluster's total less what the system and default quotas use;
    among the children of p, with T = runtime(p), for each resource:
      min'(c)   = min(c), or, when the children's mins add up to more than T and min scaling is on,
                  int(T * min(c) / sum of the mins)                       (ScaleMinQuotaManager)
      a child asking for more than min'(c) starts at min'(c) and waits for a share; one asking for
      no more starts at its request if it lends, at min'(c) if it does not;
      what T holds beyond those starts is split among the waiting children by shared weight, whole
      units by the largest remainder (ties to the smaller name); a child given more than it asks
      for keeps its request and hands the rest back to be split again among those still waiting.

One pass over the tree costs O(quotas x resources) array work per round of the split; a level
needs at most one round more than the number of its children that reach their request, in
practice two or three. Exact integers throughout: products beyond int64 are done in Python ints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.quota.tree import DEFAULT_ROW, ROOT_ROW, SYSTEM_ROW, BoolArray, Int64Array, QuotaTree

ObjectArray = npt.NDArray[np.object_]

_INT64_SAFE = 1 << 62


@dataclass(frozen=True, slots=True, eq=False)
class RuntimeQuota:
    """The state of one computation, quota x resource like the tree's matrices. Inactive quotas (with
    a problem, or below one) are all zeros."""

    # what each quota may use now: the root's is the cluster's share, the system and default
    # quotas' is their max (UNLIMITED where their max does not name the resource)
    runtime: Int64Array
    # what each quota asks for as Koordinator counts it (its own pods and its children's limited
    # requests, raised to min where it lends nothing)
    request: Int64Array
    # the request capped by max: what the quota asks of its parent
    limited_request: Int64Array
    # what the quota's own pods and its children's limited requests add up to, before the request
    # is raised to min (Koordinator's ChildRequest)
    child_request: Int64Array
    # the min each quota was given in the split (its min, scaled down when its siblings' mins add
    # up to more than their parent has)
    min: Int64Array


def runtime(
    tree: QuotaTree,
    requests: Int64Array,
    total: Int64Array,
    *,
    used: Int64Array | None = None,
    scale_min: bool = True,
) -> Int64Array:
    """The runtime quota matrix (quota x resource); see `runtime_state`."""
    return runtime_state(tree, requests, total, used=used, scale_min=scale_min).runtime


def runtime_state(
    tree: QuotaTree,
    requests: Int64Array,
    total: Int64Array,
    *,
    used: Int64Array | None = None,
    scale_min: bool = True,
) -> RuntimeQuota:
    """Runtime quota of every quota of `tree`.

    `requests` (quota x resource, the tree's rows and resources): the summed requests of each
    quota's own pods, pending and placed alike (Koordinator counts a pod in its quota's request
    from the moment it exists, in its used once it is assigned). `total`: the cluster's allocatable
    per resource. `used` (quota x resource), when given, takes what the system and default quotas'
    pods use off the total before the tree shares it out. `scale_min` is ElasticQuotaArgs'
    EnableMinQuotaScale (Koordinator's default: on)."""
    size, width = tree.size, len(tree.resources)
    requests = np.asarray(requests, dtype=np.int64)
    total = np.asarray(total, dtype=np.int64)
    if requests.shape != (size, width) or total.shape != (width,):
        raise ValueError(
            f"requests must be {size}x{width} and total {width} long for this tree, "
            f"got {requests.shape} and {total.shape}"
        )
    own = np.where(tree.max_mask & tree.active[:, None], requests, 0)
    own[ROOT_ROW] = 0

    # bottom-up: each quota's request and limited request, handed to its parent
    child_sum = own.copy()
    request = np.zeros((size, width), dtype=np.int64)
    limited = np.zeros((size, width), dtype=np.int64)
    children = np.zeros((size, width), dtype=np.int64)
    for level in reversed(tree.levels):
        asked = child_sum[level]
        children[level] = asked
        keeps_min = ~tree.allow_lent[level]
        asked = np.where(keeps_min[:, None], np.maximum(asked, tree.min[level]), asked)
        request[level] = asked
        capped = np.minimum(asked, tree.max[level])
        limited[level] = capped
        np.add.at(child_sum, tree.parent[level], capped)
    request[ROOT_ROW] = limited[ROOT_ROW] = child_sum[ROOT_ROW]
    for row in (SYSTEM_ROW, DEFAULT_ROW):
        request[row] = children[row] = own[row]
        limited[row] = np.minimum(own[row], tree.max[row])

    # top-down: each level shares out its parents' runtime
    result = np.zeros((size, width), dtype=np.int64)
    root_total = total.copy()
    if used is not None:
        used = np.asarray(used, dtype=np.int64)
        root_total -= used[SYSTEM_ROW] + used[DEFAULT_ROW]
    result[ROOT_ROW] = root_total
    mins = np.where(tree.active[:, None], tree.min, 0)
    for level in tree.levels:
        groups, member_of = np.unique(tree.parent[level], return_inverse=True)
        totals = result[groups]
        level_min = tree.min[level]
        if scale_min:
            level_min = _scaled_min(level_min, member_of, totals)
        mins[level] = level_min
        result[level] = _split(
            totals, member_of, limited[level], level_min, tree.weight[level], tree.allow_lent[level]
        )
    result[SYSTEM_ROW] = tree.max[SYSTEM_ROW]
    result[DEFAULT_ROW] = tree.max[DEFAULT_ROW]
    inactive = ~tree.active
    # the root's ChildRequest is not kept (recursiveUpdateGroupTreeWithDeltaRequest stops there)
    children[ROOT_ROW] = 0
    for matrix in (result, request, limited, children, mins):
        matrix[inactive] = 0
        matrix.setflags(write=False)
    return RuntimeQuota(
        runtime=result, request=request, limited_request=limited, child_request=children, min=mins
    )


def subtree_sums(tree: QuotaTree, own: Int64Array) -> Int64Array:
    """Each quota's amounts together with those of every quota below it, the way Koordinator keeps
    `used` and non-preemptible used (updateGroupDeltaUsedNoLock): a pod's request, counted in the
    resources its quota's max names, is added to its quota and to every ancestor. `own` (quota x
    resource) holds what each quota's own pods amount to. The root's row is the whole cluster's: the
    tree's, the system quota's and the default quota's."""
    own = np.asarray(own, dtype=np.int64)
    out = np.where(tree.max_mask & tree.active[:, None], own, 0)
    out[ROOT_ROW] = 0
    for level in reversed(tree.levels):
        np.add.at(out, tree.parent[level], out[level])
    out[ROOT_ROW] += out[SYSTEM_ROW] + out[DEFAULT_ROW]
    out.setflags(write=False)
    return out


def _group_sum(values: Int64Array, member_of: Int64Array, groups: int) -> Int64Array:
    out = np.zeros((groups, values.shape[1]), dtype=np.int64)
    np.add.at(out, member_of, values)
    return out


def _scaled_min(level_min: Int64Array, member_of: Int64Array, totals: Int64Array) -> Int64Array:
    """Where the children's mins add up to more than their parent has, each child's min is
    int(total * min / sum of mins), computed in float64 as Koordinator does; a total of nothing
    gives every child a min of 0."""
    sums = _group_sum(level_min, member_of, len(totals))
    short = totals < sums
    if not short.any():
        return level_min
    total_of = totals[member_of].astype(np.float64)
    sum_of = sums[member_of].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.trunc(total_of * level_min.astype(np.float64) / sum_of)
    scaled = np.where((total_of > 0) & (sum_of > 0), scaled, 0).astype(np.int64)
    return np.where(short[member_of], scaled, level_min)


def _split(
    totals: Int64Array,
    member_of: Int64Array,
    asked: Int64Array,
    floor: Int64Array,
    weight: Int64Array,
    lends: BoolArray,
) -> Int64Array:
    """One level of quotaTree.redistribution, for every parent (group) and resource at once. Rows
    arrive in name order, which is the tie-break of the largest remainders."""
    groups = len(totals)
    wants_more = asked > floor
    share = np.where(wants_more | ~lends[:, None], floor, asked)
    to_split = totals - _group_sum(share, member_of, groups)
    waiting = wants_more & (weight > 0)
    live = to_split > 0
    while True:
        weights = np.where(waiting, weight, 0)
        weight_sum = _weight_sum(weights, member_of, groups)
        live &= weight_sum > 0
        cells = waiting & live[member_of]
        if not cells.any():
            return share
        rows, cols = np.nonzero(cells)
        segment = member_of[rows] * totals.shape[1] + cols
        delta = _largest_remainder(
            to_split[member_of[rows], cols],
            weight_sum[member_of[rows], cols],
            weight[rows, cols],
            segment,
            rows,
        )
        share[rows, cols] += delta
        full = np.zeros_like(cells)
        full[rows, cols] = share[rows, cols] >= asked[rows, cols]
        handed_back = np.where(full, share - asked, 0)
        share = np.where(full, asked, share)
        to_split = _group_sum(handed_back, member_of, groups)
        waiting &= ~full
        live &= to_split > 0


def _weight_sum(weights: Int64Array, member_of: Int64Array, groups: int) -> Int64Array:
    if int(weights.max(initial=0)) * len(weights) < _INT64_SAFE:
        return _group_sum(weights, member_of, groups)
    # weights near the top of the range: sum in Python ints, and saturate the few sums beyond int64
    out = np.zeros((groups, weights.shape[1]), dtype=object)
    np.add.at(out, member_of, weights.astype(object))
    return np.minimum(out, _INT64_SAFE).astype(np.int64)


def _largest_remainder(
    amount: Int64Array, weight_sum: Int64Array, weight: Int64Array, segment: Int64Array, tie: Int64Array
) -> Int64Array:
    """computeHamiltonDeltas for many splits at once: each cell gets floor(w * amount / W) of its
    segment's amount, and the units left over go one each to the cells with the largest
    remainders, ties to the smaller `tie` (the row, i.e. the name)."""
    exact = int(weight.max(initial=0)) * int(amount.max(initial=0)) >= _INT64_SAFE
    if exact:
        product: ObjectArray = weight.astype(object) * amount.astype(object)
        base_o: ObjectArray = product // weight_sum.astype(object)
        remainder_o: ObjectArray = product - base_o * weight_sum.astype(object)
        base = base_o.astype(np.int64)
        # only the order of remainders matters: rank them, equal ones equal
        rank = np.unique(remainder_o, return_inverse=True)[1].reshape(-1).astype(np.int64)
    else:
        product_i = weight * amount
        base = product_i // weight_sum
        rank = product_i % weight_sum
    order = np.lexsort((tie, -rank, segment))
    seg_sorted = segment[order]
    starts = np.flatnonzero(np.r_[True, seg_sorted[1:] != seg_sorted[:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    base_sorted = base[order]
    left_over = amount[order][starts] - np.add.reduceat(base_sorted, starts)
    position = np.arange(len(order)) - np.repeat(starts, counts)
    delta = np.empty_like(base)
    delta[order] = base_sorted + (position < np.repeat(left_over, counts))
    return delta
