"""``keysplit.spark.optimize``: a whole query's straggling operators rewritten from statistics
gathered once, against Spark's own plan of the same query on the real embedded server (the
``spark`` fixture), whose settings optimize never touches.

Every result is compared with Spark's, as a multiset of rows (row for row where the query's
value depends on an order). The fact table is read from a Parquet file the tests write: key
7 holds 60 % of the rows, the null key 5 %; ``t`` has ties and nulls, ``u`` is unique.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import gc
import importlib
import re
import time

import numpy as np
import polars as pl
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import Window
from pyspark.sql import functions as F

from keysplit import ConfigError, ConfigTypeError
from keysplit.spark import OptimizeReport, Report, explain_skew, forget_statistics, optimize
from keysplit.spark.options import MIN_SKEW
from spark_status import StatusApi

ROWS = 40_000
WORKERS = 16
HOT = 7


def _facts(rows: int = ROWS, seed: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    keys = np.where(rng.random(rows) < 0.6, HOT, rng.integers(0, 500, rows))
    frame = pl.DataFrame(
        {
            "k": keys.astype(np.int64),
            "t": rng.integers(0, 2_000, rows).astype(np.int64),
            "u": rng.permutation(rows).astype(np.int64),
            "v": rng.normal(0, 1, rows),
            "s": [f"s{v:03d}" for v in rng.integers(0, 300, rows)],
            "day": [datetime.date(2026, 1, 1) + datetime.timedelta(days=int(d)) for d in rng.integers(0, 90, rows)],
            "price": [decimal.Decimal(int(v)) / 100 for v in rng.integers(0, 100_000, rows)],
        }
    )
    return frame.with_columns(
        pl.when(pl.col("u") % 20 == 3).then(None).otherwise(pl.col("k")).alias("k"),
        pl.when(pl.col("u") % 17 == 5).then(None).otherwise(pl.col("t")).alias("t"),
        pl.when(pl.col("u") % 19 == 4).then(None).otherwise(pl.col("s")).alias("s"),
        pl.col("price").cast(pl.Decimal(10, 2)),
    )


@pytest.fixture(scope="module")
def facts(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("optimize") / "facts.parquet"
    _facts().write_parquet(path)
    return spark.spark.read.parquet(str(path))


@pytest.fixture(scope="module")
def dims(spark):
    # Unique keys but one, which has three rows (a key's output is L·R). Hinted as a user
    # would, so that Spark shuffles it rather than broadcast it (a broadcast join moves no
    # key, and optimize leaves it alone).
    keys = spark.spark.range(500).select(F.col("id").alias("k"), (F.col("id") % 7).alias("d"))
    return keys.union(spark.spark.range(2).select(F.lit(3).cast("long").alias("k"), F.col("id").alias("d"))).hint(
        "merge"
    )


def _rows(frame) -> list[tuple]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def _optimized(query, **options):
    report: Report[OptimizeReport] = Report()
    options = {"workers": WORKERS, "min_rows": 0, **options}
    return optimize(query, report=report, **options), report.get


def _split_keys(decision) -> list:
    """The keys the rewritten operator's own report names as split, once its plan has run."""
    hot = decision.report.get.hot
    return hot.get_column(hot.columns[0]).to_list()


def _queries(facts, dims) -> dict:
    """Each query, and per keyed operator (inputs first) its rule and, where split, its hot key."""
    by_key = Window.partitionBy("k").orderBy("t", "u")
    by_copy = by_key.orderBy("t", "u", "d")
    # A join on a uniform key (no hot key), whose output the operator above reads on k.
    uniform = facts.withColumn("j", F.col("u") % 500).join(dims.withColumnRenamed("k", "j"), "j")
    return {
        "left join": (facts.join(dims, "k", "left"), [("skew", HOT)]),
        # Above a split operator, another split reads its output persisted: optimize._split_below.
        "join, then a median and a count per key": (
            facts.join(dims, "k").groupBy("k").agg(F.median("v"), F.count("*")),
            [("skew", HOT), ("skew", HOT)],
        ),
        "full join, then a window per key": (
            facts.join(dims, "k", "full").withColumn("run", F.sum("u").over(by_key)),
            [("skew", HOT), ("skew", HOT)],
        ),
        # Sampled through the join's left side; its hot rows persisted with their chunks. (Key
        # 3's rows meet two rows of dims: d orders those copies, as a lag needs.)
        "join, then a running sum and a lag per key": (
            facts.join(dims, "k").withColumns({"run": F.sum("u").over(by_copy), "last": F.lag("v").over(by_copy)}),
            [("skew", HOT), ("skew", HOT)],
        ),
        # Its input's sample: the join's left side sampled, joined to the whole right side.
        "a join on a uniform key, then a mode per the hot key": (
            uniform.groupBy("k").agg(F.mode("u", True)),
            [("no hot key", None), ("skew", HOT)],
        ),
        # Measured with the window under it removed (it reads none of its values).
        "a select with a window, then percentiles per key": (
            facts.select("*", F.lag("v", 2).over(by_key).alias("before"))
            .groupBy("k")
            .agg(F.percentile("u", [0.25, 0.9]), F.count_distinct("s"), F.max("before")),
            [("skew", HOT), ("skew", HOT)],
        ),
        "a running sum, then a median per key": (
            facts.withColumn("run", F.sum("u").over(by_key)).groupBy("k").agg(F.median("v"), F.max("run")),
            [("skew", HOT), ("skew", HOT)],
        ),
        # A window inside an expression: computed under keysplit's name, then the expression.
        "a lag's difference, then a percentile per key": (
            facts.withColumn("gap", F.col("u") - F.lag("u").over(by_key)).groupBy("k").agg(F.percentile("u", 0.5)),
            [("skew", HOT), ("skew", HOT)],
        ),
    }


