"""Window functions with a hot key's partition cut into ranges (``keysplit.spark.window``),
against Spark's own window on the real embedded server (the ``spark`` fixture).

Every result is compared with ``frame.withColumns(columns)`` on the same DataFrame, row for
row (joined on a row id), with Spark's column names, types and order. The table is read
from a Parquet file the tests write: key 0 holds half the rows, the null key a tenth; the
order column ``t`` has heavy ties and nulls; ``u`` is unique (for the functions whose value
among peers depends on the order Spark happens to sort them in).
"""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Window
from pyspark.sql import functions as F

from keysplit import ConfigError, ConfigTypeError
from keysplit.spark import OptimizeReport, Report, WindowSplitReport, optimize, skewed, window, with_row_index
from keysplit.spark.window import PEER_GROUP_ROWS, estimated_values
from keysplit.spark.window_spec import MAX_REACH

ROWS = 40_000
WORKERS = 8


def _table(rows: int = ROWS, seed: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    draw = rng.random(rows)
    keys = np.where(draw < 0.5, 0, rng.integers(1, 400, rows))
    t = rng.integers(0, 300, rows)
    frame = pl.DataFrame(
        {
            "id": np.arange(rows, dtype=np.int64),
            "k": keys.astype(np.int64),
            "t": t.astype(np.int64),
            "u": rng.permutation(rows).astype(np.int64),
            "x": rng.integers(-1000, 1000, rows).astype(np.int64),
            "y": rng.normal(0, 1, rows),
            "s": [f"s{v:03d}" for v in rng.integers(0, 200, rows)],
            "day": [datetime.date(2026, 1, 1) + datetime.timedelta(days=int(d)) for d in rng.integers(0, 90, rows)],
            "price": [decimal.Decimal(int(v)) / 100 for v in rng.integers(0, 100_000, rows)],
        }
    )
    return frame.with_columns(
        pl.when(pl.col("id") % 10 == 3).then(None).otherwise(pl.col("k")).alias("k"),
        pl.when(pl.col("id") % 17 == 5).then(None).otherwise(pl.col("t")).alias("t"),
        pl.when(pl.col("id") % 13 == 2).then(None).otherwise(pl.col("x")).alias("x"),
        pl.col("price").cast(pl.Decimal(10, 2)),
    )


@pytest.fixture(scope="module")
def frame(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("window") / "rows.parquet"
    _table().write_parquet(path)
    return spark.spark.read.parquet(str(path))


def _rows(frame) -> pl.DataFrame:
    result = pl.from_arrow(frame.toArrow())
    assert isinstance(result, pl.DataFrame)
    return result.sort("id")


def assert_same_window(ours, theirs, *, close: tuple[str, ...] = ()) -> None:
    """Equal row for row (by ``id``), the columns in ``close`` within 1e-9 relative (a
    floating-point sum added up in another order)."""
    assert [(f.name, f.dataType) for f in ours.schema.fields] == [(f.name, f.dataType) for f in theirs.schema.fields]
    mine, spark = _rows(ours), _rows(theirs)
    assert mine.height == spark.height
    exact = [name for name in spark.columns if name not in close]
    assert mine.select(exact).equals(spark.select(exact))
    for name in close:
        a, b = mine[name].to_numpy(), spark[name].to_numpy()
        assert np.array_equal(np.isnan(a), np.isnan(b))
        assert np.allclose(a, b, rtol=1e-9, atol=1e-9, equal_nan=True)


def test_running_aggregates_over_ties_and_nulls_equal_sparks(frame):
    w = Window.partitionBy("k").orderBy("t")
    columns = {
        "rows": F.count(F.lit(1)).over(w),
        "xs": F.count("x").over(w),
        "total": F.sum("x").over(w),
        "low": F.min("x").over(w),
        "high": F.max("s").over(w),
        "mean": F.avg("x").over(w),
        "cents": F.sum("price").over(w),
        "mean_price": F.avg("price").over(w),
        "ys": F.sum("y").over(w),
    }
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns), close=("ys",))


def test_ranks_over_ties_and_nulls_equal_sparks(frame):
    w = Window.partitionBy("k").orderBy(F.col("t").desc_nulls_first(), "s")
    columns = {
        "rank": F.rank().over(w),
        "dense": F.dense_rank().over(w),
        "percent": F.percent_rank().over(w),
        "cume": F.cume_dist().over(w),
    }
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns))


