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

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit._grouper import DEFAULT_GROUPER, Grouper, NullPolicy
from keysplit.spark.ingest import DEFAULT_BATCH_ROWS, IngestChoice, IngestOptions, Stream
from keysplit.spark.intake import Intake
from keysplit.spark.lifetime import unpersist_with
from keysplit.spark.options import make_grouper, order_columns, require_key, require_task_workers
from keysplit.spark.report import ObservationMismatch, Report, RunReport, WindowReport
from keysplit.spark.routed_windows import SEQUENCE_COLUMN, RoutedWindow, routed_input
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
        raise ConfigError(f"window_tuples must be a positive int, got {window_tuples!r}")

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
    ingest: IngestChoice | IngestOptions = "auto",
    staging_dir: str | Path | None = None,
    upload_dir: str | None = None,
    nulls: NullPolicy = "group",
    output: str = "spark",
    timeout: float | None = None,
    progress: bool | None = None,
    report: Report[RunReport] | None = None,
) -> Any:
    """Routes ``stream``, runs ``operator`` per worker on Spark in arrival order, merges.

    ``stream`` is a Spark DataFrame (routed on the executors, see
    :func:`keysplit.spark.aggregate` for ``order_by``) or a client stream (routed here and
    ingested by ``ingest``); the session is a Spark DataFrame's own unless ``session=`` names one.
    Runs now, and returns the merged result (Spark DataFrame, or ``output="arrow"``/
    ``"polars"``, sorted by its first columns); ``report`` (a :class:`keysplit.spark.Report`)
    is filled with the :class:`RunReport` (one window: the whole stream). ``progress``
    shows the Spark action running on stderr (None: when stderr is a terminal).
    """
    if not isinstance(operator, Operator):
        raise ConfigTypeError(f"operator must be a keysplit.spark.operator.Operator, got {type(operator).__name__}")
    if output not in ("spark", "arrow", "polars"):
        raise ConfigError(f"output must be 'spark', 'arrow' or 'polars', got {output!r}")
    key = require_key(key)
    options = IngestOptions.of(ingest, batch_rows=batch_rows, staging_dir=staging_dir, upload_dir=upload_dir)
    routing = make_grouper(grouper, workers, seed)
    require_task_workers(routing.workers)
    started_run = time.perf_counter()
    title = f"apply_operator ({routing.name}, {routing.workers} workers)"
    with Intake(title, stream, session=session, progress=progress) as intake:
        source = routed_input(
            intake.session,
            stream,
            key=key,
            grouper=routing,
            columns=None,
            window=None,
            nulls=nulls,
            order_by=order_columns(order_by),
            ingest=options,
            sequence=True,
        )
        windows = source.windows()
        intake.callback(windows.close)
        routed = next(windows)
        merged, window = _OperatorRun(intake.session, operator, key, routing.workers, timeout).run(routed)
        result = merged if output == "spark" else _fetched(intake.session, merged, output, timeout)
    if report is not None:
        report.fill(
            RunReport(
                grouper=routing.name,
                workers=routing.workers,
                windows=[window],
                routed_on=source.routed_on,
                ingestion=source.ingestion,
                summary=source.summary(),
                wall_seconds=time.perf_counter() - started_run,
            )
        )
    return result


@dataclass(frozen=True)
class _OperatorRun:
    """The operator's stages over one routed window, and Spark's figures of them."""

    session: Session
    operator: Operator
    key: str
    workers: int
    timeout: float | None

    def run(self, routed: RoutedWindow) -> tuple[DataFrame, WindowReport]:
        """The merged result, held on the executors, and the window's checked report."""
        from pyspark.sql import functions as F

        call = self.session.call
        assert routed.rows is not None
        rows = routed.rows
        by_worker = rows.repartitionById(self.workers, WORKER_COLUMN)
        observed = call(
            "reading partition sizes",
            lambda: (
                by_worker.groupBy(F.spark_partition_id().alias("p"), WORKER_COLUMN, SOURCE_COLUMN)
                .agg(F.count(F.lit(1)).alias("rows"))
                .collect()
            ),
            timeout=self.timeout,
        )
        keys = call("counting keys", lambda: rows.select(self.key).distinct().count(), timeout=self.timeout)
        schema = self.operator.schema(call("reading the schema", lambda: rows.schema, timeout=self.timeout))
        partial_plan = (
            by_worker.drop(SOURCE_COLUMN)
            .groupBy(WORKER_COLUMN)
            .applyInArrow(_in_arrival_order(self.operator.function), f"{schema}, __worker int, __partition int")
        )
        started = time.perf_counter()
        # Cached, not checkpointed: a block lost with an executor is recomputed from its lineage.
        partials = call("operator", partial_plan.persist, timeout=self.timeout)
        partial_rows = call("counting partials", partials.count, timeout=self.timeout)
        partial_seconds = time.perf_counter() - started
        held = self.operator.merge(partials.drop("__worker", "__partition"))
        started = time.perf_counter()
        call("merge", lambda: held.persist().count(), timeout=self.timeout)
        call("releasing the partials", partials.unpersist, timeout=self.timeout)
        merged = held.select("*")
        unpersist_with(merged, held)
        seconds = {**routed.seconds, "partial": partial_seconds, "final": time.perf_counter() - started}
        window = self.report(routed, observed, int(keys), int(partial_rows), seconds)
        problems = window.disagreements()
        if problems:
            raise ObservationMismatch("; ".join(problems))
        return merged, window

    def report(
        self, routed: RoutedWindow, observed: list[Any], keys: int, partial_rows: int, seconds: dict[str, float]
    ) -> WindowReport:
        n = self.workers
        sources = 1 + max((row[SOURCE_COLUMN] for row in observed), default=0)
        source_loads = [[0] * n for _ in range(sources)]
        partition_rows = [0] * n
        partition_workers: list[set[int]] = [set() for _ in range(n)]
        for row in observed:
            source_loads[row[SOURCE_COLUMN]][row[WORKER_COLUMN]] += int(row["rows"])
            partition_rows[row["p"]] += int(row["rows"])
            partition_workers[row["p"]].add(row[WORKER_COLUMN])
        spark_loads = [sum(column) for column in zip(*source_loads, strict=True)]
        return WindowReport(
            window=None,
            rows=routed.row_count if routed.row_count is not None else sum(spark_loads),
            spark_loads=spark_loads,
            source_loads=source_loads,
            # The operator's partials are not one per (worker, key): Γ is what Spark made.
            spark_partial_rows=partial_rows,
            keys=keys,
            client_loads=routed.client_loads,
            partition_rows=partition_rows,
            partition_workers=[sorted(found) for found in partition_workers],
            seconds=seconds,
        )


def _fetched(session: Session, merged: DataFrame, output: str, timeout: float | None) -> Any:
    table = session.call("fetching the result", merged.toArrow, timeout=timeout)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.sort(frame.columns[:-1])
    return frame if output == "polars" else frame.to_arrow()
