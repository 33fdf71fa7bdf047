"""The heavy hitters of a Spark DataFrame's key column, in one pass on the executors.

Each input partition keeps a Misra–Gries summary of at most ``capacity`` counters
(SpaceSaving's twin: the same counters, reported as a lower bound), fed one Arrow batch at a
time: the batch's exact counts are added to the counters, then the ``capacity + 1``-th
largest counter is subtracted from all and the counters that reach zero are dropped. The
partitions' summaries are merged the same way in Spark (a sum per key, then one more
subtraction), which is the mergeable summary of Agarwal et al. (*Mergeable summaries*,
PODS 2012): a reported count ``c`` and the total subtracted ``e`` bound the true count to
``[c, c + e]``, ``e ≤ N / (capacity + 1)`` for ``N`` rows, and a key left out holds at most
``e`` rows. Only the summaries, at most ``capacity + 1`` rows per partition, cross the
shuffle; the column is never collected.

:func:`placement` turns the hot keys into the two-pass plan of
:func:`keysplit.spark.apply_grouped`: a key of share ``p`` gets ``⌈p·n⌉`` workers, the
fewest that keep every worker at or below the mean load, which is the replication of the
offline bound γ*; every other key stays whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._checks import require_workers
from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.intake import session_for
from keysplit.spark.options import DEFAULT_CAPACITY
from keysplit.spark.placement import least_loaded
from keysplit.spark.routing import require_key_type

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from keysplit.spark.session import Session

#: Keys are placed (by ``apply_grouped``'s two-pass plan and ``join``) only when they hold
#: more than this fraction of a worker's mean load (1/4). A smaller key never makes a
#: straggler of its own: what unbalances hashing then is how many keys land on each worker,
#: which placing the commonest of many small keys barely changes. A few keys of a quarter to
#: a whole mean load each, hashed onto one worker, do make one (Zipf's words: 2.6x the mean).
WHOLE_KEY_PLACED_FROM = 4
#: The sample the plans of ``join`` and ``window`` find their hot keys from, in the plan: a
#: key of a mean task's share of 10^6 rows over 32 tasks is seen about 600 times, with a
#: 95 % bound of ±8 %.
SAMPLE_FRACTION = 0.02
#: Partitions such a sample is counted in (it is small).
LOCAL_TOP_TASKS = 4
_MARKER = "__keysplit_totals"


def _summariser(key: str, capacity: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The per-partition summary; it needs only PyArrow and NumPy, which PySpark's Arrow
    functions need anyway, so executors without keysplit run it."""

    def summarise(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        keys: pa.Array | None = None
        counts = np.zeros(0, dtype=np.int64)
        subtracted = 0
        rows = 0
        for batch in batches:
            column = batch.column(key)
            rows += len(column)
            if not len(column):
                continue
            tallies = pc.value_counts(column)
            merged = (
                pa.table(
                    {
                        "k": tallies.field("values")
                        if keys is None
                        else pa.concat_arrays([keys, tallies.field("values")]),
                        "c": pa.concat_arrays([pa.array(counts), tallies.field("counts").cast(pa.int64())]),
                    }
                )
                .group_by("k", use_threads=False)
                .aggregate([("c", "sum")])
            )
            totals = merged.column("c_sum").to_numpy()
            if len(totals) > capacity:
                order = np.argsort(-totals, kind="stable")
                cut = int(totals[order[capacity]])
                subtracted += cut
                kept = order[:capacity][totals[order[:capacity]] > cut]
                keys = merged.column("k").take(pa.array(kept)).combine_chunks()
                counts = totals[kept] - cut
            else:
                keys = merged.column("k").combine_chunks()
                counts = totals.astype(np.int64)
        if keys is not None and len(keys):
            yield pa.RecordBatch.from_pydict(
                {
                    key: keys,
                    "count": pa.array(counts, pa.int64()),
                    "subtracted": pa.array(np.zeros(len(counts), np.int64)),
                    "rows": pa.array(np.zeros(len(counts), np.int64)),
                    _MARKER: pa.array(np.zeros(len(counts), bool)),
                }
            )
        yield pa.RecordBatch.from_pydict(
            {
                key: pa.nulls(1, keys.type if keys is not None else pa.int64()),
                "count": pa.array([0], pa.int64()),
                "subtracted": pa.array([subtracted], pa.int64()),
                "rows": pa.array([rows], pa.int64()),
                _MARKER: pa.array([True]),
            }
        )

    return summarise


def _require_positive(name: str, value: object, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigTypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 1 <= value <= top:
        raise ConfigError(f"{name} must be an int in [1, {top:,}], got {value!r}")
    return value


def hot_keys(
    frame: DataFrame,
    *,
    key: str = "key",
    workers: int = 32,
    capacity: int = DEFAULT_CAPACITY,
    min_share: float | None = None,
    session: Session | SparkSession | None = None,
) -> pl.DataFrame:
    """The keys of ``frame[key]`` that hold at least ``min_share`` of its rows, hottest first.

    Computed on the executors in one pass, with a mergeable summary of ``capacity``
    counters per partition (see the module's notes). The result is a Polars DataFrame:

    - ``<key>``: the key (a column named as ``key``; a null key is reported like any other);
    - ``count``: a lower bound of its rows; ``error``: the bound's width, the same for every
      key, so the true count lies in ``[count, count + error]``;
    - ``share``: ``count`` over all rows; ``share_max``: ``(count + error)`` over all rows;
    - ``workers``: how many of ``workers`` workers the key needs so that none holds more than
      the mean load, ``⌈share_max · workers⌉`` (1 for a key that fits on one).

    ``min_share`` defaults to ``1 / (4 · workers)``: every key of a quarter of a worker's
    load or more, all of them certain to be listed when ``error`` is below that share (it is
    at most ``rows / (capacity + 1)``). Sorted by ``count``, descending, then by key.
    The total rows, error and capacity are in the frame's ``rows``, ``error`` columns and
    the call's arguments; an empty DataFrame gives an empty result.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, LongType, StructField, StructType

    workers = require_workers(workers)
    capacity = _require_positive("capacity", capacity, 1 << 24)
    if min_share is None:
        min_share = 1 / (4 * workers)
    if isinstance(min_share, bool) or not isinstance(min_share, (int, float)) or not 0 < min_share <= 1:
        raise ConfigError(f"min_share must be a float in (0, 1], got {min_share!r}")
    handle = session_for(frame, session)
    schema = handle.call("reading the schema", lambda: frame.schema)
    require_key_type(schema, key)
    key_field = schema[key]
    summaries_schema = StructType(
        [
            StructField(key, key_field.dataType, True),
            StructField("count", LongType(), False),
            StructField("subtracted", LongType(), False),
            StructField("rows", LongType(), False),
            StructField(_MARKER, BooleanType(), False),
        ]
    )
    summaries = frame.select(key).mapInArrow(_summariser(key, capacity), summaries_schema)
    # One query, nothing held between queries: the summaries' totals ride on the marker
    # rows, which sort first, and a lost executor's summaries are recomputed like any
    # other task's output.
    merged_summaries = (
        summaries.groupBy(_MARKER, key)
        .agg(F.sum("count").alias("count"), F.sum("subtracted").alias("subtracted"), F.sum("rows").alias("rows"))
        .orderBy(F.desc(_MARKER), F.desc("count"), F.asc_nulls_first(key))
        .limit(capacity + 2)
    )
    fetched = pl.from_arrow(handle.call("summarising the key column", merged_summaries.toArrow))
    assert isinstance(fetched, pl.DataFrame)
    markers = fetched.filter(pl.col(_MARKER))
    rows, subtracted = int(markers["rows"].sum()), int(markers["subtracted"].sum())
    merged = fetched.filter(~pl.col(_MARKER)).select(key, "count").head(capacity + 1)
    if merged.height > capacity:
        cut = int(merged["count"][capacity])
        merged = merged.head(capacity).with_columns(pl.col("count") - cut).filter(pl.col("count") > 0)
        subtracted += cut
    denominator = max(rows, 1)
    result = merged.with_columns(
        pl.lit(subtracted, pl.Int64).alias("error"),
        (pl.col("count") / denominator).alias("share"),
        ((pl.col("count") + subtracted) / denominator).alias("share_max"),
    ).with_columns(
        pl.max_horizontal(pl.lit(1), (pl.col("share_max") * workers - 1e-9).ceil().cast(pl.Int64)).alias("workers"),
        pl.lit(rows, pl.Int64).alias("rows"),
    )
    return result.filter(pl.col("share_max") >= min_share).select(
        key, "count", "error", "share", "share_max", "workers", "rows"
    )


@dataclass(frozen=True)
class Placement:
    """The two-pass plan's workers: ``slices[i]`` for ``keys[i]`` (Python values of the key
    column), whose rows spread evenly over them; every other key goes by hash."""

    keys: list[Any]
    slices: list[list[int]]


def placement(hot: pl.DataFrame, *, key: str, workers: int) -> Placement:
    """The two-pass plan's workers for the keys of :func:`hot_keys`'s table.

    Keys go hottest first, each to its ``workers`` least-loaded workers (lowest index on a
    tie), counting the rows of keys not in the table as spread evenly; a key's rows are
    shared equally by its workers (:func:`keysplit.spark.placement.least_loaded`). A key of
    one worker stays whole there.
    """
    if hot.height == 0:
        return Placement(keys=[], slices=[])
    slices = least_loaded(hot["count"].to_list(), hot["workers"].to_list(), int(hot["rows"][0]), workers)
    return Placement(keys=hot[key].to_list(), slices=slices)