def test_row_numbers_tiles_and_rows_frames_equal_sparks_on_a_unique_order(frame):
    w = Window.partitionBy("k").orderBy(F.col("u").desc())
    rows = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    columns = {
        "n": F.row_number().over(w),
        "tile": F.ntile(7).over(w),
        "tile_many": F.ntile(30_000).over(w),
        "running": F.sum("x").over(rows),
        "seen": F.count("x").over(rows),
        "low": F.min("day").over(rows),
    }
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns))


def test_offsets_ends_and_bounded_frames_reach_across_the_chunks(frame):
    # On 32 workers key 0's 18,000 rows are cut into 26 chunks of 280-1,400 rows (the null
    # key's 4,000 into 7): a lag of 1,500 reads past the chunk before, and frames and a lead
    # of 700 rows past one or several chunks' edges; the order "u" is unique, so Spark's is
    # exact. (A frame's rows past the edges are summed row by row: its cost grows with the
    # frame's length times the rows near an edge, hence small chunks and short frames here.)
    w = Window.partitionBy("k").orderBy(F.col("u").desc())
    columns = {
        "prev": F.lag("x", 1).over(w),
        "far": F.lag("price", 1_500, decimal.Decimal("-1.00")).over(w),
        "next": F.lead("s", 5).over(w),
        "far_next": F.lead("x", 700).over(w),
        "first": F.first("x").over(w),
        "first_seen": F.first("x", ignorenulls=True).over(w),
        "last_seen": F.last("x", ignorenulls=True).over(w),
        "last_of_all": F.last("day").over(Window.partitionBy("k")),
        "moving": F.sum("x").over(w.rowsBetween(-700, 10)),
        "moving_low": F.min("x").over(w.rowsBetween(-1, 700)),
        "moving_avg": F.avg("y").over(w.rowsBetween(-5, 5)),
    }
    report = Report()
    ours = window(frame, columns, workers=32, report=report)
    assert_same_window(ours, frame.withColumns(columns), close=("moving_avg",))
    key_0 = report.get.hot.filter(pl.col("k") == 0).row(0, named=True)
    # Every lag of 1,500 from a chunk's start lands in another chunk; frames of 700 cross several.
    assert key_0["chunks"] >= 16 and key_0["largest_chunk"] < 1_500 and key_0["smallest_chunk"] < 700


def test_lag_and_lead_over_ties_walk_one_order_of_each_key(frame):
    # Ordered by "t" alone (300 values over 20,000 rows of key 0: heavy ties, and a chunk
    # boundary between two runs of peers), Spark's lag and lead depend on the order its sort
    # left the peers in. keysplit's must still be one order of each key, the same for every
    # row, chunk edges included: each row's next row has it as its previous, each key has
    # one first and one last row, and the order values never go back.
    w = Window.partitionBy("k").orderBy("t")
    columns = {"prev": F.lag("id").over(w), "next": F.lead("id").over(w), "next_t": F.lead("t").over(w)}
    rows = _rows(window(frame, columns, workers=WORKERS))
    walked = rows.join(rows.select(pl.col("id").alias("next"), pl.col("prev").alias("back")), on="next", how="inner")
    assert (walked["back"] == walked["id"]).all()
    ends = rows.group_by("k").agg(
        pl.col("prev").null_count().alias("firsts"), pl.col("next").null_count().alias("lasts")
    )
    assert (ends["firsts"] == 1).all() and (ends["lasts"] == 1).all()
    assert walked.height == rows.height - ends.height
    forward = rows.filter(pl.col("next").is_not_null())
    # Nulls first (Spark's ascending default): a null "t" precedes every value.
    assert (forward["t"].is_null() | (forward["next_t"] >= forward["t"])).all()
    assert not (forward["t"].is_not_null() & forward["next_t"].is_null()).any()


def test_over_heavy_ties_positional_columns_equal_sparks_in_its_input_order(frame):
    # Ordered by "t" alone: 300 values over key 0's 20,000 rows. Spark's window sorts peers
    # in the order they reach its task, for this file in local mode the input's; keysplit
    # orders them by their position in the input, chunk edges included.
    w = Window.partitionBy("k").orderBy("t")
    columns = {
        "prev": F.lag("id").over(w),
        "next": F.lead("x", 4, -1).over(w),
        "first": F.first("id").over(w),
        "last_seen": F.last("x", ignorenulls=True).over(w),
        "around": F.sum("x").over(w.rowsBetween(-3, 3)),
        "run": F.sum("x").over(w),
        "rank": F.rank().over(w),
    }
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns))


