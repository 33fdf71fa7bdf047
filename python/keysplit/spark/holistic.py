"""``holistic_agg``: Spark's ``groupBy(keys).agg(...)``, with a hot key's exact median,
percentiles, mode, distinct count and distinct set computed over many tasks.

For combinable aggregates (``sum``, ``count``, ``avg``, ``min``, ``max``, ...) Spark's own
``groupBy`` is already right: it combines map-side, and a hot key costs it nothing. The
holistic ones keep a whole buffer per key (a value→count map for ``percentile``,
``median`` and ``mode``, a set for ``collect_set``), so partial aggregation cuts rows but
not bytes, and one task merges and sorts a hot key's values alone. :func:`holistic_agg`
returns a lazy DataFrame equal to ``frame.groupBy(*keys).agg(*columns)``, whose plan does:

1. **Hot keys from a sample** (:data:`SAMPLE_FRACTION` of the rows, in the plan), as
   :func:`keysplit.spark.window` finds them: a key with more rows than a mean task's of
   ``workers`` is hot, unless its sampled values repeat (fewer distinct than a
   :data:`REPEATS`-th of them): Spark's partial aggregation leaves such a key a few
   entries per map task, and it stays there. For each column a percentile is taken of, a hot key's sample gives
   ``BUCKETS - 1`` cuts of its values: ranges of about equal rows. One broadcast row holds
   them all (every branch reads it whole, so Spark computes it once).
2. **Keys not hot: Spark's own aggregate**, the user's columns, unchanged.
3. **Hot keys: counts that combine.**

   - ``mode``, ``count_distinct``, ``collect_set``: a hot row's (key, value) is counted by
     Spark's ``groupBy``, map-side combined, then spread over the tasks by a hash of the
     value; from those counts each key's most frequent value (the smallest among ties: the
     least (-count, value), which combines too), its distinct values counted or gathered;
   - ``percentile``, ``median``: a hot key's rows are counted per range of values (a few
     rows per key and task cross the exchange); those counts locate the ranges that hold
     the ranks Spark's interpolation reads (``floor`` and ``ceil`` of ``(n - 1)·p``), and
     only those ranges' rows are read again (a broadcast join with them), counted per value
     and sorted (a Spark window over (key, range)); the values at the two ranks are
     interpolated as Spark does. A few ``1/BUCKETS`` of a hot key's rows cross an exchange.

   Any other column (``sum``, ``collect_list``, an expression over aggregates) is Spark's
   own aggregate over the hot keys' rows: exact, but not split.
4. The hot keys' pieces are gathered per key (a few rows each) and the keys not hot
   appended.

When nothing is hot the hot keys' row is not there, and adaptive execution drops the hot
branches: the plan is Spark's aggregate, plus the sample's stages.

One shape is counted for every key, hot or not, with no sample: a ``count_distinct`` beside
a ``mode`` or ``collect_set`` of the same columns (:attr:`SkewAggregate.tallies_every_key`),
which Spark's own plan computes per (key, value) group, three to four times slower than the
counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from keysplit._checks import require_seed, require_workers
from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.columns import column, holds_a_map, joined_on
from keysplit.spark.expressions import NOT_LITERAL, function_call, literal, reference_name
from keysplit.spark.hot_keys import LOCAL_TOP_TASKS, SAMPLE_FRACTION
from keysplit.spark.intake import is_spark_frame, refuse_reserved, session_for, shuffle_partitions
from keysplit.spark.options import require_task_workers
from keysplit.spark.report import Report, batch_input, observed, observed_rows, observing
from keysplit.spark.sampled import SAMPLED, candidate_cuts, cuts_of, hot_in_sample
from keysplit.spark.statistics import KEY_HASH, InputSample, SampleRequest, cut_rows

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from keysplit.spark.session import Session

PREFIX = "__keysplit_h_"
_KEY_HASH = PREFIX + "key_hash"
_ENTRY = PREFIX + "entry"
_ENTRIES = PREFIX + "entries"
_COUNT = PREFIX + "count"
_ROWS = PREFIX + "rows"
_BEFORE = PREFIX + "before"
_NEEDS = PREFIX + "needs"
_NEED = PREFIX + "need"
_END = PREFIX + "end"
_DISTINCT = PREFIX + "distinct"
_LOWER = PREFIX + "lower"
_UPPER = PREFIX + "upper"

#: The ranges a hot key's values are cut into for a percentile: the rows sorted to find a
#: rank are about ``1/BUCKETS`` of the key's (two ranges' at most per level), and each task
#: sends at most ``BUCKETS`` counts per hot key. A power of two (:meth:`SkewAggregate.bucketed`).
BUCKETS = 128
assert BUCKETS & (BUCKETS - 1) == 0

#: A hot key is split when its sample has at least a ``1/REPEATS`` share of distinct values
#: (of some split function's arguments); with fewer, each map task holds few distinct values
#: of it, and Spark's own partial aggregation leaves its final task little to merge.
REPEATS = 4

#: The functions whose hot keys are split, as Spark names them.
SPLIT_FUNCTIONS = ("median", "percentile", "mode", "count_distinct", "collect_set")


def _argument(i: int) -> str:
    return f"{PREFIX}a{i}"


def _bucket(value: str) -> str:
    return f"{PREFIX}bucket_{value}"


def _candidates(value: str) -> str:
    return f"{PREFIX}candidates_{value}"


def _cuts(value: str) -> str:
    return f"{PREFIX}cuts_{value}"


def _output(i: int) -> str:
    return f"{PREFIX}o{i}"


def _level(value: str, j: int) -> str:
    """The ``j``-th percentile level of column ``value``'s result."""
    return f"{PREFIX}p{j}_{value}"


