"""``join``: Spark's equi-join, with the hot keys of either side split over a grid of tasks.

``left.join(right, on, how)`` sends every row of a key to one task. Spark's adaptive
execution splits such a task only for some join types, above a byte threshold, at map
blocks, and never when the split would add a shuffle (``docs/spark.md``). :func:`join`
returns a lazy DataFrame equal to Spark's join as a multiset of rows, whose plan does:

1. **Exact counts per key** of both sides, in Spark (map-side combined; the two count
   tables are joined without another shuffle). A key's work is its rows on both sides and
   the rows it outputs, ``L + R + L·R``; a key whose work is more than a mean task's, of
   ``n`` tasks (``workers``; by default the shuffle's partitions), is hot and gets
   ``g = ⌈work·n/W⌉`` cells (at most the partitions). Each count partition sends its ``n``
   heaviest keys and its totals to one small Python task (:mod:`.join_grid`), in one chain,
   so that Spark computes the counts once.
2. **A grid per hot key**, in that task: its left rows spread over ``r`` grid rows by a
   hash of the row's values and copied along theirs, its right rows over ``c`` columns,
   each pair meeting in one cell; ``r·c ≥ g`` with the fewest rows copied, so a key hot on
   one side only copies the other side's few rows ``r`` times and moves nothing else. Each
   cell is a value of one extra join key, chosen (by Spark's own hash function, ported)
   so that Spark's exchange puts the cell on a partition of its own. The table is broadcast.
3. **One Spark join** on the keys and the cell: every cold key is in cell 0, so its rows go
   through Spark's own join as they would have (adaptive execution still on). A hot key's
   row copied to a cell that holds none of its partners would come out null-extended in an
   outer join: such rows are dropped, as the exact counts say whether a key has partners.
   A semi or anti join reads the right side's distinct keys, and copies no left row.

Rows with a null key never match (Spark's ``=``); they are spread over the partitions, so
a null-heavy outer join has no straggler either. A row's cell depends on its values only,
so a re-run task sends each row where the first run did, and the plan survives a lost
executor as Spark's own does; rows alike in every column go to one cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from pyspark import cloudpickle

from keysplit._checks import require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError, KeyInputError, KeyTypeError
from keysplit.spark import join_grid
from keysplit.spark.columns import column, holds_a_map, quoted
from keysplit.spark.intake import is_spark_frame, session_for
from keysplit.spark.join_grid import (
    GRID_COLUMNS,
    GRID_ROWS,
    KEY_HASH,
    LEFT_ROWS,
    PREFIX,
    RIGHT_ROWS,
    SALTS,
    TOTALS,
    WORK,
    JoinGrid,
    LocalTop,
)
from keysplit.spark.report import Report, observed, observed_rows

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from keysplit.spark.session import Session

# The grid task runs on executors that may lack keysplit: it travels by value.
cloudpickle.register_pickle_by_value(join_grid)

#: Spark's names for the join types (``how``, case and underscores aside), as Spark's own.
JOIN_TYPES = {
    "inner": "inner",
    "outer": "full",
    "full": "full",
    "fullouter": "full",
    "left": "left",
    "leftouter": "left",
    "right": "right",
    "rightouter": "right",
    "semi": "left_semi",
    "leftsemi": "left_semi",
    "anti": "left_anti",
    "leftanti": "left_anti",
}
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")

_CELL = PREFIX + "cell"
_LEFT_SEEN = PREFIX + "left_seen"
_RIGHT_SEEN = PREFIX + "right_seen"
_LEFT_PARTNERS = PREFIX + "left_partners"
_RIGHT_PARTNERS = PREFIX + "right_partners"


def _key(j: int) -> str:
    return f"{PREFIX}k{j}"


def _hot(j: int) -> str:
    return f"{PREFIX}hot{j}"


def _left(i: int) -> str:
    return f"{PREFIX}l{i}"


def _right(i: int) -> str:
    return f"{PREFIX}r{i}"


@dataclass(frozen=True)
class JoinKeys:
    """The key columns of each side, pairwise equal; ``using`` when ``on`` named them (Spark's
    ``USING`` join: each key once in the output), else an equality of columns."""

    left: tuple[str, ...]
    right: tuple[str, ...]
    using: bool


def join_type(how: object) -> str:
    """``how`` as Spark's join type; a clear error for a cross join or an unknown one."""
    if not isinstance(how, str):
        raise ConfigTypeError(f"how must be a join type such as 'inner' or 'left', got {type(how).__name__}")
    name = how.lower().replace("_", "")
    if name == "cross":
        raise ConfigError(
            "how='cross' has no key to split: every row meets every row; use left.crossJoin(right) (Spark's own)"
        )
    if name not in JOIN_TYPES:
        raise ConfigError(
            f"how={how!r} is not a join type; keysplit joins with {', '.join(sorted(set(JOIN_TYPES.values())))} "
            f"(or Spark's other names for them: {', '.join(sorted(JOIN_TYPES))})"
        )
    return JOIN_TYPES[name]


