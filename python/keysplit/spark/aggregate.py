"""Two-phase aggregation on Spark of a stream routed by a keysplit grouper.

The rows come routed from :mod:`.pipeline` (a Spark DataFrame routed on the executors, or
a client stream routed here and ingested). The partial phase is Spark's own aggregation
per (source, worker, key), combined map-side, so that only partial rows cross the
shuffle: one per key a worker saw from a source. The final phase merges the partials per
key. Count, sum, min and max merge as themselves, a mean as its sum and its count, and a
distinct count as a mergeable HyperLogLog sketch (Spark's ``hll_sketch_agg`` /
``hll_union_agg``) or, when asked, an exact set. The merge also counts each key's
distinct workers, so Γ, γ and the loads per worker and per source all come from Spark.

For combinable aggregates like these, Spark's own ``groupBy`` already combines map-side
and a hot key does not make it slow: use this to see and compare the groupers' routing on
Spark, and ``groupBy`` for speed (``docs/spark.md`` has the measurements). Splitting wins
where Spark cannot combine: grouped maps.

With windows a client stream is cut into windows of arrival order (a count of tuples, or
a non-decreasing window column); each window is routed, ingested, aggregated and merged on
its own, and the grouper is told where each window ends. A Spark DataFrame takes a window
column, non-decreasing along each partition. With a ``checkpoint`` directory each finished
window's result of a client stream is written there, so a run that stops (the server
killed, say) resumes after its last finished window when re-run with the same arguments.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from keysplit._errors import ConfigError
from keysplit._grouper import DEFAULT_GROUPER, Grouper, NullPolicy
from keysplit.spark.checkpoint import Checkpoint
from keysplit.spark.columns import quoted
from keysplit.spark.ingest import (
    DEFAULT_BATCH_ROWS,
    IngestChoice,
    IngestOptions,
    IngestPath,
    Stream,
    balanced_union,
    to_arrow,
    to_spark,
)
from keysplit.spark.intake import Intake, is_spark_frame
from keysplit.spark.lifetime import unpersist_with
from keysplit.spark.options import make_grouper, order_columns, require_key, require_window
from keysplit.spark.report import ObservationMismatch, Report, RunReport, WindowReport
from keysplit.spark.routed_windows import WINDOW_COLUMN, ClientStream, RoutedWindow, SparkFrame, routed_input
from keysplit.spark.routing import SOURCE_COLUMN, WORKER_COLUMN
from keysplit.spark.session import Session, SparkConnectError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from pyspark.sql import DataFrame, Row, SparkSession

    from keysplit._progress import PhaseProgress

Output = Literal["spark", "arrow", "polars"]
DistinctMode = Literal["sketch", "exact"]

#: The aggregate functions, each with how its partials merge.
FUNCTIONS = ("count", "sum", "min", "max", "mean", "distinct")
#: ``lgConfigK`` of the distinct-count sketches: 2^12 buckets, relative standard error
#: about 1.04 / 2^6 = 1.6 %.
DEFAULT_SKETCH_LG_K = 12

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
            raise ConfigError(f"an aggregate looks like 'count' or 'sum(value)', got {spec!r}")
        if agg.function not in FUNCTIONS:
            raise ConfigError(f"unknown aggregate {agg.function!r}; known: {', '.join(FUNCTIONS)}")
        if agg.column is None and agg.function != "count":
            raise ConfigError(f"aggregate {agg.function!r} needs a column, e.g. '{agg.function}(value)'")
        if agg.name in {a.name for a in parsed}:
            raise ConfigError(f"aggregate {agg.name!r} is asked for twice")
        parsed.append(agg)
    if not parsed:
        raise ConfigError("aggs is empty; ask for at least 'count'")
    return parsed


def partial_sql(agg: Agg, distinct: DistinctMode, lg_k: int) -> list[str]:
    """``agg``'s partial aggregates as Spark SQL, each named ``__<name>`` (``mean`` has a
    sum and a count)."""
    p = f"__{agg.name}"
    if agg.function == "count":
        return [f"count({1 if agg.column is None else quoted(agg.column)}) AS {quoted(p)}"]
    assert agg.column is not None  # parse_aggs: every aggregate but count names a column
    column = quoted(agg.column)
    if agg.function in ("sum", "min", "max"):
        return [f"{agg.function}({column}) AS {quoted(p)}"]
    if agg.function == "mean":
        return [f"sum({column}) AS {quoted(p + '_sum')}", f"count({column}) AS {quoted(p + '_n')}"]
    if distinct == "exact":
        return [f"collect_set({column}) AS {quoted(p)}"]
    return [f"hll_sketch_agg({column}, {lg_k}) AS {quoted(p)}"]


def merge_sql(agg: Agg, distinct: DistinctMode, value_type: Any) -> str:
    """The final value of ``agg`` from its partials, as Spark SQL: what a ``groupBy`` of the
    unrouted rows gives, type included. ``value_type`` is the aggregated column's."""
    from pyspark.sql.types import DecimalType, DoubleType, FloatType

    p = quoted(f"__{agg.name}")
    name = quoted(agg.name)
    if agg.function == "count":
        return f"CAST(sum({p}) AS BIGINT) AS {name}"
    if agg.function in ("sum", "min", "max"):
        return f"{agg.function}({p}) AS {name}"
    if agg.function == "mean":
        total, count = f"sum({quoted(f'__{agg.name}_sum')})", f"sum({quoted(f'__{agg.name}_n')})"
        if isinstance(value_type, DecimalType):
            return f"try_divide({total}, {count}) AS {name}"
        if not isinstance(value_type, (DoubleType, FloatType)):
            # Spark's avg sums integers as doubles: the same double here, below 2^53.
            total = f"CAST({total} AS DOUBLE)"
        return f"CASE WHEN {count} > 0 THEN {total} / {count} END AS {name}"
    if distinct == "exact":
        return f"CAST(size(array_distinct(flatten(collect_list({p})))) AS BIGINT) AS {name}"
    return f"hll_sketch_estimate(hll_union_agg({p})) AS {name}"


