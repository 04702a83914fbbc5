"""ClusterNetworkTopology `status.detailStatus`, kept true as nodes come, go and change labels.

Only the object named `default` is maintained (the scheduler reads no other). Every change to it
or to a node's labels (or the set of nodes) marks the status stale; it is recomputed from the spec
and the node labels of `operators.facts.ClusterFacts` at most once per `min_interval`, never before
the facts have synced, and written only when it differs. A spec whose layers do not
form one chain gets condition `Valid=False` (reason `InvalidSpec`) and `status.message` naming the
problem, loses its detailStatus (placement works without topology then), and is logged; both are
cleared once the spec is fixed.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import kopf

from koordpy.api import names
from koordpy.api.node import Node
from koordpy.api.time import format_timestamp
from koordpy.kubeapi.client import MERGE_PATCH, ApiError
from koordpy.status.topology import (
    TopologySpecError,
    TopologyTree,
    build_tree,
    detail_status,
    parse_layer_chain,
)
from operators.memo import controller_in_memo
from operators.podgroup import StatusApi

if TYPE_CHECKING:
    from operators.facts import ClusterFacts

logger = logging.getLogger("koordpy.operators.topology")

GROUP = "scheduling.koordinator.sh"
VERSION = "v1alpha1"
PLURAL = "clusternetworktopologies"
NAME = "default"
VALID = "Valid"
INVALID_SPEC = names.INVALID_SPEC
PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{NAME}"

# where the handlers find the controller in kopf's memo
MEMO_KEY = "topology"
# how many excluded nodes a log line names
_LOGGED_NODES = 10


def compute_detail_status(
    spec: Mapping[str, Any] | None, node_labels: Mapping[str, Mapping[str, str]]
) -> tuple[list[dict[str, Any]] | None, TopologyTree | None, str | None]:
    """(detailStatus, tree, None) for a usable spec, (None, None, problem) for a broken one."""
    try:
        chain = parse_layer_chain(spec)
    except TopologySpecError as err:
        return None, None, str(err)
    nodes = [
        Node.from_dict({"metadata": {"name": name, "labels": dict(labels)}})
        for name, labels in node_labels.items()
    ]
    tree = build_tree(chain, nodes)
    return detail_status(tree), tree, None


def status_patch(
    current: Mapping[str, Any],
    detail: list[dict[str, Any]] | None,
    problem: str | None,
    generation: int | None,
    now: float,
) -> dict[str, Any] | None:
    """The merge patch of `status` that makes `current` say `detail` (or `problem`), or None when
    it already does. Conditions of other types are kept as they are."""
    stored = [c for c in current.get("conditions") or [] if isinstance(c, Mapping)]
    conditions: list[Mapping[str, Any]] = [c for c in stored if c.get("type") != VALID]
    if problem is not None:
        old = next((c for c in stored if c.get("type") == VALID), None)
        unchanged = old is not None and old.get("status") == "False" and old.get("lastTransitionTime")
        condition: dict[str, Any] = {
            "type": VALID,
            "status": "False",
            "reason": INVALID_SPEC,
            "message": problem,
            "lastTransitionTime": old["lastTransitionTime"] if unchanged and old else format_timestamp(now),
        }
        if generation is not None:
            condition["observedGeneration"] = generation
        conditions.append(condition)
    desired: dict[str, Any] = {
        "detailStatus": detail,
        "conditions": conditions or None,
        "message": problem,
    }
    patch = {field: value for field, value in desired.items() if current.get(field) != value}
    return patch or None


class TopologyController:
    """Recomputes the `default` ClusterNetworkTopology's status when the handlers of `register`
    report a change of the object or `facts` one of the nodes. `run` computes nothing before
    `facts.synced` is set."""

    def __init__(
        self, api: StatusApi, facts: ClusterFacts, *, min_interval: float = 1.0, max_backoff: float = 30.0
    ) -> None:
        self._api = api
        self._facts = facts
        self._min_interval = min_interval
        self._max_backoff = max_backoff
        # the last tree built from a valid spec (None while the spec is broken or absent)
        self.tree: TopologyTree | None = None
        self._stale = asyncio.Event()
        self._reported_problem: str | None = None
        self._reported_excluded: Mapping[str, str] = {}

    # ------------------------------------------------------------------ events
    def mark_stale(self) -> None:
        self._stale.set()

    # ------------------------------------------------------------------ work
    async def run(self) -> None:
        self._facts.add_nodes_listener(self.mark_stale)
        try:
            # a tree of the nodes listed so far would be wrong until every node is in
            await self._facts.synced.wait()
            # the object's events may all have come before the nodes did
            self.mark_stale()
            await self._recompute_when_stale()
        finally:
            self._facts.remove_nodes_listener(self.mark_stale)

    async def _recompute_when_stale(self) -> None:
        loop = asyncio.get_running_loop()
        last_run = -math.inf
        failures = 0
        while True:
            await self._stale.wait()
            pause = last_run + self._min_interval - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            self._stale.clear()
            last_run = loop.time()
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failures += 1
                delay = min(0.5 * 2 ** (failures - 1), self._max_backoff)
                level = logging.WARNING if failures > 2 else logging.DEBUG
                logger.log(
                    level,
                    "ClusterNetworkTopology %s: status update failed (%s); retrying in %.1fs",
                    NAME,
                    err,
                    delay,
                )
                loop.call_later(delay, self._stale.set)
            else:
                failures = 0

    async def reconcile(self) -> None:
        """Recompute the status from the stored spec and the nodes' labels; write it if it differs."""
        if not self._facts.synced.is_set():
            raise RuntimeError("the node facts are not synced yet")
        try:
            obj = await self._api.request("GET", PATH)
        except ApiError as err:
            if err.status == 404:
                self.tree = None
                self._reported_problem = None
                return
            raise
        spec = obj.get("spec")
        if spec is None or isinstance(spec, Mapping):
            detail, tree, problem = compute_detail_status(spec or {}, self._facts.node_labels())
        else:
            # said as such: read as an empty map it would be reported as listing no layers
            detail, tree = None, None
            problem = f"spec: must be an object with networkTopologySpec, got {type(spec).__name__}"
        self.tree = tree
        self._report(problem, tree)
        current = obj.get("status")
        current = current if isinstance(current, Mapping) else {}
        generation = (obj.get("metadata") or {}).get("generation")
        patch = status_patch(
            current, detail, problem, generation if isinstance(generation, int) else None, time.time()
        )
        if patch is None:
            return
        try:
            await self._api.request(
                "PATCH", f"{PATH}/status", body={"status": patch}, content_type=MERGE_PATCH
            )
        except ApiError as err:
            if err.status == 404:
                return
            raise
        if detail is not None and "detailStatus" in patch:
            logger.info(
                "ClusterNetworkTopology %s: detailStatus updated (%d domains, %d nodes)",
                NAME,
                len(detail),
                detail[0]["nodeNum"] if detail else 0,
            )

    def _report(self, problem: str | None, tree: TopologyTree | None) -> None:
        if problem != self._reported_problem:
            if problem is not None:
                logger.warning(
                    "ClusterNetworkTopology %s has an invalid spec; gangs are placed without network "
                    "topology until it is fixed: %s",
                    NAME,
                    problem,
                )
            else:
                logger.info("ClusterNetworkTopology %s: the spec is valid again", NAME)
            self._reported_problem = problem
        excluded = dict(tree.excluded) if tree is not None else {}
        if excluded != self._reported_excluded:
            if excluded:
                shown = sorted(excluded.items())[:_LOGGED_NODES]
                more = len(excluded) - len(shown)
                logger.info(
                    "ClusterNetworkTopology %s: %d node(s) are outside the network topology: %s%s",
                    NAME,
                    len(excluded),
                    "; ".join(f"{node}: {why}" for node, why in shown),
                    f"; and {more} more" if more else "",
                )
            self._reported_excluded = excluded


def _controller(memo: Any) -> TopologyController:
    return controller_in_memo(memo, MEMO_KEY, TopologyController, "topology")


def register(registry: kopf.OperatorRegistry) -> None:
    """The topology handlers; the operator's memo must hold a TopologyController under MEMO_KEY."""

    @kopf.on.event(
        GROUP, VERSION, PLURAL, id="topology-object", field="metadata.name", value=NAME, registry=registry
    )
    async def topology_event(memo: Any, **_: Any) -> None:
        _controller(memo).mark_stale()
