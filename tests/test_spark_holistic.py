"""Holistic aggregates with a hot key's values split (``keysplit.spark.holistic_agg``),
against Spark's own ``groupBy().agg()`` on the real embedded server (the ``spark`` fixture).

Every result is compared with ``frame.groupBy(keys).agg(columns)`` on the same DataFrame:
the same rows (a multiset), the same column names, types and nullability; floating-point
results bit for bit. The table is a Parquet file the tests write: key 0 holds half the
rows and the null key a tenth (both hot at 8 workers); values have nulls, NaN, heavy ties
and many distinct values.
"""

from __future__ import annotations

import decimal
import math
import re

import numpy as np
import polars as pl
import pytest
from pyspark.sql import functions as F

from keysplit import ConfigError, ConfigTypeError, datasets
from keysplit.spark import HolisticReport, Report, holistic_agg, skewed

ROWS = 40_000
WORKERS = 8


def _table(rows: int = ROWS, seed: int = 5, hot: float = 0.5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    draw = rng.random(rows)
    keys = np.where(draw < hot, 0, rng.integers(1, 300, rows))
    x = rng.normal(0, 100, rows)
    x[rng.random(rows) < 0.01] = np.nan
    frame = pl.DataFrame(
        {
            "id": np.arange(rows, dtype=np.int64),
            "k": keys.astype(np.int64),
            "g": rng.integers(0, 2, rows).astype(np.int32),
            # Many distinct values, some NaN.
            "x": x,
            # Heavy ties.
            "t": rng.integers(0, 50, rows).astype(np.int32),
            # One clear mode per hot key (1), ties likely among the small keys.
            "m": rng.geometric(0.3, rows).astype(np.int64),
            "s": [f"s{v:02d}" for v in rng.integers(0, 40, rows)],
            "price": [decimal.Decimal(int(v)) / 100 for v in rng.integers(0, 100_000, rows)],
            "f": rng.integers(-500, 500, rows).astype(np.float32) / 4,
        }
    )
    return frame.with_columns(
        pl.when(pl.col("id") % 10 == 3).then(None).otherwise(pl.col("k")).alias("k"),
        pl.when(pl.col("id") % 13 == 2).then(None).otherwise(pl.col("x")).alias("x"),
        pl.when(pl.col("id") % 7 == 1).then(None).otherwise(pl.col("t")).alias("t"),
        pl.when(pl.col("id") % 11 == 4).then(None).otherwise(pl.col("s")).alias("s"),
        pl.col("price").cast(pl.Decimal(10, 2)),
    )


@pytest.fixture(scope="module")
def frame(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("holistic") / "rows.parquet"
    _table().write_parquet(path)
    return spark.spark.read.parquet(str(path))


def _value(value, unordered: bool):
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, list):
        values = [_value(v, False) for v in value]
        return tuple(sorted(values, key=repr)) if unordered else tuple(values)
    return value


def _rows(frame, unordered: frozenset[int] = frozenset()) -> list[tuple]:
    rows = [tuple(_value(v, i in unordered) for i, v in enumerate(row)) for row in frame.collect()]
    return sorted(rows, key=repr)


def _assert_equal(ours, theirs, unordered: frozenset[int] = frozenset()) -> None:
    assert ours.schema == theirs.schema
    expected = _rows(theirs, unordered)
    got = _rows(ours, unordered)
    assert len(got) == len(expected)
    for mine, spark in zip(got, expected, strict=True):
        assert mine == spark


@pytest.mark.parametrize(
    "columns",
    [
        pytest.param(lambda: [F.median("x")], id="median-double"),
        pytest.param(lambda: [F.percentile("x", [0.0, 0.1, 0.5, 0.99, 1.0])], id="percentiles-double"),
        # (With x, whose many values make key 0 split: t's ties are split with it.)
        pytest.param(lambda: [F.percentile("t", 0.3), F.median("t"), F.median("x")], id="percentile-ties"),
        pytest.param(lambda: [F.median("price"), F.percentile("price", [0.25, 0.75])], id="decimal"),
        pytest.param(lambda: [F.median("f"), F.percentile("f", [0.9])], id="float"),
        pytest.param(lambda: [F.percentile(F.col("t") * 3 + 1, [0.5, 0.95]).alias("p")], id="expression"),
        pytest.param(lambda: [F.mode("t", True), F.mode("s", True), F.mode("x", True)], id="mode-deterministic"),
        pytest.param(lambda: [F.count_distinct("t", "s"), F.count_distinct("x"), F.countDistinct("g")], id="distinct"),
        # (Integer sums: a float sum differs between Spark's own plans in the last bits.)
        pytest.param(lambda: [F.median("x"), F.sum("t"), F.avg("t"), F.count("*"), F.max("s")], id="with-combinable"),
    ],
)
def test_equals_spark(frame, columns):
    columns = columns()
    ours = holistic_agg(frame, "k", *columns, workers=WORKERS)
    _assert_equal(ours, frame.groupBy("k").agg(*columns))


def test_collect_set_equals_spark_as_sets(frame):
    columns = [F.collect_set("s"), F.collect_set("t"), F.median("t"), F.median("x")]
    ours = holistic_agg(frame, "k", *columns, workers=WORKERS)
    _assert_equal(ours, frame.groupBy("k").agg(*columns), unordered=frozenset({1, 2}))


def test_a_distinct_count_beside_a_mode_and_a_set_counts_every_key(spark, frame):
    # Spark's own plan computes the mode and the set per (key, value) group of its distinct
    # aggregate; keysplit counts every key's values instead, and needs no hot key.
    columns = [F.mode("t", True), F.count_distinct("t"), F.collect_set("t")]
    report: Report[HolisticReport] = Report()
    ours = holistic_agg(frame, "k", *columns, workers=WORKERS, report=report)
    _assert_equal(ours, frame.groupBy("k").agg(*columns), unordered=frozenset({3}))
    figures = report.get
    assert figures.rows == ROWS and figures.hot.height == 0 and figures.sample_fraction == 0
    assert sorted(figures.split.values()) == [
        f"{function} of every key's value counts" for function in ("collect_set", "count_distinct", "mode")
    ]
    plan = spark.explained(ours)
    assert "mode(" not in plan and "sample" not in plan.lower(), plan


def test_mode_is_a_most_frequent_value_and_spark_s_where_there_is_no_tie(frame):
    """Without ``deterministic`` Spark returns any of the tied values; keysplit's is one of
    them, and Spark's wherever one value is ahead."""
    ours = {row[0]: row[1] for row in holistic_agg(frame, "k", F.mode("m"), workers=WORKERS).collect()}
    theirs = {row[0]: row[1] for row in frame.groupBy("k").agg(F.mode("m")).collect()}
    counts = frame.groupBy("k", "m").count().collect()
    by_key: dict = {}
    for key, value, count in counts:
        by_key.setdefault(key, {})[value] = count
    assert set(ours) == set(theirs)
    for key, tally in by_key.items():
        top = max(tally.values())
        modes = {value for value, count in tally.items() if count == top}
        assert ours[key] in modes
        if len(modes) == 1:
            assert ours[key] == theirs[key]
    # The hot keys have one clear mode.
    assert ours[0] == theirs[0] == 1
    assert ours[None] == theirs[None] == 1


def test_several_keys_and_the_front(frame):
    columns = [F.median("x"), F.percentile("t", [0.2, 0.8]), F.mode("t", True), F.count_distinct("s", "t")]
    _assert_equal(holistic_agg(frame, ["k", "g"], *columns, workers=WORKERS), frame.groupBy("k", "g").agg(*columns))
    # The front, from statistics gathered when called: key 0's half of the rows is 4 mean tasks'
    # of 8, over a guard of 2 (and no size). Its report names the key it split. Specs and PySpark's dict form
    # go with Columns, named as Spark names them, and with several keys.
    report: Report[HolisticReport] = Report()
    ours = skewed(frame, workers=WORKERS, min_skew=2, min_rows=0).groupBy("k").agg(*columns, "sum(t)", report=report)
    _assert_equal(ours, frame.groupBy("k").agg(*columns, F.sum("t")))
    assert 0 in report.get.hot["k"].to_list() and report.get.left_to_spark is None
    several = skewed(frame, workers=WORKERS, min_skew=2, min_rows=0).groupBy("k", "g").agg(*columns, {"t": "sum"})
    _assert_equal(several, frame.groupBy("k", "g").agg(*columns, F.sum("t")))
    # Under the default guard (5 mean tasks) Spark's own aggregate runs, and the report says why.
    kept: Report[HolisticReport] = Report()
    spark_own = skewed(frame, workers=WORKERS).groupBy("k").agg(F.median("x"), {"t": "max"}, report=kept)
    _assert_equal(spark_own, frame.groupBy("k").agg(F.median("x"), F.max("t")))
    assert kept.get.hot.height == 0 and kept.get.left_to_spark.startswith("below threshold")


@pytest.fixture(scope="module")
def flights(spark, tmp_path_factory):
    """NYC's 336,776 flights of 2013 by carrier (UA, B6 and EV hold 16-17 % each), with ``t``
    the scheduled departure in minutes (many distinct values a carrier) and ``value`` the
    distance in miles (a few hundred)."""
    rows = pl.concat(datasets.nycflights(key="carrier")).rename({"key": "carrier"})
    path = tmp_path_factory.mktemp("flights") / "flights.parquet"
    rows.write_parquet(path)
    return spark.spark.read.parquet(str(path)).withColumn("t", (F.unix_timestamp("timestamp") / 60).cast("long"))


def test_a_real_stream_per_key_equals_spark(flights):
    columns = [
        F.median("t"),
        F.percentile("t", [0.25, 0.9]),
        F.mode("t", True),
        F.median("value"),
        F.count_distinct("value"),
    ]
    report: Report[HolisticReport] = Report()
    ours = holistic_agg(flights, "carrier", *columns, workers=16, report=report)
    _assert_equal(ours, flights.groupBy("carrier").agg(*columns))
    figures = report.get
    assert {"UA", "B6", "EV"} <= set(figures.hot["carrier"].to_list())
    # Every column split (none left to Spark's own aggregate over the hot keys' rows).
    assert figures.split["median(t)"] == "percentile"
    assert sorted(figures.split.values()) == ["count_distinct", "mode", "percentile", "percentile", "percentile"]


def test_report_names_the_hot_keys_with_their_rows(frame):
    report: Report[HolisticReport] = Report()
    ours = holistic_agg(frame, "k", F.median("x"), F.sum("t"), workers=WORKERS, report=report)
    ours.collect()
    figures = report.get
    assert figures.rows == ROWS
    exact = {row[0]: row[1] for row in frame.groupBy("k").count().collect()}
    hot = dict(zip(figures.hot["k"].to_list(), figures.hot["rows"].to_list(), strict=True))
    # Key 0 holds half the rows; the null key's tenth is about a mean task's (hot or not).
    assert 0 in hot
    assert set(hot) <= {0, None}
    assert hot == {key: exact[key] for key in hot}
    assert figures.split["median(x)"] == "percentile"
    assert figures.split["sum(t)"].startswith("Spark's own aggregate")


def test_no_hot_key_is_spark_s_plan(spark, tmp_path):
    path = tmp_path / "even.parquet"
    _table(hot=0.0).with_columns(pl.col("k").fill_null(pl.col("id") % 300)).write_parquet(path)
    even = spark.spark.read.parquet(str(path))
    report: Report[HolisticReport] = Report()
    columns = [F.median("x"), F.mode("t", True)]
    ours = holistic_agg(even, "k", *columns, workers=WORKERS, report=report)
    _assert_equal(ours, even.groupBy("k").agg(*columns))
    assert report.get.hot.height == 0
    assert report.get.rows == ROWS


def test_a_hot_key_without_values_and_one_with_a_single_value(spark, tmp_path):
    rows = 20_000
    k = np.where(np.arange(rows) % 2 == 0, 1, np.where(np.arange(rows) % 4 == 1, 2, np.arange(rows) % 97 + 3))
    v = np.where(k == 2, 5.0, np.arange(rows, dtype=float))
    # u (unique) makes both keys split: v's single value and its nulls are split with it.
    table = pl.DataFrame({"k": k, "v": v, "u": np.arange(rows)}).with_columns(
        pl.when(pl.col("k") == 1).then(None).otherwise(pl.col("v")).alias("v")
    )
    path = tmp_path / "edge.parquet"
    table.write_parquet(path)
    edge = spark.spark.read.parquet(str(path))
    columns = [
        F.median("v"),
        F.percentile("v", [0.1, 0.9]),
        F.mode("v"),
        F.count_distinct("v"),
        F.collect_set("v"),
        F.median("u"),
    ]
    report: Report[HolisticReport] = Report()
    ours = holistic_agg(edge, "k", *columns, workers=WORKERS, report=report)
    _assert_equal(ours, edge.groupBy("k").agg(*columns), unordered=frozenset({5}))
    assert set(report.get.hot["k"].to_list()) == {1, 2}
    by_key = {row[0]: row for row in ours.collect()}
    assert by_key[1][1:6] == (None, None, None, 0, [])
    assert by_key[2][1:4] == (5.0, [5.0, 5.0], 5.0)


def test_a_hot_key_of_few_values_stays_in_spark_s_aggregate(frame):
    """Key 0's t has 50 values: each map task holds at most 50 entries of it, and Spark's
    own partial aggregation leaves its final task little to merge. keysplit steps aside."""
    report: Report[HolisticReport] = Report()
    columns = [F.median("t"), F.mode("t", True)]
    ours = holistic_agg(frame, "k", *columns, workers=WORKERS, report=report)
    _assert_equal(ours, frame.groupBy("k").agg(*columns))
    assert report.get.hot.height == 0
    assert report.get.rows == ROWS


def test_empty_input(frame):
    empty = frame.limit(0)
    ours = holistic_agg(empty, "k", F.median("x"), workers=WORKERS)
    assert ours.schema == empty.groupBy("k").agg(F.median("x")).schema
    assert ours.collect() == []


def test_bad_input_is_refused_before_any_job(frame):
    with pytest.raises(ConfigTypeError, match="Spark DataFrame"):
        holistic_agg(_table(100), "k", F.median("x"))
    with pytest.raises(ConfigError, match="not .*among"):
        holistic_agg(frame, "nope", F.median("x"))
    with pytest.raises(ConfigTypeError, match="column names"):
        holistic_agg(frame, [F.col("k")], F.median("x"))
    with pytest.raises(ConfigError, match="at least one"):
        holistic_agg(frame, "k")
    with pytest.raises(ConfigTypeError, match="aggregate columns"):
        holistic_agg(frame, "k", "median(x)")
    with pytest.raises(ConfigError, match="workers"):
        holistic_agg(frame, "k", F.median("x"), workers=0)
    with pytest.raises(ConfigError, match="agg does not read grouper='pkg'"):
        skewed(frame, grouper="pkg").groupBy("k").agg(F.median("x"))
    with pytest.raises(ConfigError, match="min_skew"):
        skewed(frame, min_skew=0.5)
    clash = frame.withColumnRenamed("g", "__keysplit_h_g")
    with pytest.raises(ConfigError, match="keysplit's own"):
        holistic_agg(clash, "k", F.median("x"))
    with pytest.raises(ConfigError, match="at least one aggregate"):
        skewed(frame).groupBy("k").agg()


def test_a_median_that_runs_spark_s_executors_out_of_memory_completes_split():
    """Spark's median keeps a hot key's every distinct value in one task's hash map (not
    memory-managed): with 512 MB executors a key of 7.2·10^6 distinct values fails the
    job. keysplit's plan counts and sorts in Spark's managed operators, a 128th of the
    key's values per sort, and completes, equal to the exact medians computed here (the
    values are integers, so the halves Spark interpolates are exact). Each task runs once:
    Spark's retries (4 task attempts, 4 stage attempts by default) fail out of memory as the
    first attempt does and cost over a minute, and keysplit's plan must not need one."""
    from pyspark.errors import PySparkException

    from keysplit.spark import session

    rows = 8_000_000
    # v is a permutation of 0..rows-1 (7,919 is prime to 8·10^6): every value distinct.
    ids = np.arange(rows, dtype=np.int64)
    expected = (
        pl.DataFrame({"k": np.where(ids % 10 == 0, ids % 1000 + 1, 0), "v": ((ids * 7919) % rows).astype(float)})
        .group_by("k")
        .agg(pl.col("v").median())
    )
    once = {"spark.task.maxFailures": "1", "spark.stage.maxConsecutiveAttempts": "1"}
    with session(master="cluster:2", query_timeout=600.0, **{"spark.executor.memory": "512m", **once}) as handle:
        frame = handle.spark.range(0, rows, numPartitions=8).selectExpr(
            "IF(id % 10 = 0, id % 1000 + 1, 0) AS k", f"CAST((id * 7919) % {rows} AS DOUBLE) AS v"
        )
        with pytest.raises(PySparkException) as failed:
            handle.call("Spark's own median", lambda: frame.groupBy("k").agg(F.median("v")).collect(), timeout=300.0)
        # Spark aborted the stage: its task ran out of memory (the executors' logs), not
        # out of time or of another error.
        assert re.search(r"maximum allowable number of times|OutOfMemory", str(failed.value)), str(failed.value)
        assert handle.cluster is not None
        logs = [
            path.read_text(errors="replace") for path in handle.cluster.directory.glob("worker-*/work/app-*/*/stderr")
        ]
        assert any("java.lang.OutOfMemoryError" in log for log in logs)
        got = dict(holistic_agg(frame, "k", F.median("v"), workers=16).collect())
    assert got == dict(expected.iter_rows())