#: The inputs each query's statistics scan.
SAMPLED_INPUTS = {
    "left join": 2,
    # The median, judged split from the join's statistics, is sampled through the join's
    # left side (a second scan): its hot keys and cuts known before the plan.
    "join, then a median and a count per key": 3,
    "full join, then a window per key": 2,
    "join, then a running sum and a lag per key": 3,
    "a join on a uniform key, then a mode per the hot key": 3,
    # A lag's window samples its rows with their positions (its order has ties): the
    # aggregate's columns are read in that scan too.
    "a select with a window, then percentiles per key": 1,
    "a lag's difference, then a percentile per key": 1,
    "a running sum, then a median per key": 1,
}


@pytest.mark.parametrize(
    "name",
    [
        "left join",
        "join, then a median and a count per key",
        "full join, then a window per key",
        "join, then a running sum and a lag per key",
        "a join on a uniform key, then a mode per the hot key",
        "a select with a window, then percentiles per key",
        "a lag's difference, then a percentile per key",
        "a running sum, then a median per key",
    ],
)
def test_every_hot_operator_of_a_chain_is_split_and_the_result_is_sparks(spark, facts, dims, name):
    query, expected = _queries(facts, dims)[name]
    settings = dict(spark.spark.conf.getAll)
    optimized, report = _optimized(query)
    assert [d.rule for d in report.operators] == [rule for rule, _ in expected], str(report)
    # One pass over each input: a window and the aggregate above it on one input's keys share
    # the scan of that input (the join's sides are two, a chain above a join samples through it).
    assert report.sampled_inputs == SAMPLED_INPUTS[name], str(report)
    assert optimized is not query
    assert _rows(optimized) == _rows(query)
    for decision, (_, key) in zip(report.operators, expected, strict=True):
        if decision.rewritten:
            assert decision.predicted_skew >= 5.0
            assert decision.split_keys is not None and key in decision.split_keys.to_series(0).to_list(), decision
            # Its own report, filled by the action, names the hot key it split with its exact rows.
            assert key in _split_keys(decision), decision
    # An upper split on the lower's keys is fused over the lower's two branches: Spark's own
    # operator over the keys not hot, keysplit's over the hot keys' output, which is persisted
    # (each branch of its plan reads it); release frees it.
    both = [rule for rule, _ in expected] == ["skew", "skew"]
    assert len(report.persisted) == int(both), str(report)
    assert ("fused over" in report.operators[-1].why) == both, str(report)
    # Where the upper's hot keys are known before the plan and hold the lower's, its plan over
    # the lower's hot output has no branch for keys not hot; a full join's upper finds its
    # hot keys in its own plan (nothing drives the join's output: it is not sampled through).
    covered = both and name != "full join, then a window per key"
    assert ("each of them hot here too" in report.operators[-1].why) == covered, str(report)
    assert ("Sample" in spark.explained(optimized)) == (name == "full join, then a window per key")
    report.release()
    for frame in report.persisted:
        assert not frame.storageLevel.useMemory and not frame.storageLevel.useDisk
    # Nothing was set on the session (no configuration, no JAR): it runs where Spark Connect does.
    assert dict(spark.spark.conf.getAll) == settings


def test_the_statistics_read_a_windows_ordering_only_where_a_key_may_be_split(facts):
    # Keys first (statistics.sample_inputs): the key alone is sampled, and the ordering too
    # only where the cost guard may split a key; the sample kept says which it read. By u (a
    # permutation) no key is hot; by k, HOT holds 60 %.
    statistics = importlib.import_module("keysplit.spark.statistics")
    for key, hot in (("u", False), ("k", True)):
        forget_statistics()
        query = facts.withColumn("r", F.sum("v").over(Window.partitionBy(key).orderBy("t")))
        _, report = _optimized(query)
        [kept] = statistics._KEPT.samples.values()
        ordering = kept.table.column(kept.table.column_names[-1])
        assert report.operators[0].rewritten is hot and kept.whole is hot, str(report)
        # (t has nulls of its own: read, some are not.)
        assert (ordering.null_count < kept.table.num_rows) is hot and kept.table.num_rows > 0
    forget_statistics()


def test_a_persisted_split_output_is_unpersisted_once_no_frame_reads_the_query(facts, dims):
    # A fused chain persists the join's hot output (above); with no release() called, it is
    # unpersisted once the last DataFrame reading the optimized query is garbage collected.
    query = facts.join(dims, "k").groupBy("k").agg(F.median("v"), F.count("*"))
    optimized, report = _optimized(query)
    derived = optimized.where(F.col("k").isNotNull())
    del optimized
    assert _rows(derived) == _rows(query)
    [held] = report.persisted
    assert held.storageLevel.useDisk, "persisted (memory and disk) while a frame reads it"
    del derived
    gc.collect()
    deadline = time.monotonic() + 60
    while held.storageLevel.useDisk and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not held.storageLevel.useMemory and not held.storageLevel.useDisk


