"""``skewed(df)``: Spark's own API, with keysplit behind the keyed verbs.

The migration from Spark's API is one wrapper::

    df.groupBy("k").applyInPandas(f, schema)                        # one task per hot key
    skewed(df).groupBy("k").applyInPandas(f, schema, merge=m)       # hot keys split, merged

    df.groupBy("k").agg({"v": "sum"})
    skewed(df).groupBy("k").agg({"v": "sum"})                       # routed by a grouper

    df.join(other, "k", "left")
    skewed(df).join(other, "k", "left")                             # hot keys of both sides split

    df.withColumns({"run": F.sum("v").over(w)})
    skewed(df).withColumns({"run": F.sum("v").over(w)})             # hot window partitions cut

    df.groupBy("k").agg(F.median("v"), F.mode("w"))
    skewed(df).groupBy("k").agg(F.median("v"), F.mode("w"))         # hot keys' values split

``skewed(df).groupBy(...).applyInPandas`` is :func:`keysplit.spark.apply_grouped` and
returns the same lazy DataFrame; ``.agg`` is :func:`keysplit.spark.aggregate` with Spark's
result column names (``sum(v)``, ``avg(v)``, ``count(1)``). For combinable aggregates
like these Spark's own ``groupBy`` is already right (it combines map-side, and a hot key
does not slow it): ``.agg`` is there to see and compare the groupers' routing.
``skewed(df).join(other, on, how)`` is :func:`keysplit.spark.join`, and
``skewed(df).withColumns({...})`` of window columns :func:`keysplit.spark.window`, each
also a lazy DataFrame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit._grouper import DEFAULT_GROUPER
from keysplit.spark.aggregate import Agg, aggregate
from keysplit.spark.explain import explain_skew, skew_table
from keysplit.spark.grouped import apply_grouped
from keysplit.spark.holistic import HolisticReport, holistic_agg
from keysplit.spark.hot_keys import DEFAULT_CAPACITY
from keysplit.spark.intake import is_spark_frame
from keysplit.spark.join import JoinReport, join
from keysplit.spark.window import WindowSplitReport, window

#: The grouped verbs' workers when ``skewed`` is given none.
DEFAULT_TASK_WORKERS = 32

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from keysplit._grouper import Grouper, NullPolicy
    from keysplit.spark.grouped import GroupedReport
    from keysplit.spark.report import Report, RunReport
    from keysplit.spark.session import Session

# PySpark's names for ``agg({column: function})`` and the aggregate each is here.
_DICT_FUNCTIONS = {"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "mean", "mean": "mean"}


@dataclass(frozen=True)
class SkewedFrame:
    """A Spark DataFrame whose keyed verbs split hot keys; made by :func:`skewed`."""

    frame: DataFrame
    workers: int | None = None
    grouper: Grouper | str | None = None
    seed: int = 0
    capacity: int = DEFAULT_CAPACITY
    order_by: Sequence[str] | str | None = None
    nulls: NullPolicy = "group"
    session: Session | SparkSession | None = None

    def groupBy(self, *columns: str) -> SkewedGroupedData:  # noqa: N802 - PySpark's name
        """Groups by key columns (names), as ``DataFrame.groupBy``: ``.agg`` of Columns
        takes several, ``applyInPandas`` and ``.agg`` of specs one."""
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
        """``frame.join(other, on, how)`` with the hot keys of both sides split: a lazy
        DataFrame (:func:`keysplit.spark.join`), sized for ``workers`` tasks (None: the
        shuffle's partitions)."""
        return join(
            self.frame, other, on, how, workers=self.workers, seed=self.seed, session=self.session, report=report
        )

    def withColumns(  # noqa: N802 - PySpark's name
        self, *columns: Mapping[str, Column], report: Report[WindowSplitReport] | None = None
    ) -> DataFrame:
        """``frame.withColumns({name: F.f(...).over(w)})`` with a hot key's window partition
        cut into ranges: a lazy DataFrame (:func:`keysplit.spark.window`), in ``workers``
        tasks (None: the shuffle's partitions)."""
        if len(columns) != 1 or not isinstance(columns[0], dict):
            raise ConfigTypeError("withColumns takes one dict of {name: window column}, as PySpark's")
        return window(self.frame, columns[0], workers=self.workers, seed=self.seed, session=self.session, report=report)

    def explain_skew(self) -> None:
        """Prints which keyed operators of the frame's plan will straggle and whether Spark
        splits them (``df.explain()``'s habit: printed; :func:`keysplit.spark.explain_skew`
        returns the same as a Polars DataFrame). Runs one measuring job, not the query."""
        print(skew_table(explain_skew(self.frame, seed=self.seed, session=self.session)))

    def withColumn(  # noqa: N802 - PySpark's name
        self, name: str, col: Column, *, report: Report[WindowSplitReport] | None = None
    ) -> DataFrame:
        """``frame.withColumn(name, F.f(...).over(w))`` with a hot key's window partition
        cut into ranges (:meth:`withColumns`)."""
        return self.withColumns({name: col}, report=report)


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
        options = self.skewed
        return apply_grouped(
            options.frame,
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

    def agg(
        self, *exprs: Column | str | Mapping[str, str], report: Report[RunReport] | Report[HolisticReport] | None = None
    ) -> DataFrame:
        """``groupBy(keys).agg(...)``. Of Columns (``F.median("v")``, ``F.percentile("v",
        [0.5, 0.99])``, ``F.mode("v")``, ``F.count_distinct("a", "b")``, ``F.collect_set("v")``,
        or any other aggregate): :func:`keysplit.spark.holistic_agg`, Spark's result with a
        hot key's holistic aggregates split, lazy. Of PySpark's dict form (``{"v": "sum"}``)
        or keysplit's specs (``"sum(v)"``, ``"distinct(u)"``): routed by a keysplit grouper
        (:func:`keysplit.spark.aggregate`; it runs now), the columns named as Spark names
        them (``sum(v)``, ``avg(w)``, ``count(1)``, ``count(DISTINCT u)``)."""
        from pyspark.sql import Column as SparkColumn

        options = self.skewed
        if any(isinstance(expr, SparkColumn) for expr in exprs):
            if not all(isinstance(expr, SparkColumn) for expr in exprs):
                raise ConfigTypeError("agg takes Columns (F.median('v')) or specs ('sum(v)'), not both in one call")
            return holistic_agg(
                options.frame,
                self.keys,
                *exprs,  # type: ignore[arg-type]
                workers=options.workers,
                seed=options.seed,
                session=options.session,
                report=report,  # type: ignore[arg-type]
            )
        aggs = _aggs(exprs)  # type: ignore[arg-type]
        grouper = options.grouper if options.grouper is not None else DEFAULT_GROUPER
        result = aggregate(
            options.frame,
            key=self.key,
            grouper=grouper,
            aggs=aggs,
            workers=options.workers if options.workers is not None else DEFAULT_TASK_WORKERS,
            seed=options.seed,
            session=options.session,
            order_by=options.order_by,
            nulls=options.nulls,
            report=report,  # type: ignore[arg-type]
        )
        return result.select(self.key, *[result[agg.name].alias(_spark_name(agg)) for agg in aggs])


def _aggs(exprs: Sequence[str | Mapping[str, str]]) -> list[Agg]:
    from keysplit.spark.aggregate import parse_aggs

    specs: list[str | Agg] = []
    for expr in exprs:
        if isinstance(expr, str):
            specs.append(expr)
        elif isinstance(expr, dict):
            for column, function in expr.items():
                if function not in _DICT_FUNCTIONS:
                    raise ConfigError(
                        f"agg({{{column!r}: {function!r}}}): keysplit aggregates with "
                        f"{', '.join(sorted(_DICT_FUNCTIONS))}; for another, use Spark's own groupBy"
                    )
                specs.append(Agg(_DICT_FUNCTIONS[function], column))
        else:
            raise ConfigTypeError(
                f"agg takes PySpark's dict form ({{'v': 'sum'}}) or specs such as 'sum(v)', got {type(expr).__name__}"
            )
    return parse_aggs(specs)


def _spark_name(agg: Agg) -> str:
    """The column Spark names ``agg`` (``groupBy().agg({...})`` and ``F.count_distinct``)."""
    if agg.column is None:
        return "count(1)"
    if agg.function == "mean":
        return f"avg({agg.column})"
    if agg.function == "distinct":
        return f"count(DISTINCT {agg.column})"
    return f"{agg.function}({agg.column})"


def skewed(
    frame: DataFrame,
    *,
    workers: int | None = None,
    grouper: Grouper | str | None = None,
    seed: int = 0,
    capacity: int = DEFAULT_CAPACITY,
    order_by: Sequence[str] | str | None = None,
    nulls: NullPolicy = "group",
    session: Session | SparkSession | None = None,
) -> SkewedFrame:
    """``frame`` with keysplit behind its keyed verbs: ``skewed(df).groupBy("k")`` then
    ``.applyInPandas(f, schema, merge=m)`` or ``.agg(...)``. The options are
    :func:`keysplit.spark.apply_grouped`'s (``grouper=None``: its two-pass plan; ``.agg``
    then routes with ``"elastic"``). ``workers=None``:
    each verb's own default, 32 for the grouped verbs, the shuffle's partitions for
    ``.join``."""
    if not is_spark_frame(frame):
        raise ConfigTypeError(f"skewed wraps a Spark DataFrame, got {type(frame).__name__}")
    return SkewedFrame(frame, workers, grouper, seed, capacity, order_by, nulls, session)
