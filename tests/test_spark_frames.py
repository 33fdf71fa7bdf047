"""Spark DataFrames in: routing on the executors, one source per input partition.

Against the real embedded server (the ``spark`` fixture). The DataFrames are read from
Parquet files the tests write, so each file is an input partition in a fixed order.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import polars as pl
import pytest

import keysplit
from keysplit import KeyInputError, metrics
from keysplit.spark import (
    ExecutorSetupError,
    aggregate,
    check_executors,
    reference,
    route,
    ship_keysplit,
    windowed_count,
)
from reports import aggregated, operated

TIMEOUT = 180.0
AGGS = ["count", "count(value)", "sum(value)", "min(value)", "max(value)", "mean(value)", "distinct(user)"]
FILES = 3


def _rows(rows: int, *, seed: int) -> pl.DataFrame:
    keys = pl.concat(list(keysplit.datasets.zipf(keys=300, tuples=rows, z=1.3, seed=seed)))
    i = pl.int_range(rows, dtype=pl.Int64)
    return keys.with_columns(
        key=pl.col("key").cast(pl.Int64),
        value=pl.when(i % 13 == 5).then(None).otherwise((i * 7919) % 1000 - 300),
        user=((i * 104729) % 89).cast(pl.Int64),
        day=(i // 1_500).cast(pl.Int32),
    )


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("frames")
    data = _rows(6_000, seed=11)
    for index, part in enumerate(data.iter_slices(data.height // FILES)):
        part.write_parquet(directory / f"part-{index}.parquet")
    return directory


@pytest.fixture(scope="module")
def frame(spark, parquet_dir):
    return spark.spark.read.parquet(str(parquet_dir))


@pytest.fixture(scope="module")
def partitions(spark, frame) -> list[pl.DataFrame]:
    """Each input partition's rows, in the order the executors read them."""
    from pyspark.sql import functions as F

    table = spark.call("partitions", frame.withColumn("p", F.spark_partition_id()).toArrow, timeout=TIMEOUT)
    rows = pl.from_arrow(table)
    return [part for _, part in sorted(rows.partition_by("p", as_dict=True, maintain_order=True).items())]


@pytest.fixture(scope="module")
def expected(spark, frame) -> pl.DataFrame:
    table = spark.call("reference", reference(frame, key="key", aggs=AGGS).toArrow, timeout=TIMEOUT)
    return pl.from_arrow(table).sort("key", nulls_last=False)


@pytest.mark.parametrize("name", [info.name for info in keysplit.groupers()])
def test_every_grouper_on_the_executors_equals_groupby(spark, frame, partitions, expected, name):
    result, report = aggregated(
        frame,
        key="key",
        grouper=keysplit.Grouper(name, workers=6, seed=3),
        aggs=AGGS,
        distinct="exact",
        session=spark,
        output="polars",
        timeout=TIMEOUT,
    )
    assert result.equals(expected)
    assert report.routed_on == "executors" and report.ingestion == "none"
    # Each partition is a source routed by its own grouper of the same seed, in its order.
    assert len(partitions) > 1 and report.sources == len(partitions)
    routed = [keysplit.route(part, key="key", grouper=keysplit.Grouper(name, workers=6, seed=3)) for part in partitions]
    assert report.source_loads == [metrics.worker_loads(r, workers=6).to_list() for r in routed]
    everything = pl.concat(routed)
    assert report.spark_partial_rows == metrics.aggregation_cost(everything)
    assert report.keys == expected.height
    assert report.load_imbalance == pytest.approx(metrics.load_imbalance(metrics.worker_loads(everything, workers=6)))


def test_routing_on_the_executors_is_the_same_every_run(spark, frame):
    def routed() -> pl.DataFrame:
        plan = route(frame, key="key", grouper="w_choices", workers=5, seed=9, session=spark)
        return pl.from_arrow(
            spark.call("routing", plan.select("key", "value", "worker", "source").toArrow, timeout=TIMEOUT)
        )

    first, second = routed(), routed()
    assert first.equals(second)
    assert first.height == 6_000 and first["worker"].n_unique() == 5
    # The grouper passed in does not move: each source starts from its state.
    grouper = keysplit.Grouper("pkg", workers=4)
    route(frame, key="key", grouper=grouper, session=spark)
    assert grouper.loads == [0, 0, 0, 0]


