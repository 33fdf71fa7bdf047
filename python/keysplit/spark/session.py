"""Spark Connect sessions: an embedded local server by default, or a remote cluster.

The embedded server is Spark's own ``SparkConnectServer``, started with ``spark-submit``
from the installed ``pyspark`` package (which bundles the server jar) in a process group
of its own, so that closing the session, or the interpreter exiting, stops every process
it started. With ``master="cluster:N"`` the server drives a Spark standalone cluster of N
workers on loopback (:mod:`keysplit.spark.cluster`), started and stopped with it. Every
wait is bounded: a missing Java, a taken port or an unreachable server fails within
seconds with a :class:`SparkConnectError`, and a query that outlives its timeout is
interrupted on the server.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from pyspark.sql import SparkSession

    from keysplit.spark.cluster import StandaloneCluster

T = TypeVar("T")

#: The Java release Spark 4 needs.
MIN_JAVA = 17
#: Seconds a query may run unless the caller says otherwise.
DEFAULT_QUERY_TIMEOUT = 900.0
#: Seconds the embedded server may take to open its port (about 6 s idle, 25 s on a busy
#: two-core machine).
DEFAULT_STARTUP_TIMEOUT = 180.0
_CONNECT_TIMEOUT = 5.0
_STOP_TIMEOUT = 15.0
_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

_SECRET = re.compile(r"(?i)(token=|authorization[\"']?\s*[:=]\s*[\"']?bearer\s+)[^;&\s\"',)]*")


class SparkConnectError(RuntimeError):
    """The Spark Connect server could not be started, reached, or kept running."""


def redact(text: str) -> str:
    """``text`` with every Spark Connect token replaced by ``***``."""
    return _SECRET.sub(r"\1***", text)


def _java_version(java: str) -> int:
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SparkConnectError(f"could not run {java} -version: {error}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if match is None:
        raise SparkConnectError(f"could not read the Java version from {java} -version")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def find_java() -> str:
    """The ``java`` to start the embedded server with (``JAVA_HOME`` first, then ``PATH``).

    Raises :class:`SparkConnectError` when there is none, or it is older than Java 17.
    """
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else None
    java = java or shutil.which("java")
    if java is None:
        raise SparkConnectError(
            f"the embedded Spark Connect server needs Java {MIN_JAVA} or newer, and there is no "
            "java on PATH or in JAVA_HOME; install openjdk-17-jre-headless (`make java`) or "
            "connect to a running server with session('sc://host:port')"
        )
    version = _java_version(java)
    if version < MIN_JAVA:
        raise SparkConnectError(
            f"the embedded Spark Connect server needs Java {MIN_JAVA} or newer; {java} is Java "
            f"{version}; set JAVA_HOME to a newer one"
        )
    return java


def _spark_home() -> Path:
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-submit").exists() or not any((home / "jars").glob("spark-connect_*.jar")):
        raise SparkConnectError(f"{home} has no spark-submit or Spark Connect server jar; install pyspark[connect]")
    return home


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise SparkConnectError(f"port 127.0.0.1:{port} is taken ({error.strerror})") from None


def _port_open(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _log_tail(path: Path, lines: int, *, stack_frames: bool = True) -> str:
    """The last ``lines`` lines of the log at ``path``, tokens redacted ("" when unreadable);
    without Java's stack frames unless ``stack_frames``, so that a long trace does not hide
    the messages before it."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = text.splitlines()
    if not stack_frames:
        kept = [line for line in kept if not re.match(r"\s+(at |\.\.\. \d+ more)", line)]
    return redact("\n".join(kept[-lines:]))


def _spark_environment(home: Path, java: str, log_dir: Path) -> dict[str, str]:
    """This process's environment for a Spark JVM of ours: this Spark, this Java, Python
    workers running this interpreter, and every address on loopback."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(home),
        JAVA_HOME=str(Path(os.path.realpath(java)).parent.parent),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(log_dir),
    )
    return env


def _stop_group(pgid: int, processes: Iterable[subprocess.Popen[bytes]]) -> None:
    """Stops process group ``pgid``: SIGTERM, a bounded wait for ``processes`` (our
    children in it), then SIGKILL for whatever is left of the group."""
    processes = list(processes)
    if any(process.poll() is None for process in processes):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_TIMEOUT
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
    # Python workers and a JVM that ignored SIGTERM share the group: none may outlive it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=_STOP_TIMEOUT)


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
        home = _spark_home()
        if port is None:
            port = _free_port()
        else:
            _check_port_free(port)
        self.port = port
        self.ui_port: int | None = _free_port() if ui else None
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
                env=_spark_environment(home, java, self._dir),
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
        return _log_tail(self.log_path, lines)

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
            if _port_open("127.0.0.1", self.port, 0.5):
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

    def kill(self) -> None:
        """Kills the server's whole process group at once (SIGKILL), as a crash would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self._process.wait(timeout=_STOP_TIMEOUT)

    def stop(self) -> None:
        """Stops the server and every process it started; idempotent."""
        _stop_group(self.pid, [self._process])
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


