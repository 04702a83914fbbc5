"""Trials: tentative changes to which pods sit on which node, always undone.

Preemption dry runs, victim minimisation, topology slot counting and filtering with nominated pods
all ask "what if these pods were on (or off) that node?". Each asks inside a trial:

    with snapshot.trial() as trial:
        trial.remove_pod(victim, row)
        trial.add_pod(member, row)
        ...  # run filters against the changed node table

The trial records every change it makes and, when the `with` block ends by whatever path (the end
of the block, a `return`, an exception), undoes them newest first; the node table (requested
resources, pod counts, label-selector counters, affinity-term counts, host ports, and each node's
pod map, in its iteration order) is then as it was when the trial began. A trial opened inside
another undoes only its own changes; only the innermost open trial may change anything, so undoing
is strictly last-in, first-out. Nothing is ever kept: committing a placement is the cache's job
(assume, confirm, forget), never a trial's.

What a trial does not give back is what no reader may take for node state: the snapshot's change
counters (`generation`, `term_match_generation`) keep counting up, since a cache keyed on a
generation seen inside the trial must not be trusted afterwards; label-selector counters first
asked for inside the trial stay, counting the pods that are on the nodes afterwards; a resource
first seen inside the trial keeps its number (all-zero amounts); and the order of the IPs a node
holds on a host port, of the affinity-term keys, and of a sparse resource's per-node amounts may
change: all are read as sets, sums or amounts by row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from koordpy.api.pod import Pod
    from koordpy.cache.snapshot import Snapshot

# one change: the pod, its row, and True for put on (False for taken off)
_Change = tuple["Pod", int, bool]

_NOT_INNERMOST = "only the innermost open trial may change the node table"


class TrialError(RuntimeError):
    """A trial used outside its `with` block, or while a trial opened inside it is still open."""


@dataclass(slots=True, eq=False)
class Trial:
    """One what-if on a snapshot; made by `Snapshot.trial()`, used as a context manager."""

    snapshot: Snapshot
    # the snapshot's open trials, innermost last (shared by every trial of that snapshot)
    open_trials: list[Trial]
    # every change still to undo, oldest first; None where a later change cancelled it
    _changes: list[_Change | None] = field(default_factory=list)
    # (row, pod key) -> index in _changes of the last change made to that pod on that row
    _last: dict[tuple[int, str], int] = field(default_factory=dict)
    # each row's pods, in order, from before this trial first took a pod off it: putting a pod back
    # appends it, and readers iterate a node's pods in the order the cache built
    _orders: dict[int, list[tuple[str, Pod]]] = field(default_factory=dict)

    def __enter__(self) -> Trial:
        if self in self.open_trials:
            raise TrialError("a trial cannot be entered twice")
        self.open_trials.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        trials = self.open_trials
        if not trials or trials[-1] is not self:
            if self in trials:
                trials.remove(self)
            raise TrialError("trials must end innermost first")
        trials.pop()
        if self._changes or self._orders:
            self._undo()

    # add_pod and remove_pod run for every pod of every node a dry run looks at: they check, change
    # and record in line rather than through helpers
    def add_pod(self, pod: Pod, row: int) -> bool:
        """Put the pod on the node; False (and no change) when a pod with its key is there already."""
        trials = self.open_trials
        if not trials or trials[-1] is not self:
            raise TrialError(_NOT_INNERMOST)
        snap = self.snapshot
        key = pod.key
        info = snap.infos[row]
        assert info is not None
        if key in info.pods:
            return False
        snap.add_pod(pod, row)
        at = (row, key)
        changes = self._changes
        last = self._last.get(at)
        if last is not None:
            change = changes[last]
            if change is not None and change[0] is pod and not change[2]:
                # it puts back what this trial took off: the pair leaves nothing to undo, and a dry
                # run that takes pods off and puts them back costs no more than it did by hand
                changes[last] = None
                del self._last[at]
                return True
        self._last[at] = len(changes)
        changes.append((pod, row, True))
        return True

    def remove_pod(self, pod: Pod, row: int) -> bool:
        """Take the pod with this key off the node; False (and no change) when it is not there."""
        trials = self.open_trials
        if not trials or trials[-1] is not self:
            raise TrialError(_NOT_INNERMOST)
        snap = self.snapshot
        key = pod.key
        info = snap.infos[row]
        assert info is not None
        pods = info.pods
        if key not in pods:
            return False
        if row not in self._orders:
            self._orders[row] = list(pods.items())
        stored = snap.remove_pod(pod, row)
        assert stored is not None
        at = (row, key)
        changes = self._changes
        last = self._last.get(at)
        if last is not None:
            change = changes[last]
            if change is not None and change[0] is stored and change[2]:
                # it takes off what this trial put on: nothing left to undo
                changes[last] = None
                del self._last[at]
                return True
        self._last[at] = len(changes)
        changes.append((stored, row, False))
        return True

    def _undo(self) -> None:
        snap = self.snapshot
        for change in reversed(self._changes):
            if change is None:
                continue
            pod, row, added = change
            if added:
                snap.remove_pod(pod, row)
            else:
                snap.add_pod(pod, row)
        for row, order in self._orders.items():
            pods = snap.info(row).pods
            if len(order) != len(pods):
                # pods this trial put on the row before it first took one off are gone again
                order = [(key, pods[key]) for key, _ in order if key in pods]
                assert len(order) == len(pods), "a trial's undo left a node with other pods than it found"
            pods.clear()
            pods.update(order)
        self._changes.clear()
        self._last.clear()
        self._orders.clear()
