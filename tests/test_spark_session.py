"""Session.call's errors name their true cause, and it retries an action whose Python worker
started late; session() refuses a malformed URL as a configuration error; a process's exit
is described with the errors of its log.

The ``slow_worker_session`` fixture is a real embedded server whose Python workers start
without PySpark's daemon, through a worker module that, when armed, starts 12 s late: later
than the fixed 10 s Spark waits for a new worker to connect back, so that the query fails
with Spark's own "Python worker failed to connect back." The other tests of
:meth:`Session.call` drive it with actions that raise the exceptions PySpark raises.
"""

from __future__ import annotations

import socket
import threading
import time

import grpc
import pytest
from pyspark.errors.exceptions.connect import SparkConnectGrpcException, SparkException

import keysplit
from keysplit.spark import SparkConnectError, session
from keysplit.spark.processes import describe_exit, exit_description, log_errors
from keysplit.spark.session import PythonWorkerTimeoutError, SparkTimeoutError, failure_cause

_SLOW_WORKER = '''
"""PySpark's worker, started {delay} s late once whenever {arm!r} exists."""
import os
import runpy
import time

try:
    os.remove({arm!r})
except FileNotFoundError:
    pass
else:
    time.sleep({delay})
runpy.run_module("pyspark.worker", run_name="__main__")
'''
_WORKER_LATE = (
    "Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, most recent failure: Lost task "
    "0.0 in stage 1.0 (TID 1) (localhost executor driver): org.apache.spark.SparkException: Python worker "
    "failed to connect back."
)


@pytest.fixture(scope="module")
def slow_worker_session(tmp_path_factory):
    """A real embedded server whose next Python worker starts 12 s late once ``arm`` exists."""
    directory = tmp_path_factory.mktemp("slow-worker")
    arm = directory / "arm"
    (directory / "keysplit_slow_worker.py").write_text(_SLOW_WORKER.format(arm=str(arm), delay=12))
    with pytest.MonkeyPatch.context() as patch:
        # The server's environment, which its Python workers inherit (PYTHONPATH is merged
        # into theirs), is taken when it starts.
        patch.setenv("PYTHONPATH", str(directory))
        handle = session(
            master="local[1]",
            query_timeout=180.0,
            **{"spark.python.use.daemon": "false", "spark.python.worker.module": "keysplit_slow_worker"},
        )
    with handle:
        yield handle, arm