def test_where_the_server_will_not_persist_a_chain_is_still_exact(facts, dims, monkeypatch):
    # Serverless Spark Connect refuses DataFrame.persist: its error, raised by the client here.
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.dataframe import DataFrame

    def refused(self, *args, **kwargs):
        raise PySparkException("[NOT_SUPPORTED_WITH_SERVERLESS] PERSIST TABLE is not supported on serverless compute.")

    monkeypatch.setattr(DataFrame, "persist", refused)
    # Fused (the median on the join's keys): split all the same, its hot branch recomputed
    # where its plan reads it.
    fused = facts.join(dims, "k").groupBy("k").agg(F.median("v"), F.count("*"))
    optimized, report = _optimized(fused)
    assert [d.rule for d in report.operators] == ["skew", "skew"], str(report)
    assert "the server refused: [NOT_SUPPORTED_WITH_SERVERLESS]" in report.operators[1].why
    assert report.persisted == ()
    assert _rows(optimized) == _rows(fused)
    # (The join's own report counts its rows as they pass, which a branch read twice does not
    # report: it may stay pending here.)
    assert HOT in _split_keys(report.operators[1])
    # On other keys (d, whose value 0 the hot key 7 makes hot): the upper would read the
    # whole split join once per branch, so it is left to Spark, which reads it once.
    stacked = facts.join(dims, "k").groupBy("d").agg(F.median("v"))
    optimized, report = _optimized(stacked)
    assert [d.rule for d in report.operators] == ["skew", "stacked"], str(report)
    assert "NOT_SUPPORTED_WITH_SERVERLESS" in report.operators[1].why
    assert report.persisted == ()
    assert _rows(optimized) == _rows(stacked)
    assert HOT in _split_keys(report.operators[0])


@pytest.mark.parametrize(
    "orders",
    [
        [("desc_nulls_last", "s"), ("asc", "day"), ("asc", "u")],
        [("desc_nulls_first", "price"), ("asc", "u")],
        [("asc_nulls_last", "t"), ("desc", "v")],
    ],
    ids=["string desc, date", "decimal desc nulls first", "integer nulls last, double desc"],
)
def test_the_cuts_computed_on_the_client_follow_sparks_order_of_every_type(facts, orders):
    # The hot key's rows are cut at sampled values sorted on the client (Polars): for every
    # direction, null placement and type, a row's running values equal Spark's row for row.
    by_key = Window.partitionBy("k").orderBy(*[getattr(F, direction)(name) for direction, name in orders])
    query = facts.withColumns(
        {"rn": F.row_number().over(by_key), "run": F.sum("u").over(by_key), "prev": F.lag("u").over(by_key)}
    )
    optimized, report = _optimized(query)
    [decision] = report.rewritten
    got, want = (pl.from_arrow(q.toArrow()).sort("u") for q in (optimized, query))
    assert got.equals(want)
    hot = decision.report.get.hot
    assert hot.filter(pl.col("k") == HOT)["chunks"].item() > 1


def test_where_nothing_is_hot_the_query_is_returned_unchanged(spark, dims):
    uniform = spark.spark.range(20_000).select((F.col("id") % 400).alias("k"), F.col("id").alias("v"))
    query = (
        uniform.join(dims, "k")
        .groupBy("d")
        .agg(F.sum("v"))
        .join(uniform.groupBy("k").agg(F.median("v")), F.col("d") == F.col("k"))
    )
    optimized, report = _optimized(query)
    assert optimized is query
    rules = {d.operator: d.rule for d in report.operators}
    assert sorted(rules.values()) == ["combinable", "no hot key", "no hot key", "not measured"], str(report)
    assert report.sampled_inputs == 3 and report.statistics_seconds > 0


def test_a_distinct_count_beside_a_mode_is_counted_for_every_key_without_statistics(spark, facts, dims):
    # Spark computes the mode per (key, value) group of its distinct plan: optimize counts
    # every key's values instead, hot or not, and samples nothing for it.
    uniform = spark.spark.range(20_000).select((F.col("id") % 400).alias("k"), (F.col("id") % 37).alias("u"))
    columns = [F.mode("u", True).alias("mode"), F.count_distinct("u").alias("users")]
    query = uniform.groupBy("k").agg(*columns)
    optimized, report = _optimized(query)
    [decision] = report.operators
    assert (decision.rule, decision.rewritten) == ("tallied", True), str(report)
    assert report.sampled_inputs == 0
    assert optimized.schema == query.schema
    assert _rows(optimized) == _rows(query)
    counted = decision.report.get
    assert counted.split == {
        "mode": "mode of every key's value counts",
        "users": "count_distinct of every key's value counts",
    }
    assert counted.rows == 20_000 and counted.hot.height == 0
    # Spark's mode buffer is not in the plan (it is in Spark's own).
    assert "mode(" in spark.explained(query) and "mode(" not in spark.explained(optimized)
    # Above a split join on its keys: the counts read the join's output once (not fused over
    # its branches, nothing persisted).
    chained = facts.join(dims, "k").groupBy("k").agg(F.mode("t", True), F.count_distinct("t"))
    optimized, report = _optimized(chained)
    assert [d.rule for d in report.operators] == ["skew", "tallied"], str(report)
    assert report.persisted == () and "fused" not in report.operators[1].why
    assert _rows(optimized) == _rows(chained)
    assert HOT in _split_keys(report.operators[0])
    # Above an output it cannot sample (a full join's, on other keys) it is still counted; a
    # mode and a distinct count of two columns (not this shape) is left there, as any other.
    full = facts.join(dims, "k", "full")
    for columns, rule in (
        ([F.mode("t", True), F.count_distinct("t")], "tallied"),
        ([F.mode("t", True), F.count_distinct("s")], "not measured"),
    ):
        query = full.groupBy("d").agg(*columns)
        optimized, report = _optimized(query)
        assert [d.rule for d in report.operators] == ["skew", rule], str(report)
        assert _rows(optimized) == _rows(query)


