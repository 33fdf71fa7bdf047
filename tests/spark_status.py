"""Spark's REST status API on loopback: the stages, jobs, cached blocks and executors of a
server's one application, as the tests read them."""

from __future__ import annotations

import datetime
import json
import time
import urllib.request
import uuid
from typing import Any

#: In the plan of :meth:`StatusApi.caught_up`'s marker query.
MARKER = "keysplit-status-marker"


class StatusApi:
    """The stages and executors of the one application of a keysplit session's server, from
    its web UI on loopback (the session was started with ``ui=True``)."""

    def __init__(self, session: Any) -> None:
        self.spark = session.spark
        self.base = f"http://127.0.0.1:{session.server.ui_port}/api/v1/applications"
        self.app = self._get("")[0]["id"]

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base}{path}", timeout=30) as reply:
            return json.load(reply)

    def stages(self) -> list[dict[str, Any]]:
        """Every stage attempt so far."""
        return self._get(f"/{self.app}/stages")  # type: ignore[no-any-return]

    def active_stages(self) -> list[dict[str, Any]]:
        """The stage attempts running now: a short list, where :meth:`stages` lists every
        stage of the application, a list (and a reply) that grows with each query run."""
        return self._get(f"/{self.app}/stages?status=active")  # type: ignore[no-any-return]

    def tasks(self, stage: dict[str, Any]) -> list[dict[str, Any]]:
        """The tasks of one stage attempt (an entry of :meth:`stages`), with their metrics."""
        path = f"/{self.app}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=100000"
        return self._get(path)  # type: ignore[no-any-return]

    def cached(self) -> list[dict[str, Any]]:
        """The cached RDDs (``persist``), with their partitions cached so far."""
        return self._get(f"/{self.app}/storage/rdd")  # type: ignore[no-any-return]

    def executions(self, *, offset: int = 0, plans: bool = False) -> list[dict[str, Any]]:
        """The SQL executions from the ``offset``-th on, with their final plans' text if ``plans``."""
        path = f"/{self.app}/sql?details=false&planDescription={str(plans).lower()}&offset={offset}&length=100000"
        return self._get(path)  # type: ignore[no-any-return]

    def caught_up(self, timeout: float = 120.0) -> float:
        """Returns once the API has recorded everything the server did before this call, with
        the epoch time at which the marker query (below) was started.

        The API learns of jobs, stages, tasks and SQL executions from one listener queue,
        in the order they happened; so once it lists the end of a marker query run now, it
        has applied every event before it. A wait on that event, not on time: a busy machine
        only makes it longer."""
        from pyspark.sql import functions as F

        known = len(self.executions())
        token = f"{MARKER}-{uuid.uuid4().hex}"
        marked = time.time()
        self.spark.range(1).select(F.lit(token).alias("marker")).collect()
        deadline = time.monotonic() + timeout
        while True:
            listed = self.executions(offset=known, plans=True)
            if any(token in e.get("planDescription", "") and e["status"] != "RUNNING" for e in listed):
                return marked
            if time.monotonic() > deadline:
                raise TimeoutError(f"Spark's status API did not record a query's end within {timeout:.0f} s")
            time.sleep(0.1)

    def stages_after(self, last: int) -> list[dict[str, Any]]:
        """The stage attempts after stage ``last`` that the server ran before this call, once
        recorded (:meth:`caught_up`; its marker's stages are not listed)."""
        marked = self.caught_up()
        return [
            s
            for s in self.stages()
            if s["stageId"] > last and ("submissionTime" not in s or _epoch(s["submissionTime"]) < marked)
        ]

    def last_stage(self) -> int:
        """The id of the last stage the server ran so far (-1 before any), once recorded."""
        self.caught_up()
        return max((s["stageId"] for s in self.stages()), default=-1)

    def live_executors(self) -> int:
        return len(self.executor_ids())

    def executor_ids(self) -> set[str]:
        """The ids of the live executors (a new executor gets a new id)."""
        return {e["id"] for e in self._get(f"/{self.app}/executors") if e["id"] != "driver"}

    def jobs_submitted_since(self, since: float) -> list[str]:
        """The jobs submitted at or after the epoch time ``since``, once the API has recorded
        every job so far (:meth:`caught_up`; its marker's own job is not listed). Selecting
        by submission time, not by count, keeps a job of an earlier test out."""
        marked = self.caught_up()
        floor = int(since * 1000) / 1000  # the UI keeps milliseconds
        return [
            f"{job['jobId']}: {job.get('description') or job['name']}"
            for job in self._get(f"/{self.app}/jobs")
            if "submissionTime" in job and floor <= _epoch(job["submissionTime"]) < marked
        ]


def _epoch(stamp: str) -> float:
    """A time as the status API writes it (UTC, milliseconds), in seconds since the epoch."""
    parsed = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f%Z")
    return parsed.replace(tzinfo=datetime.UTC).timestamp()