def join_keys(on: object, left: DataFrame, right: DataFrame) -> JoinKeys:
    """``on`` (a column name, a list of them, an equality of columns or a list or ``&`` of
    equalities) as the key columns of each side."""
    from pyspark.sql import Column

    if isinstance(on, str):
        return JoinKeys((on,), (on,), using=True)
    if isinstance(on, (list, tuple)) and on and all(isinstance(name, str) for name in on):
        if len(set(on)) != len(on):
            raise ConfigError(f"on names a column twice: {list(on)}")
        return JoinKeys(tuple(on), tuple(on), using=True)
    conditions = list(on) if isinstance(on, (list, tuple)) else [on]
    if not conditions or not all(isinstance(condition, Column) for condition in conditions):
        raise ConfigTypeError(
            "on must be a column name, a list of names, or an equality of columns such as "
            f"left['a'] == right['b'] (or a list of them), got {on!r}"
        )
    pairs = [pair for condition in conditions for pair in _equalities(condition, left, right)]
    return JoinKeys(tuple(a for a, _ in pairs), tuple(b for _, b in pairs), using=False)


def _equalities(condition: Any, left: DataFrame, right: DataFrame) -> list[tuple[str, str]]:
    """The (left column, right column) pairs of a condition made of ``==`` and ``&``."""
    expression = getattr(condition, "_expr", None)
    if expression is None:
        raise ConfigTypeError("an equality of columns as on= needs Spark Connect's Column (keysplit runs on Connect)")
    return _pairs(expression, left, right, condition)


def _pairs(expression: Any, left: DataFrame, right: DataFrame, whole: Any) -> list[tuple[str, str]]:
    from pyspark.sql.connect.expressions import ColumnReference, UnresolvedFunction

    if isinstance(expression, UnresolvedFunction) and expression._name == "and":
        return [pair for arg in expression._args for pair in _pairs(arg, left, right, whole)]
    if (
        isinstance(expression, UnresolvedFunction)
        and expression._name == "=="
        and all(isinstance(arg, ColumnReference) for arg in expression._args)
    ):
        first, second = (_side(arg, left, right) for arg in expression._args)
        if first[0] == second[0]:
            raise ConfigError(f"on: {whole} compares two columns of the same side; a join key equals one of each")
        return [(first[1], second[1])] if first[0] == "left" else [(second[1], first[1])]
    raise ConfigError(
        f"on: keysplit joins on equalities of columns (left['a'] == right['b'], joined with &), got {whole}; "
        "for another condition use Spark's own join"
    )


def _side(reference: Any, left: DataFrame, right: DataFrame) -> tuple[str, str]:
    name = reference._unparsed_identifier
    plan = reference._plan_id
    if plan is not None:
        for side, frame in (("left", left), ("right", right)):
            if plan == frame._plan._plan_id:
                return side, name
        raise ConfigError(f"on: column {name!r} belongs to neither side; write it as left[{name!r}] or right[{name!r}]")
    held = [side for side, frame in (("left", left), ("right", right)) if name in frame.columns]
    if len(held) != 1:
        raise ConfigError(
            f"on: F.col({name!r}) is {'in both sides' if held else 'in neither side'}; "
            f"write it as left[{name!r}] or right[{name!r}]"
        )
    return held[0], name


def _common_type(name: str, left: DataType, right: DataType) -> DataType:
    """The type a key pair is compared in: their own when equal, ``bigint`` for two
    integers of different widths (Spark widens them alike)."""
    from pyspark.sql.types import LongType

    if holds_a_map(left) or holds_a_map(right):
        raise KeyTypeError(f"join key {name}: a map cannot be compared (Spark refuses it too)")
    if left == right:
        return left
    if left.simpleString() in _INTEGRAL and right.simpleString() in _INTEGRAL:
        return LongType()
    raise KeyTypeError(
        f"join key {name}: the left side is {left.simpleString()}, the right side {right.simpleString()}; "
        "keysplit compares keys of one type (or two integer types): cast one side, "
        f"e.g. right.withColumn(..., F.col(...).cast('{left.simpleString()}'))"
    )


