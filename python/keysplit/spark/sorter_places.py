"""Where Spark's one-task sorter puts the rows it moves among peers, found on the client.

A window with no ``partitionBy`` sorts every row in one task, by radix where its one order
column allows (:attr:`keysplit.spark.window.SkewWindow.radix_ties`): the sorter keeps the
nulls at its buffer's start, and each null arriving moves the first non-null row to the end
to make room, so rows of equal order values leave in that buffer's order, not the input's.
:meth:`~keysplit.spark.window.SkewWindow.spark_places` computes where they end inside the
plan, from an aggregate over the input and a chain of one-task stages the window waits for.
Here the same places come from what :mod:`.statistics` observed while it sampled the input
(each input partition's rows), and the nulls' positions listed in a stage after it, and go
into the plan as a literal table: no chain.

The positions are ``monotonically_increasing_id``'s: an input partition's index above
:data:`~keysplit.spark.row_index.PLACE_BITS` bits of place in it. They match the plan's only
where the plan reads the input in the same partitions as the statistics did (an input whose
plan has no exchange: :attr:`keysplit.spark.statistics.SampleRequest.placed`), and only while
the input is unchanged; :func:`check_sums` are what the plan recounts to fail the query
otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from keysplit.spark.row_index import PLACE_BITS

#: The input partitions whose rows the statistics count (by their index, from 0): the rows
#: moved are among the input's first ``Z`` (its nulls' count), which the first few hold
#: where nulls are a small share. Where these hold fewer, the places are the plan's own.
COUNTED_PARTITIONS = 256
#: The most nulls whose positions the statistics list (counted first, so no more reach the
#: driver): the places are a literal table of up to as many longs (8 MiB), sent with every
#: request that carries the plan, and read by two of its branches. Where there are more,
#: the plan computes them.
LISTED_NULLS = 1 << 20


@dataclass(frozen=True)
class CountedPlaces:
    """What the statistics observed over every row of the input: the rows of each of its
    first :data:`COUNTED_PARTITIONS` partitions (by index; a partition with no row is not
    listed), the index of its last partition, and the positions of the rows counted (the
    nulls of the order column), in ascending order."""

    partition_rows: Mapping[int, int]
    last_partition: int
    positions: np.ndarray


def _split(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each position's input partition and place in it (``partition_and_place``'s, in numpy)."""
    return positions >> PLACE_BITS, positions & ((1 << PLACE_BITS) - 1)


def moved_places(counted: CountedPlaces) -> dict[int, np.ndarray] | None:
    """Per input partition holding rows the sorter moves, the places they end at (the
    positions of nulls), the partition's first row's first: the table
    :meth:`~keysplit.spark.window.SkewWindow.at_spark_places` reads. None where the counted
    partitions hold fewer rows than there are nulls (a row moved may be in one not counted).

    The rows at times ``0 .. Z-1`` (their index in the input) are the ones moved: the ``s``-th
    null moves the row at time ``s`` to where it arrived; if that was at a time ``e < Z``,
    the ``e``-th null moves it again, and so on; the row ends at the last such null's
    position (a null itself is never moved; its entry is not read)."""
    positions = np.asarray(counted.positions, dtype=np.int64)
    nulls = len(positions)
    if nulls == 0:
        return {}
    counts = np.zeros(COUNTED_PARTITIONS, dtype=np.int64)
    for partition, rows in counted.partition_rows.items():
        counts[partition] = rows
    if counted.last_partition >= COUNTED_PARTITIONS and counts.sum() < nulls:
        return None
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    partitions, places = _split(positions)
    # A null in a partition not counted comes after every counted row: past the first Z.
    counted_partition = partitions < COUNTED_PARTITIONS
    times = np.where(counted_partition, starts[np.minimum(partitions, COUNTED_PARTITIONS - 1)] + places, nulls)
    ends = np.where(times < nulls, times, np.arange(nulls))
    while True:
        further = ends[ends]
        if np.array_equal(further, ends):
            break
        ends = further
    moved = positions[ends]
    share: dict[int, np.ndarray] = {}
    for index in np.flatnonzero(counts).tolist():
        start = int(starts[index])
        if start >= nulls:
            break
        share[index] = moved[start : start + min(int(counts[index]), nulls - start)]
    return share


def check_sums(counted: CountedPlaces) -> tuple[int, int, int, int, int, int]:
    """What the plan recounts over its input to find it unchanged since the statistics
    (:attr:`~keysplit.spark.window.SkewWindow.places_check`): the rows of the counted
    partitions, the sum of their places and of their partitions' indices, and the same three
    of the nulls. A row added, lost or moved to another partition changes one of them."""
    counts = {int(p): int(n) for p, n in counted.partition_rows.items()}
    partitions, places = _split(np.asarray(counted.positions, dtype=np.int64))
    return (
        sum(counts.values()),
        sum(n * (n - 1) // 2 for n in counts.values()),
        sum(p * n for p, n in counts.items()),
        len(places),
        int(places.sum()),
        int(partitions.sum()),
    )
