"""Where a hot join key's rows meet: a grid of ``r × c`` cells, each on a shuffle partition of its own.

A hot key with ``L`` rows on the left and ``R`` on the right is given ``g`` cells, the
fewest that keep each cell's work at or below a mean task's (see :mod:`keysplit.spark.join`).
Its left rows are spread over ``r`` grid rows and each is copied to the ``c`` cells of its
grid row; its right rows are spread over ``c`` grid columns and copied to the ``r`` cells of
their column; so each pair of a left and a right row meets in exactly one cell, the grid of
tresata/spark-skewjoin. ``r`` and ``c`` minimise the rows copied, ``L·c + R·r``, for
``r·c ≥ g``: ``r ≈ √(g·L/R)``. A key on one side only (``R = 0``) is spread over ``g`` rows
and copied nowhere; a semi or anti join copies no left row (``c = 1``), since a left row
met twice would be kept twice.

Each cell is a salt value ``s`` of the join's extra key column, chosen so that Spark's
exchange, which sends a row to partition ``pmod(hash(keys, s), P)``, puts the cell on the
least-loaded partition not yet holding a cell of the same key: the placement task gets
every hot key's candidate salts with their partitions, computed by Spark's own ``hash``.

This module runs in a Spark task on executors that may lack keysplit: it travels by value
and needs only PyArrow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa

PREFIX = "__keysplit_join_"
#: Rows of the key on the left and on the right (exact counts).
LEFT_ROWS = PREFIX + "left_rows"
RIGHT_ROWS = PREFIX + "right_rows"
#: The key's hash, ``xxhash64(seed, keys)``: what the rows find their key's grid by.
KEY_HASH = PREFIX + "key_hash"
#: Cells the key needs.
CELLS = PREFIX + "cells"
#: A candidate salt and the partition Spark's exchange sends it to.
SALT = PREFIX + "salt"
PARTITION = PREFIX + "partition"
#: The grid: its rows, its columns and the salt of each cell, row-major.
GRID_ROWS = PREFIX + "grid_rows"
GRID_COLUMNS = PREFIX + "grid_columns"
SALTS = PREFIX + "salts"


def grid_shape(cells: int, left: int, right: int, *, copy_left: bool) -> tuple[int, int]:
    """``(r, c)`` with ``r·c ≥ cells`` and the fewest rows copied, ``left·c + right·r``;
    ``c = 1`` when the left rows may not be copied or the key has no right rows, ``r = 1``
    when it has no left rows."""
    if not copy_left or right == 0:
        return cells, 1
    if left == 0:
        return 1, cells
    best: tuple[int, int, int] | None = None
    around = max(1, round(math.sqrt(cells * left / right)))
    for rows in {1, cells, *range(max(1, around - 2), min(cells, around + 2) + 1)}:
        columns = -(-cells // rows)
        copied = left * columns + right * rows
        if best is None or (copied, rows * columns) < (best[0], best[1] * best[2]):
            best = (copied, rows, columns)
    assert best is not None
    return best[1], best[2]


@dataclass(frozen=True)
class JoinGrid:
    """The placement task: hot keys (:data:`KEY_HASH`, ``keys``, :data:`LEFT_ROWS`,
    :data:`RIGHT_ROWS`, :data:`CELLS`), one row per candidate :data:`SALT` with its
    :data:`PARTITION` of ``partitions``, in one Spark partition, to each key's grid, one
    row per key hash. A row of no cells holds both sides' total rows; it comes out as a
    grid of no cells with null keys."""

    keys: tuple[str, ...]
    partitions: int
    copy_left: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        candidates: dict[int, list[tuple[int, int]]] = {}
        facts: dict[int, tuple[tuple[Any, ...], int, int, int]] = {}
        columns = [table.column(name).to_pylist() for name in self.keys]
        hashes, left, right, cells = (table.column(n).to_pylist() for n in (KEY_HASH, LEFT_ROWS, RIGHT_ROWS, CELLS))
        salts, partitions = table.column(SALT).to_pylist(), table.column(PARTITION).to_pylist()
        totals = (0, 0)
        for i in range(table.num_rows):
            if cells[i] == 0:
                totals = (left[i], right[i])
                continue
            key = tuple(column[i] for column in columns)
            # Keys are found by their hash: of two hot keys of one hash (about one chance in
            # 10^13 for a thousand), the lighter stays cold, which is exact too.
            held = facts.get(hashes[i])
            if held is not None and held[0] != key and _work(held[1:]) >= _work((left[i], right[i], cells[i])):
                continue
            if held is None or held[0] != key:
                candidates[hashes[i]] = []
            facts[hashes[i]] = (key, left[i], right[i], cells[i])
            candidates[hashes[i]].append((salts[i], partitions[i]))
        # The cold keys' rows spread evenly: only the hot cells tell partitions apart.
        load = [0.0] * self.partitions
        out: dict[str, list[Any]] = {
            name: [] for name in (KEY_HASH, *self.keys, LEFT_ROWS, RIGHT_ROWS, GRID_ROWS, GRID_COLUMNS, SALTS)
        }
        # Heaviest key first, so that the largest cells take the emptiest partitions; the
        # order is fixed by the counts and the hash, so every run places alike.
        for hashed in sorted(facts, key=lambda h: (-_work(facts[h][1:]), h)):
            key, left_rows, right_rows, wanted = facts[hashed]
            rows, cols = grid_shape(wanted, left_rows, right_rows, copy_left=self.copy_left)
            cell_load = left_rows / rows + right_rows / cols + left_rows * right_rows / (rows * cols)
            # One salt per partition (the smallest): a key's cells want distinct partitions.
            firsts: dict[int, int] = {}
            for salt, part in sorted(candidates[hashed]):
                firsts.setdefault(part, salt)
            options = sorted((salt, part) for part, salt in firsts.items())
            used: set[int] = set()
            chosen: list[int] = []
            for _ in range(rows * cols):
                fresh = [(salt, part) for salt, part in options if part not in used] or options
                salt, part = min(fresh, key=lambda option: (load[option[1]], option[0]))
                chosen.append(salt)
                used.add(part)
                load[part] += cell_load
            _append(out, (hashed, *key, left_rows, right_rows, rows, cols, chosen))
        # The totals' row: null keys, a grid of no cells, and a hash no hot key has, so that
        # the table is never empty (Spark drops a join with an empty side from the plan, and
        # the report's observation with it) and joins each row once at most.
        free = next(value for value in range(len(facts) + 1) if value not in facts)
        _append(out, (free, *[None] * len(self.keys), totals[0], totals[1], 0, 0, []))
        schema = pa.schema(
            [
                pa.field(KEY_HASH, pa.int64()),
                *(table.schema.field(name) for name in self.keys),
                pa.field(LEFT_ROWS, pa.int64()),
                pa.field(RIGHT_ROWS, pa.int64()),
                pa.field(GRID_ROWS, pa.int32()),
                pa.field(GRID_COLUMNS, pa.int32()),
                pa.field(SALTS, pa.list_(pa.int32())),
            ]
        )
        yield pa.RecordBatch.from_pydict(out, schema=schema)


def _work(counts: tuple[int, int, int]) -> int:
    left, right, _ = counts
    return left + right + left * right


def _append(out: dict[str, list[Any]], row: tuple[Any, ...]) -> None:
    for column, value in zip(out.values(), row, strict=True):
        column.append(value)
