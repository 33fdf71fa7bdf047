"""Spark Connect sessions: an embedded local server by default, or a remote cluster.

The embedded server is Spark's own ``SparkConnectServer``, started with ``spark-submit``
from the installed ``pyspark`` package (which bundles the server jar) in a process group
of its own, so that closing the session, or the interpreter exiting, stops every process
it started. With ``master="cluster:N"`` the server drives a Spark standalone cluster of N
workers on loopback (:mod:`keysplit.spark.cluster`), started and stopped with it. Every
wait is bounded: a missing Java, a taken port or an unreachable server fails within
seconds with a :class:`SparkConnectError`, and a query that outlives its timeout is
interrupted on the server. An error names its cause: which process died and why, an
unreachable server, or a Python worker that a busy server started too late (an action
:meth:`Session.call` retries). What the server shares with the cluster (Java, Spark, ports,
logs, process groups) is in :mod:`keysplit.spark.processes`.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit

from keysplit._errors import ConfigError, ConfigTypeError, KeyInputError, KeysplitError, KeyTypeError
from keysplit.spark.cluster import StandaloneCluster, cluster_workers
from keysplit.spark.processes import (
    DEFAULT_STARTUP_TIMEOUT,
    STOP_TIMEOUT,
    SparkConnectError,
    check_port_free,
    describe_exit,
    find_java,
    free_port,
    java_options,
    log_tail,
    port_open,
    redact,
    spark_environment,
    spark_home,
    stop_group,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from pyspark.sql import SparkSession

T = TypeVar("T")

#: Seconds a query may run unless the caller says otherwise.
DEFAULT_QUERY_TIMEOUT = 900.0
_CONNECT_TIMEOUT = 5.0
_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class EmbeddedServer:
    """A local Spark Connect server in its own process group, bound to 127.0.0.1."""

    def __init__(
        self,
        *,
        port: int | None = None,
        master: str = "local[2]",
        driver_memory: str = "2g",
        ui: bool = False,
        conf: dict[str, str] | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    ) -> None:
        java = find_java()
        home = spark_home()
        if port is None:
            port = free_port()
        else:
            check_port_free(port)
        self.port = port
        self.ui_port: int | None = free_port() if ui else None
        self._dir = Path(tempfile.mkdtemp(prefix="keysplit-spark-"))
        self.log_path = self._dir / "server.log"
        settings = {
            "spark.ui.enabled": "true" if ui else "false",
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": "8",
            "spark.local.dir": str(self._dir / "local"),
            "spark.pyspark.python": sys.executable,
        }
        if ui:
            settings["spark.ui.port"] = str(self.ui_port)
        settings.update(conf or {})
        # The JVM's temporary files (session artifacts, each fetched copy of an added file or
        # archive: hundreds of MB once keysplit is shipped) go in the server's directory, which
        # stop() removes, even after a kill that left Spark's shutdown hooks no time.
        temporary = self._dir / "tmp"
        temporary.mkdir()
        settings["spark.driver.extraJavaOptions"] = java_options(
            f"-Djava.io.tmpdir={temporary}", settings.get("spark.driver.extraJavaOptions")
        )
        command = [
            str(home / "bin" / "spark-submit"),
            "--class",
            _SERVER_CLASS,
            "--name",
            "keysplit Spark Connect server",
            "--master",
            master,
            "--driver-memory",
            driver_memory,
        ]
        for name, value in settings.items():
            command += ["--conf", f"{name}={value}"]
        command.append("spark-internal")
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=spark_environment(home, java, self._dir),
                start_new_session=True,
            )
        self.pid = self._process.pid
        _live_servers.add(self)
        try:
            self._await_port(startup_timeout)
        except BaseException:
            self.stop()
            raise

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the server's log, tokens redacted."""
        return log_tail(self.log_path, lines)

    def _await_port(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise SparkConnectError(
                    f"the embedded Spark Connect server exited with code {code} while starting; "
                    f"the end of its log ({self.log_path}):\n{self.log_tail()}"
                )
            if "Address already in use" in self.log_tail(40):
                raise SparkConnectError(f"port 127.0.0.1:{self.port} is taken")
            if port_open("127.0.0.1", self.port, 0.5):
                return
            time.sleep(0.25)
        raise SparkConnectError(
            f"the embedded Spark Connect server did not open 127.0.0.1:{self.port} within "
            f"{timeout:.0f} s; the end of its log:\n{self.log_tail()}"
        )

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The server's exit code, or None while it runs."""
        return self._process.poll()

    def exit_report(self) -> str | None:
        """None while the server runs; else how it exited (exit code or signal) and why: the
        error lines of its log, or the end of it."""
        code = self._process.poll()
        if code is None:
            return None
        return describe_exit("the embedded Spark Connect server", self.pid, code, self.log_path)

    def kill(self) -> None:
        """Kills the server's whole process group at once (SIGKILL), as a crash would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self._process.wait(timeout=STOP_TIMEOUT)

    def stop(self) -> None:
        """Stops the server and every process it started; idempotent."""
        stop_group(self.pid, [self._process])
        _live_servers.discard(self)
        shutil.rmtree(self._dir, ignore_errors=True)


_live_servers: weakref.WeakSet[EmbeddedServer] = weakref.WeakSet()


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_live_servers):
        server.stop()


def _short_retries(spark: SparkSession) -> None:
    """Gives up on an unreachable server after a few seconds instead of ten minutes."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies(
        [DefaultPolicy(max_retries=4, initial_backoff=100, max_backoff=1000, backoff_multiplier=2.0)]
    )


