"""keysplit.spark.asof_join against pandas' merge_asof, per series, on a real embedded
Spark Connect server: every direction, a tolerance, exact matches allowed or not, a hot
series cut over the tasks; times as numbers, dates and timestamps; the choices where pandas
has no answer for Spark (null times, tied right rows); bad input before any job."""

from __future__ import annotations

import datetime
import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest
from pyspark.sql import functions as F

from keysplit import ConfigError, ConfigTypeError, KeyInputError, KeyTypeError
from keysplit.spark import AsofReport, Report, asof_join, skewed

SERIES = 30
HOT = 0  # the series of 40 % of the trades and the quotes
WORKERS = 8


def _sides(rows: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Trades (left) and quotes (right): times as integers with ties within and across the
    sides, ``SERIES`` tickers of which ``HOT`` holds 40 %, a few null tickers; the quotes'
    (ticker, time) pairs unique, so that pandas' answer does not hang on the right frame's
    order (see test_tied_right_rows_follow_the_hash_rule)."""
    rng = np.random.default_rng(seed)

    def tickers(n: int) -> np.ndarray:
        return np.where(rng.random(n) < 0.4, HOT, rng.integers(1, SERIES, n)).astype(np.int64)

    trades = pd.DataFrame(
        {
            "trade": np.arange(rows),
            "ticker": tickers(rows),
            "ts": rng.integers(0, rows * 2, rows),
            "qty": rng.integers(1, 100, rows),
        }
    )
    quotes = pd.DataFrame({"ticker": tickers(rows // 2), "ts": rng.integers(0, rows * 2, rows // 2)})
    quotes = quotes.drop_duplicates(["ticker", "ts"]).reset_index(drop=True)
    quotes["bid"] = rng.normal(100, 5, len(quotes)).round(3)
    quotes["qty"] = rng.integers(1, 1_000, len(quotes))  # a name on both sides
    for frame in (trades, quotes):
        frame["ticker"] = frame["ticker"].astype("Int64")
        frame.loc[frame.index % 101 == 7, "ticker"] = pd.NA
    return trades, quotes


def _pandas(trades: pd.DataFrame, quotes: pd.DataFrame, **kwargs) -> pl.DataFrame:
    merged = pd.merge_asof(
        trades.sort_values("ts", kind="stable"), quotes.sort_values("ts", kind="stable"), on="ts", by="ticker", **kwargs
    )
    return pl.from_pandas(merged).sort("trade")


def _ours(frame) -> pl.DataFrame:
    table = pl.from_arrow(frame.toArrow())
    assert isinstance(table, pl.DataFrame)
    return table.sort("trade")


def _same(ours: pl.DataFrame, theirs: pl.DataFrame) -> None:
    assert ours.columns == theirs.columns
    assert ours.height == theirs.height
    assert ours.equals(theirs.cast(ours.schema)), (ours, theirs)


@pytest.fixture(scope="module")
def sides(spark):
    trades, quotes = _sides(6_000, seed=3)
    return trades, quotes, spark.spark.createDataFrame(trades), spark.spark.createDataFrame(quotes)


@pytest.mark.parametrize("direction", ["backward", "forward", "nearest"])
@pytest.mark.parametrize(("tolerance", "exact"), [(None, True), (10, False)])
def test_every_direction_and_tolerance_equals_pandas_per_series(sides, direction, tolerance, exact):
    trades, quotes, left, right = sides
    report: Report[AsofReport] = Report()
    got = asof_join(
        left,
        right,
        on="ts",
        by="ticker",
        direction=direction,
        tolerance=tolerance,
        allow_exact_matches=exact,
        workers=WORKERS,
        report=report,
    )
    _same(_ours(got), _pandas(trades, quotes, direction=direction, tolerance=tolerance, allow_exact_matches=exact))
    # The hot series was cut into ranges of its time, in every pass.
    passes = report.get.passes
    assert len(passes) == (2 if direction == "nearest" else 1)
    for window in passes:
        assert window.hot.height >= 1 and window.hot["chunks"].max() > 1, window.hot


def test_inner_keeps_the_matched_rows_and_the_front_splits_behind_the_cost_guard(sides):
    trades, quotes, left, right = sides
    expected = _pandas(trades, quotes, tolerance=5).drop_nulls("bid")
    _same(_ours(asof_join(left, right, on="ts", by="ticker", tolerance=5, how="inner")), expected)
    # Through skewed(): the union sampled now, the hot series cut where the guard finds its
    # window straggling (here 40 % of 8 tasks is 3.2 mean tasks' work: the guard set to 2x and
    # no size), nearest's two windows from one scan.
    for direction in ("backward", "nearest"):
        report: Report[AsofReport] = Report()
        joined = skewed(left, workers=WORKERS, min_skew=2, min_rows=0).asof_join(
            right, on="ts", by="ticker", direction=direction, tolerance=5, how="inner", report=report
        )
        _same(_ours(joined), _pandas(trades, quotes, direction=direction, tolerance=5).drop_nulls("bid"))
        passes = report.get.passes
        assert len(passes) == (2 if direction == "nearest" else 1), report.get
        for window in passes:
            assert window.hot.height >= 1 and window.hot["chunks"].max() > 1, window.hot
    # Under the guard's million rows: Spark's own window over the union, no pass split.
    report = Report()
    joined = skewed(left, workers=WORKERS).asof_join(
        right, on="ts", by="ticker", tolerance=5, how="inner", report=report
    )
    _same(_ours(joined), expected)
    assert report.get.passes == []


def test_timestamps_dates_and_no_series(spark):
    trades, quotes = _sides(2_000, seed=4)
    start = datetime.datetime(2026, 3, 29)  # a daylight-saving change in Europe, none in UTC
    for frame in (trades, quotes):
        frame["at"] = pd.to_datetime(start) + pd.to_timedelta(frame["ts"] * 997, unit="s")
        frame["day"] = (pd.to_datetime(start) + pd.to_timedelta(frame["ts"] // 40, unit="D")).dt.date
    # Unique times with no series: pandas' answer is then one.
    quotes = quotes.drop_duplicates("ts").reset_index(drop=True)
    left = spark.spark.createDataFrame(trades.drop(columns=["ticker"]))
    right = spark.spark.createDataFrame(quotes.drop(columns=["ticker", "ts", "day"]))
    tolerance = datetime.timedelta(hours=3)
    for direction in ("backward", "nearest"):
        with warnings.catch_warnings():
            # No series: the window verb cuts the one series, and PySpark's warning that a
            # window with no partitionBy moves every row to one task is not sent (an error here).
            warnings.filterwarnings("error", message=".*No Partition Defined")
            got = _ours(asof_join(left, right, on="at", direction=direction, tolerance=tolerance, workers=WORKERS))
        theirs = pd.merge_asof(
            trades.drop(columns=["ticker"]).sort_values("at", kind="stable"),
            quotes.drop(columns=["ticker", "ts", "day"]).sort_values("at", kind="stable"),
            on="at",
            direction=direction,
            tolerance=pd.Timedelta(tolerance),
        )
        expected = pl.from_pandas(theirs).sort("trade")
        assert got.drop("at").equals(expected.drop("at").cast(got.drop("at").schema)), direction
        assert (got["at"].dt.replace_time_zone(None) == expected["at"]).all()
    # Dates, a tolerance of two days, by series.
    left = spark.spark.createDataFrame(trades.drop(columns=["ts", "at"]))
    by_day = quotes.drop(columns=["ts", "at"]).drop_duplicates(["ticker", "day"]).reset_index(drop=True)
    right = spark.spark.createDataFrame(by_day)
    got = _ours(
        asof_join(left, right, on="day", by="ticker", direction="forward", tolerance=datetime.timedelta(days=2))
    )
    theirs = pd.merge_asof(
        trades.drop(columns=["ts", "at"])
        .assign(day=lambda f: pd.to_datetime(f["day"]))
        .sort_values("day", kind="stable"),
        by_day.assign(day=lambda f: pd.to_datetime(f["day"])).sort_values("day", kind="stable"),
        on="day",
        by="ticker",
        direction="forward",
        tolerance=pd.Timedelta(days=2),
    )
    expected = pl.from_pandas(theirs).sort("trade").with_columns(pl.col("day").dt.date())
    _same(got, expected)


def test_null_times_and_tied_right_rows_follow_the_documented_choices(spark):
    left = spark.spark.createDataFrame(
        [(1, "a", 10), (2, "a", None), (3, "a", 20), (4, None, 20)], "trade long, k string, ts long"
    )
    right = spark.spark.createDataFrame(
        [("a", 10, 1.0), ("a", 10, 2.0), ("a", 10, 3.0), ("a", None, 9.0), (None, 15, 5.0), ("a", 30, 7.0)],
        "k string, ts long, bid double",
    )
    backward = {r["trade"]: r["bid"] for r in asof_join(left, right, on="ts", by="k").collect()}
    forward = {r["trade"]: r["bid"] for r in asof_join(left, right, on="ts", by="k", direction="forward").collect()}
    # A null time matches nothing; a right row with a null time is never matched; a null
    # series is one of its own.
    assert backward[2] is None and forward[2] is None and 9.0 not in backward.values()
    assert backward[4] == 5.0 and forward[4] is None
    # Of the three quotes at 10, backward takes the last in the order of their hashes and
    # forward the first: two different rows, the same on every run.
    assert {backward[1], backward[3], forward[1]} <= {1.0, 2.0, 3.0} and backward[1] == backward[3]
    assert backward[1] != forward[1] and forward[3] == 7.0
    again = {r["trade"]: r["bid"] for r in asof_join(left, right, on="ts", by="k").collect()}
    assert again == backward
    # Without exact matches, the quotes at 10 are not trade 1's.
    assert asof_join(left, right, on="ts", by="k", allow_exact_matches=False).where("trade = 1").first()["bid"] is None


def test_suffixes_and_columns(spark):
    left = spark.spark.createDataFrame([(1, 5, "x")], "k long, ts long, v string")
    right = spark.spark.createDataFrame([(1, 4, "y", 2.0)], "k long, ts long, v string, w double")
    assert asof_join(left, right, on="ts", by="k").columns == ["k", "ts", "v_x", "v_y", "w"]
    named = asof_join(left, right, on="ts", by="k", suffixes=("_trade", "_quote")).collect()
    assert named[0].asDict() == {"k": 1, "ts": 5, "v_trade": "x", "v_quote": "y", "w": 2.0}
    # An integer time on one side and a long on the other are compared as longs.
    narrow = right.withColumn("ts", F.col("ts").cast("int"))
    assert asof_join(left, narrow, on="ts", by="k").first()["w"] == 2.0


def test_bad_input_is_refused_before_any_job(spark):
    left = spark.spark.createDataFrame([(1, 5, "x")], "k long, ts long, v string")
    right = spark.spark.createDataFrame([(1, 4, 2.0)], "k long, ts long, w double")
    with pytest.raises(ConfigTypeError, match="Spark DataFrame"):
        asof_join(left.toPandas(), right, on="ts")
    with pytest.raises(KeyInputError, match=r"\['when'\] is not a column of the left side"):
        asof_join(left, right, on="when")
    with pytest.raises(ConfigError, match="direction must be one of backward, forward, nearest"):
        asof_join(left, right, on="ts", direction="closest")
    with pytest.raises(ConfigError, match="how must be one of left, inner"):
        asof_join(left, right, on="ts", how="outer")
    with pytest.raises(ConfigTypeError, match="tolerance of a numeric on is a number"):
        asof_join(left, right, on="ts", tolerance=datetime.timedelta(seconds=1))
    with pytest.raises(ConfigError, match="tolerance must be 0 or more"):
        asof_join(left, right, on="ts", tolerance=-1)
    with pytest.raises(KeyTypeError, match="it must be a number, a date or a timestamp"):
        asof_join(left, left, on="v", by="k")
    stamped = right.withColumn("ts", F.timestamp_seconds("ts"))
    with pytest.raises(KeyTypeError, match="cast one side"):
        asof_join(left, stamped, on="ts")
    with pytest.raises(ConfigError, match="suffixes must be two different strings"):
        asof_join(left, right, on="ts", suffixes=("_a", "_a"))
    with pytest.raises(ConfigError, match="workers"):
        asof_join(left, right, on="ts", workers=0)


def test_millions_of_rows_with_a_hot_series_equal_polars(spark, tmp_path):
    """2·10^6 trades and 5·10^5 quotes over 1,000 series, one of 40 % of both: backward within
    a tolerance, equal to Polars' join_asof row for row, the hot series cut into chunks."""
    rng = np.random.default_rng(11)

    def side(rows: int) -> pl.DataFrame:
        series = np.where(rng.random(rows) < 0.4, 0, rng.integers(1, 1_000, rows))
        return pl.DataFrame({"series": series, "ts": rng.integers(0, 10**9, rows)})

    trades = side(2_000_000).with_row_index("trade").with_columns(pl.col("trade").cast(pl.Int64))
    quotes = side(500_000).unique(["series", "ts"]).with_columns(price=pl.col("ts") % 9973)
    trades.write_parquet(tmp_path / "trades.parquet")
    quotes.write_parquet(tmp_path / "quotes.parquet")
    left = spark.spark.read.parquet(str(tmp_path / "trades.parquet"))
    right = spark.spark.read.parquet(str(tmp_path / "quotes.parquet"))
    report: Report[AsofReport] = Report()
    got = _ours(asof_join(left, right, on="ts", by="series", tolerance=20_000, workers=16, report=report))
    expected = trades.sort("ts").join_asof(quotes.sort("ts"), on="ts", by="series", tolerance=20_000).sort("trade")
    assert got.equals(expected.select(got.columns))
    hot = report.get.backward.hot if report.get.backward is not None else None
    # One hot series, 0 (its key the first column), of 40 % of the 2.5·10^6 rows, cut.
    assert hot is not None and hot.height == 1 and hot.row(0)[0] == 0, hot
    assert hot["rows"].item() > 900_000 and hot["chunks"].item() > 1, hot
