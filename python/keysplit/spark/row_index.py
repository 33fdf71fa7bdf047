"""``with_row_index``: a consecutive index of a DataFrame's rows in their order, no row moved.

The usual ways to number rows on Spark each cost something: ``monotonically_increasing_id``
is increasing but has gaps (the input partition's index times 2^33 plus the row's place in
it); ``F.row_number().over(Window.orderBy(F.monotonically_increasing_id()))`` is consecutive
but sends every row to one task, which sorts them all; RDD's ``zipWithIndex`` is not on Spark
Connect. Here the index is that same ``monotonically_increasing_id`` turned consecutive: the
rows of the partitions before the row's, plus its place in its own. The rows per partition
are one more read of the input, counted map-side (one row per partition crosses the
shuffle); their running sums are an offset per partition, broadcast; the rows stay where
they are, in one stage. The index equals Spark's ``row_number`` over
``monotonically_increasing_id`` minus one, row for row.

The input is read twice (the counts, the rows), so it must give each partition the same rows
both times, as a file scan, a cached or checkpointed frame or a deterministic shuffle does. A
row whose partition was not counted, or whose place is past its partition's count, fails the
query with an error that says so, rather than giving an index twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keysplit._checks import require_int
from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.columns import column
from keysplit.spark.intake import is_spark_frame, refuse_reserved, session_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame, SparkSession

    from keysplit.spark.session import Session

#: ``monotonically_increasing_id`` keeps a row's place in its partition in its low bits.
PLACE_BITS = 33
PREFIX = "__keysplit_i_"
#: An input partition's index, and its rows (:func:`indexed`'s counts).
PARTITION = PREFIX + "partition"
COUNT = PREFIX + "count"
_PLACE = PREFIX + "place"
_OFFSET = PREFIX + "offset"
#: Every row of the input, for percent_rank, cume_dist and ntile.
TOTAL = PREFIX + "total"
#: A row's consecutive index, from 0.
INDEX = PREFIX + "index"

_CHANGED = (
    "keysplit: the input gave a partition different rows in its two reads (its row counts, then its rows), "
    "so a consecutive index cannot be given: cache or checkpoint the DataFrame before numbering its rows"
)


def partition_and_place(position: Column) -> tuple[Column, Column]:
    """The input partition (an int) and the place in it that a ``monotonically_increasing_id``
    ``position`` holds."""
    from pyspark.sql import functions as F

    return F.shiftright(position, PLACE_BITS).cast("int"), position.bitwiseAND(F.lit((1 << PLACE_BITS) - 1))


def indexed(frame: DataFrame, counted: Callable[[DataFrame], DataFrame] | None = None) -> DataFrame:
    """``frame`` with :data:`INDEX` (its rows' consecutive index from 0, in their order) and
    :data:`TOTAL` (its rows), in place: no row moves. ``counted`` is given the rows of each
    input partition (:data:`PARTITION`, :data:`COUNT`; to observe them) and returns them."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    partition, place = partition_and_place(F.monotonically_increasing_id())
    positioned = frame.select("*", partition.alias(PARTITION), place.alias(_PLACE))
    counts = positioned.groupBy(PARTITION).agg(F.count(F.lit(1)).alias(COUNT))
    if counted is not None:
        counts = counted(counts)
    # One row per non-empty input partition: a window of one task over them is cheap.
    everything = Window.partitionBy(F.lit(0))
    before = everything.orderBy(PARTITION).rowsBetween(Window.unboundedPreceding, -1)
    offsets = counts.select(
        PARTITION,
        COUNT,
        F.coalesce(F.sum(COUNT).over(before), F.lit(0)).alias(_OFFSET),
        F.sum(COUNT).over(everything).alias(TOTAL),
    )
    rows = positioned.join(F.broadcast(offsets), PARTITION, "left")
    index = F.when(column(_PLACE) < column(COUNT), column(_OFFSET) + column(_PLACE)).otherwise(
        F.raise_error(F.lit(_CHANGED))
    )
    # Dropped by name: the frame's own columns stay, and its schema is not asked for.
    rows = rows.withColumns({INDEX: index, TOTAL: F.coalesce(column(TOTAL), F.lit(0))})
    return rows.drop(PARTITION, _PLACE, COUNT, _OFFSET)


def with_row_index(
    frame: DataFrame,
    name: str = "index",
    *,
    offset: int = 0,
    session: Session | SparkSession | None = None,
) -> DataFrame:
    """``frame`` with a first column ``name``: each row's consecutive index in the frame's
    order, from ``offset`` (Polars' ``with_row_index``; RDD's ``zipWithIndex``), a lazy
    DataFrame. No row moves: the frame is read once more to count each input partition's
    rows, and each row's index is the rows before its partition plus its place in it. Equal
    to ``F.row_number().over(Window.orderBy(F.monotonically_increasing_id())) - 1 + offset``,
    which Spark computes in one task. The frame must give each partition the same rows when
    read twice (a file, a cache, a checkpoint); where it does not, the query fails with an
    error that says to cache it."""
    if not is_spark_frame(frame):
        raise ConfigTypeError(f"with_row_index works on a Spark DataFrame, got {type(frame).__name__}")
    if not isinstance(name, str) or not name:
        raise ConfigTypeError(f"with_row_index's name is a non-empty string, got {name!r}")
    offset = require_int(offset, "offset")
    handle = session_for(frame, session)
    names = handle.call("reading the schema", lambda: frame.columns)
    if name in names:
        raise ConfigError(f"with_row_index: the frame already has a column {name!r}; pass another name=")
    refuse_reserved(names, PREFIX)
    from pyspark.sql import functions as F

    index: Column = column(INDEX) + F.lit(offset)
    return indexed(frame).select(index.alias(name), *[column(given) for given in names])
