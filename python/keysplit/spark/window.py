"""``window``: Spark's window functions, with a hot key's window partition cut into ranges.

``F.sum("x").over(Window.partitionBy("k").orderBy("t"))`` puts every row of a key in one
task, which sorts and scans them alone; Spark has no way to split it (adaptive execution
never touches a window). :func:`window` returns a lazy DataFrame equal to
``df.withColumns(columns)``, whose plan does:

0. **One value per key.** When every column is an aggregate over the whole partition (or
   ``first``/``last`` of an unordered one), no row needs to move: Spark's ``groupBy``
   computes each key's values, combining them map-side, and they are joined back to the
   rows by the partition values. Otherwise:
1. **Hot keys and their cuts from a sample** (:data:`SAMPLE_FRACTION` of the rows, in the
   plan). A key whose rows, at the count's 95 % upper bound, are more than a mean task's
   of ``n`` (``workers``; by default the shuffle's partitions) is hot; the hot keys' rows
   fill ``n`` tasks, a key getting its part of them as chunks (at most
   :data:`MAX_CHUNKS`): ranges of the window's ordering, cut at sampled order values, so
   that rows with equal order values (peers) are never apart. The hot keys, their
   candidate cuts and where their chunks go are one row, broadcast: every branch reads
   that same row, so Spark computes it once.
2. **Keys not hot: Spark's own window.** The user's columns over the input less the hot
   keys' rows, unchanged.
3. **Hot keys: one exchange, one Spark window.** Each hot row finds its chunk by binary
   lifting over its key's cuts (Spark's own expressions) and goes to the chunk's
   partition; Spark's window runs over ``partitionBy(key, cell)`` with the user's ordering
   and frames. Both windows read their exchanges in one stage.
4. **Carries.** Each chunk's totals (rows, sums, counts, minimums, maximums, distinct
   order values), from another read of the input's hot rows, aggregated in Spark;
   a chunk's carry is the totals of the chunks before it (a window over the few chunk
   rows). A hot row's value is its chunk's value combined with the carry: a running sum
   plus the sums before, a row number plus the rows before, and so on.
5. **Edges.** ``lag``, ``lead`` and bounded ROWS frames read rows past their chunk: each
   chunk's last and first few values (``max_by``/``min_by`` over :meth:`SkewWindow.sort_key`)
   travel with the carries; ``first`` and ``last`` carry each chunk's first and last value.

A window with no ``partitionBy`` is one partition of every row, a key of one value
(:func:`.window_spec.window_request`), hot wherever there is more than one task: its ordering
is cut into ranges as a hot key's is, into ``C`` chunks. Its entry is an aggregate of the
whole sample, one row even where the sample is empty (one chunk then), so every row is
always the hot branch's: there is no branch of Spark's own, and no lookup of keys not hot.
Measured before the plan (``optimize``, ``skewed(df).withColumns``), its cuts are literals,
and each chunk's edge rows are found in bands the sample bounds (:class:`EdgeBands`),
collected by a hash aggregate, where ``max_by``/``min_by`` would sort every row. Where a
column reads the rows' order among peers, each chunk's rows reach Spark's window sorted by the
ordering and then their place among peers, the place Spark's own one task would give them
(:meth:`SkewWindow.spark_places`): one window operator over the user's ordering serves every
column.

**Groups of peers.** Where every column is the same for rows with equal order values
(peers): running aggregates over Spark's RANGE frame, ``rank``, ``dense_rank``,
``percent_rank``, ``cume_dist`` (:attr:`SkewWindow.peer_determined`), and the sample, measured
before the plan, sees the groups of peers of a window with no ``partitionBy`` hold
:data:`PEER_GROUP_ROWS` rows or more on average, no row moves (:meth:`SkewWindow.per_peer`):
each group's totals by Spark's ``groupBy``, combined map-side, the values over the groups in
order by Spark's window (one row a group), joined back to the rows (broadcast, where the
sample bounds the groups under :data:`BROADCAST_GROUPS`).

When nothing is hot the hot keys' row is not there, and adaptive execution drops the hot
keys' branches and the lookup of the others: the plan is Spark's window, plus the sample's
stages. A row's chunk depends on its values only, so a re-run task sends it where the first
run did.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._checks import require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.columns import column, joined_on, row_hash
from keysplit.spark.expressions import column_name, function_call, rewritten
from keysplit.spark.hot_keys import LOCAL_TOP_TASKS, SAMPLE_FRACTION
from keysplit.spark.intake import is_spark_frame, refuse_reserved, session_for, shuffle_partitions
from keysplit.spark.options import require_task_workers
from keysplit.spark.report import Report, batch_input, observed, observed_rows, observing
from keysplit.spark.row_index import COUNT, PARTITION, PLACE_BITS, indexed, partition_and_place
from keysplit.spark.row_index import INDEX as ROW_INDEX
from keysplit.spark.row_index import TOTAL as ROWS_TOTAL
from keysplit.spark.sampled import SAMPLED, UPPER, candidate_cuts, cuts_of, hot_in_sample
from keysplit.spark.sorter_places import COUNTED_PARTITIONS, check_sums, moved_places
from keysplit.spark.statistics import KEY_HASH, InputSample, SampleRequest, cut_rows
from keysplit.spark.window_spec import (
    AGGREGATES,
    ENDS,
    OFFSETS,
    RANKING,
    WindowColumn,
    WindowRequest,
    window_request,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType
    from pyspark.sql.window import WindowSpec

    from keysplit.spark.session import Session

PREFIX = "__keysplit_w_"
_FIRST_CELL = PREFIX + "first_cell"
_CHUNK = PREFIX + "chunk"
_CELL = PREFIX + "cell"
_KEY_HASH = PREFIX + "key_hash"
_CHUNKS = PREFIX + "chunks"
_ROWS = PREFIX + "rows"
_DISTINCT = PREFIX + "distinct"
_BEFORE = PREFIX + "before_"
_AFTER = PREFIX + "after_"
_KEY = PREFIX + "key_"
_OWN = PREFIX + "own_"
_POSITION = PREFIX + "position"
_SORT_KEY = PREFIX + "sort_key"
#: A row's order values, and a hot key's cuts, as structs ordered as the window orders.
_ROW_KEY = PREFIX + "row_key"
_CUT_KEYS = PREFIX + "cut_keys"
_ENTRY = PREFIX + "entry"
_ENTRIES = PREFIX + "entries"
_CANDIDATES = PREFIX + "candidates"
_HEADS = PREFIX + "heads"
_TAILS = PREFIX + "tails"
_VALUED = PREFIX + "valued"
#: Where the rows Spark's radix sorter moves among peers end (:meth:`SkewWindow.spark_places`),
#: and what they are found from: the nulls' times (indices in the input), each input
#: partition's rows, nulls and first row's time.
_MOVED = PREFIX + "moved"
_TIMES = PREFIX + "times"
_PARTS = PREFIX + "parts"
_PARTITION = PREFIX + "partition"
_COUNT = PREFIX + "count"
_NULLS = PREFIX + "nulls"
_START = PREFIX + "start"
#: A hot row's number within its chunk, where the rows reach the window sorted: its place there.
_ROW_NUMBER = PREFIX + "row_number"
#: A hot row's input position, for the recount of :attr:`SkewWindow.places_check`.
_INPUT_POSITION = PREFIX + "input_position"
#: The recount's sums, by :func:`keysplit.spark.sorter_places.check_sums`'s index.
_CHECKED = PREFIX + "checked"
_CHANGED = (
    "keysplit window: the input's rows are not where optimize's statistics found them: it changed since (call "
    "optimize again), or it is not the same each time it is computed (cache it first)"
)
_MIXED = (
    "keysplit window: a partition of the window's stage holds rows of another chunk than its own (a setting "
    "that merges shuffle partitions?): report it, with the plan (explain), to keysplit"
)


def _part(i: int) -> str:
    return f"{PREFIX}p{i}"


def _order(i: int) -> str:
    return f"{PREFIX}o{i}"


def _argument(k: int) -> str:
    return f"{PREFIX}a{k}"


def _cuts(i: int) -> str:
    """The candidate cuts' values of order column ``i``, an array."""
    return f"{PREFIX}cuts{i}"


def _local(k: int) -> str:
    return f"{PREFIX}l{k}"


def _present(k: int) -> str:
    """Whether column ``k``'s argument is not null, in the sample (``first``/``last`` with
    ``ignorenulls``: their bands reach a sampled row that has a value)."""
    return f"{PREFIX}present{k}"


#: The most chunks a hot key is cut into: with more workers, a key holding more than
#: ``MAX_CHUNKS`` mean tasks' rows has chunks of more than one mean task.
MAX_CHUNKS = 128
#: The fewest rows a group of equal order values (peers) holds on average, as the sample
#: estimates it, for a window with no ``partitionBy`` whose every value is its row's peer
#: group's to be computed from the groups (:meth:`SkewWindow.per_peer`): its one task then
#: windows a sixteenth of the rows or fewer.
PEER_GROUP_ROWS = 16
#: The most groups of peers, bounded from the sample (:meth:`SkewWindow.peer_groups`), that are
#: broadcast to the rows; more are joined to them by Spark's choice of join.
BROADCAST_GROUPS = 2_000_000
#: Functions whose value is the same for every row of a group of peers (RANGE frames aside).
PEER_RANKING = ("rank", "dense_rank", "percent_rank", "cume_dist")
#: The most literal comparisons (cuts times order columns) a row's chunk is found by
#: (:meth:`SkewWindow.with_cut_values`): 62 compiled and ran at 0.2 task-s over 10^7 rows, where
#: a struct compared with cuts from an array cost 2.6; comparisons of columns, not literals,
#: grew the stage's generated method past what the JVM compiles (interpreted: 72 task-s).
LITERAL_COMPARISONS = 64
#: The sampled rows beyond those a chunk's edge needs that its band holds
#: (:class:`EdgeBands`): a margin against a boundary the client's sort orders apart from
#: Spark's (a check in the plan fails the query, never a wrong value, if one ever did).
BAND_MARGIN = 2
#: The largest share of a chunk's sampled rows its edge bands may hold: beyond it (a frame
#: reaching far), each chunk's edge rows are found by ``min_by``/``max_by`` over all its rows.
BAND_SHARE = 0.25
#: The chunks' edge bands, as a share of the rows (:attr:`EdgeBands.share`), up to which their
#: rows, once grouped, are totalled in one task: past it, in a task per chunk. Why: a bounded
#: frame of 100 rows put 8 % of 10^7 rows in the bands, 1.7 s in one task.
ONE_TASK_BANDS = 0.02


@dataclass(frozen=True)
class EdgeBands:
    """Where a window's chunks' edge rows are (no ``partitionBy``, cut at literals), from the
    sample: per chunk, the order values up to which its first rows are (``heads``) and from
    which its last rows are (``tails``), None where that is the whole chunk. Each band holds
    :data:`BAND_MARGIN` sampled rows beyond the ``head_rows`` (``tail_rows``) its edge needs,
    and a sampled row is a row: the band holds the chunk's first (last) rows that any column
    reads. Per ``first``/``last`` with ``ignorenulls`` (by column index, in ``present``), the
    band holds :data:`BAND_MARGIN` sampled rows with a value beyond the first (last) such
    row, or is the whole chunk: it holds the chunk's first (last) value, of the rows with one
    (only those are collected). Why: edge rows found by
    ``min_by``/``max_by`` over a chunk's every row, by a struct of the order values, make
    Spark sort all of them (a sort aggregate: 10 of 27 task-s at 10^7 rows); rows in a band
    are collected by a hash aggregate, the rest pass a comparison."""

    heads: tuple[tuple[Any, ...] | None, ...]
    tails: tuple[tuple[Any, ...] | None, ...]
    head_rows: int
    tail_rows: int
    present: tuple[tuple[int, tuple[tuple[Any, ...] | None, ...]], ...] = ()
    #: The share of the rows the bands hold, estimated from the sample.
    share: float = 0.0