def _partials(agg: Agg, distinct: DistinctMode, lg_k: int) -> list[Any]:
    from pyspark.sql import functions as F

    return [F.expr(sql) for sql in partial_sql(agg, distinct, lg_k)]


def _merge(agg: Agg, distinct: DistinctMode, value_types: dict[str, Any]) -> Any:
    from pyspark.sql import functions as F

    return F.expr(merge_sql(agg, distinct, None if agg.column is None else value_types[agg.column]))


def aggregate_columns(
    aggs: Sequence[str | Agg],
    distinct: DistinctMode = "exact",
    *,
    streaming: bool = False,
    lg_k: int = DEFAULT_SKETCH_LG_K,
) -> list[Any]:
    """Spark's own aggregate Columns for ``aggs`` over unrouted rows, each named as
    :attr:`Agg.name`. Distinct counts are exact unless ``distinct="sketch"``; a streaming
    aggregation cannot count distinct values, so there (``streaming``) an exact one is the
    size of the value set and a sketch is DataSketches' HyperLogLog (``lg_k``) instead of
    ``approx_count_distinct``."""
    from pyspark.sql import functions as F

    exprs = []
    for agg in parse_aggs(aggs):
        if agg.function == "count":
            expr = F.count(F.lit(1)) if agg.column is None else F.count(agg.column)
            exprs.append(expr.alias(agg.name))
            continue
        assert agg.column is not None  # parse_aggs: every aggregate but count names a column
        if agg.function == "mean":
            expr = F.avg(agg.column)
        elif agg.function == "distinct" and streaming:
            expr = (
                F.size(F.collect_set(agg.column)).cast("bigint")
                if distinct == "exact"
                else F.hll_sketch_estimate(F.hll_sketch_agg(agg.column, lg_k))
            )
        elif agg.function == "distinct":
            expr = F.count_distinct(agg.column) if distinct == "exact" else F.approx_count_distinct(agg.column)
        else:
            expr = getattr(F, agg.function)(agg.column)
        exprs.append(expr.alias(agg.name))
    return exprs


def reference(
    frame: DataFrame,
    *,
    key: str,
    aggs: Sequence[str | Agg],
    window: str | None = None,
    distinct: DistinctMode = "exact",
) -> DataFrame:
    """A plain Spark ``groupBy`` of the unrouted rows, with the columns :func:`aggregate` gives.

    Distinct counts are exact (``count_distinct``) unless ``distinct="sketch"``, which
    uses one HyperLogLog sketch per key.
    """
    exprs = aggregate_columns(aggs, distinct)
    groups = [window, key] if window is not None else [key]
    return frame.groupBy(*groups).agg(*exprs)


def sketch_error(lg_k: int = DEFAULT_SKETCH_LG_K) -> float:
    """The relative error a sketched distinct count stays within, with 99.7 % confidence.

    Three relative standard errors of a HyperLogLog of ``2^lg_k`` buckets (1.04 / √2^lg_k).
    """
    return 3 * 1.04 / (2 ** (lg_k / 2))


