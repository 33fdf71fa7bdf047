"""Where a hot key's rows go: a key of share ``p`` over its ``⌈p·n⌉`` least-loaded workers.

``⌈p·n⌉`` is the fewest workers that keep each at or below the mean load, the replication of
the offline bound γ*; a key of one worker stays whole there. Used on the client
(:func:`keysplit.spark.hot_keys.placement`) and inside ``apply_grouped``'s plan, where
:class:`Placer` runs as a one-task ``mapInArrow``; the module travels by value, so that
task needs no keysplit on the executor.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import pyarrow as pa

#: Columns of the placement table (besides the key's).
COUNT = "__keysplit_count"
TOTAL = "__keysplit_total"
SLICE = "__keysplit_slice"


def workers_needed(count: int, total: int, workers: int) -> int:
    """``⌈count·workers/total⌉``, at least 1 and at most ``workers``: exact in integers."""
    if total <= 0:
        return 1
    return max(1, min(workers, -(-count * workers // total)))


def least_loaded(counts: Sequence[int], needs: Sequence[int], total: int, workers: int) -> list[list[int]]:
    """Each key's workers, hottest first: ``needs[i]`` least-loaded workers for the key of
    ``counts[i]`` rows (lowest index on a tie), counting the ``total`` rows of keys not
    listed as spread evenly; a key's rows are shared equally by its workers."""
    rest = max(total - sum(counts), 0) / workers
    heap = [(rest, w) for w in range(workers)]
    heapq.heapify(heap)
    slices: list[list[int]] = []
    for count, need in zip(counts, needs, strict=True):
        chosen = [heapq.heappop(heap) for _ in range(min(need, workers))]
        share = count / len(chosen)
        for load, worker in chosen:
            heapq.heappush(heap, (load + share, worker))
        slices.append(sorted(worker for _, worker in chosen))
    return slices


def _hottest_first(entry: tuple[Any, int]) -> tuple[int, bool, Any]:
    key, count = entry
    return (-count, key is not None, key)


@dataclass(frozen=True)
class Placer:
    """The placement task: the key counts (``key``, :data:`COUNT`, and :data:`TOTAL`, every
    row's count), in one partition, to each key's :data:`SLICE` of workers."""

    key: str
    workers: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        entries: list[tuple[Any, int]] = []
        total = 0
        key_type: pa.DataType | None = None
        for batch in batches:
            key_type = batch.schema.field(self.key).type
            keys = batch.column(self.key).to_pylist()
            counts = batch.column(COUNT).to_pylist()
            entries += zip(keys, counts, strict=True)
            if batch.num_rows:
                total = int(batch.column(TOTAL)[0].as_py() or 0)
        if not entries or key_type is None:
            return
        entries.sort(key=_hottest_first)
        counts = [count for _, count in entries]
        needs = [workers_needed(count, total, self.workers) for count in counts]
        slices = least_loaded(counts, needs, total, self.workers)
        yield pa.RecordBatch.from_pydict(
            {
                self.key: pa.array([key for key, _ in entries], key_type),
                COUNT: pa.array(counts, pa.int64()),
                TOTAL: pa.array([total] * len(entries), pa.int64()),
                SLICE: pa.array(slices, pa.list_(pa.int32())),
            }
        )
