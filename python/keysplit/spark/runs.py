"""Runs of equal values in a column: where a sorted batch changes group, or a window ends.

Used on the client and on the executors, where it travels by value (the modules that run
there register it with cloudpickle), so it needs only PyArrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa


def run_starts(values: pa.Array | pa.ChunkedArray) -> list[int]:
    """The offsets where a run of equal values starts: ``[0, ...]`` for a non-empty column,
    ``[]`` for an empty one. Nulls equal each other, as a group key's do."""
    import pyarrow.compute as pc

    if len(values) == 0:
        return []
    if len(values) == 1:
        return [0]
    after, before = values.slice(1), values.slice(0, len(values) - 1)
    same = pc.or_(
        pc.fill_null(pc.equal(after, before), False),
        pc.and_(pc.is_null(after), pc.is_null(before)),
    )
    return [0, *(pc.indices_nonzero(pc.invert(same)).to_numpy() + 1).tolist()]


def run_slices(values: pa.Array | pa.ChunkedArray) -> list[tuple[int, int]]:
    """``(offset, length)`` of each run of equal values, in order."""
    starts = run_starts(values)
    ends = [*starts[1:], len(values)]
    return [(start, end - start) for start, end in zip(starts, ends, strict=True)]


def _same(a: pa.Scalar, b: pa.Scalar) -> bool:
    return a.is_valid == b.is_valid and (not a.is_valid or a == b)


def grouped_runs(batches: Iterator[pa.RecordBatch], column: str) -> Iterator[list[pa.RecordBatch]]:
    """The pieces of each run of equal ``column`` values of a stream of batches sorted by it:
    one list per run, holding its slices of consecutive batches (a run may span batches)."""
    pending: list[pa.RecordBatch] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        values = batch.column(column)
        for number, (start, length) in enumerate(run_slices(values)):
            piece = batch.slice(start, length)
            if number == 0 and pending and _same(values[0], pending[-1].column(column)[-1]):
                pending.append(piece)
                continue
            if pending:
                yield pending
            pending = [piece]
    if pending:
        yield pending