def _refused_rpc() -> grpc.RpcError:
    """The real gRPC error of a call to a port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            channel.unary_unary("/spark.connect.SparkConnectService/Config")(b"", timeout=10)
        except grpc.RpcError as error:
            return error
    raise AssertionError("a call to a closed port succeeded")


def test_failure_cause_tells_an_unreachable_server_from_a_late_python_worker():
    refused = _refused_rpc()
    assert refused.code() == grpc.StatusCode.UNAVAILABLE and "failed to connect" in str(refused)
    unreachable = [
        refused,
        # What PySpark raises for it (SparkConnectClient._handle_rpc_error).
        SparkConnectGrpcException(message=str(refused), grpc_status_code=grpc.StatusCode.UNAVAILABLE),
        SparkConnectGrpcException(message="Socket closed", grpc_status_code=grpc.StatusCode.UNAVAILABLE),
        RuntimeError(str(refused)),  # the text alone, status and all
        RuntimeError("[RETRIES_EXCEEDED] The maximum number of retries has been exceeded."),
        ConnectionRefusedError(111, "Connection refused"),
    ]
    for error in unreachable:
        assert failure_cause(error) == "unreachable", error
    # A cause counts too.
    try:
        try:
            raise refused
        except grpc.RpcError as inner:
            raise RuntimeError("collect failed") from inner
    except RuntimeError as outer:
        assert failure_cause(outer) == "unreachable"

    late = [
        SparkException(message=_WORKER_LATE, grpc_status_code=grpc.StatusCode.INTERNAL),
        RuntimeError(_WORKER_LATE),
        RuntimeError("java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back"),
        RuntimeError(
            "java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back "
            "after 60000 ms"
        ),
    ]
    for error in late:
        assert failure_cause(error) == "python-worker", error

    # The server answered: a failed query is its own cause, whatever its text quotes.
    answered = [
        SparkException(
            message="Job aborted due to stage failure: java.net.ConnectException: Connection refused",
            grpc_status_code=grpc.StatusCode.INTERNAL,
        ),
        SparkConnectGrpcException(message="[TABLE_OR_VIEW_NOT_FOUND] nope", grpc_status_code=grpc.StatusCode.INTERNAL),
        ValueError("some query failed"),
        TimeoutError("timed out"),
    ]
    for error in answered:
        assert failure_cause(error) is None, error


def test_call_retries_an_action_whose_python_worker_connected_back_late(slow_worker_session):
    handle, arm = slow_worker_session

    def identity(batches):
        yield from batches

    frame = handle.spark.range(0, 100, numPartitions=1).mapInArrow(identity, "id long")
    runs = []

    def collect():
        runs.append(time.monotonic())
        return frame.collect()

    arm.touch()
    started = time.monotonic()
    rows = handle.call("slow UDF", collect, timeout=120.0)
    assert sorted(row["id"] for row in rows) == list(range(100))
    assert not arm.exists()  # the worker that started late was the armed one
    # The first run failed when Spark gave up on its worker after 10 s, the second ran
    # after the backoff. The retried run's worker is not held back, but Spark gives it a
    # fixed 10 s too: on a machine busy enough to start it later still, one more retry is
    # Session.call doing its job, not a failure.
    assert 2 <= len(runs) <= 1 + len(handle.python_worker_backoffs)
    assert runs[1] - started >= 10.0 + handle.python_worker_backoffs[0]


def test_call_retries_only_a_late_python_worker_and_then_names_the_cause(slow_worker_session, monkeypatch):
    handle, _arm = slow_worker_session
    monkeypatch.setattr(handle, "python_worker_backoffs", (0.05, 0.05))
    names: list[str] = []
    calls = []

    def late_then_fine():
        calls.append(1)
        if len(calls) == 1:
            raise SparkException(message=_WORKER_LATE, grpc_status_code=grpc.StatusCode.INTERNAL)
        return 42

    with handle.observed(names.append):
        assert handle.call("late once", late_then_fine, timeout=30.0) == 42
    assert len(calls) == 2 and names == ["late once"]

    calls.clear()

    def always_late():
        calls.append(1)
        raise SparkException(message=_WORKER_LATE, grpc_status_code=grpc.StatusCode.INTERNAL)

    with pytest.raises(PythonWorkerTimeoutError) as caught:
        handle.call("always late", always_late, timeout=30.0)
    assert len(calls) == 3  # the first run and one retry per backoff
    message = str(caught.value)
    assert "Spark always late failed 3 times" in message and "did not start in time" in message
    assert "busy machine" in message and "Python worker failed to connect back" in message
    assert "unreachable" not in message
    assert isinstance(caught.value, SparkConnectError) and isinstance(caught.value, keysplit.KeysplitError)

    # A retry needs time left before the timeout.
    monkeypatch.setattr(handle, "python_worker_backoffs", (60.0,))
    calls.clear()
    with pytest.raises(PythonWorkerTimeoutError, match="failed once"):
        handle.call("always late", always_late, timeout=30.0)
    assert len(calls) == 1

    # Any other error is raised as it is, after one run.
    calls.clear()

    def broken():
        calls.append(1)
        raise SparkConnectGrpcException(message="[DIVIDE_BY_ZERO] no", grpc_status_code=grpc.StatusCode.INTERNAL)

    with pytest.raises(SparkConnectGrpcException, match="DIVIDE_BY_ZERO"):
        handle.call("broken", broken, timeout=30.0)
    assert len(calls) == 1

    def unreachable():
        calls.append(1)
        raise SparkConnectGrpcException(message=str(_refused_rpc()), grpc_status_code=grpc.StatusCode.UNAVAILABLE)

    calls.clear()
    with pytest.raises(SparkConnectError, match=r"Spark cut off failed: the Spark Connect server at .* is unreachable"):
        handle.call("cut off", unreachable, timeout=30.0)
    assert len(calls) == 1


def test_analyses_are_asked_once_a_call_and_again_after_a_failure(slow_worker_session, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    handle, _arm = slow_worker_session
    asked: list[int] = []

    def ask() -> int:
        asked.append(1)
        return len(asked)

    def fail() -> int:
        asked.append(1)
        raise ValueError("refused")

    assert handle.kept_answer(("kind", b"a"), ask) == 1  # outside a call: asked every time
    with handle.analyses_kept():
        assert [handle.kept_answer(("kind", b"a"), ask) for _ in range(3)] == [2, 2, 2]
        with pytest.raises(ValueError, match="refused"):
            handle.kept_answer(("kind", b"b"), fail)
        assert handle.kept_answer(("kind", b"b"), ask) == 4  # a failure is asked again
        # Callers at once wait for the one asking.
        gate = threading.Event()

        def slow() -> int:
            gate.wait(10.0)
            return ask()

        with ThreadPoolExecutor(4) as pool:
            answers = [pool.submit(handle.kept_answer, ("kind", b"c"), slow) for _ in range(4)]
            time.sleep(0.2)
            gate.set()
            assert [answer.result() for answer in answers] == [5, 5, 5, 5]
        # A frame's cost plan and files, prefetched: the server asked once for the plan.
        explains: list[str] = []
        explain = ConnectFrame._explain_string

        def counted(self, *args, **kwargs):
            explains.append(kwargs.get("mode", ""))
            return explain(self, *args, **kwargs)

        monkeypatch.setattr(ConnectFrame, "_explain_string", counted)
        frame = handle.spark.range(10).filter("id > 2")
        handle.prefetch([frame])
        assert "Statistics(sizeInBytes=" in handle.explained(frame, "cost")
        assert handle.input_files(frame) == [] and handle.explained(frame, "cost") == handle.explained(frame, "cost")
        assert explains == ["cost"]
    assert handle.kept_answer(("kind", b"a"), ask) == 6  # closed: the answers dropped


def test_a_timeout_is_a_keysplit_timeout_error(slow_worker_session):
    handle, _arm = slow_worker_session
    release = threading.Event()
    try:
        with pytest.raises(SparkTimeoutError, match="did not finish within 1 s; interrupted") as caught:
            handle.call("stuck", lambda: release.wait(30.0), timeout=1.0)
    finally:
        release.set()
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, keysplit.KeysplitError)


def test_error_classes():
    assert issubclass(SparkConnectError, keysplit.KeysplitError) and issubclass(SparkConnectError, RuntimeError)
    assert issubclass(PythonWorkerTimeoutError, SparkConnectError)
    assert issubclass(SparkTimeoutError, keysplit.KeysplitError) and issubclass(SparkTimeoutError, TimeoutError)


def test_a_malformed_url_is_a_config_error(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("started a process")

    monkeypatch.setattr("subprocess.Popen", refuse)
    for url in ("http://example.invalid/;token=s3cr3t", "sc://", "127.0.0.1:15002"):
        with pytest.raises(keysplit.ConfigError, match="sc://host:port") as caught:
            session(url)
        assert isinstance(caught.value, ValueError) and "s3cr3t" not in str(caught.value)
    with pytest.raises(keysplit.ConfigTypeError, match="url must be a str or None, got int") as wrong:
        session(15002)
    assert isinstance(wrong.value, TypeError)


def test_an_exit_is_described_with_the_errors_of_its_log(tmp_path):
    log = tmp_path / "worker.log"
    log.write_text(
        "26/11/26 14:36:40 INFO Worker: Started daemon with process name: 123@host\n"
        "26/11/26 14:36:41 WARN Utils: Your hostname resolves to a loopback address\n"
        "26/11/26 14:36:42 ERROR Worker: Failed to bind to 127.0.0.1:7078 (token=s3cr3t)\n"
        "java.net.BindException: Address already in use\n"
        "\tat java.base/sun.nio.ch.Net.bind0(Native Method)\n"
        "\tat java.base/sun.nio.ch.Net.bind(Net.java:555)\n"
        "\t... 12 more\n"
        "Caused by: io.netty.channel.unix.Errors$NativeIoException: bind(..) failed: Address already in use\n"
        "26/11/26 14:36:42 INFO ShutdownHookManager: Shutdown hook called\n"
    )
    assert log_errors(log).splitlines() == [
        "26/11/26 14:36:42 ERROR Worker: Failed to bind to 127.0.0.1:7078 (token=***)",
        "java.net.BindException: Address already in use",
        "Caused by: io.netty.channel.unix.Errors$NativeIoException: bind(..) failed: Address already in use",
    ]
    assert describe_exit("worker 0", 7, 1, log) == (
        f"worker 0 (pid 7) exited with code 1; the last errors in its log ({log}):\n{log_errors(log)}"
    )

    quiet = tmp_path / "quiet.log"
    quiet.write_text("26/11/26 14:36:40 INFO Master: Starting Spark master\n")
    assert describe_exit("master", 8, -9, quiet) == (
        f"master (pid 8) exited: killed by SIGKILL, with no error in its log; the end of it ({quiet}):\n"
        "26/11/26 14:36:40 INFO Master: Starting Spark master"
    )
    assert log_errors(tmp_path / "missing.log") == ""
    assert exit_description(143) == "exited with code 143 (SIGTERM)"
    assert exit_description(0) == "exited with code 0"
    assert exit_description(255) == "exited with code 255"
    assert exit_description(-200) == "exited: killed by signal 200"
