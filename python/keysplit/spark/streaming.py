"""A routed streaming aggregation in Spark Structured Streaming, whose grouper state lives in
Spark's state store and survives restarts.

:func:`stream_aggregate` takes a streaming DataFrame (``spark.readStream...``) and starts
one query:

1. **Sources.** Each row goes to source ``pmod(xxhash64(order_by...), sources)``: the
   stream is cut into ``sources`` upstream sources, as the papers' spouts, each a
   deterministic function of the row.
2. **Routing.** ``groupBy(source).transformWithStateInPandas(...)``: per micro-batch, each
   source's rows are sorted by ``order_by``, its grouper is restored from a ``ValueState``
   holding its :meth:`~keysplit.Grouper.snapshot` (the first batch builds it from
   ``grouper``; every source has the same seed), the keys are routed in that order, and
   the new snapshot is saved. The state store is checkpointed with the query (RocksDB,
   which ``transformWithState`` needs; the session's provider is set to it).
3. **Aggregation.** ``foreachBatch`` writes, each overwritten whole under the batch id:
   the batch's partial aggregates per (window, worker, key) to ``output/partials``; the
   running partials per (window, key), the previous batch's merged with this one's, to
   ``output/merged`` (the two newest are kept); the table, finalised from them, to
   ``output/table``; and the batch's loads, λ, γ, Γ and state bytes to ``output/metrics``.
   A batch that Spark runs again after a failure writes the same rows again, so nothing
   is counted twice.

``output/table`` (Parquet; :meth:`StreamAggregation.result` reads it) holds the aggregates
per key (and window) over every finished batch, equal to a batch ``groupBy`` of their rows.

Exactly once: Spark's offset and commit logs decide which rows form batch ``N``; a batch
re-run after a restart reads the same rows and the state store's version ``N − 1``, so it
routes them as the first run did and overwrites the same partials. Routing a source's rows
in ``order_by`` order batch after batch is routing its whole subsequence in that order, so
the result does not depend on how the stream was cut into micro-batches, as long as every
batch's rows come after the previous batches' in ``order_by`` (files named in arrival
order, Kafka offsets).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._errors import ConfigError
from keysplit._grouper import DEFAULT_GROUPER, Grouper, NullPolicy
from keysplit.spark.aggregate import (
    DEFAULT_SKETCH_LG_K,
    Agg,
    DistinctMode,
    merge_sql,
    parse_aggs,
    partial_sql,
    remerge_sql,
)
from keysplit.spark.intake import run_settings, session_for
from keysplit.spark.options import make_grouper, order_columns
from keysplit.spark.routing import (
    ARCHIVE_DIR,
    SOURCE_COLUMN,
    WORKER_COLUMN,
    check_executors,
    keysplit_importer,
    require_key_type,
)
from keysplit.spark.runs import run_slices

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from keysplit.spark.session import Session

#: The state store provider ``transformWithState`` needs.
STATE_STORE_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_PROVIDER_SETTING = "spark.sql.streaming.stateStore.providerClass"
#: The column of each routed row's source's state size, which the metrics add up.
_STATE_BYTES = "__keysplit_state_bytes"
#: The tuples of each (window, worker, key) in the partials, whatever the aggregates.
_TUPLES = "__keysplit_tuples"
_SETTINGS_FILE = "keysplit_stream.json"
DEFAULT_SOURCES = 2


@dataclass(frozen=True)
class StreamAggregation:
    """A started :func:`stream_aggregate`: its ``query`` and where its table is."""

    query: StreamingQuery
    session: Session
    output: Path
    key: str
    aggs: list[Agg]
    window: str | None

    def process_all_available(self, *, timeout: float | None = None) -> None:
        """Waits until every input the stream's source holds now is aggregated, as
        ``StreamingQuery.processAllAvailable()`` does; a failed query raises its error. Then
        :meth:`result`, :meth:`routing` and :meth:`metrics` include that input. ``timeout``
        is in seconds (the session's query timeout by default)."""
        self.session.call("waiting for the stream's available input", self.query.processAllAvailable, timeout=timeout)

    def result(self, *, output: str = "polars") -> Any:
        """The table: the aggregates per key (and window) over every finished batch, equal
        to a batch ``groupBy`` of their rows. A Polars DataFrame sorted by window and key
        (``output="polars"``), or a Spark DataFrame (``"spark"``) of ``output/table``.
        Right after :func:`stream_aggregate` no batch has finished: call
        :meth:`process_all_available` first."""
        table = self.output / "table"
        if not (table / "_SUCCESS").exists():
            raise ConfigError(
                f"no batch of the stream has finished yet ({table} holds no table): "
                "call run.process_all_available() to wait for the input the source holds now"
            )
        frame = self.session.spark.read.parquet(str(table))
        if output == "spark":
            return frame
        if output != "polars":
            raise ConfigError(f"output must be 'polars' or 'spark', got {output!r}")
        fetched = pl.from_arrow(self.session.call("reading the stream's table", frame.toArrow))
        assert isinstance(fetched, pl.DataFrame)  # a table converts to a frame
        groups = [self.window, self.key] if self.window is not None else [self.key]
        return fetched.sort(groups, nulls_last=False)

    def routing(self) -> pl.DataFrame:
        """The tuples routed to each (window,) worker and key over every finished batch,
        sorted: what an uninterrupted run of the same stream routes, however the stream was
        cut into micro-batches or restarted."""
        partials = self.output / "partials"
        if not any(partials.glob("batch=*/*.parquet")):
            raise ConfigError(
                f"no batch of the stream has finished yet ({partials} is empty): "
                "call run.process_all_available() to wait for the input the source holds now"
            )
        cells = pl.read_parquet(partials / "**" / "*.parquet", hive_partitioning=True)
        groups = [*([self.window] if self.window is not None else []), WORKER_COLUMN, self.key]
        return cells.group_by(groups).agg(pl.col(_TUPLES).sum().alias("tuples")).sort(groups)

    def metrics(self) -> pl.DataFrame:
        """One row per finished micro-batch: its rows, the loads per worker, λ, γ (workers
        per key within the batch), Γ (its partial rows) and the grouper state bytes summed
        over the sources. Empty (with these columns) until a batch has finished:
        :meth:`process_all_available` waits for one."""
        files = sorted((self.output / "metrics").glob("batch=*/*.parquet"))
        if not files:
            return pl.DataFrame(schema=_METRICS_SCHEMA)
        return pl.concat([pl.read_parquet(f) for f in files]).sort("batch")


_METRICS_SCHEMA = pl.Schema(
    {
        "batch": pl.Int64(),
        "rows": pl.Int64(),
        "loads": pl.List(pl.Int64()),
        "load_imbalance": pl.Float64(),
        "replication_factor": pl.Float64(),
        "aggregation_cost": pl.Int64(),
        "state_bytes": pl.Int64(),
    }
)


def _route_processor(
    initial: bytes, key: str, order_by: list[str], window: str | None, nulls: NullPolicy, archive_dir: str
) -> Any:
    """The stateful processor that routes one source's rows per micro-batch. Built in a
    function, so that it travels by value and an executor needs keysplit only to run it."""
    import_keysplit = keysplit_importer(archive_dir)
    from pyspark.sql.streaming import StatefulProcessor

    class RouteSource(StatefulProcessor):
        def init(self, handle: Any) -> None:
            from pyspark.sql.types import BinaryType, StringType, StructField, StructType

            fields = [StructField("snapshot", BinaryType()), StructField("window", StringType())]
            self.state = handle.getValueState("grouper", StructType(fields))

        def handleInputRows(self, source: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - PySpark's names
            import numpy as np
            import pandas as pd
            import pyarrow as pa

            keysplit = import_keysplit()
            frame = pd.concat(list(rows), ignore_index=True).sort_values(order_by, kind="stable", ignore_index=True)
            snapshot, last = self.state.get() if self.state.exists() else (initial, None)
            grouper = keysplit.Grouper.restore(bytes(snapshot))
            keys = pa.Array.from_pandas(frame[key])
            if pa.types.is_floating(keys.type):
                # An integer key column with nulls arrives as floats.
                keys = pa.Array.from_pandas(frame[key].astype("Int64"))
            if window is None:
                ids = np.asarray(grouper.route(keys, nulls=nulls), dtype="int32")
            else:
                labels = pa.array(frame[window].astype(str))
                ids = np.empty(len(frame), dtype="int32")
                for start, length in run_slices(labels):
                    if last is not None and labels[start].as_py() != last:
                        grouper.end_window()
                    last = labels[start].as_py()
                    ids[start : start + length] = np.asarray(grouper.route(keys.slice(start, length), nulls=nulls))
            self.state.update((grouper.snapshot(), last))
            # The grouping key is not among the rows' columns.
            frame[SOURCE_COLUMN] = np.int32(source[0])
            frame[WORKER_COLUMN] = ids
            frame[_STATE_BYTES] = np.int64(grouper.state_bytes)
            yield frame

        def close(self) -> None:
            pass

    return RouteSource()


def _sink(
    output: str, key: str, window: str | None, sql: dict[str, list[str]], workers: int
) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function. It writes, each whole (overwrite) and named by the
    batch id: the batch's partials per (window, worker, key); the running partials per
    (window, key), the previous batch's merged with this one's; the table, finalised from
    them; and the batch's metrics. Only PySpark is needed where it runs: the aggregates come
    as SQL (``sql``: ``partial``, ``remerge`` and ``final`` expressions)."""

    def write(frame: Any, batch_id: int) -> None:
        import os
        import re
        import shutil

        from pyspark.sql import functions as F

        spark = frame.sparkSession
        frame = frame.persist()
        try:
            by_key = [window, key] if window is not None else [key]
            cells = frame.groupBy(WORKER_COLUMN, *by_key).agg(
                F.count(F.lit(1)).alias(_TUPLES), *[F.expr(e) for e in sql["partial"]]
            )
            cells.write.mode("overwrite").parquet(f"{output}/partials/batch={batch_id}")
            # The running partials: the last earlier batch's (a re-run of this batch finds
            # the same one) merged with this batch's.
            merged_dir = f"{output}/merged"
            earlier = sorted(
                int(match[1])
                for name in (os.listdir(merged_dir) if os.path.isdir(merged_dir) else [])
                if (match := re.fullmatch(r"batch=(\d+)", name)) and int(match[1]) < batch_id
            )
            running = spark.read.parquet(f"{output}/partials/batch={batch_id}").drop(WORKER_COLUMN, _TUPLES)
            if earlier:
                running = running.unionByName(spark.read.parquet(f"{merged_dir}/batch={earlier[-1]}"))
            running.groupBy(*by_key).agg(*[F.expr(e) for e in sql["remerge"]]).write.mode("overwrite").parquet(
                f"{merged_dir}/batch={batch_id}"
            )
            final = spark.read.parquet(f"{merged_dir}/batch={batch_id}").groupBy(*by_key)
            final.agg(*[F.expr(e) for e in sql["final"]]).write.mode("overwrite").parquet(f"{output}/table")
            for old in earlier[:-1]:
                shutil.rmtree(f"{merged_dir}/batch={old}", ignore_errors=True)
            loads = {row[0]: row[1] for row in frame.groupBy(WORKER_COLUMN).count().collect()}
            states = frame.groupBy(SOURCE_COLUMN).agg(F.max(_STATE_BYTES)).collect()
            pairs = frame.select(WORKER_COLUMN, key).distinct().count()
            keys = frame.select(key).distinct().count()
            per_worker = [int(loads.get(w, 0)) for w in range(workers)]
            rows = sum(per_worker)
            mean = rows / workers
            figures = {
                "batch": batch_id,
                "rows": rows,
                "loads": per_worker,
                "load_imbalance": (max(per_worker) - mean) / mean if rows else 0.0,
                "replication_factor": pairs / keys if keys else 0.0,
                "aggregation_cost": pairs,
                "state_bytes": int(sum(row[1] for row in states)),
            }
            frame.sparkSession.createDataFrame(
                [figures],
                "batch long, rows long, loads array<long>, load_imbalance double, replication_factor double, "
                "aggregation_cost long, state_bytes long",
            ).coalesce(1).write.mode("overwrite").parquet(f"{output}/metrics/batch={batch_id}")
        finally:
            frame.unpersist()

    return write


def _check_settings(output: Path, settings: dict[str, Any]) -> None:
    """Writes the stream's settings next to its table, or refuses other ones there."""
    path = output / _SETTINGS_FILE
    if path.exists():
        before = json.loads(path.read_text(encoding="utf-8"))
        differing = sorted(k for k in settings.keys() | before.keys() if settings.get(k) != before.get(k))
        if differing:
            raise ConfigError(
                f"{output} holds another stream's table (differing: {', '.join(differing)}): "
                "give a new output and checkpoint, or the same settings"
            )
        return
    output.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=1, sort_keys=True), encoding="utf-8")


