"""Skew-safe partitioned writes (``skewed(df).write``) and sorts with heavy ties
(``skewed(df).orderBy``), against Spark's own on the real embedded server (the ``spark``
fixture), and the task plan behind the writes (:mod:`keysplit.spark.write_plan`).

Every write is read back and compared with the frame written, as a multiset of rows per
partition value; the files are listed from the Hive-style directories Spark wrote; the
write tasks' rows are the write stage's own figures from Spark's REST API.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from keysplit import ConfigError, ConfigTypeError
from keysplit.spark import Report, skewed
from keysplit.spark.intake import run_settings
from keysplit.spark.write import WriteReport
from keysplit.spark.write_plan import MAX_TASKS, write_plan
from spark_status import StatusApi

ROWS = 300_000
DAYS = 40


# The plan


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.floats(min_value=0, max_value=50, allow_nan=False), min_size=0, max_size=60),
    target=st.floats(min_value=0.05, max_value=10),
)
def test_a_plan_cuts_each_value_into_files_of_the_target_and_packs_the_rest(sizes, target):
    plan = write_plan(sizes, target)
    # No task holds more than a file's worth.
    assert all(load <= target * (1 + 1e-9) for load in plan.load)
    # Each value is its full files and its remainder, which lands on one task.
    placed = [0.0] * plan.tasks
    for value, size in enumerate(sizes):
        assert plan.full[value] == int(size // target)
        assert plan.chunks[value] == pytest.approx(size / target)
        for chunk in range(plan.full[value]):
            placed[plan.first[value] + chunk] += target
        remainder = size - plan.full[value] * target
        assert (plan.rest[value] >= 0) == (remainder > 0)
        if remainder > 0:
            placed[plan.rest[value]] += remainder
    assert placed == pytest.approx(list(plan.load))
    # ⌈size / target⌉ files per value, and no task opened that another would have held.
    for value, size in enumerate(sizes):
        files = plan.full[value] + (plan.rest[value] >= 0)
        exact = abs(size / target - round(size / target)) < 1e-9
        assert files == math.ceil(size / target) or (exact and files - round(size / target) in (0, 1))
    assert plan.files() == sum(plan.full) + sum(1 for r in plan.rest if r >= 0)
    shared = sorted({task for task in plan.rest if task >= 0})
    assert sum(1 for task in shared if plan.load[task] <= target / 2) <= 1
    assert write_plan(sizes, target) == plan  # the same plan every time


def test_a_hot_value_gets_a_task_per_file_and_the_small_ones_share():
    plan = write_plan([60.0, 2.5, 0.4, 0.4, 0.3, 36.9], 10.0)
    assert plan.full == (6, 0, 0, 0, 0, 3)
    assert plan.first == (0, -1, -1, -1, -1, 6)
    # The remainders, largest first, each into the fullest task it fits: 6.9, 2.5 and 0.4 in
    # one (9.8), the other 0.4 and 0.3 in a second.
    assert plan.rest == (-1, 9, 9, 10, 10, 9)
    assert plan.load[9:] == pytest.approx((9.8, 0.7))
    assert plan.tasks == 11 and plan.files() == 6 + 4 + 4
    assert max(plan.load) / (sum(plan.load) / plan.tasks) < 1.1


def test_a_plan_of_bad_sizes_or_too_many_files_is_refused():
    with pytest.raises(ConfigError, match="positive number"):
        write_plan([1.0], 0.0)
    with pytest.raises(ConfigError, match="non-negative"):
        write_plan([1.0, -2.0], 1.0)
    with pytest.raises(ConfigError, match="raise the target"):
        write_plan([float(MAX_TASKS) + 1], 1.0)
    assert write_plan([], 1.0).tasks == 0


# Writes


@pytest.fixture(scope="module")
def events(spark, tmp_path_factory) -> tuple[pl.DataFrame, object]:
    """A day column of DAYS values, day 3 holding 60 % of the rows and a few null days; an id,
    a value and a text column; read from Parquet."""
    rng = np.random.default_rng(5)
    day = np.where(rng.random(ROWS) < 0.6, 3, rng.integers(0, DAYS, ROWS))
    rows = pl.DataFrame(
        {
            "id": np.arange(ROWS, dtype=np.int64),
            "day": day.astype(np.int32),
            "v": rng.normal(size=ROWS),
            "text": rng.choice(["alpha", "beta", "gamma", "delta"], ROWS),
        }
    ).with_columns(pl.when(pl.col("id") % 997 == 1).then(None).otherwise(pl.col("day")).alias("day"))
    path = tmp_path_factory.mktemp("events") / "events.parquet"
    rows.write_parquet(path)
    # With its schema given, reading the frame's columns runs no job (inferring it does).
    return rows, spark.spark.read.schema("id long, day int, v double, text string").parquet(str(path))


def _files(root: Path, extension: str) -> pl.DataFrame:
    """The data files under ``root``: their partition directory and size."""
    found = [(p.parent.name, p.stat().st_size) for p in root.rglob(f"part-*{extension}")]
    return pl.DataFrame(found, schema={"value": pl.String, "bytes": pl.Int64}, orient="row")


def _read_back(spark, root: Path, source: str, schema: str | None = None) -> pl.DataFrame:
    reader = spark.spark.read.format(source)
    if schema is not None:
        reader = reader.schema(schema)
    table = pl.from_arrow(reader.load(str(root)).toArrow())
    assert isinstance(table, pl.DataFrame)
    return table


def _same_rows(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    columns = expected.columns
    got = got.select(columns).cast(expected.schema)
    assert got.height == expected.height
    assert got.sort(columns, nulls_last=True).equals(expected.sort(columns, nulls_last=True))


def _write_tasks(api: StatusApi, before: int) -> list[int]:
    """The rows each task of the last write stage since ``before`` wrote."""
    stages = [s for s in api.stages_after(before) if s["status"] == "COMPLETE"]
    written = []
    for stage in sorted(stages, key=lambda s: s["stageId"]):
        tasks = api.tasks(stage)
        rows = [t["taskMetrics"]["outputMetrics"]["recordsWritten"] for t in tasks if t["status"] == "SUCCESS"]
        if sum(rows):
            written = rows
    return written


def test_a_hot_value_is_written_by_many_tasks_in_files_of_the_target_size(spark, events, tmp_path):
    rows, frame = events
    api = StatusApi(spark)
    target = 128 << 10
    report: Report[WriteReport] = Report()
    before = api.last_stage()
    skewed(frame, target_file_bytes=target).write.partitionBy("day").mode("overwrite").parquet(
        str(tmp_path / "ours"), report=report
    )
    ours = _write_tasks(api, before)
    _same_rows(_read_back(spark, tmp_path / "ours", "parquet"), rows)
    # Every file of a value but its smallest within half and one and a half of the target.
    files = _files(tmp_path / "ours", ".parquet")
    inner = files.sort("bytes").group_by("value", maintain_order=True).agg(pl.col("bytes").slice(1)).explode("bytes")
    inner = inner.drop_nulls()
    assert inner.height > 10
    assert inner["bytes"].min() >= 0.5 * target and inner["bytes"].max() <= 1.5 * target, inner.describe()
    # The files the report planned, as few as the sizes allow.
    planned = report.get
    assert files.height == planned.files
    measured = (
        files.group_by("value")
        .agg(pl.col("bytes").sum())
        .with_columns((pl.col("bytes") / target).ceil().alias("least"))
    )
    assert files.height <= 1.1 * measured["least"].sum() + 1
    # The hottest write task against Spark's repartition(col) in the same session.
    assert len(ours) == planned.tasks and max(ours) <= 1.5 * (sum(ours) / len(ours)), sorted(ours)
    before = api.last_stage()
    frame.repartition("day").write.partitionBy("day").mode("overwrite").parquet(str(tmp_path / "theirs"))
    theirs = [rows for rows in _write_tasks(api, before) if rows]
    assert max(theirs) >= 0.55 * ROWS  # one task held the hot day
    assert "tasks" in repr(planned) and planned.values.height == DAYS + 1


def test_modes_and_dynamic_partition_overwrite_are_sparks(spark, events, tmp_path):
    rows, frame = events
    path = str(tmp_path / "modes")
    writer = skewed(frame, target_file_rows=20_000).write.partitionBy("day")
    writer.mode("overwrite").parquet(path)
    early = frame.filter(F.col("day") < 5)
    skewed(early, target_file_rows=20_000).write.partitionBy("day").mode("append").parquet(path)
    appended = pl.concat([rows, rows.filter(pl.col("day") < 5)])
    _same_rows(_read_back(spark, Path(path), "parquet"), appended)
    with pytest.raises(Exception, match="PATH_ALREADY_EXISTS|already exists"):
        skewed(frame, target_file_rows=20_000).write.partitionBy("day").parquet(path)
    skewed(early, target_file_rows=20_000).write.partitionBy("day").mode("ignore").parquet(path)
    _same_rows(_read_back(spark, Path(path), "parquet"), appended)
    # Dynamic partition overwrite replaces only the days written.
    skewed(frame.filter(F.col("day") == 7), target_file_rows=20_000).write.partitionBy("day").mode("overwrite").option(
        "partitionOverwriteMode", "dynamic"
    ).parquet(path)
    expected = pl.concat([appended.filter(pl.col("day").ne_missing(7)), rows.filter(pl.col("day") == 7)])
    _same_rows(_read_back(spark, Path(path), "parquet"), expected)


@pytest.mark.parametrize("source", ["json", "csv", "orc"])
def test_formats_and_a_target_in_rows(spark, events, tmp_path, source):
    rows, frame = events
    per_file = 25_000
    root = tmp_path / source
    writer = skewed(frame, target_file_rows=per_file).write.partitionBy("day").mode("overwrite")
    if source == "csv":
        writer.csv(str(root), header=True)
    else:
        getattr(writer, source)(str(root))
    schema = "id long, v double, text string, day int"
    options = {"header": "true"} if source == "csv" else {}
    table = pl.from_arrow(spark.spark.read.format(source).options(**options).schema(schema).load(str(root)).toArrow())
    assert isinstance(table, pl.DataFrame)
    _same_rows(table, rows)
    # A value of n rows is ⌈n / per_file⌉ files; the hot day's full files are per_file rows each.
    files = _files(root, "")
    counts = rows.group_by("day").len()
    assert files.height == sum(math.ceil(n / per_file) for n in counts["len"])
    hot = pl.from_arrow(
        spark.spark.read.format(source)
        .options(**options)
        .schema(schema)
        .load(str(root / "day=3"))
        .groupBy(F.input_file_name())
        .count()
        .toArrow()
    )
    assert isinstance(hot, pl.DataFrame)
    assert sorted(hot["count"].to_list())[1:] == pytest.approx([per_file] * (hot.height - 1), rel=0.05)


def test_a_table_in_the_catalog(spark, events):
    rows, frame = events
    name = "keysplit_write_events"
    try:
        skewed(frame, target_file_rows=30_000).write.partitionBy("day").mode("overwrite").saveAsTable(name)
        table = pl.from_arrow(spark.spark.table(name).toArrow())
        assert isinstance(table, pl.DataFrame)
        _same_rows(table, rows)
        partitions = spark.spark.sql(f"SHOW PARTITIONS {name}").count()
        assert partitions == DAYS + 1
        # insertInto: by position, the partition columns (the table's last) and the format
        # the catalog's; the hot day in files of the target.
        by_position = frame.select("id", "v", "text", F.col("day").alias("d"))
        report: Report[WriteReport] = Report()
        skewed(by_position, target_file_rows=30_000).write.insertInto(name, report=report)
        assert report.get.values.columns[0] == "d" and report.get.values["rows"].sum() == ROWS
        twice = pl.from_arrow(spark.spark.table(name).toArrow())
        assert isinstance(twice, pl.DataFrame)
        _same_rows(twice, pl.concat([rows, rows]))
        planned = report.get.values.filter(pl.col("d") == 3)["files"].item()
        files = spark.spark.sql(f"SELECT DISTINCT input_file_name() FROM {name} WHERE day = 3").count()
        assert planned >= 6 and files == 2 * planned  # the same plan as saveAsTable's
        skewed(by_position, target_file_rows=30_000).write.insertInto(name, overwrite=True)
        again = pl.from_arrow(spark.spark.table(name).toArrow())
        assert isinstance(again, pl.DataFrame)
        _same_rows(again, rows)
        with pytest.raises(ConfigError, match=r"by position: the table has 4 .*the frame 1"):
            skewed(frame.select("id")).write.insertInto(name)
    finally:
        spark.spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_an_empty_frame_no_partition_column_and_one_named_as_the_reports(spark, events, tmp_path):
    rows, frame = events
    empty = frame.limit(0)
    skewed(empty).write.partitionBy("day").parquet(str(tmp_path / "empty"))
    assert _files(tmp_path / "empty", ".parquet").height == 0 and (tmp_path / "empty" / "_SUCCESS").exists()
    skewed(frame).write.mode("overwrite").parquet(str(tmp_path / "plain"))
    _same_rows(_read_back(spark, tmp_path / "plain", "parquet"), rows)
    # A partition column called "rows": the report's own column steps aside.
    report: Report[WriteReport] = Report()
    named = frame.withColumnRenamed("day", "rows")
    skewed(named, target_file_rows=50_000).write.partitionBy("rows").parquet(str(tmp_path / "rows"), report=report)
    assert report.get.values.columns == ["rows", "write_rows", "size", "files"]
    assert report.get.values["write_rows"].sum() == ROWS
    _same_rows(_read_back(spark, tmp_path / "rows", "parquet").rename({"rows": "day"}), rows)


def test_bad_input_is_refused_before_any_job(spark, events, tmp_path):
    _, frame = events
    api = StatusApi(spark)
    called = time.time()
    path = str(tmp_path / "bad")
    with pytest.raises(ConfigError, match=r"lacks: \['month'\]"):
        skewed(frame).write.partitionBy("month").parquet(path)
    with pytest.raises(ConfigError, match="target_file_bytes must be a positive int"):
        skewed(frame, target_file_bytes=0)
    with pytest.raises(ConfigError, match="target_file_rows must be a positive int"):
        skewed(frame, target_file_rows=-5)
    with pytest.raises(ConfigError, match="format 'avro'.*target_file_rows"):
        skewed(frame).write.partitionBy("day").format("avro").save(path)
    with pytest.raises(ConfigError, match="compression 'lzo'.*target_file_rows"):
        skewed(frame).write.partitionBy("day").parquet(path, compression="lzo")
    with pytest.raises(ConfigError, match="mode must be one of"):
        skewed(frame).write.mode("replace")
    with pytest.raises(ConfigError, match="bucketBy"):
        skewed(frame).write.bucketBy(4, "id")
    with pytest.raises(ConfigError, match="insertInto takes the table's partition columns: drop partitionBy"):
        skewed(frame).write.partitionBy("day").insertInto("events")
    with pytest.raises(ConfigTypeError, match="column names"):
        skewed(frame).write.partitionBy(F.col("day"))
    with pytest.raises(ConfigError, match="write does not read min_skew"):
        skewed(frame, min_skew=2).write.partitionBy("day").parquet(path)
    assert api.jobs_submitted_since(called) == []


def test_millions_of_rows_with_a_hot_value(spark, tmp_path):
    rows = 3_000_000
    frame = spark.spark.range(rows).selectExpr(
        "id", "IF(id % 10 < 6, 20260101, 20260102 + id % 97) AS day", "id * 7 % 1000003 AS v"
    )
    target = 2 << 20
    report: Report[WriteReport] = Report()
    skewed(frame, target_file_bytes=target).write.partitionBy("day").parquet(str(tmp_path / "big"), report=report)
    back = spark.spark.read.parquet(str(tmp_path / "big"))
    # The day read back is typed by partition inference (int): hashed as the long it was.
    digest = ["count(*) AS n", "sum(xxhash64(id, v, CAST(day AS BIGINT)) % 1000000007) AS h"]
    assert back.selectExpr(*digest).collect() == frame.selectExpr(*digest).collect()
    files = _files(tmp_path / "big", ".parquet")
    assert files.height == report.get.files and report.get.tasks >= 8
    hot = files.filter(pl.col("value") == "day=20260101")["bytes"].sort()
    assert hot.len() >= 4 and 0.5 * target <= hot[1] and hot[-1] <= 1.5 * target


# Sorts


def test_a_sort_with_heavy_ties_spreads_them_and_is_sparks_order(spark, events):
    rows, frame = events
    api = StatusApi(spark)
    # Every range partition a task of its own (adaptive execution would pack these small ones).
    with run_settings(spark, {"spark.sql.adaptive.coalescePartitions.enabled": "false"}):
        before = api.last_stage()
        ours = pl.from_arrow(skewed(frame).orderBy("day", ascending=False).toArrow())
        ours_stages = api.stages_after(before)
        before = api.last_stage()
        theirs = pl.from_arrow(frame.orderBy(F.col("day").desc()).toArrow())
        theirs_stages = api.stages_after(before)
    assert isinstance(ours, pl.DataFrame) and isinstance(theirs, pl.DataFrame)
    # Spark's order of the sort key, row for row; the tied rows in any order.
    assert ours["day"].equals(theirs["day"])
    _same_rows(ours, rows)
    ours_tasks = _sorted_rows(api, ours_stages)
    assert max(ours_tasks) <= 2 * sum(ours_tasks) / len(ours_tasks), ours_tasks
    # Spark's own range partitions give the hot day's 60 % to one task.
    assert max(_sorted_rows(api, theirs_stages)) >= 0.55 * ROWS
    # Several columns, each its own direction, as DataFrame.orderBy takes them.
    mixed = skewed(frame).orderBy(["text", F.col("day")], ascending=[False, True]).select("text", "day")
    expected = frame.orderBy(F.col("text").desc(), F.col("day").asc()).select("text", "day")
    assert mixed.toArrow().equals(expected.toArrow())


def _sorted_rows(api: StatusApi, stages: list[dict]) -> list[int]:
    """The rows each task of the last stage that read a shuffle (the sort's) read."""
    read = [_task_rows(api, s) for s in sorted(stages, key=lambda s: s["stageId"]) if s["status"] == "COMPLETE"]
    return [rows for rows in read if sum(rows)][-1]


def _task_rows(api: StatusApi, stage: dict) -> list[int]:
    return [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in api.tasks(stage) if t["status"] == "SUCCESS"]
