"""Where a hot join key's rows meet: a grid of ``r × c`` cells, each on a shuffle partition of its own.

A hot key with ``L`` rows on the left and ``R`` on the right is given ``g`` cells, the
fewest that keep each cell's work at or below a mean task's (see :mod:`keysplit.spark.join`)
when ``L`` and ``R`` are at the upper bounds of their estimates from a sample.
Its left rows are spread over ``r`` grid rows and each is copied to the ``c`` cells of its
grid row; its right rows are spread over ``c`` grid columns and copied to the ``r`` cells of
their column; so each pair of a left and a right row meets in exactly one cell, the grid of
tresata/spark-skewjoin. ``r`` and ``c`` minimise the rows copied, ``L·c + R·r``, for
``r·c ≥ g``: ``r ≈ √(g·L/R)``. A key the sample saw on one side only (``R = 0``) is
spread over ``g`` rows and its rows copied nowhere (a right row the sample missed is copied
down its one column); a semi or anti join copies no left row (``c = 1``), since a left row
met twice would be kept twice.

Each cell is a salt value ``s`` of the join's extra key column, chosen so that Spark's
exchange, which sends a row to partition ``pmod(hash(keys, s), P)``, puts the cell on the
least-loaded partition not yet holding a cell of the same key. :func:`spark_hash` is
Spark's ``hash`` (Murmur3, seed 42) for the key types it covers (integers, dates,
booleans, strings, binary); for another key type the cells take salts ``0, 1, ...`` and
may share partitions, which costs balance, never exactness.

The hot keys are found in one linear chain of the plan, so that the sample is counted
once: :class:`LocalTop` keeps each count partition's heaviest keys and its totals, and
:class:`JoinGrid`, in one task, sums the totals and sizes the grids.

This module runs in Spark tasks on executors that may lack keysplit: it travels by value
and needs only PyArrow and NumPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa

PREFIX = "__keysplit_join_"
#: Rows of the key on the left and on the right (estimated from a sample, or exact).
LEFT_ROWS = PREFIX + "left_rows"
RIGHT_ROWS = PREFIX + "right_rows"
#: The key's hash, ``xxhash64(seed, keys)``: what the grid task orders and tells keys apart by.
KEY_HASH = PREFIX + "key_hash"
#: The key's work, ``L + R`` and the rows it outputs (:func:`key_output`; none for a semi
#: or anti join).
WORK = PREFIX + "work"
#: Marks :class:`LocalTop`'s row of a partition's totals.
TOTALS = PREFIX + "totals"
#: The grid: its rows and its columns.
GRID_ROWS = PREFIX + "grid_rows"
GRID_COLUMNS = PREFIX + "grid_columns"
#: The salt of each cell, row-major (a grid row's, a left row's cells, side by side), then
#: again column-major (a right row's): what a row reads its cells from. One column for both
#: sides, so that Spark broadcasts one table.
CELLS = PREFIX + "cells"
#: Which sides the counts saw rows of the key on: 1 the left, 2 the right (both: 3).
SEEN = PREFIX + "seen"


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
class LocalTop:
    """Per partition of the count table (:data:`KEY_HASH`, ``keys``, :data:`LEFT_ROWS`,
    :data:`RIGHT_ROWS`, :data:`WORK`): its ``count`` heaviest keys, then one row of its totals
    (null keys, :data:`TOTALS` true). A key is in one partition, and a hot key has more than
    ``1/(workers·placed_from)`` of all work, so the partitions' ``workers·placed_from``
    heaviest hold every key :class:`JoinGrid` places."""

    keys: tuple[str, ...]
    count: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow as pa

        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        work = table.column(WORK).to_numpy(zero_copy_only=False)
        hashes = table.column(KEY_HASH).to_numpy(zero_copy_only=False)
        # Heaviest first, ties by the key's hash: the same rows in every run.
        order = np.lexsort((hashes, -work))[: self.count]
        top = table.take(pa.array(order)).append_column(TOTALS, pa.array(np.zeros(len(order), bool)))
        totals = {
            KEY_HASH: pa.nulls(1, pa.int64()),
            **{name: pa.nulls(1, table.schema.field(name).type) for name in self.keys},
            LEFT_ROWS: pa.array([int(table.column(LEFT_ROWS).to_numpy().sum())], pa.int64()),
            RIGHT_ROWS: pa.array([int(table.column(RIGHT_ROWS).to_numpy().sum())], pa.int64()),
            WORK: pa.array([float(work.sum())], pa.float64()),
            TOTALS: pa.array([True]),
        }
        yield from top.select(list(totals)).to_batches()
        yield pa.RecordBatch.from_pydict(totals, schema=top.select(list(totals)).schema)


@dataclass(frozen=True)
class JoinGrid:
    """The placement task: :class:`LocalTop`'s rows, in one Spark partition, to each hot
    key's grid (:data:`KEY_HASH`, ``keys``, :data:`LEFT_ROWS`, :data:`RIGHT_ROWS`,
    :data:`GRID_ROWS`, :data:`GRID_COLUMNS`, :data:`CELLS`, :data:`SEEN`), one row per key hash, then a
    row of both sides' totals: null keys, a grid of no cells, and a hash no hot key has.
    ``kinds`` are the keys' Spark types (``simpleString``), for :func:`spark_hash`."""

    keys: tuple[str, ...]
    kinds: tuple[str, ...]
    partitions: int
    workers: int
    copy_left: bool
    #: The fraction of each side's rows the counts are of (1: exact counts).
    fraction: float = 1.0
    #: A key of more than ``1/placed_from`` of a mean task's work (but at most one) gets one
    #: cell, placed: see :meth:`cells` (``join`` passes ``hot_keys.WHOLE_KEY_PLACED_FROM``).
    placed_from: int = 4

    def upper(self, estimate: int) -> float:
        """A 95 % upper bound of a count estimated as ``n/fraction`` from ``n`` sampled rows
        (Poisson: ``n + 2√n + 3``; the rule of three when ``n = 0``)."""
        if self.fraction >= 1:
            return float(estimate)
        sampled = estimate * self.fraction
        return (sampled + 2 * math.sqrt(sampled) + 3) / self.fraction

    def cells(self, left: int, right: int, work: float, total_work: float) -> int:
        """A key's cells: 0 when its work is at most ``1/placed_from`` of a mean task's (its
        rows go where Spark's hash sends them); 1 when at most a mean task's (the key is
        placed whole, on the least-loaded partition: a few such keys hashed onto one
        partition would make it the straggler); else enough for the work its rows could
        output at the counts' upper bounds (a side sampled small, such as a dimension's one
        row, may hold more than the sample saw, and copying a small side to more cells costs
        little)."""
        if work * self.workers * self.placed_from <= total_work:
            return 0
        if work * self.workers <= total_work:
            return 1
        if self.copy_left:
            work = max(work, left + right + self.upper(left) * self.upper(right))
        return min(self.partitions, math.ceil(work * self.workers / total_work))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        rows = table.to_pylist()
        totals = [row for row in rows if row[TOTALS]]
        left_total = sum(row[LEFT_ROWS] for row in totals)
        right_total = sum(row[RIGHT_ROWS] for row in totals)
        total_work = sum(row[WORK] for row in totals)
        facts: dict[int, tuple[tuple[Any, ...], int, int, int]] = {}
        for row in rows:
            if row[TOTALS] or total_work <= 0:
                continue
            cells = self.cells(row[LEFT_ROWS], row[RIGHT_ROWS], row[WORK], total_work)
            key = tuple(row[name] for name in self.keys)
            held = facts.get(row[KEY_HASH])
            # Keys are found by their hash: of two hot keys of one hash (about one chance in
            # 10^13 for a thousand), the lighter stays cold, which is exact too.
            if cells < 1 or (held is not None and _work(held[1:]) >= _work((row[LEFT_ROWS], row[RIGHT_ROWS], 0))):
                continue
            facts[row[KEY_HASH]] = (key, row[LEFT_ROWS], row[RIGHT_ROWS], cells)
        # The cold keys' rows spread evenly: only the hot cells tell partitions apart.
        load = [0.0] * self.partitions
        out: dict[str, list[Any]] = {
            name: [] for name in (KEY_HASH, *self.keys, LEFT_ROWS, RIGHT_ROWS, GRID_ROWS, GRID_COLUMNS, CELLS, SEEN)
        }
        # Heaviest key first, so that the largest cells take the emptiest partitions; the
        # order is fixed by the counts and the hash, so every run places alike.
        for hashed in sorted(facts, key=lambda h: (-_work(facts[h][1:]), h)):
            key, left_rows, right_rows, wanted = facts[hashed]
            rows_, cols = grid_shape(wanted, left_rows, right_rows, copy_left=self.copy_left)
            cell_load = left_rows / rows_ + right_rows / cols + key_output(left_rows, right_rows) / (rows_ * cols)
            options = self.salts(key, rows_ * cols)
            used: set[int] = set()
            chosen: list[int] = []
            for _ in range(rows_ * cols):
                # Never one salt for two cells (their rows would meet twice); a partition of
                # its own while there is one.
                fresh = [(salt, part) for salt, part in options if part not in used] or options
                salt, part = min(fresh, key=lambda option: (load[option[1]], option[0]))
                options.remove((salt, part))
                chosen.append(salt)
                used.add(part)
                load[part] += cell_load
            by_column = [chosen[a * cols + b] for b in range(cols) for a in range(rows_)]
            seen = (left_rows > 0) + 2 * (right_rows > 0)
            _append(out, (hashed, *key, left_rows, right_rows, rows_, cols, chosen + by_column, seen))
        # The totals' row, for the report's shares: null keys, which match no row, and a hash
        # none of the hot keys has.
        free = next(value for value in range(len(facts) + 1) if value not in facts)
        _append(out, (free, *[None] * len(self.keys), left_total, right_total, 0, 0, [], 0))
        schema = pa.schema(
            [
                pa.field(KEY_HASH, pa.int64()),
                *(table.schema.field(name) for name in self.keys),
                pa.field(LEFT_ROWS, pa.int64()),
                pa.field(RIGHT_ROWS, pa.int64()),
                pa.field(GRID_ROWS, pa.int32()),
                pa.field(GRID_COLUMNS, pa.int32()),
                pa.field(CELLS, pa.list_(pa.int32())),
                pa.field(SEEN, pa.int32()),
            ]
        )
        yield pa.RecordBatch.from_pydict(out, schema=schema)

    def salts(self, key: tuple[Any, ...], cells: int) -> list[tuple[int, int]]:
        """Candidate salts of ``key`` with their partitions, at least ``cells`` of them and
        enough for the cells to find partitions of their own. Without :func:`spark_hash` for
        the key's types, salts ``0..cells-1``, their partitions unknown (taken as
        ``salt mod P`` for the load count only)."""
        if not all(kind in _HASHED for kind in self.kinds):
            return [(salt, salt % self.partitions) for salt in range(cells)]
        tried = max(cells, min(4 * self.partitions, max(64, 8 * cells)))
        return [(salt, spark_hash((*key, salt), (*self.kinds, "int")) % self.partitions) for salt in range(tried)]