def _spark_type(column: pl.DataFrame) -> str:
    """The Spark type name of a one-column frame's column, as ingestion converts it."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(to_arrow(column.head(0)).schema.field(0).type).simpleString()


class _Plan:
    """The partial and final phases of one routed window, and Spark's figures of it."""

    def __init__(
        self,
        session: Session,
        *,
        key: str,
        workers: int,
        aggs: list[Agg],
        window_column: str | None,
        window_in_rows: bool,
        distinct: DistinctMode,
        lg_k: int,
        timeout: float | None,
    ) -> None:
        self.session = session
        self.key = key
        self.workers = workers
        self.aggs = aggs
        self.window_column = window_column
        self.window_in_rows = window_in_rows
        self.window_type = "long"
        self.distinct = distinct
        self.lg_k = lg_k
        self.timeout = timeout

    def _check_types(self, value_types: dict[str, Any]) -> None:
        for agg in self.aggs:
            if agg.function == "distinct" and self.distinct == "sketch":
                assert agg.column is not None  # parse_aggs: every aggregate but count names a column
                kind = value_types[agg.column].typeName()
                if kind not in ("integer", "long", "string", "binary"):
                    raise ConfigError(
                        f"a sketched distinct count takes int, bigint, string or binary columns; "
                        f"{agg.column!r} is {kind}: cast it, or pass distinct='exact'"
                    )

    def run(self, routed: RoutedWindow, *, fetch: bool) -> tuple[DataFrame | pa.Table, list[WindowReport]]:
        """The window's result and reports: held on the server, or fetched when ``fetch``
        (one query fewer: the keys and Γ are then counted here, from the fetched rows)."""
        from pyspark.sql import functions as F

        assert routed.rows is not None
        rows = routed.rows
        call = self.session.call
        schema = call("reading the schema", lambda: rows.schema, timeout=self.timeout)
        value_types = {f.name: f.dataType for f in schema.fields}
        self._check_types(value_types)
        by_window = [self.window_column] if self.window_in_rows and self.window_column else []
        partial_exprs = [F.count(F.lit(1)).alias("__rows")]
        for agg in self.aggs:
            partial_exprs += _partials(agg, self.distinct, self.lg_k)
        plan = rows.groupBy(*by_window, SOURCE_COLUMN, WORKER_COLUMN, self.key).agg(*partial_exprs)
        started = time.perf_counter()
        # Cached, not checkpointed: the loads query fills the cache, the merge reads it, and a
        # block lost with an executor is recomputed from its lineage.
        partials = call("partial aggregation", plan.persist, timeout=self.timeout)
        loads = call(
            "reading the loads",
            lambda: (
                partials.groupBy(*by_window, SOURCE_COLUMN, WORKER_COLUMN).agg(F.sum("__rows").alias("rows")).collect()
            ),
            timeout=self.timeout,
        )
        partial_seconds = time.perf_counter() - started
        merged = partials.groupBy(*by_window, self.key).agg(
            *[_merge(a, self.distinct, value_types) for a in self.aggs],
            F.count_distinct(WORKER_COLUMN).alias("__workers"),
        )
        if self.window_column is not None and not self.window_in_rows:
            merged = merged.select(F.lit(routed.window).cast(self.window_type).alias(self.window_column), "*")
        started = time.perf_counter()
        result: DataFrame | pa.Table
        counts: list[dict[str, Any]] | list[Row]
        if fetch:
            table = call("final merge", merged.toArrow, timeout=self.timeout)
            if by_window:
                grouped = table.group_by(by_window).aggregate([("__workers", "count"), ("__workers", "sum")])
                counts = [
                    {**{c: row[c] for c in by_window}, "keys": row["__workers_count"], "gamma": row["__workers_sum"]}
                    for row in grouped.to_pylist()
                ]
            else:
                counts = [{"keys": table.num_rows, "gamma": pc.sum(table.column("__workers")).as_py()}]
            result = table.drop_columns(["__workers"])
        else:
            held = call("final merge", merged.persist, timeout=self.timeout)
            counts = call(
                "reading Γ",
                lambda: (
                    held.groupBy(*by_window)
                    .agg(F.count(F.lit(1)).alias("keys"), F.sum("__workers").alias("gamma"))
                    .collect()
                ),
                timeout=self.timeout,
            )
            result = held.drop("__workers")
            unpersist_with(result, held)
        call("releasing the partials", partials.unpersist, timeout=self.timeout)
        final_seconds = time.perf_counter() - started
        seconds = {**routed.seconds, "partial": partial_seconds, "final": final_seconds}
        return result, self._reports(routed, loads, counts, seconds)

    def _reports(
        self, routed: RoutedWindow, loads: list[Any], counts: list[Any], seconds: dict[str, float]
    ) -> list[WindowReport]:
        sources = 1 + max((row[SOURCE_COLUMN] for row in loads), default=0)
        windowed = self.window_in_rows and self.window_column is not None
        ids = sorted({row[self.window_column] for row in counts}, key=_nulls_first) if windowed else [routed.window]
        reports = []
        for window_id in ids:
            source_loads = [[0] * self.workers for _ in range(sources)]
            for row in loads:
                if not windowed or row[self.window_column] == window_id:
                    source_loads[row[SOURCE_COLUMN]][row[WORKER_COLUMN]] += int(row["rows"])
            (count,) = [row for row in counts if not windowed or row[self.window_column] == window_id] or [None]
            spark_loads = [sum(column) for column in zip(*source_loads, strict=True)]
            reports.append(
                WindowReport(
                    window=window_id,
                    rows=routed.row_count if routed.row_count is not None else sum(spark_loads),
                    spark_loads=spark_loads,
                    source_loads=source_loads,
                    spark_partial_rows=int(count["gamma"] or 0) if count else 0,
                    keys=int(count["keys"]) if count else 0,
                    client_loads=routed.client_loads,
                    client_partial_rows=routed.client_partial_rows,
                    # A DataFrame's windows share one run: its times go to the first.
                    seconds=seconds if window_id == ids[0] else {},
                )
            )
        return reports