def _rank(value: str, j: int, higher: bool) -> str:
    return f"{PREFIX}{'hi' if higher else 'lo'}{j}_{value}"


def _present(value: str) -> str:
    """A column's non-null rows of the key."""
    return f"{PREFIX}n_{value}"


@dataclass(frozen=True)
class Output:
    """One result column: Spark's name, and how its hot keys are computed."""

    name: str
    #: ``percentile`` (``median`` too), ``mode``, ``count_distinct``, ``collect_set``, or
    #: ``spark`` (Spark's own aggregate over the hot keys' rows).
    function: str
    #: The user's column (what the keys not hot, and ``spark``, compute).
    expression: Column
    #: The function's inputs, as columns of the prepared rows.
    values: tuple[str, ...] = ()
    #: ``percentile``: the levels, and whether the result is an array of them.
    levels: tuple[float, ...] = ()
    array: bool = False
    #: Why a ``spark`` column is not split.
    why: str = ""


@dataclass(frozen=True)
class SkewAggregate:
    """One :func:`holistic_agg` call's plan: checked arguments in, a lazy DataFrame out."""

    frame: DataFrame
    keys: tuple[str, ...]
    outputs: tuple[Output, ...]
    #: Input expressions copied into columns of their own (name → expression).
    arguments: tuple[tuple[str, Column], ...]
    workers: int
    seed: int
    target: StructType
    #: Each percentile column's levels, in order (column → levels).
    levels: dict[str, tuple[float, ...]] = field(default_factory=dict)
    #: The fraction of the rows the hot keys are found from.
    sample_fraction: float = SAMPLE_FRACTION

    @property
    def ranked(self) -> list[str]:
        """The columns a percentile is taken of: each cut into ranges per hot key."""
        return list(self.levels)

    @property
    def counted(self) -> list[tuple[str, ...]]:
        """The column tuples a split function is taken of (one per distinct tuple): a key's
        values are found varied enough to split over them."""
        seen: dict[tuple[str, ...], None] = {}
        for output in self.outputs:
            if output.function != "spark":
                seen[output.values] = None
        return list(seen)

    def key_hash(self) -> Column:
        """``xxhash64(seed, keys)``: what a key is found by among the hot keys' entries. Two
        keys of one hash are both hot: their values are still counted apart."""
        from pyspark.sql import functions as F

        return F.xxhash64(F.lit(self.seed), *[column(k) for k in self.keys])

    def prepared(self) -> DataFrame:
        return self.frame.select("*", *[expression.alias(name) for name, expression in self.arguments])

    def hot_entries(self, prepared: DataFrame) -> DataFrame:
        """The hot keys, each with its ``BUCKETS - 1`` cuts per ranked column: one row (none
        when nothing is hot), an array sorted by key hash."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        sampled_columns = list(dict.fromkeys(name for values in self.counted for name in values))
        sample = prepared.select(self.key_hash().alias(_KEY_HASH), *sampled_columns).sample(
            fraction=SAMPLE_FRACTION, seed=self.seed
        )
        rows = sample.repartition(LOCAL_TOP_TASKS, _KEY_HASH)
        by_key = Window.partitionBy(_KEY_HASH)
        candidates: list[Column] = []
        for i, name in enumerate(self.ranked):
            value = column(name)
            rows, found = candidate_cuts(
                rows, by_key, [value.asc_nulls_last()], F.count(value), [name], BUCKETS, f"v{i}"
            )
            candidates.append(found.alias(_candidates(name)))
        # How varied a key's values are (approximately, of every counted argument).
        spread = [F.approx_count_distinct(F.struct(*[column(name) for name in values])) for values in self.counted]
        distinct = F.greatest(*spread, F.lit(0)) if spread else F.lit(0)
        keys = rows.groupBy(_KEY_HASH).agg(F.count(F.lit(1)).alias(SAMPLED), distinct.alias(_DISTINCT), *candidates)
        # A key whose sampled rows repeat their values (fewer distinct than a
        # REPEATS-th of them) is combined map-side into few entries by Spark's own
        # aggregate: it stays there.
        hot = hot_in_sample(keys, self.workers).filter(column(_DISTINCT) * F.lit(REPEATS) >= column(SAMPLED))
        cuts = [cuts_of(column(_candidates(name)), name, BUCKETS).alias(_cuts(name)) for name in self.ranked]
        entry = F.struct(_KEY_HASH, *cuts)
        entries = hot.select(entry.alias(_ENTRY)).agg(F.array_sort(F.collect_list(_ENTRY)).alias(_ENTRIES))
        return entries.filter(F.size(_ENTRIES) > 0)

    def unsplit(self, report: Report[HolisticReport] | None, why: str) -> DataFrame:
        """Spark's own aggregate (the cost guard keeps it: ``why``), the input's rows counted
        as they pass when a report is asked for; no key is split."""
        spark_own = [output.expression for output in self.outputs]
        if report is None:
            return self.frame.groupBy(*self.keys).agg(*spark_own)
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        observation: Any = Observation()
        hot = self.no_hot_keys()

        def read() -> HolisticReport | None:
            seen = observed(observation)
            if not seen:
                return None
            return HolisticReport(
                workers=self.workers,
                rows=int(seen["rows"]),
                sample_fraction=self.sample_fraction,
                hot=hot,
                split={output.name: f"Spark's own aggregate: {why}" for output in self.outputs},
                left_to_spark=why,
            )

        report.bind(read)
        counted = observing(self.frame, observation, F.count(F.lit(1)).alias("rows"))
        return counted.groupBy(*self.keys).agg(*spark_own)

    def no_hot_keys(self) -> pl.DataFrame:
        """:attr:`HolisticReport.hot` of a plan that split no key."""
        return pl.DataFrame(schema={**dict.fromkeys(self.keys, pl.Null), "rows": pl.Int64})

    def sample_request(self) -> SampleRequest:
        """What :mod:`.statistics` samples for this aggregate: its key hash and counted columns."""
        sampled = dict.fromkeys([*self.keys, *(name for values in self.counted for name in values)])
        return SampleRequest(
            self.prepared(), self.key_hash(), tuple(column(name) for name in sampled), self.keys, files_of=self.frame
        )

    def measured(self, handle: Session, sample: InputSample) -> tuple[SkewAggregate, DataFrame | None, pl.DataFrame]:
        """This aggregate, :meth:`hot_entries` computed here from ``sample``
        (:mod:`.statistics`) by the same rules (the distinct values of a key's sample counted
        exactly), as a literal table: the plan then has no sampling stage (no entries when no
        key is hot); and the entries' keys (their key columns)."""
        import pyarrow as pa

        hot = sample.hot(self.workers)
        rows = sample.rows.with_row_index(_ENTRY).filter(pl.col(KEY_HASH).is_in(hot[KEY_HASH].implode()))
        if self.counted:
            spread = rows.group_by(KEY_HASH).agg(
                pl.max_horizontal(*[pl.struct(list(values)).n_unique() for values in self.counted]).alias(_DISTINCT)
            )
            hot = hot.join(spread, on=KEY_HASH, how="left").filter(pl.col(_DISTINCT) * REPEATS >= pl.col("sampled"))
        if hot.height == 0:
            return self, None, sample.key_values(hot)
        cuts: dict[int, list[list[Any]]] = {}
        for name in self.ranked:
            # A ranked column's non-null values, ascending: its nulls are not counted.
            ordered = rows.filter(pl.col(name).is_not_null() & pl.col(KEY_HASH).is_in(hot[KEY_HASH].implode()))
            ordered = ordered.sort([KEY_HASH, name], maintain_order=True)
            found = {int(h): group[_ENTRY] for (h,), group in ordered.group_by(KEY_HASH, maintain_order=True)}
            for key_hash in hot[KEY_HASH]:
                positions = found.get(int(key_hash))
                picked = [] if positions is None else positions.gather(cut_rows(positions.len(), BUCKETS)).to_list()
                values = sample.table.column(name).take(pa.array(picked, pa.int64())).to_pylist()
                cuts.setdefault(int(key_hash), []).append(values)
        types = [sample.table.schema.field(name).type for name in self.ranked]
        entry = pa.struct(
            [
                pa.field(_KEY_HASH, pa.int64()),
                *[pa.field(_cuts(name), pa.list_(kind)) for name, kind in zip(self.ranked, types, strict=True)],
            ]
        )
        entries = [
            {
                _KEY_HASH: int(h),
                **{_cuts(name): values for name, values in zip(self.ranked, cuts.get(int(h), []), strict=True)},
            }
            for h in hot[KEY_HASH].sort()
        ]
        table = pa.table({_ENTRIES: pa.array([entries], pa.list_(entry))})
        made = handle.call("making the hot keys' table", lambda: handle.spark.createDataFrame(table))
        return self, made, sample.key_values(hot)

    def looked_up(self, rows: DataFrame, entries: DataFrame, how: str) -> DataFrame:
        """``rows`` with their key's entry (null for a key not hot; ``how="inner"``: the hot
        keys' rows alone)."""
        from pyspark.sql import functions as F

        rows = rows.withColumn(_KEY_HASH, self.key_hash()).join(F.broadcast(entries), how=how)
        position = F.array_position(column(_ENTRIES).getField(_KEY_HASH), column(_KEY_HASH))
        entry = F.when(position > 0, F.get(column(_ENTRIES), (position - 1).cast("int")))
        rows = rows.withColumn(_ENTRY, entry).drop(_ENTRIES, _KEY_HASH)
        return rows.filter(column(_ENTRY).isNotNull()) if how == "inner" else rows

    def cold(self, entries: DataFrame, observe: Any) -> DataFrame:
        """The keys not hot, through Spark's own aggregate of the user's columns."""
        rows = self.looked_up(self.frame, entries, "left").filter(column(_ENTRY).isNull()).drop(_ENTRY)
        return observe(rows).groupBy(*self.keys).agg(*[output.expression for output in self.outputs])

    def bucketed(self, rows: DataFrame, name: str) -> DataFrame:
        """``rows`` with column ``name``'s range among its key's cuts: how many cuts are
        below the value, so that equal values share a range; null for a null value. Binary
        lifting, one step of Spark's expressions each: with :data:`BUCKETS` a power of two
        every candidate is one of the ``BUCKETS - 1`` cuts, so a step reads the range so far
        twice (no bound check). Nothing may filter on the range: Spark would push the
        filter down and inline the steps into it, ``2^steps`` copies. (Counted as the
        window counts a row's chunk, in two flat sums of about ``√BUCKETS`` comparisons each
        reading the key's entry, the stage took 2.7x the task time: 5.2 s against 1.9 s for
        3.6x10^6 hot rows of a join's output at 4x10^6 rows.)"""
        from pyspark.sql import functions as F

        value, cuts, bucket = column(name), column(_ENTRY).getField(_cuts(name)), _bucket(name)
        rows = rows.withColumn(bucket, F.when(value.isNotNull(), F.lit(0)))
        for step in reversed(range(BUCKETS.bit_length() - 1)):
            so_far = column(bucket)
            below = F.coalesce(F.try_element_at(cuts, so_far + F.lit(1 << step)) < value, F.lit(False))
            rows = rows.withColumn(bucket, so_far + F.when(below, F.lit(1 << step)).otherwise(F.lit(0)))
        return rows

    def value_counts(self, rows: DataFrame, values: tuple[str, ...]) -> DataFrame:
        """Each key's ``rows`` per distinct ``values``: Spark's ``groupBy``, combined map-side
        and spread over the tasks by the values' hash."""
        from pyspark.sql import functions as F

        return rows.groupBy(*self.keys, *values).agg(F.count(F.lit(1)).alias(_COUNT))

    @property
    def tallied(self) -> list[tuple[str, ...]]:
        """The column tuples a ``mode``, ``count_distinct`` or ``collect_set`` is taken of
        (their hot keys' values counted one by one, :meth:`per_key`)."""
        seen: dict[tuple[str, ...], None] = {}
        for output in self.outputs:
            if output.function not in ("spark", "percentile"):
                seen[output.values] = None
        return list(seen)

    @property
    def tallies_every_key(self) -> bool:
        """Whether every key's values are counted (:meth:`counted_plan`), hot or not: a
        ``count_distinct`` beside a ``mode`` or ``collect_set`` of the same columns, and
        nothing else. Spark plans a distinct aggregate by grouping on (keys, values) first,
        and computes the other functions there too: a ``mode``'s or ``collect_set``'s
        buffer (a map or a set, an object each) per (key, value) group, merged again per
        key. Measured at 10^7 rows over 10^5 keys of about 100 rows (``local[2]``), that took
        79-82 task-seconds where the value counts take 21-24, with no key hot; alone, each
        of these functions is faster as Spark plans it (``mode`` 15-16 against 20-23)."""
        functions = {output.function for output in self.outputs}
        beside = functions - {"count_distinct"}
        return (
            len(self.tallied) == 1
            and "count_distinct" in functions
            and bool(beside)
            and beside <= {"mode", "collect_set"}
        )

    def counted_plan(self, report: Report[HolisticReport] | None) -> DataFrame:
        """The plan where :attr:`tallies_every_key`: every key's rows counted per distinct
        value (Spark's ``groupBy``, combined map-side, spread by the values' hash), each
        result from those counts (:meth:`per_key`, combined per task before its exchange).
        No sample, no key hot: a key's values cross one exchange spread by value, and a
        second as one row per key and task."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        [values] = self.tallied
        rows = self.prepared()
        observation: Any = Observation() if report is not None else None
        if observation is not None:
            rows = observing(rows, observation, F.count(F.lit(1)).alias("rows"))
        counted, _ = self.per_key(self.value_counts(rows, values), values)
        # Spark's own schema, its fields' metadata too (Spark 4 marks an alias it made).
        fields = self.target.fields[len(self.keys) :]
        result = counted.select(
            *[column(k) for k in self.keys],
            *[
                self.final(i, output).alias(f.name, metadata=f.metadata)
                for i, (output, f) in enumerate(zip(self.outputs, fields, strict=True))
            ],
        )
        if report is not None:
            hot = self.no_hot_keys()

            def read() -> HolisticReport | None:
                seen = observed(observation)
                if not seen:
                    return None
                split = {output.name: f"{output.function} of every key's value counts" for output in self.outputs}
                return HolisticReport(
                    workers=self.workers, rows=int(seen["rows"]), sample_fraction=0.0, hot=hot, split=split
                )

            report.bind(read)
        return result

    def per_key(self, counts: DataFrame, values: tuple[str, ...]) -> tuple[DataFrame, list[str]]:
        """Per key of ``counts`` (:meth:`value_counts`), its rows, its rows with ``values``
        and each ``mode`` (the least (-count, value)), ``count_distinct`` or ``collect_set``
        over them, and those columns' names. These combine: each task of the counts sends a
        row per key."""
        from pyspark.sql import functions as F

        present = F.lit(True)
        for name in values:
            present = present & column(name).isNotNull()
        aggregates = {_ROWS: F.sum(_COUNT), _present(values[0]): F.sum(F.when(present, column(_COUNT)))}
        for i, output in enumerate(self.outputs):
            if output.values != values:
                continue
            if output.function == "mode":
                # Spark's mode: the most frequent value (nulls ignored); among ties, the
                # smallest (its rule with deterministic=True; without, Spark takes any).
                ordering = F.struct((-column(_COUNT)).alias("c"), column(values[0]).alias("v"))
                aggregates[_output(i)] = F.min(F.when(present, ordering)).getField("v")
            elif output.function == "count_distinct":
                aggregates[_output(i)] = F.count(F.when(present, F.lit(1)))
            elif output.function == "collect_set":
                aggregates[_output(i)] = F.collect_set(values[0])
        frame = counts.groupBy(*self.keys).agg(*[value.alias(name) for name, value in aggregates.items()])
        return frame, list(aggregates)

    def percentiles(self, hot: DataFrame, entries: DataFrame, name: str) -> tuple[DataFrame, list[str]]:
        """Per hot key with a value in column ``name``, its value at each level
        (:func:`_level` columns), as Spark's ``percentile`` computes it, and those columns'
        names. The key's values are counted per range (:meth:`bucketed`; each task sends a
        few rows per key); those counts locate the ranges that hold the ranks Spark's
        interpolation reads (``floor`` and ``ceil`` of ``(n - 1)·p``), and only those ranges'
        rows are read again, counted per value and sorted: a few ``1/BUCKETS`` of the key's
        rows cross an exchange. The key's rows and values are counted in :meth:`plan`'s
        first piece."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        bucket, levels, present = _bucket(name), self.levels[name], _present(name)
        valued = hot.filter(column(name).isNotNull())
        per_range = self.bucketed(valued, name).groupBy(*self.keys, bucket).agg(F.count(F.lit(1)).alias(_COUNT))
        by_key = Window.partitionBy(*self.keys).orderBy(bucket)
        whole = by_key.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
        before = F.coalesce(F.sum(_COUNT).over(by_key.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
        per_range = per_range.withColumns({present: F.sum(_COUNT).over(whole), _BEFORE: before})
        # The ranks Spark's interpolation reads (0-based, among the key's sorted values),
        # and which of the key's ranges holds each.
        needs = []
        for j, level in enumerate(levels):
            position = (column(present) - 1).cast("double") * F.lit(float(level))
            for higher, rank in ((False, F.floor(position)), (True, F.ceil(position))):
                local = rank - column(_BEFORE)
                need = F.struct(F.lit(_rank(name, j, higher)).alias("rank"), local.alias("local"))
                needs.append(F.when((local >= 0) & (local < column(_COUNT)), need))
        per_range = per_range.withColumn(_NEEDS, F.array_compact(F.array(*needs)))
        needed = per_range.filter(F.size(_NEEDS) > 0).select(*self.keys, bucket, present, _NEEDS)
        # A needed range's values lie above its lower cut and up to its upper one (its
        # range is how many cuts are below a value): the hot rows are read again, each
        # compared with its key's needed ranges (broadcast), not cut into ranges again.
        cuts = column(_ENTRY).getField(_cuts(name))
        needed = self.looked_up(needed, entries, "inner").select(
            *self.keys,
            bucket,
            present,
            _NEEDS,
            F.when(column(bucket) > 0, F.try_element_at(cuts, column(bucket))).alias(_LOWER),
            F.try_element_at(cuts, column(bucket) + 1).alias(_UPPER),
        )
        within = (column(_LOWER).isNull() | (column(_LOWER) < column(name))) & (
            column(_UPPER).isNull() | (column(name) <= column(_UPPER))
        )
        selected = joined_on(
            hot.select(*self.keys, name), needed, "inner", null_safe=self.keys, also=within, broadcast=True
        )
        counts = selected.groupBy(*self.keys, bucket, name).agg(
            F.count(F.lit(1)).alias(_COUNT), F.max(present).alias(present), F.first(_NEEDS).alias(_NEEDS)
        )
        in_order = Window.partitionBy(*self.keys, bucket).orderBy(name)
        running = in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        counts = counts.withColumn(_END, F.sum(_COUNT).over(running))
        start_rank, end_rank = column(_END) - column(_COUNT), column(_END)
        covered = F.filter(
            _NEEDS, lambda need: (start_rank <= need.getField("local")) & (need.getField("local") < end_rank)
        )
        found = counts.select(*self.keys, name, present, F.explode(covered).alias(_NEED))
        picks = [
            F.max(F.when(column(_NEED).getField("rank") == F.lit(_rank(name, j, higher)), column(name))).alias(
                _rank(name, j, higher)
            )
            for j in range(len(levels))
            for higher in (False, True)
        ]
        values = found.groupBy(*self.keys).agg(F.max(present).alias(present), *picks)
        n = column(present)
        results = {}
        for j, level in enumerate(levels):
            # Spark's percentile, operation for operation (doubles throughout): Spark 4's
            # PercentileBase.getPercentile is ``low + (position - lower) * (high - low)``
            # (read from its bytecode; Spark 3 had ``(higher - position) * low + ...``).
            position = (n - 1).cast("double") * F.lit(float(level))
            lower_rank, higher_rank = F.floor(position), F.ceil(position)
            low, high = column(_rank(name, j, False)).cast("double"), column(_rank(name, j, True)).cast("double")
            interpolated = low + (position - lower_rank) * (high - low)
            same = (lower_rank == higher_rank) | (column(_rank(name, j, False)) == column(_rank(name, j, True)))
            results[_level(name, j)] = F.when(same, low).otherwise(interpolated)
        return values.select(*self.keys, *[value.alias(level) for level, value in results.items()]), list(results)

    def final(self, i: int, output: Output) -> Column:
        """Output ``i``'s value for a key split, from the gathered pieces."""
        from pyspark.sql import functions as F

        kind = self.target.fields[len(self.keys) + i].dataType
        if output.function == "percentile":
            name = output.values[0]
            columns = [column(_level(name, self.levels[name].index(level))) for level in output.levels]
            value = (
                F.when(column(_present(name)) > 0, F.array_compact(F.array(*columns))) if output.array else columns[0]
            )
        else:
            value = column(_output(i))
        value = value.cast(kind)
        if not self.target.fields[len(self.keys) + i].nullable:
            # Every hot key has its value (the pieces that make it read every row of the
            # key): the default never applies, it only keeps Spark's schema.
            value = F.coalesce(value, _zero(kind))
        return value

    def plan(
        self,
        report: Report[HolisticReport] | None,
        entries: DataFrame | None = None,
        *,
        hot_only: bool = False,
        hold: Callable[[DataFrame], DataFrame] | None = None,
    ) -> DataFrame:
        """The lazy plan; its hot keys' ``entries`` as :meth:`measured` made them, or
        (None) from :meth:`hot_entries`' sample in the plan. Where every key is counted
        (:attr:`tallies_every_key`), :meth:`counted_plan`, which needs no hot key.
        ``hot_only``: every row's key is among the entries, and the plan has no branch for
        keys not hot. ``hold``: what the input passes through before its readers (each piece
        reads it)."""
        from pyspark.sql import functions as F
        from pyspark.sql.connect.observation import Observation

        if self.tallies_every_key:
            return self.counted_plan(report)
        observations: tuple[Any, Any] | None = (Observation(), Observation()) if report is not None else None

        def observe_cold(rows: DataFrame) -> DataFrame:
            if observations is None:
                return rows
            return observing(rows, observations[0], F.count(F.lit(1)).alias("rows"))

        prepared = self.prepared() if hold is None else hold(self.prepared())
        if entries is None:
            entries = self.hot_entries(prepared)
        hot = self.looked_up(prepared, entries, "inner")
        # Each piece with its columns' names (asking Spark for them would analyse the whole
        # plan, seconds where the input is a split join's output).
        pieces: list[tuple[DataFrame, list[str]]] = []
        by_spark = [(i, output) for i, output in enumerate(self.outputs) if output.function == "spark"]
        if by_spark or self.ranked or not self.counted:
            # A percentile's rows and values per key are counted here, combined map-side,
            # not from its per-range counts: those then have one reader, and Spark computes
            # them once (with two readers that prune them differently it computed them
            # twice: the hot rows bucketed twice).
            aggregates = {
                _ROWS: F.count(F.lit(1)),
                **{_present(name): F.count(column(name)) for name in self.ranked},
                **{_output(i): output.expression for i, output in by_spark},
            }
            frame = hot.groupBy(*self.keys).agg(*[value.alias(name) for name, value in aggregates.items()])
            pieces.append((frame, list(aggregates)))
        for values in self.tallied:
            pieces.append(self.per_key(self.value_counts(hot, values), values))
        for name in self.ranked:
            pieces.append(self.percentiles(hot, entries, name))
        gathered = pieces[0][0]
        for piece, _ in pieces[1:]:
            gathered = gathered.unionByName(piece, allowMissingColumns=True)
        pieced = list(dict.fromkeys(name for _, names in pieces for name in names))
        gathered = gathered.groupBy(*self.keys).agg(*[F.first(name, ignorenulls=True).alias(name) for name in pieced])
        if observations is not None:
            gathered = observing(
                gathered, observations[1], F.collect_list(F.struct(*[column(k) for k in self.keys], _ROWS)).alias("hot")
            )
        finals = [self.final(i, output) for i, output in enumerate(self.outputs)]
        names = self.target.names
        hot_result = gathered.select(
            *[column(k) for k in self.keys],
            *[value.alias(names[len(self.keys) + i]) for i, value in enumerate(finals)],
        )
        result = hot_result if hot_only else self.cold(entries, observe_cold).union(hot_result)
        if observations is not None:
            assert report is not None
            report.bind(lambda: self.report(observations))
        return result

    def report(self, observations: tuple[Any, Any]) -> HolisticReport | None:
        seen, gathered = observed(observations[0]), observed(observations[1])
        # Where every key is hot the keys not hot are no row, and adaptive execution drops
        # their branch with what it observes: none of them, then.
        if not seen and not gathered:
            return None
        seen = seen or {"rows": 0}
        names = [*self.keys, "rows"]
        hot = observed_rows(gathered.get("hot", []), [*self.keys, _ROWS], names, {"rows": pl.Int64})
        hot = hot.sort("rows", descending=True)
        split = {
            output.name: (output.function if output.function != "spark" else f"Spark's own aggregate: {output.why}")
            for output in self.outputs
        }
        rows = int(seen["rows"]) + int(hot["rows"].sum())
        return HolisticReport(
            workers=self.workers, rows=rows, sample_fraction=self.sample_fraction, hot=hot, split=split
        )


@dataclass(frozen=True)
class HolisticReport:
    """What :func:`holistic_agg` did, filled when an action runs its result: the input's
    ``rows``; the ``hot`` keys (one column per key column) and their exact ``rows``; per
    result column, how its hot keys were computed (``split``: the function split by value,
    or why Spark's own aggregate computed it); the ``workers`` the keys were measured
    against and the ``sample_fraction`` they were found from."""

    workers: int
    rows: int
    sample_fraction: float
    hot: pl.DataFrame
    split: dict[str, str]
    #: Why Spark's own aggregate ran instead of keysplit's (the cost guard's rule, with its
    #: figures), or None when keysplit's plan ran.
    left_to_spark: str | None = None


def _zero(kind: DataType) -> Column:
    """A value of ``kind``, for a column Spark's schema says is never null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BooleanType, MapType, NumericType, StringType

    if isinstance(kind, NumericType):
        return F.lit(0).cast(kind)
    if isinstance(kind, ArrayType):
        return F.array().cast(kind)
    if isinstance(kind, MapType):
        return F.create_map().cast(kind)
    if isinstance(kind, StringType):
        return F.lit("")
    if isinstance(kind, BooleanType):
        return F.lit(False)
    return F.lit(None).cast(kind)


_NUMERIC = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType")


def _outputs(
    columns: Sequence[Column], names: Sequence[str], kinds: dict[str, DataType], arguments: dict[str, str]
) -> tuple[list[Output], dict[str, tuple[float, ...]]]:
    """Each column as an :class:`Output`; ``arguments`` maps an argument's repr to its
    column (filled here), ``kinds`` its type."""
    outputs: list[Output] = []
    levels: dict[str, list[float]] = {}
    for given, name in zip(columns, names, strict=True):
        output = _output_of(given, name, kinds, arguments)
        if output.function == "percentile":
            found = levels.setdefault(output.values[0], [])
            found += [level for level in output.levels if level not in found]
        outputs.append(output)
    return outputs, {name: tuple(found) for name, found in levels.items()}


def _output_of(given: Column, name: str, kinds: dict[str, DataType], arguments: dict[str, str]) -> Output:
    call = function_call(given)
    if call is None:
        return Output(name, "spark", given, why="not one aggregate function")
    function, args, distinct = call
    if function == "count" and distinct:
        function = "count_distinct"
    if function not in SPLIT_FUNCTIONS:
        return Output(name, "spark", given, why=f"{function} is not split (Spark's groupBy is right for it)")
    if distinct and function != "count_distinct":
        return Output(name, "spark", given, why=f"{function}(DISTINCT ...) is not split")
    values = tuple(arguments[repr(arg)] for arg in (args if function == "count_distinct" else args[:1]))
    if any(type(arg).__name__ == "UnresolvedStar" for arg in args):
        return Output(name, "spark", given, why="count(DISTINCT *) is not split")
    if any(holds_a_map(kinds[value]) for value in values):
        return Output(name, "spark", given, why="a map value is not split")
    if function in ("median", "percentile"):
        kind = type(kinds[values[0]]).__name__
        if kind not in _NUMERIC:
            return Output(name, "spark", given, why=f"a percentile of a {kinds[values[0]].simpleString()} is not split")
        if function == "median":
            return Output(name, "percentile", given, values, levels=(0.5,))
        percentage = literal(args[1]) if len(args) > 1 else NOT_LITERAL
        frequency = literal(args[2]) if len(args) > 2 else 1
        if frequency != 1 or isinstance(frequency, bool):
            return Output(name, "spark", given, why="a percentile with a frequency is not split")
        many = isinstance(percentage, list)
        found: list[Any] = list(percentage) if isinstance(percentage, list) else [percentage]
        if not found or not all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in found):
            return Output(name, "spark", given, why="a percentile of levels that are not literal numbers is not split")
        return Output(name, "percentile", given, values, levels=tuple(float(p) for p in found), array=many)
    return Output(name, function, given, values)


def _arguments(columns: Sequence[Column], schema: StructType) -> tuple[dict[str, str], list[tuple[str, Column]]]:
    """Every split function's arguments: a column of the input is read where it is, any
    other expression copied into a column of its own (repr → column; the copies)."""
    from pyspark.sql.connect.column import Column as ConnectColumn

    names: dict[str, str] = {}
    copies: list[tuple[str, Column]] = []
    for given in columns:
        call = function_call(given)
        if call is None:
            continue
        function, args, distinct = call
        if function == "count" and distinct:
            inputs = args
        elif function in SPLIT_FUNCTIONS:
            inputs = args[:1]
        else:
            continue
        for arg in inputs:
            if repr(arg) in names or type(arg).__name__ == "UnresolvedStar":
                continue
            own = reference_name(arg)
            if own is not None and schema.names.count(own) == 1:
                names[repr(arg)] = own
            else:
                names[repr(arg)] = _argument(len(copies))
                copies.append((names[repr(arg)], ConnectColumn(arg)))
    return names, copies


def holistic_agg(
    frame: DataFrame,
    keys: str | Sequence[str],
    *columns: Column,
    workers: int | None = None,
    seed: int = 0,
    session: Session | SparkSession | None = None,
    report: Report[HolisticReport] | None = None,
) -> DataFrame:
    """``frame.groupBy(*keys).agg(*columns)`` with a hot key's exact ``median``,
    ``percentile`` (one level or several), ``mode``, ``count_distinct`` (of one column or
    several) and ``collect_set`` computed over many tasks: a lazy DataFrame equal to
    Spark's, with Spark's column names and types. Also
    ``keysplit.spark.skewed(frame).groupBy(*keys).agg(*columns)``.

    Nulls and NaN are as Spark treats them: a null value is ignored, NaN is the largest
    number. Among values tied for the most frequent, ``mode`` returns the smallest, which
    is Spark's rule with ``deterministic=True`` (without it Spark returns any of them). A
    ``collect_set``'s elements are in no particular order, as Spark's. A zero's sign may
    differ from Spark's where a key holds both 0.0 and -0.0 (Spark counts them apart in a
    percentile, and keeps whichever its hash map met first).

    Any other column (``sum``, ``collect_list``, ``percentile_approx``, an expression over
    aggregates) is Spark's own aggregate over the hot keys' rows: exact, not split. For
    combinable aggregates that is already right; a ``collect_list``'s result is as large as
    its key's rows wherever it is built, so nothing can split it.

    ``keys`` are column names of ``frame``. ``workers`` (default: the shuffle's partitions)
    is what a key's rows are measured against: a key with more than a mean task's rows is
    hot. ``seed`` seeds the sample the hot keys are found from. ``report`` (a
    :class:`keysplit.spark.Report`) is filled with a :class:`HolisticReport` when an action
    runs the result. No Spark job runs here (Spark reads the schemas). The input is read
    three times or more (the sample, the keys not hot, the hot keys' rows once per distinct
    argument, twice per column a percentile is taken of): cache an input that is costly to
    compute.
    """
    from pyspark.sql import Column as SparkColumn

    if not is_spark_frame(frame):
        raise ConfigTypeError(f"holistic_agg works on a Spark DataFrame, got {type(frame).__name__}")
    handle = session_for(frame, session)
    names = (keys,) if isinstance(keys, str) else tuple(keys)
    if not names or not all(isinstance(name, str) for name in names):
        raise ConfigTypeError(f"holistic_agg groups by column names, got {keys!r}")
    if not columns:
        raise ConfigError("holistic_agg needs at least one aggregate column, e.g. F.median('v')")
    for given in columns:
        if not isinstance(given, SparkColumn):
            raise ConfigTypeError(
                f"holistic_agg takes aggregate columns (F.median('v'), F.mode('v'), ...), got {type(given).__name__}"
            )
    planned = planned_aggregate(frame, names, columns, workers=workers, seed=seed, handle=handle)
    batch_input(handle, report, frame)
    return planned.plan(report)


def planned_aggregate(
    frame: DataFrame,
    names: tuple[str, ...],
    columns: Sequence[Column],
    *,
    workers: int | None,
    seed: int,
    handle: Session,
) -> SkewAggregate:
    """:func:`holistic_agg`'s plan's parts from its checked arguments (no Spark job runs)."""
    seed = require_seed(seed)
    workers = require_task_workers(shuffle_partitions(handle) if workers is None else require_workers(workers))
    schema, target = handle.gathered(
        "reading the aggregate's schemas",
        lambda: frame.schema,
        lambda: frame.groupBy(*names).agg(*columns).schema,
        check=lambda: _check_names(names, handle.call("reading the schema", lambda: frame.schema)),
    )
    _check_names(names, schema)
    arguments, copies = _arguments(columns, schema)
    copied = (
        handle.call(
            "reading the arguments' types",
            lambda: frame.select(*[expression.alias(name) for name, expression in copies]).schema,
        ).fields
        if copies
        else []
    )
    kinds = {f.name: f.dataType for f in [*schema.fields, *copied]}
    outputs, levels = _outputs(columns, target.names[len(names) :], kinds, arguments)
    return SkewAggregate(frame, names, tuple(outputs), tuple(copies), workers, seed, target, levels)


def _check_names(names: tuple[str, ...], schema: StructType) -> None:
    """Raises where a grouping column is not one column of ``schema``, or a column is named
    as keysplit's own."""
    missing = [name for name in names if schema.names.count(name) != 1]
    if missing:
        raise ConfigError(
            f"holistic_agg groups by columns of the frame; {missing} are not (one each) among {schema.names}"
        )
    refuse_reserved(schema.names, PREFIX)
