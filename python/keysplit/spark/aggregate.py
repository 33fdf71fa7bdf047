"""Two-phase aggregation on Spark of a stream routed by a keysplit grouper.

The client routes every batch with the Rust grouper and ships the routed rows to Spark in
bounded Arrow batches. ``repartitionById(n, "worker")`` puts worker ``w``'s substream on
partition ``w`` and nothing else there; Spark aggregates each partition per (worker, key)
into partial rows, one per key a worker saw (Γ of them in all), and the final phase merges
the partials per key. Count, sum, min and max merge as themselves, a mean as its sum and
its count, and a distinct count as a mergeable HyperLogLog sketch (Spark's
``hll_sketch_agg``/``hll_union_agg``) or, when asked, an exact set.

With windows the stream is cut into windows of arrival order (a count of tuples, or a
non-decreasing window column); each window is routed, shipped, aggregated and merged on
its own, and the grouper is told where each window ends. With a ``checkpoint`` directory
each finished window's result is written there, so a run that stops (the server killed,
say) resumes after its last finished window when re-run with the same arguments.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
import pyarrow as pa

from keysplit import metrics
from keysplit._grouper import Grouper, NullPolicy
from keysplit.spark.checkpoint import Checkpoint
from keysplit.spark.report import RunReport, WindowReport
from keysplit.spark.session import Session, SparkConnectError
from keysplit.spark.shipping import DEFAULT_BATCH_ROWS, Stream, frames, require_batch_rows, ship, to_arrow, union

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from pyspark.sql import SparkSession
    from pyspark.sql.connect.dataframe import DataFrame

Output = Literal["spark", "arrow", "polars"]
DistinctMode = Literal["sketch", "exact"]

#: The aggregate functions, each with how its partials merge.
FUNCTIONS = ("count", "sum", "min", "max", "mean", "distinct")
#: ``lgConfigK`` of the distinct-count sketches: 2^12 buckets, relative standard error
#: about 1.04 / 2^6 = 1.6 %.
DEFAULT_SKETCH_LG_K = 12
#: The column the window id is written to when windows are a count of tuples.
WINDOW_COLUMN = "window"

_SPEC = re.compile(r"^\s*(\w+)\s*(?:\(\s*([^()]*?)\s*\))?\s*$")


@dataclass(frozen=True)
class Agg:
    """One aggregate: ``function`` of ``column`` (``count`` of no column counts rows)."""

    function: str
    column: str | None = None

    @property
    def name(self) -> str:
        """The result column: ``count``, or ``<function>_<column>``."""
        return self.function if self.column is None else f"{self.function}_{self.column}"


def parse_aggs(aggs: Sequence[str | Agg]) -> list[Agg]:
    """Aggregates from specs such as ``"count"``, ``"sum(value)"`` or ``"distinct(user)"``."""
    if isinstance(aggs, str):
        aggs = [aggs]
    parsed: list[Agg] = []
    for spec in aggs:
        if isinstance(spec, Agg):
            agg = spec
        elif isinstance(spec, str) and (match := _SPEC.match(spec)):
            agg = Agg(match.group(1).lower(), match.group(2) or None)
        else:
            raise ValueError(f"an aggregate looks like 'count' or 'sum(value)', got {spec!r}")
        if agg.function not in FUNCTIONS:
            raise ValueError(f"unknown aggregate {agg.function!r}; known: {', '.join(FUNCTIONS)}")
        if agg.column is None and agg.function != "count":
            raise ValueError(f"aggregate {agg.function!r} needs a column, e.g. '{agg.function}(value)'")
        if agg.name in {a.name for a in parsed}:
            raise ValueError(f"aggregate {agg.name!r} is asked for twice")
        parsed.append(agg)
    if not parsed:
        raise ValueError("aggs is empty; ask for at least 'count'")
    return parsed


def _partials(agg: Agg, distinct: DistinctMode, lg_k: int) -> list[Any]:
    from pyspark.sql import functions as F

    p = f"__{agg.name}"
    column = agg.column
    if agg.function == "count":
        return [(F.count(F.lit(1)) if column is None else F.count(column)).alias(p)]
    if agg.function in ("sum", "min", "max"):
        return [getattr(F, agg.function)(column).alias(p)]
    if agg.function == "mean":
        return [F.sum(column).alias(f"{p}_sum"), F.count(column).alias(f"{p}_n")]
    if distinct == "exact":
        return [F.collect_set(column).alias(p)]
    return [F.hll_sketch_agg(column, lg_k).alias(p)]


def _merge(agg: Agg, distinct: DistinctMode, value_types: dict[str, Any]) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, DoubleType, FloatType

    p = f"__{agg.name}"
    if agg.function == "count":
        return F.sum(p).cast("long").alias(agg.name)
    if agg.function == "sum":
        return F.sum(p).alias(agg.name)
    if agg.function in ("min", "max"):
        return getattr(F, agg.function)(p).alias(agg.name)
    if agg.function == "mean":
        total, count = F.sum(f"{p}_sum"), F.sum(f"{p}_n")
        if isinstance(value_types[agg.column], DecimalType):
            mean = F.try_divide(total, count)
        else:
            # Spark's avg sums integers as doubles: the same double here, below 2^53.
            if not isinstance(value_types[agg.column], (DoubleType, FloatType)):
                total = total.cast("double")
            mean = F.when(count > 0, total / count)
        return mean.alias(agg.name)
    if distinct == "exact":
        return F.size(F.array_distinct(F.flatten(F.collect_list(p)))).cast("long").alias(agg.name)
    return F.hll_sketch_estimate(F.hll_union_agg(p)).alias(agg.name)


def reference(
    frame: DataFrame, *, key: str, aggs: Sequence[str | Agg], window: str | None = None, distinct: DistinctMode = "exact"
) -> DataFrame:
    """A plain Spark ``groupBy`` of the unrouted rows, with the columns :func:`aggregate` gives.

    Distinct counts are exact (``count_distinct``) unless ``distinct="sketch"``, which
    uses one HyperLogLog sketch per key.
    """
    from pyspark.sql import functions as F

    exprs = []
    for agg in parse_aggs(aggs):
        if agg.function == "count":
            expr = F.count(F.lit(1)) if agg.column is None else F.count(agg.column)
        elif agg.function == "mean":
            expr = F.avg(agg.column)
        elif agg.function == "distinct":
            expr = F.count_distinct(agg.column) if distinct == "exact" else F.approx_count_distinct(agg.column)
        else:
            expr = getattr(F, agg.function)(agg.column)
        exprs.append(expr.alias(agg.name))
    groups = [window, key] if window is not None else [key]
    return frame.groupBy(*groups).agg(*exprs)


def sketch_error(lg_k: int = DEFAULT_SKETCH_LG_K) -> float:
    """The relative error a sketched distinct count stays within, with 99.7 % confidence.

    Three relative standard errors of a HyperLogLog of ``2^lg_k`` buckets (1.04 / √2^lg_k).
    """
    return 3 * 1.04 / (2 ** (lg_k / 2))


def _windows(stream: Iterator[pl.DataFrame], window: int | str | None) -> Iterator[tuple[Any, pl.DataFrame]]:
    """(window id, slice) in arrival order; a window's slices are consecutive."""
    if window is None:
        for frame in stream:
            yield None, frame
    elif isinstance(window, int):
        offset = 0
        for frame in stream:
            while frame.height:
                index = offset // window
                take = min(frame.height, (index + 1) * window - offset)
                yield index, frame.slice(0, take).with_columns(pl.lit(index, pl.Int64).alias(WINDOW_COLUMN))
                frame = frame.slice(take)
                offset += take
    else:
        last: Any = None
        for frame in stream:
            if window not in frame.columns:
                raise ValueError(f"window column {window!r} is not in the stream; columns: {frame.columns}")
            ids = frame.get_column(window)
            if ids.null_count():
                raise ValueError(f"{ids.null_count()} rows have a null {window!r} window")
            start = 0
            for run in ids.rle().struct.unnest().iter_rows(named=True):
                value, length = run["value"], run["len"]
                if last is not None and value < last:
                    raise ValueError(
                        f"window {value!r} arrives after window {last!r}; windows must not decrease"
                    )
                last = value
                yield value, frame.slice(start, length)
                start += length