def key_output(left: float, right: float) -> float:
    """The rows a key with ``left`` and ``right`` rows outputs, as the grids size it:
    ``L·R``, and a side's rows once where the counts saw none of the other side's. A fact
    key's one dimension row is rarely in a 2 % sample, and an outer join emits the rows
    anyway; counted as none, a key of 4 % of the facts looked like a light one and was
    placed whole beside others (``join``'s ``WORK`` column is the same formula in Spark)."""
    if not (left or right):
        return 0.0
    return float(max(left, 1) * max(right, 1))


def _work(counts: tuple[int, int, int]) -> float:
    left, right, _ = counts
    return left + right + key_output(left, right)


def _append(out: dict[str, list[Any]], row: tuple[Any, ...]) -> None:
    for column, value in zip(out.values(), row, strict=True):
        column.append(value)


# --- Spark's ``hash``: Murmur3_x86_32 as Spark applies it, seed 42 -----------------------

_MASK = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
#: The key types :func:`spark_hash` covers (Spark's ``simpleString``).
_HASHED = frozenset({"tinyint", "smallint", "int", "bigint", "date", "boolean", "string", "binary"})


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _MASK, 15) * _C2) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def _hash_int(value: int, seed: int) -> int:
    return _fmix(_mix_h1(seed, _mix_k1(value & _MASK)), 4)


