"""A routed streaming aggregation in Spark Structured Streaming: a lazy streaming DataFrame
that the user writes to any sink, with the grouper states and the running aggregates in
Spark's state store.

:func:`stream_aggregate` takes a streaming DataFrame (``spark.readStream...``) and returns
one, as ``groupBy().agg()`` does; nothing runs until ``writeStream...start()``:

1. **Sources.** Each row goes to source ``pmod(xxhash64(order_by...), sources)``, a
   deterministic function of the row: the papers' upstream sources (spouts). Each source's
   grouping value is chosen so that Spark's hash partitioning puts it on a state partition
   of its own, so ``sources`` (by default the session's ``spark.sql.shuffle.partitions``)
   routing tasks run side by side.
2. **Routing.** ``groupBy(source).transformWithStateInPandas(...)``: per micro-batch, each
   source's rows are sorted by ``order_by``, its grouper is restored from a ``ValueState``
   holding its :meth:`~keysplit.Grouper.snapshot` (the first batch builds it from
   ``grouper``; every source has the same seed), the keys are routed in that order, and
   the new snapshot is saved. Each routed row carries its worker; each source adds one row
   of figures (its loads per worker, its grouper's bytes) that the observation
   ``"keysplit"`` sums and the aggregation never sees.
3. **Aggregation.** Spark's own streaming ``groupBy([window,] key).agg(...)`` (with
   ``per_worker``, ``groupBy([window,] worker, key)``: what each worker holds) keeps the
   running aggregates in the state store and touches only the keys of the batch. Its output
   is the returned DataFrame: updated rows in update mode, the whole table in complete
   mode, and, with a time window over a watermarked column, each window once it has closed
   in append mode (its state rows then evicted).

Exactly once: Spark's offset and commit logs decide which rows form batch ``N``; a batch
re-run after a restart reads the same rows and the state store's version ``N − 1``, so it
routes and aggregates them as the first run did, and the sink's own guarantee (a file
sink's log, an idempotent ``foreachBatch``) does the rest. Routing a source's rows in
``order_by`` order batch after batch is routing its whole subsequence in that order, so the
routing does not depend on how the stream was cut into micro-batches, as long as every
batch's rows come after the previous batches' in ``order_by`` (files named in arrival
order, Kafka offsets).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit._grouper import DEFAULT_GROUPER, Grouper, NullPolicy
from keysplit.spark.aggregate import DEFAULT_SKETCH_LG_K, Agg, DistinctMode, aggregate_columns, parse_aggs
from keysplit.spark.intake import session_for
from keysplit.spark.join_grid import spark_hash
from keysplit.spark.keyed_plan import watermark_columns
from keysplit.spark.options import make_grouper, order_columns
from keysplit.spark.routing import (
    ARCHIVE_DIR,
    SOURCE_COLUMN,
    WORKER_COLUMN,
    check_executors,
    keysplit_importer,
    require_key_type,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pyspark.sql import Column, DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from keysplit.spark.session import Session

#: The state store provider ``transformWithState`` needs; :func:`stream_aggregate` sets it
#: on the session (a query already checkpointed keeps the provider its checkpoint names).
STATE_STORE_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: The name of the observation (``DataFrame.observe``) that carries each batch's routing
#: figures to ``StreamingQueryProgress.observedMetrics`` and to a ``StreamingQueryListener``.
OBSERVATION = "keysplit"
#: The observation of the aggregation's output rows: how many, and how many workers have
#: held their keys (Γ over them), for up to ``MAX_REPLICATION_WORKERS`` workers.
REPLICATION_OBSERVATION = "keysplit_replication"
MAX_REPLICATION_WORKERS = 64
#: Worker counts up to this get their loads per batch in the observation (an array of
#: ``workers`` longs per source and batch); above it the loads and λ are left out.
MAX_OBSERVED_WORKERS = 4096
_PROVIDER_SETTING = "spark.sql.streaming.stateStore.providerClass"
_PARTITIONS_SETTING = "spark.sql.shuffle.partitions"
#: The columns of each source's row of figures (null on the routed rows).
_LOADS = "__keysplit_loads"
_STATE_BYTES = "__keysplit_state_bytes"
_LATE = "__keysplit_late_rows"
_HELD_BY = "__keysplit_held_by"
#: A time window's bounds, flattened for pandas and rebuilt after the aggregation (PySpark
#: hands pandas a column whose name starts with "__" under a positional name).
_WINDOW_START = "keysplit_window_start"
_WINDOW_END = "keysplit_window_end"
_AGGREGATION_OPERATOR = "stateStoreSave"


def source_values(sources: int, partitions: int) -> list[int]:
    """The grouping value of each of ``sources`` sources: the smallest non-negative ints
    whose Spark hash (``pmod(hash(v), partitions)``, a stateful operator's partitioning)
    lands source ``s`` on partition ``s mod partitions``, so no two sources share a
    partition while there are partitions free."""
    taken: dict[int, list[int]] = {}
    wanted = [sum(1 for s in range(sources) if s % partitions == p) for p in range(min(sources, partitions))]
    value = 0
    while any(len(taken.get(p, [])) < n for p, n in enumerate(wanted)):
        partition = spark_hash((value,), ("int",)) % partitions
        if partition < len(wanted) and len(taken.setdefault(partition, [])) < wanted[partition]:
            taken[partition].append(value)
        value += 1
    return [taken[s % partitions][s // partitions] for s in range(sources)]


def source_column(order_by: Sequence[str], sources: int, partitions: int) -> Column:
    """Each row's source: ``pmod(xxhash64(order_by...), sources)``, as the grouping value
    :func:`source_values` gives it, so that each source routes on a state partition of its
    own."""
    from pyspark.sql import functions as F

    values = F.array(*[F.lit(v) for v in source_values(sources, partitions)])
    return F.element_at(values, (F.pmod(F.xxhash64(*order_by), F.lit(sources)) + 1).cast("int"))


def _route_processor(
    initial: bytes,
    settings: str,
    key: str,
    order_by: list[str],
    output_columns: list[str],
    label: str | None,
    window_end: str | None,
    nulls: NullPolicy,
    workers: int,
    archive_dir: str,
) -> Any:
    """The stateful processor that routes one source's rows per micro-batch. Built in a
    function, so that it travels by value and an executor needs keysplit only to run it.
    It emits ``output_columns`` of each row; ``label`` is the column whose changes end a
    window; ``window_end`` (a time window over a watermarked column) drops rows whose
    window the watermark has closed."""
    import_keysplit = keysplit_importer(archive_dir)
    from pyspark.sql.streaming import StatefulProcessor

    class RouteSource(StatefulProcessor):
        def init(self, handle: Any) -> None:
            from pyspark.sql.types import BinaryType, StringType, StructField, StructType

            fields = [StructField(n, t) for n, t in (("snapshot", BinaryType()), ("window", StringType()))]
            fields.append(StructField("settings", StringType()))
            self.state = handle.getValueState("grouper", StructType(fields))

        def handleInputRows(self, source: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803 - PySpark's names
            import numpy as np
            import pandas as pd
            import pyarrow as pa

            keysplit = import_keysplit()
            frame = pd.concat(list(rows), ignore_index=True)
            late = 0
            if window_end is not None:
                ends = frame[window_end]
                since_epoch = (ends - pd.Timestamp(0, tz=ends.dt.tz)) // pd.Timedelta(milliseconds=1)
                closed = since_epoch <= timerValues.getCurrentWatermarkInMs()
                late = int(closed.sum())
                frame = frame[~closed.to_numpy()]
            frame = frame.sort_values(order_by, kind="stable", ignore_index=True)
            snapshot, last, stored = self.state.get() if self.state.exists() else (initial, None, settings)
            if stored != settings:
                before, now = json.loads(stored), json.loads(settings)
                differing = sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))
                raise keysplit.ConfigError(
                    f"this checkpoint holds another stream_aggregate's routing (differing: {', '.join(differing)}): "
                    "give the query a new checkpoint location, or the same settings"
                )
            grouper = keysplit.Grouper.restore(bytes(snapshot))
            keys = pa.Array.from_pandas(frame[key])
            if pa.types.is_floating(keys.type):
                # An integer key column with nulls arrives as doubles.
                keys = pa.Array.from_pandas(frame[key].astype("Int64"))
            ids = np.empty(len(frame), dtype="int32")
            if label is None:
                ids[:] = np.asarray(grouper.route(keys, nulls=nulls), dtype="int32")
            else:
                codes, uniques = pd.factorize(frame[label], use_na_sentinel=False)
                starts = [0, *(np.flatnonzero(codes[1:] != codes[:-1]) + 1).tolist()]
                for start, end in zip(starts, [*starts[1:], len(frame)], strict=True):
                    if start == end:
                        continue
                    value = str(uniques[codes[start]])
                    if last is not None and value != last:
                        grouper.end_window()
                    last = value
                    ids[start:end] = np.asarray(grouper.route(keys.slice(start, end - start), nulls=nulls))
            self.state.update((grouper.snapshot(), last, settings))
            frame[WORKER_COLUMN] = ids
            yield frame[output_columns].assign(**{_LOADS: None, _STATE_BYTES: None, _LATE: None})
            # The source's figures of the batch, on a row of their own that only the
            # observation reads.
            loads = np.bincount(ids, minlength=workers).tolist() if workers <= MAX_OBSERVED_WORKERS else None
            figures = pd.DataFrame({name: [None] for name in output_columns})
            figures[_LOADS] = pd.Series([loads], dtype=object)
            figures[_STATE_BYTES] = grouper.state_bytes
            figures[_LATE] = late
            yield figures

        def close(self) -> None:
            pass

    return RouteSource()


def _time_window(field: Any) -> bool:
    from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

    kind = field.dataType
    return (
        isinstance(kind, StructType)
        and [f.name for f in kind.fields] == ["start", "end"]
        and all(isinstance(f.dataType, (TimestampType, TimestampNTZType)) for f in kind.fields)
    )


def stream_aggregate(
    stream: DataFrame,
    *,
    key: str = "key",
    grouper: Grouper | str = DEFAULT_GROUPER,
    aggs: Sequence[str | Agg] = ("count",),
    workers: int = 8,
    order_by: Sequence[str] | str,
    window: str | Column | None = None,
    sources: int | None = None,
    per_worker: bool = False,
    seed: int = 0,
    nulls: NullPolicy = "group",
    distinct: DistinctMode = "exact",
    session: Session | Any | None = None,
) -> DataFrame:
    """The streaming aggregation of ``stream`` per ``key``, routed by ``grouper`` over
    ``workers`` workers (module documentation): a lazy streaming DataFrame of the
    aggregates per key (and window), which ``writeStream`` sends to any sink.

    ``stream`` is a streaming DataFrame. ``order_by`` names the columns that order the
    stream (unique, increasing with arrival: a sequence number, a Kafka
    ``(partition, offset)``). ``aggs`` are as :func:`keysplit.spark.aggregate`'s; an exact
    ``distinct`` keeps each key's value set in the state store, ``distinct="sketch"`` a
    HyperLogLog sketch. ``window`` names a column, or is a Column (``F.window("ts",
    "5 minutes")``, named ``window``), whose value groups the aggregates; each source's
    grouper ends a window where it changes. A time window over a column the stream
    watermarks (``withWatermark``) closes: append mode then writes each window once, after
    which its state is evicted, and rows of a closed window are dropped (counted as late).
    ``sources`` is the number of upstream sources, each routing on a state partition of its
    own with a grouper of its own, all with ``seed``: by default the session's
    ``spark.sql.shuffle.partitions``, which also fixes the state partitions of a new
    checkpoint. ``per_worker`` groups the aggregates by (window,) worker and key: what each
    worker holds.

    The query needs the RocksDB state store: this sets
    ``spark.sql.streaming.stateStore.providerClass`` on the session. Each batch's routing
    figures reach the query's progress as the observation ``"keysplit"``;
    :func:`stream_metrics` reads them.
    """
    spark_session = session_for(stream, session)
    if not getattr(stream, "isStreaming", False):
        raise ConfigError(
            "stream must be a streaming DataFrame (spark.readStream...); for a DataFrame read once "
            "use keysplit.spark.aggregate"
        )
    if not isinstance(per_worker, bool):
        raise ConfigTypeError(f"per_worker must be True or False, got {per_worker!r}")
    order = list(order_columns(order_by) or ())
    if not order:
        raise ConfigError("order_by names the columns that order the stream; give at least one")
    parsed = parse_aggs(aggs)
    routing = make_grouper(grouper, workers, seed)
    if window is not None and not isinstance(window, str):
        if "window" in stream.columns:
            raise ConfigError("the stream has a column 'window' already: give window as a column name")
        stream = stream.withColumn("window", window)
        window = "window"
    schema = stream.schema
    names = [field.name for field in schema.fields]
    require_key_type(schema, key)
    values = sorted({agg.column for agg in parsed if agg.column is not None} - {key})
    for column in [*order, *([window] if window is not None else []), *values]:
        if column not in names:
            raise ConfigError(f"column {column!r} is not in the stream; columns: {names}")
    for reserved in (WORKER_COLUMN, SOURCE_COLUMN, _LOADS, _STATE_BYTES, _LATE, _WINDOW_START, _WINDOW_END):
        if reserved in names:
            raise ConfigError(f"the stream may not have a column {reserved!r}: the routing adds it; rename it")
    conf = spark_session.spark.conf
    partitions = int(spark_session.call("reading the shuffle partitions", lambda: str(conf.get(_PARTITIONS_SETTING))))
    if sources is None:
        sources = min(partitions, 1024)
    if isinstance(sources, bool) or not isinstance(sources, int) or not 1 <= sources <= 1024:
        raise ConfigError(f"sources must be None or an int in [1, 1024], got {sources!r}")
    check_executors(spark_session)

    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, IntegerType, LongType, StructField, StructType

    time_window = window is not None and _time_window(schema[window])
    event_time = time_window and bool(watermark_columns(stream))
    carried: list[str] = []  # the window's columns as the routing sees them
    framed = stream
    if time_window:
        assert window is not None
        framed = framed.withColumns({_WINDOW_START: F.col(window).start, _WINDOW_END: F.col(window).end})
        carried = [_WINDOW_START, _WINDOW_END]
    elif window is not None:
        carried = [window]
    kept = list(dict.fromkeys([*carried, key, *values]))
    settings = json.dumps(
        {
            "key": key,
            "grouper": routing.name,
            "params": {k: v for k, v in sorted(routing.params.items())},
            "workers": routing.workers,
            "seed": routing.seed,
            "order_by": order,
            "sources": sources,
            "window": window,
            "nulls": nulls,
        },
        sort_keys=True,
    )
    processor = _route_processor(
        routing.snapshot(),
        settings,
        key,
        order,
        [*kept, WORKER_COLUMN],
        carried[0] if carried else None,
        _WINDOW_END if event_time else None,
        nulls,
        routing.workers,
        ARCHIVE_DIR,
    )
    field = {f.name: f for f in framed.schema.fields}
    routed_schema = StructType(
        [
            *[StructField(name, field[name].dataType) for name in kept],
            StructField(WORKER_COLUMN, IntegerType()),
            StructField(_LOADS, ArrayType(LongType())),
            StructField(_STATE_BYTES, LongType()),
            StructField(_LATE, LongType()),
        ]
    )
    source = source_column(order, sources, partitions)
    routed = (
        framed.select(*kept, *[c for c in order if c not in kept], source.alias(SOURCE_COLUMN))
        .groupBy(SOURCE_COLUMN)
        .transformWithStateInPandas(
            processor,
            outputStructType=routed_schema,
            outputMode="Append",
            timeMode="EventTime" if event_time else "None",
            eventTimeColumnName=_WINDOW_END if event_time else "",
        )
    )
    by_key = [*carried, *([WORKER_COLUMN] if per_worker else []), key]
    observed = routed.observe(OBSERVATION, *_observed_figures(routing.workers))
    grouped = observed.where(F.col(_LOADS).isNull() & F.col(_LATE).isNull()).groupBy(*by_key)
    columns = aggregate_columns(parsed, distinct, streaming=True, lg_k=DEFAULT_SKETCH_LG_K)
    if per_worker or routing.workers > MAX_REPLICATION_WORKERS:
        table = grouped.agg(*columns)
    else:
        # Each key's workers so far, as bits: the replication of the rows the batch emits.
        held = F.expr(f"bit_or(shiftleft(CAST(1 AS BIGINT), {WORKER_COLUMN}))").alias(_HELD_BY)
        table = grouped.agg(*columns, held).observe(
            REPLICATION_OBSERVATION, F.count(F.lit(1)).alias("keys"), F.sum(F.bit_count(_HELD_BY)).alias("partials")
        )
        table = table.drop(_HELD_BY)
    if time_window:
        assert window is not None
        table = table.select(
            F.struct(F.col(_WINDOW_START).alias("start"), F.col(_WINDOW_END).alias("end")).alias(window),
            *[c for c in table.columns if c not in (_WINDOW_START, _WINDOW_END)],
        )
    spark_session.call("setting the state store", lambda: conf.set(_PROVIDER_SETTING, STATE_STORE_PROVIDER))
    return table


def _observed_figures(workers: int) -> list[Any]:
    from pyspark.sql import functions as F

    loads = F.expr(
        f"aggregate(collect_list({_LOADS}), array_repeat(CAST(0 AS BIGINT), {workers}), "
        "(total, part) -> zip_with(total, part, (a, b) -> a + b))"
    )
    return [
        F.count(F.col(WORKER_COLUMN)).alias("rows"),
        (loads if workers <= MAX_OBSERVED_WORKERS else F.lit(None).cast("array<bigint>")).alias("loads"),
        F.sum(F.col(_STATE_BYTES)).alias("grouper_state_bytes"),
        F.sum(F.col(_LATE)).alias("late_rows"),
    ]


def _observed(row: Any) -> dict[str, Any]:
    """An observation's figures by name. Spark Connect's progress holds them as a row of
    ``values`` and a JSON ``schema``; a classic session's as a row of the figures."""
    if row is None:
        return {}
    figures = row.asDict()
    if set(figures) == {"values", "schema"}:
        schema = figures["schema"]
        names = [f["name"] for f in (json.loads(schema) if isinstance(schema, str) else schema)["fields"]]
        return dict(zip(names, figures["values"], strict=True))
    return figures


_METRICS_SCHEMA = pl.Schema(
    {
        "batch": pl.Int64(),
        "rows": pl.Int64(),
        "late_rows": pl.Int64(),
        "loads": pl.List(pl.Int64()),
        "load_imbalance": pl.Float64(),
        "keys": pl.Int64(),
        "partials": pl.Int64(),
        "replication_factor": pl.Float64(),
        "grouper_state_bytes": pl.Int64(),
        "state_rows": pl.Int64(),
        "state_rows_per_partition": pl.Float64(),
        "state_memory_bytes": pl.Int64(),
        "batch_seconds": pl.Float64(),
    }
)


def stream_metrics(progress: StreamingQuery | Iterable[Any]) -> pl.DataFrame:
    """One row per micro-batch of a :func:`stream_aggregate` query that routed rows, from
    its progress reports: a ``StreamingQuery`` (its ``recentProgress``) or the
    ``StreamingQueryProgress`` objects a ``StreamingQueryListener`` receives
    (``event.progress``). No Spark job runs for them.

    Columns: ``batch``; ``rows`` routed and ``late_rows`` dropped (their window had
    closed); ``loads`` per worker and λ (``load_imbalance``; left out above
    4,096 workers); ``keys``, the rows the batch emitted (its
    updated keys in update mode, the table in complete mode, the closed windows' keys in
    append mode), ``partials``, Γ, the workers that have held their keys (per window),
    summed, and γ = ``partials / keys`` (``replication_factor``; these three left out with
    ``per_worker`` or above 64 workers);
    ``grouper_state_bytes`` summed over the sources; the aggregation's ``state_rows``, per
    state partition, and the memory the state store reports for both stateful operators;
    ``batch_seconds``, the trigger's duration. A batch that neither routed nor emitted a
    row (an idle trigger) has no row."""
    reports = list(progress.recentProgress if hasattr(progress, "recentProgress") else progress)
    rows = []
    for report in reports:
        metrics = report.observedMetrics or {}
        observed = _observed(metrics.get(OBSERVATION))
        replication = _observed(metrics.get(REPLICATION_OBSERVATION))
        if not observed.get("rows") and not replication.get("keys"):
            continue
        aggregation = [o for o in report.stateOperators if o.operatorName == _AGGREGATION_OPERATOR]
        state = aggregation[0] if aggregation else None
        routed = int(observed.get("rows") or 0)
        loads = list(observed["loads"]) if observed.get("loads") is not None else None
        mean = routed / len(loads) if loads else 0
        keys = int(replication["keys"]) if "keys" in replication else None
        partials = int(replication["partials"] or 0) if "partials" in replication else None
        rows.append(
            {
                "batch": int(report.batchId),
                "rows": routed,
                "late_rows": int(observed.get("late_rows") or 0),
                "loads": loads,
                "load_imbalance": (max(loads) - mean) / mean if loads and mean else None,
                "keys": keys,
                "partials": partials,
                "replication_factor": partials / keys if keys and partials is not None else None,
                "grouper_state_bytes": int(observed.get("grouper_state_bytes") or 0),
                "state_rows": int(state.numRowsTotal) if state is not None else None,
                "state_rows_per_partition": (
                    state.numRowsTotal / state.numShufflePartitions
                    if state is not None and state.numShufflePartitions
                    else None
                ),
                "state_memory_bytes": int(sum(o.memoryUsedBytes for o in report.stateOperators)),
                "batch_seconds": report.durationMs.get("triggerExecution", 0) / 1000,
            }
        )
    return pl.DataFrame(rows, schema=_METRICS_SCHEMA).sort("batch")