def test_first_and_last_over_an_unordered_window_are_values_of_the_key(frame):
    # Without an ordering Spark's first and last are whichever rows its task sees first and
    # last; keysplit's are one row of the key each, the same for all its rows.
    whole = Window.partitionBy("k")
    columns = {"first": F.first("id").over(whole), "last_seen": F.last("x", ignorenulls=True).over(whole)}
    rows = _rows(window(frame, columns, workers=WORKERS))
    per_key = rows.group_by("k").agg(
        pl.col("first").n_unique().alias("firsts"),
        pl.col("last_seen").n_unique().alias("lasts"),
        (pl.col("id") == pl.col("first")).any().alias("own"),
        (
            (pl.col("x") == pl.col("last_seen")).any() | (pl.col("last_seen").is_null() & pl.col("x").is_null()).all()
        ).alias("seen"),
    )
    assert per_key["firsts"].max() == 1 and per_key["lasts"].max() == 1
    assert per_key["own"].all() and per_key["seen"].all()


def test_whole_partition_aggregates_equal_sparks(frame):
    w = Window.partitionBy("k")
    columns = {
        "rows": F.count(F.lit(1)).over(w),
        "total": F.sum("x").over(w),
        "low": F.min("t").over(w),
        "high": F.max("day").over(w),
        "mean": F.avg("price").over(w),
    }
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns))
    # Over expressions and several keys (nulls among them), one replacing its input column.
    w = Window.partitionBy(F.col("k") % 3, "s")
    columns = {"x": F.max("x").over(w), "xs": F.count("x").over(w), "mean": F.avg("y").over(w)}
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns), close=("mean",))


def test_whole_partition_columns_beside_ordered_ones(frame):
    w = Window.partitionBy("k").orderBy("t")
    columns = {"run": F.sum("x").over(w), "total": F.sum("x").over(Window.partitionBy("k")), "rank": F.rank().over(w)}
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns))


def test_a_string_order_and_a_date_order_with_nulls_last(frame):
    for order in (F.col("s").asc_nulls_last(), F.col("day").desc_nulls_last()):
        w = Window.partitionBy("k").orderBy(order, F.col("t").asc_nulls_last())
        columns = {"total": F.sum("x").over(w), "rank": F.rank().over(w), "dense": F.dense_rank().over(w)}
        assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns))


def test_a_replaced_column_keeps_its_place_and_the_skewed_front_is_the_same_verb(frame):
    # The front, from statistics gathered when called: key 0's half of the rows is 4 mean
    # tasks' of 8, over a guard of 2 (and no size); its report names the key it cut.
    w = Window.partitionBy("k").orderBy("t")
    columns = {"x": F.sum("x").over(w), "after": F.rank().over(w)}
    front = skewed(frame, workers=WORKERS, min_skew=2, min_rows=0)
    report: Report[WindowSplitReport] = Report()
    assert_same_window(front.withColumns(columns, report=report), frame.withColumns(columns))
    assert 0 in report.get.hot["k"].to_list() and report.get.left_to_spark is None
    assert_same_window(front.withColumn("x", F.max("x").over(w)), frame.withColumn("x", F.max("x").over(w)))
    # Columns over several windows, and a plain one, as Spark's withColumns takes them.
    by_s = Window.partitionBy("s").orderBy("u")
    several = {
        "run": F.sum("x").over(w),
        "n": F.row_number().over(by_s),
        "twice": F.col("u") * 2,
        "r": F.rank().over(w),
    }
    assert_same_window(front.withColumns(several), frame.withColumns(several))
    with pytest.raises(ConfigError, match="one window's figures"):
        front.withColumns(several, report=Report())
    plain = {"twice": F.col("u") * 2}
    assert_same_window(front.withColumns(plain), frame.withColumns(plain))
    # A window inside an expression is split too: computed under keysplit's name, then the expression.
    report = Report()
    gap = {"gap": F.col("u") - F.lag("u").over(w)}
    assert_same_window(front.withColumns(gap, report=report), frame.withColumns(gap))
    assert 0 in report.get.hot["k"].to_list()
    # Under the default guard (5 mean tasks) Spark's own window runs, and the report says why.
    kept: Report[WindowSplitReport] = Report()
    assert_same_window(skewed(frame, workers=WORKERS).withColumns(columns, report=kept), frame.withColumns(columns))
    assert kept.get.hot.height == 0 and kept.get.left_to_spark.startswith("below threshold")
    kept = Report()
    assert_same_window(skewed(frame, workers=WORKERS).withColumns(gap, report=kept), frame.withColumns(gap))
    assert kept.get.rows == frame.count() and kept.get.left_to_spark.startswith("below threshold")