def _nulls_first(value: Any) -> tuple[bool, Any]:
    return (value is not None, value)


def _resumed(done: dict[str, Any], routed: RoutedWindow, store: Checkpoint) -> WindowReport:
    """The report of a window a checkpoint holds, once the stream is checked to be the same."""
    if done["rows"] != routed.row_count or done["client_loads"] != routed.client_loads:
        raise ConfigError(
            f"window {routed.window!r} of the checkpoint in {store.directory} had "
            f"{done['rows']} rows and loads {done['client_loads']}; this stream gives "
            f"{routed.row_count} and {routed.client_loads}: it is not the same run"
        )
    recorded = {k: v for k, v in done.items() if k in WindowReport.__dataclass_fields__}
    return WindowReport(
        **{**recorded, "window": routed.window, "seconds": {**done["seconds"], **routed.seconds}, "resumed": True}
    )


def aggregate(
    stream: Stream | DataFrame,
    *,
    key: str = "key",
    grouper: Grouper | str = DEFAULT_GROUPER,
    aggs: Sequence[str | Agg] = ("count",),
    workers: int = 8,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    window: int | str | None = None,
    order_by: Sequence[str] | str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    ingest: IngestChoice | IngestOptions = "auto",
    staging_dir: str | Path | None = None,
    upload_dir: str | None = None,
    distinct: DistinctMode = "sketch",
    sketch_lg_k: int = DEFAULT_SKETCH_LG_K,
    nulls: NullPolicy = "group",
    output: Output = "spark",
    checkpoint: str | Path | None = None,
    timeout: float | None = None,
    on_window: Callable[[WindowReport], None] | None = None,
    progress: bool | None = None,
    report: Report[RunReport] | None = None,
) -> Any:
    """Aggregates ``stream`` per key on Spark, routed by a keysplit grouper; two phases.

    Parameters (all but ``stream`` keyword-only)
    --------------------------------------------
    stream
        A Spark DataFrame (routed on the executors, each partition a source with its own
        grouper, all with the same seed), or a client stream: a Polars DataFrame or
        LazyFrame, an Arrow table or batch, or an iterable of them (routed here, in order,
        by one grouper, then ingested).
    key
        The key column (default ``"key"``): integers, strings or binary.
    grouper, workers, seed
        A :class:`keysplit.Grouper` (stateful: a client stream goes on from where it is;
        each executor source starts from its state) or a grouper name, made with
        ``workers`` and ``seed`` (default ``"elastic"``, 8 workers, seed 0).
    aggs
        Specs such as ``"count"`` (rows per key), ``"count(v)"`` (non-null ``v``),
        ``"sum(v)"``, ``"min(v)"``, ``"max(v)"``, ``"mean(v)"`` and ``"distinct(v)"``; the
        result column is ``count`` or ``<function>_<v>``. Nulls in ``v`` are skipped, as in
        SQL; a key whose ``v`` are all null has a null sum, min, max and mean.
    session
        A Spark DataFrame's own unless given;
        a client stream needs one (``keysplit.spark.session()``).
    window
        None (the whole stream is one window), a positive count of tuples (client streams:
        windows of arrival order, numbered from 0 in column ``window``), or a column of
        window ids, non-decreasing in arrival order (along each partition of a DataFrame).
        Results are per (window, key); the grouper's ``end_window`` is called between windows.
    order_by
        Spark DataFrames only: columns, unique within a partition, to sort each partition
        by before routing. Needed when the DataFrame comes out of a shuffle, whose order
        changes from run to run; a file scan or a checkpoint keeps its order without it.
    ingest, batch_rows, staging_dir, upload_dir
        How a client stream's rows reach Spark, as a :class:`keysplit.spark.IngestOptions`
        or its fields: ``"files"`` (Parquet in ``staging_dir``, which the executors read),
        ``"upload"`` (Parquet copied to ``upload_dir`` on the server's filesystem),
        ``"arrow"`` (inside the plan; slow) or ``"auto"`` (default: the fastest that works,
        as the Spark guide's client streams say); ``batch_rows`` rows per routed batch (65,536).
    distinct, sketch_lg_k
        ``"sketch"`` (default): HyperLogLog sketches of ``2^sketch_lg_k`` buckets, within
        :func:`sketch_error` of the exact count; ``"exact"``: sets, merged exactly.
    nulls
        How null keys route (see :meth:`keysplit.Grouper.route`); ``"group"`` by default,
        so that null keys are one group, as in ``GROUP BY``.
    output
        ``"spark"`` (a Spark DataFrame), ``"arrow"`` or ``"polars"`` (sorted by window and key).
    checkpoint
        Client streams: a local directory where each finished window's result is written;
        a re-run with the same arguments resumes after the last finished window.
    timeout
        Seconds each Spark query may run (the session's default when None).
    on_window
        Called with each window's :class:`WindowReport` once the window is finished.
    progress
        A line on stderr naming the Spark action running and the windows done; None
        (default) shows it when stderr is a terminal and rich is installed.
    report
        A :class:`keysplit.spark.Report`, filled with the :class:`RunReport` of the figures
        Spark computed before this returns.

    Runs now: the partial phase (and, unless ``output="spark"``, the merge) run before it
    returns, window by window. Equals a plain Spark ``groupBy`` of the unrouted rows
    (:func:`reference`) exactly, for every grouper; sums and means of floating-point
    columns up to the rounding of a different summation order, and sketched distinct counts
    within :func:`sketch_error`. For speed alone, Spark's own ``groupBy`` is the right tool
    for these combinable aggregates (``docs/spark.md``). Raises :class:`ObservationMismatch`
    if Spark's figures ever disagree with the routing, and
    :class:`keysplit.spark.ExecutorSetupError` if the executors cannot import keysplit.
    """
    key = require_key(key)
    parsed = parse_aggs(aggs)
    window = require_window(window)
    options = IngestOptions.of(ingest, batch_rows=batch_rows, staging_dir=staging_dir, upload_dir=upload_dir)
    if distinct not in ("sketch", "exact"):
        raise ConfigError(f"distinct must be 'sketch' or 'exact', got {distinct!r}")
    if output not in ("spark", "arrow", "polars"):
        raise ConfigError(f"output must be 'spark', 'arrow' or 'polars', got {output!r}")
    routing = make_grouper(grouper, workers, seed)
    spark_input = is_spark_frame(stream)
    if spark_input and checkpoint is not None:
        raise ConfigError(
            "checkpoint resumes client streams window by window; a Spark DataFrame is one "
            "Spark job: write its result yourself, or pass a client stream"
        )
    values = sorted({a.column for a in parsed if a.column is not None and a.column != key})
    window_column = WINDOW_COLUMN if isinstance(window, int) else window
    started_run = time.perf_counter()
    title = f"aggregate ({routing.name}, {routing.workers} workers)"
    store: Checkpoint | None = None
    with Intake(title, stream, session=session, progress=progress) as intake:
        handle = intake.session
        if checkpoint is not None:
            store = Checkpoint.open(
                checkpoint, fingerprint=_fingerprint(key, routing, parsed, window, distinct, sketch_lg_k, nulls)
            )
        source = routed_input(
            handle,
            stream,
            key=key,
            grouper=routing,
            columns=values,
            window=window,
            nulls=nulls,
            order_by=order_columns(order_by),
            ingest=options,
            done=(lambda w: store.window(w) is not None) if store is not None else None,
        )
        plan = _Plan(
            handle,
            key=key,
            workers=routing.workers,
            aggs=parsed,
            window_column=window_column,
            window_in_rows=spark_input,
            distinct=distinct,
            lg_k=sketch_lg_k,
            timeout=timeout,
        )
        try:
            reports, finals = _run_windows(
                plan,
                source,
                store,
                fetch=output != "spark" or store is not None,
                shown=intake.shown,
                on_window=on_window,
                window=window,
            )
            result = _result(handle, finals, store, output, key, window_column, source.ingestion)
        except SparkConnectError as error:
            if store is not None:
                raise SparkConnectError(
                    f"{error}\n{len(store.windows)} finished windows are checkpointed in {store.directory}; "
                    "re-run with the same arguments to resume after them"
                ) from None
            raise
    if report is not None:
        report.fill(
            RunReport(
                grouper=routing.name,
                workers=routing.workers,
                windows=reports,
                routed_on=source.routed_on,
                ingestion=source.ingestion,
                summary=source.summary(),
                wall_seconds=time.perf_counter() - started_run,
            )
        )
    return result