def test_a_shuffled_frame_is_refused_unless_ordered(spark, frame):
    shuffled = frame.repartition(4, "user")
    with pytest.raises(ValueError, match="come out of a shuffle.*order_by"):
        aggregate(shuffled, key="key", aggs=["count"], session=spark, timeout=TIMEOUT)
    # Sorted within each partition by a column unique there, its routing is repeatable.
    from pyspark.sql import functions as F

    numbered = frame.withColumn("row", F.monotonically_increasing_id()).repartition(4, "user")
    runs = [
        aggregated(
            numbered,
            key="key",
            aggs=["count", "sum(value)"],
            grouper="d_choices",
            order_by="row",
            session=spark,
            output="polars",
            timeout=TIMEOUT,
        )
        for _ in range(2)
    ]
    want = pl.from_arrow(
        spark.call("reference", reference(frame, key="key", aggs=["count", "sum(value)"]).toArrow, timeout=TIMEOUT)
    ).sort("key", nulls_last=False)
    assert runs[0][0].equals(want) and runs[1][0].equals(want)
    assert runs[0][1].source_loads == runs[1][1].source_loads and runs[0][1].sources == 4


def test_window_column_on_the_executors(spark, frame):
    aggs = ["count", "max(value)"]
    want = pl.from_arrow(
        spark.call("reference", reference(frame, key="key", aggs=aggs, window="day").toArrow, timeout=TIMEOUT)
    ).sort("day", "key", nulls_last=False)
    result, report = aggregated(
        frame,
        key="key",
        aggs=aggs,
        grouper="dagreedy",
        window="day",
        session=spark,
        output="polars",
        timeout=TIMEOUT,
    )
    assert result.equals(want)
    assert [w.window for w in report.windows] == [0, 1, 2, 3]
    assert [w.rows for w in report.windows] == [1_500] * 4
    assert [w.keys for w in report.windows] == want.group_by("day").len().sort("day")["len"].to_list()


def test_operator_mode_on_the_executors(spark, frame):
    from pyspark.sql import functions as F

    plan = (
        frame.withColumn("seq", F.monotonically_increasing_id())
        .groupBy(F.floor(F.col("seq") / 700).cast("long").alias("window"), "key")
        .agg(F.count(F.lit(1)).alias("count"))
    )
    want = pl.from_arrow(spark.call("reference", plan.toArrow, timeout=TIMEOUT)).sort("window", "key", nulls_last=False)
    result, report = operated(
        frame.select("key", "value"),
        operator=windowed_count(700),
        grouper="pdstream",
        workers=4,
        session=spark,
        output="polars",
        timeout=TIMEOUT,
    )
    assert result.equals(want)
    assert report.windows[0].partition_rows == report.spark_loads and sum(report.spark_loads) == 6_000


def test_bad_frames_are_refused_before_routing(spark, frame):
    from pyspark.sql import functions as F

    with pytest.raises(ValueError, match="key column 'value' is double"):
        aggregate(frame.withColumn("value", F.col("value").cast("double")), key="value", session=spark)
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the DataFrame"):
        aggregate(frame, aggs=["sum(nope)"], session=spark)
    with pytest.raises(ValueError, match="count windows need one arrival order"):
        aggregate(frame, window=100, session=spark)
    with pytest.raises(ValueError, match="checkpoint resumes client streams"):
        aggregate(frame, checkpoint="somewhere", session=spark)
    with pytest.raises(ValueError, match="may not have a column 'worker'"):
        aggregate(frame.withColumn("worker", F.lit(1)), aggs=["sum(worker)"], session=spark)


def _python_without_keysplit(directory: Path) -> Path:
    """A real interpreter whose packages are this one's, but for keysplit and Polars."""
    import keysplit as installed

    packages = directory / "site-packages"
    packages.mkdir()
    # keysplit's own site-packages directory (not resolved: the package may be symlinked).
    for entry in Path(installed.__file__).parent.parent.iterdir():
        if not entry.name.startswith(("keysplit", "polars", "_polars")):
            (packages / entry.name).symlink_to(entry)
    python = directory / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{packages}"\n'
        f'exec {os.path.realpath(sys.executable)} -S "$@"\n'
    )
    python.chmod(0o755)
    return python