def test_chunks_that_outnumber_the_workers_each_get_a_partition_of_their_own(spark):
    # Three hot keys (30, 13 and 8 % of the rows, at 16 workers) take 10, 5 and 3 chunks: 18
    # chunks, more than the 16 workers. Each chunk is windowed in a partition of its own (two
    # in one task made it twice the mean), and the result is Spark's.
    rng = np.random.default_rng(11)
    shares = {1: 0.30, 2: 0.13, 3: 0.08, 4: 0.055, 5: 0.04, 6: 0.03}
    draw = rng.random(ROWS)
    keys = rng.integers(100, 600, ROWS)
    edge = 0.0
    for key, share in shares.items():
        keys = np.where((draw >= edge) & (draw < edge + share), key, keys)
        edge += share
    frame = spark.spark.createDataFrame(
        pl.DataFrame({"k": keys, "t": rng.permutation(ROWS), "v": rng.integers(0, 100, ROWS)}).to_arrow()
    )
    query = frame.withColumn("run", F.sum("v").over(Window.partitionBy("k").orderBy("t")))
    optimized, report = _optimized(query, min_skew=2)
    [decision] = report.operators
    assert decision.rewritten, str(report)
    ours = optimized.withColumn("task", F.spark_partition_id())
    assert _rows(ours.drop("task")) == _rows(query)
    hot = decision.report.get.hot
    assert sorted(hot["k"].to_list()) == [1, 2, 3] and hot["chunks"].sum() > WORKERS, str(hot)
    per_task = pl.from_arrow(ours.where(F.col("k") <= 3).groupBy("task").count().toArrow())
    assert per_task.height == hot["chunks"].sum()
    assert per_task["count"].max() <= hot["largest_chunk"].max(), (per_task, hot)


#: Total orders of every kind of column the whole frame's cuts are literals of: ties, nulls,
#: NaN and both directions as Spark sorts them.
TOTAL_ORDERS = [
    pytest.param(lambda: [F.col("s").desc_nulls_last(), "u"], id="string descending, nulls last"),
    pytest.param(lambda: [F.col("day").desc(), "price", "u"], id="date descending, decimal"),
    pytest.param(
        lambda: [F.when(F.col("u") % 23 == 1, F.lit(float("nan"))).otherwise(F.col("v")).desc_nulls_first(), "u"],
        id="double with NaN, descending",
    ),
    pytest.param(lambda: [F.timestamp_seconds(F.col("t") * 3600), "u"], id="timestamp with nulls"),
]


def test_a_window_without_partition_by_is_explained_and_split(spark, facts):
    # Spark's plan moves every row to one task: explain_skew names the window verb, and
    # optimize cuts the whole frame's ordering into ranges (its one "key", hot on any number
    # of tasks), row for row equal to Spark's.
    w = Window.orderBy("t", "u")
    query = facts.withColumns({"n": F.row_number().over(w), "run": F.sum("t").over(w), "prev": F.lag("s").over(w)})
    [explained] = explain_skew(query).to_dicts()
    assert explained["rule"] == "no partitionBy" and explained["hottest_task_share"] == 1.0, explained
    assert explained["fix"] == "skewed(df).withColumns({...})"
    optimized, report = _optimized(query)
    [decision] = report.operators
    assert decision.rewritten and decision.rule == "skew" and decision.predicted_skew > WORKERS / 2, str(report)
    ours = pl.from_arrow(optimized.toArrow()).sort("u")
    assert ours.equals(pl.from_arrow(query.toArrow()).sort("u"))
    assert decision.report.get.hot["rows"].to_list() == [ROWS] and decision.report.get.hot["chunks"][0] > 1


@pytest.mark.parametrize("order", TOTAL_ORDERS)
def test_a_window_without_partition_by_is_cut_at_literal_values_of_any_order(facts, order):
    # Measured before the plan, the whole frame's cuts are compared with each row as literals
    # of the order columns' types: ties, nulls, NaN and both directions as Spark sorts them.
    w = Window.orderBy(*order())
    query = facts.withColumns({"n": F.row_number().over(w), "run": F.sum("u").over(w), "rank": F.dense_rank().over(w)})
    optimized, report = _optimized(query)
    [decision] = report.operators
    assert decision.rewritten and decision.rule == "skew", str(report)
    ours = pl.from_arrow(optimized.toArrow()).sort("u")
    assert ours.equals(pl.from_arrow(query.toArrow()).sort("u"))
    assert decision.report.get.hot["rows"].to_list() == [ROWS] and decision.report.get.hot["chunks"][0] > 1


@pytest.mark.parametrize("order", TOTAL_ORDERS)
def test_a_window_without_partition_by_finds_its_chunks_edge_rows_in_sampled_bands(spark, facts, order):
    # lag, lead and bounded frames read rows past a chunk's edges, first and last its ends.
    # Measured before the plan, each chunk's first and last rows lie in bands the sample
    # bounds (a sampled row is a row), collected by a hash aggregate: no min_by/max_by sorts
    # every row. The sparse values leave some chunks no sampled value (their band is whole).
    w = Window.orderBy(*order())
    sparse = F.when(F.col("u") % 997 == 3, F.col("u"))
    columns = {
        "prev": F.lag("u", 2).over(w),
        "next": F.lead("s", 3, "none").over(w),
        "around": F.sum("u").over(w.rowsBetween(-5, 4)),
        "first": F.first("u").over(w),
        "first_seen": F.first(sparse, ignorenulls=True).over(w),
        "last_seen": F.last(sparse, ignorenulls=True).over(w),
        "last": F.last("s").over(w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)),
    }
    query = facts.withColumns(columns)
    optimized, report = _optimized(query)
    [decision] = report.operators
    assert decision.rewritten and decision.rule == "skew", str(report)
    ours = pl.from_arrow(optimized.toArrow()).sort("u")
    assert ours.equals(pl.from_arrow(query.toArrow()).sort("u"))
    plan = spark.explained(optimized)
    assert "__keysplit_w_heads" in plan and "max_by" not in plan and "min_by" not in plan, plan


