"""keysplit.spark.stream_aggregate on a real server: files fed into a directory while the
query runs, a server killed mid-stream and the query restarted from its checkpoint; the
table against Spark's own groupBy, and the routing against each source's keys routed
offline in order."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import polars as pl
import pytest

import keysplit
from conftest import live_group_members
from keysplit import ConfigError
from keysplit.spark import reference, session
from keysplit.spark.routing import WORKER_COLUMN
from keysplit.spark.streaming import StreamAggregation, stream_aggregate

AGGS = ["count", "sum(value)", "mean(value)", "distinct(value)"]
SCHEMA = "key string, seq long, value long"
WORKERS = 6
SOURCES = 2
TIMEOUT = 180.0


def _stream(tuples: int = 40_000) -> pl.DataFrame:
    keys = pl.concat(list(keysplit.datasets.zipf(keys=2_000, tuples=tuples, z=1.5, seed=5)))
    return keys.select(
        pl.col("key").cast(pl.String),
        seq=pl.int_range(pl.len(), dtype=pl.Int64),
        value=(pl.int_range(pl.len(), dtype=pl.Int64) * 37) % 101,
    )


def _feed(directory: Path, data: pl.DataFrame, files: range, rows: int, pause: float) -> None:
    """Writes files ``files`` of ``rows`` rows each into ``directory``, each renamed into place
    whole, ``pause`` seconds apart: a source that keeps arriving while the query runs."""
    for i in files:
        part = data.slice(i * rows, rows)
        hidden = directory / f".part-{i:04d}.tmp"
        part.write_parquet(hidden)
        os.replace(hidden, directory / f"part-{i:04d}.parquet")
        time.sleep(pause)


def _start(spark, base: Path) -> StreamAggregation:
    stream = spark.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(base / "in"))
    return stream_aggregate(
        stream,
        aggs=AGGS,
        workers=WORKERS,
        sources=SOURCES,
        order_by="seq",
        checkpoint=base / "checkpoint",
        output=base / "out",
        session=spark,
    )


def _wait_for(run: StreamAggregation, rows: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if run.query.exception() is not None:
            raise AssertionError(f"the query failed: {run.query.exception()}")
        if run.metrics()["rows"].sum() >= rows:
            return
        time.sleep(0.5)
    raise AssertionError(f"the query did not reach {rows} rows in {TIMEOUT} s")


def _expected(spark, base: Path) -> pl.DataFrame:
    frame = spark.spark.read.parquet(str(base / "in"))
    return pl.from_arrow(reference(frame, key="key", aggs=AGGS).toArrow()).sort("key")


def _offline_cells(spark, base: Path) -> pl.DataFrame:
    """The same, routing each source's keys in ``seq`` order with one grouper per source,
    the sources assigned by Spark's own ``pmod(xxhash64(seq), sources)``."""
    from pyspark.sql import functions as F

    rows = spark.spark.read.parquet(str(base / "in")).select(
        "key", "seq", F.pmod(F.xxhash64("seq"), F.lit(SOURCES)).alias("source")
    )
    table = pl.from_arrow(rows.toArrow()).sort("seq")
    cells = []
    for (source,), part in table.group_by("source"):
        grouper = keysplit.Grouper("elastic", workers=WORKERS, seed=0)
        cells.append(part.select("key", **{WORKER_COLUMN: pl.Series(grouper.route(part["key"])).cast(pl.Int32)}))
        assert source in range(SOURCES)
    counted = pl.concat(cells).group_by(WORKER_COLUMN, "key").agg(pl.len().cast(pl.Int64).alias("tuples"))
    return counted.sort(WORKER_COLUMN, "key")


def test_a_stream_fed_while_running_equals_groupBy_and_the_offline_routing(spark, tmp_path):
    data = _stream()
    (tmp_path / "in").mkdir()
    run = _start(spark, tmp_path)
    try:
        _feed(tmp_path / "in", data, range(4), 10_000, pause=1.0)
        _wait_for(run, data.height)
    finally:
        run.query.stop()
    result = run.result()
    assert result.equals(_expected(spark, tmp_path))
    assert result["count"].sum() == data.height  # nothing lost or counted twice
    # The table is plain Parquet, for any reader; of the running partials the two newest stay.
    assert pl.read_parquet(tmp_path / "out" / "table" / "*.parquet").sort("key").equals(result)
    assert len(list((tmp_path / "out" / "merged").iterdir())) <= 2
    assert run.routing().equals(_offline_cells(spark, tmp_path))
    metrics = run.metrics()
    assert metrics["rows"].sum() == data.height and metrics["batch"].is_sorted()
    assert all(len(loads) == WORKERS for loads in metrics["loads"])
    assert (metrics["load_imbalance"] < 0.05).all() and (metrics["replication_factor"] >= 1).all()
    assert (metrics["state_bytes"] > 0).all()


def test_right_after_the_start_result_names_the_wait_and_the_wait_gives_the_whole_input(spark, tmp_path):
    """As a new user runs it: start, ask for the table before any batch has finished
    (refused, naming what to call), then wait for the input that is there and read it."""
    data = _stream(20_000)
    (tmp_path / "in").mkdir()
    run = _start(spark, tmp_path)  # on an empty folder: no batch runs until files arrive
    try:
        run.process_all_available()
        assert run.metrics().is_empty() and run.metrics().columns[:2] == ["batch", "rows"]
        with pytest.raises(ConfigError, match=r"run\.process_all_available\(\)"):
            run.result()
        _feed(tmp_path / "in", data, range(2), 10_000, pause=0.0)
        run.process_all_available()
        assert run.metrics()["rows"].sum() == data.height
    finally:
        run.query.stop()
    assert run.result().equals(_expected(spark, tmp_path))