def test_partition_by_expressions_and_several_keys(frame):
    w = Window.partitionBy((F.col("k") % 2).alias("parity"), "s").orderBy("t")
    columns = {"total": F.sum("x").over(w), "n": F.rank().over(w)}
    assert_same_window(window(frame, columns, workers=WORKERS), frame.withColumns(columns))


def _ranking(w, buckets: int) -> dict:
    """Every function of the row's place in ``w``'s order: row number, ranks, ``ntile``."""
    return {
        "n": F.row_number().over(w),
        "rank": F.rank().over(w),
        "dense": F.dense_rank().over(w),
        "percent": F.percent_rank().over(w),
        "cume": F.cume_dist().over(w),
        "tile": F.ntile(buckets).over(w),
    }


def test_a_window_without_partition_by_is_cut_into_ranges_of_the_whole_frame(frame):
    # No partitionBy: Spark sorts and scans every row in one task. The whole frame is one
    # partition, a key hot on any number of tasks, its ordering cut into ranges with exact
    # carries: every family of functions, ties and nulls in t, two order columns in both
    # directions, a whole-frame aggregate beside them; the same through skewed(df).
    w = Window.orderBy(F.col("t").desc_nulls_first(), "u")
    columns = {
        **_ranking(w, 9),
        "running": F.sum("x").over(w),
        "low": F.min("day").over(w),
        "prev": F.lag("x").over(w),
        "next": F.lead("s", 2).over(w),
        "first_seen": F.first("x", ignorenulls=True).over(w),
        "last_seen": F.last("x", ignorenulls=True).over(w),
        "moving": F.sum("x").over(w.rowsBetween(-3, 0)),
        "largest": F.max("x").over(Window.partitionBy()),
    }
    report: Report[WindowSplitReport] = Report()
    assert_same_window(window(frame, columns, workers=WORKERS, report=report), frame.withColumns(columns))
    [whole] = report.get.hot.iter_rows(named=True)
    assert whole["rows"] == ROWS and whole["chunks"] >= WORKERS, report.get.hot
    assert whole["largest_chunk"] <= 2 * ROWS / whole["chunks"], report.get.hot
    # Ordered by t alone (300 values: heavy ties): peers share a range, and their values.
    by_t = Window.orderBy("t")
    tied = {"rank": F.rank().over(by_t), "cume": F.cume_dist().over(by_t), "running": F.sum("x").over(by_t)}
    report = Report()
    front = skewed(frame, workers=WORKERS, min_rows=0).withColumns(tied, report=report)
    assert_same_window(front, frame.withColumns(tied))
    assert report.get.hot["rows"].to_list() == [ROWS] and report.get.hot["chunks"][0] > 1, report.get.hot


@pytest.mark.parametrize("layout", ["file splits", "round robin"])
def test_ranks_in_the_input_order_are_counted_where_the_rows_are(frame, layout):
    # Window.orderBy(monotonically_increasing_id()): each rank is the row's consecutive
    # index (rows of the partitions before, plus its place in its own), no row moves; the
    # same through skewed(df) (statistics first, as optimize). with_row_index is that index.
    rows = frame if layout == "file splits" else frame.repartition(6)
    position = F.monotonically_increasing_id()
    w = Window.orderBy(position)
    columns = _ranking(w, 7)
    spark_partitions = rows.groupBy(F.spark_partition_id().alias("p")).count().toPandas()
    report: Report[WindowSplitReport] = Report()
    ours = window(rows, columns, workers=WORKERS, report=report)
    assert_same_window(ours, rows.withColumns(columns))
    [whole] = report.get.hot.iter_rows(named=True)
    assert whole["rows"] == ROWS and whole["chunks"] == len(spark_partitions), report.get.hot
    # The rows stay in their input partitions: the same counts per partition.
    placed = ours.groupBy(F.spark_partition_id().alias("p")).count().toPandas()
    assert sorted(placed["count"]) == sorted(spark_partitions["count"])
    reverse = {
        "n": F.row_number().over(Window.orderBy(position.desc())),
        "tile": F.ntile(3).over(Window.orderBy(position.desc())),
    }
    assert_same_window(skewed(rows, min_rows=0).withColumns(reverse), rows.withColumns(reverse))

    indexed = with_row_index(rows, "i", offset=5)
    assert indexed.columns == ["i", *rows.columns]
    expected = rows.withColumn("i", (F.row_number().over(w) + 4).cast("long")).select("i", *rows.columns)
    assert_same_window(indexed, expected)
    assert sorted(_rows(indexed)["i"]) == list(range(5, ROWS + 5))


