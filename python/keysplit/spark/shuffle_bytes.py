"""The bytes Spark's shuffle writes for rows: each row an ``UnsafeRow`` after its length (as
``UnsafeRowSerializer`` writes them), the stream compressed by LZ4 in 32 KiB blocks (as
``spark.io.compression.codec=lz4`` does, ``LZ4BlockOutputStream``: a 21-byte header a block,
stored raw where LZ4 would not shrink it).

Spark's adaptive execution judges and splits partitions by these compressed bytes
(``MapOutputStatistics``), and rows compress unevenly: a hot key's rows repeat their key, so
its partition's rows cost fewer bytes than the others'. :func:`partition_widths` estimates a
reduce partition's bytes per row from a sample of rows in the order a map task writes them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: lz4-java's ``LZ4BlockOutputStream`` block (Spark's ``spark.io.compression.lz4.blockSize``).
LZ4_BLOCK = 32 * 1024
_LZ4_HEADER = 21
_INT_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _slot_values(column: pa.ChunkedArray) -> np.ndarray | None:
    """A fixed-width column's 8-byte slots as ``UnsafeRowWriter`` fills them (the value's
    bytes, zero-padded; a decimal of up to 18 digits as its unscaled long), or None for a
    variable-length one."""
    kind = column.type
    raw = column.combine_chunks()
    if len(raw) == 0:
        return np.zeros(0, dtype=np.uint64)
    if pa.types.is_boolean(kind):
        values = np.asarray(raw.fill_null(False)).astype(np.uint64)
    elif pa.types.is_decimal128(kind) and kind.precision <= 18:
        words = np.frombuffer(raw.buffers()[1], dtype=np.uint64)[2 * raw.offset : 2 * (raw.offset + len(raw))]
        values = words[::2].copy()
    elif (
        pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_temporal(kind)
    ) and kind.bit_width // 8 in _INT_TYPES:
        lanes = np.frombuffer(raw.buffers()[1], dtype=_INT_TYPES[kind.bit_width // 8])
        values = lanes[raw.offset : raw.offset + len(raw)].astype(np.uint64)
    else:
        return None
    if raw.null_count:
        values[~np.asarray(raw.is_valid())] = 0
    return values


def _variable_values(column: pa.ChunkedArray) -> list[bytes | None]:
    kind = column.type
    values = column.to_pylist()
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return values
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return [None if v is None else v.encode() for v in values]
    return [None if v is None else str(v).encode() for v in values]


def unsafe_rows(table: pa.Table) -> list[bytes]:
    """Each row of ``table`` as Spark's shuffle serialises it: a 4-byte big-endian length,
    then the ``UnsafeRow`` (a null bitset of 8-byte words, an 8-byte slot a field, and the
    variable-length fields' bytes, each padded to 8, whose slot holds offset << 32 | size)."""
    rows, fields = table.num_rows, table.num_columns
    bitset = 8 * ((fields + 63) // 64)
    fixed = np.zeros((rows, bitset // 8 + fields), dtype=np.uint64)
    variable: list[tuple[int, list[bytes | None]]] = []
    for index, column in enumerate(table.columns):
        valid = np.asarray(column.is_valid()) if column.null_count else None
        if valid is not None:
            bits = np.where(valid, np.uint64(0), np.uint64(1) << np.uint64(index % 64))
            fixed[:, index // 64] |= bits
        slots = _slot_values(column)
        if slots is None:
            variable.append((index, _variable_values(column)))
        else:
            fixed[:, bitset // 8 + index] = slots
    if not variable:
        size = 8 * fixed.shape[1]
        prefix = np.frombuffer(int(size).to_bytes(4, "big"), dtype=np.uint8)
        laid = np.concatenate([np.broadcast_to(prefix, (rows, 4)), fixed.view(np.uint8).reshape(rows, size)], axis=1)
        return [bytes(row) for row in laid]
    out = []
    slot_bytes = 8 * fixed.shape[1]
    for r in range(rows):
        tail = []
        offset = slot_bytes
        for index, values in variable:
            value = values[r]
            if value is None:
                continue
            fixed[r, bitset // 8 + index] = np.uint64((offset << 32) | len(value))
            padded = value + b"\0" * (-len(value) % 8)
            tail.append(padded)
            offset += len(padded)
        out.append(offset.to_bytes(4, "big") + fixed[r].tobytes() + b"".join(tail))
    return out


def compressed_size(stream: bytes) -> int:
    """``stream``'s bytes after Spark's LZ4 block compression."""
    total = 0
    for start in range(0, len(stream), LZ4_BLOCK):
        block = stream[start : start + LZ4_BLOCK]
        total += _LZ4_HEADER + min(len(pa.compress(block, codec="lz4_raw", asbytes=True)), len(block))
    return total


def partition_widths(table: pa.Table, reduce: np.ndarray, partitions: int, fallback: float) -> np.ndarray:
    """Compressed shuffle bytes per row for each reduce partition, from a sample of rows in a
    map task's order (``table``, each row's partition in ``reduce``).

    A partition holding more than twice a mean partition's sampled rows (a hot key's) is
    compressed on its own; the others' rows are pooled, in partition order, and share one
    width (each has too few sampled rows to fill an LZ4 block). Where the sample holds no
    other partition's rows (an input clustered by key, whose first rows are one key's), the
    others get the whole sample's width: their bytes then stand to each other as their rows
    do. ``fallback`` (an uncompressed width) where the sample has no rows.
    """
    widths = np.full(partitions, float(fallback))
    if table.num_rows == 0:
        return widths
    rows = unsafe_rows(table)
    counts = np.bincount(reduce, minlength=partitions)
    own = np.flatnonzero(counts > 2 * table.num_rows / partitions)
    for r in own:
        picked = np.flatnonzero(reduce == r)
        widths[r] = compressed_size(b"".join(rows[i] for i in picked)) / len(picked)
    pooled = np.flatnonzero(~np.isin(reduce, own))
    if not len(pooled):
        pooled = np.arange(table.num_rows)
    order = pooled[np.argsort(reduce[pooled], kind="stable")]
    rest = compressed_size(b"".join(rows[i] for i in order)) / len(order)
    widths[np.setdiff1d(np.arange(partitions), own)] = rest
    return widths
