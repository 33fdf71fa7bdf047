"""Grouped maps with the hot keys split (``apply_grouped``) and the heavy hitters of a
DataFrame (``hot_keys``), against the real embedded server (the ``spark`` fixture).

Results are compared with Spark's own ``groupBy(key).applyInPandas`` and with Polars on the
same rows; the DataFrames are read from Parquet files the tests write, one input partition
per file.
"""

from __future__ import annotations

import datetime
import sys
import time

import numpy as np
import pandas as pd
import polars as pl
import pytest
from pyspark import cloudpickle

from keysplit import ConfigError, KeyInputError
from keysplit.metrics import replication_bound_of_counts
from keysplit.spark import GroupedReport, Report, ReportPendingError, apply_grouped, hot_keys, skewed
from keysplit.spark.hot_keys import placement
from spark_status import StatusApi

# The executors cannot import this test module: its functions travel by value, as a
# notebook's would.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

FILES = 4
TOP3 = "key long, rank int, value long, n long"


def top3(pdf: pd.DataFrame) -> pd.DataFrame:
    """The three largest values of a key, and how many rows the call held."""
    best = pdf.nlargest(3, "value")
    return pd.DataFrame({"key": best["key"], "rank": range(1, len(best) + 1), "value": best["value"], "n": len(pdf)})


def top3_merge(pdf: pd.DataFrame) -> pd.DataFrame:
    """The three largest of the partial top-3s; ``n`` keeps the largest call."""
    best = pdf.nlargest(3, "value")
    return pd.DataFrame(
        {
            "key": best["key"],
            "rank": range(1, len(best) + 1),
            "value": best["value"],
            "n": pdf["n"].max(),
        }
    )


