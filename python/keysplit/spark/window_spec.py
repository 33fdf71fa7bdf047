"""Window columns as :func:`keysplit.spark.window` reads them: PySpark's ``F.f(...).over(w)``,
taken apart into the function, its arguments, and the window's partition, order and frame.

A Spark Connect column is a client-side expression tree (``pyspark.sql.connect.expressions``):
a ``WindowExpression`` holds the function (an ``UnresolvedFunction``) and the
``WindowSpec`` (partition expressions, ``SortOrder``\\ s, an optional ``WindowFrame``). The
verb rebuilds each function over its own window (partitioned by the key and a cell), so it
needs the parts, checked here once, before any plan is built: every unsupported function
or frame is refused by name, never computed differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.expressions import NOT_LITERAL, literal, unaliased

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column

#: Spark's markers of an unbounded frame end (``Window.unboundedPreceding``/``Following``).
_JVM_LONG_MIN = -(1 << 63)
_JVM_LONG_MAX = (1 << 63) - 1

#: Aggregates whose running, sliding and whole-partition values the verb splits.
AGGREGATES = ("count", "sum", "min", "max", "avg")
#: Functions of the row's position among the ordered rows (Spark fixes their frame).
RANKING = ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile")
#: The value a fixed number of rows before or after.
OFFSETS = ("lag", "lead")
#: The first or last value of the frame (``ignorenulls`` as Spark's).
ENDS = ("first", "last")

#: The most rows a ``lag``/``lead`` offset or a bounded frame's end reaches from its row
#: (Spark's ``max_by(x, ord, k)``, which gathers a chunk's edge rows, takes ``k`` up to
#: 100,000).
MAX_REACH = 100_000

#: PySpark's other names for the same functions.
_ALIASES = {"mean": "avg", "first_value": "first", "last_value": "last"}


@dataclass(frozen=True)
class SortKey:
    """One ``orderBy`` expression of the window, as Spark orders it."""

    expression: Column
    ascending: bool
    nulls_first: bool


@dataclass(frozen=True)
class Frame:
    """A window frame: ``rows`` (ROWS) or RANGE; ``start``/``end`` relative to the current
    row, None when unbounded (preceding for ``start``, following for ``end``)."""

    rows: bool
    start: int | None
    end: int | None

    @property
    def kind(self) -> str:
        """``"running"`` (from the first row to the current one, or its last peer for
        RANGE), ``"whole"`` (the whole partition) or ``"sliding"`` (ROWS, both ends a fixed
        offset); anything else is ``"other"``."""
        if self.start is None and self.end is None:
            return "whole"
        if self.start is None and self.end == 0:
            return "running"
        if self.rows and self.start is not None and self.end is not None:
            return "sliding"
        return "other"

    def __str__(self) -> str:
        def end(value: int | None, unbounded: str) -> str:
            if value is None:
                return unbounded
            if value == 0:
                return "CURRENT ROW"
            return f"{abs(value)} {'PRECEDING' if value < 0 else 'FOLLOWING'}"

        kind = "ROWS" if self.rows else "RANGE"
        return f"{kind} BETWEEN {end(self.start, 'UNBOUNDED PRECEDING')} AND {end(self.end, 'UNBOUNDED FOLLOWING')}"


#: Spark's frame of an aggregate over an ordered window when none is given.
RUNNING_RANGE = Frame(rows=False, start=None, end=0)
#: ... and over a window without an ordering.
WHOLE = Frame(rows=True, start=None, end=None)


@dataclass(frozen=True)
class WindowColumn:
    """One output column: ``function`` (canonical name) over the request's window."""

    name: str
    function: str
    #: The function's input (None for the ranking functions and ``count(*)``).
    argument: Column | None
    #: ``lag``/``lead``: the offset (rows) and the default (None: null).
    offset: int = 0
    default: Column | None = None
    #: ``first``/``last``: skip nulls.
    ignore_nulls: bool = False
    #: ``ntile``: the buckets.
    buckets: int = 0
    #: The frame of an aggregate or ``first``/``last``; None for ranking and offsets.
    frame: Frame | None = None


@dataclass(frozen=True)
class WindowRequest:
    """Every column of one :func:`keysplit.spark.window` call, over one partitioning and
    one ordering (the frames may differ)."""

    partition: tuple[Column, ...]
    order: tuple[SortKey, ...]
    columns: tuple[WindowColumn, ...]
    #: The partition expressions' names: a column's own, or ``partition_<i>``.
    partition_names: tuple[str, ...] = ()
    #: No ``partitionBy``: every row is of one partition (:attr:`partition` is a literal).
    whole_frame: bool = False


