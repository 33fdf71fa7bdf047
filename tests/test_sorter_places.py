"""The places Spark's one-task radix sorter moves rows to, found on the client
(:mod:`keysplit.spark.sorter_places`), against a simulation of the sorter's buffer."""

from __future__ import annotations

import numpy as np
import pytest

from keysplit.spark.row_index import PLACE_BITS
from keysplit.spark.sorter_places import COUNTED_PARTITIONS, CountedPlaces, check_sums, moved_places


def sorter_buffer(nulls: list[bool]) -> list[int]:
    """The times (indices in the input) of the rows in the order Spark's sorter leaves them
    in its buffer, nulls first: each null arriving takes the place of the first non-null row,
    which moves to the end (``UnsafeInMemorySorter.insertRecord``)."""
    buffer: list[int] = []
    held = 0
    for time, null in enumerate(nulls):
        if null and held < len(buffer):
            buffer.append(buffer[held])
            buffer[held] = time
        else:
            buffer.append(time)
        held += null
    return buffer


def input_of(rows: list[int], share: float, seed: int) -> tuple[list[bool], np.ndarray, CountedPlaces]:
    """Partitions of ``rows`` rows, nulls at ``share`` of them: the nulls by time, each
    row's position by time, and what the statistics observe."""
    rng = np.random.default_rng(seed)
    nulls = (rng.random(sum(rows)) < share).tolist()
    positions = np.concatenate([(p << PLACE_BITS) + np.arange(n, dtype=np.int64) for p, n in enumerate(rows)])
    counted = CountedPlaces(
        {p: n for p, n in enumerate(rows) if n and p < COUNTED_PARTITIONS},
        len(rows) - 1,
        positions[np.flatnonzero(nulls)],
    )
    return nulls, positions, counted


@pytest.mark.parametrize(
    ("rows", "share"),
    [
        ([40], 0.3),
        ([5, 0, 7, 3, 20], 0.5),
        ([3] * 300, 0.2),
        ([1000, 1000], 0.01),
        ([10, 10], 0.95),
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_moved_row_ends_where_the_sorter_leaves_it(rows, share, seed):
    nulls, positions, counted = input_of(rows, share, seed)
    moved = moved_places(counted)
    assert moved is not None
    # Each non-null row's place among peers: its own position, or a moved one's.
    place = positions.copy()
    for partition, share_ in moved.items():
        start = sum(rows[:partition])
        for offset, value in enumerate(share_.tolist()):
            if not nulls[start + offset]:
                place[start + offset] = value
    buffer = sorter_buffer(nulls)
    valued = [time for time in buffer if not nulls[time]]
    # Sorting the non-null rows by their places gives the sorter's order among them.
    assert sorted(valued, key=lambda time: place[time]) == valued
    # Only the input's first Z times are listed.
    assert sum(len(v) for v in moved.values()) == min(sum(nulls), sum(rows))


def test_no_nulls_move_nothing():
    _, _, counted = input_of([50, 50], 0.0, 0)
    assert moved_places(counted) == {}


def test_places_beyond_the_counted_partitions_are_left_to_the_plan():
    # More partitions than are counted, whose counted ones hold fewer rows than there are
    # nulls: a row moved may be in one not counted.
    rows = [1] * (COUNTED_PARTITIONS + 50)
    _, _, counted = input_of(rows, 0.9, 0)
    assert sum(counted.partition_rows.values()) < len(counted.positions)
    assert moved_places(counted) is None
    # Where the counted ones hold enough, the rest need no count.
    _, positions, counted = input_of([500] + [1] * (COUNTED_PARTITIONS + 50), 0.1, 0)
    assert moved_places(counted) is not None


def test_check_sums_are_the_counted_partitions_and_the_nulls():
    nulls, positions, counted = input_of([4, 0, 3], 0.5, 3)
    partitions, places = positions >> PLACE_BITS, positions & ((1 << PLACE_BITS) - 1)
    null = np.asarray(nulls)
    assert check_sums(counted) == (
        7,
        int(places.sum()),
        int(partitions.sum()),
        int(null.sum()),
        int(places[null].sum()),
        int(partitions[null].sum()),
    )
