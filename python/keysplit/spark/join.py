"""``join``: Spark's equi-join, with the hot keys of either side split over a grid of tasks.

``left.join(right, on, how)`` sends every row of a key to one task. Spark's adaptive
execution splits such a task only for some join types, above a byte threshold, at map
blocks, and never when the split would add a shuffle (``docs/spark.md``). :func:`join`
returns a lazy DataFrame equal to Spark's join as a multiset of rows, whose plan does:

1. **Hot keys from a sample** (:data:`SAMPLE_FRACTION` of each side's rows), counted per
   key in Spark. A key's work is its rows on both sides and the rows it outputs,
   ``L + R + L·R`` (one side's rows where the sample saw none of the other's), each count
   estimated from the sample; a key whose work is more than a mean task's, of ``n`` tasks
   (``workers``; by default the shuffle's partitions), is hot, and one of more than a
   quarter of a mean task's is warm. A few tasks send their ``4n`` heaviest keys and
   totals to one small Python task (:mod:`.join_grid`), in one chain, so that Spark
   samples once.
2. **A grid per hot key**, in that task (a warm key gets one cell: placed whole, heaviest
   first, on the least-loaded partition, since a few warm keys hashed onto one partition
   make a straggler too): ``g`` cells, enough for the key's work at the
   counts' upper bounds (a side the sample barely saw may hold more); its left rows spread
   over ``r`` grid rows by a hash of the row's values and copied along theirs, its right
   rows over ``c`` columns, each pair meeting in one cell; ``r·c ≥ g`` with the fewest rows
   copied, so a key hot on one side only copies the other side's few rows ``r`` times and
   moves nothing else. Each cell is a value of one extra join key, chosen (by Spark's own
   hash function, ported) so that Spark's exchange puts the cell on a partition of its
   own. The table is broadcast once: each row finds its key's grid there and reads its
   cells from it.
3. **One Spark join** on the keys and the cell, hashed (with the hot keys split, every
   partition's build side is small): every cold key is in cell 0, so its rows go through
   Spark's own exchange as they would have (adaptive execution still on). A hot key's row
   copied to a cell that holds none of its partners would come out null-extended in an
   outer join: such rows are dropped, as a row is copied only when the sample saw its
   key's partners, which then exist and met it in another cell. A semi or anti join reads
   the right side's distinct keys, and copies no left row.

4. **Hot keys of few partners, joined map-side** (:meth:`SkewJoin.map_side`): where the
   grid is measured before the plan, a hot key of an inner, left, semi or anti join whose
   grid is one column wide has its left rows joined where they are read, against its right
   rows broadcast, and no exchange moves them.

5. **A chain on one key** (``join(join(facts, dim, "k"), dim2, "k")``): a join whose left
   side is the output of a split inner, left, semi or anti join on the same key columns,
   and which is itself one of those, keeps the first join's cells. The first output's rows
   stay where its exchange put them (Spark moves none of them, as it would not between two
   sort-merge joins on one key) and each right row of a key the first join split is copied
   to every cell of that key's grid; no second sample. The second join's right side is not
   sampled: a key hot there only is not split.

Where Spark's own plan broadcasts a side (under ``spark.sql.autoBroadcastJoinThreshold``,
or a ``broadcast`` hint), :func:`join` is Spark's join: the other side is not shuffled, so
no task holds a key's rows, and a split would only add a shuffle.

The sample only sizes the grids: whatever it holds, the result is exact. Rows with a null
key never match (Spark's ``=``); they are spread over the partitions, so a null-heavy outer
join has no straggler either. A row's cell depends on its values only, so a re-run task
sends each row where the first run did, and the plan survives a lost executor as Spark's
own does; rows alike in every column go to one cell.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import polars as pl
from pyspark import cloudpickle

from keysplit._checks import require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError, KeyInputError, KeyTypeError
from keysplit.spark import join_grid
from keysplit.spark.columns import column, holds_a_map, quoted
from keysplit.spark.hot_keys import LOCAL_TOP_TASKS, SAMPLE_FRACTION, WHOLE_KEY_PLACED_FROM
from keysplit.spark.intake import is_spark_frame, session_for, shuffle_partitions
from keysplit.spark.join_grid import (
    CELLS,
    GRID_COLUMNS,
    GRID_ROWS,
    KEY_HASH,
    LEFT_ROWS,
    PREFIX,
    RIGHT_ROWS,
    SEEN,
    TOTALS,
    WORK,
    JoinGrid,
    LocalTop,
)
from keysplit.spark.report import Report, batch_input, observed, observed_rows, observing
from keysplit.spark.statistics import KEY_HASH as SAMPLED_HASH
from keysplit.spark.statistics import InputSample, SampleRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa
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
#: A hot key's grid, as :meth:`SkewJoin.looked_up` finds it.
_GRID = PREFIX + "grid"
#: The most grids :meth:`SkewJoin.looked_up` holds as literals: a hot key's row finds its
#: grid among them by a linear search (Spark's map lookup), so many are looked up in a
#: broadcast table instead.
INLINED_GRIDS = 16
#: The most right rows (estimated, over every such key) a join broadcasts for its hot keys
#: joined map-side (:meth:`SkewJoin.map_side`): those rows are sent to every task that reads
#: the left side.
MAP_SIDE_ROWS = 100_000
#: Key types whose literals compare as Spark's join compares them.
_LITERAL_KEYS = frozenset({"tinyint", "smallint", "int", "bigint", "string", "date", "boolean"})
#: An outer join's row's mark: whether it is a hot key's row whose partners (the other
#: side's rows of its key) exist; null on the null-extended side of an output row.
_LEFT_MARK = PREFIX + "left_mark"
_RIGHT_MARK = PREFIX + "right_mark"
#: The first join of a physical plan's text, which prints the root first: the top join.
_PLANNED_JOIN = re.compile(r"(BroadcastHashJoin|BroadcastNestedLoopJoin|SortMergeJoin|ShuffledHashJoin)[^\n]*")


def broadcast_side(physical: str) -> str | None:
    """``"left"`` or ``"right"``: the side Spark's physical plan (``explain``'s text) of a
    join at its top broadcasts; None when it shuffles both."""
    found = _PLANNED_JOIN.search(physical)
    if found is None or not found.group(1).startswith("Broadcast"):
        return None
    return "right" if "BuildRight" in found.group(0) else "left"


def _keys_present(names: Sequence[str]) -> Column:
    """Whether none of the key columns ``names`` is null: only such keys match (Spark's ``=``)."""
    from pyspark.sql import functions as F

    present = F.lit(True)
    for name in names:
        present = present & column(name).isNotNull()
    return present


def _key(j: int) -> str:
    return f"{PREFIX}k{j}"


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


def join_key_type(name: str, left: DataType, right: DataType) -> DataType:
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

    ``left_rows`` and ``right_rows`` are each side's rows with a key (the right side of a
    semi or anti join: its distinct keys), ``rows_copied`` the rows the grids added; both
    counted exactly as the rows passed. ``hot`` has one row per key the plan split (a grid
    of more than one cell) or placed whole (a warm key, a 1 × 1 grid): its key columns
    (named as the left side's), ``left_rows`` and ``right_rows`` estimated from the sample
    (``sample_fraction`` of each side's rows) with ``left_error`` and ``right_error`` (their
    95 % bounds), ``share`` (of the sample), the grid ``grid_rows × grid_columns``, and
    ``map_side``: joined where its left rows are read, against its right rows broadcast
    (a key of few right rows whose grid was measured before the plan; it copies nothing).
    ``partitions`` is the join's shuffle partitions, ``workers`` the tasks the sizing aimed at.
    ``broadcast`` is the side Spark's own plan broadcasts, when it does: the join is then
    Spark's, which moves no row of the other side, so nothing is sampled, split or copied
    (``hot`` is empty, ``sample_fraction`` 0, and ``right_rows`` of a semi or anti join
    counts its rows with a key).
    """

    how: str
    partitions: int
    workers: int
    left_rows: int
    right_rows: int
    rows_copied: int
    sample_fraction: float
    hot: pl.DataFrame = field(default_factory=pl.DataFrame)
    broadcast: str | None = None
    #: Why Spark's own join ran instead of keysplit's (the cost guard's rule, with its
    #: figures), or None when keysplit's plan ran.
    left_to_spark: str | None = None

    def __repr__(self) -> str:
        plan = (
            f"Spark broadcasts the {self.broadcast} side"
            if self.broadcast
            else "Spark's own join"
            if self.left_to_spark
            else f"{self.hot.height} hot keys"
        )
        return (
            f"JoinReport(how={self.how!r}, {plan}, rows {self.left_rows:,} + "
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
    #: The split join whose output is this one's left side, when this join can keep that
    #: one's cells (:meth:`_chained`).
    prior: SkewJoin | None = None
    #: The side Spark's own plan broadcasts (then no key moves, and Spark's join is kept).
    broadcast: str | None = None
    #: The fraction of each side's rows the hot keys are found from.
    sample_fraction: float = SAMPLE_FRACTION
    #: ``on`` as the caller gave it, for Spark's own join.
    on: Any = None
    #: Set by :meth:`plan`: the grid table and the joined rows (keys and cell columns kept),
    #: for a join chained on this one.
    table: DataFrame | None = field(default=None, init=False)
    joined: DataFrame | None = field(default=None, init=False)

    @property
    def existence(self) -> bool:
        """A semi or anti join (Spark's existence joins): the left side's rows only."""
        return self.how in ("left_semi", "left_anti")

    @property
    def outer(self) -> bool:
        return self.how in ("left", "right", "full")

    def key_hash(self) -> Column:
        """``xxhash64(seed, keys)``: what the grid task orders and tells keys apart by, so
        that every run places alike."""
        from pyspark.sql import functions as F

        return F.xxhash64(F.lit(self.seed), *[column(_key(j)) for j in range(len(self.key_types))])

    def _side(self, side: str) -> DataFrame:
        """``side`` as the join's key columns, then its own columns under names of their own,
        given by position (both sides may hold a column of one name, and a side that is a
        join's output two); the right side of a semi or anti join is its distinct keys."""
        frame, schema, names, rename = (
            (self.left, self.left_schema, self.keys.left, _left)
            if side == "left"
            else (self.right, self.right_schema, self.keys.right, _right)
        )
        first: dict[str, int] = {}
        for i, f in enumerate(schema.fields):
            first.setdefault(f.name, i)
        keys = [
            column(rename(first[name])).cast(kind).alias(_key(j))
            for j, (name, kind) in enumerate(zip(names, self.key_types, strict=True))
        ]
        renamed = frame.toDF(*[rename(i) for i in range(len(schema.fields))])
        if side == "right" and self.existence:
            return renamed.select(*keys).distinct()
        return renamed.select(*keys, *self.own(side))

    def observed_grid(self, table: DataFrame, observation: Any) -> DataFrame:
        """``table`` observed: its hot keys' counts and grids, for the report."""
        from pyspark.sql import functions as F

        keys = [_key(j) for j in range(len(self.key_types))]
        return observing(
            table,
            observation,
            F.collect_list(F.struct(*keys, LEFT_ROWS, RIGHT_ROWS, GRID_ROWS, GRID_COLUMNS)).alias("grid"),
        )

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

    def present(self) -> Column:
        """Whether a row's key has no null: only such keys match."""
        return _keys_present([_key(j) for j in range(len(self.key_types))])

    def looked_up_in(self, side: DataFrame, table: DataFrame) -> DataFrame:
        """``side`` with its key's :data:`GRID_ROWS`, :data:`GRID_COLUMNS`, :data:`CELLS` and
        :data:`SEEN` from the grid ``table``, broadcast (null for a key not in it: joined on
        the keys, a null key matches nothing, and the totals' row has null keys)."""
        from pyspark.sql import functions as F

        keys = [_key(j) for j in range(len(self.key_types))]
        return side.join(F.broadcast(table.select(*keys, GRID_ROWS, GRID_COLUMNS, CELLS, SEEN)), keys, "left")

    def inlines(self, hot_grids: list[dict[str, Any]]) -> bool:
        """Whether :meth:`looked_up` can hold these grids as literals: a few of them, on one
        key column of a type whose literal compares as the join compares (integers, plain
        strings, dates, booleans; not floats, whose joins normalise ``-0.0`` and ``NaN``, nor
        a collated string)."""
        kinds = [kind.simpleString() for kind in self.key_types]
        return 0 < len(hot_grids) <= INLINED_GRIDS and len(kinds) == 1 and kinds[0] in _LITERAL_KEYS

    def looked_up(self, side: DataFrame, hot_grids: list[dict[str, Any]]) -> DataFrame:
        """:meth:`looked_up_in` for grids held as literals in the plan: a set membership per
        row, and for a hot key's row its grid from a literal map. Spark's broadcast join costs
        a hash probe and a row copy per row, which measured about a quarter of the map stage
        of a join of 10^7 rows (its scan and exchange) where this costs a twentieth."""
        from pyspark.sql import functions as F

        [kind] = self.key_types
        key = column(_key(0))
        values = [F.lit(row[_key(0)]).cast(kind) for row in hot_grids]
        grids = F.create_map(
            *[
                part
                for value, row in zip(values, hot_grids, strict=True)
                for part in (
                    value,
                    F.struct(
                        F.lit(row[GRID_ROWS]).cast("int").alias(GRID_ROWS),
                        F.lit(row[GRID_COLUMNS]).cast("int").alias(GRID_COLUMNS),
                        F.array(*[F.lit(cell).cast("int") for cell in row[CELLS]]).alias(CELLS),
                        F.lit(row[SEEN]).cast("int").alias(SEEN),
                    ),
                )
            ]
        )
        found = F.when(key.isin(*values), F.element_at(grids, key))
        side = side.withColumn(_GRID, found)
        return side.withColumns(
            {name: column(_GRID).getField(name) for name in (GRID_ROWS, GRID_COLUMNS, CELLS, SEEN)}
        ).drop(_GRID)

    def grid(self, left: DataFrame, right: DataFrame) -> DataFrame:
        """The hot keys' grids (:mod:`.join_grid`), computed in the plan from a sample of
        both sides, and a row of the sample's totals."""
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

        def sampled(side: DataFrame, name: str) -> DataFrame:
            marks = [F.lit(int(name == mark)).alias(mark) for mark in (LEFT_ROWS, RIGHT_ROWS)]
            return side.filter(self.present()).select(*keys, *marks).sample(fraction=SAMPLE_FRACTION, seed=self.seed)

        # The right side of a semi or anti join is its distinct keys: never hot.
        both = sampled(left, LEFT_ROWS)
        if not self.existence:
            both = both.unionByName(sampled(right, RIGHT_ROWS))
        estimated = {
            name: F.round(F.sum(name) / F.lit(SAMPLE_FRACTION)).cast("long").alias(name)
            for name in (LEFT_ROWS, RIGHT_ROWS)
        }
        # Counted in a few partitions (the sample is small), each one Python task's below: a
        # coalesce instead would hold every merged partition's aggregation map in one task.
        counts = both.repartition(LOCAL_TOP_TASKS, *keys).groupBy(*keys).agg(*estimated.values())
        # join_grid.key_output's formula: L·R, or one side's rows where the sample saw none
        # of the other's.
        once = F.lit(1).cast("double")
        output = (
            F.lit(0)
            if self.existence
            else F.greatest(column(LEFT_ROWS).cast("double"), once)
            * F.greatest(column(RIGHT_ROWS).cast("double"), once)
        )
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
                StructField(CELLS, ArrayType(IntegerType(), False), False),
                StructField(SEEN, IntegerType(), False),
            ]
        )
        task = self.grid_task(SAMPLE_FRACTION)
        # One chain from the sample's counts, so that Spark computes them once: each count
        # partition's heaviest keys and totals, then the grids in one task (repartitioned,
        # not coalesced, which would pull the counting into that one task).
        local = counts.mapInArrow(LocalTop(tuple(keys), self.workers * WHOLE_KEY_PLACED_FROM + 1), summaries)
        return local.repartition(1).mapInArrow(task, schema)

    def unsplit(self, report: Report[JoinReport] | None, why: str | None = None) -> DataFrame:
        """Spark's own join (where its plan broadcasts a side, or the cost guard keeps it:
        ``why``), each side's rows counted as they pass when a report is asked for."""
        if report is None:
            return self.left.join(self.right, self.on, self.how)
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        observations = [Observation(), Observation()]

        def counted(side: DataFrame, names: Sequence[str], observation: Any) -> DataFrame:
            return observing(side, observation, F.count(F.when(_keys_present(names), F.lit(1))).alias("rows"))

        def read() -> JoinReport | None:
            sides = [observed(observation) for observation in observations]
            if not all(sides):
                return None
            return self._counted(
                int(sides[0]["rows"]),
                int(sides[1]["rows"]),
                0,
                sample_fraction=0.0 if self.broadcast else self.sample_fraction,
                broadcast=self.broadcast,
                left_to_spark=why,
            )

        report.bind(read)
        left = counted(self.left, self.keys.left, observations[0])
        return left.join(counted(self.right, self.keys.right, observations[1]), self.on, self.how)

    def grid_task(self, fraction: float) -> JoinGrid:
        """The task that sizes the hot keys' grids from counts of ``fraction`` of the rows."""
        return JoinGrid(
            tuple(_key(j) for j in range(len(self.key_types))),
            tuple(kind.simpleString() for kind in self.key_types),
            self.partitions,
            self.workers,
            copy_left=not self.existence,
            fraction=fraction,
            placed_from=WHOLE_KEY_PLACED_FROM,
        )

    def sample_requests(self, fraction: float) -> list[SampleRequest]:
        """What :mod:`.statistics` samples for this join, each side at ``fraction``: its rows
        with no null key, their key hash and keys (a semi or anti join's left side only)."""
        keys = tuple(column(_key(j)) for j in range(len(self.key_types)))
        sides = ["left"] if self.existence else ["left", "right"]
        names = tuple(_key(j) for j in range(len(self.key_types)))
        return [
            SampleRequest(
                self._side(side),
                self.key_hash(),
                keys,
                names,
                self.present(),
                fraction,
                statistics_of=self.left if side == "left" else self.right,
            )
            for side in sides
        ]

    def measured_grid(self, samples: Sequence[InputSample]) -> pa.Table | None:
        """:meth:`grid` computed here from both sides' ``samples`` (:mod:`.statistics`) by the
        same tasks (:class:`LocalTop`, :class:`JoinGrid`), for :meth:`plan` to hold as a literal
        table: the plan then has no sampling stage. None when no key is given a cell (Spark's
        own join is then right)."""
        import pyarrow as pa

        keys = [_key(j) for j in range(len(self.key_types))]
        fraction = samples[0].fraction
        counted = []
        for sample, name in zip(samples, (LEFT_ROWS, RIGHT_ROWS), strict=False):
            counts = sample.rows.group_by(SAMPLED_HASH, *keys).agg(pl.len().alias(name))
            counted.append(counts)
        both = counted[0]
        if len(counted) == 2:
            both = both.join(counted[1], on=[SAMPLED_HASH, *keys], how="full", coalesce=True)
        else:
            both = both.with_columns(pl.lit(0).alias(RIGHT_ROWS))
        estimated = [
            (pl.col(name).fill_null(0) / fraction).round().cast(pl.Int64).alias(name)
            for name in (LEFT_ROWS, RIGHT_ROWS)
        ]
        both = both.with_columns(estimated)
        output = (
            pl.lit(0.0)
            if self.existence
            else pl.max_horizontal(pl.col(LEFT_ROWS), 1).cast(pl.Float64) * pl.max_horizontal(pl.col(RIGHT_ROWS), 1)
        )
        both = both.with_columns((pl.col(LEFT_ROWS) + pl.col(RIGHT_ROWS) + output).cast(pl.Float64).alias(WORK))
        types = samples[0].table.schema
        counts = pa.Table.from_arrays(
            [
                both[SAMPLED_HASH].to_arrow().cast(pa.int64()),
                *[both[name].to_arrow().cast(types.field(name).type) for name in keys],
                both[LEFT_ROWS].to_arrow().cast(pa.int64()),
                both[RIGHT_ROWS].to_arrow().cast(pa.int64()),
                both[WORK].to_arrow().cast(pa.float64()),
            ],
            names=[KEY_HASH, *keys, LEFT_ROWS, RIGHT_ROWS, WORK],
        )
        top = LocalTop(tuple(keys), self.workers * WHOLE_KEY_PLACED_FROM + 1)
        task = self.grid_task(fraction)
        grid = pa.Table.from_batches(list(task(top(iter(counts.to_batches())))))
        return grid if grid.num_rows > 1 else None

    def grid_keys(self, measured: pa.Table) -> frozenset[tuple[Any, ...]]:
        """The keys the ``measured`` grid splits (:meth:`branches`' hot branch), as tuples in
        the join's key order."""
        keys = [_key(j) for j in range(len(self.key_types))]
        return frozenset(tuple(row[k] for k in keys) for row in measured.to_pylist() if row[GRID_ROWS] > 0)

    def plan(
        self, report: Report[JoinReport] | None, measured: pa.Table | None = None, *, hot_only: bool = False
    ) -> DataFrame:
        """The lazy plan; its hot keys' grid as :meth:`measured_grid` made it (a literal table
        in the plan, and in the report as it is), or (None) from :meth:`grid`'s sample in the
        plan. ``hot_only``: both sides hold the grid's hot keys' rows alone (:meth:`branches`)."""

        if self.prior is not None:
            return self._chained(self.prior, report)
        left, right = self._side("left"), self._side("right")
        if measured is not None:
            rows = measured.to_pylist()
            broadcast = self.map_side([row for row in rows if row[GRID_ROWS] > 0])
            if broadcast:
                return self._map_side_plan(report, measured, rows, broadcast, left, right, hot_only=hot_only)
        grid, joined = self._grid_joined(left, right, report, measured)
        return self._result(grid, joined)

    def map_side(self, hot_grids: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The hot keys (their grids) joined map-side (:meth:`_map_side_plan`): of an inner,
        left, semi or anti join, those one grid column wide, whose right rows the grid would
        copy to every grid row, while their estimated right rows are at most
        :data:`MAP_SIDE_ROWS` in all (a semi or anti join reads one right row per key)."""
        if self.how not in ("inner", "left", "left_semi", "left_anti"):
            return []
        found = [row for row in hot_grids if row[GRID_COLUMNS] == 1]
        return found if sum(row[RIGHT_ROWS] for row in found) <= MAP_SIDE_ROWS else []

    def _map_side_plan(
        self,
        report: Report[JoinReport] | None,
        measured: pa.Table,
        rows: list[dict[str, Any]],
        broadcast: list[dict[str, Any]],
        left: DataFrame,
        right: DataFrame,
        *,
        hot_only: bool,
    ) -> DataFrame:
        """The plan where some hot keys are joined map-side (:meth:`map_side`): their left rows
        joined where they are read, against their right rows broadcast (Spark's broadcast hash
        join: no exchange moves them, and the tasks that read them share their output), and
        every other row by :meth:`_grid_joined` with the other grids, or by Spark's own join
        when none is left (none at all where ``hot_only`` and every hot key is joined
        map-side: adaptive execution would drop that empty join with what it observes). Which
        rows are those keys' is a literal set where :meth:`inlines` allows, else a broadcast
        join with their keys."""
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        keys = [_key(j) for j in range(len(self.key_types))]
        chosen = {id(row) for row in broadcast}
        if self.inlines(broadcast):
            [kind] = self.key_types
            among = F.coalesce(
                column(_key(0)).isin(*[F.lit(row[_key(0)]).cast(kind) for row in broadcast]), F.lit(False)
            )

            def of(side: DataFrame, hot: bool) -> DataFrame:
                return side.filter(among if hot else ~among)

        else:
            picked = measured.filter(pa.array([id(row) in chosen for row in rows])).select(keys)
            table = self.left.sparkSession.createDataFrame(picked)
            table = F.broadcast(
                table.select(*[column(k).cast(t).alias(k) for k, t in zip(keys, self.key_types, strict=True)])
            )

            def of(side: DataFrame, hot: bool) -> DataFrame:
                # A null key is in no table: an anti join keeps its row, as it should.
                return side.join(table, keys, "left_semi" if hot else "left_anti")

        hot_left, hot_right = of(left, True), of(right, True)
        rest_left, rest_right = of(left, False), of(right, False)
        rest_split = any(row[GRID_ROWS] > 0 and id(row) not in chosen for row in rows)
        rest_read = rest_split or not hot_only
        within: Report[JoinReport] | None = Report() if report is not None and rest_split else None
        observations: list[Any] = [Observation() for _ in range(4)] if report is not None else []
        if report is not None:
            hot_left, hot_right = (
                observing(side, observations[i], F.count(F.lit(1)).alias("rows"))
                for i, side in enumerate((hot_left, hot_right))
            )
            if not rest_split and rest_read:
                rest_left, rest_right = (
                    observing(side, observations[2 + i], F.count(F.when(self.present(), F.lit(1))).alias("rows"))
                    for i, side in enumerate((rest_left, rest_right))
                )
        if rest_split:
            rest_measured = measured.filter(pa.array([id(row) not in chosen for row in rows]))
            _, rest = self._grid_joined(rest_left, rest_right, within, rest_measured)
        else:
            rest = rest_left.join(rest_right, keys, self.how)
        hot = hot_left.join(F.broadcast(hot_right), keys, self.how)
        if report is not None:

            def read() -> JoinReport | None:
                # Each side's rows: (left, right) of the hot keys joined map-side, then of the rest
                # where it is Spark's own join (the grid's report counts its own).
                read_apart = 4 if rest_read and not rest_split else 2
                seen = [observed(observation) for observation in observations[:read_apart]]
                if not all(seen) or (within is not None and not within.ready):
                    return None
                counted = [int(figures["rows"]) for figures in seen]
                sides = [sum(counted[0::2]), sum(counted[1::2])]
                copied = 0
                if within is not None:
                    sides = [sides[0] + within.get.left_rows, sides[1] + within.get.right_rows]
                    copied = within.get.rows_copied
                return self._counted(sides[0], sides[1], copied, hot=self._hot_table(rows, chosen))

            report.bind(read)
        output = [expression.alias(f.name) for expression, f in zip(self._output(), self.target.fields, strict=True)]
        return hot.select(*output).union(rest.select(*output)) if rest_read else hot.select(*output)

    def _grid_joined(
        self,
        left: DataFrame,
        right: DataFrame,
        report: Report[JoinReport] | None,
        measured: pa.Table | None,
    ) -> tuple[DataFrame, DataFrame]:
        """The grid table and the rows of ``left`` and ``right`` (:meth:`_side`'s) joined on
        the keys and the cell: :meth:`plan`'s, before its output columns."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        keys = [_key(j) for j in range(len(self.key_types))]
        if measured is None:
            grid = self.grid(left, right)
        else:
            literal = self.left.sparkSession.createDataFrame(measured)
            grid = literal.withColumns({_key(j): column(_key(j)).cast(kind) for j, kind in enumerate(self.key_types)})
        known = None if measured is None else measured.to_pylist()
        hot_grids = [] if known is None else [row for row in known if row[GRID_ROWS] > 0]
        # A row's key is hot when its grid was found (:meth:`looked_up`, :meth:`looked_up_in`).
        is_hot = column(GRID_ROWS).isNotNull()
        inline = measured is not None and self.inlines(hot_grids)
        # Each observation under a name of its own: one name observed in two places of a plan
        # reports nothing. The grid is observed in both sides' copies (Spark computes it
        # once); each side's rows and copies exactly, as it passes.
        observations: list[Any] = [Observation() for _ in range(4)] if report is not None else []
        tables = [grid, grid]
        if report is not None and measured is None:
            tables = [self.observed_grid(grid, observations[i]) for i in (0, 1)]
        # A side whose every hot key has one cell per row (a left side's grids one column
        # wide, as a semi or anti join's, or a right side's one row high) reads one cell, not
        # an array of them exploded.
        one_cell = {
            "left": bool(hot_grids) and all(row[GRID_COLUMNS] == 1 for row in hot_grids),
            "right": bool(hot_grids) and all(row[GRID_ROWS] == 1 for row in hot_grids),
        }

        def tagged(side: DataFrame, table: DataFrame, i: int) -> DataFrame:
            """``side``'s rows with their key's grid, if hot (:meth:`looked_up`), and their
            cells: a left row's along its grid row, a right row's down its grid column, each
            picked by the row's hash (computed for a hot key's row only)."""
            name = "left" if i == 2 else "right"
            side = self.looked_up(side, hot_grids) if inline else self.looked_up_in(side, table)
            if report is not None:
                copies = GRID_COLUMNS if name == "left" else GRID_ROWS
                side = observing(
                    side,
                    observations[i],
                    F.count(F.when(self.present(), F.lit(1))).alias("rows"),
                    F.coalesce(F.sum(F.when(is_hot, column(copies) - 1)), F.lit(0)).alias("copied"),
                )
            rows_, columns = column(GRID_ROWS), column(GRID_COLUMNS)
            if name == "left":
                first = F.pmod(self.row_hash(name), rows_).cast("int") * columns + 1
                count = columns
            else:
                first = rows_ * columns + F.pmod(self.row_hash(name), columns).cast("int") * rows_ + 1
                count = rows_
            if one_cell[name]:
                cell = F.element_at(column(CELLS), first)
                return side.withColumn(_CELL, F.coalesce(F.when(is_hot, cell), cold_cell(name)))
            cells = F.coalesce(F.when(is_hot, F.slice(column(CELLS), first, count)), F.array(cold_cell(name)))
            return side.withColumn(_CELL, F.explode(cells))

        def cold_cell(side: str) -> Column:
            """A cold key's row's one cell, 0; a null key's, which never matches, a cell by its
            hash, so that nulls are spread over the partitions."""
            spread = F.pmod(self.row_hash(side), F.lit(self.partitions)).cast("int")
            return F.when(~self.present(), spread).otherwise(F.lit(0))

        left, right = tagged(left, tables[0], 2), tagged(right, tables[1], 3)
        if report is not None:
            report.bind(lambda: self._report(observations, known))
        # An outer join's rows are marked (see _LEFT_MARK): a hot key's row copied to a cell
        # without its partners comes out unmatched there, and is dropped after the join.
        left_marks = [(is_hot & (F.shiftright(column(SEEN), 1) == 1)).alias(_LEFT_MARK)] if self.outer else []
        right_marks = [(is_hot & (column(SEEN) % 2 == 1)).alias(_RIGHT_MARK)] if self.outer else []
        left = left.select(*keys, _CELL, *[column(name) for name in self.own("left")], *left_marks)
        right = right.select(*keys, _CELL, *[column(name) for name in self.own("right")], *right_marks)
        # A hash join, not Spark's default sort-merge: with the hot keys split, every
        # partition's build side is a mean task's, and a sort on (key, cell) would compare
        # whole rows where the hot key's rows tie on the key.
        joined = left.hint("shuffle_hash").join(right.hint("shuffle_hash"), [*keys, _CELL], self.how)
        if self.outer:
            # A copy's partners exist (sample counts are of rows that exist), so it met them
            # in another cell.
            unmatched_left = column(_RIGHT_MARK).isNull() & column(_LEFT_MARK)
            unmatched_right = column(_LEFT_MARK).isNull() & column(_RIGHT_MARK)
            joined = joined.filter(~unmatched_left & ~unmatched_right)
        return grid, joined

    def branches(self, report: Report[JoinReport] | None, measured: pa.Table) -> tuple[DataFrame, DataFrame]:
        """:meth:`plan`'s rows in two branches: the keys not in the ``measured`` grid by Spark's
        own join of each side's other rows (its output partitioned by the keys, as Spark's),
        and the grid's keys by keysplit's plan of their rows alone. An operator on the keys
        above reads each apart (:func:`keysplit.spark.optimize` fuses it so). Each side is
        read twice, once per branch, through a broadcast lookup of the grid's keys (a null
        key is in no grid: its row goes with the keys not hot). The report's ``left_rows``
        and ``right_rows`` count both branches' rows with a key."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        grid = self.left.sparkSession.createDataFrame(measured).filter(column(GRID_ROWS) > 0)
        looked_up = [f"{PREFIX}hot{j}" for j in range(len(self.key_types))]
        hot_keys = F.broadcast(grid.select(*[column(_key(j)).alias(name) for j, name in enumerate(looked_up)]))

        def split(side: DataFrame, names: Sequence[str], how: str) -> DataFrame:
            equal = [column(name) == column(key) for name, key in zip(names, looked_up, strict=True)]
            return side.join(hot_keys, equal, how)

        sides = [(self.left, self.keys.left), (self.right, self.keys.right)]
        cold_sides = [split(side, names, "left_anti") for side, names in sides]
        inner: Report[JoinReport] | None = Report() if report is not None else None
        hot_left, hot_right = (split(side, names, "left_semi") for side, names in sides)
        hot = replace(self, left=hot_left, right=hot_right).plan(inner, measured, hot_only=True)
        if report is not None:
            assert inner is not None
            observations: list[Any] = [Observation(), Observation()]
            cold_sides = [
                observing(side, observation, F.count(F.when(_keys_present(names), F.lit(1))).alias("rows"))
                for (side, observation), (_, names) in zip(
                    zip(cold_sides, observations, strict=True), sides, strict=True
                )
            ]

            def read() -> JoinReport | None:
                if not inner.ready:
                    return None
                counted = [int(observed(observation).get("rows", 0)) for observation in observations]
                within = inner.get
                return replace(
                    within, left_rows=within.left_rows + counted[0], right_rows=within.right_rows + counted[1]
                )

            report.bind(read)
        cold = cold_sides[0].join(cold_sides[1], self.on, self.how)
        return cold, hot

    def _chained(self, prior: SkewJoin, report: Report[JoinReport] | None) -> DataFrame:
        """This join on the output of ``prior``, a split join on the same keys: the output's
        rows stay in ``prior``'s cells, where Spark's exchange put them (so Spark moves none
        of them again, as it would not between two sort-merge joins on one key), and each
        right row of a key ``prior`` split is copied to every cell of its grid. Each output
        row of ``prior`` sits in one cell and meets there every right row of its key, once."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        assert prior.table is not None and prior.joined is not None
        keys = [_key(j) for j in range(len(self.key_types))]
        outputs = dict(zip((_left(i) for i in range(len(self.left_schema.fields))), prior._output(), strict=True))
        left = prior.joined.select(*keys, _CELL, *[outputs[name].alias(name) for name in self.own("left")])
        right = self._side("right").filter(self.present())
        observations: list[Any] = [Observation() for _ in range(4)] if report is not None else []
        table = prior.table
        is_hot = column(GRID_ROWS).isNotNull()
        every_cell = column(GRID_ROWS) * column(GRID_COLUMNS)
        if report is not None:
            table = self.observed_grid(table, observations[0])
            left = observing(left, observations[2], F.count(F.when(self.present(), F.lit(1))).alias("rows"))
        right = right.join(F.broadcast(table.select(*keys, GRID_ROWS, GRID_COLUMNS, CELLS)), keys, "left")
        if report is not None:
            right = observing(
                right,
                observations[3],
                F.count(F.lit(1)).alias("rows"),
                F.coalesce(F.sum(F.when(is_hot, every_cell - 1)), F.lit(0)).alias("copied"),
            )
            report.bind(lambda: self._report(observations))
        cells = F.coalesce(F.when(is_hot, F.slice(column(CELLS), 1, every_cell)), F.array(F.lit(0)))
        right = right.select(*keys, F.explode(cells).alias(_CELL), *[column(name) for name in self.own("right")])
        joined = left.hint("shuffle_hash").join(right.hint("shuffle_hash"), [*keys, _CELL], self.how)
        return self._result(prior.table, joined)

    def _result(self, table: DataFrame, joined: DataFrame) -> DataFrame:
        """The joined rows as Spark's output columns; the table and the rows kept for a join
        chained on this one."""
        self.table, self.joined = table, joined
        return joined.select(
            *[expression.alias(f.name) for expression, f in zip(self._output(), self.target.fields, strict=True)]
        )

    def keeps_cells_of(self, prior: SkewJoin) -> bool:
        """Whether this join, on the output of ``prior``, can keep ``prior``'s cells: both
        inner, left, semi or anti joins (whose output rows are left rows, in the cells of
        their keys), this one on the columns ``prior`` output for its keys, of their types,
        in their order, over as many partitions."""
        kept = ("inner", "left", "left_semi", "left_anti")
        names = [f.name for f in prior.target.fields]
        return (
            prior.joined is not None
            and prior.how in kept
            and self.how in kept
            and self.keys.left == prior.keys.left
            and all(names.count(name) == 1 for name in self.keys.left)
            and self.key_types == prior.key_types
            and self.partitions == prior.partitions
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
        """Spark's output columns of the join, in its order and of its types, from the
        renamed ones."""
        keys = [_key(j) for j in range(len(self.key_types))] if self.keys.using else []
        names = (*keys, *self.own("left"), *self.own("right"))
        return [column(name).cast(f.dataType) for name, f in zip(names, self.target.fields, strict=True)]

    def _report(self, observations: list[Any], known: list[dict[str, Any]] | None = None) -> JoinReport | None:
        """The report from the plan's observations, with the grid's rows ``known`` when it was
        a literal (observed, a literal table's copies in a plan that reads the join's output
        several times reported nothing)."""
        sides = [observed(observations[2]), observed(observations[3])]
        if not all(sides):
            return None
        # A grid of no hot key leaves no row to broadcast once its totals' row (of null keys)
        # is filtered out, and Spark then drops the lookup, with its observation.
        grid = {"grid": known} if known is not None else observed(observations[0]) or observed(observations[1])
        copied = int(sides[0].get("copied", 0)) + int(sides[1]["copied"])
        hot = self._hot_table(grid.get("grid", []))
        return self._counted(int(sides[0]["rows"]), int(sides[1]["rows"]), copied, hot=hot)

    def _counted(self, left_rows: int, right_rows: int, rows_copied: int, **fields: Any) -> JoinReport:
        """This join's report of the rows counted as they passed (``fields``: the others)."""
        fields.setdefault("sample_fraction", self.sample_fraction)
        return JoinReport(
            how=self.how,
            partitions=self.partitions,
            workers=self.workers,
            left_rows=left_rows,
            right_rows=right_rows,
            rows_copied=rows_copied,
            **fields,
        )

    def _hot_table(self, grid: list[dict[str, Any]], map_side: set[int] | None = None) -> pl.DataFrame:
        """:attr:`JoinReport.hot` from the grid table's rows (those of ``map_side``, by
        ``id``, joined map-side)."""
        keys = [_key(j) for j in range(len(self.key_types))]
        names = list(self.keys.left)
        rows = observed_rows(
            grid,
            (*keys, LEFT_ROWS, RIGHT_ROWS, GRID_ROWS, GRID_COLUMNS),
            (*names, "left_rows", "right_rows", "grid_rows", "grid_columns"),
        ).with_columns(pl.Series("map_side", [id(row) in (map_side or set()) for row in grid], dtype=pl.Boolean))
        totals = rows.filter(pl.col("grid_rows") == 0)
        sampled = (int(totals["left_rows"][0]) + int(totals["right_rows"][0])) if totals.height else 0
        hot = rows.filter(pl.col("grid_rows") > 0)
        if hot.height:
            # The sample's counts are ``n/f`` for ``n`` rows sampled at ``f``: a binomial count,
            # whose 95 % bound is about ``2·√(n·(1 − f))/f`` rows.
            bound = 2 * (1 - self.sample_fraction) ** 0.5 / self.sample_fraction**0.5
            hot = (
                hot.unique(names, keep="first", maintain_order=True)
                .with_columns(
                    ((pl.col("left_rows") + pl.col("right_rows")) / max(sampled, 1)).alias("share"),
                    (pl.col("left_rows").sqrt() * bound).round().cast(pl.Int64).alias("left_error"),
                    (pl.col("right_rows").sqrt() * bound).round().cast(pl.Int64).alias("right_error"),
                )
                .sort("share", descending=True)
            )
        return hot


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
    seeds the sample the hot keys are found from and the hash that spreads their rows. ``report`` (a :class:`keysplit.spark.Report`)
    is filled with a :class:`JoinReport` when an action runs the result. The plan is in the
    module's notes; no Spark job runs here.
    """
    for name, frame in (("left", left), ("right", right)):
        if not is_spark_frame(frame):
            raise ConfigTypeError(f"join's {name} side must be a Spark DataFrame, got {type(frame).__name__}")
    handle = session_for(left, session)
    planned = planned_join(left, right, on, how, workers=workers, seed=seed, handle=handle)
    batch_input(handle, report, left, right)
    if planned.broadcast is not None:
        return planned.unsplit(report)
    prior = _SPLIT.get(left)
    if prior is not None and planned.keeps_cells_of(prior):
        planned.prior = prior
    result = planned.plan(report)
    _SPLIT[result] = planned
    return result


def planned_join(
    left: DataFrame, right: DataFrame, on: Any, how: str, *, workers: int | None, seed: int, handle: Session
) -> SkewJoin:
    """:func:`join`'s arguments checked, and its plan's parts (no Spark job runs)."""
    how = join_type(how)
    if right.sparkSession is not left.sparkSession:
        raise ConfigError("join's sides belong to two Spark sessions; make both in one")
    seed = require_seed(seed)
    keys = join_keys(on, left, right)
    spark_join = left.join(right, on, how)
    left_schema, right_schema, target, physical = handle.gathered(
        "reading the join's schemas and plan",
        lambda: left.schema,
        lambda: right.schema,
        lambda: spark_join.schema,
        lambda: handle.explained(spark_join),
        check=lambda: _check_keys(keys, *handle.call("reading the schemas", lambda: (left.schema, right.schema))),
    )
    _check_keys(keys, left_schema, right_schema)
    key_types = [
        join_key_type(
            quoted(a) if a == b else f"{quoted(a)} = {quoted(b)}", left_schema[a].dataType, right_schema[b].dataType
        )
        for a, b in zip(keys.left, keys.right, strict=True)
    ]
    partitions = shuffle_partitions(handle)
    workers = partitions if workers is None else require_workers(workers)
    return SkewJoin(
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
        broadcast=broadcast_side(physical),
        on=on,
    )


def _check_keys(keys: JoinKeys, left_schema: StructType, right_schema: StructType) -> None:
    """Raises where a join key is not one column of its side."""
    for side, names, schema in (("left", keys.left, left_schema), ("right", keys.right, right_schema)):
        missing = [name for name in names if name not in schema.names]
        if missing:
            raise KeyInputError(f"join key {missing} is not a column of the {side} side; its columns: {schema.names}")
        twice = [name for name in names if schema.names.count(name) > 1]
        if twice:
            raise KeyInputError(
                f"join key {twice} names two columns of the {side} side ({schema.names}), as Spark's own join "
                "would find ambiguous; name them apart first, e.g. with toDF(...)"
            )


#: Each DataFrame :func:`join` returned, with its plan: a join on its output may keep its cells.
_SPLIT: weakref.WeakKeyDictionary[DataFrame, SkewJoin] = weakref.WeakKeyDictionary()
