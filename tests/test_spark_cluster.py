"""session(master="cluster:N") against a real Spark standalone cluster on loopback.

The ``spark_cluster`` fixture is one two-worker cluster for this module, stopped when it
ends (not kept through the modules after it); the tests here check that the Spark Connect
server really drives it, that Python UDFs run in two executor JVMs with this interpreter,
and that closing a session, or failing to start one, leaves no process or directory behind.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

import keysplit
from conftest import live_group_members
from keysplit.spark import SparkConnectError, session
from keysplit.spark.cluster import StandaloneCluster, cluster_workers
from keysplit.spark.session import Session
from reports import aggregated

TIMEOUT = 180.0
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
_LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}  # 127.0.0.1, and as IPv4-mapped IPv6


@pytest.fixture(scope="module")
def spark_cluster():
    """One real Spark standalone cluster of two one-core workers on loopback, driven by an
    embedded Spark Connect server (session(master="cluster:2"))."""
    with session(master="cluster:2", query_timeout=TIMEOUT) as handle:
        yield handle
    # Closing left no process of the server's or the cluster's group, and no directory.
    assert live_group_members(handle.server.pid) == []
    assert live_group_members(handle.cluster.pid) == []
    assert not handle.cluster.directory.exists()


def _listening_addresses(pgid: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp spells them) of the TCP sockets that the
    processes of group ``pgid`` listen on."""
    inodes = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            if int(text[text.rindex(")") + 2 :].split()[2]) != pgid:
                continue
            for fd in (stat.parent / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
        except OSError:
            continue
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == _LISTEN and fields[9] in inodes:
                addresses.add(fields[1].rsplit(":", 1)[0])
    return addresses


def test_the_server_drives_the_standalone_master(spark_cluster):
    cluster = spark_cluster.cluster
    assert cluster.running and cluster.workers == 2
    assert cluster.master_url == f"spark://127.0.0.1:{cluster.port}"
    conf = spark_cluster.call("conf", lambda: spark_cluster.spark.conf.get("spark.master"), timeout=30.0)
    assert conf == cluster.master_url

    status = cluster.status()
    assert status["status"] == "ALIVE" and status["url"] == cluster.master_url
    assert [w["state"] for w in status["workers"]] == ["ALIVE", "ALIVE"]
    assert all(w["host"] == "127.0.0.1" and w["cores"] == 1 for w in status["workers"])
    [app] = status["activeapps"]
    assert app["state"] == "RUNNING" and app["cores"] == 2
    assert status["coresused"] == 2

    # Every port of the cluster and of the server is on loopback only.
    for pgid in (cluster.pid, spark_cluster.server.pid):
        addresses = _listening_addresses(pgid)
        assert addresses and addresses <= _LOOPBACK, (pgid, addresses)


def test_python_udfs_run_in_two_executor_jvms_with_this_interpreter(spark_cluster):
    def report(batches):
        import os
        import sys

        import pyarrow as pa
        from pyspark import TaskContext

        # Up from this Python worker to the executor JVM that started it.
        pid, jvm = os.getpid(), None
        while pid > 1 and jvm is None:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
            if text[text.index("(") + 1 : text.rindex(")")] == "java":
                jvm = pid
            pid = int(text[text.rindex(")") + 2 :].split()[1])
        with open(f"/proc/{jvm}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().decode().split("\0")
        rows = sum(batch.num_rows for batch in batches)
        yield pa.RecordBatch.from_pydict(
            {
                "partition": [TaskContext.get().partitionId()],
                "rows": [rows],
                "python_pid": [os.getpid()],
                "python": [sys.executable],
                "pgid": [os.getpgid(0)],
                "jvm_pid": [jvm],
                "executor_id": [arguments[arguments.index("--executor-id") + 1]],
                "backend": ["CoarseGrainedExecutorBackend" in " ".join(arguments)],
            }
        )

    schema = (
        "partition long, rows long, python_pid long, python string, pgid long, jvm_pid long, "
        "executor_id string, backend boolean"
    )
    frame = spark_cluster.spark.range(0, 80_000, numPartitions=8).mapInArrow(report, schema)
    rows = [row.asDict() for row in spark_cluster.call("UDF report", frame.collect)]

    assert sorted(row["partition"] for row in rows) == list(range(8))
    assert sum(row["rows"] for row in rows) == 80_000
    assert {row["python"] for row in rows} == {sys.executable}
    assert all(row["backend"] for row in rows)
    # Two executors, each its own JVM in the cluster's process group (not the server's:
    # the server is only the driver). Their Python workers run under PySpark's daemon,
    # which keeps a group of its own.
    assert len({row["executor_id"] for row in rows}) == 2
    assert len({row["jvm_pid"] for row in rows}) == 2
    for pid in {row["jvm_pid"] for row in rows}:
        assert os.getpgid(pid) == spark_cluster.cluster.pid


def _python_workers(handle) -> set[int]:
    """The pids of the Python workers (and their daemons) that ran a UDF query's tasks."""

    def pids(batches):
        import os

        import pyarrow as pa

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "parent": [os.getppid()]})

    frame = handle.spark.range(0, 1_000, numPartitions=3).mapInArrow(pids, "pid long, parent long")
    return {pid for row in handle.call("UDF pids", frame.collect) for pid in (row["pid"], row["parent"])}