def test_a_killed_server_restarted_from_the_checkpoint_routes_and_counts_as_if_uninterrupted(spark, tmp_path):
    data = _stream()
    (tmp_path / "in").mkdir()
    doomed = session(query_timeout=TIMEOUT)
    pid = doomed.server.pid
    try:
        run = _start(doomed, tmp_path)
        _feed(tmp_path / "in", data, range(2), 10_000, pause=0.5)
        _wait_for(run, 10_000)
        doomed.server.kill()
    finally:
        doomed.close()
    assert live_group_members(pid) == []
    before = run.metrics()
    assert 10_000 <= before["rows"].sum() <= 20_000

    # More files arrive while nothing runs; the restarted query takes them and the rest.
    feeder = threading.Thread(target=_feed, args=(tmp_path / "in", data, range(2, 4), 10_000, 1.0))
    feeder.start()
    resumed = _start(spark, tmp_path)
    try:
        feeder.join()
        _wait_for(resumed, data.height)
    finally:
        resumed.query.stop()
    result = resumed.result()
    assert result.equals(_expected(spark, tmp_path))
    assert result["count"].sum() == data.height
    assert resumed.routing().equals(_offline_cells(spark, tmp_path))
    assert resumed.metrics()["rows"].sum() == data.height


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"stream": "batch"}, ValueError, "streaming DataFrame"),
        ({"order_by": "nope"}, ValueError, "column 'nope' is not in the stream"),
        ({"sources": 0}, ValueError, r"sources must be an int in \[1, 1024\]"),
        ({"key": "value2"}, ValueError, "key column 'value2' is not in the DataFrame"),
        ({"aggs": ["median(value)"]}, ValueError, "unknown aggregate 'median'"),
        ({"grouper": "nope"}, ValueError, "nope"),
        ({"session": "sc://nowhere"}, TypeError, "session must be a keysplit.spark.Session"),
    ],
)
def test_bad_arguments_are_refused_before_the_query_starts(spark, tmp_path, change, error, message):
    (tmp_path / "in").mkdir()
    stream = spark.spark.readStream.schema(SCHEMA).parquet(str(tmp_path / "in"))
    if change.get("stream") == "batch":
        stream = spark.spark.range(3)
    arguments = {
        "aggs": ["count"],
        "order_by": "seq",
        "checkpoint": tmp_path / "checkpoint",
        "output": tmp_path / "out",
        "session": spark,
        **{k: v for k, v in change.items() if k != "stream"},
    }
    with pytest.raises(error, match=message):
        stream_aggregate(stream, **arguments)
    assert not (tmp_path / "checkpoint").exists()


def test_another_streams_settings_may_not_reuse_the_table(spark, tmp_path):
    (tmp_path / "in").mkdir()
    stream = spark.spark.readStream.schema(SCHEMA).parquet(str(tmp_path / "in"))
    arguments = {"order_by": "seq", "checkpoint": tmp_path / "checkpoint", "output": tmp_path / "out", "session": spark}
    run = stream_aggregate(stream, workers=4, **arguments)
    run.query.stop()
    with pytest.raises(ValueError, match="differing: workers"):
        stream_aggregate(stream, workers=5, **arguments)


def test_windows_group_the_table_and_end_each_sources_window(spark, tmp_path):
    """A window column (here a tumbling window of 5,000 positions) groups the aggregates,
    and each source's grouper ends a window where its rows' window changes, as a batch
    routing with end_window() there would."""
    data = _stream(20_000).with_columns(pane=pl.col("seq") // 5_000)
    (tmp_path / "in").mkdir()
    stream = (
        spark.spark.readStream.schema(SCHEMA + ", pane long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(tmp_path / "in"))
    )
    # No count among the aggregates: routing() counts the tuples itself.
    aggs = ["sum(value)", "distinct(value)"]
    run = stream_aggregate(
        stream,
        aggs=aggs,
        workers=WORKERS,
        sources=SOURCES,
        order_by="seq",
        window="pane",
        checkpoint=tmp_path / "checkpoint",
        output=tmp_path / "out",
        session=spark,
    )
    try:
        _feed(tmp_path / "in", data, range(2), 10_000, pause=0.5)
        _wait_for(run, data.height)
    finally:
        run.query.stop()
    frame = spark.spark.read.parquet(str(tmp_path / "in"))
    expected = pl.from_arrow(reference(frame, key="key", aggs=aggs, window="pane").toArrow()).sort("pane", "key")
    assert run.result().equals(expected)

    from pyspark.sql import functions as F

    rows = pl.from_arrow(
        frame.select("key", "seq", "pane", F.pmod(F.xxhash64("seq"), F.lit(SOURCES)).alias("source")).toArrow()
    ).sort("seq")
    cells = []
    for _, part in rows.group_by("source"):
        grouper = keysplit.Grouper("elastic", workers=WORKERS, seed=0)
        ids = []
        for i, (_, pane) in enumerate(part.group_by("pane", maintain_order=True)):
            if i:
                grouper.end_window()
            ids.append(pl.Series(grouper.route(pane["key"])))
        cells.append(part.select("pane", "key", **{WORKER_COLUMN: pl.concat(ids).cast(pl.Int32)}))
    offline = pl.concat(cells).group_by("pane", WORKER_COLUMN, "key").agg(pl.len().cast(pl.Int64).alias("tuples"))
    assert run.routing().equals(offline.sort("pane", WORKER_COLUMN, "key"))