def window_request(columns: Mapping[str, Column]) -> WindowRequest:
    """``columns`` (output name → ``F.f(...).over(w)``) taken apart and checked."""
    from pyspark.sql.connect.column import Column as ConnectColumn

    if not columns:
        raise ConfigError("window needs at least one column: {'name': F.sum('x').over(w), ...}")
    specs: list[tuple[Any, Any]] = []
    parsed: list[WindowColumn] = []
    for name, given in columns.items():
        if not isinstance(name, str) or not name:
            raise ConfigTypeError(f"window's column names are non-empty strings, got {name!r}")
        if not isinstance(given, ConnectColumn):
            raise ConfigTypeError(
                f"window column {name!r} must be a Spark Connect column such as F.sum('x').over(w), got "
                f"{type(given).__name__} (keysplit's Spark verbs run on Spark Connect: keysplit.spark.session())"
            )
        expression = unaliased(given._expr)
        if type(expression).__name__ != "WindowExpression":
            raise ConfigError(
                f"window column {name!r} is {expression!r}, not a window function: write it as F.f(...).over(w); "
                "add other columns with withColumn before or after"
            )
        spec = expression._windowSpec
        specs.append((name, spec))
        parsed.append(_window_column(name, expression._windowFunction, spec))
    partition, order = _one_window(specs)
    for parsed_column in parsed:
        _require_order(parsed_column, order)
    names = tuple(
        getattr(unaliased(p._expr), "_unparsed_identifier", None) or f"partition_{i}" for i, p in enumerate(partition)
    )
    return WindowRequest(
        partition=partition,
        order=order,
        columns=tuple(parsed),
        partition_names=names,
        whole_frame=not specs[0][1]._partitionSpec,
    )


def _one_window(specs: list[tuple[str, Any]]) -> tuple[tuple[Column, ...], tuple[SortKey, ...]]:
    """The partitioning all ``specs`` share, and the ordering all ordered ones share (a
    column over the partition without an ordering takes it whole, whatever the order)."""
    from pyspark.sql import functions as F
    from pyspark.sql.connect.column import Column as ConnectColumn

    first_name, first = specs[0]
    ordered = [(name, spec) for name, spec in specs if spec._orderSpec]
    for name, spec in specs[1:]:
        if repr(spec._partitionSpec) != repr(first._partitionSpec):
            raise ConfigError(
                f"window columns {first_name!r} and {name!r} are over different partitionings "
                f"({first._partitionSpec} and {spec._partitionSpec}): one window call splits one "
                "partitioning; call it once per partitioning"
            )
    for name, spec in ordered[1:]:
        if repr(spec._orderSpec) != repr(ordered[0][1]._orderSpec):
            raise ConfigError(
                f"window columns {ordered[0][0]!r} and {name!r} are over different windows "
                f"(orderBy {ordered[0][1]._orderSpec} and orderBy {spec._orderSpec}): one window call "
                "splits one ordering; call it once per ordering (frames may differ)"
            )
    # No partitionBy: the whole DataFrame is one partition, which Spark sorts and scans in one
    # task. It is a key of one value, hot wherever there is more than one task, and its rows
    # are cut into ranges of the ordering as a hot key's are.
    partition = tuple(ConnectColumn(p) for p in first._partitionSpec) or (F.lit(0),)
    order_spec = ordered[0][1]._orderSpec if ordered else []
    order = tuple(SortKey(ConnectColumn(s._child), s._ascending, s._nullsFirst) for s in order_spec)
    return partition, order