def _still_running(pids: set[int], *, within: float = 20.0) -> set[int]:
    deadline = time.monotonic() + within
    while True:
        alive = set()
        for pid in pids:
            try:
                text = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if text[text.rindex(")") + 2] != "Z":
                alive.add(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def test_close_stops_every_process_and_removes_the_directories():
    started = time.monotonic()
    handle = session(master="cluster:1", query_timeout=TIMEOUT)
    startup = time.monotonic() - started
    cluster, server = handle.cluster, handle.server
    try:
        assert "standalone cluster of 1" in repr(handle)
        assert handle.call("count", handle.spark.range(1_000, numPartitions=3).count) == 1_000
        assert live_group_members(cluster.pid, within=0.0)  # the query's executor is in the group
        python = _python_workers(handle)
        assert _still_running(python, within=0.0)
    finally:
        handle.close()
    assert live_group_members(cluster.pid) == []
    assert live_group_members(server.pid) == []
    # The Python daemon and its workers leave with their executor.
    assert _still_running(python) == set()
    assert not cluster.running and not server.running
    assert not cluster.directory.exists() and not server.log_path.parent.exists()
    handle.close()  # idempotent
    cluster.stop()
    print(f"cluster:1 session started in {startup:.1f} s")


def test_a_failed_start_stops_the_cluster(monkeypatch):
    started: list[StandaloneCluster] = []
    start = StandaloneCluster.__init__

    def recorded(self, *args, **kwargs):
        started.append(self)
        start(self, *args, **kwargs)

    monkeypatch.setattr(StandaloneCluster, "__init__", recorded)
    # The server cannot bind its port once the cluster has started.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(SparkConnectError, match=f"port 127.0.0.1:{port} is taken"):
            session(master="cluster:1", port=port)
    [cluster] = started
    assert live_group_members(cluster.pid) == []
    assert not cluster.directory.exists()


@pytest.mark.parametrize("master", ["cluster:0", "cluster:17", "cluster:x", "cluster", "cluster:2 "])
def test_a_malformed_cluster_master_fails_before_starting_anything(master, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("started a process")

    monkeypatch.setattr("subprocess.Popen", refuse)
    started = time.monotonic()
    with pytest.raises(keysplit.ConfigError, match="'cluster:N' with N workers from 1 to 16") as caught:
        session(master=master)
    assert isinstance(caught.value, ValueError)
    assert time.monotonic() - started < 5
    with pytest.raises(keysplit.ConfigError, match="1 to 16 workers"):
        StandaloneCluster(0)
    with pytest.raises(keysplit.ConfigTypeError, match="workers must be an int, got str") as wrong:
        StandaloneCluster("2")
    assert isinstance(wrong.value, TypeError)


def test_a_master_that_is_not_a_str_is_a_config_type_error(monkeypatch):
    monkeypatch.setattr("subprocess.Popen", lambda *_args, **_kwargs: pytest.fail("started a process"))
    with pytest.raises(keysplit.ConfigTypeError, match="master must be a str") as caught:
        session(master=2)
    assert isinstance(caught.value, TypeError)
    assert cluster_workers("local[2]") is None and cluster_workers("spark://host:7077") is None
    assert cluster_workers("cluster:3") == 3


def test_a_dead_worker_is_named_with_its_exit_code_and_its_logs_errors(spark_cluster):
    # A cluster of its own, whose worker is stopped; an action on a session that drives it
    # then fails with the worker's exit and the cause its log gives.
    cluster = StandaloneCluster(1, startup_timeout=TIMEOUT)
    try:
        [worker] = cluster.worker_pids
        assert cluster.exit_report() is None
        os.kill(worker, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while cluster.running and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not cluster.running
        handle = Session(
            spark_cluster.spark, url=spark_cluster.url, server=spark_cluster.server, query_timeout=30.0, cluster=cluster
        )

        def lost_executors():
            raise RuntimeError("the query lost its executors")

        with pytest.raises(SparkConnectError) as caught:
            handle.call("count", lost_executors)
        message = str(caught.value)
        print(message)
        assert message.startswith(f"Spark count failed on the standalone cluster at {cluster.master_url}: ")
        assert f"the standalone cluster's worker 0 (pid {worker}) exited with code 143 (SIGTERM)" in message
        assert "RECEIVED SIGNAL TERM" in message  # the cause, from the worker's log
        assert "the standalone cluster's master" not in message  # it still runs
        assert cluster.exit_report() in message
    finally:
        cluster.stop()
    assert live_group_members(cluster.pid) == []


def test_aggregate_on_the_cluster_equals_groupby(spark_cluster, tmp_path):
    # A Spark DataFrame routed in the executor JVMs, and a client stream ingested as files
    # that those executors read: both equal Spark's own groupBy.
    import numpy as np
    import polars as pl

    from keysplit.spark import reference

    rng = np.random.default_rng(3)
    rows = 400_000
    data = pl.DataFrame(
        {"key": np.minimum(rng.zipf(1.5, rows), 20_000).astype(np.int64), "value": rng.integers(0, 100, rows)}
    )
    for index, part in enumerate(data.iter_slices(rows // 4)):
        part.write_parquet(tmp_path / f"part-{index}.parquet")
    frame = spark_cluster.spark.read.parquet(str(tmp_path))
    aggs = ["count", "sum(value)", "mean(value)"]
    want = pl.from_arrow(
        spark_cluster.call("reference", reference(frame, key="key", aggs=aggs).toArrow, timeout=TIMEOUT)
    )
    want = want.sort("key")
    on_executors, report = aggregated(
        frame, aggs=aggs, grouper="pdstream", workers=8, session=spark_cluster, output="polars", timeout=TIMEOUT
    )
    assert on_executors.equals(want)
    assert report.routed_on == "executors" and report.sources >= 2 and sum(report.spark_loads) == rows
    from_client, report = aggregated(
        data, aggs=aggs, grouper="pdstream", workers=8, session=spark_cluster, output="polars", timeout=TIMEOUT
    )
    assert from_client.equals(want)
    assert report.ingestion == "files" and report.disagreements() == []
