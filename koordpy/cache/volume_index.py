"""Which volumes the pods on each node use, kept by the snapshot for pods that have any (most pods
have none and cost nothing here). Trials and preemption dry runs add and remove pods through the
snapshot, so they see, and undo, their changes here too.

Claims are keyed `namespace/name`. `claim_users` and `rows_using_claim` count only claims a pod
names in a persistentVolumeClaim volume, as kube-scheduler's PVCRefCounts (what ReadWriteOncePod
conflicts are decided on); `claims_on` lists generic ephemeral claims too (what the volume limits
count).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from koordpy.api.pod import Pod
from koordpy.api.podvolumes import InlineVolume

_NO_ROWS: Mapping[int, int] = {}
_NO_DISKS: Mapping[int, Sequence[InlineVolume]] = {}


def _bump(counts: dict[str, int], key: str, delta: int) -> None:
    left = counts.get(key, 0) + delta
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


class VolumeIndex:
    __slots__ = ("_claim_rows", "_disk_rows", "_row_claims", "_row_inline", "_sizes")

    def __init__(self) -> None:
        # named claim -> row -> pods on the row naming it
        self._claim_rows: dict[str, dict[int, int]] = {}
        # row -> claim (named or ephemeral) -> pods on the row using it
        self._row_claims: dict[int, dict[str, int]] = {}
        # row -> the inline disks of its pods, one entry per pod volume
        self._row_inline: dict[int, list[InlineVolume]] = {}
        # (kind, id) -> row -> those disks on the row: a disk conflict is looked up, not searched
        self._disk_rows: dict[tuple[str, str], dict[int, list[InlineVolume]]] = {}
        # row -> its claims plus its inline disk entries: what `volume_bounds` reads for an array
        # of rows at once (grown as rows come; rows past its end have none)
        self._sizes = np.zeros(0, dtype=np.int64)

    def update(self, pod: Pod, row: int, delta: int) -> None:
        """The pod (which has volumes) was placed on (+1) or taken off (-1) the row."""
        namespace = pod.namespace
        for volume in pod.volumes:
            inline = volume.inline
            if inline is not None:
                self._update_inline(inline, row, delta)
                continue
            key = f"{namespace}/{volume.claim_name}"
            claims = self._row_claims.get(row)
            if claims is None:
                claims = self._row_claims[row] = {}
            _bump(claims, key, delta)
            if not claims:
                del self._row_claims[row]
            if not volume.ephemeral:
                rows = self._claim_rows.get(key)
                if rows is None:
                    rows = self._claim_rows[key] = {}
                left = rows.get(row, 0) + delta
                if left > 0:
                    rows[row] = left
                else:
                    rows.pop(row, None)
                    if not rows:
                        del self._claim_rows[key]
        self._resize(row)

    def _resize(self, row: int) -> None:
        size = len(self._row_claims.get(row, ())) + len(self._row_inline.get(row, ()))
        sizes = self._sizes
        if row >= sizes.size:
            if not size:
                return
            grown = np.zeros(max(row + 1, 2 * sizes.size, 64), dtype=np.int64)
            grown[: sizes.size] = sizes
            self._sizes = sizes = grown
        sizes[row] = size

    def _update_inline(self, inline: InlineVolume, row: int, delta: int) -> None:
        disk = (inline.kind, inline.id)
        if delta > 0:
            self._row_inline.setdefault(row, []).append(inline)
            self._disk_rows.setdefault(disk, {}).setdefault(row, []).append(inline)
            return
        on_row = self._row_inline.get(row)
        if on_row is not None and inline in on_row:
            on_row.remove(inline)
            if not on_row:
                del self._row_inline[row]
        by_row = self._disk_rows.get(disk)
        if by_row is not None:
            held = by_row.get(row)
            if held is not None and inline in held:
                held.remove(inline)
                if not held:
                    del by_row[row]
            if not by_row:
                del self._disk_rows[disk]

    # ------------------------------------------------------------------------- queries
    def claim_users(self, key: str) -> int:
        """Pods on nodes (assumed ones included) naming the claim `namespace/name`."""
        rows = self._claim_rows.get(key)
        return sum(rows.values()) if rows else 0

    def rows_using_claim(self, key: str) -> Mapping[int, int]:
        """Row -> pods on it naming the claim."""
        return self._claim_rows.get(key, _NO_ROWS)

    def claims_on(self, row: int) -> Iterable[str]:
        """The claims (named and ephemeral) of the row's pods, each once."""
        claims = self._row_claims.get(row)
        return claims.keys() if claims else ()

    def inline_on(self, row: int) -> Sequence[InlineVolume]:
        """The inline disks of the row's pods, one entry per pod volume."""
        return self._row_inline.get(row, ())

    def rows_with_disk(self, kind: str, disk_id: str) -> Mapping[int, Sequence[InlineVolume]]:
        """Row -> the inline disks of that kind and id its pods mount."""
        return self._disk_rows.get((kind, disk_id), _NO_DISKS)

    def volume_bounds(self, rows: np.ndarray) -> np.ndarray:
        """Per row of `rows`: the claims plus the inline disk entries of its pods, which bounds
        the distinct volumes they use (each resolves to one volume at most)."""
        sizes = self._sizes
        out: np.ndarray
        if rows.size and int(rows.max()) < sizes.size:
            out = sizes[rows]
            return out
        out = np.zeros(rows.size, dtype=np.int64)
        inside = rows < sizes.size
        out[inside] = sizes[rows[inside]]
        return out

    def rows(self) -> Iterable[int]:
        """The rows holding any pod with volumes."""
        return self._row_claims.keys() | self._row_inline.keys()

    def __bool__(self) -> bool:
        return bool(self._row_claims or self._row_inline)

    def state(self) -> tuple[object, ...]:
        """Everything held, comparable (the consistency check and tests compare two indexes)."""
        return (
            {k: dict(v) for k, v in self._claim_rows.items()},
            {k: dict(v) for k, v in self._row_claims.items()},
            {k: sorted(map(repr, v)) for k, v in self._row_inline.items()},
            {k: {r: sorted(map(repr, d)) for r, d in v.items()} for k, v in self._disk_rows.items()},
        )

    @staticmethod
    def of(pods_by_row: Iterable[tuple[int, Iterable[Pod]]]) -> VolumeIndex:
        """The index the given placement should have."""
        index = VolumeIndex()
        for row, pods in pods_by_row:
            for pod in pods:
                if pod.volumes:
                    index.update(pod, row, 1)
        return index
