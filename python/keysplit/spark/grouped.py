"""Grouped maps with the hot keys split: ``apply_grouped``, ``applyInPandas`` without the straggler.

``df.groupBy(key).applyInPandas(f)`` sends each key's whole group to one task and one
Python call, so a hot key makes one task the straggler and one call hold most of the rows.
Spark cannot split it (adaptive execution splits skewed partitions of joins only).
:func:`apply_grouped` returns a lazy DataFrame whose plan, when an action runs it, does:

1. **Hot keys** (the default two-pass plan). An exact count of rows per key, in Spark; the
   ``capacity`` commonest keys are placed by one small task (:mod:`.placement`): a key of
   share ``p`` over ``⌈p·n⌉`` workers chosen least loaded first, the others whole on a
   least-loaded worker. That is the replication of the offline bound γ*: no key is split
   that need not be. The table is broadcast; every other key goes whole to a hash worker.
   When even the hottest key holds no more than a quarter of a worker's mean load
   (``WHOLE_KEY_PLACED_FROM``), the table is empty, no task places it, and adaptive
   execution drops its join: Spark's own hash placement.
   Spark runs this pass as a job of the same query, before the function stage: it reads
   the input once more (only the key column) and shuffles one row per key and partition.
   With ``grouper=`` an online keysplit grouper routes instead, one per input partition
   (:mod:`.routing`; the executors then need keysplit).
2. **Function stage.** ``repartitionById(n, worker)``: worker ``w``'s rows are partition
   ``w``, so the task count is keysplit's and adaptive execution cannot coalesce the spread;
   ``function`` runs once per (worker, key) group, as ``applyInPandas`` would run it
   (:class:`.group_runner.FunctionStage`).
3. **Merge stage.** The function's output rows, by key: a key whose partial results came
   from more than one worker is merged (``merge`` once per such key), every other passes
   through as ``function`` returned it (:class:`.group_runner.MergeStage`).

No Spark job runs when :func:`apply_grouped` is called, except that the online plan checks
once per session that the executors import keysplit, and a client stream is first written
to Spark.

What ``merge`` must satisfy: for any split of a key's rows into parts ``P1..Pk``,
``merge(concat(function(P1), ..., function(Pk)))`` equals ``function(P1 ∪ ... ∪ Pk)``,
in any order of the parts (Spark gives no order). Top-k, counts, sums, min/max, mergeable
sketches and sufficient statistics of a model qualify; a running sum over the rows in order
does not (see ``docs/spark.md``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from pyspark import cloudpickle

from keysplit import metrics
from keysplit._checks import require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError
from keysplit._grouper import Grouper, NullPolicy
from keysplit._numbers import to_float, to_int
from keysplit.metrics import replication_bound_of_counts
from keysplit.spark import group_runner, placement, runs
from keysplit.spark.columns import row_hash
from keysplit.spark.group_runner import (
    BOOKKEEPING,
    EMPTY,
    KEY,
    MERGE_INPUT,
    PREFIX,
    ROWS,
    SECONDS,
    SPLIT,
    TASK,
    WORKER,
    FunctionStage,
    MergeStage,
    PandasCall,
)
from keysplit.spark.hot_keys import WHOLE_KEY_PLACED_FROM
from keysplit.spark.ingest import IngestOptions, choose_path, to_spark
from keysplit.spark.intake import is_spark_frame, refuse_reserved, run_settings, session_for
from keysplit.spark.options import DEFAULT_CAPACITY, make_grouper, order_columns, require_key, require_task_workers
from keysplit.spark.placement import COUNT, SLICE, TOTAL, Placer
from keysplit.spark.report import Report, observed, observed_rows
from keysplit.spark.routing import require_key_type, route_on_executors

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from keysplit.spark.ingest import Stream
    from keysplit.spark.session import Session

#: Salts of the uniform salting the report compares with.
SALTS = 32
_FIRST = PREFIX + "first"
_HASH = PREFIX + "hash"
_HOTTEST = PREFIX + "hottest"

# The stages' code runs on executors that may lack keysplit: it travels by value.
for _module in (runs, group_runner, placement):
    cloudpickle.register_pickle_by_value(_module)


@dataclass(repr=False)
class GroupedReport:
    """What one :func:`apply_grouped` run did: ``report.get`` of the :class:`Report` passed to it.

    ``plan`` is ``"two-pass"`` or the grouper's name. ``split`` lists the keys held by more
    than one worker and how many (``workers``), most first. ``calls`` has one row per
    ``function`` call: its ``worker``, the ``rows`` it held and its ``seconds`` (measured in
    the Python worker) and the ``task`` (partition) of the function stage that ran it, which
    is always its worker, and ``merge_calls`` one per ``merge`` call. ``worker_rows[w]`` and
    ``worker_seconds[w]`` sum them per worker: worker ``w`` is task ``w`` of the function
    stage, so ``worker_seconds`` are its tasks' Python times. Rows shuffled: ``rows`` to the
    function stage (as ``applyInPandas``), ``merge_rows`` more to the merge stage; uniform
    salting with ``SALTS`` (32) salts would make ``salting_calls`` calls (expected, computed
    from the per-key counts) and shuffle ``salting_merge_rows`` partial rows (estimated from
    this run's output rows per call). ``offline_replication`` is γ* of the per-key counts.
    ``hot_keys`` is the two-pass plan's placement table: each placed key's exact ``count``
    and ``workers``. ``seconds`` holds the Python seconds of the calls of each stage.
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
        raise ConfigTypeError(f"schema must be a DDL string or a StructType, got {type(schema).__name__}")
    parsed = session.call("reading the schema", lambda: session.spark.createDataFrame([], schema).schema)
    assert isinstance(parsed, StructType)
    return parsed


def _require_callable(name: str, value: object) -> Callable[..., Any]:
    if not callable(value):
        raise ConfigTypeError(f"{name} must be a function of a pandas DataFrame, got {type(value).__name__}")
    return value


@dataclass
class GroupedMap:
    """One :func:`apply_grouped` call's plan: checked arguments in, a lazy DataFrame out."""

    session: Session
    frame: DataFrame
    key: str
    function: Callable[..., Any]
    merge: Callable[..., Any]
    output: StructType
    grouper: Grouper | None
    workers: int
    seed: int
    order_by: tuple[str, ...] | None
    capacity: int
    nulls: NullPolicy
    input_schema: StructType = field(init=False)
    timezone: str = field(init=False)

    def __post_init__(self) -> None:
        self.input_schema = self.session.call("reading the schema", lambda: self.frame.schema)
        names = [f.name for f in self.input_schema.fields]
        refuse_reserved([*names, *self.columns], PREFIX)
        require_key_type(self.input_schema, self.key)
        timezone = self.session.call(
            "reading the time zone", lambda: self.session.spark.conf.get("spark.sql.session.timeZone")
        )
        # Spark always has a session time zone: the JVM's unless one is set.
        assert timezone is not None
        self.timezone = timezone

    @property
    def plan_name(self) -> str:
        return "two-pass" if self.grouper is None else self.grouper.name

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.output.fields]

    def stage_schema(self) -> StructType:
        """Both stages' output: the user's columns, then :data:`.group_runner.BOOKKEEPING`."""
        from pyspark.sql.types import BooleanType, DoubleType, IntegerType, LongType, StructField, StructType

        types = {
            KEY: self.input_schema[self.key].dataType,
            WORKER: IntegerType(),
            ROWS: LongType(),
            SECONDS: DoubleType(),
            EMPTY: BooleanType(),
            TASK: IntegerType(),
            SPLIT: BooleanType(),
        }
        return StructType(
            [
                *[StructField(f.name, f.dataType, True) for f in self.output.fields],
                *[StructField(name, types[name], name in (KEY, SPLIT)) for name in BOOKKEEPING],
            ]
        )

    def pandas_call(self, what: str, function: Callable[..., Any], inputs: list[str]) -> PandasCall:
        from pyspark.sql.pandas.types import to_arrow_schema

        return PandasCall(
            function=function,
            what=what,
            inputs=tuple(inputs),
            columns=tuple(self.columns),
            schema=to_arrow_schema(self.stage_schema(), timezone="UTC"),
            timezone=self.timezone,
        )

    def checked_keys(self) -> DataFrame:
        """The input, failing when a null key comes with ``nulls="raise"``."""
        from pyspark.sql import functions as F

        if self.nulls != "raise":
            return self.frame
        message = (
            f"the key column {self.key!r} holds null keys; pass nulls='group' to group them as "
            "applyInPandas does, or filter them out"
        )
        check = F.when(F.col(self.key).isNull(), F.raise_error(F.lit(message)))
        return self.frame.filter(check.isNull())

    def placement(self, frame: DataFrame) -> DataFrame:
        """The two-pass plan's table of placed keys, computed in the plan: the ``capacity``
        commonest keys by exact count, with the total, through the :class:`Placer` task."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, IntegerType, LongType, StructField, StructType

        counts = frame.groupBy(self.key).agg(F.count(F.lit(1)).alias(COUNT))
        stats = counts.agg(F.sum(COUNT).alias(TOTAL), F.max(COUNT).alias(_HOTTEST))
        top = counts.orderBy(F.desc(COUNT), F.asc_nulls_first(self.key)).limit(self.capacity)
        # Nothing worth placing: the table is empty, no Python task starts (the exchange
        # before it tells adaptive execution so), and adaptive execution drops the empty
        # broadcast with its join: the plan is Spark's own hash placement.
        worth_placing = F.col(_HOTTEST) * F.lit(self.workers * WHOLE_KEY_PLACED_FROM) > F.col(TOTAL)
        candidates = top.crossJoin(stats).filter(worth_placing).drop(_HOTTEST)
        schema = StructType(
            [
                StructField(self.key, self.input_schema[self.key].dataType, True),
                StructField(COUNT, LongType(), False),
                StructField(TOTAL, LongType(), False),
                StructField(SLICE, ArrayType(IntegerType(), False), False),
            ]
        )
        return candidates.repartition(1).mapInArrow(Placer(self.key, self.workers), schema)

    def hashed(self, frame: DataFrame) -> DataFrame:
        """``frame`` with every key whole on its hash worker: ``applyInPandas``' placement."""
        from pyspark.sql import functions as F

        return frame.withColumns(
            {WORKER: F.pmod(self.key_hash(), F.lit(self.workers)).cast("int"), SPLIT: F.lit(False)}
        )

    def key_hash(self) -> Column:
        """``xxhash64(seed, key)``: a key's hash worker, and what the routing joins the
        placement table on (one long: Spark's fastest broadcast join)."""
        from pyspark.sql import functions as F

        return F.xxhash64(F.lit(self.seed), F.col(self.key))

    def row_hash(self) -> Column:
        """Where a split key's row goes (:func:`.columns.row_hash`). A key whose rows are
        all alike (a frame of the key column alone) is not spread at all, and its result is
        still exact."""
        return row_hash(self.seed, self.input_schema)

    def placed(self, frame: DataFrame, table: DataFrame) -> DataFrame:
        """``frame`` with its worker: a placed key's rows spread over its workers (by a hash
        of the row's values), every other key to ``pmod(xxhash64(seed, key), n)``.
        Spark's own expressions: no row crosses into Python before the function stage.

        The join is on the key's 64-bit hash, not the key: a key whose hash equals a placed
        key's (about one chance in 10^11 for 4,096 placed keys and 10^5 keys) is spread
        with it, and merged, so the result stays exact; a null key hashes like any other."""
        from pyspark.sql import functions as F

        # The table flattened: a whole key's worker in a column of its own, and a slice only
        # for a split key, so that a whole key's row reads no array (half the join's cost).
        table = table.select(
            self.key_hash().alias(_HASH),
            F.element_at(SLICE, 1).alias(_FIRST),
            F.when(F.size(SLICE) > 1, F.col(SLICE)).alias(SLICE),
        )
        joined = frame.withColumn(_HASH, self.key_hash()).join(F.broadcast(table), _HASH, "left")
        turn = (F.pmod(self.row_hash(), F.size(SLICE)) + 1).cast("int")
        hashed = F.pmod(F.col(_HASH), F.lit(self.workers)).cast("int")
        worker = F.when(F.col(SLICE).isNotNull(), F.element_at(SLICE, turn)).otherwise(F.coalesce(_FIRST, hashed))
        return joined.withColumns({WORKER: worker, SPLIT: F.col(SLICE).isNotNull()}).drop(_FIRST, SLICE, _HASH)

    def routed_online(self, frame: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        assert self.grouper is not None
        routed = route_on_executors(
            self.session,
            frame,
            schema=self.input_schema,
            key=self.key,
            grouper=self.grouper,
            columns=[f.name for f in self.input_schema.fields],
            nulls=self.nulls,
            order_by=self.order_by,
            worker_column=WORKER,
            source_column=None,
        )
        return routed.withColumn(SPLIT, F.lit(None).cast("boolean"))

    def function_stage(self, routed: DataFrame) -> DataFrame:
        call = self.pandas_call("function", self.function, [f.name for f in self.input_schema.fields])
        by_worker = routed.repartitionById(self.workers, WORKER).sortWithinPartitions(self.key)
        return by_worker.mapInArrow(FunctionStage(call, self.key), self.stage_schema())

    def merge_stage(self, partials: DataFrame) -> DataFrame:
        """Every key's partial results, by key: merged where more than one worker held the
        key, passed through otherwise (the online plan, which knows no split in advance)."""
        call = self.pandas_call("merge", self.merge, self.columns)
        by_key = self.merge_input(partials).repartition(self.workers, KEY).sortWithinPartitions(KEY)
        return by_key.mapInArrow(MergeStage(call), self.stage_schema())

    def merge_input(self, partials: DataFrame) -> DataFrame:
        """The function stage's output with the columns the merge stage reads: no more, so
        that every reader of the exchange after it asks for the same columns (Spark prunes
        each reader's columns below the exchange, and readers of different columns would
        each get an exchange, and a function stage, of their own)."""
        return partials.select(*self.columns, *MERGE_INPUT)

    def split_stages(self, partials: DataFrame, observe: Callable[[DataFrame], DataFrame]) -> DataFrame:
        """The placed plan's output: one exchange of the function's output, read twice. A
        whole key's rows stay in their worker's partition and leave in Spark's own
        expressions; a split key's rows meet in one partition, of the few that the merge
        stage's Python tasks read (split keys are fewer than the workers)."""
        from pyspark.sql import functions as F

        if self.capacity == 0:
            return partials.filter(~F.col(EMPTY)).select(*self.columns)
        target = F.when(F.col(SPLIT), F.pmod(F.xxhash64(F.col(KEY)), F.lit(self.workers))).otherwise(F.col(WORKER))
        exchanged = self.merge_input(partials).repartitionById(self.workers, target.cast("int"))

        # Each reader's predicate wrapped in one expression Spark cannot push below the
        # exchange (spark_partition_id is not deterministic, and a deterministic conjunct
        # would be pushed on its own): pushed, it would give each reader an exchange of its
        # own, and run the function stage twice.
        def kept(condition: Column) -> Column:
            return F.when(F.spark_partition_id() >= 0, condition)

        whole = exchanged.filter(kept(~F.col(SPLIT) & ~F.col(EMPTY))).select(*self.columns)
        stage = MergeStage(self.pandas_call("merge", self.merge, self.columns))
        # Grouped, not mapInArrow: Spark then starts Python only where a split key's rows
        # are, and not in every partition (the merge's cost when nothing is split). A lambda,
        # not the bound method: PySpark reads a method's (string) type hints to pick the
        # call's form, fails on them and warns.
        parts = exchanged.filter(kept(F.col(SPLIT))).groupBy(KEY)
        merged = observe(parts.applyInArrow(lambda group: stage.table(group), self.stage_schema()))
        return whole.unionByName(merged.filter(~F.col(EMPTY)).select(*self.columns))

    def plan(self, report: Report[GroupedReport] | None) -> DataFrame:
        """The lazy plan; with ``report``, observed so that the report fills when it runs."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        frame = self.checked_keys()
        observed = _Observed(Observation(), Observation(), Observation()) if report is not None else None
        if self.grouper is None and self.capacity == 0:
            routed = self.hashed(frame)
        elif self.grouper is None:
            table = self.placement(frame)
            if observed is not None:
                table = table.observe(
                    observed.placement,
                    F.collect_list(F.struct(F.col(self.key).alias("key"), COUNT, F.size(SLICE).alias("workers"))).alias(
                        "keys"
                    ),
                    F.max(TOTAL).alias("total"),
                )
            routed = self.placed(frame, table)
        else:
            routed = self.routed_online(frame)
        partials = self.function_stage(routed)
        if observed is not None:
            first = F.col(ROWS) >= 0
            partials = partials.observe(
                observed.calls,
                F.collect_list(F.when(first, F.struct(KEY, WORKER, TASK, ROWS, SECONDS))).alias("calls"),
                F.count_if(~F.col(EMPTY)).alias("output_rows"),
            )
            assert report is not None
            report.bind(lambda: observed.report(self))

        def observe_merges(merged: DataFrame) -> DataFrame:
            if observed is None:
                return merged
            first = F.col(ROWS) >= 0
            return merged.observe(
                observed.merges, F.collect_list(F.when(first, F.struct(KEY, ROWS, SECONDS))).alias("calls")
            )

        if self.grouper is None:
            return self.split_stages(partials, observe_merges)
        merged = observe_merges(self.merge_stage(partials))
        return merged.filter(~F.col(EMPTY)).select(*self.columns)


@dataclass(frozen=True)
class _Observed:
    """The observations of one plan: the placement table, the function calls, the merges."""

    placement: Any
    calls: Any
    merges: Any

    def report(self, run: GroupedMap) -> GroupedReport | None:
        """The report, once the plan has run (None before)."""
        seen = observed(self.calls)
        if not seen:
            return None
        # A retried stage reports its calls again: one call per (key, worker), as the plan makes.
        calls = observed_rows(
            seen["calls"], (KEY, WORKER, TASK, ROWS, SECONDS), ("key", "worker", "task", "rows", "seconds"), _TYPES
        )
        calls = calls.unique(["key", "worker"], keep="first", maintain_order=True)
        merges = observed_rows(
            observed(self.merges).get("calls", []), (KEY, ROWS, SECONDS), ("key", "rows", "seconds"), _TYPES
        ).unique(["key"], keep="first", maintain_order=True)
        per_key = calls.group_by("key").agg(pl.col("rows").sum(), pl.col("worker").n_unique().alias("workers"))
        key_rows = per_key["rows"].cast(pl.Float64)
        salting_calls = float((SALTS * (1 - (1 - 1 / SALTS) ** key_rows)).sum()) if per_key.height else 0.0
        output_rows = int(seen["output_rows"] or 0)
        split = per_key.filter(pl.col("workers") > 1).select(
            pl.col("key").alias(run.key), pl.col("workers").cast(pl.Int64)
        )
        return GroupedReport(
            plan=run.plan_name,
            workers=run.workers,
            rows=int(calls["rows"].sum()),
            keys=per_key.height,
            split=split.sort(["workers", run.key], descending=[True, False], nulls_last=False),
            calls=calls.select("worker", "task", "rows", "seconds"),
            merge_calls=merges.select("rows", "seconds"),
            merge_rows=int(merges["rows"].sum()),
            output_rows=output_rows,
            salting_calls=salting_calls,
            salting_merge_rows=salting_calls * output_rows / max(calls.height, 1),
            offline_replication=replication_bound_of_counts(per_key["rows"], workers=run.workers),
            hot_keys=self.hot_keys(run) if run.grouper is None and run.capacity else None,
            seconds={"function": float(calls["seconds"].sum()), "merge": float(merges["seconds"].sum())},
        )

    def hot_keys(self, run: GroupedMap) -> pl.DataFrame:
        """The placement table, as :func:`keysplit.spark.hot_keys` reports keys (exact counts)."""
        seen = observed(self.placement)
        total = int(seen.get("total") or 0)
        table = observed_rows(seen.get("keys", []), ("key", COUNT, "workers"), (run.key, "count", "workers"), _TYPES)
        return table.sort("count", run.key, descending=[True, False], nulls_last=False).select(
            run.key,
            "count",
            pl.lit(0, pl.Int64).alias("error"),
            (pl.col("count") / max(total, 1)).alias("share"),
            (pl.col("count") / max(total, 1)).alias("share_max"),
            "workers",
            pl.lit(total, pl.Int64).alias("rows"),
        )


#: Polars types of the observed rows' columns (others: inferred).
_TYPES = {
    "worker": pl.Int32,
    "task": pl.Int32,
    "rows": pl.Int64,
    "seconds": pl.Float64,
    "count": pl.Int64,
    "workers": pl.Int64,
}


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
    report: Report[GroupedReport] | None = None,
) -> DataFrame:
    """``frame.groupBy(key).applyInPandas(function, schema)``, with the hot keys split: a lazy
    DataFrame, as ``applyInPandas`` returns. Also ``df.transform(apply_grouped, key=..., ...)``
    and ``keysplit.spark.skewed(df).groupBy(key).applyInPandas(function, schema, merge=merge)``.

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
        a key of share ``p`` goes over ``⌈p·n⌉`` of them, the ``capacity`` commonest keys
        are placed least loaded first, every other key stays whole on its hash worker.
        ``capacity=0`` places none and runs no hot-key pass: ``applyInPandas``' placement,
        every key whole, with keysplit's faster group runner. A grouper name or
        :class:`keysplit.Grouper`: that online grouper routes each input partition instead
        (its own ``workers``).
    session
        A DataFrame's own unless given; a
        client stream needs one.
    order_by
        Columns to sort each partition by before routing (see :func:`keysplit.spark.aggregate`);
        needed when the DataFrame comes out of a shuffle and the plan routes online.
    nulls
        ``"group"`` (default): null keys are one group, as in ``groupBy``; ``"raise"``
        fails the query that meets one.
    report
        A :class:`keysplit.spark.Report`, filled with a :class:`GroupedReport` when an
        action runs the result (observed metrics: the plan is the same, plus a list of the
        calls gathered on the driver).

    No Spark job runs here (see the module's notes for the exceptions); the result is a
    Spark DataFrame of ``schema``. No column of ``frame`` is changed and the routing column
    is not in the result.
    """
    key = require_key(key)
    function = _require_callable("function", function)
    merge = _require_callable("merge", merge)
    handle = session_for(frame, session)
    if nulls not in ("group", "raise"):
        raise ConfigError(f"nulls must be 'group' or 'raise', got {nulls!r}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 0 <= capacity <= 1 << 24:
        raise ConfigError(f"capacity must be an int in [0, {1 << 24:,}], got {capacity!r}")
    online = None if grouper is None else make_grouper(grouper, workers, seed)
    if online is None:
        workers = require_workers(workers)
        seed = require_seed(seed)
    require_task_workers(online.workers if online is not None else workers)
    output = _struct(handle, schema)
    if not is_spark_frame(frame):
        frame = to_spark(handle, frame, choose_path(handle, IngestOptions()))
    planned = GroupedMap(
        session=handle,
        frame=frame,
        key=key,
        function=function,
        merge=merge,
        output=output,
        grouper=online,
        workers=online.workers if online is not None else workers,
        seed=seed,
        order_by=order_columns(order_by),
        capacity=capacity,
        nulls=nulls,
    )
    return planned.plan(report)


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
    """Deprecated: ``apply_grouped(..., report=keysplit.spark.Report())``, then an action.

    Runs the plan now (persisted, so that reading the result does not run it again) and
    returns it with its report.
    """
    warnings.warn(
        "apply_grouped_with_report is deprecated: pass report=keysplit.spark.Report() to apply_grouped and "
        "read report.get after an action on the result",
        DeprecationWarning,
        stacklevel=2,
    )
    del progress
    report: Report[GroupedReport] = Report()
    result = apply_grouped(
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
        report=report,
    ).persist()
    handle = session_for(result, session)
    with run_settings(handle):
        handle.call("running apply_grouped", result.count)
    return result, report.get