@dataclass(frozen=True)
class SkewWindow:
    """One :func:`window` call's plan: checked arguments in, a lazy DataFrame out."""

    frame: DataFrame
    request: WindowRequest
    workers: int
    seed: int
    schema: StructType
    target: StructType
    #: The user's columns (name, ``F.f(...).over(w)``): what the keys not hot run as.
    columns: tuple[tuple[str, Column], ...] = ()
    #: The order expressions' types (for :meth:`sort_key`; empty when no column needs it).
    order_types: tuple[DataType, ...] = ()
    #: The fraction of the rows the hot keys are found from.
    sample_fraction: float = SAMPLE_FRACTION
    #: With no ``partitionBy``, measured before the plan (:meth:`with_cut_values`): the one
    #: key's cuts, each its values of the order columns, compared with a row as literals.
    cut_values: tuple[tuple[Any, ...], ...] = ()
    #: ... and where its chunks' edge rows are (:meth:`with_edge_bands`), None: found by
    #: ``min_by``/``max_by`` over each chunk's rows.
    edge_bands: EdgeBands | None = None
    #: The hot keys' partitions (None: ``workers``). Measured before the plan
    #: (:meth:`measured`), every chunk has one of its own: the chunks, at least two a hot key,
    #: can outnumber the workers (six hot keys of TPC-H's Zipf part keys: 35 chunks), and
    #: two chunks in one task made it 2.3x the mean.
    cells: int | None = None
    #: Every value from its row's group of peers (:meth:`per_peer`), chosen where measured.
    by_peers: bool = False
    #: ... and the groups broadcast to the rows.
    broadcast_peers: bool = False
    #: Spark sorts the window's one order column by radix (no ``partitionBy``, a type its
    #: sort prefix orders whole, nullable): its order among peers is its radix sorter's
    #: (:meth:`spark_places`), not the input's.
    radix_ties: bool = False
    #: ... but the statistics, measured before the plan, counted no null in that column among
    #: all the input's rows: no places to compute, and a null met in the plan fails the query
    #: (the input changed since), never a row out of Spark's order.
    nulls_refused: bool = False
    #: ... or they found where the sorter's moved rows end (:mod:`.sorter_places`): those
    #: places as a literal table (:meth:`spark_places`' shape), and what the plan recounts
    #: over its input to fail the query where the input changed since.
    known_places: DataFrame | None = field(default=None, compare=False, repr=False)
    places_check: tuple[int, ...] = ()

    @property
    def parts(self) -> list[str]:
        return [self.own_name(p) or _part(i) for i, p in enumerate(self.request.partition)]

    @property
    def orders(self) -> list[str]:
        return [self.own_name(key.expression) or _order(i) for i, key in enumerate(self.request.order)]

    def argument(self, k: int) -> str:
        """The column holding column ``k``'s function's input."""
        argument = self.request.columns[k].argument
        assert argument is not None
        return self.own_name(argument) or _argument(k)

    def own_name(self, expression: Column) -> str | None:
        """The input column ``expression`` is, when it is one: it is read where it is, not
        copied (every copy widens the rows the window's exchange moves and sorts)."""
        name = column_name(expression)
        return name if name is not None and self.schema.names.count(name) == 1 else None

    def sort_orders(self) -> list[Column]:
        """The window's ordering over the internal order columns."""
        orders = []
        for name, key in zip(self.orders, self.request.order, strict=True):
            base = column(name)
            if key.ascending:
                orders.append(base.asc_nulls_first() if key.nulls_first else base.asc_nulls_last())
            else:
                orders.append(base.desc_nulls_first() if key.nulls_first else base.desc_nulls_last())
        return orders

    def prepared(self, *, positioned: bool = True) -> DataFrame:
        """The input with the window's partition and order expressions and the functions'
        arguments as columns of their own, and where :attr:`needs_position` (and
        ``positioned``: the sample needs none) each row's place in the input
        (:data:`_POSITION`), which :meth:`branches` turns into its place among peers in
        Spark's window where they differ (:attr:`radix_ties`, :meth:`at_spark_places`)."""
        from pyspark.sql import functions as F

        request = self.request
        extra = [
            p.alias(name) for p, name in zip(request.partition, self.parts, strict=True) if name.startswith(PREFIX)
        ]
        extra += [
            key.expression.alias(name)
            for key, name in zip(request.order, self.orders, strict=True)
            if name.startswith(PREFIX)
        ]
        arguments = {self.argument(k): c.argument for k, c in enumerate(request.columns) if c.argument is not None}
        extra += [argument.alias(name) for name, argument in arguments.items() if name.startswith(PREFIX)]
        if not (positioned and self.needs_position):
            return self.frame.select("*", *extra)
        position = F.monotonically_increasing_id()
        if self.nulls_refused:
            message = (
                "keysplit window: the order column has a null where optimize's statistics counted none (the "
                "input changed since): call optimize again"
            )
            position = F.when(column(self.orders[0]).isNull(), F.raise_error(F.lit(message))).otherwise(position)
        return self.frame.select("*", *extra, position.alias(_POSITION))

    def spark_places(self, rows: DataFrame) -> DataFrame:
        """What :meth:`at_spark_places` reads: per input partition of ``rows`` (with their
        :data:`_POSITION`) holding rows that Spark's window moves among their peers
        (:attr:`radix_ties`), the places they end at, in the partition's order.

        Spark's sorter keeps the rows that reach its one task in a buffer, the nulls at its
        start: a null arriving moves the first non-null row to the end to make room
        (``UnsafeInMemorySorter.insertRecord``), and the radix sort is stable. So non-null
        peers are in the buffer's order, not the input's. With ``Z`` nulls, the rows moved are
        the non-null ones among the input's first ``Z``: the row at time ``s`` (its index in the
        input) is moved by the ``s``-th null to where that null arrived, and if that was at a
        time ``e < Z``, moved again by the ``e``-th; its place is the last such null's. A row not
        moved keeps its own (``monotonically_increasing_id``: the input's order, as the times).

        One aggregate over the input counts each input partition's rows and lists its nulls'
        places; in one task then, the nulls' times and where each chain of moves ends (halving
        the moves left each round: ``log2 Z`` rounds over an array of ``Z`` longs), each
        partition's share of the moved rows' places, broadcast and joined by partition. Why:
        with ties and nulls (1 % of 10^6 rows), 5.6 % of the rows' row numbers in the input's
        order differed from Spark's."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        [order] = self.orders
        partition, place = partition_and_place(column(_POSITION))
        rows = rows.withColumn(_PARTITION, partition)
        # Each null's place is a group of its own, counted with the partition's other rows by
        # Spark's generated hash aggregate (a list of them in its object aggregate, per row:
        # 1.6-1.9 task-s at 10^7 rows); the few groups are then listed.
        groups = rows.groupBy(_PARTITION, F.when(column(order).isNull(), place).alias(_NULLS))
        # The groups, a few, in one task from here (not a task per shuffle partition each).
        counted = (
            groups.agg(F.count(F.lit(1)).alias(_COUNT))
            .coalesce(1)
            .groupBy(_PARTITION)
            .agg(F.sum(_COUNT).alias(_COUNT), F.sort_array(F.collect_list(_NULLS)).alias(_NULLS))
        )
        before = Window.partitionBy(F.lit(0)).orderBy(_PARTITION).rowsBetween(Window.unboundedPreceding, -1)
        counted = counted.withColumn(_START, F.coalesce(F.sum(_COUNT).over(before), F.lit(0)))
        listed = counted.agg(F.sort_array(F.collect_list(F.struct(_PARTITION, _START, _COUNT, _NULLS))).alias(_PARTS))

        def each_null(value: Callable[[Column, Column], Column]) -> Column:
            return F.flatten(F.transform(_PARTS, lambda p: F.transform(p[_NULLS], lambda at: value(p, at))))

        times = each_null(lambda p, at: p[_START] + at)
        positions = each_null(lambda p, at: F.shiftleft(p[_PARTITION].cast("long"), PLACE_BITS) + at)
        nulls = F.size(_TIMES)
        # ends[j]: the null whose time the row the j-th null moves reaches (itself if that is
        # past the first Z times), after 2^round moves.
        ends = F.transform(_TIMES, lambda time, j: F.when(time < nulls, time).otherwise(j.cast("long")))

        def halved(ends: Column, _: Column) -> Column:
            return F.transform(ends, lambda e: F.element_at(ends, (e + 1).cast("int")))

        rounds = (F.ceil(F.log2(nulls + 1)) + 1).cast("int")

        # Each array made once: Spark's optimizer would otherwise put its expression in each
        # lambda that reads it, computing it again for every element; it keeps apart what it
        # cannot tell is deterministic (the partition's id, the same in every run of the task),
        # where an exchange to one task cost a stage (0.1-0.15 s of a chain the window waits for).
        def held(value: Column) -> Column:
            return F.when(F.spark_partition_id() >= 0, value)

        moved = listed.select(_PARTS, held(times).alias(_TIMES), held(positions).alias(_MOVED))
        ended = F.aggregate(F.sequence(F.lit(1), rounds), ends, halved)
        moved = moved.select(
            _PARTS, held(F.transform(ended, lambda e: F.element_at(_MOVED, (e + 1).cast("int")))).alias(_MOVED)
        )
        return moved.select(
            F.inline(
                F.transform(
                    _PARTS,
                    lambda p: F.struct(
                        p[_PARTITION].alias(_PARTITION),
                        F.slice(
                            _MOVED,
                            (p[_START] + 1).cast("int"),
                            F.greatest(F.least(p[_COUNT], F.size(_MOVED) - p[_START]), F.lit(0)).cast("int"),
                        ).alias(_MOVED),
                    ),
                )
            )
        ).filter(F.size(_MOVED) > 0)

    def at_spark_places(self, rows: DataFrame, places: DataFrame) -> DataFrame:
        """``rows`` with :data:`_POSITION` their place among peers in Spark's window
        (:meth:`spark_places`, broadcast): a moved row's, or its own."""
        [order] = self.orders
        rows, place = self.joined_to_places(rows, places, column(_POSITION), column(order).isNotNull())
        return rows.withColumn(_POSITION, place).drop(_PARTITION, _MOVED)

    def entries_at_spark_places(self, groups: DataFrame, places: DataFrame, entries: Sequence[str]) -> DataFrame:
        """``groups`` whose ``entries`` (structs of a :meth:`sort_key` ``key`` and values) are
        each one input row's, or null, with that row's position in the key turned into its
        place among peers in Spark's window (:meth:`at_spark_places`, on the rows of a band
        once aggregated, not on every row before)."""
        from pyspark.sql import functions as F

        [key] = self.request.order
        fields = self.ordered_fields([column(name) for name in self.orders])
        assert fields is not None
        # sort_key's fields: the order column's null flag first, the position last.
        flag, position = "f0", f"f{len(fields)}"

        def field(name: str) -> Column:
            return F.coalesce(*[column(entry).getField("key").getField(name) for entry in entries])

        valued = field(flag) if key.nulls_first else ~field(flag)
        groups, place = self.joined_to_places(groups, places, field(position), valued)
        moved = {entry: column(entry).withField(f"key.{position}", place) for entry in entries}
        return groups.withColumns(moved).drop(_PARTITION, _MOVED)

    @staticmethod
    def joined_to_places(
        rows: DataFrame, places: DataFrame, position: Column, valued: Column
    ) -> tuple[DataFrame, Column]:
        """``rows`` joined to ``places`` (:meth:`spark_places`, broadcast) by the input
        partition of ``position`` (a ``monotonically_increasing_id``), and the place among
        peers in Spark's window of a row at ``position``, ``valued`` where its order value is
        not null (a null is never moved)."""
        from pyspark.sql import functions as F

        partition, place = partition_and_place(position)
        rows = rows.withColumn(_PARTITION, partition).join(F.broadcast(places), _PARTITION, "left")
        share = column(_MOVED)
        was_moved = valued & share.isNotNull() & (place < F.size(share))
        return rows, F.when(was_moved, F.element_at(share, (place + 1).cast("int"))).otherwise(position)

    def positional(self, spec: WindowColumn) -> bool:
        """Whether a column's value depends on the rows' positions among equal order values
        (peers): ``lag``, ``lead`` and bounded ROWS frames. Spark's window sorts peers as
        they reach its task, which for a file or cached input read in ``local`` mode is
        their order in the input (but where its sorter moves them: :meth:`spark_places`);
        here peers are ordered by that place (:data:`_POSITION`), in the window and in the
        rows a chunk carries alike, so that every row sees one order, and that one."""
        return spec.function in OFFSETS or (spec.frame is not None and spec.frame.kind == "sliding")

    @property
    def needs_position(self) -> bool:
        """Whether rows carry their place among peers (:data:`_POSITION`): for :meth:`sort_key`,
        and with no ``partitionBy`` for a column that follows the rows' order
        (:func:`_follows_rows`), as the chunk's presort (:meth:`branches`), a radix sort, moves
        peers around."""
        if self.needs_sort_key:
            return True
        whole = self.request.whole_frame and bool(self.request.order)
        return whole and not self.per_key_only and any(_follows_rows(spec) for spec in self.request.columns)

    @property
    def needs_sort_key(self) -> bool:
        """Whether the chunks carry rows or values at their edges (:meth:`sort_key`)."""
        if self.per_key_only:
            return False
        return any(self.positional(spec) or spec.function in ENDS for spec in self.request.columns)

    @property
    def per_key_only(self) -> bool:
        """Whether every column is one value per window partition: an aggregate over the
        whole partition, or ``first``/``last`` of an unordered one. Then no row moves: the
        values come from Spark's ``groupBy``, combined map-side, and are joined back
        (:meth:`per_key`)."""
        return all(
            spec.frame is not None
            and spec.frame.kind == "whole"
            and (spec.function in AGGREGATES or (spec.function in ENDS and not self.request.order))
            for spec in self.request.columns
        )

    def per_key(self, report: Report[WindowSplitReport] | None) -> DataFrame:
        """The plan when :attr:`per_key_only`: each key's values by Spark's ``groupBy`` (its
        map-side combine leaves no task a hot key's rows), joined back to the rows by the
        partition values, null-safe (a null key is a window partition as any other), by
        Spark's join, which adaptive execution splits where a key is hot. No key is cut, so
        the report's hot table is empty."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        prepared = self.prepared()
        values = {}
        for k, spec in enumerate(self.request.columns):
            arg = column(self.argument(k)) if spec.argument is not None else F.lit(1)
            function = getattr(F, spec.function)
            value = function(arg, ignorenulls=spec.ignore_nulls) if spec.function in ENDS else function(arg)
            values[spec.name] = value.cast(self.target[spec.name].dataType).alias(_local(k))
        per_key = prepared.groupBy(*self.parts).agg(*values.values())
        rows = prepared
        if report is not None:
            observations: tuple[Any, Any] = (Observation(), Observation())
            rows = observing(rows, observations[0], F.count(F.lit(1)).alias("rows"))
            report.bind(lambda: self.report(observations))
        joined = self.joined_by_key(rows, per_key, "inner")
        return self.with_locals_as_columns(joined)

    def with_locals_as_columns(self, joined: DataFrame) -> DataFrame:
        """The output's columns from ``joined``, each window column from its value
        (:func:`_local`) where one value serves a key or a group of peers."""
        names = {spec.name: _local(k) for k, spec in enumerate(self.request.columns)}
        return joined.select(*[column(names.get(f.name, f.name)).alias(f.name) for f in self.target.fields])

    @property
    def peer_determined(self) -> bool:
        """Whether every column's value is the same for every row of a group of peers (rows of
        one partition with equal order values): an aggregate over a RANGE frame from the
        partition's start to the current row's last peer, or over the whole partition, and
        ``rank``, ``dense_rank``, ``percent_rank``, ``cume_dist``. Then each value is a function
        of the groups' totals, in order (:meth:`per_peer`)."""
        if not self.request.order:
            return False
        return all(
            spec.function in PEER_RANKING
            or (
                spec.function in AGGREGATES
                and spec.frame is not None
                and (spec.frame.kind == "whole" or (spec.frame.kind == "running" and not spec.frame.rows))
            )
            for spec in self.request.columns
        )

    def peer_groups(self, sample: InputSample) -> tuple[float, float]:
        """The input's groups of peers (rows of one partition with equal order values)
        estimated from ``sample``, and a bound on them (:func:`estimated_values`)."""
        counts = sample.rows.group_by([*self.parts, *self.orders]).len()
        return estimated_values(counts["len"], sample.fraction)

    def per_peer(self, report: Report[WindowSplitReport] | None) -> DataFrame:
        """The plan when :attr:`by_peers`: no row moves. Each group of peers' totals (its rows,
        and its sums, counts, minimums, maximums) by Spark's ``groupBy`` over the partition and
        order values, combined map-side; the columns' values over the groups, by Spark's window
        in the user's ordering (one row a group: running totals of the groups before and its
        own); joined back to the rows by those values, null-safe. A NaN and a negative zero
        are peers of NaN and zero, in Spark's grouping and join as in its window."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        prepared = self.prepared()
        keys = [*self.parts, *self.orders]
        totals = [F.count(F.lit(1)).alias(_ROWS)]
        for k, spec in enumerate(self.request.columns):
            if spec.argument is None or spec.function not in AGGREGATES:
                continue
            arg = column(self.argument(k))
            if spec.function in ("count", "avg"):
                totals.append(F.count(arg).alias(f"{PREFIX}c{k}"))
            if spec.function == "sum":
                totals.append(F.sum(arg).alias(f"{PREFIX}s{k}"))
            if spec.function == "avg":
                kind = _average_sum_type(self.target[spec.name].dataType)
                totals.append(F.sum(arg.cast(kind)).alias(f"{PREFIX}s{k}"))
            if spec.function in ("min", "max"):
                totals.append(getattr(F, spec.function)(arg).alias(f"{PREFIX}{spec.function}{k}"))
        groups = prepared.groupBy(*keys).agg(*totals)
        observations: tuple[Any, Any] = (Observation(), Observation())
        if report is not None:
            groups = observing(
                groups,
                observations[1],
                F.count(F.lit(1)).alias("groups"),
                F.max(_ROWS).alias("largest"),
                F.min(_ROWS).alias("smallest"),
            )
        whole = Window.partitionBy(*self.parts)
        ordered = whole.orderBy(*self.sort_orders())
        upto = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        rows_upto = F.sum(_ROWS).over(upto)
        rows_before = rows_upto - column(_ROWS)
        partition_rows = F.sum(_ROWS).over(whole)
        values = {}
        for k, spec in enumerate(self.request.columns):
            frame = whole if spec.frame is not None and spec.frame.kind == "whole" else upto
            name = spec.function
            if name == "count":
                value = F.sum(_ROWS if spec.argument is None else f"{PREFIX}c{k}").over(frame)
            elif name == "sum":
                value = F.sum(f"{PREFIX}s{k}").over(frame)
            elif name in ("min", "max"):
                value = getattr(F, name)(f"{PREFIX}{name}{k}").over(frame)
            elif name == "avg":
                value = self.average(k, F.sum(f"{PREFIX}s{k}").over(frame), F.sum(f"{PREFIX}c{k}").over(frame))
            elif name == "rank":
                value = rows_before + 1
            elif name == "dense_rank":
                value = F.row_number().over(ordered)
            elif name == "percent_rank":
                value = F.when(
                    partition_rows > 1, rows_before.cast("double") / (partition_rows - 1).cast("double")
                ).otherwise(F.lit(0.0))
            else:
                value = rows_upto.cast("double") / partition_rows.cast("double")
            values[_local(k)] = value.cast(self.target[spec.name].dataType)
        by_group = groups.select(*keys, *[value.alias(name) for name, value in values.items()])
        rows = prepared
        if report is not None:
            rows = observing(rows, observations[0], F.count(F.lit(1)).alias("rows"))
            report.bind(lambda: self.peer_report(observations))
        joined = joined_on(rows, by_group, "inner", null_safe=keys, broadcast=self.broadcast_peers)
        return self.with_locals_as_columns(joined)

    def peer_report(self, observations: tuple[Any, Any]) -> WindowSplitReport | None:
        """:meth:`per_peer`'s report: the whole frame's one key, its groups of peers as its
        chunks."""
        rows, groups = observed(observations[0]), observed(observations[1])
        if not rows:
            return None
        [name] = self.request.partition_names
        hot = pl.DataFrame(
            {
                name: [0],
                "rows": [int(rows["rows"])],
                "chunks": [int(groups.get("groups", 0))],
                "largest_chunk": [groups.get("largest")],
                "smallest_chunk": [groups.get("smallest")],
            },
            schema={
                name: pl.Int32,
                "rows": pl.Int64,
                "chunks": pl.Int32,
                "largest_chunk": pl.Int64,
                "smallest_chunk": pl.Int64,
            },
        )
        return WindowSplitReport(
            workers=self.workers, rows=int(rows["rows"]), sample_fraction=self.sample_fraction, hot=hot, by_peers=True
        )

    def sort_key(self) -> Column:
        """One struct whose ascending order is the window's ordering, each column's direction
        and null placement included, then :data:`_POSITION`: what ``min_by``/``max_by`` find a
        chunk's first and last rows by (:meth:`ordered_fields`, then the position)."""
        from pyspark.sql import functions as F

        fields = self.ordered_fields([column(name) for name in self.orders])
        if fields is None:
            descending = ", ".join(
                kind.simpleString()
                for key, kind in zip(self.request.order, self.order_types, strict=True)
                if not key.ascending
            )
            raise ConfigError(
                f"window: lag, lead, first, last and bounded frames over a descending {descending} order are not "
                "split by keysplit; order by a number, date, timestamp, string or binary column, or use Spark's "
                "own window"
            )
        fields.append(column(_POSITION))
        return F.struct(*[field.alias(f"f{i}") for i, field in enumerate(fields)])

    def ordered_fields(self, values: Sequence[Column]) -> list[Column] | None:
        """The fields of a struct whose ascending order is the window's ordering of the order
        values ``values``, each column's direction and null placement included; None where a
        descending order column is of a type not turned around here. A null sorts by a flag
        before its value; a descending value is turned around: an integer bitwise, a number
        negated (a NaN, Spark's largest, first by a flag), a date or timestamp by its days or
        microseconds negated, a string or binary as the complement of its bytes' hex digits,
        closed by a letter above them all (a prefix then sorts after the longer value)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import (
            BinaryType,
            BooleanType,
            DateType,
            DecimalType,
            DoubleType,
            FloatType,
            IntegralType,
            StringType,
            TimestampType,
        )

        fields: list[Column] = []
        # An ascending column's type is not needed (nor read: planned_window).
        kinds = self.order_types or (None,) * len(self.request.order)
        for value, key, kind in zip(values, self.request.order, kinds, strict=True):
            fields.append(value.isNotNull() if key.nulls_first else value.isNull())
            if key.ascending:
                fields.append(value)
            elif isinstance(kind, IntegralType):
                fields.append(F.bitwise_not(value))
            elif isinstance(kind, (FloatType, DoubleType)):
                fields += [~F.isnan(value), -value]
            elif isinstance(kind, DecimalType):
                fields.append(-value)
            elif isinstance(kind, BooleanType):
                fields.append(~value)
            elif isinstance(kind, DateType):
                fields.append(-F.unix_date(value))
            elif isinstance(kind, TimestampType):
                fields.append(-F.unix_micros(value))
            elif isinstance(kind, (StringType, BinaryType)):
                complement = F.translate(F.hex(value), "0123456789ABCDEF", "FEDCBA9876543210")
                fields.append(F.concat(complement, F.lit("Z")))
            else:
                return None
        return fields

    def key_hash(self, values: Sequence[Column] | None = None) -> Column:
        """``xxhash64(seed, partition values)``: what a key is found by among the hot keys'
        entries (one long). Two keys of one hash share a hot key's cuts, and
        stay apart everywhere else (each is its own window partition, with its own carries):
        the result stays exact. Over the internal partition columns, or over ``values`` (the
        partition expressions, on the input as given)."""
        from pyspark.sql import functions as F

        return F.xxhash64(F.lit(self.seed), *(values if values is not None else [column(n) for n in self.parts]))

    @property
    def candidates(self) -> int:
        """How many ranges a hot key's sampled rows are cut into (``C``): the most chunks a
        key can have (``workers``, at most :data:`MAX_CHUNKS`)."""
        return min(self.workers, MAX_CHUNKS)

    def hot_entries(self, prepared: DataFrame) -> DataFrame:
        """The hot keys (by :meth:`key_hash`), each with its chunks ``g``, its first cell and
        its ``C - 1`` candidate cuts in the window's order (an array per order column): from
        a sample, in the plan, read from one exchange. One row holding them all (none when
        no key is hot), an array sorted by key hash (:meth:`hot_rows` finds a key in it).

        Why one row: as a table, each branch read other columns of it, Spark pruned each
        copy apart and computed it once per branch (three times); a branch cannot prune an
        array's fields, so all the copies are one plan, computed once. Its stages are
        small: three, on 2 % of the key and order columns.
        """
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        sample = prepared.select(self.key_hash().alias(_KEY_HASH), *self.orders).sample(
            fraction=SAMPLE_FRACTION, seed=self.seed
        )
        by_key = Window.partitionBy(_KEY_HASH)
        if self.request.whole_frame:
            return self.whole_frame_entry(sample, by_key)
        rows = sample.repartition(LOCAL_TOP_TASKS, _KEY_HASH)
        n, c = self.workers, self.candidates
        if self.request.order:
            rows, found = candidate_cuts(rows, by_key, self.sort_orders(), F.count(F.lit(1)), self.orders, c, "w")
            keys = rows.groupBy(_KEY_HASH).agg(F.count(F.lit(1)).alias(SAMPLED), found.alias(_CANDIDATES))
        else:
            keys = rows.groupBy(_KEY_HASH).agg(F.count(F.lit(1)).alias(SAMPLED))
        hot = hot_in_sample(keys, n)
        everything = Window.partitionBy(F.lit(0))
        # The hot keys' rows have the n tasks of a window stage of their own (the other keys
        # are in Spark's): a key's chunks are its part of the hot rows' n, so that each task
        # holds about one chunk.
        chunks = F.ceil(column(UPPER) * F.lit(n) / F.sum(UPPER).over(everything))
        hot = hot.withColumn(_CHUNKS, F.least(F.lit(c), F.greatest(F.lit(2), chunks)).cast("int"))
        # Chunks go round the partitions, hottest key first, each key's on partitions of
        # their own (a key has at most n chunks).
        placed = everything.orderBy(F.desc(SAMPLED), F.asc(_KEY_HASH)).rowsBetween(Window.unboundedPreceding, -1)
        before = F.coalesce(F.sum(_CHUNKS).over(placed), F.lit(0))
        cuts = (
            [cuts_of(column(_CANDIDATES), name, c).alias(_cuts(i)) for i, name in enumerate(self.orders)]
            if self.request.order
            else []
        )
        entry = F.struct(_KEY_HASH, _CHUNKS, F.pmod(before, F.lit(n)).cast("int").alias(_FIRST_CELL), *cuts)
        # One row, one column, and no row when no key is hot: every branch reads all of it
        # (nothing to prune apart), so Spark computes it once, and adaptive execution drops
        # the hot keys' branches when it is empty.
        entries = hot.select(entry.alias(_ENTRY)).agg(F.array_sort(F.collect_list(_ENTRY)).alias(_ENTRIES))
        return entries.filter(F.size(_ENTRIES) > 0)

    def whole_frame_entry(self, sample: DataFrame, by_key: WindowSpec) -> DataFrame:
        """A window with no ``partitionBy``: its one key's entry, ``C`` chunks from the
        first cell, made by an aggregate of the whole sample, which is one row even where the
        sample is empty (its key then has no cut: one chunk). The key has every row, so no row
        is left to a branch of Spark's own (:meth:`branches` has none)."""
        from pyspark.sql import functions as F

        c = self.candidates
        cuts: list[Column] = []
        if self.request.order:
            rows, found = candidate_cuts(sample, by_key, self.sort_orders(), F.count(F.lit(1)), self.orders, c, "w")
            sample = rows.agg(found.alias(_CANDIDATES))
            cuts = [cuts_of(column(_CANDIDATES), name, c).alias(_cuts(i)) for i, name in enumerate(self.orders)]
        else:
            sample = sample.agg(F.count(F.lit(1)).alias(SAMPLED))
        entry = F.struct(
            self.key_hash(self.request.partition).alias(_KEY_HASH),
            F.lit(c).alias(_CHUNKS),
            F.lit(0).alias(_FIRST_CELL),
            *cuts,
        )
        return sample.select(F.array(entry).alias(_ENTRIES))

    def unsplit(self, report: Report[WindowSplitReport] | None, why: str) -> DataFrame:
        """Spark's own window (the cost guard keeps it: ``why``), the input's rows counted as
        they pass when a report is asked for; no key is cut."""
        if report is None:
            return self.frame.withColumns(dict(self.columns))
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        observation: Any = Observation()
        names = list(self.request.partition_names)
        hot = pl.DataFrame(
            schema={
                **dict.fromkeys(names, pl.Null),
                "rows": pl.Int64,
                "chunks": pl.Int32,
                "largest_chunk": pl.Int64,
                "smallest_chunk": pl.Int64,
            }
        )

        def read() -> WindowSplitReport | None:
            seen = observed(observation)
            if not seen:
                return None
            return WindowSplitReport(
                workers=self.workers,
                rows=int(seen["rows"]),
                sample_fraction=self.sample_fraction,
                hot=hot,
                left_to_spark=why,
            )

        report.bind(read)
        return observing(self.frame, observation, F.count(F.lit(1)).alias("rows")).withColumns(dict(self.columns))

    def sample_request(self) -> SampleRequest:
        """What :mod:`.statistics` samples for this window: its key hash, partition and order
        columns, and whether each ``first``/``last`` with ``ignorenulls`` has a value
        (:meth:`with_edge_bands`)."""
        names = dict.fromkeys([*self.parts, *self.orders])
        present = [
            column(self.argument(k)).isNotNull().alias(_present(k))
            for k, spec in enumerate(self.request.columns)
            if spec.function in ENDS and spec.ignore_nulls and self.request.whole_frame
        ]
        columns = (*[column(name) for name in names], *present)
        # Where peers may be in Spark's radix sorter's order, its nulls counted: none, and no
        # places are needed (:meth:`measured`).
        nulls = column(self.orders[0]).isNull() if self.radix_ties else None
        frame = self.prepared(positioned=False)
        return SampleRequest(
            frame,
            self.key_hash(),
            columns,
            tuple(self.parts),
            files_of=self.frame,
            counted_where=nulls,
            placed=self.radix_ties,
        )

    def sampled_cuts(self, sample: InputSample, hot: pl.DataFrame) -> dict[int, list[list[Any]]]:
        """Each ``hot`` key's ``C - 1`` candidate cuts from ``sample``: a list of values per
        order column, by key hash (none without an ordering)."""
        c = self.candidates
        cuts: dict[int, list[list[Any]]] = {}
        if self.request.order:
            for (key_hash,), group in self.ordered_sample(sample, hot).group_by(KEY_HASH, maintain_order=True):
                positions = group[_POSITION].gather(cut_rows(group.height, c)).to_arrow()
                cuts[int(key_hash)] = [sample.table.column(name).take(positions).to_pylist() for name in self.orders]
        return cuts

    def ordered_sample(self, sample: InputSample, hot: pl.DataFrame) -> pl.DataFrame:
        """The ``hot`` keys' sampled rows by key hash, then in the window's ordering, each with
        its position in ``sample`` (the values are taken from Spark's own Arrow by it)."""
        return (
            sample.rows.with_row_index(_POSITION)
            .filter(pl.col(KEY_HASH).is_in(hot[KEY_HASH].implode()))
            .sort(
                [KEY_HASH, *self.orders],
                descending=[False, *[not key.ascending for key in self.request.order]],
                nulls_last=[False, *[not key.nulls_first for key in self.request.order]],
                maintain_order=True,
            )
        )

    def with_edge_bands(self, sample: InputSample, hot: pl.DataFrame) -> SkewWindow:
        """This window with its chunks' edge bands (:class:`EdgeBands`) from ``sample``, where
        it is cut at literals and a column reads a chunk's edge rows, and no band needs more
        than :data:`BAND_SHARE` of a chunk's sampled rows; itself otherwise. The sampled rows
        of chunk ``c`` follow the last one equal to cut ``c`` (a row equal to a cut is in the
        chunk before it, as :meth:`chunked` counts the cuts strictly before a row)."""
        if not self.cut_values or not self.needs_sort_key:
            return self
        head_rows = tail_rows = 0
        for spec in self.request.columns:
            if self.positional(spec):
                before, after = _reach(spec)
                head_rows, tail_rows = max(head_rows, after), max(tail_rows, before)
            elif spec.function in ENDS and not spec.ignore_nulls:
                head_rows = max(head_rows, int(spec.function == "first"))
                tail_rows = max(tail_rows, int(spec.function == "last"))
        ordered = self.ordered_sample(sample, hot)
        n, c = ordered.height, self.candidates
        if max(head_rows, tail_rows) + BAND_MARGIN > BAND_SHARE * n / c:
            return self
        values = list(zip(*[ordered[name].to_list() for name in self.orders], strict=True))

        def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
            # NaN is equal to NaN, and -0.0 to 0.0, in Spark's ordering as here.
            return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))

        ends = []
        for position in cut_rows(n, c):
            while position + 1 < n and same(values[position + 1], values[position]):
                position += 1
            ends.append(position)
        chunks = list(zip([0, *[end + 1 for end in ends]], [*ends, n - 1], strict=True))
        positions = ordered[_POSITION]

        def bound(at: int | None) -> tuple[Any, ...] | None:
            if at is None:
                return None
            row = positions[at]
            return tuple(sample.table.column(name)[row].as_py() for name in self.orders)

        def nth(picked: Sequence[int], count: int, first: bool) -> int | None:
            """The position ``count`` rows into ``picked`` from its start (or end), if any."""
            if count > len(picked):
                return None
            return picked[count - 1] if first else picked[-count]

        heads = tuple(bound(nth(range(a, b + 1), head_rows + BAND_MARGIN, True)) for a, b in chunks)
        tails = tuple(bound(nth(range(a, b + 1), tail_rows + BAND_MARGIN, False)) for a, b in chunks)
        present = []
        for k, spec in enumerate(self.request.columns):
            if spec.function in ENDS and spec.ignore_nulls:
                flags = ordered[_present(k)].to_list()
                first = spec.function == "first"
                picks = [[i for i in range(a, b + 1) if flags[i]] for a, b in chunks]
                present.append((k, tuple(bound(nth(picked, 1 + BAND_MARGIN, first)) for picked in picks)))
        share = (head_rows + tail_rows + 2 * BAND_MARGIN) * c / n
        bands = EdgeBands(heads, tails, head_rows, tail_rows, tuple(present), share)
        return replace(self, edge_bands=bands)

    def with_cut_values(self, cuts: dict[int, list[list[Any]]]) -> SkewWindow:
        """This window with its one key's ``cuts`` (:meth:`sampled_cuts`) as values
        (:attr:`cut_values`) where it has no ``partitionBy`` and an ordering of atomic types;
        itself otherwise, or where the comparisons would make the stage's code too long
        (:data:`LITERAL_COMPARISONS`)."""
        from pyspark.sql.types import AtomicType

        if not self.request.whole_frame or not self.request.order or len(cuts) != 1:
            return self
        if not all(isinstance(kind, AtomicType) for kind in self.order_types):
            return self
        if (self.candidates - 1) * len(self.orders) > LITERAL_COMPARISONS:
            return self
        [values] = cuts.values()
        return replace(self, cut_values=tuple(zip(*values, strict=True)))

    def measured(self, handle: Session, sample: InputSample) -> tuple[SkewWindow, DataFrame | None, pl.DataFrame]:
        """This window with what ``sample`` (:mod:`.statistics`) measured (:meth:`with_cut_values`),
        :meth:`hot_entries` computed here from it by the same rules, as a literal table: the
        plan then has no sampling stage (no entries when no key is hot); and the entries'
        keys (their partition columns). A window with no ``partitionBy`` whose every value is
        its row's group of peers' (:attr:`peer_determined`) is computed from the groups
        (:attr:`by_peers`, no entries) where they hold :data:`PEER_GROUP_ROWS` rows or more on
        average (:meth:`peer_groups`)."""
        import pyarrow as pa

        if self.radix_ties and sample.counted == 0:
            return replace(self, radix_ties=False, nulls_refused=True).measured(handle, sample)
        hot = sample.hot(self.workers)
        if hot.height == 0:
            return self, None, sample.key_values(hot)
        if self.request.whole_frame and self.peer_determined and not self.in_input_order:
            groups, bound = self.peer_groups(sample)
            if groups * PEER_GROUP_ROWS <= sample.table.num_rows / sample.fraction:
                by_peers = replace(self, by_peers=True, broadcast_peers=bound <= BROADCAST_GROUPS)
                return by_peers, None, sample.key_values(hot)
        n, c = self.workers, self.candidates
        # Each key's chunks as in the plan's own, hottest key first, each chunk on a partition
        # of its own (:attr:`cells`).
        hot = hot.with_columns(
            (pl.col("upper") * n / pl.col("upper").sum()).ceil().clip(2, c).cast(pl.Int32).alias(_CHUNKS)
        ).with_columns((pl.col(_CHUNKS).cum_sum() - pl.col(_CHUNKS)).cast(pl.Int32).alias(_FIRST_CELL))
        cells = max(n, int(hot[_CHUNKS].sum()))
        types = [sample.table.schema.field(name).type for name in self.orders]
        cuts = self.sampled_cuts(sample, hot)
        with_cuts = self.with_cut_values(cuts).with_edge_bands(sample, hot)
        entries = [
            {
                _KEY_HASH: key_hash,
                _CHUNKS: chunks,
                _FIRST_CELL: first,
                **{_cuts(i): values for i, values in enumerate(cuts.get(key_hash, []))},
            }
            for key_hash, chunks, first in hot.sort(KEY_HASH).select(KEY_HASH, _CHUNKS, _FIRST_CELL).iter_rows()
        ]
        entry = pa.struct(
            [
                pa.field(_KEY_HASH, pa.int64()),
                pa.field(_CHUNKS, pa.int32()),
                pa.field(_FIRST_CELL, pa.int32()),
                *[pa.field(_cuts(i), pa.list_(kind)) for i, kind in enumerate(types)],
            ]
        )
        table = pa.table({_ENTRIES: pa.array([entries], pa.list_(entry))})
        made = handle.call("making the hot keys' table", lambda: handle.spark.createDataFrame(table))
        return replace(with_cuts, cells=cells).with_known_places(handle, sample), made, sample.key_values(hot)

    def with_known_places(self, handle: Session, sample: InputSample) -> SkewWindow:
        """This window with the places its sorter's moved rows end at as a literal table
        (:attr:`known_places`), where ``sample`` found where the input's nulls are
        (:mod:`.sorter_places`); itself otherwise (the plan computes them)."""
        import pyarrow as pa

        if not self.radix_ties or sample.placed is None:
            return self
        moved = moved_places(sample.placed)
        if moved is None:
            return self
        table = pa.table(
            {
                _PARTITION: pa.array(list(moved), pa.int32()),
                _MOVED: pa.array(list(moved.values()), pa.list_(pa.int64())),
            }
        )
        made = handle.call("making the places' table", lambda: handle.spark.createDataFrame(table))
        return replace(self, known_places=made, places_check=check_sums(sample.placed))

    def joined_by_key(self, rows: DataFrame, other: DataFrame, how: str, *, by_chunk: bool = False) -> DataFrame:
        """``rows`` joined to ``other`` by the partition values, null-safe (a null key is a
        window partition as any other), and with ``by_chunk`` by chunk too, broadcast (a
        cold row's chunk is null: it matches nothing); ``other``'s copies of them dropped."""
        return joined_on(rows, other, how, null_safe=self.parts, equal=[_CHUNK] if by_chunk else [], broadcast=by_chunk)

    def with_carries(self, rows: DataFrame, carries: DataFrame) -> DataFrame:
        """``rows`` with their chunk's carry (broadcast), by partition values and chunk."""
        return self.joined_by_key(rows, carries, "left", by_chunk=True)

    @property
    def cut_columns(self) -> list[str]:
        """A hot key's entry's arrays of candidate cuts, one per order column, as columns of
        the row (the binary lifting reads them at every step)."""
        return [_cuts(i) for i in range(len(self.orders))]

    def precedes(self, cut: Sequence[Column]) -> Column:
        """Whether a cut (its value of each order column) comes strictly before the row, in
        the window's ordering (each column's direction and null placement)."""
        return self.before(cut, [column(name) for name in self.orders])

    def before(self, a: Sequence[Column], b: Sequence[Column]) -> Column:
        """Whether order values ``a`` come strictly before ``b`` in the window's ordering."""
        from pyspark.sql import functions as F

        earlier: Column | None = None
        equal = F.lit(True)
        for key, x, y in zip(self.request.order, a, b, strict=True):
            nulls = (x.isNull() & y.isNotNull()) if key.nulls_first else (x.isNotNull() & y.isNull())
            less = F.coalesce(x < y if key.ascending else x > y, F.lit(False))
            term = equal & (nulls | less)
            earlier = term if earlier is None else earlier | term
            equal = equal & x.eqNullSafe(y)
        assert earlier is not None
        return earlier

    def in_band(self, bounds: Sequence[tuple[Any, ...] | None], head: bool) -> Column:
        """Whether a chunked row is in its chunk's band (:class:`EdgeBands`): at or before the
        chunk's bound (``head``), at or after it, or the band is the whole chunk. The bounds
        are literal arrays read at the row's chunk: one comparison a row."""
        from pyspark.sql import functions as F

        at = column(_CHUNK) + 1
        whole = F.element_at(F.array(*[F.lit(bound is None) for bound in bounds]), at)
        values = [
            F.element_at(F.array(*[F.lit(None if b is None else b[i]).cast(kind) for b in bounds]), at)
            for i, kind in enumerate(self.order_types)
        ]
        row = [column(name) for name in self.orders]
        inside = ~self.before(values, row) if head else ~self.before(row, values)
        return whole | inside

    def chunked(self, rows: DataFrame) -> DataFrame:
        """``rows`` (with their hot key's entry) with their chunk, null for a key that is not
        hot. With an ordering: ``j``, how many of the ``C - 1`` candidate cuts come before the
        row, makes chunk ``⌊j·g/C⌋`` of the key's ``g``: ranges of the ordering, never apart at
        equal order values. Without: a hash of the row.

        The row's order values and each cut are compared as one struct each
        (:meth:`ordered_fields`: its ascending order is the window's), the cuts' made once per
        hot key (:meth:`hot_rows`), the row's once per row; where a descending column's type
        is not turned around there, column by column (:meth:`precedes`). The cuts are sorted,
        so those before the row are a prefix: ``j`` is counted in two flat sums of about
        ``√C`` comparisons each, first whole blocks of ``S`` cuts, then the cuts of the row's
        block. Why: comparing column by column with every cut made the stage's generated
        method too long for the JVM to compile (15 KB of bytecode, interpreted: 11 µs a row
        against Spark's 1 µs for its whole window), and a binary search's chain of columns,
        each reading the one before, Spark's partition pruning expands exponentially. With
        :attr:`cut_values` (no ``partitionBy``, measured before the plan), ``j`` counts the
        cuts before the row as literals of the order columns' types, compared column by
        column: constants fold, and the code stays small (:data:`LITERAL_COMPARISONS`)."""
        from pyspark.sql import functions as F

        if not self.request.order:
            return rows.withColumn(_CHUNK, F.pmod(row_hash(self.seed, self.schema), column(_CHUNKS)).cast("int"))
        last = self.candidates - 1

        def count(terms: list[Column]) -> Column:
            return sum((F.when(term, 1).otherwise(0) for term in terms), F.lit(0))

        def chunk_of(j: Column) -> Column:
            # Never null (a hot row's key has chunks), and said so: a nullable chunk, the key
            # of the carries' join, made Spark add a filter that it is not null, pushed into the
            # entries' join below the totals, which then computed every row's chunk twice.
            return F.coalesce(F.floor(j * column(_CHUNKS) / F.lit(self.candidates)).cast("int"), F.lit(0))

        if self.cut_values:
            literals = [
                [F.lit(value).cast(kind) for value, kind in zip(cut, self.order_types, strict=True)]
                for cut in self.cut_values
            ]
            return rows.withColumn(_CHUNK, chunk_of(count([self.precedes(cut) for cut in literals])))

        ordered = self.ordered_fields([column(name) for name in self.orders])
        if ordered is not None:
            rows = rows.withColumn(_ROW_KEY, F.struct(*[field.alias(f"f{i}") for i, field in enumerate(ordered)]))

            def before(j: Column) -> Column:
                # try_: Spark may evaluate it before the guard that keeps j in range (a common
                # subexpression hoisted out of the AND), and element_at past the end raises.
                return F.coalesce(F.try_element_at(column(_CUT_KEYS), j) < column(_ROW_KEY), F.lit(False))

        else:

            def before(j: Column) -> Column:
                return self.precedes([F.try_element_at(column(_cuts(i)), j) for i in range(len(self.orders))])

        size = max(1, math.isqrt(last))
        blocks = count([before(F.lit(m * size)) for m in range(1, last // size + 1)])
        rows = rows.withColumn(_CHUNK, F.when(column(_CHUNKS).isNotNull(), blocks * F.lit(size)))
        within = [
            (column(_CHUNK) + F.lit(t) <= F.lit(last)) & before(column(_CHUNK) + F.lit(t)) for t in range(1, size)
        ]
        rows = rows.withColumn(_CHUNK, chunk_of(column(_CHUNK) + count(within)))
        return rows.drop(_ROW_KEY) if ordered is not None else rows

    def cut_keys(self, entry: Column) -> Column:
        """A hot key's ``entry`` (a struct of the entries) with its cuts as structs ordered as
        the window orders (:meth:`ordered_fields`), under :data:`_CUT_KEYS`."""
        from pyspark.sql import functions as F

        cuts = [entry.getField(name) for name in self.cut_columns]

        def keyed(_: Column, i: Column) -> Column:
            fields = self.ordered_fields([F.get(values, i) for values in cuts])
            assert fields is not None
            return F.struct(*[field.alias(f"f{k}") for k, field in enumerate(fields)])

        return entry.withField(_CUT_KEYS, F.transform(cuts[0], keyed))

    def cell(self) -> Column:
        """A hot row's partition: its chunk's own."""
        from pyspark.sql import functions as F

        return F.pmod(column(_FIRST_CELL) + column(_CHUNK), F.lit(self.hot_cells)).cast("int")

    @property
    def cell_name(self) -> str:
        """The column holding a hot row's partition (:meth:`cell`): with no ``partitionBy`` the
        chunk itself, which is its cell (the one key's ``C`` chunks from cell 0, ``C`` at most
        the cells). Why: a column less through the exchange, both sorts and the window's
        buffer of every row."""
        return _CHUNK if self.request.whole_frame else _CELL

    @property
    def hot_cells(self) -> int:
        """How many partitions the hot keys' rows are windowed in (:attr:`cells`)."""
        return self.workers if self.cells is None else self.cells

    def hot_rows(self, prepared: DataFrame, entries: DataFrame) -> DataFrame:
        """The rows of hot keys, each with its key's entry's fields (the entries broadcast,
        the key found among them by :meth:`key_hash`)."""
        from pyspark.sql import functions as F

        if self.request.whole_frame and self.cut_values:
            # Its one key's entry is known here (every chunk of the ordering from the first
            # cell, cut at literals): no row is joined to the entries, whose copy in every row
            # cost more than the window's own exchange (2.3 of 4.0 task-s at 10^7 rows).
            return prepared.withColumns({_CHUNKS: F.lit(self.candidates), _FIRST_CELL: F.lit(0)})
        fields = [_CHUNKS, _FIRST_CELL, *(self.cut_columns if self.request.order else [])]
        if self.request.order and self.ordered_fields([column(name) for name in self.orders]) is not None:
            # Once per hot key, on the one row of entries (chunked compares a row with them).
            entries = entries.select(F.transform(column(_ENTRIES), self.cut_keys).alias(_ENTRIES))
            fields.append(_CUT_KEYS)
        rows = prepared.withColumn(_KEY_HASH, self.key_hash()).join(F.broadcast(entries))
        rows = rows.withColumn(_ENTRY, F.get(column(_ENTRIES), (_entry_position() - 1).cast("int")))
        rows = rows.drop(_ENTRIES).filter(column(_ENTRY).isNotNull())
        return rows.withColumns({name: column(_ENTRY).getField(name) for name in fields}).drop(_ENTRY)

    def cold(self, entries: DataFrame) -> DataFrame:
        """The keys not hot, through Spark's own window: the user's columns over the input,
        less the hot keys' rows (a lookup that adaptive execution drops when no key is hot)."""
        from pyspark.sql import functions as F

        rows = self.frame.withColumn(_KEY_HASH, self.key_hash(self.request.partition)).join(
            F.broadcast(entries), how="left"
        )
        rows = rows.filter(F.coalesce(_entry_position(), F.lit(0)) == 0).drop(_KEY_HASH, _ENTRIES)
        return rows.withColumns(dict(self.columns))

    def summaries(
        self, rows: DataFrame, observe: Callable[[DataFrame], DataFrame], places: DataFrame | None = None
    ) -> DataFrame:
        """Each hot chunk's totals and what the chunks before it hold (the carry), and the
        key's totals: from the hot ``rows`` (chunked, as the window's exchange reads them),
        aggregated map-side in Spark, passed through ``observe``. Why not from the exchange
        itself: each reader prunes it to its own columns, so Spark would not reuse it, and
        would write a second one. ``places``: the rows' positions are the input's, turned
        into Spark's places (:meth:`at_spark_places`) where read: on the few rows of the edge
        bands once aggregated, where the totals are regrouped (:meth:`regroupable`)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        bands = self.edge_bands
        regrouped = bands is not None and self.regroupable
        checked = bool(self.places_check)
        if checked:
            rows = rows.withColumn(_INPUT_POSITION, column(_POSITION))
        if places is not None and not regrouped:
            rows = self.at_spark_places(rows, places)
        if self.needs_sort_key and bands is None:
            rows = rows.withColumn(_SORT_KEY, self.sort_key())
        key = column(_SORT_KEY)
        # Each chunk's totals, by the carry they make: (kind, what it needs); a total found
        # from the chunk's edge bands is made from their rows after the aggregate (None).
        totals: dict[str, tuple[Column | None, str, Any]] = {_ROWS: (F.count(F.lit(1)), "sum", None)}
        for k, spec in enumerate(self.request.columns):
            arg = column(self.argument(k)) if spec.argument is not None else F.lit(1)
            if spec.function in AGGREGATES and spec.argument is not None:
                totals[f"{PREFIX}c{k}"] = (F.count(arg), "sum", None)
                if spec.function == "sum":
                    totals[f"{PREFIX}s{k}"] = (F.sum(arg), "sum", None)
                if spec.function == "avg":
                    total_kind = _average_sum_type(self.target[spec.name].dataType)
                    totals[f"{PREFIX}s{k}"] = (F.sum(arg.cast(total_kind)), "sum", None)
                if spec.function in ("min", "max"):
                    totals[f"{PREFIX}{spec.function}{k}"] = (getattr(F, spec.function)(arg), spec.function, None)
            if self.positional(spec):
                before, after = _reach(spec)
                # The chunk's last (first) rows' values, its last (first) row first. One row's
                # by Spark's two-argument max_by (min_by), a declarative aggregate, at half the
                # time of its k-row form (an object aggregate) for the same array.
                if before:
                    tail = F.array(F.max_by(arg, key)) if before == 1 else F.max_by(arg, key, before)
                    totals[f"{PREFIX}tail{k}"] = (None if bands else tail, "tail", before)
                if after:
                    head = F.array(F.min_by(arg, key)) if after == 1 else F.min_by(arg, key, after)
                    totals[f"{PREFIX}head{k}"] = (None if bands else head, "head", after)
            elif spec.function in ENDS:
                # The chunk's first or last value (not null, with ignorenulls: min_by and
                # max_by pass over a null ordering).
                ordering = F.when(arg.isNotNull(), key) if spec.ignore_nulls else key
                edge = F.min_by(arg, ordering) if spec.function == "first" else F.max_by(arg, ordering)
                totals[f"{PREFIX}{spec.function}{k}"] = (None if bands else edge, spec.function, spec.ignore_nulls)
        if any(spec.function == "dense_rank" for spec in self.request.columns):
            distinct = F.count_distinct(F.struct(*[column(name) for name in self.orders]))
            totals[_DISTINCT] = (distinct, "sum", None)
        aggregates = {name: value for name, (value, _, _) in totals.items() if value is not None}
        if checked:
            aggregates.update(self.recounted())
        grouped = rows.groupBy(*self.parts, _CHUNK)
        if bands is None:
            chunk_totals = grouped.agg(*[value.alias(name) for name, value in aggregates.items()])
        else:
            listed, counted, derived = self.banded_totals(bands)
            aggregates.update(counted)
            if regrouped:
                # Each band's row a group of its own, the chunk's others one more: Spark's
                # generated hash aggregate passes every row (its object aggregate, for the
                # lists, interpreted every row: 3.6-4.7 task-s at 10^7), and the lists are made
                # from the few groups.
                keyed = [value.alias(name) for name, value in listed.items()]
                groups = rows.groupBy(*self.parts, _CHUNK, *keyed).agg(
                    *[value.alias(name) for name, value in aggregates.items()]
                )
                if places is not None:
                    groups = self.entries_at_spark_places(groups, places, list(listed))
                if bands.share <= ONE_TASK_BANDS:
                    groups = groups.coalesce(1)
                again = {name: getattr(F, totals[name][1] if name in totals else "sum")(name) for name in aggregates}
                grouped, aggregates = groups.groupBy(*self.parts, _CHUNK), again
                listed = {name: column(name) for name in listed}
            collected = {name: F.collect_list(value) for name, value in listed.items()}
            chunk_totals = grouped.agg(*[value.alias(name) for name, value in {**aggregates, **collected}.items()])
            # Each band's rows sorted once (by their key, the window's order, then position: the
            # struct's natural order, not array_sort's lambda, which Spark interprets per
            # comparison), then read by every total made from them.
            chunk_totals = chunk_totals.withColumns({name: F.sort_array(name) for name in listed})
            chunk_totals = chunk_totals.withColumns(derived).drop(*listed, *counted)
        # The chunks, a few, in one task (on a small machine a task per shuffle partition
        # cost more than the chunks' totals: 0.8-1.4 task-s a stage of 32).
        chunk_totals = observe(chunk_totals.coalesce(1))
        by_chunk = Window.partitionBy(*self.parts).orderBy(_CHUNK)
        prior = by_chunk.rowsBetween(Window.unboundedPreceding, -1)
        following = by_chunk.rowsBetween(1, Window.unboundedFollowing)
        whole = by_chunk.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
        carries: dict[str, Column] = {_OWN + _ROWS: column(_ROWS)}
        for name, (_, kind, detail) in totals.items():
            value = column(name)
            if kind in ("sum", "min", "max"):
                combine = getattr(F, kind)
                carries[_BEFORE + name] = combine(value).over(prior)
                carries[_KEY + name] = combine(value).over(whole)
            elif kind == "tail":
                # The rows before the chunk, the nearest first: the chunks' tails, latest first.
                latest_first = F.flatten(F.reverse(F.collect_list(value).over(prior)))
                carries[_BEFORE + name] = F.slice(latest_first, 1, detail)
            elif kind == "head":
                carries[_AFTER + name] = F.slice(F.flatten(F.collect_list(value).over(following)), 1, detail)
            else:
                pick = F.first if kind == "first" else F.last
                carries[_BEFORE + name] = pick(value, ignorenulls=detail).over(prior)
                carries[_KEY + name] = pick(value, ignorenulls=detail).over(whole)
        chunk = column(_CHUNK)
        if checked:
            sums = [F.coalesce(F.sum(f"{_CHECKED}{i}").over(whole), F.lit(0)) for i in range(len(self.places_check))]
            expected = [F.lit(value).cast("long") for value in self.places_check]
            # The chunk is what every row's carry is joined by: the recount is read.
            chunk = F.when(F.array(*sums) != F.array(*expected), F.raise_error(F.lit(_CHANGED))).otherwise(chunk)
        carries_read = [carry.alias(name) for name, carry in carries.items()]
        carried = chunk_totals.select(*self.parts, chunk.alias(_CHUNK), *carries_read)
        parts = self.edge_parts()
        return carried.withColumns(parts) if parts else carried

    def recounted(self) -> dict[str, Column]:
        """Per chunk, :func:`keysplit.spark.sorter_places.check_sums`' six sums over its rows
        at their input positions: summed over the chunks, what :meth:`summaries` compares with
        :attr:`places_check`."""
        from pyspark.sql import functions as F

        partition, place = partition_and_place(column(_INPUT_POSITION))
        counted = partition < COUNTED_PARTITIONS
        null = column(self.orders[0]).isNull()
        sums = [
            F.count_if(counted),
            F.sum(F.when(counted, place)),
            F.sum(F.when(counted, partition)),
            F.count_if(null),
            F.sum(F.when(null, place)),
            F.sum(F.when(null, partition)),
        ]
        return {f"{_CHECKED}{i}": value for i, value in enumerate(sums)}

    @property
    def regroupable(self) -> bool:
        """Whether :meth:`summaries`' chunk totals can be aggregated in two steps, first per
        group of rows, then per chunk, to the same values: counts, minimums, maximums, and sums
        of integers or floating-point numbers (a decimal's sum of sums is of a wider type, and
        ``dense_rank``'s count of distinct values counts no groups)."""
        from pyspark.sql.types import DecimalType

        return not any(
            spec.function == "dense_rank"
            or (spec.function in ("sum", "avg") and isinstance(self.target[spec.name].dataType, DecimalType))
            for spec in self.request.columns
        )

    def banded_totals(self, bands: EdgeBands) -> tuple[dict[str, Column], dict[str, Column], dict[str, Column]]:
        """The chunk totals found from the chunks' edge bands (:class:`EdgeBands`): each
        band's row's entry, null out of the band (``listed``: :meth:`summaries` lists a chunk's
        entries), the counts of values the checks read (``counted``), and each total made
        from the lists (``derived``), named and shaped as :meth:`summaries` names them. A band
        holding fewer rows than its edge reads (the client's sort and Spark's apart at a
        bound) fails the query rather than give a wrong value."""
        from pyspark.sql import functions as F

        key = self.sort_key().alias("key")
        columns = self.request.columns
        read = [
            k
            for k, spec in enumerate(columns)
            if self.positional(spec) or (spec.function in ENDS and not spec.ignore_nulls)
        ]
        entry = F.struct(key, *[column(self.argument(k)).alias(f"a{k}") for k in read])
        listed: dict[str, Column] = {}
        counted: dict[str, Column] = {}
        if bands.head_rows:
            listed[_HEADS] = F.when(self.in_band(bands.heads, head=True), entry)
        if bands.tail_rows:
            listed[_TAILS] = F.when(self.in_band(bands.tails, head=False), entry)
        for k, bounds in bands.present:
            arg = column(self.argument(k))
            inside = self.in_band(bounds, head=columns[k].function == "first") & arg.isNotNull()
            listed[f"{_VALUED}{k}"] = F.when(inside, F.struct(key, arg.alias("a")))
            counted[f"{PREFIX}values{k}"] = F.count(arg)

        def checked(value: Column, short: Column) -> Column:
            message = (
                "keysplit window: a chunk's edge band holds fewer rows than its edge reads (the sample's "
                "order, sorted on the client, and Spark's differ at a band's bound); call it with another "
                "seed, or use Spark's own window"
            )
            return F.when(short, F.raise_error(F.lit(message))).otherwise(value)

        def band(name: str, needed: int, k: int) -> Column:
            """Column ``k``'s argument over band ``name``'s rows (sorted: the window's order)."""
            short = F.size(column(name)) < F.least(F.lit(needed), column(_ROWS))
            return checked(F.transform(column(name), lambda e: e.getField(f"a{k}")), short)

        derived: dict[str, Column] = {}
        for k, spec in enumerate(columns):
            if self.positional(spec):
                before, after = _reach(spec)
                if before:
                    latest_first = F.reverse(band(_TAILS, bands.tail_rows, k))
                    derived[f"{PREFIX}tail{k}"] = F.slice(latest_first, 1, before)
                if after:
                    derived[f"{PREFIX}head{k}"] = F.slice(band(_HEADS, bands.head_rows, k), 1, after)
            elif spec.function in ENDS:
                end = 1 if spec.function == "first" else -1
                if not spec.ignore_nulls:
                    edge = band(_HEADS, bands.head_rows, k) if end == 1 else band(_TAILS, bands.tail_rows, k)
                    derived[f"{PREFIX}{spec.function}{k}"] = F.try_element_at(edge, F.lit(end))
                    continue
                valued = column(f"{_VALUED}{k}")
                short = (F.size(valued) == 0) & (column(f"{PREFIX}values{k}") > 0)
                value = F.try_element_at(valued, F.lit(end)).getField("a")
                derived[f"{PREFIX}{spec.function}{k}"] = checked(value, short)
        return listed, counted, derived

    def window(self, spec: WindowColumn) -> Any:
        """The Spark window a column's value within its chunk is computed over: partitioned
        by the key and the cell, in the user's ordering and frame."""
        from pyspark.sql import Window

        if self.in_position_order(spec):
            w = self.by_position()
        else:
            w = Window.partitionBy(*self.parts, self.cell_name)
            if self.request.order:
                w = w.orderBy(*self.sort_orders())
        frame = spec.frame
        if frame is None:
            return w

        def end(value: int | None, unbounded: int) -> int:
            return unbounded if value is None else value

        start = end(frame.start, Window.unboundedPreceding)
        stop = end(frame.end, Window.unboundedFollowing)
        return w.rowsBetween(start, stop) if frame.rows else w.rangeBetween(start, stop)

    def in_position_order(self, spec: WindowColumn) -> bool:
        """Whether a column's value within its chunk is computed over :meth:`by_position`: a
        positional column, and where there is one, a column that follows the rows' order
        alone (``row_number``, ``ntile``, a ROWS frame from the first row), whose rows reach
        the user's ordering in that order anyway. Why: Spark runs a window operator per
        ordering, each buffering every row again (``row_number``, ``lag`` and a bounded sum
        over an ordering with ties: two operators, 25-32 task-s at 10^7 rows)."""
        if self.positional(spec):
            return True
        if not _follows_rows(spec):
            return False
        if self.request.whole_frame:
            return self.needs_position
        return any(self.positional(other) for other in self.request.columns)

    def by_position(self) -> Any:
        """The window of a positional column (:meth:`positional`): peers ordered by their
        position in the input, as :meth:`sort_key` orders them; where the rows reach it so
        sorted (:attr:`sorted_by_position`), the user's ordering."""
        from pyspark.sql import Window

        w = Window.partitionBy(*self.parts, self.cell_name)
        if self.sorted_by_position:
            return w.orderBy(*self.sort_orders())
        return w.orderBy(*self.sort_orders(), column(_POSITION))

    @property
    def sorted_by_position(self) -> bool:
        """Whether each chunk's rows reach Spark's window sorted by the user's ordering then
        their place among peers (:data:`_POSITION`): with no ``partitionBy``, where a column
        reads that place. Spark's window, ordered by the user's ordering alone, then sorts
        nothing and sees peers in that order: one window operator serves every column,
        ``last`` over a RANGE frame and a running sum among them, where a window over the
        ordering and the position, then one over the ordering (the peers), each buffered
        every row again, and ``last`` over the peers could not be given the place."""
        return self.request.whole_frame and bool(self.request.order) and self.needs_position

    def row_number_name(self, k: int) -> str:
        """The column of a hot row's number within its chunk that column ``k`` reads (a
        positional column, ``ntile``): one for all where the rows reach the window sorted
        (:attr:`sorted_by_position`), numbered by their place in the partition (:meth:`branches`)."""
        return _ROW_NUMBER if self.sorted_by_position else f"{_local(k)}_rn"

    def locals(self) -> list[dict[str, Column]]:
        """Each column's value within its chunk: Spark's own function over :meth:`window`,
        and what a hot row's value is made of; in two layers,
        the positional columns' first. Spark sorts for each ordering it meets, so the finer
        ordering (:meth:`by_position`) goes first: the user's ordering, a prefix of it,
        then needs no sort of its own."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        positional: dict[str, Column] = {}
        others: dict[str, Column] = positional if self.sorted_by_position else {}
        peers = (
            Window.partitionBy(*self.parts, self.cell_name).orderBy(*self.sort_orders()) if self.request.order else None
        )
        for k, spec in enumerate(self.request.columns):
            w = self.window(spec)
            arg = column(self.argument(k)) if spec.argument is not None else F.lit(1)
            name = spec.function
            values = positional if self.in_position_order(spec) else others
            if not self.sorted_by_position:
                # Else every row has its number already (branches).
                if self.positional(spec):
                    values[self.row_number_name(k)] = F.row_number().over(self.by_position())
                elif name == "ntile":
                    values[self.row_number_name(k)] = F.row_number().over(w)
            if name == "avg":
                # Spark's avg is its sum, in the type it sums in, over its count, the two
                # a row near an edge adds to: no third aggregate over the frame (a bounded
                # frame's is summed again for every row).
                total_kind = _average_sum_type(self.target[spec.name].dataType)
                values[f"{_local(k)}_s"] = F.sum(arg.cast(total_kind)).over(w)
                values[f"{_local(k)}_c"] = F.count(arg).over(w)
            elif name in AGGREGATES:
                values[_local(k)] = getattr(F, name)(arg).over(w)
            elif name in OFFSETS:
                values[_local(k)] = getattr(F, name)(arg, spec.offset, spec.default).over(w)
            elif name in ENDS:
                values[_local(k)] = getattr(F, name)(arg, ignorenulls=spec.ignore_nulls).over(w)
            elif name == "ntile":
                pass  # final reads the row's number alone
            elif name == "row_number" and self.sorted_by_position:
                values[_local(k)] = column(_ROW_NUMBER)
            elif name in ("percent_rank", "cume_dist"):
                assert peers is not None
                values[_local(k)] = getattr(F, name)().over(w)
                if name == "percent_rank":
                    values[f"{_local(k)}_rank"] = F.rank().over(w)
                else:
                    running = peers.rangeBetween(Window.unboundedPreceding, Window.currentRow)
                    values[f"{_local(k)}_peers"] = F.count(F.lit(1)).over(running)
            else:
                values[_local(k)] = getattr(F, name)().over(w)
        # One layer where they are one (a second, the same, Spark would analyse again).
        layers = [positional] if others is positional else [positional, others]
        return [layer for layer in layers if layer]

    def final(self, k: int, spec: WindowColumn) -> Column:
        """Column ``k``'s value for a hot row: its chunk's (local) combined with its carry."""
        from pyspark.sql import functions as F

        kind = self.target[spec.name].dataType
        local = column(_local(k))
        rows_before = F.coalesce(column(_BEFORE + _ROWS), F.lit(0))
        key_rows = column(_KEY + _ROWS)
        whole = spec.frame is not None and spec.frame.kind == "whole"

        def total(kind: str, where: str) -> Column:
            return column(f"{where}{PREFIX}{kind}{k}")

        name = spec.function
        if self.positional(spec):
            # Only a row within reach of its chunk's edges reads past them (the arrays'
            # work is then done for a few rows a chunk, not all).
            before, after = _reach(spec)
            rn, own = column(self.row_number_name(k)), column(_OWN + _ROWS)
            near = (rn <= F.lit(before)) | (own - rn < F.lit(after))
            if name == "avg":
                local = self.average(k, column(f"{_local(k)}_s"), column(f"{_local(k)}_c"))
            return F.when(near, self.across_edges(k, spec).cast(kind)).otherwise(local.cast(kind))
        if name in ENDS:
            edge = total(name, _KEY if whole else _BEFORE)
            if whole:
                combined = edge
            elif name == "first":
                # The key's first value is its first chunk's (with ignorenulls, the first
                # chunk's that has one).
                combined = (
                    F.coalesce(edge, local) if spec.ignore_nulls else F.when(rows_before > 0, edge).otherwise(local)
                )
            else:
                # Running: the current row's peers' last, or with ignorenulls the chunks' before.
                combined = F.coalesce(local, edge) if spec.ignore_nulls else local
            return combined.cast(kind)
        if name == "count":
            if spec.argument is None:
                combined = key_rows if whole else local + rows_before
            else:
                combined = total("c", _KEY) if whole else local + F.coalesce(total("c", _BEFORE), F.lit(0))
        elif name == "sum":
            combined = total("s", _KEY) if whole else _sum(local, total("s", _BEFORE))
        elif name in ("min", "max"):
            combine = F.least if name == "min" else F.greatest
            combined = total(name, _KEY) if whole else combine(local, total(name, _BEFORE))
        elif name == "avg":
            if whole:
                sums, counts = total("s", _KEY), total("c", _KEY)
            else:
                sums = _sum(column(f"{_local(k)}_s"), total("s", _BEFORE))
                counts = column(f"{_local(k)}_c") + F.coalesce(total("c", _BEFORE), F.lit(0))
            combined = self.average(k, sums, counts)
        elif name in ("row_number", "rank"):
            combined = local + rows_before
        elif name == "dense_rank":
            combined = local + F.coalesce(column(_BEFORE + _DISTINCT), F.lit(0))
        elif name == "percent_rank":
            rank = column(f"{_local(k)}_rank") + rows_before
            combined = F.when(key_rows > 1, (rank - 1).cast("double") / (key_rows - 1).cast("double")).otherwise(
                F.lit(0.0)
            )
        elif name == "cume_dist":
            combined = (column(f"{_local(k)}_peers") + rows_before).cast("double") / key_rows.cast("double")
        elif name == "ntile":
            combined = _ntile(column(self.row_number_name(k)) + rows_before, key_rows, spec.buckets)
        else:
            raise AssertionError(name)
        return combined.cast(kind)

    def across_edges(self, k: int, spec: WindowColumn) -> Column:
        """The value of a positional column (``lag``, ``lead``, a bounded ROWS frame) of a hot
        row within reach of its chunk's edges (:meth:`final` asks no other): its chunk's rows
        from Spark's window, and the rows past the edges, the chunks before's last (nearest
        first) and the chunks after's first, from the carries."""
        from pyspark.sql import functions as F

        rn = column(self.row_number_name(k))
        own = column(_OWN + _ROWS)
        local = column(_local(k))
        if spec.function in OFFSETS:
            tail = column(f"{_BEFORE}{PREFIX}tail{k}")
            head = column(f"{_AFTER}{PREFIX}head{k}")
            kind = self.target[spec.name].dataType
            default = spec.default if spec.default is not None else F.lit(None)
            before, after = _reach(spec)
            if before:
                # ``before`` rows back, past the chunk's start: the tail's ``before - rn + 1``-th.
                needed = (F.lit(before) - rn + 1).cast("int")
                return F.when(F.size(tail) >= needed, F.try_element_at(tail, needed)).otherwise(default.cast(kind))
            # ``after`` rows on, past the chunk's end: the head's ``after - (own - rn)``-th.
            needed = (F.lit(after) - (own - rn)).cast("int")
            return F.when(F.size(head) >= needed, F.try_element_at(head, needed)).otherwise(default.cast(kind))
        # A bounded frame: the part of the frame past each edge, per chunk (:meth:`edge_parts`),
        # for the row's distance from its chunk's start (end).
        before, after = _reach(spec)
        parts = []
        if before:
            parts.append(F.try_element_at(column(f"{_BEFORE}{PREFIX}tailpart{k}"), rn.cast("int")))
        if after:
            parts.append(F.try_element_at(column(f"{_AFTER}{PREFIX}headpart{k}"), (own - rn + 1).cast("int")))
        name = spec.function
        if name == "count":
            return sum((F.coalesce(part.getField("c"), F.lit(0)) for part in parts), local)
        if name in ("min", "max"):
            combine = F.least if name == "min" else F.greatest
            return combine(local, *[part.getField("m") for part in parts])
        if name == "sum":
            total = local
            for part in parts:
                total = _sum(total, part.getField("s"))
            return total
        sums, counts = column(f"{_local(k)}_s"), column(f"{_local(k)}_c")
        for part in parts:
            sums, counts = _sum(sums, part.getField("s")), counts + F.coalesce(part.getField("c"), F.lit(0))
        return self.average(k, sums, counts)

    def edge_parts(self) -> dict[str, Column]:
        """Per chunk, for each bounded ROWS frame, the part of a row's frame past the chunk's
        start for the row ``r`` rows into it (``r`` up to the frame's reach back), and past its
        end for the row ``d`` rows before it: a struct of what the frame's aggregate adds (a
        sum ``s`` of the values, a count ``c``, an extreme ``m``), computed from the chunk's
        carried edge rows. Why here and not per row: the arrays' higher-order functions have
        no generated code, and in the row's projection Spark then copied every row to call
        them (a bounded sum over 10^7 rows: 19-22 task-s in the window stage, 8.5-12 without)."""
        parts: dict[str, Column] = {}
        for k, spec in enumerate(self.request.columns):
            if self.positional(spec) and spec.function not in OFFSETS:
                parts.update(self.bounded_parts(k, spec))
        return parts

    def bounded_parts(self, k: int, spec: WindowColumn) -> dict[str, Column]:
        """:meth:`edge_parts` of column ``k``, a bounded ROWS frame."""
        from pyspark.sql import functions as F

        assert spec.frame is not None and spec.frame.start is not None and spec.frame.end is not None
        start, end = spec.frame.start, spec.frame.end
        before, after = _reach(spec)
        kind = self.target[spec.name].dataType
        total_kind = kind if spec.function == "sum" else _average_sum_type(kind)

        def part(values: Column) -> Column:
            present = F.filter(values, lambda x: x.isNotNull())
            if spec.function == "count":
                return F.struct(F.size(values if spec.argument is None else present).alias("c"))
            if spec.function in ("min", "max"):
                gather = F.array_min if spec.function == "min" else F.array_max
                return F.struct(gather(values).alias("m"))
            added = F.when(
                F.size(present) > 0,
                F.aggregate(
                    present, F.lit(0).cast(total_kind), lambda acc, x: (acc + x.cast(total_kind)).cast(total_kind)
                ),
            )
            return F.struct(added.alias("s"), F.size(present).alias("c"))

        def piece(array: Column, low: Column, high: Column) -> Column:
            return part(F.slice(array, low.cast("int"), F.greatest(high - low + 1, F.lit(0)).cast("int")))

        def back(r: Column) -> Column:
            # Row ``q`` before the chunk is the tail's ``chunk start - q``-th.
            low = F.greatest(F.lit(1) - r - F.lit(end), F.lit(1))
            return piece(column(f"{_BEFORE}{PREFIX}tail{k}"), low, F.lit(1) - r - F.lit(start))

        def on(d: Column) -> Column:
            # The row ``d`` rows before the chunk's last (its ``r - own`` is ``-d``).
            low = F.greatest(-d + F.lit(start), F.lit(1))
            return piece(column(f"{_AFTER}{PREFIX}head{k}"), low, -d + F.lit(end))

        parts = {}
        if before:
            parts[f"{_BEFORE}{PREFIX}tailpart{k}"] = F.transform(F.sequence(F.lit(1), F.lit(before)), back)
        if after:
            parts[f"{_AFTER}{PREFIX}headpart{k}"] = F.transform(F.sequence(F.lit(0), F.lit(after - 1)), on)
        return parts

    def average(self, k: int, sums: Column, counts: Column) -> Column:
        """Spark's ``avg`` from a sum and a count: a decimal as Spark divides it (the sum at
        its precision, over the count as a ``decimal(20,0)``), anything else as a double."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import DecimalType

        kind = self.target[self.request.columns[k].name].dataType
        if isinstance(kind, DecimalType):
            quotient = sums / counts.cast("decimal(20,0)")
        else:
            quotient = sums.cast("double") / counts.cast("double")
        return F.when(counts > 0, quotient)

    @property
    def in_input_order(self) -> bool:
        """Whether the window has no ``partitionBy`` and is ordered by
        ``monotonically_increasing_id()`` alone (the rows' order in the input), and every
        column ranks the row: then each is a function of the row's consecutive index and the
        count of rows (:mod:`.row_index`), and no row moves (:meth:`ranked_in_place`)."""
        if not self.request.whole_frame or len(self.request.order) != 1:
            return False
        call = function_call(self.request.order[0].expression)
        if call is None or call[0] != "monotonically_increasing_id":
            return False
        return all(spec.function in RANKING for spec in self.request.columns)

    def ranked_in_place(self, report: Report[WindowSplitReport] | None) -> DataFrame:
        """The plan when :attr:`in_input_order`: every row ranked by its consecutive index
        (:func:`.row_index.indexed`), where it is. The report's chunks are the input's
        partitions, with their rows."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        observations: tuple[Any, Any, Any] = (Observation(), Observation(), Observation())

        def observe_partitions(counts: DataFrame) -> DataFrame:
            if report is None:
                return counts
            [part] = self.parts
            chunk = F.struct(F.lit(0).alias(part), column(PARTITION).alias(_CHUNK), column(COUNT).alias(_ROWS))
            return observing(counts, observations[1], F.collect_list(chunk).alias("chunks"))

        rows = indexed(self.frame, observe_partitions)
        total = column(ROWS_TOTAL)
        index = column(ROW_INDEX) if self.request.order[0].ascending else total - 1 - column(ROW_INDEX)
        number = index + 1
        values = {
            "row_number": number,
            "rank": number,
            "dense_rank": number,
            "percent_rank": F.when(total > 1, index.cast("double") / (total - 1).cast("double")).otherwise(0.0),
            "cume_dist": number.cast("double") / total.cast("double"),
        }
        outputs = {
            spec.name: (_ntile(number, total, spec.buckets) if spec.function == "ntile" else values[spec.function])
            for spec in self.request.columns
        }
        if report is not None:
            rows = observing(rows, observations[2], F.count(F.lit(1)).alias("rows"))
            report.bind(lambda: self.report(observations))
        return rows.select(
            *[
                outputs[f.name].cast(f.dataType).alias(f.name) if f.name in outputs else column(f.name)
                for f in self.target.fields
            ]
        )

    def plan(self, report: Report[WindowSplitReport] | None, entries: DataFrame | None = None) -> DataFrame:
        """The lazy plan; its hot keys' ``entries`` as :meth:`measured` made them, or
        (None) from :meth:`hot_entries`' sample in the plan."""
        if self.per_key_only:
            return self.per_key(report)
        if self.by_peers:
            return self.per_peer(report)
        cold, hot = self.branches(report, entries)
        return hot if self.request.whole_frame else cold.union(hot)

    def no_rows(self) -> DataFrame:
        """The cold branch of a window with no ``partitionBy``, whose every row is its one
        key's: Spark's window over no rows (the schema, nothing to compute), partitioned by a
        literal, which is the same window without PySpark's warning, sent with each plan that
        holds it, that a window with no ``partitionBy`` moves every row to one task."""
        import copy

        from pyspark.sql import functions as F
        from pyspark.sql.connect.column import Column as ConnectColumn

        def partitioned(node: Any) -> Any:
            if type(node).__name__ != "WindowExpression" or node._windowSpec._partitionSpec:
                return None
            spec, whole = copy.copy(node._windowSpec), copy.copy(node)
            spec._partitionSpec = [F.lit(0)._expr]
            whole._windowSpec = spec
            return whole

        columns: dict[str, Column] = {
            name: ConnectColumn(rewritten(given._expr, partitioned)) for name, given in self.columns
        }
        return self.frame.withColumns(columns).limit(0)

    def branches(
        self,
        report: Report[WindowSplitReport] | None,
        entries: DataFrame | None = None,
        *,
        hold: Callable[[DataFrame], DataFrame] | None = None,
    ) -> tuple[DataFrame, DataFrame]:
        """:meth:`plan`'s two branches, whose union it is: the keys not hot through Spark's
        own window (its output hash-partitioned by the partition columns, as Spark's), and
        the hot keys' rows split. An operator on those keys above reads each apart
        (:func:`keysplit.spark.optimize` fuses it so). Not for :attr:`per_key_only` windows.
        ``hold``: what the hot rows, with their chunks, pass through before the two readers
        of them (the window's exchange, the chunks' totals): persisted there, each row's chunk
        is found once."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        assert not self.per_key_only
        if self.in_input_order:
            return self.no_rows(), self.ranked_in_place(report)
        # Spark's places among peers, where they differ from the input's, read after the
        # exchange and on the edge bands' rows: the input is sent and totalled meanwhile (at
        # 10^7 rows with 1 % nulls the chunks' totals 4.0 -> 1.6-1.8 task-s; read on every
        # row before the exchange, the places were in both stages' way).
        prepared = self.prepared()
        places = self.known_places
        if places is None and self.radix_ties:
            places = self.spark_places(prepared)
        if entries is None:
            entries = self.hot_entries(prepared)
        rows = self.chunked(self.hot_rows(prepared, entries))
        if self.cell_name == _CELL:
            rows = rows.withColumn(_CELL, self.cell())
        rows = rows.drop(_KEY_HASH, _CHUNKS, _FIRST_CELL, *self.cut_columns, _CUT_KEYS)
        if hold is not None:
            rows = hold(rows)
        observations: tuple[Any, Any, Any] | None = (
            (Observation(), Observation(), Observation()) if report is not None else None
        )

        def observe_chunks(chunks: DataFrame) -> DataFrame:
            if observations is None:
                return chunks
            chunk = F.struct(*[column(name) for name in self.parts], _CHUNK, _ROWS)
            return observing(chunks, observations[1], F.collect_list(chunk).alias("chunks"))

        windowed = rows.repartitionById(self.hot_cells, self.cell_name)
        if places is not None:
            windowed = self.at_spark_places(windowed, places)
        if self.request.whole_frame and self.request.order:
            # A partition is one chunk: sorted first by the leading order column alone (a
            # radix sort of its prefix), Spark's sort for the window meets runs (its stage
            # 8.1 -> 5.0 task-s at 10^7 rows, offsets over 32 chunks).
            windowed = windowed.sortWithinPartitions(self.sort_orders()[0])
        if self.sorted_by_position:
            # Then sorted whole, by the cell (the window's partition, one a task), the ordering
            # and the place among peers: the window's own ordering is then met. The filter of
            # nothing keeps Spark's optimizer from dropping the presort below a sort (a filter
            # it cannot see through: the partition's id); without the presort the window
            # stage took 15-17 task-s, with it 12-13.
            windowed = windowed.filter(F.spark_partition_id() >= 0)
            windowed = windowed.sortWithinPartitions(*self.parts, self.cell_name, *self.sort_orders(), _POSITION)
            # A row's number in its chunk, the partition, is its place there: no frame of the
            # window's computes it (the window stage 10.6-11.4 -> 10.0-10.9 task-s at 10^7 rows).
            partition, place = partition_and_place(F.monotonically_increasing_id())
            number = F.when(partition == column(self.cell_name), place + 1).otherwise(F.raise_error(F.lit(_MIXED)))
            windowed = windowed.withColumn(_ROW_NUMBER, number)
        for layer in self.locals():
            windowed = windowed.withColumns(layer)
        carried = self.with_carries(windowed, self.summaries(rows, observe_chunks, places))
        outputs = {spec.name: self.final(k, spec) for k, spec in enumerate(self.request.columns)}
        hot = carried.select(
            *[outputs[f.name].alias(f.name) if f.name in outputs else column(f.name) for f in self.target.fields]
        )
        # Every row of a window with no partitionBy is its one key's, always an entry.
        cold = self.no_rows() if self.request.whole_frame else self.cold(entries)
        if observations is not None:
            assert report is not None
            # Each branch's rows apart (an operator fused above reads them apart); adaptive
            # execution drops a branch with no rows whole, its observation with it.
            cold = observing(cold, observations[0], F.count(F.lit(1)).alias("rows"))
            hot = observing(hot, observations[2], F.count(F.lit(1)).alias("rows"))
            report.bind(lambda: self.report(observations))
        return cold, hot

    def report(self, observations: tuple[Any, ...]) -> WindowSplitReport | None:
        """From the observations of the rows (of the cold branch; of the hot one, third,
        where there is one) and the chunks."""
        branches = [observed(observations[0]), *[observed(given) for given in observations[2:]]]
        if not any(branches):
            return None
        seen = {"rows": sum(int(branch.get("rows", 0)) for branch in branches)}
        names = list(self.request.partition_names)
        # Spark drops the chunk totals with their observation when no key is hot.
        chunks = observed_rows(
            observed(observations[1]).get("chunks", []),
            (*self.parts, _CHUNK, _ROWS),
            (*names, "chunk", "rows"),
            {"chunk": pl.Int32, "rows": pl.Int64},
        )
        hot = (
            chunks.group_by(names, maintain_order=True)
            .agg(
                pl.col("rows").sum(),
                pl.len().cast(pl.Int32).alias("chunks"),
                pl.col("rows").max().alias("largest_chunk"),
                pl.col("rows").min().alias("smallest_chunk"),
            )
            .sort("rows", descending=True)
        )
        return WindowSplitReport(
            workers=self.workers, rows=int(seen["rows"]), sample_fraction=self.sample_fraction, hot=hot
        )


@dataclass(frozen=True)
class WindowSplitReport:
    """What :func:`window` did, filled when an action runs its result: the input's
    ``rows``; per hot key (its partition values), its exact ``rows``, the ``chunks`` they
    were cut into and the rows of the ``largest_chunk`` and ``smallest_chunk`` (a run of
    equal order values is never cut, so a chunk may hold more than its share); the
    ``workers`` (tasks) and the ``sample_fraction`` the hot keys were found from. A key not
    hot is in Spark's own window, whole."""

    workers: int
    rows: int
    sample_fraction: float
    hot: pl.DataFrame
    #: Why Spark's own window ran instead of keysplit's (the cost guard's rule, with its
    #: figures), or None when keysplit's plan ran.
    left_to_spark: str | None = None
    #: Whether each value came from its row's group of peers, no row moved: the key's
    #: ``chunks`` are then its groups of equal order values, the ``largest_chunk`` and
    #: ``smallest_chunk`` their rows.
    by_peers: bool = False

    @property
    def mean_task_rows(self) -> float:
        return self.rows / max(self.workers, 1)


def estimated_values(sampled: pl.Series, fraction: float) -> tuple[float, float]:
    """The distinct values of an input, estimated from a Bernoulli sample of it at
    ``fraction`` (``sampled``: the sampled rows of each value seen), and a bound on them.

    The estimate is Chao's: the values seen, plus ``f1² / 2 f2`` unseen, from those seen once
    (``f1``) and twice (``f2``). It is low where rare values are many beside common ones (a
    lower bound in expectation), which costs :meth:`SkewWindow.per_peer` time, never
    exactness. The bound adds, as values of their own, the rows that the values seen once
    stand for beyond what values like the common ones would give: values of ``m`` rows are
    seen about ``λ = m · fraction`` times, so that ``f1 / f2 = 2 / λ`` and ``f3 / f2 = λ / 3``;
    with ``λ`` from ``f3`` (at its count's upper bound) the excess ``e = f1 - 2 f2 / λ`` of
    values seen once each stands for ``1 / fraction`` rows, each counted a value."""
    once = int((sampled == 1).sum())
    twice = int((sampled == 2).sum())
    thrice = int((sampled == 3).sum())
    unseen = once * once / (2 * twice) if twice else once * (once - 1) / 2
    estimate = sampled.len() + unseen
    if not twice or not thrice:
        return estimate, sampled.len() - once + once / fraction
    seen_each = 3 * (thrice + 2 * math.sqrt(thrice)) / twice
    excess = max(0.0, once - 2 * twice / seen_each)
    return estimate, estimate + excess / fraction


def _entry_position() -> Column:
    """Where the row's key is in the hot keys' entries, from 1; 0 when not there, null when
    there are none."""
    from pyspark.sql import functions as F

    return F.array_position(column(_ENTRIES).getField(_KEY_HASH), column(_KEY_HASH))


def _follows_rows(spec: WindowColumn) -> bool:
    """Whether a column's value follows the rows' order among peers: ``row_number``,
    ``ntile``, a ROWS frame from the first row."""
    frame = spec.frame
    return spec.function in ("row_number", "ntile") or (frame is not None and frame.rows and frame.kind == "running")


def _reach(spec: WindowColumn) -> tuple[int, int]:
    """How many rows before and after its own a positional column's row reads: a ``lag``'s
    offset back (a negative one forward), a ``lead``'s forward, a bounded frame's ends."""
    if spec.function in OFFSETS:
        forward = spec.offset if spec.function == "lead" else -spec.offset
        return max(0, -forward), max(0, forward)
    assert spec.frame is not None and spec.frame.start is not None and spec.frame.end is not None
    return max(0, -spec.frame.start), max(0, spec.frame.end)


def _average_sum_type(average: DataType) -> DataType:
    """The type Spark's ``avg`` sums in: for ``avg`` of a ``decimal(p, s)`` (a
    ``decimal(p + 4, s + 4)``), ``decimal(p + 10, s)`` (at most 38 digits); else double."""
    from pyspark.sql.types import DecimalType, DoubleType

    if isinstance(average, DecimalType):
        precision, scale = average.precision - 4, average.scale - 4
        return DecimalType(min(38, precision + 10), scale)
    return DoubleType()


def _sum(local: Column, before: Column) -> Column:
    """A running sum plus the sums before it, null only where both are (Spark's ``sum`` of
    no non-null value)."""
    from pyspark.sql import functions as F

    return F.when(before.isNull(), local).when(local.isNull(), before).otherwise(local + before)


def _ntile(row_number: Column, rows: Column, buckets: int) -> Column:
    """Spark's ``ntile(buckets)`` of the row at ``row_number`` of ``rows``: the first
    ``rows % buckets`` buckets hold one row more than the others."""
    from pyspark.sql import functions as F

    size = (rows / F.lit(buckets)).cast("long")
    padded = rows % F.lit(buckets)
    threshold = (size + 1) * padded
    return F.when(row_number <= threshold, F.floor((row_number - 1) / (size + 1)) + 1).otherwise(
        padded + F.floor((row_number - threshold - 1) / size) + 1
    )


def window(
    frame: DataFrame,
    columns: Mapping[str, Column],
    *,
    workers: int | None = None,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    report: Report[WindowSplitReport] | None = None,
) -> DataFrame:
    """``frame.withColumns(columns)`` for window columns (``F.f(...).over(w)``), with a hot
    key's window partition cut into ranges of the ordering: a lazy DataFrame equal to
    Spark's, row for row. Also ``keysplit.spark.skewed(frame).withColumns(columns)``.

    Every column is over one ``Window.partitionBy(...).orderBy(...)`` (the frames may
    differ; with no ``partitionBy``, the whole frame is one partition, cut into ranges of the
    ordering), and one of: ``count``, ``sum``, ``min``, ``max``, ``avg`` over a running frame
    (Spark's default with an ordering, or ``rowsBetween(Window.unboundedPreceding,
    Window.currentRow)``), a bounded ROWS frame (``rowsBetween(-a, b)``) or the whole
    partition; ``row_number``, ``rank``, ``dense_rank``, ``percent_rank``, ``cume_dist``,
    ``ntile``; ``lag`` and ``lead`` (an offset, a default); ``first`` and ``last`` (with
    ``ignorenulls``) over a running frame or the whole partition. Anything else is refused
    by name. Among rows with equal order values, ``lag``, ``lead``, ``first``, ``last`` and
    bounded frames see the rows in their order in the input, as Spark's own window does
    for a file or cached input in ``local`` mode (on a cluster Spark's order of such rows
    varies from run to run); with no ``partitionBy`` and one nullable order column of a type
    Spark sorts by radix (numbers, dates, timestamps), in the order Spark's sorter leaves
    them, which moves rows for the nulls (the Spark guide says how), and so do
    ``row_number``, ``ntile`` and ROWS running frames. A
    floating-point running sum or average of a hot key is added up chunk by chunk, so it may
    differ from Spark's in the last bits (Spark's own differs between plans as much); integers
    and decimals are exact.

    ``workers`` (default: the shuffle's partitions) is how many tasks the window runs in, and
    what a key's rows are measured against: a key with more than a mean task's rows is cut
    into chunks, which fill the tasks on top of the other keys' rows. ``seed`` seeds the sample the hot keys are found from. ``report``
    (a :class:`keysplit.spark.Report`) is filled with a :class:`WindowSplitReport` when an
    action runs the result. The plan is in the module's notes; no Spark job runs here (Spark
    reads the schemas). The input is read four times (the sample, the keys not hot, the hot
    keys' rows and their chunk totals; three times with no ``partitionBy``, which leaves no
    key not hot; twice when every column is one value per key): cache an input that is
    costly to compute. With no ``partitionBy``, ordered by ``monotonically_increasing_id()``
    alone and every column a rank of the row, no row moves: each is counted from the row's
    place in the input (:func:`keysplit.spark.with_row_index`).
    """
    if not is_spark_frame(frame):
        raise ConfigTypeError(f"window works on a Spark DataFrame, got {type(frame).__name__}")
    handle = session_for(frame, session)
    planned = planned_window(frame, columns, workers=workers, seed=seed, handle=handle)
    batch_input(handle, report, frame)
    return planned.plan(report)


def planned_window(
    frame: DataFrame, columns: Mapping[str, Column], *, workers: int | None, seed: int, handle: Session
) -> SkewWindow:
    """:func:`window`'s arguments checked, and its plan's parts (no Spark job runs)."""
    request = window_request(columns)
    seed = require_seed(seed)
    workers = require_task_workers(shuffle_partitions(handle) if workers is None else require_workers(workers))
    with warnings.catch_warnings():
        # PySpark's warning that a window with no partitionBy runs in one task: this one is split.
        warnings.filterwarnings("ignore", message="WARN WindowExpression: No Partition Defined")
        schema, target = handle.gathered(
            "reading the window's schemas",
            lambda: frame.schema,
            lambda: frame.withColumns(dict(columns)).schema,
            check=lambda: _check_names(columns, handle.call("reading the schema", lambda: frame.schema)),
        )
    _check_names(columns, schema)
    planned = SkewWindow(frame, request, workers, seed, schema, target, tuple(columns.items()))
    # The types turn a descending order around (ordered_fields), for the chunks' cuts too.
    # With no partitionBy, for its cuts as literals (SkewWindow.with_cut_values) too.
    typed = planned.needs_sort_key or request.whole_frame or not all(key.ascending for key in request.order)
    if request.order and typed:
        orders = [key.expression for key in request.order]
        kinds = handle.call("reading the order's types", lambda: frame.select(*orders).schema)
        planned = replace(planned, order_types=tuple(f.dataType for f in kinds.fields))
        [first, *others] = kinds.fields
        if request.whole_frame and not others and first.nullable and _radix_sorted(first.dataType):
            if planned.needs_position and _radix_sort_on(handle):
                planned = replace(planned, radix_ties=True)
    return planned


def _radix_sorted(kind: DataType) -> bool:
    """Whether Spark sorts a column of type ``kind``, the sort's only one, by radix on its
    prefix (``SortPrefixUtils.canSortFullyWithPrefix``)."""
    from pyspark.sql.types import (
        BooleanType,
        ByteType,
        DateType,
        DayTimeIntervalType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        TimestampNTZType,
        TimestampType,
        YearMonthIntervalType,
    )

    if isinstance(kind, DecimalType):
        return kind.precision <= 18
    whole = (BooleanType, ByteType, ShortType, IntegerType, LongType, DateType, TimestampType, TimestampNTZType)
    return isinstance(kind, (*whole, FloatType, DoubleType, DayTimeIntervalType, YearMonthIntervalType))


def _radix_sort_on(handle: Session) -> bool:
    """Whether the session sorts by radix where it can (``spark.sql.sort.enableRadixSort``)."""
    setting = handle.call(
        "reading the sort's settings", lambda: handle.spark.conf.get("spark.sql.sort.enableRadixSort")
    )
    return str(setting).strip().lower() != "false"


def _check_names(columns: Mapping[str, Column], schema: StructType) -> None:
    """Raises where a column is named as keysplit's own."""
    refuse_reserved([*schema.names, *columns], PREFIX)