def stream_aggregate(
    stream: DataFrame,
    *,
    key: str = "key",
    grouper: Grouper | str = DEFAULT_GROUPER,
    aggs: Sequence[str | Agg] = ("count",),
    workers: int = 8,
    checkpoint: str | Path,
    output: str | Path,
    order_by: Sequence[str] | str,
    sources: int = DEFAULT_SOURCES,
    window: str | None = None,
    seed: int = 0,
    nulls: NullPolicy = "group",
    distinct: DistinctMode = "exact",
    trigger: dict[str, Any] | None = None,
    session: Session | Any | None = None,
) -> StreamAggregation:
    """Starts a streaming aggregation of ``stream`` per ``key``, routed by ``grouper`` over
    ``workers`` workers (module documentation), and returns it started.

    ``stream`` is a streaming DataFrame of the ``session``'s Spark. ``order_by`` names the
    columns that order the stream (unique, increasing with arrival: a sequence number, a
    Kafka ``(partition, offset)``); ``sources`` is the number of upstream sources, each with
    its own grouper, all with ``seed``. ``aggs`` are as :func:`keysplit.spark.aggregate`'s.
    ``window`` names a column whose value groups the aggregates (a tumbling window's start,
    a window id); each source's grouper ends a window when it changes. ``checkpoint`` is the
    query's checkpoint directory (its offsets and the grouper states), ``output`` the
    directory of its table; both on a filesystem the client and the server share.
    ``trigger`` is ``writeStream.trigger``'s keywords (default: ``processingTime="1 second"``).
    """
    spark_session = session_for(stream, session)
    if not getattr(stream, "isStreaming", False):
        raise ConfigError(
            "stream must be a streaming DataFrame (spark.readStream...); for a DataFrame read once "
            "use keysplit.spark.aggregate"
        )
    if isinstance(sources, bool) or not isinstance(sources, int) or not 1 <= sources <= 1024:
        raise ConfigError(f"sources must be an int in [1, 1024], got {sources!r}")
    order = list(order_columns(order_by) or ())
    parsed = parse_aggs(aggs)
    routing = make_grouper(grouper, workers, seed)
    schema = stream.schema
    names = [field.name for field in schema.fields]
    require_key_type(schema, key)
    for column in [*order, *([window] if window is not None else [])]:
        if column not in names:
            raise ConfigError(f"column {column!r} is not in the stream; columns: {names}")
    for reserved in (WORKER_COLUMN, SOURCE_COLUMN, _STATE_BYTES, _TUPLES):
        if reserved in names:
            raise ConfigError(f"the stream may not have a column {reserved!r}: the routing adds it; rename it")
    if not order:
        raise ConfigError("order_by names the columns that order the stream; give at least one")
    value_types = {field.name: field.dataType for field in schema.fields}
    output_path = Path(output).resolve()
    _check_settings(
        output_path,
        {
            "key": key,
            "grouper": routing.name,
            "params": {k: v for k, v in sorted(routing.params.items())},
            "workers": routing.workers,
            "seed": routing.seed,
            "aggs": [a.name for a in parsed],
            "order_by": order,
            "sources": sources,
            "window": window,
            "distinct": distinct,
            "nulls": nulls,
            "checkpoint": str(Path(checkpoint).resolve()),
        },
    )
    check_executors(spark_session)
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    routed_schema = StructType(
        [
            *schema.fields,
            StructField(SOURCE_COLUMN, IntegerType()),
            StructField(WORKER_COLUMN, IntegerType()),
            StructField(_STATE_BYTES, LongType()),
        ]
    )
    processor = _route_processor(routing.snapshot(), key, order, window, nulls, ARCHIVE_DIR)
    routed = (
        stream.withColumn(SOURCE_COLUMN, F.pmod(F.xxhash64(*order), F.lit(sources)).cast("int"))
        .groupBy(SOURCE_COLUMN)
        .transformWithStateInPandas(processor, outputStructType=routed_schema, outputMode="Append", timeMode="None")
    )
    sql = {
        "partial": [e for agg in parsed for e in partial_sql(agg, distinct, DEFAULT_SKETCH_LG_K)],
        "remerge": [e for agg in parsed for e in remerge_sql(agg, distinct)],
        "final": [merge_sql(agg, distinct, None if agg.column is None else value_types[agg.column]) for agg in parsed],
    }
    writer = (
        routed.writeStream.foreachBatch(_sink(str(output_path), key, window, sql, routing.workers))
        .option("checkpointLocation", str(Path(checkpoint).resolve()))
        .trigger(**(trigger or {"processingTime": "1 second"}))
    )
    # The query keeps the state store it starts with (the checkpoint records it): the
    # session's own setting is back as it was once the query has started.
    with run_settings(spark_session, {_PROVIDER_SETTING: STATE_STORE_PROVIDER}):
        query = spark_session.call("starting the streaming query", writer.start)
    return StreamAggregation(
        query=query,
        session=spark_session,
        output=output_path,
        key=key,
        aggs=parsed,
        window=window,
    )
