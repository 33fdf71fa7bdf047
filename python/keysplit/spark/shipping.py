"""Reading a stream batch by batch, routing it, and shipping it to Spark in bounded batches."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.connect.dataframe import DataFrame

    from keysplit.spark.session import Session

#: Rows per shipped batch unless the caller says otherwise.
DEFAULT_BATCH_ROWS = 65_536

Stream = pl.DataFrame | pl.LazyFrame | pa.Table | pa.RecordBatch | Iterable[Any]

# Spark has no unsigned integers: each is widened to the next signed type that holds it.
_WIDER = {pl.UInt8: pl.Int16, pl.UInt16: pl.Int32, pl.UInt32: pl.Int64}


def require_batch_rows(batch_rows: object) -> int:
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive int, got {batch_rows!r}")
    return batch_rows


def _as_frame(item: object) -> pl.DataFrame:
    if isinstance(item, pl.DataFrame):
        return item
    if isinstance(item, (pa.Table, pa.RecordBatch)):
        frame = pl.from_arrow(item)
        assert isinstance(frame, pl.DataFrame)
        return frame
    raise TypeError(
        "a stream holds Polars DataFrames or Arrow tables/record batches, got "
        f"{type(item).__name__}"
    )


def frames(stream: Stream, batch_rows: int) -> Iterator[pl.DataFrame]:
    """``stream`` as Polars frames of at most ``batch_rows`` rows, in order."""
    if isinstance(stream, pl.LazyFrame):
        items: Iterable[Any] = stream.collect_batches(chunk_size=batch_rows, maintain_order=True)
    elif isinstance(stream, (pl.DataFrame, pa.Table, pa.RecordBatch)):
        items = [stream]
    elif isinstance(stream, (str, bytes)) or not isinstance(stream, Iterable):
        raise TypeError(
            "stream must be a Polars DataFrame or LazyFrame, an Arrow table, or an iterable of "
            f"DataFrames or Arrow batches; got {type(stream).__name__}"
        )
    else:
        items = stream
    for item in items:
        frame = _as_frame(item)
        yield from (frame.iter_slices(batch_rows) if frame.height > batch_rows else [frame])


def spark_compatible(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with types Spark reads from Arrow: unsigned ints widened, categoricals as strings."""
    casts: dict[str, Any] = {}
    for name, dtype in frame.schema.items():
        if dtype in _WIDER:
            casts[name] = _WIDER[dtype]
        elif dtype == pl.UInt64:
            top = frame.get_column(name).max()
            if top is not None and top >= 1 << 63:  # type: ignore[operator]
                raise ValueError(
                    f"column {name!r} holds uint64 values of 2**63 or more, which Spark's signed "
                    "bigint cannot hold; cast it to a string first"
                )
            casts[name] = pl.Int64
        elif isinstance(dtype, (pl.Categorical, pl.Enum)):
            casts[name] = pl.String
    return frame.cast(casts) if casts else frame


def to_arrow(frame: pl.DataFrame) -> pa.Table:
    """Arrow data Spark's ``createDataFrame`` takes (large strings, not string views)."""
    return spark_compatible(frame).to_arrow(compat_level=pl.CompatLevel.oldest())


def ship(session: Session, table: pa.Table) -> DataFrame:
    """Sends one bounded Arrow batch to the server, where it stays as a cached relation.

    ``localCheckpoint`` makes the server hold the rows, so a union of shipped batches is a
    plan of small references rather than one message carrying the whole stream.
    """
    spark = session.spark
    return session.call(
        f"shipping {table.num_rows} rows",
        lambda: spark.createDataFrame(table).localCheckpoint(eager=True),
    )


def union(frames_: list[DataFrame]) -> DataFrame:
    """The rows of every shipped batch, in one DataFrame."""
    return functools.reduce(lambda left, right: left.union(right), frames_)