@dataclass(frozen=True, repr=False)
class JoinReport:
    """What one :func:`join` did: ``report.get`` of the :class:`Report` passed to it.

    ``hot`` has one row per split key: its key columns (named as the left side's),
    ``left_rows`` and ``right_rows`` (exact), ``share`` (of both sides' rows), the grid
    ``grid_rows × grid_columns`` and ``copied``, the rows it added by copying
    (``left_rows·(grid_columns − 1) + right_rows·(grid_rows − 1)``). ``partitions`` is the
    join's shuffle partitions, ``workers`` the tasks the sizing aimed at.
    """

    how: str
    partitions: int
    workers: int
    left_rows: int
    right_rows: int
    hot: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def rows_copied(self) -> int:
        """Rows added by the grids' copies, over both sides."""
        return int(self.hot["copied"].sum()) if self.hot.height else 0

    def __repr__(self) -> str:
        return (
            f"JoinReport(how={self.how!r}, {self.hot.height} hot keys, rows {self.left_rows:,} + "
            f"{self.right_rows:,}, copied {self.rows_copied:,}, {self.partitions} partitions)"
        )


@dataclass
class SkewJoin:
    """One :func:`join` call's plan: checked arguments in, a lazy DataFrame out."""

    left: DataFrame
    right: DataFrame
    keys: JoinKeys
    how: str
    workers: int
    partitions: int
    seed: int
    left_schema: StructType
    right_schema: StructType
    target: StructType
    key_types: list[DataType]

    @property
    def existence(self) -> bool:
        """A semi or anti join (Spark's existence joins): the left side's rows only."""
        return self.how in ("left_semi", "left_anti")

    @property
    def outer(self) -> bool:
        return self.how in ("left", "right", "full")

    def _keys(self, names: Sequence[str]) -> list[Column]:
        return [
            column(name).cast(kind).alias(_key(j))
            for j, (name, kind) in enumerate(zip(names, self.key_types, strict=True))
        ]

    def key_hash(self) -> Column:
        """``xxhash64(seed, keys)``: what a row finds its key's grid by (one long: Spark's
        fastest broadcast join)."""
        from pyspark.sql import functions as F

        return F.xxhash64(F.lit(self.seed), *[column(_key(j)) for j in range(len(self.key_types))])

    def _sides(self) -> tuple[DataFrame, DataFrame]:
        """Each side as the join's key columns, then its own columns under names of their own
        (both sides may hold a column of one name); the right side of a semi or anti join is
        its distinct keys."""

        def own(side: str, schema: StructType) -> list[Column]:
            rename = _left if side == "left" else _right
            names = {rename(i): f.name for i, f in enumerate(schema.fields)}
            return [column(names[name]).alias(name) for name in self.own(side)]

        left = self.left.select(*self._keys(self.keys.left), *own("left", self.left_schema))
        if self.existence:
            right = self.right.select(*self._keys(self.keys.right)).distinct()
        else:
            right = self.right.select(*self._keys(self.keys.right), *own("right", self.right_schema))
        return left, right

    def row_hash(self, side: str) -> Column:
        """``xxhash64(seed, the row's keys and columns)`` of a row of ``side`` (but columns
        holding a map, which Spark's hashes refuse): where a hot key's row goes among its
        cells, and a null key's row among the partitions. Of the row's values, not its
        position, so that a re-run task sends each row where the first run did."""
        from pyspark.sql import functions as F

        schema, rename = (self.left_schema, _left) if side == "left" else (self.right_schema, _right)
        hashable = {rename(i) for i, f in enumerate(schema.fields) if not holds_a_map(f.dataType)}
        names = [_key(j) for j in range(len(self.key_types))] + [n for n in self.own(side) if n in hashable]
        return F.xxhash64(F.lit(self.seed), *[column(name) for name in names])

    def grid(self, left: DataFrame, right: DataFrame) -> DataFrame:
        """The hot keys' grids (:mod:`.join_grid`), computed in the plan from exact counts,
        and a row of the totals."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import (
            ArrayType,
            BooleanType,
            DoubleType,
            IntegerType,
            LongType,
            StructField,
            StructType,
        )

        keys = [_key(j) for j in range(len(self.key_types))]
        present = F.lit(True)
        for name in keys:
            present = present & column(name).isNotNull()
        counts = (
            left.filter(present)
            .groupBy(*keys)
            .agg(F.count(F.lit(1)).alias(LEFT_ROWS))
            .join(right.filter(present).groupBy(*keys).agg(F.count(F.lit(1)).alias(RIGHT_ROWS)), keys, "full")
            .fillna(0, subset=[LEFT_ROWS, RIGHT_ROWS])
        )
        output = F.lit(0) if self.existence else column(LEFT_ROWS).cast("double") * column(RIGHT_ROWS)
        counts = counts.select(
            self.key_hash().alias(KEY_HASH),
            *keys,
            LEFT_ROWS,
            RIGHT_ROWS,
            (column(LEFT_ROWS) + column(RIGHT_ROWS) + output).cast("double").alias(WORK),
        )
        key_fields = [StructField(_key(j), kind, True) for j, kind in enumerate(self.key_types)]
        summaries = StructType(
            [
                StructField(KEY_HASH, LongType(), True),
                *key_fields,
                StructField(LEFT_ROWS, LongType(), False),
                StructField(RIGHT_ROWS, LongType(), False),
                StructField(WORK, DoubleType(), False),
                StructField(TOTALS, BooleanType(), False),
            ]
        )
        schema = StructType(
            [
                StructField(KEY_HASH, LongType(), False),
                *key_fields,
                StructField(LEFT_ROWS, LongType(), False),
                StructField(RIGHT_ROWS, LongType(), False),
                StructField(GRID_ROWS, IntegerType(), False),
                StructField(GRID_COLUMNS, IntegerType(), False),
                StructField(SALTS, ArrayType(IntegerType(), False), False),
            ]
        )
        task = JoinGrid(
            tuple(keys),
            tuple(kind.simpleString() for kind in self.key_types),
            self.partitions,
            self.workers,
            copy_left=not self.existence,
        )
        # One chain from the counts, so that Spark computes them once: each count partition's
        # heaviest keys and totals, then the grids in one task (repartitioned, not
        # coalesced: coalescing would run the counting in that one task).
        local = counts.mapInArrow(LocalTop(tuple(keys), self.workers + 1), summaries)
        return local.repartition(1).mapInArrow(task, schema)

    def plan(self, report: Report[JoinReport] | None) -> DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        left, right = self._sides()
        keys = [_key(j) for j in range(len(self.key_types))]
        grid = self.grid(left, right)
        # Observed in each side's copy under a name of its own: one name observed in two
        # places of a plan reports nothing. Both copies read the same exchanges, which Spark
        # runs once.
        tables = (grid, grid)
        if report is not None:
            observations: tuple[Any, Any] = (Observation(), Observation())
            seen = F.collect_list(F.struct(*keys, LEFT_ROWS, RIGHT_ROWS, GRID_ROWS, GRID_COLUMNS)).alias("grid")
            tables = (grid.observe(observations[0], seen), grid.observe(observations[1], seen))
            report.bind(lambda: self._report(observations))
        missing = F.lit(False)
        for name in keys:
            missing = missing | column(name).isNull()
        # A row's key is hot when the table holds its hash and, there, its key.
        is_hot = F.coalesce(column(GRID_ROWS) > 0, F.lit(False))
        for j, name in enumerate(keys):
            is_hot = is_hot & F.coalesce(column(name) == column(_hot(j)), F.lit(False))

        def cold_cell(side: str) -> Column:
            """A cold key's row's cell, 0; a null key's, which never matches, a cell by its
            hash, so that nulls are spread over the partitions."""
            spread = F.pmod(self.row_hash(side), F.lit(self.partitions)).cast("int")
            return F.when(missing, spread).otherwise(F.lit(0))

        # A hot key's left row: its grid row (by its hash) and the cells along it; a right
        # row: its grid column and the cells down it. Hashed only for a hot key's rows.
        grid_row = F.pmod(self.row_hash("left"), column(GRID_ROWS)).cast("int")
        along = F.transform(
            F.sequence(F.lit(0), column(GRID_COLUMNS) - 1),
            lambda b: F.element_at(column(SALTS), grid_row * column(GRID_COLUMNS) + b + 1),
        )
        grid_column = F.pmod(self.row_hash("right"), column(GRID_COLUMNS)).cast("int")
        down = F.transform(
            F.sequence(F.lit(0), column(GRID_ROWS) - 1),
            lambda a: F.element_at(column(SALTS), a * column(GRID_COLUMNS) + grid_column + 1),
        )
        # An outer join's rows carry whether their key has partners, and a mark that tells
        # a matched row from a null-extended one.
        left_marks = (
            [F.when(is_hot, column(RIGHT_ROWS)).alias(_LEFT_PARTNERS), F.lit(True).alias(_LEFT_SEEN)]
            if self.outer
            else []
        )
        right_marks = (
            [F.when(is_hot, column(LEFT_ROWS)).alias(_RIGHT_PARTNERS), F.lit(True).alias(_RIGHT_SEEN)]
            if self.outer
            else []
        )

        def tagged(side: DataFrame, table: DataFrame) -> DataFrame:
            lookup = table.select(
                KEY_HASH,
                *[column(name).alias(_hot(j)) for j, name in enumerate(keys)],
                LEFT_ROWS,
                RIGHT_ROWS,
                GRID_ROWS,
                GRID_COLUMNS,
                SALTS,
            )
            return side.withColumn(KEY_HASH, self.key_hash()).join(F.broadcast(lookup), KEY_HASH, "left")

        # A hot key's row has its cells (one for a semi or anti join's left row, which is
        # never copied); a cold key's row comes out of the explode once, as a null, and takes
        # its one cell after.
        left_cell = F.element_at(F.when(is_hot, along), 1) if self.existence else F.explode_outer(F.when(is_hot, along))
        left = tagged(left, tables[0]).select(
            *keys, left_cell.alias(_CELL), *[column(name) for name in self.own("left")], *left_marks
        )
        right = tagged(right, tables[1]).select(
            *keys,
            F.explode_outer(F.when(is_hot, down)).alias(_CELL),
            *[column(name) for name in self.own("right")],
            *right_marks,
        )
        left = left.withColumn(_CELL, F.coalesce(column(_CELL), cold_cell("left")))
        right = right.withColumn(_CELL, F.coalesce(column(_CELL), cold_cell("right")))
        joined = left.join(right, [*keys, _CELL], self.how)
        if self.outer:
            # A hot key's row copied to a cell without its partners came out unmatched
            # there; it has partners (the exact counts say so) in another cell.
            unmatched_left = column(_RIGHT_SEEN).isNull() & (F.coalesce(column(_LEFT_PARTNERS), F.lit(0)) > 0)
            unmatched_right = column(_LEFT_SEEN).isNull() & (F.coalesce(column(_RIGHT_PARTNERS), F.lit(0)) > 0)
            joined = joined.filter(~unmatched_left & ~unmatched_right)
        return joined.select(
            *[
                expression.cast(f.dataType).alias(f.name)
                for expression, f in zip(self._output(), self.target.fields, strict=True)
            ]
        )

    def own(self, side: str) -> list[str]:
        """The renamed columns of ``side`` that the join carries: all of its own, but the
        keys of a ``USING`` join (which the join's key columns give) and the right side of
        a semi or anti join."""
        schema, keys, rename = (
            (self.left_schema, self.keys.left, _left)
            if side == "left"
            else (self.right_schema, self.keys.right, _right)
        )
        if side == "right" and self.existence:
            return []
        return [rename(i) for i, f in enumerate(schema.fields) if not (self.keys.using and f.name in keys)]

    def _output(self) -> list[Column]:
        """Spark's output columns of the join, in its order, from the renamed ones."""
        keys = [_key(j) for j in range(len(self.key_types))] if self.keys.using else []
        return [column(name) for name in (*keys, *self.own("left"), *self.own("right"))]

    def _report(self, observations: tuple[Any, Any]) -> JoinReport | None:
        seen = observed(observations[0]) or observed(observations[1])
        if not seen:
            return None
        keys = [_key(j) for j in range(len(self.key_types))]
        names = list(self.keys.left)
        rows = observed_rows(
            seen.get("grid", []),
            (*keys, LEFT_ROWS, RIGHT_ROWS, GRID_ROWS, GRID_COLUMNS),
            (*names, "left_rows", "right_rows", "grid_rows", "grid_columns"),
        )
        totals = rows.filter(pl.col("grid_rows") == 0)
        left_rows, right_rows = (int(totals[side][0]) if totals.height else 0 for side in ("left_rows", "right_rows"))
        hot = rows.filter(pl.col("grid_rows") > 0)
        if hot.height:
            hot = (
                hot.unique(names, keep="first", maintain_order=True)
                .with_columns(
                    ((pl.col("left_rows") + pl.col("right_rows")) / max(left_rows + right_rows, 1)).alias("share"),
                    (
                        pl.col("left_rows") * (pl.col("grid_columns") - 1)
                        + pl.col("right_rows") * (pl.col("grid_rows") - 1)
                    ).alias("copied"),
                )
                .sort("share", descending=True)
            )
        return JoinReport(
            how=self.how,
            partitions=self.partitions,
            workers=self.workers,
            left_rows=left_rows,
            right_rows=right_rows,
            hot=hot,
        )


def _shuffle_partitions(session: Session) -> int:
    """The partitions of the join's exchange: adaptive execution's initial number if set,
    else ``spark.sql.shuffle.partitions``."""
    conf = session.spark.conf

    def read() -> int:
        initial = conf.get("spark.sql.adaptive.coalescePartitions.initialPartitionNum", None)
        return int(initial or conf.get("spark.sql.shuffle.partitions") or 200)

    return int(session.call("reading settings", read))


def join(
    left: DataFrame,
    right: DataFrame,
    on: str | Sequence[str] | Column | Sequence[Column],
    how: str = "inner",
    *,
    workers: int | None = None,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    report: Report[JoinReport] | None = None,
) -> DataFrame:
    """``left.join(right, on, how)`` with the hot keys of either side split: a lazy DataFrame
    equal to Spark's join as a multiset of rows, with Spark's columns in Spark's order.
    Also ``keysplit.spark.skewed(left).join(right, on, how)``.

    ``on`` is a column name, a list of names (each key once in the output, as Spark's), or an
    equality of columns (``left["a"] == right["b"]``, several joined by ``&`` or in a list).
    ``how`` is any of Spark's equi-join types: inner, left, right, full (outer), left semi,
    left anti, under any of Spark's names. Keys may be of any type Spark compares (integers,
    strings, binary, dates, ...), one type per pair (or two integer types); null keys never
    match. ``workers`` (default: the shuffle's partitions) is the number of tasks the hot keys
    are sized for: a key with more than ``1/workers`` of the join's work is split. ``seed``
    seeds the hash that spreads a hot key's rows. ``report`` (a :class:`keysplit.spark.Report`)
    is filled with a :class:`JoinReport` when an action runs the result. The plan is in the
    module's notes; no Spark job runs here.
    """
    for name, frame in (("left", left), ("right", right)):
        if not is_spark_frame(frame):
            raise ConfigTypeError(f"join's {name} side must be a Spark DataFrame, got {type(frame).__name__}")
    how = join_type(how)
    handle = session_for(left, session)
    if right.sparkSession is not left.sparkSession:
        raise ConfigError("join's sides belong to two Spark sessions; make both in one")
    seed = require_seed(seed)
    keys = join_keys(on, left, right)
    left_schema, right_schema = handle.call("reading the schemas", lambda: (left.schema, right.schema))
    for side, names, schema in (("left", keys.left, left_schema), ("right", keys.right, right_schema)):
        missing = [name for name in names if name not in schema.names]
        if missing:
            raise KeyInputError(f"join key {missing} is not a column of the {side} side; its columns: {schema.names}")
    key_types = [
        _common_type(
            quoted(a) if a == b else f"{quoted(a)} = {quoted(b)}", left_schema[a].dataType, right_schema[b].dataType
        )
        for a, b in zip(keys.left, keys.right, strict=True)
    ]
    partitions = _shuffle_partitions(handle)
    workers = partitions if workers is None else require_workers(workers)
    spark_on: Any = on
    target = handle.call("reading the join's schema", lambda: left.join(right, spark_on, how).schema)
    planned = SkewJoin(
        left=left,
        right=right,
        keys=keys,
        how=how,
        workers=workers,
        partitions=partitions,
        seed=seed,
        left_schema=left_schema,
        right_schema=right_schema,
        target=target,
        key_types=key_types,
    )
    return planned.plan(report)