def _skewed(rows: int, *, z: float, keys: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    drawn = np.clip(rng.zipf(z, rows), 1, keys)
    permuted = rng.permutation(keys + 1)[drawn].astype(np.int64)
    # Distinct values, so that each key's top 3 is one answer whatever the order.
    return pl.DataFrame({"key": permuted, "value": rng.permutation(rows).astype(np.int64) * 3 + 1})


def _write(directory, data: pl.DataFrame, files: int = FILES):
    directory.mkdir(parents=True, exist_ok=True)
    for index, part in enumerate(data.iter_slices(-(-data.height // files))):
        part.write_parquet(directory / f"part-{index}.parquet")
    return directory


def _expected_top3(data: pl.DataFrame) -> pl.DataFrame:
    return (
        data.sort("value", descending=True)
        .group_by("key", maintain_order=True)
        .head(3)
        .with_columns(rank=pl.int_range(1, pl.len() + 1).over("key").cast(pl.Int32))
        .select("key", "rank", "value")
        .sort("key", "rank")
    )


def _collect(frame) -> pl.DataFrame:
    result = pl.from_arrow(frame.toArrow())
    assert isinstance(result, pl.DataFrame)
    return result


def _with_report(frame, **arguments) -> tuple[pl.DataFrame, GroupedReport]:
    """apply_grouped's result, collected, and the report that collecting it filled."""
    report: Report[GroupedReport] = Report()
    result = _collect(apply_grouped(frame, report=report, **arguments))
    return result, report.get


@pytest.fixture(scope="module")
def zipf_data() -> pl.DataFrame:
    return _skewed(240_000, z=2.0, keys=5_000, seed=3)


@pytest.fixture(scope="module")
def zipf_frame(spark, tmp_path_factory, zipf_data):
    directory = _write(tmp_path_factory.mktemp("grouped") / "zipf", zipf_data)
    return spark.spark.read.parquet(str(directory))


@pytest.fixture(scope="module")
def two_pass(spark, zipf_frame) -> tuple[pl.DataFrame, GroupedReport]:
    return _with_report(zipf_frame, key="key", function=top3, merge=top3_merge, schema=TOP3, workers=32, session=spark)


@pytest.fixture(scope="module")
def native_top3(zipf_frame) -> pl.DataFrame:
    """Spark's own applyInPandas of top3 over the Zipf frame, computed once for the tests below."""
    return _collect(zipf_frame.groupBy("key").applyInPandas(top3, TOP3))


def test_two_pass_equals_apply_in_pandas_and_polars(spark, zipf_data, two_pass, native_top3):
    result, report = two_pass
    assert result.select("key", "rank", "value").sort("key", "rank").equals(_expected_top3(zipf_data))
    assert result.drop("n").sort("key", "rank").equals(native_top3.drop("n").sort("key", "rank"))
    hottest = int(zipf_data["key"].value_counts()["count"].max())
    assert native_top3["n"].max() == hottest
    # The largest call, as the function itself reported it, is the report's.
    assert result["n"].max() == report.largest_call
    assert report.largest_call * 10 <= hottest


def test_two_pass_splits_only_the_keys_that_need_it(zipf_data, two_pass):
    _, report = two_pass
    counts = zipf_data["key"].value_counts()
    need = counts.with_columns(
        workers=(pl.col("count") * report.workers / zipf_data.height - 1e-9).ceil().cast(pl.Int64).clip(lower_bound=1)
    )
    expected = need.filter(pl.col("workers") > 1).select("key", "workers").sort("key")
    assert report.split.sort("key").equals(expected)
    assert report.merge_calls.height == expected.height
    assert report.keys == counts.height and report.rows == zipf_data.height
    assert report.replication_factor == pytest.approx(
        replication_bound_of_counts(counts["count"], workers=report.workers)
    )
    assert report.offline_replication == pytest.approx(report.replication_factor)
    assert report.load_imbalance < 0.05
    assert sum(report.worker_rows) == zipf_data.height
    # Every call ran in the function stage's task of its worker: Spark kept the spread.
    assert report.calls["task"].equals(report.calls["worker"].cast(pl.Int32), check_names=False)
    # Each piece of a split key holds thousands of rows, so its partial is a full top 3.
    assert report.merge_rows == 3 * int(expected["workers"].sum())
    assert report.output_rows == report.merge_rows + 3 * (report.keys - expected.height) - int(
        (3 - counts.filter(pl.col("count") < 3)["count"]).sum()
    )


def test_online_grouper_equals_apply_in_pandas(spark, zipf_frame, zipf_data):
    result, report = _with_report(
        zipf_frame,
        key="key",
        function=top3,
        merge=top3_merge,
        schema=TOP3,
        grouper="d_choices",
        workers=16,
        session=spark,
    )
    assert result.select("key", "rank", "value").sort("key", "rank").equals(_expected_top3(zipf_data))
    assert report.plan == "d_choices"
    # A key merged is a key held by more than one worker, and no other.
    assert report.merge_calls.height == report.split.height > 0
    assert report.split["workers"].min() >= 2


def test_online_plan_without_report_equals_polars(spark, zipf_frame, zipf_data):
    result = apply_grouped(
        zipf_frame,
        key="key",
        function=top3,
        merge=top3_merge,
        schema=TOP3,
        grouper="w_choices",
        workers=16,
    )
    assert _collect(result).select("key", "rank", "value").sort("key", "rank").equals(_expected_top3(zipf_data))


def test_uniform_keys_split_nothing_and_merge_nothing(spark, tmp_path):
    rng = np.random.default_rng(9)
    data = pl.DataFrame({"key": rng.integers(0, 2_000, 60_000), "value": rng.permutation(60_000).astype(np.int64)})
    frame = spark.spark.read.parquet(str(_write(tmp_path / "uniform", data)))
    result, report = _with_report(
        frame,
        key="key",
        function=top3,
        merge=top3_merge,
        schema=TOP3,
        workers=16,
        session=spark,
    )
    assert result.select("key", "rank", "value").sort("key", "rank").equals(_expected_top3(data))
    assert report.split.height == 0 and report.merge_calls.height == 0 and report.merge_rows == 0
    assert report.calls.height == report.keys == 2_000
    assert report.replication_factor == 1.0
    # The hottest key holds about 1/8 of a worker's mean load: nothing is worth placing, and
    # every key goes to its hash worker (the placement table is empty; adaptive execution
    # drops it, with its join).
    assert report.hot_keys is not None and report.hot_keys.height == 0
    from pyspark.sql import functions as F

    hashed = frame.groupBy(F.pmod(F.xxhash64(F.lit(0), "key"), F.lit(16)).alias("worker")).count().collect()
    by_worker = {row["worker"]: row["count"] for row in hashed}
    assert report.worker_rows == [by_worker.get(w, 0) for w in range(16)]


def test_aqe_coalescing_cannot_undo_the_spread(spark, zipf_frame):
    conf = spark.spark.conf
    before = {
        name: conf.get(name, None)
        for name in ("spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled")
    }
    conf.set("spark.sql.adaptive.enabled", "true")
    conf.set("spark.sql.adaptive.coalescePartitions.enabled", "true")
    try:
        _, report = _with_report(
            zipf_frame,
            key="key",
            function=top3,
            merge=top3_merge,
            schema=TOP3,
            workers=24,
            session=spark,
        )
    finally:
        for name, value in before.items():
            conf.unset(name) if value is None else conf.set(name, value)
    assert report.calls["task"].equals(report.calls["worker"].cast(pl.Int32), check_names=False)
    assert report.calls["worker"].n_unique() == 24


def test_no_column_is_clobbered_and_the_function_sees_the_frame_as_it_is(spark, tmp_path):
    """Input columns named like the routing's (``worker``, ``source``, ``__source``) pass
    through untouched; the function sees exactly the frame's columns; ``f(key, pdf)`` gets
    the key as a one-element tuple, as in ``applyInPandas``; a positional output works."""
    rng = np.random.default_rng(4)
    rows = 30_000
    keys = np.where(rng.random(rows) < 0.5, "hot", np.char.add("k", rng.integers(0, 300, rows).astype(str)))
    data = pl.DataFrame(
        {
            "worker": rng.integers(0, 5, rows),
            "source": np.full(rows, 7),
            "__source": np.arange(rows),
            "name": keys,
            "value": rng.permutation(rows).astype(np.int64),
        }
    )
    frame = spark.spark.read.parquet(str(_write(tmp_path / "clobber", data)))

    def describe(key, pdf):
        assert list(pdf.columns) == ["worker", "source", "__source", "name", "value"], list(pdf.columns)
        return pd.DataFrame([[key[0], int(pdf["worker"].sum()), int(pdf["source"].sum()), len(pdf)]])

    def add(key, pdf):
        return pd.DataFrame(
            {
                "name": [key[0]],
                "worker": [pdf["worker"].sum()],
                "source": [pdf["source"].sum()],
                "rows": [pdf["rows"].sum()],
            }
        )

    schema = "name string, worker long, source long, rows long"
    got, report = _with_report(
        frame,
        key="name",
        function=describe,
        merge=add,
        schema=schema,
        workers=8,
        session=spark,
    )
    got = got.sort("name")
    assert got.columns == ["name", "worker", "source", "rows"]
    expected = (
        data.group_by("name")
        .agg(pl.col("worker").sum(), pl.col("source").sum(), pl.len().cast(pl.Int64).alias("rows"))
        .sort("name")
    )
    assert got.equals(expected)
    share = (data["name"] == "hot").sum() / rows
    assert report.split["name"].to_list() == ["hot"] and report.split["workers"][0] == int(np.ceil(share * 8))


def test_null_and_string_keys_group_as_apply_in_pandas_does(spark, tmp_path):
    rng = np.random.default_rng(6)
    rows = 40_000
    names = pl.Series(np.char.add("user-", rng.integers(0, 500, rows).astype(str)))
    data = pl.DataFrame({"key": names, "value": rng.permutation(rows).astype(np.int64)}).with_columns(
        key=pl.when(pl.int_range(rows) % 3 == 0).then(None).otherwise(pl.col("key"))
    )
    frame = spark.spark.read.parquet(str(_write(tmp_path / "nulls", data)))
    schema = "key string, rank int, value long, n long"
    got, report = _with_report(
        frame,
        key="key",
        function=top3,
        merge=top3_merge,
        schema=schema,
        workers=8,
        session=spark,
    )
    native = _collect(frame.groupBy("key").applyInPandas(top3, schema))
    assert (
        got.drop("n").sort("key", "rank", nulls_last=True).equals(native.drop("n").sort("key", "rank", nulls_last=True))
    )
    assert report.split["key"].to_list() == [None] and report.split["workers"][0] == 3
    with pytest.raises(Exception, match="null"):
        apply_grouped(
            frame, key="key", function=top3, merge=top3_merge, schema=schema, workers=8, nulls="raise"
        ).collect()


def test_empty_outputs_and_the_merge_of_a_split_key(spark, zipf_frame, zipf_data):
    """A function that returns no rows for some calls: the key's result is the merge of
    the others' (the merge gets what the calls returned, nothing for the empty ones)."""

    def big_values(pdf):
        kept = pdf[pdf["value"] > 600_000]
        return pd.DataFrame({"key": kept["key"].head(1), "total": [kept["value"].sum()] * min(1, len(kept))})

    def add(pdf):
        return pd.DataFrame({"key": pdf["key"].head(1), "total": [pdf["total"].sum()] * min(1, len(pdf))})

    result = _collect(
        apply_grouped(
            zipf_frame,
            key="key",
            function=big_values,
            merge=add,
            schema="key long, total long",
            workers=16,
        )
    )
    expected = zipf_data.filter(pl.col("value") > 600_000).group_by("key").agg(total=pl.col("value").sum())
    assert result.sort("key").equals(expected.sort("key"))


def test_a_client_stream_needs_a_session_and_then_runs(spark, zipf_data):
    with pytest.raises(ValueError, match="session="):
        apply_grouped(zipf_data, key="key", function=top3, merge=top3_merge, schema=TOP3)
    result = apply_grouped(
        zipf_data.head(50_000),
        key="key",
        function=top3,
        merge=top3_merge,
        schema=TOP3,
        workers=8,
        session=spark,
    )
    assert (
        _collect(result)
        .select("key", "rank", "value")
        .sort("key", "rank")
        .equals(_expected_top3(zipf_data.head(50_000)))
    )


def test_bad_arguments_are_refused_before_any_work(spark, zipf_frame):
    def run(**changes):
        arguments = {"key": "key", "function": top3, "merge": top3_merge, "schema": TOP3, "workers": 8, **changes}
        return apply_grouped(zipf_frame, **arguments)

    with pytest.raises(TypeError, match="function must be a function"):
        run(function="top3")
    with pytest.raises(TypeError, match="merge must be a function"):
        run(merge=None)
    with pytest.raises(TypeError, match="schema must be a DDL string"):
        run(schema=42)
    with pytest.raises(ValueError, match="'nope' is not in the DataFrame"):
        run(key="nope")
    with pytest.raises(ConfigError, match="workers must be an int"):
        run(workers=0)
    # A million workers is a grouper's range, not a Spark stage's: refused before any job,
    # whichever plan (a stage of 10^6 tasks ran until the query timeout).
    called = time.time()
    for grouper in (None, "elastic"):
        with pytest.raises(ConfigError, match=r"1,000,000 Spark tasks.*at most 65,536"):
            run(workers=10**6, grouper=grouper)
    assert StatusApi(spark).jobs_submitted_since(called) == []
    with pytest.raises(ConfigError, match="keysplit's own"):
        run(schema="__keysplit_worker long")
    with pytest.raises(ConfigError, match="nulls must be"):
        run(nulls="drop")


def test_an_empty_frame_gives_an_empty_result_and_a_float_key_is_refused(spark, zipf_frame):
    empty = apply_grouped(zipf_frame.limit(0), key="key", function=top3, merge=top3_merge, schema=TOP3, workers=8)
    assert _collect(empty).height == 0
    with pytest.raises(KeyInputError, match="key column 'ratio' is double"):
        apply_grouped(
            zipf_frame.withColumn("ratio", zipf_frame["value"] / 3),
            key="ratio",
            function=top3,
            merge=top3_merge,
            schema=TOP3,
            workers=8,
        )


def test_a_function_that_breaks_its_contract_is_named(spark, zipf_frame):
    """The function stage runs when the result is used, and its errors surface there."""

    def run(function, schema):
        return apply_grouped(
            zipf_frame, key="key", function=function, merge=top3_merge, schema=schema, workers=8
        ).collect()

    with pytest.raises(Exception, match=r"function's pandas DataFrame does not match the schema: missing \['right'\]"):
        run(lambda pdf: pd.DataFrame({"wrong": [1]}), "right long")
    with pytest.raises(Exception, match="the function must return a pandas DataFrame, got int"):
        run(lambda pdf: len(pdf), "n long")
    with pytest.raises(Exception, match="the function returned 2 columns, the schema has 1"):
        run(lambda pdf: pd.DataFrame([[1, 2]]), "n long")


def test_hot_keys_bounds_hold_against_exact_counts(spark, tmp_path):
    """A small summary over many partitions: every exact count lies in [count, count + error],
    the error is within N / (capacity + 1), every key of share ≥ min_share is listed, hottest first."""
    data = _skewed(300_000, z=1.3, keys=50_000, seed=12)
    data = data.with_columns(key=pl.col("key").cast(pl.String))
    frame = spark.spark.read.parquet(str(_write(tmp_path / "hot", data, files=12)))
    capacity, workers = 64, 32
    table = hot_keys(frame, key="key", workers=workers, capacity=capacity, min_share=0.002)
    exact = data["key"].value_counts().rename({"count": "exact"})
    joined = table.join(exact, on="key", how="left")
    assert table.columns == ["key", "count", "error", "share", "share_max", "workers", "rows"]
    assert (joined["count"] <= joined["exact"]).all() and (joined["exact"] <= joined["count"] + joined["error"]).all()
    error = int(table["error"][0])
    assert 0 < error <= data.height / (capacity + 1)
    assert set(exact.filter(pl.col("exact") >= 0.002 * data.height)["key"]) <= set(table["key"])
    assert table["count"].is_sorted(descending=True)
    assert (table["workers"] == (table["share_max"] * workers - 1e-9).ceil().clip(lower_bound=1).cast(pl.Int64)).all()
    assert int(table["rows"][0]) == data.height


def test_hot_keys_exact_with_room_and_decimal_keys(spark, tmp_path):
    """With capacity above the distinct keys the counts are exact; Parquet's uint64
    (decimal(20,0) in Spark) reports the integers; an empty frame reports nothing."""
    data = pl.DataFrame({"key": pl.Series([2**63 + 5] * 700 + [3] * 200 + [2**64 - 1] * 100, dtype=pl.UInt64)})
    frame = spark.spark.read.parquet(str(_write(tmp_path / "u64", data, files=2)))
    assert frame.schema["key"].dataType.simpleString() == "decimal(20,0)"
    table = hot_keys(frame, key="key", workers=4, min_share=0.01)
    assert [int(k) for k in table["key"]] == [2**63 + 5, 3, 2**64 - 1]
    assert table["count"].to_list() == [700, 200, 100] and table["error"].to_list() == [0, 0, 0]
    assert table["workers"].to_list() == [3, 1, 1]
    chosen = placement(table, key="key", workers=4)
    assert chosen.keys == [2**63 + 5, 3, 2**64 - 1] and [len(s) for s in chosen.slices] == [3, 1, 1]
    empty = hot_keys(frame.limit(0), key="key", workers=4)
    assert empty.height == 0
    with pytest.raises(ValueError, match="capacity must be"):
        hot_keys(frame, key="key", capacity=0)
    with pytest.raises(ValueError, match="min_share must be"):
        hot_keys(frame, key="key", min_share=2)


def test_hot_keys_counts_null_keys_like_any_other(spark, tmp_path):
    """Null keys are often the hottest of real data: they are reported, as a null key."""
    names = pl.Series([None] * 500 + ["a"] * 300 + [f"k{n}" for n in range(200)])
    frame = spark.spark.read.parquet(str(_write(tmp_path / "nullkeys", pl.DataFrame({"name": names}), files=3)))
    table = hot_keys(frame, key="name", workers=4, min_share=0.1)
    assert table["name"].to_list() == [None, "a"]
    assert table["count"].to_list() == [500, 300] and table["workers"].to_list() == [2, 2]


def test_placement_gives_each_key_its_share_of_workers():
    table = pl.DataFrame(
        {
            "key": [10, 11, 12, 13],
            "count": [600, 250, 100, 50],
            "workers": [5, 2, 1, 1],
            "rows": [1000] * 4,
        }
    )
    chosen = placement(table, key="key", workers=8)
    # Hottest first, each to its least-loaded workers (lowest index on a tie): 120 rows on
    # each of workers 0-4, 125 on 5 and 6, then the whole keys where the load is least.
    assert chosen.keys == [10, 11, 12, 13]
    assert chosen.slices == [[0, 1, 2, 3, 4], [5, 6], [7], [7]]
    # Rows of keys not listed count as spread evenly before the listed ones are placed.
    spread = placement(table.with_columns(rows=pl.lit(1800)), key="key", workers=8)
    assert spread.slices == [[0, 1, 2, 3, 4], [5, 6], [7], [7]]
    assert placement(table.head(0), key="key", workers=8).keys == []


def test_offline_replication_is_the_bound_of_the_key_shares():
    assert replication_bound_of_counts(pl.Series([60, 20, 10, 10]), workers=10) == pytest.approx((6 + 2 + 1 + 1) / 4)
    assert replication_bound_of_counts(pl.Series([1] * 100), workers=10) == 1.0
    assert replication_bound_of_counts(pl.Series([], dtype=pl.Int64), workers=10) == 0.0


@pytest.fixture(scope="module")
def memory_limited(tmp_path_factory):
    """A server whose Python workers may use 1 GB of address space each
    (``spark.executor.pyspark.memory``, enforced by Spark with ``RLIMIT_AS``)."""
    from keysplit.spark import session

    with session(query_timeout=600.0, **{"spark.executor.pyspark.memory": "1g"}) as handle:
        yield handle


def test_a_hot_group_too_big_for_a_python_worker_completes_when_split(memory_limited, tmp_path):
    """applyInPandas must hold the hot key's 2.5 M rows (130-byte strings) in one pandas
    frame and fails under the limit; apply_grouped's calls hold about 80 k rows each and
    finish with the right result."""
    rng = np.random.default_rng(1)
    hot, tail = 2_500_000, 100_000
    keys = np.concatenate([np.zeros(hot, np.int64), rng.integers(1, 5_000, tail)])
    rng.shuffle(keys)
    data = pl.DataFrame({"key": keys, "value": rng.integers(0, 10**9, hot + tail)}).with_columns(
        payload=pl.format("{}-{}", pl.lit("x" * 120), pl.col("value"))
    )
    frame = memory_limited.spark.read.parquet(str(_write(tmp_path / "fat", data)))
    schema = "key long, value long, n long"

    def largest(pdf):
        return pd.DataFrame({"key": [pdf["key"].iloc[0]], "value": [pdf["value"].max()], "n": [len(pdf)]})

    def largest_of(pdf):
        return pd.DataFrame({"key": [pdf["key"].iloc[0]], "value": [pdf["value"].max()], "n": [pdf["n"].max()]})

    # Out of address space, Python or Arrow fails to allocate, whichever first.
    # Arrow's "Wrapping <value> failed" may reach us cut short, without "failed".
    with pytest.raises(Exception, match="Python worker exited unexpectedly|MemoryError|malloc|Wrapping "):
        frame.groupBy("key").applyInPandas(largest, schema).collect()
    result = _collect(apply_grouped(frame, key="key", function=largest, merge=largest_of, schema=schema, workers=32))
    expected = data.group_by("key").agg(pl.col("value").max())
    assert result.select("key", "value").sort("key").equals(expected.sort("key"))
    assert result["n"].max() * 20 < hot


def test_the_function_sees_what_apply_in_pandas_gives_it(spark, tmp_path):
    """Every column type as applyInPandas converts it (integers with nulls as floats, dates
    as objects, timestamps naive in the session time zone, decimals, bytes), and the
    output converted back the same way: both plans' results are equal, row for row."""

    rows = 3_000
    i = pl.int_range(rows, eager=True)
    data = pl.DataFrame(
        {
            "key": i % 37,
            "count": pl.Series([None if n % 7 == 0 else n for n in range(rows)], dtype=pl.Int32),
            "ratio": i.cast(pl.Float64) / 3,
            "name": pl.Series([None if n % 5 == 0 else f"n{n % 11}" for n in range(rows)]),
            "flag": i % 2 == 0,
            "day": pl.Series([datetime.date(2026, 1, 1) + datetime.timedelta(days=n % 300) for n in range(rows)]),
            "at": pl.Series(
                [datetime.datetime(2026, 3, 29, 0, 30) + datetime.timedelta(minutes=17 * n) for n in range(rows)]
            ).dt.replace_time_zone("UTC"),
            "price": pl.Series([f"{n % 1000}.{n % 100:02d}" for n in range(rows)]).str.to_decimal(scale=2),
            "blob": pl.Series([bytes([n % 256, 7]) for n in range(rows)]),
        }
    )
    frame = spark.spark.read.parquet(str(_write(tmp_path / "types", data)))

    def describe(pdf):
        described = {c: f"{pdf[c].dtype}:" + "|".join(sorted(map(repr, pdf[c].tolist()))) for c in pdf.columns}
        return pd.DataFrame(
            {
                "key": pdf["key"].iloc[0],
                "column": list(described),
                "described": list(described.values()),
                "first_day": min(pdf["day"]),
                "first_at": pdf["at"].min(),
                "top_price": max(pdf["price"]),
            }
        )

    schema = "key long, column string, described string, first_day date, first_at timestamp, top_price decimal(10,2)"
    native = _collect(frame.groupBy("key").applyInPandas(describe, schema)).sort("key", "column")
    ours = _collect(
        apply_grouped(
            frame,
            key="key",
            function=describe,
            merge=lambda pdf: pdf,
            schema=schema,
            workers=4,
            session=spark,
        )
    ).sort("key", "column")
    assert native.height == 37 * 9
    assert ours.equals(native)


def test_the_result_is_lazy_and_the_report_fills_when_it_runs(spark, zipf_frame, zipf_data):
    """No Spark job runs until an action; the report is pending until then, then filled;
    a report serves one call."""
    # Inferring a Parquet file's schema is a job of Spark's own (its footers), which the
    # server runs again whenever its plan cache has let the DataFrame go: given the schema,
    # the files are read without one.
    frame = spark.spark.read.schema(zipf_frame.schema).parquet(*zipf_frame.inputFiles())
    called = time.time()
    report: Report[GroupedReport] = Report()
    result = apply_grouped(frame, key="key", function=top3, merge=top3_merge, schema=TOP3, workers=16, report=report)
    assert type(result).__name__ == "DataFrame" and type(result).__module__.startswith("pyspark.sql")
    assert StatusApi(spark).jobs_submitted_since(called) == []
    with pytest.raises(ReportPendingError, match="action"):
        _ = report.get
    assert _collect(result).select("key", "rank", "value").sort("key", "rank").equals(_expected_top3(zipf_data))
    assert StatusApi(spark).jobs_submitted_since(called)
    assert report.get.rows == zipf_data.height and report.get.keys == zipf_data["key"].n_unique()
    with pytest.raises(ConfigError, match="new Report"):
        apply_grouped(zipf_frame, key="key", function=top3, merge=top3_merge, schema=TOP3, report=report)


def test_the_one_line_migrations_equal_apply_in_pandas(spark, zipf_frame, zipf_data, native_top3):
    """skewed(df).groupBy(k).applyInPandas(f, schema, merge=m) and
    df.transform(apply_grouped, ...) are lazy DataFrames equal to Spark's own grouped map."""
    native = native_top3.drop("n").sort("key", "rank")
    wrapped = skewed(zipf_frame, workers=16).groupBy("key").applyInPandas(top3, TOP3, merge=top3_merge)
    transformed = zipf_frame.transform(
        apply_grouped, key="key", function=top3, merge=top3_merge, schema=TOP3, workers=16
    )
    for result in (wrapped, transformed):
        assert type(result).__name__ == "DataFrame"
        assert _collect(result).drop("n").sort("key", "rank").equals(native)
    with pytest.raises(ConfigError, match="needs merge="):
        skewed(zipf_frame).groupBy("key").applyInPandas(top3, TOP3)
    with pytest.raises(ConfigError, match="one key column"):
        skewed(zipf_frame).groupBy("key", "value").applyInPandas(top3, TOP3, merge=top3_merge)
    with pytest.raises(ConfigError, match="applyInPandas does not read min_skew=2"):
        skewed(zipf_frame, min_skew=2).groupBy("key").applyInPandas(top3, TOP3, merge=top3_merge)


def test_the_deprecated_twin_warns_and_gives_the_same_report(spark, zipf_frame, two_pass):
    from keysplit.spark import apply_grouped_with_report

    with pytest.warns(DeprecationWarning, match="report=keysplit.spark.Report"):
        result, report = apply_grouped_with_report(
            zipf_frame, key="key", function=top3, merge=top3_merge, schema=TOP3, workers=32, session=spark
        )
    expected, expected_report = two_pass
    assert _collect(result).sort("key", "rank").equals(expected.sort("key", "rank"))
    assert report.split.equals(expected_report.split) and report.keys == expected_report.keys
    assert (
        report.calls.sort("worker", "rows")
        .select("worker", "rows")
        .equals(expected_report.calls.sort("worker", "rows").select("worker", "rows"))
    )


def test_the_function_runs_once_per_worker_and_key(spark, zipf_frame, zipf_data, tmp_path):
    """The function stage's output is read by two branches (whole keys, split keys) from one
    exchange: the function must still run once per (worker, key), never twice, with and
    without a report observing the plan."""
    import os

    calls = tmp_path / "calls"
    calls.mkdir()

    def counted(pdf):
        (calls / f"{os.getpid()}-{os.urandom(8).hex()}").write_text(str(len(pdf)))
        return top3(pdf)

    def written() -> list[int]:
        sizes = sorted(int(path.read_text()) for path in calls.iterdir())
        for path in calls.iterdir():
            path.unlink()
        return sizes

    arguments = {"key": "key", "function": counted, "merge": top3_merge, "schema": TOP3, "workers": 16}
    plain = _collect(apply_grouped(zipf_frame, **arguments))
    without_report = written()
    result, report = _with_report(zipf_frame, **arguments)
    with_report = written()
    assert result.sort("key", "rank").equals(plain.sort("key", "rank"))
    assert result.select("key", "rank", "value").sort("key", "rank").equals(_expected_top3(zipf_data))
    assert report.split.height > 0
    assert with_report == without_report == sorted(report.calls["rows"].to_list())
    assert sum(with_report) == zipf_data.height