def _digest(frame) -> tuple[int, int]:
    """Rows and the sum of a 64-bit hash of each row's values: equal multisets of rows give
    equal digests, and a changed value changes it (but for a hash collision). Computed in
    Spark: millions of rows never cross to the client."""
    row = frame.agg(F.count(F.lit(1)), F.sum(F.xxhash64(*frame.columns).cast("decimal(20,0)"))).first()
    return int(row[0]), int(row[1])


@pytest.mark.parametrize(
    ("groups", "rows_each", "unique", "fraction"),
    [
        (100_000, 100, 0, 0.02),
        (100_000, 100, 0, 0.0045),
        (10_000, 1_000, 0, 0.02),
        (0, 0, 10_000_000, 0.02),
        (50_000, 20, 5_000_000, 0.02),
        (90_000, 100, 1_000_000, 0.002),
    ],
)
def test_distinct_order_values_estimated_from_a_sample(groups, rows_each, unique, fraction):
    # Values of 100 or 1,000 rows each are counted within 10 %, and bounded within 5x (the
    # groups of a window's peers are then broadcast). Unique values alone: far above a
    # sixteenth of the rows (no window is computed from such groups). Unique values beside
    # common ones, which Chao's estimate misses: the bound still holds them.
    rng = np.random.default_rng(11)
    sizes = np.concatenate([np.full(groups, rows_each), np.ones(unique, dtype=np.int64)])
    sampled = rng.binomial(sizes, fraction)
    estimate, bound = estimated_values(pl.Series(sampled[sampled > 0]), fraction)
    truth = groups + unique
    rows = int(sizes.sum())
    assert bound >= truth * 0.9, (estimate, bound, truth)
    if not unique:
        assert abs(estimate - truth) <= truth / 10 and bound <= 5 * truth, (estimate, bound)
    elif not groups:
        assert estimate > rows / PEER_GROUP_ROWS, (estimate, bound)


def test_millions_of_rows_without_partition_by_equal_sparks(spark, tmp_path):
    # At scale: 2 M rows in file splits, ordered by a column of heavy ties and the id; the
    # window verb (its sample in the plan) and with_row_index, each against Spark's own.
    path = str(tmp_path / "millions.parquet")
    spark.spark.range(2_000_000).selectExpr("id", "id * 7919 % 50000 AS t", "id % 997 - 400 AS x").write.parquet(path)
    rows = spark.spark.read.parquet(path)
    w = Window.orderBy("t", "id")
    columns = {
        "n": F.row_number().over(w),
        "running": F.sum("x").over(w),
        "prev": F.lag("x", 2).over(w),
        "moving": F.sum("x").over(w.rowsBetween(-3, 1)),
    }
    report: Report[WindowSplitReport] = Report()
    ours = window(rows, columns, report=report)
    digest = _digest(ours)
    assert digest == _digest(rows.withColumns(columns)) and digest[0] == 2_000_000
    [whole] = report.get.hot.iter_rows(named=True)
    assert whole["largest_chunk"] <= 2 * 2_000_000 / whole["chunks"], report.get.hot
    # The same under optimize, cut at literals measured before the plan: each chunk's edge
    # rows from bands its sample (a tenth of the rows) bounds, a last value seen among them.
    edges = {**columns, "seen": F.last(F.when(F.col("x") > 590, F.col("x")), ignorenulls=True).over(w)}
    banded = optimize(rows.withColumns(edges), min_rows=0)
    assert _digest(banded) == _digest(rows.withColumns(edges))
    assert "__keysplit_w_heads" in spark.explained(banded)
    # Running aggregates and ranks over t alone (50,000 values of 40 rows) under optimize:
    # each value from its group of peers, no row moved.
    by_t = Window.orderBy("t")
    peers = {"running": F.sum("x").over(by_t), "mean": F.avg("x").over(by_t), "rank": F.rank().over(by_t)}
    measured: Report[OptimizeReport] = Report()
    ours = optimize(rows.withColumns(peers), min_rows=0, report=measured)
    assert _digest(ours) == _digest(rows.withColumns(peers))
    [decision] = measured.get.operators
    assert decision.report.get.by_peers and decision.report.get.hot["chunks"].to_list() == [50_000]
    numbered = with_row_index(rows)
    expected = rows.select(
        (F.row_number().over(Window.orderBy(F.monotonically_increasing_id())) - 1).cast("long").alias("index"), "*"
    )
    assert _digest(numbered) == _digest(expected)


