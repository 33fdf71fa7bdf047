"""Stateful operator mode: one operator instance per worker, over its substream in order.

As in a stream processor, worker ``w`` runs its own instance of the operator over the
tuples the grouper sent it, in the order they arrived. On Spark that is
``repartitionById(n, "worker")`` then ``groupBy("worker").applyInArrow``: each worker's
substream is one group on its own partition, and a ``seq`` column (the tuple's position
in the whole stream) restores the arrival order that the shuffle does not keep. The
operator's outputs are partial results; the operator's ``merge`` combines them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from keysplit import metrics
from keysplit._grouper import Grouper, NullPolicy
from keysplit.spark.report import ObservationMismatch, RunReport, WindowReport
from keysplit.spark.shipping import DEFAULT_BATCH_ROWS, Stream, frames, require_batch_rows, ship, to_arrow, union

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.types import StructType

    from keysplit.spark.session import Session

#: The column holding each tuple's position in the whole stream.
SEQUENCE_COLUMN = "seq"


@dataclass(frozen=True)
class Operator:
    """A stream operator: ``function`` per worker, then ``merge`` over every worker's output.

    ``function`` takes a worker's substream (a ``pa.Table`` in arrival order, with the
    stream's columns and ``seq``) and returns its partial results; ``schema`` gives their
    Spark schema from the input's. ``merge`` turns the partials of every worker (a Spark
    DataFrame) into the final result.
    """

    function: Callable[[pa.Table], pa.Table]
    schema: Callable[[StructType], str]
    merge: Callable[[DataFrame], DataFrame]


class _WindowedCount:
    """Counts each key per tumbling window of ``window_tuples`` tuples of the whole stream."""

    def __init__(self, key: str, window_tuples: int) -> None:
        self.key = key
        self.window_tuples = window_tuples

    def __call__(self, substream: pa.Table) -> pa.Table:
        frame = pl.from_arrow(substream)
        assert isinstance(frame, pl.DataFrame)
        counts = frame.group_by(
            (pl.col(SEQUENCE_COLUMN) // self.window_tuples).alias("window"), self.key, maintain_order=True
        ).agg(pl.len().cast(pl.Int64).alias("count"))
        return counts.to_arrow(compat_level=pl.CompatLevel.oldest())


def windowed_count(window_tuples: int, *, key: str = "key") -> Operator:
    """A windowed word count: tuples per (window, key), windows of ``window_tuples`` tuples.

    Each worker counts its own substream; the merge adds the counts of a (window, key)
    over the workers that hold it, which equals a plain count per (``seq`` // W, key).
    """
    if isinstance(window_tuples, bool) or not isinstance(window_tuples, int) or window_tuples < 1:
        raise ValueError(f"window_tuples must be a positive int, got {window_tuples!r}")

    def schema(source: StructType) -> str:
        return f"window long, `{key}` {source[key].dataType.simpleString()}, count long"

    def merge(partials: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        return partials.groupBy("window", key).agg(F.sum("count").cast("long").alias("count"))

    return Operator(_WindowedCount(key, window_tuples), schema, merge)


def _in_arrival_order(function: Callable[[pa.Table], pa.Table]) -> Callable[[pa.Table], pa.Table]:
    """Runs the operator on one worker's group, sorted by ``seq``, and tags its output.

    A plain annotated function, as ``applyInArrow`` reads its kind from the type hints.
    """

    def run(group: pa.Table) -> pa.Table:
        from pyspark import TaskContext

        worker = group.column("worker")[0].as_py()
        out = function(group.sort_by(SEQUENCE_COLUMN).drop_columns(["worker"]))
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else -1
        rows = out.num_rows
        return out.append_column("__worker", pa.array([worker] * rows, pa.int32())).append_column(
            "__partition", pa.array([partition] * rows, pa.int32())
        )

    return run


def apply_operator(
    stream: Stream,
    *,
    operator: Operator,
    key: str = "key",
    grouper: Grouper | str = "pdstream",
    workers: int = 8,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    nulls: NullPolicy = "group",
    output: str = "spark",
    timeout: float | None = None,
) -> tuple[Any, RunReport]:
    """Routes ``stream``, runs ``operator`` per worker on Spark in arrival order, merges.

    Returns the merged result (Spark DataFrame, or ``output="arrow"``/``"polars"``, sorted
    by its first columns) and the :class:`RunReport` (one window: the whole stream).
    """
    from pyspark.sql import functions as F

    from keysplit.spark.aggregate import _as_session

    batch_rows = require_batch_rows(batch_rows)
    if not isinstance(operator, Operator):
        raise TypeError(f"operator must be a keysplit.spark.operator.Operator, got {type(operator).__name__}")
    if isinstance(grouper, str):
        grouper = Grouper(grouper, workers=workers, seed=seed)
    elif not isinstance(grouper, Grouper):
        raise TypeError(f"grouper must be a keysplit.Grouper or a grouper name, got {type(grouper).__name__}")
    n = grouper.workers
    handle, owned = _as_session(session)
    started_run = time.perf_counter()
    try:
        stream_metrics = metrics.StreamingMetrics(n, key=key)
        loads = [0] * n
        shipped: list[DataFrame] = []
        routing = shipping = 0.0
        offset = 0
        for frame in frames(stream, batch_rows):
            if key not in frame.columns:
                raise ValueError(f"key column {key!r} is not in the stream; columns: {frame.columns}")
            if SEQUENCE_COLUMN in frame.columns or "worker" in frame.columns:
                raise ValueError(f"the stream may not have columns {SEQUENCE_COLUMN!r} or 'worker'")
            started = time.perf_counter()
            ids = grouper.route(frame.get_column(key), nulls=nulls)
            routing += time.perf_counter() - started
            routed = frame.with_columns(
                pl.int_range(offset, offset + frame.height, dtype=pl.Int64).alias(SEQUENCE_COLUMN),
                pl.Series("worker", ids).cast(pl.Int32),
            )
            offset += frame.height
            for worker, count in metrics.worker_loads(routed, workers=n).to_frame().with_row_index().iter_rows():
                loads[worker] += count
            stream_metrics.update(routed)
            started = time.perf_counter()
            shipped.append(ship(handle, to_arrow(routed)))
            shipping += time.perf_counter() - started
        if not shipped:
            raise ValueError("the stream is empty")
        rows = union(shipped)
        by_worker = rows.repartitionById(n, "worker")
        observed = handle.call(
            "reading partition sizes",
            lambda: by_worker.groupBy(F.spark_partition_id().alias("p"))
            .agg(F.count(F.lit(1)).alias("rows"), F.sort_array(F.collect_set("worker")).alias("workers"))
            .collect(),
            timeout=timeout,
        )
        schema = operator.schema(rows.schema)
        partial_plan = by_worker.groupBy("worker").applyInArrow(
            _in_arrival_order(operator.function), f"{schema}, __worker int, __partition int"
        )
        started = time.perf_counter()
        partials = handle.call("operator", lambda: partial_plan.localCheckpoint(eager=True), timeout=timeout)
        partial_seconds = time.perf_counter() - started
        partial_rows = handle.call("counting partials", partials.count, timeout=timeout)
        merged_plan = operator.merge(partials.drop("__worker", "__partition"))
        started = time.perf_counter()
        merged = handle.call("merge", lambda: merged_plan.localCheckpoint(eager=True), timeout=timeout)
        final_seconds = time.perf_counter() - started
        partition_rows = [0] * n
        partition_workers: list[list[int]] = [[] for _ in range(n)]
        for row in observed:
            partition_rows[row["p"]] = int(row["rows"])
            partition_workers[row["p"]] = list(row["workers"])
        summary = stream_metrics.summary()
        window = WindowReport(
            window=None, rows=offset, client_loads=loads, partition_rows=partition_rows,
            partition_workers=partition_workers,
            # The operator's partials are not one per (worker, key): Γ is what Spark made.
            client_partial_rows=int(partial_rows), spark_partial_rows=int(partial_rows),
            seconds={"routing": routing, "shipping": shipping, "partial": partial_seconds, "final": final_seconds},
        )
        problems = window.disagreements()
        if problems:
            raise ObservationMismatch("; ".join(problems))
        if output == "spark":
            result: Any = merged
        else:
            table = handle.call("fetching the result", merged.toArrow, timeout=timeout)
            frame = pl.from_arrow(table)
            assert isinstance(frame, pl.DataFrame)
            frame = frame.sort(frame.columns[:-1])
            result = frame if output == "polars" else frame.to_arrow()
    finally:
        if owned:
            handle.close()
    return result, RunReport(
        grouper=grouper.name, workers=n, windows=[window], summary=summary,
        wall_seconds=time.perf_counter() - started_run,
    )
