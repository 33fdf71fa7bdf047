"""Sessions failing fast, a server killed mid-run, and resuming from the checkpoint."""

from __future__ import annotations

import json
import re
import socket
import time

import polars as pl
import pytest

import keysplit
from conftest import live_group_members
from keysplit.spark import SparkConnectError, aggregate, session
from reports import aggregated

TIMEOUT = 180.0
AGGS = ["count", "sum(value)", "mean(value)", "distinct(value)"]


def _stream() -> pl.DataFrame:
    keys = pl.concat(list(keysplit.datasets.zipf(keys=300, tuples=8_000, z=1.6, seed=11)))
    return keys.with_columns(value=(pl.int_range(keys.height, dtype=pl.Int64) * 31) % 500)


def test_taken_port_fails_fast():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(SparkConnectError, match=f"port 127.0.0.1:{port} is taken"):
            session(port=port)
        assert time.monotonic() - started < 30


def test_missing_java_fails_fast(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkConnectError, match="needs Java 17 or newer"):
        session()


def test_unreachable_server_fails_fast_without_leaking_the_token():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(SparkConnectError) as caught:
        session(f"sc://127.0.0.1:{port}/;token=s3cr3t-value;use_ssl=true")
    assert time.monotonic() - started < 30
    assert "unreachable" in str(caught.value)
    assert "s3cr3t" not in str(caught.value) and "token=***" in str(caught.value)
    with pytest.raises(ValueError, match="sc://host:port") as bad:
        session("http://example.invalid/;token=s3cr3t")
    assert "s3cr3t" not in str(bad.value)


def test_a_listener_that_never_answers_is_named_as_such():
    # A TCP port that accepts connections and says nothing: not a Spark Connect server, or
    # one too busy to answer. The error says which wait ran out and how to lengthen it.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(SparkConnectError, match="accepts connections but") as caught:
            session(f"sc://127.0.0.1:{port}/;token=s3cr3t-value", startup_timeout=10.0)
    message = str(caught.value)
    # Within the wait, or gRPC gave up first: either way the message says which.
    assert re.search(r"did not answer a first query within 10 s.*startup_timeout=|a first query failed: ", message)
    # Nothing of the failed session is left for PySpark's later calls to pick up.
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert ConnectSession.getActiveSession() is None or not ConnectSession.getActiveSession().client.is_closed
    assert "s3cr3t" not in message and "_MultiThreadedRendezvous" not in message


def test_killed_server_then_resume_equals_the_uninterrupted_run(spark, tmp_path):
    data = _stream()
    options = dict(
        key="key",
        grouper="pdstream",
        workers=4,
        aggs=AGGS,
        window=2_000,
        batch_rows=1_000,
        output="polars",
        timeout=TIMEOUT,
    )
    uninterrupted = aggregate(data, session=spark, **options)

    doomed = session(query_timeout=TIMEOUT)
    pid = doomed.server.pid

    def kill_after_second_window(report):
        if report.window == 1:
            doomed.server.kill()

    try:
        with pytest.raises(SparkConnectError) as caught:
            aggregate(data, session=doomed, checkpoint=tmp_path, on_window=kill_after_second_window, **options)
    finally:
        doomed.close()
    message = str(caught.value)
    assert "exited" in message or "unreachable" in message
    assert "2 finished windows are checkpointed" in message and "resume" in message
    assert live_group_members(pid) == []  # no process of the killed server's group is left
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [w["window"] for w in manifest["windows"]] == [0, 1]

    resumed, report = aggregated(data, session=spark, checkpoint=tmp_path, **options)
    assert [w.resumed for w in report.windows] == [True, True, False, False]
    assert resumed.equals(uninterrupted)
    assert resumed["count"].sum() == data.height  # no tuple lost or counted twice

    # Another run's arguments may not reuse the directory.
    with pytest.raises(ValueError, match="differing: workers"):
        aggregate(data, session=spark, checkpoint=tmp_path, **{**options, "workers": 5})


def test_interrupted_client_then_resume_equals_the_uninterrupted_run(spark, tmp_path):
    # Ctrl-C in the client after its third window: the checkpoint keeps the finished
    # windows, and a re-run finishes the stream without losing or repeating a tuple.
    data = _stream()
    options = dict(
        key="key",
        grouper="w_choices",
        workers=3,
        aggs=["count", "sum(value)"],
        window=2_000,
        batch_rows=700,
        output="polars",
        timeout=TIMEOUT,
    )
    uninterrupted = aggregate(data, session=spark, **options)

    def interrupt_after_third_window(report):
        if report.window == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        aggregate(data, session=spark, checkpoint=tmp_path, on_window=interrupt_after_third_window, **options)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [w["window"] for w in manifest["windows"]] == [0, 1, 2]

    resumed, report = aggregated(data, session=spark, checkpoint=tmp_path, **options)
    assert [w.resumed for w in report.windows] == [True, True, True, False]
    assert resumed.equals(uninterrupted)
    assert resumed["count"].sum() == data.height
    assert resumed["sum_value"].sum() == data["value"].sum()
