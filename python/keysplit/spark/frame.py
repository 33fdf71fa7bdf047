"""``skewed(df)``: Spark's own API, with keysplit behind the keyed verbs.

The migration from Spark's API is one wrapper::

    df.join(other, "k", "left")
    skewed(df).join(other, "k", "left")                             # hot keys of both sides split

    df.withColumns({"run": F.sum("v").over(w)})
    skewed(df).withColumns({"run": F.sum("v").over(w)})             # hot window partitions cut

    df.groupBy("k").agg(F.median("v"), F.mode("w"))
    skewed(df).groupBy("k").agg(F.median("v"), F.mode("w"))         # hot keys' values split

    df.groupBy("k").applyInPandas(f, schema)                        # one task per hot key
    skewed(df).groupBy("k").applyInPandas(f, schema, merge=m)       # hot keys split, merged

    skewed(df).optimize()                                           # every operator of df's plan

``.join``, ``.withColumns`` and ``.agg`` gather their statistics when called (one sample of
each input, as :func:`keysplit.spark.optimize` does) and pass the cost guard: where their
operator will straggle it is :func:`keysplit.spark.join`'s, :func:`keysplit.spark.window`'s
or :func:`keysplit.spark.holistic_agg`'s plan, its hot keys held in the plan as literal
tables; where it will not, Spark's own, with nothing added. Each returns a lazy DataFrame;
an input that is another keyed operator's output, which cannot be sampled without running
it, is split by the verb's plan with its sample in the plan. ``applyInPandas`` is
:func:`keysplit.spark.apply_grouped`. The options travel in one :class:`SkewOptions`; a verb
given one it does not read says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.aggregate import Agg
from keysplit.spark.asof import AsofReport, measured_asof_join
from keysplit.spark.columns import column, row_hash
from keysplit.spark.explain import explain_skew, skew_table
from keysplit.spark.grouped import apply_grouped
from keysplit.spark.holistic import HolisticReport, planned_aggregate
from keysplit.spark.intake import is_spark_frame, session_for
from keysplit.spark.join import JoinReport, join_type, planned_join
from keysplit.spark.optimize import OptimizeReport, optimized, split_verb
from keysplit.spark.options import DEFAULT_CAPACITY, MIN_ROWS, MIN_SKEW, TARGET_FILE_BYTES, SkewOptions
from keysplit.spark.window import WindowSplitReport, planned_window
from keysplit.spark.write import SkewedWriter

#: The grouped verbs' workers when ``skewed`` is given none.
DEFAULT_TASK_WORKERS = 32

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from keysplit._grouper import Grouper, NullPolicy
    from keysplit.spark.grouped import GroupedReport
    from keysplit.spark.report import Report
    from keysplit.spark.session import Session

# PySpark's names for ``agg({column: function})`` and the aggregate each is here.
_DICT_FUNCTIONS = {"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "mean", "mean": "mean"}


@dataclass(frozen=True)
class SkewedFrame:
    """A Spark DataFrame whose keyed verbs split hot keys; made by :func:`skewed`."""

    frame: DataFrame
    options: SkewOptions = field(default_factory=SkewOptions)

    def groupBy(self, *columns: str) -> SkewedGroupedData:  # noqa: N802 - PySpark's name
        """Groups by key columns (names), as ``DataFrame.groupBy``: ``.agg`` takes several,
        ``applyInPandas`` one."""
        if len(columns) == 1 and isinstance(columns[0], (list, tuple)):
            columns = tuple(columns[0])
        if not columns:
            raise ConfigError("groupBy needs at least one key column")
        for name in columns:
            if not isinstance(name, str):
                raise ConfigTypeError(f"group by column names, got {type(name).__name__}")
        return SkewedGroupedData(self, tuple(columns))

    groupby = groupBy

    def join(
        self,
        other: DataFrame,
        on: str | Sequence[str] | Column | Sequence[Column],
        how: str = "inner",
        *,
        report: Report[JoinReport] | None = None,
    ) -> DataFrame:
        """``frame.join(other, on, how)`` with the hot keys of both sides split where the cost
        guard finds the join straggling (:func:`keysplit.spark.join`'s plan, its grid from
        statistics gathered now), else Spark's own join: a lazy DataFrame."""
        options = self.options.read_by("join", "min_skew", "min_rows")
        how = join_type(how)
        if not is_spark_frame(other):
            raise ConfigTypeError(f"join's right side must be a Spark DataFrame, got {type(other).__name__}")
        spark_on: Any = on
        query = self.frame.join(other, spark_on, how)

        def unsplit(handle: Session, why: str) -> DataFrame:
            planned = planned_join(
                self.frame, other, on, how, workers=options.workers, seed=options.seed, handle=handle
            )
            return planned.unsplit(report, why)

        return split_verb(query, [query], options, report, unsplit)

    def asof_join(
        self,
        other: DataFrame,
        on: str,
        by: str | Sequence[str] | None = None,
        *,
        direction: str = "backward",
        tolerance: Any = None,
        allow_exact_matches: bool = True,
        how: str = "left",
        suffixes: tuple[str, str] = ("_x", "_y"),
        report: Report[AsofReport] | None = None,
    ) -> DataFrame:
        """Each row of this frame with the nearest row of ``other`` in ``on`` within its series
        (:func:`keysplit.spark.asof_join`, pandas' ``merge_asof``): a lazy DataFrame whose hot
        series are cut where the cost guard finds the window over both sides straggling, from
        statistics gathered now (their cuts literals in the plan); else Spark's own window."""
        options = self.options.read_by("asof_join", "min_skew", "min_rows")
        return measured_asof_join(
            self.frame,
            other,
            on,
            by,
            options,
            direction=direction,
            tolerance=tolerance,
            allow_exact_matches=allow_exact_matches,
            how=how,
            suffixes=suffixes,
            report=report,
        )

    def withColumns(  # noqa: N802 - PySpark's name
        self, *columns: Mapping[str, Column], report: Report[WindowSplitReport] | None = None
    ) -> DataFrame:
        """``frame.withColumns({name: F.f(...).over(w)})`` with a hot key's window partition
        cut into ranges where the cost guard finds the window straggling
        (:func:`keysplit.spark.window`'s plan, its cuts from statistics gathered now), else
        Spark's own window: a lazy DataFrame. Columns over several windows are computed
        window by window, as Spark's own plan does; ``report`` takes one window's figures."""
        if len(columns) != 1 or not isinstance(columns[0], dict):
            raise ConfigTypeError("withColumns takes one dict of {name: window column}, as PySpark's")
        options = self.options.read_by("withColumns", "min_skew", "min_rows")
        handle = session_for(self.frame, options.session)
        groups, plain = _by_window(columns[0])
        if not groups and report is None:
            # No window: nothing moves by key, and Spark's own withColumns is the answer.
            return self.frame.withColumns(columns[0])
        if report is not None and len(groups) != 1:
            raise ConfigError(
                f"report= takes one window's figures, and these columns are over {len(groups)} windows: call "
                "withColumns once per window, or read them all with keysplit.spark.optimize(df, report=...)"
            )
        names = handle.call("reading the schema", lambda: self.frame.columns)
        replaced = [name for name in columns[0] if name in names]
        if replaced and len(groups) + bool(plain) > 1:
            raise ConfigError(
                f"withColumns over several windows replaces {replaced}, which a later window would then read: "
                "call withColumns once per window, in the order they read each other"
            )
        query, windows = self.frame, []
        for group in groups:
            query = query.withColumns(group)
            windows.append(query)
        if plain:
            query = query.withColumns(plain)
        order = [*names, *[name for name in columns[0] if name not in names]]
        if query is not windows[-1] or len(groups) > 1:
            query = query.select(*[column(name) for name in order])

        def unsplit(handle: Session, why: str) -> DataFrame:
            # Planned over the window functions themselves (a column may be an expression
            # over one), run as the user's columns.
            from pyspark.sql.connect.column import Column as ConnectColumn

            from keysplit.spark.keyed_plan import windows_in

            functions = [w for given in groups[0].values() for w in windows_in(given._expr)]
            over = {f"window_{i}": ConnectColumn(w) for i, w in enumerate(functions)}
            planned = planned_window(self.frame, over, workers=options.workers, seed=options.seed, handle=handle)
            return replace(planned, columns=tuple(groups[0].items())).unsplit(report, why)

        return split_verb(query, windows, options, report, unsplit)

    def explain_skew(self) -> None:
        """Prints which keyed operators of the frame's plan will straggle and whether Spark
        splits them (``df.explain()``'s habit: printed; :func:`keysplit.spark.explain_skew`
        returns the same as a Polars DataFrame). Runs one measuring job, not the query."""
        options = self.options.read_by("explain_skew")
        print(skew_table(explain_skew(self.frame, seed=options.seed, session=options.session)))

    def optimize(self, *, report: Report[OptimizeReport] | None = None) -> DataFrame:
        """The frame with every keyed operator of its plan that will straggle split
        (:func:`keysplit.spark.optimize`), with these options."""
        options = self.options.read_by("optimize", "min_skew", "min_rows")
        return optimized(self.frame, options, report=report)[0]

    @property
    def write(self) -> SkewedWriter:
        """``frame.write``, with a partitioned write's hot values written by as many tasks as
        their size needs, in files of ``target_file_bytes`` (or ``target_file_rows``):
        ``skewed(df).write.partitionBy("date").mode("overwrite").parquet(path)``
        (:class:`keysplit.spark.SkewedWriter`)."""
        return SkewedWriter(self.frame, self.options)

    def orderBy(self, *cols: str | Column | Sequence[str | Column], **kwargs: Any) -> DataFrame:  # noqa: N802
        """``frame.orderBy(...)`` with ties spread: the rows are range-partitioned by the sort
        keys and a hash of each row's values, so that a value of many rows is cut over several
        tasks instead of given to one, then each partition is sorted by the sort keys. Among
        tied rows any order is Spark's own answer (its sort is not stable): a lazy DataFrame,
        its rows in order (``collect``, a write's files), which Spark's planner does not know
        to be sorted (a later ``orderBy`` sorts again)."""
        from pyspark.sql import Column as SparkColumn

        options = self.options.read_by("orderBy")
        handle = session_for(self.frame, options.session)
        given: tuple[Any, ...] = tuple(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
        if not given:
            raise ConfigError("orderBy needs at least one column")
        ascending = kwargs.pop("ascending", True)
        if kwargs:
            raise ConfigTypeError(f"orderBy takes columns and ascending=, got {sorted(kwargs)}")
        flags = list(ascending) if isinstance(ascending, (list, tuple)) else [ascending] * len(given)
        if len(flags) != len(given) or not all(isinstance(flag, (bool, int)) for flag in flags):
            raise ConfigError(f"ascending takes a bool or one per column ({len(given)}), got {ascending!r}")
        order = []
        for given_column, up in zip(given, flags, strict=True):
            if not isinstance(given_column, (str, SparkColumn)):
                raise ConfigTypeError(f"orderBy takes column names or Columns, got {type(given_column).__name__}")
            spark_column = column(given_column) if isinstance(given_column, str) else given_column
            order.append(spark_column if up else spark_column.desc())
        schema = handle.call("reading the schema", lambda: self.frame.schema)
        # The hash breaks ties in the range partitioning only (computed by the exchange, not
        # carried through it); each partition is then sorted by the given keys alone, which
        # keeps Spark's radix sort of one integer key (a second sort key cost 2.2x its sort).
        spread = self.frame.repartitionByRange(*order, row_hash(options.seed, schema))
        return spread.sortWithinPartitions(*order)

    sort = orderBy

    def withColumn(  # noqa: N802 - PySpark's name
        self, name: str, col: Column, *, report: Report[WindowSplitReport] | None = None
    ) -> DataFrame:
        """``frame.withColumn(name, F.f(...).over(w))`` with a hot key's window partition
        cut into ranges (:meth:`withColumns`)."""
        return self.withColumns({name: col}, report=report)


def _by_window(columns: Mapping[str, Column]) -> tuple[list[dict[str, Column]], dict[str, Column]]:
    """``columns`` grouped by the window they are over (partitioning and ordering; a window
    function or an expression over ones of one window, ``x - F.lag("x").over(w)``), in
    order, and the others (no window, or several in one expression: Spark's own, computed
    after them)."""
    from keysplit.spark.keyed_plan import windows_in

    groups: dict[tuple[str, str], dict[str, Column]] = {}
    plain: dict[str, Column] = {}
    for name, given in columns.items():
        expression = getattr(given, "_expr", None)
        found = windows_in(expression) if expression is not None else []
        specs = {(repr(w._windowSpec._partitionSpec), repr(w._windowSpec._orderSpec)) for w in found}
        if len(specs) != 1:
            plain[name] = given
            continue
        groups.setdefault(specs.pop(), {})[name] = given
    return list(groups.values()), plain


@dataclass(frozen=True)
class SkewedGroupedData:
    """``skewed(df).groupBy(key)``: ``applyInPandas`` and ``agg`` with hot keys handled."""

    skewed: SkewedFrame
    keys: tuple[str, ...]

    @property
    def key(self) -> str:
        """The one key column of the verbs that take one (``applyInPandas``, ``agg`` of specs)."""
        if len(self.keys) != 1:
            raise ConfigError(
                f"this verb groups by one key column, got {list(self.keys)}: make one column of them first, "
                "e.g. df.withColumn('key', F.concat_ws('|', *columns))"
            )
        return self.keys[0]

    def applyInPandas(  # noqa: N802 - PySpark's name
        self,
        func: Callable[..., Any],
        schema: StructType | str,
        *,
        merge: Callable[..., Any] | None = None,
        report: Report[GroupedReport] | None = None,
    ) -> DataFrame:
        """``groupBy(key).applyInPandas(func, schema)`` with the hot keys split: a lazy
        DataFrame (:func:`keysplit.spark.apply_grouped`). ``merge`` combines a split key's
        partial results; it is required, since the hot keys are found when the plan runs."""
        if merge is None:
            raise ConfigError(
                "applyInPandas on a skewed frame needs merge=: a hot key is split over several workers and "
                "merge(concat of their outputs) makes its one result (see keysplit.spark.apply_grouped)"
            )
        options = self.skewed.options.read_by("applyInPandas", "grouper", "capacity", "order_by", "nulls")
        return apply_grouped(
            self.skewed.frame,
            key=self.key,
            function=func,
            merge=merge,
            schema=schema,
            grouper=options.grouper,
            workers=options.workers if options.workers is not None else DEFAULT_TASK_WORKERS,
            seed=options.seed,
            session=options.session,
            order_by=options.order_by,
            capacity=options.capacity,
            nulls=options.nulls,
            report=report,
        )

    def agg(self, *exprs: Column | str | Mapping[str, str], report: Report[HolisticReport] | None = None) -> DataFrame:
        """``groupBy(keys).agg(...)``: Spark's aggregate, a lazy DataFrame, with a hot key's
        holistic aggregates (``F.median("v")``, ``F.percentile("v", [0.5, 0.99])``,
        ``F.mode("v")``, ``F.count_distinct("a", "b")``, ``F.collect_set("v")``) split where the
        cost guard finds the aggregate straggling (:func:`keysplit.spark.holistic_agg`'s plan,
        its cuts from statistics gathered now). Columns, PySpark's dict form (``{"v": "sum"}``)
        and keysplit's specs (``"sum(v)"``, ``"distinct(u)"``: an exact count of distinct
        values) alike, the columns named as Spark names them (``sum(v)``, ``avg(w)``,
        ``count(1)``, ``count(DISTINCT u)``). Combinable aggregates alone are Spark's own
        ``groupBy``, which is right for them (keysplit.spark.aggregate routes them by a grouper,
        to compare the groupers)."""
        from pyspark.sql import Column as SparkColumn

        options = self.skewed.options.read_by("agg", "min_skew", "min_rows")
        columns = [expr for expr in exprs if isinstance(expr, SparkColumn)]
        columns += [_spark_column(agg) for agg in _aggs([e for e in exprs if not isinstance(e, SparkColumn)])]
        if not columns:
            raise ConfigError("agg needs at least one aggregate, e.g. F.median('v'), {'v': 'sum'} or 'count'")
        query = self.skewed.frame.groupBy(*self.keys).agg(*columns)

        def unsplit(handle: Session, why: str) -> DataFrame:
            planned = planned_aggregate(
                self.skewed.frame, self.keys, columns, workers=options.workers, seed=options.seed, handle=handle
            )
            return planned.unsplit(report, why)

        return split_verb(query, [query], options, report, unsplit)


def _aggs(exprs: Sequence[str | Mapping[str, str]]) -> list[Agg]:
    from keysplit.spark.aggregate import parse_aggs

    specs: list[str | Agg] = []
    for expr in exprs:
        if isinstance(expr, str):
            specs.append(expr)
        elif isinstance(expr, dict):
            for column_name, function in expr.items():
                if function not in _DICT_FUNCTIONS:
                    raise ConfigError(
                        f"agg({{{column_name!r}: {function!r}}}): the dict form takes "
                        f"{', '.join(sorted(_DICT_FUNCTIONS))}; for another, pass a Column such as F.{function}(...)"
                    )
                specs.append(Agg(_DICT_FUNCTIONS[function], None if column_name == "*" else column_name))
        else:
            raise ConfigTypeError(
                f"agg takes Columns, PySpark's dict form ({{'v': 'sum'}}) or specs such as 'sum(v)', got "
                f"{type(expr).__name__}"
            )
    return parse_aggs(specs) if specs else []


def _spark_column(agg: Agg) -> Column:
    """``agg`` as Spark's own aggregate, which Spark names as it names the dict form's
    (``sum(v)``, ``avg(v)``, ``count(1)``) and ``F.count_distinct``'s (``count(DISTINCT v)``)."""
    from pyspark.sql import functions as F

    if agg.column is None:
        return F.count(F.lit(1))
    if agg.function == "mean":
        return F.avg(agg.column)
    if agg.function == "distinct":
        return F.count_distinct(agg.column)
    return getattr(F, agg.function)(agg.column)


def skewed(
    frame: DataFrame,
    *,
    workers: int | None = None,
    seed: int = 0,
    min_skew: float = MIN_SKEW,
    min_rows: int = MIN_ROWS,
    grouper: Grouper | str | None = None,
    capacity: int = DEFAULT_CAPACITY,
    order_by: Sequence[str] | str | None = None,
    nulls: NullPolicy = "group",
    session: Session | SparkSession | None = None,
    target_file_bytes: int = TARGET_FILE_BYTES,
    target_file_rows: int | None = None,
) -> SkewedFrame:
    """``frame`` with keysplit behind its keyed verbs: ``.join``, ``.withColumns``,
    ``.groupBy(k).agg(...)``, ``.groupBy(k).applyInPandas(f, schema, merge=m)``,
    ``.optimize()``, ``.explain_skew()``, ``.write.partitionBy(...)``, ``.orderBy(...)``. The options are :class:`SkewOptions`' (checked
    here); a verb given one it does not read says so. ``workers=None``: each verb's own
    default, 32 for ``applyInPandas``, the shuffle's partitions for the others."""
    if not is_spark_frame(frame):
        raise ConfigTypeError(f"skewed wraps a Spark DataFrame, got {type(frame).__name__}")
    options = SkewOptions(
        workers=workers,
        seed=seed,
        min_skew=min_skew,
        min_rows=min_rows,
        grouper=grouper,
        capacity=capacity,
        order_by=order_by,  # type: ignore[arg-type]
        nulls=nulls,
        session=session,
        target_file_bytes=target_file_bytes,
        target_file_rows=target_file_rows,
    )
    return SkewedFrame(frame, options)