@pytest.mark.parametrize(
    ("order", "radix", "shuffled"),
    [
        pytest.param(lambda: [F.col("t")], True, False, id="long with ties and nulls"),
        pytest.param(lambda: [F.col("t").desc()], True, False, id="long descending, nulls last"),
        pytest.param(lambda: [F.timestamp_seconds(F.col("t") * 3600)], True, False, id="timestamp"),
        pytest.param(
            lambda: [F.col("t").cast("double").desc_nulls_first()], True, False, id="double descending, nulls first"
        ),
        pytest.param(lambda: [F.col("t")], True, True, id="long, its input a view that shuffles"),
        pytest.param(lambda: [F.col("s")], False, False, id="string (not sorted by radix)"),
    ],
)
def test_peers_of_one_nullable_order_column_are_in_spark_s_radix_sorter_s_order(spark, facts, order, radix, shuffled):
    # Without a tie-breaker, Spark's order among peers is its sorter's: sorting one column
    # by radix, it moves a non-null row to the end of its buffer for each null that arrives,
    # so peers are not in the input's order. Every column that reads that order equals
    # Spark's, row for row, in one window operator over the user's ordering. Where the
    # input is read as it is stored, the statistics found where its nulls are, and the
    # places are a literal table the plan recounts; where it is shuffled first (a view read by
    # name, which optimize does not see into: its partitions are its exchange's, which the
    # statistics' scan of fewer columns may coalesce otherwise), the plan computes them.
    if shuffled:
        facts.repartition(3, "u").createOrReplaceTempView("shuffled_facts")
        facts = spark.spark.table("shuffled_facts")
    w = Window.orderBy(*order())
    columns = {
        "n": F.row_number().over(w),
        "tile": F.ntile(7).over(w),
        "prev": F.lag("u", 1).over(w),
        "around": F.sum("u").over(w.rowsBetween(-3, 3)),
        "run": F.sum("u").over(w),
        "first": F.first("u").over(w),
        "last": F.last("u").over(w),
    }
    query = facts.withColumns(columns)
    optimized, report = _optimized(query)
    assert report.operators[0].rewritten, str(report)
    expected = pl.from_arrow(query.toArrow()).sort("u")
    assert pl.from_arrow(optimized.toArrow()).sort("u").equals(expected)
    in_input_order = facts.select(
        "u", F.row_number().over(Window.orderBy(*order(), F.monotonically_increasing_id())).alias("n")
    )
    numbered = pl.from_arrow(in_input_order.toArrow()).sort("u")
    moved = int((numbered["n"] != expected["n"]).sum())
    plan = spark.explained(optimized)
    # Spark's radix sort moved peers (the case is not the input's order), and the plan
    # follows it; a string's sort keeps the input's order, and no nulls are listed.
    assert (moved > 0) == radix, moved
    assert ("__keysplit_w_nulls" in plan) == (radix and shuffled), plan
    assert ("__keysplit_w_checked" in plan) == (radix and not shuffled), plan
    # One window operator over the chunks (its partition; the chunks' totals are ordered by it).
    windows = [
        line
        for line in plan.splitlines()
        if re.search(r"Window \[.*windowspecdefinition\(__keysplit_w_chunk#\d+, ", line)
    ]
    assert len(windows) == 1, plan


def test_a_nullable_order_column_with_no_null_needs_no_places_and_a_null_met_later_fails(spark, facts, monkeypatch):
    # The statistics count the order column's nulls over every row: a nullable column with
    # none (a rounded double, heavy ties) has its peers in the input's order, as Spark's
    # sorter leaves them, and no places are computed.
    w = Window.orderBy(F.round("v", 1))
    columns = {
        "n": F.row_number().over(w),
        "prev": F.lag("u", 1).over(w),
        "around": F.sum("u").over(w.rowsBetween(-2, 2)),
    }
    query = facts.withColumns(columns)
    optimized, report = _optimized(query)
    assert report.operators[0].rewritten, str(report)
    assert pl.from_arrow(optimized.toArrow()).sort("u").equals(pl.from_arrow(query.toArrow()).sort("u"))
    assert "__keysplit_w_nulls" not in spark.explained(optimized)
    # Statistics that counted no null over a column that has some (an input changed after
    # them): the query fails, rather than put a peer out of Spark's order.
    window_module = importlib.import_module("keysplit.spark.window")
    measured = window_module.SkewWindow.measured

    def counted_none(self, handle, sample):
        return measured(self, handle, dataclasses.replace(sample, counted=0))

    monkeypatch.setattr(window_module.SkewWindow, "measured", counted_none)
    query = facts.withColumns({"n": F.row_number().over(Window.orderBy("t"))})
    optimized, report = _optimized(query)
    with pytest.raises(Exception, match="has a null where optimize's statistics counted none"):
        optimized.collect()


