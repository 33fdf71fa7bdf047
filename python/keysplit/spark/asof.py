"""``asof_join``: each left row joined to the nearest right row in time of its series, as
pandas' ``merge_asof`` joins them, with a hot series cut over the tasks.

The plan is the usual hand-written one, a window over the union of both sides, run by the
window verb (:func:`keysplit.spark.window`), which cuts a series of many rows into ranges of
its time and carries each range's last match across the range edges exactly:

1. **One frame of both sides' rows**: the ``by`` columns, the time, the side, a hash of the
   right row's values, and each side's columns packed in one struct (null on the other side).
   Right rows with a null time are left out: they match nothing.
2. **The match.** ``backward``: ordered by time, the right rows before the left rows of equal
   time where exact matches are allowed (after them where not), a left row's match is the last
   right struct before it, ``last(right, ignorenulls=True)`` over the rows from the series'
   first to the current one. ``forward``: the same in descending time. ``nearest``: both, and
   the nearer kept (the backward one where the two are as near, as pandas keeps it).
3. A match farther than ``tolerance`` is dropped; the left rows are kept with their match's
   columns, or (``how="inner"``) only those with a match.

Where pandas gives no answer for Spark, the choices (tested): pandas refuses a null time;
here a left row with a null time matches nothing and a right row with one is never matched.
Among right rows of one series and one time, pandas takes the last (backward) or the first
(forward) in the right frame's order; a Spark DataFrame has no row order, so here those rows
are ordered by a hash of their values (the same on every run and machine), and backward takes
the last of that order, forward the first. A null ``by`` value is a series of its own, as in
pandas.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keysplit._checks import require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError, KeyInputError, KeyTypeError
from keysplit.spark.columns import column, quoted, row_hash
from keysplit.spark.intake import is_spark_frame, session_for
from keysplit.spark.join import join_key_type
from keysplit.spark.report import Report
from keysplit.spark.window import WindowSplitReport, window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from keysplit.spark.options import SkewOptions
    from keysplit.spark.session import Session

DIRECTIONS = ("backward", "forward", "nearest")
HOWS = ("left", "inner")

_PREFIX = "__keysplit_asof_"
_TIME, _SIDE, _TIE, _LEFT, _RIGHT, _MATCH, _BACKWARD, _FORWARD = (
    _PREFIX + name for name in ("time", "side", "tie", "left", "right", "match", "backward", "forward")
)
#: The right row's time, inside its struct: the distance of a match is measured from it.
_RIGHT_TIME = _PREFIX + "right_time"
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_NUMERIC = (*_INTEGRAL, "float", "double")


@dataclass(frozen=True)
class AsofReport:
    """What one :func:`asof_join` did: the window verb's report of each pass over the union of
    both sides (``backward`` and ``forward``: None where the direction needs no such pass, or,
    through ``skewed(left)``, where the cost guard left it to Spark's own window), with the
    series it cut (``hot``)."""

    backward: WindowSplitReport | None
    forward: WindowSplitReport | None

    @property
    def passes(self) -> list[WindowSplitReport]:
        return [report for report in (self.backward, self.forward) if report is not None]


def asof_join(
    left: DataFrame,
    right: DataFrame,
    on: str,
    by: str | Sequence[str] | None = None,
    *,
    direction: str = "backward",
    tolerance: Any = None,
    allow_exact_matches: bool = True,
    how: str = "left",
    suffixes: tuple[str, str] = ("_x", "_y"),
    workers: int | None = None,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    report: Report[AsofReport] | None = None,
) -> DataFrame:
    """Each row of ``left`` with the nearest row of ``right`` in ``on`` among the rows of its
    series (equal ``by`` values), as ``pandas.merge_asof(left, right, on=on, by=by, ...)``: a
    lazy DataFrame. ``keysplit.spark.skewed(left).asof_join(right, ...)`` is the same join
    behind the cost guard, from statistics gathered when it is called.

    ``on`` is the time: a number, a date or a timestamp column of both sides. ``direction``:
    ``"backward"`` (the last right row at or before the left row's time), ``"forward"`` (the
    first at or after) or ``"nearest"`` (the nearer of the two; the backward one at equal
    distance). ``allow_exact_matches=False`` skips right rows of the same time. ``tolerance``
    drops a match farther than it: a number for a numeric time, a ``datetime.timedelta`` for a
    date or a timestamp. ``how="left"`` keeps every left row (the right columns null where it
    has no match), ``"inner"`` only those with one.

    The columns: the left side's, then the right side's but ``on`` and ``by``; a name on both
    sides gets ``suffixes`` (pandas'). A series with more rows than a task's share
    (``workers``, default: the shuffle's partitions) is cut into ranges of its time
    (:func:`keysplit.spark.window`, which finds them from a sample in the plan); the others run
    as Spark's own window. The module's notes have the plan and the choices where pandas has
    no answer for Spark (null times, ties). ``report`` (a :class:`keysplit.spark.Report`) is
    filled with an :class:`AsofReport` when an action runs the result. No Spark job runs here
    (Spark reads the schemas).
    """
    plan = _planned(
        left, right, on, by, direction, tolerance, allow_exact_matches, how, suffixes, workers, seed, session
    )
    reports: dict[str, Report[WindowSplitReport]] = {way: Report() for way in plan.ways}
    matched = plan.union
    for way in plan.ways:
        matched = window(
            matched, plan.match_of(way), workers=workers, seed=seed, session=plan.handle, report=reports[way]
        )
    if report is not None:
        _bind(report, reports, split=set(plan.ways))
    return plan.result(matched)


def measured_asof_join(
    left: DataFrame,
    right: DataFrame,
    on: str,
    by: str | Sequence[str] | None,
    options: SkewOptions,
    *,
    direction: str,
    tolerance: Any,
    allow_exact_matches: bool,
    how: str,
    suffixes: tuple[str, str],
    report: Report[AsofReport] | None,
) -> DataFrame:
    """``skewed(left).asof_join(...)``: :func:`asof_join`'s plan with its windows over the union
    written as Spark's own, each split where :func:`keysplit.spark.optimize`'s cost guard finds
    it straggling, from one sample of the union taken now (both directions' windows of
    ``nearest`` read in one scan); a window left to Spark is Spark's own. Its cuts are then
    literals in the plan, and where no series is hot the plan is Spark's own window over the
    union. The report's pass is None for a window left to Spark."""
    from keysplit.spark.optimize import optimized

    plan = _planned(
        left,
        right,
        on,
        by,
        direction,
        tolerance,
        allow_exact_matches,
        how,
        suffixes,
        options.workers,
        options.seed,
        options.session,
    )
    matched, windows = plan.union, {}
    for way in plan.ways:
        matched = matched.withColumns(plan.match_of(way))
        windows[way] = matched
    reports: dict[str, Report[WindowSplitReport]] = {way: Report() for way in plan.ways}
    result, decisions = optimized(
        matched, options, only={id(frame._plan): reports[way] for way, frame in windows.items()}
    )
    if report is not None:
        split = {way for way, frame in windows.items() if getattr(decisions.get(id(frame._plan)), "rewritten", False)}
        _bind(report, reports, split=split)
    return plan.result(result)


def _bind(report: Report[AsofReport], passes: dict[str, Report[WindowSplitReport]], *, split: set[str]) -> None:
    """Fills ``report`` once each pass keysplit split (``split``) has its window report; a
    pass left to Spark is None in it."""

    def read() -> AsofReport | None:
        if not all(passes[way].ready for way in split):
            return None
        found = {way: passes[way].get for way in split}
        return AsofReport(found.get("backward"), found.get("forward"))

    report.bind(read)


@dataclass(frozen=True)
class _Plan:
    """An as-of join's checked arguments and the union of both sides (module notes, step 1),
    with what makes each direction's match (step 2) and the result from it (step 3)."""

    handle: Session
    union: DataFrame
    keys: list[str]
    ways: tuple[str, ...]
    direction: str
    limit: Any
    how: str
    left_columns: list[tuple[str, str]]
    right_columns: list[tuple[str, str]]

    def match_of(self, way: str) -> dict[str, Column]:
        return {_BACKWARD if way == "backward" else _FORWARD: _last_right(self.keys, way)}

    def result(self, matched: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        rows = matched.where(column(_LEFT).isNotNull())
        if self.direction == "nearest":
            backward, forward = column(_BACKWARD), column(_FORWARD)
            nearer = F.when(forward.isNull(), backward).when(backward.isNull(), forward)
            match = nearer.when(_distance(backward) <= _distance(forward), backward).otherwise(forward)
        else:
            match = column(_BACKWARD if self.direction == "backward" else _FORWARD)
        if self.limit is not None:
            match = F.when(_distance(match) <= F.lit(self.limit), match)
        rows = rows.withColumn(_MATCH, match)
        if self.how == "inner":
            rows = rows.where(column(_MATCH).isNotNull())
        return rows.select(
            *[column(_LEFT).getField(name).alias(out) for name, out in self.left_columns],
            *[column(_MATCH).getField(name).alias(out) for name, out in self.right_columns],
        )


def _planned(
    left: DataFrame,
    right: DataFrame,
    on: str,
    by: str | Sequence[str] | None,
    direction: str,
    tolerance: Any,
    allow_exact_matches: bool,
    how: str,
    suffixes: tuple[str, str],
    workers: int | None,
    seed: int,
    session: Session | SparkSession | None,
) -> _Plan:
    """The arguments checked (each refusal names the fix) and the union built: no job runs."""
    for name, frame in (("left", left), ("right", right)):
        if not is_spark_frame(frame):
            raise ConfigTypeError(f"asof_join's {name} side must be a Spark DataFrame, got {type(frame).__name__}")
    if right.sparkSession is not left.sparkSession:
        raise ConfigError("asof_join's sides belong to two Spark sessions; make both in one")
    if not isinstance(on, str):
        raise ConfigTypeError(f"asof_join's on is a column name, got {type(on).__name__}")
    keys = _names("by", by)
    if direction not in DIRECTIONS:
        raise ConfigError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if how not in HOWS:
        raise ConfigError(f"how must be one of {', '.join(HOWS)} (pandas' merge_asof takes these), got {how!r}")
    if not isinstance(allow_exact_matches, bool):
        raise ConfigTypeError(f"allow_exact_matches must be True or False, got {allow_exact_matches!r}")
    if (
        not isinstance(suffixes, (tuple, list))
        or len(suffixes) != 2
        or not all(isinstance(s, str) for s in suffixes)
        or suffixes[0] == suffixes[1]
    ):
        raise ConfigError(f"suffixes must be two different strings, as pandas' ('_x', '_y'), got {suffixes!r}")
    seed = require_seed(seed)
    if workers is not None:
        require_workers(workers)
    handle = session_for(left, session)
    left_schema, right_schema = handle.call("reading the schemas", lambda: (left.schema, right.schema))
    for side, schema in (("left", left_schema), ("right", right_schema)):
        missing = [name for name in (on, *keys) if name not in schema.names]
        if missing:
            raise KeyInputError(f"asof_join: {missing} is not a column of the {side} side; its columns: {schema.names}")
        ours = [name for name in schema.names if name.startswith(_PREFIX)]
        if ours:
            raise ConfigError(f"asof_join: the {side} side's columns {ours} take names keysplit's own plan uses")
    time_type = _time_type(on, left_schema[on].dataType, right_schema[on].dataType)
    key_types = [
        join_key_type(f"{quoted(k)} (asof_join's by)", left_schema[k].dataType, right_schema[k].dataType) for k in keys
    ]
    limit = _tolerance(tolerance, time_type)

    left_names = list(left_schema.names)
    right_names = [name for name in right_schema.names if name != on and name not in keys]
    clash = set(left_names) & set(right_names)
    left_out = [name + suffixes[0] if name in clash else name for name in left_names]
    right_out = [name + suffixes[1] if name in clash else name for name in right_names]
    taken = [name for name in right_out if name in left_out]
    if taken:
        raise ConfigError(f"asof_join: with suffixes {tuple(suffixes)} the columns {taken} are on both sides still")

    union = _union(
        left, right, on, keys, key_types, time_type, (left_schema, right_schema), right_names, seed, allow_exact_matches
    )
    return _Plan(
        handle,
        union,
        keys,
        ("backward", "forward") if direction == "nearest" else (direction,),
        direction,
        limit,
        how,
        list(zip(left_names, left_out, strict=True)),
        list(zip(right_names, right_out, strict=True)),
    )


def _names(what: str, given: str | Sequence[str] | None) -> list[str]:
    if given is None:
        return []
    names = [given] if isinstance(given, str) else list(given) if isinstance(given, (list, tuple)) else None
    if names is None or not all(isinstance(name, str) for name in names):
        raise ConfigTypeError(f"asof_join's {what} takes column names, got {given!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"asof_join's {what} names a column twice: {names}")
    return names


def _time_type(on: str, left: DataType, right: DataType) -> DataType:
    """The type both sides' times are compared in: a number, a date or a timestamp, one kind
    on both sides (two integers as ``bigint``, two other numbers as ``double``)."""
    from pyspark.sql.types import DecimalType, DoubleType, LongType

    kinds = [_kind(kind) for kind in (left, right)]
    if None in kinds:
        raise KeyTypeError(
            f"asof_join's on {quoted(on)} is {left.simpleString()} on the left and {right.simpleString()} on the "
            "right: it must be a number, a date or a timestamp on both sides"
        )
    if left == right:
        return left
    if kinds == ["number", "number"]:
        if left.simpleString() in _INTEGRAL and right.simpleString() in _INTEGRAL:
            return LongType()
        if isinstance(left, DecimalType) and isinstance(right, DecimalType):
            raise KeyTypeError(
                f"asof_join's on {quoted(on)}: decimals of two precisions or scales ({left.simpleString()}, {right.simpleString()}); "
                "cast one side to the other's"
            )
        return DoubleType()
    raise KeyTypeError(
        f"asof_join's on {quoted(on)} is {left.simpleString()} on the left and {right.simpleString()} on the right; "
        f"cast one side, e.g. right.withColumn({on!r}, F.col({on!r}).cast('{left.simpleString()}'))"
    )


def _kind(kind: DataType) -> str | None:
    from pyspark.sql.types import DateType, DecimalType, TimestampNTZType, TimestampType

    if kind.simpleString() in _NUMERIC or isinstance(kind, DecimalType):
        return "number"
    if isinstance(kind, DateType):
        return "date"
    if isinstance(kind, (TimestampType, TimestampNTZType)):
        return "timestamp"
    return None


def _tolerance(tolerance: Any, time_type: DataType) -> Any:
    """``tolerance``, checked against the time's kind: what a match's distance
    (:func:`_distance`) is compared with."""
    if tolerance is None:
        return None
    kind = _kind(time_type)
    if kind == "number":
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float, decimal.Decimal)):
            raise ConfigTypeError(f"tolerance of a numeric on is a number, got {type(tolerance).__name__}")
        if not tolerance >= 0:
            raise ConfigError(f"tolerance must be 0 or more, got {tolerance!r}")
        return tolerance
    if not isinstance(tolerance, datetime.timedelta):
        raise ConfigTypeError(
            f"tolerance of a {kind} on is a datetime.timedelta (pandas' Timedelta is one), got {type(tolerance).__name__}"
        )
    if tolerance < datetime.timedelta(0):
        raise ConfigError(f"tolerance must be 0 or more, got {tolerance!r}")
    return tolerance


def _distance(match: Column) -> Column:
    """How far the matched right row's time is from the left row's: a number, or for dates
    and timestamps Spark's day-time interval (compared with a ``timedelta`` exactly)."""
    from pyspark.sql import functions as F

    return F.abs(column(_TIME) - match.getField(_RIGHT_TIME))


def _side(side: str, allow_exact_matches: bool) -> int:
    """The rank of ``side``'s rows among rows of one time: right before left where an exact
    match counts, after where it does not."""
    return int((side == "left") == allow_exact_matches)


def _union(
    left: DataFrame,
    right: DataFrame,
    on: str,
    keys: list[str],
    key_types: list[DataType],
    time_type: DataType,
    schemas: tuple[StructType, StructType],
    right_names: list[str],
    seed: int,
    allow_exact_matches: bool,
) -> DataFrame:
    """Both sides' rows in one frame (module notes, step 1)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    left_schema, right_schema = schemas
    left_struct = F.struct(*[column(name).alias(name) for name in left_schema.names])
    right_type = StructType([*[right_schema[name] for name in right_names], StructField(_RIGHT_TIME, time_type)])
    right_struct = F.struct(
        *[column(name).alias(name) for name in right_names], column(on).cast(time_type).alias(_RIGHT_TIME)
    )
    key_columns = [column(k).cast(t).alias(k) for k, t in zip(keys, key_types, strict=True)]
    lefts = left.select(
        *key_columns,
        column(on).cast(time_type).alias(_TIME),
        F.lit(_side("left", allow_exact_matches)).alias(_SIDE),
        F.lit(0).cast("long").alias(_TIE),
        left_struct.alias(_LEFT),
        F.lit(None).cast(right_type).alias(_RIGHT),
    )
    rights = right.where(column(on).isNotNull()).select(
        *key_columns,
        column(on).cast(time_type).alias(_TIME),
        F.lit(_side("right", allow_exact_matches)).alias(_SIDE),
        row_hash(seed, right_schema).alias(_TIE),
        F.lit(None).cast(left_schema).alias(_LEFT),
        right_struct.alias(_RIGHT),
    )
    return lefts.unionByName(rights)


def _last_right(keys: list[str], way: str) -> Column:
    """A left row's match (module notes, step 2): the last right row before it in time,
    backward in ascending time, forward in descending; tied right rows in their hashes'
    order (ascending backward, so that it takes the last; descending forward, the first)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    backward = way == "backward"
    time = column(_TIME).asc_nulls_first() if backward else column(_TIME).desc_nulls_first()
    tie = column(_TIE).asc() if backward else column(_TIE).desc()
    spec = Window.partitionBy(*[column(k) for k in keys]) if keys else Window
    ordered = spec.orderBy(time, column(_SIDE).asc(), tie)
    return F.last(column(_RIGHT), ignorenulls=True).over(
        ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