def test_with_row_index_of_bad_input_and_an_empty_frame(frame):
    with pytest.raises(ConfigError, match="already has a column 'id'"):
        with_row_index(frame, "id")
    with pytest.raises(ConfigTypeError, match="offset must be an int"):
        with_row_index(frame, offset=1.5)
    with pytest.raises(ConfigTypeError, match="works on a Spark DataFrame"):
        with_row_index(_table(10))
    with pytest.raises(ConfigError, match="are keysplit's own; rename"):
        with_row_index(frame.withColumn("__keysplit_i_n", F.lit(1)))
    assert with_row_index(frame.limit(0)).collect() == []


def test_no_hot_key_is_sparks_window(frame):
    uniform = frame.filter(F.col("k") > 0)
    w = Window.partitionBy("k").orderBy("t")
    columns = {"total": F.sum("x").over(w), "rank": F.dense_rank().over(w)}
    assert_same_window(window(uniform, columns, workers=WORKERS), uniform.withColumns(columns))


def test_an_empty_frame(frame):
    empty = frame.limit(0)
    w = Window.partitionBy("k").orderBy("t")
    columns = {"total": F.sum("x").over(w)}
    assert_same_window(window(empty, columns, workers=WORKERS), empty.withColumns(columns))


def test_what_is_not_split_is_refused_by_name(frame):
    w = Window.partitionBy("k").orderBy("t")
    with pytest.raises(ConfigError, match="collect_list"):
        window(frame, {"c": F.collect_list("x").over(w)})
    with pytest.raises(ConfigError, match="RANGE BETWEEN 5 PRECEDING"):
        window(frame, {"c": F.sum("x").over(w.rangeBetween(-5, 0))})
    with pytest.raises(ConfigError, match="different partitionings"):
        window(frame, {"a": F.sum("x").over(w), "b": F.sum("x").over(Window.partitionBy("s").orderBy("t"))})
    with pytest.raises(ConfigError, match="different windows"):
        window(frame, {"a": F.sum("x").over(w), "b": F.sum("x").over(Window.partitionBy("k").orderBy("u"))})
    with pytest.raises(ConfigError, match="not a window function"):
        window(frame, {"a": F.col("x") + 1})
    with pytest.raises(ConfigError, match="needs an ordered window"):
        window(frame, {"a": F.row_number().over(Window.partitionBy("k"))})
    with pytest.raises(ConfigError, match="takes no frame"):
        window(frame, {"a": F.rank().over(w.rowsBetween(-1, 1))})
    with pytest.raises(ConfigError, match=r"does not split first over ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING yet"):
        window(frame, {"a": F.first("x").over(w.rowsBetween(-1, 1))})
    with pytest.raises(ConfigError, match=f"reach at most {MAX_REACH:,} rows"):
        window(frame, {"a": F.lag("x", MAX_REACH + 1).over(w)})
    with pytest.raises(ConfigTypeError, match="Spark DataFrame"):
        window(pl.DataFrame({"k": [1]}), {"a": F.sum("x").over(w)})
    # A column named as the plan's own, in the input or among the new ones.
    with pytest.raises(ConfigError, match=r"\['__keysplit_w_chunk'\]"):
        window(frame.withColumn("__keysplit_w_chunk", F.lit(1)), {"a": F.sum("x").over(w)})
    with pytest.raises(ConfigError, match=r"\['__keysplit_w_a'\]"):
        window(frame, {"__keysplit_w_a": F.sum("x").over(w)})
    with pytest.raises(ConfigError, match="at least one column"):
        window(frame, {})
    with pytest.raises(ConfigError, match="workers"):
        window(frame, {"a": F.sum("x").over(w)}, workers=0)