def test_more_nulls_than_the_statistics_list_leave_the_places_to_the_plan(spark, facts, monkeypatch):
    # Past the nulls the statistics list (a literal table of as many longs goes with every
    # request carrying the plan), the statistics send none, and the plan computes the places.
    monkeypatch.setattr(importlib.import_module("keysplit.spark.statistics"), "LISTED_NULLS", 3)
    forget_statistics()
    query = facts.withColumns(
        {"n": F.row_number().over(Window.orderBy("t")), "prev": F.lag("u").over(Window.orderBy("t"))}
    )
    optimized, report = _optimized(query)
    assert report.operators[0].rewritten, str(report)
    plan = spark.explained(optimized)
    assert "__keysplit_w_nulls" in plan and "__keysplit_w_checked" not in plan, plan
    assert pl.from_arrow(optimized.toArrow()).sort("u").equals(pl.from_arrow(query.toArrow()).sort("u"))
    forget_statistics()


def test_the_statistics_list_no_more_positions_than_they_counted(facts):
    # The nulls' positions are listed after they were counted: past LISTED_NULLS no job
    # runs, and a list of another length than the count (the input changed between the
    # two reads) is dropped, so the plan computes the places.
    statistics = importlib.import_module("keysplit.spark.statistics")
    where = F.col("t").isNull()
    positioned = facts.withColumn("p", F.monotonically_increasing_id())
    expected = sorted(row.p for row in positioned.filter(where).select("p").collect())
    assert 0 < len(expected) < statistics.LISTED_NULLS
    listed = statistics._listed_positions(facts, where, len(expected))
    assert listed is not None and listed.tolist() == expected
    assert statistics._listed_positions(facts, where, len(expected) + 1) is None
    # Too many counted, or none: no job runs (a condition that fails every row it meets).
    failing = F.raise_error(F.lit("a row was read")).cast("boolean")
    with pytest.raises(Exception, match="a row was read"):
        statistics._listed_positions(facts, failing, 1)
    assert statistics._listed_positions(facts, failing, statistics.LISTED_NULLS + 1) is None
    assert statistics._listed_positions(facts, failing, 0).tolist() == []


def test_places_from_statistics_that_no_longer_hold_fail_the_query(spark, facts, monkeypatch):
    # Statistics that found the order column's nulls elsewhere than the plan meets them (an
    # input changed after them: one null less): the plan's recount differs, and the query
    # fails rather than put a peer out of Spark's order.
    window_module = importlib.import_module("keysplit.spark.window")
    measured = window_module.SkewWindow.measured

    def one_null_less(self, handle, sample):
        assert sample.placed is not None and len(sample.placed.positions) > 1
        placed = dataclasses.replace(sample.placed, positions=sample.placed.positions[1:])
        return measured(self, handle, dataclasses.replace(sample, placed=placed))

    monkeypatch.setattr(window_module.SkewWindow, "measured", one_null_less)
    query = facts.withColumns(
        {"n": F.row_number().over(Window.orderBy("t")), "prev": F.lag("u").over(Window.orderBy("t"))}
    )
    optimized, report = _optimized(query)
    assert report.operators[0].rewritten, str(report)
    assert "__keysplit_w_checked" in spark.explained(optimized)
    with pytest.raises(Exception, match="not where optimize's statistics found them"):
        optimized.collect()


def test_a_band_short_of_its_edge_fails_the_query_instead_of_a_wrong_value(facts, monkeypatch):
    # Every row of 40,000 is sampled: a band two sampled rows short of a lag of 3 holds one
    # row of the three its chunk's next reads, and the plan's check fails the query.
    monkeypatch.setattr(importlib.import_module("keysplit.spark.window"), "BAND_MARGIN", -2)
    query = facts.withColumn("prev", F.lag("u", 3).over(Window.orderBy("t", "u")))
    optimized, report = _optimized(query)
    assert report.operators[0].rewritten, str(report)
    with pytest.raises(Exception, match="edge band holds fewer rows than its edge reads"):
        optimized.collect()


@pytest.mark.parametrize(
    "order",
    [
        pytest.param(lambda: ["t"], id="ties and nulls"),
        pytest.param(lambda: [F.col("s").desc_nulls_last(), F.month("day")], id="string descending, a month"),
        pytest.param(
            lambda: [F.when(F.col("u") % 23 == 1, F.lit(float("nan"))).otherwise(F.round(F.col("v"), 1)).desc()],
            id="double with NaN and negative zero, descending",
        ),
    ],
)
def test_a_window_without_partition_by_of_peer_values_moves_no_row(facts, order):
    # Running aggregates over Spark's RANGE frame and the ranks are one value per group of
    # equal order values (peers): where the sample sees such groups large (t: 2,000 values
    # for 40,000 rows), each value is its group's, from the groups' totals in order, and no
    # row moves. Exact, integer and decimal sums, ties, nulls, NaN and -0.0 alike.
    w = Window.orderBy(*order())
    columns = {
        "run": F.sum("u").over(w),
        "count": F.count("t").over(w),
        "rows": F.count(F.lit(1)).over(w),
        "low": F.min("s").over(w),
        "high": F.max("price").over(w),
        "mean": F.avg("u").over(w),
        "price_mean": F.avg("price").over(w),
        "price_sum": F.sum("price").over(w),
        "rank": F.rank().over(w),
        "dense": F.dense_rank().over(w),
        "percent": F.percent_rank().over(w),
        "cume": F.cume_dist().over(w),
        "total": F.sum("u").over(Window.partitionBy()),
    }
    query = facts.withColumns(columns)
    optimized, report = _optimized(query)
    [decision] = report.operators
    assert decision.rewritten and "no row moved" in decision.why, str(report)
    ours = pl.from_arrow(optimized.toArrow()).sort("u")
    assert ours.equals(pl.from_arrow(query.toArrow()).sort("u"))
    split = decision.report.get
    assert split.by_peers and split.hot["rows"].to_list() == [ROWS], split
    # Its groups are the order's distinct values (each a dense rank).
    assert split.hot["chunks"][0] == ours["dense"].max(), split


