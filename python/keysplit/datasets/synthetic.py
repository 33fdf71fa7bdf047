"""Synthetic key streams drawn from a seed: Zipf, drifting Zipf and bursts.

Every random draw is reproducible on every machine: Zipf ranks come from the core's
SplitMix64 stream, and the other draws from :class:`random.Random`, whose ``random()``
sequence for an integer or string seed Python guarantees across versions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from keysplit import _core
from keysplit._checks import require_count, require_fraction
from keysplit._errors import ConfigError, ConfigTypeError

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

DEFAULT_BATCH_ROWS = 1 << 20


def rebatch(frames: Iterable[pl.DataFrame], batch_rows: int) -> Iterator[pl.DataFrame]:
    """The rows of ``frames``, in order, in batches of exactly ``batch_rows`` rows (the last
    may be shorter). Holds at most one input frame plus one batch in memory."""
    require_count(batch_rows, "batch_rows", minimum=1)
    pending: list[pl.DataFrame] = []
    pending_rows = 0
    for frame in frames:
        offset = 0
        while offset < frame.height:
            take = min(batch_rows - pending_rows, frame.height - offset)
            pending.append(frame.slice(offset, take))
            pending_rows += take
            offset += take
            if pending_rows == batch_rows:
                yield pl.concat(pending, rechunk=True) if len(pending) > 1 else pending[0]
                pending, pending_rows = [], 0
    if pending_rows:
        yield pl.concat(pending, rechunk=True) if len(pending) > 1 else pending[0]


def uniforms(rng: random.Random, count: int) -> pl.Series:
    """``count`` draws of ``rng.random()`` in [0, 1), as a Float64 Series."""
    return pl.Series("u", [rng.random() for _ in range(count)], dtype=pl.Float64)


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

    The core samples by binary search over a table of ``keys`` cumulative weights (8 bytes a
    key), so millions of keys cost a slow table build and cache misses on every draw.
    """
    require_count(tuples, "tuples")
    require_count(batch_rows, "batch_rows", minimum=1)
    stream = _core.ZipfStream(keys, z, seed)
    remaining = tuples
    while remaining:
        rows = min(remaining, batch_rows)
        yield pl.DataFrame([pl.Series(stream.next_batch(rows)).alias("key")])
        remaining -= rows


def drift_permutation(keys: int, seed: int, epoch: int) -> pl.Series:
    """The key each Zipf rank stands for in epoch ``epoch`` of :func:`drifting_zipf`.

    Epoch 0 is the identity (rank ``r`` is key ``r``, as in :func:`zipf`); every later epoch
    is a permutation of ``0 .. keys-1`` drawn from ``(seed, epoch)`` alone, so any epoch can
    be rebuilt without the ones before it.
    """
    require_count(keys, "keys", minimum=1)
    require_count(epoch, "epoch")
    if epoch == 0:
        return pl.int_range(keys, dtype=pl.UInt64, eager=True).alias("key")
    rng = random.Random(f"keysplit.drift:{seed}:{epoch}")
    return uniforms(rng, keys).arg_sort().cast(pl.UInt64).alias("key")


def drifting_zipf(
    *,
    keys: int,
    tuples: int,
    z: float,
    period: int,
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """A Zipf stream whose hot keys change every ``period`` tuples.

    The ranks are those of :func:`zipf` with the same ``keys``, ``z`` and ``seed``; tuple
    ``i`` carries key ``drift_permutation(keys, seed, i // period)[rank_i]``. The popularity
    law never changes, only which keys hold it, as when a trending topic gives way to the
    next. Batches also carry ``epoch`` (uint32, ``i // period``).
    """
    require_count(period, "period", minimum=1)
    require_count(batch_rows, "batch_rows", minimum=1)
    position = 0
    epoch = -1
    mapping = pl.Series(dtype=pl.UInt64)

    def pieces() -> Iterator[pl.DataFrame]:
        nonlocal position, epoch, mapping
        for batch in zipf(keys=keys, tuples=tuples, z=z, seed=seed, batch_rows=batch_rows):
            ranks = batch.get_column("key")
            offset = 0
            while offset < len(ranks):
                current = position // period
                if current != epoch:
                    epoch, mapping = current, drift_permutation(keys, seed, current)
                take = min(len(ranks) - offset, period - position % period)
                yield pl.DataFrame(
                    {
                        "key": mapping.gather(ranks.slice(offset, take)),
                        "epoch": pl.repeat(current, take, dtype=pl.UInt32, eager=True),
                    }
                )
                offset += take
                position += take

    yield from rebatch(pieces(), batch_rows)


@dataclass(frozen=True)
class Burst:
    """``key`` suddenly takes ``share`` of the tuples from tuple ``start`` for ``length`` tuples."""

    key: int | str
    start: int
    length: int
    share: float

    def __post_init__(self) -> None:
        if isinstance(self.key, bool) or not isinstance(self.key, (int, str)):
            raise ConfigTypeError(f"a burst's key must be an int or a str, got {type(self.key).__name__}")
        require_count(self.start, "start")
        require_count(self.length, "length")
        require_fraction(self.share, "a burst's share")


def with_bursts(stream: Iterable[pl.DataFrame], bursts: Sequence[Burst], *, seed: int = 0) -> Iterator[pl.DataFrame]:
    """``stream`` with each burst's key written over a seeded share of the tuples it spans.

    Tuple ``i`` inside a burst's span gets the burst's key when a uniform draw falls below
    the share; other columns are kept. Bursts must not overlap. Works on any dataset whose
    ``key`` column the burst keys fit (uint64 keys need int bursts, string keys str ones).
    """
    ordered = sorted(bursts, key=lambda b: b.start)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.start < before.start + before.length:
            raise ConfigError(f"bursts overlap: {before} and {after}")
    rng = random.Random(f"keysplit.bursts:{seed}")
    position = 0
    for batch in stream:
        keys = batch.get_column("key")
        end = position + batch.height
        for burst in ordered:
            first, last = max(burst.start, position), min(burst.start + burst.length, end)
            if first >= last:
                continue
            if (keys.dtype == pl.String) != isinstance(burst.key, str):
                raise ConfigTypeError(f"burst key {burst.key!r} does not fit the stream's {keys.dtype} keys")
            draws = pl.concat(
                [
                    pl.repeat(1.0, first - position, dtype=pl.Float64, eager=True),
                    uniforms(rng, last - first),
                    pl.repeat(1.0, end - last, dtype=pl.Float64, eager=True),
                ]
            )
            keys = (
                pl.select(pl.when(draws < burst.share).then(pl.lit(burst.key, dtype=keys.dtype)).otherwise(keys))
                .to_series()
                .alias("key")
            )
        position = end
        yield batch.with_columns(keys)


def bursty_zipf(
    *,
    keys: int,
    tuples: int,
    z: float,
    bursts: Sequence[Burst],
    seed: int = 0,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """:func:`zipf` with :func:`with_bursts` applied: e.g. a cold key taking 30% for a while."""
    return with_bursts(zipf(keys=keys, tuples=tuples, z=z, seed=seed, batch_rows=batch_rows), bursts, seed=seed)