def test_a_missing_column_fails_before_any_job(frame):
    w = Window.partitionBy("k").orderBy("nope")
    with pytest.raises(Exception, match="nope"):
        window(frame, {"a": F.sum("x").over(w)})


def test_the_salting_recipe_gets_a_running_sum_wrong_and_window_does_not(frame):
    """The recipe that circulates: salt the hot key, run the sum per (key, salt), then take
    the largest per (key, order value). Each salt restarts the sum, so a row's value is its
    salt's running sum, not the key's."""
    w = Window.partitionBy("k").orderBy("u")
    expected = _rows(frame.withColumn("run", F.sum("x").over(w)))
    salted = (
        frame.withColumn("salt", (F.rand(7) * 8).cast("int"))
        .withColumn("run", F.sum("x").over(Window.partitionBy("k", "salt").orderBy("u")))
        .groupBy("k", "u")
        .agg(F.max("run").alias("run"))
    )
    recipe = pl.from_arrow(salted.toArrow())
    assert isinstance(recipe, pl.DataFrame)
    compared = expected.select("k", "u", "run").join(recipe, on=["k", "u"], how="inner", nulls_equal=True)
    assert compared.height == expected.height
    wrong = compared.filter(pl.col("run") != pl.col("run_right")).height
    assert wrong > expected.height // 4, "the recipe's running sums are mostly wrong"
    ours = _rows(window(frame, {"run": F.sum("x").over(w)}, workers=WORKERS))
    assert ours["run"].equals(expected["run"])


def test_the_report_gives_the_hot_keys_chunks_exactly(frame, spark, monkeypatch):
    from pyspark.sql.connect.client.core import SparkConnectClient

    from keysplit.spark import Report

    # Spark Connect's observe asks the server whether the frame is streaming, an analysis of
    # the whole plan for each new frame: the split plan's observations are built without it,
    # and the verb checks its input once instead (none where its frame knows the answer).
    asked: list[str] = []
    analyze = SparkConnectClient._analyze

    def counted(self, method, **kwargs):
        asked.append(method)
        return analyze(self, method, **kwargs)

    monkeypatch.setattr(SparkConnectClient, "_analyze", counted)
    report: Report[WindowSplitReport] = Report()
    w = Window.partitionBy("k").orderBy("t")
    result = window(frame, {"total": F.sum("x").over(w)}, workers=WORKERS, report=report)
    assert asked.count("is_streaming") <= 1
    monkeypatch.undo()
    assert result.count() == ROWS
    figures = report.get
    assert figures.rows == ROWS and figures.workers == WORKERS
    exact = _table().group_by("k").len()
    hot = figures.hot.filter(pl.col("k") == 0)
    assert hot.height == 1
    assert hot["rows"][0] == exact.filter(pl.col("k") == 0)["len"][0]
    assert hot["chunks"][0] >= 3
    # A chunk is a range of the ordering: never more than about a mean task's rows (the cuts
    # come from a 2 % sample, and ties are never cut), where Spark's window has the key whole.
    assert hot["largest_chunk"][0] <= 2 * figures.mean_task_rows
    assert figures.hot["rows"].sum() < ROWS
    stream = spark.spark.readStream.format("rate").load()
    by_value = Window.partitionBy(F.col("value") % 3).orderBy("timestamp")
    with pytest.raises(ConfigError, match="streaming DataFrame.*stream_aggregate"):
        window(stream, {"total": F.sum("value").over(by_value)}, report=Report())


def test_a_report_without_a_hot_key_says_so(frame):
    from keysplit.spark import Report

    report = Report()
    uniform = frame.filter(F.col("k") > 0)
    window(uniform, {"total": F.sum("x").over(Window.partitionBy("k").orderBy("t"))}, report=report).count()
    assert report.get.hot.height == 0
    assert report.get.rows == uniform.count()