def test_an_executor_without_keysplit_says_how_to_ship_it(spark, parquet_dir, expected, tmp_path):
    python = _python_without_keysplit(tmp_path)
    temporary = spark.server.log_path.parent / "tmp"
    # A Spark session of its own on this server, as a user's, checked afresh for this
    # Python: the archive goes to its artifacts alone (Spark's cache copies a session's
    # artifacts, 200 MB here, into every session it clones, which no later test should pay).
    with keysplit.spark.session(
        url=spark.url, query_timeout=TIMEOUT, **{"spark.sql.execution.pyspark.python": str(python)}
    ) as bare:
        frame = bare.spark.read.parquet(str(parquet_dir))
        with pytest.raises(ExecutorSetupError, match=r"No module named 'keysplit'.*ship_keysplit\(session\)"):
            aggregate(frame, key="key", aggs=["count"], session=bare, timeout=TIMEOUT)
        ship_keysplit(bare)
        assert check_executors(bare) == keysplit.__version__
        result = aggregate(
            frame, key="key", aggs=AGGS, distinct="exact", session=bare, output="polars", timeout=TIMEOUT
        )
        assert result.equals(expected)
        shipped = list(temporary.glob("**/keysplit-*-packages.tar"))
        # On the server, in the server's own directory (removed when it stops), not in /tmp.
        assert shipped, sorted(str(path) for path in temporary.rglob("*"))[:20]


def test_null_keys_and_an_empty_frame(spark, frame):
    from pyspark.sql import functions as F

    holed = frame.withColumn("key", F.when(F.col("value").isNull(), None).otherwise(F.col("key")))
    want = pl.from_arrow(
        spark.call("reference", reference(holed, key="key", aggs=["count", "sum(value)"]).toArrow, timeout=TIMEOUT)
    ).sort("key", nulls_last=False)
    # The DataFrame's own session runs it when none is named.
    result = aggregate(holed, key="key", aggs=["count", "sum(value)"], output="polars", timeout=TIMEOUT)
    assert result.equals(want) and result["key"].null_count() == 1
    # Refused in an executor's routing task, and raised here as the KeyInputError it was.
    with pytest.raises(KeyInputError, match=r"null.*raised in a Spark task") as caught:
        aggregate(holed, key="key", aggs=["count"], nulls="raise", session=spark, output="polars", timeout=TIMEOUT)
    assert type(caught.value.__cause__).__name__ == "PythonException"
    empty, report = aggregated(
        frame.filter(F.col("key") < 0), aggs=["count", "sum(value)"], session=spark, output="polars", timeout=TIMEOUT
    )
    assert empty.height == 0 and empty.columns == ["key", "count", "sum_value"]
    assert report.rows == 0 and report.keys == 0 and report.spark_partial_rows == 0


def test_uint64_keys_from_parquet_route_as_the_client_routes_them(spark, tmp_path):
    # Spark reads Parquet's uint64 as decimal(20, 0); the executors route the integers.
    data = pl.concat(list(keysplit.datasets.zipf(keys=500, tuples=5_000, z=1.2, seed=4)))
    assert data.schema["key"] == pl.UInt64
    data = data.with_columns(pl.when(pl.int_range(data.height) % 97 == 0).then(2**64 - 1).otherwise("key").alias("key"))
    data.write_parquet(tmp_path / "keys.parquet")
    frame = spark.spark.read.parquet(str(tmp_path))
    result, report = aggregated(frame, grouper="pkg", workers=4, session=spark, output="polars", timeout=TIMEOUT)
    routed = keysplit.route(data, key="key", grouper=keysplit.Grouper("pkg", workers=4))
    assert report.source_loads == [metrics.worker_loads(routed, workers=4).to_list()]
    counts = data.group_by("key").len().sort("key")
    assert result["count"].to_list() == counts["len"].to_list()
    assert [int(k) for k in result["key"].to_list()] == counts["key"].to_list()
