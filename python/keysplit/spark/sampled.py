"""Hot keys and cut points from a sample in the plan: what ``window`` and ``holistic_agg``
find their hot keys from, without running a job of their own.

A key is hot when its sampled rows, at the count's 95 % upper bound, are more than a mean
task's share of the sampled rows (both sides in sampled rows: the fraction cancels). A hot
key's candidate cuts are ``C - 1`` of its sampled rows, evenly spaced in an ordering: what
its rows are cut into ranges at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keysplit.spark.columns import column

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame
    from pyspark.sql.window import WindowSpec

_PREFIX = "__keysplit_s_"
#: A key's rows in the sample.
SAMPLED = _PREFIX + "sampled"
#: ... at the count's 95 % upper bound.
UPPER = _PREFIX + "upper"
#: Every key's sampled rows.
ALL_SAMPLED = _PREFIX + "all"


def hot_in_sample(keys: DataFrame, workers: int) -> DataFrame:
    """The hot ones of ``keys`` (one row per key with its :data:`SAMPLED` rows), with
    :data:`UPPER` and :data:`ALL_SAMPLED`, in one partition (they are few)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = keys.repartition(1)
    everything = Window.partitionBy(F.lit(0))
    sampled = column(SAMPLED)
    keys = keys.withColumns(
        {UPPER: sampled + F.lit(2) * F.sqrt(sampled) + F.lit(3), ALL_SAMPLED: F.sum(SAMPLED).over(everything)}
    )
    return keys.filter(column(UPPER) * F.lit(workers) > column(ALL_SAMPLED))


def candidate_cuts(
    rows: DataFrame,
    by_key: WindowSpec,
    orders: Sequence[Column],
    counted: Column,
    values: Sequence[str],
    c: int,
    tag: str,
) -> tuple[DataFrame, Column]:
    """``rows`` (sampled) marked for the cuts, and the aggregate (over a group by key) of
    the rows its ``C - 1`` candidate cuts in the ordering ``orders`` are: candidate ``j``
    (``0 < j < C``) is the row at rank ``⌈j·m/C⌉`` of the ``m`` that ``counted`` counts (a
    count over ``by_key``; those rows first in ``orders``). The aggregate lists each such
    row once (at most ``min(m, C)`` per key, whatever the key), with the candidates it is;
    :func:`cuts_of` turns a hot key's list into its cuts. ``tag`` keeps the marks of several
    orderings of the same rows apart."""
    from pyspark.sql import functions as F

    rank, counts, low, high = (f"{_PREFIX}{what}_{tag}" for what in ("rank", "counted", "low", "high"))
    rows = rows.withColumns({rank: F.row_number().over(by_key.orderBy(*orders)), counts: counted.over(by_key)})
    # The row is candidate j for ⌊(r-1)·C/m⌋ < j ≤ ⌊r·C/m⌋ (integers, once per row); the
    # ranges partition (0, C], so each j is one row's. Rows past m are no one's.
    r, m = column(rank).cast("long"), column(counts)
    within = r <= m
    # A key may have no counted row (m = 0): no row is within then, and the division
    # must not fail on it.
    m = F.greatest(m, F.lit(1))
    rows = rows.withColumns({low: F.floor(((r - 1) * c).cast("long") / m), high: F.floor((r * c) / m)})
    chosen = within & (column(high) > column(low))
    candidate = F.struct(
        column(high).alias("high"), column(low).alias("low"), *[column(name).alias(name) for name in values]
    )
    return rows, F.collect_list(F.when(chosen, candidate))


def cuts_of(candidates: Column, value: str, c: int) -> Column:
    """A key's ``C - 1`` candidate cuts of column ``value``, in order, from its list of
    :func:`candidate_cuts` (each row repeated for every candidate it is); empty when the key
    has no counted row."""
    from pyspark.sql import functions as F

    repeated = F.transform(
        F.array_sort(candidates),
        lambda row: F.array_repeat(row.getField(value), (row.getField("high") - row.getField("low")).cast("int")),
    )
    return F.slice(F.flatten(repeated), 1, c - 1)