class Session:
    """A Spark Connect session and, when it started them, the embedded server behind it and
    the standalone cluster the server drives.

    Use it as a context manager or call :meth:`close`; the interpreter exiting stops the
    embedded server and the cluster too. ``spark`` is the PySpark ``SparkSession``.
    """

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

        On timeout the session's queries are interrupted and a ``TimeoutError`` is raised;
        when the embedded server has died, or the server is unreachable, a
        :class:`SparkConnectError` says so. Tokens never appear in the message.
        """
        limit = self.query_timeout if timeout is None else timeout
        for observe in self.observers:
            observe(what)
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
            self._raise_if_server_died(what)
            raise TimeoutError(f"Spark {what} did not finish within {limit:.0f} s; interrupted")
        if failure:
            self._raise_if_server_died(what)
            error = failure[0]
            if _is_connection_error(error):
                message = redact(str(error)).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise SparkConnectError(
                    f"Spark {what} failed: the Spark Connect server at {self.url} is unreachable ({message})"
                ) from None
            raise error
        return outcome[0]

    def _raise_if_server_died(self, what: str) -> None:
        if self.server is not None and not self.server.running:
            raise SparkConnectError(
                f"Spark {what} failed: the embedded Spark Connect server (pid {self.server.pid}) "
                f"exited with code {self.server.exit_code}"
            ) from None
        if self.cluster is not None and not self.cluster.running:
            raise SparkConnectError(
                f"Spark {what} failed: a process of the standalone cluster at "
                f"{self.cluster.master_url} exited; the end of its logs:\n{self.cluster.log_tail()}"
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


def _is_connection_error(error: BaseException) -> bool:
    text = f"{type(error).__name__} {error}"
    return any(
        marker in text
        for marker in (
            "UNAVAILABLE",
            "failed to connect",
            "Connection refused",
            "Socket closed",
            "RetriesExceeded",
            "DEADLINE_EXCEEDED",
        )
    )


def _connect(url: str, *, query_timeout: float) -> SparkSession:
    from pyspark.sql import SparkSession as SessionBuilder

    parts = urlsplit(url.split(";", 1)[0])
    if parts.scheme != "sc" or not parts.hostname:
        raise ValueError(f"a Spark Connect URL looks like sc://host:port/;token=...; got {redact(url)!r}")
    port = parts.port or 15002
    # Reachability first, so that a wrong host or port fails in seconds, not after retries.
    if not _port_open(parts.hostname, port, _CONNECT_TIMEOUT):
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
    probe.call("handshake", lambda: spark.range(1).collect(), timeout=max(_CONNECT_TIMEOUT, 30.0))
    return spark


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
    master and N workers of one core each (:class:`~keysplit.spark.cluster.StandaloneCluster`),
    started before the server, which then runs N one-core, 1 GB executors on it
    (``conf`` may override these settings). It takes 15 to 30 s to start on a two-core
    machine; the session's ``cluster`` holds it, and closing the session stops the server,
    then the cluster, with every executor and Python worker they started.

    Raises :class:`SparkConnectError` within seconds when Java 17 is missing, the port is
    taken or the server is unreachable; the message never holds the token. A malformed
    ``"cluster:..."`` raises ``ValueError`` before anything starts; a failure while starting
    stops whatever had started.
    """
    from keysplit.spark.cluster import StandaloneCluster, cluster_workers

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
            spark = _connect(local_url, query_timeout=query_timeout)
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
        raise TypeError(f"url must be a str or None, got {type(url).__name__}")
    spark = _connect(url, query_timeout=query_timeout)
    remote = Session(spark, url=url, server=None, query_timeout=query_timeout)
    for name, value in settings.items():
        remote.call(f"setting {name}", functools.partial(spark.conf.set, name, value), timeout=30.0)
    return remote


def as_session(given: Session | SparkSession | None) -> tuple[Session, bool]:
    """``given`` as a :class:`Session`, and whether it was started here (and must be closed).

    None starts an embedded server; a PySpark ``SparkSession`` is wrapped as it is.
    """
    if given is None:
        return session(), True
    if isinstance(given, Session):
        return given, False
    if type(given).__module__.startswith("pyspark.sql"):
        return Session(given, url="(given session)", server=None, query_timeout=DEFAULT_QUERY_TIMEOUT), False
    raise TypeError(f"session must be a keysplit.spark.Session or a SparkSession, got {type(given).__name__}")