# Every function the verb splits, with the frames it takes (None: Spark's fixed frame). First
# and last over an unordered window take whichever row Spark's shuffle delivers first, so no
# two runs of Spark need agree: that case has its own test (a value of the key, one per key).
_FUNCTIONS = {
    "count(*)": (lambda: F.count(F.lit(1)), ("range", "rows", "whole")),
    "count": (lambda: F.count("x"), ("range", "rows", "whole")),
    "sum": (lambda: F.sum("x"), ("range", "rows", "whole")),
    "min": (lambda: F.min("x"), ("range", "rows", "whole")),
    "max": (lambda: F.max("s"), ("range", "rows", "whole")),
    "avg": (lambda: F.avg("x"), ("range", "rows", "whole")),
    "row_number": (F.row_number, (None,)),
    "rank": (F.rank, (None,)),
    "dense_rank": (F.dense_rank, (None,)),
    "percent_rank": (F.percent_rank, (None,)),
    "cume_dist": (F.cume_dist, (None,)),
    "ntile": (lambda: F.ntile(5), (None,)),
    "lag": (lambda: F.lag("x", 3), (None,)),
    "lag with a default": (lambda: F.lag("s", 1, "none"), (None,)),
    "lag back": (lambda: F.lag("x", -2), (None,)),
    "lead": (lambda: F.lead("x", 2, 0), (None,)),
    "first": (lambda: F.first("x"), ("range", "rows")),
    "first ignoring nulls": (lambda: F.first("x", True), ("range", "rows")),
    "last": (lambda: F.last("x"), ("range", "rows")),
    "last ignoring nulls": (lambda: F.last("x", True), ("range", "rows")),
    "bounded count(*)": (lambda: F.count(F.lit(1)), ("around", "behind", "ahead")),
    "bounded count": (lambda: F.count("x"), ("around", "behind", "ahead")),
    "bounded sum": (lambda: F.sum("x"), ("around", "behind", "ahead")),
    "bounded min": (lambda: F.min("s"), ("around", "behind", "ahead")),
    "bounded max": (lambda: F.max("x"), ("around", "behind", "ahead")),
    "bounded avg": (lambda: F.avg("price"), ("around", "behind", "ahead")),
}
# Functions whose value among peers depends on the order Spark sorts them in: compared on a
# total order (the row id last).
_PEER_ORDERED = {"row_number", "ntile", "lag", "lag with a default", "lag back", "lead", "first", "last"}
_PEER_ORDERED |= {"first ignoring nulls", "last ignoring nulls"}
_BOUNDED = {"around": (-3, 2), "behind": (-4, -1), "ahead": (1, 3)}


@st.composite
def _cases(draw):
    rows = draw(st.integers(1, 4_000))
    seed = draw(st.integers(0, 2**16))
    orders = draw(
        st.lists(
            st.tuples(st.sampled_from(["t", "s", "day"]), st.booleans(), st.booleans()),
            min_size=1,
            max_size=2,
            unique_by=lambda o: o[0],
        )
    )
    functions = draw(st.lists(st.sampled_from(sorted(_FUNCTIONS)), min_size=1, max_size=4, unique=True))
    frames = [draw(st.sampled_from(_FUNCTIONS[name][1])) for name in functions]
    return rows, seed, orders, list(zip(functions, frames, strict=True))


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_every_function_frame_order_and_null_equals_sparks(spark, tmp_path_factory, case):
    rows, seed, orders, functions = case
    data = _table(rows=rows, seed=seed)
    path = tmp_path_factory.mktemp("cases") / "rows.parquet"
    data.write_parquet(path)
    frame = spark.spark.read.parquet(str(path))
    order = []
    for name, ascending, nulls_first in orders:
        c = F.col(name)
        order.append(
            (c.asc_nulls_first() if nulls_first else c.asc_nulls_last())
            if ascending
            else (c.desc_nulls_first() if nulls_first else c.desc_nulls_last())
        )
    if any(name in _PEER_ORDERED or kind == "rows" or kind in _BOUNDED for name, kind in functions):
        order.append(F.col("id"))
    w = Window.partitionBy("k").orderBy(*order)
    columns = {}
    for i, (name, kind) in enumerate(functions):
        build = _FUNCTIONS[name][0]
        spec = {
            None: w,
            "range": w,
            "rows": w.rowsBetween(Window.unboundedPreceding, Window.currentRow),
            "whole": Window.partitionBy("k"),
            **{name: w.rowsBetween(*ends) for name, ends in _BOUNDED.items()},
        }[kind]
        columns[f"c{i}"] = build().over(spec)
    assert_same_window(window(frame, columns, workers=WORKERS, seed=seed), frame.withColumns(columns))