def _spark_type(column: pl.DataFrame) -> str:
    """The Spark type name of a one-column frame's column, as shipping converts it."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(to_arrow(column.head(0)).schema.field(0).type).simpleString()


def _require_window(window: object) -> int | str | None:
    if window is None or isinstance(window, str):
        return window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be None, a column name or a positive tuple count, got {window!r}")
    return window


def _as_session(session: Session | SparkSession | None) -> tuple[Session, bool]:
    from keysplit.spark.session import session as start_session

    if session is None:
        return start_session(), True
    if isinstance(session, Session):
        return session, False
    if type(session).__module__.startswith("pyspark.sql"):
        return Session(session, url="(given session)", server=None, query_timeout=900.0), False
    raise TypeError(f"session must be a keysplit.spark.Session or a SparkSession, got {type(session).__name__}")


class _Pipeline:
    """The per-window work of one run: routing, shipping, partial and final phases."""

    def __init__(
        self,
        session: Session,
        *,
        key: str,
        grouper: Grouper,
        aggs: list[Agg],
        window_column: str | None,
        distinct: DistinctMode,
        lg_k: int,
        nulls: NullPolicy,
        timeout: float | None,
    ) -> None:
        self.session = session
        self.key = key
        self.grouper = grouper
        self.aggs = aggs
        self.window_column = window_column
        self.distinct = distinct
        self.lg_k = lg_k
        self.nulls = nulls
        self.timeout = timeout
        self.window_type = "long"
        self.values = sorted({a.column for a in aggs if a.column is not None and a.column != key})

    def route(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, float]:
        missing = [c for c in (self.key, *self.values) if c not in frame.columns]
        if missing:
            raise ValueError(f"columns {missing} are not in the stream; columns: {frame.columns}")
        started = time.perf_counter()
        ids = self.grouper.route(frame.get_column(self.key), nulls=self.nulls)
        seconds = time.perf_counter() - started
        routed = frame.select(self.key, *self.values).with_columns(pl.Series("worker", ids).cast(pl.Int32))
        return routed, seconds

    def run(self, window_id: Any, shipped: list[DataFrame]) -> tuple[DataFrame, dict[str, Any]]:
        """The partial and final phases of one window; the final result stays on the server."""
        from pyspark.sql import functions as F

        n = self.grouper.workers
        rows = union(shipped)
        value_types = {f.name: f.dataType for f in rows.schema.fields}
        for agg in self.aggs:
            if agg.function == "distinct" and self.distinct == "sketch":
                kind = value_types[agg.column].typeName()
                if kind not in ("integer", "long", "string", "binary"):
                    raise ValueError(
                        f"a sketched distinct count takes int, bigint, string or binary columns; "
                        f"{agg.column!r} is {kind}: cast it, or pass distinct='exact'"
                    )
        partial_exprs = [F.count(F.lit(1)).alias("__rows")]
        for agg in self.aggs:
            partial_exprs += _partials(agg, self.distinct, self.lg_k)
        partials = (
            rows.repartitionById(n, "worker")
            .withColumn("__partition", F.spark_partition_id())
            .groupBy("__partition", "worker", self.key)
            .agg(*partial_exprs)
        )
        call = self.session.call
        started = time.perf_counter()
        partials = call("partial aggregation", lambda: partials.localCheckpoint(eager=True), timeout=self.timeout)
        partial_seconds = time.perf_counter() - started
        by_partition = call(
            "reading partition sizes",
            lambda: partials.groupBy("__partition")
            .agg(
                F.sum("__rows").alias("rows"),
                F.count(F.lit(1)).alias("partials"),
                F.sort_array(F.collect_set("worker")).alias("workers"),
            )
            .collect(),
            timeout=self.timeout,
        )
        merged = partials.groupBy(self.key).agg(*[_merge(a, self.distinct, value_types) for a in self.aggs])
        if self.window_column is not None:
            merged = merged.select(F.lit(window_id).cast(self.window_type).alias(self.window_column), "*")
        started = time.perf_counter()
        final = call("final merge", lambda: merged.localCheckpoint(eager=True), timeout=self.timeout)
        final_seconds = time.perf_counter() - started
        partition_rows = [0] * n
        partition_workers: list[list[int]] = [[] for _ in range(n)]
        spark_partials = 0
        for row in by_partition:
            partition_rows[row["__partition"]] = int(row["rows"])
            partition_workers[row["__partition"]] = list(row["workers"])
            spark_partials += int(row["partials"])
        observed = {
            "partition_rows": partition_rows,
            "partition_workers": partition_workers,
            "spark_partial_rows": spark_partials,
            "seconds": {"partial": partial_seconds, "final": final_seconds},
        }
        return final, observed


def aggregate_with_report(
    stream: Stream,
    *,
    key: str = "key",
    grouper: Grouper | str = "pdstream",
    aggs: Sequence[str | Agg] = ("count",),
    session: Session | SparkSession | None = None,
    window: int | str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    workers: int = 8,
    seed: int = 0,
    distinct: DistinctMode = "sketch",
    sketch_lg_k: int = DEFAULT_SKETCH_LG_K,
    nulls: NullPolicy = "group",
    output: Output = "spark",
    checkpoint: str | Path | None = None,
    timeout: float | None = None,
    on_window: Callable[[WindowReport], None] | None = None,
) -> tuple[Any, RunReport]:
    """:func:`aggregate`, and the :class:`RunReport` of what Spark saw next to the client."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a column name, got {type(key).__name__}")
    parsed = parse_aggs(aggs)
    window = _require_window(window)
    batch_rows = require_batch_rows(batch_rows)
    if distinct not in ("sketch", "exact"):
        raise ValueError(f"distinct must be 'sketch' or 'exact', got {distinct!r}")
    if output not in ("spark", "arrow", "polars"):
        raise ValueError(f"output must be 'spark', 'arrow' or 'polars', got {output!r}")
    if isinstance(grouper, str):
        grouper = Grouper(grouper, workers=workers, seed=seed)
    elif not isinstance(grouper, Grouper):
        raise TypeError(f"grouper must be a keysplit.Grouper or a grouper name, got {type(grouper).__name__}")
    window_column = WINDOW_COLUMN if isinstance(window, int) else window
    owned_session = session is None
    handle, _ = _as_session(session)
    started_run = time.perf_counter()
    store = (
        Checkpoint.open(
            checkpoint,
            fingerprint={
                "key": key,
                "grouper": grouper.name,
                "workers": grouper.workers,
                "seed": grouper.seed,
                "params": {k: v for k, v in sorted(grouper.params.items())},
                "aggs": [a.name for a in parsed],
                "window": window,
                "distinct": distinct,
                "sketch_lg_k": sketch_lg_k,
                "nulls": nulls,
            },
        )
        if checkpoint is not None
        else None
    )
    pipeline = _Pipeline(
        handle, key=key, grouper=grouper, aggs=parsed, window_column=window_column,
        distinct=distinct, lg_k=sketch_lg_k, nulls=nulls, timeout=timeout,
    )
    n = grouper.workers
    stream_metrics = metrics.StreamingMetrics(n, key=key, window=window_column)
    reports: list[WindowReport] = []
    finals: list[DataFrame] = []
    last_schema: pa.Schema | None = None
    try:
        current: Any = object()
        open_window: dict[str, Any] | None = None

        def close(state: dict[str, Any]) -> None:
            nonlocal last_schema
            window_id = state["window"]
            done = store.window(window_id) if store is not None else None
            window_metrics = state["metrics"].summary()
            gamma = int(window_metrics["aggregation_cost"][0]) if window_metrics.height else 0
            if done is not None:
                if done["rows"] != state["rows"] or done["client_loads"] != state["loads"]:
                    raise ValueError(
                        f"window {window_id!r} of the checkpoint in {store.directory} had "
                        f"{done['rows']} rows and loads {done['client_loads']}; this stream gives "
                        f"{state['rows']} and {state['loads']}: it is not the same run"
                    )
                report = WindowReport(
                    window=window_id, rows=state["rows"], client_loads=state["loads"],
                    partition_rows=done["partition_rows"], partition_workers=done["partition_workers"],
                    client_partial_rows=gamma, spark_partial_rows=done["spark_partial_rows"],
                    seconds={"routing": state["routing"], **done["seconds"]}, resumed=True,
                )
            else:
                final, observed = pipeline.run(window_id, state["shipped"])
                report = WindowReport(
                    window=window_id, rows=state["rows"], client_loads=state["loads"],
                    partition_rows=observed["partition_rows"],
                    partition_workers=observed["partition_workers"],
                    client_partial_rows=gamma, spark_partial_rows=observed["spark_partial_rows"],
                    seconds={"routing": state["routing"], "shipping": state["shipping"], **observed["seconds"]},
                )
                report_problems = report.disagreements()
                if report_problems:
                    from keysplit.spark.report import ObservationMismatch

                    raise ObservationMismatch("; ".join(report_problems[:5]))
                if store is not None:
                    table = handle.call("fetching a window's result", final.toArrow, timeout=timeout)
                    last_schema = table.schema
                    store.commit(window_id, table, report)
                else:
                    finals.append(final)
            reports.append(report)
            if window_column is not None:
                grouper.end_window()
            if on_window is not None:
                on_window(report)

        def open_(window_id: Any) -> dict[str, Any]:
            return {
                "window": window_id, "rows": 0, "loads": [0] * n, "shipped": [], "routing": 0.0,
                "shipping": 0.0, "metrics": metrics.StreamingMetrics(n, key=key),
            }

        empty_schema: pl.Schema | None = None
        for window_id, frame in _windows(frames(stream, batch_rows), window):
            if empty_schema is None:
                empty_schema = frame.schema
                if isinstance(window, str):
                    pipeline.window_type = _spark_type(frame.select(window))
            if open_window is None or window_id != current:
                if open_window is not None:
                    close(open_window)
                open_window = open_(window_id)
                current = window_id
            routed, seconds = pipeline.route(frame)
            open_window["routing"] += seconds
            open_window["rows"] += routed.height
            for worker, count in metrics.worker_loads(routed, workers=n).to_frame().with_row_index().iter_rows():
                open_window["loads"][worker] += count
            open_window["metrics"].update(routed)
            stream_metrics.update(
                routed if window_column is None else routed.with_columns(pl.lit(window_id).alias(window_column))
            )
            if store is None or store.window(window_id) is None:
                started = time.perf_counter()
                open_window["shipped"].append(ship(handle, to_arrow(routed)))
                open_window["shipping"] += time.perf_counter() - started
        if open_window is not None:
            close(open_window)
        else:
            raise ValueError("the stream is empty")
        result = _result(handle, finals, store, output, key, window_column, timeout)
    except SparkConnectError as error:
        if store is not None:
            raise SparkConnectError(
                f"{error}\n{len(store.windows)} finished windows are checkpointed in {store.directory}; "
                "re-run with the same arguments to resume after them"
            ) from None
        raise
    finally:
        if owned_session:
            handle.close()
    report = RunReport(
        grouper=grouper.name, workers=n, windows=reports, summary=stream_metrics.summary(),
        wall_seconds=time.perf_counter() - started_run,
    )
    return result, report


