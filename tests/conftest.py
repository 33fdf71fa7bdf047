from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Every JVM the tests start (Spark Connect servers, standalone masters and workers, their
# executors) inherits these through the java launcher; both cut CPU, which is what the
# suite is short of (three test processes share two cores). The client compiler only: the
# tests' queries are small and their JVMs short-lived, and the server compiler's threads
# took 35-50 % of a test JVM's CPU (top -H) without paying it back (a module's CPU -17 to
# -18 %: tests/test_spark.py, tests/test_spark_ingest.py's ten million rows). The serial
# collector, which the JVM would pick itself on one core: G1's concurrent and parallel
# threads cost more CPU than they save on heaps this size (test_spark_join.py's join types,
# 109-116 -> 91 CPU seconds, two runs each). Out-of-memory tests still run out of memory.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def spark():
    """One real embedded Spark Connect server for the whole test session (keysplit.spark)."""
    from keysplit.spark import session

    # Local destinations for copyFromLocalToFs (a static setting), so that the upload
    # ingestion path can be tested on this server.
    with session(
        query_timeout=180.0, ui=True, **{"spark.sql.artifact.copyFromLocalToFs.allowDestLocal": "true"}
    ) as handle:
        yield handle
    # Closing left no process of the server's group behind.
    assert live_group_members(handle.server.pid) == []


def live_group_members(pgid: int, *, within: float = 20.0) -> list[str]:
    """The processes of group ``pgid`` still running after ``within`` seconds (zombies,
    already dead and only waiting for their parent to reap them, do not count)."""
    deadline = time.monotonic() + within
    while True:
        live = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
            state, _ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
            if int(pgrp) == pgid and state != "Z":
                live.append(text[: text.rindex(")") + 1])
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)