def test_a_window_without_partition_by_of_peer_values_over_a_unique_order_is_cut_into_ranges(facts):
    # u is unique: each group of peers a row, a sample cannot see them large, and the rows are
    # cut into ranges as for any other column.
    w = Window.orderBy("u")
    query = facts.withColumns({"run": F.sum("u").over(w), "rank": F.rank().over(w)})
    optimized, report = _optimized(query)
    [decision] = report.operators
    assert decision.rewritten and "no row moved" not in decision.why, str(report)
    assert _rows(optimized) == _rows(query)
    split = decision.report.get
    assert not split.by_peers and split.hot["chunks"][0] > 1, split


def test_a_statistics_scan_of_many_splits_runs_in_few_tasks_and_samples_the_same_rows(spark):
    # A scan task has a fixed cost: the key of a small input split over many tasks is read in
    # one task per SCAN_TASK_BYTES of its estimate, at most one per worker, and never where
    # the plan shuffles (coalescing would narrow the stage computing it). The coalesced sample
    # has the rows each split's own seed picks, as the scan task by task.
    statistics = importlib.import_module("keysplit.spark.statistics")
    many = spark.spark.range(0, 300_000, 1, 24).select((F.col("id") % 1_000).alias("k"), "id")
    huge = spark.spark.range(0, 10**11, 1, 24).select((F.col("id") % 1_000).alias("k"), "id")
    shuffled = many.join(many.withColumnRenamed("id", "other").hint("merge"), "k")
    assert statistics._scan_tasks(spark.explained(many, "cost"), WORKERS) == 1
    # At least a task per core the executors have (local[2]: two), at most one per worker.
    assert spark.task_slots == 2
    assert statistics._scan_tasks(spark.explained(many, "cost"), WORKERS, spark.task_slots) == 2
    assert statistics._scan_tasks(spark.explained(many, "cost"), 1, spark.task_slots) == 1
    assert statistics._scan_tasks(spark.explained(huge, "cost"), WORKERS) == WORKERS
    assert statistics._scan_tasks(spark.explained(shuffled, "cost"), WORKERS) is None
    assert statistics._scan_tasks("no plan", WORKERS) is None

    # Keyed by id: a row's hash names it.
    key_hash = F.xxhash64(F.lit(0), F.col("id"))
    request = statistics.SampleRequest(many, key_hash, keys=("id",), fraction=0.05)
    forget_statistics()
    [sample], scans, _ = statistics.sample_inputs(spark, [request], 3, WORKERS, min_skew=MIN_SKEW, min_rows=1)
    by_task = many.select(key_hash.alias(statistics.KEY_HASH)).sample(fraction=0.05, seed=3).toArrow()
    picked = sample.table.column(statistics.KEY_HASH).to_pylist()
    assert scans == 1 and 0 < len(picked) < 300_000 // 10
    assert sorted(picked) == sorted(by_task.column(statistics.KEY_HASH).to_pylist())

    # A key that passes the cost guard (k = 0 in 40 % of the rows): the query is about to be
    # split at its full width, so the second scan (its ordering too) runs at the input's own
    # 24 splits, the first (the key alone) in a task per core. Under the guard's factor, or
    # its rows, the guard cannot split it: the key alone is scanned, its ordering never read.
    hot = many.withColumn("k", F.when(F.col("id") % 5 < 2, F.lit(0)).otherwise(F.col("k")))
    api = StatusApi(spark)
    scanned = {}
    for factor, least in ((MIN_SKEW, 1), (1_000.0, 1), (MIN_SKEW, 10**6)):
        request = statistics.SampleRequest(hot, F.xxhash64(F.lit(0), F.col("k")), (F.col("id"),), ("k",), fraction=0.05)
        forget_statistics()
        last = api.last_stage()
        [sample], _, _ = statistics.sample_inputs(spark, [request], 3, WORKERS, min_skew=factor, min_rows=least)
        scanned[factor, least] = sample.table
        tasks = sorted(s["numTasks"] for s in api.stages_after(last) if s["status"] == "COMPLETE")
        assert tasks == ([2, 24] if (factor, least) == (MIN_SKEW, 1) else [2]), (factor, least, tasks)
        assert sample.skew(WORKERS) is not None and sample.skew(WORKERS) > WORKERS / 3
    # The same rows each time (their key hashes), the ordering read only where split.
    whole = scanned[MIN_SKEW, 1]
    assert None not in whole.column("id").to_pylist() and whole.num_rows > 300_000 // 40
    for alone in (scanned[1_000.0, 1], scanned[MIN_SKEW, 10**6]):
        assert set(alone.column("id").to_pylist()) == {None}
        assert sorted(alone.column(statistics.KEY_HASH).to_pylist()) == sorted(
            whole.column(statistics.KEY_HASH).to_pylist()
        )
    forget_statistics()


