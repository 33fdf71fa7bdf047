"""A real Spark standalone cluster on loopback, for ``session(master="cluster:N")``.

One ``Master`` JVM and N one-core ``Worker`` JVMs, started with ``spark-class`` from the
installed ``pyspark`` package, all on 127.0.0.1. They, the executor JVMs the workers fork
and the executors' Python workers share one process group, so that
:meth:`StandaloneCluster.stop`, or the interpreter exiting, ends every one of them with a
single ``killpg``. Every wait is bounded and fails with a
:class:`~keysplit.spark.processes.SparkConnectError` that names what did not start and
shows the errors, or the end, of its log.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
import weakref
from pathlib import Path
from typing import Any

from keysplit._errors import ConfigError, ConfigTypeError
from keysplit.spark.processes import (
    DEFAULT_STARTUP_TIMEOUT,
    SparkConnectError,
    describe_exit,
    find_java,
    free_port,
    log_tail,
    port_open,
    spark_environment,
    spark_home,
    stop_group,
)

#: The most workers ``"cluster:N"`` starts: each is a JVM with an executor JVM of its own.
MAX_WORKERS = 16
#: Memory each worker offers its executor.
WORKER_MEMORY = "2g"
#: Heap of each executor (the worker must offer at least this much).
EXECUTOR_MEMORY = "1g"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_STATUS_TIMEOUT = 5.0
_CLUSTER_MASTER = re.compile(r"cluster:(\d+)")


def cluster_workers(master: str) -> int | None:
    """N for ``master="cluster:N"``, None for any other master (a Spark master URL).

    Raises :class:`~keysplit.ConfigError` (a ``ValueError``) for a ``"cluster..."`` master
    that is not ``"cluster:N"`` with N from 1 to :data:`MAX_WORKERS`, and
    :class:`~keysplit.ConfigTypeError` (a ``TypeError``) for a master that is not a str.
    """
    if not isinstance(master, str):
        raise ConfigTypeError(f"master must be a str such as 'local[2]' or 'cluster:2', got {type(master).__name__}")
    if not master.startswith("cluster"):
        return None
    match = _CLUSTER_MASTER.fullmatch(master)
    if match is None or not 1 <= int(match.group(1)) <= MAX_WORKERS:
        raise ConfigError(
            f"a standalone cluster master looks like 'cluster:N' with N workers from 1 to "
            f"{MAX_WORKERS}, e.g. 'cluster:2'; got {master!r}"
        )
    return int(match.group(1))


class StandaloneCluster:
    """A Spark standalone master and ``workers`` one-core workers on 127.0.0.1.

    ``master_url`` is what a driver connects to; :meth:`driver_conf` holds the settings
    that give it one one-core executor per worker. ``pid`` is the master's pid, and the id
    of the process group of every process of the cluster. ``directory`` holds the logs
    (``master.log``, ``worker-<i>/worker.log``, executors' logs under ``worker-<i>/work``)
    until :meth:`stop` removes it.
    """

    def __init__(
        self,
        workers: int,
        *,
        worker_memory: str = WORKER_MEMORY,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    ) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool):
            raise ConfigTypeError(f"a standalone cluster's workers must be an int, got {type(workers).__name__}")
        if not 1 <= workers <= MAX_WORKERS:
            raise ConfigError(f"a standalone cluster has 1 to {MAX_WORKERS} workers; got {workers}")
        java = find_java()
        home = spark_home()
        deadline = time.monotonic() + startup_timeout
        self.workers = workers
        self.port = free_port()
        self.master_ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.directory = Path(tempfile.mkdtemp(prefix="keysplit-cluster-"))
        (self.directory / "tmp").mkdir()
        self._env = spark_environment(home, java, self.directory)
        # Ports are chosen here, then bound by the JVM: if another process takes one in
        # between, the master must fail rather than silently move to the next port. The
        # REST submission server is off: nothing uses it, and with no retries a second
        # cluster's master fails to bind its fixed port 6066 and never registers a worker.
        self._env["SPARK_MASTER_OPTS"] = "-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false"
        self._spark_class = str(home / "bin" / "spark-class")
        self._workers: list[subprocess.Popen[bytes]] = []
        # setpgid may only join a group of the caller's own session: the master leads a new
        # process group (not a new session), and the workers join it. The executors they
        # fork, and the executors' Python workers, inherit it.
        self._master = self._start(
            [_MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.master_ui_port)],
            self.directory / "master.log",
            self._env,
            process_group=0,
        )
        self.pid = self._master.pid
        _live_clusters.add(self)
        try:
            self._await_master(deadline)
            for index in range(workers):
                self._workers.append(self._start_worker(index, worker_memory))
            self._await_workers(deadline, startup_timeout)
        except BaseException:
            self.stop()
            raise

    def _start(
        self, arguments: list[str], log_path: Path, env: dict[str, str], *, process_group: int
    ) -> subprocess.Popen[bytes]:
        with open(log_path, "wb") as log:
            return subprocess.Popen(
                [self._spark_class, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                process_group=process_group,
            )

    def _start_worker(self, index: int, memory: str) -> subprocess.Popen[bytes]:
        home = self._worker_dir(index)
        (home / "work").mkdir(parents=True)
        (home / "local").mkdir()
        env = dict(self._env, SPARK_WORKER_DIR=str(home / "work"), SPARK_LOCAL_DIRS=str(home / "local"))
        # Port 0 for the worker's RPC and web UI: the master's status names them, and an
        # ephemeral port cannot be taken between choosing and binding it.
        return self._start(
            [
                _WORKER_CLASS,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                "1",
                "--memory",
                memory,
                self.master_url,
            ],
            home / "worker.log",
            env,
            process_group=self.pid,
        )

    def _worker_dir(self, index: int) -> Path:
        return self.directory / f"worker-{index}"

    def _logs(self) -> list[tuple[str, subprocess.Popen[bytes], Path]]:
        logs = [("master", self._master, self.directory / "master.log")]
        for index, worker in enumerate(self._workers):
            logs.append((f"worker {index}", worker, self._worker_dir(index) / "worker.log"))
        return logs

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the master's and each worker's log, tokens redacted."""
        return "\n".join(
            f"--- {name} ({path}):\n{log_tail(path, lines, stack_frames=False)}"
            for name, _process, path in self._logs()
        )

    @property
    def worker_pids(self) -> list[int]:
        """The pid of each worker's JVM, worker 0 first."""
        return [worker.pid for worker in self._workers]

    def exit_report(self) -> str | None:
        """None while the master and every worker run; else which of them exited, how (exit
        code or signal), and why: the error lines of its log, or the end of it."""
        reports = [
            describe_exit(f"the standalone cluster's {name}", process.pid, code, path)
            for name, process, path in self._logs()
            if (code := process.poll()) is not None
        ]
        return "\n".join(reports) if reports else None

    def _raise_if_exited(self) -> None:
        report = self.exit_report()
        if report is not None:
            raise SparkConnectError(report)

    def status(self) -> dict[str, Any]:
        """The master's JSON status: its workers, running applications and cores in use.

        Raises :class:`SparkConnectError` when the master's web UI does not answer.
        """
        url = f"http://127.0.0.1:{self.master_ui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=_STATUS_TIMEOUT) as response:
                return json.load(response)
        except (OSError, ValueError) as error:  # URLError, timeouts and bad JSON
            raise SparkConnectError(f"the standalone master's status at {url} is unavailable: {error}") from None

    def _await_master(self, deadline: float) -> None:
        while not port_open("127.0.0.1", self.port, 0.5):
            self._raise_if_exited()
            if time.monotonic() > deadline:
                raise SparkConnectError(
                    f"the standalone master did not open 127.0.0.1:{self.port} in time; the end "
                    f"of its log:\n{log_tail(self.directory / 'master.log', 15, stack_frames=False)}"
                )
            time.sleep(0.25)

    def _await_workers(self, deadline: float, timeout: float) -> None:
        # The master registers workers as their JVMs come up, several seconds each on a
        # busy machine; its status, not the worker's port, says when one can take executors.
        alive = 0
        while True:
            self._raise_if_exited()
            with contextlib.suppress(SparkConnectError):  # the web UI may still be starting
                alive = sum(worker["state"] == "ALIVE" for worker in self.status()["workers"])
            if alive == self.workers:
                return
            if time.monotonic() > deadline:
                raise SparkConnectError(
                    f"{alive} of {self.workers} standalone workers registered with the master at "
                    f"{self.master_url} within {timeout:.0f} s; the end of their logs:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def await_executors(self, timeout: float) -> None:
        """Waits until one application runs on the cluster with every worker's core.

        Raises :class:`SparkConnectError` after ``timeout`` seconds, with the end of the
        executors' logs.
        """
        deadline = time.monotonic() + timeout
        cores = 0
        while True:
            self._raise_if_exited()
            with contextlib.suppress(SparkConnectError):  # an unanswered request is retried
                cores = sum(app["cores"] for app in self.status()["activeapps"] if app["state"] == "RUNNING")
            if cores == self.workers:
                return
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {path}:\n{log_tail(path, 10, stack_frames=False)}"
                    for path in sorted(self.directory.glob("worker-*/work/app-*/*/stderr"))
                )
                raise SparkConnectError(
                    f"the application on the standalone cluster at {self.master_url} got {cores} of "
                    f"{self.workers} executor cores within {timeout:.0f} s; the end of the executors' "
                    f"logs:\n{tails or '(no executor started)'}"
                )
            time.sleep(0.5)

    def driver_conf(self) -> dict[str, str]:
        """The Spark settings that make a driver on this cluster run one one-core executor
        per worker.

        PySpark's worker daemon keeps its Python workers warm between tasks (without it,
        every task starts an interpreter and imports keysplit and Polars: 1 s more per
        routing job of two tasks here). It moves itself and its workers into a process
        group of their own, which :meth:`stop` does not signal; it exits, with its workers,
        when its executor's JVM closes its stdin, which stopping the cluster does.
        """
        return {
            "spark.executor.cores": "1",
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.cores.max": str(self.workers),
            # The driver starts only once every executor has registered, so that a query
            # right after session() already runs on all of them.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
            # Executors' temporary files stay in the cluster's directory, which stop() removes.
            "spark.executor.extraJavaOptions": f"-Djava.io.tmpdir={self.directory / 'tmp'}",
        }

    @property
    def running(self) -> bool:
        """Whether the master and every worker are alive."""
        return all(process.poll() is None for _name, process, _path in self._logs())

    def stop(self) -> None:
        """Stops the master, the workers, their executors and Python workers, and removes
        :attr:`directory`; idempotent."""
        stop_group(self.pid, [self._master, *self._workers])
        _live_clusters.discard(self)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"StandaloneCluster({self.master_url!r}, workers={self.workers}, pid={self.pid}, {state})"


_live_clusters: weakref.WeakSet[StandaloneCluster] = weakref.WeakSet()


@atexit.register
def _stop_live_clusters() -> None:
    for cluster in list(_live_clusters):
        cluster.stop()