def _run_windows(
    plan: _Plan,
    source: ClientStream | SparkFrame,
    store: Checkpoint | None,
    *,
    fetch: bool,
    shown: PhaseProgress,
    on_window: Callable[[WindowReport], None] | None,
    window: int | str | None,
) -> tuple[list[WindowReport], list[Any]]:
    """Every window of ``source`` aggregated (or resumed from ``store``): the reports and
    the results not checkpointed. Results the client keeps (``fetch``) are fetched, not held."""
    reports: list[WindowReport] = []
    finals: list[Any] = []
    for routed in source.windows():
        if isinstance(source, ClientStream) and isinstance(window, str) and not reports and not finals:
            assert source.first_frame is not None
            plan.window_type = _spark_type(source.first_frame.select(window))
        done = store.window(routed.window) if store is not None else None
        if done is not None:
            assert store is not None
            window_reports = [_resumed(done, routed, store)]
        else:
            final, window_reports = plan.run(routed, fetch=fetch)
            problems = [p for r in window_reports for p in r.disagreements()]
            if problems:
                raise ObservationMismatch("; ".join(problems[:5]))
            if store is not None:
                assert isinstance(final, pa.Table)
                store.commit(routed.window, final, window_reports[0])
            else:
                finals.append(final)
        reports.extend(window_reports)
        shown.window_done(sum(r.rows for r in window_reports))
        if on_window is not None:
            for window_report in window_reports:
                on_window(window_report)
    return reports, finals