def test_statistics_are_kept_for_the_same_plan_over_the_same_files(spark, tmp_path):
    # A recurring job: the same query, built anew over the same files, reuses the first call's
    # sample (no scan); a file added to its input, or forget_statistics(), makes it sample
    # again; an input that could change under the same plan is never kept.
    directory = tmp_path / "recurring"
    directory.mkdir()
    _facts(8_000, seed=1).write_parquet(directory / "a.parquet")

    def query():
        return spark.spark.read.parquet(str(directory)).groupBy("k").agg(F.median("v"))

    def reused(frame) -> int:
        report = _optimized(frame)[1]
        assert report.operators[0].rule == "skew", str(report)
        return report.reused_inputs

    assert reused(query()) == 0
    assert reused(query()) == 1
    _facts(8_000, seed=2).write_parquet(directory / "b.parquet")
    assert reused(query()) == 0
    assert reused(query()) == 1
    forget_statistics()
    assert reused(query()) == 0
    # A view's rows are read by name, and it lists no file: it is sampled every time.
    spark.spark.range(20_000).selectExpr("IF(id % 10 < 6, 7, id) AS k", "id AS v").createOrReplaceTempView("ranged")
    assert [reused(spark.spark.table("ranged").groupBy("k").agg(F.median("v"))) for _ in range(2)] == [0, 0]


def test_below_the_cost_guard_nothing_is_rewritten(facts, dims):
    # The hot key's 60 % is 9.6 mean tasks of 16: a guard of 12 keeps Spark's plan, and so
    # does the guard's size: its 24,000 rows are under the default million.
    query = facts.groupBy("k").agg(F.median("v"))
    optimized, report = _optimized(query, min_skew=12.0)
    [decision] = report.operators
    assert optimized is query
    assert decision.rule == "below threshold" and 8 < decision.predicted_skew < 12
    optimized, report = _optimized(query, min_rows=1_000_000)
    [decision] = report.operators
    assert optimized is query
    assert decision.rule == "small" and "rows, under the cost guard's 1,000,000" in decision.why
    # A window with no partitionBy whose rows move is split from five times the guard's size:
    # its 40,000 rows are under 5 x 10,000, not under 5 x 5,000. Ranks in the input's order
    # move no row: the guard's size alone.
    w = Window.orderBy("t", "u")
    whole = facts.withColumns({"n": F.row_number().over(w), "run": F.sum("v").over(w)})
    optimized, report = _optimized(whole, min_rows=10_000)
    [decision] = report.operators
    assert optimized is whole and decision.rule == "small" and "no partitionBy" in decision.why, str(report)
    assert _optimized(whole, min_rows=5_000)[1].operators[0].rewritten
    in_order = facts.withColumn("n", F.row_number().over(Window.orderBy(F.monotonically_increasing_id())))
    assert _optimized(in_order, min_rows=10_000)[1].operators[0].rewritten
    # A join whose hot key's work (L + R + L·R, about 46,000) passes a guard of 30,000 rows,
    # under a median whose hot key (about 23,000 output rows) does not: Spark runs the two in
    # one stage, so the join is left too (split alone, it would add an exchange under the
    # median and keep its straggler).
    chain = facts.join(dims, "k").groupBy("k").agg(F.median("v"))
    optimized, report = _optimized(chain, min_rows=30_000)
    join, median = report.operators
    assert optimized is chain, str(report)
    assert (join.rule, median.rule) == ("straggler above", "small") and not join.rewritten, str(report)
    assert "left to Spark (small)" in join.why and join.predicted_skew > 5
    assert [d.rule for d in _optimized(facts.join(dims, "k"), min_rows=30_000)[1].operators] == ["skew"]


def test_what_it_cannot_measure_or_split_is_left_to_spark_and_named(spark, facts, dims):
    def top(pdf):
        return pdf.head(1)

    queries = {
        # A full join's output rows come from either side: no side's sample is a sample of it.
        "not measured": facts.join(dims, "k", "full").groupBy("d").agg(F.median("v")),
        "needs merge": facts.groupBy("k").applyInPandas(top, facts.schema),
        "not read": spark.spark.sql("SELECT 1 AS k"),
    }
    for rule, query in queries.items():
        _, report = _optimized(query)
        assert rule in [d.rule for d in report.operators if not d.rewritten], str(report)
    # The join under the median on another key is still split.
    _, report = _optimized(queries["not measured"])
    assert [d.kind for d in report.rewritten] == ["join"]
    assert "split it by hand" in next(d.why for d in report.operators if d.rule == "not measured")


def test_an_analysis_error_after_optimize_still_names_its_column(facts):
    # optimize asks Spark whether a sample can be taken with the windows removed (a median of a
    # lag cannot), and keeps Spark's log of that answer quiet: PySpark's own logging of the
    # next analysis error must be intact.
    by_key = Window.partitionBy("k").orderBy("t", "u")
    query = facts.withColumn("before", F.lag("u").over(by_key)).groupBy("k").agg(F.median("before"))
    optimize(query, workers=WORKERS)
    with pytest.raises(AnalysisException, match="nope"):
        facts.select("nope").schema  # noqa: B018 - the schema call is the analysis


def test_bad_arguments_fail_before_any_job(spark, facts):
    with pytest.raises(ConfigTypeError, match="Spark DataFrame"):
        optimize(pl.DataFrame({"k": [1]}))  # type: ignore[arg-type]
    for wrong in (0, 0.5, True, "5"):
        with pytest.raises(ConfigError, match="min_skew"):
            optimize(facts, min_skew=wrong)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="workers"):
        optimize(facts, workers=0)
