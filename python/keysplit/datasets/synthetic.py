"""Synthetic key streams drawn from a seed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from keysplit import _core

if TYPE_CHECKING:
    from collections.abc import Iterator

DEFAULT_BATCH_ROWS = 1 << 20


def zipf(
    *,
    keys: int,
    tuples: int,
    z: float,
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """A stream of ``tuples`` keys drawn from a Zipf law of exponent ``z`` over ``keys`` keys.

    Key ``r`` (uint64, ``0 .. keys-1``) has probability proportional to ``(r + 1) ** -z``, so
    key 0 is the hottest. Each batch is a DataFrame with one column ``key`` of at most
    ``batch_rows`` rows. The draws come from SplitMix64 and the weights from a portable
    ``pow``, so a seed gives the same stream on every machine and in every release.
    """
    for name, value in (("tuples", tuples), ("batch_rows", batch_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if batch_rows == 0:
        raise ValueError("batch_rows must be positive")
    stream = _core.ZipfStream(keys, z, seed)
    remaining = tuples
    while remaining:
        rows = min(remaining, batch_rows)
        yield pl.DataFrame([pl.Series(stream.next_batch(rows)).alias("key")])
        remaining -= rows