class SparkTimeoutError(KeysplitError, TimeoutError):
    """A Spark action outlived its timeout; the session's queries were interrupted."""


class PythonWorkerTimeoutError(SparkConnectError):
    """A Spark action failed, after its retries, because the server's Python worker did not
    connect back in time: the machine was too busy for it to start."""


#: What :func:`failure_cause` finds: a Spark Connect server that cannot be reached, or a
#: Python worker of the server that did not start in time.
FailureCause = Literal["unreachable", "python-worker"]

# Spark's PythonWorkerFactory: a new worker (SparkException, after a fixed 10 s), or one
# forked by the worker daemon (SocketTimeoutException, after a fixed 60 s), did not connect
# back to the JVM that started it.
_PYTHON_WORKER_MARKERS = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)
# gRPC's words for a channel with no server behind it, in errors that carry no status code:
# the status itself, the connection attempt, and PySpark's retries giving up on them.
_UNREACHABLE_MARKERS = (
    "StatusCode.UNAVAILABLE",
    "failed to connect to all addresses",
    "RETRIES_EXCEEDED",
    "RetriesExceeded",
)


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from or during, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _grpc_status(error: BaseException) -> str | None:
    """The name of the gRPC status code ``error`` carries (a ``grpc.RpcError``, or PySpark's
    ``SparkConnectGrpcException``), or None."""
    for getter in ("getGrpcStatusCode", "code"):
        method = getattr(error, getter, None)
        if callable(method):
            try:
                code = method()
            except Exception:  # noqa: BLE001 - a ``code`` of another kind of error
                continue
            name = getattr(code, "name", None)
            if isinstance(name, str):
                return name
    return None


