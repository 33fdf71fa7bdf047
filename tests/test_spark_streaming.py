"""keysplit.spark.stream_aggregate on a real server: files written by a feeder while the
query runs, sinks chosen as a user would (a ``foreachBatch`` function, Spark's Parquet file
sink, the memory sink), a server killed mid-stream and the query resumed from its
checkpoint; the output read through the sink against an exact group-by, and the routing
against each source's keys routed offline in order."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import polars as pl
import pytest

import keysplit
from conftest import live_group_members
from keysplit.spark import reference, session, stream_aggregate, stream_metrics
from keysplit.spark.join_grid import spark_hash
from keysplit.spark.routing import WORKER_COLUMN
from keysplit.spark.streaming import source_values

AGGS = ["count", "sum(value)", "mean(value)", "distinct(value)"]
SCHEMA = "key string, seq long, value long, ts timestamp"
WORKERS = 6
SOURCES = 2
TIMEOUT = 180.0
#: Seconds of event time per row, and the tumbling window and watermark delay over them.
TICK = 1
WINDOW = "1000 seconds"
DELAY = "10 seconds"


def _stream(tuples: int = 40_000) -> pl.DataFrame:
    keys = pl.concat(list(keysplit.datasets.zipf(keys=2_000, tuples=tuples, z=1.5, seed=5)))
    seq = pl.int_range(pl.len(), dtype=pl.Int64)
    return keys.select(
        pl.col("key").cast(pl.String),
        seq=seq,
        value=(seq * 37) % 101,
        ts=((seq * TICK + 1_700_000_000) * 1_000_000).cast(pl.Datetime("us", "UTC")),
    )


def _feed(directory: Path, data: pl.DataFrame, files: range, rows: int, pause: float) -> None:
    """Writes files ``files`` of ``rows`` rows each into ``directory``, each renamed into place
    whole, ``pause`` seconds apart: a source that keeps arriving while the query runs."""
    for i in files:
        part = data.slice(i * rows, rows)
        hidden = directory / f".part-{i:04d}.tmp"
        part.write_parquet(hidden)
        hidden.rename(directory / f"part-{i:04d}.parquet")
        time.sleep(pause)


def _feeder(directory: Path, data: pl.DataFrame, files: range, rows: int, pause: float) -> subprocess.Popen:
    """The same from a process of its own, as an independent producer would write."""
    whole = directory.parent / "feed.parquet"
    data.write_parquet(whole)
    script = textwrap.dedent(
        f"""
        import time, polars as pl
        from pathlib import Path
        data, directory = pl.read_parquet({str(whole)!r}), Path({str(directory)!r})
        for i in range({files.start}, {files.stop}):
            hidden = directory / f".part-{{i:04d}}.tmp"
            data.slice(i * {rows}, {rows}).write_parquet(hidden)
            hidden.rename(directory / f"part-{{i:04d}}.parquet")
            time.sleep({pause})
        """
    )
    return subprocess.Popen([sys.executable, "-c", script])


def _read_stream(spark, base: Path):
    return spark.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(base / "in"))


def _wait_for(query, rows: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        if stream_metrics(query)["rows"].sum() >= rows:
            return
        time.sleep(0.5)
    raise AssertionError(f"the query did not reach {rows} rows in {TIMEOUT} s")


def _input(spark, base: Path):
    return spark.spark.read.schema(SCHEMA).parquet(str(base / "in"))


def _offline_cells(frame, window: str) -> pl.DataFrame:
    """The tuples per (window, worker, key) of ``frame``'s rows, each source's keys routed
    offline in ``seq`` order with one grouper per source that ends a window where the rows'
    ``window`` changes; the sources assigned by Spark's own ``pmod(xxhash64(seq), sources)``."""
    from pyspark.sql import functions as F

    rows = frame.select("key", "seq", window, F.pmod(F.xxhash64("seq"), F.lit(SOURCES)).alias("source"))
    cells = []
    for _, part in pl.from_arrow(rows.toArrow()).sort("seq").group_by("source"):
        grouper = keysplit.Grouper("elastic", workers=WORKERS, seed=0)
        ids = []
        for i, (_, run) in enumerate(part.group_by(window, maintain_order=True)):
            if i:
                grouper.end_window()
            ids.append(pl.Series(grouper.route(run["key"])))
        cells.append(part.select(window, "key", **{WORKER_COLUMN: pl.concat(ids).cast(pl.Int32)}))
    groups = [window, WORKER_COLUMN, "key"]
    return pl.concat(cells).group_by(groups).agg(pl.len().cast(pl.Int64).alias("count")).sort(groups)


