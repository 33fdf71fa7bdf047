"""Grouped maps with the hot keys split: ``apply_grouped``, ``applyInPandas`` without the straggler.

``df.groupBy(key).applyInPandas(f)`` sends each key's whole group to one task and one
Python call, so a hot key makes one task the straggler and one call hold most of the rows.
Spark cannot split it (adaptive execution splits skewed partitions of joins only). Here:

1. **Route.** Each row gets a worker on the executors. With the default plan, a first
   pass finds the hot keys (:func:`.hot_keys.hot_keys`); a key of share ``p`` is spread
   over ``⌈p·n⌉`` workers chosen least loaded first, every other tracked key stays
   whole on a least-loaded worker and the rest whole on a hash worker. That is the
   replication of the offline bound γ*: no key is split that need not be. This routing is
   Spark expressions (a broadcast join and a hash), so it adds no Python pass and needs no
   keysplit on the executors. With ``grouper=`` an online keysplit grouper routes instead,
   one per input partition (:mod:`.routing`; the executors need keysplit).
2. **Function stage.** ``repartitionById(n, worker)``: worker ``w``'s rows are partition
   ``w``, so the task count is keysplit's and adaptive execution cannot coalesce the spread;
   ``function`` runs once per (worker, key) group, as ``applyInPandas`` would run it.
3. **Merge stage.** Only for the keys that ended up on more than one worker: their partial
   results are grouped by key and ``merge`` runs once per such key. A key on one worker is
   never merged; its result is ``function``'s.

The function stage runs when :func:`apply_grouped` is called (the merge stage must know
which keys were split); the merge stage runs when the result is used.

What ``merge`` must satisfy: for any split of a key's rows into parts ``P1..Pk``,
``merge(concat(function(P1), ..., function(Pk)))`` equals ``function(P1 ∪ ... ∪ Pk)``,
in any order of the parts (Spark gives no order). Top-k, counts, sums, min/max, mergeable
sketches and sufficient statistics of a model qualify; a running sum over the rows in order
does not (see ``docs/spark.md``).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit import metrics
from keysplit._grouper import Grouper, NullPolicy
from keysplit._numbers import to_float, to_int
from keysplit._progress import PhaseProgress
from keysplit.metrics import replication_bound_of_counts
from keysplit.spark.hot_keys import DEFAULT_CAPACITY, Placement, hot_keys, placement
from keysplit.spark.ingest import choose_path, to_spark
from keysplit.spark.pipeline import is_spark_frame, make_grouper, run_settings
from keysplit.spark.routing import route_on_executors
from keysplit.spark.session import as_session

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from keysplit.spark.ingest import Stream
    from keysplit.spark.session import Session

#: Every column apply_grouped adds starts with this; the input and the schema may not use it.
PREFIX = "__keysplit_"
_WORKER = PREFIX + "worker"
_KEY = PREFIX + "key"
_ROWS = PREFIX + "rows"
_SECONDS = PREFIX + "seconds"
_EMPTY = PREFIX + "empty"
_TASK = PREFIX + "task"
_SPLIT_KEY = PREFIX + "split_key"
_PLACED_KEY = PREFIX + "placed_key"
_SLICE = PREFIX + "slice"
_ROW = PREFIX + "row"
#: The two-pass plan places every key of at least this share (the rest go by hash).
PLACED_SHARE = 1e-6
#: Salts of the uniform salting the report compares with.
SALTS = 32


def _takes_key(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is ``f(key, pdf)`` rather than ``f(pdf)``, as ``applyInPandas`` decides."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2


def _group_runner(
    function: Callable[..., Any],
    *,
    takes_key: bool,
    group_column: str,
    inputs: list[str],
    columns: list[str],
    output: pa.Schema,
    stage: str,
    worker: bool,
    bookkeeping: bool,
    timezone: str,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a stage: its partition comes sorted by
    ``group_column``, and ``function`` runs once per run of equal values, on a pandas
    DataFrame of the group's ``inputs`` converted as ``applyInPandas`` converts them.

    Spark's own grouped map spends about 1.4 ms a group in its machinery (a stream per
    group, a pandas concat, checks, a conversion back); this spends a fraction of that,
    which is what lets a split plan make more calls than ``applyInPandas`` and still win.
    The output is ``columns`` (conformed to ``output``), ``_KEY``, ``_WORKER`` if
    ``worker``, and with ``bookkeeping`` the report's columns: on the first row the group's
    rows, the call's seconds and the task, and a placeholder row for an empty output."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import time

        import numpy as np
        import pandas as pd
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else -1
        user_fields = [output.field(name) for name in columns]

        def to_pandas(table: pa.Table) -> pd.DataFrame:
            frame = table.to_pandas(date_as_object=True, coerce_temporal_nanoseconds=True)
            for column in table.schema:
                if pa.types.is_timestamp(column.type) and column.type.tz is not None:
                    frame[column.name] = frame[column.name].dt.tz_convert(timezone).dt.tz_localize(None)
            return frame

        def to_arrow(series: pd.Series, target: pa.Field) -> pa.Array:
            if pa.types.is_timestamp(target.type) and target.type.tz is not None and series.dt.tz is None:
                series = series.dt.tz_localize(timezone).dt.tz_convert("UTC")
            return pa.Array.from_pandas(series, type=target.type, safe=True)

        def call(group: list[pa.RecordBatch]) -> pa.RecordBatch:
            table = pa.Table.from_batches(group)
            value = table.column(group_column)[0]
            if bookkeeping and stage == "merge":
                table = table.filter(pc.invert(table.column(_EMPTY)))
            pdf = to_pandas(table.select(inputs))
            del table
            key = (value.as_py(),)
            started = time.perf_counter()
            out = function(key, pdf) if takes_key else function(pdf)
            seconds = time.perf_counter() - started
            if not isinstance(out, pd.DataFrame):
                raise TypeError(f"the {stage} must return a pandas DataFrame, got {type(out).__name__}")
            empty = len(out) == 0
            if empty and not bookkeeping:
                return pa.RecordBatch.from_pylist([], schema=output)
            if empty:
                arrays = [pa.nulls(1, f.type) for f in user_fields]
            else:
                if all(isinstance(label, str) for label in out.columns):
                    missing = [name for name in columns if name not in out.columns]
                    unexpected = [label for label in out.columns if label not in columns]
                    if missing or unexpected:
                        raise ValueError(
                            f"the {stage}'s pandas DataFrame does not match the schema: missing {missing}, "
                            f"unexpected {unexpected}"
                        )
                elif len(out.columns) != len(columns):
                    raise ValueError(f"the {stage} returned {len(out.columns)} columns, the schema has {len(columns)}")
                else:
                    out = out.set_axis(columns, axis=1)
                try:
                    arrays = [to_arrow(out[f.name], f) for f in user_fields]
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as error:
                    raise TypeError(f"the {stage}'s output does not fit the schema {output}: {error}") from None
            height = len(arrays[0]) if arrays else len(out)
            arrays.append(pa.array([value.as_py()] * height, type=output.field(_KEY).type))
            if worker:
                arrays.append(pa.array(np.full(height, task, dtype=np.int32)))
            if bookkeeping:
                rows = np.full(height, -1, dtype=np.int64)
                rows[0] = len(pdf)
                spent = np.zeros(height)
                spent[0] = seconds
                arrays += [
                    pa.array(rows),
                    pa.array(spent),
                    pa.array(np.full(height, empty)),
                    pa.array(np.full(height, task, dtype=np.int32)),
                ]
            return pa.RecordBatch.from_arrays(arrays, schema=output)

        pending: list[pa.RecordBatch] = []
        results: list[pa.RecordBatch] = []
        held = 0
        for batch in batches:
            if not batch.num_rows:
                continue
            if stage == "function":
                workers = batch.column(_WORKER)
                if pc.min(workers).as_py() != task or pc.max(workers).as_py() != task:
                    raise RuntimeError(
                        f"partition {task} holds rows of other workers: Spark moved the function stage's rows"
                    )
            keys = batch.column(group_column)
            if len(keys) > 1:
                after, before = keys.slice(1), keys.slice(0, len(keys) - 1)
                same = pc.fill_null(pc.equal(after, before), False)
                same = pc.or_(same, pc.and_(pc.is_null(after), pc.is_null(before)))
                cuts = [i + 1 for i in pc.indices_nonzero(pc.invert(same)).to_pylist()]
            else:
                cuts = []
            starts = [0, *cuts]
            ends = [*cuts, len(keys)]
            for number, (start, end) in enumerate(zip(starts, ends, strict=True)):
                piece = batch.slice(start, end - start)
                if number == 0 and pending:
                    first, last = piece.column(group_column)[0], pending[-1].column(group_column)[-1]
                    if first.is_valid == last.is_valid and (not first.is_valid or first == last):
                        pending.append(piece)
                        continue
                if pending:
                    results.append(call(pending))
                    held += results[-1].num_rows
                pending = [piece]
            if held >= 10_000:
                yield from results
                results, held = [], 0
        if pending:
            results.append(call(pending))
        yield from results

    return run


@dataclass(repr=False)
class GroupedReport:
    """What one :func:`apply_grouped_with_report` run did.

        ``plan`` is ``"two-pass"`` or the grouper's name. ``split`` lists the keys held by more
        than one worker and how many (``workers``), most first. ``calls`` has one row per
        ``function`` call: its ``worker``, the ``rows`` it held and its ``seconds`` (measured in
        the Python worker) and the ``task`` (partition) of the function stage that ran it, which
    is always its worker, and ``merge_calls`` one per ``merge`` call. ``worker_rows[w]`` and
        ``worker_seconds[w]`` sum them per worker: worker ``w`` is task ``w`` of the function
        stage, so ``worker_seconds`` are its tasks' Python times. Rows shuffled: ``rows`` to the
        function stage (as ``applyInPandas``), ``merge_rows`` more to the merge stage; uniform
        salting with :data:`SALTS` salts would make ``salting_calls`` calls (expected, computed
        from the per-key counts) and shuffle ``salting_merge_rows`` partial rows (estimated from
        this run's output rows per call). ``offline_replication`` is γ* of the per-key counts.
    """

    plan: str
    workers: int
    rows: int
    keys: int
    split: pl.DataFrame
    calls: pl.DataFrame
    merge_calls: pl.DataFrame
    merge_rows: int
    output_rows: int
    salting_calls: float
    salting_merge_rows: float
    offline_replication: float
    hot_keys: pl.DataFrame | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def worker_rows(self) -> list[int]:
        return self._per_worker("rows")

    @property
    def worker_seconds(self) -> list[float]:
        return self._per_worker("seconds")

    def _per_worker(self, column: str) -> list[Any]:
        sums = self.calls.group_by("worker").agg(pl.col(column).sum())
        out: list[Any] = [0] * self.workers
        for worker, value in sums.iter_rows():
            out[worker] = value
        return out

    @property
    def largest_call(self) -> int:
        """The most rows one ``function`` call held."""
        return to_int(self.calls["rows"].max() or 0)

    @property
    def median_call(self) -> float:
        return to_float(self.calls["rows"].median() or 0.0)

    @property
    def load_imbalance(self) -> float:
        """λ of the rows per worker."""
        return metrics.load_imbalance(pl.Series(self.worker_rows, dtype=pl.UInt64))

    @property
    def replication_factor(self) -> float:
        """γ: ``function`` calls per distinct key."""
        return self.calls.height / self.keys if self.keys else 0.0

    @property
    def straggler(self) -> float:
        """The slowest worker's Python seconds over the median worker's."""
        seconds = pl.Series(self.worker_seconds)
        median = seconds.median()
        return to_float(seconds.max()) / to_float(median) if median else float("inf")

    def __repr__(self) -> str:
        return (
            f"GroupedReport(plan={self.plan!r}, workers={self.workers}, rows={self.rows:,}, keys={self.keys:,}, "
            f"split={self.split.height}, calls={self.calls.height:,}, largest_call={self.largest_call:,}, "
            f"λ={self.load_imbalance:.4f}, γ={self.replication_factor:.4f}, γ*={self.offline_replication:.4f}, "
            f"merge_rows={self.merge_rows:,})"
        )


def _struct(session: Session, schema: StructType | str) -> StructType:
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a DDL string or a StructType, got {type(schema).__name__}")
    parsed = session.call("reading the schema", lambda: session.spark.createDataFrame([], schema).schema)
    assert isinstance(parsed, StructType)
    return parsed


def _require_callable(name: str, value: object) -> Callable[..., Any]:
    if not callable(value):
        raise TypeError(f"{name} must be a function of a pandas DataFrame, got {type(value).__name__}")
    return value


class _GroupedRun:
    def __init__(
        self,
        frame: Stream | DataFrame,
        *,
        key: str,
        function: Callable[..., Any],
        merge: Callable[..., Any],
        schema: StructType | str,
        grouper: Grouper | str | None,
        workers: int,
        seed: int,
        session: Session | SparkSession | None,
        order_by: Sequence[str] | str | None,
        capacity: int,
        nulls: NullPolicy,
        bookkeeping: bool,
    ) -> None:
        self.bookkeeping = bookkeeping
        self.chosen: Placement | None = None
        self.function = _require_callable("function", function)
        self.merge = _require_callable("merge", merge)
        if is_spark_frame(frame):
            self.session, _ = as_session(frame.sparkSession if session is None else session)
        elif session is None:
            raise ValueError(
                "a client stream needs session=: the result is a Spark DataFrame that lives in it "
                "(e.g. session=keysplit.spark.session())"
            )
        else:
            self.session, _ = as_session(session)
            frame = to_spark(self.session, frame, choose_path(self.session, "auto"))
        self.frame: DataFrame = frame
        self.key = key
        self.nulls = nulls
        self.order_by = [order_by] if isinstance(order_by, str) else order_by
        self.capacity = capacity
        self.seed = seed
        self.grouper: Grouper | None = None
        if grouper is None:
            if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1 << 16:
                raise ValueError(f"workers must be an int in [1, 65,536], got {workers!r}")
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise TypeError(f"seed must be an int, got {type(seed).__name__}")
            self.workers = workers
            self.plan = "two-pass"
        else:
            self.grouper = make_grouper(grouper, workers, seed)
            self.workers = self.grouper.workers
            self.plan = self.grouper.name
        # The online plan finds its split keys from the workers in the function's output.
        self.keeps_worker = self.grouper is not None or bookkeeping
        self.input_schema = self.session.call("reading the schema", lambda: self.frame.schema)
        names = [f.name for f in self.input_schema.fields]
        self.input_columns = names
        timezone = self.session.call(
            "reading the time zone", lambda: self.session.spark.conf.get("spark.sql.session.timeZone")
        )
        # Spark always has a session time zone: the JVM's unless one is set.
        assert timezone is not None
        self.timezone = timezone
        self.output = _struct(self.session, schema)
        self.columns = [f.name for f in self.output.fields]
        clashes = [n for n in [*names, *self.columns] if n.startswith(PREFIX)]
        if clashes:
            raise ValueError(f"columns starting with {PREFIX!r} are keysplit's own; rename {clashes}")
        if key not in names:
            raise ValueError(f"key column {key!r} is not in the DataFrame; columns: {names}")
        self.hot: pl.DataFrame | None = None
        self.seconds: dict[str, float] = {}

    def _intermediate(self, *, worker: bool) -> StructType:
        """The schema of a stage's output: the user's columns, then :func:`_group_runner`'s."""
        from pyspark.sql.types import BooleanType, DoubleType, IntegerType, LongType, StructField, StructType

        fields = [
            *[StructField(f.name, f.dataType, True) for f in self.output.fields],
            StructField(_KEY, self.input_schema[self.key].dataType, True),
        ]
        if worker:
            fields.append(StructField(_WORKER, IntegerType(), False))
        if self.bookkeeping:
            fields += [
                StructField(_ROWS, LongType(), False),
                StructField(_SECONDS, DoubleType(), False),
                StructField(_EMPTY, BooleanType(), False),
                StructField(_TASK, IntegerType(), False),
            ]
        return StructType(fields)

    def _stage(self, frame: DataFrame, stage: str) -> DataFrame:
        """``frame``'s partitions, each sorted by its group column, through the stage's runner."""
        from pyspark.sql.pandas.types import to_arrow_schema

        function = self.function if stage == "function" else self.merge
        worker = self.keeps_worker and stage == "function"
        schema = self._intermediate(worker=worker)
        group_column = self.key if stage == "function" else _KEY
        runner = _group_runner(
            function,
            takes_key=_takes_key(function),
            group_column=group_column,
            inputs=self.input_columns if stage == "function" else self.columns,
            columns=self.columns,
            output=to_arrow_schema(schema, timezone="UTC"),
            stage=stage,
            worker=worker,
            bookkeeping=self.bookkeeping,
            timezone=self.timezone,
        )
        return frame.sortWithinPartitions(group_column).mapInArrow(runner, schema)

    def partials(self) -> DataFrame:
        """Routes, runs the function stage and holds its output on the executors."""
        started = time.perf_counter()
        if self.grouper is None:
            # Every tracked key is placed, not only the split ones: placing the warm keys
            # least loaded first leaves only the light tail to the hash.
            self.hot = hot_keys(
                self.frame,
                key=self.key,
                workers=self.workers,
                capacity=self.capacity,
                min_share=PLACED_SHARE,
                session=self.session,
            )
            self.seconds["hot_keys"] = time.perf_counter() - started
            started = time.perf_counter()
            self.chosen = placement(self.hot, key=self.key, workers=self.workers)
            routed = self._placed(self.chosen)
        else:
            routed = route_on_executors(
                self.session,
                self.frame,
                schema=self.input_schema,
                key=self.key,
                grouper=self.grouper,
                columns=[f.name for f in self.input_schema.fields],
                nulls=self.nulls,
                order_by=self.order_by,
                worker_column=_WORKER,
                source_column=None,
            )
        stage = self._stage(routed.repartitionById(self.workers, _WORKER), "function")
        held = self.session.call("the function stage", lambda: stage.localCheckpoint(eager=True))
        self.seconds["function"] = time.perf_counter() - started
        return held

    def _placed(self, chosen: Placement) -> DataFrame:
        """The two-pass plan's routing, in Spark's own expressions: a placed key's rows spread
        over its workers (by a hash of their position in the partition), every other key
        to ``pmod(xxhash64(seed, key), n)``. Nothing runs in Python, so the executors need
        no keysplit, and no row crosses into Python before the function stage."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, IntegerType, StructField, StructType

        if self.nulls == "raise":
            nulls = self.session.call(
                "looking for null keys", lambda: self.frame.filter(F.col(self.key).isNull()).limit(1).count()
            )
            if nulls:
                raise ValueError(
                    f"the key column {self.key!r} holds null keys; pass nulls='group' to group them as "
                    "applyInPandas does, or filter them out"
                )
        hashed = F.pmod(F.xxhash64(F.lit(self.seed), F.col(self.key)), F.lit(self.workers)).cast("int")
        if not chosen.keys:
            return self.frame.withColumn(_WORKER, hashed)
        table = StructType(
            [
                StructField(_PLACED_KEY, self.input_schema[self.key].dataType, True),
                StructField(_SLICE, ArrayType(IntegerType(), False), False),
            ]
        )
        rows = list(zip(chosen.keys, chosen.slices, strict=True))
        placed = self.session.call("placing the hot keys", lambda: self.session.spark.createDataFrame(rows, table))
        numbered = self.frame.withColumn(_ROW, F.monotonically_increasing_id())
        joined = numbered.join(F.broadcast(placed), numbered[self.key].eqNullSafe(placed[_PLACED_KEY]), "left")
        # A hash of the row's position, not the position: a key that recurs every k rows
        # would otherwise meet the same few workers of its slice.
        turn = (F.pmod(F.xxhash64(F.lit(self.seed), F.col(_ROW)), F.size(_SLICE)) + 1).cast("int")
        worker = F.when(F.col(_SLICE).isNull(), hashed).otherwise(F.element_at(F.col(_SLICE), turn))
        return joined.withColumn(_WORKER, worker).drop(_ROW, _SLICE, _PLACED_KEY)

    def split_keys(self, held: DataFrame) -> DataFrame:
        """The keys to merge (``_SPLIT_KEY``) and their ``workers``: the two-pass plan's keys
        of more than one worker, or the keys an online grouper's rows reached more than one
        worker with. Merging a split key whose rows all met one worker is still right: the
        merge of one partial result is that result."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegerType, StructField, StructType

        if self.chosen is not None:
            rows = [(k, len(s)) for k, s in zip(self.chosen.keys, self.chosen.slices, strict=True) if len(s) > 1]
            table = StructType(
                [
                    StructField(_SPLIT_KEY, self.input_schema[self.key].dataType, True),
                    StructField("workers", IntegerType(), False),
                ]
            )
            return self.session.call("listing the split keys", lambda: self.session.spark.createDataFrame(rows, table))
        return (
            held.groupBy(_KEY)
            .agg(F.count_distinct(_WORKER).alias("workers"))
            .filter(F.col("workers") > 1)
            .select(F.col(_KEY).alias(_SPLIT_KEY), "workers")
        )

    def stages(self, held: DataFrame, split: DataFrame, split_count: int) -> tuple[DataFrame, DataFrame | None]:
        """The whole keys' results, and the merge stage's output if a key was split."""
        from pyspark.sql import functions as F

        user = [F.col(name) for name in self.columns]
        if not split_count:
            kept = held.filter(~F.col(_EMPTY)) if self.bookkeeping else held
            return kept.select(*user), None
        on = held[_KEY].eqNullSafe(split[_SPLIT_KEY])
        whole = held.join(F.broadcast(split), on, "left_anti")
        if self.bookkeeping:
            whole = whole.filter(~F.col(_EMPTY))
        parts = held.join(F.broadcast(split), on, "left_semi").select(
            *user, _KEY, *([_EMPTY] if self.bookkeeping else [])
        )
        merged = self._stage(parts.repartition(min(split_count, self.workers), _KEY), "merge")
        return whole.select(*user), merged


def _table(session: Session, what: str, frame: DataFrame) -> pl.DataFrame:
    table = pl.from_arrow(session.call(what, frame.toArrow))
    assert isinstance(table, pl.DataFrame)
    return table


def _run(run: _GroupedRun, shown: PhaseProgress) -> tuple[DataFrame, GroupedReport | None]:
    from pyspark.sql import functions as F

    call = run.session.call
    with run.session.observed(shown.phase), run_settings(run.session):
        held = run.partials()
        split = run.split_keys(held)
        split_count = int(call("counting the split keys", split.count))
        whole, merged = run.stages(held, split, split_count)
        if merged is not None and run.bookkeeping:
            started = time.perf_counter()
            stage = merged
            merged = call("the merge stage", lambda: stage.localCheckpoint(eager=True))
            run.seconds["merge"] = time.perf_counter() - started
        if merged is None:
            result = whole
        else:
            kept = merged.filter(~F.col(_EMPTY)) if run.bookkeeping else merged
            result = whole.unionByName(kept.select(*run.columns))
        if not run.bookkeeping:
            return result, None
        firsts = held.filter(F.col(_ROWS) >= 0)
        calls = _table(
            run.session,
            "reading the function calls",
            firsts.select(
                F.col(_WORKER).alias("worker"),
                F.col(_TASK).alias("task"),
                F.col(_ROWS).alias("rows"),
                F.col(_SECONDS).alias("seconds"),
            ),
        )
        merge_calls = pl.DataFrame(schema={"rows": pl.Int64, "seconds": pl.Float64})
        if merged is not None:
            merge_calls = _table(
                run.session,
                "reading the merge calls",
                merged.filter(F.col(_ROWS) >= 0).select(F.col(_ROWS).alias("rows"), F.col(_SECONDS).alias("seconds")),
            )
        per_key = firsts.groupBy(_KEY).agg(F.sum(_ROWS).alias("rows"), F.count_distinct(_WORKER).alias("workers"))
        keys = _table(run.session, "counting rows per key", per_key)
        output_rows = int(call("counting output rows", held.filter(~F.col(_EMPTY)).count))
        merge_rows = 0
        if split_count:
            on = held[_KEY].eqNullSafe(split[_SPLIT_KEY])
            merge_rows = int(
                call(
                    "counting the merge stage's rows",
                    held.join(F.broadcast(split), on, "left_semi").filter(~F.col(_EMPTY)).count,
                )
            )
    key_rows = keys["rows"].cast(pl.Float64)
    salting_calls = float((SALTS * (1 - (1 - 1 / SALTS) ** key_rows)).sum()) if keys.height else 0.0
    return result, GroupedReport(
        plan=run.plan,
        workers=run.workers,
        rows=int(calls["rows"].sum()),
        keys=keys.height,
        split=keys.filter(pl.col("workers") > 1)
        .select(pl.col(_KEY).alias(run.key), pl.col("workers").cast(pl.Int64))
        .sort(["workers", run.key], descending=[True, False]),
        calls=calls,
        merge_calls=merge_calls,
        merge_rows=merge_rows,
        output_rows=output_rows,
        salting_calls=salting_calls,
        salting_merge_rows=salting_calls * output_rows / max(calls.height, 1),
        offline_replication=replication_bound_of_counts(keys["rows"], workers=run.workers),
        hot_keys=run.hot,
        seconds=run.seconds,
    )


def apply_grouped(
    frame: DataFrame | Stream,
    *,
    key: str = "key",
    function: Callable[..., Any],
    merge: Callable[..., Any],
    schema: StructType | str,
    grouper: Grouper | str | None = None,
    workers: int = 32,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    order_by: Sequence[str] | str | None = None,
    capacity: int = DEFAULT_CAPACITY,
    nulls: NullPolicy = "group",
    progress: bool | None = None,
) -> DataFrame:
    """``frame.groupBy(key).applyInPandas(function, schema)``, with the hot keys split.

    Parameters (all keyword-only but ``frame``)
    -------------------------------------------
    frame
        A Spark DataFrame, or a client stream (Polars, pandas, Arrow, an iterable of them),
        which is first written to Spark in ``session``.
    key
        The grouping column: integers, strings or binary (a whole-number decimal too).
    function
        ``function(pdf)`` or ``function(key, pdf)`` with ``key`` a one-element tuple, as in
        ``applyInPandas``: called once per (worker, key) group with all of the frame's
        columns, returning a pandas DataFrame of ``schema``.
    merge
        Called once per split key on the concatenated outputs of ``function`` for that key
        (columns of ``schema``, in no particular order), returning the key's result in
        ``schema``. It must satisfy the contract in this module's notes.
    schema
        The output schema, a DDL string or a ``StructType``, as in ``applyInPandas``.
    grouper, workers, seed
        None (default): the two-pass plan, ``workers`` workers (the function stage's tasks);
        a key of share ``p`` goes over ``⌈p·n⌉`` of them (found by
        :func:`keysplit.spark.hot_keys` with ``capacity`` counters per partition), every
        other key stays whole. A grouper name or :class:`keysplit.Grouper`: that online
        grouper routes each input partition instead (its own ``workers``).
    session
        A :class:`keysplit.spark.Session` or a ``SparkSession``; None for a DataFrame's own.
    order_by
        Columns to sort each partition by before routing (see :func:`keysplit.spark.aggregate`);
        needed when the DataFrame comes out of a shuffle and the plan routes online.
    nulls
        ``"group"`` (default): null keys are one group, as in ``groupBy``; ``"raise"``
        refuses them.
    progress
        A line on stderr naming the Spark action running; None (default) shows it when
        stderr is a terminal and rich is installed.

    The function stage runs now; the result is a Spark DataFrame of ``schema`` whose merge
    stage runs when it is used. No column of ``frame`` is changed and the routing column
    is not in the result.
    """
    with PhaseProgress("apply_grouped", progress) as shown:
        shown.phase("reading the input")
        result, _ = _run(
            _GroupedRun(
                frame,
                key=key,
                function=function,
                merge=merge,
                schema=schema,
                grouper=grouper,
                workers=workers,
                seed=seed,
                session=session,
                order_by=order_by,
                capacity=capacity,
                nulls=nulls,
                bookkeeping=False,
            ),
            shown,
        )
    return result


def apply_grouped_with_report(
    frame: DataFrame | Stream,
    *,
    key: str = "key",
    function: Callable[..., Any],
    merge: Callable[..., Any],
    schema: StructType | str,
    grouper: Grouper | str | None = None,
    workers: int = 32,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    order_by: Sequence[str] | str | None = None,
    capacity: int = DEFAULT_CAPACITY,
    nulls: NullPolicy = "group",
    progress: bool | None = None,
) -> tuple[DataFrame, GroupedReport]:
    """:func:`apply_grouped`, run to the end, and a :class:`GroupedReport` of what it did.

    Both stages run now (the result is held on the executors); the report's figures cost
    a few small queries over the function stage's output.
    """
    with PhaseProgress("apply_grouped", progress) as shown:
        shown.phase("reading the input")
        result, report = _run(
            _GroupedRun(
                frame,
                key=key,
                function=function,
                merge=merge,
                schema=schema,
                grouper=grouper,
                workers=workers,
                seed=seed,
                session=session,
                order_by=order_by,
                capacity=capacity,
                nulls=nulls,
                bookkeeping=True,
            ),
            shown,
        )
    assert report is not None
    return result, report