def failure_cause(error: BaseException) -> FailureCause | None:
    """Why a Spark action failed with ``error``, when it is not the query's own fault:

    - ``"python-worker"``: the server's Python worker did not connect back in time (Spark's
      "Python worker failed to connect back."), which a busy but healthy server raises;
    - ``"unreachable"``: no Spark Connect server answers: gRPC status ``UNAVAILABLE``
      (connection refused, no address reachable, socket closed), a refused or reset
      connection, or PySpark's retries exceeded;
    - None for any other error (the server answered, e.g. with a failed query).

    ``error``'s causes count too. A gRPC status other than ``UNAVAILABLE`` means the server
    answered: the text of its message (which may quote a job's "Connection refused") then
    does not make the server unreachable.
    """
    chain = _causes(error)
    text = "\n".join(f"{type(each).__name__} {each}" for each in chain)
    if any(marker in text for marker in _PYTHON_WORKER_MARKERS):
        return "python-worker"
    statuses = [status for status in map(_grpc_status, chain) if status is not None]
    if statuses:
        return "unreachable" if "UNAVAILABLE" in statuses else None
    if any(isinstance(each, ConnectionRefusedError | ConnectionResetError) for each in chain):
        return "unreachable"
    if any(marker in text for marker in _UNREACHABLE_MARKERS):
        return "unreachable"
    return None


#: The keysplit errors a Python task may raise on purpose (the routing's refusals).
_TASK_ERRORS: dict[str, type[KeysplitError]] = {
    kind.__name__: kind for kind in (KeyInputError, KeyTypeError, ConfigError, ConfigTypeError)
}
_TASK_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(" + "|".join(_TASK_ERRORS) + r"): (.+)$")


_BUILTIN_ERROR_LINE = re.compile(r"^(\w+): (.*)$")


def raised_in_a_task(error: BaseException) -> Exception | None:
    """The error a Python task raised, which Spark reports as a ``PythonException`` with the
    task's traceback: a keysplit error as its own class; a built-in exception (a user
    function's ``ValueError``, ``KeyError``, ...) as its own type, its message first; None
    for any other (a user's own exception class stays Spark's ``PythonException``)."""
    if type(error).__name__ != "PythonException":
        return None
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in reversed(lines):
        match = _TASK_ERROR_LINE.match(line)
        if match is not None:
            return _TASK_ERRORS[match.group(1)](f"{match.group(2)} (raised in a Spark task)")
    for line in reversed(lines):
        match = _BUILTIN_ERROR_LINE.match(line)
        kind = getattr(builtins, match.group(1), None) if match is not None else None
        if match is not None and isinstance(kind, type) and issubclass(kind, Exception):
            with contextlib.suppress(Exception):
                return kind(f"{match.group(2)} (raised in a Spark task; Spark's error is its __cause__)")
            return None
    return None


def _quietly(work: Callable[[], Any]) -> Callable[[], None]:
    """``work`` with any error it raises dropped (a prefetch's: asked again in the caller)."""

    def run() -> None:
        with contextlib.suppress(BaseException):
            work()

    return run


