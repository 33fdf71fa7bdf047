"""Stateful operator mode: one operator instance per worker, over its substream in order.

As in a stream processor, worker ``w`` runs its own instance of the operator over the
tuples the grouper sent it, in the order they arrived. On Spark that is
``repartitionById(n, "worker")`` then ``groupBy("worker").applyInArrow``: each worker's
substream is one group on its own partition, and the ``seq`` column restores the order
that the shuffle does not keep (a client stream's arrival order; for a Spark DataFrame,
each partition's order, partition after partition). The operator's outputs are partial
results; the operator's ``merge`` combines them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from keysplit._grouper import Grouper, NullPolicy
from keysplit.spark.ingest import DEFAULT_BATCH_ROWS, IngestChoice, Stream, choose_path, require_batch_rows
from keysplit.spark.pipeline import (
    DEFAULT_GROUPER,
    SEQUENCE_COLUMN,
    ClientStream,
    SparkFrame,
    is_spark_frame,
    make_grouper,
    run_settings,
    shown_session,
)
from keysplit.spark.report import ObservationMismatch, RunReport, WindowReport
from keysplit.spark.routing import SOURCE_COLUMN, WORKER_COLUMN

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from keysplit.spark.session import Session


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
    stream: Stream | DataFrame,
    *,
    operator: Operator,
    key: str = "key",
    grouper: Grouper | str = DEFAULT_GROUPER,
    workers: int = 8,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    order_by: Sequence[str] | str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    ingest: IngestChoice = "auto",
    staging_dir: str | Path | None = None,
    upload_dir: str | None = None,
    nulls: NullPolicy = "group",
    output: str = "spark",
    timeout: float | None = None,
    progress: bool | None = None,
) -> tuple[Any, RunReport]:
    """Routes ``stream``, runs ``operator`` per worker on Spark in arrival order, merges.

    ``stream`` is a Spark DataFrame (routed on the executors, see
    :func:`keysplit.spark.aggregate` for ``order_by``) or a client stream (routed here and
    ingested by ``ingest``). Returns the merged result (Spark DataFrame, or
    ``output="arrow"``/``"polars"``, sorted by its first columns) and the
    :class:`RunReport` (one window: the whole stream). ``progress`` shows the Spark
    action running on stderr (None: when stderr is a terminal).
    """
    from pyspark.sql import functions as F

    batch_rows = require_batch_rows(batch_rows)
    if not isinstance(operator, Operator):
        raise TypeError(f"operator must be a keysplit.spark.operator.Operator, got {type(operator).__name__}")
    if output not in ("spark", "arrow", "polars"):
        raise ValueError(f"output must be 'spark', 'arrow' or 'polars', got {output!r}")
    grouper = make_grouper(grouper, workers, seed)
    order = [order_by] if isinstance(order_by, str) else order_by
    n = grouper.workers
    spark_frame = stream if is_spark_frame(stream) else None
    started_run = time.perf_counter()
    stack = contextlib.ExitStack()
    handle, owned, _ = shown_session(
        spark_frame.sparkSession if spark_frame is not None and session is None else session,
        stack,
        f"apply_operator ({grouper.name}, {n} workers)",
        progress,
    )
    try:
        if spark_frame is not None:
            source: ClientStream | SparkFrame = SparkFrame(
                handle,
                spark_frame,
                key=key,
                grouper=grouper,
                columns=None,
                window=None,
                nulls=nulls,
                order_by=order,
                sequence=True,
            )
            path = "none"
        else:
            if order is not None:
                raise ValueError(
                    "order_by sorts the partitions of a Spark DataFrame; a client stream is routed in its own order"
                )
            path = choose_path(handle, ingest, staging_dir=staging_dir, upload_dir=upload_dir)
            source = ClientStream(
                handle,
                stream,
                key=key,
                grouper=grouper,
                columns=None,
                window=None,
                batch_rows=batch_rows,
                nulls=nulls,
                ingestion=path,
                staging_dir=staging_dir,
                upload_dir=upload_dir,
                sequence=True,
            )
        stack.enter_context(run_settings(handle))
        windows = source.windows()
        stack.callback(windows.close)
        routed = next(windows)
        assert routed.rows is not None
        rows = routed.rows
        by_worker = rows.repartitionById(n, WORKER_COLUMN)
        observed = handle.call(
            "reading partition sizes",
            lambda: (
                by_worker.groupBy(F.spark_partition_id().alias("p"), WORKER_COLUMN, SOURCE_COLUMN)
                .agg(F.count(F.lit(1)).alias("rows"))
                .collect()
            ),
            timeout=timeout,
        )
        keys = handle.call("counting keys", lambda: rows.select(key).distinct().count(), timeout=timeout)
        schema = operator.schema(handle.call("reading the schema", lambda: rows.schema, timeout=timeout))
        partial_plan = (
            by_worker.drop(SOURCE_COLUMN)
            .groupBy(WORKER_COLUMN)
            .applyInArrow(_in_arrival_order(operator.function), f"{schema}, __worker int, __partition int")
        )
        started = time.perf_counter()
        partials = handle.call("operator", lambda: partial_plan.localCheckpoint(eager=True), timeout=timeout)
        partial_seconds = time.perf_counter() - started
        partial_rows = handle.call("counting partials", partials.count, timeout=timeout)
        merged_plan = operator.merge(partials.drop("__worker", "__partition"))
        started = time.perf_counter()
        merged = handle.call("merge", lambda: merged_plan.localCheckpoint(eager=True), timeout=timeout)
        final_seconds = time.perf_counter() - started
        sources = 1 + max((row[SOURCE_COLUMN] for row in observed), default=0)
        source_loads = [[0] * n for _ in range(sources)]
        partition_rows = [0] * n
        partition_workers: list[set[int]] = [set() for _ in range(n)]
        for row in observed:
            source_loads[row[SOURCE_COLUMN]][row[WORKER_COLUMN]] += int(row["rows"])
            partition_rows[row["p"]] += int(row["rows"])
            partition_workers[row["p"]].add(row[WORKER_COLUMN])
        spark_loads = [sum(column) for column in zip(*source_loads, strict=True)]
        window = WindowReport(
            window=None,
            rows=routed.row_count if routed.row_count is not None else sum(spark_loads),
            spark_loads=spark_loads,
            source_loads=source_loads,
            # The operator's partials are not one per (worker, key): Γ is what Spark made.
            spark_partial_rows=int(partial_rows),
            keys=int(keys),
            client_loads=routed.client_loads,
            partition_rows=partition_rows,
            partition_workers=[sorted(found) for found in partition_workers],
            seconds={**routed.seconds, "partial": partial_seconds, "final": final_seconds},
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
        stack.close()
        if owned:
            handle.close()
    return result, RunReport(
        grouper=grouper.name,
        workers=n,
        windows=[window],
        routed_on=source.routed_on,
        ingestion=path,
        summary=source.summary(),
        wall_seconds=time.perf_counter() - started_run,
    )