def _result(
    session: Session,
    finals: list[DataFrame],
    store: Checkpoint | None,
    output: Output,
    key: str,
    window_column: str | None,
    timeout: float | None,
) -> Any:
    order = [c for c in (window_column, key) if c is not None]
    if store is not None:
        table = store.result()
        if output == "spark":
            if table.num_rows == 0:
                return session.call("empty result", lambda: session.spark.createDataFrame(table))
            return union([ship(session, part) for part in _slices(table)])
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        frame = frame.sort(order, nulls_last=False)
        return frame if output == "polars" else frame.to_arrow()
    combined = union(finals)
    if output == "spark":
        return combined
    table = session.call("fetching the result", combined.toArrow, timeout=timeout)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.sort(order, nulls_last=False)
    return frame if output == "polars" else frame.to_arrow()


def _slices(table: pa.Table, rows: int = DEFAULT_BATCH_ROWS) -> list[pa.Table]:
    return [table.slice(start, rows) for start in range(0, max(table.num_rows, 1), rows)]


def aggregate(stream: Stream, **options: Any) -> Any:
    """Aggregates ``stream`` per key on Spark, routed by a keysplit grouper; two phases.

    Parameters (all keyword)
    ------------------------
    key
        The key column (default ``"key"``).
    grouper
        A :class:`keysplit.Grouper` (stateful: it goes on from where it is) or a grouper
        name, made with ``workers`` and ``seed`` (default ``"pdstream"``, 8 workers, seed 0).
    aggs
        Specs such as ``"count"`` (rows per key), ``"count(v)"`` (non-null ``v``),
        ``"sum(v)"``, ``"min(v)"``, ``"max(v)"``, ``"mean(v)"`` and ``"distinct(v)"``; the
        result column is ``count`` or ``<function>_<v>``. Nulls in ``v`` are skipped, as in
        SQL; a key whose ``v`` are all null has a null sum, min, max and mean.
    session
        A :class:`keysplit.spark.Session` or a PySpark ``SparkSession``; None starts an
        embedded server for this call and stops it after.
    window
        None (the whole stream is one window), a positive count of tuples (windows of
        arrival order, numbered from 0 in column ``window``), or a column of non-decreasing
        window ids. Results are per (window, key); the grouper's ``end_window`` is called
        between windows.
    batch_rows
        Rows per routed and shipped Arrow batch (default 65,536).
    distinct, sketch_lg_k
        ``"sketch"`` (default): HyperLogLog sketches of ``2^sketch_lg_k`` buckets, within
        :func:`sketch_error` of the exact count; ``"exact"``: sets, merged exactly.
    nulls
        How null keys route (see :meth:`keysplit.Grouper.route`); ``"group"`` by default,
        so that null keys are one group, as in ``GROUP BY``.
    output
        ``"spark"`` (a Spark DataFrame), ``"arrow"`` or ``"polars"`` (sorted by window and key).
    checkpoint
        A local directory: each finished window's result is written there, and a re-run
        with the same arguments resumes after the last finished window.
    timeout
        Seconds each Spark query may run (the session's default when None).
    on_window
        Called with each window's :class:`WindowReport` once the window is finished.

    Equals a plain Spark ``groupBy`` of the unrouted rows (:func:`reference`) exactly, for
    every grouper; sums and means of floating-point columns up to the rounding of a
    different summation order, and sketched distinct counts within :func:`sketch_error`.
    Raises :class:`ObservationMismatch` if Spark's partitions ever disagree with the routing.
    """
    result, _ = aggregate_with_report(stream, **options)
    return result