def _first_line(error: BaseException) -> str:
    text = redact(str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


#: Each live :class:`Session` by its PySpark session's ``id``: a verb given a DataFrame of a
#: session opened here finds it (its timeout, its server, what it has read of the server).
OPENED: weakref.WeakValueDictionary[int, Session] = weakref.WeakValueDictionary()


class Session:
    """A Spark Connect session and, when it started them, the embedded server behind it and
    the standalone cluster the server drives.

    Use it as a context manager or call :meth:`close`; the interpreter exiting stops the
    embedded server and the cluster too. ``spark`` is the PySpark ``SparkSession``.
    """

    #: Seconds :meth:`call` waits before each retry of an action that failed because the
    #: server's Python worker did not connect back in time: one retry per entry.
    python_worker_backoffs: tuple[float, ...] = (2.0, 5.0)

    def __init__(
        self,
        spark: SparkSession,
        *,
        url: str,
        server: EmbeddedServer | None,
        query_timeout: float,
        cluster: StandaloneCluster | None = None,
    ) -> None:
        self.spark = spark
        self.url = redact(url)
        self.server = server
        self.cluster = cluster
        self.query_timeout = query_timeout
        self._closed = False
        OPENED[id(spark)] = self
        #: While :meth:`analyses_kept` is open: each analysis call's answer (a plan's
        #: ``explain`` text by mode, its input files), by kind and plan, once asked.
        self._analyses: dict[tuple[str, bytes], Future[Any]] | None = None
        self._analyses_lock = threading.Lock()
        #: Called with each action's name as :meth:`call` starts it (progress displays).
        self.observers: list[Callable[[str], None]] = []

    @contextlib.contextmanager
    def observed(self, observer: Callable[[str], None]) -> Iterator[None]:
        """Tells ``observer`` the name of every action :meth:`call` starts, while open."""
        self.observers.append(observer)
        try:
            yield
        finally:
            self.observers.remove(observer)

    def call(self, what: str, action: Callable[[], T], *, timeout: float | None = None) -> T:
        """Runs one Spark action, bounded by ``timeout`` seconds (the session's by default).

        On timeout the session's queries are interrupted and a :class:`SparkTimeoutError`
        (a ``TimeoutError``) is raised; when the embedded server or a process of the
        standalone cluster has died, or the server is unreachable, a
        :class:`SparkConnectError` says so. When the action fails because the server's
        Python worker did not connect back in time (a busy machine), it runs again after
        each of :attr:`python_worker_backoffs` seconds while the timeout allows, then
        raises :class:`PythonWorkerTimeoutError`. Tokens never appear in the message.
        """
        limit = self.query_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        for observe in self.observers:
            observe(what)
        backoffs = list(self.python_worker_backoffs)
        attempts = 1
        while True:
            finished, outcome = self._attempt(what, action, max(0.0, deadline - time.monotonic()))
            if finished:
                return outcome
            self._raise_if_server_died(what)
            if outcome is None:
                raise SparkTimeoutError(f"Spark {what} did not finish within {limit:.0f} s; interrupted")
            error: BaseException = outcome
            cause = failure_cause(error)
            if cause == "python-worker":
                if backoffs and deadline - time.monotonic() > backoffs[0]:
                    time.sleep(backoffs.pop(0))
                    attempts += 1
                    continue
                tries = "once" if attempts == 1 else f"{attempts} times"
                raise PythonWorkerTimeoutError(
                    f"Spark {what} failed {tries}: the Python worker of the Spark Connect server at "
                    f"{self.url} did not start in time, as happens on a busy machine (Spark waits a "
                    "fixed 10 s for a new Python worker to connect back, 60 s for one forked by its "
                    "daemon; Spark 4.3 has no setting for either). Run it again when the machine is less "
                    "loaded, or load it less: fewer Spark sessions, standalone workers (cluster:N) or "
                    "other jobs at once; and keep spark.python.use.daemon and "
                    f"spark.python.worker.reuse on (their defaults). ({_first_line(error)})"
                ) from None
            if cause == "unreachable":
                raise SparkConnectError(
                    f"Spark {what} failed: the Spark Connect server at {self.url} is unreachable ({_first_line(error)})"
                ) from None
            raised = raised_in_a_task(error)
            if raised is not None:
                raise raised from error
            raise error

    @functools.cached_property
    def task_slots(self) -> int:
        """The tasks the server's executors run at once, as Spark's default parallelism says
        (the splits it gives a ``range``, read from its plan: no job runs); 1 where the plan
        does not say."""
        found = re.search(r"splits=(?:Some\()?(\d+)", self.explained(self.spark.range(1)))
        return max(1, int(found.group(1))) if found else 1

    def explained(self, frame: Any, mode: str = "simple", *, timeout: float | None = None) -> str:
        """Spark's ``explain`` text of ``frame`` in ``mode`` (``simple``: the physical plan;
        ``cost``: with the optimiser's statistics). An analysis call: no job runs; while
        :meth:`analyses_kept` is open, one per plan and mode."""
        return self._analysed(
            f"explain {mode}",
            frame,
            lambda: str(self.call("reading the plan", lambda: frame._explain_string(mode=mode), timeout=timeout)),
        )

    def input_files(self, frame: Any) -> list[str]:
        """The files ``frame`` reads (Spark's ``inputFiles``), sorted. An analysis call: no job
        runs; while :meth:`analyses_kept` is open, one per plan."""
        return self._analysed(
            "input files", frame, lambda: sorted(self.call("listing the input files", frame.inputFiles))
        )

    def prefetch(self, frames: Iterable[Any], *, files: bool = True) -> None:
        """Starts, in threads of their own, the analysis calls a statistics pass over
        ``frames`` asks for (each one's ``cost`` plan and, with ``files``, its input files),
        while :meth:`analyses_kept` is open: the pass then waits for the slowest of them at
        most, not for each in turn (a round trip of 10-50 ms each). A call that fails here
        fails a caller already waiting for it as it would have failed there, and is asked
        again by the next."""
        if self._analyses is None:
            return
        for frame in frames:
            works: list[Callable[[], Any]] = [functools.partial(self.explained, frame, "cost")]
            if files:
                works.append(functools.partial(self.input_files, frame))
            for work in works:
                threading.Thread(target=_quietly(work), name="keysplit-spark prefetch", daemon=True).start()

    def _analysed(self, kind: str, frame: Any, ask: Callable[[], T]) -> T:
        """``ask()``, or while :meth:`analyses_kept` is open, its answer for ``frame``'s plan
        and ``kind`` when asked before."""
        plan = getattr(frame, "_plan", None)
        if self._analyses is None or plan is None:
            return ask()
        return self.kept_answer((kind, plan.to_proto(frame._session.client).SerializeToString()), ask)

    def kept_answer(self, key: tuple[str, bytes], ask: Callable[[], T]) -> T:
        """``ask()``, or while :meth:`analyses_kept` is open, its answer under ``key`` when
        asked before (waiting for it where it is being asked)."""
        kept = self._analyses
        if kept is None:
            return ask()
        with self._analyses_lock:
            answer = kept.get(key)
            asking = answer is None
            if answer is None:
                answer = kept[key] = Future()
        if asking:
            try:
                answer.set_result(ask())
            except BaseException as error:
                # Asked again by the next caller (a timeout or an interrupt is not the plan's).
                with self._analyses_lock:
                    kept.pop(key, None)
                answer.set_exception(error)
                raise
        return answer.result()

    @contextlib.contextmanager
    def analyses_kept(self) -> Iterator[None]:
        """While open, :meth:`explained`, :meth:`input_files` and :meth:`kept_answer` ask the
        server once per plan (and mode): one planning pass (``optimize``'s) reads an input's
        statistics, and the session's settings, for several decisions. Closed, the answers
        are dropped: a plan over files may be planned otherwise once they change."""
        outer = self._analyses
        if outer is None:
            self._analyses = {}
        try:
            yield
        finally:
            if outer is None:
                self._analyses = None

    def gathered(self, what: str, *actions: Callable[[], Any], check: Callable[[], None] | None = None) -> list[Any]:
        """Each of ``actions`` (analysis calls, each a round trip to the server; no job runs)
        at once, their results in order: the wait of the slowest, not of them all. The first
        failure in that order is raised; where it is Spark's ``AnalysisException``, ``check``
        runs first, so that a verb's own error, which names the fix, comes before Spark's."""
        from pyspark.errors import AnalysisException

        def run() -> list[Any]:
            with ThreadPoolExecutor(max_workers=len(actions)) as pool:
                return list(pool.map(lambda action: action(), actions))

        try:
            return self.call(what, run) if len(actions) > 1 else [self.call(what, actions[0])]
        except AnalysisException:
            if check is not None:
                check()
            raise

    def _attempt(self, what: str, action: Callable[[], Any], limit: float) -> tuple[bool, Any]:
        """Runs ``action`` once in a thread of its own, for at most ``limit`` seconds:
        ``(True, its result)``, ``(False, the exception it raised)``, or ``(False, None)``
        when it timed out and the session's queries were interrupted."""
        outcome: list[Any] = []
        failure: list[BaseException] = []

        from pyspark.sql.connect.session import SparkSession as ConnectSession

        def work() -> None:
            # PySpark binds the DataFrames that commands return (localCheckpoint) to the
            # thread's active session: with several sessions in a process, it must be ours.
            if isinstance(self.spark, ConnectSession):
                type(self.spark)._active_session.session = self.spark
            try:
                outcome.append(action())
            except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
                failure.append(error)

        worker = threading.Thread(target=work, name=f"keysplit-spark {what}", daemon=True)
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            with contextlib.suppress(Exception):
                self.spark.interruptAll()
            worker.join(5.0)
            return False, None
        if failure:
            return False, failure[0]
        return True, outcome[0]

    def _raise_if_server_died(self, what: str) -> None:
        if self.server is not None and (report := self.server.exit_report()) is not None:
            raise SparkConnectError(f"Spark {what} failed: {report}") from None
        if self.cluster is not None and (report := self.cluster.exit_report()) is not None:
            raise SparkConnectError(
                f"Spark {what} failed on the standalone cluster at {self.cluster.master_url}: {report}"
            ) from None

    def close(self) -> None:
        """Ends the Spark session, stops the embedded server, then the cluster; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.server is None or self.server.running:
            stopper = threading.Thread(target=self._stop_spark, daemon=True)
            stopper.start()
            stopper.join(10.0)
        if self.server is not None:
            self.server.stop()
        if self.cluster is not None:
            self.cluster.stop()

    def _stop_spark(self) -> None:
        with contextlib.suppress(Exception):
            self.spark.stop()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"embedded, pid {self.server.pid}" if self.server is not None else "remote"
        if self.cluster is not None:
            where += f", standalone cluster of {self.cluster.workers} at {self.cluster.master_url}"
        return f"Session({self.url!r}, {where})"


def _connect(url: str, *, query_timeout: float, handshake_timeout: float) -> SparkSession:
    from pyspark.sql import SparkSession as SessionBuilder

    parts = urlsplit(url.split(";", 1)[0])
    if parts.scheme != "sc" or not parts.hostname:
        raise ConfigError(f"a Spark Connect URL looks like sc://host:port/;token=...; got {redact(url)!r}")
    port = parts.port or 15002
    # Reachability first, so that a wrong host or port fails in seconds, not after retries.
    if not port_open(parts.hostname, port, _CONNECT_TIMEOUT):
        raise SparkConnectError(
            f"the Spark Connect server at {redact(url)} is unreachable: nothing accepts "
            f"connections on {parts.hostname}:{port}"
        )
    message = None
    try:
        spark = SessionBuilder.builder.remote(url).create()
    except Exception as error:  # noqa: BLE001 - reported without the token
        message = redact(f"{type(error).__name__}: {error}")
    if message is not None:
        raise SparkConnectError(f"could not open a Spark Connect session at {redact(url)}: {message}")
    _short_retries(spark)
    probe = Session(spark, url=url, server=None, query_timeout=query_timeout)
    try:
        _handshake(probe, url, handshake_timeout)
    except BaseException:
        _discard(spark)
        raise
    return spark


def _discard(spark: SparkSession) -> None:
    """Closes a session whose server never answered, and takes it out of PySpark's default
    and active sessions, which would otherwise serve later PySpark calls. Nothing is
    released on the server (that call would wait on it too)."""
    spark.release_session_on_close = False  # type: ignore[attr-defined]
    with contextlib.suppress(Exception):
        spark.stop()


def _handshake(probe: Session, url: str, timeout: float) -> None:
    """A first query, whose failure says what did not answer."""
    try:
        probe.call("handshake", lambda: probe.spark.range(1).collect(), timeout=timeout)
    except SparkTimeoutError:
        raise SparkConnectError(
            f"the Spark Connect server at {redact(url)} accepts connections but did not answer a first query "
            f"within {timeout:.0f} s (load average {os.getloadavg()[0]:.1f}): a busy machine may need "
            "longer, pass startup_timeout= to wait longer"
        ) from None
    except SparkConnectError:
        raise
    except Exception as error:  # noqa: BLE001 - reported without the token
        cause = redact(f"{type(error).__name__}: {error}".strip())
        raise SparkConnectError(
            f"the Spark Connect server at {redact(url)} accepts connections but a first query failed: {cause}; "
            "is it a Spark Connect server (sc://host:port), and does it run?"
        ) from None


def session(
    url: str | None = None,
    *,
    port: int | None = None,
    master: str = "local[2]",
    driver_memory: str = "2g",
    ui: bool = False,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    query_timeout: float = DEFAULT_QUERY_TIMEOUT,
    **conf: Any,
) -> Session:
    """A Spark Connect session: an embedded local server, or ``url``'s remote one.

    Without ``url`` it starts Spark's Connect server from the installed ``pyspark`` on
    127.0.0.1 (``port``, or a free one), with ``master``, a ``driver_memory`` heap (below
    2 GB the server can run out of memory and hang instead of failing) and the web UI off
    unless ``ui``; Python workers run this interpreter. With
    ``url = "sc://host:port/;token=...;use_ssl=true"`` it connects to that server instead.
    ``conf`` holds Spark settings, e.g. ``**{"spark.sql.shuffle.partitions": "16"}``: given
    to the embedded server at start, or set on the remote session.

    ``master`` is a Spark master URL such as ``"local[2]"`` (the default), or
    ``"cluster:N"`` with N from 1 to 16: a real Spark standalone cluster on 127.0.0.1, one
    master and N workers of one core each (a ``StandaloneCluster``),
    started before the server, which then runs N one-core, 1 GB executors on it
    (``conf`` may override these settings). It takes 15 to 30 s to start on a two-core
    machine; the session's ``cluster`` holds it, and closing the session stops the server,
    then the cluster, with every executor and Python worker they started.

    ``startup_timeout`` bounds each wait of the start (the server's port, its answer to a
    first query, the cluster's workers and executors); a wait that runs out raises
    :class:`SparkConnectError` with what did not answer and the load average: a busy
    machine may need a longer one.

    Raises :class:`SparkConnectError` within seconds when Java 17 is missing, the port is
    taken or the server is unreachable; the message never holds the token. A malformed
    ``url`` or ``"cluster:..."`` master raises :class:`~keysplit.ConfigError` (a
    ``ValueError``) before anything starts; a failure while starting stops whatever had
    started.
    """
    settings = {name: str(value).lower() if isinstance(value, bool) else str(value) for name, value in conf.items()}
    workers = cluster_workers(master)
    if url is None:
        cluster = None if workers is None else StandaloneCluster(workers, startup_timeout=startup_timeout)
        server = None
        try:
            if cluster is not None:
                master, settings = cluster.master_url, {**cluster.driver_conf(), **settings}
            server = EmbeddedServer(
                port=port,
                master=master,
                driver_memory=driver_memory,
                ui=ui,
                conf=settings,
                startup_timeout=startup_timeout,
            )
            local_url = f"sc://127.0.0.1:{server.port}"
            spark = _connect(local_url, query_timeout=query_timeout, handshake_timeout=startup_timeout)
            if cluster is not None:
                cluster.await_executors(startup_timeout)
        except BaseException:
            if server is not None:
                server.stop()
            if cluster is not None:
                cluster.stop()
            raise
        return Session(spark, url=local_url, server=server, query_timeout=query_timeout, cluster=cluster)
    if not isinstance(url, str):
        raise ConfigTypeError(f"url must be a str or None, got {type(url).__name__}")
    spark = _connect(url, query_timeout=query_timeout, handshake_timeout=startup_timeout)
    remote = Session(spark, url=url, server=None, query_timeout=query_timeout)
    for name, value in settings.items():
        remote.call(f"setting {name}", functools.partial(spark.conf.set, name, value), timeout=30.0)
    return remote