def test_updates_written_by_a_users_foreachBatch_equal_groupBy_and_metrics_reach_a_listener(
    spark, tmp_path, monkeypatch
):
    """Update mode into a user's ``foreachBatch`` (each batch's rows written under its id, so
    a re-run batch overwrites itself), on paths given as Hadoop URIs: the last row of each key
    equals Spark's groupBy, and each batch's figures reach both the query's progress and a
    StreamingQueryListener without a job of their own."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener

    monkeypatch.chdir(tmp_path)
    data = _stream()
    (tmp_path / "in").mkdir()
    updates = f"file://{tmp_path}/updates"

    def write(batch, batch_id):
        batch.withColumn("batch", F.lit(batch_id)).write.mode("overwrite").parquet(f"{updates}/batch={batch_id}")

    heard: list = []
    ended = threading.Event()

    class Heard(StreamingQueryListener):
        def onQueryStarted(self, event):  # noqa: N802 - PySpark's names
            pass

        def onQueryProgress(self, event):  # noqa: N802
            heard.append(event.progress)

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            ended.set()

    listener = Heard()
    spark.spark.streams.addListener(listener)
    table = stream_aggregate(_read_stream(spark, tmp_path), aggs=AGGS, workers=WORKERS, order_by="seq", session=spark)
    assert table.isStreaming and table.columns == ["key", "count", "sum_value", "mean_value", "distinct_value"]
    query = (
        table.writeStream.outputMode("update")
        .foreachBatch(write)
        .option("checkpointLocation", f"file://{tmp_path}/checkpoint")
        .start()
    )
    try:
        _feed(tmp_path / "in", data, range(4), 10_000, pause=1.0)
        _wait_for(query, data.height)
        metrics = stream_metrics(query)
        deadline = time.monotonic() + TIMEOUT
        while stream_metrics(heard)["rows"].sum() < data.height and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        query.stop()
        # PySpark Connect's removeListener holds the listener bus's lock while it waits for
        # the bus's thread to end, and that thread takes the lock to deliver an event: an
        # event in flight (this query's end) deadlocks them. Its end heard first, no event
        # is left to deliver.
        end_heard = ended.wait(TIMEOUT)
        if end_heard:
            spark.spark.streams.removeListener(listener)
    assert end_heard, "the listener never heard the query end"
    written = pl.read_parquet(tmp_path / "updates" / "**" / "*.parquet", hive_partitioning=False)
    latest = written.sort("batch").group_by("key", maintain_order=True).last().drop("batch").sort("key")
    expected = pl.from_arrow(reference(_input(spark, tmp_path), key="key", aggs=AGGS).toArrow()).sort("key")
    assert latest.equals(expected)
    assert latest["count"].sum() == data.height  # nothing lost or counted twice
    assert not (tmp_path / "file:").exists()  # the URIs went to Hadoop, not to a folder named "file:"

    assert metrics["rows"].sum() == data.height and metrics["batch"].is_sorted()
    assert all(len(loads) == WORKERS and sum(loads) == rows for loads, rows in metrics.select("loads", "rows").rows())
    assert (metrics["load_imbalance"] < 0.05).all()
    # γ: the hot keys are on several workers, every key on at least one (up to the estimate).
    assert (metrics["replication_factor"] > 1).all() and (metrics["partials"] >= metrics["keys"] * 0.97).all()
    assert (metrics["grouper_state_bytes"] > 0).all() and (metrics["state_rows"] > 0).all()
    assert metrics["late_rows"].sum() == 0
    assert stream_metrics(heard).select("batch", "rows", "loads").equals(metrics.select("batch", "rows", "loads"))

    # One source per state partition (the session's 8 shuffle partitions), each holding
    # its grouper: the routing ran on 8 tasks side by side.
    groupers = spark.spark.read.format("statestore").option("operatorId", 1).option("stateVarName", "grouper")
    held = groupers.load(f"file://{tmp_path}/checkpoint").select("partition_id").toPandas()
    partitions = int(spark.spark.conf.get("spark.sql.shuffle.partitions"))
    assert sorted(held["partition_id"]) == list(range(partitions))


def test_closed_windows_reach_a_parquet_sink_once_across_a_killed_server(spark, tmp_path):
    """The issue's check: a feeder process writes while the query runs; the server is
    killed mid-stream and the query resumed from its checkpoint on another server. Spark's
    Parquet file sink, in append mode, gets each closed window once per worker and key: the
    tuples per (window, worker, key) equal an uninterrupted routing of each source's rows,
    their sums per (window, key) equal a groupBy, and the state data source shows the
    closed windows evicted."""
    from pyspark.sql import functions as F

    data = _stream()
    (tmp_path / "in").mkdir()
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def start(handle):
        stream = _read_stream(handle, tmp_path).withWatermark("ts", DELAY)
        table = stream_aggregate(
            stream,
            aggs=["count", "sum(value)"],
            workers=WORKERS,
            sources=SOURCES,
            order_by="seq",
            window=F.window("ts", WINDOW),
            per_worker=True,
            session=handle,
        )
        assert table.columns == ["window", WORKER_COLUMN, "key", "count", "sum_value"]
        writer = table.writeStream.outputMode("append").format("parquet").option("path", str(sink))
        return writer.option("checkpointLocation", str(checkpoint)).start()

    doomed = session(query_timeout=TIMEOUT)
    pid = doomed.server.pid
    feeder = _feeder(tmp_path / "in", data, range(8), 5_000, pause=1.0)
    try:
        query = start(doomed)
        _wait_for(query, 10_000)
        doomed.server.kill()
    finally:
        doomed.close()
    assert live_group_members(pid) == []
    resumed = start(spark)
    try:
        assert feeder.wait(timeout=TIMEOUT) == 0
        resumed.processAllAvailable()
    finally:
        resumed.stop()

    written = pl.from_arrow(
        spark.spark.read.parquet(str(sink)).select(F.col("window.start").alias("start"), "*").drop("window").toArrow()
    )
    # The windows still open: the last one, which the watermark (10 s behind the newest
    # row) has not passed.
    newest = data["ts"].max()
    open_windows = pl.from_arrow(
        _input(spark, tmp_path)
        .select(F.window("ts", WINDOW).alias("w"))
        .where(F.col("w.end") > F.lit(newest) - F.expr(f"INTERVAL {DELAY}"))
        .select("w.start")
        .distinct()
        .toArrow()
    )["start"]
    cells = _offline_cells(_input(spark, tmp_path).withColumn("start", F.window("ts", WINDOW).start), "start")
    closed = cells.filter(~pl.col("start").is_in(open_windows.to_list()))
    assert closed.height and written.height == closed.height  # each cell once
    assert written.sort("start", WORKER_COLUMN, "key").select(closed.columns).equals(closed)
    by_key = written.group_by("start", "key").agg(pl.col("count").sum(), pl.col("sum_value").sum()).sort("start", "key")
    rows = _input(spark, tmp_path).select(F.window("ts", WINDOW).start.alias("start"), "key", "value")
    expected = rows.groupBy("start", "key").agg(F.count("*").alias("count"), F.sum("value").alias("sum_value"))
    expected_table = pl.from_arrow(expected.toArrow()).filter(~pl.col("start").is_in(open_windows.to_list()))
    assert by_key.equals(expected_table.sort("start", "key"))

    # The aggregation is the query's stateful operator 0 (the routing is 1): what it holds
    # now is the open windows' rows only.
    state = spark.spark.read.format("statestore").option("operatorId", 0).load(str(checkpoint))
    held = pl.from_arrow(state.select(F.col("key.keysplit_window_start").alias("start")).toArrow())["start"]
    assert held.len() and set(held.unique()) <= set(open_windows)


def test_a_column_window_groups_the_table_and_ends_each_sources_window(spark, tmp_path):
    """A window column (here panes of 5,000 positions) groups the aggregates, and each
    source's grouper ends a window where its rows' pane changes, as a batch routing with
    end_window() there would; the whole table in complete mode into the memory sink."""
    data = _stream(20_000).with_columns(pane=pl.col("seq") // 5_000)
    (tmp_path / "in").mkdir()
    _feed(tmp_path / "in", data.drop("pane"), range(2), 10_000, pause=0.0)
    from pyspark.sql import functions as F

    stream = _read_stream(spark, tmp_path).withColumn("pane", F.floor(F.col("seq") / 5_000))
    aggs = ["count", "distinct(value)"]
    tables = {
        "by_key": stream_aggregate(
            stream, aggs=aggs, workers=WORKERS, sources=SOURCES, order_by="seq", window="pane", session=spark
        ),
        "by_worker": stream_aggregate(
            stream,
            aggs=["count"],
            workers=WORKERS,
            sources=SOURCES,
            order_by="seq",
            window="pane",
            per_worker=True,
            session=spark,
        ),
    }
    for name, table in tables.items():
        query = (
            table.writeStream.outputMode("complete")
            .format("memory")
            .queryName(f"panes_{name}")
            .option("checkpointLocation", str(tmp_path / name))
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    frame = _input(spark, tmp_path).withColumn("pane", F.floor(F.col("seq") / 5_000))
    expected = pl.from_arrow(reference(frame, key="key", aggs=aggs, window="pane").toArrow()).sort("pane", "key")
    assert pl.from_arrow(spark.spark.table("panes_by_key").toArrow()).sort("pane", "key").equals(expected)

    offline = _offline_cells(frame, "pane")
    groups = ["pane", WORKER_COLUMN, "key"]
    routed = pl.from_arrow(spark.spark.table("panes_by_worker").toArrow()).sort(groups)
    assert routed.equals(offline)


@pytest.mark.parametrize(("sources", "partitions"), [(1, 1), (4, 4), (8, 8), (3, 8), (10, 4), (1024, 200)])
def test_each_source_gets_a_state_partition_of_its_own_while_there_are_free_ones(sources, partitions):
    values = source_values(sources, partitions)
    assert len(set(values)) == sources
    landed = [spark_hash((v,), ("int",)) % partitions for v in values]
    assert landed == [s % partitions for s in range(sources)]


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"stream": "batch"}, ValueError, "streaming DataFrame"),
        ({"order_by": "nope"}, ValueError, "column 'nope' is not in the stream"),
        ({"order_by": []}, ValueError, "order_by names the columns"),
        ({"sources": 0}, ValueError, r"sources must be None or an int in \[1, 1024\]"),
        ({"key": "value2"}, ValueError, "key column 'value2' is not in the DataFrame"),
        ({"aggs": ["median(value)"]}, ValueError, "unknown aggregate 'median'"),
        ({"aggs": ["sum(nope)"]}, ValueError, "column 'nope' is not in the stream"),
        ({"window": "nope"}, ValueError, "column 'nope' is not in the stream"),
        ({"grouper": "nope"}, ValueError, "nope"),
        ({"per_worker": "yes"}, TypeError, "per_worker must be True or False"),
        ({"stream": "worker"}, ValueError, "may not have a column 'worker'"),
        ({"session": "sc://nowhere"}, TypeError, "session must be a keysplit.spark.Session"),
    ],
)
def test_bad_arguments_are_refused_before_any_query(spark, tmp_path, change, error, message):
    (tmp_path / "in").mkdir()
    stream = _read_stream(spark, tmp_path)
    if change.get("stream") == "batch":
        stream = spark.spark.range(3)
    elif change.get("stream") == "worker":
        from pyspark.sql import functions as F

        stream = stream.withColumn("worker", F.lit(1))
    arguments = {
        "aggs": ["count"],
        "order_by": "seq",
        "session": spark,
        **{k: v for k, v in change.items() if k != "stream"},
    }
    active = len(spark.spark.streams.active)
    with pytest.raises(error, match=message):
        stream_aggregate(stream, **arguments)
    assert len(spark.spark.streams.active) == active


def test_a_checkpoint_of_other_settings_stops_the_query_and_large_integers_stay_exact(spark, tmp_path):
    from pyspark.errors import StreamingQueryException

    (tmp_path / "in").mkdir()
    _feed(tmp_path / "in", _stream(2_000), range(1), 2_000, pause=0.0)

    def run(workers: int, checkpoint: Path, stream=None) -> None:
        table = stream_aggregate(
            stream if stream is not None else _read_stream(spark, tmp_path),
            aggs=["sum(value)", "max(value)"],
            workers=workers,
            order_by="seq",
            session=spark,
        )
        writer = table.writeStream.outputMode("complete").format("memory").queryName(f"settings_{workers}")
        query = writer.option("checkpointLocation", str(checkpoint)).start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    run(4, tmp_path / "checkpoint")
    _feed(tmp_path / "in", _stream(4_000), range(1, 2), 2_000, pause=0.0)
    with pytest.raises(StreamingQueryException, match=r"differing: workers.*new checkpoint"):
        run(5, tmp_path / "checkpoint")

    # Integers beyond 2^53 in a batch with nulls pass the pandas routing step exactly.
    (tmp_path / "big").mkdir()
    values = [2**60 + 1, None, 2**62 + 3]
    pl.DataFrame(
        {"key": ["a", "a", "b"], "seq": [0, 1, 2], "value": values},
        schema={"key": pl.String, "seq": pl.Int64, "value": pl.Int64},
    ).write_parquet(tmp_path / "big" / "part-0.parquet")
    run(
        3,
        tmp_path / "big-checkpoint",
        spark.spark.readStream.schema("key string, seq long, value long").parquet(str(tmp_path / "big")),
    )
    held = sorted(tuple(row) for row in spark.spark.table("settings_3").collect())
    assert held == [("a", 2**60 + 1, 2**60 + 1), ("b", 2**62 + 3, 2**62 + 3)]
