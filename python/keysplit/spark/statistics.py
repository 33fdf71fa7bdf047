"""Statistics gathered before a plan is built: each keyed input's keys, from one sample.

The verbs' own plans find their hot keys from a sample *in the plan*: lazy, but every run
pays the sample's small stages (seconds of task time), in series before the operator, even
where nothing is hot. :func:`keysplit.spark.optimize` instead measures first, once per query:
one Bernoulli sample of each input it judges, of the key hash and the columns its operator
cuts by (a window's ordering, a percentile's values), brought to the client in one scan of
that input, every input at once. From it the hot keys, their cuts and their grids are
computed here in milliseconds (:mod:`.window`, :mod:`.holistic`, :mod:`.join`), and go into
the rewritten plan as literal tables: the plan holds no sampling stage, and where nothing is
hot it is Spark's own, with nothing added.

A key is hot by the front's rule (:func:`keysplit.spark.sampled.hot_in_sample`): its sampled
rows, at the count's 95 % upper bound (``n + 2√n + 3``), are more than a mean task's share of
the sampled rows.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from keysplit.spark.session import Session

#: The sampled rows aimed at per input: a key of a mean task's share at 32 tasks is then seen
#: about 6,000 times (±2.6 % at 95 %), and a hot key gives its ``C - 1`` candidate cuts many
#: rows each.
SAMPLE_ROWS = 200_000
#: The smallest fraction sampled, whatever the input's estimated size: a plan's estimate may
#: be far above its rows (a filter keeps its input's size), and too small a sample sees no key.
MIN_FRACTION = 0.002
#: The sampled key hash's column: ``xxhash64(seed, keys)``, as each verb's plan finds keys by.
KEY_HASH = "__keysplit_st_key_hash"
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60}


def estimated_rows(handle: Session, frame: DataFrame) -> float | None:
    """Spark's plan statistics' rows (or its size over an 8-byte row): no job runs."""
    text = handle.explained(frame, "cost")
    found = re.search(r"Statistics\(sizeInBytes=([\d.]+)\s*([A-Za-z]*)(?:, rowCount=([\d.E+]+))?", text)
    if found is None:
        return None
    if found.group(3):
        return float(found.group(3))
    return float(found.group(1)) * _UNITS.get(found.group(2), 1) / 8


def sample_fraction(estimated: float | None) -> float:
    """The fraction that samples about :data:`SAMPLE_ROWS` of an input of ``estimated`` rows."""
    if estimated is None:
        return 0.02
    return min(1.0, max(MIN_FRACTION, SAMPLE_ROWS / max(estimated, 1.0)))


@dataclass(frozen=True)
class SampleRequest:
    """What one input is sampled for: ``frame``'s ``key_hash`` and ``columns`` (aliased)."""

    frame: DataFrame
    key_hash: Column
    columns: tuple[Column, ...] = ()
    #: The sampled columns that are the key's (named in the report of the keys split).
    keys: tuple[str, ...] = ()
    #: Rows whose key has a null are dropped first (a join's: they match nothing).
    where: Column | None = None
    #: The fraction to sample (None: :func:`sample_fraction` of the input's estimated rows).
    fraction: float | None = None
    #: Whether ``frame`` is already a sample at ``fraction`` (a join's output, its driving
    #: side sampled: each output row comes from one row of that side).
    presampled: bool = False


@dataclass(frozen=True)
class InputSample:
    """A Bernoulli sample of an input at ``fraction`` (1: every row): its :data:`KEY_HASH` and
    the requested columns, as Arrow and Polars."""

    fraction: float
    table: pa.Table
    #: The sampled columns that are the key's.
    keys: tuple[str, ...] = ()

    @property
    def rows(self) -> pl.DataFrame:
        frame = pl.from_arrow(self.table)
        assert isinstance(frame, pl.DataFrame)
        return frame

    def key_counts(self) -> pl.DataFrame:
        """Sampled rows per key hash (``sampled``), hottest first, ties by hash."""
        return (
            self.rows.group_by(KEY_HASH)
            .agg(pl.len().cast(pl.Int64).alias("sampled"))
            .sort(["sampled", KEY_HASH], descending=[True, False])
        )

    def hot(self, workers: int) -> pl.DataFrame:
        """The hot keys (:data:`KEY_HASH`, ``sampled``, ``upper``), hottest first."""
        counts = self.key_counts()
        total = int(counts["sampled"].sum()) if counts.height else 0
        upper = pl.col("sampled") + 2 * pl.col("sampled").sqrt() + 3
        return counts.with_columns(upper.alias("upper")).filter(pl.col("upper") * workers > total)

    def key_values(self, hot: pl.DataFrame) -> pl.DataFrame:
        """The key columns of the ``hot`` keys (by :data:`KEY_HASH`), hottest first."""
        rows = self.rows.unique(KEY_HASH, keep="first").select(KEY_HASH, *self.keys)
        return hot.select(KEY_HASH).join(rows, on=KEY_HASH, how="left", maintain_order="left").drop(KEY_HASH)


def sample_inputs(handle: Session, requests: Sequence[SampleRequest], seed: int) -> list[InputSample]:
    """Each request's sample, in one scan of its input, every input at once (one Spark job
    each, side by side): the statistics a query's plan is decided from."""
    fractions = [
        request.fraction if request.fraction is not None else sample_fraction(estimated_rows(handle, request.frame))
        for request in requests
    ]

    def sampled(request: SampleRequest, fraction: float) -> pa.Table:
        frame = request.frame if request.where is None else request.frame.filter(request.where)
        frame = frame.select(request.key_hash.alias(KEY_HASH), *request.columns)
        if fraction < 1 and not request.presampled:
            frame = frame.sample(fraction=fraction, seed=seed)
        return frame.toArrow()

    def gather() -> list[pa.Table]:
        if len(requests) == 1:
            return [sampled(requests[0], fractions[0])]
        with ThreadPoolExecutor(max_workers=min(8, len(requests))) as pool:
            return list(pool.map(sampled, requests, fractions))

    tables = handle.call("sampling the keyed inputs", gather) if requests else []
    return [
        InputSample(fraction, table, request.keys)
        for fraction, table, request in zip(fractions, tables, requests, strict=True)
    ]


def cut_rows(count: int, candidates: int) -> list[int]:
    """The 0-based positions, among a key's ``count`` sampled rows in order, of its
    ``candidates - 1`` candidate cuts: candidate ``j`` is the row at rank ``⌈j·m/C⌉``
    (:func:`keysplit.spark.sampled.candidate_cuts`'s rule); none when ``count`` is 0."""
    if count <= 0:
        return []
    return [-(-j * count // candidates) - 1 for j in range(1, candidates)]
