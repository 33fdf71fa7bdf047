"""The local Spark JVMs that keysplit starts, and the error they fail with.

What the embedded Spark Connect server (:mod:`keysplit.spark.session`) and the standalone
cluster (:mod:`keysplit.spark.cluster`) share: finding Java 17 and the Spark of the
installed ``pyspark``, choosing and probing ports on loopback, the environment of a Spark
JVM, reading its log (the end of it, or the lines that say why it failed), describing how
it exited, and stopping its process group. Everything here fails with
:class:`SparkConnectError`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from keysplit._errors import KeysplitError

if TYPE_CHECKING:
    from collections.abc import Iterable

#: The Java release Spark 4 needs.
MIN_JAVA = 17
#: Seconds the embedded server may take to open its port (about 6 s idle, 25 s on a busy
#: two-core machine), and a standalone cluster to register its workers.
DEFAULT_STARTUP_TIMEOUT = 180.0
#: Seconds a process group is given to exit after SIGTERM, and after SIGKILL.
STOP_TIMEOUT = 15.0

_SECRET = re.compile(r"(?i)(token=|authorization[\"']?\s*[:=]\s*[\"']?bearer\s+)[^;&\s\"',)]*")
# A Java stack frame ("\tat org.x.Y.z(Y.java:1)", "\t... 12 more").
_STACK_FRAME = re.compile(r"\s+(at |\.\.\. \d+ more)")
# A line of a Spark JVM's log that says why it failed: a log4j ERROR or FATAL record, an
# uncaught exception, or the cause of one.
_ERROR_LINE = re.compile(
    r"\b(ERROR|FATAL)\b|^Exception in thread |^Caused by: |^[\w.$]+(Exception|Error)(: |$)|OutOfMemoryError"
)


class SparkConnectError(KeysplitError, RuntimeError):
    """The Spark Connect server, or the standalone cluster it drives, could not be started,
    reached, or kept running; the message says which process and why."""


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
    """The ``java`` to start Spark's JVMs with (``JAVA_HOME`` first, then ``PATH``).

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


def spark_home() -> Path:
    """The Spark of the installed ``pyspark`` package: its ``bin/spark-submit``,
    ``bin/spark-class`` and jars, the Spark Connect server's among them.

    Raises :class:`SparkConnectError` when the package lacks them.
    """
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-submit").exists() or not any((home / "jars").glob("spark-connect_*.jar")):
        raise SparkConnectError(f"{home} has no spark-submit or Spark Connect server jar; install pyspark[connect]")
    return home


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (the system's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def check_port_free(port: int) -> None:
    """Raises :class:`SparkConnectError` when 127.0.0.1:``port`` cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise SparkConnectError(f"port 127.0.0.1:{port} is taken ({error.strerror})") from None


def port_open(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` accepts a TCP connection within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _log_lines(path: Path, *, stack_frames: bool) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    kept = text.splitlines()
    if not stack_frames:
        kept = [line for line in kept if not _STACK_FRAME.match(line)]
    return kept


def log_tail(path: Path, lines: int, *, stack_frames: bool = True) -> str:
    """The last ``lines`` lines of the log at ``path``, tokens redacted ("" when unreadable);
    without Java's stack frames unless ``stack_frames``, so that a long trace does not hide
    the messages before it."""
    return redact("\n".join(_log_lines(path, stack_frames=stack_frames)[-lines:]))


def log_errors(path: Path, lines: int = 10) -> str:
    """The last ``lines`` lines of the Spark log at ``path`` that say why its JVM failed:
    ERROR and FATAL records, uncaught exceptions and their causes, without stack frames;
    tokens redacted, "" when there are none or the log is unreadable."""
    found = [line for line in _log_lines(path, stack_frames=False) if _ERROR_LINE.search(line)]
    return redact("\n".join(found[-lines:]))


def exit_description(code: int) -> str:
    """How a process with return code ``code`` (:attr:`subprocess.Popen.returncode`) ended:
    ``"exited with code 1"``, ``"exited: killed by SIGKILL"``, or, for a JVM that handled
    a signal and exited with 128 + its number, ``"exited with code 143 (SIGTERM)"``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"exited: killed by {signal.Signals(-code).name}"
        return f"exited: killed by signal {-code}"
    if code > 128:
        with contextlib.suppress(ValueError):
            return f"exited with code {code} ({signal.Signals(code - 128).name})"
    return f"exited with code {code}"


def describe_exit(name: str, pid: int, code: int, log: Path) -> str:
    """``name`` (pid ``pid``) exited with ``code``, and why: the error lines of its ``log``,
    or, when it has none, the end of the log."""
    ended = f"{name} (pid {pid}) {exit_description(code)}"
    errors = log_errors(log)
    if errors:
        return f"{ended}; the last errors in its log ({log}):\n{errors}"
    return f"{ended}, with no error in its log; the end of it ({log}):\n{log_tail(log, 15, stack_frames=False)}"


def spark_environment(home: Path, java: str, log_dir: Path) -> dict[str, str]:
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


def java_options(ours: str, theirs: str | None) -> str:
    """A JVM options setting with ``ours`` first, so that the caller's own ``theirs``
    (a later ``-D`` of the same property wins) still decide."""
    return f"{ours} {theirs}" if theirs else ours


def stop_group(pgid: int, processes: Iterable[subprocess.Popen[bytes]]) -> None:
    """Stops process group ``pgid``: SIGTERM, a bounded wait for ``processes`` (our
    children in it), then SIGKILL for whatever is left of the group."""
    processes = list(processes)
    if any(process.poll() is None for process in processes):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
    # Python workers and a JVM that ignored SIGTERM share the group: none may outlive it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_TIMEOUT)