def _fingerprint(
    key: str, grouper: Grouper, aggs: list[Agg], window: int | str | None, distinct: str, lg_k: int, nulls: str
) -> dict[str, Any]:
    return {
        "key": key,
        "grouper": grouper.name,
        "workers": grouper.workers,
        "seed": grouper.seed,
        "params": {k: v for k, v in sorted(grouper.params.items())},
        "aggs": [a.name for a in aggs],
        "window": window,
        "distinct": distinct,
        "sketch_lg_k": lg_k,
        "nulls": nulls,
    }


def _result(
    session: Session,
    finals: list[Any],
    store: Checkpoint | None,
    output: Output,
    key: str,
    window_column: str | None,
    path: IngestPath | Literal["none"],
) -> Any:
    order = [c for c in (window_column, key) if c is not None]
    if store is not None:
        table = store.result()
        if output == "spark":
            return to_spark(session, table, path if path != "none" else "arrow")
        frame = pl.from_arrow(table)
    elif output == "spark":
        return balanced_union(finals)
    else:
        frame = pl.from_arrow(pa.concat_tables(finals, promote_options="permissive"))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.sort(order, nulls_last=False)
    return frame if output == "polars" else frame.to_arrow()


def aggregate_with_report(stream: Stream | DataFrame, **arguments: Any) -> tuple[Any, RunReport]:
    """Deprecated: ``aggregate(..., report=keysplit.spark.Report())``, then ``report.get``."""
    warnings.warn(
        "aggregate_with_report is deprecated: pass report=keysplit.spark.Report() to aggregate and read report.get",
        DeprecationWarning,
        stacklevel=2,
    )
    report: Report[RunReport] = Report()
    result = aggregate(stream, **arguments, report=report)
    return result, report.get