def _hash_long(value: int, seed: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    return _fmix(_mix_h1(_mix_h1(seed, _mix_k1(value & _MASK)), _mix_k1(value >> 32)), 8)


def _hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``hashUnsafeBytes``: little-endian words, then each byte left, signed, alone."""
    h1 = seed
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(int.from_bytes(data[i : i + 4], "little")))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & _MASK))
    return _fmix(h1, len(data))


def spark_hash(values: tuple[Any, ...], kinds: tuple[str, ...], seed: int = 42) -> int:
    """Spark's ``hash(values...)`` for columns of ``kinds``: a signed 32-bit int; a null
    value leaves the hash as it was."""
    import datetime

    h = seed
    for value, kind in zip(values, kinds, strict=True):
        if value is None:
            continue
        if kind in ("tinyint", "smallint", "int", "boolean"):
            h = _hash_int(int(value), h)
        elif kind == "date":
            h = _hash_int((value - datetime.date(1970, 1, 1)).days, h)
        elif kind == "bigint":
            h = _hash_long(value, h)
        elif kind == "string":
            h = _hash_bytes(value.encode("utf-8"), h)
        elif kind == "binary":
            h = _hash_bytes(bytes(value), h)
        else:
            raise TypeError(f"spark_hash does not cover {kind}")
    return h - (1 << 32) if h >= 1 << 31 else h