def _window_column(name: str, function: Any, spec: Any) -> WindowColumn:
    from pyspark.sql.connect.column import Column as ConnectColumn

    if type(function).__name__ != "UnresolvedFunction" or function._is_distinct:
        raise ConfigError(
            f"window column {name!r}: {function!r} is not one keysplit splits; it splits "
            f"{', '.join(AGGREGATES + RANKING + OFFSETS + ENDS)} (use Spark's own window for others)"
        )
    kind = _ALIASES.get(function._name, function._name)
    args = list(function._args)
    explicit = _frame(spec._frame)
    ordered = bool(spec._orderSpec)
    if kind in RANKING or kind in OFFSETS:
        if explicit is not None:
            raise ConfigError(
                f"window column {name!r}: {kind} takes no frame (Spark fixes it), got {explicit}; "
                "drop rowsBetween/rangeBetween from its window"
            )
        if kind == "ntile":
            return WindowColumn(name, kind, None, buckets=_positive_literal(name, kind, args[0], "buckets"))
        if kind in OFFSETS:
            offset = _int_literal(name, kind, args[1], "offset") if len(args) > 1 else 1
            default = ConnectColumn(args[2]) if len(args) > 2 else None
            _require_reach(name, f"{kind}'s offset", abs(offset))
            return WindowColumn(name, kind, ConnectColumn(args[0]), offset=offset, default=default)
        return WindowColumn(name, kind, None)
    if kind in AGGREGATES or kind in ENDS:
        frame = explicit if explicit is not None else (RUNNING_RANGE if ordered else WHOLE)
        if frame.kind == "other":
            raise ConfigError(
                f"window column {name!r}: {kind} over {frame} is not split by keysplit; it splits running "
                "frames (UNBOUNDED PRECEDING to CURRENT ROW, ROWS or RANGE), bounded ROWS frames "
                "(rowsBetween(-a, b)) and whole partitions; use Spark's own window for this one"
            )
        if frame.kind == "sliding":
            _require_reach(name, f"{kind}'s frame", max(abs(frame.start or 0), abs(frame.end or 0)))
        if kind in ENDS and frame.kind == "sliding":
            raise ConfigError(
                f"window column {name!r}: keysplit does not split {kind} over {frame} yet; it splits {kind} over "
                "running frames and whole partitions; use Spark's own window for this one"
            )
        ignore_nulls = False
        if kind in ENDS and len(args) > 1:
            ignore_nulls = _bool_literal(name, kind, args[1])
        argument = None if kind == "count" and _counts_rows(args) else ConnectColumn(args[0])
        return WindowColumn(name, kind, argument, ignore_nulls=ignore_nulls, frame=frame)
    raise ConfigError(
        f"window column {name!r}: {function._name} is not a window function keysplit splits; it splits "
        f"{', '.join(AGGREGATES + RANKING + OFFSETS + ENDS)} (use Spark's own window for others)"
    )


def _require_reach(name: str, what: str, rows: int) -> None:
    if rows > MAX_REACH:
        raise ConfigError(
            f"window column {name!r}: {what} reaches {rows:,} rows; keysplit's split windows reach at most "
            f"{MAX_REACH:,} rows from a row; use Spark's own window for this one"
        )


def _require_order(column: WindowColumn, order: tuple[SortKey, ...]) -> None:
    needs_order = column.function in RANKING or column.function in OFFSETS
    needs_order = needs_order or (column.frame is not None and column.frame.kind != "whole")
    if needs_order and not order:
        raise ConfigError(
            f"window column {column.name!r}: {column.function} over "
            f"{column.frame if column.frame is not None else 'its rows'} needs an ordered window: "
            "Window.partitionBy(key).orderBy(...)"
        )


def _frame(frame: Any) -> Frame | None:
    if frame is None:
        return None

    def bound(value: int) -> int | None:
        return None if value in (_JVM_LONG_MIN, _JVM_LONG_MAX) else int(value)

    return Frame(rows=bool(frame._isRowFrame), start=bound(frame._start), end=bound(frame._end))


def _counts_rows(args: list[Any]) -> bool:
    """``count(*)`` or ``count(<non-null literal>)``: every row counts."""
    if not args:
        return True
    first = args[0]
    if type(first).__name__ == "UnresolvedStar":
        return True
    value = literal(first)
    return value is not NOT_LITERAL and value is not None


def _int_literal(name: str, kind: str, expression: Any, what: str) -> int:
    value = literal(expression)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"window column {name!r}: {kind}'s {what} must be an integer literal, got {expression!r}")
    return value


def _positive_literal(name: str, kind: str, expression: Any, what: str) -> int:
    value = _int_literal(name, kind, expression, what)
    if value <= 0:
        raise ConfigError(f"window column {name!r}: {kind}'s {what} must be positive, got {value}")
    return value


def _bool_literal(name: str, kind: str, expression: Any) -> bool:
    value = literal(expression)
    if not isinstance(value, bool):
        raise ConfigError(f"window column {name!r}: {kind}'s ignorenulls must be True or False, got {expression!r}")
    return value
